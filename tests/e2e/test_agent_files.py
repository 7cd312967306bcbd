"""Real users' agent files (tests/fixtures/agent-corpus): Claude Code collections and pi extensions' agent folders.

A broken file costs that file only; what Claude Code loads loads (an unquoted ': ', a name two files claim: the one
Claude Code keeps); Claude Code's tool syntax, disallowedTools and permissionMode mean what their authors meant;
pi-extension files without name or description load; ``model: sonnet`` runs when pi has one. What a person should
know is in the preset listing, grouped, not warned at each run.
"""

from __future__ import annotations

import json
import os
import shutil
import warnings
from pathlib import Path

import pytest

import nbsubagents
from nbsubagents import _config as config
from nbsubagents import _preset_files as presets
from nbsubagents._preset_files import parse as preset_parse
from nbsubagents._preset_files.discover import preset_files
from helpers import pi_argv
from nbsubagents._preset_files import PresetError, PresetWarning
from nbsubagents._child.harnesses.pi import write_agent_dir

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "agent-corpus"
GOOD = ["architect", "code-reviewer", "doc-writer", "explorer", "fixer", "generalist", "gh-triage", "git-historian",
        "implementer", "nomodel", "orchestrator", "personal-helper", "scout", "scribe", "summarizer", "test-runner",
        "typo-agent", "web-researcher"]


@pytest.fixture
def corpus(project, tmp_path, monkeypatch):
    """The conftest project plus the corpus: .claude/agents, more .pi/subagents, and a home with ~/.claude/agents."""
    shutil.copytree(CORPUS / "claude" / ".claude", project / ".claude")
    for path in (CORPUS / "pi" / ".pi" / "subagents").iterdir():
        shutil.copy(path, project / ".pi" / "subagents" / path.name)
    home = tmp_path / "home"
    shutil.copytree(CORPUS / "home", home)
    monkeypatch.setenv("HOME", str(home))
    preset_parse._warned.clear()
    return project


def listed(**kwargs):
    """The listing, and each preset's notes as ``path: note`` (what it shows under the table); listing warns nothing."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", PresetWarning)
        result = nbsubagents.presets(**kwargs)
    return result, [f"Preset file {p.path}: {note}" for p in result for note in presets.notes(p)]


def argv_for(name: str, model: str = "demo/scripted") -> tuple[list[str], list[str]]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        preset = presets.get(name)
    return pi_argv(preset, model)


def tools_flag(argv: list[str]) -> str | None:
    if "--no-tools" in argv:
        return "(none)"
    return argv[argv.index("--tools") + 1] if "--tools" in argv else None


# --- 1. a broken file costs that file only --------------------------------------------------------


def test_presets_list_every_good_file_and_show_each_broken_one_with_its_error(corpus):
    found, _ = listed()
    assert [p.name for p in found] == GOOD
    scopes = {p.name: p.scope for p in found}
    assert scopes["code-reviewer"] == "claude-project"  # the project's Claude agent overrides the user's
    assert scopes["personal-helper"] == "claude-user" and scopes["explorer"] == "project"
    problems = {p.name: p for p in found.problems}
    assert sorted(problems) == ["notes"]
    assert "retired" not in problems and "retired" not in scopes  # disabled: true switches a file off
    assert problems["notes"].message.endswith("notes.md: no YAML frontmatter; start the file with '---', then name: "
                                              "and description:, then '---'")
    text = repr(found)
    assert "Not loaded (1 file; running one of these names raises its error):" in text
    assert "  notes (project): Preset file " in text
    assert "Names several files claim (1; " in text and "  fixer (claude-project): kept " in text
    assert "<span class='nbsubagents-problem'>" in found._repr_html_()
    assert [r["name"] for r in found.problem_records()] == [p.name for p in found.problems]


def test_an_unquoted_colon_loads_as_claude_code_reads_it_and_the_listing_says_so(corpus):
    runner = presets.get("test-runner")
    assert runner.description == "Use when: tests fail and need a diagnosis" and runner.tools == ("Read", "Bash")
    _, notes = listed()
    assert f"Preset file {runner.path}: not strict YAML: the value of 'description' holds ': '" in "\n".join(notes)


def test_two_files_of_one_name_run_the_one_claude_code_keeps_with_one_warning(corpus):
    claude = corpus.resolve() / ".claude" / "agents"
    last = [p for p in preset_files(claude, nested=True) if p.name.startswith("fixer-")][-1]
    with pytest.warns(PresetWarning) as record:
        run = nbsubagents.run("fixer", "read README.md", model="demo/scripted", show=False)
    assert run.status == "completed", run.error
    assert run.record.preset_source == str(last)  # the last in the folder's listing, as Claude Code keeps it
    [warned] = [str(w.message) for w in record if issubclass(w.category, PresetWarning)]
    assert warned.startswith(f"2 claude-project files are named 'fixer': {last} is kept")
    assert "shadowed: " in warned and "fixer-" in warned.split("shadowed: ")[1]


def test_calling_a_broken_preset_raises_its_error_while_good_ones_run(corpus):
    with warnings.catch_warnings():
        warnings.simplefilter("error", PresetWarning)  # the other files' notes and problems are not warned at a run
        good, broken = nbsubagents.run_parallel([{"preset": "scout", "task": "read README.md"},
                                                 {"preset": "notes", "task": "read README.md"}], show=False)
    assert good.status == "completed" and "# Demo project" in good.output
    assert broken.status == "failed" and broken.error.endswith("notes.md: no YAML frontmatter; start the file with "
                                                               "'---', then name: and description:, then '---'")


def test_a_broken_file_in_a_higher_scope_shadows_a_good_one_below(corpus):
    (corpus / ".pi" / "subagents" / "code-reviewer.md").write_text("---\nname: code-reviewer\ntools: 42\n---\n")
    found, _ = listed()
    assert "code-reviewer" not in [p.name for p in found]
    with pytest.raises(PresetError, match="code-reviewer.md: 'tools' must be a comma-separated string"):
        presets.get("code-reviewer")


def test_claude_agent_folders_can_be_switched_off_in_settings(corpus):
    (corpus / ".pi" / "settings.json").write_text(json.dumps({"subagents": {"claudeAgents": False}}))
    found, _ = listed()
    assert [p.name for p in found] == ["explorer", "implementer", "nomodel", "scout", "scribe", "summarizer"]
    assert [p.name for p in found.problems] == ["notes"]
    (corpus / ".pi" / "settings.json").unlink()
    assert "code-reviewer" in [p.name for p in listed()[0]]
    nbsubagents.configure(claude_agents=False)
    assert "code-reviewer" not in [p.name for p in listed()[0]]
    config.reset()
    (corpus / ".pi" / "settings.json").write_text(json.dumps({"subagents": {"claudeAgents": "no"}}))
    with pytest.raises(nbsubagents.NbSubagentsError, match='"subagents.claudeAgents" must be true or false, got \'no\''):
        nbsubagents.presets()


# --- 2. Claude Code files run as their authors meant ---------------------------------------------


@pytest.mark.parametrize("name, tools, left_out", [
    ("code-reviewer", "read,grep,find,bash", []),
    ("doc-writer", "read,bash,grep,find,ls", []),                  # disallowedTools: Write, Edit, MultiEdit, ...
    ("architect", "read,grep,find,ls", []),                        # permissionMode: plan = read-only tools
    ("orchestrator", "read", ["Task(worker)", "Agent(scout, reviewer)"]),
    ("gh-triage", "read", ["mcp__github__*", "mcp__github__create_issue", "github:list_pull_requests"]),
    ("generalist", None, []),                                      # tools: "*" = all of pi's tools
    ("typo-agent", "read,bash,edit,write,grep,find,ls", []),        # no tools line: every tool pi has
    ("web-researcher", "(none)", ["WebFetch", "WebSearch"]),
    ("git-historian", "read,grep", ["Bash(git log:*)", "Bash(git diff:*)"]),  # pi cannot restrict arguments
    ("personal-helper", "read", []),
    ("explorer", "read,grep,find,ls", []),
    ("implementer", "read,bash,edit,write", []),
])
def test_claude_tool_syntax_becomes_pi_tools(corpus, name, tools, left_out):
    argv, ignored = argv_for(name)
    assert tools_flag(argv) == tools
    assert ignored == left_out


def test_what_a_pi_child_cannot_have_is_said_once_per_file(corpus):
    found, messages = listed()
    web = [m for m in messages if "web-researcher.md" in m]
    assert len(web) == 2
    assert any("tools a pi child cannot have are left out (no pi equivalent: WebFetch, WebSearch)" in m for m in web)
    assert any("its tools leave no pi tool: the child runs with no tools" in m for m in web)
    orchestrator = next(m for m in messages if "orchestrator.md" in m)
    assert "(sub-agents: Task(worker), Agent(scout, reviewer))" in orchestrator
    triage = next(m for m in messages if "gh-triage.md" in m)
    assert "(MCP tools: mcp__github__*, mcp__github__create_issue, github:list_pull_requests)" in triage
    assert repr(found).count("web-researcher (claude-project): ") == 1  # once, in the listing's notes
    row = next(line for line in repr(found).splitlines() if line.startswith("web-researcher"))
    assert "(none) (not for pi: WebFetch," in row


def test_unknown_keys_warn_once_with_did_you_mean(corpus):
    _, messages = listed()
    typo = [m for m in messages if "typo-agent.md" in m]
    assert len(typo) == 2
    assert any(m.endswith("unknown key 'tool' (ignored); did you mean 'tools'?") for m in typo)
    assert any(m.endswith("unknown key 'modle' (ignored); did you mean 'model'?") for m in typo)
    assert presets.get("typo-agent").tools is None  # the typo leaves all tools: hence the note
    # keys other formats use for things a pi child has no use for are accepted quietly
    quiet = ("summarizer.md", "architect.md", "gh-triage.md", "code-reviewer.md")
    assert not [m for m in messages if "unknown key" in m and m.split(":")[0].endswith(quiet)]


def test_permission_modes_are_known_and_a_wrong_one_is_refused(corpus):
    path = corpus / ".pi" / "subagents" / "bad-mode.md"
    path.write_text("---\nname: bad-mode\ndescription: d\npermissionMode: readonly\n---\n")
    with pytest.raises(PresetError, match="'permissionMode' must be one of default, acceptEdits, dontAsk, "
                                          "bypassPermissions, plan, got 'readonly'"):
        presets.get("bad-mode")
    path.write_text("---\nname: bad-mode\ndescription: d\npermissionMode: acceptEdits\ntools: Read, Write\n---\n")
    assert tools_flag(argv_for("bad-mode")[0]) == "read,write"  # a pi child never asks: nothing to change


@pytest.mark.pi_matrix
def test_disallowed_tools_are_removed_in_the_childs_argv(corpus, scripted):
    run = nbsubagents.run("doc-writer", "read README.md", model="demo/scripted", show=False)
    assert run.status == "completed", run.error
    argv = run.record.argv
    assert argv[argv.index("--tools") + 1] == "read,bash,grep,find,ls"
    assert run.record.disallowed_tools == ["Write", "Edit", "MultiEdit", "NotebookEdit"]
    offered = sorted(t["function"]["name"] for t in scripted.requests[0]["tools"])
    assert offered == ["bash", "find", "grep", "ls", "read"]  # what pi itself gave the model
    assert run.record.requested_model == "demo/scripted" and run.record.requested_model_source == "call"


@pytest.mark.pi_matrix
def test_plan_mode_child_gets_read_only_tools(corpus, scripted):
    run = nbsubagents.run("architect", "read README.md", model="demo/scripted", show=False)
    assert run.status == "completed", run.error
    assert sorted(t["function"]["name"] for t in scripted.requests[0]["tools"]) == ["find", "grep", "ls", "read"]
    assert run.record.permission_mode == "plan"


# --- 3. pi-extension files load ------------------------------------------------------------------


def test_pi_extension_files_without_name_or_description_load(corpus):
    found, messages = listed()
    by_name = {p.name: p for p in found}
    assert by_name["explorer"].description == "Explores a codebase quickly and reports what it found"
    assert by_name["explorer"].thinking == "low"
    assert by_name["implementer"].description == ""
    assert by_name["implementer"].extra == {"display_name": "Implementer", "prompt_mode": "append"}
    assert by_name["implementer"].budget == {"max_turns": 30}  # pi-subagents' max_turns is a budget now
    assert [m for m in messages if "implementer.md" in m] == [
        f"Preset file {corpus.resolve() / '.pi' / 'subagents' / 'implementer.md'}: no description (a description "
        "tells people and agents when to pick this preset)"]


@pytest.mark.pi_matrix
def test_a_nameless_pi_extension_preset_runs_under_its_file_name(corpus, scripted):
    run = nbsubagents.run("implementer", "run: echo from-implementer", model="demo/scripted", show=False)
    assert run.status == "completed" and "from-implementer" in run.output
    assert run.record.preset == "implementer"


# --- 4. model names as pi understands them ----------------------------------------------------------


@pytest.mark.pi_matrix
def test_a_sonnet_preset_runs_when_pi_has_a_matching_model(corpus, scripted, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    # a provider of our own that serves Claude model ids (pi's built-in anthropic provider speaks another API)
    write_agent_dir(os.environ["PI_CODING_AGENT_DIR"], scripted.url, provider="claude-proxy",
                    models=("claude-sonnet-4-5-20250929", "claude-sonnet-4-5", "claude-opus-4-1"))
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    run = nbsubagents.run("code-reviewer", "read README.md", show=False)
    assert run.status == "completed", run.error
    assert run.record.requested_model == "sonnet" and run.record.requested_model_source == "preset"
    assert run.record.resolved_model == "claude-proxy/claude-sonnet-4-5"
    assert run.record.argv[run.record.argv.index("--model") + 1] == "claude-proxy/claude-sonnet-4-5"
    assert run.result["model"] == "claude-proxy/claude-sonnet-4-5"  # pi's own answer, from its message_end
    assert scripted.requests[0]["model"] == "claude-sonnet-4-5"
    thinking = nbsubagents.run("code-reviewer", "say: hi", model="opus:high", show=False)
    assert thinking.record.resolved_model == "claude-proxy/claude-opus-4-1" and thinking.record.model_thinking == "high"
    assert "claude-proxy/claude-opus-4-1:high" in thinking.record.argv


def test_model_inherit_means_no_preset_model(corpus):
    with pytest.raises(nbsubagents.NbSubagentsError, match='No model for preset "doc-writer": pass model='):
        nbsubagents.run("doc-writer", "read README.md", show=False)


def test_sonnet_without_such_a_model_is_a_short_error(corpus):
    config.reset()
    with pytest.raises(nbsubagents.NbSubagentsError) as err:
        nbsubagents.run("code-reviewer", "read README.md", show=False)
    assert str(err.value) == ('Unknown model "sonnet" (from preset "code-reviewer"). '
                              "Available models (1): demo/scripted")


def test_the_docs_preset_table_lists_every_field_and_what_is_ignored():
    page = (Path(__file__).resolve().parents[2] / "docs" / "user" / "presets.md").read_text()
    section = page[page.index("## Every field, and Claude Code compatibility"):page.index("## Which model a run uses")]
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    first_cells = " ".join(row.split("|")[1] for row in rows)
    for key in sorted(presets.KNOWN_KEYS | presets.IGNORED_KEYS):
        assert f"`{key}`" in first_cells, f"the README's preset table does not list {key}"
    assert "anything else" in first_cells
