"""An executed example notebook exported with ``nbconvert --to html``, opened in Chromium with no kernel and no
network: every run's panel is there, visible and readable (status colour, numbers, lines, final text, red
error). The screenshot goes to test-artifacts/ for a look.
"""

from __future__ import annotations

import re

import pytest
from e2e.test_notebooks import execute, export, kernel_env  # noqa: F401  (kernel_env is a fixture)
from jupyterlab_harness import ARTIFACTS, launch_chromium, open_offline

pytestmark = [pytest.mark.browser, pytest.mark.notebook, pytest.mark.slow]

RED = "rgb(185, 28, 28)"  # style.color("failed") in the light theme
GREEN = "rgb(22, 101, 52)"  # style.color("completed") in the light theme


def test_exported_html_shows_each_final_panel_readably_without_a_kernel(kernel_env):  # noqa: F811
    from playwright.sync_api import expect, sync_playwright

    execute("exploring-runs.ipynb", kernel_env)
    export(kernel_env, "exploring-runs.ipynb")
    page_file = kernel_env / "export" / "exploring-runs.html"
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = launch_chromium(p)
        try:
            page, blocked, errors = open_offline(browser, page_file)

            panels = page.locator(".nbsubagents-static")
            expect(panels.first).to_be_visible()
            names = [panels.nth(i).locator(".nbsubagents-name").inner_text() for i in range(panels.count())]
            assert sorted(set(names)) == ["broken", "notes", "survey", "with-file"], names

            broken = panels.filter(has=page.locator(".nbsubagents-name", has_text="broken")).first
            broken.scroll_into_view_if_needed()
            expect(broken.locator(".nbsubagents-header")).to_contain_text("✗ broken failed")
            assert broken.locator(".nbsubagents-status").evaluate("e => getComputedStyle(e).backgroundColor") == RED
            expect(broken).to_contain_text("500 the provider is down")

            notes = panels.filter(has=page.locator(".nbsubagents-name", has_text="notes")).last
            header = notes.locator(".nbsubagents-header")
            expect(header).to_contain_text("✓ notes completed")
            assert re.search(r"demo/scripted · \d+ tool calls · [\d,]+ tokens · \$\d\.\d{4} · ctx [\d.]+% · [\d.]+s", header.inner_text())
            assert notes.locator(".nbsubagents-status").evaluate("e => getComputedStyle(e).backgroundColor") == GREEN
            expect(notes.locator(".nbsubagents-window")).to_contain_text("Writing NOTES.md (+1 line)")
            output = notes.locator(".nbsubagents-output")
            expect(output).to_be_visible()
            assert output.bounding_box()["height"] > 15
            size = float(header.evaluate("e => getComputedStyle(e).fontSize").removesuffix("px"))
            assert size >= 12
            # each line once: in the window, or behind the plain <details> of earlier lines (no script needed)
            for toggle in notes.locator("summary").all():
                toggle.click()
            assert notes.inner_text().count("Finished editing NOTES.md") == 1
            notes.scroll_into_view_if_needed()
            page.screenshot(path=str(ARTIFACTS / "exported-exploring-runs.png"))
            assert errors == [] or all("require" in e or "define" in e for e in errors), errors
        finally:
            browser.close()
