"""Issue 55 items 7 and 8 without a cluster: the counts a sweep's text prints come from its runs, a comparison's
text fits a 100-column terminal, an experiment report's display embeds the report and links its file only
relative to the notebook's own folder. (The cluster's slots, and papermill's outputs: tests/e2e.)"""

from __future__ import annotations

import io
import json
import re

from test_sweep_panel import FakeRun
from test_sweep_stats import row

from nbsubagents._sweeps import frames, views
from nbsubagents._sweeps.progress import SweepTextRenderer


def test_the_text_progress_counts_a_launched_run_as_running_before_its_first_event():
    """Outside a notebook the progress line said ``1 running`` while more ran: only a run that had sent an event
    counted. A launched run (its supervisor started) is running, whatever its events said so far."""
    out = io.StringIO()
    text = SweepTextRenderer(title="Experiment demo", concurrency=4, stream=out, every=0)
    runs = [FakeRun(i) for i in range(5)]
    text.start(runs)
    for run in runs[:3]:
        run.process = object()  # launched: a local run's supervisor is there
    text.end(runs[3].finish(took=3.0))
    assert out.getvalue().splitlines()[-1].startswith("Experiment demo · 1/5 · 3 running, 1 queued, 1 done · ")


def test_a_comparisons_text_fits_a_100_column_terminal():
    long = [{**r, "params": json.dumps({"preset": json.loads(r["params"])["preset"] + "-reviewer-with-a-long-name",
                                        "model": "anthropic/claude-sonnet-4-5-20250929"})}
            for r in [row(1, "a", True, 1), row(2, "a", True, 2), row(3, "a", False, 3),
                      row(4, "b", True, 4), row(5, "b", True, 5), row(6, "b", False, 6)]]
    comparison = views.compare(frames.frame(long), by=("preset", "model"), baseline=("a-reviewer-with-a-long-name",
                                                                                     "anthropic/claude-sonnet-4-5-20250929"))
    shown = str(comparison)
    assert max(len(line) for line in shown.splitlines()) <= 100, shown
    # every number of the display is there: each cell's name, its runs, its score and its metrics with Δ
    assert "b-reviewer-with-a-long-name · anthropic/claude-sonnet-4-5-20250929" in shown
    assert re.search(r"success\s+100% of 3 \[44, 100\] · Δ ±0 pp \[−\d+, \+\d+\]", shown)
    assert re.search(r"duration_s\s+5\.00 \[.*\] · Δ \+3\.00", shown) and re.search(r"\n  ok\s+67%", shown)
    small = views.compare(frames.frame([row(1, "a", True, 1), row(2, "a", True, 2)]), by="preset")
    assert max(len(line) for line in str(small).splitlines()) <= 100


PAGE = ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>Experiment x</title>'
        '<style>.nbsubagents-report{color:#111}</style></head>\n<body class="nbsubagents-report">'
        '<h1>Experiment x</h1><details><summary>Transcript</summary>…</details></body></html>\n')


def test_a_saved_notebook_carries_the_report_and_links_its_file_only_from_the_notebooks_folder(tmp_path,
                                                                                              monkeypatch):
    """A papermill output's link was ``.pi/subagents/reports/...`` relative to a kernel's folder, from a notebook
    saved elsewhere: dead. The report is embedded; a link is written only where the notebook's folder is known."""
    from nbsubagents._sweeps.report import ExperimentReport, embedded_page

    path = tmp_path / "project" / ".pi" / "subagents" / "reports" / "experiment-x.html"
    report = ExperimentReport(path, "html", "x", "2 runs", "<table></table>", embedded_page(PAGE))
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    monkeypatch.chdir(tmp_path)
    shown = report._repr_html_()
    assert "href=" not in shown and f"<code>{path}</code>" in shown  # no link to where the notebook is not
    assert "<h1>Experiment x</h1><details><summary>Transcript</summary>" in shown  # the report itself
    assert ".nbsubagents-report{color:#111}" in shown and "<body" not in shown and "<title>" not in shown
    monkeypatch.setenv("JPY_SESSION_NAME", str(tmp_path / "project" / "notebooks" / "sweep.ipynb"))
    assert 'href="../.pi/subagents/reports/experiment-x.html"' in report._repr_html_()
    assert embedded_page(PAGE + " " * 3_000_000) is None  # too large to carry: the path says where it is
