"""The static record in a live JupyterLab: refreshed while a background run goes (here every second), it never
duplicates or breaks the live panel, and at the end it replaces the widget in the page and in the notebook
JupyterLab would save (no widget view left: the saved file reads without a kernel)."""

from __future__ import annotations

import pytest
from jupyterlab_harness import ARTIFACTS, JupyterLab, lab_page, write_notebook

pytestmark = [pytest.mark.browser, pytest.mark.notebook, pytest.mark.slow]

CELLS = [
    "import os\nfrom nbsubagents.demo import use_scripted_model\n"
    "use_scripted_model(os.path.abspath('agent'))\nimport nbsubagents, nbsubagents._ui.panels\n"
    "nbsubagents._ui.panels.STATIC_INTERVAL = 1.0  # refresh the record often, to see it happen",
    'job = nbsubagents.start("scout", "read README.md\\nsleep: 3\\nls src\\nsleep: 3\\nrun: echo refreshed", '
    'name="refresh")',
    'job.wait()\nprint("waited:", job.status)',
]

RECORDER = """() => {
  window.__states = [];
  const snap = () => {
    const panels = document.querySelectorAll('.nbsubagents-panel');
    const statics = document.querySelectorAll('.nbsubagents-static');
    const header = document.querySelector('.nbsubagents-panel .nbsubagents-header')?.innerText || '';
    window.__states.push({panels: panels.length, statics: statics.length, header, t: Date.now()});
  };
  new MutationObserver(snap).observe(document.body, {subtree: true, childList: true, characterData: true});
}"""

SAVED_OUTPUT = """() => {
  const cell = window.jupyterapp.shell.currentWidget.content.model.cells.get(1);
  return cell.toJSON().outputs;
}"""


def test_refreshed_record_keeps_one_live_panel_and_replaces_it_at_the_end(project, tmp_path, monkeypatch):
    from playwright.sync_api import expect

    monkeypatch.delenv("NBSUBAGENTS_DISPLAY", raising=False)
    write_notebook(project / "record.ipynb", CELLS)
    with JupyterLab(project, tmp_path / "jupyter") as lab, lab_page(lab, "record.ipynb") as session:
        page = session.page
        page.evaluate(RECORDER)
        session.run_all_cells()
        # what JupyterLab would save while the run goes: the view with a record that moves along
        seen_live = set()
        for _ in range(400):
            outputs = page.evaluate(SAVED_OUTPUT)
            shown = [o for o in outputs if o["output_type"] == "display_data"]
            if shown and "application/vnd.jupyter.widget-view+json" not in shown[0]["data"]:
                break
            if shown:
                seen_live.add(shown[0]["data"]["text/plain"].split("\nRun id:")[0])
            page.wait_for_timeout(100)
        assert len(seen_live) >= 3, seen_live  # refreshed in place several times before the end
        assert any("Listing src" in text for text in seen_live), seen_live
        expect(page.get_by_text("waited: completed")).to_be_visible(timeout=120_000)
        final = page.locator(".nbsubagents-static")
        expect(final).to_have_count(1)
        expect(final.locator(".nbsubagents-header")).to_contain_text("✓ refresh completed")
        expect(final.locator(".nbsubagents-final")).to_contain_text("refreshed")
        page.screenshot(path=str(ARTIFACTS / "record-refreshed.png"))

        states = page.evaluate("() => window.__states")
        live = [s for s in states if s["panels"] and not s["statics"]]
        assert any("↻" in s["header"] for s in live), states[-10:]
        assert max(s["panels"] for s in states) == 1, "a refresh duplicated the panel"
        assert "Error displaying widget" not in page.content()

        outputs = page.evaluate(SAVED_OUTPUT)
        shown = [o for o in outputs if o["output_type"] == "display_data"]
        assert len(shown) == 1 and "application/vnd.jupyter.widget-view+json" not in shown[0]["data"]
        assert shown[0]["data"]["text/plain"].startswith("✓ refresh completed")
    assert session.errors == []
    assert session.offsite() == []
