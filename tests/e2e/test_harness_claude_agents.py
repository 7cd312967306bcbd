"""Issue 54, item 1: a Claude Code agent file runs under Claude Code as written. The real pinned Claude Code reads the
file itself (copied into the run's own Claude folder, ``--agent NAME``): its hook fires, its MCP server (a stdio
server of this test, in Python) answers a tool call, its effort reaches the model request; the chosen file wins over
a same-named one in the project's ``.claude/agents``. The model is the scripted one (Anthropic Messages)."""

from __future__ import annotations

import json
import sys

import pytest
from helpers import REPO
from test_harness_claude import commit_all

import nbsubagents
from nbsubagents._pi.scripted import ScriptedModel, demo_step

CLAUDE = REPO / "harnesses" / "node_modules" / ".bin" / "claude"
# A stdio MCP server with one tool, shout: its answer names the key its environment was given.
MCP_SERVER = '''import json, os, sys
for line in sys.stdin:
    msg = json.loads(line)
    key, method = msg.get("id"), msg.get("method")
    if method == "initialize":
        result = {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
                  "serverInfo": {"name": "echo", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": [{"name": "shout", "description": "Upper-cases text", "inputSchema": {
            "type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}}]}
    elif method == "tools/call":
        text = msg["params"]["arguments"]["text"].upper() + " key=" + os.environ.get("ECHO_KEY", "none")
        result = {"content": [{"type": "text", "text": "MCP-ANSWER " + text}]}
    else:
        continue
    print(json.dumps({"jsonrpc": "2.0", "id": key, "result": result}), flush=True)
'''
AGENT = """---
name: shouter
description: Runs a command, then asks its MCP server.
tools: Bash, mcp__echo__shout
effort: low
hooks:
  PreToolUse:
    - matcher: Bash
      hooks:
        - type: command
          command: "echo hook-fired >> {marker}"
mcpServers:
  - echo:
      type: stdio
      command: {python}
      args: ["{server}"]
      env:
        ECHO_KEY: key-from-the-file
---
You shout. MARKER-{who}
"""


def script(body: dict, index: int) -> dict:
    """The demo model, except for a task ``shout: TEXT``: a command, then the MCP tool, then the tools' answers."""
    task = [m["content"] for m in body["messages"] if m["role"] == "user"][-1]
    if not task.startswith("shout: "):
        return demo_step(body, index)
    if index == 0:
        return {"tool_calls": [{"name": "bash", "arguments": {"command": "echo from-bash"}}]}
    if index == 1:
        return {"tool_calls": [{"name": "mcp__echo__shout", "arguments": {"text": task.removeprefix("shout: ")}}]}
    last = max(i for i, m in enumerate(body["messages"]) if m["role"] == "user")
    return {"text": " | ".join(m["content"] for m in body["messages"][last:] if m["role"] == "tool")}


@pytest.fixture
def claude(project, monkeypatch):
    """The project with Claude Code pointed at a scripted model that can call an MCP tool."""
    assert CLAUDE.is_file(), "Claude Code is installed by `make setup-test` (harnesses/package.json)"
    with ScriptedModel(script) as model:
        monkeypatch.setenv("NBSUBAGENTS_CLAUDE", str(CLAUDE))
        monkeypatch.setenv("ANTHROPIC_BASE_URL", model.url.removesuffix("/v1"))
        monkeypatch.setenv("ANTHROPIC_API_KEY", "scripted-dummy-key")
        monkeypatch.setenv("HOME", str(project.parent / "home"))
        (project.parent / "echo_server.py").write_text(MCP_SERVER)
        yield project, model


def agent_file(folder, who: str) -> str:
    return AGENT.format(marker=folder.parent / "hook-marker", python=sys.executable,
                        server=folder.parent / "echo_server.py", who=who)


def test_an_agent_files_hooks_mcp_servers_and_effort_reach_claude_code(claude):
    project, model = claude
    (project / ".claude" / "agents").mkdir(parents=True)
    (project / ".claude" / "agents" / "shouter.md").write_text(agent_file(project, "FILE"))
    run = nbsubagents.run("shouter", "shout: hello there", harness="claude-code", show=False)
    assert run.status == "completed", run.error
    assert (project.parent / "hook-marker").read_text() == "hook-fired\n"  # its PreToolUse hook ran, once
    # its MCP server was started with the file's environment and answered the model's call of its tool
    assert run.result["finalText"] == "from-bash | MCP-ANSWER HELLO THERE key=key-from-the-file"
    assert [r.get("output_config") for r in model.requests] == [{"effort": "low"}] * 3  # its three turns
    assert "MARKER-FILE" in json.dumps(model.requests[0]["system"])  # the file's body is the agent's prompt
    written = json.dumps(run.record.argv) + run.paths.meta.read_text()
    assert "key-from-the-file" not in written and "--agent" in run.record.argv  # its secrets stay in its file
    follow = run.follow_up("shout: again")  # its own session goes on, under the same agent file
    follow.wait()
    assert follow.status == "completed", follow.error
    assert follow.result["finalText"] == "from-bash | MCP-ANSWER AGAIN key=key-from-the-file"
    assert follow.record.argv[follow.record.argv.index("--resume") + 1] == run.result["sessionId"]
    assert (project.parent / "hook-marker").read_text() == "hook-fired\n" * 2


def test_an_isolated_agent_file_run_fires_its_hook_in_its_worktree(claude):
    project, model = claude
    (project / ".claude" / "agents").mkdir(parents=True)
    (project / ".claude" / "agents" / "shouter.md").write_text(  # the hook writes where it runs: the worktree
        agent_file(project, "FILE").replace(str(project.parent / "hook-marker"), "hook-marker.txt"))
    commit_all(project)
    run = nbsubagents.run("shouter", "shout: iso", harness="claude-code", isolation="worktree", show=False)
    assert run.status == "completed", run.error
    assert run.result["finalText"] == "from-bash | MCP-ANSWER ISO key=key-from-the-file"
    assert "+++ b/hook-marker.txt\n@@ -0,0 +1 @@\n+hook-fired" in (run.dir / "changes.patch").read_text()
    assert not (project / "hook-marker.txt").exists()  # the project itself is untouched


@pytest.mark.parametrize("project_config", [False, True])
def test_the_chosen_file_wins_over_a_same_named_project_agent(claude, project_config):
    project, model = claude
    (project / ".claude" / "agents").mkdir(parents=True)
    (project / ".claude" / "agents" / "shouter.md").write_text(
        "---\nname: shouter\ndescription: The project's own.\neffort: high\n---\nMARKER-PROJECT\n")
    (project / ".pi" / "subagents" / "shouter.md").write_text(agent_file(project, "CHOSEN"))  # the higher scope
    run = nbsubagents.run("shouter", "shout: chosen", harness="claude-code", project_config=project_config,
                          show=False)
    assert run.status == "completed", run.error
    assert run.result["finalText"] == "from-bash | MCP-ANSWER CHOSEN key=key-from-the-file"
    system = json.dumps(model.requests[0]["system"])
    assert "MARKER-CHOSEN" in system and "MARKER-PROJECT" not in system
    assert model.requests[0]["output_config"] == {"effort": "low"}
    argv = run.record.argv  # with the project's agents loaded, the run's copy has a name of its own
    assert argv[argv.index("--agent") + 1] == (f"shouter@{run.run_id}" if project_config else "shouter")


@pytest.mark.parametrize(("written", "asked"), [
    ("fable", "claude-fable-5"), ("haiku", "claude-haiku-4-5-20251001"),
    ("claude-sonnet-4-20250514", "claude-sonnet-4-20250514"),
    ("anthropic.claude-sonnet-4-20250514-v1:0", "anthropic.claude-sonnet-4-20250514-v1:0")])  # Bedrock's form
def test_claude_codes_own_model_names_are_its_to_resolve(claude, written, asked):
    project, model = claude
    (project / ".claude" / "agents").mkdir(parents=True)
    (project / ".claude" / "agents" / "named.md").write_text(
        f"---\nname: named\ndescription: Has a model.\nmodel: {written}\ncolor: blue\n---\nBe brief.\n")
    run = nbsubagents.run("named", "say: hi", harness="claude-code", show=False)
    assert run.status == "completed", run.error
    assert {r["model"] for r in model.requests} == {asked}
    assert run.record.requested_model == written and "--model" not in run.record.argv  # Claude Code read it
    called = nbsubagents.run("named", "say: hi", harness="claude-code", model="opus", show=False)
    assert called.status == "completed", called.error
    assert model.requests[-1]["model"] == "claude-opus-4-8"  # the call's model wins


def test_an_agent_file_claude_code_does_not_load_fails_the_run_saying_so(claude):
    project, model = claude
    (project / ".claude" / "agents").mkdir(parents=True)
    # an empty description: a preset without one still runs, but Claude Code skips the file, and `--agent shouter`
    # finds no such agent: Claude Code (its input being text) ends at once, before any model request, rather than
    # run as its default agent
    (project / ".claude" / "agents" / "shouter.md").write_text(
        agent_file(project, "FILE").replace("description: Runs a command, then asks its MCP server.",
                                            "description: |\n"))
    run = nbsubagents.run("shouter", "shout: hello", harness="claude-code", show=False)
    assert run.status == "failed" and "--agent 'shouter' not found" in run.error
    assert model.requests == [] and not (project.parent / "hook-marker").exists()
