"""How a run's supervisor is started: the ``Launcher`` protocol and its two launchers.

A launcher starts the supervisor of a prepared run and returns a handle with the subset of
``subprocess.Popen`` the kernel's side uses (``poll``, ``wait``, ``send_signal``, ``returncode``): the
process launcher (a detached child, its own session) and the tmux launcher (``lifecycle.tmux``: the
supervisor in a tmux session a person can attach to) and the Dask launcher (``lifecycle.dask_launcher``: the
supervisor as a task on a worker of a Dask cluster, ``executor="dask"``).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .handle import Run

__all__ = ["Launcher", "Process", "ProcessLauncher", "TmuxLauncher", "launcher_for", "executor_client",
           "spawn_supervisor"]


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
        return spawn_supervisor(run.dir, run.meta.get("cwd"))


def spawn_supervisor(run_dir: Path, cwd: str | None, env: dict[str, str] | None = None) -> subprocess.Popen:
    """``python -m nbsubagents.child.supervisor RUN_DIR``, detached (its own session), its output in
    ``supervisor.log``: how the process launcher, and the Dask task on a worker, start a run."""
    with open(run_dir / "supervisor.log", "ab") as log:
        return subprocess.Popen([sys.executable, "-m", "nbsubagents.child.supervisor", str(run_dir)],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
                                cwd=cwd, env=env)


class TmuxLauncher:
    """The supervisor in a tmux session of its own (``configure(runner="tmux")``, foreground runs)."""

    name = "tmux"

    def start(self, run: Run) -> Process:
        from .tmux import launch
        return launch(run)


def launcher_for(runner: str | None) -> Launcher:
    """The launcher a run's ``meta["runner"]`` names (the process launcher by default)."""
    if runner == "dask":
        from .dask_launcher import DaskLauncher
        return DaskLauncher()
    return TmuxLauncher() if runner == "tmux" else ProcessLauncher()


def executor_client(executor: str | None, dask_client: Any = None, cwd: str | Path | None = None) -> Any:
    """The Dask client a call's runs go to, checked (workers, shared project folder, pi on each), or None
    for the local executor. ``executor`` is the call's, else the setting's."""
    from ..config import NbSubagentsError, project_root, settings
    from ..pi import find_pi, pi_command
    chosen = settings.executor if executor is None else executor
    if chosen not in ("local", "dask"):
        raise NbSubagentsError(f'executor must be "local" or "dask", got {executor!r}')
    if chosen == "local":
        if dask_client is not None:
            raise NbSubagentsError('dask_client= is for executor="dask": pass both, or neither')
        return None
    from .dask_launcher import client_for, require_cluster
    from .spec import check_cwd
    client = client_for(client=dask_client)
    folder = check_cwd(cwd)
    require_cluster(client, project_root(folder), pi_command(find_pi(folder)))
    return client


def check_runner() -> None:
    """The tmux runner needs tmux: say so before any run is created."""
    from ..config import settings
    if settings.runner == "tmux":
        from .tmux import require_tmux
        require_tmux()
