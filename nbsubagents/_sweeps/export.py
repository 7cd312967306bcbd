"""An experiment exported to MLflow: each ended run an MLflow run (params, metrics, scores as metrics, tags, the
run's own files as artifacts, masked first; never what the child wrote itself) and a trace. mlflow is imported only
here, when asked (an optional extra: ``pip install 'nbsubagents[mlflow]'``)."""

from __future__ import annotations

import json
import logging
import math
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._child.artifacts import TERMINAL, parse_iso
from .._child.harnesses import name_of
from .._config import NbSubagentsError
from .._views.masking import masker
from . import traces
from .frames import CHANGE_METRICS, METRICS

if TYPE_CHECKING:
    from .experiment import Experiment

__all__ = ["to_mlflow"]


# What of a run an export carries: the files nbsubagents writes (the supervisor masks its own as it writes them, with
# the run's environment; the kernel's hold what the person gave). What the child writes itself is left out (its
# session, its harness's state such as Codex's SQLite files, the diff of its changes, anything it left in its
# folder): it may hold a secret that only the run's environment had, which no masking here can know.
EXPORTED = ("meta.json", "prompt.md", "system-prompt.md", "output-schema.json", "events.jsonl", "transcript.log",
            "stdout.log", "stderr.log", "result.json", "scores.json", "changes.json", "supervisor.json")


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
        params.setdefault("harness", name_of(row))  # each MLflow run says which harness ran it
        scores = json.loads(row.get("scores") or "{}")
        tags = {f"tags.{k}" if k.startswith("mlflow.") else k: masks.text(str(v))
                for k, v in json.loads(row.get("tags") or "{}").items()}
        tags.update({"nbsubagents.run_id": row["run_id"], "nbsubagents.status": row.get("status") or "",
                     "nbsubagents.stop_reason": masks.text(str(row.get("stop_reason"))),
                     "nbsubagents.experiment": exp.name, "nbsubagents.model": masks.text(str(row.get("model"))),
                     "nbsubagents.harness": name_of(row)})
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
    """The run's ``EXPORTED`` files copied to ``target``, each masked (again: the supervisor masked what it wrote with
    the run's own environment, this process masks with its own); a file that is not UTF-8 text, or a link, is left
    out."""
    target.mkdir(parents=True, exist_ok=True)
    for name in EXPORTED:
        path = source / name
        if path.is_symlink() or not path.is_file():
            continue
        try:
            text = path.read_bytes().decode("utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        (target / name).write_text(masks.text(text, pieces=True), encoding="utf-8")
    return str(target)


def _ms(iso: str | None, parse: Any) -> int | None:
    if not iso:
        return None
    try:
        return int(parse(iso) * 1000)
    except (ValueError, TypeError):
        return None
