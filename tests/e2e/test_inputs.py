"""The notebook's values as a run's inputs (issue 57, part 1): written into the run folder by kind, named in the
task, read by the real pi (and Claude Code) from the scripted model's ``read card NAME`` line, and kept in the
run's record, panel, report and registry row; an experiment sweeps them as an axis."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pandas as pd
import pytest

import nbsubagents
from nbsubagents._config import NbSubagentsError
from nbsubagents._views.panel_state import PanelState

from IPython.core.error import UsageError
from test_cli_run import nbsubagents_cli
from test_harness_claude import claude  # noqa: F401 (the fixture: Claude Code pointed at the scripted model)
from test_isolation import make_repo, worktrees  # noqa: F401 (the fixture: the worktrees' folder of the test)
from test_magics import shell  # noqa: F401 (the fixture: IPython's test shell with the extension loaded)

FRAME = pd.DataFrame({"city": ["Oslo", "Lima", None], "temp": [3.5, 19.0, 11.25]})


def tool_results(run) -> list[dict]:
    events = [json.loads(line) for line in run.paths.events.read_text().splitlines()]
    return [e for e in events if e["type"] == "tool_result"]


def registry_inputs(project, run_id: str) -> list[dict]:
    db = project / ".pi" / "subagents" / "registry.sqlite"
    with sqlite3.connect(db) as conn:
        (text,) = conn.execute("SELECT inputs FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    return json.loads(text)


def test_a_dataframe_goes_in_and_the_child_reads_its_card(project, scripted):
    run = nbsubagents.run("scout", "read card df\nread input notes", show=False,
                          inputs={"df": FRAME, "notes": "look at the temperatures", "params": {"unit": "C"}})

    assert run.status == "completed", run.error
    folder = run.dir / "inputs"
    assert pd.read_parquet(folder / "df.parquet").equals(FRAME)
    assert json.loads((folder / "params.json").read_text()) == {"unit": "C"}
    assert not (folder / "df.parquet").stat().st_mode & 0o222  # read-only
    sent = scripted.requests[0]["messages"][-1]["content"]
    sent = sent if isinstance(sent, str) else " ".join(p.get("text", "") for p in sent)
    assert f"- df (dataframe: DataFrame, 3 rows × 2 columns): file {folder / 'df.parquet'}; card {folder / 'df.md'}" \
        in sent
    card, notes = tool_results(run)
    assert card["name"] == "read" and "DataFrame, 3 rows × 2 columns" in card["text"]  # the card reached the model
    assert "city    object" in card["text"] or "city" in card["text"] and "Missing values" in card["text"]
    assert "city    1" in card["text"]  # its missing values: one city
    assert notes["text"].strip() == "look at the temperatures"
    assert "DataFrame, 3 rows × 2 columns" in run.output
    by_name = {e["name"]: e for e in run.record.inputs}
    assert by_name["df"]["kind"] == "dataframe" and by_name["notes"]["kind"] == "text"
    assert by_name["df"]["bytes"] == (folder / "df.parquet").stat().st_size and len(by_name["df"]["sha256"]) == 64
    assert [(e["name"], e["kind"]) for e in registry_inputs(project, run.run_id)] == [
        ("df", "dataframe"), ("notes", "text"), ("params", "json")]
    text, html = PanelState.of_run(run).static_record()
    assert "inputs df, notes, params" in text and "inputs df, notes, params" in html
    report = nbsubagents.report([run], project / "report.md").read_text()
    assert "- **Inputs:** `df` dataframe" in report and "`params` json" in report
    assert "<th>Inputs</th><td><code>df</code> dataframe" in nbsubagents.report([run], project / "r.html").read_text()


def test_inputs_that_cannot_be_sent_are_refused_by_name_before_anything_is_written(project):
    runs = project / ".pi" / "subagents" / "runs"
    with pytest.raises(NbSubagentsError, match=r"Input 'lock'.*pickled"):
        nbsubagents.run("scout", "x", show=False, inputs={"df": FRAME, "lock": nbsubagents.pickled(lambda: 1)})
    nbsubagents.configure(input_max_mb=0.001)
    with pytest.raises(NbSubagentsError, match=r"Input 'big' is 5,000 bytes, over the limit of 1,000 bytes per input"):
        nbsubagents.run("scout", "x", show=False, inputs={"small": "ok", "big": "x" * 5000})
    with pytest.raises(NbSubagentsError, match=r"Task 1: Input 'big'"):
        nbsubagents.run_parallel([{"preset": "scout", "task": "x"},
                                  {"preset": "scout", "task": "x", "inputs": {"big": "x" * 5000}}], show=False)
    assert not runs.exists() or not list(runs.iterdir())  # no run folder, not even a failed run's


def test_an_experiment_sweeps_two_inputs_as_an_axis(project):
    small, large = FRAME.head(1), FRAME
    exp = nbsubagents.experiment("by-input", tasks=["read card df"], presets="scout", show=False,
                                 inputs=[{"df": small}, {"df": large}])  # a list of dicts: an axis
    frame = exp.frame()
    assert set(frame["status"]) == {"completed"}
    assert exp.axes() == ("preset", "model", "input")  # compare() and plot() put the inputs side by side unasked
    table = exp.compare(by="input").table
    labels = sorted(str(v) for v in table.index.get_level_values(0))
    assert len(labels) == 2 and all(label.startswith("df:") for label in labels)
    cards = sorted(tool_results(run)[0]["text"].splitlines()[0] for run in exp.runs())
    assert cards == ["# Input `df`: DataFrame, 1 rows × 2 columns", "# Input `df`: DataFrame, 3 rows × 2 columns"]
    plan = exp.plan
    assert all(cell["spec"]["inputs"]["df"]["sha256"] for cell in plan["cells"])
    with pytest.raises(NbSubagentsError, match="was defined with other inputs"):  # other data under the same name: another plan
        nbsubagents.experiment("by-input", tasks=["read card df"], presets="scout", show=False,
                               inputs=[{"df": large}, {"df": large.tail(1)}])


def test_a_dataframe_goes_in_under_claude_code(claude, scripted):  # noqa: F811
    run = nbsubagents.run("scout", "read card df", show=False, harness="claude-code", inputs={"df": FRAME})
    assert run.status == "completed", run.error
    (card,) = tool_results(run)
    assert "DataFrame, 3 rows × 2 columns" in card["text"] and "Missing values" in card["text"]
    assert run.record.inputs[0]["name"] == "df"


def test_the_magic_sends_the_notebooks_variables_by_name(shell, scripted):  # noqa: F811
    shell.user_ns.update(df=FRAME, params={"unit": "C"})
    shell.run_cell_magic("subagent", "scout --with df,params -o got", "read card df\nread input params")
    run = shell.user_ns["got"]
    assert run.status == "completed", run.error
    assert [(e["name"], e["kind"]) for e in run.record.inputs] == [("df", "dataframe"), ("params", "json")]
    card, params = tool_results(run)
    assert "DataFrame, 3 rows × 2 columns" in card["text"] and '"unit": "C"' in params["text"]
    with pytest.raises(UsageError, match="--with nope: the notebook has no variable 'nope'"):
        shell.run_cell_magic("subagent", "scout --with df,nope", "read card df")
    assert len(list((shell.user_ns["got"].dir.parent).iterdir())) == 1  # the refused call wrote no run


def test_the_command_line_sends_files_by_name(project, scripted):
    (project / "notes.md").write_text("# Notes\nthe freezer is at -18 C\n")
    proc = nbsubagents_cli("run", "scout", "read input notes", "--with", "notes=notes.md", "--json")
    assert proc.returncode == 0, proc.stderr
    assert "# Notes" in json.loads(proc.stdout)["output"]
    (run_dir,) = (project / ".pi" / "subagents" / "runs").iterdir()
    meta = json.loads((run_dir / "meta.json").read_text())
    assert [(e["name"], e["kind"]) for e in meta["inputs"]] == [("notes", "path")]
    proc = nbsubagents_cli("run", "scout", "read input p", "--with", '{"p": {"unit": "C"}}', "--json")
    assert proc.returncode == 0, proc.stderr
    latest = Path(json.loads(proc.stdout)["run_dir"])
    assert json.loads((latest / "inputs" / "p.json").read_text()) == {"unit": "C"}
    bad = nbsubagents_cli("run", "scout", "x", "--with", "df")
    assert bad.returncode == 1 and "--with df: the command line has no variables; give a file or folder as df=PATH" \
        in bad.stderr


def test_a_background_isolated_run_reads_its_inputs_copy_inside_the_sandbox(project, worktrees):  # noqa: F811
    make_repo(project)
    data = project / "data.csv"
    data.write_text("a,b\n1,2\n")
    job = nbsubagents.start("scribe", "read input data", isolation="worktree", inputs={"data": data}, show=False)
    run = job.wait()
    assert run.status == "completed", run.error
    (read,) = tool_results(run)
    assert read["text"].startswith("a,b")  # the sandbox lets the child read its run folder's copy
    assert run.record.inputs[0]["kind"] == "path" and run.record.inputs[0]["file"] != str(data)
    assert data.read_text() == "a,b\n1,2\n"  # the person's file, untouched
