"""A sweep's live panel: one compact line per run, made for 24 to 1,000 runs.

An experiment drives its runs through the ``lifecycle.drive.Renderer`` port like ``run_parallel`` does, but one
full panel per run (history, answer) buries what is running under what has ended. Here each run is one line:
its status glyph, its cell (preset · model · task id · repeat), and while it runs its current step and clock,
once it ended its duration, cost and scores (the experiment scores a run before it calls ``end(run)``, so
``run.scores`` holds them then). Running runs come first, then ended ones (newest first); queued runs are one
count; at most ``LINE_CAP`` lines show, the rest is "and N more". Above them: the counts, an n/N progress bar
and an estimate of the time left (from the durations of ended runs and the concurrency); below them the
failures, each with its reason, one click away.

``SweepState`` is that model, without widgets (the tests drive it with plain objects). ``SweepPanel`` draws it
as ipywidgets, re-rendered on the watcher's clock at most every ``RENDER_INTERVAL`` seconds whatever the number
of runs, and as a static record (``static_html``: a compact table, ``static_text``) that a saved notebook
keeps. ``SweepTextRenderer`` prints the same lines outside a notebook (to stderr: stdout is the program's).
``sweep_renderer`` chooses between them, as ``ui.display`` decides.
"""

from __future__ import annotations

import html
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable, TextIO

from ..child.artifacts import TERMINAL
from ..child.secrets import strip_controls, terminal_safe
from ..child.summary import change_words
from ..child.text import write_line
from ..lifecycle import watcher
from ..lifecycle.drive import NullRenderer, Renderer
from ..style import STATUS_CSS, attrs, color, duration, glyph, html_table, plural, shorten
from ..views.masking import masker
from ..views.panel_state import GROUP_WORDS, MUTED_INK
from .display import silenced, widgets_available
from .kernel import NotebookRecord, Publish, load_ipywidgets, text_stream
from .panels import STATIC_INTERVAL

if TYPE_CHECKING:
    from ..child.formatter import ProgressLine
    from ..lifecycle.handle import Run

__all__ = ["SweepState", "SweepLine", "SweepPanel", "SweepRenderer", "SweepTextRenderer", "sweep_renderer",
           "LINE_CAP", "RENDER_INTERVAL"]

LINE_CAP = 40            # run lines shown at most; the rest is "and N more"
FAILURE_CAP = 100        # failures listed with their reasons at most
RENDER_INTERVAL = 0.5    # the live panel re-renders at most twice a second, however many runs there are
TEXT_INTERVAL = 10.0     # outside a notebook, a progress line at most every this many seconds
_ACTIVE_KINDS = ("tool", "assistant", "thinking", "done", "failed", "error")
_CELL = "padding:1px 10px 1px 0;text-align:left;white-space:nowrap;vertical-align:top;border:none"
_FONT = ("font-family:var(--jp-ui-font-family,-apple-system,Segoe UI,Helvetica,Arial,sans-serif);"
         "font-size:12px;line-height:1.35")
_REASON = "white-space:pre-wrap;margin-left:1.5em"


# -- the model ------------------------------------------------------------------------------------------------
@dataclass(eq=False)
class SweepLine:
    """One run as its line shows it."""

    run: Any
    cell: str
    status: str = "queued"
    started: float | None = None   # wall clock when it started running
    ended: int = 0                 # the order of its end (1 = the first run that ended)
    activity: str = ""             # what it does now: the formatter's latest line
    cost: float = 0.0
    took: float | None = None      # seconds, once ended
    scores: dict[str, Any] = field(default_factory=dict)
    changes: str = ""              # an isolated run's changes: ``1 file +2 −0``
    reason: str = ""               # why it did not complete

    def clock(self, now: float) -> float | None:
        """Seconds it ran: so far while running, its duration once ended."""
        if self.status in TERMINAL:
            return self.took
        return None if self.started is None else max(0.0, now - self.started)

    def scores_text(self) -> str:
        return ", ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in self.scores.items())

    def outcome(self) -> str:
        """What an ended run leaves: its changes (isolated) and its scores."""
        return " · ".join(p for p in (self.changes, self.scores_text()) if p)


def cell_label(run: Any, *, repeats: bool = True) -> str:
    """``preset · model · task id · #repeat`` of an experiment's run (its name outside one)."""
    params = getattr(run, "params", None) or {}
    if not params:
        return run.name
    parts = [params.get("preset") or run.preset, params.get("model") or run.model or "default",
             params.get("task_id")]
    if repeats and params.get("repeat") is not None:
        parts.append(f"#{params['repeat']}")
    return " · ".join(str(p) for p in parts if p)


def failure_reason(run: Any) -> str:
    """Why a run did not complete: its error, else its stop reason, else its status."""
    result = run.result or {}
    return (result.get("errorMessage") or "").strip() or str(result.get("stopReason") or run.status)


class SweepState:
    """The lines of a sweep's runs, their counts and the time left; ``changed`` says a render is due.

    ``add(run, event, line)`` and ``end(run)`` are the drive loop's words; ``refresh()`` notices runs the loop
    launched that have said nothing yet. Everything is cheap enough for a thousand runs several times a second.
    """

    def __init__(self, runs: Iterable[Run], *, title: str = "Sweep", concurrency: int = 1, cap: int = LINE_CAP,
                 clock: Callable[[], float] = time.time) -> None:
        runs = list(runs)
        self.title = title
        self.concurrency = max(1, int(concurrency))
        self.cap = cap
        self._clock = clock
        self._repeats = any((getattr(r, "params", None) or {}).get("repeat", 1) not in (1, None) for r in runs)
        self.lines: dict[str, SweepLine] = {}
        for run in runs:
            self._line(run)
        self._ends = 0
        self.changed = True

    def _line(self, run: Run) -> SweepLine:
        line = self.lines.get(run.run_id)
        if line is None:  # a run the sweep was not started with: it joins
            line = self.lines[run.run_id] = SweepLine(run, cell_label(run, repeats=self._repeats))
        return line

    # -- the drive loop's words -----------------------------------------------------------------------------
    def add(self, run: Run, event: dict[str, Any], line: ProgressLine | None) -> None:
        row = self._line(run)
        if row.status in TERMINAL:
            return
        ts = event.get("ts")
        if row.status == "queued" or (event.get("type") == "run_start" and isinstance(ts, (int, float))):
            row.status = "running"
            row.started = ts if isinstance(ts, (int, float)) else self._clock()
        if event.get("type") == "usage":
            row.cost += event.get("cost") or 0.0
        if line is not None and line.kind in _ACTIVE_KINDS and line.text.strip():
            row.activity = line.text.strip().partition("\n")[0]
        self.changed = True

    def end(self, run: Run) -> None:
        row = self._line(run)
        result = run.result or {}
        row.status = run.status if run.status in TERMINAL else "failed"
        took = result.get("durationSeconds")
        if isinstance(took, (int, float)):
            row.took = float(took)
        elif row.started is not None:
            row.took = max(0.0, self._clock() - row.started)
        cost = (result.get("usage") or {}).get("cost")
        if isinstance(cost, (int, float)):
            row.cost = float(cost)
        row.scores = dict(getattr(run, "scores", None) or {})
        row.changes = change_words(result["changes"]) if result.get("changes") else ""
        row.reason = "" if row.status == "completed" else failure_reason(run)
        row.activity = ""
        if not row.ended:
            self._ends += 1
            row.ended = self._ends
        self.changed = True

    def refresh(self) -> None:
        """Runs the loop launched (their supervisor process exists) show as running before their first event."""
        for row in self.lines.values():
            if row.status == "queued" and getattr(row.run, "process", None) is not None:
                row.status = "running"
                row.started = self._clock()
                self.changed = True

    # -- what is shown --------------------------------------------------------------------------------------
    def counts(self) -> dict[str, int]:
        """Runs per status, in the header's order (running, queued, completed, failed, aborted), zeros left out."""
        found = dict.fromkeys(GROUP_WORDS, 0)
        for row in self.lines.values():
            found[row.status] = found.get(row.status, 0) + 1
        return {status: n for status, n in found.items() if n}

    def now(self) -> float:
        """The state's clock (wall time; a test's own)."""
        return self._clock()

    @property
    def total(self) -> int:
        return len(self.lines)

    @property
    def ended(self) -> int:
        return sum(1 for row in self.lines.values() if row.status in TERMINAL)

    @property
    def done(self) -> bool:
        return all(row.status in TERMINAL for row in self.lines.values())

    def failures(self) -> list[SweepLine]:
        """The runs that ended failed or aborted, in the order they ended."""
        return sorted((r for r in self.lines.values() if r.status in ("failed", "aborted")), key=lambda r: r.ended)

    def time_left(self, now: float | None = None) -> float | None:
        """Seconds until the last run ends, estimated: the work left (each queued run the mean duration of the
        runs that ended, each running run what is left of that mean) over the runs that go at once. None
        before any run ended (nothing to go by)."""
        rows = self.lines.values()
        took = [r.took for r in rows if r.status in ("completed", "failed") and r.took]
        queued = sum(1 for r in rows if r.status == "queued")
        running = [r for r in rows if r.status == "running"]
        if not queued and not running:
            return 0.0
        if not took:
            return None
        mean = sum(took) / len(took)
        now = self._clock() if now is None else now
        work = queued * mean + sum(max(mean - (r.clock(now) or 0.0), 0.0) for r in running)
        return work / min(self.concurrency, queued + len(running))

    def shown(self, *, final: bool = False) -> tuple[list[SweepLine], int]:
        """The lines to show, at most ``cap``, and how many more there are (queued runs are a count apart).

        Live: running runs first (the longest running on top), then ended ones, the latest first. ``final``
        (the record of a sweep that ended): every run in the sweep's own order."""
        rows = [r for r in self.lines.values() if r.status != "queued"]
        if not final:
            running = sorted((r for r in rows if r.status == "running"), key=lambda r: r.started or 0.0)
            rows = running + sorted((r for r in rows if r.status in TERMINAL), key=lambda r: -r.ended)
        return rows[: self.cap], max(0, len(rows) - self.cap)

    def header_words(self) -> list[tuple[str, str]]:
        """``(status, "3 running")`` of each status present, in the header's order."""
        return [(status, f"{n} {GROUP_WORDS[status]}") for status, n in self.counts().items()]

    def time_left_text(self) -> str:
        if self.done:
            return ""
        left = self.time_left()
        return "estimating the time left" if left is None else f"about {duration(left)} left"

    def header_text(self) -> str:
        """``Experiment x · 6/24 · 3 running, 15 queued, 6 done · about 1m 05s left``."""
        parts = [self.title, f"{self.ended}/{self.total}", ", ".join(words for _, words in self.header_words())]
        return " · ".join(p for p in [*parts, self.time_left_text()] if p)


# -- HTML and text, from the model ---------------------------------------------------------------------------
def _esc(text: str) -> str:
    return html.escape(text, quote=False)


def _progress_html(state: SweepState) -> str:
    """A bar of the ended runs, each status its colour's share."""
    total = max(1, state.total)
    segments = "".join(
        f'<div class="nbsubagents-c-{status}" style="width:{100 * n / total:.2f}%;background:{color(status)}">'
        f'</div>' for status, n in state.counts().items() if status in TERMINAL)
    return (f'<div class="nbsubagents-sweep-bar" role="progressbar" aria-valuemin="0" aria-valuemax="{state.total}" '
            f'aria-valuenow="{state.ended}" style="display:flex;height:6px;max-width:480px;margin:3px 0 4px;'
            f'background:var(--jp-layout-color3,#e5e7eb);border-radius:3px;overflow:hidden">{segments}</div>')


def header_html(state: SweepState) -> str:
    """The title, ``n/N``, the counts in their colours (each with its number in ``data-count``), the time left
    and the progress bar."""
    counts = ", ".join(f'<span {attrs(status, f"nbsubagents-sweep-count nbsubagents-sweep-{status}")} '
                       f'data-status="{status}" data-count="{words.split()[0]}">{_esc(words)}</span>'
                       for status, words in state.header_words())
    left = state.time_left_text()
    return (f'<div class="nbsubagents-sweep-header" style="{_FONT};font-size:13px"><b>{_esc(state.title)}</b> · '
            f'<span class="nbsubagents-sweep-progress">{state.ended}/{state.total}</span> · {counts}'
            + (f' <span class="nbsubagents-sweep-left" style="{MUTED_INK}">· {_esc(left)}</span>' if left else "")
            + f'</div>{_progress_html(state)}')


def _line_cells(row: SweepLine, now: float, *, live: bool) -> list[str | tuple[str, str]]:
    status = row.status
    clock = row.clock(now)
    if status == "running":
        last = (f'<span style="{MUTED_INK}">{_esc(shorten(row.activity or "starting pi…", 70))}</span>'
                if live else "")
    elif row.reason:
        scores = f'{_esc(shorten(row.outcome(), 60))} · ' if row.outcome() else ""
        last = (f'{scores}<span {attrs("failed", "nbsubagents-sweep-reason")} title="{html.escape(row.reason)}">'
                f'{_esc(shorten(row.reason, 70))}</span>')
    else:
        last = (f'<span class="nbsubagents-sweep-scores" title="{html.escape(row.outcome())}">'
                f'{_esc(shorten(row.outcome(), 90))}</span>')
    return [(f'{attrs(status, "nbsubagents-sweep-status", _CELL)}', f"{glyph(status)} {status}"),
            (f'class="nbsubagents-sweep-cell" style="{_CELL}" title="{html.escape(row.run.run_id)}"',
             _esc(row.cell)),
            (f'style="{_CELL};text-align:right"', duration(clock) if clock is not None else ""),
            (f'style="{_CELL};text-align:right;{MUTED_INK}"', f"${row.cost:.4f}" if row.cost else ""),
            (f'style="{_CELL};white-space:normal"', last)]


def lines_html(state: SweepState, *, final: bool = False, live: bool = True) -> str:
    """The run lines as one compact table: the shown ones, "and N more", and the queued runs as a count."""
    rows, more = state.shown(final=final)
    now = state.now()
    body = [_line_cells(row, now, live=live) for row in rows]
    row_attrs = [f'class="nbsubagents-sweep-line nbsubagents-status-{r.status}" '
                 f'data-run-id="{html.escape(r.run.run_id)}"' for r in rows]
    span = f'colspan="5" style="{_CELL};{MUTED_INK}"'
    if more:
        body.append([(span, f"… and {more} more (experiment.frame() has every run)")])
        row_attrs.append('class="nbsubagents-sweep-more"')
    queued = state.counts().get("queued", 0)
    if queued:
        body.append([(f'colspan="5" {attrs("queued", "", _CELL)}', f'{glyph("queued")} {queued} queued')])
        row_attrs.append('class="nbsubagents-sweep-queued"')
    if not body:
        return ""
    return html_table(None, body, attrs=f'class="nbsubagents-sweep-lines" style="border-collapse:collapse;{_FONT};'
                                        'margin:0"', sections=False, row_attrs=row_attrs)


def failures_html(state: SweepState) -> str:
    """``failures (3)``: a click opens each failed run's cell and reason."""
    failed = state.failures()
    if not failed:
        return ""
    items = "".join(
        f'<div class="nbsubagents-sweep-failure" data-run-id="{html.escape(r.run.run_id)}" style="margin:2px 0">'
        f'<span {attrs(r.status)}>{glyph(r.status)}</span> <b>{_esc(r.cell)}</b> '
        f'<span style="{MUTED_INK}">{_esc(r.run.run_id)}</span><div {attrs("failed", "", _REASON)}>'
        f'{_esc(shorten(r.reason, 600))}</div></div>' for r in failed[:FAILURE_CAP])
    if len(failed) > FAILURE_CAP:
        items += f'<div style="{MUTED_INK}">… and {len(failed) - FAILURE_CAP} more</div>'
    return (f'<details class="nbsubagents-sweep-failures" style="{_FONT};margin:3px 0"><summary '
            f'{attrs("failed", "", "cursor:pointer;font-weight:600")}>failures ({len(failed)})</summary>{items}'
            f'</details>')


def line_text(row: SweepLine, now: float, width: int) -> str:
    """One run as a line of the text table."""
    clock = row.clock(now)
    last = row.activity if row.status == "running" else " · ".join(
        p for p in (row.outcome(), row.reason.partition("\n")[0]) if p)
    cost = f"${row.cost:.4f}" if row.cost else ""
    return (f"{glyph(row.status)} {row.cell:<{width}}  {duration(clock) if clock is not None else '':>7}  "
            f"{cost:>8}  {shorten(last, 80)}").rstrip()


def failure_text(row: SweepLine) -> str:
    return f"  {glyph(row.status)} {row.cell} ({row.run.run_id}): {shorten(row.reason, 200)}"


def state_text(state: SweepState, *, final: bool = False) -> str:
    """The header, a text progress bar, the run lines, the queued count and the failures' reasons."""
    filled = round(20 * state.ended / max(1, state.total))
    lines = [state.header_text(), f"[{'#' * filled}{'.' * (20 - filled)}]"]
    rows, more = state.shown(final=final)
    width = min(48, max((len(r.cell) for r in rows), default=0))
    now = state.now()
    lines += [line_text(r, now, width) for r in rows]
    if more:
        lines.append(f"… and {more} more (experiment.frame() has every run)")
    queued = state.counts().get("queued", 0)
    if queued:
        lines.append(f"{glyph('queued')} {queued} queued")
    failed = state.failures()
    if failed:
        lines.append(f"failures ({len(failed)}):")
        lines += [failure_text(r) for r in failed[:FAILURE_CAP]]
    return "\n".join(lines)


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
        return w.VBox([self.board, self.failures]).add_class("nbsubagents-sweep")

    def render(self) -> None:
        state = self.state
        self.board.value = STATUS_CSS + header_html(state) + lines_html(state)
        failed = len(state.failures())
        if failed != self._failures_shown:
            self.failures.value = failures_html(state)
            self._failures_shown = failed
        state.changed = False
        self.renders += 1
        self.last_render = time.monotonic()

    # -- the static record ---------------------------------------------------------------------------------
    def static_html(self) -> str:
        """The panel as self-contained HTML (inline styles, no script): the header, the compact table of the
        runs, the failures; secrets masked. A saved notebook keeps it beside (at the end: instead of) the widget."""
        state = self.state
        body = (f'<div class="nbsubagents-static nbsubagents-sweep" style="{_FONT}">{header_html(state)}'
                f'{lines_html(state, final=state.done, live=not state.done)}{failures_html(state)}</div>')
        return strip_controls(masker().text(STATUS_CSS + body))

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


# -- outside a notebook --------------------------------------------------------------------------------------
class SweepTextRenderer:
    """The sweep as text: a line per run as it ends, a progress line at most every ``every`` seconds, and at
    the end the counts and each failure's reason. To stderr outside a kernel (``kernel.text_stream``)."""

    def __init__(self, *, title: str = "Sweep", concurrency: int = 1, stream: TextIO | None = None,
                 every: float = TEXT_INTERVAL) -> None:
        self.title, self.concurrency, self.every = title, concurrency, every
        self.stream = stream if stream is not None else text_stream()
        self.state: SweepState | None = None
        self._said = 0.0
        self.closed = False

    def _print(self, text: str) -> None:
        if self.closed:
            return
        self.closed = not write_line(self.stream, terminal_safe(text))  # closed: the sweep goes on

    def start(self, runs: list[Run]) -> None:
        self.state = SweepState(runs, title=self.title, concurrency=self.concurrency)
        self._print(f"▶ {self.title}: {plural(len(runs), 'run')}, at most {self.concurrency} at once")
        self._said = time.monotonic()

    def event(self, run: Run, event: dict[str, Any], line: ProgressLine | None) -> None:
        if self.state is not None:
            self.state.add(run, event, line)
            self._progress()

    def end(self, run: Run) -> None:
        if self.state is None:
            return
        self.state.end(run)
        row = self.state.lines[run.run_id]
        width = min(48, max(len(r.cell) for r in self.state.lines.values()))
        self._print(masker().text(line_text(row, time.time(), width)))
        self._progress()

    def _progress(self) -> None:
        if self.state is not None and not self.state.done and time.monotonic() - self._said >= self.every:
            self._said = time.monotonic()
            self._print(self.state.header_text())

    def close(self) -> None:
        state = self.state
        if state is None:
            return
        self._print(state.header_text())
        failed = state.failures()
        if failed:
            self._print(f"failures ({len(failed)}):")
        for r in failed[:FAILURE_CAP]:
            self._print(masker().text(failure_text(r)))


def sweep_renderer(show: bool, *, title: str, concurrency: int) -> Renderer:
    """The renderer of a sweep's ``show=``: its live panel where runs show as widgets (``ui.display`` decides),
    its text lines elsewhere, nothing when not shown or silenced."""
    if not show or silenced():
        return NullRenderer()
    if widgets_available():
        return SweepRenderer(title=title, concurrency=concurrency)
    return SweepTextRenderer(title=title, concurrency=concurrency)
