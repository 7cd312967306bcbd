"""The only writer of a run's result outside its supervisor.

A run's ``result.json`` comes from its supervisor, except for two kinds of run: one that never ran (a task
that failed its checks, a run cancelled while queued, a cell interrupted before the launch, a tmux session
that could not start) and one whose supervisor died without writing it (*lost*). This module writes those
results and nothing else does.

- Exclusively: the first settler wins, atomically (``atomic_write_json(..., exclusive=True)``, whose
  temporary names are unique per writer), so the watcher, ``Run.wait()``, the foreground loop and another
  kernel's reconcile may race on one run and it still gets one result.
- With one verdict on every path: a lost run is ``aborted`` ("cancelled") when a cancel was asked for it,
  else ``failed`` ("interrupted: supervisor exited without a result"; for a run on a Dask worker,
  "interrupted (worker lost)"). A cancel request is a file in the run
  directory (``cancel.json``), not a flag of one process's handle, so every process reaches the same verdict.
- Truthfully when the disk refuses the write: this process keeps the record (``unwritten``) and warns.
- Never into a deleted folder: a run whose ``meta.json`` is gone (its folder was deleted while it ran) is
  settled ``failed`` ("its run folder was deleted while it ran") in this process and in the registry, and no
  half folder is made for its result.
- Leaving nothing behind: a lost isolated run's worktree (and branch) is removed after what it changed is
  captured into ``changes.patch`` where that can still be done (``child.isolation.salvage``); the result
  says when it could not.
"""

from __future__ import annotations

import os
import threading
import time
import warnings
from pathlib import Path
from typing import Any

from .. import _registry as registry
from .._child import artifacts, keys, tree_end
from .._child.artifacts import RUN_DIR_GONE, RunPaths, atomic_write_json, read_json
from .._child.isolation import salvage
from .._child.procs import end_run_processes
from .._child.run_files import best_effort, exclusive, sync
from .._child.supervisor import CANCEL_FILE, WORKER_LOST
from .._child.record import RunRecord

__all__ = ["LOST", "WORKER_LOST", "CANCELLED", "NOT_STARTED", "request_cancel", "cancel_requested", "never_ran",
           "cancelled_before_start", "lost", "unwritten"]

LOST = "interrupted: supervisor exited without a result"
CANCELLED = "cancelled"
NOT_STARTED = "cancelled before it started"

_unwritten: dict[Path, dict[str, Any]] = {}  # results a full or read-only disk refused, by run dir
_lock = threading.Lock()


def request_cancel(paths: RunPaths, reason: str | None = None, stop_reason: str | None = None) -> None:
    """Record that a cancel was asked for (before any signal is sent): a lost run then ends ``aborted``. With a
    ``reason`` (a tree's budget, a parent that ended: ``child.tree_end``) the run's end says it; the first request's
    reason stands."""
    try:
        tree_end.request(paths.dir, reason, stop_reason)
    except OSError:
        pass  # the signal still goes; only the verdict of a supervisor that dies without a result is at stake


def cancel_requested(paths: RunPaths) -> bool:
    return (paths.dir / CANCEL_FILE).exists()


def _gone(paths: RunPaths, record: RunRecord) -> bool:
    """The verdict of a run whose folder was deleted while it ran: kept by this process (``unwritten``) and
    written to its registry row; False when this process had settled it already."""
    with _lock:
        if paths.dir in _unwritten:
            return False
        now = artifacts.iso(time.time())
        _unwritten[paths.dir] = artifacts.result_record(record.run_id or paths.dir.name, "failed",
                                                        error=RUN_DIR_GONE, started_at=now, ended_at=now,
                                                        duration=0.0, stop_reason="run_dir_deleted")
    registry.note(paths.dir)
    return True


def unwritten(paths: RunPaths) -> dict[str, Any] | None:
    """The result this process settled but could not write (the disk refused it), else None."""
    with _lock:
        return _unwritten.get(paths.dir)


def never_ran(paths: RunPaths, record: RunRecord, status: str, message: str, reason: str | None = None) -> bool:
    """The result of a run whose supervisor never started: now, 0 s; its stop reason ``reason``, else
    ``cancelled`` for an aborted one and ``not_started`` for a failed one. False when it already had one."""
    best_effort(sync, paths.meta)  # prepare leaves meta.json's fsync to the supervisor, which never came
    reason = reason or ("cancelled" if status == "aborted" else "not_started")
    return _write(paths, record, status, message, reason, lost=False)


def cancelled_before_start(paths: RunPaths, record: RunRecord, why: str | None = None) -> bool:
    """A run that was still queued when a person's cancel came: ``aborted``, never ran, stop reason
    ``cancelled`` (final: an experiment's resume and ``retries`` keep it). With ``why`` (the cell, call or
    process that queued it went, and nobody cancelled it): ``aborted``, stop reason ``not_started``, and a
    resume starts its cell again. False when it already had a result."""
    if why is None:
        return never_ran(paths, record, "aborted", NOT_STARTED)
    return never_ran(paths, record, "aborted", f"{NOT_STARTED}: {why}", "not_started")


def lost(paths: RunPaths, record: RunRecord, *, exit_code: int | None = None, worker_lost: bool = False) -> bool:
    """Settle a run whose supervisor exited without a result: its leftover processes are ended first (pi
    outlives a killed supervisor), then an isolated run's workspace is dealt with as its supervisor would
    have (changes captured if they still can be, the worktree and its branch removed), then the one
    verdict is written. ``worker_lost``: its launcher says the machine it ran on is gone (a Dask worker), which
    the verdict says as the supervisor itself would. False when it already had a result."""
    end_run_processes(record.run_id or paths.dir.name)  # SIGKILL, until none is left
    if not record.isolation:
        return _lost(paths, record, exit_code, {}, worker_lost)
    lock = paths.dir / ".settle.lock"
    with exclusive(lock):  # one settler at a time works in the run's workspace
        if paths.result.exists():
            return False
        written = _lost(paths, record, exit_code, _salvage(paths), worker_lost)
        if paths.result.exists():  # later settlers see the result first; the lock is not needed any more
            try:
                lock.unlink()
            except OSError:
                pass
        return written


def _lost(paths: RunPaths, record: RunRecord, exit_code: int | None, extra: dict[str, Any],
          worker_lost: bool) -> bool:
    if cancel_requested(paths):
        status, message, reason = tree_end.verdict(paths.dir)  # "aborted", CANCELLED, or the reason it was asked with
    elif worker_lost:
        status, message, reason = "failed", WORKER_LOST, "worker_lost"  # as its supervisor says it, when it can
    else:
        status, message = "failed", LOST + (f" (exit code {exit_code})" if exit_code is not None else "")
        reason = "interrupted"
    if extra.get("changesError"):
        message += f"; {extra['changesError']}"
    return _write(paths, record, status, message, reason, lost=True, extra=extra)


def _salvage(paths: RunPaths) -> dict[str, Any]:
    """An isolated run's workspace, left by its dead supervisor: ``child.isolation.salvage``, never raising."""
    try:
        return salvage(paths.dir)
    except Exception as exc:  # the verdict is written all the same; the result says what went wrong
        return {"changesError": f"the run's workspace could not be cleaned up: {exc}"}


def _write(paths: RunPaths, record: RunRecord, status: str, message: str, reason: str, *, lost: bool,
           extra: dict[str, Any] | None = None) -> bool:
    """A lost run keeps its real start (``supervisor.json``, else ``meta.json``) and ends at its last event,
    the last evidence that it was alive, not at the moment someone noticed."""
    if paths.result.exists():
        return False
    if not paths.meta.exists():  # its folder was deleted: no half folder is made for the result
        return _gone(paths, record)
    try:
        os.unlink(paths.dir / ".result-reserve")  # a dead supervisor's reserved space (supervisor.RESERVE)
    except OSError:
        pass
    now = time.time()
    started = ended = now
    if lost:
        sup = read_json(paths.supervisor) or {}
        started = artifacts.parse_iso(sup.get("startedAt")) or artifacts.parse_iso(record.created_at) or now
        ended = max(started, artifacts.last_event_time(paths.events) or started)
    run_id = record.run_id or paths.dir.name
    record = artifacts.result_record(run_id, status, error=message, started_at=artifacts.iso(started),
                                     ended_at=artifacts.iso(ended), duration=round(ended - started, 3),
                                     stop_reason=reason)
    record.update(extra or {})
    keys.forget(paths.dir.name)  # an ended run takes no message
    try:
        return atomic_write_json(paths.result, record, exclusive=True)  # another settler may have been first
    except OSError as exc:  # a full or read-only disk: this process still knows the truth
        warnings.warn(f"nbsubagents: could not write {paths.result} ({exc.strerror or exc}); "
                      f"run {run_id} is {status} in this process only", RuntimeWarning, stacklevel=3)
        with _lock:
            _unwritten[paths.dir] = record
        return True
