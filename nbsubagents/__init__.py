"""nbsubagents: delegate tasks to pi coding sub-agents from notebook cells.

``import nbsubagents`` stays light (no IPython, ipywidgets or pandas): the public functions are
loaded on first use.
"""

from __future__ import annotations

import sys as _sys

TYPE_CHECKING = False  # typing is not imported at run time: the supervisor starts on this import
if TYPE_CHECKING:
    from typing import Any

__version__ = "0.1.0"
__all__ = ["run", "run_parallel", "presets", "configure", "Run", "NbSubagentsError",
           "start", "status", "cancel", "get_run", "Status", "runs", "status_bar", "browse", "runs_timeline",
           "StatusBar", "Browser", "report",
           "experiment", "experiments", "get_experiment", "Experiment", "check"]

_LAZY = {
    "run": "api", "run_parallel": "api", "presets": "api",
    "configure": "config", "NbSubagentsError": "config", "Run": "lifecycle.handle",
    "start": "api", "status": "api", "cancel": "api", "get_run": "api", "Status": "registry.status",
    "runs": "api", "status_bar": "api", "browse": "api", "runs_timeline": "api",
    "StatusBar": "ui.statusbar", "Browser": "ui.browser", "report": "ui.reports",
    "experiment": "sweeps.experiment", "experiments": "sweeps.experiment", "get_experiment": "sweeps.experiment",
    "Experiment": "sweeps.experiment", "check": "sweeps.scorers",
}

if TYPE_CHECKING:
    from .api import browse, cancel, get_run, presets, run, run_parallel, runs, runs_timeline, start, status, status_bar
    from .ui.browser import Browser
    from .ui.statusbar import StatusBar
    from .ui.reports import report
    from .registry.status import Status
    from .config import NbSubagentsError, configure
    from .lifecycle.handle import Run
    from .sweeps.experiment import Experiment, experiment, experiments, get_experiment
    from .sweeps.scorers import check


def __getattr__(name: str) -> Any:
    from importlib import import_module
    if name == "registry":  # nbsubagents.registry.rebuild() without importing it first
        return import_module(f".{name}", __name__)
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'nbsubagents' has no attribute {name!r}")
    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext nbsubagents``: the ``%subagent`` magics (imported only now: they need IPython)."""
    from .magics import load_ipython_extension as load
    load(ipython)
    _prepare_kernel()


def _prepare_kernel() -> None:
    from .ui.display import prepare_kernel
    prepare_kernel()


def unload_ipython_extension(ipython: Any) -> None:
    from .magics import unload_ipython_extension as unload
    unload(ipython)


if "ipykernel" in _sys.modules:  # imported in a notebook kernel: ready its widget channel before any run's panel
    _prepare_kernel()
