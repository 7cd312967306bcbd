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
         'bg = nbsubagents.start("scout", "sleep: 12\\nread README.md", name="late")', "nbsubagents.status_bar()"]
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


def bar_record(lab: JupyterLab, name: str = NAME) -> dict:
    """The saved file's status_bar() record (its data, long texts joined)."""
    nb = json.loads((lab.root / name).read_text())
    (found,) = [data for cell in nb["cells"] for output in cell.get("outputs", [])
                for data in [{k: "".join(v) if isinstance(v, list) else v for k, v in output.get("data", {}).items()}]
                if 'class="nbsubagents-statusbar"' in data.get("text/html", "")]
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
            expect(item).to_have_text("nbsubagents: ↻ 1 running", timeout=120_000)
            item.click()
            line = page.locator(".nbsubagents-lab-run")
            model = page.locator(".nbsubagents-panel .nbsubagents-model").inner_text().strip("· ")
            expect(line).to_have_text(re.compile(rf"^↻ late · {re.escape(model)} · running · \d"))  # the panel's model
            first = line.inner_text()
            expect(line).not_to_have_text(first, timeout=10_000)  # the clock moves
            page.screenshot(path=str(ARTIFACTS / "labextension-status-bar.png"))
            item.click()
            expect(page.locator(".nbsubagents-lab-runs")).to_have_count(0)
            # the notebook's own status_bar() record says the run goes, as of when it was saved
            expect(page.locator(".nbsubagents-statusbar")).to_contain_text("runs: 1 running / 1 total")
            # saved while the run runs: the file holds its record as not ended, never the live panel's view (the
            # server's pre-save hook, nbsubagents.lab.saving)
            page.wait_for_function(f"() => /nbsubagents-status-(running|queued)/.test(({MODEL_HTML})())")
            save(page)
            assert session.errors == []
        (saved,) = records(lab)
        assert re.search("nbsubagents-status-(running|queued)", saved["text/html"]) and VIEW not in saved
        assert bar_record(lab)["text/plain"].startswith("runs: 1 running / 1 total")
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
            expect(page.locator(".nbsubagents-statusbar")).to_contain_text("runs: 0 running / 1 total")
            page.screenshot(path=str(ARTIFACTS / "labextension-record-reopened.png"))
            save(page)
            (saved,) = records(lab)
            assert VIEW not in saved
            assert "nbsubagents-status-completed" in saved["text/html"]
            assert not re.search("nbsubagents-status-(running|queued|unknown)", saved["text/html"])
            assert saved["text/plain"].startswith("✓ late completed")
            assert re.search(r"\nAs of \d\d:\d\d:\d\d · ", saved["text/plain"])
            bar = bar_record(lab)  # the status_bar() record too: no "1 running" under the completed record
            assert "runs: 0 running / 1 total" in bar["text/html"], bar["text/html"]
            assert re.search(r"as of \d\d:\d\d:\d\d · read after the kernel that showed it had gone", bar["text/html"])
            assert bar["text/plain"].startswith("runs: 0 running / 1 total")

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


# -- a 60-run sweep in an example-style notebook that works outside the server's root ---------------------------
SWEEP_NB = "elsewhere.ipynb"
# Each run waits for a file the test makes (no clock to race): 2 run at once, 58 stay queued; "away" is a background
# run, and the notebook keeps a status_bar() record.
SWEEP_CELLS = [
    "import os\nfrom pathlib import Path\nimport nbsubagents\n"
    "from nbsubagents.demo import copy_example_project, use_scripted_model\n"
    "project = copy_example_project(Path({outside!r}) / 'project')\nos.chdir(project)\nuse_scripted_model()",
    "nbsubagents.status_bar()",
    'bg = nbsubagents.start("scout", "run: while [ ! -e {outside}/go ]; do sleep 0.5; done", name="away")',
    'exp = nbsubagents.experiment("wide", tasks=[{{"id": f"t{{i:02d}}", "task": "run: while [ ! -e {outside}/stop ]; '
    'do sleep 0.5; done"}} for i in range(60)], presets="scout", concurrency=2)',
]
# One moment of the popup and of the sweep panel: the popup's sweep lines' labels, the panel's running cells, in order
SAME_MOMENT = """() => ({
  popup: [...document.querySelectorAll('.nbsubagents-lab-run[data-experiment="wide"]')].map((e) => e.dataset.label),
  panel: [...document.querySelectorAll('.nbsubagents-sweep tr.nbsubagents-sweep-line.nbsubagents-status-running'
                                       + ' .nbsubagents-sweep-cell')].map((e) => e.innerText.trim()),
})"""


def test_a_60_run_sweep_of_a_notebook_working_outside_the_root_shows_in_a_bounded_item_and_popup(project, tmp_path,
                                                                                                monkeypatch):
    from playwright.sync_api import expect

    monkeypatch.delenv("NBSUBAGENTS_DISPLAY", raising=False)
    outside = tmp_path / "elsewhere"  # not under the server's root (project)
    outside.mkdir()
    write_notebook(project / SWEEP_NB, [c.format(outside=str(outside)) for c in SWEEP_CELLS])
    copy = outside / "project"
    try:
        with JupyterLab(project, tmp_path / "jupyter") as lab:
            with lab_page(lab, SWEEP_NB, height=700) as session:
                page = session.page
                item = page.locator(ITEM)
                expect(item).to_have_text("nbsubagents: none running")
                session.run_all_cells()
                try:
                    # the kernel's working folder's runs: the background run and two of the sweep's, 58 queued
                    expect(item).to_have_text("nbsubagents: ↻ 3 running · 58 queued", timeout=180_000)
                except AssertionError:
                    page.screenshot(path=str(ARTIFACTS / "labextension-sweep-debug.png"))
                    raise
                # the bar's text stays within a few words: one line of the status bar, not across it
                bar = page.locator("#jp-main-statusbar").bounding_box()
                box = item.bounding_box()
                assert box["width"] <= 0.35 * bar["width"] and box["height"] <= bar["height"], (box, bar)

                # reached by the keyboard: a button with a label, opened by Enter
                assert item.get_attribute("tabindex") == "0" and item.get_attribute("role") == "button"
                assert "3 running" in item.get_attribute("aria-label")
                page.locator(".jp-NotebookPanel-notebook").first.click(position={"x": 5, "y": 5})
                item.focus()
                page.keyboard.press("Enter")
                popup = page.locator(".nbsubagents-lab-runs")
                expect(popup).to_be_visible()
                expect(popup.locator(".nbsubagents-lab-queued")).to_have_text("○ 58 queued")
                expect(popup.locator(".nbsubagents-lab-sweep")).to_contain_text("Sweep wide: 2 running · 58 queued")
                expect(popup.locator(".nbsubagents-lab-run")).to_have_count(3)
                view = page.viewport_size
                shown = popup.bounding_box()
                assert shown["x"] >= 0 and shown["y"] >= 0, shown  # within the window
                assert shown["x"] + shown["width"] <= view["width"] and shown["y"] + shown["height"] <= view["height"]
                page.screenshot(path=str(ARTIFACTS / "labextension-sweep-popup.png"))

                # the sweep's runs in the panel's words (preset · model · task id) and order
                page.locator(".nbsubagents-sweep").first.scroll_into_view_if_needed()
                moment = page.wait_for_function(f"() => {{ const m = ({SAME_MOMENT})(); "
                                                "return m.popup.length === 2 && m.panel.length === 2 && "
                                                "m.popup.join('|') === m.panel.join('|') && m; }",
                                                timeout=60_000).json_value()
                assert all(label.startswith("scout · demo/scripted · t") for label in moment["popup"]), moment
                page.keyboard.press("Escape")
                expect(popup).to_have_count(0)
                assert page.evaluate("() => document.activeElement.classList.contains('nbsubagents-lab-status')")

                # the way to the sweep: its notebook at its panel
                page.evaluate("() => { for (const e of document.querySelectorAll('.jp-WindowedPanel-outer')) "
                              "e.scrollTop = 0; }")
                item.click()
                popup.locator(".nbsubagents-lab-sweep-open").click()
                expect(popup).to_have_count(0)
                page.wait_for_function("() => { const r = document.querySelector('.nbsubagents-sweep')"
                                       ".getBoundingClientRect(); return r.top >= 0 && r.top < window.innerHeight; }")

                page.wait_for_function(f"() => /nbsubagents-status-(running|queued)/.test(({MODEL_HTML})())")
                save(page)
                assert session.errors == []
            # its kernel goes while "away" runs; the sweep's runs end with it (an interrupt cancels them)
            for kernel in lab.api("GET", "api/kernels"):
                lab.api("POST", f"api/kernels/{kernel['id']}/interrupt")
            wait_for(lambda: lab.api("GET", f"nbsubagents/runs?path={SWEEP_NB}")["queued"] == 0, timeout=120,
                     what="the sweep's queued runs cancelled")
            (outside / "stop").touch()  # a sweep run the interrupt did not reach ends by itself
            for kernel in lab.api("GET", "api/kernels"):
                lab.api("DELETE", f"api/kernels/{kernel['id']}")
            (outside / "go").touch()
            wait_for(lambda: lab.api("GET", f"nbsubagents/runs?path={SWEEP_NB}")["running"] == 0, timeout=180,
                     what="every run's end")  # the server's reads take each run's result.json in
            runs = copy / ".pi" / "subagents" / "runs"
            assert any(json.loads(r.read_text()).get("status") == "completed" for r in runs.glob("*/result.json"))
            with lab_page(lab, SWEEP_NB, height=700) as session:  # reopened: a new kernel, in the notebook's folder
                page = session.page
                record = page.locator(".nbsubagents-static[data-run-id]").filter(has_text="away")
                expect(record).to_have_class(re.compile(r"\bnbsubagents-status-completed\b"), timeout=60_000)
                expect(page.locator(".nbsubagents-statusbar")).to_contain_text(re.compile(r"runs: 0 running / \d+ total"),
                                                                              timeout=60_000)
                assert session.errors == []
    finally:
        (outside / "go").touch()
        (outside / "stop").touch()
