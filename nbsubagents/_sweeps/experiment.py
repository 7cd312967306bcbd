"""Delegation experiments: sweeps of tasks × presets × models × repeats, run, scored and compared as data.

``experiment(name, tasks=..., presets=..., models=..., repeats=...)`` expands the grid into cells
(``sweeps.grid``), stores the plan in ``<root>/.pi/subagents/experiments/<name>.json`` (``sweeps.plan``) and
launches the cells the way ``run_parallel`` does (``lifecycle.batch``, then ``drive.drive``: one live group
panel, the concurrency limit). Each run's ``meta.json`` records ``experiment``, ``params`` (preset, model,
task id, repeat and the task's extra columns) and ``tags``; its scores live in ``scores.json``; the registry
indexes all of it (``registry.rebuild()`` restores it).

Calling ``experiment()`` again with the same name and the same definition, or ``Experiment.resume()``,
resumes: a cell whose run ended is kept (a person's cancel too: ``rerun_cancelled=True`` starts it again), one
whose run is still live is waited for, and the rest (never started, or cut short when the launching process died:
``reconcile`` settles those, ``outcomes.cut_short``) are started. A changed
definition (tasks, presets, models, repeats, run options, tags, scorers: ``sweeps.plan.fingerprint``) under
an old name is refused, naming what changed; ``replace=True`` starts the experiment afresh, its earlier runs
kept on disk but out of it. One process at a time runs an experiment (``sweeps.plan.locked``): a second
caller is refused, naming the process that runs it. ``retries``, ``max_failures`` and ``max_total_cost`` (the
stop rules, ``sweeps.spend``) try again a run the infrastructure cut short and stop a broken or costly sweep; a
cell's latest run is its row, ``attempt`` says which try it is. ``background=True`` hands the sweep
to a detached driver (``sweeps.driver``; this module is its program). The comparison side
(``frame``/``compare``/``plot``) lives in ``nbsubagents._sweeps.views``, ``to_mlflow`` in ``sweeps.export``; pandas,
matplotlib and mlflow are imported only there.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Never, Sequence

from .. import _registry as registry
from .._registry.query import arrow_columns, csv_select
from .._registry.store import connect, fetch_columns
from .._child.artifacts import STATUSES, TERMINAL, atomic_write_json, read_json
from .._config import NbSubagentsError, configure, project_arg, project_root, current
from .._lifecycle import batch, launch, reconcile
from .._lifecycle.edge import edge
from .._lifecycle.drive import drive
from .._lifecycle.handle import Run
from .._lifecycle.spec import call_options
from .._templates import Html, part
from . import attempts, driver, export, frames, plots, views
from .grid import cell_key, expand, runnable
from .outcomes import cancelled_by_person, cut_short, retry_reason
from .plan import (check_name, differences, fingerprint, listing, locked, plan_path, plans_dir, read_plan,
                   record_attempt, replaced_runs, save_plan)
from .report import ExperimentReport, report
from .scorers import SCORER_TIMEOUT, Check, as_scorer, check_timeout, load_scorers, score, unique_names
from .progress import sweep_renderer
from .spend import Guard, Limits, estimate, stopped_reason, usd

if TYPE_CHECKING:
    import subprocess

    import pandas
    from matplotlib.figure import Figure

    from ._views import Comparison

__all__ = ["experiment", "experiments", "get_experiment", "Experiment"]


def _axes(plan: dict[str, Any]) -> tuple[str, ...]:
    """``Experiment.axes()`` of this plan (``input`` too when its cells' inputs differ)."""
    named = any("harness" in (cell.get("params") or {}) for cell in plan.get("cells") or [])
    inputs = ("input",) if len({str((c.get("params") or {}).get("input")) for c in plan.get("cells") or []}) > 1 else ()
    return ("harness", "preset", "model", *inputs) if named else ("preset", "model", *inputs)


class Experiment:
    """An experiment of this project: its plan, its runs, and the views of them."""

    def __init__(self, name: str, root: str | Path | None = None) -> None:
        self.name = check_name(name)
        self.root = Path(root).resolve() if root is not None else project_root()
        self._proc: subprocess.Popen | None = None  # the background driver this process started

    # -- the plan ---------------------------------------------------------------------------
    @property
    def plan_path(self) -> Path:
        return plan_path(self.root, self.name)

    @property
    def plan(self) -> dict[str, Any]:
        return read_plan(self.root, self.name)

    # -- runs -------------------------------------------------------------------------------
    def rows(self, columns: Sequence[str] = ()) -> list[dict[str, Any]]:
        """The registry rows of this experiment's runs, oldest first (synced with the run directories); runs
        of a plan replaced by ``experiment(..., replace=True)`` are no longer the experiment's. ``columns``:
        only these registry columns (and ``run_id``), as ``frame()`` reads; all by default."""
        query = self._query(columns)
        if query is None:
            return []
        rows = registry.fetch(*query)
        gone = replaced_runs(self.plan)
        return [r for r in rows if r["run_id"] not in gone] if gone else rows

    def _query(self, columns: Sequence[str], select: str | None = None) -> tuple[Path, str, tuple[str]] | None:
        """The registry (synced) and the query of ``rows()``; None when this project has no runs at all.
        ``select``: what the query selects instead of ``columns``."""
        db = registry.db_path(self.root)
        if not db.exists() and not db.parent.joinpath("runs").is_dir():
            return None
        registry.ensure_loaded(db)
        selected = select or (", ".join(dict.fromkeys(["run_id", "params", *columns])) if columns else "*")
        return db, f"SELECT {selected} FROM runs WHERE experiment = ? ORDER BY created_at, run_id", (self.name,)

    def _columns(self, columns: Sequence[str], plan: dict[str, Any], *, arrow: bool = False) -> dict[str, Any]:
        """``rows(columns)`` as columns: each one's values in the rows' order (what a frame is built from), as
        lists or (``arrow``, while every value is of its column's type) as pyarrow arrays; ``plan``: the
        experiment's (read once by the caller: a big sweep's plan is a large file)."""
        names = list(dict.fromkeys(["run_id", "params", *columns]))
        got = None
        if arrow and (query := self._query(names, csv_select(dict.fromkeys(names), frames.NUMBERS))):
            db, sql, args = query
            with connect(db) as conn:
                got = arrow_columns(conn.execute(sql, args), names, frames.NUMBERS)
        if got is None:
            query = self._query(columns)
            if query is None:
                return {name: [] for name in names}
            got = fetch_columns(*query)
        gone = replaced_runs(plan)
        if gone:
            got = frames.take(got, [i for i, run_id in enumerate(frames.values(got["run_id"])) if run_id not in gone])
        return got

    def current_rows(self, *, all_runs: bool = False, columns: Sequence[str] = ()) -> list[dict[str, Any]]:
        """One row per cell of the plan: its latest run (``all_runs=True``: every run, superseded ones too).
        Each row also says which try of its cell it is: ``attempt`` (1, 2, ...), ``attempts`` (its cell's runs so
        far) and ``retried`` (why it was tried again, for a run a retry superseded; else None)."""
        plan = self.plan
        got, _ = attempts.current(self._columns(columns, plan), plan, all_runs)
        return [dict(zip(got, values)) for values in zip(*got.values())]

    def runs(self) -> list[Run]:
        return [Run(r["run_dir"]) for r in self.current_rows()]

    # -- running ----------------------------------------------------------------------------
    def _settled_rows(self) -> dict[str, dict[str, Any]]:
        """Each cell's latest row after ``reconcile`` settled what it could: runs whose launcher died, and
        (``settle_undriven``) runs this process queued that no call drives any more."""
        reconcile.reconcile(self.root, reattach=False)
        by_key = {cell_key(json.loads(r.get("params") or "{}")): r for r in self.rows()}
        for key, row in list(by_key.items()):
            if row.get("status") not in TERMINAL:
                reconcile.settle_undriven(Path(row["run_dir"]), row)
                got = registry.fetch(registry.db_path(self.root), "SELECT * FROM runs WHERE run_id = ?",
                                     (row["run_id"],))
                by_key[key] = got[0] if got else row
        return by_key

    def _execute(self, scorers: Sequence[Any], concurrency: int, show: bool, dask_client: Any = None,
                 scorer_timeout: float = SCORER_TIMEOUT, limits: Limits = Limits()) -> list[Run]:
        """Start the cells to run, then (``limits.retries``) start again, round after round, the cells whose run
        the infrastructure cut short; ``limits``' guard stops new starts once a limit is reached."""
        by_key = self._settled_rows()
        cells = {cell["key"]: cell for cell in self.plan.get("cells") or []}
        superseded = {a["runId"] for cell in cells.values() for a in cell.get("attempts") or []}
        kept: list[Run] = []
        live: list[Run] = []
        todo: list[str] = []
        tries: dict[str, int] = {}  # the retries each cell had in this call
        retrying: dict[str, tuple[str, str]] = {}  # cell -> the run a retry supersedes, and why
        for key in cells:
            row = by_key.get(key)
            ended = row is not None and row.get("status") in TERMINAL
            if row is None or (ended and (cut_short(row) or stopped_reason(row) or row["run_id"] in superseded)):
                todo.append(key)
            elif ended and limits.retries and retry_reason(row):
                retrying[key] = (row["run_id"], str(retry_reason(row)))
                tries[key] = 1
                todo.append(key)
            elif ended:
                kept.append(Run(row["run_dir"]))
            else:
                live.append(Run(row["run_dir"]))
        launch.check_runner()
        for run in kept:
            if scorers and not (run.dir / "scores.json").exists():
                score(run, scorers, timeout=scorer_timeout)
        guard = Guard(None, limits, len(cells), self.rows())
        if show and todo:
            guess = estimate(self.root, [cells[k]["spec"] for k in todo], limits, guard.spent)
            if guess.known or limits.max_total_cost is not None:
                edge.show(guess)
        first = True
        while first or todo:
            if guard.check():  # reached before this round: a cell that has a run keeps it (it says why)
                todo = [k for k in todo if k not in by_key]
            for key in todo:
                if key in retrying:
                    record_attempt(self.root, self.name, key, *retrying.pop(key))
            built = self._build(todo, cells, dask_client) if todo else []
            guard.inner = _Scoring(sweep_renderer(show, title=f"Experiment {self.name}", concurrency=concurrency),
                                   scorers, scorer_timeout)
            drive(built, concurrency=concurrency, renderer=guard)
            if first:
                for run in live:  # runs of a launcher that died (or of another process): wait, record, score
                    run.wait()
                    registry.note(run)  # its launcher may be gone: the registry learns the end here
                    if scorers:
                        score(run, scorers, timeout=scorer_timeout)
                first = False
            todo = []
            for run in built if guard.stopped is None else []:
                why = retry_reason({"status": run.status, "stop_reason": (run.result or {}).get("stopReason")})
                key = cell_key(run.record.params or {})
                if why and tries.get(key, 0) < limits.retries:
                    retrying[key] = (run.run_id, why)
                    tries[key] = tries.get(key, 0) + 1
                    todo.append(key)
        return self.runs()

    def _build(self, keys: list[str], cells: dict[str, dict[str, Any]], dask_client: Any) -> list[Run]:
        """The queued runs of these cells."""
        executor = self.plan.get("executor")
        if executor == "dask" and dask_client is None and self.plan.get("daskScheduler") \
                and not current().dask_scheduler:  # the detached driver of a background sweep
            configure(dask_scheduler=self.plan["daskScheduler"])
        specs = [{**runnable(cells[k]["spec"]), "experiment": self.name, "params": cells[k]["params"],
                  "tags": cells[k].get("tags")} for k in keys]
        return batch.build(specs, mode="parallel", executor=executor, dask_client=dask_client, cwd=self.root)

    def resume(self, *, scorers: Iterable[Any] | None = None, concurrency: int | None = None,
               show: bool = True, background: bool = False, dask_client: Any = None,
               scorer_timeout: float | None = None, retries: int | None = None,
               max_failures: float | None = None, max_total_cost: float | None = None,
               rerun_cancelled: bool = False) -> Experiment:
        """Start the cells whose run has not ended (or never started, or was stopped by a limit); ended runs
        are kept, a run a person cancelled too (with ``retries`` as well) unless ``rerun_cancelled=True``: then
        its cell starts again, the cancelled run kept as a superseded attempt.

        The plan's shell checks score the new runs; Python scorers must be given again (``scorers=``), and
        each may take ``scorer_timeout`` seconds (the plan's, else 60). ``retries``, ``max_failures`` and
        ``max_total_cost`` replace the plan's (and are kept in it). Another process running this experiment
        makes this refuse, naming it.
        """
        if not isinstance(rerun_cancelled, bool):
            raise NbSubagentsError(f"rerun_cancelled must be True or False, got {rerun_cancelled!r}")
        with locked(self.root, self.name):
            for row in self.current_rows(columns=("status", "stop_reason", "error_message")) if rerun_cancelled else ():
                if cancelled_by_person(row):  # superseded in the plan: _execute starts its cell again
                    record_attempt(self.root, self.name, cell_key(json.loads(row["params"] or "{}")), row["run_id"],
                                   "cancelled; run again on request (rerun_cancelled)")
            given = {"retries": retries, "max_failures": max_failures, "max_total_cost": max_total_cost}
            if any(v is not None for v in given.values()):
                stored = Limits.from_plan(self.plan)
                limits = Limits.checked(**{k: getattr(stored, k) if v is None else v for k, v in given.items()})
                _store_limits(self.plan_path, limits)
            return self._resume(scorers=scorers, concurrency=concurrency, show=show, background=background,
                                dask_client=dask_client, scorer_timeout=scorer_timeout)

    def _resume(self, *, scorers: Iterable[Any] | None, concurrency: int | None, show: bool, background: bool,
                dask_client: Any, scorer_timeout: float | None) -> Experiment:
        """``resume`` with the experiment's lock held."""
        plan = self.plan
        if not plan.get("cells"):
            raise NbSubagentsError(f"Experiment {self.name!r} has no stored plan in {self.plan_path}: start it with "
                                   "nbsubagents.experiment(name, tasks=...)")
        chosen = unique_names([as_scorer(s) for s in scorers] if scorers is not None
                              else load_scorers(plan.get("checks")))
        limit = _concurrency(concurrency if concurrency is not None else plan.get("concurrency"))
        timeout = check_timeout(scorer_timeout if scorer_timeout is not None
                                else plan.get("scorerTimeout") or SCORER_TIMEOUT)
        if background:
            return self._background(chosen, limit)
        self._execute(chosen, limit, show, dask_client, timeout, Limits.from_plan(plan))
        return self

    def _background(self, scorers: Sequence[Any], concurrency: int) -> Experiment:
        python = [s for s in scorers if not isinstance(s, Check)]
        if python:
            raise NbSubagentsError("A background experiment can only use check(...) scorers (a separate process "
                                   f"runs it); score with {', '.join(map(repr, python))} after it ends with "
                                   "experiment.rescore(...)")
        self._proc = driver.start(self.root, self.name, concurrency)
        return self

    @property
    def running(self) -> bool:
        """True while a background driver of this experiment is alive."""
        if self._proc is not None:
            return self._proc.poll() is None
        return driver.running(self.root, self.name)

    def wait(self, timeout: float | None = None) -> Experiment:
        """Block until a background sweep's driver ended (or ``timeout`` seconds passed)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.running and (deadline is None or time.monotonic() < deadline):
            time.sleep(0.2)
        return self

    def rescore(self, *scorers: Any, timeout: float | None = None) -> Experiment:
        """Score the ended runs again with ``scorers`` (the plan's checks when none given); nothing is rerun.

        A scorer's earlier keys are replaced by what it returns now (a key it no longer returns is dropped);
        other scorers' keys stay. A Python scorer may take ``timeout`` seconds (the plan's, else 60)."""
        chosen = unique_names([as_scorer(s) for s in scorers] if scorers else load_scorers(self.plan.get("checks")))
        if not chosen:
            raise NbSubagentsError("rescore() needs a scorer: a function (run) -> number | bool | dict or "
                                   "check('command')")
        limit = check_timeout(timeout if timeout is not None else self.plan.get("scorerTimeout") or SCORER_TIMEOUT)
        for run in self.runs():
            if run.done:
                score(run, chosen, timeout=limit)
        return self

    # -- views (pandas and friends only in sweeps.views) ------------------------------------
    def frame(self, *, all_runs: bool = False) -> pandas.DataFrame:
        """One row per run: ``params.*``, ``metrics.*``, ``scores.*``, ``tags.*``, status, stop reason, and
        which try of its cell the run is (``attempt``, ``attempts``; ``retried``: why a superseded one was tried
        again, with ``all_runs=True``)."""
        return self._frame(self.plan, all_runs)

    to_frame = frame

    def _frame(self, plan: dict[str, Any], all_runs: bool = False) -> pandas.DataFrame:
        got, params = attempts.current(self._columns(frames.READ, plan, arrow=frames.arrow_texts()), plan, all_runs)
        return frames.frame_of_columns(got, params, more=("attempt", "attempts", "retried"))

    def axes(self) -> tuple[str, ...]:
        """What ``compare()`` and ``plot()`` group by unless told: ``("harness", "preset", "model")`` when the
        sweep names harnesses, else ``("preset", "model")``."""
        return _axes(self.plan)

    def compare(self, by: str | Sequence[str] | None = None, baseline: Any = None, *, ci: float = 0.95,
                k: int | Sequence[int] | None = None) -> Comparison:
        """Per cell of ``by`` (default: ``axes()``; ``by="harness"``: one row per agent harness): runs planned,
        ran, succeeded, failed, excluded (and why); the success rate, every score and metric over the runs that
        ran, with ``ci`` intervals and pass@``k``/pass^``k``; the difference to ``baseline`` with its interval
        (``sweeps.views.compare``)."""
        plan = self.plan  # read once: a big sweep's plan is a large file
        planned = [cell.get("params") or {} for cell in plan.get("cells") or []]
        return views.compare(self._frame(plan), by=by or _axes(plan), baseline=baseline, title=self.name, ci=ci,
                             k=k, planned=planned)

    def plot(self, *, x: str = "cost", y: str | None = None, by: str | Sequence[str] | None = None,
             theme: str = "auto") -> Figure:
        """A matplotlib Figure: one point per run that ran (``x`` a metric, ``y`` a score), a colour per cell of
        ``by`` (default: ``axes()``), a marker per model."""
        plan = self.plan
        return plots.plot(self._frame(plan), x=x, y=y, by=by or _axes(plan), title=self.name, theme=theme)

    def to_mlflow(self, tracking_uri: str | None = None, *, artifact_location: str | None = None) -> str:
        """Log each ended run as an MLflow run (params, metrics, scores as ``score.*`` metrics, tags, the run
        directory as artifacts) under an MLflow experiment of this name; returns its MLflow experiment id.

        ``tracking_uri`` as MLflow takes it (``sqlite:///mlflow.db``; None: MLflow's default); runs exported
        before are skipped; one whose export failed half-way is exported again (its unfinished MLflow run
        deleted). Needs ``pip install 'nbsubagents[mlflow]'``."""
        return export.to_mlflow(self, tracking_uri, artifact_location)

    def to_otel_json(self, path: str | Path) -> Path:
        """Write each ended run as an OpenTelemetry trace (OTLP JSON) to ``path``; see ``to_mlflow`` for MLflow."""
        return export.traces.to_otel_json(self, path)

    def report(self, path: str | Path | None = None, *, format: str = "html") -> ExperimentReport:
        """Write one file to send (``"html"``: self-contained; ``"md"``: Markdown): the sweep, the comparison,
        the plot, every run with its transcript folded, the versions; secrets masked. See ``sweeps.report``."""
        return report(self, path, format=format)

    def counts(self) -> dict[str, int]:
        rows = self.current_rows()
        out = dict.fromkeys(STATUSES, 0)
        for row in rows:
            out[row.get("status") or "queued"] = out.get(row.get("status") or "queued", 0) + 1
        out["planned"] = len(self.plan.get("cells") or [])
        return out

    def __repr__(self) -> str:
        c = self.counts()
        cap = self.plan.get("maxTotalCost")
        spent = sum(float(r.get("cost") or 0) for r in self.rows()) if cap is not None else 0.0
        spend = f" · {usd(spent)} of max_total_cost {usd(cap)} spent" if cap is not None else ""
        return (f"<Experiment {self.name}: {c['planned']} planned · {c['completed']} completed · {c['failed']} "
                f"failed · {c['aborted']} aborted · {c['running'] + c['queued']} active{spend}>")

    def _repr_html_(self) -> str:
        try:
            table = self.compare()._repr_html_() if self.current_rows() else ""
        except NbSubagentsError:
            table = ""
        return part("bits.html", "experiment", text=repr(self), table=Html(table))


class _Scoring:
    """A renderer that scores each run as it ends, before its panel shows the end (with the scores)."""

    def __init__(self, inner: Any, scorers: Sequence[Any], timeout: float = SCORER_TIMEOUT) -> None:
        self.inner, self.scorers, self.timeout = inner, scorers, timeout

    def start(self, runs: list[Run]) -> None:
        self.inner.start(runs)

    def event(self, run: Run, event: dict[str, Any], line: Any) -> None:
        self.inner.event(run, event, line)

    def end(self, run: Run) -> None:
        if self.scorers:
            score(run, self.scorers, timeout=self.timeout)
        self.inner.end(run)

    def close(self) -> None:
        self.inner.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def _concurrency(value: Any) -> int:
    limit = current().concurrency if value is None else value
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise NbSubagentsError(f"concurrency must be a whole number of at least 1, got {value!r}")
    return limit


def _store_limits(path: Path, limits: Limits) -> None:
    plan = read_json(path) or {}
    atomic_write_json(path, {**plan, **limits.record()})


def experiment(name: str, *, tasks: Any, presets: Any = None, models: Any = None, harnesses: Any = None,
               repeats: int = 1,
               concurrency: int | None = None, scorers: Iterable[Any] = (), background: bool = False,
               show: bool = True, executor: str | None = None, dask_client: Any = None, replace: bool = False,
               scorer_timeout: float = SCORER_TIMEOUT, retries: int = 0, max_failures: float | None = None,
               max_total_cost: float | None = None, cwd: str | None = None, timeout: float | None = None,
               files: list[Any] | None = None, isolation: str | None = None, keep_worktree: bool | None = None,
               max_turns: int | None = None, max_tool_calls: int | None = None, max_tokens: int | None = None,
               max_cost: float | None = None, ask: bool | None = None, approval: Any = None,
               fallback_models: list[str] | None = None, output_schema: Any = None, max_repairs: int | None = None,
               project_config: bool | None = None, inputs: Any = None, python_session: bool | None = None,
               tags: dict[str, Any] | None = None, **unknown: Never) -> Experiment:
    """Run the sweep tasks × harnesses × presets × models × repeats as one experiment and return it.

    ``tasks`` are strings, dicts (``task``, optional ``id``, ``preset``, ``model``, ``harness``, ``cwd``,
    ``timeout``, ``files``; other keys become params) or a DataFrame whose rows are tasks. ``scorers`` are functions
    ``(run) -> number | bool | dict`` or ``check("command")``. ``harnesses`` (``["pi", "claude-code",
    "codex"]``) runs every cell under each agent harness (``params.harness``; ``compare(by="harness")``);
    without it each run takes its task's ``harness``, else its preset's (pi unless the preset names another).
    ``isolation="worktree"`` gives every run its own worktree (checks then score each run's own changes, in a
    scratch workspace removed after them).
    The run options (``cwd``, ``timeout``, ``files``, ``isolation``, ``keep_worktree``, ``max_turns``,
    ``max_tool_calls``, ``max_tokens``, ``max_cost``, ``ask``, ``approval``, ``fallback_models``, ``output_schema``,
    ``max_repairs``, ``project_config``, ``inputs``, ``python_session``: as for ``run``; ``tags``: a dict kept with
    each run) apply to every run; ``inputs`` may be a list of dicts (an axis: ``compare(by="input")``).
    Foreground by default (one live panel; no limit on the number of runs, at most ``concurrency`` at once);
    ``background=True`` hands the sweep to a detached process (``.wait()``). A name used before with the same
    definition resumes: ended runs are kept, the rest start. A name used before with another definition (tasks,
    presets, models, repeats, run options, tags or scorers) is refused, naming what changed: use a new name, or
    ``replace=True`` to start this experiment afresh (its earlier runs stay on disk and in
    ``nbsubagents.runs()``, no longer part of it). One process at a time runs an experiment: while another runs
    it, this call is refused, naming that process. A Python scorer that takes more than ``scorer_timeout``
    seconds (60) or raises (``SystemExit`` too) records an error for that run under ``scores.json``'s
    ``errors``; the sweep goes on (a ``check()`` has its own ``timeout``). ``executor="dask"`` (with
    ``dask_client=``, or the settings) runs the sweep on a Dask cluster; its workers' resources bound it, and
    ``concurrency``, when given, caps it.

    ``retries=N`` starts a cell again, up to N times in this call, when its run ended for a reason outside the
    agent that another attempt may cure (``sweeps.outcomes.retry_reason``: a provider error, a dropped
    connection, a lost supervisor or Dask worker, ...); each superseded run stays on disk, listed in the cell's
    ``attempts`` in the plan. ``max_failures`` (a count, or a fraction of the planned runs when between 0 and 1)
    stops the sweep once that many of the runs this call started failed (any failed run, retried or not): the
    runs not started yet end ``not_started`` with the reason. ``max_total_cost`` (USD) caps the whole sweep
    (``max_cost`` stays each run's budget): once its runs' cost (every attempt, ended runs and the cost so far
    of running ones) reaches it, no new run starts. Calling again resumes: runs a limit stopped are started
    then. The three are how the sweep runs, not what it is: other values resume the same experiment. Before
    the launch, a line estimates the sweep's cost from earlier runs of the same preset, model and task.
    """
    run_options = {**call_options(locals(), "sweep"), **unknown}
    exp = Experiment(check_name(name), project_root(Path(run_options["cwd"])) if run_options.get("cwd") else None)
    chosen = unique_names([as_scorer(s) for s in scorers])
    scorer_seconds = check_timeout(scorer_timeout)
    if not isinstance(replace, bool):
        raise NbSubagentsError(f"replace must be True or False, got {replace!r}")
    cells = expand(tasks, presets, models, repeats, run_options, harnesses, plans_dir(exp.root) / f"{exp.name}.inputs")
    limits = Limits.checked(retries, max_failures, max_total_cost)
    chosen_executor = current().executor if executor is None else executor
    on_dask: dict[str, Any] = {}
    if chosen_executor == "dask":
        client = launch.executor_client("dask", dask_client, run_options.get("cwd"))
        on_dask = {"executor": "dask", "daskScheduler": client.scheduler.address}
        dask_client = client
    elif chosen_executor != "local" or dask_client is not None:
        launch.executor_client(chosen_executor, dask_client)  # the error that names what is wrong
    limit = _concurrency(concurrency if concurrency is not None or not on_dask else min(64, max(1, len(cells))))
    with locked(exp.root, exp.name):
        plan = exp.plan
        replacing = None
        if plan.get("cells") and replace:
            replacing = [r["run_id"] for r in exp.rows()]
        elif plan.get("cells") and plan.get("fingerprint") != fingerprint(cells, chosen):
            changed = differences(plan, cells, chosen)
            if changed or plan.get("fingerprint"):  # a plan of an earlier version has no fingerprint: its cells
                what = f"other {' and '.join(changed)}" if changed else "another definition"
                rescore = (f"; to score its ended runs with other scorers: nbsubagents.get_experiment({exp.name!r})"
                           ".rescore(...)" if changed == ["scorers"] else "")
                raise NbSubagentsError(
                    f"Experiment {exp.name!r} was defined with {what} (its plan: {exp.plan_path}); its runs "
                    f"would mix with this one's. Use a new name, or experiment({exp.name!r}, ..., replace=True) to "
                    "start it afresh (its earlier runs stay on disk and in nbsubagents.runs(), no longer part of "
                    f"it){rescore}")
        save_plan(exp.root, exp.name, cells, chosen, limit, on_dask, scorer_timeout=scorer_seconds, replacing=replacing,
                  limits=limits.record())
        return exp._resume(scorers=chosen, concurrency=limit, show=show, background=background,
                           dask_client=dask_client, scorer_timeout=scorer_seconds)


def get_experiment(name: str, project: str | Path | None = None, *, root: str | Path | None = None) -> Experiment:
    """The experiment of this name in ``project`` (a folder inside it; default: the current folder); its plan or
    runs must exist. (``root=`` is the older name of ``project=``.)"""
    exp = Experiment(name, project_arg(project, "get_experiment", root=root))
    if not exp.plan_path.exists() and not exp.rows():
        known = [e["name"] for e in listing(exp.root)]
        raise NbSubagentsError(f"No experiment {name!r} in {exp.root}: "
                               + (f"known ones are {', '.join(known)}" if known else "none has been run yet"))
    return exp


def experiments(project: str | Path | None = None, *, root: str | Path | None = None) -> pandas.DataFrame:
    """The experiments of ``project`` (a folder inside it; default: the current folder) as a DataFrame: name,
    planned cells, runs and their statuses. (``root=`` is the older name of ``project=``.)"""
    import pandas as pd
    base = project_arg(project, "experiments", root=root)
    columns = ["name", "planned", "runs", "completed", "failed", "aborted", "running", "queued", "created_at"]
    frame = pd.DataFrame(listing(base), columns=columns)
    for col in columns[2:8]:
        frame[col] = frame[col].fillna(0).astype(int)
    return frame


def _main(argv: list[str]) -> int:
    """The detached driver of a background sweep (``sweeps.driver.start``): resume it here, showing nothing."""
    root, name, concurrency = argv[0], argv[1], int(argv[2])
    os.chdir(root)
    exp = Experiment(name, root)
    with locked(exp.root, name, wait=60.0):  # its starter holds the lock until it has started this process
        exp._resume(scorers=None, concurrency=concurrency, show=False, background=False, dask_client=None,
                    scorer_timeout=None)
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
