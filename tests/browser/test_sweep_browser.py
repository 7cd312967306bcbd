"""A 24-run sweep watched in JupyterLab + Chromium: its running runs are on the first screen of its output while it
goes, its header's counts are the lines it shows, its completed runs are a fold that stays open, and its saved record
is a compact table (issues 25, 56)."""

from __future__ import annotations

import json
import re
import shutil

import pytest
from jupyterlab_harness import ARTIFACTS, JupyterLab, lab_page, write_notebook

pytestmark = [pytest.mark.browser, pytest.mark.notebook, pytest.mark.slow]

SETUP = ("import os\nfrom nbsubagents.demo import use_scripted_model\n"
         "use_scripted_model(os.path.abspath('agent'))\nimport nbsubagents")
SWEEP = ("def words(run):\n    return len(run.output.split())\n\n"
         'exp = nbsubagents.experiment("watch", tasks=["run: sleep 1"] * 8, presets="scout", repeats=3, '
         "concurrency=3, scorers=[words])")

# Once runs go and some ended: one snapshot of the panel, taken in one go (it changes twice a second). Its counts and
# its rows are one widget, updated by one message: they must agree in any snapshot.
SNAPSHOT = """() => {
  const sweep = document.querySelector('.nbsubagents-sweep');
  if (!sweep) return false;
  const counts = {};
  for (const c of sweep.querySelectorAll('.nbsubagents-sweep-count')) counts[c.dataset.status] = +c.dataset.count;
  if (!counts.running || (counts.completed || 0) < 3 || !counts.queued) return false;
  const top = sweep.getBoundingClientRect().top;
  const lines = [...sweep.querySelectorAll('.nbsubagents-sweep-board tr.nbsubagents-sweep-line')].map((tr) => ({
    status: tr.className.match(/nbsubagents-status-(\\w+)/)[1],
    bottom: tr.getBoundingClientRect().bottom - top, text: tr.innerText}));
  const queued = sweep.querySelector('tr.nbsubagents-sweep-queued')?.innerText || '';
  const cells = sweep.querySelector('.nbsubagents-sweep-cells')?.innerText || '';
  return {counts, lines, queued, cells, viewport: window.innerHeight,
          header: sweep.querySelector('.nbsubagents-sweep-header').innerText};
}"""


def test_a_24_run_sweep_shows_its_running_runs_on_the_first_screen(project, tmp_path, monkeypatch):
    from playwright.sync_api import expect

    monkeypatch.delenv("NBSUBAGENTS_DISPLAY", raising=False)
    write_notebook(project / "sweep.ipynb", [SETUP, SWEEP])
    with JupyterLab(project, tmp_path / "jupyter") as lab, lab_page(lab, "sweep.ipynb", height=900) as session:
        page = session.page
        try:
            session.run_all_cells()
            sweep = page.locator(".nbsubagents-sweep")
            expect(sweep).to_have_count(1, timeout=120_000)
            sweep.scroll_into_view_if_needed()
            snap = page.wait_for_function(SNAPSHOT, timeout=180_000, polling=100).json_value()
            clip = sweep.bounding_box()
            shot = tmp_path / "sweep-first-screen.png"
            page.screenshot(path=str(shot), clip={"x": clip["x"], "y": clip["y"], "width": clip["width"],
                                                  "height": min(snap["viewport"], 900 - clip["y"])})
            ARTIFACTS.mkdir(exist_ok=True)
            shutil.copy(shot, ARTIFACTS / "sweep-first-screen.png")

            counts, lines = snap["counts"], snap["lines"]
            running = [ln for ln in lines if ln["status"] == "running"]
            assert running and len(running) == counts["running"] <= 3, json.dumps(snap)
            assert all(ln["bottom"] <= snap["viewport"] for ln in running), json.dumps(snap)  # the first screen
            assert [ln["status"] for ln in lines[:len(running)]] == ["running"] * len(running)  # on top
            assert all(ln["status"] == "running" for ln in lines), json.dumps(snap)  # ended: cells and a fold
            assert snap["queued"].endswith(f"{counts['queued']} queued") and sum(counts.values()) == 24
            ended = counts["completed"] + counts.get("failed", 0) + counts.get("aborted", 0)
            assert snap["header"].startswith(f"Experiment watch · {ended}/24 · "), snap["header"]
            assert "words" in snap["cells"], json.dumps(snap)  # the cells' scores
            # the completed runs are one fold, which stays open across the renders that follow
            fold = page.locator(".nbsubagents-sweep-done-fold")
            fold.get_by_text(re.compile(r"✓ \d+ completed")).click()
            done = fold.locator("tr.nbsubagents-sweep-line.nbsubagents-status-completed")
            expect(done.first).to_be_visible(timeout=10_000)
            page.wait_for_timeout(1_500)  # three renders of the board: the fold is the widget's state
            if page.locator(".nbsubagents-static.nbsubagents-sweep").count() == 0:  # still live
                expect(done.first).to_be_visible()

            # At the end the output is the static record: a compact table, the 24 runs in a screen's height.
            record = page.locator(".nbsubagents-static.nbsubagents-sweep")
            expect(record).to_have_count(1, timeout=180_000)
            expect(record.locator(".nbsubagents-sweep-header")).to_contain_text("Experiment watch · 24/24 · 24 done")
            expect(record.locator("tr.nbsubagents-sweep-line.nbsubagents-status-completed")).to_have_count(24)
            expect(record.locator("details.nbsubagents-sweep-done > summary")).to_have_text("✓ 24 completed")
            height = record.bounding_box()["height"]
            assert height < 800, height
            record.scroll_into_view_if_needed()
            page.screenshot(path=str(ARTIFACTS / "sweep-record.png"))
            assert page.get_by_text("Error displaying widget").count() == 0
        except Exception:
            page.screenshot(path=str(ARTIFACTS / "sweep-failed.png"))
            raise
    assert session.errors == []
    assert session.offsite() == []
