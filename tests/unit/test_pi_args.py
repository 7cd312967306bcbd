"""Preset fields -> pi flags (argv only; the prompt goes through stdin)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from helpers import pi_argv
from nbsubagents._child.harnesses import Request, pi
from nbsubagents._child.harnesses.pi import COMPACT_EXTENSION
from nbsubagents._preset_files import parse_preset


def preset(tmp_path: Path, frontmatter: str):
    path = tmp_path / "p.md"
    path.write_text(f"---\nname: p\ndescription: d\n{frontmatter}---\nbody\n")
    return parse_preset(path, "project")


def argv_of(tmp_path: Path, frontmatter: str) -> list[str]:
    argv, _ = pi_argv(preset(tmp_path, frontmatter), run_dir=tmp_path, system_prompt_path=tmp_path / "sp.md")
    return argv


def test_base_argv_has_json_mode_session_model_and_prompt_file(tmp_path):
    argv = argv_of(tmp_path, "")
    assert argv == ["pi", "--mode", "rpc", "--session", str(tmp_path / "child-session.jsonl"), "--model", "demo/scripted",
                    "--no-extensions", "--append-system-prompt", str(tmp_path / "sp.md")]  # pi of unknown version


def fake_pi(tmp_path: Path, version: str) -> Path:
    """A pi script in its npm package (only its package.json is read)."""
    package = tmp_path / "node_modules" / "@earendil-works" / "pi-coding-agent"
    (package / "dist").mkdir(parents=True)
    (package / "package.json").write_text(f'{{"name": "@earendil-works/pi-coding-agent", "version": "{version}"}}')
    (package / "dist" / "cli.js").write_text("")
    return package / "dist" / "cli.js"


@pytest.mark.parametrize("version, project_config, flags", [
    ("1.3.0", False, ["--no-approve"]), ("1.3.0", True, ["--approve"]),
    ("0.73.1", False, ["--no-extensions", "--extension", str(COMPACT_EXTENSION)]),
    ("0.73.1", True, ["--extension", str(COMPACT_EXTENSION)])])
def test_the_projects_own_config_loads_only_when_the_run_says_so(tmp_path, version, project_config, flags):
    program = fake_pi(tmp_path, version)
    argv, env = pi.build(Request(program=str(program), run_dir=str(tmp_path), cwd=str(tmp_path),
                                 model="demo/scripted", project_config=project_config))
    assert argv[argv.index("--model") + 2:] == flags and env == {}


def test_pi_0_does_not_install_the_packages_the_projects_settings_name(tmp_path):
    program = fake_pi(tmp_path, "0.73.1")
    (tmp_path / ".pi").mkdir()
    (tmp_path / ".pi" / "settings.json").write_text('{"packages": ["npm:helper"], "npmCommand": ["sh", "-c", "x"]}')
    request = Request(program=str(program), run_dir=str(tmp_path), cwd=str(tmp_path), model="demo/scripted")
    assert pi.build(request)[1] == {"PI_OFFLINE": "1"}  # pi 0.x installs missing packages at start unless offline
    assert pi.build(replace(request, project_config=True))[1] == {}


def test_profile_flags_map_to_pi_flags(tmp_path):
    argv = argv_of(tmp_path, "thinking: high\nnoSkills: true\nnoContextFiles: true\nnoExtensions: true\n"
                             "extraArgs: [--verbose]\n")
    tail = argv[argv.index("--append-system-prompt") + 2:]
    assert tail == ["--thinking", "high", "--no-skills", "--no-context-files", "--no-extensions", "--verbose"]


@pytest.mark.parametrize("scope, tools", [("claude-project", "read,bash,edit,write,grep,find,ls"),
                                          ("claude-user", "read,bash,edit,write,grep,find,ls"),
                                          ("project", None), ("global", None)])
def test_no_tools_line_in_a_claude_code_file_is_every_tool_pi_has(tmp_path, scope, tools):
    path = tmp_path / "p.md"
    path.write_text("---\nname: p\ndescription: d\n---\nbody\n")
    argv, left_out = pi_argv(parse_preset(path, scope))
    assert (argv[argv.index("--tools") + 1] if "--tools" in argv else None) == tools and left_out == []
    # a pi preset keeps pi's own default: its four and every tool of the extensions it loads (no --tools)
    path.write_text("---\nname: p\ndescription: d\ndisallowedTools: Bash\n---\nbody\n")
    argv, _ = pi_argv(parse_preset(path, scope))
    assert argv[argv.index("--tools") + 1] == "read,edit,write,grep,find,ls"


def test_skills_tools_and_no_tools(tmp_path):
    assert argv_of(tmp_path, "skills: [lint, review]\n")[-4:] == ["--skill", "lint", "--skill", "review"]
    assert argv_of(tmp_path, "tools: read, Grep, Glob, WebFetch\n")[-2:] == ["--tools", "read,grep,find"]
    assert argv_of(tmp_path, "tools: WebFetch\n")[-1] == "--no-tools"
    assert argv_of(tmp_path, "noTools: true\n")[-1] == "--no-tools"
    assert argv_of(tmp_path, "excludeTools: [bash]\n")[-2:] == ["--tools", "read,edit,write,grep,find,ls"]


def test_exclude_tools_naming_no_pi_tool_is_an_error(tmp_path):
    with pytest.raises(ValueError, match="excludeTools names WebFetch, which pi does not have"):
        argv_of(tmp_path, "excludeTools: [WebFetch]\n")


def test_an_explicitly_empty_tool_list_gives_no_tools_without_a_warning(tmp_path):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert argv_of(tmp_path, "tools: []\n")[-1] == "--no-tools"
    planned = preset(tmp_path, "tools: Write, Edit\npermissionMode: plan\n")
    assert pi_argv(planned, run_dir=tmp_path)[0][-1] == "--no-tools"
    assert any("permissionMode: plan and its tools leave no pi tool" in note for note in pi.preset_notes(planned))
