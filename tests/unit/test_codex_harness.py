"""The Codex harness without running Codex: its argv, config and refusals, its stream read from streams the real
Codex CLI 0.171.0 printed (tests/fixtures/codex-0.171.0/, recorded against the scripted model's Responses dialect:
``tools.jsonl`` a scripted answer with reasoning, text, read, edit, write and a failing command; ``failed.jsonl``
a 400 from the model; ``python tests/unit/test_codex_harness.py`` records them again with the pinned codex), and
that dialect itself over HTTP."""

from __future__ import annotations

import json
import re
import os
import shutil
import subprocess
import tomllib
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from nbsubagents._child.harnesses import Request, codex
from nbsubagents._pi import scripted_responses as responses
from nbsubagents._pi.scripted import ScriptedModel, step_index

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "codex-0.171.0"


PROGRAM, DEFAULTS = "/opt/codex", {"system_prompt": "Be brief."}


def run_of(tmp_path: Path, **given) -> Request:
    """A harness's request: the test's fields (camelCase, as meta.json spells them) over a plain default."""
    (tmp_path / "run").mkdir(exist_ok=True)
    fields = {"program": PROGRAM, "cwd": str(tmp_path), "run_dir": str(tmp_path / "run"), **DEFAULTS}
    for key, value in given.items():
        fields[re.sub(r"(?<!^)([A-Z])", lambda m: "_" + m[1].lower(), key)] = (
            tuple(value) if isinstance(value, list) else value)
    return Request(**fields)


@pytest.fixture
def no_endpoint(monkeypatch):
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "PI_OFFLINE"):
        monkeypatch.delenv(name, raising=False)


def test_a_typical_preset_runs_codex_exec_with_the_task_on_stdin_and_a_home_of_its_own(tmp_path, no_endpoint):
    argv, env = codex.build(run_of(tmp_path, model="openai/gpt-5-codex"))

    assert argv == ["/opt/codex", "exec", "--json", "--skip-git-repo-check", "-c", 'sandbox_mode="workspace-write"',
                    "-m", "gpt-5-codex", "-"]
    assert env == {"CODEX_HOME": str(tmp_path / "run" / "codex-home")}
    config = (tmp_path / "run" / "codex-home" / "config.toml").read_text()
    assert config == ('approval_policy = "never"\ndeveloper_instructions = "Be brief."\n\n'
                      "[sandbox_workspace_write]\nnetwork_access = true\n")  # Codex's own provider and login


def test_an_endpoint_in_the_environment_becomes_a_provider_whose_key_stays_in_the_environment(tmp_path, no_endpoint):
    env = {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "OPENAI_API_KEY": "sk-secret"}
    argv, _ = codex.build(run_of(tmp_path, env=env, systemPrompt='Say "hi"\n\u00e9t\u00e9 \U0001f600\x7f'))

    config = (tmp_path / "run" / "codex-home" / "config.toml").read_text()
    assert config.startswith('model_provider = "nbsubagents"\n')
    assert 'base_url = "http://127.0.0.1:9/v1"' in config and 'env_key = "OPENAI_API_KEY"' in config
    assert tomllib.loads(config)["developer_instructions"] == 'Say "hi"\n\u00e9t\u00e9 \U0001f600\x7f'
    assert "sk-secret" not in config + " ".join(argv) and "retries" not in config


def test_offline_the_model_is_the_scripted_one_and_codex_does_not_retry(tmp_path, no_endpoint):
    env = {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "OPENAI_API_KEY": "dummy", "PI_OFFLINE": "1"}
    argv, _ = codex.build(run_of(tmp_path, env=env, model="anthropic/claude-sonnet-4-5"))

    assert argv[argv.index("-m") + 1] == "scripted"
    config = (tmp_path / "run" / "codex-home" / "config.toml").read_text()
    assert "request_max_retries = 0\nstream_max_retries = 0\n" in config


def test_output_schema_and_resume_are_codex_options(tmp_path, no_endpoint):
    earlier = tmp_path / "earlier"
    (earlier / "codex-home" / "sessions" / "2026").mkdir(parents=True)
    (earlier / "codex-home" / "sessions" / "2026" / "rollout-x.jsonl").write_text("{}\n")

    argv, _ = codex.build(run_of(tmp_path, outputSchemaPath="/r/output-schema.json", resumeSession="T-1",
                                 resumedRunDir=str(earlier)))

    assert argv[1:3] == ["exec", "resume"] and argv[-2:] == ["T-1", "-"]
    assert argv[argv.index("--output-schema") + 1] == "/r/output-schema.json"
    assert (tmp_path / "run" / "codex-home" / "sessions" / "2026" / "rollout-x.jsonl").is_file()  # a copy
    assert (earlier / "codex-home" / "sessions" / "2026" / "rollout-x.jsonl").is_file()


@pytest.mark.parametrize(("changes", "sandbox"), [
    ({"permissionMode": "plan"}, "read-only"),
    ({"tools": ["read", "grep", "ls"]}, "read-only"),
    ({"disallowedTools": ["bash", "edit", "write"]}, "read-only"),
    ({"tools": ["read", "bash", "edit", "write", "ls"]}, "workspace-write"),
    ({"permissionMode": "acceptEdits"}, "workspace-write"),
    ({"permissionMode": "bypassPermissions"}, "danger-full-access"),
])
def test_the_sandbox_follows_the_presets_permissions(tmp_path, no_endpoint, changes, sandbox):
    argv, _ = codex.build(run_of(tmp_path, **changes))
    assert argv[argv.index("-c") + 1] == f'sandbox_mode="{sandbox}"'


@pytest.mark.parametrize(("changes", "option"), [
    ({"tools": ["read", "ls", "bash"]}, "tools (read, ls, bash)"),
    ({"tools": ["read", "bash", "edit", "write", "ask"]}, "tools (read, bash, edit, write, ask)"),
    ({"disallowedTools": ["write"]}, "disallowedTools (write)"),
])
def test_a_tool_list_codex_cannot_honour_is_refused_naming_both(tmp_path, no_endpoint, changes, option):
    with pytest.raises(ValueError) as refused:
        codex.build(run_of(tmp_path, **changes))
    assert str(refused.value).startswith(f"The codex harness cannot honour {option}: Codex cannot limit its tools")
    assert list((tmp_path / "run").iterdir()) == []  # nothing written for a refused run


def test_an_unknown_permission_mode_is_refused(tmp_path, no_endpoint):
    with pytest.raises(ValueError, match="does not know permissionMode 'yolo'; it knows default, acceptEdits"):
        codex.build(run_of(tmp_path, permissionMode="yolo"))


def test_refusals_use_the_task_spec_spelling():
    from nbsubagents._lifecycle.spec import TaskSpec

    options = {f.name for f in TaskSpec.__dataclass_fields__.values()} | {"steer", "follow_up", "thinking"}
    preset_fields = {"excludeTools", "noTools", "skills", "noSkills", "noContextFiles", "noExtensions", "extensions",
                     "extraArgs"}
    assert set(codex.REFUSES) - preset_fields <= options
    assert {"ask", "approval", "fallback_models", "steer", "follow_up", "max_cost", "max_tokens"} <= set(codex.REFUSES)
    assert "output_schema" not in codex.REFUSES and "resume" not in codex.REFUSES and "max_turns" not in codex.REFUSES
    assert "max_tool_calls" not in codex.REFUSES


# --- the stream ------------------------------------------------------------------------------------------


def adapt(name: str) -> tuple[codex.Adapter, list[dict]]:
    adapter = codex.Adapter()
    events = [e for line in (FIXTURES / name).read_text().splitlines() for e in adapter.adapt(json.loads(line))]
    return adapter, events


def test_a_recorded_codex_stream_becomes_the_projects_events():
    adapter, events = adapt("tools.jsonl")

    assert [e["type"] for e in events] == [
        "session", "notice", "turn_start", "thinking", "assistant_text", "tool_call", "tool_result",
        "turn_start", "tool_call", "tool_result", "turn_start", "tool_call", "tool_result",
        "turn_start", "tool_call", "tool_result", "turn_start", "assistant_text", "usage", "message_end"]
    calls = [(e["name"], e["args"]) for e in events if e["type"] == "tool_call"]
    assert calls == [("read", {"path": "notes.txt"}),
                     ("edit", {"path": "/tmp/codex-fixture/tools/work/notes.txt"}),
                     ("write", {"path": "/tmp/codex-fixture/tools/work/new.txt"}),
                     ("bash", {"command": "echo out; exit 3"})]
    results = [(e["name"], e["isError"], e["text"]) for e in events if e["type"] == "tool_result"]
    assert results == [("read", False, "one\ntwo\n"), ("edit", False, "M /tmp/codex-fixture/tools/work/notes.txt"),
                       ("write", False, "A /tmp/codex-fixture/tools/work/new.txt"),
                       ("bash", True, "out\n\n(exit code 3)")]
    assert events[-2] == {"type": "usage", "input": 27524, "output": 94, "cacheRead": 0, "cacheWrite": 0,
                          "totalTokens": 27618, "cost": 0}
    assert events[-1]["stopReason"] == "stop" and events[-3]["text"] == "All done."
    assert adapter.conversation_over and adapter.final == {"isError": False, "subtype": "success"}
    thread = json.loads((FIXTURES / "tools.jsonl").read_text().splitlines()[0])["thread_id"]
    assert adapter.session_id == events[0]["sessionId"] == thread


def test_a_failed_codex_turn_is_a_failed_end_with_the_providers_message_said_once():
    adapter, events = adapt("failed.jsonl")

    errors = [e["message"] for e in events if e["type"] == "error"]
    assert errors == ["scripted refusal"]  # Codex's `error` and `turn.failed` say it twice, its JSON body unwrapped
    assert events[-1]["type"] == "message_end" and events[-1]["stopReason"] == "error"
    assert adapter.final == {"isError": True, "subtype": "turn_failed", "message": "scripted refusal",
                             "stopWord": "provider_error"}
    assert adapter.conversation_over


def test_retries_plans_mcp_calls_and_reading_commands_are_worded():
    adapter = codex.Adapter()
    adapter.adapt({"type": "turn.started"})
    retry = adapter.adapt({"type": "error", "message": "Reconnecting... 2/5 (stream disconnected)"})
    assert retry == [{"type": "retry", "phase": "start", "errorMessage": "Reconnecting... 2/5 (stream disconnected)"}]

    todo = {"id": "t", "type": "todo_list", "items": [{"text": "look", "completed": True}, {"text": "fix",
                                                                                           "completed": False}]}
    assert adapter.adapt({"type": "item.started", "item": todo}) == [{"type": "notice",
                                                                      "text": "Plan: [x] look; [ ] fix"}]
    assert adapter.adapt({"type": "item.updated", "item": todo}) == []  # unchanged: not said again

    sed = {"id": "c", "type": "command_execution", "command": "/bin/bash -lc \"sed -n '5,14p' src/app.py\"",
           "status": "in_progress"}
    out = adapter.adapt({"type": "item.started", "item": sed})
    assert out[0] == {"type": "turn_start", "turn": 2}  # the model's answer to the plan's result
    assert out[1]["name"] == "read" and out[1]["args"] == {"path": "src/app.py", "offset": 5, "limit": 10}

    mcp = {"id": "m", "type": "mcp_tool_call", "server": "docs", "tool": "search", "arguments": {"q": "x"},
           "result": {"content": [{"type": "text", "text": "found"}]}, "error": None, "status": "completed"}
    out = adapter.adapt({"type": "item.completed", "item": mcp})
    assert [e["type"] for e in out] == ["tool_call", "tool_result"]  # sed's result is still to come: same turn
    assert out[0]["name"] == "search" and out[1]["text"] == "found" and out[1]["isError"] is False


def test_ls_and_grep_commands_are_their_verbs_and_anything_else_is_bash():
    assert codex._command_call("ls src") == ("ls", {"path": "src"})
    assert codex._command_call("grep -rn TODO .") == ("grep", {"pattern": "TODO", "path": "."})
    assert codex._command_call("ls -la") == ("bash", {"command": "ls -la"})
    assert codex._command_call("cat a b") == ("bash", {"command": "cat a b"})
    assert codex._unwrapped("/bin/bash -lc 'cat a.txt'") == "cat a.txt"
    assert codex._unwrapped("python -c 'print(1)'") == "python -c 'print(1)'"


# --- the scripted model's Responses dialect --------------------------------------------------------------


def test_responses_items_become_the_chat_messages_the_script_counts():
    body = {"instructions": "base", "input": [
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "preset"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<environment_context/>"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "read a\nls b"}]},
        {"type": "reasoning", "summary": []},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Reading."}]},
        {"type": "function_call", "name": "exec_command", "arguments": "{}", "call_id": "c1"},
        {"type": "function_call_output", "call_id": "c1", "output": "Chunk ID: 1\nWall time: 0.1 seconds\n"
                                                                    "Process exited with code 0\nOutput:\nfile a\n"},
        {"type": "custom_tool_call", "name": "apply_patch", "input": "*** Begin Patch", "call_id": "c2"},
        {"type": "custom_tool_call_output", "call_id": "c2", "output": "Exit code: 0\nWall time: 0 seconds\n"
                                                                       "Output:\nSuccess."},
    ]}
    messages = responses.chat_messages(body)

    assert [m["role"] for m in messages] == ["system", "system", "system", "user", "assistant", "tool", "assistant",
                                             "tool"]  # the environment context is no task
    assert messages[4]["content"] == "Reading." and messages[4]["tool_calls"][0]["function"]["name"] == "exec_command"
    assert [messages[5]["content"], messages[7]["content"]] == ["file a\n", "Success."]  # Codex's header dropped
    assert step_index({"messages": messages}) == 2


def test_demo_tools_become_the_tools_codex_offers(tmp_path):
    (tmp_path / "a.txt").write_text("one\nthe old line\n")
    shell = {"exec_command": "function"}
    assert responses.codex_call("read", {"path": "my file"}, shell, None) == (
        "function_call", "exec_command", json.dumps({"cmd": "cat 'my file'", "login": False}))
    assert responses.codex_call("bash", {"command": "ls"}, {"shell": "function"}, None) == (
        "function_call", "shell", json.dumps({"command": ["bash", "-c", "ls"]}))
    edit = {"path": "a.txt", "edits": [{"oldText": "old", "newText": "new"}]}
    patch = "*** Begin Patch\n*** Update File: a.txt\n@@\n-the old line\n+the new line\n*** End Patch"
    assert responses.codex_call("edit", edit, {"apply_patch": "custom"}, str(tmp_path)) == (
        "custom_tool_call", "apply_patch", patch)
    kind, name, args = responses.codex_call("edit", edit, shell, str(tmp_path))  # no apply_patch tool: the shell's
    assert json.loads(args)["cmd"] == f"apply_patch <<'PATCH'\n{patch}\nPATCH"
    assert responses.patch_for("write", {"path": "n.txt", "content": "x\ny\n"}, None) == (
        "*** Begin Patch\n*** Add File: n.txt\n+x\n+y\n*** End Patch")


def post(url: str, body: dict) -> tuple[int, bytes]:
    request = urllib.request.Request(url + "/responses", json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_the_scripted_model_streams_a_step_as_responses_events():
    body = {"model": "scripted", "stream": True, "tools": [{"type": "function", "name": "exec_command"}],
            "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "x"}]}]}
    step = {"reasoning": "hm", "text": "Looking.", "tool_calls": [{"name": "ls", "arguments": {"path": "src"}}]}
    with ScriptedModel([step]) as model:
        status, raw = post(model.url, body)
        assert model.requests == [body]

    assert status == 200
    events = [json.loads(line[6:]) for line in raw.decode().splitlines() if line.startswith("data: ")]
    kinds = [e["type"] for e in events]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert [e["item"]["type"] for e in events if e["type"] == "response.output_item.done"] == [
        "reasoning", "message", "function_call"]
    text = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    arguments = "".join(e["delta"] for e in events if e["type"] == "response.function_call_arguments.delta")
    assert text == "Looking." and json.loads(arguments) == {"cmd": "ls src", "login": False}
    usage = events[-1]["response"]["usage"]
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"] > 0


def test_a_fail_for_line_is_an_http_error_for_that_model_only():
    task = "fail for demo/scripted: 429 quota gone\nsay: hi"
    body = {"stream": True, "input": [{"type": "message", "role": "user", "content": task}]}
    with ScriptedModel() as model:
        failed = post(model.url, {**body, "model": "scripted"})
        answered = post(model.url, {**body, "model": "backup"})

    assert failed[0] == 429 and json.loads(failed[1])["error"]["message"] == "quota gone"
    assert answered[0] == 200 and b'"delta": "hi"' in answered[1]


def test_fail_once_fails_the_first_run_of_a_task_only_whatever_folders_codex_names():
    def body(folder: str) -> dict:
        developer = f"Skill roots: `{folder}/codex-home/skills`. The writable roots are `/tmp`, `{folder}/work`."
        return {"model": "scripted", "stream": True, "input": [
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": developer}]},
            {"type": "message", "role": "user", "content": "fail once: 503 warming up\nsay: ready"}]}

    with ScriptedModel() as model:
        first = post(model.url, body("/runs/one"))
        again = post(model.url, body("/runs/two"))  # the same task tried again, in another run's folders

    assert first[0] == 503 and again[0] == 200


# --- recording the fixtures ------------------------------------------------------------------------------

RECORDED = {
    "tools": [
        {"reasoning": "The file first.", "text": "Reading it.",
         "tool_calls": [{"name": "read", "arguments": {"path": "notes.txt"}}]},
        {"tool_calls": [{"name": "edit", "arguments": {"path": "notes.txt",
                                                       "edits": [{"oldText": "two", "newText": "2"}]}}]},
        {"tool_calls": [{"name": "write", "arguments": {"path": "new.txt", "content": "fresh\n"}}]},
        {"tool_calls": [{"name": "bash", "arguments": {"command": "echo out; exit 3"}}]},
        {"text": "All done."},
    ],
    "failed": [{"error": {"status": 400, "message": "scripted refusal"}}],
}


def record_fixtures() -> None:
    """Run the pinned codex on each script of RECORDED in /tmp/codex-fixture/NAME/work and keep its stdout."""
    program = str(Path(__file__).resolve().parents[2] / "harnesses" / "node_modules" / ".bin" / "codex")
    for name, script in RECORDED.items():
        base = Path("/tmp/codex-fixture") / name
        shutil.rmtree(base, ignore_errors=True)
        (base / "work").mkdir(parents=True)
        (base / "run").mkdir()
        (base / "work" / "notes.txt").write_text("one\ntwo\n")
        with ScriptedModel(script) as model:
            env = {"OPENAI_BASE_URL": model.url, "OPENAI_API_KEY": "dummy", "PI_OFFLINE": "1"}
            argv, extra = codex.build(Request(program=program, run_dir=str(base / "run"), cwd=str(base / "work"),
                                              env=env, system_prompt="Be brief."))
            done = subprocess.run(argv, input=b"Tidy the notes.", capture_output=True, cwd=base / "work",
                                  env={**os.environ, **env, **extra}, timeout=120, check=False)
        (FIXTURES / f"{name}.jsonl").write_bytes(done.stdout)
        shutil.rmtree(base)


if __name__ == "__main__":
    record_fixtures()
