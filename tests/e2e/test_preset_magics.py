"""``%%subagent_preset`` and ``%subagent_preset`` in a real IPython shell: a cell's preset file checked and written,
and the line's list, show, set, copy and delete (no runs: tests/e2e/test_preset_runs.py runs presets)."""

from __future__ import annotations

import re

import pytest
from IPython.core.error import UsageError
from IPython.testing import globalipapp

import nbsubagents
from nbsubagents import _preset_files as presets


@pytest.fixture
def shell(project):
    globalipapp.start_ipython()  # once per process; later calls return None
    ip = globalipapp.get_ipython()
    ip.run_line_magic("load_ext", "nbsubagents")
    yield ip
    ip.run_line_magic("unload_ext", "nbsubagents")


CELL = """---
description: "Use when: {a} notes need $writing"
model: demo/scripted
tools: read, write
max_tool_calls: 5
---
You write notes. {braces} and $dollars stay.
"""


def test_the_cell_magic_writes_the_cell_as_a_preset_file(shell, project, capsys):
    shell.run_cell_magic("subagent_preset", "notes", CELL)
    path = project / ".pi" / "subagents" / "notes.md"
    assert path.read_text() == CELL  # as written: no $ or {} expansion, no reformatting
    preset = presets.get("notes")
    assert preset.budget == {"max_tool_calls": 5} and preset.prompt == "You write notes. {braces} and $dollars stay."
    assert f"Wrote project preset notes: {path}" in capsys.readouterr().out


def test_the_cell_magic_refuses_an_existing_preset_unless_replace_and_a_bad_field_writes_nothing(shell, project):
    shell.run_cell_magic("subagent_preset", "notes", CELL)
    with pytest.raises(UsageError, match="exists.*--replace"):
        shell.run_cell_magic("subagent_preset", "notes", CELL.replace("max_tool_calls: 5", "max_tool_calls: 6"))
    with pytest.raises(UsageError, match="'max_tool_calls' must be a whole number.*nothing was written"):
        shell.run_cell_magic("subagent_preset", "notes --replace", CELL.replace("max_tool_calls: 5", "max_tool_calls: 0"))
    assert presets.get("notes").budget == {"max_tool_calls": 5}
    shell.run_cell_magic("subagent_preset", "notes --replace", CELL.replace("max_tool_calls: 5", "max_tool_calls: 6"))
    assert presets.get("notes").budget == {"max_tool_calls": 6}
    with pytest.raises(UsageError, match="says name: other, but it is being written as 'fresh'"):
        shell.run_cell_magic("subagent_preset", "fresh", "---\nname: other\ndescription: d\n---\n")
    with pytest.raises(UsageError, match="takes one NAME"):
        shell.run_cell_magic("subagent_preset", "", CELL)
    assert sorted(p.name for p in (project / ".pi" / "subagents").iterdir()) == [
        "nomodel.md", "notes.md", "scout.md", "scribe.md"]


def test_the_global_flag_writes_into_the_agent_dir(shell, project, tmp_path):
    shell.run_cell_magic("subagent_preset", "helper --global", "---\ndescription: helps\n---\n")
    assert (tmp_path / "agent" / "subagents" / "helper.md").is_file()
    assert presets.get("helper").scope == "global"


def test_the_line_magic_shows_sets_copies_and_deletes(shell, project, tmp_path, capsys):
    shell.run_line_magic("subagent_preset", 'set scout "description=Reads, then reports" maxTurns=3 tools=')
    scout = presets.get("scout")
    assert (scout.description, scout.budget, scout.tools) == ("Reads, then reports", {"max_turns": 3}, None)
    capsys.readouterr()
    shell.run_line_magic("subagent_preset", "show scout")
    shown = capsys.readouterr().out
    assert shown.startswith(f"# project preset scout: {project / '.pi' / 'subagents' / 'scout.md'}\n")
    assert shown.endswith((project / ".pi" / "subagents" / "scout.md").read_text())
    shell.run_line_magic("subagent_preset", "copy scout scout2 --global")
    assert presets.get("scout2").scope == "global"
    shell.run_line_magic("subagent_preset", "delete scout2 --global")
    assert not (tmp_path / "agent" / "subagents" / "scout2.md").exists()
    listed = shell.run_line_magic("subagent_preset", "list")
    assert [p.name for p in listed] == [p.name for p in nbsubagents.presets()]


@pytest.mark.parametrize("line, message", [
    ("show", "%subagent_preset list | show NAME"),
    ("remove scout", "got: remove scout"),
    ("set scout", "set NAME FIELD=VALUE"),
    ("show scout --replace", "show NAME"),
    ("set scout oops", "'oops' is not FIELD=VALUE"),
    ("set scout max_turns=0", "'max_turns' must be a whole number"),
    ("delete nope", "No project preset named 'nope'"),
    ("set scout name=other", "renamed by copying it: copy_preset('scout', NEW_NAME)"),
    ('set scout "description=unclosed', "No closing quotation"),
])
def test_a_wrong_line_is_a_usage_error_naming_what_is_wrong(shell, line, message):
    with pytest.raises(UsageError, match=re.escape(message)):
        shell.run_line_magic("subagent_preset", line)
