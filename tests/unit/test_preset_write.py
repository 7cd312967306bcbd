"""Presets made and changed from Python and the shell (preset_files.write, the CLI's ``presets``), both spellings of
a field, and tintinweb's ``ext:`` tools. No pi runs here: tests/e2e/test_preset_runs.py runs what these write."""

from __future__ import annotations

import json
import re
import shutil
import warnings
from pathlib import Path

import pytest

import nbsubagents
from nbsubagents import _cli as cli, _config as config
from nbsubagents import _preset_files as presets
from nbsubagents._child import budgets
from helpers import pi_argv
from nbsubagents._preset_files import PresetError, PresetWarning, parse_preset
from nbsubagents._preset_files.write import parse_assignments

TINTINWEB = Path(__file__).resolve().parents[1] / "fixtures" / "agent-corpus" / "tintinweb"


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    """An empty project (no .pi yet) as the working folder, its own agent dir and a home without Claude agents."""
    root = tmp_path / "proj"
    root.mkdir()
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path / "agent"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("NBSUBAGENTS_ROOT", raising=False)
    monkeypatch.chdir(root)
    config.reset()
    yield root
    config.reset()


def files(directory: Path) -> list[str]:
    """Every entry of a folder, hidden ones too: a failed write leaves nothing, not even its staging folder."""
    return sorted(p.name for p in directory.iterdir()) if directory.is_dir() else []


def parsed(path: Path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return parse_preset(path, "project")


def argv_of(preset) -> list[str]:
    return pi_argv(preset)[0]


def tools_flag(argv: list[str]) -> str | None:
    return argv[argv.index("--tools") + 1] if "--tools" in argv else None


# -- new_preset ---------------------------------------------------------------------------------------------------
def test_new_preset_writes_a_file_the_parser_reads_with_fields_in_pis_spelling(project):
    made = nbsubagents.new_preset("reviewer", description="Use when: a diff needs review", model="demo/scripted",
                                  tools=["read", "grep"], prompt="Review carefully.", max_tool_calls=3,
                                  thinking="low")
    path = project / ".pi" / "subagents" / "reviewer.md"
    assert made.path == path and made.scope == "project"
    text = path.read_text()
    assert "maxToolCalls: 3" in text and "max_tool_calls" not in text and "tools: read, grep" in text
    again = parsed(path)
    assert (again.name, again.description, again.model, again.tools, again.thinking, again.prompt) == (
        "reviewer", "Use when: a diff needs review", "demo/scripted", ("read", "grep"), "low", "Review carefully.")
    assert again.budget == {"max_tool_calls": 3}
    assert "reviewer" in presets.discover()


def test_new_preset_in_global_scope_goes_to_the_agent_dirs_subagents(project, tmp_path):
    made = nbsubagents.new_preset("helper", description="helps", scope="global")
    assert made.path == tmp_path / "agent" / "subagents" / "helper.md" and made.scope == "global"
    assert not (project / ".pi").exists()


def test_new_preset_refuses_to_overwrite_and_says_how_to_change_it(project):
    nbsubagents.new_preset("scout", description="first", prompt="one")
    before = (project / ".pi" / "subagents" / "scout.md").read_text()
    with pytest.raises(PresetError, match=r"exists.*edit_preset\('scout'.*delete_preset\('scout'\)"):
        nbsubagents.new_preset("scout", description="second")
    assert (project / ".pi" / "subagents" / "scout.md").read_text() == before


@pytest.mark.parametrize("fields, named, right", [
    ({"max_tool_calls": 0}, "'max_tool_calls'", "a whole number of at least 1"),
    ({"maxCost": -1}, "'maxCost'", "a positive amount"),
    ({"thinking": "loud"}, "'thinking'", "one of off, minimal, low"),
    ({"tools": "read, bad tool!"}, "'tools'", "a tool is a name of letters"),
    ({"no_tools": "yes"}, "'no_tools'", "true or false"),
    ({"isolation": "box"}, "'isolation'", "worktree or none"),
])
def test_a_bad_field_is_an_error_naming_it_and_its_right_form_and_nothing_is_written(project, fields, named, right):
    (project / ".pi" / "subagents").mkdir(parents=True)
    with pytest.raises(PresetError) as caught:
        nbsubagents.new_preset("broken", description="d", **fields)
    assert named in str(caught.value) and right in str(caught.value)
    assert "nothing was written" in str(caught.value)
    assert files(project / ".pi" / "subagents") == []


def test_an_unknown_field_is_refused_with_a_did_you_mean(project):
    with pytest.raises(PresetError, match="Unknown preset field 'max_tool_call'; did you mean 'max_tool_calls'"):
        nbsubagents.new_preset("x", description="d", max_tool_call=2)
    assert not (project / ".pi" / "subagents" / "x.md").exists()


@pytest.mark.parametrize("name", ["", "two words", "../escape", ".hidden", "x.md", "a/b", "-flag", "x" * 65])
def test_a_preset_name_is_checked(project, name):
    with pytest.raises(PresetError, match="A preset name is 1 to 64 letters"):
        nbsubagents.new_preset(name, description="d")


def test_two_spellings_of_one_field_in_a_call_are_refused(project):
    with pytest.raises(PresetError, match="'max_turns' and 'maxTurns' are two spellings of one field"):
        nbsubagents.new_preset("x", description="d", max_turns=2, maxTurns=3)


# -- edit_preset --------------------------------------------------------------------------------------------------
def test_edit_changes_removes_and_replaces_the_body_keeping_the_rest(project):
    folder = project / ".pi" / "subagents"
    folder.mkdir(parents=True)
    (folder / "scout.md").write_text("---\nname: scout\ndescription: reads\nmodel: a/b\nmax_turns: 4\n"
                                     "color: blue\n---\nOld prompt.\n")
    changed = nbsubagents.edit_preset("scout", model=None, max_turns=9, tools="read, ls", prompt="New prompt.")
    text = (folder / "scout.md").read_text()
    assert "model" not in text and "max_turns: 9" in text and "maxTurns" not in text  # the file's spelling stays
    assert "color: blue" in text and "New prompt." in text and "Old prompt" not in text
    assert (changed.model, changed.budget, changed.tools, changed.prompt) == (None, {"max_turns": 9},
                                                                              ("read", "ls"), "New prompt.")


def test_a_bad_edit_leaves_the_file_as_it_was(project):
    made = nbsubagents.new_preset("scout", description="reads", max_tool_calls=2)
    before = made.path.read_bytes()
    with pytest.raises(PresetError, match="'max_tool_calls' must be a whole number.*nothing was written"):
        nbsubagents.edit_preset("scout", max_tool_calls=1.5)
    assert made.path.read_bytes() == before and files(made.path.parent) == ["scout.md"]


def test_edit_finds_the_preset_a_run_would_pick_and_refuses_a_rename(project, tmp_path, capsys):
    nbsubagents.new_preset("helper", description="global one", scope="global")
    changed = nbsubagents.edit_preset("helper", description="changed")
    assert changed.scope == "global" and changed.description == "changed"
    assert cli.main(["presets", "set", "helper", "name=other"]) == 1
    assert "renamed by copying it: copy_preset('helper', NEW_NAME)" in capsys.readouterr().err
    with pytest.raises(PresetError, match="Unknown preset: 'nope'. Available presets: helper"):
        nbsubagents.edit_preset("nope", model="a/b")


# -- copy_preset and Claude Code agents ---------------------------------------------------------------------------
def claude_agent(project: Path) -> Path:
    folder = project / ".claude" / "agents"
    folder.mkdir(parents=True)
    path = folder / "code-reader.md"
    path.write_text("---\nname: code-reader\ndescription: Use this agent to read code\ntools: Read, Glob, Grep, "
                    "WebFetch\nmodel: inherit\nskills: [pdf]\ncolor: green\n---\nYou read code.\n")
    return path


def test_a_claude_code_agent_copies_into_a_pi_preset_with_pis_tool_names(project):
    claude_agent(project)
    with pytest.warns(PresetWarning, match="skills are Claude skills"):
        copy = nbsubagents.copy_preset("code-reader", "reader")
    assert copy.path == project / ".pi" / "subagents" / "reader.md" and copy.scope == "project"
    text = copy.path.read_text()
    assert "tools: read, find, grep, WebFetch" in text and "model" not in text and "skills" not in text
    assert "name: reader" in text and "You read code." in text
    assert copy.tools == ("read", "find", "grep", "WebFetch") and copy.skills is None
    assert presets.discover()["reader"].scope == "project"
    with pytest.raises(PresetError, match="Claude Code agent file.*copy_preset"):
        nbsubagents.edit_preset("code-reader", model="a/b")


def test_copy_maps_snake_case_to_pis_spelling_and_refuses_an_existing_target(project):
    folder = project / ".pi" / "subagents"
    folder.mkdir(parents=True)
    (folder / "a.md").write_text("---\ndescription: d\nmax_tool_calls: 2\ndisallowed_tools: bash\n---\nbody\n")
    copy = nbsubagents.copy_preset("a", "b", scope="global")
    text = copy.path.read_text()
    assert "maxToolCalls: 2" in text and "disallowedTools: bash" in text and "name: b" in text
    assert copy.budget == {"max_tool_calls": 2}
    with pytest.raises(PresetError, match="A global preset named 'b' exists"):
        nbsubagents.copy_preset("a", "b", scope="global")


# -- delete_preset ------------------------------------------------------------------------------------------------
def test_delete_removes_the_file_and_says_where_another_scope_has_it(project):
    made = nbsubagents.new_preset("gone", description="d", scope="global")
    with pytest.raises(PresetError, match=r"No project preset named 'gone'.*global preset.*scope='global'"):
        nbsubagents.delete_preset("gone")
    assert nbsubagents.delete_preset("gone", scope="global") == made.path
    assert not made.path.exists() and "gone" not in presets.discover()
    with pytest.raises(PresetError, match="scope must be 'project' or 'global'"):
        nbsubagents.delete_preset("gone", scope="claude-user")


# -- both spellings of a field, in a file -------------------------------------------------------------------------
@pytest.mark.parametrize("key", sorted(budgets.FIELDS))
def test_each_budget_applies_in_either_spelling(project, tmp_path, key):
    camel = budgets.FIELDS[key][0]
    for spelling in (key, camel):
        path = tmp_path / f"{spelling}.md"
        path.write_text(f"---\nname: p\ndescription: d\n{spelling}: 2\n---\n")
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no "unknown key (ignored)"
            assert parse_preset(path, "project").budget == {key: 2}


@pytest.mark.parametrize("snake, value, attribute, expected", [
    ("no_tools", "true", "no_tools", True),
    ("exclude_tools", "bash", "exclude_tools", ("bash",)),
    ("no_skills", "true", "no_skills", True),
    ("no_context_files", "true", "no_context_files", True),
    ("no_extensions", "true", "no_extensions", True),
    ("extra_args", "[--verbose]", "extra_args", ("--verbose",)),
    ("disallowed_tools", "bash", "disallowed_tools", ("bash",)),
    ("permission_mode", "plan", "permission_mode", "plan"),
])
def test_each_snake_case_field_is_applied(tmp_path, snake, value, attribute, expected):
    path = tmp_path / "p.md"
    path.write_text(f"---\nname: p\ndescription: d\n{snake}: {value}\n---\n")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert getattr(parse_preset(path, "project"), attribute) == expected


def test_both_spellings_in_one_file_are_an_error_naming_both(tmp_path):
    path = tmp_path / "p.md"
    path.write_text("---\nname: p\ndescription: d\nmaxToolCalls: 2\nmax_tool_calls: 3\n---\n")
    with pytest.raises(PresetError, match="'max_tool_calls' and 'maxToolCalls' are two spellings of one field"):
        parse_preset(path, "project")


def test_an_error_names_the_field_as_the_file_spells_it(tmp_path):
    path = tmp_path / "p.md"
    path.write_text("---\nname: p\ndescription: d\nmax_cost: free\n---\n")
    with pytest.raises(PresetError, match="'max_cost' must be a positive amount"):
        parse_preset(path, "project")


# -- tintinweb's ext: tools ---------------------------------------------------------------------------------------
def test_the_tintinweb_agent_file_loads_with_its_extension_and_its_one_tool(project):
    shutil.copytree(TINTINWEB, project, dirs_exist_ok=True)
    preset = presets.get("alpha-reader")
    assert any(re.fullmatch(r"ext:ext-alpha.mjs/alpha_read: tool alpha_read allowed; extension ext-alpha.mjs loaded "
                            r"from .*ext-alpha.mjs \(--extension\)", note) for note in presets.notes(preset))
    assert preset.budget == {"max_turns": 6} and preset.disallowed_tools == ("bash",)
    argv = argv_of(preset)
    assert argv[argv.index("--extension") + 1] == str((project / "ext-alpha.mjs").resolve())
    assert tools_flag(argv) == "read,edit,write,grep,find,ls,alpha_read"  # *: the built-ins; bash disallowed


@pytest.mark.parametrize("tools, expected, note", [
    ('["read", "ext:ext-alpha.mjs/alpha_read"]', "read,alpha_read", "tool alpha_read allowed"),
    ('"ext:ext-alpha.mjs/alpha_write, ls"', "ls,alpha_write", "tool alpha_write allowed"),
    ('"*, ext:ext-alpha.mjs"', None, "every tool of every loaded extension is allowed"),
    ('"read, ext:ext-alpha.mjs"', "read", "left out: pi's --tools cannot name a whole extension"),
    ('"all"', None, None),
])
def test_ext_entries_become_pi_tools_and_a_note_says_what_was_done(project, tools, expected, note):
    shutil.copy(TINTINWEB / "ext-alpha.mjs", project)
    path = project / ".pi" / "subagents" / "p.md"
    path.parent.mkdir(parents=True)
    path.write_text(f'---\nname: p\ndescription: d\nextensions: "./ext-alpha.mjs"\ntools: {tools}\n---\n')
    preset = parsed(path)
    assert tools_flag(argv_of(preset)) == expected
    if note:
        assert any(note in n for n in presets.notes(preset)), presets.notes(preset)
        assert "--extension" in argv_of(preset)


def test_an_ext_entry_without_its_file_still_loads_and_says_so(project):
    path = project / ".pi" / "subagents" / "p.md"
    path.parent.mkdir(parents=True)
    path.write_text('---\nname: p\ndescription: d\nextensions: "./missing.mjs"\ntools: "read, ext:missing.mjs/x, '
                    'ext:mcp/search"\n---\n')
    preset = parsed(path)
    assert "--extension" not in argv_of(preset) and tools_flag(argv_of(preset)) == "read,x,search"
    assert any("missing.mjs (extensions: ./missing.mjs) not found" in n for n in preset.notes)
    assert any("extension mcp expected from pi's own extension discovery" in n for n in presets.notes(preset))


def test_tools_none_means_no_tools_without_a_warning(tmp_path):
    path = tmp_path / "p.md"
    path.write_text("---\nname: p\ndescription: d\ntools: none\n---\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert "--no-tools" in argv_of(parse_preset(path, "project"))


# -- FIELD=VALUE and the CLI --------------------------------------------------------------------------------------
def test_assignments_are_typed_as_yaml_and_an_empty_value_removes():
    assert parse_assignments(["maxToolCalls=5", "noSkills=true", "model=", "tools=*, ext:a/b", "description=yes",
                              "extraArgs=[--verbose]"]) == {
        "maxToolCalls": 5, "noSkills": True, "model": None, "tools": "*, ext:a/b", "description": "yes",
        "extraArgs": ["--verbose"]}
    with pytest.raises(PresetError, match="'model' is not FIELD=VALUE"):
        parse_assignments(["model"])


def presets_cli(capsys, *words: str) -> tuple[int, str, str]:
    code = cli.main(["presets", *words])
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_new_list_show_set_copy_delete(project, capsys, tmp_path):
    prompt = tmp_path / "prompt.md"
    prompt.write_text("You review diffs.\n")
    code, out, err = presets_cli(capsys, "new", "reviewer", "--description", "Use when: reviewing",
                                 "--tools", "read,grep", "--model", "demo/scripted", "--prompt-file", str(prompt))
    assert code == 0 and out == "" and "Wrote project preset reviewer" in err
    code, out, _ = presets_cli(capsys, "set", "reviewer", "max_tool_calls=4", "model=")
    assert code == 0 and presets.get("reviewer").budget == {"max_tool_calls": 4}
    assert presets.get("reviewer").model is None
    code, out, err = presets_cli(capsys, "show", "reviewer")
    assert code == 0 and out == (project / ".pi" / "subagents" / "reviewer.md").read_text()
    assert "You review diffs." in out and "maxToolCalls: 4" in out and "project preset reviewer" in err
    code, out, err = presets_cli(capsys, "copy", "reviewer", "reviewer2", "--global")
    assert code == 0 and (tmp_path / "agent" / "subagents" / "reviewer2.md").is_file()
    code, out, _ = presets_cli(capsys)
    lines = out.splitlines()
    assert lines[0].split() == ["NAME", "SCOPE", "MODEL", "DESCRIPTION", "PATH"]
    assert lines[1].startswith("reviewer ") and "project" in lines[1] and "Use when: reviewing" in lines[1]
    assert lines[2].startswith("reviewer2 ") and "global" in lines[2]
    code, out, _ = presets_cli(capsys, "list", "--json")
    rows = json.loads(out)
    assert [(r["name"], r["scope"], r["model"]) for r in rows] == [("reviewer", "project", None),
                                                                  ("reviewer2", "global", None)]
    assert rows[0]["path"] == str(project / ".pi" / "subagents" / "reviewer.md")
    code, out, err = presets_cli(capsys, "delete", "reviewer2", "--global")
    assert code == 0 and "Deleted global preset reviewer2" in err
    assert not (tmp_path / "agent" / "subagents" / "reviewer2.md").exists()


def test_cli_list_shows_what_is_wrong_grouped_under_the_table(project, capsys):
    claude = project / ".claude" / "agents"
    for folder in ("one", "two"):
        (claude / folder).mkdir(parents=True)
        (claude / folder / "fixer.md").write_text(f"---\nname: fixer\ndescription: from {folder}\n---\n")
    (claude / "web.md").write_text("---\nname: web\ndescription: Use when: browsing\ntools: Read, WebFetch\n"
                                   "effort: low\n---\n")
    (claude / "broken.md").write_text("---\nname: broken\ntools: 42\n---\n")
    code, out, err = presets_cli(capsys)
    assert code == 0 and [line.split()[0] for line in out.splitlines()] == ["NAME", "fixer", "web"]
    lines = err.splitlines()
    assert lines[0] == "Not loaded (1 file; running one of these names raises its error):"
    assert lines[1].startswith(f"  broken (claude-project): Preset file {claude.resolve() / 'broken.md'}: 'tools' must")
    assert lines[2] == "Names several files claim (1; the last in its folder's listing is kept, as Claude Code keeps it):"
    assert lines[3].startswith("  fixer (claude-project): kept ") and "; shadowed " in lines[3]
    assert lines[4:] == ["Notes (1 preset):", "  web (claude-project): not strict YAML: the value of 'description' "
                         "holds ': ' or another YAML sign unquoted; read as quoted text, as Claude Code reads it (quote "
                         "it to silence this); tools a pi child cannot have are left out (no pi equivalent: WebFetch); "
                         "pi cannot honour effort (Claude Code's): the child runs without them"]
    code, out, _ = presets_cli(capsys, "list", "--json")
    assert [len(row["notes"]) for row in json.loads(out)] == [0, 3]


@pytest.mark.parametrize("words, code, message", [
    (["new", "x", "--description", "d", "--max"], 2, "unrecognized arguments"),
    (["new", "x"], 2, "required: --description"),
    (["set", "x", "oops"], 2, "'oops' is not FIELD=VALUE"),
    (["set", "nope", "model=a/b"], 1, "Unknown preset: 'nope'"),
    (["show", "nope"], 1, "Unknown preset: 'nope'"),
    (["delete", "nope"], 1, "No project preset named 'nope'"),
    (["new", "bad", "--description", "d", "--tools", "read,a b"], 1, "invalid tool name 'a b'"),
])
def test_cli_errors_go_to_stderr_with_exit_2_for_usage_and_1_for_a_refusal(project, capsys, words, code, message):
    try:
        found = cli.main(["presets", *words])
    except SystemExit as exc:  # argparse's usage errors
        found = exc.code
    out, err = capsys.readouterr()
    assert found == code and message in err and out == ""
    assert not (project / ".pi" / "subagents" / "bad.md").exists()
