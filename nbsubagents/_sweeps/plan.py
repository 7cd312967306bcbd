"""An experiment's stored plan: ``<root>/.pi/subagents/experiments/<name>.json`` (its cells, concurrency,
shell checks and executor), the listing of a project's experiments from the plans and the registry, and the
lock that lets one process at a time run an experiment.

A plan is identified by what defines its runs: each cell's task text, harness, preset, model, repeat, run options
(its inputs by their names and SHA-256, ``grid``) and tags, and the scorers (a check's command, name, timeout; a
Python scorer's module and qualified name). Their SHA-256 is the plan's ``fingerprint``; ``experiment()`` refuses a
plan whose fingerprint differs from the stored one (``differences`` names what changed) unless told
``replace=True``, which keeps the earlier runs on disk and in the registry but takes them out of the experiment (the
plan's ``replaced`` list). Concurrency,
the executor, the scorer timeout and the stop rules (``retries``, ``max_failures``, ``max_total_cost``) are how
a plan runs, not what it is: they may change between calls, and a call with other ones resumes the experiment.
A cell's ``attempts`` list the runs a retry superseded (``record_attempt``); they are kept from call to call.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Sequence

from .. import _registry as registry
from .._child.artifacts import atomic_write_json, now_iso, read_json, runs_dir
from .._child.procs import alive, process_start_ticks
from .._config import NbSubagentsError
from .scorers import Check, checked_name, scorer_name, scorers_spec

__all__ = ["check_name", "plans_dir", "plan_path", "read_plan", "save_plan", "listing", "fingerprint",
           "differences", "locked", "replaced_runs", "record_attempt"]

_AXES = {"harnesses": "harness", "presets": "preset", "models": "model"}  # an axis in words: its param
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")
GONE_HOLDER_GRACE = 30.0  # seconds a lock whose recorded holder is gone is waited for (see ``locked``)


def check_name(name: Any) -> str:
    return checked_name(name, _NAME, "An experiment name must be 1-100 letters, digits, '_', '.' or '-' (starting "
                                     "with a letter or digit)")


def plans_dir(root: Path) -> Path:
    return runs_dir(root).parent / "experiments"


def plan_path(root: Path, name: str) -> Path:
    return plans_dir(root) / f"{name}.json"


def read_plan(root: Path, name: str) -> dict[str, Any]:
    return read_json(plan_path(root, name)) or {}


def _scorer_identity(scorer: Any) -> dict[str, Any]:
    if isinstance(scorer, Check):
        return scorer.spec()
    target = scorer if hasattr(scorer, "__qualname__") else type(scorer)
    return {"python": f"{getattr(target, '__module__', '?')}.{getattr(target, '__qualname__', '?')}",
            "name": scorer_name(scorer)}


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


def _definition(cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: cell.get(k) for k in ("key", "spec", "params", "tags")} for cell in cells]


def fingerprint(cells: list[dict[str, Any]], scorers: Sequence[Any]) -> str:
    """The SHA-256 of what defines a plan's runs: its cells (task text, preset, model, repeat, run options,
    tags) and its scorers (a JSON round trip first, so a stored plan and a new call compare alike)."""
    defined = json.loads(json.dumps(_definition(cells), default=str))
    return _digest({"cells": defined, "scorers": [_scorer_identity(s) for s in scorers]})


def differences(plan: dict[str, Any], cells: list[dict[str, Any]], scorers: Sequence[Any]) -> list[str]:
    """What a new definition changes of a stored plan, in words ("tasks", "presets", "run options", ...)."""
    old = json.loads(json.dumps(_definition(plan.get("cells") or []), default=str))
    new = json.loads(json.dumps(_definition(cells), default=str))

    def axis(defined: list[dict[str, Any]], what: str) -> Any:
        if what == "tasks":
            return sorted({(c["params"].get("task_id"), c["spec"].get("task")) for c in defined})
        if what in _AXES:
            return sorted({str(c["params"].get(_AXES[what])) for c in defined})
        if what == "repeats":
            return sorted({c["params"].get("repeat") or 0 for c in defined})
        if what == "inputs":  # their names and hashes: other data under the same name is another plan
            return sorted({str(c["params"].get("input")) for c in defined})
        if what == "run options":
            skip = {"preset", "task", "model", "harness", "name", "inputs"}
            return sorted(json.dumps({k: v for k, v in c["spec"].items() if k not in skip}, sort_keys=True)
                          for c in defined)
        if what == "task columns":
            return sorted(json.dumps(c["params"], sort_keys=True, default=str) for c in defined)
        return sorted(json.dumps(c.get("tags") or {}, sort_keys=True) for c in defined)

    changed = [what for what in ("tasks", "harnesses", "presets", "models", "repeats", "inputs", "run options", "tags")
               if axis(old, what) != axis(new, what)]
    if not changed and old != new:
        changed.append("task columns")
    stored = plan.get("scorers")
    if stored is not None and stored != [_scorer_identity(s) for s in scorers]:
        changed.append("scorers")
    elif stored is None and plan.get("checks") is not None and plan["checks"] != scorers_spec(scorers):
        changed.append("scorers")
    return changed


def replaced_runs(plan: dict[str, Any]) -> set[str]:
    """The run ids an experiment's earlier, replaced plans made (no longer part of the experiment)."""
    return {rid for entry in plan.get("replaced") or [] for rid in entry.get("runs") or []}


def save_plan(root: Path, name: str, cells: list[dict[str, Any]], scorers: Sequence[Any], concurrency: int,
              executor: dict[str, Any] | None = None, *, scorer_timeout: float | None = None,
              replacing: list[str] | None = None, limits: dict[str, Any] | None = None) -> None:
    """Write the plan (its first ``createdAt`` and its cells' ``attempts`` kept when the experiment is run
    again). ``replacing``: the run ids of the earlier plan, which leave the experiment (kept on disk, listed
    under ``replaced``). ``limits``: the stop rules in force (``Limits.record()``)."""
    path = plan_path(root, name)
    earlier = read_json(path) or {}
    if replacing is None:
        tried = {c["key"]: c["attempts"] for c in earlier.get("cells") or [] if c.get("attempts")}
        cells = [{**c, "attempts": tried[c["key"]]} if c["key"] in tried else c for c in cells]
    path.parent.mkdir(parents=True, exist_ok=True)
    replaced = list(earlier.get("replaced") or [])
    if replacing is not None:
        replaced.append({"fingerprint": earlier.get("fingerprint"), "replacedAt": now_iso(),
                         "runs": sorted(set(replacing) - replaced_runs(earlier))})
    atomic_write_json(path, {
        "name": name, "createdAt": earlier.get("createdAt") or now_iso(), "updatedAt": now_iso(),
        "fingerprint": fingerprint(cells, scorers), "concurrency": concurrency, "checks": scorers_spec(scorers),
        "scorers": [_scorer_identity(s) for s in scorers], "scorerTimeout": scorer_timeout, "cells": cells,
        **(limits or {}), **({"replaced": replaced} if replaced else {}), **(executor or {})})


def record_attempt(root: Path, name: str, key: str, run_id: str, why: str) -> None:
    """Note in the plan that cell ``key``'s run ``run_id`` is tried again, and why."""
    path = plan_path(root, name)
    plan = read_json(path) or {}
    for cell in plan.get("cells") or []:
        if cell["key"] == key:
            cell.setdefault("attempts", []).append({"runId": run_id, "retried": why, "at": now_iso()})
    atomic_write_json(path, plan)


def lock_path(root: Path, name: str) -> Path:
    return plans_dir(root) / f"{name}.lock"


@contextmanager
def locked(root: Path, name: str, *, wait: float = 0.0) -> Iterator[None]:
    """Hold the experiment's lock (``<name>.lock`` beside the plan, ``fcntl.flock``) while the block runs: one
    process at a time runs an experiment. Another holder makes this wait up to ``wait`` seconds, then refuse,
    naming that process. The lock ends with its process, however it ends (no stale lock to clear), but for a
    moment it may outlive a holder that was killed: a child the holder was starting keeps the lock's file open
    until it runs its own program. So a lock whose recorded holder is gone is waited for (``GONE_HOLDER_GRACE``)."""
    path = lock_path(root, name)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)  # not inherited by the runs' processes
    try:
        started = time.monotonic()
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                waited = time.monotonic() - started
                if waited >= wait and (waited >= GONE_HOLDER_GRACE or _holder(path) is not None):
                    raise NbSubagentsError(_busy(path, name)) from None
                time.sleep(0.1)
        holder = {"pid": os.getpid(), "startTicks": process_start_ticks(os.getpid()), "since": now_iso(),
                  "command": " ".join(sys.argv)[:300]}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(holder).encode(), 0)
        try:
            yield
        finally:
            os.ftruncate(fd, 0)
    finally:
        os.close(fd)  # releases the lock


def _holder(path: Path) -> dict[str, Any] | None:
    """The process that wrote itself into the lock's file, while it lives; None when it is gone."""
    try:
        holder = json.loads(path.read_text() or "{}")
    except (OSError, ValueError):
        return None
    found = isinstance(holder, dict) and holder.get("pid") and alive(holder.get("pid"), holder.get("startTicks"))
    return holder if found else None


def _busy(path: Path, name: str) -> str:
    holder = _holder(path)
    who = (f"process {holder['pid']} (since {holder.get('since')}: {holder.get('command') or '?'})"
           if holder is not None else "another process")
    return (f"Experiment {name!r} is being run by {who}: one experiment runs in one process at a time, so its "
            f"cells never run twice. Wait for that process to end (nbsubagents.get_experiment({name!r}).wait() "
            "for a background sweep) or stop it, then call again: ended runs are kept and the rest start")


def listing(root: Path) -> list[dict[str, Any]]:
    """Each experiment of the project: its name, planned cells, creation time and its runs' counts by status."""
    names: dict[str, dict[str, Any]] = {}
    gone: set[str] = set()  # runs of replaced plans
    folder = plans_dir(root)
    if folder.is_dir():
        for path in sorted(folder.glob("*.json")):
            if not path.name.endswith(".driver.json"):
                plan = read_json(path) or {}
                names[path.stem] = {"name": path.stem, "planned": len(plan.get("cells") or []),
                                    "created_at": plan.get("createdAt")}
                gone |= replaced_runs(plan)
    db = registry.db_path(root)
    if db.exists():
        registry.ensure_loaded(db)
        for row in registry.fetch(db, "SELECT run_id, experiment, status FROM runs WHERE experiment IS NOT NULL"):
            if row["run_id"] in gone:
                continue
            entry = names.setdefault(row["experiment"], {"name": row["experiment"], "planned": None,
                                                         "created_at": None})
            entry[row["status"]] = entry.get(row["status"], 0) + 1
            entry["runs"] = entry.get("runs", 0) + 1
    return sorted(names.values(), key=lambda e: (e.get("created_at") or "", e["name"]))
