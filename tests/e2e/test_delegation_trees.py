"""Trees the scripted model grows itself (issue 58): a parent run's model calls its delegate tool, as pi sees it
(``delegate``) and as Claude Code does (``mcp__delegate__delegate``), through the tool servers the harnesses give a
child (issue 57), and the tree completes offline."""

from __future__ import annotations


import nbsubagents

from helpers import processes_inside, use_claude_code, wait_for


LEAD = """---
name: lead
description: Splits a task across scouts.
model: {model}
tools: read, ls, bash
delegate: [scout]
{more}---
You lead.
"""
SPLIT = ("delegate_bg: scout | read README.md\ndelegate_bg: scout | ls src\ndelegate: scout | run: echo third\n"
         "delegate_wait\nsay: merged")


def check_tree(lead, tmp_path):
    assert lead.status == "completed", lead.error
    kids = lead.children
    assert len(kids) == 3 and all(k.status == "completed" and k.record.parent == lead.run_id for k in kids)
    results = [e for e in lead.events() if e["type"] == "tool_result"]
    assert [r["name"] for r in results] == ["delegate", "delegate", "delegate", "delegate_wait"]
    assert [kids[0].run_id in results[0]["text"], kids[1].run_id in results[1]["text"]] == [True, True]
    if lead.harness == "pi":  # pi keeps a result's details: a view nests each sub-run under its call
        assert [r["details"]["run_id"] for r in results[:3]] == [k.run_id for k in kids]
    assert "third" in results[2]["text"]
    assert "# Demo project" in results[3]["text"] and "app.py" in results[3]["text"]
    assert "merged" in lead.output
    assert [n["depth"] for n in lead.tree().walk()] == [0, 1, 1, 1]
    wait_for(lambda: not processes_inside(tmp_path), 30, "no process of the tree left")


def test_a_lead_on_pi_splits_its_task_across_three_scouts_and_merges_their_answers(project, tmp_path):
    (project / ".pi" / "subagents" / "lead.md").write_text(LEAD.format(model="demo/scripted", more=""))
    check_tree(nbsubagents.run("lead", SPLIT, show=False, timeout=300), tmp_path)


def test_a_lead_on_claude_code_grows_the_same_tree(project, scripted, tmp_path, monkeypatch):
    use_claude_code(monkeypatch, scripted.url, project.parent / "home")
    (project / ".pi" / "subagents" / "lead.md").write_text(LEAD.format(model="claude-sonnet-4-5",
                                                                     more="harness: claude-code\n"))
    check_tree(nbsubagents.run("lead", SPLIT, show=False, timeout=300), tmp_path)


def runaway(body, index):
    """A sub-agent whose task starts with "runaway" calls tools for ever; every other run is the demo."""
    from nbsubagents._pi.scripted import _after_last_user, demo_step

    if _after_last_user(body.get("messages") or [])[0].startswith("runaway"):
        return {"text": f"step {index}", "delay": 0.1,
                "tool_calls": [{"name": "bash", "arguments": {"command": f"echo step-{index}"}}]}
    return demo_step(body, index)


def test_a_runaway_tree_stops_at_its_roots_max_cost_every_run_saying_why(project, scripted, tmp_path):
    (project / ".pi" / "subagents" / "lead.md").write_text(LEAD.format(model="demo/scripted", more=""))
    scripted.script = runaway
    lead = nbsubagents.run("lead", "delegate_bg: scout | runaway 1\ndelegate_bg: scout | runaway 2\ndelegate_wait",
                           show=False, max_cost=0.05, timeout=300)
    assert lead.status == "failed" and lead.result["stopReason"] == "tree_budget:cost", lead.error
    kids = lead.children
    assert len(kids) == 2
    for kid in kids:
        assert kid.status == "failed" and kid.result["stopReason"] == "tree_budget:cost", kid.error
        assert kid.error == lead.error and "max_cost=0.05" in kid.error
        assert kid.result["endedAt"] <= lead.result["endedAt"]
    wait_for(lambda: not processes_inside(tmp_path), 30, "no process of the tree left")
