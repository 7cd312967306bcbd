"""The process launcher: a run's supervisor as a detached child process of this machine (its own session, so a
kernel interrupt does not reach it). The Dask task on a worker starts the supervisor the same way."""

from __future__ import annotations

import os
import select
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._child.artifacts import RunPaths, open_append
from .._child.procs import WORKER_PID
from .._child.record import RunRecord

if TYPE_CHECKING:
    from .handle import Run
    from .launch import Process

__all__ = ["ProcessLauncher", "spawn_supervisor", "supervisor_argv", "wait_any"]

# The folder this package is imported from: the supervisor imports it from there, whatever its cwd.
_PACKAGE_PARENT = str(Path(__file__).resolve().parents[2])
# The supervisor finds the package where this process found it, in the place of the run's cwd on its path (a module
# of the user's project, such as a ``signal.py``, cannot shadow one it imports). Its own children (pi, a reply
# check) get the environment unchanged.
_SUPERVISOR_CODE = ("import sys; sys.path[0] = sys.argv[1]; from nbsubagents._child.supervisor import exit_now, main; "
                    "exit_now(main(sys.argv[2:]))")


def supervisor_argv(run_dir: Path) -> list[str]:
    """The argv of a run's supervisor: ``main(RUN_DIR)`` of ``nbsubagents._child.supervisor`` (as
    ``python -m nbsubagents._child.supervisor RUN_DIR``, without the cwd on its path)."""
    return [sys.executable, "-c", _SUPERVISOR_CODE, _PACKAGE_PARENT, str(run_dir)]


def spawn_supervisor(run_dir: Path, cwd: str | None, env: dict[str, str] | None = None) -> subprocess.Popen:
    """The run's supervisor, detached (its own session), its output in ``supervisor.log``: how the process
    launcher, and the Dask task on a worker, start a run."""
    with open_append(run_dir / "supervisor.log") as log:
        return subprocess.Popen(supervisor_argv(run_dir), stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                start_new_session=True, cwd=cwd, env=env)


def start_supervisor(run_dir: Path, cwd: str | None, *, end_with_parent: bool = False) -> subprocess.Popen:
    """The run's supervisor (``spawn_supervisor``). ``end_with_parent``: the supervisor ends its run when this
    process dies: a Dask worker's runs."""
    return spawn_supervisor(run_dir, cwd, {**os.environ, WORKER_PID: str(os.getpid())} if end_with_parent else None)


def wait_any(processes: list[Process], timeout: float) -> None:
    """Return as soon as one of ``processes`` has exited, or after ``timeout`` seconds.

    Supervisors this process started are waited for through pidfds (Linux): the wait ends the moment one exits,
    not at the next poll. Anything else (a tmux pane's handle; no pidfd here) is waited
    for by the first one's own ``wait(timeout)``. A Dask run's handles have their own wait
    (``DaskLauncher.wait_any``)."""
    fds: list[int] = []
    try:
        if processes and all(_pidfd_able(p) for p in processes):
            poller = select.poll()
            for proc in processes:
                fds.append(os.pidfd_open(proc.pid))  # our unreaped child: its pid cannot have been reused
                poller.register(fds[-1], select.POLLIN)
            poller.poll(timeout * 1000)
            return
    except (AttributeError, OSError):  # no os.pidfd_open (not Linux, Python < 3.9), a kernel without it
        pass
    finally:
        for fd in fds:
            os.close(fd)
    if processes:
        try:
            processes[0].wait(timeout)
        except subprocess.TimeoutExpired:
            pass


def _pidfd_able(proc: Process) -> bool:
    """A running supervisor whose exit a pidfd shows: our child."""
    return isinstance(proc, subprocess.Popen) and proc.returncode is None


class ProcessLauncher:
    """The supervisor as a detached child process (its own session: a kernel interrupt does not reach it)."""

    name = "process"
    remote = False
    log_before_start = True  # supervisor.log is opened before the spawn: no log, never launched

    def start(self, run: Run) -> Process:
        return start_supervisor(run.dir, run.record.cwd)

    def cancel(self, run: Run) -> bool | None:
        return None  # a local supervisor: the request file and a signal to its pid (Run.cancel)

    def check(self, paths: RunPaths, record: RunRecord, row: dict[str, Any]) -> str | None:
        return None  # a local supervisor: its pid says (reconcile.check)

    def slots(self, runs: list[Run]) -> int | None:
        return None  # this machine: the call's concurrency bounds its runs

    def require(self) -> None:
        """Nothing to check: a process can always be started."""

    def wait_any(self, processes: list[Process], timeout: float) -> None:
        wait_any(processes, timeout)
