"""nbsubagents: delegate tasks to pi coding sub-agents from notebook cells.

Usage::

    import nbsubagents

    run = nbsubagents.run("scout", "Find where sessions are created")  # one run, in the foreground
    run.output, run.status, run.run_id
    runs = nbsubagents.run_parallel([{"preset": "scout", "task": "ls src"},
                                     {"preset": "reviewer", "task": "review src/app.py"}])
    job = nbsubagents.start("scout", "map the tests")  # in the background: returns at once
    job.wait()
    nbsubagents.runs()        # every run of the project: a pandas DataFrame, one row per run_id
    nbsubagents.status()      # what is running now
    nbsubagents.presets()     # the presets a run can name

In a notebook, ``%load_ext nbsubagents`` adds the magics::

    %subagent scout Find where sessions are created
    %%subagent scout --bg          (the cell body is the task; --bg starts it in the background)
    %subagent_status
    %subagent_cancel RUN_ID
    %subagent_steer RUN_ID read OTHER.md instead     (also %subagent_followup, %subagent_answer, %subagent_approve)

Settings: ``nbsubagents.configure(...)`` or the ``subagents`` section of ``.pi/settings.json``. The command
``nbsubagents doctor`` says what was found. ``import nbsubagents`` stays light (no IPython, ipywidgets or
pandas): the public functions are loaded on their first use.
"""
from __future__ import annotations

from importlib import import_module

from ._child import VERSION as __version__  # noqa: F401  (public: nbsubagents.__version__)

from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from typing import Any

__all__ = ["run", "run_parallel", "presets", "configure", "Run", "NbSubagentsError",
           "start", "status", "cancel", "get_run", "Status", "runs", "status_bar", "browse", "runs_timeline",
           "StatusBar", "Browser", "report",
           "experiment", "experiments", "get_experiment", "Experiment", "check", "init",
           "new_preset", "edit_preset", "copy_preset", "delete_preset", "steer", "follow_up", "answer",
           "rebuild_registry", "pickled"]

_LAZY = {
    "run": "_api", "run_parallel": "_api", "presets": "_api",
    "configure": "_config", "NbSubagentsError": "_config", "Run": "_lifecycle.handle",
    "start": "_api", "status": "_api", "cancel": "_api", "get_run": "_api", "Status": "_registry.status",
    "runs": "_api", "status_bar": "_api", "browse": "_api", "runs_timeline": "_api",
    "StatusBar": "_ui.statusbar", "Browser": "_ui.browser", "report": "_api",
    "experiment": "_sweeps.experiment", "experiments": "_sweeps.experiment", "get_experiment": "_sweeps.experiment",
    "Experiment": "_sweeps.experiment", "check": "_sweeps.scorers", "init": "_project_init",
    "new_preset": "_api", "edit_preset": "_api", "copy_preset": "_api", "delete_preset": "_api",
    "steer": "_api", "follow_up": "_api", "answer": "_api", "rebuild_registry": "_api",
    "pickled": "_lifecycle.inputs",
}

if TYPE_CHECKING:
    from ._api import (
        answer,
        browse,
        cancel,
        copy_preset,
        delete_preset,
        edit_preset,
        follow_up,
        get_run,
        new_preset,
        presets,
        rebuild_registry,
        report,
        run,
        run_parallel,
        runs,
        runs_timeline,
        start,
        status,
        status_bar,
        steer,
    )
    from ._config import NbSubagentsError, configure
    from ._lifecycle.handle import Run
    from ._lifecycle.inputs import pickled
    from ._project_init import init
    from ._registry.status import Status
    from ._sweeps.experiment import Experiment, experiment, experiments, get_experiment
    from ._sweeps.scorers import check
    from ._ui.browser import Browser
    from ._ui.statusbar import StatusBar


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'nbsubagents' has no attribute {name!r}")
    import_module("._api", __name__).wire()  # the public API is used: the notebook edge is lent to the runs
    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext nbsubagents``: the ``%subagent`` magics (imported only now: they need IPython)."""
    from ._magics import load_ipython_extension as load  # noqa: PLC0415 (the magics need IPython)
    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    from ._magics import unload_ipython_extension as unload  # noqa: PLC0415 (the magics need IPython)
    unload(ipython)
