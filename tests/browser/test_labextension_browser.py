"""nbsubagents' JupyterLab extension in a real JupyterLab (issue 25, items 2 and 7), one server for both:

- JupyterLab's own status bar names the running run with its clock, lists it on a click, and then shows none;
- a notebook saved while its run ran, whose kernel was shut down before the run ended, reopens with the run's end:
  the extension replaces the record in the notebook's model, and the frontend's save writes it to the file;
- a record whose kernel restarted while its run went ("unknown") shows the run's end once it ended.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request

import pytest
from helpers import wait_for
from jupyterlab_harness import ARTIFACTS, JupyterLab, lab_page, write_notebook

pytestmark = [pytest.mark.browser, pytest.mark.notebook, pytest.mark.slow]

NAME = "late.ipynb"
CELLS = ["import os\nfrom nbsubagents.demo import use_scripted_model\n"
         "use_scripted_model(os.path.abspath('agent'))\nimport nbsubagents",
         'bg = nbsubagents.start("scout", "sleep: 12\\nread README.md", name="late")']
VIEW = "application/vnd.jupyter.widget-view+json"
ITEM = ".nbsubagents-lab-status"  # the extension's item in JupyterLab's status bar
MODEL_HTML = """() => {
  const cells = window.jupyterapp.shell.currentWidget.content.model.cells;
  const out = [];
  for (let i = 0; i < cells.length; i++) {
    const cell = cells.get(i);
    if (cell.type === 'code') out.push(...cell.toJSON().outputs.map((o) => (o.data || {})['text/html'] || ''));
  }
  return out.join('\\n');
}"""


def records(lab: JupyterLab) -> list[dict]:
    """The data of the saved file's outputs that are run records (long texts joined)."""
    nb = json.loads((lab.root / NAME).read_text())
    found = []
    for cell in nb["cells"]:
        for output in cell.get("outputs", []):
            data = {k: "".join(v) if isinstance(v, list) else v for k, v in output.get("data", {}).items()}
            if 'class="nbsubagents-static' in data.get("text/html", ""):
                found.append(data)
    return found


def save(page) -> None:
    page.locator(".jp-NotebookPanel-notebook").first.click(position={"x": 5, "y": 5})
    page.keyboard.press("Control+s")
    page.wait_for_function("() => !window.jupyterapp.shell.currentWidget.context.model.dirty")


def test_the_status_bar_names_running_runs_and_a_saved_record_ends_after_its_kernel_is_gone(project, tmp_path,
                                                                                              monkeypatch):
    from playwright.sync_api import expect

    monkeypatch.delenv("NBSUBAGENTS_DISPLAY", raising=False)
    write_notebook(project / NAME, CELLS)
    runs = project / ".pi" / "subagents" / "runs"
    with JupyterLab(project, tmp_path / "jupyter") as lab:
        with pytest.raises(urllib.error.HTTPError) as denied:  # the endpoints are Jupyter's: a token is needed
            urllib.request.urlopen(f"{lab.base}/nbsubagents/runs", timeout=10)
        assert denied.value.code == 403
        with pytest.raises(urllib.error.HTTPError) as outside:
            lab.api("GET", "nbsubagents/runs?path=../..")
        assert outside.value.code == 400 and "outside the server's root" in outside.value.read().decode()
        assert lab.api("GET", f"nbsubagents/runs?path={NAME}")["project"] == str(project.resolve())

        with lab_page(lab, NAME) as session:
            page = session.page
            item = page.locator(ITEM)
            expect(item).to_have_text("nbsubagents: none running")
            session.run_all_cells()
            expect(item).to_have_text(re.compile(r"^nbsubagents: 1 running · late \d"), timeout=120_000)
            first = item.inner_text()
            expect(item).not_to_have_text(first, timeout=10_000)  # the clock moves
            expect(item).to_have_text(re.compile(r"^nbsubagents: 1 running · late \d"))
            item.click()
            expect(page.locator(".nbsubagents-lab-run")).to_have_text(re.compile(r"^late · running · \d[^·]* · \d{8}-"))
            page.screenshot(path=str(ARTIFACTS / "labextension-status-bar.png"))
            page.keyboard.press("Escape")
            # saved while the run runs: the file holds its record as not ended (and the live panel's view)
            page.wait_for_function(f"() => /nbsubagents-status-(running|queued)/.test(({MODEL_HTML})())")
            save(page)
            assert session.errors == []
        (saved,) = records(lab)
        assert re.search("nbsubagents-status-(running|queued)", saved["text/html"]) and VIEW in saved
        assert not list(runs.glob("*/result.json")), "the run ended before its kernel was shut down: make it longer"
        for kernel in lab.api("GET", "api/kernels"):  # its kernel is gone before the run ends; no page looks on
            lab.api("DELETE", f"api/kernels/{kernel['id']}")
        wait_for(lambda: [json.loads(r.read_text())["status"] for r in runs.glob("*/result.json")] == ["completed"],
                 timeout=120, what="the background run's end")
        assert re.search("nbsubagents-status-(running|queued)", records(lab)[0]["text/html"])  # the file: not ended

        with lab_page(lab, NAME) as session:  # reopened, with a new kernel
            page = session.page
            record = page.locator(".nbsubagents-static[data-run-id]")
            expect(record).to_have_class(re.compile(r"\bnbsubagents-status-completed\b"), timeout=30_000)
            expect(record.locator(".nbsubagents-as-of")).to_contain_text(re.compile(r"^as of \d\d:\d\d:\d\d · "))
            expect(record.locator(".nbsubagents-header")).to_contain_text("late")
            expect(page.locator(ITEM)).to_have_text("nbsubagents: none running")
            assert page.get_by_text("Error displaying widget").count() == 0
            page.screenshot(path=str(ARTIFACTS / "labextension-record-reopened.png"))
            save(page)
            (saved,) = records(lab)
            assert VIEW not in saved
            assert "nbsubagents-status-completed" in saved["text/html"]
            assert not re.search("nbsubagents-status-(running|queued|unknown)", saved["text/html"])
            assert saved["text/plain"].startswith("✓ late completed")
            assert re.search(r"\nAs of \d\d:\d\d:\d\d · ", saved["text/plain"])

            # a kernel restarted while its run goes: its record, "unknown" then, shows the end once the run ended
            session.run_all_cells()
            try:
                expect(page.locator(".nbsubagents-panel .nbsubagents-header")).to_contain_text("late running",
                                                                                          timeout=120_000)
            except AssertionError:
                page.screenshot(path=str(ARTIFACTS / "labextension-debug.png"))
                raise
            page.evaluate("() => window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.restart()")
            expect(page.locator(".nbsubagents-panel .nbsubagents-gone")).to_contain_text("unknown: ", timeout=60_000)
            expect(record).to_have_class(re.compile(r"\bnbsubagents-status-completed\b"), timeout=120_000)
            expect(record.locator(".nbsubagents-as-of")).to_contain_text(re.compile(r"^as of \d\d:\d\d:\d\d · "))
            assert len([r for r in runs.glob("*/result.json")]) == 2
            assert session.errors == []
            assert session.offsite() == []
