"""Tables of runs and files as a notebook shows them: the runs DataFrame with coloured statuses (``RunsFrame``,
``styled_html``) and a run directory's files (``Artifacts``). Pure strings; pandas is imported only when a frame
is drawn."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .._style import filesize
from .._templates import part

if TYPE_CHECKING:
    import pandas

__all__ = ["Artifact", "Artifacts", "RunsFrame", "styled_html"]


def _frame_class() -> type:
    import pandas as pd

    class _RunsFrame(pd.DataFrame):
        """A DataFrame whose notebook view colours statuses; its text view is pandas' own."""

        @property
        def _constructor(self) -> type:
            return _RunsFrame

        def _repr_html_(self) -> str | None:
            return styled_html(self)

    return _RunsFrame


_cls: type | None = None


def RunsFrame(frame: pandas.DataFrame) -> pandas.DataFrame:  # noqa: N802 - reads like the class it makes
    """``frame`` (what ``registry.query.runs`` returns) as a frame that shows its statuses in colour."""
    global _cls
    if _cls is None:
        _cls = _frame_class()
    return _cls(frame)


def styled_html(frame: pandas.DataFrame, *, max_rows: int = 60, sheet: bool = True) -> str:
    """An HTML table with status colours; every value escaped. Long frames show head and tail. ``sheet=False``
    leaves the stylesheet out (for a page that carries it already)."""
    import pandas as pd

    shown = frame if len(frame) <= max_rows else pd.concat([frame.head(max_rows // 2), frame.tail(max_rows // 2)])
    # A meaningful index (set_index("name")) is shown; pandas' default 0..n-1 is not.
    labelled = not (isinstance(shown.index, pd.RangeIndex) and shown.index.name is None)
    header = ([str(shown.index.name or "")] if labelled else []) + [str(c) for c in shown.columns]
    body = []
    for label, row in shown.iterrows():
        cells = [("nowrap", str(label))] if labelled else []  # a run id or a time wraps at its hyphens otherwise
        for column, value in row.items():
            if column == "status" and isinstance(value, str):
                cells.append(("status", value))
            elif value is None or value is pd.NA or (isinstance(value, float) and value != value) or value is pd.NaT:
                cells.append(("", ""))
            elif isinstance(value, pd.Timestamp):  # shown in the reader's local time
                cells.append(("nowrap", value.to_pydatetime().astimezone().strftime("%Y-%m-%d %H:%M:%S")))
            elif column == "run_id":
                cells.append(("nowrap", str(value)))
            else:
                cells.append(("", f"${value:.4f}" if column == "cost" and isinstance(value, float) else str(value)))
        body.append(cells)
    note = "" if len(frame) <= max_rows else f"{len(frame)} runs; showing the newest and oldest {max_rows // 2}."
    return part("tables.html", "runs", header=header, rows=body, labelled=labelled, note=note, sheet=sheet)


@dataclass(frozen=True)
class Artifact:
    name: str
    path: Path
    size: int


class Artifacts(list):
    """The files of a run directory with their sizes; a table in a notebook, aligned text elsewhere."""

    def __repr__(self) -> str:
        if not self:
            return "(no artifacts)"
        width = max(len(a.name) for a in self)
        return "\n".join(f"{a.name:<{width}}  {filesize(a.size):>9}  {a.path}" for a in self)

    def _repr_html_(self) -> str:
        return part("tables.html", "artifacts", found=self)
