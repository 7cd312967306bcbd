"""Panels a person trusts at a glance (issue 17), looked at in JupyterLab + Chromium, light and dark themes."""

from __future__ import annotations

import json

import pytest
from jupyterlab_harness import ARTIFACTS, JupyterLab, lab_page, panel, write_notebook

SETUP = ("import os\nfrom nbsubagents.demo import use_scripted_model\n"
         "use_scripted_model(os.path.abspath('agent'))\nimport nbsubagents")

# Samples the kernel status JupyterLab shows, with whether a run panel is on the page yet.
STATUS_RECORDER = """() => {
  window.__kernelStates = [];
  const nb = window.jupyterapp.shell.currentWidget;
  setInterval(() => {
    const kernel = nb.sessionContext?.session?.kernel;
    const running = [...document.querySelectorAll('.jp-InputPrompt')].some((p) => p.innerText.includes('*'));
    const panels = document.querySelectorAll('.nbsubagents-panel').length;
    const header = document.querySelector('.nbsubagents-header')?.innerText || '';
    window.__kernelStates.push({status: kernel?.status, running, panels, header, t: Date.now()});
  }, 50);
}"""


@pytest.mark.browser
def test_the_kernel_reads_busy_throughout_a_first_run(project, tmp_path, monkeypatch):
    from playwright.sync_api import expect

    monkeypatch.delenv("NBSUBAGENTS_DISPLAY", raising=False)
    write_notebook(project / "first.ipynb", [SETUP, 'first = nbsubagents.run("scout", "sleep: 3\\nread README.md\\n'
                                                    'sleep: 3\\nls src", name="first")'])
    with JupyterLab(project, tmp_path / "jupyter") as lab, lab_page(lab, "first.ipynb") as session:
        page = session.page
        page.evaluate(STATUS_RECORDER)
        session.run_all_cells()
        expect(panel(page, "first").locator(".nbsubagents-header")).to_contain_text("completed", timeout=120_000)
        states = page.evaluate("() => window.__kernelStates")
    during = [s for s in states if s["panels"] and s["running"] and "running" in s["header"]]
    assert len(during) > 20, json.dumps(states[:40])
    assert {s["status"] for s in during} == {"busy"}, json.dumps([s for s in during if s["status"] != "busy"][:10])
