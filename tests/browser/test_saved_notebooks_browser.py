"""Saved notebooks reopen clean (issue 25): each example notebook runs in JupyterLab (the quickstart's live panels,
group, tables and status bar checked on the page: ``quickstart_live``), is saved with the page's own
save (Ctrl+S), closed, its kernel gone, and reopened: no widget error, and every record at its final state. The
experiments notebook runs at scale, its sweep made 200 runs (``at_scale``: issue 56's "done when", an experiment
notebook of a 200-run sweep a person would share): while the sweep goes, the status item's popup stays inside an
800 px window (``popup_inside_window``); its results are read from the file it saved (``experiments_saved``, the
plot's labels at least 4.5:1 on its own opaque background whatever the page); reopened, every text of every output
is at least 4.5:1 in JupyterLab's light and dark themes (``reads_in_both_themes``).

One JupyterLab server and one Chromium serve every notebook (the suite stays fast). What the saved file holds is
read from the disk (what any other viewer gets): it holds no widget view even while an open ``browse()`` shows one
on the page (the server's pre-save hook, ``nbsubagents.lab.saving``; a run's panel turned into its record at the
run's end, a status bar is never a widget); once the kernel is shut down from the page, the page replaces that
last view by its record too (``ui.kernel.NotebookRecord``). Then the notebooks exported with nbconvert are measured
on a dark and a light page without JupyterLab's theme variables (and a dark one read with a light scheme): every
text of every output (records, tables, ``compare()``, reports) has a contrast of at least 4.5:1 (WCAG AA), computed
from the browser's computed styles.
"""

from __future__ import annotations

import base64
import io
import json
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import nbformat
import pytest
from helpers import PI, processes_inside, wait_for
from jupyterlab_harness import ARTIFACTS, CONTRASTS, KERNEL_IDLE, JupyterLab, launch_chromium, panel
from notebook_cells import cell, html, text, value

pytestmark = [pytest.mark.browser, pytest.mark.notebook, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = ["quickstart.ipynb", "background-runs.ipynb", "exploring-runs.ipynb", "experiments.ipynb",
             "conversation.ipynb"]
VIEW = "application/vnd.jupyter.widget-view+json"
RECORDS = (".nbsubagents-static, .nbsubagents-statusbar, .nbsubagents-browse-static, .nbsubagents-static-group, "
           ".nbsubagents-summary")
# every output of nbsubagents: the records, the tables, compare(), the report (each paints its own background)
EVERY_OUTPUT = RECORDS + ", .nbsubagents-surface, .nbsubagents-runs, .nbsub-cmp, .nbsubagents-report, .nbsubagents-spend"

# Every code cell of the open notebook ran and the kernel is idle again.
ALL_RAN = """() => {
  const widget = window.jupyterapp.shell.currentWidget;
  const cells = widget.content.model.cells;
  for (let i = 0; i < cells.length; i++) {
    const cell = cells.get(i);
    if (cell.type === 'code' && !cell.executionCount) return false;
  }
  return widget.sessionContext.session?.kernel?.status === 'idle';
}"""

# The outputs of the open notebook as the page would save them.
OUTPUTS = """() => {
  const cells = window.jupyterapp.shell.currentWidget.content.model.cells;
  const out = [];
  for (let i = 0; i < cells.length; i++) {
    const cell = cells.get(i);
    if (cell.type === 'code') out.push(...cell.toJSON().outputs);
  }
  return out;
}"""

DARK = "body{background:#0d1117;color:#e6edf3;font-family:sans-serif}"
PAGES = {  # pages without JupyterLab's variables, GitHub's dark and light: (style, the reader's colour scheme)
    "dark": (DARK, "dark"),
    "light": ("body{background:#ffffff;color:#1f2328;font-family:sans-serif}", "light"),
    "dark-page-light-scheme": (DARK, "light"),  # GitHub set to dark on a light system
}


def saved(lab: JupyterLab, name: str) -> list[dict]:
    """The outputs of the notebook file the page saved (what any other viewer gets)."""
    try:
        nb = json.loads((lab.root / name).read_text())
    except ValueError:  # being written
        return []
    outputs = [o for c in nb["cells"] if c["cell_type"] == "code" for o in c.get("outputs", [])]
    for o in outputs:  # a file keeps long texts as lists of lines
        o["data"] = {k: "".join(v) if isinstance(v, list) else v for k, v in o.get("data", {}).items()}
    return outputs


def quickstart_live(page) -> None:
    """What only a page shows of the quickstart once every cell ran: the %subagent panel's humanized lines and
    final state, %%subagents as one group panel, the registry tables, the status bar and the background run's
    panel at their end by themselves, no stderr output and no widget error."""
    from playwright.sync_api import expect

    # One run from %%subagent: humanized lines and the final state in its panel.
    first = panel(page, "scout").first
    expect(first.locator(".nbsubagents-header")).to_contain_text("✓", timeout=180_000)
    expect(first.locator(".nbsubagents-header")).to_contain_text("completed")
    window = first.locator(".nbsubagents-window")
    for line in ("Reading README.md", "Finished reading README.md", "Listing src", 'python3 -c "print(6 * 7)"'):
        expect(window).to_contain_text(line)
    expect(first.locator(".nbsubagents-final")).to_contain_text('- run: python3 -c "print(6 * 7)": 42')

    # %%subagents: one group panel with the three runs, done.
    group = page.locator(".nbsubagents-group")
    expect(group).to_have_count(1, timeout=180_000)
    expect(group.locator(".nbsubagents-group-header")).to_have_text("Sub-agents: 3 done", timeout=180_000)
    expect(group.locator(".nbsubagents-run-ids")).to_contain_text("Run ids:")
    for name, line in (("inventory", "Reading src/inventory.py"), ("writer", "Writing NOTES.md (+2 lines)"),
                       ("editor", "Editing README.md")):
        runs = group.locator(".nbsubagents-panel").filter(
            has=page.locator(".nbsubagents-name", has_text=name))
        expect(runs.locator(".nbsubagents-header")).to_contain_text("✓ ")
        expect(runs.locator(".nbsubagents-window")).to_contain_text(line)

    # Every cell ran; the background run's live panel reached its end; the registry is a table.
    page.wait_for_function(ALL_RAN, timeout=240_000)
    expect(page.locator("table.dataframe")).to_have_count(2)  # runs() and the filtered runs()
    expect(page.locator("td.nbsubagents-status-completed")).to_have_count(6 + 2)
    expect(page.get_by_text("0 running · 6 completed · 0 failed · 0 aborted · 6 total")).to_have_count(1)
    # The status bar, shown while the background run went, follows it to its end by itself.
    bar = page.locator(".nbsubagents-statusbar .nbsubagents-statusbar-now")  # its line of counts
    expect(bar).to_have_count(1)
    expect(bar).to_have_text("runs: 0 running / 6 total · ✓ scout completed", timeout=60_000)
    finished = panel(page, "scout").locator(".nbsubagents-header")
    for i in range(finished.count()):
        expect(finished.nth(i)).not_to_contain_text("running", timeout=60_000)
    background = [i for i in range(panel(page, "scout").count())
                  if "Reading src/inventory.py" in panel(page, "scout").nth(i).inner_text()]
    assert background, "no panel of the background run"
    expect(panel(page, "scout").nth(background[0]).locator(".nbsubagents-header")).to_contain_text("✓")

    expect(page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")) \
        .to_have_count(0)
    assert page.get_by_text("Error displaying widget").count() == 0
    assert "Error displaying widget" not in page.content() and "Traceback" not in page.content()
    first.scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / "quickstart-one-run.png"))
    group.scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / "quickstart-group.png"))


LIVE_CHECKS = {"quickstart.ipynb": quickstart_live}

# The experiments notebook's sweep at scale: 2 tasks x 2 presets x 2 models x 25 repeats, six at once.
SWEEP = "def answer_words(run):"
SCALE = {"repeats=3,": "repeats=25,", "concurrency=4,": "concurrency=6,"}
RUNS = 200


def at_scale(source: Path, target: Path) -> None:
    """The notebook ``source`` saved as ``target`` with its sweep of ``RUNS`` runs (its cell otherwise as written)."""
    nb = nbformat.read(source, as_version=4)
    sweep = cell(nb, SWEEP)
    for old, new in SCALE.items():
        assert sweep.source.count(old) == 1, f"the experiments notebook's sweep no longer says {old!r}"
        sweep.source = sweep.source.replace(old, new)
    nbformat.write(nb, target)


def popup_inside_window(page) -> None:
    """While the sweep goes: the status item holds it, and its popup stays inside the (800 px high) window."""
    from playwright.sync_api import expect

    item = page.locator(".nbsubagents-lab-status")
    expect(item).to_contain_text("queued", timeout=300_000)
    item.click()
    popup = page.locator(".nbsubagents-lab-runs")
    expect(popup).to_be_visible()
    shown, view = popup.bounding_box(), page.viewport_size
    page.screenshot(path=str(ARTIFACTS / "scale-popup.png"))
    assert shown["x"] >= 0 and shown["y"] >= 0, shown
    assert shown["x"] + shown["width"] <= view["width"] and shown["y"] + shown["height"] <= view["height"]
    page.keyboard.press("Escape")


DURING_CHECKS = {"experiments.ipynb": popup_inside_window}
HEIGHTS = {"experiments.ipynb": 800}  # the page's window, 1800 px high unless said here


def luminance(rgb) -> float:
    def channel(c: float) -> float:
        c /= 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4
    r, g, b = (channel(c) for c in rgb[:3])
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a, b) -> float:
    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def plot_legibility(png: bytes) -> tuple[bool, float]:
    """Whether the PNG is opaque everywhere, and the contrast of its text's ink against its background (its most
    frequent colour). The ink is the colour of the labels, ticks, title and legend: of the colours drawn on at least
    200 pixels (text, not a stray edge), the one of most contrast (points and grid are paler by design)."""
    from PIL import Image

    image = Image.open(io.BytesIO(png))
    opaque = image.mode == "RGB" or image.getchannel("A").getextrema()[0] == 255
    colours = sorted(image.convert("RGB").getcolors(1 << 24), reverse=True)
    background = colours[0][1]
    return opaque, max((contrast(rgb, background) for n, rgb in colours[1:] if n >= 200), default=1.0)


def experiments_saved(nb, tmp_path: Path) -> None:
    """What the experiments notebook computed at scale, as its saved file holds it (the notebook's only full run in
    the suite; papermill runs it with other parameters): the sweep, its table, comparison, plot (its labels legible
    on any page) and rescore, the MLflow runs and traces, the report, the magic's sweep, every run's scores."""
    (project,) = tmp_path.glob("nbsubagents-experiments-*/project")
    sweep = cell(nb, SWEEP)
    assert f"{RUNS} planned · {RUNS} completed · 0 failed" in value(sweep)
    assert f"{RUNS} runs; {{'completed': {RUNS}}}" in text(cell(nb, "frame = exp.frame()"))
    table = html(cell(nb, "exp.compare(by=(\"preset\", \"model\")"))
    assert "Δ = cell − baseline" in table and ">answer_words<" in table and table.count("<tr>") >= 5
    png = base64.b64decode(value(cell(nb, "exp.plot("), "image/png"))
    assert png.startswith(b"\x89PNG")
    opaque, ink = plot_legibility(png)  # its own opaque background, its labels' ink at AA on it (so on any page)
    assert opaque and ink >= 4.5, (opaque, ink)
    assert ">mentions_readme<" in html(cell(nb, "def mentions_readme(run):"))
    assert f"{RUNS} MLflow runs" in text(cell(nb, "import mlflow"))
    spans = text(cell(nb, "experiment_id = mlflow.get_experiment_by_name("))
    assert f"{RUNS} traces" in spans and "AGENT" in spans and "TOOL" in spans and "'answer_words'" in spans
    assert (project / "traces.json").is_file()
    assert "Report of experiment readme-vs-listing" in html(cell(nb, "exp.report()"))
    assert (project / ".pi/subagents/reports/experiment-readme-vs-listing.html").is_file()
    assert "4 planned · 4 completed" in value(cell(nb, "%%subagent_experiment quick-check"))
    listing = text(cell(nb, "nbsubagents.experiments()"))
    assert "readme-vs-listing" in listing and "quick-check" in listing
    scores = [json.loads(p.read_text())["scores"] for p in (project / ".pi/subagents/runs").glob("*/scores.json")]
    assert len(scores) == RUNS + 4
    assert sum(s.get("has_title") is True for s in scores) == 4  # the magic's shell check, from its YAML
    assert sum(s.get("readme_exists") is True and s.get("mentions_readme") in (True, False) for s in scores) == RUNS


SAVED_CHECKS = {"experiments.ipynb": experiments_saved}


def reads_in_both_themes(page, name: str) -> None:
    """The reopened notebook in JupyterLab's dark and light themes: every text of every output at AA (4.5:1)."""
    failures = []
    for theme in ("JupyterLab Dark", "JupyterLab Light"):  # light last: the next notebooks open in the default
        page.evaluate(f"() => window.jupyterapp.commands.execute('apputils:change-theme', {{theme: '{theme}'}})")
        dark = theme.endswith("Dark")
        page.wait_for_function(f"() => document.body.dataset.jpThemeLight === '{str(not dark).lower()}'",
                               timeout=60_000)
        # the theme's stylesheet applied: the notebook's background is dark in Dark, light in Light
        page.wait_for_function("(dark) => { const m = getComputedStyle(document.querySelector('.jp-Notebook'))"
                               ".backgroundColor.match(/\\d+/g); if (!m || m.length < 3) return false; "
                               "const sum = (+m[0]) + (+m[1]) + (+m[2]); return dark ? sum < 200 : sum > 500; }",
                               arg=dark, timeout=60_000)
        seen = page.evaluate(CONTRASTS, EVERY_OUTPUT)
        assert seen, (name, theme)
        failures += [(theme, s) for s in seen if s["ratio"] < 4.5]
        page.screenshot(path=str(ARTIFACTS / f"reopened-{name.removesuffix('.ipynb')}-{theme.split()[-1].lower()}.png"),
                        full_page=True)
    assert failures == [], (name, failures[:20])


REOPENED_CHECKS = {"experiments.ipynb": reads_in_both_themes}


def views(outputs: list[dict]) -> list[dict]:
    return [o for o in outputs if VIEW in o.get("data", {})]


def save(page, lab: JupyterLab, name: str) -> None:
    """Ctrl+S in the page, then wait until the page says its document is clean and the server has it."""
    page.locator(".jp-NotebookPanel-notebook").first.click(position={"x": 5, "y": 5})
    page.keyboard.press("Control+s")
    page.wait_for_function("() => !window.jupyterapp.shell.currentWidget.context.model.dirty")
    wait_for(lambda: len(saved(lab, name)) == len(page.evaluate(OUTPUTS)), timeout=30, what="the saved file")


def run_save_close_reopen(browser, lab: JupyterLab, name: str, tmp_path: Path) -> None:
    page = browser.new_page(viewport={"width": 1400, "height": HEIGHTS.get(name, 1800)})
    errors: list[str] = []
    requests: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("request", lambda request: requests.append(request.url))
    page.set_default_timeout(300_000)
    try:
        page.goto(lab.url(f"lab/tree/{name}?reset"))
        page.wait_for_function(KERNEL_IDLE, timeout=180_000)
        page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
        if name in DURING_CHECKS:
            DURING_CHECKS[name](page)
        page.wait_for_function(ALL_RAN, timeout=1_200_000, polling=1000)
        # every run's panel reaches its end by itself: only an open browse() still shows a widget
        page.wait_for_function(
            f"() => ({OUTPUTS})().every((o) => !(o.data && o.data['{VIEW}']) || "
            "(o.data['text/html'] || '').includes('class=\"nbsubagents-browse-static'))", timeout=300_000, polling=500)
        if name in LIVE_CHECKS:
            LIVE_CHECKS[name](page)
        save(page, lab, name)
        outputs = saved(lab, name)
        # the page still shows an open browse() as a widget; the file keeps its record only (nbsubagents.lab.saving)
        assert views(outputs) == [], (name, [o["data"] for o in views(outputs)])
        bars = [o for o in outputs if 'class="nbsubagents-statusbar"' in o.get("data", {}).get("text/html", "")]
        assert all(o["data"]["text/plain"].startswith("runs: 0 running") for o in bars), (name, bars)

        # the kernel shuts down from the page: its last views become their records; the page saves them
        page.evaluate("() => window.jupyterapp.commands.execute('kernelmenu:shutdown')")
        page.wait_for_function(f"() => !({OUTPUTS})().some((o) => o.data && o.data['{VIEW}'])", timeout=60_000)
        save(page, lab, name)
    except Exception:
        page.screenshot(path=str(ARTIFACTS / f"saved-{name.removesuffix('.ipynb')}-failed.png"))
        raise
    finally:
        page.close()  # the notebook closes with its page
    assert errors == [], (name, errors)
    offsite = sorted({u for u in requests if urlsplit(u).scheme not in ("data", "blob") and urlsplit(u).hostname != "127.0.0.1"})
    assert offsite == [], (name, offsite)  # nothing leaves 127.0.0.1
    for kernel in lab.api("GET", "api/kernels") or []:  # none left: the reopened notebook gets a new one
        lab.api("DELETE", f"api/kernels/{kernel['id']}")

    outputs = saved(lab, name)
    assert views(outputs) == [], name
    if name in SAVED_CHECKS:
        SAVED_CHECKS[name](nbformat.read(lab.root / name, as_version=4), tmp_path)
    text = json.dumps(outputs)
    for word in ("nbsubagents-status-running", "nbsubagents-status-queued", "nbsubagents-status-unknown"):
        assert word not in text, (name, word)  # every record at its final state

    # reopened with a new kernel: every record shows, no widget error
    page = browser.new_page(**({"viewport": {"width": 1400, "height": 1200}} if name in REOPENED_CHECKS else {}))
    page.on("pageerror", lambda error: errors.append(str(error)))
    try:
        page.goto(lab.url(f"lab/tree/{name}"))
        page.wait_for_function(KERNEL_IDLE, timeout=180_000)
        page.locator(RECORDS).first.wait_for()
        assert page.locator(RECORDS).count() >= 1
        assert page.get_by_text("Error displaying widget").count() == 0, name
        assert "model not found" not in page.content(), name
        page.screenshot(path=str(ARTIFACTS / f"reopened-{name.removesuffix('.ipynb')}.png"))
        if name in REOPENED_CHECKS:
            REOPENED_CHECKS[name](page, name)
    finally:
        page.close()
    assert errors == [], (name, errors)


def contrast_failures(browser, root: Path, name: str) -> list[tuple[str, str, dict]]:
    """Texts of the outputs below 4.5:1 on each page of ``PAGES``, in the nbconvert export of ``name``."""
    body = subprocess.run([sys.executable, "-m", "nbconvert", "--to", "html", "--template", "basic", "--stdout",
                           str(root / name)], capture_output=True, text=True, check=True).stdout
    failures = []
    for theme, (css, scheme) in PAGES.items():
        page = browser.new_page(color_scheme=scheme)
        try:
            page.set_content(f"<!doctype html><html><head><style>{css}</style></head><body>{body}</body></html>")
            seen = page.evaluate(CONTRASTS, EVERY_OUTPUT)
            assert seen, f"no record in the export of {name}"
            failures += [(name, theme, s) for s in seen if s["ratio"] < 4.5]
            page.screenshot(path=str(ARTIFACTS / f"export-{theme}-{name.removesuffix('.ipynb')}.png"), full_page=True)
        finally:
            page.close()
    return failures


@pytest.mark.timeout(2400)  # five notebooks (one a 200-run sweep) run, saved, reopened and exported in one JupyterLab
def test_every_example_notebook_saved_and_reopened_shows_its_records_and_reads_on_dark_pages(tmp_path, monkeypatch):
    from playwright.sync_api import sync_playwright

    root = tmp_path / "lab"
    root.mkdir()
    for name in NOTEBOOKS:
        shutil.copy(REPO / "notebooks" / name, root / name)
    at_scale(REPO / "notebooks" / "experiments.ipynb", root / "experiments.ipynb")
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # the kernels' temp projects land in tmp_path
    for var in ("NBSUBAGENTS_DISPLAY", "NBSUBAGENTS_ROOT", "PI_CODING_AGENT_DIR", "NBSUBAGENTS_PI"):
        monkeypatch.delenv(var, raising=False)
    ARTIFACTS.mkdir(exist_ok=True)

    # the pi under test (1.x unless NBSUBAGENTS_TEST_PI says), as in the rest of the suite: the 200-run sweep is most
    # of this test's CPU, and a run of pi 1.x costs a third of 0.73.1's (which the headless notebook tests still run)
    with JupyterLab(root, tmp_path / "jupyter", env={"NBSUBAGENTS_PI": str(PI)}) as lab, sync_playwright() as p:
        browser = launch_chromium(p)
        try:
            for name in NOTEBOOKS:
                run_save_close_reopen(browser, lab, name, tmp_path)
            failures = [f for name in NOTEBOOKS for f in contrast_failures(browser, root, name)]
        finally:
            browser.close()
    assert failures == [], failures[:20]
    assert processes_inside(tmp_path) == []
