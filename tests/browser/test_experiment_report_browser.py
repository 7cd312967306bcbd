"""An experiment's HTML report opened in Chromium with no kernel and no network: the comparison table, the
inline plot and each run with its transcript folded are there. The screenshot goes to test-artifacts/."""

from __future__ import annotations

import pytest
from jupyterlab_harness import ARTIFACTS, launch_chromium, open_offline

import nbsubagents

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def words(run) -> float:
    return float(len(run.output.split()))


def test_the_experiment_report_shows_its_table_plot_and_folded_runs_without_a_kernel(project):
    from playwright.sync_api import expect, sync_playwright

    exp = nbsubagents.experiment("sent", tasks=["read README.md", "ls src"], presets=["scout"], scorers=[words],
                                 show=False)
    page_file = exp.report().path
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = launch_chromium(p)
        try:
            page, blocked, errors = open_offline(browser, page_file,
                                                 allow=lambda url: url == page_file.as_uri() or url.startswith("data:"))

            expect(page.locator("h1")).to_have_text("Experiment sent")
            table = page.locator(".nbsub-cmp table")  # compare()'s own display
            expect(table).to_be_visible()
            expect(table.locator("th", has_text="words")).to_be_visible()
            expect(table).to_contain_text("100% of 2")
            expect(table).to_contain_text("scout")
            plot = page.locator('img[src^="data:image/png;base64,"]')
            expect(plot).to_be_visible()
            assert plot.evaluate("img => img.complete && img.naturalWidth") > 100
            transcripts = page.locator("details", has=page.locator("summary", has_text="Transcript"))
            assert transcripts.count() == 2
            expect(transcripts.first.locator(".lines")).to_be_hidden()  # folded until clicked
            transcripts.first.locator("summary").click()
            expect(transcripts.first.locator(".lines")).to_be_visible()
            page.screenshot(path=str(ARTIFACTS / "experiment-report.png"), full_page=True)
            assert blocked == [] and errors == []
        finally:
            browser.close()
