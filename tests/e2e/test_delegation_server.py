"""Delegation (issue 58): the delegate tool server, spoken to over stdio as a harness speaks to it, for a real parent
run, starting real pi sub-runs against the scripted model. The server is started from the ``ToolServer`` the
kernel's prepare step decides for the run (``delegation.tool_server``), with its argv and environment alone."""

from __future__ import annotations

import json
import threading
import os
import subprocess

import pytest

import nbsubagents
from nbsubagents import _registry as registry
from nbsubagents._lifecycle import delegation
from nbsubagents._pi.scripted import demo_step

from helpers import processes_inside, wait_for

LEAD = """---
name: lead
description: Splits a task across scouts.
model: demo/scripted
tools: read, ls, bash
delegate: [scout, lead]
---
You lead.
"""


class Server:
    """The run's delegate server, started as a harness starts an MCP server: its argv, its env over the child's."""

    def __init__(self, run):
        record = run.record
        fields = {"parent": record.parent, "tree_root": record.tree_root, "depth": record.depth,
                  "delegate": record.delegate}
        found = delegation.tool_server(record.run_id, run.dir, record.cwd, fields)
        assert found is not None and found.name == "delegate"
        self.proc = subprocess.Popen(list(found.argv), env={**os.environ, **found.env}, cwd=record.cwd,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.ids = 0
        reply = self.ask("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                        "clientInfo": {"name": "test", "version": "1"}})
        assert reply["result"]["serverInfo"]["name"] == "delegate"
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
        tools = self.ask("tools/list")["result"]["tools"]
        assert [t["name"] for t in tools] == ["delegate", "delegate_wait", "delegate_result"]

    def ask(self, method, params=None):
        self.ids += 1
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": self.ids, "method": method,
                                          "params": params or {}}) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, "the server ended"
        reply = json.loads(line)
        assert reply["id"] == self.ids
        return reply

    def call(self, tool, **arguments):
        result = self.ask("tools/call", {"name": tool, "arguments": arguments})["result"]
        details = result.get("structuredContent") or (result.get("_meta") or {}).get("nbsubagents/details") or {}
        return result["content"][0]["text"], result["isError"], details

    def close(self):
        self.proc.stdin.close()
        assert self.proc.wait(timeout=120) == 0
        self.proc.stdout.close()


@pytest.fixture
def lead(project):
    (project / ".pi" / "subagents" / "lead.md").write_text(LEAD)
    return project


@pytest.fixture
def servers():
    started = []
    yield lambda run: started.append(Server(run)) or started[-1]
    for server in started:
        if server.proc.poll() is None:
            server.close()


def rows():
    return {r["run_id"]: r for r in registry.fetch(registry.db_path(), "SELECT * FROM runs")}


def test_a_two_level_tree_links_every_run_to_its_parent_and_root(lead, servers):
    root = nbsubagents.run("lead", "read README.md", show=False)
    assert root.status == "completed" and root.record.delegate["presets"] == ["scout", "lead"]
    server = servers(root)
    answer, failed, details = server.call("delegate", preset="scout", task="read README.md")
    assert not failed and "Demo project" in answer
    child = nbsubagents.get_run(details["run_id"])
    text, failed, started = server.call("delegate", preset="lead", task="ls src", background=True)
    assert not failed and started["status"] == "running"
    waited, failed, _ = server.call("delegate_wait", run_id=started["run_id"])
    assert not failed and "app.py" in waited
    middle = nbsubagents.get_run(started["run_id"])
    grandchild = servers(middle).call("delegate", preset="scout", task="ls .")[2]["run_id"]
    server.close()

    found = rows()
    assert (found[root.run_id]["parent"], found[root.run_id]["root"], found[root.run_id]["depth"]) == (
        None, root.run_id, 0)
    for run_id, parent, depth in ((child.run_id, root.run_id, 1), (middle.run_id, root.run_id, 1),
                                  (grandchild, middle.run_id, 2)):
        assert (found[run_id]["parent"], found[run_id]["root"], found[run_id]["depth"]) == (parent, root.run_id, depth)
        assert found[run_id]["status"] == "completed" and found[run_id]["mode"] == "delegated"
        assert found[run_id]["announced"] == 1  # its end is its parent's news: no "finished while away" of it
    assert [r.run_id for r in root.children] == [child.run_id, middle.run_id]
    tree = root.tree()
    assert [n["run_id"] for n in tree.walk()] == [root.run_id, child.run_id, middle.run_id, grandchild]
    assert str(tree).splitlines()[3].startswith(f"    {grandchild} scout completed")
    frame = nbsubagents.runs().set_index("run_id")
    assert frame.loc[grandchild, "parent"] == middle.run_id and frame.loc[grandchild, "depth"] == 2
    assert frame.loc[grandchild, "root"] == root.run_id


def test_depth_past_max_depth_max_children_and_a_preset_not_allowed_are_refused_with_the_reason(lead, servers):
    root = nbsubagents.run("lead", "read README.md", show=False, delegate=["lead"], max_depth=2, max_children=2)
    server = servers(root)
    text, failed, _ = server.call("delegate", preset="scout", task="read README.md")
    assert failed and text == 'Refused: preset "scout" is not one this run may delegate to (it may: lead)'
    depth1 = server.call("delegate", preset="lead", task="ls .")[2]["run_id"]
    depth2 = servers(nbsubagents.get_run(depth1)).call("delegate", preset="lead", task="ls .")[2]["run_id"]
    before = set(rows())
    text, failed, _ = servers(nbsubagents.get_run(depth2)).call("delegate", preset="scout", task="ls .")
    assert failed and "depth 3" in text and "max_depth is 2" in text
    assert set(rows()) == before  # nothing was started
    text, failed, _ = server.call("delegate", preset="lead", task="ls .")  # the tree's two sub-agents are all it gets
    assert failed and text.startswith("Refused: this tree has started 2 sub-agents, its max_children")
    assert set(rows()) == before
    assert nbsubagents.get_run(depth2).record.depth == 2


def runaway(body, index):
    """Runs whose task says "runaway" call tools for ever (cost adds up); the others are the demo."""
    if "runaway" in json.dumps(body.get("messages") or []):
        return {"text": f"step {index}", "delay": 0.1,
                "tool_calls": [{"name": "bash", "arguments": {"command": f"echo step-{index}"}}]}
    return demo_step(body, index)


def test_a_tree_wide_max_cost_stops_a_runaway_tree_leaves_first_every_run_saying_why(lead, servers, scripted,
                                                                                      tmp_path):
    go = threading.Event()

    def gated(body, index):  # no sub-agent spends before both are started (the second spawn finds budget left)
        if "runaway" in json.dumps(body.get("messages") or []):
            go.wait(120)
        return runaway(body, index)

    scripted.script = gated
    root = nbsubagents.start("lead", "sleep: 120", show=False, delegate=["scout"], max_cost=0.05, timeout=300)
    wait_for(lambda: root.paths.supervisor.exists(), what="the root to start")
    server = servers(root)
    calls = [server.call("delegate", preset="scout", task=f"runaway {i}", background=True) for i in range(2)]
    go.set()
    assert [failed for _, failed, _ in calls] == [False, False], calls
    kids = [details["run_id"] for _, _, details in calls]
    root.wait(240)
    server.close()
    assert root.status == "failed" and root.result["stopReason"] == "tree_budget:cost"
    assert f"The tree under run {root.run_id} reached its budget" in root.error and "max_cost=0.05" in root.error
    spent = 0.0
    for kid in map(nbsubagents.get_run, kids):
        assert kid.status == "failed" and kid.result["stopReason"] == "tree_budget:cost", kid.error
        assert f"The tree under run {root.run_id} reached its budget" in kid.error
        assert kid.result["endedAt"] <= root.result["endedAt"]  # the leaves end first
        spent += kid.result["usage"]["cost"]
    assert spent >= 0.05 * 0.5  # the children spent it (the root only waited on its model)
    wait_for(lambda: not processes_inside(tmp_path), 30, "no process of the tree left")


def test_cancel_of_the_root_ends_its_subtree_with_no_process_left(lead, servers, scripted, tmp_path):
    scripted.script = runaway
    root = nbsubagents.start("lead", "sleep: 120", show=False, delegate=["scout", "lead"], timeout=300)
    wait_for(lambda: root.paths.supervisor.exists(), what="the root to start")
    server = servers(root)
    middle = server.call("delegate", preset="lead", task="sleep: 120", background=True)[2]["run_id"]
    below = servers(nbsubagents.get_run(middle))
    leaf = nbsubagents.get_run(below.call("delegate", preset="scout", task="runaway", background=True)[2]["run_id"])
    wait_for(lambda: any(e["type"] == "tool_call" for e in leaf.events()), what="the leaf to work")
    assert root.cancel()
    root.wait(120)
    assert root.status == "aborted"
    for run_id in (middle, leaf.run_id):
        run = nbsubagents.get_run(run_id).wait(120)
        assert run.status == "aborted" and run.error.startswith("cancelled: its parent run"), run.error
    assert nbsubagents.get_run(middle).result["endedAt"] <= root.result["endedAt"]
    assert leaf.result["endedAt"] <= nbsubagents.get_run(middle).result["endedAt"]
    below.close()  # the harnesses that started them are gone: so are their servers
    server.close()
    wait_for(lambda: not processes_inside(tmp_path), 30, "no process of the tree left")


def test_a_killed_parent_and_a_kernel_restart_settle_every_run_of_the_tree_once(lead, servers, tmp_path):
    import signal

    from nbsubagents._lifecycle import reconcile

    root = nbsubagents.start("lead", "sleep: 120", show=False, delegate=["scout"], timeout=300)
    wait_for(lambda: root.paths.supervisor.exists(), what="the root to start")
    server = servers(root)
    kids = [nbsubagents.get_run(server.call("delegate", preset="scout", task="sleep: 120", background=True)[2]["run_id"])
            for _ in range(2)]
    wait_for(lambda: all(kid.paths.supervisor.exists() for kid in kids), what="the sub-runs to start")
    os.kill(json.loads(root.paths.supervisor.read_text())["pid"], signal.SIGKILL)  # the parent is killed outright
    server.proc.kill()  # and its tool server with it (ended as the lost run's leftovers are)
    server.proc.wait()
    reconcile.forget()  # a kernel that starts again: its first look at the project settles what it finds
    registry.forget_loaded()

    def settled():
        nbsubagents.status()
        return all(run.done for run in (root, *kids))

    wait_for(settled, 120, "every run of the tree to settle")
    assert root.status == "failed" and root.result["stopReason"] == "interrupted"
    results = {}
    for kid in kids:
        assert kid.status == "aborted" and kid.error == f"cancelled: its parent run {root.run_id} ended", kid.error
        results[kid.run_id] = kid.paths.result.read_text()
    nbsubagents.status()  # another look settles nothing again
    assert {kid.run_id: kid.paths.result.read_text() for kid in kids} == results
    found = rows()
    assert [found[r]["status"] for r in (root.run_id, *results)] == ["failed", "aborted", "aborted"]
    wait_for(lambda: not processes_inside(tmp_path), 30, "no process of the tree left")


def test_a_tree_whose_sub_run_is_claude_code(lead, servers, scripted, monkeypatch):
    from helpers import use_claude_code

    use_claude_code(monkeypatch, scripted.url, lead.parent / "home")
    (lead / ".pi" / "subagents" / "cscout.md").write_text(
        "---\nname: cscout\ndescription: A scout on Claude Code.\nmodel: claude-sonnet-4-5\nharness: claude-code\n"
        "tools: read, bash\n---\nYou scout.\n")
    root = nbsubagents.run("lead", "read README.md", show=False, delegate=["cscout"])
    answer, failed, details = servers(root).call("delegate", preset="cscout", task="read README.md")
    assert not failed and "Demo project" in answer, answer
    child = nbsubagents.get_run(details["run_id"])
    assert child.record.harness == "claude-code" and child.result["harness"] == "claude-code"
    assert (child.record.parent, child.record.tree_root, child.record.depth) == (root.run_id, root.run_id, 1)
    assert [r.run_id for r in root.children] == [child.run_id]
