"""The process launcher: a run's supervisor as a detached child process of this machine (its own session, so a
kernel interrupt does not reach it). The Dask task on a worker starts the supervisor the same way."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..child.artifacts import RunPaths

if TYPE_CHECKING:
    from .handle import Run

__all__ = ["ProcessLauncher", "spawn_supervisor"]


def spawn_supervisor(run_dir: Path, cwd: str | None, env: dict[str, str] | None = None) -> subprocess.Popen:
    """``python -m nbsubagents.child.supervisor RUN_DIR``, detached (its own session), its output in
    ``supervisor.log``: how the process launcher, and the Dask task on a worker, start a run."""
    with open(run_dir / "supervisor.log", "ab") as log:
        return subprocess.Popen([sys.executable, "-m", "nbsubagents.child.supervisor", str(run_dir)],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
                                cwd=cwd, env=env)


class ProcessLauncher:
    """The supervisor as a detached child process (its own session: a kernel interrupt does not reach it)."""

    name = "process"
    remote = False
    log_before_start = True  # supervisor.log is opened before the spawn: no log, never launched

    def start(self, run: Run) -> subprocess.Popen:
        return spawn_supervisor(run.dir, run.meta.get("cwd"))

    def cancel(self, run: Run) -> bool | None:
        return None  # a local supervisor: the request file and a signal to its pid (Run.cancel)

    def check(self, paths: RunPaths, meta: dict[str, Any], row: dict[str, Any]) -> str | None:
        return None  # a local supervisor: its pid says (reconcile.check)

    def require(self) -> None:
        """Nothing to check: a process can always be started."""
