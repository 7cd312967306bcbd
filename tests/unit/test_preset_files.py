"""Preset discovery, parsing and error messages."""

from __future__ import annotations

from pathlib import Path

import re
import warnings

import pytest

from nbsubagents import _preset_files as presets
from nbsubagents._preset_files import Preset, PresetError
from nbsubagents._preset_files.discover import preset_files
from nbsubagents._templates import stylesheet
from nbsubagents._views.presets import PresetList, list_presets


@pytest.fixture
def agent(tmp_path, monkeypatch) -> Path:
    """An isolated pi agent dir; its subagents/ holds the global presets."""
    directory = tmp_path / "agent"
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(directory))
    return directory


@pytest.fixture
def project(tmp_path, monkeypatch, agent) -> Path:
    """A project root the test runs inside (no .pi/subagents until a test writes one)."""
    root = tmp_path / "proj"
    root.mkdir()
    monkeypatch.chdir(root)
    return root


def write(directory: Path, filename: str, text: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / filename
    path.write_text(text, encoding="utf-8")
    return path


def preset_md(name: str, description: str = "does things", extra: str = "", body: str = "") -> str:
    return f"---\nname: {name}\ndescription: {description}\n{extra}---\n{body}"


def global_dir(agent: Path) -> Path:
    return agent / "subagents"


def project_dir(project: Path) -> Path:
    return project / ".pi" / "subagents"


# --- locations ---


def test_agent_dir_uses_env_and_expands_tilde(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("PI_CODING_AGENT_DIR", "~/custom-agent")
    assert presets.agent_dir() == tmp_path / "custom-agent"


def test_agent_dir_defaults_to_home_pi_agent(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("PI_CODING_AGENT_DIR", raising=False)
    assert presets.agent_dir() == tmp_path / ".pi" / "agent"


# --- discovery ---


def test_global_presets_are_discovered(agent, project):
    write(global_dir(agent), "scout.md", preset_md("scout", "Fast repo exploration"))
    found = presets.discover()
    assert list(found) == ["scout"]
    assert found["scout"].scope == "global"
    assert found["scout"].description == "Fast repo exploration"
    assert found["scout"].path == global_dir(agent) / "scout.md"


def test_no_preset_dirs_means_no_presets(agent, project):
    assert presets.discover() == {}


def test_project_presets_found_from_nested_subdirectory(agent, project):
    write(project_dir(project), "planner.md", preset_md("planner"))
    nested = project / "src" / "pkg"
    nested.mkdir(parents=True)
    found = presets.discover(nested)
    assert found["planner"].scope == "project"
    assert found["planner"].path == project_dir(project).resolve() / "planner.md"


def test_default_cwd_is_working_directory(agent, project, monkeypatch):
    write(project_dir(project), "planner.md", preset_md("planner"))
    nested = project / "deep"
    nested.mkdir()
    monkeypatch.chdir(nested)
    assert "planner" in presets.discover()


def test_nearest_project_dir_wins(agent, project):
    write(project_dir(project), "outer.md", preset_md("outer"))
    inner = project / "sub"
    write(project_dir(inner), "inner.md", preset_md("inner"))
    assert list(presets.discover(inner)) == ["inner"]


def test_project_preset_overrides_global_by_name(agent, project):
    write(global_dir(agent), "scout.md", preset_md("scout", "global scout", "model: a/b\n"))
    write(global_dir(agent), "other.md", preset_md("other"))
    write(project_dir(project), "my-scout.md", preset_md("scout", "project scout"))
    found = presets.discover()
    assert found["scout"].scope == "project"
    assert found["scout"].description == "project scout"
    assert found["scout"].model is None
    assert found["other"].scope == "global"


def test_discovered_presets_are_sorted_by_name(agent, project):
    write(global_dir(agent), "1.md", preset_md("zeta"))
    write(project_dir(project), "2.md", preset_md("alpha"))
    write(global_dir(agent), "3.md", preset_md("mid"))
    assert list(presets.discover()) == ["alpha", "mid", "zeta"]


def test_project_dir_same_as_global_loads_once_as_global(tmp_path, monkeypatch):
    root = tmp_path / "home"
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(root / ".pi"))
    write(root / ".pi" / "subagents", "scout.md", preset_md("scout"))
    monkeypatch.chdir(root)
    found = presets.discover()
    assert found["scout"].scope == "global"


def test_non_markdown_and_dotfiles_are_ignored(agent, project):
    d = global_dir(agent)
    write(d, "scout.md", preset_md("scout"))
    write(d, "notes.txt", "not a preset")
    write(d, "._scout.md", "\x00garbage")
    (d / "runs").mkdir()
    assert list(presets.discover()) == ["scout"]


def test_edits_are_seen_without_a_cache(agent, project):
    path = write(global_dir(agent), "scout.md", preset_md("scout", "v1"))
    assert presets.get("scout").description == "v1"
    path.write_text(preset_md("scout", "v2"), encoding="utf-8")
    assert presets.get("scout").description == "v2"


# --- parsing fields ---


def test_body_becomes_stripped_prompt(tmp_path):
    path = write(tmp_path, "a.md", preset_md("a", body="\n\nYou are a scout.\n\nBe quick.\n\n"))
    assert presets.parse_preset(path, "global").prompt == "You are a scout.\n\nBe quick."


def test_empty_body_gives_empty_prompt(tmp_path):
    path = write(tmp_path, "a.md", preset_md("a"))
    assert presets.parse_preset(path, "global").prompt == ""


def test_optional_fields_default_to_none(tmp_path):
    p = presets.parse_preset(write(tmp_path, "a.md", preset_md("a")), "project")
    assert (p.model, p.tools, p.thinking, p.extra, p.scope) == (None, None, None, {}, "project")


def test_model_is_kept(tmp_path):
    path = write(tmp_path, "a.md", preset_md("a", extra="model: github-copilot/gpt-4o\n"))
    assert presets.parse_preset(path, "global").model == "github-copilot/gpt-4o"


def test_tools_comma_string_is_normalized(tmp_path):
    path = write(tmp_path, "a.md", preset_md("a", extra="tools: read, grep,find ,, ls\n"))
    assert presets.parse_preset(path, "global").tools == ("read", "grep", "find", "ls")


def test_tools_yaml_list_is_normalized(tmp_path):
    path = write(tmp_path, "a.md", preset_md("a", extra="tools:\n  - read\n  - ' bash '\n  - ''\n"))
    assert presets.parse_preset(path, "global").tools == ("read", "bash")


def test_tools_explicitly_empty_is_empty_tuple(tmp_path):
    path = write(tmp_path, "a.md", preset_md("a", extra="tools: []\n"))
    assert presets.parse_preset(path, "global").tools == ()


def test_tools_of_wrong_type_is_rejected(tmp_path):
    path = write(tmp_path, "a.md", preset_md("a", extra="tools: 42\n"))
    with pytest.raises(PresetError) as err:
        presets.parse_preset(path, "global")
    assert str(err.value) == (
        f"Preset file {path}: 'tools' must be a comma-separated string or a list of tool names, "
        "got 42"
    )


def test_tools_list_with_non_strings_is_rejected(tmp_path):
    path = write(tmp_path, "a.md", preset_md("a", extra="tools: [read, {x: 1}]\n"))
    with pytest.raises(PresetError, match="'tools' must be a comma-separated string or a list"):
        presets.parse_preset(path, "global")


def test_invalid_tool_name_is_rejected(tmp_path):
    path = write(tmp_path, "a.md", preset_md("a", extra="tools: read, rm -rf\n"))
    with pytest.raises(PresetError) as err:
        presets.parse_preset(path, "global")
    message = str(err.value)
    assert message.startswith(f"Preset file {path}: invalid tool name 'rm -rf'")
    assert "letters, digits" in message


@pytest.mark.parametrize("level", presets.THINKING_LEVELS)
def test_valid_thinking_levels_are_accepted(tmp_path, level):
    path = write(tmp_path, "a.md", preset_md("a", extra=f"thinking: {level}\n"))
    assert presets.parse_preset(path, "global").thinking == level


def test_thinking_is_case_insensitive(tmp_path):
    path = write(tmp_path, "a.md", preset_md("a", extra="thinking: High\n"))
    assert presets.parse_preset(path, "global").thinking == "high"


def test_invalid_thinking_names_allowed_values(tmp_path):
    path = write(tmp_path, "a.md", preset_md("a", extra="thinking: max\n"))
    with pytest.raises(PresetError) as err:
        presets.parse_preset(path, "global")
    assert str(err.value) == (
        f"Preset file {path}: 'thinking' must be one of off, minimal, low, medium, high, xhigh, "
        "got 'max'"
    )


def test_extra_keys_are_preserved(tmp_path):
    path = write(
        tmp_path, "a.md",
        preset_md("a", extra="timeout: 300\nexcludeTools: [bash]\ncolor: blue\n"),
    )
    p = presets.parse_preset(path, "global")
    assert p.extra == {"color": "blue"}
    assert p.timeout == 300.0 and p.exclude_tools == ("bash",)


def test_harms_haus_profile_fields_are_typed(tmp_path):
    path = write(tmp_path, "a.md", preset_md("a", extra=(
        "noSkills: true\nnoContextFiles: true\nnoExtensions: true\nnoTools: true\n"
        "extraArgs: [--verbose]\ntimeout: 12.5\n")))
    p = presets.parse_preset(path, "global")
    assert (p.no_skills, p.no_context_files, p.no_extensions, p.no_tools) == (True, True, True, True)
    assert p.extra_args == ("--verbose",) and p.timeout == 12.5 and p.restricts_tools


@pytest.mark.parametrize("extra, message", [
    ("tools: read\nexcludeTools: bash\n", "'tools' and 'excludeTools' are mutually exclusive"),
    ("noTools: yes please\n", "'noTools' must be true or false"),
    ("skills: [a]\nnoSkills: true\n", "'skills' and 'noSkills' are mutually exclusive"),
    ("extraArgs: ['--x; rm -rf /']\n", "contains shell metacharacters"),
    ("extraArgs: ['--x=$(id)']\n", "contains shell metacharacters"),
    ("extraArgs: 7\n", "'extraArgs' must be a list of pi arguments"),
    ("tools: read\nextraArgs: [--tools=bash]\n", 'Refusing extraArg "--tools=bash" which would override'),
    ("noTools: true\nextraArgs: [-t, bash]\n", 'Refusing extraArg "-t"'),
    ("timeout: -3\n", "'timeout' must be a positive, finite number of seconds"),
    ("extraArgs: [--api-key, sk-123]\n", 'Refusing extraArg "--api-key": an API key may only come from the environment'),
])
def test_bad_profile_fields_are_clear_errors(tmp_path, extra, message):
    path = write(tmp_path, "a.md", preset_md("a", extra=extra))
    with pytest.raises(PresetError, match=re.escape(message)):
        presets.parse_preset(path, "global")


def test_extra_args_without_tool_restriction_may_name_tools(tmp_path):
    p = presets.parse_preset(write(tmp_path, "a.md", preset_md("a", extra="extraArgs: --tools read\n")), "global")
    assert p.extra_args == ("--tools", "read")


def test_claude_code_inherit_model_means_no_model(tmp_path):
    p = presets.parse_preset(write(tmp_path, "a.md", preset_md("a", extra="model: inherit\n")), "global")
    assert p.model is None


def test_preset_is_hashable_and_frozen(tmp_path):
    p = presets.parse_preset(write(tmp_path, "a.md", preset_md("a", extra="x: 1\n")), "global")
    assert hash(p) == hash(p)
    with pytest.raises(AttributeError):
        p.name = "b"  # type: ignore[misc]


def test_crlf_and_bom_files_parse(tmp_path):
    path = tmp_path / "a.md"
    path.write_bytes("\ufeff---\r\nname: a\r\ndescription: d\r\n---\r\nBody\r\n".encode("utf-8"))
    p = presets.parse_preset(path, "global")
    assert (p.name, p.description, p.prompt) == ("a", "d", "Body")


def test_claude_code_agent_file_loads_unchanged(tmp_path):
    text = (
        "---\n"
        "name: code-reviewer\n"
        "description: Expert code review specialist. Use immediately after writing code.\n"
        "tools: Read, Grep, Glob, Bash\n"
        "model: sonnet\n"
        "color: purple\n"
        "---\n"
        "\n"
        "You are a senior code reviewer ensuring high standards.\n"
    )
    p = presets.parse_preset(write(tmp_path, "code-reviewer.md", text), "project")
    assert p.name == "code-reviewer"
    assert p.tools == ("Read", "Grep", "Glob", "Bash")
    assert p.model == "sonnet"
    assert p.extra == {"color": "purple"}
    assert p.prompt == "You are a senior code reviewer ensuring high standards."


# --- error messages ---


def test_malformed_yaml_reports_file_line_number(tmp_path):
    # file line 1 '---', 2 name, 3 description, 4 tools:, 5 the broken item (no `key: value` line the second reading
    # of a frontmatter, Claude Code's, could quote)
    path = write(tmp_path, "a.md", "---\nname: a\ndescription: d\ntools:\n  - [unclosed\n---\nbody\n")
    with pytest.raises(PresetError) as err:
        presets.parse_preset(path, "global")
    message = str(err.value)
    assert message == (
        f"Preset file {path}: malformed YAML frontmatter at line 6, column 1: expected ',' or ']', but got "
        "'<stream end>' (while parsing a flow sequence started at line 5). "
        "Fix the YAML between the '---' lines."
    )


def test_malformed_yaml_line_number_points_at_the_bad_line(tmp_path):
    path = write(tmp_path, "a.md", "---\nname: a\nhooks:\n  Stop: run: this\n---\n")
    with pytest.raises(PresetError) as err:
        presets.parse_preset(path, "global")
    assert str(err.value) == (
        f"Preset file {path}: malformed YAML frontmatter at line 4, column 12: mapping values are not "
        "allowed here. The value of 'Stop' contains ': ', which YAML reads as a new key: put the value "
        'in quotes, e.g. Stop: "run: this"'
    )


@pytest.mark.parametrize("line, value", [
    ("description: Use when: the tests fail", "Use when: the tests fail"),  # 8 VoltAgent files
    ('description: Triggers on: "a", \'b\' #1 [x] {y}', 'Triggers on: "a", \'b\' #1 [x] {y}'),
    ("description: a\\b: c", "a\\b: c"),
    ("model: [unclosed", "[unclosed"),
])
def test_a_frontmatter_strict_yaml_refuses_is_read_as_claude_code_reads_it(tmp_path, line, value):
    field = line.split(":", 1)[0]
    path = write(tmp_path, "a.md", f"---\nname: a\n{line}\ntools: [Read, Grep]\nhooks:\n\tStop: echo\n---\nbody\n")
    with pytest.warns(presets.PresetWarning, match=f"not strict YAML: the value of '{field}' holds ': '"):
        preset = presets.parse_preset(path, "global")
    assert getattr(preset, field) == value and preset.tools == ("Read", "Grep") and preset.prompt == "body"
    assert preset.extra == {"hooks": {"Stop": "echo"}}  # a tab that indents: two spaces, as Claude Code reads it


def test_a_quoted_value_and_a_list_are_not_rewritten_by_the_second_reading(tmp_path):
    path = write(tmp_path, "a.md", '---\nname: a\ndescription: "x: y"\ntools: [Read, "Bash(git diff:*)"]\n'
                                   "model: a: b\n---\n")
    with pytest.warns(presets.PresetWarning, match="the value of 'model' holds") as record:
        preset = presets.parse_preset(path, "global")
    assert (preset.description, preset.tools, preset.model) == ("x: y", ("Read", "Bash(git diff:*)"), "a: b")
    assert "'description'" not in str(record[0].message) and "'tools'" not in str(record[0].message)


def test_missing_frontmatter_is_explained(tmp_path):
    path = write(tmp_path, "a.md", "# Scout\nYou are a scout.\n")
    with pytest.raises(PresetError) as err:
        presets.parse_preset(path, "global")
    assert str(err.value) == (
        f"Preset file {path}: no YAML frontmatter; start the file with '---', then name: and "
        "description:, then '---'"
    )


def test_unclosed_frontmatter_is_explained(tmp_path):
    path = write(tmp_path, "a.md", "---\nname: a\ndescription: d\n")
    with pytest.raises(PresetError, match="never closed"):
        presets.parse_preset(path, "global")


def test_missing_name_is_the_file_stem(tmp_path):
    path = write(tmp_path, "code-scout.md", "---\ndescription: d\n---\n")
    assert presets.parse_preset(path, "global").name == "code-scout"


def test_missing_description_loads_empty_with_one_warning(tmp_path):
    path = write(tmp_path, "a.md", "---\nname: a\n---\n")
    with pytest.warns(presets.PresetWarning, match="no description") as record:
        p = presets.parse_preset(path, "global")
        presets.parse_preset(path, "global")
    assert p.description == "" and len(record) == 1


def test_empty_frontmatter_is_a_preset_named_after_the_file(tmp_path):
    path = write(tmp_path, "helper.md", "---\n---\nbody\n")
    with pytest.warns(presets.PresetWarning, match="no description"):
        p = presets.parse_preset(path, "global")
    assert (p.name, p.description, p.prompt) == ("helper", "", "body")


def test_empty_name_is_rejected(tmp_path):
    path = write(tmp_path, "a.md", "---\nname: ''\ndescription: d\n---\n")
    with pytest.raises(PresetError, match="'name' is empty; give the preset a name"):
        presets.parse_preset(path, "global")


def test_non_string_name_is_rejected(tmp_path):
    path = write(tmp_path, "a.md", "---\nname: 123\ndescription: d\n---\n")
    with pytest.raises(PresetError, match="'name' must be a string, got 123; quote it"):
        presets.parse_preset(path, "global")


def test_frontmatter_that_is_not_a_mapping_is_rejected(tmp_path):
    path = write(tmp_path, "a.md", "---\n- name\n- description\n---\n")
    with pytest.raises(PresetError, match="must be 'key: value' lines"):
        presets.parse_preset(path, "global")


def test_a_name_several_files_claim_is_the_last_listed_with_one_warning(agent, project, monkeypatch):
    claude = project / ".claude" / "agents"
    for folder, mark in (("", "top"), ("a", "in-a"), ("b/deeper", "deeper")):
        write(claude / folder, "reviewer.md" if mark != "deeper" else "other.md", preset_md("reviewer", mark))
    write(claude, "z.md", preset_md("other"))
    listing = [p.description for p in (presets.parse_preset(path, "claude-project", warn=False)
                                       for path in preset_files(claude, nested=True)) if p.name == "reviewer"]
    assert sorted(listing) == ["deeper", "in-a", "top"]  # subfolders are read, each where the listing has it
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # listing and discovering warn of nothing: the listing shows it
        found = list_presets()
    assert [p.name for p in found] == ["other", "reviewer"]
    kept = next(p for p in found if p.name == "reviewer")
    assert kept.description == listing[-1]  # the last in the folder's listing order, as Claude Code keeps it
    [dup] = found.duplicates
    assert dup.kept == kept.path and len(dup.shadowed) == 2 and kept.path not in dup.shadowed
    text = repr(found)
    assert "Names several files claim (1; the last in its folder's listing is kept, as Claude Code keeps it):" in text
    assert f"  reviewer (claude-project): kept {kept.path}; shadowed " in text
    with pytest.warns(presets.PresetWarning) as record:
        assert presets.get("reviewer").path == kept.path
        presets.get("reviewer")
        presets.get("other")
    assert len(record) == 1 and str(record[0].message) == dup.message
    assert f"{kept.path} is kept" in dup.message and all(str(p) in dup.message for p in dup.shadowed)


def test_same_name_in_different_scopes_is_not_a_duplicate(agent, project):
    write(global_dir(agent), "x.md", preset_md("scout"))
    write(project_dir(project), "x.md", preset_md("scout"))
    assert presets.discover()["scout"].scope == "project"


def test_several_broken_files_are_reported_together(agent, project):
    g = write(global_dir(agent), "nofm.md", "just text\n")
    write(global_dir(agent), "ok.md", preset_md("ok"))
    d = project_dir(project).resolve()
    write(d, "noname.md", "---\ndescription: [d\n  x\n---\n")
    write(d, "badtools.md", preset_md("t", extra="tools: 42\n"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # shown in the listing, not warned at each run
        listed = list_presets()
    assert [p.name for p in listed] == ["ok"]
    messages = [p.message for p in listed.problems]
    assert len(messages) == 3
    assert messages[0].startswith(f"Preset file {g}: no YAML frontmatter")
    assert messages[1].startswith(f"Preset file {d / 'badtools.md'}: 'tools' must be")
    assert messages[2].startswith(f"Preset file {d / 'noname.md'}: malformed YAML frontmatter at line")
    assert [p.name for p in listed.problems] == ["nofm", "t", "noname"]
    text = repr(listed)
    assert "Not loaded (3 files; running one of these names raises its error):" in text
    assert f"  t (project): Preset file {d / 'badtools.md'}: 'tools' must be" in text


def test_preset_error_is_a_value_error():
    assert issubclass(PresetError, ValueError)


# --- get ---


def test_get_returns_named_preset(agent, project):
    write(global_dir(agent), "scout.md", preset_md("scout", body="Explore."))
    assert presets.get("scout").prompt == "Explore."


def test_get_unknown_lists_available_names(agent, project):
    write(global_dir(agent), "b.md", preset_md("b"))
    write(project_dir(project), "a.md", preset_md("a"))
    with pytest.raises(PresetError) as err:
        presets.get("x")
    assert str(err.value) == 'Unknown preset: "x". Available presets: a, b'


def test_get_unknown_with_no_presets_says_where_to_add_them(agent, project):
    with pytest.raises(PresetError) as err:
        presets.get("x")
    assert str(err.value) == (
        f'Unknown preset: "x". No presets found: add a markdown file to '
        f"{global_dir(agent)}/ or {project.resolve()}/.pi/subagents/"
    )


# --- list_presets ---


def test_list_presets_repr_is_an_aligned_table(agent, project):
    long = "Reviews code carefully " * 10
    write(global_dir(agent), "r.md", preset_md("reviewer", long, "model: anthropic/claude\n"))
    write(project_dir(project), "s.md", preset_md("scout", "Fast exploration", "tools: read,grep\n"))
    listed = list_presets()
    assert isinstance(listed, PresetList) and isinstance(listed, list)
    assert [p.name for p in listed] == ["reviewer", "scout"]
    lines = repr(listed).splitlines()
    assert lines[0].split() == ["NAME", "SCOPE", "MODEL", "TOOLS", "DESCRIPTION"]
    assert lines[1].split()[:3] == ["reviewer", "global", "anthropic/claude"]
    assert "(all)" in lines[1] and lines[1].endswith("…")
    assert len(lines[1]) < len(long)
    assert lines[2].split()[:5] == ["scout", "project", "-", "read,", "grep"]
    assert lines[0].index("SCOPE") == lines[1].index("global") == lines[2].index("project")
    assert lines[0].index("DESCRIPTION") == lines[2].index("Fast exploration")


def test_empty_list_repr_says_where_presets_are_looked_for(agent, project):
    listed = list_presets()
    text = repr(listed)
    assert text.startswith("No presets found.")
    assert str(global_dir(agent)) in text
    assert ".pi/subagents/" in text
    assert "<p>No presets found." in listed._repr_html_()


def test_html_repr_escapes_everything(agent, project):
    write(global_dir(agent), "x.md", preset_md("x", "'<b>bold</b> & more'", "model: m<1>\n"))
    html_text = list_presets()._repr_html_()
    assert html_text.startswith("<div class='nbsubagents-surface'>" + stylesheet("base") + "<table>")
    assert "&lt;b&gt;bold&lt;/b&gt; &amp; more" in html_text
    assert "m&lt;1&gt;" in html_text
    assert "<b>" not in html_text
    assert "<th class='nbsubagents-left'>description</th>" in html_text
    assert "<code>x</code>" in html_text


def test_to_records_gives_plain_dicts(agent, project):
    path = write(global_dir(agent), "s.md", preset_md("s", "d", "tools: read\nmodel: m\n"))
    write(global_dir(agent), "t.md", preset_md("t"))
    assert list_presets().to_records() == [
        {"name": "s", "description": "d", "model": "m", "tools": ["read"], "scope": "global",
         "path": str(path)},
        {"name": "t", "description": "does things", "model": None, "tools": None,
         "scope": "global", "path": str(global_dir(agent) / "t.md")},
    ]


def test_list_presets_returns_preset_objects(agent, project):
    write(global_dir(agent), "s.md", preset_md("s"))
    assert all(isinstance(p, Preset) for p in list_presets())
