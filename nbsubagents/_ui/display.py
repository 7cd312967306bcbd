"""Where output goes: the one place that decides between live widget panels, plain text and silence.

``choose_renderer()`` picks the renderer of a run; ``run_mimebundle()`` is how a ``Run`` shows as a
cell's value and ``live_display()`` how a running one is displayed so that it follows the run (IPython
calls them through the formatters ``ui.attach`` registers for ``Run``). All use ``widgets_available()``,
so they never disagree (what kernel this is, ``ui.kernel`` says). ipywidgets is imported only when a
panel, a bar's widget or a browser is built. ``notice_stream()`` is where printed notices go: the
notebook's output inside a kernel, stderr elsewhere (stdout belongs to the user's program), nowhere
under ``NBSUBAGENTS_DISPLAY=none``.
"""

from __future__ import annotations

import os
import warnings
from typing import TYPE_CHECKING, Any

from .._lifecycle import watcher
from .._lifecycle.drive import NullRenderer, Renderer
from .._lifecycle.edge import print_repr
from .._templates import part
from .._views.panel_state import PanelState
from .kernel import in_kernel, in_widget_kernel, text_stream
from .panels import RunPanel, WidgetRenderer, live_panel
from .renderers import TextRenderer

if TYPE_CHECKING:
    from .._lifecycle.handle import Run

ENV_VAR = "NBSUBAGENTS_DISPLAY"
MODES = ("auto", "text", "widgets", "none")
VIEW_MIME = "application/vnd.jupyter.widget-view+json"


def display_mode() -> str:
    """``NBSUBAGENTS_DISPLAY``: ``text`` or ``widgets`` forces a renderer, ``none`` silences progress and
    notices; unset or ``auto`` detects."""
    raw = os.environ.get(ENV_VAR, "").strip().lower()
    if raw in ("", "auto"):
        return "auto"
    if raw in ("none", "off", "quiet"):
        return "none"
    if raw in ("text", "plain"):
        return "text"
    if raw in ("widgets", "widget"):
        return "widgets"
    warnings.warn(f"{ENV_VAR}={raw!r} is not one of {', '.join(MODES)}: detecting the display instead",
                  stacklevel=3)
    return "auto"


def silenced() -> bool:
    """``NBSUBAGENTS_DISPLAY=none``: no progress and no printed notices at all."""
    return display_mode() == "none"


def widgets_available() -> bool:
    """Whether runs show as widget panels here: the env var first, then the kernel check."""
    mode = display_mode()
    if mode != "auto":
        return mode == "widgets"
    return in_widget_kernel()


def notice_stream() -> Any:
    """Where the watcher prints a completion notice (its ``text_stream`` hook, set by ``ui.attach``): the
    cell's output in a kernel, stderr elsewhere, None (nothing printed) under ``NBSUBAGENTS_DISPLAY=none``."""
    return None if silenced() else text_stream()


def show_object(obj: Any) -> None:
    """A small display object (a sweep's cost estimate) where notices go: its HTML in the cell's output in a
    kernel, its text on stderr elsewhere, nothing under ``NBSUBAGENTS_DISPLAY=none``."""
    if in_kernel() and not silenced():
        from IPython.display import display

        display(obj)
    else:
        print_repr(obj)


def choose_renderer() -> Renderer:
    """Live panels in a notebook kernel, plain throttled text elsewhere (``NBSUBAGENTS_DISPLAY`` forces one)."""
    if silenced():
        return NullRenderer()
    if widgets_available():
        return WidgetRenderer()  # raises with an install hint when ipywidgets is missing
    return TextRenderer()


def renderer_for(show: bool) -> Renderer:
    """The renderer of a call's ``show=``: the chosen one, or nothing at all."""
    if not show:
        return NullRenderer()
    return choose_renderer()


def widget_bundle(widget_of: Any, text: str, html_text: str) -> dict[str, Any]:
    """A bar's or a browser's mimebundle: text/plain and text/html always; the widget view too where runs
    show as widgets (``widget_of()`` builds it only then)."""
    bundle: dict[str, Any] = {"text/plain": text, "text/html": html_text}
    if widgets_available():  # the one place that decides widget or text
        try:
            widget = widget_of()
        except ImportError:  # ipywidgets missing although forced: the text still shows
            return bundle
        view = widget._repr_mimebundle_().get(VIEW_MIME)
        if view is not None:
            bundle[VIEW_MIME] = view
    return bundle


def summary_html(run: Run) -> str:
    """The run's readable summary (its ``repr``) as HTML, for frontends without widgets."""
    status = run.status
    return part("bits.html", "summary", status=status, text=repr(run))


def run_mimebundle(run: Run) -> dict[str, Any]:
    """What a ``Run`` shows as a cell's value: its static panel record, plus its live panel while it runs.

    A finished run is its static record alone (``text/plain`` and ``text/html`` of the panel: header
    numbers, the last lines, the final text, the error), which reads the same everywhere without a
    kernel. A running one in a notebook with widgets also carries its panel's view (``live_display``
    shows it under the panel's display id so it follows the run); elsewhere ``repr(run)``.
    """
    if run.done:
        text, html_text = PanelState.of_run(run).static_record()
        return {"text/plain": text, "text/html": html_text}
    bundle: dict[str, Any] = {"text/plain": repr(run), "text/html": summary_html(run)}
    if widgets_available():
        try:
            panel = _following_panel(run)
        except ImportError:  # ipywidgets missing although forced: the summary still shows
            return bundle
        return panel.static_bundle(final=False)
    return bundle


def _following_panel(run: Run) -> Any:
    """The run's live panel in this process, or a new one that the watcher keeps current until the end."""
    panel = live_panel(run)
    if panel is not None:
        return panel
    panel = RunPanel.from_run(run)
    if not run.done:
        follower = WidgetRenderer(display=lambda widget: None)
        follower.follow(panel)
        watcher.watch(run, renderer=follower)
    return panel


def live_display(run: Run) -> Any:
    """IPython's ``_ipython_display_`` of a running ``Run`` in a notebook with widgets, else None.

    The run's panel is displayed under its display id: every display of the run (the launching cell,
    a cell value, ``display(run)``, ``get_run(id)`` in another cell) is then updated together, follows
    the run live and ends as the static record of its end, whoever launched it.
    """
    if run.done or not widgets_available():
        return None

    def show() -> None:
        try:
            panel = _following_panel(run)
        except ImportError:
            from IPython.display import display
            display(run_mimebundle(run), raw=True)
            return
        panel.show()

    return show
