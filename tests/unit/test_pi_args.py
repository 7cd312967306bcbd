"""Preset fields -> pi flags (argv only; the prompt goes through stdin)."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import pi_argv
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
                    "--append-system-prompt", str(tmp_path / "sp.md")]


def test_profile_flags_map_to_pi_flags(tmp_path):
    argv = argv_of(tmp_path, "thinking: high\nnoSkills: true\nnoContextFiles: true\nnoExtensions: true\n"
                             "extraArgs: [--verbose]\n")
    tail = argv[argv.index("--append-system-prompt") + 2:]
    assert tail == ["--thinking", "high", "--no-skills", "--no-context-files", "--no-extensions", "--verbose"]


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
    with pytest.warns(UserWarning, match="permissionMode: plan and its tools leave no pi tool"):
        assert argv_of(tmp_path, "tools: Write, Edit\npermissionMode: plan\n")[-1] == "--no-tools"
