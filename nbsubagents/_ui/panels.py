"""Live progress panels in a notebook: ipywidgets that place the formatter's lines.

Panels are ipywidgets, imported through ``ui.kernel.load_ipywidgets`` when one is built (``ui.display``
decides when). Nothing is
worded here: event lines come from ``formatter.ProgressFormatter``, counters from ``events.Tally``;
a panel only chooses where each piece goes and how it is styled.

Threads: a panel's state changes on every event (cheap), but its widgets are only re-rendered on the
process's one clock (``lifecycle.watcher``), which ticks each renderer every ``TICK_INTERVAL``: a panel
that changed since is rendered once (at most every ``RENDER_INTERVAL``, ``PANELS_PER_TICK`` a tick, the one
waiting longest first; the latest state wins), and the
elapsed times move while no event comes (no thread of its own). Events may arrive from any thread (background
runs' watcher); one lock per renderer guards the state, and widgets are only updated by setting their
values. In ipykernel >= 7.4 the Cancel button and the history toggle are served by a kernel subshell,
so a click reaches Python while a foreground run keeps the main thread busy.
"""

from __future__ import annotations

import sys
import threading
import time
import uuid
import weakref
from typing import TYPE_CHECKING, Any, Callable, Iterable

from .._child.artifacts import TERMINAL
from .._child.formatter import ProgressLine
from .._lifecycle import watcher
from .._style import plural
from .._templates import Html, part, stylesheet
from .._views.panel_record import (
    GROUP_WORDS,
    group_header_of,
    group_header_text,
    group_static_html,
    group_static_record,
    group_static_text,
)
from .._views.panel_state import HISTORY_LIMIT, PanelState
from .kernel import NotebookRecord, click_subshell, load_ipywidgets, new_widget, route_clicks, shared
from .talk import BUTTON_LAYOUT, HIDDEN_LAYOUT, TalkBox

if TYPE_CHECKING:
    from .._lifecycle.handle import Run

__all__ = ["RunPanel", "GroupPanel", "WidgetRenderer", "live_panel", "HISTORY_LIMIT", "RENDER_INTERVAL",
           "STATIC_INTERVAL"]

RENDER_INTERVAL = 0.1    # at most ~10 renders a second per panel
TICK_INTERVAL = 0.1      # how often the ticker looks for pending renders
# Panels a tick draws at most: 10 renders a second across one renderer's panels, whatever their number (each render
# is a few comm messages, the kernel's main cost). One panel moves 10 times a second, 4 at once 2.5, 16 at once
# ~0.6 times a second each.
PANELS_PER_TICK = 1
CLOCK_INTERVAL = 1.0     # how often a running panel re-renders only to move its elapsed time
STATIC_INTERVAL = 15.0   # how often a running panel's static record is refreshed in the notebook


# -- one run ------------------------------------------------------------------------------------------
class _StaticRecord:
    """A panel's output as a ``kernel.NotebookRecord`` (the one mechanism of every view): its static record
    with the widget view while the run goes, the record alone once it ended.

    While the run goes the record is re-sent at most every ``STATIC_INTERVAL`` seconds (each update re-creates
    the widget view in JupyterLab, so they stay rare; the record says "as of" when it was taken); at the end
    the output is replaced by the final record alone, which every viewer shows without a kernel or widget
    JavaScript.
    """

    display_id: str
    widget: Any
    _lock: threading.RLock  # the panel's (a group's panels share their group's)
    _record: NotebookRecord | None = None
    _last_static = 0.0
    _record_due = False  # something a saved notebook should say at once (a run starts or stops waiting)

    def notebook_record(self, publish: Callable[[dict[str, Any], str, bool], Any] | None = None) -> NotebookRecord:
        """This panel's record in the notebook (``publish`` replaces IPython's display, for tests)."""
        if self._record is None:
            self._record = NotebookRecord(self.display_id, self.static_record,
                                          widget=self.widget, publish=publish, on_kernel_exit=self.kernel_gone)
        elif publish is not None:
            self._record._publish = publish
        return self._record

    def static_bundle(self, *, final: bool) -> dict[str, Any]:
        record = self.notebook_record()
        if final:
            record.ended = True
        return record.bundle()

    def show(self, publish: Callable[[dict[str, Any], str, bool], Any] | None = None, *,
             update: bool = False) -> None:
        """Display the panel (view and static record) under its display id; later records follow it.

        Under the panel's lock: a run that ends while it is being shown (its final render runs on the clock's
        thread) gets its final record either here or from that render, never an "as of" record for good."""
        with self._lock:
            record = self.notebook_record(publish)
            if self._ended_for_good():
                record.ended = True
            if update and record.shown:
                record.update()
            else:
                record.show()
            self._last_static = time.monotonic()

    def _typing(self) -> bool:
        """Whether a person is typing in one of the view's boxes: a refresh of the record then waits, since it
        re-creates the widget view in JupyterLab (the typed text is kept, the focus would be lost)."""
        return any(panel.talk.typed() for panel in getattr(self, "panels", [self]))

    def kernel_gone(self) -> None:
        """The kernel shuts down: the record of a run not yet ended says its end is unknown from here."""
        with self._lock:
            for panel in getattr(self, "panels", [self]):
                panel.mark_kernel_gone()

    def _static_step(self) -> None:
        """After a render: send the final record once, or a fresh one when the last is old."""
        record = self._record
        if record is None or not record.shown or record.ended:
            return
        try:
            if self._ended_for_good():
                record.end()
            elif (self._record_due or time.monotonic() - self._last_static >= STATIC_INTERVAL) and not self._typing():
                self._record_due = False
                self._last_static = time.monotonic()
                record.update()
        except Exception as exc:  # the record is a bonus: a failing display never stops the panel
            record.ended = True
            print(f"nbsubagents: could not update the saved record of a panel: {exc!r}", file=sys.stderr)


# The live panel of each run this process draws, by run id: UI state stays here, never on the ``Run``. Weak:
# a panel lives as long as its renderer or widget does (the watcher holds a running run's renderer).
_live: weakref.WeakValueDictionary[str, RunPanel] = weakref.WeakValueDictionary()


def live_panel(run: Run) -> RunPanel | None:
    """The live panel this process draws for ``run`` (a later display of it reuses it), else None."""
    return _live.get(run.run_id)


class RunPanel(PanelState, _StaticRecord):
    """One run's panel: header, the latest ``lines`` lines, the full history on demand, Cancel, final text,
    and while the run goes its conversation: the open questions with their answer controls
    (``questions_box``) and a message box with Steer and Follow up (``steer_box``), which its Message button beside
    Cancel opens (``talk.open()``). Every control posts to the
    run directory's inbox (``child.inbox.post``), so it works for any run, whoever started it.

    ``add(event, line)`` updates the state (cheap, every event); ``render()`` writes it to the widgets.
    ``widget`` is the ipywidgets box to display; the panel itself also displays in a notebook.
    """

    def __init__(self, run: Run, *, lines: int | None = None, history: int = HISTORY_LIMIT,
                 lock: threading.RLock | None = None) -> None:
        w = load_ipywidgets()
        PanelState.__init__(self, run, lines=lines, history=history)
        self._lock = lock or threading.RLock()  # the state is changed and read by events, the clock and clicks
        self.display_id = f"nbsubagents-run-{run.run_id}"
        self.renders = 0
        self.last_render = 0.0       # time.monotonic() of the last render
        self.dirty = True
        self._final_rendered = False
        self.shown = ""              # the status the header shows (``waiting`` or the run's)

        # Each widget opens with what the panel shows first (a message each: a trait set after it would be one
        # more), with shared layouts and styles (``kernel.new_widget``); the first render then sends nothing new.
        status = self.status
        shown = self.shown_status(status)
        window = self.window()
        self.header = new_widget(w.HTML, "nbsubagents-header", layout={"flex": "1 1 auto"},
                                 value=self._header_html(shown, status))
        self.cancel_button = new_widget(w.Button, "nbsubagents-cancel", description="Cancel", icon="stop",
                                        tooltip="Abort this run only", layout=BUTTON_LAYOUT)
        self.cancel_button.on_click(self._on_cancel)
        self.window_html = new_widget(w.HTML, "nbsubagents-window", value=self._window_html(status, window))
        # its sub-agents, looked up in the registry at the clock's ticks (``children_lines``): a widget only for a run
        # that may delegate (each widget is kernel CPU)
        self.children_html = new_widget(w.HTML, "nbsubagents-children-box") if self.children.may_have else None
        self._children_shown: list = []
        self.history_html = new_widget(w.HTML, "nbsubagents-history")
        self.history_box = new_widget(w.Accordion, "nbsubagents-history-toggle", children=[self.history_html],
                                      selected_index=None, titles=(self._history_title(self.earlier_lines(window)),),
                                      layout=HIDDEN_LAYOUT)
        self.history_box.observe(self._on_toggle, names="selected_index")
        self.final_html = new_widget(w.HTML, "nbsubagents-final")
        self._w = w
        self._subshell = click_subshell()
        # the conversation: one row per open question, then the message box (ui/talk.py)
        self.talk = TalkBox(run, self._lock, w, self._subshell, live=status == "running")
        self.questions_box, self.steer_box = self.talk.questions_box, self.talk.steer_box
        # told to a screen reader as it happens: the run waits for an answer, the run ended (``_announce``)
        self.announcer = new_widget(w.HTML, "nbsubagents-announce", value=self._announce(shown, status, False))
        top = new_widget(w.HBox, children=[self.header, self.announcer, self.talk.message_button, self.cancel_button],
                         layout={"align_items": "center", "justify_content": "space-between"})
        # the stylesheet, once: sent with the widget's first state, never with a render
        sheet = new_widget(w.HTML, "nbsubagents-stylesheet", value=stylesheet(), layout=HIDDEN_LAYOUT)
        self.widget = new_widget(w.VBox, "nbsubagents-panel", "nbsubagents-live", f"nbsubagents-run-{run.run_id}",
                                 children=[top, self.history_box, self.window_html,
                                           *([self.children_html] if self.children_html else []),
                                           self.questions_box, self.steer_box, self.final_html, sheet])
        _live[run.run_id] = self  # the run shown as a cell value later reuses this live panel (``live_panel``)
        for control in (self.cancel_button, self.history_box):
            route_clicks(control, self._subshell)
        self.render()

    @classmethod
    def from_run(cls, run: Run, **kwargs: Any) -> RunPanel:
        """A panel of what a run did so far (all of it when it ended), from its events.jsonl."""
        panel = cls.of_run(run, **kwargs)  # PanelState's replay of its events.jsonl
        if run.done:
            panel.finish()
        else:
            panel.render()
        return panel

    # -- state --------------------------------------------------------------------------------------
    def add(self, event: dict[str, Any], line: ProgressLine | None) -> None:
        """Take an event (on the follower's thread); the clock's next tick renders it."""
        with self._lock:
            super().add(event, line)
            self.dirty = True

    def static_record(self) -> tuple[str, str]:
        with self._lock:  # sent from the display, the clock and the kernel's exit
            return super().static_record()

    def finish(self) -> None:
        """The run is terminal: render its final state now (not throttled)."""
        with self._lock:
            self.settle()
            self.dirty = True
            self.render()

    @property
    def active(self) -> bool:
        return not self._final_rendered

    def _ended_for_good(self) -> bool:
        return self._final_rendered

    # -- rendering ----------------------------------------------------------------------------------
    def render(self) -> None:
        """Write the current state to the widgets (widgets send only values that changed)."""
        with self._lock:
            status = self.status
            questions = self.open_questions(status)
            shown = self.shown_status(status, questions)
            if (shown == "waiting") != (self.shown == "waiting"):
                self._record_due = True
            self.shown = shown
            self.header.value = self._header_html(shown, status)
            final = not self._final_rendered and self.ready_to_end(status)
            if final:
                self.drop_repeated_output()
            window = self.window()
            live = status == "running" and not final and not self._final_rendered
            self.window_html.value = self._window_html(
                status, self.without_open_questions(window, questions) if live else window)
            earlier = self.earlier_lines(window)
            title = self._history_title(earlier)
            if self.history_box.titles != (title,):
                self.history_box.titles = (title,)
            layout = shared(self._w.Layout) if earlier else shared(self._w.Layout, **HIDDEN_LAYOUT)
            if self.history_box.layout is not layout:  # offered only when the window hides some lines
                self.history_box.layout = layout
            if self.history_box.selected_index is not None:
                self.history_html.value = self._history_html()
            children = self.children_lines(final or self._final_rendered) if self.children_html is not None else []
            if children != self._children_shown:  # drawn again only when a line changed
                self._children_shown = children
                self.children_html.value = part("bits.html", "children", lines=children)
            self.talk.update(questions if live else [], live=live, taken=len(self.conversation.messages))
            self.announcer.value = self._announce(shown, status, final or self._final_rendered)
            if final:
                self.final_html.value = part("panel.html", "final", output=self.final_output(),
                                             error=self.shown_error(), run_id=self.run.run_id)
                with self.cancel_button.hold_sync():  # one message
                    self.cancel_button.disabled = True
                    self.cancel_button.layout = shared(self._w.Layout, **BUTTON_LAYOUT, **HIDDEN_LAYOUT)
                self.talk.end()
                self._final_rendered = True
            self.renders += 1
            self.dirty = False
            self.last_render = time.monotonic()
            self._static_step()

    # -- its widgets' HTML (_templates/panel.html) ----------------------------------------------------
    def _header_html(self, status: str, run_status: str) -> str:
        """The header of ``status`` as shown (``waiting`` for a running run with an open question); its numbers
        are those of ``run_status`` (the run's own status, the same but for ``waiting``)."""
        return part("panel.html", "header", status=status, fields=self.header_fields(run_status),
                    name=self.run.name, run_id=self.run.run_id)

    def _announce(self, shown: str, status: str, ended: bool) -> str:
        """The live region's words: set only as the run starts waiting or ends, so a screen reader says just that."""
        name = self.run.name or self.run.run_id
        words = (f"{name} ended: {status}" if ended
                 else f"{name} is waiting for your answer" if shown == "waiting" else "")
        return part("panel.html", "announce", words=words)

    def _window_html(self, status: str, lines: list[tuple[str, str, str]]) -> str:
        """The latest ``lines`` (``window()``), else what stands in for them; then what the run waits on."""
        return part("panel.html", "window", lines=Html("".join(piece for _, _, piece in lines)),
                    placeholder="" if lines else self.placeholder(status), waiting=self.waiting(status))

    def _history_html(self) -> str:
        """The lines above the window (each line shows once: here or in the window)."""
        dropped = self.line_count - len(self.history)
        earlier = list(self.history)[:max(0, self.earlier_lines(self.window()) - dropped)]
        return part("panel.html", "history", lines=Html("".join(piece for _, _, piece in earlier)),
                    dropped=dropped, transcript=str(self.run.paths.transcript))

    def _history_title(self, earlier: int) -> str:
        title = plural(earlier, "earlier line")
        return title + (f" (latest {self.history.maxlen} kept)" if self.line_count > len(self.history) else "")

    # -- controls -----------------------------------------------------------------------------------
    def _on_cancel(self, _button: Any = None) -> None:
        """Abort this run alone (the supervisor stops pi); may run on the kernel's click subshell."""
        with self._lock:
            if self._final_rendered:
                return
            with self.cancel_button.hold_sync():
                self.cancel_button.disabled = True
                self.cancel_button.description = "Cancelling…"
        self.run.cancel()

    def _on_toggle(self, change: dict[str, Any]) -> None:
        if change.get("new") is not None:
            with self._lock:
                self.history_html.value = self._history_html()

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        return self.widget._repr_mimebundle_(**kwargs)


# -- several runs -----------------------------------------------------------------------------------
class GroupPanel(_StaticRecord):
    """Parallel runs: ``Sub-agents: 2 running, 1 done, 1 failed``, one panel per run, ids at the end."""

    def __init__(self, runs: Iterable[Run], *, lines: int | None = None,
                 lock: threading.RLock | None = None) -> None:
        w = load_ipywidgets()
        self._lock = lock or threading.RLock()
        self.panels = [RunPanel(run, lines=lines, lock=self._lock) for run in runs]
        self.display_id = f"nbsubagents-group-{uuid.uuid4().hex[:16]}"
        self.header = new_widget(w.HTML, "nbsubagents-group-header",
                                 value=group_header_of([p.shown for p in self.panels]))
        self.ids_html = new_widget(w.HTML, "nbsubagents-run-ids")
        self.widget = new_widget(w.VBox, "nbsubagents-group",
                                 children=[self.header, *(p.widget for p in self.panels), self.ids_html])
        self.renders = 0
        self.last_render = 0.0
        self.render()

    def counts(self) -> dict[str, int]:
        """Runs per group word (running, waiting, queued, done, failed, aborted), in that order, zeros left out."""
        with self._lock:
            statuses = [p.shown_status(p.status) for p in self.panels]
        return {word: n for status, word in GROUP_WORDS.items() if (n := statuses.count(status))}

    def header_text(self) -> str:
        with self._lock:
            return group_header_text(self.panels)

    @property
    def done(self) -> bool:
        with self._lock:
            return all(p.status in TERMINAL for p in self.panels)

    def _ended_for_good(self) -> bool:
        return all(not p.active for p in self.panels)

    def static_record(self) -> tuple[str, str]:
        with self._lock:
            return group_static_record(self.panels)  # type: ignore[arg-type]

    def static_html(self) -> str:
        with self._lock:
            return group_static_html(self.panels)  # type: ignore[arg-type]

    def static_text(self) -> str:
        with self._lock:
            return group_static_text(self.panels)  # type: ignore[arg-type]

    def render(self) -> None:
        with self._lock:
            shown = [p.shown for p in self.panels]  # as each panel shows its run, read by its last render
            self.header.value = group_header_of(shown)
            if all(status in TERMINAL for status in shown):
                self.ids_html.value = part("bits.html", "ids", run_ids=[p.run.run_id for p in self.panels],
                                           classes="muted")
            self.renders += 1
            self.last_render = time.monotonic()
            self._static_step()

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        return self.widget._repr_mimebundle_(**kwargs)


# -- the renderer -----------------------------------------------------------------------------------
class WidgetRenderer:
    """The renderer protocol of ``nbsubagents._lifecycle.drive`` on live panels.

    ``start`` displays one ``RunPanel`` (one run) or a ``GroupPanel`` (several) with its static record
    (see ``_StaticRecord``); ``event`` only updates the state: its tick on the process's clock renders every
    panel that changed (at most every ``min_interval``; all of a burst's events in one render) and moves the
    clocks. Without a ticker (``ticker=False``) ``event`` renders when the panel's last render is
    ``min_interval`` old. ``end`` and ``close`` always render the final state, which replaces the widget view by
    the static record.

    ``display`` (tests, benchmarks) receives the widget instead and no static record is sent;
    ``publish(bundle, display_id, update)`` replaces IPython's display and update_display.
    """

    def __init__(self, *, lines: int | None = None, min_interval: float = RENDER_INTERVAL,
                 display: Callable[[Any], Any] | None = None, ticker: bool = True,
                 publish: Callable[[dict[str, Any], str, bool], Any] | None = None) -> None:
        load_ipywidgets()
        self.lines = lines
        self.min_interval = min_interval
        self._display = display
        self._publish = publish
        self._lock = threading.RLock()
        self._clock = watcher.Clock(self._tick, TICK_INTERVAL, "panel clock", enabled=ticker)
        self.view: RunPanel | GroupPanel | None = None
        self.panels: dict[str, RunPanel] = {}
        self._group_dirty = False

    # -- protocol -----------------------------------------------------------------------------------
    def start(self, runs: list[Run]) -> None:
        with self._lock:
            if len(runs) == 1:
                self.view = RunPanel(runs[0], lines=self.lines, lock=self._lock)
                self.panels = {runs[0].run_id: self.view}
            else:
                self.view = GroupPanel(runs, lines=self.lines, lock=self._lock)
                self.panels = {p.run.run_id: p for p in self.view.panels}
        self._show(self.view)
        self._clock.start()

    def follow(self, panel: RunPanel) -> None:
        """Keep a panel that is already on screen current (a running run displayed again)."""
        with self._lock:
            self.view = panel
            self.panels = {panel.run.run_id: panel}
            self._lock = panel._lock
        self._clock.start()

    def event(self, run: Run, event: dict[str, Any], line: ProgressLine | None) -> None:
        with self._lock:
            panel = self.panels.get(run.run_id) or self._adopt(run)
            seq = event.get("seq")
            if isinstance(seq, int) and seq <= panel.last_seq:
                return  # already in the panel (it was built from the run's events so far)
            panel.add(event, line)
            self._group_dirty = True
            if self._clock.running:
                return  # the clock's next tick renders it, with every other panel that changed meanwhile
            now = time.monotonic()
            if now - panel.last_render >= self.min_interval:
                panel.render()
            self._render_group(now, force=False)

    def end(self, run: Run) -> None:
        with self._lock:
            panel = self.panels.get(run.run_id) or self._adopt(run)
            panel.finish()
            self._group_dirty = True
            self._render_group(time.monotonic(), force=True)

    def close(self) -> None:
        self._clock.stop()
        with self._lock:
            for panel in self.panels.values():
                if panel.dirty or panel.active:
                    panel.render()
            self._group_dirty = True
            self._render_group(time.monotonic(), force=True)

    # -- internals ----------------------------------------------------------------------------------
    @property
    def renders(self) -> int:
        """Panel renders so far (for tests and benchmarks)."""
        with self._lock:
            return sum(p.renders for p in self.panels.values())

    def _show(self, view: RunPanel | GroupPanel) -> None:
        if self._display is not None:
            self._display(view.widget)
            return
        view.show(self._publish)

    def _adopt(self, run: Run) -> RunPanel:
        """A run this renderer was not started with (a late background run): its own panel."""
        panel = RunPanel(run, lines=self.lines, lock=self._lock)
        self.panels[run.run_id] = panel
        self._show(panel)
        return panel

    def _render_group(self, now: float, *, force: bool) -> None:
        group = self.view
        if isinstance(group, GroupPanel) and self._group_dirty and \
                (force or now - group.last_render >= self.min_interval):
            group.render()
            self._group_dirty = False

    def _tick(self) -> bool:
        """One tick of the clock: render what is pending or whose elapsed time moved; False once closed or
        once every panel shows its run's end (a follower nobody closes ends there too)."""
        with self._lock:
            now = time.monotonic()
            due = [panel for panel in self.panels.values()
                   if (panel.dirty and now - panel.last_render >= self.min_interval)
                   or (panel.active and now - panel.last_render >= CLOCK_INTERVAL)]
            if len(due) > PANELS_PER_TICK:  # the longest waiting first; the others at the next ticks
                due = sorted(due, key=lambda panel: panel.last_render)[:PANELS_PER_TICK]
            for panel in due:
                panel.render()
                self._group_dirty = True
            self._render_group(now, force=False)
            ended = bool(self.panels) and not any(p.active or p.dirty for p in self.panels.values()) \
                and not self._group_dirty
        return not ended
