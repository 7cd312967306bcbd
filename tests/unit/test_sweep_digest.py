"""What a sweep's record and live panel lead with (issue 56, item 4): the failures grouped by kind of reason with the
cells each hit, then the cells' scores, then the runs with the completed ones collapsed into one fold; in the static
record, its text form and the live board alike, and bounded at 1,000 runs."""

from __future__ import annotations

import re

from test_sweep_panel import NOW, FakeRun

from nbsubagents._sweeps.digest import REASON_CAP, reason_kind
from nbsubagents._sweeps.progress import GROUP_RUNS, LINE_CAP, SweepState, state_text
from nbsubagents._ui.sweep_panel import SweepRenderer

RATE = "429 Too Many Requests: rate limited (request id {:08x}af)"  # reason A: the id differs run by run
SLOW = "Timed out after {}s"                                         # reason B: the seconds differ run by run


def outcomes() -> tuple[list[FakeRun], list[FakeRun]]:
    """200 runs in three cells (model=a, b, c) in the sweep's order: the first 40 completed, then 60 of reason A
    (40 in model=a, 20 in model=b) among 80 more completed, then 20 of reason B in model=c."""
    runs, ended = [], []
    for i in range(200):
        run = FakeRun(i)
        run.params = {**run.params, "task_id": "t1", "model": "abc"[0 if i < 120 else 1 if i < 180 else 2]}
        runs.append(run)
    a_cells = [r for r in runs if r.params["model"] == "a"][40:80] + [r for r in runs if r.params["model"] == "b"][:20]
    for k, run in enumerate(a_cells):
        ended.append(run.finish("failed", took=1.0, error=RATE.format(k * 7919)))
    for k, run in enumerate(runs[180:]):
        ended.append(run.finish("failed", took=30.0 + k % 2, error=SLOW.format(30 + k % 2)))
    for run in runs:
        if run.result is None:
            ended.append(run.finish("completed", took=4.0, check=run.params["model"] != "c", words=40))
    return runs, ended


def ended_sweep(runs: list[FakeRun], ended: list[FakeRun]) -> SweepState:
    state = SweepState(runs, title="Experiment big", concurrency=8, clock=lambda: NOW)
    for run in ended:
        state.end(run)
    return state


def record_of(state: SweepState):
    renderer = SweepRenderer(title="Experiment big", display=lambda widget: None, ticker=False)
    renderer.start([])
    renderer.panel.state = state
    return renderer.panel


def test_reasons_group_by_kind_run_specific_bits_made_alike_but_not_http_statuses():
    assert reason_kind(RATE.format(1)) == reason_kind(RATE.format(2)) == "429 Too Many Requests: rate limited (request id …)"
    assert reason_kind("Timed out after 30s") == reason_kind("Timed out after 31.5s") == "Timed out after …s"
    assert reason_kind("500 upstream exploded") != reason_kind("502 upstream exploded")  # another status, another kind
    assert reason_kind("open /tmp/run-1/notes.md: no such file\nTraceback ...") == "open …: no such file"
    assert reason_kind("run 20260101-000000-00abcd died") == reason_kind("run 20261231-235959-ffee01 died")
    assert reason_kind("unknown model 'demo/x'") == reason_kind('unknown model "anthropic/y"')
    assert reason_kind('500: {"message":"upstream exploded"}') != reason_kind('500: {"message":"database down"}')


def test_the_record_leads_with_the_failures_by_reason_then_the_cells_then_the_runs_with_successes_folded():
    runs, ended = outcomes()
    state = ended_sweep(runs, ended)
    groups = state.failure_groups()
    assert [(g.status, len(g.rows), g.cells()) for g in groups] == [
        ("failed", 60, [("model=a", 40), ("model=b", 20)]), ("failed", 20, [("model=c", 20)])]
    assert groups[0].text == "429 Too Many Requests: rate limited (request id …)"  # the runs said it differently
    assert groups[1].text == "Timed out after …s"

    html = record_of(state).static_html()
    order = [html.index(mark) for mark in (
        "200/200</span>", "✗ 60 ×", "✗ 20 ×", 'class="nbsubagents-sweep-lines nbsubagents-sweep-cells',
        "✓ 120 completed</summary>")]
    assert order == sorted(order), order
    first = re.search(r'<details class="nbsubagents-sweep-group".*?</summary>', html, re.S).group(0)
    assert re.sub(r"<[^>]+>", "", first) == (
        "✗ 60 × 429 Too Many Requests: rate limited (request id …) in cells model=a (40), model=b (20)")
    for group, n in zip(re.findall(r'<details class="nbsubagents-sweep-group".*?</details>', html, re.S), (60, 20)):
        assert group.count('class="nbsubagents-sweep-failure"') == min(n, GROUP_RUNS)  # its runs, in the fold
    fold = re.search(r'<details class="nbsubagents-sweep-done.*?</details>', html, re.S).group(0)
    assert fold.count("nbsubagents-status-completed") == 120 == html.count("nbsubagents-status-completed")
    cells = re.findall(r'<tr class="nbsubagents-sweep-cell-row">(.*?)</tr>', html, re.S)
    assert [re.sub(r"<[^>]+>", " ", c).split() for c in cells] == [
        ["model=a", "120/120", "80", "40", "80/80", "40"], ["model=b", "60/60", "40", "20", "40/40", "40"],
        ["model=c", "20/20", "0", "20", "–", "–"]]


def test_the_text_form_leads_the_same_way():
    runs, ended = outcomes()
    text = state_text(ended_sweep(runs, ended)).splitlines()
    assert text[0] == "Experiment big · 200/200 · 120 done, 80 failed"
    assert text[2] == "✗ 60 × 429 Too Many Requests: rate limited (request id …) in cells model=a (40), model=b (20)"
    assert text[3].startswith("    runs: 20260101-000000-") and text[3].endswith(" and 57 more")
    assert text[4] == "✗ 20 × Timed out after …s in cell model=c (20)"
    assert text[6] == "cells (3):" and text[7].split() == ["model=a", "120/120", "ended", "✓", "80", "✗", "40",
                                                           "check=80/80", "words=40"]
    assert text[-1] == "✓ 120 completed" and len(text) == 11  # no line per completed run


def test_the_live_board_leads_with_the_grouped_failures_and_stays_bounded_at_a_thousand_runs():
    renderer = SweepRenderer(title="Experiment big", concurrency=64, display=lambda widget: None, ticker=False)
    runs = [FakeRun(i) for i in range(1000)]
    for i, run in enumerate(runs):
        run.params = {**run.params, "task_id": f"t{i % 10}", "model": "ab"[i % 2]}
    renderer.start(runs)
    for run in runs[:64]:
        renderer.event(run, {"type": "run_start", "ts": NOW - 5}, None)
    for k, run in enumerate(runs[64:664]):
        renderer.end(run.finish("failed", error=RATE.format(k)) if k % 3 == 0 else
                     run.finish("failed", error=f"reason {'ABCDEFGHIJKLMNOPQRSTUVWXYZabcd'[k // 3]} of 30")
                     if k % 3 == 1 and k < 90 else run.finish(words=k))
    renderer.tick()
    panel = renderer.panel
    board = panel.board.value
    order = [board.index(mark) for mark in ("600/1000</span>", "✗ 200 ×", "nbsubagents-sweep-cells",
                                             "nbsubagents-sweep-line ", "○ 336 queued")]
    assert order == sorted(order), order
    assert board.count('class="nbsubagents-sweep-group"') == REASON_CAP  # 1 + 30 reasons: the first 12 of them
    assert "… and 19 more reasons (19 runs)" in board
    assert board.count('class="nbsubagents-sweep-line ') == LINE_CAP and "nbsubagents-status-completed" not in board
    assert panel.done_fold.titles == ("✓ 370 completed",)
    assert panel.done_list.value.count("nbsubagents-status-completed") == LINE_CAP  # the latest of them
    assert panel.fail_list.value.count('class="nbsubagents-sweep-failure"') <= REASON_CAP * GROUP_RUNS
