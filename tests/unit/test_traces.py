"""A run's events as a trace: spans, their times, masking, and the OpenTelemetry JSON (no pi, no MLflow)."""

from __future__ import annotations

import json
from pathlib import Path

from nbsubagents._child.secrets import Masker
from nbsubagents._sweeps.traces import AGENT, MODEL, TOOL, TEXT_LIMIT, otel_spans, spans

SECRET = "sk-live-0123456789abcdefXYZ"


def write_events(run_dir: Path, events: list[dict]) -> Path:
    run_dir.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"seq": n, **e}) for n, e in enumerate(events, 1)]
    (run_dir / "events.jsonl").write_text("\n".join(lines) + "\n{\"seq\": 99, \"ts\": 1", encoding="utf-8")
    return run_dir


EVENTS = [
    {"ts": 100.0, "type": "run_start", "runId": "r1", "preset": "scout", "model": "demo/scripted",
     "task": f"read README.md with {SECRET}"},
    {"ts": 100.5, "type": "turn_start", "turn": 1},
    {"ts": 101.0, "type": "usage", "input": 10, "output": 2, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 12,
     "cost": 0.1},
    {"ts": 101.0, "type": "message_end", "stopReason": "toolUse", "model": "scripted", "provider": "demo"},
    {"ts": 101.1, "type": "tool_call", "id": "c1", "name": "read", "args": {"path": "README.md"}},
    {"ts": 101.4, "type": "tool_result", "id": "c1", "name": "read", "isError": False,
     "text": f"token={SECRET}\n" + "x" * 5000},
    {"ts": 101.5, "type": "tool_call", "id": "c2", "name": "bash", "args": {"command": "sleep 99"}},
    {"ts": 102.0, "type": "turn_start", "turn": 2},
    {"ts": 102.5, "type": "assistant_text", "text": "Done."},
    {"ts": 102.5, "type": "usage", "input": 20, "output": 3, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 23,
     "cost": 0.2},
    {"ts": 102.5, "type": "message_end", "stopReason": "stop", "model": "scripted", "provider": "demo"},
    {"ts": 103.0, "type": "run_end", "status": "completed", "stopReason": "stop"},
]


def test_a_run_becomes_an_agent_span_with_a_model_span_per_turn_and_a_tool_span_per_call(tmp_path):
    root = spans(write_events(tmp_path / "run", EVENTS), Masker([SECRET]))
    assert (root.kind, root.start, root.end, root.error) == (AGENT, 100.0, 103.0, False)
    assert root.attributes["preset"] == "scout" and root.attributes["model"] == "demo/scripted"
    assert root.outputs["result"] == "Done." and root.outputs["status"] == "completed"
    assert [(s.kind, s.name) for s in root.children] == [(MODEL, "turn 1"), (TOOL, "read"), (TOOL, "bash"),
                                                          (MODEL, "turn 2")]
    turn1, read, bash, turn2 = root.children
    assert (turn1.start, turn1.end, turn1.attributes["usage"]["total_tokens"]) == (100.5, 101.0, 12)
    assert turn1.attributes["model"] == "demo/scripted" and turn2.outputs["text"] == "Done."
    assert (read.start, read.end, read.error, read.inputs) == (101.1, 101.4, False, {"path": "README.md"})
    assert (bash.end, bash.error) == (103.0, True)  # never answered: it ends with the run, as an error


def test_span_text_is_masked_before_it_is_cut_short(tmp_path):
    root = spans(write_events(tmp_path / "run", EVENTS), Masker([SECRET]))
    result = root.children[1].outputs["result"]
    assert SECRET not in result and result.startswith("token=") and len(result) <= TEXT_LIMIT
    assert SECRET not in root.inputs["task"] and root.inputs["task"].startswith("read README.md with ")


def test_a_run_without_events_has_no_trace(tmp_path):
    (tmp_path / "run").mkdir()
    assert spans(tmp_path / "run", Masker([])) is None


def test_otel_json_follows_the_genai_conventions_with_ids_stable_per_run(tmp_path):
    root = spans(write_events(tmp_path / "run", EVENTS), Masker([SECRET]))
    items = otel_spans(root, "r1", {"nbsubagents.experiment": "e"})
    assert items == otel_spans(root, "r1", {"nbsubagents.experiment": "e"})
    assert len({s["traceId"] for s in items}) == 1 and len(items[0]["traceId"]) == 32
    assert all(s["parentSpanId"] == items[0]["spanId"] for s in items[1:])
    attrs = [{a["key"]: a["value"] for a in s["attributes"]} for s in items]
    assert attrs[0]["gen_ai.operation.name"] == {"stringValue": "invoke_agent"}
    assert attrs[0]["nbsubagents.experiment"] == {"stringValue": "e"}
    assert attrs[1]["gen_ai.usage.input_tokens"] == {"intValue": "10"}
    assert attrs[2]["gen_ai.tool.name"] == {"stringValue": "read"}
    assert items[1]["startTimeUnixNano"] == str(100_500_000_000) and items[3]["status"] == {"code": 2}
