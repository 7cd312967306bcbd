"""How a run's supervisor is started: the ``Launcher`` protocol and the launchers, registered by name.

A launcher starts the supervisor of a prepared run and returns a handle with the subset of
``subprocess.Popen`` the kernel's side uses (``poll``, ``wait``, ``send_signal``, ``returncode``), and says how
such a run is cancelled and judged alive: the process launcher (``lifecycle.process``: a detached child, its own
session), the tmux launcher (``lifecycle.tmux``: the supervisor in a tmux session a person can attach to) and the
Dask launcher (``lifecycle.dask_launcher``: the supervisor as a task on a worker of a Dask cluster,
``executor="dask"``). Only the launchers know what their runner's name means.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from .._child.artifacts import RunPaths
from .._config import NbSubagentsError, Settings, current, project_root
from .._pi import find_pi, pi_command
from .._child.record import RunRecord
from .dask_cluster import require_cluster
from .dask_launcher import DaskLauncher, client_for
from .process import ProcessLauncher
from .spec import check_cwd
from .tmux import TmuxLauncher

if TYPE_CHECKING:
    from .handle import Run

__all__ = ["LAUNCHERS", "Launcher", "Process", "check_runner", "executor_client", "launcher_for", "register"]


class Process(Protocol):
    """What the kernel's side needs of a started supervisor."""

    returncode: int | None

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...

    def send_signal(self, sig: int) -> None: ...


class Launcher(Protocol):
    """Everything that differs between runners, so nothing outside the launchers asks a run's runner by name."""

    name: str               # what a run record's ``runner`` says
    remote: bool            # the supervisor runs elsewhere: a run is queued until its supervisor.json shows
    log_before_start: bool  # supervisor.log exists once it launched anything: none means it never launched

    def start(self, run: Run) -> Process:
        """Start ``run``'s supervisor; a launcher that cannot start it settles the run (``lifecycle.settle``)."""
        ...

    def cancel(self, run: Run) -> bool | None:
        """Ask the supervisor to stop this launcher's way (False: it had ended); None: the local way applies
        (the request file, then a signal to its pid: ``Run.cancel``)."""
        ...

    def check(self, paths: RunPaths, record: RunRecord, row: dict[str, Any]) -> str | None:
        """``reconcile.check``'s verdict for a run only this launcher can judge ("live", "owned", "ended"), settling
        it if it is gone; None: judge it by its supervisor's pid on this machine."""
        ...

    def require(self) -> None:
        """Raise ``NbSubagentsError`` if this launcher cannot start runs here (tmux not installed)."""
        ...

    def wait_any(self, processes: list[Process], timeout: float) -> None:
        """Return as soon as one of ``processes`` (this launcher's handles) has ended, or after ``timeout``
        seconds: the foreground loop refills a slot the moment a run ends, not at its next look."""
        ...

    def slots(self, runs: list[Run]) -> int | None:
        """How many of ``runs`` can go at once where this launcher starts them (a cluster's run slots); None: as
        many as the call's concurrency (a sweep's time left divides its work by this)."""
        ...


# The launchers by name (papermill's engines registry is the model); a new runner is one entry here.
LAUNCHERS: dict[str, Launcher] = {launcher.name: launcher
                                  for launcher in (ProcessLauncher(), TmuxLauncher(), DaskLauncher())}
DEFAULT = "process"


def register(launcher: Launcher) -> None:
    """Make ``launcher`` the one for runs whose record's ``runner`` is ``launcher.name``."""
    LAUNCHERS[launcher.name] = launcher


def launcher_for(runner: str | None) -> Launcher:
    """The launcher a run record's ``runner`` names (the process launcher by default)."""
    return LAUNCHERS.get(runner or DEFAULT) or LAUNCHERS[DEFAULT]


def executor_client(executor: str | None, dask_client: Any = None, cwd: str | Path | None = None,
                    settings: Settings | None = None) -> Any:
    """The Dask client a call's runs go to, checked (workers, shared project folder, pi on each), or None
    for the local executor. ``executor`` is the call's, else the setting's (of ``settings``, the call's)."""
    chosen = (settings or current()).executor if executor is None else executor
    if chosen not in ("local", "dask"):
        raise NbSubagentsError(f'executor must be "local" or "dask", got {executor!r}')
    if chosen == "local":
        if dask_client is not None:
            raise NbSubagentsError('dask_client= is for executor="dask": pass both, or neither')
        return None
    client = client_for(client=dask_client)
    folder = check_cwd(cwd)
    require_cluster(client, project_root(folder), pi_command(find_pi(folder)))
    return client


def check_runner(settings: Settings | None = None) -> None:
    """The runner setting's launcher (of ``settings``, the call's) can start runs here (the tmux runner needs
    tmux): said before any run is created."""
    launcher_for((settings or current()).runner).require()
