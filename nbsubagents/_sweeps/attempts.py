"""A cell's tries: which try of its cell each of an experiment's runs is (``attempt`` of ``attempts``; ``retried``:
why a superseded one was tried again) and which run is each cell's row (its latest), worked out on the registry's
columns a column at a time (a big sweep's rows are never made one dict each). ``Experiment.current_rows()`` and
``frame()`` read through it.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from . import frames


def cells_of(params: Any) -> list[tuple[Any, ...]]:
    """The plan cell of each run's params (``frames.parse``d), as ``cell_key`` names it: ``cell_values`` (task,
    preset, model, repeat, and the harness and inputs where a cell names them) as a tuple, worked out a key at a
    time."""
    cells = list(zip(*(frames.key_list(params, key) for key in ("task_id", "preset", "model", "repeat"))))
    for key in ("harness", "input"):
        named = frames.key_list(params, key)
        if named.count(None) < len(named):
            cells = [cell if value is None else (*cell, value) for cell, value in zip(cells, named)]
    return cells


def current(got: dict[str, list[Any]], plan: dict[str, Any], all_runs: bool) -> tuple[dict[str, list[Any]], Any]:
    """``Experiment.current_rows()`` of the registry columns ``got`` (``Experiment._columns()``), as columns: one
    run per cell of ``plan`` (its latest; ``all_runs``: every run), each with ``attempt``, ``attempts`` and
    ``retried``, and the runs' params parsed (``frames.parse``, in the same order)."""
    retried = {a["runId"]: a["retried"] for cell in plan.get("cells") or [] for a in cell.get("attempts") or []}
    params = frames.parse(got["params"])  # one parse for all
    cells = cells_of(params)
    counts = Counter(cells)
    if len(counts) == len(cells):  # every cell has one run (a sweep without retries)
        attempt, attempts = [1] * len(cells), [1] * len(cells)
    else:
        tried: dict[tuple[Any, ...], int] = {}  # a count per cell, not a list of its rows: fewer objects to keep
        attempt = []
        for cell in cells:
            tried[cell] = number = tried.get(cell, 0) + 1
            attempt.append(number)
        attempts = [counts[cell] for cell in cells]
    got.update(attempt=attempt, attempts=attempts,
               retried=[retried.get(run_id) for run_id in frames.values(got["run_id"])] if retried else
               [None] * len(cells))
    if all_runs:
        return got, params
    planned = set(map(tuple, json.loads("[" + ",".join(cell["key"] for cell in plan.get("cells") or []) + "]")))
    if len(counts) == len(cells) and (not planned or planned.issuperset(cells)):
        latest = list(range(len(cells)))  # each run the only one of a planned cell
    else:
        latest = [i for i, (number, cell) in enumerate(zip(attempt, cells))
                  if number == attempts[i] and (cell in planned or not planned)]
    created = frames.values(got["created_at"]) if "created_at" in got else None
    # by (created_at or "", run_id): the order the rows came in (SQL's ORDER BY created_at, run_id; text compares
    # alike in both) unless a row has no created_at and another an empty one (SQL puts every NULL first)
    if created is None or (None in created and "" in created):
        created = [value or "" for value in created] if created is not None else [""] * len(cells)
        latest.sort(key=list(zip(created, frames.values(got["run_id"]))).__getitem__)
    if latest == list(range(len(cells))):  # every run is its cell's latest, in order: the columns as they are
        return got, params
    return frames.take(got, latest), frames.take_parsed(params, latest)
