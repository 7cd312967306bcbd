"""Every plot the product draws reads on a page of either theme (issue 56, item 1): ``runs_timeline()`` and an
experiment's ``plot()`` (which its report embeds) are measured as rendered. The figure is drawn to pixels, laid over
the page of the *other* theme (a notebook saved in one theme and read in the other), and every text is checked
against the pixels around it: at least 4.5:1 (WCAG AA); the PNG a notebook keeps is opaque; a true/false score is
drawn as the categories false and true, not spread on a number line."""

from __future__ import annotations

import io
import json
from collections import Counter

import pytest

from test_api_surface import RESULT, make_project
from test_sweep_stats import FIXED

from nbsubagents import _config as config
from nbsubagents._sweeps import frames, plots
from nbsubagents._views.timeline import runs_timeline

np = pytest.importorskip("numpy")
pytest.importorskip("matplotlib")

PAGES = {"light": (1.0, 1.0, 1.0), "dark": (17 / 255, 17 / 255, 17 / 255)}  # JupyterLab's light and dark pages
OTHER = {"light": "dark", "dark": "light"}


def luminance(rgb) -> float:
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(a, b) -> float:
    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def over(rgba, page) -> tuple[float, float, float]:
    """A colour with its alpha laid over the page's colour."""
    r, g, b, a = rgba
    return tuple(a * c + (1 - a) * p for c, p in zip((r, g, b), page))


def illegible(fig, page) -> list[tuple[str, float]]:
    """Each drawn text whose colour has less than 4.5:1 against what lies around it, the figure laid on ``page``:
    (text, ratio). The background of a text is the commonest colour of the pixels just outside its box."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.colors import to_rgba
    from matplotlib.text import Text

    canvas = FigureCanvasAgg(fig)  # (in IPython a figure comes closed, on the base canvas: draw it to pixels here)
    canvas.draw()
    pixels = np.asarray(canvas.buffer_rgba(), dtype=float) / 255.0
    height, width = pixels.shape[:2]
    shown = pixels[..., :3] * pixels[..., 3:] + np.array(page) * (1 - pixels[..., 3:])  # the figure on the page
    renderer = canvas.get_renderer()
    found = []
    for text in fig.findobj(Text):
        if not text.get_visible() or not text.get_text().strip():
            continue
        box = text.get_window_extent(renderer)
        x0, x1 = int(box.x0) - 3, int(box.x1) + 3
        top, bottom = height - int(box.y1) - 3, height - int(box.y0) + 3  # pixel rows count from the top
        if x1 < 0 or x0 >= width or bottom < 0 or top >= height:
            continue  # a tick label outside the view: not drawn
        x0, x1, top, bottom = max(x0, 0), min(x1, width - 1), max(top, 0), min(bottom, height - 1)
        ring = np.concatenate([shown[top, x0:x1 + 1], shown[bottom, x0:x1 + 1], shown[top:bottom + 1, x0],
                               shown[top:bottom + 1, x1]])
        background = Counter(tuple(np.round(p, 3)) for p in ring).most_common(1)[0][0]
        ratio = contrast(over(to_rgba(text.get_color(), text.get_alpha()), background), background)
        if ratio < 4.5:
            found.append((text.get_text(), round(ratio, 2)))
    return found


def opaque_png(fig) -> bool:
    """The PNG IPython keeps of a figure (its own call: the figure's face colour, a tight box) has no see-through
    pixel."""
    from matplotlib.image import imread

    buffer = io.BytesIO()
    fig.canvas.print_figure(buffer, format="png", facecolor=fig.get_facecolor(), edgecolor=fig.get_edgecolor(),
                            bbox_inches="tight")
    buffer.seek(0)
    return bool(imread(buffer, format="png")[..., 3].min() == 1.0)


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A project with a completed, a failed and an aborted run (their run directories, as a supervisor leaves
    them)."""
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path / "agent"))
    monkeypatch.delenv("NBSUBAGENTS_ROOT", raising=False)
    root = make_project(tmp_path / "project", "run-done", "scout")
    for n, (status, stop) in enumerate((("failed", "error"), ("aborted", "cancelled"))):
        run_dir = root / ".pi" / "subagents" / "runs" / f"run-{status}"
        run_dir.mkdir()
        (run_dir / "meta.json").write_text(json.dumps({"runId": f"run-{status}", "name": f"a {status} run",
                                                       "preset": "scout", "mode": "single", "task": "ls",
                                                       "cwd": str(root), "resolvedModel": "demo/scripted",
                                                       "createdAt": "2026-01-01T10:00:00.000Z"}))
        (run_dir / "result.json").write_text(json.dumps({
            **RESULT, "runId": f"run-{status}", "status": status, "stopReason": stop,
            "startedAt": f"2026-01-01T10:00:0{n + 1}.000Z", "endedAt": f"2026-01-01T10:00:0{n + 5}.000Z"}))
    config.reset()
    yield root
    config.reset()


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_the_timeline_reads_on_a_page_of_either_theme(project, theme):
    fig = runs_timeline(root=project, theme=theme)
    assert {p.get_gid() for p in fig.axes[0].patches} >= {"run-done", "run-failed", "run-aborted"}
    for page in (theme, OTHER[theme]):
        assert illegible(fig, PAGES[page]) == [], f"{theme} timeline on a {page} page"
    assert opaque_png(fig)


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_an_experiment_plot_reads_on_a_page_of_either_theme(theme):
    fig = plots.plot(frames.frame(FIXED), x="duration_s", y="words", by="preset", title="demo", theme=theme)
    texts = {t.get_text() for t in fig.findobj(lambda a: hasattr(a, "get_text"))}
    assert {"a (n=3)", "b (n=3)", "metrics.duration_s", "scores.words"} <= texts
    for page in (theme, OTHER[theme]):
        assert illegible(fig, PAGES[page]) == [], f"{theme} plot on a {page} page"
    assert opaque_png(fig)


def test_a_true_false_score_is_drawn_as_two_categories():
    """``ok`` is True for 5 runs and False for 1: the axis says false and true, and a cell's runs of one value sit
    on one line (its lane), not spread over a number line that reads 0.95 to 1.06."""
    fig = plots.plot(frames.frame(FIXED), x="duration_s", y="ok", by="preset", theme="light")
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["false", "true"]
    assert list(ax.get_yticks()) == [0, 1]
    for points in ax.collections:
        ys = [y for _, y in points.get_offsets()]
        assert len({round(y, 9) for y in ys if y > 0.5}) <= 1 and len({round(y, 9) for y in ys if y < 0.5}) <= 1
        assert all(abs(y - round(y)) <= 0.35 for y in ys)
    lanes = sorted({round(float(y), 9) for points in ax.collections for _, y in points.get_offsets() if y > 0.5})
    assert len(lanes) == 2  # the cells a and b each in a lane of their own beside "true"
    assert illegible(fig, PAGES["dark"]) == []


def test_a_number_is_drawn_where_it_is():
    """No jitter: each point's x is its run's duration exactly (equal values share a spot, never spread into values
    no run had, such as a cost below 0 when every offline run cost 0)."""
    data = frames.frame(FIXED)
    fig = plots.plot(data, x="duration_s", y="ok", by="preset", theme="light")
    drawn = sorted(float(x) for points in fig.axes[0].collections for x, _ in points.get_offsets())
    assert drawn == sorted(float(v) for v in data["metrics.duration_s"].dropna())


def test_a_reports_plot_is_drawn_for_its_light_page_whatever_jupyterlabs_theme(tmp_path, monkeypatch):
    """The report page is light; JupyterLab's chosen theme (dark here) must not give it a dark plot."""
    import base64

    from matplotlib.image import imread

    from nbsubagents._sweeps.report import _plot_png

    settings = tmp_path / "settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    (settings / "themes.jupyterlab-settings").write_text('{\n  // chosen\n  "theme": "JupyterLab Dark"\n}')
    monkeypatch.setenv("JUPYTERLAB_SETTINGS_DIR", str(tmp_path / "settings"))

    class Sweep:  # what _plot_png asks of an experiment: its plot
        def plot(self, **options):
            return plots.plot(frames.frame(FIXED), x="duration_s", y="words", by="preset", **options)

    pixels = imread(io.BytesIO(base64.b64decode(_plot_png(Sweep()))), format="png")
    assert pixels[..., 3].min() == 1.0 and tuple(pixels[0, 0, :3]) == (1.0, 1.0, 1.0)  # opaque, the page's white
