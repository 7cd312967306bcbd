"""Where output goes: the one place that decides between live widget panels and plain text.

``choose_renderer()`` picks the renderer of a run; ``run_mimebundle()`` is how a ``Run`` shows as a
cell's value. Both use ``widgets_available()``, so the two never disagree. ipywidgets is imported
only when a panel is built (``nbsubagents.widgets``).
"""

from __future__ import annotations

import html
import importlib.util
import os
import sys
import warnings
from typing import TYPE_CHECKING, Any

from .renderers import Renderer, TextRenderer

if TYPE_CHECKING:
    from .runner import Run

ENV_VAR = "NBSUBAGENTS_DISPLAY"
MODES = ("auto", "text", "widgets")
VIEW_MIME = "application/vnd.jupyter.widget-view+json"


def display_mode() -> str:
    """``NBSUBAGENTS_DISPLAY``: ``text`` or ``widgets`` forces a renderer; unset or ``auto`` detects."""
    raw = os.environ.get(ENV_VAR, "").strip().lower()
    if raw in ("", "auto"):
        return "auto"
    if raw in ("text", "plain"):
        return "text"
    if raw in ("widgets", "widget"):
        return "widgets"
    warnings.warn(f"{ENV_VAR}={raw!r} is not one of {', '.join(MODES)}: detecting the display instead",
                  stacklevel=3)
    return "auto"


def in_widget_kernel() -> bool:
    """True inside a Jupyter kernel (ipykernel's ZMQInteractiveShell) where ipywidgets is importable.

    Terminal IPython and plain scripts are not; a kernel run by nbconvert is (it keeps the widget
    state when asked to), so set ``NBSUBAGENTS_DISPLAY=text`` there for plain text.
    """
    ipython = sys.modules.get("IPython")  # never imported here: a script has no shell to find
    if ipython is None:
        return False
    try:
        shell = ipython.get_ipython()
    except Exception:
        return False
    if shell is None or getattr(shell, "kernel", None) is None:
        return False
    if not any(cls.__name__ == "ZMQInteractiveShell" for cls in type(shell).__mro__):
        return False
    return importlib.util.find_spec("ipywidgets") is not None


def widgets_available() -> bool:
    """Whether runs show as widget panels here: the env var first, then the kernel check."""
    mode = display_mode()
    if mode != "auto":
        return mode == "widgets"
    return in_widget_kernel()


def prepare_kernel() -> None:
    """Ready a widget kernel for panels now (at import or ``%load_ext``), not while a run's cell executes.

    JupyterLab opens a kernel subshell for widget messages when the first widget appears; the busy/idle
    of that control request would show the kernel Idle for the whole cell that drew the first panel.
    Opened here, it comes and goes with the short cell that imported nbsubagents; the Cancel buttons'
    own subshell is made here too.
    """
    if not widgets_available() or not in_widget_kernel():
        return
    try:
        from .widgets import keep_widget_channel
        keep_widget_channel()
    except Exception:  # never let a frontend detail break an import: the first panel does it later
        pass


def choose_renderer() -> Renderer:
    """Live panels in a notebook kernel, plain throttled text elsewhere (``NBSUBAGENTS_DISPLAY`` forces one)."""
    if widgets_available():
        from .widgets import WidgetRenderer  # raises with an install hint when ipywidgets is missing
        return WidgetRenderer()
    return TextRenderer()


def summary_html(run: Run) -> str:
    """The run's readable summary (its ``repr``) as HTML, for frontends without widgets."""
    from .style import STATUS_CSS, color, glyph
    status = run.status
    return (f'{STATUS_CSS}<pre class="nbsubagents-summary nbsubagents-status-{status} nbsubagents-c-{status}" '
            f'style="white-space:pre-wrap;color:{color(status)}" title="{html.escape(glyph(status))} '
            f'{html.escape(status)}">{html.escape(repr(run), quote=False)}</pre>')


def run_mimebundle(run: Run) -> dict[str, Any]:
    """What a ``Run`` shows as a cell's value: its panel in a widget notebook, its summary everywhere.

    ``text/plain`` is ``repr(run)`` (the summary line and the start of the output); ``text/html`` the
    same for frontends without the widget manager (static HTML, nbconvert); the widget view the run's
    panel with everything it did so far.
    """
    bundle: dict[str, Any] = {"text/plain": repr(run), "text/html": summary_html(run)}
    if widgets_available():
        try:
            from .widgets import RunPanel
            # A panel that a renderer keeps updating stays live; otherwise a snapshot of the run so far.
            panel = getattr(run, "_live_panel", None) or RunPanel.from_run(run)
        except ImportError:  # ipywidgets missing although forced: the summary still shows
            return bundle
        view = panel.widget._repr_mimebundle_().get(VIEW_MIME)
        if view is not None:
            bundle[VIEW_MIME] = view
    return bundle
