"""The %subagent magics loaded into a real IPython shell, running the real pi against the scripted model.

The shell is IPython's test shell (not a kernel), so runs show as plain text; what a magic sends is
checked where it arrives: the scripted model's recorded requests and the run's meta.json.
"""

from __future__ import annotations

import re
import time

import pytest
from IPython.core.completer import provisionalcompleter
from IPython.core.error import UsageError
from IPython.testing import globalipapp

import nbsubagents
from nbsubagents import _magics as magics
from nbsubagents._lifecycle import watcher
from nbsubagents._registry import Status
from nbsubagents._lifecycle.handle import Run


@pytest.fixture
def shell(capsys, project):
    """IPython's test shell with the extension loaded, in the project; unloaded afterwards."""
    globalipapp.start_ipython()  # once per process; later calls return None
    ip = globalipapp.get_ipython()
    ip.run_line_magic("load_ext", "nbsubagents")
    names = set(ip.user_ns)
    yield ip
    deadline = time.monotonic() + 60  # background runs end in their panels before output capture closes
    while watcher.watching() and time.monotonic() < deadline:
        time.sleep(0.1)
    ip.run_line_magic("unload_ext", "nbsubagents")
    for name in set(ip.user_ns) - names:
        ip.user_ns.pop(name, None)
    watcher.stop()


def user_message(request: dict) -> str:
    """The text of the last user message the model received (the task pi was given)."""
    for message in reversed(request["messages"]):
        if message.get("role") == "user":
            content = message["content"]
            return content if isinstance(content, str) else "".join(p.get("text", "") for p in content)
    raise AssertionError("no user message in the request")


def cell(ip, source: str):
    """Run a cell as a notebook would; returns IPython's ExecutionResult."""
    return ip.run_cell(source, store_history=True)


def completions(ip, text: str, cursor: int | None = None) -> list[str]:
    cursor = len(text) if cursor is None else cursor
    with provisionalcompleter():
        return [c.text for c in ip.Completer.completions(text, cursor)]


# -- running ----------------------------------------------------------------------------------------
def test_line_magic_runs_one_foreground_run_and_returns_it(shell, capsys):
    run = shell.run_line_magic("subagent", "scout read README.md")

    assert isinstance(run, Run) and run.status == "completed"
    assert run.preset == "scout" and run.task == "read README.md"
    assert "- read README.md: # Demo project" in run.output
    out = capsys.readouterr().err  # outside a notebook the progress goes to stderr
    assert "Reading README.md" in out and "✓ scout completed" in out


def test_cell_magic_takes_the_body_as_task_stores_the_run_and_is_the_cells_value(shell, scripted, capsys):
    result = cell(shell, "%%subagent scout --name looker -o looked\nLook around.\nls src\nrun: echo magic-ok\n")

    assert result.error_in_exec is None and result.error_before_exec is None
    run = shell.user_ns["looked"]
    assert result.result is run and shell.user_ns["_"] is run
    assert run.status == "completed" and run.name == "looker"
    assert run.task == "Look around.\nls src\nrun: echo magic-ok\n"
    assert "- run: echo magic-ok: magic-ok" in run.output
    assert user_message(scripted.requests[0]).rstrip() == "Look around.\nls src\nrun: echo magic-ok"
    out = capsys.readouterr().err
    assert "Listing src" in out and "✓ looker completed" in out


def test_braces_and_dollars_reach_the_child_unchanged(shell, scripted):
    shell.user_ns.update(x=42, name="WORLD")
    task = "say: {x} and $name and ${HOME} and {{literal}} and {1+1}"

    line_run = shell.run_line_magic("subagent", f"scout {task}")
    result = cell(shell, f"%%subagent scout -o cell_run\n{task}\n")
    by_cell_syntax = cell(shell, f"%subagent scout {task}")

    assert result.error_in_exec is None and by_cell_syntax.error_in_exec is None
    assert line_run.task == task and shell.user_ns["cell_run"].task == task + "\n"
    assert by_cell_syntax.result.task == task
    received = [user_message(r) for r in scripted.requests]
    assert received.count(task) >= 2 and any(m.rstrip() == task for m in received), received
    assert line_run.output == task[len("say: "):]


def test_expand_fills_in_notebook_variables_only_when_asked(shell, scripted):
    shell.user_ns.update(target="README.md", count=3)
    result = cell(shell, "%%subagent scout --expand -o expanded\nsay: {count * 2} files, first $target\nread $target\n")

    assert result.error_in_exec is None
    run = shell.user_ns["expanded"]
    assert run.task == "say: 6 files, first README.md\nread README.md\n"
    assert "- read README.md: # Demo project" in run.output
    assert "6 files, first README.md" in user_message(scripted.requests[0])

    line = shell.run_line_magic("subagent", "--expand scout say: {target}")
    assert line.task == "say: README.md"

    with pytest.raises(UsageError, match="--expand could not fill in the task: NameError"):
        shell.run_cell_magic("subagent", "scout --expand", "say: {not_defined_anywhere}\n")


def test_options_reach_the_run(shell, project):
    (project / "sub").mkdir()
    (project / "sub" / "here.txt").write_text("inside sub\n")
    run = shell.run_cell_magic("subagent", "scout --model demo/scripted --cwd sub --timeout 90 --name opt",
                               "read here.txt\n")

    assert run.status == "completed" and "- read here.txt: inside sub" in run.output
    assert run.record.requested_model == "demo/scripted" and run.record.timeout == 90.0
    assert run.record.cwd == str((project / "sub").resolve()) and run.name == "opt"


def test_bg_starts_a_background_run_and_returns_at_once(shell, capsys):
    result = cell(shell, "%%subagent scout --bg -o job\nsleep: 2\nread README.md\n")

    assert result.error_in_exec is None
    job = shell.user_ns["job"]
    assert result.result is job and job.record.mode == "background"
    assert job.status in ("queued", "running")

    status = shell.run_line_magic("subagent_status", "")
    assert isinstance(status, Status) and [r["run_id"] for r in status.rows] == [job.id]
    assert job.wait(120).status == "completed" and "# Demo project" in job.output

    deadline = time.monotonic() + 30
    while watcher.watching() and time.monotonic() < deadline:
        time.sleep(0.1)
    one = shell.run_line_magic("subagent_status", job.id[:8])
    assert one.run_id == job.id and one.rows[0]["status"] == "completed"
    assert f"run {job.id}" in repr(one)
    every = shell.run_line_magic("subagent_status", "--all")
    assert every.include_completed and job.id in {r["run_id"] for r in every.rows}
    assert shell.run_line_magic("subagent_status", "").rows == []


def test_cancel_aborts_a_running_background_run(shell, capsys):
    job = shell.run_line_magic("subagent", "--bg --name slow scout run: sleep 60")
    deadline = time.monotonic() + 60
    while "sleep 60" not in job.transcript and time.monotonic() < deadline:
        time.sleep(0.1)

    shell.run_line_magic("subagent_cancel", job.id)
    assert f"Cancelling run {job.id}" in capsys.readouterr().out
    assert job.wait(60).status == "aborted"

    shell.run_line_magic("subagent_cancel", job.id[:10])
    assert f"Run {job.id[:10]} had already ended" in capsys.readouterr().out


def test_cancel_takes_a_notebook_expression_through_ipython_expansion(shell, project, capsys):
    job = nbsubagents.start("scout", "run: sleep 60", name="slow2", show=False)
    shell.user_ns["job2"] = job
    deadline = time.monotonic() + 60
    while "sleep 60" not in job.transcript and time.monotonic() < deadline:
        time.sleep(0.1)
    result = cell(shell, "%subagent_cancel {job2.id}")
    assert result.error_in_exec is None
    assert job.wait(60).status == "aborted"


def test_subagents_runs_a_yaml_list_in_parallel(shell, capsys):
    body = ("- preset: scout\n  task: read README.md\n  name: reader\n"
            "- preset: scribe\n  task: 'write NOTES.md: {braces} and $dollar'\n  name: writer\n"
            "- preset: scout\n  task: |\n    say: two lines\n    ls src\n")
    result = cell(shell, "%%subagents --concurrency 2 -o group\n" + body)

    assert result.error_in_exec is None
    runs = shell.user_ns["group"]
    assert result.result is runs
    assert [r.name for r in runs] == ["reader", "writer", "scout"]
    assert [r.status for r in runs] == ["completed"] * 3
    assert runs[1].task == "write NOTES.md: {braces} and $dollar"
    assert runs[2].task == "say: two lines\nls src\n"
    out = capsys.readouterr().err
    assert "[reader] Reading README.md" in out and "[writer] Writing NOTES.md" in out


def test_subagents_expand_fills_in_the_body(shell, project):
    shell.user_ns["which"] = "src"
    runs = shell.run_cell_magic("subagents", "--expand", "- preset: scout\n  task: ls $which\n")
    assert runs[0].task == "ls src" and runs[0].status == "completed"


# -- errors -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("line", ["scout --modle x", "--frobnicate scout", "scout --timeout soon"])
def test_a_wrong_flag_is_a_usage_error_with_the_usage_never_system_exit(shell, line):
    with pytest.raises(UsageError) as info:
        shell.run_cell_magic("subagent", line, "read README.md\n")
    assert "Usage: %subagent [--model M] [--cwd DIR] [--timeout S] [--name N]" in str(info.value)


def test_a_wrong_flag_in_a_cell_shows_usage_error_not_a_traceback(shell, capsys):
    result = cell(shell, "%subagent --nope scout read README.md")
    assert isinstance(result.error_in_exec, UsageError)
    captured = capsys.readouterr()
    text = captured.out + captured.err
    assert "UsageError" in text and "unrecognized arguments: --nope" in text and "Usage: %subagent" in text
    assert "Traceback" not in text


def test_other_magics_reject_wrong_flags_with_their_usage(shell):
    with pytest.raises(UsageError, match=r"Usage: %subagents \[--concurrency N\]"):
        shell.run_cell_magic("subagents", "--fast", "- preset: scout\n  task: x\n")
    with pytest.raises(UsageError, match="Usage: %subagent_status"):
        shell.run_line_magic("subagent_status", "--everything")
    with pytest.raises(UsageError, match="Usage: %subagent_cancel"):
        shell.run_line_magic("subagent_cancel", "")
    with pytest.raises(UsageError, match="Usage: %subagent_presets"):
        shell.run_line_magic("subagent_presets", "extra")


def test_help_shows_the_usage(shell):
    doc = shell.find_line_magic("subagent").__doc__
    assert "%subagent [--model M] [--cwd DIR]" in doc and "--bg" in doc and "--expand" in doc
    info = shell.object_inspect("%subagent")
    assert info["found"] and "-o VAR, --out VAR" in info["docstring"]
    assert "YAML list" in shell.find_cell_magic("subagents").__doc__


@pytest.mark.parametrize("body, message", [
    ("- preset: scout\n\ttask: x\n", "not valid YAML at line 2, column 1: found character"),
    ("preset: scout\ntask: x\n", "must be a YAML list of tasks"),
    ("\n\n", "needs tasks in the cell body"),
    ("", "the cell body is empty"),
    ("- preset: scout\n  task: read README.md\n- preset: scribe\n", r"item 2 \(line 3\) has no 'task'"),
    ("- preset: scout\n  task: x\n- just a string\n", r"item 2 \(line 3\) must be a mapping"),
    ("- preset: scout\n  task: x\n  colour: red\n", r"item 1 \(line 1\): unknown key\(s\) colour; a task may have preset, task, model, cwd, name, timeout, files, resume"),
    ("- preset: scout\n  task: 12\n", r"item 1 \(line 1\): 'task' must be non-empty text, got 12"),
    ("- preset: scout\n  task: x\n\n- preset: scout\n  task: y\n  timeout: soon\n",
     r"item 2 \(line 4\): 'timeout' must be a positive, finite number of seconds, got 'soon'"),
])
def test_malformed_yaml_or_a_wrong_item_is_a_usage_error_naming_it(shell, project, body, message):
    with pytest.raises(UsageError, match=message):
        shell.run_cell_magic("subagents", "", body)
    assert not (project / ".pi" / "subagents" / "runs").exists() or \
        not any((project / ".pi" / "subagents" / "runs").iterdir())


def test_bad_input_from_the_library_is_a_usage_error_with_its_message(shell):
    with pytest.raises(UsageError, match='Unknown preset: "nope". Available presets: nomodel, scout, scribe'):
        shell.run_line_magic("subagent", "nope read README.md")
    with pytest.raises(UsageError, match="The task is empty"):
        shell.run_line_magic("subagent", "scout")
    with pytest.raises(UsageError, match="Name a preset first \\(available: nomodel, scout, scribe\\)"):
        shell.run_line_magic("subagent", "")
    with pytest.raises(UsageError, match="takes its task from the cell body"):
        shell.run_cell_magic("subagent", "scout read README.md", "ls src\n")
    with pytest.raises(UsageError, match="-o needs a Python variable name"):
        shell.run_cell_magic("subagent", "scout -o 2bad", "ls src\n")
    with pytest.raises(UsageError, match='No run "zzzz"'):
        shell.run_line_magic("subagent_status", "zzzz")


def test_presets_magic_lists_the_project_presets(shell):
    listed = shell.run_line_magic("subagent_presets", "")
    assert [p.name for p in listed] == ["nomodel", "scout", "scribe"]
    assert "scout" in repr(listed) and "demo/scripted" in repr(listed)


# -- loading ----------------------------------------------------------------------------------------
def test_loading_twice_registers_each_magic_and_completer_once(shell, capsys):
    shell.run_line_magic("load_ext", "nbsubagents")  # IPython: already loaded
    nbsubagents.load_ipython_extension(shell)         # our own hook again
    shell.run_line_magic("reload_ext", "nbsubagents")
    ours = [m for m in shell.Completer.custom_matchers if getattr(m, "_nbsubagents", False)]
    assert len(ours) == 1
    assert {"subagent", "subagent_status", "subagent_presets", "subagent_cancel"} <= set(
        shell.magics_manager.magics["line"])
    assert {"subagent", "subagents"} <= set(shell.magics_manager.magics["cell"])
    assert shell.run_line_magic("subagent_presets", "")

    shell.run_line_magic("unload_ext", "nbsubagents")
    assert "subagents" not in shell.magics_manager.magics["cell"]
    assert not [m for m in shell.Completer.custom_matchers if getattr(m, "_nbsubagents", False)]
    shell.run_line_magic("load_ext", "nbsubagents")
    assert "subagents" in shell.magics_manager.magics["cell"]


def test_import_nbsubagents_does_not_load_the_magics():
    import subprocess
    import sys
    code = "import sys, nbsubagents; print('nbsubagents._magics' in sys.modules, 'IPython' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


# -- completion -------------------------------------------------------------------------------------
def test_completion_offers_preset_names_after_the_magic(shell):
    assert completions(shell, "%subagent sc") == ["scout", "scribe"]
    assert completions(shell, "%%subagent ") == ["nomodel", "scout", "scribe"]
    assert completions(shell, "%%subagent --name x sco") == ["scout"]
    assert completions(shell, "%%subagent sc\nread README.md\n", cursor=len("%%subagent sc")) == ["scout", "scribe"]
    assert completions(shell, "%%subagents\n- preset: scr") == ["scribe"]


def test_completion_offers_model_names_after_model(shell):
    assert completions(shell, "%%subagent scout --model ") == ["demo/scripted"]
    assert completions(shell, "%subagent --model demo/s") == ["demo/scripted"]
    assert completions(shell, "%%subagent scout --model=demo") == ["demo/scripted"]


def test_completion_offers_flags_and_stays_out_of_the_task(shell):
    assert "--bg" in completions(shell, "%%subagent scout --b")
    assert completions(shell, "%%subagents --con") == ["--concurrency"]
    assert "scout" not in completions(shell, "%subagent scout read sc")
    assert "scout" not in completions(shell, "x = sc")


def test_suggest_is_none_outside_the_magics():
    assert magics.suggest("print(1)") is None
    assert magics.suggest("%subagent_status ") is None
    assert magics.suggest("%%subagent scout --cwd ") is None


# -- the value of a cell in a notebook with panels ------------------------------------------------------
def test_with_panels_the_run_is_the_cells_value_but_is_not_drawn_a_second_time(shell, monkeypatch, capsys):
    """In a widget notebook the live panel is already in the cell: the value is kept (_ and Out), not redrawn."""
    monkeypatch.setattr(magics, "_panel_shown", lambda: True)
    result = cell(shell, "%%subagent scout -o looked\nread README.md\n")
    run = shell.user_ns["looked"]

    assert result.error_in_exec is None and result.result is run
    assert shell.user_ns["_"] is run and shell.user_ns["Out"][result.execution_count] is run
    first = capsys.readouterr()
    assert first.err.count("✓ scout completed in") == 1  # the progress printed it (stderr here)
    assert "scout completed" not in first.out  # and the displayhook drew nothing
    assert "_ipython_display_" not in vars(run)  # the mark lasted only for its own cell

    shown = cell(shell, "looked")  # a later cell draws the run as usual: its panel's static record
    assert shown.result is run
    assert re.search(r"Out\[\d+\]: \n✓ scout completed · demo/scripted · 1 tool call", capsys.readouterr().out)

    runs = cell(shell, "%%subagents\n- preset: scout\n  task: ls src\n").result
    assert isinstance(runs, list) and runs[0].status == "completed"
    again = capsys.readouterr()
    assert again.err.count("✓ scout completed in") == 1 and "scout completed" not in again.out


def test_without_panels_the_value_is_drawn_as_text(shell, capsys):
    result = cell(shell, "%%subagent scout\nread README.md\n")
    assert result.result.status == "completed"
    out = capsys.readouterr().out
    assert re.search(r"Out\[\d+\]: \n✓ scout completed · demo/scripted · 1 tool call · ", out), out
    assert "Output:\n  Done. 1 step:" in out


def test_the_usage_examples_of_subagents_are_valid_task_lists():
    """Issue 13, item 8: the example in %%subagents' own help was invalid YAML."""
    import textwrap

    from nbsubagents import _magics as magics

    doc = magics.SubagentMagics.subagents.__doc__
    block = textwrap.dedent(doc.split("list of tasks::\n\n", 1)[1].split("\n\n", 1)[0])
    for example in (block, magics._EXAMPLE):
        tasks = magics.parse_task_list(example)
        assert [t["preset"] for t in tasks] == ["scout", "scribe"]
        assert tasks[1]["task"] == "write NOTES.md: hello" and tasks[1]["name"] == "writer"


# -- issue 12: one task schema: files and resume everywhere they make sense ----------------------------------
def test_files_and_resume_work_from_the_magics_and_the_yaml_body(shell, project):
    (project / "notes.txt").write_text("the notes say 42\n")
    first = shell.run_cell_magic("subagent", "scout --file notes.txt --name with-file", "say: read it\n")
    assert first.status == "completed" and first.record.files == ["notes.txt"]
    assert "the notes say 42" in first.paths.prompt.read_text()

    again = shell.run_line_magic("subagent", f"--resume {first.id[-6:]} --bg scout say: once more")
    assert again.wait(60).status == "completed" and again.record.resumed_from == first.id

    body = ("- preset: scout\n  task: 'say: from yaml'\n  files: [notes.txt]\n"
            f"- preset: scout\n  task: 'say: resumed'\n  resume: {first.id}\n")
    listed, resumed = cell(shell, "%%subagents -o both\n" + body).result
    assert listed.status == "completed" and "the notes say 42" in listed.paths.prompt.read_text()
    assert resumed.status == "completed" and resumed.record.resumed_from == first.id

    with pytest.raises(UsageError, match=r"item 1 \(line 1\): 'files' must be a list of paths, got 'notes.txt'"):
        magics.parse_task_list("- preset: scout\n  task: x\n  files: notes.txt\n")
    with pytest.raises(nbsubagents.NbSubagentsError, match=r"Task 0: 'files' must be a list of paths"):
        nbsubagents.run_parallel([{"preset": "scout", "task": "x", "files": "notes.txt"}])


def test_subagent_magic_passes_isolation_and_budgets(shell, project, scripted, tmp_path, monkeypatch):
    import subprocess

    monkeypatch.setenv("NBSUBAGENTS_WORKTREES", str(tmp_path / "worktrees"))
    scripted.script = lambda body, index: {"tool_calls": [{"name": "bash", "arguments": {"command": f"echo {index}"}}],
                                           "delay": 0.1}  # a model's think time (see test_budgets.endless)
    run = shell.run_line_magic("subagent", "--max-tool-calls 2 scout keep going")
    assert run.result["stopReason"] == "budget:tool_calls" and run.result["toolCalls"] == 3
    scripted.script = None
    run = shell.run_line_magic("subagent", "--isolation worktree scout run: echo x > made.txt")
    assert run.files_changed == ["made.txt"] and not (project / "made.txt").exists()
    runs = shell.run_cell_magic("subagents", "", "- preset: scout\n  task: \"run: echo y > y.txt\"\n"
                                "  isolation: worktree\n  max_turns: 5\n")
    assert runs[0].files_changed == ["y.txt"] and runs[0].record.budget == {"maxTurns": 5}
    assert subprocess.run(["ls", str(tmp_path / "worktrees")], capture_output=True, text=True).stdout == ""
