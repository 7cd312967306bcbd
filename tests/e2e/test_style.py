"""One look for every status (issue 17): text glyphs, one palette, readable on light and dark themes."""

from __future__ import annotations

import json
import re
import sys
import unicodedata
from pathlib import Path

import pytest

import nbsubagents
from nbsubagents import _style as style
from nbsubagents._templates import part, stylesheet
from nbsubagents._ui.display import run_mimebundle

from helpers import PI_VERSION, wait_for

DARK = style.DARK_SCOPE

REPO = Path(__file__).resolve().parents[2]


def luminance(hex_color: str) -> float:
    channels = [int(hex_color.lstrip("#")[i:i + 2], 16) / 255 for i in (0, 2, 4)]
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(a: str, b: str) -> float:
    """WCAG 2 contrast ratio of two colours."""
    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def theme_backgrounds(theme: str) -> list[str]:
    """The layout colours 0 and 1 of an installed JupyterLab theme (what a notebook's outputs sit on)."""
    base = Path(sys.prefix) / "share" / "jupyter" / "lab" / "themes" / "@jupyterlab"
    css = (base / f"theme-{theme}-extension" / "index.css").read_text()
    colors = []
    for n in (0, 1):
        value = re.search(rf"--jp-layout-color{n}:([^;]+);", css).group(1).strip()
        value = {"white": "#ffffff"}.get(value, value)
        fallback = re.search(r"#[0-9a-fA-F]{3,6}", value)
        value = fallback.group(0) if fallback else value
        if len(value) == 4:
            value = "#" + "".join(ch * 2 for ch in value[1:])
        colors.append(value)
    return colors


def is_emoji_like(ch: str) -> bool:
    """Characters that fonts draw as emoji: wide symbols (Emoji_Presentation), the emoji planes, VS16."""
    code = ord(ch)
    if ch == "\ufe0f" or code >= 0x1F000:
        return True
    return unicodedata.category(ch).startswith("S") and unicodedata.east_asian_width(ch) in ("W", "F")


def test_the_old_hourglass_counts_as_emoji_and_no_glyph_does():
    assert is_emoji_like("⏳") and is_emoji_like("✅") and not is_emoji_like("✓")  # the check itself can fail
    assert [g for g in style.GLYPHS.values() if any(is_emoji_like(ch) for ch in g)] == []
    assert len(set(style.GLYPHS.values())) == len(style.GLYPHS)


@pytest.mark.parametrize("theme,index", [("light", 0), ("dark", 1)])
def test_every_status_colour_reaches_wcag_aa_on_jupyterlab_backgrounds_and_the_outputs_own(theme, index):
    backgrounds = theme_backgrounds(theme) + [style.PAGE[index]]
    assert len(backgrounds) == 3 and all(re.fullmatch(r"#[0-9a-f]{6}", b, re.I) for b in backgrounds)
    low = {status: min(contrast(pair[index], bg) for bg in backgrounds)
           for status, pair in {**style.PALETTE, "muted": style.MUTED, "text": style.TEXT}.items()}
    assert all(ratio >= 4.5 for ratio in low.values()), low
    assert min(contrast("#ffffff", light) for light, _ in style.PALETTE.values()) >= 4.5  # a badge: white on light


def test_the_dark_css_switches_every_status_to_its_dark_colour():
    sheet = stylesheet()
    scopes = {"light": sheet.split(":root{", 1)[1].split("}", 1)[0],
              "dark": sheet.split(f"{DARK}{{", 1)[1].split("}", 1)[0],
              "dark scheme": sheet.split("@media (prefers-color-scheme: dark){" + style.NO_JP_THEME + "{", 1)[1]}
    for status, (light, dark) in {**style.PALETTE, "muted": style.MUTED, "page": style.PAGE}.items():
        assert f"--nbsubagents-{status}:{light};" in scopes["light"]
        assert f"--nbsubagents-{status}:{dark};" in scopes["dark"].split("}")[0]
        assert f"--nbsubagents-{status}:{dark};" in scopes["dark scheme"].split("}")[0]
        if status != "page":  # over the inline light value
            assert f".nbsubagents-c-{status}{{color:var(--nbsubagents-{status}) !important}}" in sheet
    assert part("inline.html", "ink", status="failed", classes="x") == 'class="nbsubagents-c-failed x" style="color:#b91c1c"'


def test_aborted_has_one_colour_on_every_surface(project):
    from matplotlib.colors import to_hex

    from nbsubagents._views.tables import styled_html

    run = nbsubagents.start("scout", "sleep: 30\nread README.md", name="stopme", show=False)
    wait_for(lambda: '"turn_start"' in run.paths.events.read_text(errors="replace") if run.paths.events.exists()
             else False, what="the run to start")
    run.cancel()
    run.wait(60)
    assert run.status == "aborted"
    light, dark = style.PALETTE["aborted"]
    bar = nbsubagents.status_bar()
    assert bar.text == "runs: 0 running / 1 total · 1 aborted"
    assert f'nbsubagents-statusbar-aborted"> · <span class="nbsubagents-badge nbsubagents-badge-aborted" ' \
        f'style="background:{light};color:#fff' in bar.html
    assert f'nbsubagents-bold" style="color:{light}">aborted' in styled_html(nbsubagents.runs())
    record = run_mimebundle(nbsubagents.get_run(run.id))["text/html"]  # the run's static record, as IPython shows it
    assert f'nbsubagents-badge-aborted nbsubagents-status" style="background:{light};color:#fff' in record
    figure = nbsubagents.runs_timeline(theme="light")
    assert to_hex([p for p in figure.axes[0].patches if p.get_gid()][0].get_facecolor()) == light
    assert f"{DARK}{{" in stylesheet() and f"--nbsubagents-aborted:{dark};" in stylesheet().split(f"{DARK}{{", 1)[1]


def test_the_status_bar_and_tables_carry_no_emoji(project):
    nbsubagents.run("scout", "read README.md", show=False)
    from nbsubagents._views.tables import styled_html

    for text in (nbsubagents.status_bar().html, nbsubagents.status_bar().text, styled_html(nbsubagents.runs()),
                 repr(nbsubagents.get_run(nbsubagents.runs().run_id[0]))):
        assert [ch for ch in text if is_emoji_like(ch)] == []


@pytest.mark.pi_matrix
def test_a_model_connection_that_drops_mid_stream_is_a_failure_not_an_empty_success(project, scripted):
    scripted.script = [{"drop": True}]
    run = nbsubagents.run("scout", "anything", show=False)
    assert run.status == "failed", (run.status, run.output, run.result)
    if PI_VERSION < (1,):  # pi 0.73.1 ends as if the model had said nothing: nbsubagents names what happened
        assert "empty reply" in run.error and "connection" in run.error
    else:  # pi 1.x says so itself
        assert run.error == "Stream ended without finish_reason"
    assert run.result["usage"]["totalTokens"] == 0 and run.output == ""


def test_a_quiet_reply_with_usage_is_still_a_success(project, scripted):
    scripted.script = [{"text": ""}]
    run = nbsubagents.run("scout", "say nothing", show=False)
    assert run.status == "completed" and run.result["usage"]["totalTokens"] > 0


def test_the_timeline_follows_the_theme_and_its_ticks_read_as_times(project, tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    from matplotlib.colors import to_hex

    nbsubagents.run("scout", "read README.md", show=False)
    settings = tmp_path / "lab-settings"
    themes = settings / "@jupyterlab" / "apputils-extension" / "themes.jupyterlab-settings"
    themes.parent.mkdir(parents=True)
    themes.write_text('{\n  // chosen in the Settings menu\n  "theme": "JupyterLab Dark"\n}\n')
    monkeypatch.setenv("JUPYTERLAB_SETTINGS_DIR", str(settings))
    fig = nbsubagents.runs_timeline()
    ax = fig.axes[0]
    assert to_hex(fig.get_facecolor(), keep_alpha=True) == style.PAGE[1] + "ff"  # opaque, dark
    bar = [p for p in ax.patches if p.get_gid()][0]
    assert to_hex(bar.get_facecolor()) == style.color("completed", dark=True)
    fig.canvas.draw()
    labels = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    assert labels and all(re.fullmatch(r"\d\d:\d\d(:\d\d)?", t) for t in labels), labels
    assert {to_hex(t.get_color()) for t in ax.get_xticklabels() + ax.get_yticklabels()} == {style.TEXT[1]}
    light = nbsubagents.runs_timeline(theme="light")
    assert to_hex([p for p in light.axes[0].patches if p.get_gid()][0].get_facecolor()) == style.color("completed")
    with pytest.raises(nbsubagents.NbSubagentsError, match='theme must be "auto", "light" or "dark"'):
        nbsubagents.runs_timeline(theme="solarized")
    json.dumps(style.PALETTE)  # plain data a report or another surface can reuse
