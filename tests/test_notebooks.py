"""The example notebooks, executed headless (nbclient, widget state kept) against the scripted model.

Each test runs one notebook from ``notebooks/`` in a temp folder with a real kernel of this Python and
asserts on what it showed: run statuses, the humanized lines inside the saved panels, status tables,
DataFrames. The notebooks in the repository carry no outputs.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from conftest import processes_inside
from nbsubagents.demo import widget_text

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = REPO / "notebooks"
NAMES = ["quickstart.ipynb", "background-runs.ipynb", "exploring-runs.ipynb"]
VIEW = "application/vnd.jupyter.widget-view+json"


@pytest.fixture
def kernel_env(tmp_path, monkeypatch):
    """The kernel inherits this: temp folders the notebook makes land in tmp_path; no forced display."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    for name in ("NBSUBAGENTS_DISPLAY", "NBSUBAGENTS_ROOT", "PI_CODING_AGENT_DIR", "NBSUBAGENTS_PI"):
        monkeypatch.delenv(name, raising=False)
    yield tmp_path
    assert processes_inside(tmp_path) == [], "the notebook left processes behind"


def execute(name: str, workdir: Path) -> nbformat.NotebookNode:
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    client = NotebookClient(nb, kernel_name="python3", timeout=300, startup_timeout=120, store_widget_state=True,
                            resources={"metadata": {"path": str(workdir)}})
    try:
        client.execute()
    finally:
        nbformat.write(nb, workdir / name)  # kept for a look when a test fails
    errors = [(c.source, o) for c in nb.cells if c.cell_type == "code" for o in c.outputs
              if o.output_type == "error" or (o.output_type == "stream" and o.name == "stderr")]
    assert errors == []
    assert all(c.execution_count for c in nb.cells if c.cell_type == "code")
    return nb


def cell(nb, start: str):
    """The one code cell whose source starts with ``start``."""
    found = [c for c in nb.cells if c.cell_type == "code" and c.source.startswith(start)]
    assert len(found) == 1, f"{len(found)} cells start with {start!r}"
    return found[0]


NOTICE = re.compile(r"^[✓✗■] background run .*\n", re.M)


def text(c) -> str:
    """Everything a cell printed or returned as plain text, without the watcher's completion notices:
    they are printed from its thread, in whichever cell runs when a background run ends."""
    parts = []
    for o in c.outputs:
        if o.output_type == "stream":
            parts.append(o.text)
        elif "data" in o and VIEW not in o.data:
            parts.append(o.data.get("text/plain", ""))
        elif o.output_type == "execute_result":
            parts.append(o.data.get("text/plain", ""))
    return NOTICE.sub("", "".join(parts))


def drawn(c) -> list[str]:
    """The output types of what a cell drew (displays and its value; printed text left out)."""
    return [o.output_type for o in c.outputs if o.output_type != "stream"]


def html(c) -> str:
    return "".join(o.data.get("text/html", "") for o in c.outputs if "data" in o)


def panels(nb, c) -> list[str]:
    """The text of every panel a cell displayed, as its widgets held it when the notebook ended.

    A background run's panel is updated from the watcher's thread; nbclient records only the messages
    of the cell executing at that moment, so its saved state may lag. Its final state in a live page is
    checked by test_notebook_browser.py; here background runs are checked through what cells printed.
    """
    return [widget_text(nb, o.data[VIEW]["model_id"]) for o in c.outputs if "data" in o and VIEW in o.data]


# -- the notebooks as saved ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_saved_notebooks_have_no_outputs_and_start_with_the_offline_set_up(name):
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.outputs == [] and c.execution_count is None for c in code)
    assert "widgets" not in nb.metadata
    first = code[0].source
    for needed in ("copy_example_project(", "tempfile.mkdtemp(", "os.chdir(project)", "use_scripted_model()",
                   "%load_ext nbsubagents"):
        assert needed in first
    assert nb.metadata.kernelspec.name == "python3"
    assert sum(c.cell_type == "markdown" for c in nb.cells) >= len(code) // 2, "each step needs its prose"


# -- executed -----------------------------------------------------------------------------------------
def test_quickstart_runs_presets_one_parallel_and_background_runs_and_shows_the_registry(kernel_env):
    nb = execute("quickstart.ipynb", kernel_env)

    assert re.search(r"Working in .*/nbsubagents-quickstart-\w+/project", text(cell(nb, "import os")))
    presets = text(cell(nb, "%subagent_presets"))
    assert re.search(r"scout\s+project\s+demo/scripted\s+read, ls, bash", presets)
    assert re.search(r"scribe\s+project\s+demo/scripted", presets)

    one = cell(nb, "%%subagent scout -o first")
    assert drawn(one) == ["display_data"]  # its live panel, once: the Run is the value without a second panel
    live = panels(nb, one)[0]
    for line in ("✓ scout completed", "Reading README.md", "Finished reading README.md", "Listing src",
                 'python3 -c "print(6 * 7)"', "Command finished — 42", '- run: python3 -c "print(6 * 7)": 42'):
        assert line in live, live
    assert "status: completed" in text(cell(nb, 'print("status:", first.status)'))
    assert text(cell(nb, "reader = nbsubagents.run(")).startswith("completed - - read src/inventory.py")

    group = cell(nb, "%%subagents --concurrency 2 -o group")
    assert drawn(group) == ["display_data"]
    shown = panels(nb, group)[0]
    assert shown.startswith("Sub-agents: 3 done")
    for line in ("✓ inventory completed", "✓ writer completed", "✓ editor completed", "Writing NOTES.md (+2 lines)",
                 "Editing README.md", "Run ids:"):
        assert line in shown, shown
    listing = text(cell(nb, "for run in group:"))
    assert re.search(r"inventory\s+completed", listing) and re.search(r"editor\s+completed", listing)
    assert "Pears are out of stock.\nReorder on Monday." in listing

    background = cell(nb, "%%subagent scout --bg -o job")
    assert drawn(background) == ["display_data"]  # its live panel (its later states: see below)
    assert "scout" in panels(nb, background)[0]
    assert re.search(r"1 running · 5 completed · 0 failed · 0 aborted · 6 total\n.*\n\S+\s+scout\s+running",
                     text(cell(nb, "%subagent_status")))
    assert text(cell(nb, "job.wait()")).startswith("completed - - read src/inventory.py")

    registry = text(cell(nb, "nbsubagents.status(include_completed=True)"))
    assert registry.startswith("0 running · 6 completed · 0 failed · 0 aborted · 6 total")
    for name in ("scout", "reader", "inventory", "writer", "editor"):
        assert re.search(rf"\n\S+\s+{name}\s+completed\s+demo/scripted", registry), name
    frame = html(cell(nb, "frame = nbsubagents.status("))
    assert 'class="dataframe"' in frame and frame.count("<td>completed</td>") == 6


def test_background_runs_notebook_starts_watches_calls_on_done_and_cancels(kernel_env):
    nb = execute("background-runs.ipynb", kernel_env)

    assert re.search(r"^started \S+ - (queued|running)$", text(cell(nb, "import time")), re.M)
    assert re.search(r"1 running · 0 completed .* 1 total\n.*\n\S+\s+explorer\s+running",
                     text(cell(nb, "nbsubagents.status()")))
    waited = text(cell(nb, "job.wait()"))
    assert "completed - - ls src: inventory.py" in waited
    assert "on_done saw: [('explorer', 'completed')]" in waited
    assert "explorer" in panels(nb, cell(nb, "import time"))[0]

    slow = cell(nb, 'slow = nbsubagents.start("scout", "run: sleep 120"')
    assert text(slow).strip() == "running"
    assert re.fullmatch(r"Cancelling run \S+\n", text(cell(nb, "%subagent_cancel {slow.id}")))
    ended = text(cell(nb, "slow.wait()"))
    assert re.search(r"^slowpoke aborted - .*cancel", ended, re.M) and "notes completed" in ended
    assert "slowpoke" in panels(nb, slow)[0]

    every = text(cell(nb, "%subagent_status --all"))
    assert every.startswith("0 running · 2 completed · 0 failed · 1 aborted · 3 total")
    details = text(cell(nb, "%subagent_status {slow.id[:-2]}"))
    assert re.search(r"^  status\s+aborted$", details, re.M) and re.search(r"^  mode\s+background$", details, re.M)
    assert re.match(r"True completed \.pi/subagents/runs/\S+", text(cell(nb, "again = nbsubagents.get_run(")))


def test_exploring_runs_notebook_reads_back_output_transcript_events_and_files(kernel_env):
    nb = execute("exploring-runs.ipynb", kernel_env)

    group = panels(nb, cell(nb, "runs = nbsubagents.run_parallel("))[0]
    assert group.startswith("Sub-agents: 2 done, 1 failed")
    assert "✗ broken failed" in group and "500 the provider is down" in group

    registry = text(cell(nb, "nbsubagents.status(include_completed=True)"))
    assert registry.startswith("0 running · 2 completed · 1 failed · 0 aborted · 3 total")
    failed = html(cell(nb, "frame = nbsubagents.status("))
    assert 'class="dataframe"' in failed and "broken" in failed and "500 the provider is down" in failed
    assert "survey" not in failed

    one = text(cell(nb, "survey_id ="))
    assert re.match(r"\S+ completed\nDone\. 3 steps:\n- read README\.md: # Inventory service", one)
    assert re.search(r"^  name\s+survey$", text(cell(nb, "%subagent_status {run.id}")), re.M)
    transcript = text(cell(nb, "print(run.transcript)"))
    for line in ("Preset:  scout", "Model:   demo/scripted", "Reading README.md", "Finished reading README.md",
                 "Listing src", "wc -l src/inventory.py"):
        assert line in transcript
    events = html(cell(nb, "import pandas as pd"))
    for kind in ("run_start", "tool_call", "tool_result", "assistant_text", "usage", "run_end"):
        assert f"<td>{kind}</td>" in events, kind
    files = text(cell(nb, "import json"))
    for name in ("events.jsonl", "meta.json", "prompt.md", "result.json", "transcript.log"):
        assert f"'{name}'" in files
    assert "'tools': ['read', 'ls', 'bash']" in files and "'toolCalls': 3" in files
    prompt = text(cell(nb, "with_file = nbsubagents.get_run("))
    assert prompt.startswith("=== src/inventory.py ===\n") and "STOCK = {" in prompt
    broken = text(cell(nb, "broken = nbsubagents.get_run("))
    assert broken.startswith("failed - 500 the provider is down") and "✗" in broken
    assert 'class="dataframe"' in html(cell(nb, 'frame.sort_values("duration"'))


def test_make_demo_executes_the_quickstart_and_prints_what_it_did(kernel_env):
    """The README's main job: ``python -m nbsubagents.demo --notebook`` (what ``make demo`` runs)."""
    proc = subprocess.run([sys.executable, "-m", "nbsubagents.demo", "--notebook", str(NOTEBOOKS / "quickstart.ipynb")],
                          cwd=kernel_env, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    for line in ("✓ scout completed", "Reading README.md", "Sub-agents: 3 done", "Writing NOTES.md (+2 lines)",
                 "1 running · 5 completed", "0 running · 6 completed · 0 failed · 0 aborted · 6 total"):
        assert line in out, line
    executed = kernel_env / ".demo" / "quickstart.ipynb"
    assert f"Executed notebook: {executed}" in out
    nb = nbformat.read(executed, as_version=4)
    assert nb.metadata.widgets["application/vnd.jupyter.widget-state+json"]["state"]
    assert list((kernel_env / ".demo").glob("nbsubagents-quickstart-*/project/.pi/subagents/runs/*/result.json"))
