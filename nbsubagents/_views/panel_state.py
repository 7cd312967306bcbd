"""A run panel's state: what a panel shows, without ipywidgets.

``PanelState`` takes the normalized events of one run with the formatter's lines (``add``) and knows
its status, counters, elapsed time, rolling window and history, and the pieces a panel shows of them.
``static_html()`` and ``static_text()`` give its *static record* (rendered by ``panel_record``), masked.
A plain fold on one thread: ``nbsubagents._ui.panels.RunPanel`` is a ``PanelState`` with widgets and a lock,
which serializes what its threads (events, the clock, clicks) call here.

Nothing is worded here: event lines come from ``formatter.ProgressFormatter``, counters from
``events.Tally``, glyphs and colours from ``style``, budget and isolation words from ``child.summary``.
"""

from __future__ import annotations

import html
import re
import time
from collections import deque
from typing import TYPE_CHECKING, Any

from .._child import inbox
from .._child.artifacts import TERMINAL
from .._child.events import Tally
from .._child.formatter import ProgressFormatter
from .._child.text import strip_controls, terminal_safe
from .._child.summary import extra_parts
from .._config import NbSubagentsError, current
from .._style import duration, plural
from . import panel_record
from .children import Children
from .conversation import CONVERSATION_EVENTS, Conversation
from .masking import masker

if TYPE_CHECKING:
    from .._child.formatter import ProgressLine
    from .children import ChildLine
    from .._child.secrets import Masker
    from .._lifecycle.handle import Run

HISTORY_LIMIT = 500      # lines kept for the expanded view (the spec's MAX_MESSAGES_PER_SESSION)
FINAL_TEXT_LIMIT = 20_000

# Lines that stay in a folded window although newer lines pushed them above it (the latest few, in order).
PINNED_KINDS = frozenset({"failed", "error", "user", "question", "answer"})
# After these events pi waits on the model's next reply (no event comes until it answers).
WAITING_AFTER = frozenset({"run_start", "session", "turn_start", "tool_result", "retry"})
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


class PanelState:
    """One run as a panel shows it: header numbers, the latest ``lines`` lines, history, final text."""

    def __init__(self, run: Run, *, lines: int | None = None, history: int = HISTORY_LIMIT) -> None:
        if lines is None:
            lines = current().panel_lines
        if isinstance(lines, bool) or not isinstance(lines, int) or lines < 1:
            raise NbSubagentsError(f"panel_lines must be a whole number of at least 1, got {lines!r}")
        self.run = run
        self.lines = lines
        self.tally = Tally()
        # (kind, text, html) of each line: the kind and text let the end drop what the output box repeats.
        # The window is the latest ``lines`` of the history, but at the end (``_final_window``).
        self.history: deque[tuple[str, str, str]] = deque(maxlen=history)
        self._final_window: list[tuple[str, str, str]] | None = None
        self.line_count = 0
        self.last_seq = -1                  # the seq of the last event taken (a follower skips older ones)
        self.failed_steps = 0               # tool calls whose result was an error
        self.denied_steps = 0               # ... and those of them that were not allowed at their approval
        self._started: float | None = None  # wall clock (event ts) when the run started
        self._launched: float | None = None # wall clock when the panel first saw it launched (before events)
        self._ended: float | None = None
        self._status: str | None = None     # terminal status, once known
        self._saw_run_end = False
        self._finished = False              # finish() was called: the run's end is settled
        self.kernel_gone_at: float | None = None  # the kernel that drew this panel shut down then (wall clock)
        self._last_kind: str | None = None  # the type of the last event, and when it came (wall clock)
        self._last_at: float | None = None
        self.conversation = Conversation()  # what the person said, what the child asked and the answers
        self.asked: dict[str, list[tuple[str, str, str]]] = {}  # question id -> its lines (a live panel's row
        # shows an open question instead: ``without_open_questions``)
        self.children = Children(run)  # its sub-agents' lines, from the registry (a run that may not delegate: none)
        self._children_settled = False

    @classmethod
    def of_run(cls, run: Run, **kwargs: Any) -> PanelState:
        """The state of what a run did so far (all of it when it ended), from its events.jsonl."""
        state = cls(run, **kwargs)
        formatter = ProgressFormatter(run.record.cwd)
        masks = masker()
        for event in run.events():
            event = masks.data(event)  # before the formatter cuts a line short
            state.add(event, formatter.format(event))
        if run.done:
            state.settle()
        return state

    # -- state --------------------------------------------------------------------------------------
    def add(self, event: dict[str, Any], line: ProgressLine | None) -> None:
        """Take one normalized event and its formatted line (None: counters only)."""
        seq = event.get("seq")
        if isinstance(seq, int):
            self.last_seq = max(self.last_seq, seq)
        self.tally.add(event)
        kind = event.get("type")
        if kind in CONVERSATION_EVENTS:
            line = self.conversation.add(event)  # worded with the time a person said it
        if kind == "tool_result" and self.conversation.is_denial(event):
            self.denied_steps += 1
            line = self.conversation.denied(line)
        elif kind == "tool_result" and event.get("isError"):
            self.failed_steps += 1
        ts = event.get("ts")
        if kind not in ("usage", "pi_event", "stdout_text", "session_stats", "notice"):  # not bookkeeping
            self._last_kind = kind
            self._last_at = ts if isinstance(ts, (int, float)) else time.time()
        if kind == "run_start" or self._started is None:
            self._started = ts if isinstance(ts, (int, float)) else time.time()
        if kind == "run_end":
            self._saw_run_end = True
            self._status = event.get("status") if event.get("status") in TERMINAL else "failed"
            self._ended = ts if isinstance(ts, (int, float)) else time.time()
        if line is not None:
            pieces = self._append(line)
            if kind == "question":
                self.asked[str(event.get("id"))] = pieces

    def without_open_questions(self, window: list[tuple[str, str, str]],
                               questions: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
        """``window`` but the lines of the ``questions`` a live panel shows as rows with their controls (the text
        once, where it is answered); answered, a question's lines are in the window again."""
        hidden = {id(piece) for q in questions for piece in self.asked.get(str(q.get("id")), ())}
        return [piece for piece in window if id(piece) not in hidden] if hidden else window

    def _append(self, line: ProgressLine) -> list[tuple[str, str, str]]:
        text = _ANSI.sub("", line.text) if "\x1b" in line.text else line.text
        opening = f'<div class="nbsubagents-line nbsubagents-{line.kind}">'
        rows = text.split("\n") if "\n" in text else [text]
        pieces = []
        if len(rows) > self.history.maxlen:  # type: ignore[operator]
            self.line_count += len(rows) - self.history.maxlen  # type: ignore[operator]
            rows = rows[-self.history.maxlen:]  # type: ignore[operator]
        for row in rows:
            row = row.rstrip()
            if not row.strip():
                continue
            piece = (line.kind, row, opening + html.escape(row, quote=False) + "</div>")
            self.history.append(piece)
            pieces.append(piece)
            self.line_count += 1
        return pieces

    def mark_kernel_gone(self) -> None:
        """The kernel drawing this panel shuts down: from here the run's end is unknown (``kernel_gone_at``)."""
        self.kernel_gone_at = time.time()

    def settle(self) -> None:
        """The run is terminal and every event is in: its end is settled (``finish`` of a panel)."""
        status = self.run.status
        if status in TERMINAL:
            self._status = status
        self._finished = True

    @property
    def status(self) -> str:
        """queued, running, or the terminal status."""
        if self._status is not None:
            return self._status
        if self._started is not None and not self._finished:
            # Its events come: it runs until its run_end event or settle() (its feeder's end of it) says how it
            # ended, so a render need not look for result.json (the run's own status does, on every call).
            return "running"
        status = self.run.status
        if status == "waiting":  # the handle's word for a running run with a question open: the panel derives it
            status = "running"
        if status in TERMINAL:
            self._status = status
            if self._ended is None:
                self._ended = time.time()
        elif status == "queued" and self._started is not None:
            status = "running"  # events arrive: the supervisor runs, whatever the handle knows
        if status == "running" and self._launched is None:
            self._launched = time.time()  # the clock ticks from here until run_start gives the real start
        return status

    def open_questions(self, status: str | None = None) -> list[dict[str, Any]]:
        """The questions the run waits on (none once it ended): from its events and its ``waiting.json``."""
        status = status or self.status
        if status in TERMINAL:
            return []
        return self.conversation.open_questions(inbox.waiting(self.run.dir) if status == "running" else None)

    def shown_status(self, status: str, questions: list[dict[str, Any]] | None = None) -> str:
        """``waiting`` for a running run with an open question, else ``status``."""
        if status != "running":
            return status
        return "waiting" if (self.open_questions(status) if questions is None else questions) else status

    def ready_to_end(self, status: str) -> bool:
        """The end is final once every event is in (run_end, or settle() after the last pump) and the
        final text is in result.json, written just after the run_end event."""
        return status in TERMINAL and (self._finished or (self._saw_run_end and self.run.result is not None))

    def elapsed(self, status: str | None = None) -> float | None:
        """Seconds since the run started: live while it runs, frozen once it ended (``status``: the run's)."""
        if (status or self.status) in TERMINAL:
            result = self.run.result or {}
            if isinstance(result.get("durationSeconds"), (int, float)):
                return float(result["durationSeconds"])
            if self._started is None:
                return None
            return max(0.0, (self._ended or time.time()) - self._started)
        start = self._started if self._started is not None else self._launched
        if start is None:
            return None
        return max(0.0, time.time() - start)

    # -- the pieces a panel shows ---------------------------------------------------------------------
    def children_lines(self, final: bool) -> list[ChildLine]:
        """The run's sub-agents, one line each (theirs under them): looked at again at most every ``CHILD_POLL``
        seconds while the run goes, once more at its end (its sub-agents ended before it), then no more."""
        if not final:
            self.children.refresh()
        elif not self._children_settled:
            self._children_settled = True
            self.children.refresh(force=True)
        return self.children.lines

    def header_fields(self, status: str) -> list[tuple[str, str]]:
        """``(field, words)`` of the header: model, calls, failed (when any), tokens, cost, elapsed, and the
        timeout while the run is active. Tokens and cost are always there, so nothing shifts as they come."""
        run, tally = self.run, self.tally
        result = run.result if status in TERMINAL else None
        calls, tokens, cost = tally.tool_calls, tally.tokens, tally.cost
        if result:  # an ended run's numbers are its result's (its cost may be the harness's own total)
            usage = result.get("usage") or {}
            calls = result.get("toolCalls") or calls
            tokens, cost = usage.get("totalTokens") or tokens, usage.get("cost", cost) or 0.0
        # the model a run ended on is in its result (after a fallback); while it goes its result.json is not read
        model = run.model if status in TERMINAL else run.record.resolved_model
        fields = [("model", model or tally.model or "no model"), ("calls", plural(calls, "tool call"))]
        if self.failed_steps:
            fields.append(("failed", plural(self.failed_steps, "failed step")))
        if self.denied_steps:
            fields.append(("denied", plural(self.denied_steps, "call") + " denied"))
        fields += [("tokens", f"{tokens:,} tokens"), ("cost", f"${cost:.4f}")]
        context = self.conversation.context_words(result)
        if context:
            fields.append(("context", context))
        turns = tally.turns or ((result or {}).get("turns") or 0)
        spent = {"max_turns": turns, "max_tool_calls": calls, "max_tokens": tokens, "max_cost": cost}
        for line in self.children.lines:  # a delegating run's budget covers its tree: its sub-agents' spend counts
            for key, value in zip(spent, (line.turns, line.calls, line.tokens, line.cost)):
                spent[key] += value
        fields += [("extra", part) for part in extra_parts(run, spent)]
        # the status given is the run's (its files are not read again), but "unknown" (a gone kernel's record)
        elapsed = self.elapsed(None if status == "unknown" else status)
        if elapsed is not None:
            fields.append(("elapsed", duration(elapsed)))
        timeout = run.record.timeout
        if status not in TERMINAL and timeout is not None and timeout > 0:
            fields.append(("timeout", f"timeout {duration(float(timeout))}"))
        return fields

    def drop_repeated_output(self) -> None:
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
            self._final_window = self._fold(rows[:start] + rows[end:])

    def window(self) -> list[tuple[str, str, str]]:
        """The lines the window shows now: the latest ones, or at the end those that led to the output."""
        if self._final_window is not None:
            return self._final_window
        return self._fold(list(self.history))

    def _fold(self, rows: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
        """The last ``lines`` rows, but error lines that scrolled above them stay (the latest few, in order)."""
        if len(rows) <= self.lines:
            return rows
        keep = max(1, self.lines // 3)
        pinned = [row for row in rows[:-self.lines] if row[0] in PINNED_KINDS][-keep:]
        return pinned + rows[len(rows) - (self.lines - len(pinned)):]

    def earlier_lines(self, window: list[tuple[str, str, str]]) -> int:
        """How many lines came before the window's first one (those the history holds and those it dropped)."""
        if not window:
            return 0
        first, history = window[0], self.history
        tail = len(history) - len(window)  # the window is most often the history's tail: no search
        if tail >= 0 and history[tail] is first:
            return tail + self.line_count - len(history)
        index = next((i for i, piece in enumerate(history) if piece is first), 0)
        return index + self.line_count - len(history)

    def placeholder(self, status: str) -> str:
        """What an empty window says: waiting to start, pi starting (no event from it yet), or nothing."""
        if status == "running":
            return "starting pi…" if self._last_kind is None else ""
        return {"queued": "(waiting to start)"}.get(status, "(no output)")

    def waiting(self, status: str) -> str:
        """``waiting for the model · 12s`` while pi waits on the model's reply (its latency said, not hidden
        behind "starting pi…"), else ""."""
        if status != "running" or self._last_kind not in WAITING_AFTER or self._last_at is None:
            return ""
        return f"waiting for the model · {duration(max(0.0, time.time() - self._last_at))}"

    def final_output(self) -> str:
        output = self.run.output.strip()
        if len(output) > FINAL_TEXT_LIMIT:
            output = output[:FINAL_TEXT_LIMIT] + "\n… (run.output has all of it)"
        return output

    def shown_error(self) -> str | None:
        """The error the end shows below the window; None when the window's last line already says it."""
        error = self.run.error
        return error if error and not self._saw_run_end else None

    # -- the static record ----------------------------------------------------------------------------
    def static_parts(self) -> tuple[str, bool]:
        """The status shown and whether the record is the final one."""
        status = self.status
        final = self.ready_to_end(status)
        if final and self._final_window is None:
            self.drop_repeated_output()
        return status, final

    def static_record(self) -> tuple[str, str]:
        """``(static_text(), static_html())``, masked by one masker (finding the masker in force costs more than
        the record)."""
        mask = masker()
        return self.static_text(mask), self.static_html(mask)

    def static_html(self, mask: Masker | None = None) -> str:
        """The panel as one line of self-contained HTML (``panel_record.record_html``): inline styles, no script,
        readable anywhere. It keeps the live panel's class names (``nbsubagents-panel``, ``-header``, ``-name``,
        ``-window``, ``-history``, ``-final``), so a page reads the same before and after the widget gave way to it.
        Secrets are masked (by ``mask``, the masker in force by default: a saved notebook keeps this record) and
        control bytes left out."""
        page = panel_record.record_html(self)
        return strip_controls((mask or masker()).text(page))

    def static_text(self, mask: Masker | None = None) -> str:
        """The panel as plain text (``panel_record.record_text``): header line, the window's lines, the output, the
        error, the run id; secrets masked (by ``mask``, the masker in force by default) and control characters
        shown escaped."""
        text = panel_record.record_text(self)
        return terminal_safe((mask or masker()).text(text))
