"""A run's registry row as its run directory implies it, and what readers derive from the directory alone.

Pure functions of the run folder (``meta.json``, ``supervisor.json``, ``result.json``, ``waiting.json``): no database.
``store`` writes these rows; ``status`` and ``query`` show them. Standard library only.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

from .._child import inbox, procs
from .._child.artifacts import TERMINAL, RunPaths, read_json
from .._child.record import load
from .._child.secrets import Masker, secret_values
from .._child.text import clip

__all__ = ["FINAL_TEXT_LIMIT", "HOST", "RUN_ID_CHARS", "SHOWN", "shown_name", "shown_row", "launcher_identity",
           "row_from_dir", "is_waiting", "with_waiting", "valid_run_id"]

FINAL_TEXT_LIMIT = 4000  # characters of the final text kept in the row (result.json has all of it)
# The row's text columns, masked as the row is made: the registry is a file of the project's (its run's supervisor
# masked what it wrote with the run's environment; this process masks with its own, and pi's config's keys).
TEXT_COLUMNS = ("name", "task", "final_text", "error_message", "data", "params", "tags")
_maskers: dict[Any, Masker] = {}
# A run's columns as every face shows them (``runs()``, ``nbsubagents runs --json/--csv``, an experiment's frame and
# report, the MLflow export): the registry column -> the name shown, where the two differ. The names are the ones
# ``runs()`` has always had, the face people write code against (``frame.tokens.sum()``); the registry keeps its own
# (a SQLite file of older versions too, and ``status().rows``).
SHOWN = {"created_at": "created", "started_at": "started", "ended_at": "ended", "duration": "duration_s",
         "total_tokens": "tokens", "error_message": "error"}
HOST = os.uname().nodename


def launcher_identity() -> dict[str, Any]:
    """Who starts a run: pid with its start time, host, and the notebook/kernel when cheaply known."""
    me = os.getpid()
    ident: dict[str, Any] = {"pid": me, "host": HOST, "startTicks": procs.process_start_ticks(me)}
    if os.environ.get("JPY_SESSION_NAME"):
        ident["notebook"] = os.environ["JPY_SESSION_NAME"]
    if "ipykernel" in sys.modules:
        argv = sys.argv
        for i, arg in enumerate(argv):
            if arg == "-f" and i + 1 < len(argv):
                ident["kernel"] = Path(argv[i + 1]).stem
            elif arg.startswith("--f="):
                ident["kernel"] = Path(arg[4:]).stem
    return ident


def shown_name(column: str) -> str:
    """The name a registry column has wherever a run's columns show (``SHOWN``)."""
    return SHOWN.get(column, column)


def shown_row(row: dict[str, Any]) -> dict[str, Any]:
    """A registry row with the names every face shows, in its order."""
    return {shown_name(key): value for key, value in row.items()}


def _result_fields(result: dict[str, Any]) -> dict[str, Any]:
    usage = result.get("usage") or {}
    text = _masker().text(result.get("finalText") or "", pieces=True)  # before clip cuts a secret short
    text = clip(text, FINAL_TEXT_LIMIT)
    # After a fallback the model that finished is the run's model (the one asked for is in requested_model and
    # result.json's modelsTried).
    finished = {"model": result["model"]} if len(result.get("modelsTried") or ()) > 1 and result.get("model") else {}
    return {
        **finished,
        "status": result.get("status") if result.get("status") in TERMINAL else "failed",
        "exit_code": result.get("exitCode"), "stop_reason": result.get("stopReason"),
        "error_message": result.get("errorMessage"), "final_text": text,
        "input_tokens": usage.get("input"), "output_tokens": usage.get("output"),
        "cache_read_tokens": usage.get("cacheRead"), "cache_write_tokens": usage.get("cacheWrite"),
        "total_tokens": usage.get("totalTokens"), "cost": usage.get("cost"),
        "tool_calls": result.get("toolCalls"), "turns": result.get("turns"),
        "started_at": result.get("startedAt"), "ended_at": result.get("endedAt"),
        "duration": result.get("durationSeconds"),
        "files_changed": (result.get("changes") or {}).get("files"),
        "lines_added": (result.get("changes") or {}).get("added"),
        "lines_removed": (result.get("changes") or {}).get("removed"),
        "data": _json_or_none(result.get("data")) if "data" in result else None,
    }


def _json_or_none(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def row_from_dir(run_dir: str | Path) -> dict[str, Any] | None:
    """The registry row a run directory implies (None until its record, meta.json, exists)."""
    paths = RunPaths(Path(run_dir))
    record = load(paths.dir)
    if record is None:
        return None
    launcher = record.launcher or {}
    row: dict[str, Any] = {
        "run_id": record.run_id, "name": record.name, "preset": record.preset, "mode": record.mode,
        "runner": record.runner, "task": record.task, "cwd": record.cwd, "requested_model": record.requested_model,
        "model": record.resolved_model, "run_dir": str(paths.dir), "created_at": record.created_at,
        "resumed_from": record.resumed_from, "harness": record.harness, "host": launcher.get("host"),
        "parent": record.parent, "root": record.tree_root or record.run_id, "depth": record.depth,
        "launcher_pid": launcher.get("pid"), "launcher_ticks": launcher.get("startTicks"),
        "notebook": launcher.get("notebook"), "kernel": launcher.get("kernel"),
        "owner_pid": launcher.get("pid"), "owner_ticks": launcher.get("startTicks"), "owner_host": launcher.get("host"),
    }
    if record.inputs:
        row["inputs"] = json.dumps([{k: e.get(k) for k in ("name", "kind", "bytes", "sha256")} for e in record.inputs
                                    if isinstance(e, dict)])
    if record.experiment is not None:
        scores = read_json(paths.dir / "scores.json") or {}
        row.update(experiment=record.experiment, params=json.dumps(record.params or {}, default=str),
                   tags=json.dumps(record.tags or {}, default=str),
                   scores=json.dumps(scores.get("scores") or {}, default=str))
    sup = read_json(paths.supervisor)
    if sup:
        row.update(supervisor_pid=sup.get("pid"), supervisor_ticks=sup.get("startTicks"),
                   child_pid=sup.get("childPid"), started_at=sup.get("startedAt"))
    result = read_json(paths.result)
    if result is not None:
        row.update(_result_fields(result))
    else:
        row["status"] = "running" if sup else "queued"
    masks = _masker()
    row.update({k: masks.text(row[k], pieces=True) for k in TEXT_COLUMNS if isinstance(row.get(k), str)})
    return row


def _masker() -> Masker:
    """The masker of this process's environment and pi's config files (made again when the environment changed)."""
    key = tuple(sorted(os.environ.items()))
    if key not in _maskers:
        agent = os.environ.get("PI_CODING_AGENT_DIR") or os.path.expanduser("~/.pi/agent")
        _maskers.clear()
        _maskers[key] = Masker(secret_values(agent=Path(agent)))
    return _maskers[key]


def is_waiting(run_dir: str | Path) -> bool:
    """Whether a running run waits on a question: its supervisor keeps a signed ``waiting.json`` while one is open."""
    return inbox.is_waiting(Path(run_dir))


def with_waiting(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` with the status ``waiting`` for each running run that waits on a question (a stat per running
    row; the rows themselves keep ``running``: it is derived where it is shown)."""
    for row in rows:
        if row.get("status") == "running" and row.get("run_dir") and is_waiting(row["run_dir"]):
            row["status"] = "waiting"
    return rows


RUN_ID_CHARS = re.compile(r"[A-Za-z0-9-]{1,64}")  # the run-id alphabet (new_run_id: digits, '-', hex)


def valid_run_id(text: str) -> bool:
    """True when ``text`` is made of the run-id alphabet only: never a path, a glob or a wildcard."""
    return isinstance(text, str) and RUN_ID_CHARS.fullmatch(text) is not None
