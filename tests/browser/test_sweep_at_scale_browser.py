"""An experiment notebook of a 200-run sweep a person would share (issue 56's "done when"): it runs in JupyterLab
with the status item's popup inside the window while the sweep goes; it is saved, its kernel shut down, reopened
without a widget error, and exported to HTML; every text of every output is at least 4.5:1 on light and dark pages,
with JupyterLab's theme (the reopened notebook in JupyterLab Light and Dark) and without it (the export on a light,
a dark and a dark-read-with-a-light-scheme page); and the plot, an image of its own background, has its labels at
least 4.5:1 on that background whatever the page.
"""

from __future__ import annotations

import base64
import io
import subprocess
import sys

import pytest
from helpers import processes_inside
from jupyterlab_harness import ARTIFACTS, CONTRASTS, JupyterLab, lab_page, launch_chromium, write_notebook
from notebook_cells import value
from test_saved_notebooks_browser import ALL_RAN, EVERY_OUTPUT, OUTPUTS, PAGES, VIEW, save, saved

pytestmark = [pytest.mark.browser, pytest.mark.notebook, pytest.mark.slow]

NB = "scale.ipynb"
ITEM = ".nbsubagents-lab-status"
CELLS = [
    """import os, tempfile
from pathlib import Path
import nbsubagents
from nbsubagents.demo import copy_example_project, use_scripted_model
project = copy_example_project(Path(tempfile.mkdtemp(prefix="nbsubagents-scale-")) / "project")
os.chdir(project)
server = use_scripted_model(models=("scripted", "mini"))""",
    """def mentions_readme(run):
    return "README" in run.output

exp = nbsubagents.experiment(
    "two-hundred",
    tasks=[{"id": "readme", "task": "read README.md"}, {"id": "flaky", "task": "fail: 500 upstream exploded"}],
    presets=["scout"], models=["demo/scripted", "demo/mini"], repeats=50, concurrency=6,
    scorers=[mentions_readme],
)""",
    'exp.compare(by=("task_id", "model"))',
    'exp.plot(x="duration_s", y="mentions_readme")',
    "exp.report()",
]


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


@pytest.mark.timeout(1500)  # 200 runs of pi on the scripted model, then a save, a reopen and the exports
def test_a_200_run_experiment_notebook_reads_on_every_page_saved_reopened_and_exported(tmp_path, monkeypatch):
    from playwright.sync_api import expect, sync_playwright

    root = tmp_path / "lab"
    root.mkdir()
    write_notebook(root / NB, CELLS)
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # the kernel's project lands in tmp_path, outside the server's root
    for var in ("NBSUBAGENTS_DISPLAY", "NBSUBAGENTS_ROOT", "PI_CODING_AGENT_DIR", "NBSUBAGENTS_PI"):
        monkeypatch.delenv(var, raising=False)
    failures: list[tuple[str, dict]] = []
    with JupyterLab(root, tmp_path / "jupyter") as lab:
        with lab_page(lab, NB, height=800, timeout_ms=300_000) as session:
            page = session.page
            session.run_all_cells()
            # while the sweep goes: the status item holds it, and its popup stays inside the window
            item = page.locator(ITEM)
            expect(item).to_contain_text("queued", timeout=300_000)
            item.click()
            popup = page.locator(".nbsubagents-lab-runs")
            expect(popup).to_be_visible()
            shown, view = popup.bounding_box(), page.viewport_size
            page.screenshot(path=str(ARTIFACTS / "scale-popup.png"))
            assert shown["x"] >= 0 and shown["y"] >= 0, shown
            assert shown["x"] + shown["width"] <= view["width"] and shown["y"] + shown["height"] <= view["height"]
            page.keyboard.press("Escape")
            page.wait_for_function(ALL_RAN, timeout=1_200_000, polling=1000)
            page.wait_for_function(f"() => !({OUTPUTS})().some((o) => o.data && o.data['{VIEW}'])", timeout=300_000)
            save(page, lab, NB)
            page.evaluate("() => window.jupyterapp.commands.execute('kernelmenu:shutdown')")
            save(page, lab, NB)
            assert session.errors == []
        for kernel in lab.api("GET", "api/kernels") or []:
            lab.api("DELETE", f"api/kernels/{kernel['id']}")
        outputs = saved(lab, NB)
        assert not any(VIEW in o.get("data", {}) for o in outputs)
        assert any("200 planned" in o.get("data", {}).get("text/plain", "") for o in outputs), "no 200-run record"

        # reopened in JupyterLab's light and dark themes: no widget error, every text of every output at AA
        with lab_page(lab, NB, height=1200) as session:
            page = session.page
            page.locator(EVERY_OUTPUT).first.wait_for()
            assert page.get_by_text("Error displaying widget").count() == 0
            for theme in ("JupyterLab Light", "JupyterLab Dark"):
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
                assert seen, theme
                failures += [(theme, s) for s in seen if s["ratio"] < 4.5]
                page.screenshot(path=str(ARTIFACTS / f"scale-{theme.split()[-1].lower()}.png"), full_page=True)
            assert session.errors == []

        # exported: every text of every output at AA on pages without JupyterLab's theme
        body = subprocess.run([sys.executable, "-m", "nbconvert", "--to", "html", "--template", "basic", "--stdout",
                               str(root / NB)], capture_output=True, text=True, check=True).stdout
    with sync_playwright() as p:
        browser = launch_chromium(p)
        try:
            for name, (css, scheme) in PAGES.items():
                plain = browser.new_page(color_scheme=scheme)
                plain.set_content(f"<!doctype html><html><head><style>{css}</style></head><body>{body}</body></html>")
                seen = plain.evaluate(CONTRASTS, EVERY_OUTPUT)
                assert seen, name
                failures += [(name, s) for s in seen if s["ratio"] < 4.5]
                plain.close()
        finally:
            browser.close()
    assert failures == [], failures[:20]

    # the plot: its own opaque background, its labels' ink at AA on it (so on any page)
    import nbformat

    nb = nbformat.read(root / NB, as_version=4)
    (plotted,) = [c for c in nb.cells if c.source.startswith("exp.plot(")]
    opaque, ink = plot_legibility(base64.b64decode(value(plotted, "image/png")))
    assert opaque and ink >= 4.5, (opaque, ink)
    assert processes_inside(tmp_path) == []
