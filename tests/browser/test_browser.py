"""A real browser: JupyterLab in headless Chromium runs a notebook that delegates to scripted sub-agents.

Proves what only a page can: the panels render (no "Error displaying widget"), lines appear while a
run is still running, the final state shows the done icon and the final text, and the Cancel button
aborts a slow run while its cell is still executing. Everything stays on 127.0.0.1.
"""

from __future__ import annotations

import re
import time

import pytest
from jupyterlab_harness import ARTIFACTS, JupyterLab, lab_page, panel, write_notebook

pytestmark = [pytest.mark.browser, pytest.mark.notebook, pytest.mark.slow]

CELLS = [
    "import os\nfrom nbsubagents.demo import use_scripted_model\n"
    "use_scripted_model(os.path.abspath('agent'))\nimport nbsubagents",
    'first = nbsubagents.run("scout", "read README.md\\nsleep: 2\\nls src\\nsleep: 2\\nrun: echo browser-ok",'
    ' name="first")',
    "first",
    'group = nbsubagents.run_parallel([{"preset": "scout", "task": "read README.md", "name": "reader"},\n'
    '                                  {"preset": "scribe", "task": "write NOTES.md: hello", "name": "writer"}])',
    'slow = nbsubagents.run("scout", "run: sleep 60", name="slowpoke")',
    'print("slow status:", slow.status)',
    'bg = nbsubagents.start("scout", "sleep: 4\\nread README.md\\nsleep: 2\\nrun: echo bg-done", name="bg")',
]

# Records every state a panel's header and window go through, to prove lines show while it runs.
RECORDER = """() => {
  window.__panelStates = [];
  const seen = new Map();
  const snap = () => {
    document.querySelectorAll('.nbsubagents-panel').forEach((panel) => {
      const key = [...panel.classList].find((c) => c.startsWith('nbsubagents-run-')) || '?';
      const header = panel.querySelector('.nbsubagents-header')?.innerText || '';
      const lines = panel.querySelector('.nbsubagents-window')?.innerText || '';
      const prompt = panel.closest('.jp-Cell')?.querySelector('.jp-InputPrompt')?.innerText || '';
      const state = header + '\\n---\\n' + lines + '\\n---\\n' + prompt;
      if (seen.get(key) !== state) {
        seen.set(key, state);
        window.__panelStates.push({key, header, lines, prompt, t: Date.now()});
      }
    });
  };
  new MutationObserver(snap).observe(document.body, {subtree: true, childList: true, characterData: true});
}"""


def test_live_panels_in_jupyterlab_show_progress_final_state_and_cancel(project, tmp_path, monkeypatch):
    from playwright.sync_api import expect

    monkeypatch.delenv("NBSUBAGENTS_DISPLAY", raising=False)

    write_notebook(project / "panels.ipynb", CELLS)

    with JupyterLab(project, tmp_path / "jupyter") as lab, \
            lab_page(lab, "panels.ipynb", height=1600, timeout_ms=120_000) as session:
        page = session.page
        page.evaluate(RECORDER)
        session.run_all_cells()

        # One run: the done icon and the final text once it ended.
        first = panel(page, "first").first
        expect(first.locator(".nbsubagents-header")).to_contain_text("✓", timeout=120_000)
        expect(first.locator(".nbsubagents-header")).to_contain_text("completed")
        expect(first.locator(".nbsubagents-final")).to_contain_text("- run: echo browser-ok: browser-ok")
        expect(first.locator(".nbsubagents-window")).to_contain_text("Listing src")
        # ... and humanized lines while it was still running (the recorder saw the running glyph ↻ with them).
        states = page.evaluate("() => window.__panelStates")
        live = [s for s in states if "first" in s["header"] and "↻" in s["header"]]
        assert any("Reading README.md" in s["lines"] for s in live), states[:20]
        assert any("Finished reading README.md" in s["lines"] and "Listing src" not in s["lines"]
                   for s in live), "no intermediate state between two tool calls was shown"

        # Its 11 lines fit the window: no history is offered, each line is there once.
        expect(first.locator(".nbsubagents-history-toggle")).to_have_count(0)
        assert first.inner_text().count("Finished reading README.md") == 1

        # The run as a cell's value is its panel too (the second panel naming "first").
        expect(panel(page, "first")).to_have_count(2)
        expect(panel(page, "first").nth(1).locator(".nbsubagents-final")).to_contain_text("browser-ok")

        # Parallel runs: one group header, run ids when all are done.
        group = page.locator(".nbsubagents-group")
        expect(group.locator(".nbsubagents-group-header")).to_have_text("Sub-agents: 2 done", timeout=120_000)
        expect(group.locator(".nbsubagents-run-ids")).to_contain_text("Run ids:")
        expect(panel(page, "writer").locator(".nbsubagents-window")).to_contain_text("Writing NOTES.md (+1 line)")

        # A slow run: Cancel in the page aborts it while its cell is still executing.
        slow = panel(page, "slowpoke")
        expect(slow.locator(".nbsubagents-window")).to_contain_text("sleep 60", timeout=120_000)
        expect(slow.locator(".nbsubagents-header")).to_contain_text("running")
        slow.locator(".nbsubagents-cancel").scroll_into_view_if_needed()
        clicked = time.monotonic()
        slow.locator(".nbsubagents-cancel").click()
        expect(slow.locator(".nbsubagents-header")).to_contain_text("aborted", timeout=30_000)
        assert time.monotonic() - clicked < 30
        expect(slow.locator(".nbsubagents-header")).to_contain_text("■")
        expect(page.get_by_text("slow status: aborted")).to_be_visible(timeout=60_000)
        expect(slow.locator(".nbsubagents-cancel")).to_be_hidden()

        # A background run: its cell returned at once, its panel keeps moving until the end.
        bg = panel(page, "bg")
        expect(bg.locator(".nbsubagents-header")).to_contain_text("✓", timeout=120_000)
        expect(bg.locator(".nbsubagents-final")).to_contain_text("bg-done")
        states = page.evaluate("() => window.__panelStates")
        after_return = [s for s in states if "bg" in s["header"] and re.search(r"\[\d+\]", s["prompt"])]
        assert any("Reading README.md" in s["lines"] and "↻" in s["header"] for s in after_return), \
            [s for s in states if "bg" in s["header"]]

        page.screenshot(path=str(ARTIFACTS / "browser-panels.png"))
        first.scroll_into_view_if_needed()
        page.screenshot(path=str(ARTIFACTS / "browser-panels-top.png"))
        assert page.get_by_text("Error displaying widget").count() == 0
        assert "Error displaying widget" not in page.content()

    assert session.errors == []
    assert session.offsite() == []
    assert session.requests, "the recorder saw no request at all"


EXPLORER_CELLS = [
    CELLS[0],
    'explored = nbsubagents.run("scout", "read README.md\\nrun: echo explorer-ok", name="explored", show=False)',
    "nbsubagents.status_bar()",
    'later = nbsubagents.start("scout", "sleep: 4\\nread README.md", name="later", show=False)',
    "browser = nbsubagents.browse()\nbrowser",
    # busy keeps the kernel's main thread until the test lets it go (a file it waits for): no sleep to race
    'busy = nbsubagents.run("scout", "run: while [ ! -e release-busy ]; do sleep 0.2; done\\nread README.md", '
    'name="busy", show=False)',
]

# Records every text the status bar shows, to prove it moved while the background run ran.
BAR_RECORDER = """() => {
  window.__barStates = [];
  const snap = () => {
    document.querySelectorAll('.nbsubagents-statusbar .nbsubagents-statusbar-now').forEach((bar) => {
      const text = bar.innerText.trim();
      if (text && window.__barStates[window.__barStates.length - 1] !== text) window.__barStates.push(text);
    });
  };
  new MutationObserver(snap).observe(document.body, {subtree: true, childList: true, characterData: true});
}"""


def test_status_bar_and_run_browser_in_jupyterlab(project, tmp_path, monkeypatch):
    """status_bar() reads ``runs: ...`` and follows a background run; browse() lists the runs, a run picked
    in the page shows its transcript, and the list turns the background run completed by itself."""
    from playwright.sync_api import expect

    monkeypatch.delenv("NBSUBAGENTS_DISPLAY", raising=False)
    write_notebook(project / "explorer.ipynb", EXPLORER_CELLS)

    with JupyterLab(project, tmp_path / "jupyter") as lab, \
            lab_page(lab, "explorer.ipynb", height=1600, timeout_ms=120_000) as session:
        page = session.page
        page.evaluate(BAR_RECORDER)
        session.run_all_cells()

        # The status bar: counts, then the background run's notice once it ended.
        bar = page.locator(".nbsubagents-statusbar .nbsubagents-statusbar-now")  # its line of counts
        expect(bar).to_have_count(1, timeout=180_000)
        expect(bar).to_have_text(re.compile(r"^runs: \d+ running / \d+ total"))
        expect(bar).to_have_text(re.compile(r"^runs: [01] running / 3 total · ✓ later completed$"), timeout=120_000)
        states = page.evaluate("() => window.__barStates")
        assert "runs: 1 running / 2 total" in states, states

        # The browser lists the runs, the busy foreground run too (live); picking one in the page shows
        # its header and transcript while that run still keeps the kernel's main thread busy.
        options = page.locator(".nbsubagents-browse-list option")
        expect(options).to_have_count(3)
        expect(options.filter(has_text="busy")).to_contain_text("running")
        expect(options.filter(has_text="explored")).to_contain_text("completed")
        index = page.evaluate("() => [...document.querySelectorAll('.nbsubagents-browse-list option')]"
                              ".findIndex((o) => o.textContent.includes('explored'))")
        page.locator(".nbsubagents-browse-list select").select_option(index=index)
        header = page.locator(".nbsubagents-browse-header")
        # served by the kernel while its main thread is busy (the busy run waits for the file the test writes
        # below, so a loaded machine's slowness cannot end it first, as a 25 s sleep once did at a load of 10)
        expect(header).to_contain_text("explored", timeout=60_000)
        expect(header).to_contain_text("completed")
        expect(page.locator(".nbsubagents-browse-output")).to_contain_text("explorer-ok")
        page.locator(".nbsubagents-browse-tabs .lm-TabBar-tab", has_text="Transcript").click()
        transcript = page.locator(".nbsubagents-browse-transcript")
        expect(transcript).to_be_visible()
        expect(transcript).to_contain_text("Reading README.md")
        expect(transcript).to_contain_text("echo explorer-ok")
        busy_prompt = page.locator(".jp-CodeCell", has_text="busy = nbsubagents.run").locator(".jp-InputPrompt")
        assert "*" in busy_prompt.inner_text(), "the busy cell ended before the click was served"
        (project / "release-busy").touch()  # the busy run may end now

        # Live: the background run turned completed in the list without a click.
        expect(options.filter(has_text="later")).to_contain_text("completed", timeout=120_000)
        expect(page.locator(".nbsubagents-browse-preset select")).to_have_value("any preset")  # selected

        expect(options.filter(has_text="busy")).to_contain_text("completed", timeout=120_000)
        expect(bar).to_have_text("runs: 0 running / 3 total · ✓ later completed")  # a foreground run counts too

        # A filter typed in the page narrows the list.
        page.locator(".nbsubagents-browse-text input").fill("explorer-ok")
        page.locator(".nbsubagents-browse-text input").press("Enter")
        expect(options).to_have_count(1)
        expect(options.first).to_contain_text("explored")
        expect(header).to_contain_text("explored")  # the selected run is still listed: its details stay
        # The list has column names and each run its status colour.
        expect(page.locator(".nbsubagents-browse-list-header")).to_contain_text("status")
        colour = options.first.evaluate("(o) => getComputedStyle(o).color")
        assert colour == "rgb(22, 101, 52)", colour  # completed, in the light theme
        # A filter that no longer lists the selected run takes its details away and says how to pick one.
        page.locator(".nbsubagents-browse-text input").fill("matches-no-run-at-all")
        page.locator(".nbsubagents-browse-text input").press("Enter")
        expect(options).to_have_count(0)
        expect(page.locator(".nbsubagents-browse-details")).to_be_hidden()
        expect(page.locator(".nbsubagents-browse-hint")).to_contain_text("Select a run in the list")
        expect(page.locator(".nbsubagents-browse-status-hint")).to_contain_text("Ctrl-click")

        page.locator(".nbsubagents-browse").scroll_into_view_if_needed()
        page.screenshot(path=str(ARTIFACTS / "browser-explorer.png"))
        assert page.get_by_text("Error displaying widget").count() == 0

    assert session.errors == []
    assert session.offsite() == []
