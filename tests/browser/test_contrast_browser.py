"""Every output the product makes reads on any page (issue 56): light and dark, with and without JupyterLab's theme.

One module-scoped fixture makes the outputs from real runs on the scripted model (a run that completes, one that
fails, one aborted, one still running, a small sweep with a failing cell): run records, a group record, summaries,
the sweep's live and final records, ``status()``, ``runs()``, ``compare()``, the experiment and its report (in the
notebook and as its own page), a runs report, ``browse()``'s record, presets, the status bar's record. One Chromium
shows them on plain pages without JupyterLab's variables (light and dark body, the reader's colour scheme set; a
dark page read with a light scheme; the docs theme's dark mode, its own stylesheet), and in a real JupyterLab in
its light and dark themes, where a run waiting for an approval (Allow / Deny) and ``browse()`` are live widgets.
On each page every visible text (every ``<details>`` opened) has at least 4.5:1 against the background it is drawn
on, and every focusable control shows a focus ring of at least 3:1 (WCAG AA), computed from the browser's styles.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import pytest
from helpers import make_project, processes_inside, wait_for
from jupyterlab_harness import ARTIFACTS, CONTRASTS, FOCUS_RINGS, KERNEL_IDLE, JupyterLab, launch_chromium, write_notebook

# One xdist group: module-scoped fixtures are made per worker, so the outputs' runs and the JupyterLab are made once.
pytestmark = [pytest.mark.browser, pytest.mark.notebook, pytest.mark.slow, pytest.mark.xdist_group("contrast")]

ROOTS = "[data-kind], .nbsubagents-panel.nbsubagents-live, .nbsubagents-browse"
LIVE_ONLY = ("sweep-live-widget",)  # a widget's HTML: shown in JupyterLab only (a saved notebook keeps records)


PLAIN = {  # pages without JupyterLab's variables: (body style, the reader's colour scheme)
    "light": ("background:#ffffff;color:#1f2328", "light"),
    "dark": ("background:#0d1117;color:#e6edf3", "dark"),
    "dark-page-light-scheme": ("background:#0d1117;color:#e6edf3", "light"),  # a dark site read on a light system
}
PAGES = [*PLAIN, "docs-dark", "jupyterlab-light", "jupyterlab-dark"]

SETUP = ("import os, json\nfrom nbsubagents.demo import use_scripted_model\n"
         "use_scripted_model(os.path.abspath('agent'))\nimport nbsubagents")
ASKS = 'asks = nbsubagents.start("scout", "run: echo approved\\nread README.md", name="asks", approval=["bash"])'
SHOW = ("from IPython.display import HTML, display\n"
        "for kind, html in json.load(open('outputs.json')).items():\n"
        "    display(HTML(f'<div data-kind=\"{kind}\">{html}</div>'))")
BROWSE = "browser = nbsubagents.browse().select({failed!r})\nbrowser"


def words(run) -> float:
    return float(len(run.output.split()))



def html_values(widget) -> list[str]:
    """The HTML of a widget and of every widget inside it (a live sweep's board and its folds' contents)."""
    own = [widget.value] if isinstance(getattr(widget, "value", None), str) else []
    return own + [html for child in getattr(widget, "children", ()) for html in html_values(child)]

@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """The outputs of real runs, by kind (HTML), the runs reports as pages, and the project they ran in."""
    import nbsubagents
    from nbsubagents._pi.scripted import ScriptedModel
    from nbsubagents._sweeps.progress import SweepState
    from nbsubagents._ui.display import run_mimebundle, summary_html
    from nbsubagents._ui.sweep_panel import SweepPanel
    from nbsubagents._views.panel_record import group_static_html
    from nbsubagents._views.panel_state import PanelState
    from nbsubagents._views.tables import styled_html

    tmp = tmp_path_factory.mktemp("contrast")
    with ScriptedModel() as model, pytest.MonkeyPatch.context() as mp:
        project = make_project(tmp, mp, model.url)
        mp.delenv("NBSUBAGENTS_DISPLAY", raising=False)
        mp.setenv("TMPDIR", str(tmp))
        bar = nbsubagents.status_bar()
        done = nbsubagents.run("scout", "read README.md", name="reader", show=False)
        failed = nbsubagents.run("scout", "fail: 400 scripted refusal", name="breaks", show=False)
        stopped = nbsubagents.start("scout", "sleep: 30\nread README.md", name="stopped", show=False)
        busy = nbsubagents.start("scout", "sleep: 120\nread README.md", name="busy", show=False)
        for run in (stopped, busy):
            wait_for(lambda r=run: r.paths.events.exists() and '"turn_start"' in r.paths.events.read_text(errors="replace"),
                     what="the run to start")
        stopped.cancel()
        stopped.wait(60)
        exp = nbsubagents.experiment("colours", tasks=["read README.md", "fail: 400 scripted refusal"],
                                     presets="scout", repeats=2, concurrency=2, scorers=[words], show=False)
        assert {r.status for r in exp.runs()} == {"completed", "failed"}
        runs = [nbsubagents.get_run(r.id) for r in (done, failed, stopped)]
        assert [r.status for r in runs] == ["completed", "failed", "aborted"]

        going = SweepPanel(SweepState([*exp.runs(), busy], title="Experiment colours", concurrency=2),
                           publish=lambda *a, **k: None)
        ended = SweepPanel(SweepState(exp.runs(), title="Experiment colours", concurrency=2),
                           publish=lambda *a, **k: None)
        report = exp.report()
        runs_report = nbsubagents.report(runs)
        mp.setenv("JPY_SESSION_NAME", str(project / "colours.ipynb"))  # a Jupyter kernel's: the report is a link
        outputs = {f"panel-{r.status}": run_mimebundle(r)["text/html"] for r in runs}
        outputs |= {
            "panel-running": run_mimebundle(nbsubagents.get_run(busy.id))["text/html"],
            f"summary-{failed.status}": summary_html(nbsubagents.get_run(failed.id)),
            "group": group_static_html([PanelState.of_run(r) for r in runs]),
            "sweep-live": going.static_html(),
            "sweep-live-widget": "".join(html_values(going.widget)),
            "sweep-record": ended.static_html(),
            "status": nbsubagents.status()._repr_html_(),
            "status-all": nbsubagents.status(include_completed=True)._repr_html_(),
            "status-run": nbsubagents.status(failed.id)._repr_html_(),
            "runs": styled_html(nbsubagents.runs()),
            "compare": exp.compare()._repr_html_(),
            "experiment": exp._repr_html_(),
            "report": report._repr_html_(),
            "browse": nbsubagents.browse(live=False).static_html(),
            "presets": nbsubagents.presets()._repr_html_(),
            "status-bar": bar.html,
        }
        mp.delenv("JPY_SESSION_NAME")
        pages = {"experiment-report": Path(report.path).read_text(), "runs-report": Path(runs_report).read_text()}
        assert "failed" in outputs["sweep-record"] and "running" in outputs["sweep-live"] and "<a " in outputs["report"]
        try:
            yield {"outputs": outputs, "pages": pages, "project": project, "failed": failed.id}
        finally:
            frame = nbsubagents.runs()
            for run_id in frame.run_id[~frame.status.isin(["completed", "failed", "aborted"])]:
                nbsubagents.cancel(run_id)
            wait_for(lambda: processes_inside(tmp) == [], timeout=60, what="the runs to end")


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = launch_chromium(p)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture(scope="module")
def lab(made, tmp_path_factory, browser):
    """A JupyterLab on the project, its notebook run: a live run waiting for an approval, every output, browse()."""
    project = made["project"]
    (project / "outputs.json").write_text(json.dumps({k: v for k, v in made["outputs"].items()}))
    write_notebook(project / "colours.ipynb", [SETUP, ASKS, SHOW, BROWSE.format(failed=made["failed"])])
    env = {k: v for k, v in os.environ.items() if k != "NBSUBAGENTS_DISPLAY"}
    with JupyterLab(project, tmp_path_factory.mktemp("jupyter"), env=env) as server:
        page = browser.new_page(viewport={"width": 1400, "height": 1600})
        page.set_default_timeout(120_000)
        try:
            page.goto(server.url("lab/tree/colours.ipynb?reset"))
            page.wait_for_function(KERNEL_IDLE, timeout=180_000)
            page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
            page.locator(".nbsubagents-allow").wait_for(timeout=180_000)
            page.locator(".nbsubagents-browse-header .nbsubagents-browse-run").wait_for(timeout=180_000)
            page.wait_for_function(f"() => document.querySelectorAll('[data-kind]').length === {len(made['outputs'])}")
            yield page
        finally:
            page.close()


def measure(page, shot: str) -> tuple[list[dict], list[dict]]:
    """The texts below 4.5:1 and the focus rings below 3:1 of the outputs on ``page`` (every details opened)."""
    page.evaluate(f"() => document.querySelectorAll('{ROOTS}').forEach((r) => r.querySelectorAll('details')"
                  ".forEach((d) => { d.open = true; }))")
    texts = page.evaluate(CONTRASTS, ROOTS)
    assert len(texts) > 200, texts  # every output is there
    page.keyboard.press("Tab")  # the keyboard's focus: :focus-visible
    rings = page.evaluate(FOCUS_RINGS, ROOTS)
    assert rings, "no focusable control"
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"contrast-{shot}.png"), full_page=True)
    return [t for t in texts if t["ratio"] < 4.5], [r for r in rings if r["ratio"] < 3]


def plain_page(browser, body_style: str, scheme: str, made: dict, head: str = "", wrap: tuple[str, str] = ("", ""),
               html_attrs: str = "") -> object:
    page = browser.new_page(color_scheme=scheme, viewport={"width": 1200, "height": 1400})
    cells = "".join(f'<div data-kind="{kind}">{wrap[0]}{html}{wrap[1]}</div>' for kind, html in made["outputs"].items()
                    if kind not in LIVE_ONLY)
    page.set_content(f"<!doctype html><html {html_attrs}><head><meta charset='utf-8'>{head}</head>"
                     f"<body style='{body_style};font-family:sans-serif'>{cells}</body></html>")
    return page


def docs_css() -> str:
    """The docs theme's stylesheet and the palette's rules the docs add for its toggle (docs/conf.py)."""
    import pydata_sphinx_theme

    from nbsubagents._templates import site_theme_rules

    return (Path(pydata_sphinx_theme.__file__).parent / "theme" / "pydata_sphinx_theme" / "static" / "styles"
            / "pydata-sphinx-theme.css").read_text() + site_theme_rules('html[data-theme="dark"]',
                                                                        'html[data-theme="light"]')


@pytest.mark.parametrize("where", PAGES)
def test_every_output_reads_on_the_page(made, browser, request, where):
    if where in PLAIN:
        body_style, scheme = PLAIN[where]
        page = plain_page(browser, body_style, scheme, made)
    elif where == "docs-dark":  # what myst-nb writes for an HTML output, in the docs theme's dark mode
        page = plain_page(browser, "", "dark", made, head=f"<style>{docs_css()}</style>", html_attrs='data-theme="dark"',
                          wrap=('<div class="bd-content"><div class="cell_output docutils container">'
                                '<div class="output text_html">', "</div></div></div>"))
    else:
        page = request.getfixturevalue("lab")
        theme = "JupyterLab Dark" if where.endswith("dark") else "JupyterLab Light"
        page.evaluate(f"() => window.jupyterapp.commands.execute('apputils:change-theme', {{theme: '{theme}'}})")
        light = "false" if where.endswith("dark") else "true"
        page.wait_for_function(f"() => document.body.dataset.jpThemeLight === '{light}'")
        page.wait_for_function("([bg]) => getComputedStyle(document.querySelector('.jp-Notebook')).backgroundColor"
                               " !== bg", arg=["rgba(0, 0, 0, 0)"])
    try:
        texts, rings = measure(page, where)
        if where in PLAIN:  # a report is a page of its own too
            for name, html in made["pages"].items():
                report = browser.new_page(color_scheme=PLAIN[where][1])
                try:
                    report.set_content(html)
                    texts += [{**t, "page": name} for t in report.evaluate(CONTRASTS, "body") if t["ratio"] < 4.5]
                finally:
                    report.close()
    finally:
        if where not in ("jupyterlab-light", "jupyterlab-dark"):
            page.close()
    by_kind = Counter(t.get("kind") or t.get("page") for t in texts)
    print(f"\n{where}: {len(texts)} texts under 4.5:1 {dict(by_kind)}, {len(rings)} focus rings under 3:1")
    worst = {t.get("kind") or t.get("page"): t for t in sorted(texts, key=lambda t: -t["ratio"])}  # each kind's worst
    assert texts == [], (len(texts), texts if len(texts) < 10 else list(worst.values()))
    assert rings == [], (len(rings), rings[:10])
