"""One run's verdict: is its supervisor still there? A run whose ``result.json`` exists is ingested; one whose
supervisor is gone without a result is settled (``lifecycle.settle``); a run only its launcher can judge (on a
Dask worker) is judged by its launcher; a run whose folder was deleted is settled ``failed`` with that reason.
Asked by ``reconcile`` and by the watcher's clock for runs of other processes.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from .. import _registry as registry
from .._child import procs
from .._child.artifacts import RunPaths, read_json
from .._child.record import RunRecord, load
from . import settle
from .launch import LAUNCHERS

__all__ = ["QUEUER_GONE", "STARTING_GRACE", "check", "owner_alive"]

STARTING_GRACE = 10.0   # seconds a run without supervisor.json may still be starting
QUEUER_GONE = "the process that queued it exited"


def owner_alive(row: dict[str, Any]) -> bool:
    host = row.get("owner_host")
    if host and host != registry.HOST:
        return True  # another machine's process: not ours to judge
    return procs.alive(row.get("owner_pid"), row.get("owner_ticks"))


def check(run_dir: Path, row: dict[str, Any] | None = None) -> str:
    """Settle one non-terminal run: "ended" (ingested), "live" (supervisor up) or "starting"/"owned"."""
    paths = RunPaths(Path(run_dir))
    row = row or registry.row_from_dir(paths.dir) or {}
    if paths.result.exists():
        registry.record(paths.dir)
        return "ended"
    if not paths.meta.exists():  # its folder was deleted while it ran: end what is left of it, settle it failed
        settle.lost(paths, RunRecord(run_id=row.get("run_id") or paths.dir.name))
        registry.record(paths.dir)
        return "ended"
    record = load(paths.dir)
    launcher = LAUNCHERS.get(record.runner) if record is not None else None  # None: an unreadable meta.json
    record = record or RunRecord(run_id=paths.dir.name)
    verdict = launcher.check(paths, record, row) if launcher is not None else None
    if verdict is not None:  # a run only its launcher can judge (on a Dask worker)
        return verdict
    if row.get("host") and row["host"] != registry.HOST:
        return "owned"  # started on another machine sharing this folder
    sup = read_json(paths.supervisor)
    if sup and sup.get("pid") is not None:
        if procs.alive(sup.get("pid"), sup.get("startTicks")):
            if row.get("supervisor_pid") is None or row.get("status") != "running":
                registry.record(paths.dir)
            return "live"
        if not paths.result.exists():  # it writes result.json before it exits
            settle.lost(paths, record)
        registry.record(paths.dir)
        return "ended"
    # No supervisor yet: queued in a live process's drive, starting, or never launched.
    queuer = record.launcher or {}
    if procs.alive(queuer.get("pid"), queuer.get("startTicks")):
        return "owned"
    launched = paths.dir / "supervisor.log"
    if queuer and not launched.exists() and launcher is not None and launcher.log_before_start:
        # The launcher opens supervisor.log before it spawns: the process that queued it died without launching it.
        settle.cancelled_before_start(paths, record, QUEUER_GONE)
        registry.record(paths.dir)
        return "ended"
    try:
        launch_age = time.time() - launched.stat().st_mtime
    except OSError:
        launch_age = float("inf")
    if min(registry.age(record.created_at), launch_age) < STARTING_GRACE:
        return "starting"  # a detached supervisor may still come up after its launcher died
    if launched.exists():
        settle.lost(paths, record)
    else:
        settle.cancelled_before_start(paths, record, QUEUER_GONE)
    registry.record(paths.dir)
    return "ended"
