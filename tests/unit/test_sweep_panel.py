"""A sweep's panel model without a browser or pi: ordering, collapsed ends with scores, the time left, the line cap,
the widget's render discipline and the text lines outside a notebook (the grouping of failures and the cells'
scores: test_sweep_digest)."""

from __future__ import annotations

import io
import re
import threading

import pytest

from nbsubagents._child.formatter import ProgressLine
from nbsubagents._sweeps.progress import LINE_CAP, SweepState, SweepTextRenderer
from nbsubagents._ui.sweep_panel import SweepPanel, SweepRenderer, lines_html

NOW = 1_000_000.0
VIEW = "application/vnd.jupyter.widget-view+json"


class FakeRun:
    """What the panel reads of a run: id, cell params, status, result, scores and its launched process."""

    def __init__(self, i: int, *, repeat: int = 1) -> None:
        self.run_id = f"20260101-000000-{i:06x}"
        self.params = {"task_id": f"task-{i}", "preset": "scout", "model": "demo/scripted", "repeat": repeat}
        self.name, self.preset, self.model = f"run {i}", "scout", "demo/scripted"
        self.result: dict | None = None
        self.scores: dict = {}
        self.process = None

    @property
    def status(self) -> str:  # as a local run's: running once launched
        return self.result["status"] if self.result else "queued" if self.process is None else "running"

    def finish(self, status: str = "completed", took: float = 10.0, cost: float = 0.002, error: str | None = None,
               **scores) -> FakeRun:
        self.result = {"status": status, "durationSeconds": took, "usage": {"cost": cost}, "errorMessage": error,
                       "stopReason": "error" if error else "stop"}
        self.scores = scores
        return self


def sweep(n: int, *, concurrency: int = 3, cap: int = LINE_CAP) -> tuple[SweepState, list[FakeRun]]:
    runs = [FakeRun(i) for i in range(n)]
    return SweepState(runs, title="Experiment demo", concurrency=concurrency, cap=cap, clock=lambda: NOW), runs


def start(state: SweepState, run: FakeRun, ago: float, line: str = "Running `sleep 1`") -> None:
    state.add(run, {"type": "run_start", "ts": NOW - ago}, None)
    state.add(run, {"type": "tool_call", "ts": NOW}, ProgressLine("tool", line))


def end(state: SweepState, run: FakeRun, **kwargs) -> None:
    state.end(run.finish(**kwargs))


def test_running_runs_show_longest_first_completed_ones_fold_newest_first_and_queued_runs_are_a_count():
    state, runs = sweep(24)
    for r in runs[:6]:
        start(state, r, ago=30)
        end(state, r, took=12.0, words=42)
    start(state, runs[20], ago=5)
    start(state, runs[7], ago=9)   # running longest: on top
    start(state, runs[6], ago=1, line="Reading README.md")
    shown, more = state.shown()
    assert [r.run for r in shown] == [runs[7], runs[20], runs[6]] and more == 0
    assert [r.run for r in state.completed()] == [*reversed(runs[:6])]  # the fold, live: the latest first
    assert state.counts() == {"running": 3, "queued": 15, "completed": 6}
    assert state.header_text().startswith("Experiment demo · 6/24 · 3 running, 15 queued, 6 done · about ")
    table = lines_html(state)
    assert table.count('class="nbsubagents-sweep-line ') == 3  # not one line per queued or completed run
    assert "○ 15 queued" in table and "Reading README.md" in table and "9.0s" in table  # a running run's clock
    assert [m for m in re.findall(r"nbsubagents-status-(\w+)", table)] == ["running"] * 3
    assert [r.run for r in state.completed(final=True)] == runs[:6]  # the record's fold: the sweep's own order


def test_an_ended_run_is_one_line_with_duration_cost_and_scores_and_a_failure_shows_its_reason():
    state, runs = sweep(4)
    start(state, runs[0], ago=4)
    end(state, runs[0], took=3.5, cost=0.0123, words=42, check_test=True, ratio=0.123456)
    start(state, runs[1], ago=2)
    end(state, runs[1], status="failed", took=2.0, error="500 upstream exploded\nat line 2")
    panel_html = SweepPanel.__new__(SweepPanel)  # the static record needs no widget
    panel_html.state, panel_html.lock = state, threading.RLock()
    record = panel_html.static_html()
    fold = re.search(r'<details class="nbsubagents-sweep-done.*?</details>', record, re.S).group(0)
    line = re.search(r'<tr class="nbsubagents-sweep-line nbsubagents-status-completed".*?</tr>', fold, re.S).group(0)
    assert "✓ completed" in line and "scout · demo/scripted · task-0" in line and "3.5s" in line
    assert "$0.0123" in line and "words=42, check_test=True, ratio=0.123" in line
    assert "Running" not in line  # what it did is history: the line is collapsed
    group = re.search(r'<details class="nbsubagents-sweep-group".*?</details>', record, re.S).group(0)
    assert "✗ 1 ×" in group and "500 upstream exploded" in group and "task_id=task-1" in group
    assert "500 upstream exploded\nat line 2" in group and runs[1].run_id in group
    assert "· #1" not in record  # one repeat: the cell does not name it
    text = panel_html.static_text()
    assert "✗ 1 × 500 upstream exploded in cell task_id=task-1 (1)" in text and f"runs: {runs[1].run_id}" in text


def test_the_time_left_comes_from_ended_durations_and_the_concurrency():
    state, runs = sweep(10, concurrency=3)
    start(state, runs[0], ago=20)
    start(state, runs[1], ago=5)
    assert state.time_left() is None and "estimating the time left" in state.header_text()  # nothing to go by yet
    end(state, runs[2], took=10.0)
    end(state, runs[3], took=20.0)
    # mean 15 s: 6 queued runs are 90 s of work, the running ones 0 s (past the mean) and 10 s; 3 at once: 33 s.
    # The pace so far says longer: 20 s since the first start for 2 runs ended and 1 + 1/3 of a run's mean ran,
    # 6 s a run, for the 6 + 2/3 runs left: 40 s
    assert state.time_left() == pytest.approx(max((90 + 0 + 10) / 3, 20 / (2 + 1 + 5 / 15) * (8 - 1 - 5 / 15)))
    assert state.time_left() == pytest.approx(40)
    for r in runs:
        if r.status == "queued" or r in runs[:2]:
            end(state, r)
    assert state.time_left() == 0 and state.done and "left" not in state.header_text()
    aborted, _ = sweep(3)
    end(aborted, aborted.lines[next(iter(aborted.lines))].run, status="aborted", took=0.5)
    assert aborted.time_left() is None  # a cut-short run says nothing of how long a run takes


def test_a_huge_sweep_shows_at_most_the_cap_and_says_how_many_more():
    state, runs = sweep(1000, concurrency=64, cap=40)
    for r in runs[:64]:
        start(state, r, ago=3)
    for r in runs[64:300]:
        end(state, r)
    shown, more = state.shown()
    assert len(shown) == 40 and more == 64 - 40
    assert all(r.status == "running" for r in shown)  # the running ones, the completed ones a fold apart
    table = lines_html(state)
    assert table.count("class=\"nbsubagents-sweep-line ") == 40 and "… and 24 more running" in table
    assert "○ 700 queued" in table
    small, small_runs = sweep(100, concurrency=64, cap=40)
    for r in small_runs[:64]:
        start(small, r, ago=3)
    assert len(table) < 1.2 * len(lines_html(small))  # what a render draws does not grow with the sweep


def test_a_launched_run_shows_running_before_its_first_event():
    state, runs = sweep(3)
    runs[0].process = object()  # what the drive loop's launch sets
    state.changed = False
    state.refresh()
    assert state.counts() == {"running": 1, "queued": 2} and state.changed


def test_the_widget_renders_on_the_clock_and_its_folds_stay_as_the_reader_left_them():
    shown = []
    renderer = SweepRenderer(title="Experiment demo", concurrency=2, display=shown.append, ticker=False)
    runs = [FakeRun(i, repeat=i % 2 + 1) for i in range(4)]
    renderer.start(runs)
    panel = renderer.panel
    assert shown == [panel.widget] and panel.renders == 1
    renderer.event(runs[0], {"type": "run_start", "ts": 1.0}, ProgressLine("tool", "Listing src"))
    assert panel.renders == 1  # an event changes the state; only the clock's tick renders
    renderer.tick()
    assert panel.renders == 2 and "Listing src" in panel.board.value and "· #1" in panel.board.value
    # the counts and the rows travel in one widget's value (one message): a page never shows them a tick apart
    assert "nbsubagents-sweep-count" in panel.board.value and "nbsubagents-sweep-line" in panel.board.value
    assert panel.fail_fold.layout.display == "none" == panel.done_fold.layout.display  # nothing ended: no folds
    renderer.end(runs[1].finish("failed", error="boom"))
    renderer.tick()
    assert panel.fail_fold.titles == ("✗ 1 failed run, by reason",) and panel.fail_fold.layout.display is None
    assert "✗ 1 ×" in panel.board.value and "boom" in panel.board.value  # the reason's line leads on the board
    assert "boom" in panel.fail_list.value and runs[1].run_id in panel.fail_list.value
    panel.fail_fold.selected_index = 0  # the reader opens it (the widget's state: no render touches it)
    drawn = panel.fail_list.value
    renderer.end(runs[0].finish())
    renderer.tick()
    assert panel.done_fold.titles == ("✓ 1 completed",) and runs[0].run_id in panel.done_list.value
    assert panel.fail_list.value == drawn  # no new failure: its fold is not drawn again
    renderer.end(runs[2].finish("failed", error="again"))
    renderer.tick()
    assert panel.fail_fold.selected_index == 0 and "again" in panel.fail_list.value  # still open, and redrawn
    assert panel.fail_fold.titles == ("✗ 2 failed runs, by reason",)
    renders = panel.renders
    panel.last_render += 100.0  # rendered "just now": with nothing new, a tick draws nothing
    renderer.tick()
    assert panel.renders == renders
    renderer.end(runs[3].finish())
    renderer.close()
    assert "2/4" not in panel.board.value and "4/4" in panel.board.value


def test_the_saved_output_is_the_sweeps_record_with_its_widget_only_while_it_goes():
    """The notebook's output (kernel.NotebookRecord): while the sweep goes, the record and the widget view; at
    the end the record alone, so a saved notebook reopens without "model not found"."""
    sent = []
    renderer = SweepRenderer(title="Experiment demo", concurrency=2, ticker=False,
                             publish=lambda bundle, display_id, update: sent.append((bundle, display_id, update)))
    runs = [FakeRun(i) for i in range(3)]
    renderer.start(runs)
    first, display_id, update = sent[0]
    assert not update and VIEW in first and "0/3" in first["text/html"]
    for run in runs:
        renderer.end(run.finish())
    renderer.close()
    last, same_id, update = sent[-1]
    assert update and same_id == display_id and VIEW not in last
    assert "3/3" in last["text/html"] and last["text/html"].count("<tr") >= 3


def test_outside_a_notebook_each_end_is_one_line_and_the_close_lists_the_failures():
    out = io.StringIO()
    text = SweepTextRenderer(title="Experiment demo", concurrency=2, stream=out)
    runs = [FakeRun(i) for i in range(3)]
    text.start(runs)
    text.event(runs[0], {"type": "run_start", "ts": 1.0}, ProgressLine("tool", "Listing src"))
    text.end(runs[0].finish(took=3.0, words=7))
    text.end(runs[1].finish("failed", error="provider said no"))
    text.end(runs[2].finish())
    text.close()
    lines = out.getvalue().splitlines()
    assert lines[0] == "▶ Experiment demo: 3 runs, at most 2 at once"
    assert re.fullmatch(r"✓ scout · demo/scripted · task-0\s+3\.0s\s+\$0\.0020\s+words=7", lines[1])
    assert lines[2].startswith("✗ scout · demo/scripted · task-1") and lines[2].endswith("provider said no")
    assert lines[4] == "Experiment demo · 3/3 · 2 done, 1 failed"
    assert lines[5] == "✗ 1 × provider said no in cell task_id=task-1 (1)"
    assert lines[6] == f"    runs: {runs[1].run_id}"
    assert lines[7] == "cells (3):" and re.fullmatch(r"  task_id=task-0\s+1/1 ended  ✓ 1  ✗ 0  words=7", lines[8])
