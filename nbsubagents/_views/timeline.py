"""The timeline: ``runs_timeline()``, a matplotlib figure with one bar per run from its start to its end.

matplotlib and pandas are imported when a figure is drawn; the theme (light or dark) is JupyterLab's
chosen one unless given. Every plot of the package (this one and an experiment's) is painted by ``paint``: an opaque
background in the theme's colour, so a figure made in one theme reads on a page of the other.
"""

from __future__ import annotations

import json
import os
import re
from datetime import datetime, timezone
from pathlib import Path
import sys
from typing import TYPE_CHECKING, Any

from .._child.artifacts import ACTIVE, STATUSES
from .._config import NbSubagentsError
from .._registry import query
from .._style import MUTED, PAGE, TEXT, color, is_missing, plural, pydatetime

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["runs_timeline", "new_figure", "paint", "dark_theme", "jupyterlab_theme", "in_ipython",
           "TIMELINE_LIMIT"]

TIMELINE_LIMIT = 200     # newest runs drawn by runs_timeline()


def _matplotlib() -> Any:
    try:
        import matplotlib
        import matplotlib.dates
        import matplotlib.figure  # noqa: F401  (what it draws with: a broken install fails here, with the hint)
    except ImportError:
        raise ImportError("runs_timeline() draws with matplotlib, which is not installed: "
                          "pip install 'nbsubagents[timeline]' (or pip install matplotlib)") from None
    return matplotlib


def in_ipython() -> bool:
    """True when IPython (a terminal or a kernel) is running this process; IPython is only looked up."""
    ipython = sys.modules.get("IPython")
    try:
        return ipython is not None and ipython.get_ipython() is not None
    except Exception:
        return False


def new_figure(figsize: tuple[float, float]) -> Figure:
    """In IPython a pyplot figure (so the notebook's backend shows it) closed at once (so it shows once, as
    the returned value); elsewhere a figure on the Agg canvas, which needs no display."""
    if in_ipython():
        import matplotlib.pyplot as plt
        fig = plt.figure(figsize=figsize)
        plt.close(fig)
        return fig
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    fig = Figure(figsize=figsize)
    FigureCanvasAgg(fig)
    return fig


def paint(fig: Figure, ax: Any, *, dark: bool) -> str:
    """Give ``fig`` and its axes ``ax`` the theme's opaque background (``_style.PAGE``): frame and ticks in the
    muted colour, tick labels and axis labels in the theme's ink (``TEXT``), which it returns (for the title, the
    legend and other text)."""
    index = 1 if dark else 0
    background, ink, muted = PAGE[index], TEXT[index], MUTED[index]
    fig.set_facecolor(background)
    fig.set_edgecolor(background)
    ax.set_facecolor(background)
    ax.tick_params(colors=muted, labelcolor=ink)
    for spine in ax.spines.values():
        spine.set_color(muted)
    ax.xaxis.label.set_color(ink)
    ax.yaxis.label.set_color(ink)
    return ink


def runs_timeline(*, status: Any = None, preset: Any = None, model: Any = None, since: Any = None,
                  until: Any = None, text: str | None = None, limit: int | None = TIMELINE_LIMIT,
                  root: str | Path | None = None, theme: str = "auto") -> Figure:
    """Runs over time: one horizontal bar per run from its start to its end (now while it runs), coloured
    by status, earliest at the top, so runs that ran in parallel overlap. Filters as ``runs()``; the
    newest ``limit`` runs are drawn. Returns the matplotlib ``Figure`` (each bar's gid is its run id).

    ``theme``: ``"light"``, ``"dark"`` or ``"auto"`` (JupyterLab's chosen theme, light when unknown): the
    figure's opaque background, its text and its bars take the theme's colours (``paint``), so it reads on a page of
    either theme.
    """
    _matplotlib()
    dark = dark_theme(theme)
    import pandas as pd
    from matplotlib import dates as mdates
    from matplotlib.patches import Patch

    frame = query.runs(status=status, preset=preset, model=model, since=since, until=until, text=text,
                       limit=limit, root=root)
    frame = frame.sort_values(["started", "run_id"], kind="stable").reset_index(drop=True)
    n = len(frame)
    fig = new_figure((10.0, min(1.6 + 0.32 * max(n, 1), 30.0)))
    ax = fig.add_subplot()
    ink = paint(fig, ax, dark=dark)
    if not n:
        ax.text(0.5, 0.5, "no runs", transform=ax.transAxes, ha="center", va="center", color=ink)
        ax.set_axis_off()
        return fig

    now = pd.Timestamp.now(tz="UTC")
    starts, ends = [], []
    for row in frame.itertuples(index=False):
        start = row.started
        if is_missing(start):
            start = now
        end = row.ended
        if str(row.status) in ACTIVE:
            end = now
        elif is_missing(end):
            end = start + pd.Timedelta(seconds=0 if is_missing(row.duration_s) else float(row.duration_s))
        starts.append(mdates.date2num(pydatetime(start)))
        ends.append(mdates.date2num(pydatetime(max(start, end))))
    span = max(ends) - min(starts)
    pad = span * 0.02 if span > 0 else 30 / 86400
    for i, row in enumerate(frame.itertuples(index=False)):
        status_ = str(row.status)
        face = color(status_, dark=dark)
        # true lengths; the edge in the bar's own colour keeps a run of a few seconds visible as a line
        # (a run still going: a lighter face, hatched in its colour, up to now)
        active = status_ in ACTIVE
        (bar,) = ax.barh(i, ends[i] - starts[i], left=starts[i], height=0.6, color=face + "66" if active else face,
                         edgecolor=face, linewidth=1.0, hatch="//" if active else None)
        bar.set_gid(str(row.run_id))
    names = [str(name) if not is_missing(name) else str(rid) for name, rid in zip(frame["name"], frame["run_id"])]
    ax.set_yticks(range(n))
    ax.set_yticklabels(names if n <= 80 else [""] * n, fontsize=9 if n <= 30 else 7)
    ax.set_ylim(n - 0.5, -0.5)  # the earliest run at the top
    local = datetime.now(timezone.utc).astimezone().tzinfo
    low, high = min(starts) - pad, max(ends) + pad
    ax.xaxis.set_major_locator(mdates.AutoDateLocator(tz=local, minticks=3, maxticks=8))
    ax.xaxis.set_major_formatter(mdates.DateFormatter(_tick_format(high - low, low, high), tz=local))
    ax.set_xlim(low, high)
    ax.grid(axis="x", alpha=0.4, color=MUTED[1 if dark else 0])
    ax.set_axisbelow(True)
    present = [s for s in STATUSES if s in set(frame["status"].astype(str))]
    ax.legend(handles=[Patch(color=color(s, dark=dark), label=s) for s in present], loc="upper left",
              bbox_to_anchor=(1.0, 1.0), frameon=False, fontsize=9, labelcolor=ink)
    title = plural(n, "run")
    if limit is not None and n >= limit:
        title = f"the newest {title}"
    ax.set_title(title, loc="left", fontsize=10, color=ink)
    fig.tight_layout()
    return fig


def _tick_format(span_days: float, low: float, high: float) -> str:
    """Every tick reads as a whole time: seconds only for short spans, the date once runs span days."""
    from matplotlib import dates as mdates

    if mdates.num2date(low).astimezone().date() != mdates.num2date(high).astimezone().date():
        return "%m-%d %H:%M"
    return "%H:%M:%S" if span_days * 86400 < 1800 else "%H:%M"


def dark_theme(theme: str) -> bool:
    """Whether ``theme`` (``"light"``, ``"dark"``, or ``"auto"``: JupyterLab's chosen theme) is a dark one."""
    if theme not in ("auto", "light", "dark"):
        raise NbSubagentsError(f'theme must be "auto", "light" or "dark", got {theme!r}')
    if theme != "auto":
        return theme == "dark"
    return "dark" in (jupyterlab_theme() or "").lower()


def jupyterlab_theme() -> str | None:
    """The theme chosen in JupyterLab's user settings (``JupyterLab Dark``, ...), None when never chosen."""
    folder = os.environ.get("JUPYTERLAB_SETTINGS_DIR")
    if not folder:
        try:
            from jupyter_core.paths import jupyter_config_dir
        except ImportError:
            return None
        folder = os.path.join(jupyter_config_dir(), "lab", "user-settings")
    path = Path(folder) / "@jupyterlab" / "apputils-extension" / "themes.jupyterlab-settings"
    try:
        text = path.read_text(encoding="utf-8")
        text = re.sub(r"^\s*//.*$", "", text, flags=re.MULTILINE)  # the file is JSON with comments
        value = json.loads(text).get("theme")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, str) else None
