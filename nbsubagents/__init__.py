"""nbsubagents: delegate tasks to pi coding sub-agents from notebook cells.

``import nbsubagents`` stays light (no IPython, ipywidgets or pandas): the public functions are
loaded on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["run", "run_parallel", "presets", "configure", "Run", "NbSubagentsError"]

_LAZY = {
    "run": "api", "run_parallel": "api", "presets": "api",
    "configure": "config", "NbSubagentsError": "config", "Run": "runner",
}

if TYPE_CHECKING:
    from .api import presets, run, run_parallel
    from .config import NbSubagentsError, configure
    from .runner import Run


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'nbsubagents' has no attribute {name!r}")
    from importlib import import_module
    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
