"""Issue 56, items 7 and 8 in JupyterLab + Chromium: a notebook saved while views were open (a running run's panel,
``browse()``) reopens as records after its kernel was killed, never "model not found"; the killed kernel's greyed
panels carry no ipywidgets broken-link icons; a long final answer scrolls in a bounded box."""

from __future__ import annotations

import json
import os
import re
import signal
from pathlib import Path

import pytest
from helpers import wait_for
from jupyterlab_harness import ARTIFACTS, KERNEL_IDLE, JupyterLab, lab_page, panel, write_notebook

import nbsubagents

pytestmark = [pytest.mark.browser, pytest.mark.notebook, pytest.mark.slow]

VIEW = "application/vnd.jupyter.widget-view+json"
SETUP = ("import os\nfrom nbsubagents.demo import use_scripted_model\n"
         "use_scripted_model(os.path.abspath('agent'))\nimport nbsubagents\nprint('PID', os.getpid())")
LONG = "\\n".join(f"say: line {i} of a long final answer" for i in range(80))
# Elements of run panels (and widgets inside browse()) that show ipywidgets' broken-link icon (its ::before) once
# their kernel is gone.
BROKEN_LINKS = """() => [...document.querySelectorAll('.nbsubagents-panel.jupyter-widgets-disconnected,'
    + ' .nbsubagents-panel .jupyter-widgets-disconnected, .nbsubagents-browse .jupyter-widgets-disconnected')]
  .filter((e) => { const s = getComputedStyle(e, '::before');
                   return s.display !== 'none' && s.content !== 'none' && s.content !== 'normal'; }).length"""


def saved_outputs(path: Path) -> list[dict]:
    try:
        nb = json.loads(path.read_text())
    except ValueError:  # being written
        return []
    return [o for c in nb["cells"] if c["cell_type"] == "code" for o in c.get("outputs", [])]


def test_a_notebook_saved_with_open_views_reopens_as_records_after_a_kernel_kill(project, tmp_path, monkeypatch):
    from playwright.sync_api import expect

    monkeypatch.delenv("NBSUBAGENTS_DISPLAY", raising=False)
    notebook = project / "reopen.ipynb"
    write_notebook(notebook, [SETUP, f'long = nbsubagents.run("scout", "{LONG}", name="long")',
                              'bg = nbsubagents.start("scout", "sleep: 90\\nsay: late", name="bg")',
                              "nbsubagents.browse()"])
    try:
        with JupyterLab(project, tmp_path / "jupyter") as lab, lab_page(lab, "reopen.ipynb") as session:
            page = session.page
            session.run_all_cells()
            bg = panel(page, "bg")
            expect(bg.locator(".nbsubagents-header")).to_contain_text("running", timeout=120_000)
            expect(page.locator(".nbsubagents-browse").first).to_be_visible()

            # the long answer scrolls in its box: the panel does not grow with it
            answer = panel(page, "long").first.locator(".nbsubagents-output")
            expect(answer).to_contain_text("line 79 of a long final answer")
            box = answer.evaluate("(e) => ({height: e.getBoundingClientRect().height, scroll: e.scrollHeight,"
                                  " client: e.clientHeight, panel: e.closest('.nbsubagents-panel')"
                                  ".getBoundingClientRect().height})")
            print("long answer:", box)
            assert box["height"] < 450 and box["scroll"] > box["client"], box

            # saved while the panel runs and browse() is open: the file keeps their records, not their views
            page.locator(".jp-NotebookPanel-notebook").first.click(position={"x": 5, "y": 5})
            page.keyboard.press("Control+s")
            page.wait_for_function("() => !window.jupyterapp.shell.currentWidget.context.model.dirty")
            wait_for(lambda: len(saved_outputs(notebook)) >= 4, timeout=60, what="the saved file")
            outputs = saved_outputs(notebook)
            assert [o for o in outputs if VIEW in o.get("data", {})] == [], [o["data"] for o in outputs]
            assert any('class="nbsubagents-browse-static' in "".join(o.get("data", {}).get("text/html", ""))
                       for o in outputs)

            # the kernel is killed: its panels grey out and say so, without a broken-link icon on each widget
            printed = "".join("".join(o["text"]) for o in outputs if "text" in o)
            pid = int(re.search(r"PID (\d+)", printed)[1])
            os.kill(pid, signal.SIGKILL)
            expect(bg.locator(".nbsubagents-gone")).to_be_visible(timeout=120_000)
            page.wait_for_function(KERNEL_IDLE, timeout=180_000)  # the server restarted it
            assert page.locator(".nbsubagents-panel .jupyter-widgets-disconnected").count() > 0
            icons = page.evaluate(BROKEN_LINKS)
            bg.scroll_into_view_if_needed()
            page.screenshot(path=str(ARTIFACTS / "panel-after-kernel-kill.png"))
            assert icons == 0, icons

            # reopened with the restarted kernel (none of the old models): records, no widget error
            again = page.context.new_page()
            again.goto(lab.url("lab/tree/reopen.ipynb"))
            again.wait_for_function(KERNEL_IDLE, timeout=180_000)
            expect(again.locator(".nbsubagents-browse-static").first).to_be_visible()
            expect(again.locator(".nbsubagents-static.nbsubagents-panel").first).to_be_visible()
            assert again.get_by_text("Error displaying widget").count() == 0
            assert "model not found" not in again.content()
            again.screenshot(path=str(ARTIFACTS / "reopened-after-kernel-kill.png"))
        assert session.errors == []
    finally:  # the background run outlived its kernel: end it
        runs = project / ".pi" / "subagents" / "runs"
        for run_dir in runs.glob("*"):
            if not (run_dir / "result.json").exists():
                nbsubagents.Run(run_dir).cancel()
        wait_for(lambda: all((r / "result.json").exists() for r in runs.glob("*")), timeout=120,
                 what="every run ended")
