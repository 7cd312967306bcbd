"""Reports you can send: ``run.report()``, ``nbsubagents.report(...)`` and ``%subagent_report`` after real runs
(real pi, scripted model). Self-contained HTML (no script, nothing loaded), Markdown, secrets masked."""

from __future__ import annotations

import html
import json
import re

import pytest
from IPython.core.error import UsageError
from IPython.testing import globalipapp

import nbsubagents
from nbsubagents._child.secrets import MASK, secret_values
from nbsubagents._config import agent_dir

SECRET = "sk-planted-0123456789abcdef"
PI_KEY = "pi-config-key-9f8e7d6c5b4a"


@pytest.fixture
def secrets(project, monkeypatch):
    """A key in the environment and one in pi's models.json, both planted where a run can print them."""
    monkeypatch.setenv("ACME_API_KEY", SECRET)
    agent = project.parent / "agent"
    models = json.loads((agent / "models.json").read_text())
    provider = next(iter(models["providers"].values()))
    provider["apiKey"] = PI_KEY
    (agent / "models.json").write_text(json.dumps(models))
    return project


def test_secret_values_come_from_env_names_and_pi_config(secrets):
    found = secret_values(agent=agent_dir())
    assert SECRET in found and PI_KEY in found
    assert "demo/scripted" not in found


def test_html_report_of_a_group_and_a_run_has_everything_and_masks_secrets(secrets):
    runs = nbsubagents.run_parallel([
        {"preset": "scout", "task": f"run: echo the key is {SECRET}", "name": "leaky"},
        {"preset": "scribe", "task": f"write NOTES.md: {PI_KEY} stays secret", "name": "writer"},
        {"preset": "scout", "task": "fail: 500 the provider is down", "name": "broken"},
    ], concurrency=3, show=False)
    alone = nbsubagents.run("scout", "read README.md", show=False)
    # the supervisor masked it as it wrote the run's files (issue 53); the task keeps it, for the report to mask
    assert SECRET not in runs[0].output + runs[0].transcript and MASK in runs[0].output and SECRET in runs[0].task
    path = nbsubagents.report([*runs, alone], secrets / "out" / "report.html")
    page = path.read_text()

    assert SECRET not in page and PI_KEY not in page and MASK in page
    assert page.startswith("<!DOCTYPE html>") and "<script" not in page.lower()
    assert not re.search(r"""(src|href)=["'](https?:)?//""", page) and "@import" not in page and "url(" not in page
    for run in (*runs, alone):
        usage = run.result["usage"]
        assert f'id="run-{run.id}"' in page and f'href="#run-{run.id}"' in page
        assert f"{usage['totalTokens']:,}" in page and f"${usage['cost']:.4f}" in page
        assert html.escape(run.task.replace(SECRET, MASK).replace(PI_KEY, MASK), quote=False) in page
    leaky, writer, broken = runs
    section = page[page.index(f'id="run-{leaky.id}"'):page.index(f'id="run-{writer.id}"')]
    assert "✓ leaky completed · demo/scripted · 1 tool call" in section
    assert f"echo the key is {MASK}" in section and "Command finished" in section  # the transcript's words
    # links between the runs of one call, and none to the run of another call
    assert f'href="#run-{writer.id}"' in section and f'href="#run-{broken.id}"' in section
    assert f'href="#run-{alone.id}"' not in section
    writer_section = page[page.index(f'id="run-{writer.id}"'):page.index(f'id="run-{broken.id}"')]
    assert "<li><code>NOTES.md</code></li>" in writer_section
    broken_section = page[page.index(f'id="run-{broken.id}"'):page.index(f'id="run-{alone.id}"')]
    error = broken_section[broken_section.index('<pre class="error">'):]  # pi's words: "500 the provider is down"
    assert error.startswith('<pre class="error">500') and "the provider is down" in error.split("</pre>")[0]
    assert "✗ failed" in broken_section
    assert "Started" in section and "Duration" in section


def test_markdown_report_from_a_runs_frame_and_run_report(secrets):
    run = nbsubagents.run("scout", f"say: token {SECRET}\nls src", show=False)
    path = nbsubagents.report(nbsubagents.runs(), secrets / "report.md")
    text = path.read_text()
    assert text.startswith("# Sub-agent run scout (") and SECRET not in text and MASK in text
    assert f"- **Run id:** `{run.id}`" in text and "```text\n" in text and "Listing src" in text
    assert f"{run.result['usage']['totalTokens']:,}" in text
    for runs, name in (([run.id[:-1]], "by-id.md"), (nbsubagents.runs()[["run_id"]], "by-id-frame.md")):
        by_id = nbsubagents.report(runs, secrets / name)  # run ids (a prefix too), not Runs
        assert f"- **Run id:** `{run.id}`" in by_id.read_text()
    single = run.report()
    assert single.suffix == ".html" and single.parent == secrets / ".pi" / "subagents" / "reports"
    assert SECRET not in single.read_text()
    with pytest.raises(nbsubagents.NbSubagentsError, match='report format must be "html" or "md"'):
        nbsubagents.report(run, secrets / "r.txt", format="pdf")
    with pytest.raises(nbsubagents.NbSubagentsError, match="report\\(\\) needs runs"):
        nbsubagents.report(42)


def test_subagent_report_magic_writes_the_report(secrets, capsys):
    globalipapp.start_ipython()  # once per process; later calls return None
    ip = globalipapp.get_ipython()
    ip.run_line_magic("load_ext", "nbsubagents")
    run = nbsubagents.run("scout", "ls src", show=False)
    out = secrets / "from-magic.md"
    ip.run_line_magic("subagent_report", f"{run.id[:-1]} --md -o {out}")
    assert f"Report of 1 run: {out}" in capsys.readouterr().out
    assert f"`{run.id}`" in out.read_text()
    with pytest.raises(UsageError, match="RUN_IDs or --since"):
        ip.run_line_magic("subagent_report", f"{run.id} --since 1h")
