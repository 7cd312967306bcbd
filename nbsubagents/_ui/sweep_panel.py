"""A sweep's live panel: the model of ``sweeps.progress`` (one compact line per run, made for 24 to 1,000 runs)
drawn as ipywidgets, with the failures, each with its reason, one click away.

``SweepPanel`` is re-rendered on the watcher's clock at most every ``RENDER_INTERVAL`` seconds whatever the number
of runs, and keeps a static record (``static_html``: a compact table, ``static_text``) that a saved notebook
keeps. ``live_sweep`` is what ``ui.attach`` lends the sweeps (``lifecycle.edge.sweep_panel``): this panel where runs
show as widgets (``ui.display`` decides), else nothing, and the sweep prints its text lines.
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import TYPE_CHECKING, Any, Callable

from .._child.artifacts import TERMINAL
from .._child.text import strip_controls, terminal_safe
from .._lifecycle import watcher
from .._templates import Html, part, stylesheet
from .._sweeps.progress import FAILURE_CAP, LINE_CAP, SweepState, state_text
from .._views.masking import masker
from .display import widgets_available
from .kernel import NotebookRecord, Publish, load_ipywidgets
from .panels import STATIC_INTERVAL

if TYPE_CHECKING:
    from .._child.formatter import ProgressLine
    from .._lifecycle.handle import Run

__all__ = ["SweepPanel", "SweepRenderer", "live_sweep", "RENDER_INTERVAL"]

RENDER_INTERVAL = 0.5    # the live panel re-renders at most twice a second, however many runs there are


# -- HTML and text, from the model ---------------------------------------------------------------------------
def header_html(state: SweepState) -> str:
    """The title, ``n/N``, the counts in their colours (each with its number in ``data-count``), the time left
    and a bar of the ended runs, each status its colour's share."""
    return part("sweep.html", "header", state=state, terminal=TERMINAL)


def lines_html(state: SweepState, *, final: bool = False, live: bool = True) -> str:
    """The run lines as one compact table: the shown ones, "and N more", and the queued runs as a count."""
    rows, more = state.shown(final=final)
    return part("sweep.html", "lines", rows=rows, more=more, queued=state.counts().get("queued", 0),
                now=state.now(), live=live)


def failures_html(state: SweepState) -> str:
    """``failures (3)``: a click opens each failed run's cell and reason."""
    return part("sweep.html", "failures", failed=state.failures(), cap=FAILURE_CAP)


# -- the notebook panel ---------------------------------------------------------------------------------------
class SweepPanel:
    """The live panel of a sweep: one widget for the header and the run lines, drawn from one ``SweepState``
    (one message per update, so a page never shows counts and rows from two different moments), and a failures
    widget re-drawn only when a failure comes (so an opened list stays open)."""

    def __init__(self, state: SweepState, publish: Publish | None = None) -> None:
        self.state = state
        self.display_id = f"nbsubagents-sweep-{uuid.uuid4().hex[:16]}"
        self.renders = 0
        self.last_render = 0.0
        self.last_record = 0.0
        self._failures_shown = -1
        self.widget = self._build_widget()
        # The output in the notebook: the static record, with the widget view only while the sweep goes.
        self.record = NotebookRecord(self.display_id, lambda: (self.static_text(), self.static_html()),
                                     widget=self.widget, publish=publish)
        self.render()

    def _build_widget(self) -> Any:
        """The one place the panel's widgets are made."""
        w = load_ipywidgets()
        self.board = w.HTML().add_class("nbsubagents-sweep-board")
        self.failures = w.HTML().add_class("nbsubagents-sweep-fails")
        sheet = w.HTML(stylesheet()).add_class("nbsubagents-stylesheet")  # once, never with a render
        return w.VBox([self.board, self.failures, sheet]).add_class("nbsubagents-sweep")

    def render(self) -> None:
        state = self.state
        self.board.value = header_html(state) + lines_html(state)
        failed = len(state.failures())
        if failed != self._failures_shown:
            self.failures.value = failures_html(state)
            self._failures_shown = failed
        state.changed = False
        self.renders += 1
        self.last_render = time.monotonic()

    # -- the static record ---------------------------------------------------------------------------------
    def static_html(self) -> str:
        """The panel as self-contained HTML (the stylesheet, no script): the header, the compact table of the
        runs, the failures; secrets masked. A saved notebook keeps it beside (at the end: instead of) the widget."""
        state = self.state
        body = header_html(state) + lines_html(state, final=state.done, live=not state.done) + failures_html(state)
        return strip_controls(part("sweep.html", "record", body=Html(masker().text(body))))

    def static_text(self) -> str:
        return terminal_safe(masker().text(state_text(self.state, final=self.state.done)))

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        return self.widget._repr_mimebundle_(**kwargs)


class SweepRenderer:
    """The ``Renderer`` port on a ``SweepPanel``: events only change the state; the watcher's clock renders it
    at most every ``interval`` seconds (and every second while runs go, to move their clocks); ``close`` draws
    the end and replaces the widget view by the static record.

    ``display`` (tests) receives the widget instead and no record is sent; ``publish(bundle, display_id,
    update)`` replaces IPython's display and update_display."""

    def __init__(self, *, title: str = "Sweep", concurrency: int = 1, cap: int = LINE_CAP,
                 interval: float = RENDER_INTERVAL, display: Callable[[Any], Any] | None = None,
                 publish: Callable[[dict[str, Any], str, bool], Any] | None = None, ticker: bool = True) -> None:
        load_ipywidgets()
        self.title, self.concurrency, self.cap, self.interval = title, concurrency, cap, interval
        self._display, self._publish = display, publish
        self._lock = threading.RLock()
        self._clock = watcher.Clock(self.tick, interval, "sweep panel clock", enabled=ticker)
        self.panel: SweepPanel | None = None

    def start(self, runs: list[Run]) -> None:
        with self._lock:
            self.panel = SweepPanel(SweepState(runs, title=self.title, concurrency=self.concurrency, cap=self.cap),
                                    self._publish)
        if self._display is not None:
            self._display(self.panel.widget)
        else:
            self.panel.record.show()
            self.panel.last_record = time.monotonic()
        self._clock.start()

    def event(self, run: Run, event: dict[str, Any], line: ProgressLine | None) -> None:
        with self._lock:
            if self.panel is not None:
                self.panel.state.add(run, event, line)

    def end(self, run: Run) -> None:
        with self._lock:
            if self.panel is not None:
                self.panel.state.end(run)

    def tick(self) -> None:
        """Render when something changed, or a second passed while runs go (their clocks move)."""
        with self._lock:
            panel = self.panel
            if panel is None:
                return
            panel.state.refresh()
            age = time.monotonic() - panel.last_render
            if panel.state.changed or (not panel.state.done and age >= 1.0):
                panel.render()
            if self._display is None and time.monotonic() - panel.last_record >= STATIC_INTERVAL:
                panel.record.update()  # the saved notebook's copy, true to within STATIC_INTERVAL
                panel.last_record = time.monotonic()

    def close(self) -> None:
        self._clock.stop()
        with self._lock:
            panel = self.panel
            if panel is None:
                return
            panel.state.refresh()
            panel.render()
        if self._display is None:
            panel.record.end()


def live_sweep(title: str, concurrency: int) -> SweepRenderer | None:
    """A sweep's live panel where runs show as widgets (``ui.display`` decides), else None: what ``ui.attach``
    lends ``sweeps.progress.sweep_renderer`` (``lifecycle.edge.sweep_panel``)."""
    return SweepRenderer(title=title, concurrency=concurrency) if widgets_available() else None
