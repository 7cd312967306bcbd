"""A tree as the views show it (issue 58), from registry rows and run folders without a model: a run's sub-agents as
compact lines under its panel (its static record's HTML and text, ``repr``), and the status item counting a tree once
with its live leaves."""

from __future__ import annotations

import json
import re
import sqlite3

from nbsubagents import _registry as registry
from nbsubagents._child.record import RunRecord, write
from nbsubagents._lifecycle.handle import Run
from nbsubagents._ui.statusbar import StatusBar
from nbsubagents._views.children import Children
from nbsubagents._views.panel_state import PanelState
from nbsubagents.lab import readers

RUNS = (".pi", "subagents", "runs")
ROOT, A, B, C = "20260101-000000-aaaaaa", "20260101-000001-bbbbbb", "20260101-000002-cccccc", "20260101-000003-dddddd"


def make(project, run_id, parent=None, root=None, depth=0, status="completed", cost=0.1, preset="scout",
         answer="found 3 files", delegate=None, events=(), budget=None):
    """A run folder and its registry row; ``status`` None: a run still going (no result.json, its events so far)."""
    run_dir = project.joinpath(*RUNS, run_id)
    run_dir.mkdir(parents=True)
    write(run_dir, RunRecord(run_id=run_id, name=preset, preset=preset, task="t", cwd=str(project),
                             root=str(project), created_at=f"2026-01-01T00:00:0{len(list(run_dir.parent.iterdir()))}Z",
                             parent=parent, tree_root=root, depth=depth, delegate=delegate, budget=budget))
    (run_dir / "events.jsonl").write_text("".join(json.dumps({"seq": i, "ts": 1.0, **e}) + "\n"
                                                  for i, e in enumerate(events)))
    if status is not None:
        (run_dir / "result.json").write_text(json.dumps({
            "runId": run_id, "status": status, "finalText": answer if status == "completed" else "",
            "errorMessage": None if status == "completed" else "The tree under run R reached its budget",
            "stopReason": "stop" if status == "completed" else "tree_budget:cost",
            "usage": {"totalTokens": 10, "cost": cost}, "turns": 1, "toolCalls": 1}))
    registry.record(run_dir)
    if status is None:  # its supervisor started it (one that is gone would be settled by a reconcile, not a read)
        with sqlite3.connect(registry.db_path(project)) as conn:
            conn.execute("UPDATE runs SET status = 'running' WHERE run_id = ?", (run_id,))
    return run_dir


def tree(project, going=False, budget=None):
    """A lead that delegated a scout and a sub-lead, which delegated a scout of its own (``going``: still going)."""
    lead = make(project, ROOT, preset="lead", delegate={"presets": True}, status=None if going else "completed",
                budget=budget)
    make(project, A, ROOT, ROOT, 1, answer="README says hello")
    make(project, B, ROOT, ROOT, 1, preset="sublead", delegate={"presets": True}, status=None if going else "failed")
    make(project, C, B, ROOT, 2, status=None if going else "failed", events=[
        {"type": "run_start"}, {"type": "tool_call", "id": "1", "name": "bash", "args": {"command": "ls src"}}])
    return Run(lead)


def test_a_panel_record_lists_a_runs_sub_agents_under_it_grandchildren_indented(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    text, page = PanelState.of_run(tree(tmp_path)).static_record()
    lines = text.splitlines()
    at = lines.index("Sub-agents:")
    assert lines[at + 1:at + 4] == [
        "  ✓ scout bbbbbb · completed: README says hello · $0.1000",
        "  ✗ sublead cccccc · failed (tree_budget:cost): The tree under run R reached its budget · $0.1000",
        "    ✗ scout dddddd · failed (tree_budget:cost): The tree under run R reached its budget · $0.1000"]
    found = re.findall(r'<div class="nbsubagents-child nbsubagents-child-d(\d)" role="listitem" data-run-id="([^"]+)" '
                       r'data-status="(\w+)"', page)
    assert found == [("1", A, "completed"), ("1", B, "failed"), ("2", C, "failed")]
    assert "README says hello" in page and ".nbsubagents-child-d2{" in page  # its rules travel with it
    assert "Sub-agents:" in repr(Run(tmp_path.joinpath(*RUNS, ROOT)))  # str(run) names them too


def test_a_run_that_may_not_delegate_never_reads_the_registry_for_sub_agents(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run = Run(make(tmp_path, ROOT))
    looks = []
    monkeypatch.setattr("nbsubagents._registry.tree.subtree", lambda *a, **k: looks.append(a))
    assert Children(run).refresh(force=True) is False
    assert "Sub-agents" not in PanelState.of_run(run).static_text() + repr(run)
    assert looks == []


def test_a_running_sub_agent_says_what_it_does_now_and_is_read_only_for_what_it_added(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    lead = tree(tmp_path, going=True)
    children = Children(lead)
    assert children.refresh(force=True) is True
    by_id = {c.run_id: c for c in children.lines}
    assert by_id[C].depth == 2 and by_id[C].status == "running" and "ls src" in by_id[C].doing, by_id[C]
    assert by_id[A].doing.startswith("completed: README")
    assert children.refresh() is False  # within CHILD_POLL: no look at all
    with open(tmp_path.joinpath(*RUNS, C, "events.jsonl"), "a") as f:
        f.write(json.dumps({"seq": 9, "ts": 2.0, "type": "tool_call", "id": "2", "name": "read",
                            "args": {"path": "README.md"}}) + "\n")
    assert children.refresh(force=True) is True
    assert "README.md" in {c.run_id: c for c in children.lines}[C].doing


def test_the_status_bar_counts_a_tree_once_with_its_live_leaves(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    tree(tmp_path, going=True)  # lead running, its scout A done, sub-lead B running, its scout C running
    make(tmp_path, "20260101-000009-eeeeee", status=None, preset="solo")
    bar = StatusBar(tmp_path, follow=False)
    assert bar.counts["running"] == 2 and bar.counts["total"] == 2, bar.counts
    assert bar.text.startswith("runs: 2 running / 2 total")
    labels = [label for label, _, _ in bar.running]
    assert any(label.startswith("lead") and label.endswith("(1 sub-agent running)") for label in labels), labels
    assert any(label.startswith("solo") and "sub-agent" not in label for label in labels), labels
    seen = readers.running(tmp_path)
    assert seen["running"] == 2 and "2 running" in seen["summary"]
    assert sorted(r["run_id"] for r in seen["runs"]) == [ROOT, "20260101-000009-eeeeee"]
    lead = next(r for r in seen["runs"] if r["run_id"] == ROOT)
    assert lead["label"].endswith("(1 sub-agent running)") and lead["leaves"] == 1


def test_progress_outside_a_notebook_names_each_sub_agent_as_it_ends(tmp_path, monkeypatch):
    import io

    from nbsubagents._ui.renderers import TextRenderer

    monkeypatch.chdir(tmp_path)
    lead, out = tree(tmp_path), io.StringIO()
    renderer = TextRenderer(out)
    renderer.end(lead)
    renderer.end(lead)  # said once each
    lines = out.getvalue().splitlines()
    assert lines[:3] == ["  ✓ scout bbbbbb · completed: README says hello · $0.1000",
                         "  ✗ sublead cccccc · failed (tree_budget:cost): The tree under run R reached its budget · $0.1000",
                         "    ✗ scout dddddd · failed (tree_budget:cost): The tree under run R reached its budget · $0.1000"]
    assert lines[3].startswith("✓ lead completed") and len(lines) == 5


def test_a_delegating_run_s_header_shows_its_tree_s_spend_against_its_budget(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    state = PanelState.of_run(tree(tmp_path, budget={"maxCost": 0.5, "maxToolCalls": 20}))
    state.children_lines(final=True)
    words = [value for key, value in state.header_fields("completed") if key == "extra"]
    assert words == ["tree budget cost 0.4/0.5 · tools 4/20"], words  # its own 0.1 and 1 call, and its 3 sub-agents'
