"""The public agent-file corpus (tests/fixtures/agent-corpus-public, MIT) run offline end to end through the public
API: a few of its files under real pi and under real Claude Code, each against the scripted model (issue 54 item 6).

Under pi: no tools line gives the child pi's seven tools; the 0xfurai agents' dated model runs on the nearest model pi
has, and the run's notes say so; the tools pi has no meaning for are left out. Under Claude Code: the run's notes are
about Claude Code only (none of pi's). Nothing about the other files of the folder is warned at a run."""

from __future__ import annotations

import json
import os
import shutil
import warnings
from pathlib import Path

import pytest
from helpers import REPO

import nbsubagents
from nbsubagents._child.harnesses.pi import PI_TOOLS, write_agent_dir
from nbsubagents._preset_files import PresetWarning

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "agent-corpus-public"
CLAUDE = REPO / "harnesses" / "node_modules" / ".bin" / "claude"


@pytest.fixture
def public(project, tmp_path, monkeypatch):
    """The conftest project with the corpus copied into its .claude/agents."""
    shutil.copytree(CORPUS / ".claude", project / ".claude")
    return project


def quietly(tasks: list[dict]) -> list:
    with warnings.catch_warnings():
        warnings.simplefilter("error", PresetWarning)  # the folder's notes and duplicates are the listing's to show
        return nbsubagents.run_parallel(tasks, show=False)


def rows(*runs) -> dict:
    listed = nbsubagents.runs()
    wanted = {run.run_id for run in runs}
    return {row["run_id"]: row for row in listed.to_dict("records") if row["run_id"] in wanted}


def asked_with(scripted, marker: str) -> dict:
    """The first model request of the run whose system prompt holds ``marker`` (a line of its agent file's body)."""
    return next(r for r in scripted.requests if marker in json.dumps(r.get("system", r.get("messages"))))


@pytest.mark.pi_matrix
def test_corpus_files_run_under_pi_with_all_its_tools_and_the_nearest_model(public, scripted, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache-proxy"))
    # a provider serving Claude ids that pi 1.x lists, without claude-sonnet-4-20250514 (every 0xfurai agent's model)
    write_agent_dir(os.environ["PI_CODING_AGENT_DIR"], scripted.url, provider="claude-proxy",
                    models=("claude-sonnet-4-5", "claude-haiku-4-5"))
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    python, growth = quietly([{"preset": "python-expert", "task": "run: echo from-corpus"},
                              {"preset": "growth-loops", "task": "read README.md", "model": "claude-haiku-4-5"}])
    assert python.status == "completed" and "from-corpus" in python.output, python.error
    assert growth.status == "completed" and "# Demo project" in growth.output, growth.error
    record = python.record
    assert (record.requested_model, record.resolved_model) == ("claude-sonnet-4-20250514", "claude-proxy/claude-sonnet-4-5")
    assert record.notes == ['model "claude-sonnet-4-20250514" (from preset "python-expert") is not one pi has here; its '
                            "nearest, claude-proxy/claude-sonnet-4-5, is used (pi's models: `pi --list-models`)"]
    offered = asked_with(scripted, "Advanced Python features like decorators and metaclasses")["tools"]
    assert sorted(t["function"]["name"] for t in offered) == sorted(PI_TOOLS)  # no tools line: all seven
    assert growth.record.ignored_tools == ["WebFetch", "WebSearch"]
    assert growth.record.preset_notes[1] == ("tools a pi child cannot have are left out (no pi equivalent: WebFetch, "
                                             "WebSearch)")
    assert growth.record.preset_notes[0].startswith("not strict YAML: the value of 'description' holds ': '")
    by_id = rows(python, growth)
    assert by_id[python.run_id]["preset"] == "python-expert" and by_id[growth.run_id]["preset"] == "growth-loops"
    assert {row["harness"] for row in by_id.values()} == {"pi"}
    assert {row["status"] for row in by_id.values()} == {"completed"}
    assert by_id[python.run_id]["model"] == "claude-proxy/claude-sonnet-4-5"


def test_corpus_files_run_under_claude_code_with_only_its_own_notes(public, scripted, monkeypatch):
    assert CLAUDE.is_file(), "Claude Code is installed by `make setup-test` (harnesses/package.json)"
    monkeypatch.setenv("NBSUBAGENTS_CLAUDE", str(CLAUDE))
    monkeypatch.setenv("ANTHROPIC_BASE_URL", scripted.url.removesuffix("/v1"))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "scripted-dummy-key")
    monkeypatch.setenv("HOME", str(public.parent / "home"))
    python, growth = quietly([{"preset": "python-expert", "task": "read README.md", "harness": "claude-code"},
                              {"preset": "growth-loops", "task": "read README.md", "harness": "claude-code"}])
    for run in (python, growth):
        assert run.status == "completed" and "# Demo project" in run.output, run.error
        assert run.record.harness == "claude-code" and not run.record.ignored_tools
        assert not [n for n in run.record.preset_notes or () if "pi" in n.split()]  # none of pi's notes
    assert python.record.requested_model == "claude-sonnet-4-20250514" and python.record.notes is None
    assert growth.record.preset_notes == [growth.record.preset_notes[0]]  # the frontmatter note alone
    assert asked_with(scripted, "Advanced Python features like decorators and metaclasses")  # the agent file's body reached Claude Code
    by_id = rows(python, growth)
    assert {(row["preset"], row["harness"], row["status"]) for row in by_id.values()} == {
        ("python-expert", "claude-code", "completed"), ("growth-loops", "claude-code", "completed")}
