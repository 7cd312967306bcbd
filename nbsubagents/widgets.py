"""Live progress panels in a notebook: ipywidgets that place the formatter's lines.

The only module that imports ipywidgets (``nbsubagents.display`` decides when to use it). Nothing is
worded here: event lines come from ``formatter.ProgressFormatter``, counters from ``events.Tally``;
a panel only chooses where each piece goes and how it is styled.

Threads: a panel's state changes on every event, but its widgets are re-rendered at most every
``RENDER_INTERVAL`` seconds (the latest state wins); a small daemon ticker flushes what is pending and
keeps the elapsed time moving while no event comes. Events may arrive from any thread (background
runs' watcher); one lock per renderer guards the state, and widgets are only updated by setting their
values. In ipykernel >= 7.4 the Cancel button and the history toggle are served by a kernel subshell,
so a click reaches Python while a foreground run keeps the main thread busy.
"""

from __future__ import annotations

import html
import re
import sys
import threading
import time
from collections import deque
from itertools import islice
from typing import TYPE_CHECKING, Any, Callable, Iterable

from .artifacts import TERMINAL
from .events import Tally
from .formatter import ProgressFormatter, ProgressLine
from .renderers import ICONS

if TYPE_CHECKING:
    from .runner import Run

__all__ = ["RunPanel", "GroupPanel", "WidgetRenderer", "HISTORY_LIMIT", "RENDER_INTERVAL"]

HISTORY_LIMIT = 500      # lines kept for the expanded view (the spec's MAX_MESSAGES_PER_SESSION)
RENDER_INTERVAL = 0.1    # at most ~10 renders a second per panel
TICK_INTERVAL = 0.1      # how often the ticker looks for pending renders
CLOCK_INTERVAL = 1.0     # how often a running panel re-renders only to move its elapsed time
FINAL_TEXT_LIMIT = 20_000

# Group header words for each status, in the order they are listed.
GROUP_WORDS = {"running": "running", "queued": "queued", "completed": "done", "failed": "failed",
               "aborted": "aborted"}

_RED = "color:var(--jp-error-color1,#d32f2f)"
_MUTED = "color:var(--jp-content-font-color2,#777)"
_MONO = ("font-family:var(--jp-code-font-family,monospace);font-size:var(--jp-code-font-size,12px);"
         "line-height:1.4;white-space:pre-wrap;word-break:break-word")
# How each kind of formatter line looks; sent with every window so a saved notebook keeps it.
_LINE_CSS = (
    "<style>"
    ".nbsubagents-lines{" + _MONO + "}"
    ".nbsubagents-lines .nbsubagents-failed,.nbsubagents-lines .nbsubagents-error{" + _RED + "}"
    ".nbsubagents-lines .nbsubagents-assistant{color:var(--jp-brand-color1,#1976d2);"
    "border-left:2px solid var(--jp-brand-color1,#1976d2);padding-left:6px}"
    ".nbsubagents-lines .nbsubagents-thinking{" + _MUTED + ";font-style:italic}"
    ".nbsubagents-lines .nbsubagents-done,.nbsubagents-lines .nbsubagents-info,"
    ".nbsubagents-lines .nbsubagents-placeholder{" + _MUTED + "}"
    "</style>"
)
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


def _ipywidgets() -> Any:
    try:
        import ipywidgets
    except ImportError:
        raise ImportError(
            "Live panels need ipywidgets: install it with `pip install 'ipywidgets>=8'` (JupyterLab shows "
            "them with jupyterlab_widgets), or show plain text with NBSUBAGENTS_DISPLAY=text.") from None
    return ipywidgets


# -- formatting helpers: numbers and durations, no event wording ------------------------------------
def _duration(seconds: float) -> str:
    if seconds < 10:
        return f"{seconds:.1f}s"
    if seconds < 60:
        return f"{int(seconds)}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m" + (f" {secs:02d}s" if secs else "")
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h" + (f" {minutes:02d}m" if minutes else "")


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


# -- ipykernel subshell: serve clicks while the main thread runs a foreground cell -------------------
_subshell_lock = threading.Lock()
_subshell: str | bool | None = None  # None: not tried yet; False: not available


def _click_subshell() -> str | None:
    """A kernel subshell (ipykernel >= 7.4) that handles panel clicks; None outside such a kernel.

    A foreground run keeps the kernel's main thread busy until the cell ends, so a click sent to the
    main shell would wait for the run it wants to cancel. Comm messages of a widget are routed to the
    subshell returned here (``_route_clicks``), whose own thread runs the click handler at once.
    """
    global _subshell
    with _subshell_lock:
        if _subshell is not None:
            return _subshell or None
        _subshell = False
        if "ipykernel" not in sys.modules:
            return None
        try:
            from ipykernel.kernelbase import Kernel
            if not Kernel.initialized():
                return None
            kernel = Kernel.instance()
            channel = getattr(kernel, "shell_channel_thread", None)
            manager = getattr(channel, "manager", None)
            if not getattr(kernel, "_supports_kernel_subshells", False) or manager is None:
                return None
            created, box = threading.Event(), {}

            def create() -> None:
                try:
                    box["id"] = manager._create_subshell()
                finally:
                    created.set()

            channel.io_loop.add_callback(create)  # subshells are made on the shell channel thread
            if created.wait(5) and box.get("id"):
                _subshell = box["id"]
        except Exception:  # an ipykernel without these internals: clicks wait for the main shell
            _subshell = False
        return _subshell or None


def _route_clicks(widget: Any, subshell_id: str | None) -> None:
    comm = getattr(widget, "comm", None)
    if subshell_id and comm is not None and hasattr(comm, "_reply_subshell_for"):
        comm._reply_subshell_for = lambda data, default: subshell_id


# -- one run ------------------------------------------------------------------------------------------
class RunPanel:
    """One run's panel: header, the latest ``lines`` lines, the full history on demand, Cancel, final text.

    ``add(event, line)`` updates the state (cheap, every event); ``render()`` writes it to the widgets.
    ``widget`` is the ipywidgets box to display; the panel itself also displays in a notebook.
    """

    def __init__(self, run: Run, *, lines: int | None = None, history: int = HISTORY_LIMIT,
                 lock: threading.RLock | None = None) -> None:
        w = _ipywidgets()
        if lines is None:
            from .config import settings
            lines = settings.panel_lines
        if isinstance(lines, bool) or not isinstance(lines, int) or lines < 1:
            from .config import NbSubagentsError
            raise NbSubagentsError(f"panel_lines must be a whole number of at least 1, got {lines!r}")
        self.run = run
        self.lines = lines
        self.tally = Tally()
        # (kind, text, html) of each line: the kind and text let the end drop what the output box repeats.
        # The window is the latest ``lines`` of the history, but at the end (``_final_window``).
        self.history: deque[tuple[str, str, str]] = deque(maxlen=history)
        self._final_window: list[tuple[str, str, str]] | None = None
        self.line_count = 0
        self.renders = 0
        self.last_render = 0.0       # time.monotonic() of the last render
        self.dirty = True
        self._lock = lock or threading.RLock()
        self._started: float | None = None  # wall clock (event ts) when the run started
        self._ended: float | None = None
        self._status: str | None = None     # terminal status, once known
        self._saw_run_end = False
        self._finished = False              # finish() was called: the run's end is settled
        self._final_rendered = False

        self.header = w.HTML(layout=w.Layout(flex="1 1 auto")).add_class("nbsubagents-header")
        self.cancel_button = w.Button(description="Cancel", icon="stop", tooltip="Abort this run only",
                                      layout=w.Layout(width="auto", flex="0 0 auto"))
        self.cancel_button.add_class("nbsubagents-cancel")
        self.cancel_button.on_click(self._on_cancel)
        self.window_html = w.HTML().add_class("nbsubagents-window")
        self.history_html = w.HTML().add_class("nbsubagents-history")
        self.history_box = w.Accordion(children=[self.history_html], selected_index=None)
        self.history_box.add_class("nbsubagents-history-toggle")
        self.history_box.observe(self._on_toggle, names="selected_index")
        self.final_html = w.HTML().add_class("nbsubagents-final")
        top = w.HBox([self.header, self.cancel_button],
                      layout=w.Layout(align_items="center", justify_content="space-between"))
        self.widget = w.VBox([top, self.window_html, self.history_box, self.final_html])
        self.widget.add_class("nbsubagents-panel")
        self.widget.add_class(f"nbsubagents-run-{run.id}")
        run._live_panel = self  # the run shown as a cell value later reuses this live panel
        subshell = _click_subshell()
        _route_clicks(self.cancel_button, subshell)
        _route_clicks(self.history_box, subshell)
        self.render()

    @classmethod
    def from_run(cls, run: Run, **kwargs: Any) -> RunPanel:
        """A panel of what a run did so far (all of it when it ended), from its events.jsonl."""
        panel = cls(run, **kwargs)
        formatter = ProgressFormatter(run.meta.get("cwd"))
        for event in run.events():
            panel.add(event, formatter.format(event))
        if run.done:
            panel.finish()
        else:
            panel.render()
        return panel

    # -- state --------------------------------------------------------------------------------------
    def add(self, event: dict[str, Any], line: ProgressLine | None) -> None:
        """Take one normalized event and its formatted line (None: counters only)."""
        with self._lock:
            self.tally.add(event)
            kind = event.get("type")
            ts = event.get("ts")
            if kind == "run_start" or self._started is None:
                self._started = ts if isinstance(ts, (int, float)) else time.time()
            if kind == "run_end":
                self._saw_run_end = True
                self._status = event.get("status") if event.get("status") in TERMINAL else "failed"
                self._ended = ts if isinstance(ts, (int, float)) else time.time()
            if line is not None:
                self._append(line)
            self.dirty = True

    def _append(self, line: ProgressLine) -> None:
        text = _ANSI.sub("", line.text) if "\x1b" in line.text else line.text
        opening = f'<div class="nbsubagents-line nbsubagents-{line.kind}">'
        rows = text.split("\n") if "\n" in text else [text]
        if len(rows) > self.history.maxlen:  # type: ignore[operator]
            self.line_count += len(rows) - self.history.maxlen  # type: ignore[operator]
            rows = rows[-self.history.maxlen:]  # type: ignore[operator]
        for row in rows:
            row = row.rstrip()
            if not row.strip():
                continue
            piece = (line.kind, row, opening + html.escape(row, quote=False) + "</div>")
            self.history.append(piece)
            self.line_count += 1

    def finish(self) -> None:
        """The run is terminal: render its final state now (not throttled)."""
        with self._lock:
            status = self.run.status
            if status in TERMINAL:
                self._status = status
            self._finished = True
            self.dirty = True
            self.render()

    @property
    def status(self) -> str:
        """queued, running, or the terminal status."""
        with self._lock:
            return self._current_status()

    @property
    def active(self) -> bool:
        return not self._final_rendered

    def _current_status(self) -> str:
        if self._status is not None:
            return self._status
        status = self.run.status
        if status in TERMINAL:
            self._status = status
            if self._ended is None:
                self._ended = time.time()
        elif status == "queued" and self._started is not None:
            status = "running"  # events arrive: the supervisor runs, whatever the handle knows
        return status

    def elapsed(self) -> float | None:
        """Seconds since the run started: live while it runs, frozen once it ended."""
        with self._lock:
            status = self._current_status()
            if status in TERMINAL:
                result = self.run.result or {}
                if isinstance(result.get("durationSeconds"), (int, float)):
                    return float(result["durationSeconds"])
                if self._started is None:
                    return None
                return max(0.0, (self._ended or time.time()) - self._started)
            if self._started is None:
                return None
            return max(0.0, time.time() - self._started)

    # -- rendering ----------------------------------------------------------------------------------
    def render(self) -> None:
        """Write the current state to the widgets (widgets send only values that changed)."""
        with self._lock:
            status = self._current_status()
            terminal = status in TERMINAL
            self.header.value = self._header_html(status)
            # The end is final once every event is in (run_end, or finish() after the last pump) and the
            # final text is in result.json, written just after the run_end event.
            final = terminal and not self._final_rendered and (
                self._finished or (self._saw_run_end and self.run.result is not None))
            if final:
                self._drop_repeated_output()
            self.window_html.value = self._window_html(status)
            title = f"Full history ({_plural(self.line_count, 'line')}"
            title += f", latest {self.history.maxlen} kept)" if self.line_count > len(self.history) else ")"
            if self.history_box.titles != (title,):
                self.history_box.titles = (title,)
            if self.history_box.selected_index is not None:
                self.history_html.value = self._history_html()
            if final:
                self.final_html.value = self._final_html(status)
                self.cancel_button.disabled = True
                self.cancel_button.layout.display = "none"
                self._final_rendered = True
            self.renders += 1
            self.dirty = False
            self.last_render = time.monotonic()

    def _header_html(self, status: str) -> str:
        run, tally = self.run, self.tally
        result = run.result if status in TERMINAL else None
        calls, tokens, cost = tally.tool_calls, tally.tokens, tally.cost
        if result and not (calls or tokens):  # a run seen only through its result (failed before start)
            calls = result.get("toolCalls") or 0
            usage = result.get("usage") or {}
            tokens, cost = usage.get("totalTokens") or 0, usage.get("cost") or 0.0
        parts = [html.escape(run.model or tally.model or "no model", quote=False), _plural(calls, "tool call")]
        if tokens:
            parts.append(f"{tokens:,} tokens")
        if cost:
            parts.append(f"${cost:.4f}")
        from .renderers import extra_parts
        turns = tally.turns or ((result or {}).get("turns") or 0)
        parts += [html.escape(p, quote=False) for p in extra_parts(
            run, {"max_turns": turns, "max_tool_calls": calls, "max_tokens": tokens, "max_cost": cost})]
        elapsed = self.elapsed()
        if elapsed is not None:
            parts.append(f'<span class="nbsubagents-elapsed">{_duration(elapsed)}</span>')
        timeout = run.meta.get("timeout")
        if isinstance(timeout, (int, float)) and not isinstance(timeout, bool) and timeout > 0:
            parts.append(f'<span class="nbsubagents-timeout">timeout {_duration(float(timeout))}</span>')
        meta = " · ".join(parts)
        style = f' style="{_RED}"' if status in ("failed", "aborted") else ""
        return (f'<div class="nbsubagents-status-{status}">'
                f'<span class="nbsubagents-icon"{style}>{ICONS.get(status, "?")}</span> '
                f'<b class="nbsubagents-name">{html.escape(run.name, quote=False)}</b> '
                f'<span class="nbsubagents-status"{style}>{status}</span> '
                f'<span class="nbsubagents-meta" style="{_MUTED}">· {meta}</span></div>')

    def _drop_repeated_output(self) -> None:
        """The output box below shows the final message: the window ends with what led to it instead.

        The message is the run of assistant lines just before the closing lines ("Completed"); only lines
        that the output holds are dropped, so nothing the box does not show goes missing.
        """
        output = {row.strip() for row in self.run.output.splitlines() if row.strip()}
        if not output:
            return
        rows = list(self.history)
        end = len(rows)
        while end and len(rows) - end < 3 and rows[end - 1][0] in ("done", "info", "error", "failed"):
            end -= 1
        start = end
        while start and rows[start - 1][0] == "assistant" and rows[start - 1][1].strip() in output:
            start -= 1
        if start < end:
            self._final_window = (rows[:start] + rows[end:])[-self.lines:]

    def _window_html(self, status: str) -> str:
        window = self._final_window
        if window is None:
            window = list(islice(self.history, max(0, len(self.history) - self.lines), None))
        if window:
            body = "".join(piece for _, _, piece in window)
        else:
            placeholder = {"queued": "(queued)", "running": "(starting…)"}.get(status, "(no output)")
            body = f'<div class="nbsubagents-line nbsubagents-placeholder">{placeholder}</div>'
        return f'{_LINE_CSS}<div class="nbsubagents-lines">{body}</div>'

    def _history_html(self) -> str:
        dropped = self.line_count - len(self.history)
        note = (f'<div class="nbsubagents-line nbsubagents-placeholder">({_plural(dropped, "earlier line")} '
                f'not kept here: see {html.escape(str(self.run.paths.transcript), quote=False)})</div>'
                if dropped > 0 else "")
        return f'{_LINE_CSS}<div class="nbsubagents-lines">{note}{"".join(piece for _, _, piece in self.history)}</div>'

    def _final_html(self, status: str) -> str:
        parts = []
        output = self.run.output.strip()
        if output:
            if len(output) > FINAL_TEXT_LIMIT:
                output = output[:FINAL_TEXT_LIMIT] + "\n… (run.output has all of it)"
            parts.append(f'<div class="nbsubagents-output" style="{_MONO};border-left:3px solid '
                         f'var(--jp-success-color1,#388e3c);padding-left:8px;margin:4px 0">'
                         f'{html.escape(output, quote=False)}</div>')
        error = self.run.error
        if error and not self._saw_run_end:  # otherwise the window's last line already says it
            parts.append(f'<div class="nbsubagents-error" style="{_RED};{_MONO}">'
                         f'{html.escape(error, quote=False)}</div>')
        parts.append(f'<div class="nbsubagents-runid" style="{_MUTED};font-size:11px">'
                     f'{html.escape(self.run.id, quote=False)}</div>')
        return "".join(parts)

    # -- controls -----------------------------------------------------------------------------------
    def _on_cancel(self, _button: Any = None) -> None:
        """Abort this run alone (the supervisor stops pi); may run on the kernel's click subshell."""
        with self._lock:
            if self._final_rendered:
                return
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
class GroupPanel:
    """Parallel runs: ``Sub-agents: 2 running, 1 done, 1 failed``, one panel per run, ids at the end."""

    def __init__(self, runs: Iterable[Run], *, lines: int | None = None,
                 lock: threading.RLock | None = None) -> None:
        w = _ipywidgets()
        self._lock = lock or threading.RLock()
        self.panels = [RunPanel(run, lines=lines, lock=self._lock) for run in runs]
        self.header = w.HTML().add_class("nbsubagents-group-header")
        self.ids_html = w.HTML().add_class("nbsubagents-run-ids")
        self.widget = w.VBox([self.header, *(p.widget for p in self.panels), self.ids_html])
        self.widget.add_class("nbsubagents-group")
        self.renders = 0
        self.last_render = 0.0
        self.render()

    def counts(self) -> dict[str, int]:
        """Runs per group word (running, queued, done, failed, aborted), in that order, zeros left out."""
        with self._lock:
            statuses = [p.status for p in self.panels]
        return {word: n for status, word in GROUP_WORDS.items() if (n := statuses.count(status))}

    def header_text(self) -> str:
        return "Sub-agents: " + ", ".join(f"{n} {word}" for word, n in self.counts().items())

    @property
    def done(self) -> bool:
        with self._lock:
            return all(p.status in TERMINAL for p in self.panels)

    def render(self) -> None:
        with self._lock:
            self.header.value = f"<b>{html.escape(self.header_text(), quote=False)}</b>"
            if self.done:
                ids = ", ".join(f"<code>{html.escape(p.run.id, quote=False)}</code>" for p in self.panels)
                self.ids_html.value = f'<div style="{_MUTED}">Run ids: {ids}</div>'
            self.renders += 1
            self.last_render = time.monotonic()

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        return self.widget._repr_mimebundle_(**kwargs)


# -- the renderer -----------------------------------------------------------------------------------
class WidgetRenderer:
    """The renderer protocol of ``nbsubagents.renderers`` on live panels.

    ``start`` displays one ``RunPanel`` (one run) or a ``GroupPanel`` (several); ``event`` updates the
    state and renders when the panel's last render is ``min_interval`` old; the ticker renders what is
    left pending and moves the clocks; ``end`` and ``close`` always render the final state.
    """

    def __init__(self, *, lines: int | None = None, min_interval: float = RENDER_INTERVAL,
                 display: Callable[[Any], Any] | None = None, ticker: bool = True) -> None:
        _ipywidgets()
        self.lines = lines
        self.min_interval = min_interval
        self._display = display
        self._use_ticker = ticker
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None
        self.view: RunPanel | GroupPanel | None = None
        self.panels: dict[str, RunPanel] = {}
        self._group_dirty = False

    # -- protocol -----------------------------------------------------------------------------------
    def start(self, runs: list[Run]) -> None:
        with self._lock:
            if len(runs) == 1:
                self.view = RunPanel(runs[0], lines=self.lines, lock=self._lock)
                self.panels = {runs[0].id: self.view}
            else:
                self.view = GroupPanel(runs, lines=self.lines, lock=self._lock)
                self.panels = {p.run.id: p for p in self.view.panels}
        self._show(self.view.widget)
        if self._use_ticker and self._ticker is None:
            self._ticker = threading.Thread(target=self._tick, name="nbsubagents-panels", daemon=True)
            self._ticker.start()

    def event(self, run: Run, event: dict[str, Any], line: ProgressLine | None) -> None:
        with self._lock:
            panel = self.panels.get(run.id) or self._adopt(run)
            panel.add(event, line)
            self._group_dirty = True
            now = time.monotonic()
            if now - panel.last_render >= self.min_interval:
                panel.render()
            self._render_group(now, force=False)

    def end(self, run: Run) -> None:
        with self._lock:
            panel = self.panels.get(run.id) or self._adopt(run)
            panel.finish()
            self._group_dirty = True
            self._render_group(time.monotonic(), force=True)

    def close(self) -> None:
        self._stop.set()
        ticker, self._ticker = self._ticker, None
        if ticker is not None and ticker is not threading.current_thread():
            ticker.join(2)
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

    def _show(self, widget: Any) -> None:
        if self._display is not None:
            self._display(widget)
            return
        from IPython.display import display
        display(widget)

    def _adopt(self, run: Run) -> RunPanel:
        """A run this renderer was not started with (a late background run): its own panel."""
        panel = RunPanel(run, lines=self.lines, lock=self._lock)
        self.panels[run.id] = panel
        self._show(panel.widget)
        return panel

    def _render_group(self, now: float, *, force: bool) -> None:
        group = self.view
        if isinstance(group, GroupPanel) and self._group_dirty and \
                (force or now - group.last_render >= self.min_interval):
            group.render()
            self._group_dirty = False

    def _tick(self) -> None:
        while not self._stop.wait(TICK_INTERVAL):
            with self._lock:
                now = time.monotonic()
                for panel in self.panels.values():
                    age = now - panel.last_render
                    if (panel.dirty and age >= self.min_interval) or (panel.active and age >= CLOCK_INTERVAL):
                        panel.render()
                        self._group_dirty = True
                self._render_group(now, force=False)
