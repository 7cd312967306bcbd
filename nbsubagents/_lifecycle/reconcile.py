"""Making the registry truthful after kernels came and went: the only place that settles, takes over and
announces runs this process did not follow.

One run's verdict (``check``) is ``lifecycle.liveness``'s, which the watcher's clock also asks. A run whose
``result.json`` exists is ingested; one whose supervisor is gone (pid *and* start time, zombies
count as gone) without a result is settled (``lifecycle.settle``: its leftover processes are ended, then its
one verdict is written); a live one whose owner is gone can get this process's watcher back; runs that ended
while nobody watched are announced once across processes (``registry.claim``), and only where they belong
(``ours``): in the process that started them, the notebook or kernel that started them (reopened or restarted),
or, for runs started outside a notebook, another process outside one; never in an unrelated notebook's cell.

Called by explicit ``status()``, by a process's first use of a project (``first_use``) and by the status
bars' clock; reads (``runs()``, a bar's or a browser's refresh) never call it.
"""

from __future__ import annotations

import os
import sqlite3
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import _registry as registry
from .._child.artifacts import RunPaths
from .._child.record import blank
from . import settle, watcher
from .handle import Run
from .liveness import QUEUER_GONE, STARTING_GRACE, check, owner_alive

if TYPE_CHECKING:
    from .._registry import Status

__all__ = ["QUEUER_GONE", "STARTING_GRACE", "check", "settle_undriven", "reconcile", "announce_finished_while_away",
           "first_use", "first_use_of", "ours", "status"]

AWAY_GRACE = 60.0       # a live owner's watcher announces within this; after it anyone may

_first: set[Path] = set()  # projects this process has announced "finished while away" for
_lock = threading.Lock()


def _in_kernel() -> bool:
    return "ipykernel" in sys.modules


def _ours_sql() -> tuple[str, tuple[Any, ...]]:
    """The SQL condition (and its arguments) of ``ours``: a row started by this process, this kernel (its id outlives
    a restart), this notebook (a reopened one has a new kernel), or, here outside a notebook and a kernel, by another
    process outside them (a script hears of a script's runs)."""
    me = registry.launcher_identity()
    kernel, notebook = me.get("kernel"), me.get("notebook")
    sql = ["(launcher_pid = ? AND launcher_ticks IS ? AND host IS ?)"]
    args: list[Any] = [me["pid"], me["startTicks"], me["host"]]
    if kernel:
        sql.append("kernel = ?")
        args.append(kernel)
    if notebook:
        sql.append("notebook = ?")
        args.append(notebook)
    if not kernel and not notebook:
        sql.append("(kernel IS NULL AND notebook IS NULL)")
    return f"({' OR '.join(sql)})", tuple(args)


def ours(db: Path, run_id: str) -> bool:
    """Whether the end of a run is news for this process (the place that started it, ``_ours_sql``): only there is
    its notice printed, so no "completed while away" of another notebook lands in this one's cell."""
    where, args = _ours_sql()
    return bool(registry.fetch(db, f"SELECT run_id FROM runs WHERE run_id = ? AND {where}", (run_id, *args)))


def reconcile(root: str | Path | None = None, *, reattach: bool | None = None) -> list[Run]:
    """Settle every active row; returns the runs still live. With ``reattach`` (default: in a
    kernel) live runs whose owner process is gone get this process's watcher."""

    db = registry.db_path(root)
    if not db.exists() and not db.parent.joinpath("runs").is_dir():
        return []
    registry.ensure_loaded(db)
    reattach = _in_kernel() if reattach is None else reattach
    live = []
    for row in registry.fetch(db, f"SELECT * FROM runs WHERE status IN {registry.ACTIVE_SQL}"):
        try:
            verdict = check(Path(row["run_dir"]), row)
        except OSError:
            continue
        if verdict != "live":
            continue
        run = Run(row["run_dir"])
        if orphaned(db, row):  # its parent ended (or was killed) and left it going: it ends as its parent's would have
            settle.request_cancel(run.paths, f"its parent run {row['parent']} ended", "parent_ended")
            run.cancel()
        live.append(run)
        if reattach and not owner_alive(row) and registry.take_over(db, row):
            watcher.watch(run, announce=ours(db, row["run_id"]))  # another notebook's run: its notebook announces it
    return live


def orphaned(db: Path, row: dict[str, Any]) -> bool:
    """Whether a live delegated run's parent has ended: its supervisor settles its sub-runs as it ends, so one
    still going had a parent that was killed (issue 58)."""
    if not row.get("parent"):
        return False
    found = registry.fetch(db, f"SELECT run_id FROM runs WHERE run_id = ? AND status IN {registry.TERMINAL_SQL}",
                           (row["parent"],))
    return bool(found)


def announce_finished_while_away(root: str | Path | None = None) -> list[dict[str, Any]]:
    """Announce (once, across processes) runs that ended while no process watched them, of those that are ``ours``
    (the others wait for their own notebook, and show in the status bars meanwhile)."""
    db = registry.db_path(root)
    if not db.exists():
        return []
    reconcile(root)
    claimed = []
    where, args = _ours_sql()
    for row in registry.fetch(db, f"SELECT * FROM runs WHERE announced = 0 AND status IN {registry.TERMINAL_SQL} "
                                  f"AND {where} ORDER BY ended_at", args):
        if (owner_alive(row) and row.get("owner_pid") == row.get("launcher_pid")
                and registry.age(row.get("ended_at")) < AWAY_GRACE):
            continue  # its launcher's watcher announces it (one that took it over announces only its own)
        if registry.claim(row["run_id"], db):
            row["announced"] = 1
            claimed.append(row)
    if claimed:
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

    for root in dict.fromkeys(r.project for r in runs):
        try:
            first_use(root)
        except (sqlite3.Error, OSError) as exc:
            warnings.warn(f"nbsubagents: the run registry of {root} could not be read ({exc}); runs still work, "
                          "and nbsubagents.rebuild_registry() recreates it", RuntimeWarning, stacklevel=3)


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
    record = blank(paths.dir)
    if (verdict == "owned" and (record.launcher or {}).get("pid") == os.getpid()
            and not (paths.dir / "supervisor.log").exists()):
        settle.cancelled_before_start(paths, record, UNDRIVEN)
        registry.record(paths.dir)
        return "ended"
    return verdict
