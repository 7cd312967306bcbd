"""An experiment's cost/score plot (``Experiment.plot``): one point per run that ran, drawn for a page of either
theme. matplotlib is imported only here, when a plot is drawn (an optional extra)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from .._config import NbSubagentsError
from .._style import MUTED, SERIES
from .._views.timeline import dark_theme, new_figure, paint  # shown once in a notebook, drawable elsewhere
from .views import by_columns, cell_label, excluded_reasons, is_boolean, value_columns

if TYPE_CHECKING:
    import pandas


MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">")
LANES = 0.6  # the width of a true/false category a plot's cells share, one lane each (of the 1 between categories)


def plot(data: pandas.DataFrame, *, x: str = "cost", y: str | None = None,
         by: str | Sequence[str] = ("preset", "model"), title: str = "", theme: str = "auto") -> Any:
    """Cost (or another metric) against a score, one point per run that ran: a colour per cell, a marker per model,
    each cell's count in the legend (outside the axes). A number is drawn where it is (equal values on one spot:
    the legend counts them; no jitter, which shows equal values as different and can draw a cost below 0); a
    true/false value is two categories, ``false`` and ``true``, each cell in a lane of its own beside them (and
    its count of true in the legend). Drawn on an opaque background of ``theme``
    (``"auto"``: JupyterLab's chosen theme), so it reads on a page of either theme. A matplotlib Figure."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise NbSubagentsError("plot() needs matplotlib: pip install 'nbsubagents[timeline]'") from None
    import pandas as pd

    if theme not in ("auto", "light", "dark"):
        raise NbSubagentsError(f'plot(theme=...) is "auto", "light" or "dark", got {theme!r}')
    dark = dark_theme(theme)
    xcol = x if x in data.columns else f"metrics.{x}"
    scores = [c for c in data.columns if c.startswith("scores.")]
    ycol = (y if y in data.columns else f"scores.{y}") if y else (scores[0] if scores else "metrics.duration_s")
    for col, what in ((xcol, "x"), (ycol, "y")):
        if col not in data.columns:
            raise NbSubagentsError(f"plot({what}=...): no column {col!r}; metrics and scores are "
                                   f"{', '.join(value_columns(data))}")
    cols = by_columns(data, by)
    ran = data[excluded_reasons(data).isna()]
    cells = list(ran.groupby(cols, dropna=False, sort=True))
    def place(col: str) -> tuple[pandas.Series, bool]:
        """The column's positions on its axis, and whether it is true/false: then 0 or 1 and each cell's lane
        beside it; else its numbers as they are."""
        if is_boolean(ran[col]):
            lane = pd.Series(0.0, index=ran.index)
            for i, (_, part) in enumerate(cells):
                lane[part.index] = LANES * ((i + 0.5) / len(cells) - 0.5)
            return ran[col].map(lambda v: float(v) if isinstance(v, bool) else float("nan")) + lane, True
        return pd.to_numeric(ran[col], errors="coerce"), False

    (xs, x_bool), (ys, y_bool) = place(xcol), place(ycol)
    model_col = "params.model" if "params.model" in data.columns else None
    models = sorted({cell_label(v) for v in ran[model_col]}) if model_col else []
    fig = new_figure((7.5, 4.0))
    ax = fig.add_subplot()
    ink = paint(fig, ax, dark=dark)
    colours = SERIES[1 if dark else 0]
    for i, (cell, part) in enumerate(cells):
        label = " · ".join(cell_label(v) for v in (cell if isinstance(cell, tuple) else (cell,)))
        marker = MARKERS[models.index(cell_label(part[model_col].iloc[0])) % len(MARKERS)] if model_col else "o"
        count = f"n={len(part)}"
        if y_bool:
            count += f", {sum(v is True or type(v).__name__ == 'bool_' and bool(v) for v in part[ycol])} true"
        points = ax.scatter(xs[part.index], ys[part.index], label=f"{label} ({count})", alpha=0.85, marker=marker,
                            s=36, edgecolors="none", color=colours[i % len(colours)])
        points.set_gid(label)
    for is_bool, axis, limits in ((x_bool, ax.xaxis, ax.set_xlim), (y_bool, ax.yaxis, ax.set_ylim)):
        if is_bool:  # two categories: their names, no number line between them
            axis.set_ticks([0, 1], ["false", "true"])
            limits(-0.5, 1.5)
    excluded = len(data) - len(ran)
    ax.set_xlabel(xcol)
    ax.set_ylabel(ycol)
    note = f"({excluded} excluded run{'s' * (excluded != 1)} not shown)" if excluded else ""
    ax.set_title(" ".join(t for t in (title, note) if t), color=ink, loc="left", fontsize=10)
    grid = [axis for axis, is_bool in (("x", x_bool), ("y", y_bool)) if not is_bool]
    if grid:
        ax.grid(axis="both" if len(grid) == 2 else grid[0], alpha=0.4, color=MUTED[1 if dark else 0])
    ax.set_axisbelow(True)
    if len(ran):
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, frameon=False,
                  labelcolor=ink)
    fig.tight_layout()
    return fig
