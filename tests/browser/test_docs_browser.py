"""A docs page built by Sphinx and myst-nb, its notebook cells executed on the scripted model at build time, opened
in Chromium with no kernel and no network: the run's panel is there, rendered from its static HTML record (status,
numbers, the formatter's lines), not the text repr of a widget. Only that page's notebook is executed here (the
other pages render without executing), so the build stays short; ``make docs`` executes them all.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from helpers import REPO, processes_inside
from jupyterlab_harness import ARTIFACTS, launch_chromium

# One xdist group: module-scoped fixtures are made per worker, so the docs are built once.
pytestmark = [pytest.mark.browser, pytest.mark.notebook, pytest.mark.slow, pytest.mark.xdist_group("docs")]

PAGE = "user/python-api"
OTHER_NOTEBOOK_PAGES = ["user/magics.md", "user/background.md", "user/experiments.md"]


@pytest.fixture(scope="module")
def built_docs(tmp_path_factory):
    out = tmp_path_factory.mktemp("docs-html")
    env = {**os.environ, "TMPDIR": str(out.parent)}
    for name in ("PI_CODING_AGENT_DIR", "NBSUBAGENTS_ROOT", "NBSUBAGENTS_DISPLAY"):
        env.pop(name, None)
    # docs/conf.py as it is, but for the notebooks it leaves unexecuted (-D cannot set this tuple-typed option)
    confdir = tmp_path_factory.mktemp("docs-conf")
    (confdir / "conf.py").write_text(f"import runpy\nglobals().update(runpy.run_path({str(REPO / 'docs' / 'conf.py')!r}))\n"
                                     f"nb_execution_excludepatterns = {OTHER_NOTEBOOK_PAGES!r}\n")
    argv = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-E", "-b", "html", "-c", str(confdir),
            str(REPO / "docs"), str(out)]
    done = subprocess.run(argv, env=env, cwd=REPO, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    yield out
    assert processes_inside(out.parent) == [], "the docs build left processes behind"


def file_page(browser, page_file, *, width: int, height: int):
    """A built page opened from its file, nothing fetched from elsewhere (every other request refused)."""
    context = browser.new_context(viewport={"width": width, "height": height})
    context.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file://") else route.abort())
    page = context.new_page()
    page.goto(page_file.as_uri())
    return page

def test_a_built_docs_page_shows_the_runs_rendered_panel_not_a_widget_repr(built_docs):
    from playwright.sync_api import expect, sync_playwright

    page_file = built_docs / f"{PAGE}.html"
    html = page_file.read_text()
    for widget_repr in ("HBox(children=", "VBox(children=", "HBox(", "VBox("):
        assert widget_repr not in html
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = launch_chromium(p)
        try:
            page = file_page(browser, page_file, width=1200, height=1400)
            panel = page.locator(".nbsubagents-static", has=page.locator(".nbsubagents-name", has_text="first"))
            expect(panel.first).to_be_visible()
            header = panel.first.locator(".nbsubagents-header")
            expect(header).to_contain_text("✓ first completed")
            expect(header).to_contain_text("demo/scripted · 2 tool calls")
            expect(panel.first.locator(".nbsubagents-window")).to_contain_text("Reading .gitignore")
            expect(panel.first.locator(".nbsubagents-window")).to_contain_text("Listing files")
            # the cell's own printed output sits under the panel: the run really ran at build time
            expect(page.locator(".cell_output").first).to_contain_text("completed")
            panel.first.scroll_into_view_if_needed()
            page.screenshot(path=str(ARTIFACTS / "docs-python-api.png"))
        finally:
            browser.close()


def test_the_api_reference_summary_table_fits_its_page_at_1280_px(built_docs):
    """Issue 56: the table of every public name was wider than its column (a column of signatures), clipped."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = launch_chromium(p)
        try:
            page = file_page(browser, built_docs / "api.html", width=1280, height=900)
            sizes = page.evaluate("""() => { const table = document.querySelector('table.autosummary');
                const box = table.parentElement;
                return {table: table.getBoundingClientRect().width, box: box.clientWidth, scroll: box.scrollWidth}; }""")
        finally:
            browser.close()
    assert sizes["scroll"] <= sizes["box"] and sizes["table"] <= sizes["box"] + 1, sizes
