"""Process identity and ending a run's processes on Linux.

A pid alone is not an identity (pids are reused, and an orphan nobody reaps stays a zombie), so
every check takes the pid together with its start time in clock ticks (``/proc/<pid>/stat`` field
22), and a zombie counts as gone.

A run's processes are found two ways, and ``end_run_processes`` uses both:

- the environment marker ``PI_SUBAGENTS_RUN_ID=<runId>``, which the supervisor gives pi and which
  every tool process inherits: this is how the leftovers of a dead supervisor are found;
- descent: the supervisor makes itself the *child subreaper* (``prctl(PR_SET_CHILD_SUBREAPER)``),
  so a tool process that left pi's tree (pi starts bash commands in process groups of their own,
  and a command may daemonize or clear its environment) is re-parented to the supervisor instead
  of init, and is still its descendant when the run ends.

Standard library only and no ``typing`` import: the supervisor imports this module at its start.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time

from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from typing import Any, Iterable

__all__ = ["process_start_ticks", "alive", "run_processes", "descendants",
           "end_run_processes", "reap_children", "become_subreaper", "contained_argv", "MARKER", "WORKER_PID"]

MARKER = "PI_SUBAGENTS_RUN_ID"
WORKER_PID = "NBSUBAGENTS_WORKER_PID"  # the process whose death ends a supervisor's run (a Dask worker's)
_HAVE_PROC = os.path.isdir("/proc/self")
PR_SET_CHILD_SUBREAPER = 36
PR_SET_PDEATHSIG = 1


def _stat(pid: int) -> tuple[str, int, int, int] | None:
    """(state, parent pid, process group, start ticks) of a pid, or None when it does not exist."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
        rest = stat[stat.rindex(b")") + 2:].split()
        return rest[0].decode(), int(rest[1]), int(rest[2]), int(rest[19])
    except (OSError, ValueError, IndexError):
        return None


def process_start_ticks(pid: int) -> int | None:
    """The kernel's start time of a pid: with the pid it identifies a process despite pid reuse."""
    stat = _stat(pid)
    return stat[3] if stat is not None else None


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
    return stat is not None and stat[0] not in ("Z", "X") and stat[3] == start_ticks


def _environ_has(pid: int, entry: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            return entry in fh.read().split(b"\0")
    except OSError:
        return False


def _live_pids() -> dict[int, int]:
    """Every live (not zombie) process other than this one, with its parent pid."""
    out: dict[int, int] = {}
    if not _HAVE_PROC:
        return out
    me = os.getpid()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        stat = _stat(int(name))
        if stat is not None and stat[0] not in ("Z", "X"):
            out[int(name)] = stat[1]
    return out


def run_processes(run_id: str, table: dict[int, int] | None = None) -> list[int]:
    """Live processes carrying run ``run_id``'s environment marker (pi and whatever its tools spawned)."""
    if not run_id or not _HAVE_PROC:
        return []
    marker = f"{MARKER}={run_id}".encode()
    return [pid for pid in (table if table is not None else _live_pids()) if _environ_has(pid, marker)]


def descendants(root: int, table: dict[int, int] | None = None) -> list[int]:
    """Live descendants of ``root`` (children, their children, ...)."""
    table = table if table is not None else _live_pids()
    children: dict[int, list[int]] = {}
    for pid, ppid in table.items():
        children.setdefault(ppid, []).append(pid)
    found, todo = [], list(children.get(root, ()))
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, ()))
    return found


def send(pid: int, sig: int) -> bool:
    """Signal ``pid``; False when it is gone (also when it ended after whoever chose it last looked)."""
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def send_group(pgid: int, sig: int) -> bool:
    """Signal the process group ``pgid`` (a child started in a session of its own); False when it is gone."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _signal_all(pids: Iterable[int], sig: int) -> None:
    for pid in pids:
        send(pid, sig)


def reap_children() -> bool:
    """Collect exited children (a subreaper inherits orphans; their zombies are ours to reap); whether a child
    is still running."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return False
        if pid == 0:
            return True


def end_run_processes(run_id: str | None, *, subtree_of: int | None = None, sig: int = signal.SIGKILL,
                      settle: float = 2.0, reap: bool = True) -> list[int]:
    """Signal every live process of a run: marked with ``run_id`` and/or descended from ``subtree_of``.

    With SIGKILL (the default) it repeats until none is left (a process may fork while it is being
    ended) or ``settle`` seconds pass, reaping this process's exited children (unless ``reap`` is
    false: a caller that still waits for a child of its own must not have its exit status taken);
    returns the pids it signalled. ``subtree_of`` is meant for the supervisor (itself), the caller
    that inherits orphans.
    """
    reap = reap and subtree_of == os.getpid()
    ended: list[int] = []
    deadline = time.monotonic() + settle
    while True:
        table = _live_pids()
        pids = set(run_processes(run_id, table)) if run_id else set()
        if subtree_of is not None:
            pids.update(descendants(subtree_of, table))
        if not pids:
            break
        _signal_all(sorted(pids), sig)
        ended.extend(p for p in pids if p not in ended)
        if sig != signal.SIGKILL or time.monotonic() >= deadline:
            break
        time.sleep(0.02)
        if reap:
            reap_children()
    if reap:
        reap_children()
    return ended


def become_subreaper() -> bool:
    """Make this process the child subreaper of its descendants (Linux); False where that is not possible."""
    try:

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError, ImportError):
        return False


# -- a command whose whole process tree ends with it (shell checks) -------------------------------------------
def contained_argv(argv: list[str]) -> list[str]:
    """``argv`` run by a keeper process (``keep_main``): the keeper is the subreaper of the command's tree, so
    when the command exits, or the keeper gets SIGTERM/SIGINT/SIGHUP, or the process that started the keeper
    dies, every process the command left (backgrounded with ``&``, ``nohup``, ``setsid``, daemonized) is
    killed; the keeper exits with the command's status (127 when it cannot start). The keeper imports this
    package from where this process has it, whatever folder the command runs in."""
    package_parent = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from nbsubagents._child.procs import keep_main; "
            "sys.exit(keep_main(sys.argv[2:]))")
    return [sys.executable, "-c", code, package_parent, str(os.getpid()), "--", *argv]


def keep_main(args: list[str]) -> int:
    """The keeper's entry point: ``PARENT_PID -- COMMAND [ARG...]`` (see ``contained_argv``)."""
    if len(args) < 3 or args[1] != "--" or not args[0].isdigit():
        sys.stderr.write("usage: keep_main PARENT_PID -- COMMAND [ARG...]\n")
        return 2
    return _keep(int(args[0]), args[2:])


def _set_parent_death_signal(sig: int) -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _keep(parent: int, argv: list[str]) -> int:
    """The keeper's body (see ``contained_argv``)."""
    me = os.getpid()

    def end(signum: int, _frame: object) -> None:
        end_run_processes(None, subtree_of=me)
        os._exit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, end)
    become_subreaper()
    _set_parent_death_signal(signal.SIGTERM)
    if os.getppid() != parent:  # the starter died before the death signal was set
        return 128 + signal.SIGTERM
    try:
        child = subprocess.Popen(argv)  # in the keeper's process group: a kill of the group reaches it too
    except OSError as exc:
        sys.stderr.write(f"could not start: {exc}\n")
        return 127
    code = child.wait()
    end_run_processes(None, subtree_of=me)
    return code if code >= 0 else 128 - code

