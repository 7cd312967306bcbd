"""Delegation experiments: sweeps of tasks × presets × models × repeats, run, scored and compared as data.

``experiment(name, tasks=..., presets=..., models=..., repeats=...)`` expands the grid into cells, stores
the plan in ``<root>/.pi/subagents/experiments/<name>.json`` and runs the cells through the same machinery
as ``run_parallel`` (one live group panel, the concurrency limit). Each run's ``meta.json`` records
``experiment``, ``params`` (preset, model, task id, repeat and the task's extra columns) and ``tags``; its
scores live in ``scores.json``; the registry indexes all of it (``registry.rebuild()`` restores it).

Calling ``experiment()`` again with the same name, or ``Experiment.resume()``, resumes: a cell whose run
ended is kept, one whose run is still live is waited for, and the rest (never started, or cut short when
the launching process died) are started. The comparison side (``frame``/``compare``/``plot``/``to_mlflow``)
lives in ``nbsubagents.sweeps.views``; pandas, matplotlib and mlflow are imported only there.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from ..child.artifacts import STATUSES, TERMINAL, atomic_write_json, now_iso, read_json
from ..config import NbSubagentsError, project_root, settings

if TYPE_CHECKING:
    from ..lifecycle.handle import Run
    from .views import Comparison

__all__ = ["experiment", "experiments", "get_experiment", "Experiment"]

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")
_SPEC_KEYS = {"cwd", "timeout", "files"}       # per-task run options a task dict or column may set
# Options every run of the sweep gets: isolation and budgets as run() takes them (issue 14), and tags.
_LIMITS = ("isolation", "keep_worktree", "max_turns", "max_tool_calls", "max_tokens", "max_cost", "output_schema")
_RUN_OPTIONS = {"cwd", "timeout", "files", "tags", *_LIMITS}
_RESERVED = {"preset", "model", "repeat", "task_id"}


def _check_name(name: Any) -> str:
    from .scorers import checked_name
    return checked_name(name, _NAME, "An experiment name must be 1-100 letters, digits, '_', '.' or '-' (starting "
                                     "with a letter or digit)")


def plans_dir(root: Path) -> Path:
    from ..child.artifacts import runs_dir
    return runs_dir(root).parent / "experiments"


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
        extras = {k: _plain(v) for k, v in row.items() if k not in {"task", "task_id", "id", "preset", "model"}
                  and k not in _SPEC_KEYS}
        out.append({"task": text, "task_id": task_id, "preset": row.get("preset"), "model": row.get("model"),
                    "spec": {k: row[k] for k in _SPEC_KEYS if row.get(k) is not None}, "extras": extras})
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
           run_options: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The cells of the grid, each ``{"key", "spec", "params"}``; bad input raises before anything runs."""
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise NbSubagentsError(f"repeats must be a whole number of at least 1, got {repeats!r}")
    options = dict(run_options or {})
    unknown = set(options) - _RUN_OPTIONS
    if unknown:
        raise NbSubagentsError(f"experiment(): unknown option(s) {', '.join(sorted(unknown))}; it takes tasks, "
                               f"presets, models, repeats, concurrency, scorers, background, show and "
                               f"{', '.join(sorted(_RUN_OPTIONS))}")
    tags = options.pop("tags", None) or {}
    if options.get("cwd") is not None:
        options["cwd"] = str(options["cwd"])
    options = _checked_limits(options)
    if not isinstance(tags, dict):
        raise NbSubagentsError(f"tags must be a dict of names to values, got {tags!r}")
    rows = _task_rows(tasks)
    preset_list, model_list = _names(presets, "presets"), _names(models, "models")
    cells = []
    for row in rows:
        clash = _RESERVED & set(row["extras"])
        if clash:
            raise NbSubagentsError(f"Task {row['task_id']!r}: column(s) {', '.join(sorted(clash))} name the grid; "
                                   "rename them")
        for preset in preset_list:
            preset = preset or row["preset"]
            if not preset:
                raise NbSubagentsError(f"Task {row['task_id']!r} has no preset: give presets=[...] or a 'preset' "
                                       "column")
            for model in model_list:
                model = model or row["model"]
                for repeat in range(1, repeats + 1):
                    params = {"task_id": row["task_id"], "preset": preset, "model": model, "repeat": repeat,
                              **row["extras"]}
                    spec = {"preset": preset, "task": row["task"], "model": model, **options, **row["spec"],
                            "name": f"{row['task_id']} · {preset} · {model or 'default'} · #{repeat}"}
                    cells.append({"key": cell_key(params), "spec": spec, "params": params,
                                  "tags": {k: _plain(v) for k, v in tags.items()}})
    _check_isolation(cells)
    return cells


def _checked_limits(options: dict[str, Any]) -> dict[str, Any]:
    """Isolation, budgets and output schema checked once for the whole sweep (not once per failed run), in the
    form a stored plan keeps (a pydantic model becomes its JSON Schema); unset ones are left out."""
    from ..child import budgets
    from ..lifecycle.spec import check_isolation

    out = {k: v for k, v in options.items() if k not in _LIMITS or v is not None}
    budgets.check({k: out[k] for k in budgets.FIELDS if k in out})
    check_isolation(out.get("isolation"), out.get("keep_worktree"))
    if "output_schema" in out:
        from ..child.output_schema import normalize
        out["output_schema"] = normalize(out["output_schema"])
    return out


def _check_isolation(cells: list[dict[str, Any]]) -> None:
    """An isolated sweep whose folder cannot be isolated (a repository without a commit, a large non-git
    folder) is refused before anything runs, once per folder, instead of failing every run."""
    from .. import config
    from ..child.isolation import plan
    from ..lifecycle.spec import check_cwd

    folders = {c["spec"].get("cwd") for c in cells if c["spec"].get("isolation") == "worktree"}
    for folder in folders:
        cwd = check_cwd(folder)
        plan(cwd, max_copy_mb=config.current(cwd).isolation_max_copy_mb)


def cell_key(params: dict[str, Any]) -> str:
    return json.dumps([params.get("task_id"), params.get("preset"), params.get("model"), params.get("repeat")])


def _interrupted(row: dict[str, Any]) -> bool:
    """A run cut short by its launcher's death, not by itself: resume starts its cell again."""
    from ..lifecycle.settle import LOST, NOT_STARTED
    message = row.get("error_message") or ""
    return message.startswith(NOT_STARTED) or message.startswith(LOST)


def _settle(root: Path, row: dict[str, Any]) -> dict[str, Any]:
    """A run of this experiment that the reconcile left unfinished: one whose supervisor is starting gets until
    it shows or its grace ends (``reconcile.check`` then settles it); a live one, or one queued by another live
    process, is left (it is waited for); one this very process queued but no call of it drives any more never
    starts: recorded aborted, so its cell starts again."""
    from .. import registry
    from ..child.artifacts import RunPaths
    from ..lifecycle import reconcile, settle

    run_dir = Path(row["run_dir"])
    deadline = time.monotonic() + reconcile.STARTING_GRACE + 5
    while (verdict := reconcile.check(run_dir, row)) == "starting" and time.monotonic() < deadline:
        time.sleep(0.1)
    meta = read_json(run_dir / "meta.json") or {}
    if (verdict == "owned" and (meta.get("launcher") or {}).get("pid") == os.getpid()
            and not (run_dir / "supervisor.log").exists()):
        settle.cancelled_before_start(RunPaths(run_dir), meta, "the call that queued it ended")
        registry.record(run_dir)
    got = registry.fetch(registry.db_path(root), "SELECT * FROM runs WHERE run_id = ?", (row["run_id"],))
    return got[0] if got else row


class Experiment:
    """An experiment of this project: its plan, its runs, and the views of them."""

    def __init__(self, name: str, root: str | Path | None = None) -> None:
        self.name = _check_name(name)
        self.root = Path(root).resolve() if root is not None else project_root()

    # -- the plan ---------------------------------------------------------------------------
    @property
    def plan_path(self) -> Path:
        return plans_dir(self.root) / f"{self.name}.json"

    @property
    def plan(self) -> dict[str, Any]:
        return read_json(self.plan_path) or {}

    def _save_plan(self, cells: list[dict[str, Any]], scorers: Sequence[Any], concurrency: int,
                   executor: dict[str, Any] | None = None) -> None:
        from .scorers import scorers_spec
        plan = self.plan
        self.plan_path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(self.plan_path, {
            "name": self.name, "createdAt": plan.get("createdAt") or now_iso(), "updatedAt": now_iso(),
            "concurrency": concurrency, "checks": scorers_spec(scorers), "cells": cells, **(executor or {})})

    # -- runs -------------------------------------------------------------------------------
    def rows(self) -> list[dict[str, Any]]:
        """The registry rows of this experiment's runs, oldest first (synced with the run directories)."""
        from .. import registry
        db = registry.db_path(self.root)
        if not db.exists() and not db.parent.joinpath("runs").is_dir():
            return []
        registry.ensure_loaded(db)
        return registry.fetch(db, "SELECT * FROM runs WHERE experiment = ? ORDER BY created_at, run_id",
                               (self.name,))

    def current_rows(self, *, all_runs: bool = False) -> list[dict[str, Any]]:
        """One row per cell: its latest run (``all_runs=True``: every run, superseded ones too)."""
        rows = self.rows()
        if all_runs:
            return rows
        latest: dict[str, dict[str, Any]] = {}
        for row in rows:
            latest[cell_key(json.loads(row.get("params") or "{}"))] = row
        return sorted(latest.values(), key=lambda r: (r.get("created_at") or "", r["run_id"]))

    def runs(self) -> list[Run]:
        from ..lifecycle.handle import Run
        return [Run(r["run_dir"]) for r in self.current_rows()]

    # -- running ----------------------------------------------------------------------------
    def _execute(self, scorers: Sequence[Any], concurrency: int, show: bool, dask_client: Any = None) -> list[Run]:
        from .. import registry
        from ..lifecycle import launch, reconcile
        from ..lifecycle.drive import drive
        from ..lifecycle.handle import Run
        from ..lifecycle.prepare import build_runs
        from ..ui.display import renderer_for
        from .scorers import score

        cells = self.plan.get("cells") or []
        reconcile.reconcile(self.root, reattach=False)  # settles runs whose launcher died
        by_key = {cell_key(json.loads(r.get("params") or "{}")): r for r in self.rows()}
        kept: list[Run] = []
        live: list[Run] = []
        todo: list[dict[str, Any]] = []
        for key, row in list(by_key.items()):
            if row.get("status") not in TERMINAL:
                by_key[key] = _settle(self.root, row)
        for cell in cells:
            row = by_key.get(cell["key"])
            if row is None or (row.get("status") in TERMINAL and _interrupted(row)):
                todo.append({**cell["spec"], "experiment": self.name, "params": cell["params"],
                             "tags": cell.get("tags")})
            elif row.get("status") in TERMINAL:
                kept.append(Run(row["run_dir"]))
            else:
                live.append(Run(row["run_dir"]))
        launch.check_runner()
        client = None
        if todo:
            if self.plan.get("executor") == "dask" and dask_client is None and self.plan.get("daskScheduler"):
                from ..config import configure
                if not settings.dask_scheduler:  # the detached driver of a background sweep
                    configure(dask_scheduler=self.plan["daskScheduler"])
            client = launch.executor_client(self.plan.get("executor"), dask_client, self.root)
        built = build_runs(todo, mode="parallel", runner="dask" if client else None) if todo else []
        if client is not None:
            from ..lifecycle.dask_launcher import bind
            bind(built, client)
        if built:
            reconcile.first_use_of(built)
        renderer = _Scoring(renderer_for(show), scorers)
        for run in kept:
            if scorers and not (run.dir / "scores.json").exists():
                score(run, scorers)
        drive(built, concurrency=concurrency, renderer=renderer)
        for run in live:  # runs of a launcher that died (or of another process): wait, record, score
            run.wait()
            registry.note(run)  # its launcher may be gone: the registry learns the end here
            if scorers:
                score(run, scorers)
        return self.runs()

    def resume(self, *, scorers: Iterable[Any] | None = None, concurrency: int | None = None,
               show: bool = True, background: bool = False, dask_client: Any = None) -> Experiment:
        """Start the cells whose run has not ended (or never started); ended runs are kept.

        The plan's shell checks score the new runs; Python scorers must be given again (``scorers=``).
        """
        from .scorers import as_scorer, load_scorers
        plan = self.plan
        if not plan.get("cells"):
            raise NbSubagentsError(f"Experiment {self.name!r} has no stored plan in {self.plan_path}: start it with "
                                   "nbsubagents.experiment(name, tasks=...)")
        chosen = [as_scorer(s) for s in scorers] if scorers is not None else load_scorers(plan.get("checks"))
        limit = _concurrency(concurrency if concurrency is not None else plan.get("concurrency"))
        if background:
            return self._background(chosen, limit)
        self._execute(chosen, limit, show, dask_client)
        return self

    def _background(self, scorers: Sequence[Any], concurrency: int) -> Experiment:
        from ..child.procs import process_start_ticks
        from .scorers import Check
        python = [s for s in scorers if not isinstance(s, Check)]
        if python:
            raise NbSubagentsError("A background experiment can only use check(...) scorers (a separate process "
                                   f"runs it); score with {', '.join(map(repr, python))} after it ends with "
                                   "experiment.rescore(...)")
        log = plans_dir(self.root) / f"{self.name}.log"
        with open(log, "ab") as out:
            proc = subprocess.Popen([sys.executable, "-m", "nbsubagents.sweeps.experiment", str(self.root), self.name,
                                     str(concurrency)], stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                    start_new_session=True, cwd=self.root)
        atomic_write_json(plans_dir(self.root) / f"{self.name}.driver.json",
                          {"pid": proc.pid, "startTicks": process_start_ticks(proc.pid), "startedAt": now_iso()})
        self._proc = proc
        return self

    @property
    def running(self) -> bool:
        """True while a background driver of this experiment is alive."""
        from ..child.procs import alive
        proc = getattr(self, "_proc", None)
        if proc is not None:
            return proc.poll() is None
        info = read_json(plans_dir(self.root) / f"{self.name}.driver.json") or {}
        return alive(info.get("pid"), info.get("startTicks"))

    def wait(self, timeout: float | None = None) -> Experiment:
        """Block until a background sweep's driver ended (or ``timeout`` seconds passed)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.running and (deadline is None or time.monotonic() < deadline):
            time.sleep(0.2)
        return self

    def rescore(self, *scorers: Any) -> Experiment:
        """Score the ended runs again with ``scorers`` (the plan's checks when none given); nothing is rerun."""
        from .scorers import as_scorer, load_scorers, score
        chosen = [as_scorer(s) for s in scorers] if scorers else load_scorers(self.plan.get("checks"))
        if not chosen:
            raise NbSubagentsError("rescore() needs a scorer: a function (run) -> number | bool | dict or "
                                   "check('command')")
        for run in self.runs():
            if run.done:
                score(run, chosen)
        return self

    # -- views (pandas and friends only here) -----------------------------------------------
    def frame(self, *, all_runs: bool = False) -> Any:
        """One row per run: ``params.*``, ``metrics.*``, ``scores.*``, ``tags.*``, status, stop reason."""
        from .views import frame
        return frame(self.current_rows(all_runs=all_runs))

    to_frame = frame

    def compare(self, by: str | Sequence[str] = ("preset", "model"), baseline: Any = None) -> Comparison:
        """Per cell: n, success rate, mean/std/n of every metric and score, and the difference to ``baseline``."""
        from .views import compare
        return compare(self.frame(), by=by, baseline=baseline, title=self.name)

    def plot(self, *, x: str = "cost_usd", y: str | None = None, by: str | Sequence[str] = ("preset", "model")) -> Any:
        """A matplotlib Figure: one point per run (``x`` a metric, ``y`` a score), coloured by cell."""
        from .views import plot
        return plot(self.frame(), x=x, y=y, by=by, title=self.name)

    def to_mlflow(self, tracking_uri: str | None = None, *, artifact_location: str | None = None) -> str:
        """Log each ended run as an MLflow run (params, metrics, scores as ``score.*`` metrics, tags, the run
        directory as artifacts) under an MLflow experiment of this name; returns its MLflow experiment id.

        ``tracking_uri`` as MLflow takes it (``sqlite:///mlflow.db``; None: MLflow's default); runs exported
        before are skipped. Needs ``pip install 'nbsubagents[mlflow]'``."""
        from .views import to_mlflow
        return to_mlflow(self, tracking_uri, artifact_location)

    def counts(self) -> dict[str, int]:
        rows = self.current_rows()
        out = dict.fromkeys(STATUSES, 0)
        for row in rows:
            out[row.get("status") or "queued"] = out.get(row.get("status") or "queued", 0) + 1
        out["planned"] = len(self.plan.get("cells") or [])
        return out

    def __repr__(self) -> str:
        c = self.counts()
        return (f"<Experiment {self.name}: {c['planned']} planned · {c['completed']} completed · {c['failed']} "
                f"failed · {c['aborted']} aborted · {c['running'] + c['queued']} active>")

    def _repr_html_(self) -> str:
        import html
        try:
            table = self.compare()._repr_html_() if self.current_rows() else ""
        except NbSubagentsError:
            table = ""
        return f"<div><b>{html.escape(repr(self))}</b>{table}</div>"


class _Scoring:
    """A renderer that scores each run as it ends, before its panel shows the end (with the scores)."""

    def __init__(self, inner: Any, scorers: Sequence[Any]) -> None:
        self.inner, self.scorers = inner, scorers

    def start(self, runs: list[Run]) -> None:
        self.inner.start(runs)

    def event(self, run: Run, event: dict[str, Any], line: Any) -> None:
        self.inner.event(run, event, line)

    def end(self, run: Run) -> None:
        if self.scorers:
            from .scorers import score
            score(run, self.scorers)
        self.inner.end(run)

    def close(self) -> None:
        self.inner.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def _concurrency(value: Any) -> int:
    limit = settings.concurrency if value is None else value
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise NbSubagentsError(f"concurrency must be a whole number of at least 1, got {value!r}")
    return limit


def experiment(name: str, *, tasks: Any, presets: Any = None, models: Any = None, repeats: int = 1,
               concurrency: int | None = None, isolation: str | None = None, scorers: Iterable[Any] = (),
               background: bool = False, show: bool = True, executor: str | None = None, dask_client: Any = None,
               **run_options: Any) -> Experiment:
    """Run the sweep tasks × presets × models × repeats as one experiment and return it.

    ``tasks`` are strings, dicts (``task``, optional ``id``, ``preset``, ``model``, ``cwd``, ``timeout``,
    ``files``; other keys become params) or a DataFrame whose rows are tasks. ``scorers`` are functions
    ``(run) -> number | bool | dict`` or ``check("command")``. ``isolation="worktree"`` gives every run its
    own worktree (checks then score each run's own changes, in a scratch workspace removed after them).
    ``run_options``: ``cwd``, ``timeout``, ``files``, ``tags``, ``keep_worktree``, the budgets (``max_turns``,
    ``max_tool_calls``, ``max_tokens``, ``max_cost``) and ``output_schema``, for every run. Foreground by
    default (one live panel; no limit on the number of runs, at most ``concurrency`` at once);
    ``background=True`` hands the sweep to a detached process (``.wait()``). A name used before resumes:
    ended runs are kept, the rest start. ``executor="dask"`` (with ``dask_client=``, or the settings) runs the
    sweep on a Dask cluster; its workers' resources bound it, and ``concurrency``, when given, caps it.
    """
    from .scorers import as_scorer

    exp = Experiment(_check_name(name), project_root(Path(run_options["cwd"])) if run_options.get("cwd") else None)
    chosen = [as_scorer(s) for s in scorers]
    cells = expand(tasks, presets, models, repeats, {**run_options, "isolation": isolation})
    chosen_executor = settings.executor if executor is None else executor
    on_dask: dict[str, Any] = {}
    if chosen_executor == "dask":
        from ..lifecycle.launch import executor_client
        client = executor_client("dask", dask_client, run_options.get("cwd"))
        on_dask = {"executor": "dask", "daskScheduler": client.scheduler.address}
        dask_client = client
    elif chosen_executor != "local" or dask_client is not None:
        from ..lifecycle.launch import executor_client
        executor_client(chosen_executor, dask_client)  # the error that names what is wrong
    limit = _concurrency(concurrency if concurrency is not None or not on_dask else min(64, max(1, len(cells))))
    exp._save_plan(cells, chosen, limit, on_dask)
    return exp.resume(scorers=chosen, concurrency=limit, show=show, background=background, dask_client=dask_client)


def get_experiment(name: str, root: str | Path | None = None) -> Experiment:
    """The experiment of this name in this project (its plan or runs must exist)."""
    exp = Experiment(name, root)
    if not exp.plan_path.exists() and not exp.rows():
        known = [e["name"] for e in _listing(exp.root)]
        raise NbSubagentsError(f"No experiment {name!r} in {exp.root}: "
                               + (f"known ones are {', '.join(known)}" if known else "none has been run yet"))
    return exp


def _listing(root: Path) -> list[dict[str, Any]]:
    from .. import registry
    names: dict[str, dict[str, Any]] = {}
    folder = plans_dir(root)
    if folder.is_dir():
        for path in sorted(folder.glob("*.json")):
            if not path.name.endswith(".driver.json"):
                plan = read_json(path) or {}
                names[path.stem] = {"name": path.stem, "planned": len(plan.get("cells") or []),
                                    "created_at": plan.get("createdAt")}
    db = registry.db_path(root)
    if db.exists():
        registry.ensure_loaded(db)
        for row in registry.fetch(db, "SELECT experiment, status, COUNT(*) AS n FROM runs WHERE experiment IS NOT "
                                       "NULL GROUP BY experiment, status"):
            entry = names.setdefault(row["experiment"], {"name": row["experiment"], "planned": None,
                                                         "created_at": None})
            entry[row["status"]] = entry.get(row["status"], 0) + row["n"]
            entry["runs"] = entry.get("runs", 0) + row["n"]
    return sorted(names.values(), key=lambda e: (e.get("created_at") or "", e["name"]))


def experiments(root: str | Path | None = None) -> Any:
    """This project's experiments as a DataFrame: name, planned cells, runs and their statuses."""
    import pandas as pd
    base = Path(root).resolve() if root is not None else project_root()
    columns = ["name", "planned", "runs", "completed", "failed", "aborted", "running", "queued", "created_at"]
    frame = pd.DataFrame(_listing(base), columns=columns)
    for col in columns[2:8]:
        frame[col] = frame[col].fillna(0).astype(int)
    return frame


def _main(argv: list[str]) -> int:
    """The detached driver of a background sweep: ``python -m nbsubagents.sweeps.experiment ROOT NAME CONCURRENCY``."""
    root, name, concurrency = argv[0], argv[1], int(argv[2])
    os.chdir(root)
    exp = Experiment(name, root)
    exp.resume(concurrency=concurrency, show=False)
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
