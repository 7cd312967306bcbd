"""A tree in a report and a trace (issue 58): each sub-run nested under the delegate call that started it, whether
the call's result names the run (pi keeps a result's details) or only its arguments do (Claude Code, Codex). Run
folders are made by hand as a supervisor leaves them, with their registry rows; no harness runs here."""

from __future__ import annotations

import json
import re
from pathlib import Path

from nbsubagents import _registry as registry
from nbsubagents._child.tool_servers import Result, Tool, handle
from nbsubagents._lifecycle import delegation
from nbsubagents._child.secrets import Masker
from nbsubagents._lifecycle.handle import Run
from nbsubagents._sweeps.traces import AGENT, TOOL, otel_spans, spans
from nbsubagents._views import delegated
from nbsubagents._views.reports import report

LEAD, A, B, C = "20260101-100000-lead00", "20260101-100001-scouta", "20260101-100002-scoutb", "20260101-100003-deepc0"


def call(ts, call_id, preset, task, name="delegate", text="ok", details=None):
    return [{"ts": ts, "type": "tool_call", "id": call_id, "name": name, "args": {"preset": preset, "task": task}},
            {"ts": ts + 1, "type": "tool_result", "id": call_id, "name": name, "isError": text.startswith("Refused"),
             "text": text, **({"details": details} if details else {})}]


def make_run(root: Path, run_id: str, preset: str, task: str, calls: list, *, parent: str | None = None,
             depth: int = 0, cost: float = 0.01, answer: str = "done") -> Path:
    run_dir = root / ".pi" / "subagents" / "runs" / run_id
    run_dir.mkdir(parents=True)
    at = f"2026-01-01T10:00:0{run_id[14]}.000Z"
    meta = {"runId": run_id, "name": preset, "preset": preset, "mode": "delegated" if parent else "single",
            "task": task, "cwd": str(root), "resolvedModel": "demo/scripted", "createdAt": at,
            "parent": parent, "treeRoot": LEAD if parent else None, "depth": depth,
            "launcher": {"pid": 1, "host": "elsewhere", "startTicks": 1}}
    (run_dir / "meta.json").write_text(json.dumps(meta))
    start = 100.0 + 10 * int(run_id[14])
    events = [{"ts": start, "type": "run_start", "runId": run_id, "preset": preset, "task": task},
              {"ts": start + 0.5, "type": "turn_start", "turn": 1}, *calls,
              {"ts": start + 8, "type": "assistant_text", "text": answer},
              {"ts": start + 9, "type": "run_end", "status": "completed", "stopReason": "stop"}]
    (run_dir / "events.jsonl").write_text("".join(json.dumps({"seq": n, **e}) + "\n" for n, e in enumerate(events)))
    (run_dir / "result.json").write_text(json.dumps({
        "runId": run_id, "status": "completed", "exitCode": 0, "stopReason": "stop", "finalText": answer,
        "usage": {"totalTokens": 100, "cost": cost}, "turns": 1, "toolCalls": len(calls) // 2,
        "startedAt": at, "endedAt": at, "durationSeconds": 9.0}))
    registry.record(run_dir)
    return run_dir


def tree(root: Path) -> Path:
    """lead -> A (pi: its call's result names it) and B (Claude Code: only the call's arguments say it, after a
    refused call with the same arguments); B -> C."""
    lead = make_run(root, LEAD, "lead", "split it", [
        *call(101, "p1", "scout", "read README.md", details={"run_id": A}),
        *call(103, "c0", "scout", "ls src", name="mcp__delegate__delegate", text="Refused: too deep"),
        *call(104, "c1", "scout", "ls src", name="mcp__delegate__delegate", text="app.py")], cost=0.5)
    make_run(root, A, "scout", "read README.md", [], parent=LEAD, depth=1, cost=0.02, answer="# Demo project")
    make_run(root, B, "scout", "ls src", [*call(125, "b1", "deep", "look deeper", details={"run_id": C})],
             parent=LEAD, depth=1, cost=0.03, answer="app.py")
    make_run(root, C, "deep", "look deeper", [], parent=B, depth=2, cost=0.04, answer="deep answer")
    return lead


def test_each_sub_run_is_matched_to_the_call_that_started_it():
    events = [e for c in (call(1, "p1", "scout", "x", details={"run_id": "A"}),
                          call(3, "r", "scout", "y", text="Refused: max_depth"), call(5, "c1", "scout", "y"),
                          call(7, "c2", "scout", "y"), call(9, "c3", "other", "z")) for e in c]
    kids = [("A", "scout", "x"), ("B", "scout", "y"), ("C", "scout", "y"), ("D", "scout", "not asked")]
    assert delegated.calls_of(events, kids) == {"p1": ["A"], "c1": ["B"], "c2": ["C"], "c3": ["D"]}
    assert delegated.calls_of(events[:2], kids[1:2]) == {None: ["B"]}  # A's call is no other's: B is under the run
    assert delegated.is_delegate("mcp__delegate__delegate") and not delegated.is_delegate("delegate_wait")
    named = [("B", "scout", "y", "c2"), ("C", "scout", "y", None)]  # B's record names its call: C takes the other
    assert delegated.calls_of(events, named) == {"c2": ["B"], "c1": ["C"]}
    assert delegated.calls_of(events, [("B", "scout", "y", "r")]) == {"c1": ["B"]}  # a refused call started nothing


def test_the_delegate_tool_gets_the_id_its_harness_gave_the_call():
    got = []
    tools = {"delegate": Tool("delegate", "", {}, lambda args, call: got.append((args, call)) or Result("ok"), True),
             "plain": Tool("plain", "", {}, lambda args: got.append(args) or Result("ok"))}
    for meta in ({"claudecode/toolUseId": "toolu_1"}, {"nbsubagents/toolCallId": "call_2"}, {}, {"other": 3}):
        handle(tools, {"id": 1, "method": "tools/call", "params": {"name": "delegate", "arguments": {"a": 1},
                                                                    "_meta": meta}}, name="d", version="1")
    handle(tools, {"id": 2, "method": "tools/call", "params": {"name": "plain", "_meta": {"claudecode/toolUseId": "x"}}},
           name="d", version="1")
    assert got == [({"a": 1}, "toolu_1"), ({"a": 1}, "call_2"), ({"a": 1}, None), ({"a": 1}, None), {}]
    assert delegation.tree_fields("C", None, None, None, None, {"parent": "R", "root": "R", "depth": 1,
                                                                "toolCall": "toolu_1"})["tool_call"] == "toolu_1"


def test_a_trees_report_nests_each_sub_run_under_its_call_and_sums_the_tree(root):
    lead = Run(tree(root))
    page = lead.report(root / "tree.html").read_text()
    for run_id in (A, B, C):
        assert f'<h2 id="run-{run_id}">' in page  # every run of the tree has its section
    transcript = page.split(f'<h2 id="run-{LEAD}">')[1].split("<h2 ")[0].split("<summary>Transcript")[1]
    a, b, c = (transcript.index(f'<div class="subrun"><a href="#run-{k}">') for k in (A, B, C))
    first, refused, second = (m.start() for m in re.finditer(r"Running (mcp__delegate__)?delegate<", transcript))
    assert first < a < refused < second < b < c  # A under the first call, B under the one that was not refused
    assert transcript[c:].index("</div></div>") < transcript[c:].index("</pre>")  # C's card inside B's
    assert "deep answer" in transcript[c:] and "# Demo project" in transcript[a:b]
    assert "4 runs · 400 tokens · $0.5900" in page  # the summary: the whole tree
    assert "<th>Its tree</th><td>4 runs · 400 tokens · $0.5900" in page
    assert "<th>Its tree</th><td>2 runs · 200 tokens · $0.0700" in page  # B's subtree
    assert f'<th>Delegated by</th><td><a href="#run-{B}">{B}</a>' in page

    md = report([lead], root / "tree.md").read_text()
    assert f"- [scout](#run-{A}) ✓ completed · preset scout" in md
    assert f"  - [deep](#run-{C}) ✓ completed · preset deep" in md  # C nested in B's item
    lines = md.split(f'<a id="run-{LEAD}">')[1].split('<a id="run-')[0].splitlines()
    at = [next(n for n, line in enumerate(lines) if f"↳ sub-run {k}" in line) for k in (A, B, C)]
    assert at[0] < at[1] < at[2] and lines[at[2]].startswith("        ↳")  # C indented under B
    assert f"- **Delegated by:** [`{LEAD}`](#run-{LEAD})" in md


def test_a_trees_trace_has_each_sub_runs_spans_under_its_delegate_call(root):
    found = spans(tree(root), Masker([]))
    tools = {s.attributes["tool_call_id"]: s for s in found.children if s.kind == TOOL}
    assert [s.attributes["run_id"] for s in tools["p1"].children] == [A]
    assert tools["c0"].children == [] and [s.attributes["run_id"] for s in tools["c1"].children] == [B]
    b = tools["c1"].children[0]
    (deep,) = [s for s in b.children if s.kind == TOOL]
    assert [(s.kind, s.attributes["run_id"]) for s in deep.children] == [(AGENT, C)]
    alone = spans(root / ".pi" / "subagents" / "runs" / LEAD, Masker([]), nest=False)
    assert [s.kind for s in alone.walk()].count(AGENT) == 1 and len(found.walk()) == len(alone.walk()) + 7
    items = otel_spans(found, LEAD, {})
    ids = {s["spanId"]: s for s in items}
    named = {s["name"]: s for s in items if s["name"].startswith("invoke_agent")}
    assert set(named) == {"invoke_agent lead", "invoke_agent scout", "invoke_agent deep"}
    parent = ids[named["invoke_agent deep"]["parentSpanId"]]
    assert parent["name"] == "execute_tool delegate" and ids[parent["parentSpanId"]]["name"] == "invoke_agent scout"
