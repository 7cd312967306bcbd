"""A tree as a notebook shows it (issue 58), grown by real pi runs against the scripted model: the lead's live panel
lists its sub-agents while they run and its static record lists them at the end (grandchildren indented), the
registry links them, and the status item counts the tree once with its live leaves while it runs."""

from __future__ import annotations

import re

import nbsubagents
from nbsubagents import _api
from nbsubagents._ui.panels import WidgetRenderer
from nbsubagents._ui.statusbar import StatusBar
from nbsubagents.lab import readers

from helpers import processes_inside, wait_for

LEAD = """---
name: lead
description: Splits a task across scouts, or hands a part to another lead.
model: demo/scripted
tools: read, ls, bash
delegate: [scout, lead]
---
You lead.
"""
CHILD = re.compile(r'<div class="nbsubagents-child nbsubagents-child-d(\d)" role="listitem" data-run-id="([^"]+)" '
                   r'data-status="(\w+)"')


def test_a_two_level_tree_shows_under_its_lead_live_and_in_its_record_and_counts_once(project, tmp_path,
                                                                                       monkeypatch):
    (project / ".pi" / "subagents" / "lead.md").write_text(LEAD)
    go = tmp_path / "go"
    sent: list = []
    renderer = WidgetRenderer(publish=lambda bundle, display_id, update: sent.append(bundle))
    monkeypatch.setattr(_api, "renderer_for", lambda show: renderer)
    seen: list[str] = []  # every value the live panel's sub-agents box took

    def watch(runs):
        WidgetRenderer.start(renderer, runs)
        renderer.view.children_html.observe(lambda change: seen.append(change["new"]), names="value")

    monkeypatch.setattr(renderer, "start", watch)
    # a scout answers at once; then another lead, which hands its part to a scout that holds until the test saw it
    lead = nbsubagents.start("lead", "delegate: scout | read README.md\n"
                             f"delegate_bg: lead | delegate: scout | run: while [ ! -f {go} ]; do sleep 0.2; done; "
                             "echo released\ndelegate_wait\nsay: merged", timeout=300)

    def grandchild_running():
        return any(("2", "running") == (depth, status) for value in list(seen) for depth, _, status in
                   CHILD.findall(value))

    wait_for(grandchild_running, 120, "the live panel shows the grandchild running, indented under its lead")
    bar = StatusBar(project, follow=False)  # the whole tree goes: one run, its one live leaf named
    assert bar.counts["running"] == 1 and bar.counts["total"] == 1, bar.counts
    assert [label for label, _, _ in bar.running] == ["lead · demo/scripted (1 sub-agent running)"]
    item = readers.running(project)
    assert item["running"] == 1 and [r["run_id"] for r in item["runs"]] == [lead.run_id]
    assert item["runs"][0]["label"].endswith("(1 sub-agent running)")
    go.write_text("")
    lead.wait(300)
    assert lead.status == "completed", lead.error

    scout, sublead = lead.children  # the registry's links, oldest first
    (grandchild,) = sublead.children
    assert [scout.record.preset, sublead.record.preset, grandchild.record.preset] == ["scout", "lead", "scout"]
    assert (grandchild.record.parent, grandchild.record.tree_root, grandchild.record.depth) == (
        sublead.run_id, lead.run_id, 2)
    frame = nbsubagents.runs().set_index("run_id")
    assert list(frame.loc[[lead.run_id, scout.run_id, sublead.run_id, grandchild.run_id], "depth"]) == [0, 1, 1, 2]
    assert set(frame.loc[[scout.run_id, sublead.run_id], "parent"]) == {lead.run_id}
    assert set(frame.loc[[scout.run_id, grandchild.run_id], "root"]) == {lead.run_id}

    final = sent[-1]  # the lead's panel record, as a saved notebook keeps it
    assert CHILD.findall(final["text/html"]) == [("1", scout.run_id, "completed"), ("1", sublead.run_id, "completed"),
                                                 ("2", grandchild.run_id, "completed")]
    text = final["text/plain"].splitlines()
    at = text.index("Sub-agents:")
    tail = grandchild.run_id.rpartition("-")[2]
    assert text[at + 1].startswith(f"  ✓ scout {scout.run_id.rpartition('-')[2]} · completed")
    assert text[at + 2].startswith(f"  ✓ lead {sublead.run_id.rpartition('-')[2]} · completed")
    assert text[at + 3].startswith(f"    ✓ scout {tail} · completed")
    assert "Sub-agents:" in repr(lead) and f"    ✓ scout {tail}" in repr(lead)
    bar.refresh()
    assert bar.counts["completed"] == 1 and bar.counts["total"] == 1
    wait_for(lambda: not processes_inside(tmp_path), 30, "no process of the tree left")
