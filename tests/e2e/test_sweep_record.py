"""A sweep's record and live panel lead with its failures grouped by reason (issue 56, item 4), end to end: a real
sweep of the real pi on the scripted model, with tasks that fail by design, watched through the live panel the
notebook edge lends (its widgets read without a frontend) and saved as its static record."""

from __future__ import annotations

import io
import os
import re

import pytest

import nbsubagents
from nbsubagents._child.harnesses.pi import write_agent_dir
from nbsubagents._lifecycle.edge import edge
from nbsubagents._ui.sweep_panel import SweepRenderer

# task-1 fails in every cell (HTTP 500), task-2 only for demo/mini (HTTP 429), task-3 runs long enough for the live
# panel to render while failures are in and runs still go
TASKS = ["fail: 500 upstream exploded", "fail for demo/mini: 429 rate limited\nread README.md", "run: sleep 2"]
VIEW = "application/vnd.jupyter.widget-view+json"


class Watched(SweepRenderer):
    """The live panel, with a copy of its board each time the clock renders it while failures are in and runs go."""

    boards: list[tuple[dict[str, int], str]] = []

    def tick(self) -> None:
        super().tick()
        panel = self.panel
        if panel is not None and panel.state.failures() and not panel.state.done:
            with self._lock:
                self.boards.append((panel.state.counts(), panel.board.value))


def text_of(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


@pytest.fixture
def watched(project, scripted, monkeypatch):
    """The sweep's live panel as in a notebook (its bundles captured instead of displayed)."""
    write_agent_dir(os.environ["PI_CODING_AGENT_DIR"], scripted.url, models=("scripted", "mini"))
    sent: list[dict] = []
    Watched.boards = []
    assert nbsubagents.experiment  # the first use of a public name wires the edge: the test's own comes after
    monkeypatch.setattr(edge, "text_stream", io.StringIO)
    monkeypatch.setattr(edge, "sweep_panel", lambda title, concurrency: Watched(
        title=title, concurrency=concurrency, publish=lambda bundle, display_id, update: sent.append(bundle)))
    return sent


def test_a_sweeps_live_panel_and_record_lead_with_its_failures_grouped_by_reason(watched):
    exp = nbsubagents.experiment("failing", tasks=TASKS, presets="scout", models=["demo/scripted", "demo/mini"],
                                 repeats=2, concurrency=3)
    frame = exp.frame()
    assert len(frame) == 12 and (frame["status"] == "failed").sum() == 6  # 4 of task-1, 2 of task-2 on demo/mini

    # live: a board drawn while runs went leads with the failures' lines, their counts the header's
    assert Watched.boards, "the panel never rendered while failures were in and runs went"
    counts, board = Watched.boards[-1]
    groups = re.findall(r'<div class="nbsubagents-sweep-group" data-status="failed" data-count="(\d+)">', board)
    assert groups and sum(map(int, groups)) == counts["failed"], board
    first = board.index('class="nbsubagents-sweep-group"')
    assert first < board.index("nbsubagents-sweep-cells") and first < board.index("nbsubagents-sweep-lines")
    assert "nbsubagents-status-completed" not in board  # the completed runs are a fold of their own

    # the record the saved notebook keeps: the grouped failures, then the cells, then the runs, completed folded
    record = watched[-1]
    assert VIEW not in record
    html, text = record["text/html"], record["text/plain"]
    lines = [text_of(g) for g in re.findall(r"<summary[^>]*>(.*?)</summary>", html, re.S)]
    assert lines[0].startswith("✗ 4 × ") and "upstream exploded" in lines[0], lines
    assert lines[0].endswith("in cells model=demo/scripted · task_id=task-1 (2), model=demo/mini · task_id=task-1 (2)")
    assert lines[1].startswith("✗ 2 × ") and "429" in lines[1], lines
    assert lines[1].endswith("in cell model=demo/mini · task_id=task-2 (2)")
    assert lines[2] == "✓ 6 completed" and len(lines) == 3
    order = [html.index(mark) for mark in ('<div class="nbsubagents-sweep-header', '<details class="nbsubagents-sweep-group',
                                           'nbsubagents-sweep-cells nbsubagents-sweep-font"', '<details class="nbsubagents-sweep-done')]
    assert order == sorted(order), order
    fold = re.search(r'<details class="nbsubagents-sweep-done.*?</details>', html, re.S).group(0)
    assert fold.count("nbsubagents-status-completed") == 6 == html.count("nbsubagents-status-completed")
    assert html.count('class="nbsubagents-sweep-failure"') == 6  # each failed run once, in its reason's fold
    said = text.splitlines()
    assert said[0] == "Experiment failing · 12/12 · 6 done, 6 failed"
    assert said[2].startswith("✗ 4 × ") and said[4].startswith("✗ 2 × ") and said[-1] == "✓ 6 completed"


def test_an_experiments_report_leads_with_its_failures_by_reason_and_folds_its_completed_runs(project):
    exp = nbsubagents.experiment("reported", tasks=["read README.md", "fail: 500 upstream exploded",
                                                    "fail: 500 upstream exploded"], presets="scout", show=False)
    page = exp.report().path.read_text()
    assert page.index("<h2>Failures by reason</h2>") < page.index("<h2>The sweep</h2>") < page.index("<h2>Runs</h2>")
    line = text_of(re.search(r'<details class="nbsubagents-sweep-group".*?<summary[^>]*>(.*?)</summary>', page,
                             re.S).group(1))
    assert line.startswith("✗ 2 × ") and "upstream exploded" in line
    assert line.endswith("in cells task_id=task-2 (1), task_id=task-3 (1)")
    runs = page[page.index("<h2>Runs</h2>"):]
    failed = [r.run_id for r in exp.runs() if r.status == "failed"]
    fold = re.search(r'<details class="nbsubagents-report-completed">.*?</details>', runs, re.S).group(0)
    assert text_of(re.search(r"<summary>(.*?)</summary>", fold, re.S).group(1)) == "✓ 1 completed"
    assert all(runs.index(run_id) < runs.index(fold) for run_id in failed)  # the failed runs first, then the fold
    md = exp.report(project / "report.md", format="md").path.read_text().splitlines()
    at = md.index("## Failures by reason")
    assert md[at + 2].startswith("- ✗ 2 × ") and md[at + 2].endswith(r"in cells task\_id=task-2 (1), task\_id=task-3 (1)")
    assert md.index("## Failures by reason") < md.index("## The sweep")
