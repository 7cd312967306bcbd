"""Making the registry truthful after kernels came and went: the only place that settles, takes over and
announces runs this process did not follow.

A run whose ``result.json`` exists is ingested; one whose supervisor is gone (pid *and* start time, zombies
count as gone) without a result is settled (``lifecycle.settle``: its leftover processes are ended, then its
one verdict is written); a live one whose owner is gone can get this process's watcher back; runs that ended
while nobody watched are announced once across processes (``registry.claim``).

Called by explicit ``status()``, by a process's first use of a project (``first_use``) and by the status
bars' clock; reads (``runs()``, a bar's or a browser's refresh) never call it.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import registry
from ..child import procs
from ..child.artifacts import RunPaths, read_json
from . import settle

if TYPE_CHECKING:
    from ..registry import Status
    from .handle import Run

__all__ = ["check", "settle_undriven", "reconcile", "announce_finished_while_away", "first_use", "first_use_of", "status"]

STARTING_GRACE = 10.0   # seconds a run without supervisor.json may still be starting
AWAY_GRACE = 60.0       # a live owner's watcher announces within this; after it anyone may
QUEUER_GONE = "the process that queued it exited"

_first: set[Path] = set()  # projects this process has announced "finished while away" for
_lock = threading.Lock()


def _owner_alive(row: dict[str, Any]) -> bool:
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
    meta = read_json(paths.meta) or {}
    if meta.get("runner") == "dask":
        return _check_remote(paths, meta, row)
    if row.get("host") and row["host"] != registry.HOST:
        return "owned"  # started on another machine sharing this folder
    sup = read_json(paths.supervisor)
    if sup and sup.get("pid") is not None:
        if procs.alive(sup.get("pid"), sup.get("startTicks")):
            if row.get("supervisor_pid") is None or row.get("status") != "running":
                registry.record(paths.dir)
            return "live"
        if not paths.result.exists():  # it writes result.json before it exits
            settle.lost(paths, meta)
        registry.record(paths.dir)
        return "ended"
    # No supervisor yet: queued in a live process's drive, starting, or never launched.
    launcher = meta.get("launcher") or {}
    if procs.alive(launcher.get("pid"), launcher.get("startTicks")):
        return "owned"
    launched = paths.dir / "supervisor.log"
    if launcher and not launched.exists() and meta.get("runner") == "process":
        # The process launcher opens supervisor.log before it spawns: its launcher died without launching it.
        settle.cancelled_before_start(paths, meta, QUEUER_GONE)
        registry.record(paths.dir)
        return "ended"
    try:
        launch_age = time.time() - launched.stat().st_mtime
    except OSError:
        launch_age = float("inf")
    if min(registry.age(meta.get("createdAt")), launch_age) < STARTING_GRACE:
        return "starting"  # a detached supervisor may still come up after its launcher died
    if launched.exists():
        settle.lost(paths, meta)
    else:
        settle.cancelled_before_start(paths, meta, QUEUER_GONE)
    registry.record(paths.dir)
    return "ended"


def _check_remote(paths: RunPaths, meta: dict[str, Any], row: dict[str, Any]) -> str:
    """A run on a Dask worker: its heartbeat (or its pid, on this host) says whether it is alive; one whose
    worker died ends ``failed: interrupted (worker lost)``. A queued one waits for a worker ("owned")."""
    from .dask_launcher import liveness
    state = liveness(paths)
    if state == "queued":
        return "owned"
    if state == "live":
        if row.get("supervisor_pid") is None or row.get("status") != "running":
            registry.record(paths.dir)
        return "live"
    if state == "gone":
        settle.lost(paths, meta)
    registry.record(paths.dir)
    return "ended"


def _in_kernel() -> bool:
    return "ipykernel" in sys.modules


def reconcile(root: str | Path | None = None, *, reattach: bool | None = None) -> list[Run]:
    """Settle every active row; returns the runs still live. With ``reattach`` (default: in a
    kernel) live runs whose owner process is gone get this process's watcher."""
    from . import watcher
    from .handle import Run

    db = registry.db_path(root)
    if not db.exists() and not db.parent.joinpath("runs").is_dir():
        return []
    registry.ensure_loaded(db)
    reattach = _in_kernel() if reattach is None else reattach
    live = []
    for row in registry.fetch(db, "SELECT * FROM runs WHERE status IN ('queued', 'running')"):
        try:
            verdict = check(Path(row["run_dir"]), row)
        except OSError:
            continue
        if verdict != "live":
            continue
        run = Run(row["run_dir"])
        live.append(run)
        if reattach and not _owner_alive(row) and registry.take_over(db, row):
            watcher.watch(run)
    return live


def announce_finished_while_away(root: str | Path | None = None) -> list[dict[str, Any]]:
    """Announce (once, across processes) runs that ended while no process watched them."""
    db = registry.db_path(root)
    if not db.exists():
        return []
    reconcile(root)
    claimed = []
    for row in registry.fetch(db, "SELECT * FROM runs WHERE announced = 0 AND status IN "
                                  "('completed', 'failed', 'aborted') ORDER BY ended_at"):
        if _owner_alive(row) and registry.age(row.get("ended_at")) < AWAY_GRACE:
            continue  # its own watcher announces it
        if registry.claim(row["run_id"], db):
            row["announced"] = 1
            claimed.append(row)
    if claimed:
        from . import watcher
        for row in claimed:
            watcher.notify(row, away=True)
        watcher.changed()
    return claimed


def first_use(root: str | Path | None = None) -> None:
    """What a process does once per project: sync, reconcile, announce what finished while away."""
    db = registry.db_path(root)
    with _lock:
        fresh = db not in _first
        _first.add(db)
    if fresh:
        announce_finished_while_away(root)


def first_use_of(runs: list[Run]) -> None:
    """``first_use`` for the projects of ``runs``: the first call after a restart brings the news, whichever
    call it is. A registry problem never fails a run: it is a warning."""
    import sqlite3
    import warnings

    for root in dict.fromkeys(Path(r.dir).parents[3] for r in runs):  # <root>/.pi/subagents/runs/<id>
        try:
            first_use(root)
        except (sqlite3.Error, OSError) as exc:
            warnings.warn(f"nbsubagents: the run registry of {root} could not be read ({exc}); runs still work, "
                          "and nbsubagents.registry.rebuild() recreates it", RuntimeWarning, stacklevel=3)


def forget(root: str | Path | None = None) -> None:
    """Forget that this process used the project (its next first use reconciles again)."""
    with _lock:
        _first.discard(registry.db_path(root))


def status(run_id: str | None = None, *, include_completed: bool = False, root: str | Path | None = None,
           announce: bool = True) -> Status:
    """``nbsubagents.status()``: reconcile (and announce what finished while away), then the registry's
    counts and rows: active runs by default, every run with ``include_completed``, one with ``run_id``."""
    db = registry.db_path(root)
    if announce:
        with _lock:
            _first.add(db)
        announce_finished_while_away(root)  # reconciles first
    else:
        reconcile(root, reattach=False)
    return registry.snapshot(run_id, include_completed=include_completed, root=root)


UNDRIVEN = "the call that queued it ended"


def settle_undriven(run_dir: Path, row: dict[str, Any] | None = None) -> str:
    """``check`` for a caller that knows no call of this process drives the run any more (an experiment
    resuming its own cells): it waits while the run is starting (until it shows or its grace ends), and a run
    this very process queued but never launched is cancelled before its start instead of left "owned"."""
    deadline = time.monotonic() + STARTING_GRACE + 5
    while (verdict := check(run_dir, row)) == "starting" and time.monotonic() < deadline:
        time.sleep(0.1)
    paths = RunPaths(Path(run_dir))
    meta = read_json(paths.meta) or {}
    if (verdict == "owned" and (meta.get("launcher") or {}).get("pid") == os.getpid()
            and not (paths.dir / "supervisor.log").exists()):
        settle.cancelled_before_start(paths, meta, UNDRIVEN)
        registry.record(paths.dir)
        return "ended"
    return verdict
