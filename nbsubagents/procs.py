"""Process identity on Linux: is this pid still *that* process, and which processes belong to a run.

A pid alone is not an identity (pids are reused, and an orphan nobody reaps stays a zombie), so
every check takes the pid together with its start time in clock ticks (``/proc/<pid>/stat`` field
22), and a zombie counts as gone. A run's child processes carry ``PI_SUBAGENTS_RUN_ID=<runId>`` in
their environment (set by the supervisor), which is how leftovers of a dead supervisor are found.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

from .supervisor import process_start_ticks

__all__ = ["process_start_ticks", "alive", "run_processes", "kill_run_processes"]

_HAVE_PROC = os.path.isdir("/proc/self")


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, process group, start ticks) of a pid, or None when it does not exist."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
        rest = stat[stat.rindex(b")") + 2:].split()
        return rest[0].decode(), int(rest[2]), int(rest[19])
    except (OSError, ValueError, IndexError):
        return None


def alive(pid: Any, start_ticks: Any) -> bool:
    """True while ``pid`` is the same, not yet exited process that started at ``start_ticks``."""
    if isinstance(pid, bool) or not isinstance(pid, int) or pid <= 0:
        return False
    if not _HAVE_PROC:  # no /proc (not Linux): the pid alone, the best there is
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass
        return True
    if start_ticks is None:
        return False
    stat = _stat(pid)
    return stat is not None and stat[0] not in ("Z", "X") and stat[2] == start_ticks


def _environ_has(pid: int, entry: bytes) -> bool:
    try:
        return entry in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False


def run_processes(run_id: str) -> list[int]:
    """Live processes started for run ``run_id`` (pi and whatever its tools spawned)."""
    if not run_id or not _HAVE_PROC:
        return []
    marker = f"PI_SUBAGENTS_RUN_ID={run_id}".encode()
    me = os.getpid()
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        pid = int(entry.name)
        stat = _stat(pid)
        if stat is None or stat[0] in ("Z", "X"):
            continue
        if _environ_has(pid, marker):
            found.append(pid)
    return found


def kill_run_processes(run_id: str) -> list[int]:
    """SIGKILL every live process of run ``run_id`` (after its supervisor died); returns their pids."""
    pids = run_processes(run_id)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    return pids
