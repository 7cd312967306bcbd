"""Delegation (issue 58) without a model: the limits' decisions, a tree's fields and its server, the record and the
registry's parent/root/depth (and their migration), the tree queries, a cancel request's reason, the scripted lines."""

from __future__ import annotations

import json
import sqlite3

import pytest

import nbsubagents
from nbsubagents import _registry as registry
from nbsubagents._child import tree_end
from nbsubagents._child.events import Tally
from nbsubagents._child.record import RunRecord, load, write
from nbsubagents._config import NbSubagentsError
from nbsubagents._lifecycle import delegation
from nbsubagents._lifecycle.handle import Run
from nbsubagents._lifecycle.spec import check_shape
from nbsubagents._pi.scripted import demo_plan
from nbsubagents._pi.scripted_anthropic import claude_call
from nbsubagents._preset_files import parse
from nbsubagents._registry import tree as registry_tree

CONFIG = {"run": "R", "root": "R", "depth": 0, "presets": ["scout"], "maxDepth": 2, "maxChildren": 3,
          "budgets": [{"run": "R", "budget": {"maxCost": 1.0}}]}


def spent(cost):
    tally = Tally()
    tally.cost = cost
    return tally


@pytest.mark.parametrize("change, preset, started, cost, reason", [
    ({}, "scout", 0, 0.0, None),
    ({}, "scribe", 0, 0.0, 'preset "scribe" is not one this run may delegate to (it may: scout)'),
    ({"presets": True}, "scribe", 0, 0.0, None),
    ({"depth": 2}, "scout", 0, 0.0, "a sub-agent here would be at depth 3, and this tree's max_depth is 2"),
    ({"depth": 1}, "scout", 0, 0.0, None),
    ({}, "scout", 3, 0.0, "this tree has started 3 sub-agents, its max_children"),
    ({}, "scout", 2, 1.0, "The tree under run R reached its budget: Stopped at 1 cost (max_cost=1); no sub-agent"),
    ({}, "scout", 2, 0.99, None),
])
def test_a_spawn_is_refused_past_each_limit_with_the_reason(change, preset, started, cost, reason):
    found = delegation.refusal({**CONFIG, **change}, preset, "do it", started, {"R": spent(cost)})
    assert (found is None) if reason is None else (found is not None and found.startswith(reason)), found


def test_a_tree_keeps_its_roots_limits_and_adds_each_runs_budget_under_the_ones_above():
    root = delegation.tree_fields("R", ["scout", "lead"], None, None, {"maxCost": 1.0})
    assert root == {"parent": None, "tree_root": None, "depth": 0, "delegate": {
        "presets": ["scout", "lead"], "maxDepth": 2, "maxChildren": 8, "budgets": [{"run": "R", "budget": {
            "maxCost": 1.0}}]}}
    server = delegation.tool_server("R", "/p/.pi/subagents/runs/R", "/p", root)
    config = json.loads(server.env[delegation.ENV])
    position = delegation.position_for_child(config)
    child = delegation.tree_fields("C", [True], 9, 99, {"maxTurns": 5}, position)  # its own call cannot widen them
    assert (child["parent"], child["tree_root"], child["depth"]) == ("R", "R", 1)
    assert child["delegate"]["presets"] is True and child["delegate"]["maxDepth"] == 2
    assert child["delegate"]["maxChildren"] == 8
    assert [b["run"] for b in child["delegate"]["budgets"]] == ["R", "C"]
    plain = delegation.tree_fields("D", None, None, None, None, position)  # a child that may not delegate
    assert plain == {"parent": "R", "tree_root": "R", "depth": 1, "delegate": None}
    assert delegation.tool_server("D", "/p/.pi/subagents/runs/D", "/p", plain) is None
    with pytest.raises(NbSubagentsError, match="cannot run isolated"):
        delegation.tree_fields("I", True, None, None, None, isolated=True)
    assert delegation.tree_fields("I", None, None, None, None, isolated=True)["delegate"] is None
    assert server.name == "delegate" and server.argv[1] == "-c" and "delegation_server" in server.argv[2]
    assert config["root"] == "R" and config["cwd"] == "/p" and config["depth"] == 0


@pytest.mark.parametrize("value", [[1], [""], 3, {"scout": 1}])
def test_a_wrong_delegate_value_is_an_error_naming_the_right_ones(value):
    with pytest.raises(NbSubagentsError, match="list of preset names .* true for every preset"):
        check_shape({"preset": "scout", "task": "x", "delegate": value}, "Task 1")
    with pytest.raises(NbSubagentsError, match="max_depth' must be a whole number"):
        check_shape({"preset": "scout", "task": "x", "max_depth": -1}, "Task 1")


def test_a_preset_may_delegate(tmp_path):
    path = tmp_path / "lead.md"
    path.write_text("---\nname: lead\ndescription: d\ndelegate: [scout, reviewer]\n---\n")
    assert parse.parse_preset(path, "project").delegate == ("scout", "reviewer")
    path.write_text("---\nname: lead\ndescription: d\ndelegate: true\n---\n")
    assert parse.parse_preset(path, "project").delegate is True
    path.write_text("---\nname: lead\ndescription: d\ndelegate: 3\n---\n")
    with pytest.raises(parse.PresetError, match="'delegate' must be a list of preset names"):
        parse.parse_preset(path, "project")


def test_the_record_keeps_parent_root_depth_and_delegate(tmp_path):
    record = RunRecord(run_id="C", parent="R", tree_root="R", depth=1, delegate={"presets": True, "maxDepth": 2})
    write(tmp_path, record)
    on_disk = json.loads((tmp_path / "meta.json").read_text())
    assert (on_disk["parent"], on_disk["treeRoot"], on_disk["depth"]) == ("R", "R", 1)
    assert load(tmp_path) == record
    (tmp_path / "meta.json").write_text(json.dumps({**on_disk, "depth": "deep", "parent": 7}))
    assert (load(tmp_path).depth, load(tmp_path).parent) == (0, None)  # a wrong type reads as absent


def make(project, run_id, parent=None, root=None, depth=0, status="completed", cost=0.1, ended=True):
    run_dir = project / ".pi" / "subagents" / "runs" / run_id
    run_dir.mkdir(parents=True)
    write(run_dir, RunRecord(run_id=run_id, name=run_id.split("-")[-1], preset="scout", task="t", cwd=str(project),
                             root=str(project), created_at=f"2026-01-01T00:00:0{len(list(run_dir.parent.iterdir()))}Z",
                             parent=parent, tree_root=root, depth=depth))
    (run_dir / "result.json").write_text(json.dumps({
        "runId": run_id, "status": status, "stopReason": "stop" if status == "completed" else "tree_budget:cost",
        "usage": {"totalTokens": 10, "cost": cost}, "turns": 1, "toolCalls": 1}))
    if not ended:
        (run_dir / "result.json").unlink()
    registry.record(run_dir)
    return run_id


def test_the_registry_knows_each_runs_tree_and_draws_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    root = make(tmp_path, "20260101-000000-aaaaaa")
    a = make(tmp_path, "20260101-000001-bbbbbb", root, root, 1)
    b = make(tmp_path, "20260101-000002-cccccc", root, root, 1, "failed")
    c = make(tmp_path, "20260101-000003-dddddd", b, root, 2, "failed")
    other = make(tmp_path, "20260101-000004-eeeeee")
    assert [r["run_id"] for r in registry_tree.children(root, tmp_path)] == [a, b]
    tree = registry_tree.subtree(root, tmp_path)
    assert [n["run_id"] for n in tree.walk()] == [root, a, b, c]
    assert str(tree).splitlines() == [f"{root} aaaaaa completed", f"  {a} bbbbbb completed",
                                      f"  {b} cccccc failed (tree_budget:cost)", f"    {c} dddddd failed "
                                      "(tree_budget:cost)"]
    assert registry_tree.spend(tree.walk())["cost"] == pytest.approx(0.4)
    assert [n["run_id"] for n in registry_tree.subtree(b, tmp_path).walk()] == [b, c]
    assert [r.run_id for r in Run(tmp_path / ".pi" / "subagents" / "runs" / root).children] == [a, b]
    frame = nbsubagents.runs().set_index("run_id")
    assert frame.loc[c, "parent"] == b and frame.loc[c, "root"] == root and frame.loc[c, "depth"] == 2
    assert frame.loc[other, "root"] == other and frame.loc[other, "depth"] == 0  # a notebook's run: its own root


def test_a_registry_of_schema_9_gains_parent_root_and_depth_and_keeps_its_rows(tmp_path):
    db = registry.db_path(tmp_path)
    db.parent.mkdir(parents=True)
    registry.fetch(db, "SELECT 1")
    with sqlite3.connect(db) as conn:  # as schema 9 left it: no parent, root, depth
        conn.execute("DROP INDEX runs_root")
        for column in ("parent", "root", "depth"):
            conn.execute(f"ALTER TABLE runs DROP COLUMN {column}")
        conn.execute("INSERT INTO runs (run_id, status, run_dir) VALUES ('20260101-000000-abcdef', 'completed', 'x')")
        conn.execute("PRAGMA user_version = 9")
    registry.forget_loaded()
    assert registry.fetch(db, "SELECT run_id, parent, root, depth FROM runs") == [
        {"run_id": "20260101-000000-abcdef", "parent": None, "root": None, "depth": None}]
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == registry.SCHEMA_VERSION >= 10


def test_a_cancel_request_says_why_and_the_first_reason_stands(tmp_path):
    assert tree_end.verdict(tmp_path) == ("aborted", "cancelled", "cancelled")
    tree_end.request(tmp_path, "The tree under run R reached its budget: Stopped at 1 cost (max_cost=1)",
                     "tree_budget:cost")
    tree_end.request(tmp_path, "its parent run R ended", "parent_ended")  # later: adds nothing
    assert tree_end.verdict(tmp_path) == ("failed", "The tree under run R reached its budget: Stopped at 1 cost "
                                                    "(max_cost=1)", "tree_budget:cost")
    (tmp_path / "cancel.json").write_text(json.dumps({"reason": "its parent run R ended", "stopReason": "parent_ended"}))
    assert tree_end.verdict(tmp_path) == ("aborted", "cancelled: its parent run R ended", "cancelled")
    (tmp_path / "cancel.json").write_text(json.dumps({"reason": "x", "stopReason": "completed"}))  # unknown: plain
    assert tree_end.verdict(tmp_path) == ("aborted", "cancelled", "cancelled")


def test_the_scripted_model_delegates_as_pi_and_claude_code_name_the_tool():
    plan = demo_plan("delegate: scout | read README.md\\nls src\ndelegate_bg: lead | delegate: scout | ls .\n"
                     "delegate_wait\ndelegate_wait: 20260101-000000-abcdef")
    calls = [step["tool_calls"][0] for step in plan if "tool_calls" in step]
    assert calls == [
        {"name": "delegate", "arguments": {"preset": "scout", "task": "read README.md\nls src", "background": False}},
        {"name": "delegate", "arguments": {"preset": "lead", "task": "delegate: scout | ls .", "background": True}},
        {"name": "delegate_wait", "arguments": {}},
        {"name": "delegate_wait", "arguments": {"run_id": "20260101-000000-abcdef"}}]
    offered = ["Bash", "mcp__delegate__delegate", "mcp__delegate__delegate_wait"]
    assert claude_call("delegate", {"preset": "scout"}, "/w", offered) == ("mcp__delegate__delegate", {"preset": "scout"})
    assert claude_call("delegate_wait", {}, "/w", offered)[0] == "mcp__delegate__delegate_wait"
    assert claude_call("delegate_result", {}, "/w", offered)[0] == "delegate_result"  # not offered: as it is


def test_a_magic_line_and_a_call_say_delegate_as_a_preset_does():
    from nbsubagents import _magic_args, _magics

    def values(line):
        return _magic_args.run_option_values(_magic_args.parse(_magics.SubagentMagics.subagent, line))

    assert values("--delegate scout --delegate reviewer --max-depth 3 lead go")["delegate"] == ["scout", "reviewer"]
    said = values("--delegate yes --max-children 4 lead go")
    assert said["delegate"] == [True] and said["max_children"] == 4
    assert delegation.tree_fields("R", said["delegate"], None, said["max_children"], None)["delegate"]["presets"] is True
    assert delegation.tree_fields("R", "scout, reviewer", None, None, None)["delegate"]["presets"] == ["scout", "reviewer"]


def test_a_delegating_runs_end_asks_each_sub_run_still_going_to_stop_saying_why(tmp_path, monkeypatch):
    from nbsubagents._child.artifacts import RunPaths

    monkeypatch.chdir(tmp_path)
    runs = tmp_path / ".pi" / "subagents" / "runs"
    parent = make(tmp_path, "20260101-000000-aaaaaa", ended=False)
    going = make(tmp_path, "20260101-000001-bbbbbb", parent, parent, 1, ended=False)
    done = make(tmp_path, "20260101-000002-cccccc", parent, parent, 1)
    other = make(tmp_path, "20260101-000003-dddddd", ended=False)
    asked = tree_end.settle_children(RunPaths(runs / parent), parent, ("aborted", "cancelled"), "cancelled", wait=0.1)
    assert asked == [runs / going]  # an ended sub-run and another tree's run are left alone
    assert not (runs / done / "cancel.json").exists() and not (runs / other / "cancel.json").exists()
    assert tree_end.verdict(runs / going) == ("aborted", f"cancelled: its parent run {parent} ended (aborted: "
                                                         "cancelled)", "cancelled")
    (runs / going / "cancel.json").unlink()
    why = f"The tree under run {parent} reached its budget: Stopped at 1 cost (max_cost=1)"
    tree_end.settle_children(RunPaths(runs / parent), parent, ("failed", why), "tree_budget:cost", wait=0.1)
    assert tree_end.verdict(runs / going) == ("failed", why, "tree_budget:cost")  # the tree's words, all the way
