"""An experiment's grid: tasks × harnesses × presets × models × repeats expanded into cells, each the spec of one
run.

A cell's params name the harness only when the sweep chose one (``harnesses=`` or a task's own ``harness``), so
the cells, keys and fingerprints of a sweep that never names one stay as they were.

Which run options a sweep gives every run, and which a task's own row may set, is ``TaskSpec``'s to say
(``lifecycle.spec.options("sweep")`` and ``options("column")``); everything is checked here, before anything
runs or is stored.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

from .. import _config as config
from .._child import budgets
from .._child import harnesses as harness_modules
from .._child.isolation import plan as isolation_plan
from .._config import NbSubagentsError
from .._lifecycle import inputs as inputs_mod
from .._lifecycle.spec import check_cwd, check_isolation, options, unknown_names
from .._lifecycle.typed import schema_of

__all__ = ["expand", "cell_key", "cell_values", "sweep_options", "runnable"]

_RESERVED = {"preset", "model", "harness", "repeat", "task_id", "input"}  # params that name the grid, not a task's
# own columns
# experiment()'s own arguments, named when an option is unknown
_GRID = ("tasks", "harnesses", "presets", "models", "repeats", "concurrency", "scorers", "background", "show",
         "executor", "dask_client", "replace", "scorer_timeout", "retries", "max_failures", "max_total_cost")


def sweep_options() -> list[str]:
    """The run options ``experiment()`` gives every run of a sweep (``TaskSpec``'s ``sweep`` options)."""
    return [opt.name for opt in options("sweep")]


def _plain(value: Any) -> Any:
    """A JSON scalar for a param (numpy scalars, NaN and timestamps from a DataFrame row included)."""
    if hasattr(value, "item") and callable(value.item):
        try:
            value = value.item()
        except (ValueError, TypeError):
            pass
    if isinstance(value, float) and value != value:
        return None
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


def _task_rows(tasks: Any) -> list[dict[str, Any]]:
    """Tasks as dicts: strings, dicts with ``task``, or a DataFrame whose rows are tasks."""
    if hasattr(tasks, "columns") and hasattr(tasks, "to_dict"):  # a pandas DataFrame, without importing pandas
        if "task" not in tasks.columns:
            have = ", ".join(map(str, tasks.columns))
            raise NbSubagentsError(f"A DataFrame of tasks needs a 'task' column; it has {have}")
        rows = [{str(k): _plain(v) for k, v in row.items()} for row in tasks.to_dict(orient="records")]
    elif isinstance(tasks, (str, dict)):
        rows = [tasks if isinstance(tasks, dict) else {"task": tasks}]
    else:
        try:
            items = list(tasks)
        except TypeError:
            raise NbSubagentsError(f"tasks must be a list of strings or dicts, or a DataFrame, got {tasks!r}") from None
        rows = []
        for i, item in enumerate(items):
            if isinstance(item, str):
                rows.append({"task": item})
            elif isinstance(item, dict):
                rows.append(dict(item))
            else:
                raise NbSubagentsError(f"Task {i}: a task is a string or a dict with 'task', got {item!r}")
    if not rows:
        raise NbSubagentsError("An experiment needs at least one task: tasks=['...'] (strings, dicts or a DataFrame)")
    columns = [opt.name for opt in options("column")]  # run options a task's own row may set
    out = []
    seen: set[str] = set()
    for i, row in enumerate(rows):
        text = row.get("task")
        if not isinstance(text, str) or not text.strip():
            raise NbSubagentsError(f"Task {i}: 'task' must say what the sub-agent should do, got {text!r}")
        task_id = row.get("task_id", row.get("id"))
        task_id = str(task_id) if task_id is not None else f"task-{i + 1}"
        if task_id in seen:
            raise NbSubagentsError(f"Task {i}: task id {task_id!r} is used twice; give each task its own 'id'")
        seen.add(task_id)
        extras = {k: _plain(v) for k, v in row.items()
                  if k not in {"task", "task_id", "id", "preset", "model", "harness"} and k not in columns}
        out.append({"task": text, "task_id": task_id, "preset": row.get("preset"), "model": row.get("model"),
                    "harness": row.get("harness"), "spec": {k: row[k] for k in columns if row.get(k) is not None},
                    "extras": extras})
    return out


def _names(value: Any, what: str) -> list[Any]:
    if value is None:
        return [None]
    items = [value] if isinstance(value, str) else list(value)
    if not items or not all(isinstance(v, str) and v for v in items):
        raise NbSubagentsError(f"{what} must be a name or a non-empty list of names, got {value!r}")
    if len(set(items)) != len(items):
        raise NbSubagentsError(f"{what} lists a name twice: {items!r}")
    return items


def expand(tasks: Any, presets: Any = None, models: Any = None, repeats: int = 1,
           run_options: dict[str, Any] | None = None, harnesses: Any = None,
           inputs_at: Path | None = None) -> list[dict[str, Any]]:
    """The cells of the grid, each ``{"key", "spec", "params", "tags"}``; bad input raises before anything runs.
    ``harnesses``: the agent harnesses to sweep (``["pi", "claude-code", "codex"]``); None: a task's own
    ``harness``, else each preset's. ``inputs`` (a dict: every run's; a list of dicts: an axis, one cell each) and
    a task's own ``inputs`` are staged and stored in ``inputs_at`` (``_inputs``)."""
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise NbSubagentsError(f"repeats must be a whole number of at least 1, got {repeats!r}")
    options_given = dict(run_options or {})
    unknown_names(options_given, [*_GRID, *sweep_options()], "experiment()")
    tags = options_given.pop("tags", None) or {}
    axis = _input_axis(options_given.pop("inputs", None))
    if options_given.get("cwd") is not None:
        options_given["cwd"] = str(options_given["cwd"])
    given = _checked(options_given)
    if not isinstance(tags, dict):
        raise NbSubagentsError(f"tags must be a dict of names to values, got {tags!r}")
    rows = _task_rows(tasks)
    staging = _Staging()
    preset_list, model_list = _names(presets, "presets"), _names(models, "models")
    harness_list = _names(harnesses, "harnesses")
    cells = []
    for row in rows:
        clash = _RESERVED & set(row["extras"])
        if clash:
            raise NbSubagentsError(f"Task {row['task_id']!r}: column(s) {', '.join(sorted(clash))} name the grid; "
                                   "rename them")
        for harness in harness_list:
            harness = harness or row["harness"]
            if harness is not None and not harness_modules.known(harness):
                where = "harnesses" if harnesses is not None else f"Task {row['task_id']!r}: 'harness'"
                raise NbSubagentsError(f"{where}: unknown harness {harness!r}; the harnesses are "
                                       f"{', '.join(harness_modules.names())}")
            chosen = {"harness": harness} if harness else {}  # a sweep that names no harness: its presets' own
            for preset in preset_list:
                preset = preset or row["preset"]
                if not preset:
                    raise NbSubagentsError(f"Task {row['task_id']!r} has no preset: give presets=[...] or a 'preset' "
                                           "column")
                for model, given_inputs in ((m, i) for m in model_list for i in axis):
                    model = model or row["model"]
                    sent = staging.cell(row["task_id"], given_inputs, row["spec"].get("inputs"))
                    named = {"input": inputs_mod.label(sorted(sent, key=lambda s: s.name))} if sent else {}
                    for repeat in range(1, repeats + 1):
                        params = {"task_id": row["task_id"], **chosen, "preset": preset, "model": model,
                                  "repeat": repeat, **named, **row["extras"]}
                        name = " · ".join([row["task_id"], *chosen.values(), preset, model or "default",
                                           *named.values(), f"#{repeat}"])
                        spec = {"preset": preset, "task": row["task"], "model": model, **given,
                                **{k: v for k, v in row["spec"].items() if k != "inputs"}, **chosen, "name": name,
                                **({"inputs": sent} if sent else {})}
                        cells.append({"key": cell_key(params), "spec": spec, "params": params,
                                      "tags": {k: _plain(v) for k, v in tags.items()}})
    _check_isolation(cells)
    for cell in [c for c in cells if c["spec"].get("inputs")]:  # all checked: stored, and named in the plan
        if inputs_at is None:
            raise NbSubagentsError("an experiment's inputs need a folder to be kept in")
        cell["spec"]["inputs"] = inputs_mod.save(inputs_at, cell["spec"]["inputs"])
    return cells


def _input_axis(given: Any) -> list[dict[str, Any] | None]:
    """The sweep's ``inputs``: one dict for every run, or a list of dicts, one cell each (an axis)."""
    if given is None or isinstance(given, Mapping):
        return [dict(given) if given else None]
    if isinstance(given, (list, tuple)) and given and all(isinstance(g, Mapping) for g in given):
        return [dict(g) for g in given]
    raise NbSubagentsError(f"experiment(inputs=...) is a dict of names to values (every run's), or a list of such "
                           f"dicts (an axis: one cell each); got {type(given).__name__}")


class _Staging:
    """The inputs of each cell staged (checked against the settings' limits, hashed), each value once."""

    def __init__(self) -> None:
        self.settings = config.current()
        self.done: dict[tuple[str, int], inputs_mod.Staged] = {}

    def cell(self, task_id: str, sweep: dict[str, Any] | None, own: Any) -> list[inputs_mod.Staged]:
        if own is not None and not isinstance(own, Mapping):
            raise NbSubagentsError(f"Task {task_id!r}: 'inputs' must be a dict of names to values, such as "
                                   f"{{'df': df}}; got {type(own).__name__}")
        sent = {**(sweep or {}), **(own or {})}  # a task's own over the sweep's, by name
        for name, value in sent.items():
            if (name, id(value)) not in self.done:
                self.done[(name, id(value))] = inputs_mod.stage(name, value,
                                                                max_bytes=int(self.settings.input_max_mb * 1e6))
        return inputs_mod.stage_all({n: self.done[(n, id(v))] for n, v in sent.items()},
                                    input_max_mb=self.settings.input_max_mb,
                                    inputs_max_mb=self.settings.inputs_max_mb)


def runnable(spec: dict[str, Any]) -> dict[str, Any]:
    """A cell's spec as a run takes it: its stored inputs read back (``inputs.load``)."""
    return {**spec, "inputs": inputs_mod.load(spec["inputs"])} if spec.get("inputs") else spec


def _checked(given: dict[str, Any]) -> dict[str, Any]:
    """Isolation, budgets and output schema checked once for the whole sweep (not once per failed run), in the
    form a stored plan keeps (a pydantic model, dataclass or TypedDict becomes its JSON Schema); unset options are
    left out."""
    out = {k: v for k, v in given.items() if v is not None}
    budgets.check({k: out[k] for k in budgets.FIELDS if k in out})
    check_isolation(out.get("isolation"), out.get("keep_worktree"))
    if "output_schema" in out:
        out["output_schema"] = schema_of(out["output_schema"])[0]
    return out


def _check_isolation(cells: list[dict[str, Any]]) -> None:
    """An isolated sweep whose folder cannot be isolated (a repository without a commit, a large non-git
    folder) is refused before anything runs, once per folder, instead of failing every run."""
    folders = {c["spec"].get("cwd") for c in cells if c["spec"].get("isolation") == "worktree"}
    for folder in folders:
        cwd = check_cwd(folder)
        isolation_plan(cwd, max_copy_mb=config.current(cwd).isolation_max_copy_mb)


def cell_key(params: dict[str, Any]) -> str:
    """A cell's identity: task, preset, model, repeat, its harness when the sweep names one, its inputs (names and
    hashes) when it has any."""
    return json.dumps(cell_values(params))


def cell_values(params: dict[str, Any]) -> list[Any]:
    """What ``cell_key`` is made of (the harness and inputs only when a cell has them: the keys of earlier plans
    stay)."""
    harness = [params["harness"]] if params.get("harness") is not None else []
    given = [params["input"]] if params.get("input") is not None else []  # "df:1a2b3c4d": never a harness's name
    return [params.get("task_id"), params.get("preset"), params.get("model"), params.get("repeat"), *harness, *given]
