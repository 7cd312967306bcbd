"""How a status looks, everywhere: one set of text glyphs, one palette for light and dark pages.

Panels, the status bar, ``browse()``, tables, summaries, notices, reports and the timeline all take their glyphs
and colours from here, so a status looks the same on every surface. The glyphs are plain text symbols
(no emoji: they render the same with or without an emoji font). Each colour has a light-page and a
dark-page value, both at least 4.5:1 (WCAG AA) against JupyterLab's backgrounds and against ``PAGE``; HTML carries
the light value inline (what survives where stylesheets are stripped: ``_templates/inline.html``). The stylesheet
(``_templates.stylesheet()``, whose colour rules this palette generates) makes them CSS variables that switch to the
dark values under JupyterLab's dark themes (``data-jp-theme-light="false"``, also set by nbconvert's dark HTML
export) and, on a page with no JupyterLab theme, under the reader's dark colour scheme. Every output paints its own
background (``PAGE``, or JupyterLab's) and text (``TEXT``) with the same switch, so its colours never meet a
background they were not chosen for (a dark page read with a light scheme, the docs theme's light box in its dark
mode).
"""

from __future__ import annotations

from typing import Any

from ._child.summary import GLYPHS, glyph  # noqa: F401  (a status's glyph is a word of the run summary: child/)
from ._child.text import ELLIPSIS, clip, plural

__all__ = ["clip", "shorten", "plural", "duration"]  # and the palette, glyphs and styles below


# (light theme, dark theme)
PALETTE = {
    "queued": ("#4b5563", "#a3a9b4"),
    "running": ("#1d4ed8", "#7cb2fb"),
    "completed": ("#166534", "#4ade80"),
    "failed": ("#b91c1c", "#f98b8b"),
    "aborted": ("#92400e", "#fbbf24"),
    "waiting": ("#7e22ce", "#d8b4fe"),  # a running run whose child waits for a person's answer
}
MUTED = ("#4b5563", "#a3a9b4")
PAGE = ("#ffffff", "#111111")  # an output's own background where the page has no JupyterLab theme
TEXT = ("#1f2328", "#e6edf3")  # and its text

DARK_SCOPE = '[data-jp-theme-light="false"]'

# A dark page that is not JupyterLab (a dark nbviewer, an exported notebook read with a dark preference) says so
# only through the reader's colour scheme: there, and only where no JupyterLab theme is set, the dark values.
NO_JP_THEME = "body:not([data-jp-theme-light])"


def color(status: str, *, dark: bool = False) -> str:
    """The status's colour for a light (default) or dark background."""
    return PALETTE.get(status, MUTED)[1 if dark else 0]


def duration(seconds: float) -> str:
    """``4.2s``, ``42s``, ``3m 05s``, ``1h 02m``."""
    if seconds < 10:
        return f"{seconds:.1f}s"
    if seconds < 60:
        return f"{int(seconds)}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m" + (f" {secs:02d}s" if secs else "")
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h" + (f" {minutes:02d}m" if minutes else "")


def shorten(text: object, width: int) -> str:
    """One line of at most ``width`` characters, whitespace folded, ``…`` where it was cut."""
    flat = " ".join(str(text or "").split())
    return flat if len(flat) <= width else flat[: width - 1].rstrip() + ELLIPSIS


def filesize(n: int) -> str:
    """``512 B``, ``1.5 KB``, ``3.2 MB``."""
    size = float(n)
    for unit in ("B", "KB", "MB"):
        if size < 1024:
            return f"{n} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GB"


def is_missing(value: object) -> bool:
    """None, NaN, NaT or pandas.NA (a frame's empty cell); pandas is never imported here."""
    try:
        return value is None or bool(value != value)
    except (TypeError, ValueError):  # pandas.NA compares to NA
        return True


def pydatetime(stamp: Any) -> Any:
    """A pandas Timestamp as a datetime (its nanoseconds, which no clock here has, dropped quietly)."""
    try:
        return stamp.to_pydatetime(warn=False)
    except TypeError:
        return stamp.to_pydatetime()


# Plots (runs_timeline(), an experiment's plot() and its report's PNG) are drawn on an opaque PAGE in TEXT, so a plot
# made in one theme still reads on a page of the other; axes and grid in MUTED, a status in PALETTE, and the cells of
# a plot (which are no statuses) in SERIES: hues after Okabe and Ito's colour-blind-safe set, each at least 3:1 on
# its background. (light theme, dark theme)
SERIES = (("#0072b2", "#d55e00", "#009e73", "#cc79a7", "#9467bd", "#8c564b", "#a6761d", "#7f7f7f"),
          ("#56b4e9", "#e69f00", "#009e73", "#cc79a7", "#f0e442", "#d55e00", "#b39ddb", "#bbbbbb"))
