"""Claude Code as the harness of a run (issue 28): the real `claude` binary (harnesses/, pinned) against the
scripted model, which speaks the Anthropic Messages API; nothing of the machine's user goes in or out (its
config is the run's own folder)."""

from __future__ import annotations

import json
import subprocess
import time

import pytest
from helpers import REPO, use_claude_code, wait_for

import nbsubagents
from nbsubagents._views.panel_state import PanelState
from nbsubagents import _config as config
from nbsubagents._config import NbSubagentsError

HISTORIAN = (REPO / "tests" / "fixtures" / "agent-corpus" / "claude" / ".claude" / "agents" / "git-historian.md")


@pytest.fixture
def claude(project, scripted, monkeypatch):
    """The project, with Claude Code pointed at the scripted model through its environment only."""
    use_claude_code(monkeypatch, scripted.url, project.parent / "home")
    return project


def commit_all(folder) -> None:
    subprocess.run(["git", "init", "-q"], cwd=folder, check=True)
    subprocess.run(["git", "add", "-A"], cwd=folder, check=True)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "first"], cwd=folder,
                   check=True)


def events(run) -> list[dict]:
    return [json.loads(line) for line in run.paths.events.read_text().splitlines()]


def test_the_three_scripted_tasks_complete_under_claude_code(claude, scripted):
    tasks = [{"preset": "scout", "task": "read README.md", "harness": "claude-code"},
             {"preset": "scribe", "task": "read README.md\nedit README.md: second -> third", "harness": "claude-code"},
             {"preset": "scout", "task": "run: echo from-claude", "harness": "claude-code"}]
    read, edit, command = nbsubagents.run_parallel(tasks, show=False)
    for run in (read, edit, command):
        assert run.status == "completed", run.error
        assert run.record.harness == "claude-code" and run.result["harness"] == "claude-code"
        assert run.result["usage"]["input"] > 0 and run.result["usage"]["output"] > 0
        assert run.result["usage"]["cost"] > 0 and run.result["sessionId"]
        kinds = [e["type"] for e in events(run)]
        assert kinds[:2] == ["run_start", "session"] and kinds[-1] == "run_end"
        assert (claude / ".pi" / "subagents" / "runs" / run.run_id / "claude").is_dir()  # its own config
    assert [e["name"] for e in events(read) if e["type"] == "tool_call"] == ["read"]
    assert "Reading README.md" in read.transcript and "Harness: claude-code" in read.transcript
    text, html = PanelState.of_run(read).static_record()  # its panel, as a saved notebook keeps it
    assert text.startswith("✓ ") and "Reading README.md" in text and 'class="nbsubagents-static' in html
    assert (claude / "README.md").read_text() == "# Demo project\nthird line\n"
    assert "Finished editing README.md (+1 -1)" in edit.transcript
    results = [e for e in events(command) if e["type"] == "tool_result"]
    assert results[0]["name"] == "bash" and results[0]["text"] == "from-claude"
    assert "Done. 1 step:\n- run: echo from-claude: from-claude" == command.result["finalText"]
    # Claude Code was given the preset's body and its tools in its own names; pi's verbs came back
    asked = [r for r in scripted.requests if "MARKER-SCOUT-PROMPT" in json.dumps(r.get("system"))]
    assert asked and {"Read", "Bash"} <= {t["name"] for t in asked[0]["tools"]}
    assert "Edit" not in {t["name"] for t in asked[0]["tools"]}
    listed = nbsubagents.runs()
    assert {read.run_id, edit.run_id, command.run_id} <= set(listed["run_id"])


def test_an_isolated_claude_code_run_yields_a_patch(claude):
    commit_all(claude)
    run = nbsubagents.run("scribe", "read README.md\nedit README.md: second -> fourth", harness="claude-code",
                          isolation="worktree", show=False)
    assert run.status == "completed", run.error
    assert (claude / "README.md").read_text() == "# Demo project\nsecond line\n"  # the original is untouched
    assert "+fourth line" in (run.dir / "changes.patch").read_text()
    assert run.result["changes"]["files"] == 1


def test_claude_codes_own_turn_limit_ends_the_run_as_the_budget(claude):
    run = nbsubagents.run("scout", "read README.md\nrun: echo two\nrun: echo three", harness="claude-code",
                          max_turns=1, show=False)
    assert run.status == "failed" and run.result["stopReason"] == "budget:turns"
    assert "--max-turns" in run.record.argv and "turn limit" in run.error
    assert run.result["toolCalls"] == 1


def test_timeout_and_cancel_end_a_claude_code_run(claude):  # bounds loose enough for a shared machine
    config.configure(extend_timeout_debounce=0.5)
    started = time.monotonic()
    run = nbsubagents.run("scout", "run: sleep 30", harness="claude-code", timeout=2, show=False)
    assert run.status == "failed" and run.result["stopReason"] == "timeout"
    assert time.monotonic() - started < 20
    background = nbsubagents.start("scout", "run: sleep 30", harness="claude-code")
    wait_for(lambda: '"tool_call"' in (background.paths.events.read_text() if background.paths.events.exists()
                                       else ""), what="the sleep to start")
    background.cancel()
    background.wait()
    assert background.status == "aborted" and background.error == "cancelled"


def test_an_option_claude_code_cannot_honour_is_refused_naming_both(claude):
    with pytest.raises(NbSubagentsError, match=r"The claude-code harness cannot honour ask \(set by the call\)"):
        nbsubagents.run("scout", "read README.md", harness="claude-code", ask=True, show=False)
    with pytest.raises(NbSubagentsError, match="cannot honour fallback_models"):
        nbsubagents.run("scout", "read README.md", harness="claude-code", fallback_models=["demo/other"],
                        show=False)
    assert not list((claude / ".pi" / "subagents" / "runs").glob("*/meta.json"))  # nothing was written


def test_a_claude_code_agent_file_runs_with_its_tools_as_written(claude):
    commit_all(claude)
    agents = claude / ".claude" / "agents"
    agents.mkdir(parents=True)
    text = HISTORIAN.read_text().replace("tools:", "harness: claude-code\ntools:", 1)
    (agents / "git-historian.md").write_text(text)
    run = nbsubagents.run("git-historian", "run: git log -1 --format=%s\nrun: touch made.txt", show=False)
    assert run.status == "completed", run.error
    argv = run.record.argv
    assert argv[argv.index("--allowedTools") + 1:argv.index("--permission-mode")] == [
        "Read", "Grep", "Bash(git log:*)", "Bash(git diff:*)"]
    results = [e for e in events(run) if e["type"] == "tool_result"]
    assert [(r["isError"], r["text"]) for r in results][0] == (False, "first")  # git log may run
    assert results[1]["isError"] and "denied" in results[1]["text"]  # no other command
    assert not (claude / "made.txt").exists()


def test_a_typed_result_comes_from_claude_codes_structured_output_and_a_follow_up_resumes_it(claude):
    schema = {"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]}
    first = nbsubagents.run("scout", 'say: {"answer": 42}', harness="claude-code", output_schema=schema,
                            show=False)
    assert first.status == "completed", first.error
    assert first.data == {"answer": 42} and "--json-schema" in first.record.argv
    follow = first.follow_up("run: echo again")  # a new run, under the harness of the one it continues
    follow.wait()
    assert follow.status == "completed", follow.error
    assert follow.record.harness == "claude-code"
    argv = follow.record.argv
    assert argv[argv.index("--resume") + 1] == first.result["sessionId"]
    assert "Previously" not in follow.paths.prompt.read_text()  # its own session goes on, not retold
