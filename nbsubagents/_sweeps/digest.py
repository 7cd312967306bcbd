"""What a sweep's record leads with: its failures grouped by reason (with the cells each reason hit), the cells'
scores, then its runs, the successes collapsed into one count.

A reason's kind is its first line with the run-specific bits made ``…``: run ids, uuids and hashes, paths,
quoted names and numbers (``Timed out after 30s`` and ``Timed out after 31s`` are one kind, ``Timed out after …s``),
except a three-digit number from 100 to 599 standing alone, an HTTP status (``429`` and ``500`` are two kinds). A
quoted name counts as run-specific only when it holds a digit, ``/``, ``.``, ``_`` or ``-`` (``'demo/x'``,
``"task-3"``); quoted words stay (``{"message":"upstream exploded"}`` and ``{"message":"database down"}`` are two
kinds). Failed and aborted runs never share a group. A group reads as its text when every run of it said the
same, else as its kind.

A cell is a point of the grid without its repeat (``grid.cell_values``): named by the axes that vary across the
sweep (``model=demo/a · task_id=t1``), or, when none varies, by its preset, model and task. Everything here is one
pass over the runs: cheap enough for a live panel of 1,000 runs.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Iterable

from .._style import ELLIPSIS, glyph, shorten

__all__ = ["reason_kind", "cell_axes", "cell_name", "FailureGroup", "group_failures", "CellScores", "cell_scores",
           "group_text", "cells_text", "REASON_CAP", "CELL_CAP", "GROUP_CELLS"]

REASON_CAP = 12      # distinct reasons shown; the rest is one line
CELL_CAP = 40        # cells in the cells' table; compare() has them all
GROUP_CELLS = 6      # cells named in a reason's line
ENDED = frozenset(("completed", "failed", "aborted"))
AXES = ("harness", "preset", "model", "input", "task_id")  # what makes a cell, in the order a name gives them

_RUN_SPECIFIC = re.compile("|".join((
    r"(?P<status>(?<![\w.])[1-5]\d\d(?![\w.]))",                 # an HTTP status standing alone: kept
    r"\b\d{8}-\d{6}-[0-9a-f]{4,}\b",                             # a run id
    r"\b[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12}\b",          # a uuid
    r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,}\b",        # a hash
    r"(?<![\w/])(?:~|\.{1,2})?/[\w.@+~-]+(?:/[\w.@+~-]*)*",      # a path
    *(f"{q}(?=[^{q}\\s]*[\\d/._-])[^{q}\\s]{{1,80}}{q}" for q in "'\"`"),  # a quoted name with a digit, / . _ or -
    r"\d+(?:\.\d+)?",                                            # any other number
)))


def first_line(text: str) -> str:
    return next((ln.strip() for ln in str(text or "").splitlines() if ln.strip()), "")


def reason_kind(text: str) -> str:
    """``text``'s first line with its run-specific bits as ``…`` (what makes two reasons one)."""
    kind = _RUN_SPECIFIC.sub(lambda m: m.group("status") or ELLIPSIS, first_line(text))
    return " ".join(kind.split())


def cell_axes(params: Iterable[dict[str, Any]]) -> list[str]:
    """The axes of ``AXES`` whose values differ between the runs' params."""
    seen: dict[str, set[str]] = {axis: set() for axis in AXES}
    for p in params:
        for axis in AXES:
            seen[axis].add(str(p.get(axis) or ("default" if axis == "model" else "")))
    return [axis for axis in AXES if len(seen[axis]) > 1]


def cell_name(run: Any, axes: list[str]) -> str:
    """The cell of ``run``: ``model=demo/a · task_id=t1`` by the varying ``axes``; its preset, model and task when
    none varies; its name outside an experiment."""
    p = getattr(run, "params", None) or {}
    if not p:
        return str(run.name)
    if axes:
        return " · ".join(f"{axis}={p.get(axis) or ('default' if axis == 'model' else '')}" for axis in axes)
    return " · ".join(str(v) for v in (p.get("harness"), p.get("preset") or run.preset,
                                       p.get("model") or run.model or "default", p.get("task_id")) if v)


# -- failures by reason ---------------------------------------------------------------------------------------
@dataclass(eq=False)
class FailureGroup:
    """The runs that ended ``status`` for one kind of reason, in the order they ended (each has ``.group``,
    ``.reason``, ``.status``, ``.run``)."""

    status: str
    kind: str
    rows: list[Any] = field(default_factory=list)

    @cached_property
    def text(self) -> str:
        """The reason as its runs said it, or its kind where they said it differently."""
        said = {first_line(r.reason) for r in self.rows}
        return said.pop() if len(said) == 1 else self.kind

    def cells(self) -> list[tuple[str, int]]:
        """``(cell, runs)``, the most hit first, the sweep's order between equals (its rows' ``order``)."""
        first: dict[str, int] = {}
        for r in self.rows:
            first[r.group] = min(first.get(r.group, r.order), r.order)
        return sorted(Counter(r.group for r in self.rows).items(), key=lambda item: (-item[1], first[item[0]]))


def group_failures(rows: Iterable[Any]) -> list[FailureGroup]:
    """The failed and aborted ``rows`` by kind of reason (their ``kind`` where they have it, reckoned once): the
    biggest group first, then the one that came first."""
    groups: dict[tuple[str, str], FailureGroup] = {}
    for row in rows:
        if row.status in ("failed", "aborted"):
            key = (row.status, getattr(row, "kind", "") or reason_kind(row.reason) or row.status)
            groups.setdefault(key, FailureGroup(*key)).rows.append(row)
    return sorted(groups.values(), key=lambda g: -len(g.rows))  # stable: equals keep the order they came in


def group_text(group: FailureGroup, width: int = 160) -> str:
    """``✗ 60 × 429 rate limited … in cells model=a (40), model=b (20)``."""
    cells = group.cells()
    named = ", ".join(f"{name} ({n})" for name, n in cells[:GROUP_CELLS])
    if len(cells) > GROUP_CELLS:
        named += f" and {len(cells) - GROUP_CELLS} more"
    where = f" in cell{'s' if len(cells) > 1 else ''} {named}" if named else ""
    return f"{glyph(group.status)} {len(group.rows)} × {shorten(group.text, width)}{where}"


# -- the cells' scores ----------------------------------------------------------------------------------------
@dataclass(eq=False)
class CellScores:
    """One cell: its runs, how many ended completed and failed (or aborted), and its scores' sums."""

    name: str
    runs: int = 0
    ended: int = 0
    completed: int = 0
    failed: int = 0
    sums: dict[str, list[float]] = field(default_factory=dict)   # score: [sum, n, 1 when every value is a bool]

    def add(self, row: Any) -> None:
        """An ended run (``runs`` counts every run of the cell)."""
        self.ended += 1
        self.completed += row.status == "completed"
        self.failed += row.status != "completed"
        for name, value in row.scores.items():
            if isinstance(value, (bool, int, float)) and value == value:
                total = self.sums.setdefault(name, [0.0, 0, 1])
                total[0] += float(value)
                total[1] += 1
                total[2] = total[2] and isinstance(value, bool)

    def score(self, name: str) -> str:
        """A bool score as ``3/4`` (true of scored), a number as its mean; ``–`` when no run has it."""
        total, n, flags = self.sums.get(name, (0.0, 0, 0))
        if not n:
            return "–"
        return f"{int(total)}/{n}" if flags else f"{total / n:.3g}"


def cell_scores(rows: Iterable[Any]) -> tuple[list[CellScores], list[str]]:
    """The cells in the sweep's order and the scores' names (in the order they came)."""
    cells: dict[str, CellScores] = {}
    names: dict[str, None] = {}
    for row in rows:
        cell = cells.get(row.group)
        if cell is None:
            cell = cells[row.group] = CellScores(row.group)
        cell.runs += 1
        if row.status in ENDED:
            cell.add(row)
            if row.scores:
                names.update(dict.fromkeys(row.scores))
    return list(cells.values()), list(names)


def cells_text(cells: list[CellScores], names: list[str]) -> list[str]:
    """The cells' table as aligned lines: cell, ended/runs, ✓ completed, ✗ failed, each score."""
    width = min(48, max((len(c.name) for c in cells[:CELL_CAP]), default=0))
    lines = [f"  {c.name:<{width}}  {c.ended}/{c.runs} ended  {glyph('completed')} {c.completed}  "
             f"{glyph('failed')} {c.failed}  " + "  ".join(f"{n}={c.score(n)}" for n in names)
             for c in cells[:CELL_CAP]]
    if len(cells) > CELL_CAP:
        lines.append(f"  … and {len(cells) - CELL_CAP} more cells (experiment.compare() has every cell)")
    return [ln.rstrip() for ln in lines]

