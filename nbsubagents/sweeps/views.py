"""Views of an experiment's runs: the frame, the per-cell comparison, the cost/score plot, the MLflow export.

Column names follow MLflow's ``search_runs``: ``params.*``, ``metrics.*``, ``tags.*`` (and ``scores.*``).
pandas is imported here; matplotlib and mlflow only by ``plot`` and ``to_mlflow`` (optional extras).
"""

from __future__ import annotations

import html
import json
import logging
import math
import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from ..child.artifacts import TERMINAL, parse_iso
from ..config import NbSubagentsError
from ..ui.timeline import new_figure  # shown once in a notebook, drawable elsewhere
from ..views.masking import masker
from . import traces

if TYPE_CHECKING:
    import pandas

    from .experiment import Experiment

# metrics.<name> from registry columns
METRICS = {"duration_s": "duration", "tokens": "total_tokens", "input_tokens": "input_tokens",
           "output_tokens": "output_tokens", "cost_usd": "cost", "tool_calls": "tool_calls", "turns": "turns"}
# and, for runs with isolation="worktree", what their changes.patch holds (columns only when a run has them)
CHANGE_METRICS = {"files_changed": "files_changed", "lines_added": "lines_added", "lines_removed": "lines_removed"}


def frame(rows: list[dict[str, Any]]) -> pandas.DataFrame:
    """One row per run; every column holds scalars (so ``to_parquet`` and ``to_csv`` work as they are). The
    frame is what an experiment's numbers travel in, so its text (errors, params, tags) is masked."""
    import pandas as pd

    mask = masker()

    def masked(value: Any) -> Any:
        return mask.text(value) if isinstance(value, str) else value

    records = []
    for row in rows:
        rec: dict[str, Any] = {"run_id": row["run_id"], "experiment": row.get("experiment"),
                               "status": row.get("status"), "stop_reason": row.get("stop_reason"),
                               "error": masked(row.get("error_message")), "model_resolved": row.get("model"),
                               "created_at": row.get("created_at"), "run_dir": row.get("run_dir")}
        for key, value in json.loads(row.get("params") or "{}").items():
            rec[f"params.{key}"] = masked(value)
        for name, column in METRICS.items():
            rec[f"metrics.{name}"] = row.get(column)
        for name, column in CHANGE_METRICS.items():
            if row.get(column) is not None:
                rec[f"metrics.{name}"] = row[column]
        for key, value in json.loads(row.get("scores") or "{}").items():
            rec[f"scores.{key}"] = value
        for key, value in json.loads(row.get("tags") or "{}").items():
            rec[f"tags.{key}"] = masked(value)
        records.append(rec)
    out = pd.DataFrame.from_records(records)
    if out.empty:
        out = pd.DataFrame(columns=["run_id", "experiment", "status", "stop_reason", "error", "model_resolved",
                                    "created_at", "run_dir"] + [f"metrics.{m}" for m in METRICS])
    for name in [*METRICS, *CHANGE_METRICS]:
        if f"metrics.{name}" in out:
            out[f"metrics.{name}"] = pd.to_numeric(out[f"metrics.{name}"], errors="coerce")
    out["created_at"] = pd.to_datetime(out["created_at"], utc=True, errors="coerce")
    return out.set_index("run_id")


def _by_columns(data: pandas.DataFrame, by: str | Sequence[str]) -> list[str]:
    names = [by] if isinstance(by, str) else list(by)
    if not names:
        raise NbSubagentsError("compare(by=...) needs at least one column, such as ('preset', 'model')")
    cols = []
    for name in names:
        col = name if name in data.columns else f"params.{name}"
        if col not in data.columns:
            options = sorted(c.removeprefix("params.") for c in data.columns if c.startswith("params."))
            raise NbSubagentsError(f"compare(by=...): no column {name!r}; the params are {', '.join(options)}")
        cols.append(col)
    return cols


def _values(data: pandas.DataFrame) -> list[str]:
    return [c for c in data.columns if c.startswith("metrics.")] + [c for c in data.columns if c.startswith("scores.")]


class Comparison:
    """Per-cell statistics of an experiment (``table``: a DataFrame with (value, stat) columns)."""

    def __init__(self, table: pandas.DataFrame, *, by: list[str], baseline: Any = None, title: str = "") -> None:
        self.table, self.by, self.baseline, self.title = table, by, baseline, title

    def __repr__(self) -> str:
        return f"{self.title} by {', '.join(self.by)}\n{self.table.to_string(float_format=lambda v: f'{v:.4g}')}"

    def _repr_html_(self) -> str:
        caption = f"{self.title}: per cell ({', '.join(b.removeprefix('params.') for b in self.by)})"
        if self.baseline is not None:
            caption += f"; Δ = mean − baseline {self.baseline!r}"
        body = self.table.to_html(float_format=lambda v: f"{v:.4g}", na_rep="–", border=0, classes="nbsub-compare")
        style = ("<style>.nbsub-compare{border-collapse:collapse;font-size:12px}.nbsub-compare th,.nbsub-compare td"
                 "{padding:2px 8px;text-align:right;border-bottom:1px solid #ddd}</style>")
        return f"<div>{style}<div><b>{html.escape(caption)}</b></div>{body}</div>"


def compare(data: pandas.DataFrame, *, by: str | Sequence[str] = ("preset", "model"), baseline: Any = None,
            title: str = "") -> Comparison:
    """Group runs by ``by``: runs, success rate, then mean/std/n of each metric and score, and Δ to ``baseline``."""
    import pandas as pd

    cols = _by_columns(data, by)
    values = _values(data)
    work = data[cols].copy()
    work["success"] = (data["status"] == "completed").astype(float)
    for col in values:
        work[col] = pd.to_numeric(data[col].map(lambda v: float(v) if isinstance(v, bool) else v), errors="coerce")
    grouped = work.groupby(cols, dropna=False, sort=True)
    parts = {("runs", "n"): grouped.size(), ("success_rate", "mean"): grouped["success"].mean()}
    for col in values:
        parts[(col, "mean")] = grouped[col].mean()
        parts[(col, "std")] = grouped[col].std()
        parts[(col, "n")] = grouped[col].count()
    table = pd.DataFrame(parts)
    table.columns = pd.MultiIndex.from_tuples(table.columns)
    if baseline is not None:
        key = tuple(baseline) if isinstance(baseline, (list, tuple)) else (baseline,)
        if len(key) != len(cols):
            raise NbSubagentsError(f"baseline must name one cell: {len(cols)} value(s) for {', '.join(cols)}, "
                                   f"got {baseline!r}")
        index_key = key if len(cols) > 1 else key[0]
        if index_key not in table.index:
            cells = ", ".join(repr(i) for i in table.index)
            raise NbSubagentsError(f"baseline {baseline!r} is not a cell of this comparison; the cells are {cells}")
        base = table.loc[index_key]
        for col in ["success_rate", *values]:
            table[(col, "Δ")] = table[(col, "mean")] - base[(col, "mean")]
        table = table[sorted(table.columns, key=lambda c: _order(c, values))]
    return Comparison(table, by=cols, baseline=baseline, title=title)


def _order(column: tuple[str, str], values: list[str]) -> tuple[int, int]:
    head = ["runs", "success_rate", *values]
    return head.index(column[0]), ["n", "mean", "std", "Δ"].index(column[1]) if column[0] != "runs" else 0


def plot(data: pandas.DataFrame, *, x: str = "cost_usd", y: str | None = None,
         by: str | Sequence[str] = ("preset", "model"), title: str = "") -> Any:
    """Cost (or another metric) against a score, one point per run, one colour per cell; a matplotlib Figure."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise NbSubagentsError("plot() needs matplotlib: pip install 'nbsubagents[timeline]'") from None
    import pandas as pd


    xcol = x if x in data.columns else f"metrics.{x}"
    scores = [c for c in data.columns if c.startswith("scores.")]
    ycol = (y if y in data.columns else f"scores.{y}") if y else (scores[0] if scores else "metrics.duration_s")
    for col, what in ((xcol, "x"), (ycol, "y")):
        if col not in data.columns:
            raise NbSubagentsError(f"plot({what}=...): no column {col!r}; metrics and scores are "
                                   f"{', '.join(_values(data))}")
    cols = _by_columns(data, by)
    fig = new_figure((6.5, 4.0))
    ax = fig.add_subplot()
    for cell, part in data.groupby(cols, dropna=False, sort=True):
        label = " · ".join("default" if v is None or (isinstance(v, float) and math.isnan(v)) else str(v)
                           for v in (cell if isinstance(cell, tuple) else (cell,)))
        ys = pd.to_numeric(part[ycol].map(lambda v: float(v) if isinstance(v, bool) else v), errors="coerce")
        points = ax.scatter(part[xcol], ys, label=label, alpha=0.75)
        points.set_gid(label)
    ax.set_xlabel(xcol)
    ax.set_ylabel(ycol)
    ax.set_title(title)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    return fig


def _mlflow_status(status: str | None) -> str:
    return {"completed": "FINISHED", "failed": "FAILED", "aborted": "KILLED"}.get(status or "", "RUNNING")


def to_mlflow(exp: Experiment, tracking_uri: str | None = None, artifact_location: str | None = None) -> str:
    """Each ended run becomes an MLflow run (params, metrics, scores as metrics, tags, the run directory as
    artifacts) under the MLflow experiment of the same name; runs exported before are skipped, and a run
    whose export failed half-way (its MLflow run never terminated) is deleted and exported again."""
    try:
        from mlflow.entities import Metric, Param
        from mlflow.tracking import MlflowClient
    except ImportError:
        raise NbSubagentsError("to_mlflow() needs MLflow: pip install 'nbsubagents[mlflow]'") from None


    quiet = [logging.getLogger(n) for n in ("mlflow.store.db.utils", "alembic.runtime.migration")]
    levels = [log.level for log in quiet]
    for log in quiet:  # a new SQLite store's set-up messages are MLflow's business, not the notebook's
        log.setLevel(logging.WARNING)
    try:
        return _export(exp, MlflowClient(tracking_uri=tracking_uri), artifact_location, Metric, Param)
    finally:
        for log, level in zip(quiet, levels):
            log.setLevel(level)


def _export(exp: Experiment, client: Any, artifact_location: str | None, Metric: Any, Param: Any) -> str:
    found = client.get_experiment_by_name(exp.name)
    experiment_id = (found.experiment_id if found is not None
                     else client.create_experiment(exp.name, artifact_location=artifact_location))
    done: set[str] = set()
    for found_run in client.search_runs([experiment_id], max_results=50000):
        if found_run.info.status != "RUNNING":  # set_terminated is an export's last step
            done.add(found_run.data.tags.get("nbsubagents.run_id"))
        elif found_run.data.tags.get("nbsubagents.run_id"):  # an export that failed half-way: done again
            client.delete_run(found_run.info.run_id)
    masks = masker()  # an MLflow store is shared: params, tags and artifacts are masked before they go
    for row in exp.current_rows():
        if row["run_id"] in done or row.get("status") not in TERMINAL:
            continue
        params = {k: None if v is None else masks.text(str(v))
                  for k, v in json.loads(row.get("params") or "{}").items()}
        scores = json.loads(row.get("scores") or "{}")
        tags = {f"tags.{k}" if k.startswith("mlflow.") else k: masks.text(str(v))
                for k, v in json.loads(row.get("tags") or "{}").items()}
        tags.update({"nbsubagents.run_id": row["run_id"], "nbsubagents.status": row.get("status") or "",
                     "nbsubagents.stop_reason": masks.text(str(row.get("stop_reason"))),
                     "nbsubagents.experiment": exp.name, "nbsubagents.model": masks.text(str(row.get("model")))})
        start = _ms(row.get("started_at") or row.get("created_at"), parse_iso)
        end = _ms(row.get("ended_at"), parse_iso)
        run = client.create_run(experiment_id, start_time=start, tags=tags,
                                run_name=masks.text(row.get("name") or row["run_id"]))
        metrics = {name: row.get(column) for name, column in {**METRICS, **CHANGE_METRICS}.items()}
        metrics.update({f"score.{k}": v for k, v in scores.items()})
        client.log_batch(run.info.run_id,
                         metrics=[Metric(k, float(v), end or start or 0, 0) for k, v in metrics.items()
                                  if isinstance(v, (int, float)) and math.isfinite(float(v))],
                         params=[Param(k, "None" if v is None else str(v)[:6000]) for k, v in params.items()])
        with tempfile.TemporaryDirectory(prefix="nbsubagents-mlflow-") as copy:
            client.log_artifacts(run.info.run_id, _masked_copy(Path(row["run_dir"]), Path(copy) / "run", masks))
        client.set_terminated(run.info.run_id, status=_mlflow_status(row.get("status")), end_time=end)
    traces.to_mlflow(exp, client, experiment_id)  # each run also as a trace (spans), linked to its MLflow run
    return experiment_id


def _masked_copy(source: Path, target: Path, masks: Any) -> str:
    """The run directory copied to ``target`` with every text file masked (events, stdout, the child's session,
    meta, transcript, result, check logs, ...); a file that is not UTF-8 text is copied as it is. Links are
    not followed."""
    for folder, dirs, files in os.walk(source):
        here = Path(folder)
        out = target / here.relative_to(source)
        out.mkdir(parents=True, exist_ok=True)
        dirs[:] = [d for d in dirs if not (here / d).is_symlink()]
        for name in files:
            path = here / name
            if path.is_symlink() or not path.is_file():
                continue
            data = path.read_bytes()
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                shutil.copyfile(path, out / name)
                continue
            (out / name).write_text(masks.text(text, pieces=True), encoding="utf-8")  # stdout streams pieces
    return str(target)


def _ms(iso: str | None, parse: Any) -> int | None:
    if not iso:
        return None
    try:
        return int(parse(iso) * 1000)
    except (ValueError, TypeError):
        return None
