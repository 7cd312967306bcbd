"""The public agent-file corpus (tests/fixtures/agent-corpus-public: 29 files of wshobson/agents, VoltAgent and 0xfurai,
MIT): every file Claude Code loads loads here, as Claude Code loads it (issue 54 items 3, 6)."""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import pytest

from nbsubagents import _preset_files as presets
from nbsubagents._child.harnesses.pi import PI_TOOLS, effective_tools
from nbsubagents._pi import models
from nbsubagents._preset_files.discover import claimed_name, preset_files
from nbsubagents._views.presets import list_presets

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "agent-corpus-public"
# What Claude Code 2.1.197 listed in its system/init record for this folder (measured; its own agents left out).
CLAUDE_CODE_LOADS = sorted([
    "ab-test-analysis", "ai-engineer", "code-review-preshipment", "conductor-validator", "content-marketer",
    "docker-expert", "framework-migration-legacy-modernizer", "gdpr-ccpa-compliance", "go-expert", "growth-loops",
    "healthcare-admin", "hipaa-compliance", "postgres-expert", "python-expert", "python-pro", "rust-expert",
    "sales-automator", "search-specialist", "security-scanning-security-auditor", "sql-pro", "team-lead",
    "typescript-pro", "ui-designer", "vue-expert"])
UNQUOTED_COLON = ["ab-test-analysis", "gdpr-ccpa-compliance", "growth-loops", "hipaa-compliance"]
# pi 1.3.0's Anthropic models (`pi --list-models`): no claude-sonnet-4-20250514 among them
PI_1 = tuple("anthropic/" + m for m in (
    "claude-fable-5 claude-fable-5-1 claude-haiku-4-5 claude-haiku-4-5-20251001 claude-opus-4-5 claude-opus-4-8 "
    "claude-sonnet-4-5 claude-sonnet-4-5-20250929 claude-sonnet-4-6").split())


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    """A project with the corpus copied into its .claude/agents, as a user copies the collections."""
    root = tmp_path / "proj"
    shutil.copytree(CORPUS / ".claude", root / ".claude")
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path / "agent"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(root)
    return root


def files(project: Path) -> list[Path]:
    return preset_files(project / ".claude" / "agents", nested=True)


def test_every_file_claude_code_loads_loads_here_and_nothing_is_warned(project):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        found = presets.scan(project)
        listing = repr(list_presets(project))
    assert sorted(found.presets) == CLAUDE_CODE_LOADS and found.problems == [] and len(files(project)) == 29
    kept = {p.path for p in found.presets.values()}
    shadowed = {path for d in found.duplicates.values() for path in d.shadowed}
    assert kept | shadowed == set(files(project)) and not kept & shadowed  # each file: kept, or named as shadowed
    assert "Not loaded" not in listing and "Names several files claim (5; " in listing


def test_a_name_in_two_collections_is_the_file_claude_code_keeps(project):
    found = presets.scan(project)
    assert sorted(found.duplicates) == ["ai-engineer", "content-marketer", "search-specialist", "typescript-pro",
                                        "vue-expert"]
    for name, duplicate in found.duplicates.items():
        claiming = [path for path in files(project) if claimed_name(path) == name]
        assert duplicate.kept == claiming[-1] == found.presets[name].path  # the last in the listing order
        assert duplicate.shadowed == tuple(claiming[:-1])


def test_an_unquoted_colon_in_a_description_is_read_as_claude_code_reads_it(project):
    found = presets.scan(project)
    for name in UNQUOTED_COLON:
        preset = found.presets[name]
        assert ": " in preset.description and preset.description.startswith("Use when the user")
        assert preset.notes[0].startswith("not strict YAML: the value of 'description' holds ': '")
        assert preset.tools and preset.prompt  # the rest of the file as written


def test_under_pi_no_tools_line_is_every_tool_pi_has_and_the_rest_is_noted_once(project):
    found = presets.scan(project)
    bare = [p for p in found.presets.values() if p.tools is None]
    assert {p.name for p in bare} >= {"python-expert", "go-expert", "sql-pro", "ui-designer"}
    assert all(effective_tools(p) == (list(PI_TOOLS), []) for p in bare)
    growth = presets.notes(found.presets["growth-loops"], "pi")
    assert growth[1] == "tools a pi child cannot have are left out (no pi equivalent: WebFetch, WebSearch)"
    assert presets.notes(found.presets["growth-loops"], "claude-code") == growth[:1]  # Claude Code has them
    assert not [n for p in found.presets.values() for n in presets.notes(p) if "cannot honour" in n]  # color: no


def test_the_models_the_files_name_resolve_under_pi_1(project, monkeypatch):
    monkeypatch.setattr(models, "available_models", lambda program, harness=None: PI_1)
    found = presets.scan(project)
    chosen = {p.name: models.choose_model(None, p.name, p.model, "pi") for p in found.presets.values()
              if p.model is not None}
    once = [p for p in found.presets.values() if p.name not in found.duplicates]  # which of two is kept: the disk's
    assert {p.name for p in once if p.model is None} == {*UNQUOTED_COLON, "healthcare-admin", "sql-pro",
                                                         "ui-designer"}  # no model line, or inherit
    dated = {name: c for name, c in chosen.items() if c.requested == "claude-sonnet-4-20250514"}
    assert len(dated) >= 5 and {c.resolved for c in dated.values()} == {"anthropic/claude-sonnet-4-5"}
    assert all(c.note and "its nearest, anthropic/claude-sonnet-4-5, is used" in c.note for c in dated.values())
    assert chosen["team-lead"].resolved == "anthropic/claude-fable-5-1" and chosen["team-lead"].note is None
    assert {c.requested for c in chosen.values()} >= {"claude-sonnet-4-20250514", "fable", "haiku", "opus", "sonnet"}
