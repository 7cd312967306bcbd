"""The harness seam (issue 28): the registry, Claude Code's argv and stream, the scripted Anthropic dialect, and the
checks around them (preset field, call option, refusals, finding the program)."""

from __future__ import annotations

import dataclasses
import json
import re
import os
import urllib.request
from pathlib import Path

import pytest

from nbsubagents._child import harnesses
from nbsubagents._child.events import PiEventAdapter
from nbsubagents._child.harnesses import Request, claude_code
from nbsubagents._child.harnesses.stream import Stream
from nbsubagents._config import NbSubagentsError
from nbsubagents._lifecycle import converse
from nbsubagents._lifecycle.prepare import refuse_unhonoured
from nbsubagents._lifecycle.spec import TaskSpec, as_spec
from nbsubagents._pi import locate, offline, scripted_anthropic
from nbsubagents._pi.scripted import ScriptedModel
from nbsubagents._preset_files.parse import PresetError, parse_preset
from nbsubagents._child.artifacts import RunPaths, atomic_write_json


PROGRAM, DEFAULTS = "/bin/claude", {}


def run_of(tmp_path: Path, **given) -> Request:
    """A harness's request: the test's fields (camelCase, as meta.json spells them) over a plain default."""
    fields = {"program": PROGRAM, "cwd": str(tmp_path), "run_dir": str(tmp_path / "run"), **DEFAULTS}
    for key, value in given.items():
        fields[re.sub(r"(?<!^)([A-Z])", lambda m: "_" + m[1].lower(), key)] = (
            tuple(value) if isinstance(value, list) else value)
    return Request(**fields)


# -- the registry ----------------------------------------------------------------------------------------------------
def test_an_unknown_harness_is_an_error_naming_the_known_ones():
    with pytest.raises(ValueError, match="Unknown harness 'claude'; the harnesses are pi, claude-code, codex"):
        harnesses.get("claude")


def test_pi_as_a_harness_is_what_exists():
    pi = harnesses.get("pi")
    assert pi.Adapter is PiEventAdapter and pi.REFUSES == {} and pi.PROGRAM == "pi"
    assert harnesses.get("claude-code") is claude_code and claude_code.PROGRAM == "claude"


# -- Claude Code's argv ----------------------------------------------------------------------------------------------
def test_a_typical_preset_becomes_claude_codes_flags(tmp_path):
    schema = tmp_path / "schema.json"
    schema.write_text('{"type": "object"}')
    argv, env = claude_code.build(run_of(tmp_path, model="sonnet", systemPrompt="Be brief.",
                                         tools=["read", "Grep", "Bash(git diff:*)"], disallowedTools=["write"],
                                         maxTurns=8, maxCost=0.5, outputSchemaPath=str(schema)))
    assert argv == ["/bin/claude", "-p", "--output-format", "stream-json", "--verbose",
                    "--append-system-prompt", "Be brief.", "--model", "sonnet",
                    "--tools", "Read,Grep,Bash", "--allowedTools", "Read", "Grep", "Bash(git diff:*)",
                    "--disallowedTools", "Write", "--permission-mode", "dontAsk", "--max-turns", "8",
                    "--max-budget-usd", "0.5", "--json-schema", '{"type":"object"}',
                    "--setting-sources", "user", "--strict-mcp-config"]  # the project's own config stays out
    assert env == {"CLAUDE_CONFIG_DIR": str(tmp_path / "run" / "claude"), "DISABLE_TELEMETRY": "1",
                   "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1"}
    assert (tmp_path / "run" / "claude").is_dir()


@pytest.mark.parametrize(("mode", "tools", "expected"), [
    (None, None, "bypassPermissions"),   # every tool, none asking: as a pi child
    (None, ["Read"], "dontAsk"),         # the tools as written, the rest denied
    ("default", ["Read"], "dontAsk"),    # what would be asked is denied: nobody can answer headless
    ("plan", None, "plan"), ("acceptEdits", ["Edit"], "acceptEdits"),
])
def test_each_permission_mode_means_something_headless(tmp_path, mode, tools, expected):
    argv, env = claude_code.build(run_of(tmp_path, permissionMode=mode, tools=tools))
    assert argv[argv.index("--permission-mode") + 1] == expected
    assert ("IS_SANDBOX" in env) == (expected == "bypassPermissions" and os.geteuid() == 0)


def test_no_tools_and_inherit_and_resume(tmp_path):
    earlier = tmp_path / "earlier" / "claude" / "projects" / "p"
    earlier.mkdir(parents=True)
    (earlier / "s1.jsonl").write_text("{}\n")
    argv, _ = claude_code.build(run_of(tmp_path, tools=[], model="inherit", resumeSession="s1",
                                       resumedRunDir=str(tmp_path / "earlier")))
    assert argv[argv.index("--tools") + 1] == "" and "--allowedTools" not in argv and "--model" not in argv
    assert argv[-2:] == ["--resume", "s1"]
    assert (tmp_path / "run" / "claude" / "projects" / "p" / "s1.jsonl").is_file()  # the session came along



# -- a Claude Code agent file, as written --------------------------------------------------------------------------
AGENT = "---\r\nname: shouter\r\ndescription: 'Use when: loud'\r\ntools: Read, mcp__echo__shout\r\n{more}---\r\nShout.\r\n"


def agent_run(tmp_path, more="", scope="claude-project", **given):
    folder = tmp_path / ".claude" / "agents"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "shouter.md").write_text(AGENT.format(more=more), newline="")
    return run_of(tmp_path, **{"presetFile": str(folder / "shouter.md"), "presetScope": scope,
                               "systemPrompt": "Shout.", "tools": ["Read", "mcp__echo__shout"], **given})


def test_an_agent_file_is_copied_as_written_and_run_by_name(tmp_path):
    run = agent_run(tmp_path, "effort: low\r\nhooks: {}\r\n", presetExtra={"effort": "low", "hooks": {}},
                    model="sonnet", modelSource="preset", maxTurns=3)
    argv, _ = claude_code.build(run)
    assert argv == ["/bin/claude", "-p", "--output-format", "stream-json", "--verbose", "--agent", "shouter",
                    "--effort", "low", "--allowedTools", "Read", "mcp__echo__shout", "--permission-mode", "dontAsk",
                    "--max-turns", "3", "--setting-sources", "user"]  # its prompt, tools and model: in the file
    copy = tmp_path / "run" / "claude" / "agents" / "shouter.md"
    assert copy.read_bytes() == (tmp_path / ".claude" / "agents" / "shouter.md").read_bytes()
    argv, _ = claude_code.build(dataclasses.replace(run, model="opus", model_source="call", project_config=True))
    assert argv[argv.index("--model") + 1] == "opus" and "--setting-sources" not in argv  # the call's model


def test_a_pi_style_preset_still_becomes_flags(tmp_path):
    argv, _ = claude_code.build(agent_run(tmp_path, scope="project", presetExtra={"display_name": "S"}))
    assert "--agent" not in argv and argv[argv.index("--append-system-prompt") + 1] == "Shout."
    assert not (tmp_path / "run" / "claude" / "agents").exists()


@pytest.mark.parametrize(("more", "given", "message"), [
    ("effort: 3\r\n", {"presetExtra": {"effort": 3}}, r"effort 3: Claude Code takes an agent's own effort only as "
                                                       r"one of low, medium, high, xhigh, max"),
    ("", {"tools": ["read", "bash"]}, "tools read, bash are pi's names.*write Read, Bash"),
    ("skills: lint\r\n", {"presetExtra": {"skills": ["lint"]}}, "skills: Claude Code .* preloads an agent file's "
                                                                 "skills only into a sub-agent"),
])
def test_what_claude_code_would_not_honour_as_written_is_refused_by_name(tmp_path, more, given, message):
    with pytest.raises(ValueError, match=message):
        claude_code.build(agent_run(tmp_path, more, **given))


def test_the_agent_is_named_as_claude_code_reads_the_name(tmp_path):
    run = agent_run(tmp_path)
    Path(run.preset_file).write_text("---\nname: 'shouter '  # spaces kept\ndescription: x # y\n---\nShout.\n")
    argv, _ = claude_code.build(run)
    assert argv[argv.index("--agent") + 1] == "shouter "
    Path(run.preset_file).write_text("---\nname: shouter # a comment\ndescription: x\n---\nShout.\n")
    argv, _ = claude_code.build(run)
    assert argv[argv.index("--agent") + 1] == "shouter"


def test_an_agent_file_claude_code_would_not_load_is_refused(tmp_path):
    run = agent_run(tmp_path)
    Path(run.preset_file).write_text("---\nname: shouter\nhooks: {}\n---\nShout.\n")
    with pytest.raises(ValueError, match="only with name: and description: lines; add them"):
        claude_code.build(run)


def test_under_project_config_a_same_named_project_agent_cannot_take_the_files_place(tmp_path):
    chosen = tmp_path / ".pi" / "subagents" / "shouter.md"
    chosen.parent.mkdir(parents=True)
    chosen.write_text(AGENT.format(more="effort: low\r\n"), newline="")
    (tmp_path / ".claude" / "agents").mkdir(parents=True)
    (tmp_path / ".claude" / "agents" / "other.md").write_text("---\nname: shouter\ndescription: x\n---\nNo.\n")
    run = run_of(tmp_path, presetFile=str(chosen), presetScope="project", presetExtra={"effort": "low"},
                 projectConfig=True, runDir=str(tmp_path / "run-1"))
    argv, _ = claude_code.build(run)
    assert argv[argv.index("--agent") + 1] == "shouter@run-1"
    copy = (tmp_path / "run-1" / "claude" / "agents" / "shouter.md").read_bytes()
    assert copy == chosen.read_bytes().replace(b"name: shouter", b'name: "shouter@run-1"')  # CRLF kept
    argv, _ = claude_code.build(dataclasses.replace(run, project_config=False))  # the project's agents stay out
    assert argv[argv.index("--agent") + 1] == "shouter"
    with pytest.raises(ValueError, match="other.md is also an agent named 'shouter'.*memory"):
        claude_code.build(dataclasses.replace(run, preset_extra={"memory": "project"}))
    nested = tmp_path / ".claude" / "agents" / "collection" / "deep.md"  # Claude Code reads subfolders too
    nested.parent.mkdir()
    (tmp_path / ".claude" / "agents" / "other.md").rename(nested)
    argv, _ = claude_code.build(dataclasses.replace(run, run_dir=str(tmp_path / "run-2")))
    assert argv[argv.index("--agent") + 1] == "shouter@run-2"


# -- Claude Code's stream --------------------------------------------------------------------------------------------
STREAM = [
    {"type": "system", "subtype": "init", "cwd": "/p", "session_id": "s-1", "model": "claude-x"},
    {"type": "assistant", "message": {"id": "m1", "model": "claude-x", "content": [
        {"type": "text", "text": "Looking."}], "usage": {"input_tokens": 100, "output_tokens": 1}}},
    {"type": "assistant", "message": {"id": "m1", "model": "claude-x", "content": [
        {"type": "tool_use", "id": "t1", "name": "Edit",
         "input": {"file_path": "/p/a.txt", "old_string": "a", "new_string": "b"}}],
        "usage": {"input_tokens": 100, "output_tokens": 1}}},
    {"type": "user", "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t1", "content": "updated"}]},
     "tool_use_result": {"structuredPatch": [{"lines": ["-a", "+b"]}]}},
    {"type": "assistant", "message": {"id": "m2", "model": "claude-x", "content": [
        {"type": "text", "text": "Done."}], "usage": {"input_tokens": 150, "output_tokens": 1}}},
    {"type": "result", "subtype": "success", "is_error": False, "num_turns": 2, "session_id": "s-1",
     "total_cost_usd": 0.25, "usage": {"input_tokens": 250, "output_tokens": 40, "cache_read_input_tokens": 5,
                                       "cache_creation_input_tokens": 0}},
]


def adapt_all(records):
    adapter = claude_code.Adapter()
    return adapter, [event for record in records for event in adapter.adapt(record)]


def test_claude_codes_stream_becomes_the_events():
    adapter, events = adapt_all(STREAM)
    kinds = [e["type"] for e in events]
    assert kinds == ["session", "turn_start", "usage", "assistant_text", "tool_call", "tool_result", "message_end",
                     "turn_start", "usage", "assistant_text", "message_end", "usage"]
    call = events[4]
    assert call == {"type": "tool_call", "id": "t1", "name": "edit",
                    "args": {"path": "/p/a.txt", "edits": [{"oldText": "a", "newText": "b"}]}}
    assert events[5]["name"] == "edit" and events[5]["details"] == {"diff": "-a\n+b"}
    assert events[6]["stopReason"] == "toolUse" and events[10]["stopReason"] == "stop"
    usage = [e for e in events if e["type"] == "usage"]  # one message's usage once, then the rest of the totals
    assert sum(u["input"] for u in usage) == 250 and sum(u["output"] for u in usage) == 40
    assert sum(u["cacheRead"] for u in usage) == 5 and sum(u["cost"] for u in usage) == 0.25
    assert adapter.conversation_over and adapter.session_id == "s-1"
    assert adapter.final["cost"] == 0.25 and not adapter.final["isError"]


def test_claude_codes_error_end_fails_the_run_with_its_reason():
    adapter, events = adapt_all([STREAM[0], {"type": "result", "subtype": "error_max_turns", "is_error": True,
                                             "num_turns": 2, "total_cost_usd": 0.1, "usage": {}}])
    stream = Stream(adapter)
    assert stream.finished() and "turn limit" in stream.error_end()[0]
    assert adapter.final["stopWord"] == "budget:turns" and events[-1]["type"] == "error"
    assert stream.totals() == {"cost": 0.1} and stream.record()["sessionId"] == "s-1"
    _, events = adapt_all([{"type": "result", "subtype": "success", "is_error": True, "result": "API Error: 500"}])
    assert events[-1]["message"] == "Claude Code ended with an error (success): API Error: 500"


def test_a_sub_agents_messages_are_not_the_runs_own():
    _, events = adapt_all([{"type": "assistant", "parent_tool_use_id": "t9", "message": {"id": "x", "content": [
        {"type": "tool_use", "id": "t10", "name": "Read", "input": {}}]}}])
    assert events == []


def test_structured_output_is_the_typed_reply():
    adapter, _ = adapt_all([{"type": "result", "subtype": "success", "structured_output": {"answer": 42}}])
    assert Stream(adapter).structured() == {"answer": 42}
    assert "structured" not in Stream(adapter).record()["harnessEnd"]


# -- the scripted model's Anthropic dialect --------------------------------------------------------------------------
def test_an_anthropic_request_reads_as_the_scripts_messages():
    body = {"system": [{"type": "text", "text": "Primary working directory: /w"}], "messages": [
        {"role": "user", "content": [{"type": "text", "text": "<system-reminder>x\nread y</system-reminder>"},
                                     {"type": "text", "text": "read a.txt"}]},
        {"role": "system", "content": "Available agent types"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "Read", "input": {"a": 1}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "text"},
                                     {"type": "text", "text": "<system-reminder>note</system-reminder>"}]}]}
    assert scripted_anthropic.to_chat(body) == [
        {"role": "system", "content": "Primary working directory: /w"},
        {"role": "user", "content": "read a.txt"},
        {"role": "system", "content": "Available agent types"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "t", "type": "function", "function": {"name": "Read", "arguments": '{"a": 1}'}}]},
        {"role": "tool", "tool_call_id": "t", "content": "text"}]


def test_demo_steps_are_claude_codes_tools_with_absolute_paths():
    body = {"model": "m", "system": "Primary working directory: /w\n", "tools": [{"name": "Read"}],
            "messages": [{"role": "user", "content": "read src/a.py\nls src"}], "stream": False}
    with ScriptedModel() as model:
        request = urllib.request.Request(model.url + "/messages", data=json.dumps(body).encode(), method="POST")
        with urllib.request.urlopen(request, timeout=10) as response:
            message = json.loads(response.read())
    assert message["stop_reason"] == "tool_use"
    assert message["content"] == [{"type": "tool_use", "id": "toolu_1_0_0", "name": "Read",
                                   "input": {"file_path": "/w/src/a.py"}}]
    assert scripted_anthropic.claude_call("ls", {"path": "src"}, "/w") == ("Bash", {"command": "ls src"})


# -- choosing a harness, and what it cannot do -------------------------------------------------------------------
def preset_file(tmp_path: Path, extra: str) -> Path:
    path = tmp_path / "agent.md"
    path.write_text(f"---\nname: agent\ndescription: d\n{extra}\n---\nBody\n")
    return path


def test_a_preset_names_its_harness(tmp_path):
    assert parse_preset(preset_file(tmp_path, "harness: claude-code"), "project").harness == "claude-code"
    assert parse_preset(preset_file(tmp_path, "harness: pi"), "project").harness is None
    with pytest.raises(PresetError, match="'harness' must be one of pi, claude-code, codex, got 'claude'"):
        parse_preset(preset_file(tmp_path, "harness: claude"), "project")


def test_a_call_names_its_harness():
    assert as_spec({"preset": "p", "task": "t", "harness": "codex"}, 0).harness == "codex"
    with pytest.raises(NbSubagentsError, match="'harness' must be one of pi, claude-code, codex"):
        as_spec({"preset": "p", "task": "t", "harness": "gemini"}, 0)


def test_a_presets_option_the_harness_cannot_honour_is_refused_naming_both(tmp_path):
    preset = parse_preset(preset_file(tmp_path, "harness: claude-code\nthinking: high"), "project")
    with pytest.raises(NbSubagentsError, match='claude-code harness cannot honour thinking \\(set by preset "agent"'):
        refuse_unhonoured(harnesses.get("claude-code"), TaskSpec(preset="agent", task="t"), preset)
    refuse_unhonoured(harnesses.get("claude-code"), TaskSpec(preset="agent", task="t", max_cost=1.0),
                      parse_preset(preset_file(tmp_path, "harness: claude-code"), "project"))  # honoured natively


def test_a_steer_to_a_claude_code_run_is_refused_naming_both(tmp_path):
    paths = RunPaths(tmp_path / "run")
    paths.dir.mkdir()
    atomic_write_json(paths.meta, {"runId": "run", "harness": "claude-code"})
    with pytest.raises(NbSubagentsError, match="claude-code harness, which cannot take a steer while it runs"):
        converse.steer(paths, "look at the tests")
    assert not (paths.dir / "inbox").exists() or not os.listdir(paths.dir / "inbox")


def test_finding_a_harness_program(tmp_path, monkeypatch):
    monkeypatch.setenv("NBSUBAGENTS_CLAUDE", str(tmp_path / "nowhere"))
    with pytest.raises(locate.HarnessNotFoundError, match="not found at .*nowhere \\(from NBSUBAGENTS_CLAUDE\\)"):
        locate.find_program(harnesses.get("claude-code"), tmp_path)
    monkeypatch.delenv("NBSUBAGENTS_CLAUDE")
    program = tmp_path / "proj" / "harnesses" / "node_modules" / ".bin" / "claude"
    program.parent.mkdir(parents=True)
    program.write_text("")
    (tmp_path / "proj" / "sub").mkdir()
    assert locate.find_program(harnesses.get("claude-code"), tmp_path / "proj" / "sub") == str(program)
    monkeypatch.setattr(locate, "PACKAGE_ROOT", tmp_path / "empty")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(locate.HarnessNotFoundError, match="npm install @anthropic-ai/claude-code"):
        locate.find_program(harnesses.get("claude-code"), tmp_path)


def test_the_offline_setting_points_claude_code_at_the_scripted_model():
    env = offline.child_env(harnesses.get("claude-code"))
    server = offline.scripted_server()
    assert env["ANTHROPIC_BASE_URL"] + "/v1" == server.url and env["ANTHROPIC_API_KEY"]
    assert env["DISABLE_TELEMETRY"] == env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1"
    assert "PI_CODING_AGENT_DIR" not in env  # pi's agent dir is pi's alone
