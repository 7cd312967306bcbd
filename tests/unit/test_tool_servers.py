"""The MCP stdio loop every tool server runs: a real process spoken to over its pipes, as a harness does."""

import json
import subprocess
import sys
import textwrap

SERVER = textwrap.dedent("""
    from nbsubagents._child.tool_servers import Result, Tool, serve
    state = []
    def add(args):
        state.append(int(args["n"]))
        return Result(f"total {sum(state)}", details={"calls": len(state)})
    def fail(args):
        raise ValueError("no good")
    serve([Tool("add", "Add n to a running total", {"type": "object", "properties": {"n": {"type": "integer"}}}, add),
           Tool("fail", "Always fails", {"type": "object"}, fail)], name="demo")
""")


def talk(messages):
    lines = "".join(json.dumps(m) + "\n" for m in messages) + "not json\n"
    done = subprocess.run([sys.executable, "-c", SERVER], input=lines, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_a_server_lists_its_tools_keeps_state_and_turns_failures_into_error_results():
    replies = talk([
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-03-26"}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "add", "arguments": {"n": 2}}},
        {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "add", "arguments": {"n": 5}}},
        {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "fail", "arguments": {}}},
        {"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {"name": "nope"}},
        {"jsonrpc": "2.0", "id": 7, "method": "resources/list"},
    ])
    by_id = {r["id"]: r for r in replies}
    assert by_id[1]["result"]["protocolVersion"] == "2025-03-26"  # the client's revision, when known
    assert [t["name"] for t in by_id[2]["result"]["tools"]] == ["add", "fail"]
    assert by_id[4]["result"]["content"][0]["text"] == "total 7"  # state kept between calls
    assert by_id[4]["result"]["_meta"] == {"nbsubagents/details": {"calls": 2}} and not by_id[4]["result"]["isError"]
    assert by_id[5]["result"]["isError"] and "ValueError: no good" in by_id[5]["result"]["content"][0]["text"]
    assert by_id[6]["result"]["isError"] and "add, fail" in by_id[6]["result"]["content"][0]["text"]
    assert by_id[7]["error"]["code"] == -32601
    assert by_id[None]["error"]["code"] == -32700  # a line that is not JSON is answered, not fatal
    assert len(replies) == 8  # the notification got no reply
