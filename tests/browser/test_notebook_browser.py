"""The quickstart in a real browser: JupyterLab in headless Chromium runs every cell of notebooks/quickstart.ipynb.

What only a page proves: the %subagent panels render (no "Error displaying widget"), with humanized lines
and final states, %%subagents shows one group panel, the background run's panel and the status bar reach
its end after their cells returned, and nothing leaves 127.0.0.1. A screenshot goes to test-artifacts/.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers import processes_inside
from jupyterlab_harness import ARTIFACTS, JupyterLab, lab_page, panel

pytestmark = [pytest.mark.browser, pytest.mark.notebook, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]

# Every code cell of the open notebook has an execution count and the kernel is idle again.
ALL_RAN = """() => {
  const widget = window.jupyterapp.shell.currentWidget;
  const cells = widget.content.model.cells;
  let count = 0;
  for (let i = 0; i < cells.length; i++) {
    const cell = cells.get(i);
    if (cell.type !== 'code') continue;
    if (!cell.executionCount) return false;
    count++;
  }
  return widget.sessionContext.session.kernel.status === 'idle' ? count : false;
}"""


def test_quickstart_runs_every_cell_in_jupyterlab_with_live_panels(tmp_path, monkeypatch):
    from playwright.sync_api import expect

    root = tmp_path / "lab"
    root.mkdir()
    shutil.copy(REPO / "notebooks" / "quickstart.ipynb", root / "quickstart.ipynb")
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # the kernel's temp project lands in tmp_path
    for name in ("NBSUBAGENTS_DISPLAY", "NBSUBAGENTS_ROOT", "PI_CODING_AGENT_DIR", "NBSUBAGENTS_PI"):
        monkeypatch.delenv(name, raising=False)
    ARTIFACTS.mkdir(exist_ok=True)

    with JupyterLab(root, tmp_path / "jupyter") as lab, \
            lab_page(lab, "quickstart.ipynb", height=1800, timeout_ms=180_000) as session:
        page = session.page
        try:
            session.run_all_cells()

            # One run from %%subagent: humanized lines and the final state in its panel.
            first = panel(page, "scout").first
            expect(first.locator(".nbsubagents-header")).to_contain_text("✓", timeout=180_000)
            expect(first.locator(".nbsubagents-header")).to_contain_text("completed")
            window = first.locator(".nbsubagents-window")
            for line in ("Reading README.md", "Finished reading README.md", "Listing src", 'python3 -c "print(6 * 7)"'):
                expect(window).to_contain_text(line)
            expect(first.locator(".nbsubagents-final")).to_contain_text('- run: python3 -c "print(6 * 7)": 42')

            # %%subagents: one group panel with the three runs, done.
            group = page.locator(".nbsubagents-group")
            expect(group).to_have_count(1, timeout=180_000)
            expect(group.locator(".nbsubagents-group-header")).to_have_text("Sub-agents: 3 done", timeout=180_000)
            expect(group.locator(".nbsubagents-run-ids")).to_contain_text("Run ids:")
            for name, line in (("inventory", "Reading src/inventory.py"), ("writer", "Writing NOTES.md (+2 lines)"),
                               ("editor", "Editing README.md")):
                runs = group.locator(".nbsubagents-panel").filter(
                    has=page.locator(".nbsubagents-name", has_text=name))
                expect(runs.locator(".nbsubagents-header")).to_contain_text("✓ ")
                expect(runs.locator(".nbsubagents-window")).to_contain_text(line)

            # Every cell ran; the background run's live panel reached its end; the registry is a table.
            page.wait_for_function(ALL_RAN, timeout=240_000)
            expect(page.locator("table.dataframe")).to_have_count(2)  # runs() and the filtered runs()
            expect(page.locator("td.nbsubagents-status-completed")).to_have_count(6 + 2)
            expect(page.get_by_text("0 running · 6 completed · 0 failed · 0 aborted · 6 total")).to_have_count(1)
            # The status bar, shown while the background run went, follows it to its end by itself.
            bar = page.locator(".nbsubagents-statusbar .nbsubagents-statusbar-now")  # its line of counts
            expect(bar).to_have_count(1)
            expect(bar).to_have_text("runs: 0 running / 6 total · ✓ scout completed", timeout=60_000)
            finished = panel(page, "scout").locator(".nbsubagents-header")
            for i in range(finished.count()):
                expect(finished.nth(i)).not_to_contain_text("running", timeout=60_000)
            background = [i for i in range(panel(page, "scout").count())
                          if "Reading src/inventory.py" in panel(page, "scout").nth(i).inner_text()]
            assert background, "no panel of the background run"
            expect(panel(page, "scout").nth(background[0]).locator(".nbsubagents-header")).to_contain_text("✓")

            expect(page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")) \
                .to_have_count(0)
            assert page.get_by_text("Error displaying widget").count() == 0
            assert "Error displaying widget" not in page.content() and "Traceback" not in page.content()

            first.scroll_into_view_if_needed()
            page.screenshot(path=str(ARTIFACTS / "quickstart-one-run.png"))
            group.scroll_into_view_if_needed()
            page.screenshot(path=str(ARTIFACTS / "quickstart-group.png"))
            page.locator("table.dataframe").first.scroll_into_view_if_needed()
            page.screenshot(path=str(ARTIFACTS / "quickstart-registry.png"))
        except Exception:
            page.screenshot(path=str(ARTIFACTS / "quickstart-failed.png"))
            raise

    assert session.errors == []
    assert session.offsite() == []
    assert session.requests, "no request was seen at all"
    assert processes_inside(tmp_path) == []
