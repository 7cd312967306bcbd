"""The runs of one call, ready to drive: prepared from its tasks, bound to the call's executor, and their
projects reconciled. ``run``, ``start``, ``run_parallel`` and ``experiment`` all launch through here, then
drive the runs (``drive.drive``) or hand them to the watcher."""

from __future__ import annotations

from typing import Any, Iterable

from .._config import Settings, current
from . import launch, reconcile
from . import prepare as preparing
from .dask_launcher import bind
from .handle import Run
from .spec import TaskSpec, check_cwd

__all__ = ["build", "prepare_one"]


def build(items: Iterable[Any], *, mode: str, executor: str | None = None, dask_client: Any = None,
          cwd: Any = None) -> list[Run]:
    """The runs of several tasks (``prepare.build_runs``: one bad task fails alone) on the call's executor.

    ``cwd`` is where a Dask cluster's shared folder is checked (default: the current directory); its settings
    choose the executor and runner (each task's folder gives its own run's settings)."""
    client = _checked_client(mode, executor, dask_client, cwd, current(check_cwd(cwd)))
    return _ready(preparing.build_runs(items, mode=mode, runner="dask" if client is not None else None), client)


def prepare_one(spec: TaskSpec, *, mode: str, executor: str | None = None, dask_client: Any = None) -> Run:
    """The run of one ``run()`` or ``start()`` call (``prepare.prepare``: bad input raises), which launches it at
    once. The call reads the settings of its folder once and passes them down."""
    settings = current(check_cwd(spec.cwd))
    client = _checked_client(mode, executor, dask_client, spec.cwd, settings)
    (run,) = _ready([preparing.prepare(spec, mode=mode, runner="dask" if client is not None else None,
                                       launching=True, settings=settings)], client)
    return run


def _checked_client(mode: str, executor: str | None, dask_client: Any, cwd: Any, settings: Settings) -> Any:
    """The call's Dask client (None: local), once its runner is known to work here (``launch.check_runner``; a
    background run is the process launcher's, whatever the runner setting)."""
    if mode != "background":
        launch.check_runner(settings)
    return launch.executor_client(executor, dask_client, cwd, settings)


def _ready(runs: list[Run], client: Any) -> list[Run]:
    if client is not None:
        bind(runs, client)
    reconcile.first_use_of(runs)  # settles runs of earlier kernels, announces what finished while away
    return runs
