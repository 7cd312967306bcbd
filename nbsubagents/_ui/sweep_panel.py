"""A sweep's live panel: the model of ``sweeps.progress`` (made for 24 to 1,000 runs) drawn as ipywidgets: the
header, the failures by kind of reason with the cells each hit, the cells' scores, the running runs' lines and the
queued count in one board; the failed runs (by reason) and the completed runs one click away, each in a fold.

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
from .._style import glyph, plural
from .._sweeps.digest import CELL_CAP, GROUP_CELLS, REASON_CAP
from .._sweeps.progress import GROUP_RUNS, LINE_CAP, SweepState, state_text
from .._views.masking import masker
from .display import widgets_available
from .kernel import NotebookRecord, Publish, load_ipywidgets
from .panels import STATIC_INTERVAL

if TYPE_CHECKING:
    from .._child.formatter import ProgressLine
    from .._lifecycle.handle import Run

__all__ = ["SweepPanel", "SweepRenderer", "live_sweep", "RENDER_INTERVAL"]

RENDER_INTERVAL = 0.5    # the live panel re-renders at most twice a second, however many runs there are
SCORE_CAP = 6            # scores the cells' table shows (compare() has them all)
RECORD_CAP = 200         # completed runs a record's fold lists


# -- HTML and text, from the model ---------------------------------------------------------------------------
def header_html(state: SweepState) -> str:
    """The title, ``n/N``, the counts in their colours (each with its number in ``data-count``), the time left
    and a bar of the ended runs, each status its colour's share."""
    return part("sweep.html", "header", state=state, terminal=TERMINAL)


def digest_html(state: SweepState, *, fold: bool) -> str:
    """What leads: the failures by kind of reason, one line each with its count and cells (in a record, each a
    fold over its runs), then the cells' scores once a run ended."""
    groups = part("sweep.html", "groups", groups=state.failure_groups(), cap=REASON_CAP, named=GROUP_CELLS,
                  per=GROUP_RUNS, fold=fold)
    if not state.ended:
        return groups
    cells, names = state.cells()
    return groups + part("sweep.html", "cells", cells=cells, names=names[:SCORE_CAP], cap=CELL_CAP)


def lines_html(state: SweepState, *, live: bool = True) -> str:
    """The running runs' lines as one compact table, "and N more running", and the queued runs as a count."""
    rows, more = state.shown()
    return part("sweep.html", "lines", rows=rows, more=more, queued=state.counts().get("queued", 0),
                now=state.now(), live=live)


def board_html(state: SweepState, digest: str | None = None) -> str:
    """The live board: the header, the failures' lines, the cells' scores (``digest``: drawn already), the running
    runs, the queued count."""
    return header_html(state) + (digest_html(state, fold=False) if digest is None else digest) + lines_html(state)


# -- the notebook panel ---------------------------------------------------------------------------------------
class SweepPanel:
    """The live panel of a sweep: one board for the header, the failures' lines, the cells and the running runs,
    drawn from one ``SweepState`` (one message per update, so a page never shows counts and rows from two different
    moments), and two folds (an ``Accordion`` each, whose open state the page keeps across renders, even while the
    kernel is busy running the sweep and hears nothing of it): the failed runs by reason (at most ``GROUP_RUNS`` of
    each reason) and the latest completed runs (at most ``cap``), each drawn again only when its count changed."""

    def __init__(self, state: SweepState, publish: Publish | None = None, lock: Any = None) -> None:
        self.state = state
        self.lock = lock if lock is not None else threading.RLock()
        self.display_id = f"nbsubagents-sweep-{uuid.uuid4().hex[:16]}"
        self.renders = 0
        self.last_render = 0.0
        self.last_record = 0.0
        self._drawn = (-1, -1)  # the failed and completed counts the folds show
        self._digest = (-1, "")  # the board's failures and cells, drawn at this version of the state
        self.widget = self._build_widget()
        # The output in the notebook: the static record, with the widget view only while the sweep goes.
        self.record = NotebookRecord(self.display_id, lambda: (self.static_text(), self.static_html()),
                                     widget=self.widget, publish=publish)
        self.render()

    def _build_widget(self) -> Any:
        """The one place the panel's widgets are made."""
        w = load_ipywidgets()
        self.board = w.HTML().add_class("nbsubagents-sweep-board")
        self.fail_list = w.HTML().add_class("nbsubagents-sweep-fails")
        self.done_list = w.HTML().add_class("nbsubagents-sweep-done-list")
        self.fail_fold, self.done_fold = (w.Accordion([child], selected_index=None).add_class(name)
                                          for child, name in ((self.fail_list, "nbsubagents-sweep-fail-fold"),
                                                              (self.done_list, "nbsubagents-sweep-done-fold")))
        for fold in (self.fail_fold, self.done_fold):
            fold.layout.display = "none"  # until it has a run
        sheet = w.HTML(stylesheet()).add_class("nbsubagents-stylesheet")  # once, never with a render
        return w.VBox([self.board, self.fail_fold, self.done_fold, sheet]).add_class("nbsubagents-sweep")

    def render(self) -> None:
        with self.lock:
            state = self.state
            if self._digest[0] != state.version:  # they change only when a run ends: not redrawn every second
                self._digest = (state.version, digest_html(state, fold=False))
            self.board.value = board_html(state, self._digest[1])
            self._fill()
            state.changed = False
            self.renders += 1
            self.last_render = time.monotonic()

    def _fill(self) -> None:
        """The folds' titles and lists, drawn again only where a count changed, open or not: the kernel cannot
        know which fold is open (the sweep keeps its cell's kernel busy: the page's word that one opened arrives
        only once the sweep ended)."""
        state = self.state
        counts = state.counts()
        failed, completed = counts.get("failed", 0) + counts.get("aborted", 0), counts.get("completed", 0)
        drawn, self._drawn = self._drawn, (failed, completed)
        if drawn[0] != failed:
            aborted = " or aborted" if counts.get("aborted") else ""
            self.fail_fold.titles = (f"{glyph('failed')} {plural(failed, f'failed{aborted} run')}, by reason",)
            self.fail_fold.layout.display = None if failed else "none"
            self.fail_list.value = part("sweep.html", "group_folds", groups=state.failure_groups(), cap=REASON_CAP,
                                        named=GROUP_CELLS, per=GROUP_RUNS)
        if drawn[1] != completed:
            self.done_fold.titles = (f"{glyph('completed')} {completed} completed",)
            self.done_fold.layout.display = None if completed else "none"
            self.done_list.value = part("sweep.html", "done", rows=state.completed()[: state.cap], cap=state.cap,
                                        now=state.now())

    # -- the static record ---------------------------------------------------------------------------------
    def static_html(self) -> str:
        """The panel as self-contained HTML (the stylesheet, no script): the header, the failures by reason each
        folded over its runs, the cells' scores, the running runs, the completed ones in a fold (the sweep's order),
        the queued count; secrets masked. A saved notebook keeps it beside (at the end: instead of) the widget."""
        state = self.state
        with self.lock:
            body = (header_html(state) + digest_html(state, fold=True) + lines_html(state, live=not state.done)
                    + part("sweep.html", "done_fold", rows=state.completed(final=True), cap=RECORD_CAP,
                           now=state.now()))
        return strip_controls(part("sweep.html", "record", body=Html(masker().text(body))))

    def static_text(self) -> str:
        with self.lock:
            return terminal_safe(masker().text(state_text(self.state)))

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
                                    self._publish, self._lock)
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
