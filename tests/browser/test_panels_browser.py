"""Panels a person trusts at a glance (issue 17), looked at in JupyterLab + Chromium, light and dark themes."""

from __future__ import annotations

import json
import re

import pytest
from helpers import wait_for
from jupyterlab_harness import ARTIFACTS, JupyterLab, lab_page, panel, write_notebook

pytestmark = [pytest.mark.browser, pytest.mark.notebook, pytest.mark.slow]

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
    const lines = document.querySelector('.nbsubagents-window')?.innerText || '';
    window.__kernelStates.push({status: kernel?.status, running, panels, header, lines, t: Date.now()});
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
    # Before the first line the panel says pi is starting, then that pi waits for the model (the scripted model
    # takes its 3 s), with a clock of its own; the header's clock already ticks.
    starting = [s for s in during if s["lines"].strip().startswith(("starting pi…", "waiting for the model · "))]
    clocks = {re.search(r"(\d+(\.\d)?s)\b", s["header"].split("tool call")[1]).group(1) for s in starting}
    assert len(clocks) >= 2, json.dumps(starting[:10])
    waits = {s["lines"].strip() for s in during if s["lines"].strip().startswith("waiting for the model · ")}
    assert len(waits) >= 2, json.dumps(during[:20])  # its own clock moves while the model thinks


THEME_CELLS = [
    SETUP,
    'mixed = nbsubagents.run("scout", "read missing.py\\nread README.md\\nrun: ls nowhere-at-all\\nls src", name="mixed")',
    'broken = nbsubagents.run("scout", "fail: 500 upstream exploded", name="broken")',
    'pair = nbsubagents.run_parallel([{"preset": "scout", "task": "read README.md", "name": "reader"},\n'
    '                                 {"preset": "scout", "task": "fail: 500 no", "name": "sad"}])',
    "nbsubagents.status_bar()",
    'nbsubagents.runs()[["name", "status", "tool_calls"]]',
]

# Every coloured status text on the page with its colour and the colour it sits on (the nearest ancestor
# with an opaque background), and every character the panels, tables and bars show.
CONTRAST = """() => {
  const rgb = (c) => (c.match(/[\\d.]+/g) || []).map(Number);
  const lum = ([r, g, b]) => {
    const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
  };
  const background = (el) => {
    for (let e = el; e; e = e.parentElement) {
      const c = rgb(getComputedStyle(e).backgroundColor);
      if (c.length === 3 || (c.length === 4 && c[3] > 0.9)) return c.slice(0, 3);
    }
    return [255, 255, 255];
  };
  const out = [];
  const selector = '[class*="nbsubagents-c-"], .nbsubagents-failed-steps, .nbsubagents-line.nbsubagents-failed,'
    + ' .nbsubagents-line.nbsubagents-error';
  document.querySelectorAll(selector).forEach((el) => {
    if (!el.offsetParent || !el.innerText.trim()) return;
    const fg = rgb(getComputedStyle(el).color).slice(0, 3), bg = background(el);
    const [hi, lo] = [lum(fg), lum(bg)].sort((a, b) => b - a);
    out.push({text: el.innerText.trim().slice(0, 40), fg: fg.join(','), bg: bg.join(','), ratio: (hi + 0.05) / (lo + 0.05)});
  });
  const shown = [...document.querySelectorAll('.nbsubagents-panel, .nbsubagents-group, .nbsubagents-statusbar,'
    + ' .jp-RenderedHTMLCommon table')].map((el) => el.innerText).join('\\n');
  return {colours: out, shown, theme: document.body.dataset.jpThemeLight};
}"""


def is_emoji_like(ch: str) -> bool:
    import unicodedata

    code = ord(ch)
    return ch == "\ufe0f" or code >= 0x1F000 or (
        unicodedata.category(ch).startswith("S") and unicodedata.east_asian_width(ch) in ("W", "F"))


@pytest.mark.browser
@pytest.mark.parametrize("theme", ["JupyterLab Light", "JupyterLab Dark"])
def test_status_colours_read_well_and_no_emoji_shows_in_either_theme(project, tmp_path, monkeypatch, theme):
    from playwright.sync_api import expect

    monkeypatch.delenv("NBSUBAGENTS_DISPLAY", raising=False)
    state = tmp_path / "jupyter"
    settings = state / "settings" / "@jupyterlab" / "apputils-extension" / "themes.jupyterlab-settings"
    settings.parent.mkdir(parents=True)
    settings.write_text(json.dumps({"theme": theme}))
    write_notebook(project / "themes.ipynb", THEME_CELLS)
    with JupyterLab(project, state, env={"JUPYTERLAB_SETTINGS_DIR": str(state / "settings")}) as lab, \
            lab_page(lab, "themes.ipynb", height=2200) as session:
        page = session.page
        session.run_all_cells()
        expect(page.locator(".nbsubagents-statusbar")).to_contain_text("runs: 0 running / 4 total", timeout=180_000)
        expect(page.locator(".jp-RenderedHTMLCommon table").first).to_be_visible(timeout=60_000)
        expect(panel(page, "mixed").locator(".nbsubagents-failed-steps")).to_have_text("2 failed steps")
        found = page.evaluate(CONTRAST)
        slug = "dark" if "Dark" in theme else "light"
        page.screenshot(path=str(ARTIFACTS / f"panels-{slug}.png"))
        panel(page, "mixed").first.scroll_into_view_if_needed()
        page.screenshot(path=str(ARTIFACTS / f"panels-{slug}-top.png"))
    assert found["theme"] == ("false" if slug == "dark" else "true")
    texts = {c["text"] for c in found["colours"]}
    assert {"failed", "completed", "2 failed steps"} <= texts, texts
    low = [c for c in found["colours"] if c["ratio"] < 4.5]
    assert low == [], low
    assert "✓" in found["shown"] and "✗" in found["shown"]
    assert [ch for ch in found["shown"] if is_emoji_like(ch)] == []
    assert session.errors == []


@pytest.mark.browser
def test_after_a_restart_an_old_panel_is_inert_and_says_its_end_is_unknown(project, tmp_path, monkeypatch):
    from playwright.sync_api import expect

    monkeypatch.delenv("NBSUBAGENTS_DISPLAY", raising=False)
    write_notebook(project / "restart.ipynb", [SETUP, 'bg = nbsubagents.start("scout", "sleep: 8\\nread README.md", '
                                                      'name="bg")'])
    with JupyterLab(project, tmp_path / "jupyter") as lab, lab_page(lab, "restart.ipynb") as session:
        page = session.page
        session.run_all_cells()
        bg = panel(page, "bg")
        expect(bg.locator(".nbsubagents-header")).to_contain_text("running", timeout=120_000)
        expect(bg.locator(".nbsubagents-cancel")).to_be_visible()
        expect(bg.locator(".nbsubagents-message")).to_be_visible()
        expect(bg.locator(".nbsubagents-gone")).to_be_hidden()
        page.evaluate("() => window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.restart()")
        # the old kernel's panel is inert and says so: no Cancel, no "running", the end unknown and how to ask
        expect(bg.locator(".nbsubagents-cancel")).to_be_hidden(timeout=60_000)
        expect(bg.locator(".nbsubagents-message")).to_be_hidden()
        expect(bg.locator(".nbsubagents-gone")).to_be_visible()
        expect(bg.locator(".nbsubagents-gone")).to_contain_text("unknown: ")
        expect(bg.locator(".nbsubagents-gone")).to_contain_text('nbsubagents.get_run("')
        expect(bg.locator(".nbsubagents-header")).not_to_contain_text("running", use_inner_text=True)
        bg.scroll_into_view_if_needed()
        page.screenshot(path=str(ARTIFACTS / "panel-after-restart.png"))
    assert session.errors == []
    # The run outlived its kernel (the demo model runs apart from it) and ends by itself.
    runs = project / ".pi" / "subagents" / "runs"
    wait_for(lambda: [json.loads(r.read_text())["status"] for r in runs.glob("*/result.json")] == ["completed"],
             timeout=120, what="the background run's end")
