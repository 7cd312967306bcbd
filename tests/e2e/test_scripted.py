"""Tests for the scripted Chat Completions server (a test double, not a model)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from nbsubagents._pi import pi_command
from nbsubagents._child.harnesses.pi import write_agent_dir
from nbsubagents._pi.scripted import ScriptedModel, demo_plan, step_index

REPO = Path(__file__).resolve().parents[2]


def post(url: str, body: dict, timeout: float = 10) -> tuple[int, list]:
    """POST a chat completion; return (status, parsed SSE chunks or the JSON body)."""
    headers = {"Content-Type": "application/json"}
    req = urllib.request.Request(url + "/chat/completions", json.dumps(body).encode(), headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            raw = resp.read().decode()
            if not body.get("stream"):
                return resp.status, [json.loads(raw)]
            status = resp.status
    except urllib.error.HTTPError as err:
        return err.code, [json.loads(err.read())]
    events = []
    for block in raw.split("\n\n"):
        for line in block.splitlines():
            if line.startswith("data: "):
                data = line[len("data: ") :]
                events.append(data if data == "[DONE]" else json.loads(data))
    return status, events


def chat(*messages: dict, stream: bool = True) -> dict:
    return {"model": "scripted", "stream": stream, "stream_options": {"include_usage": True}, "messages": [*messages]}


def user(text: str) -> dict:
    return {"role": "user", "content": text}


def assistant_call(call_id: str, name: str, args: dict) -> dict:
    fn = {"name": name, "arguments": json.dumps(args)}
    return {"role": "assistant", "content": None, "tool_calls": [{"id": call_id, "type": "function", "function": fn}]}


def tool(call_id: str, content: object) -> dict:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def collect(events: list) -> dict:
    """Fold stream chunks into text, reasoning, tool calls, finish reason and usage."""
    out: dict = {"text": "", "reasoning": "", "calls": {}, "finish": None, "usage": None}
    out["done"] = events[-1] == "[DONE]"
    for ev in events:
        if ev == "[DONE]":
            continue
        if ev.get("usage"):
            out["usage"] = ev["usage"]
        for choice in ev["choices"]:
            delta = choice["delta"]
            out["text"] += delta.get("content") or ""
            out["reasoning"] += delta.get("reasoning_content") or ""
            for tc in delta.get("tool_calls") or []:
                call = out["calls"].setdefault(tc["index"], {"id": None, "name": None, "arguments": ""})
                call["id"] = tc.get("id") or call["id"]
                call["name"] = (tc.get("function") or {}).get("name") or call["name"]
                call["arguments"] += (tc.get("function") or {}).get("arguments") or ""
            out["finish"] = choice.get("finish_reason") or out["finish"]
    out["calls"] = [dict(c, arguments=json.loads(c["arguments"])) for _, c in sorted(out["calls"].items())]
    return out


@pytest.fixture
def scripted():
    """Start servers on demand and make sure every one is stopped."""
    started: list[ScriptedModel] = []

    def start(script=None) -> ScriptedModel:
        started.append(ScriptedModel(script).start())
        return started[-1]

    before = set(threading.enumerate())
    yield start
    for model in started:
        model.stop()
    assert set(threading.enumerate()) <= before, "server threads left behind"


def test_tool_call_step_streams_id_name_and_arguments(scripted):
    calls = [{"name": "read", "arguments": {"path": "x"}}, {"name": "bash", "arguments": {"command": "ls"}}]
    model = scripted([{"tool_calls": calls}])
    status, events = post(model.url, chat(user("go")))
    out = collect(events)
    assert status == 200 and out["done"]
    assert out["finish"] == "tool_calls"
    assert [(c["name"], c["arguments"]) for c in out["calls"]] == [("read", {"path": "x"}), ("bash", {"command": "ls"})]
    assert len({c["id"] for c in out["calls"]}) == 2
    # ids are deterministic: the same request gets the same ids
    assert collect(post(model.url, chat(user("go")))[1])["calls"] == out["calls"]


def test_text_and_reasoning_step(scripted):
    model = scripted([{"reasoning": "thinking hard about it", "text": "hello there, general kenobi"}])
    _, events = post(model.url, chat(user("hi")))
    out = collect(events)
    assert out["text"] == "hello there, general kenobi"
    assert out["reasoning"] == "thinking hard about it"
    assert out["finish"] == "stop" and out["calls"] == []
    assert events[0]["choices"][0]["delta"]["role"] == "assistant"
    assert sum("content" in e["choices"][0]["delta"] for e in events[1:-2] if e["choices"]) > 1  # really streamed


def test_usage_chunk_is_present_and_deterministic(scripted):
    model = scripted([{"text": "some answer"}])
    _, events = post(model.url, chat(user("hi")))
    usage = collect(events)["usage"]
    assert usage["prompt_tokens"] > 0 and usage["completion_tokens"] > 0
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert events[-2]["choices"] == [] and events[-1] == "[DONE]"
    assert collect(post(model.url, chat(user("hi")))[1])["usage"] == usage


def test_error_step_returns_http_error_with_json_body(scripted):
    model = scripted([{"error": {"status": 503, "message": "scripted failure"}}])
    status, [body] = post(model.url, chat(user("hi")))
    assert status == 503
    assert body == {"error": {"message": "scripted failure"}}


def test_step_is_chosen_by_assistant_messages_after_last_user(scripted):
    model = scripted([{"text": "zero"}, {"text": "one"}, {"text": "two"}])
    first = [user("a"), {"role": "assistant", "content": "x"}, user("b")]
    assert collect(post(model.url, chat(*first))[1])["text"] == "zero"
    second = [*first, assistant_call("c1", "read", {"path": "x"}), tool("c1", "data")]
    assert step_index(chat(*second)) == 1
    assert collect(post(model.url, chat(*second))[1])["text"] == "one"
    third = [*second, assistant_call("c2", "read", {"path": "y"}), tool("c2", "data")]
    assert collect(post(model.url, chat(*third))[1])["text"] == "two"
    fourth = [*third, assistant_call("c3", "read", {"path": "z"}), tool("c3", "data")]
    assert collect(post(model.url, chat(*fourth))[1])["text"] == "done"  # past the end of the script


def test_callable_script_gets_body_and_step(scripted):
    seen = []
    model = scripted(lambda body, step: seen.append((body["model"], step)) or {"text": f"step {step}"})
    assert collect(post(model.url, chat(user("hi")))[1])["text"] == "step 0"
    assert seen == [("scripted", 0)]


def test_delay_and_hang_slow_the_stream(scripted):
    model = scripted([{"text": "a b c d e f", "delay": 0.05, "hang": 0.6}])
    start = time.monotonic()
    out = collect(post(model.url, chat(user("hi")))[1])
    assert out["text"] == "a b c d e f"
    assert time.monotonic() - start >= 0.6 + 4 * 0.05


def test_stop_wakes_a_hanging_response(scripted):
    model = scripted([{"text": "late", "hang": 30}])
    result: dict = {}
    client = threading.Thread(target=lambda: result.update(r=post(model.url, chat(user("hi")), timeout=40)))
    client.start()
    time.sleep(0.3)
    start = time.monotonic()
    model.stop()
    client.join(10)
    assert time.monotonic() - start < 3 and not client.is_alive()
    assert "[DONE]" not in result["r"][1]


def test_non_streaming_request_gets_plain_completion(scripted):
    model = scripted([{"text": "hi", "tool_calls": [{"name": "ls", "arguments": {"path": "."}}]}])
    status, [body] = post(model.url, chat(user("hi"), stream=False))
    message = body["choices"][0]["message"]
    assert status == 200 and body["choices"][0]["finish_reason"] == "tool_calls"
    assert message["content"] == "hi"
    assert json.loads(message["tool_calls"][0]["function"]["arguments"]) == {"path": "."}


def test_models_endpoint_lists_the_model(scripted):
    model = scripted()
    with urllib.request.urlopen(model.url + "/models", timeout=5) as resp:
        assert [m["id"] for m in json.load(resp)["data"]] == ["scripted"]


def test_requests_are_recorded(scripted):
    model = scripted([{"text": "a"}, {"text": "b"}])
    post(model.url, chat(user("one")))
    post(model.url, chat(user("two"), stream=False))
    assert [r["messages"][-1]["content"] for r in model.requests] == ["one", "two"]
    model.requests.clear()  # a snapshot: the server's record is untouched
    assert len(model.requests) == 2


def test_binds_loopback_on_a_free_port():
    with ScriptedModel() as a, ScriptedModel() as b:
        assert a.url == f"http://127.0.0.1:{a.port}/v1"
        assert a.port != b.port and a.port > 0
        assert a._server.server_address[0] == "127.0.0.1"


DEMO_TASK = """Please do the following.
read README.md
ls src
run: echo hi
write out.txt: alpha\\nbeta
edit out.txt: beta -> gamma
grep TODO
some prose that is ignored
"""


def test_demo_mode_turns_each_directive_into_a_pi_tool_call():
    plan = demo_plan(DEMO_TASK)
    assert [s["tool_calls"][0] for s in plan[:-1]] == [
        {"name": "read", "arguments": {"path": "README.md"}},
        {"name": "ls", "arguments": {"path": "src"}},
        {"name": "bash", "arguments": {"command": "echo hi"}},
        {"name": "write", "arguments": {"path": "out.txt", "content": "alpha\nbeta\n"}},
        {"name": "edit", "arguments": {"path": "out.txt", "edits": [{"oldText": "beta", "newText": "gamma"}]}},
        {"name": "grep", "arguments": {"pattern": "TODO"}},
    ]
    assert plan[-1]["final"]


def test_demo_say_merges_into_next_tool_call_and_sleep_delays_it():
    plan = demo_plan("say: first I look\nsleep: 1.5\nread a.txt\nsay: bye")
    assert plan[0]["text"] == "first I look" and plan[0]["hang"] == 1.5
    assert plan[0]["tool_calls"][0]["name"] == "read"
    assert plan[1] == {"final": True, "says": ["bye"]}


def test_demo_fail_directive_returns_http_error(scripted):
    model = scripted()
    task = user("read a.txt\nfail: 502 upstream broke")
    messages = [task, assistant_call("c1", "read", {"path": "a.txt"}), tool("c1", "x")]
    status, [body] = post(model.url, chat(*messages))
    assert status == 502 and body["error"]["message"] == "upstream broke"


def test_demo_fail_for_fails_every_request_for_that_model_only(scripted):
    model = scripted()
    task = user("fail for demo/scripted: 429 rate limited\nread a.txt")
    for _ in range(2):
        status, [body] = post(model.url, chat(task))
        assert status == 429 and body["error"]["message"] == "rate limited"
    status, chunks = post(model.url, {**chat(task), "model": "backup"})
    assert status == 200 and collect(chunks)["calls"][0]["arguments"] == {"path": "a.txt"}


def test_demo_mode_serves_steps_over_http_in_order(scripted):
    model = scripted()
    task = user("say: looking\nread a.txt\nrun: echo hi")
    first = collect(post(model.url, chat(task))[1])
    assert first["text"] == "looking" and first["calls"][0]["name"] == "read" and first["finish"] == "tool_calls"
    call = first["calls"][0]
    history = [task, assistant_call(call["id"], "read", call["arguments"]), tool(call["id"], "x")]
    second = collect(post(model.url, chat(*history))[1])
    assert second["calls"][0]["arguments"] == {"command": "echo hi"}


def test_demo_summary_quotes_first_line_of_each_tool_result(scripted):
    model = scripted()
    long_line = "y" * 200
    messages = [
        user("read README.md\nrun: echo hi"),
        assistant_call("c1", "read", {"path": "README.md"}),
        tool("c1", [{"type": "text", "text": "\n# Title line\nmore"}]),
        assistant_call("c2", "bash", {"command": "echo hi"}),
        tool("c2", long_line),
    ]
    out = collect(post(model.url, chat(*messages))[1])
    lines = out["text"].splitlines()
    assert lines[:2] == ["Done. 2 steps:", "- read README.md: # Title line"]
    assert lines[2].startswith("- run: echo hi: yyy") and len(lines[2]) < 110
    assert out["finish"] == "stop"


def test_demo_summary_of_a_listing_quotes_every_entry(scripted):
    model = scripted()
    messages = [user("ls ."), assistant_call("c1", "ls", {"path": "."}), tool("c1", ".pi/\nREADME.md\nnotes.txt\n")]
    out = collect(post(model.url, chat(*messages))[1])
    assert out["text"].splitlines() == ["Done. 1 step:", "- ls .: .pi/, README.md, notes.txt"]


def test_demo_without_directives_echoes_the_task(scripted):
    model = scripted()
    parts = {"role": "user", "content": [{"type": "text", "text": "just chat\nplease"}]}
    out = collect(post(model.url, chat(parts))[1])
    assert out["text"] == "Done: just chat" and out["calls"] == []


def test_write_agent_dir_merges_settings(tmp_path):
    (tmp_path / "settings.json").write_text(json.dumps({"theme": "dark", "retry": {"baseDelayMs": 5}}))
    assert write_agent_dir(tmp_path, "http://127.0.0.1:1/v1") == tmp_path
    settings = json.loads((tmp_path / "settings.json").read_text())
    assert settings == {
        "theme": "dark",
        "quietStartup": True,
        "retry": {"baseDelayMs": 5, "enabled": False, "provider": {"maxRetries": 0}},
    }
    provider = json.loads((tmp_path / "models.json").read_text())["providers"]["demo"]
    assert provider["baseUrl"] == "http://127.0.0.1:1/v1" and provider["apiKey"] == "dummy-key"
    assert provider["api"] == "openai-completions"
    assert [m["id"] for m in provider["models"]] == ["scripted"]


def find_pi() -> Path | None:
    from helpers import PI
    candidate = Path(os.environ.get("NBSUBAGENTS_PI") or PI)
    return candidate if candidate.exists() and shutil.which("node") else None


@pytest.mark.pi_matrix
@pytest.mark.skipif(find_pi() is None, reason="pi CLI not installed")
def test_real_pi_reads_a_file_through_the_scripted_model(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "hello.txt").write_text("hello from the scripted test\n")
    with ScriptedModel() as model:
        agent_dir = write_agent_dir(tmp_path / "agent", model.url)
        env = {**os.environ, "PI_CODING_AGENT_DIR": str(agent_dir), "PI_OFFLINE": "1"}
        proc = subprocess.run(
            [*pi_command(str(find_pi())), "--mode", "json", "-p", "--no-session", "--model", "demo/scripted", "read hello.txt"],
            cwd=project,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=60,
            check=False,
        )
        requests = model.requests
    assert proc.returncode == 0, proc.stderr.decode()
    events = [json.loads(line) for line in proc.stdout.split(b"\n") if line.strip()]
    ends = [e for e in events if e["type"] == "tool_execution_end"]
    assert [(e["toolName"], e["isError"]) for e in ends] == [("read", False)]
    assert ends[0]["result"]["content"][0]["text"] == "hello from the scripted test\n"
    final = [e["message"] for e in events if e["type"] == "message_end" and e["message"]["role"] == "assistant"][-1]
    assert final["stopReason"] == "stop"
    assert "hello from the scripted test" in "".join(p.get("text", "") for p in final["content"])
    assert len(requests) == 2 and requests[0]["stream"] is True
