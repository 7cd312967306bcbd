"""How a run's supervisor is started: the ``Launcher`` protocol and its two launchers.

A launcher starts the supervisor of a prepared run and returns a handle with the subset of
``subprocess.Popen`` the kernel's side uses (``poll``, ``wait``, ``send_signal``, ``returncode``): the
process launcher (a detached child, its own session) and the tmux launcher (``lifecycle.tmux``: the
supervisor in a tmux session a person can attach to). A remote engine would be a third.
"""

from __future__ import annotations

import subprocess
import sys
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from .handle import Run

__all__ = ["Launcher", "Process", "ProcessLauncher", "TmuxLauncher", "launcher_for"]


class Process(Protocol):
    """What the kernel's side needs of a started supervisor."""

    returncode: int | None

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...

    def send_signal(self, sig: int) -> None: ...


class Launcher(Protocol):
    name: str

    def start(self, run: Run) -> Process:
        """Start ``run``'s supervisor; a launcher that cannot start it settles the run (``lifecycle.settle``)."""
        ...


class ProcessLauncher:
    """The supervisor as a detached child process (its own session: a kernel interrupt does not reach it)."""

    name = "process"

    def start(self, run: Run) -> Process:
        with open(run.dir / "supervisor.log", "ab") as log:
            return subprocess.Popen([sys.executable, "-m", "nbsubagents.child.supervisor", str(run.dir)],
                                    stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
                                    cwd=run.meta.get("cwd"))


class TmuxLauncher:
    """The supervisor in a tmux session of its own (``configure(runner="tmux")``, foreground runs)."""

    name = "tmux"

    def start(self, run: Run) -> Process:
        from .tmux import launch
        return launch(run)


def launcher_for(runner: str | None) -> Launcher:
    """The launcher a run's ``meta["runner"]`` names (the process launcher by default)."""
    return TmuxLauncher() if runner == "tmux" else ProcessLauncher()


def check_runner() -> None:
    """The tmux runner needs tmux: say so before any run is created."""
    from ..config import settings
    if settings.runner == "tmux":
        from .tmux import require_tmux
        require_tmux()
