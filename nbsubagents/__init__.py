"""nbsubagents: delegate tasks to pi coding sub-agents from notebook cells.

``import nbsubagents`` stays light (no IPython, ipywidgets or pandas): the public functions are
loaded on first use, and the notebook edge attaches itself then (``nbsubagents.ui.attach``). In a running
IPython the import only registers how a ``Run`` displays (by name): it opens no widget and waits for nothing.
"""

from __future__ import annotations

import sys as _sys

TYPE_CHECKING = False  # typing is not imported at run time: the supervisor starts on this import
if TYPE_CHECKING:
    from typing import Any

from .child import VERSION as __version__  # noqa: F401  (public: nbsubagents.__version__)
__all__ = ["run", "run_parallel", "presets", "configure", "Run", "NbSubagentsError",
           "start", "status", "cancel", "get_run", "Status", "runs", "status_bar", "browse", "runs_timeline",
           "StatusBar", "Browser", "report",
           "experiment", "experiments", "get_experiment", "Experiment", "check"]

_LAZY = {
    "run": "api", "run_parallel": "api", "presets": "api",
    "configure": "config", "NbSubagentsError": "config", "Run": "lifecycle.handle",
    "start": "api", "status": "api", "cancel": "api", "get_run": "api", "Status": "registry.status",
    "runs": "api", "status_bar": "api", "browse": "api", "runs_timeline": "api",
    "StatusBar": "ui.statusbar", "Browser": "ui.browser", "report": "api",
    "experiment": "sweeps.experiment", "experiments": "sweeps.experiment", "get_experiment": "sweeps.experiment",
    "Experiment": "sweeps.experiment", "check": "sweeps.scorers",
}

if TYPE_CHECKING:
    from .api import (browse, cancel, get_run, presets, report, run, run_parallel, runs, runs_timeline, start, status,
                      status_bar)
    from .ui.browser import Browser
    from .ui.statusbar import StatusBar
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
    import_module(".ui.attach", __name__).attach()  # the public API is used: the notebook edge attaches
    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext nbsubagents``: the ``%subagent`` magics (imported only now: they need IPython)."""
    from .magics import load_ipython_extension as load
    from .ui.attach import attach
    load(ipython)
    attach(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    from .magics import unload_ipython_extension as unload
    unload(ipython)


def _register_display() -> None:
    from .ui.attach import register_display
    register_display()


if "IPython" in _sys.modules:  # imported in a running IPython: register how a Run displays (no widget, no wait)
    _register_display()
