"""The notebook edge attaches itself from above: nothing below ``ui/`` knows a notebook.

``lent()`` is what it lends the kernel's side (``lifecycle.edge``, lent by ``nbsubagents._api.wire``): notices
print on the cell's output in a kernel and on stderr elsewhere (nowhere under ``NBSUBAGENTS_DISPLAY=none``), and
what the clock's thread prints for a run goes to the cell that launched it; a sweep shows its live panel where
runs show as widgets, and its cost estimate in the cell; a run's questions wait for an answer only where a person
can give one (a notebook's cell, not a script or papermill).

``register_display()`` registers IPython's display formatters for ``Run`` by name (``for_type_by_name``, so the
class is not imported for it): its mimebundle is ``display.run_mimebundle`` (the static record, or the summary), and
a running run in a notebook with widgets displays its live panel (``display.live_display``), which follows the run
under its display id.

The magics mark a value their cell already shows (``mark_shown``, forgotten after the cell with
``forget_shown``): such a value is kept as the cell's value but drawn nothing. The mark is a set here, not
state on the value.
"""

from __future__ import annotations

import sys
from typing import Any

from .display import live_display, notice_stream, run_mimebundle, show_object
from .kernel import cell_parent, in_cell, in_kernel, kernel_shell, person_at_frontend
from .sweep_panel import live_sweep

__all__ = ["lent", "register_display", "mark_shown", "forget_shown", "skip_if_shown"]

RUN_CLASS = ("nbsubagents._lifecycle.handle", "Run")

_shown: dict[int, Any] = {}  # id -> value: values this cell already shows (kept alive, so ids stay theirs)


def lent() -> dict[str, Any]:
    """What the notebook edge lends the kernel's side of a run (``lifecycle.edge``'s fields)."""
    return dict(text_stream=notice_stream, cell_parent=cell_parent, in_cell=in_cell, sweep_panel=live_sweep,
                show=show_object, person_at_frontend=person_at_frontend, in_kernel=in_kernel)


def register_display(shell: Any = None) -> None:
    """Register the display formatters of ``Run`` with ``shell`` (by default the running IPython, if any;
    IPython is never imported here). Registering again replaces, so it is safe to repeat."""
    if shell is None:
        shell = current_shell()
    formatter = getattr(shell, "display_formatter", None)
    if formatter is None:
        return
    formatter.mimebundle_formatter.for_type_by_name(*RUN_CLASS, run_bundle)
    formatter.ipython_display_formatter.for_type_by_name(*RUN_CLASS, display_run)


def current_shell() -> Any:
    """The running IPython shell (a terminal or a kernel), else None; IPython is only looked up."""
    shell = kernel_shell()
    if shell is not None:
        return shell
    ipython = sys.modules.get("IPython")
    try:
        return ipython.get_ipython() if ipython is not None else None
    except Exception:
        return None


def run_bundle(run: Any) -> dict[str, Any]:
    """A ``Run``'s mimebundle for IPython: its static record when it ended, else its summary (with its live
    panel's view in a notebook with widgets)."""
    return run_mimebundle(run)


def display_run(run: Any) -> None:
    """IPython's display hook of a ``Run``: nothing when the magics' cell already shows it; a running run in
    a notebook with widgets shows its live panel; otherwise IPython goes on to ``run_bundle``
    (``NotImplementedError`` is how a display formatter declines)."""
    if id(run) in _shown:
        return
    show = live_display(run)
    if show is None:
        raise NotImplementedError
    show()


def skip_if_shown(value: Any) -> None:
    """A display formatter for other values the magics return (a list of runs): nothing when already shown,
    else IPython displays it as usual."""
    if id(value) not in _shown:
        raise NotImplementedError


def mark_shown(value: Any) -> None:
    """This cell already shows ``value`` (its live panel is in the output): keep it as the cell's value,
    draw nothing for it, until ``forget_shown``."""
    _shown[id(value)] = value


def forget_shown(*_: Any) -> None:
    """After a cell: values are drawn as usual again."""
    _shown.clear()
