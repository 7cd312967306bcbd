"""A run panel's state and its static record: what a panel shows, without ipywidgets.

``PanelState`` takes the normalized events of one run with the formatter's lines (``add``) and knows
its status, counters, elapsed time, rolling window and history. It renders that state as the live
widget's HTML pieces (``nbsubagents.ui.panels.RunPanel`` is a ``PanelState`` with widgets) and as a
*static record*: ``static_html()`` and ``static_text()``, self-contained renderings with inline styles
and no JavaScript that a saved notebook keeps beside (and, at the end, instead of) the widget view, so
GitHub, nbviewer, ``nbconvert --to html/markdown`` and a kernel-less JupyterLab show the final panel.
``group_static_html``/``group_static_text`` do the same for a group of runs.

Nothing is worded here: event lines come from ``formatter.ProgressFormatter``, counters from
``events.Tally``, glyphs and colours from ``style``, budget and isolation words from ``child.summary``. The static
HTML holds no newline, so it stays one HTML block where Markdown embeds it.
"""

from __future__ import annotations

import html
import re
import threading
import time
from collections import deque
from typing import TYPE_CHECKING, Any, Iterable

from ..child import inbox
from ..child.artifacts import TERMINAL
from ..child.events import Tally
from ..child.formatter import ProgressFormatter
from ..child.secrets import strip_controls, terminal_safe
from ..child.summary import extra_parts
from ..config import NbSubagentsError, settings
from ..style import MONO_STYLE, duration, glyph, plural
from ..style import color as status_color
from .conversation import CONVERSATION_EVENTS, CONVERSATION_KINDS, Conversation, question_text
from .masking import masker

if TYPE_CHECKING:
    from ..child.formatter import ProgressLine
    from ..child.secrets import Masker
    from ..lifecycle.handle import Run

HISTORY_LIMIT = 500      # lines kept for the expanded view (the spec's MAX_MESSAGES_PER_SESSION)
FINAL_TEXT_LIMIT = 20_000

# Group header words for each status, in the order they are listed.
GROUP_WORDS = {"running": "running", "waiting": "waiting for an answer", "queued": "queued", "completed": "done",
               "failed": "failed", "aborted": "aborted"}

_MONO = MONO_STYLE
# Muted words: the page's own text colour, lighter. Whatever the page (JupyterLab light or dark, GitHub dark,
# nbviewer, an export without JupyterLab's variables), muted text keeps over 4.5:1 where the page's text has
# about 10:1 or more; a fixed grey cannot (it fails on one of light and dark pages).
MUTED_INK = "opacity:.78"
_MUTED = MUTED_INK
# How each kind of formatter line looks, inline (a static record carries no stylesheet). Text keeps the page's
# colour; a kind is told by a coloured rule at its left (a colour that reads on any background) and words.
LINE_STYLES = {
    "failed": f"border-left:3px solid {status_color('failed')};padding-left:6px;font-weight:600",
    "error": f"border-left:3px solid {status_color('failed')};padding-left:6px;font-weight:600",
    "assistant": f"border-left:2px solid {status_color('running')};padding-left:6px",
    "thinking": _MUTED + ";font-style:italic",
    "done": _MUTED, "info": _MUTED, "placeholder": _MUTED, "waiting": _MUTED + ";font-style:italic",
    # the conversation: the person's words stand out; what the child asked and its answers in the waiting colour
    "user": f"border-left:3px solid {status_color('queued')};padding-left:6px;font-weight:600",
    "question": f"border-left:3px solid {status_color('waiting')};padding-left:6px;font-weight:600",
    "answer": f"border-left:3px solid {status_color('waiting')};padding-left:6px",
    "fallback": f"border-left:3px solid {status_color('aborted')};padding-left:6px",
    "notice": _MUTED,
}
# Lines that stay in a folded window although newer lines pushed them above it (the latest few, in order).
PINNED_KINDS = frozenset({"failed", "error", "user", "question", "answer"})
# After these events pi waits on the model's next reply (no event comes until it answers).
WAITING_AFTER = frozenset({"run_start", "session", "turn_start", "tool_result", "retry"})
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


def badge(status: str, text: str, extra_class: str = "", icon: str = "") -> str:
    """A status word that reads on any page: white on the status's strong colour (6.5:1 or more), never a
    coloured word on an unknown background; ``icon`` (a glyph) before the word."""
    classes = f"nbsubagents-badge nbsubagents-badge-{status}" + (f" {extra_class}" if extra_class else "")
    icon = f'<span class="nbsubagents-icon">{icon}</span> ' if icon else ""
    return (f'<span class="{classes}" style="background:{status_color(status)};color:#fff;border-radius:3px;'
            f'padding:0 5px;font-weight:600;white-space:nowrap">{icon}<span class="nbsubagents-status-word">'
            f'{html.escape(text, quote=False)}</span></span>')


def _esc(text: str) -> str:
    """Escaped text on one HTML line: newlines become ``<br>``."""
    return html.escape(text, quote=False).replace("\r", "").replace("\n", "<br>")


class PanelState:
    """One run as a panel shows it: header numbers, the latest ``lines`` lines, history, final text."""

    def __init__(self, run: Run, *, lines: int | None = None, history: int = HISTORY_LIMIT,
                 lock: threading.RLock | None = None) -> None:
        if lines is None:
            lines = settings.panel_lines
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
        self._lock = lock or threading.RLock()
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
        with self._lock:
            seq = event.get("seq")
            if isinstance(seq, int):
                self.last_seq = max(self.last_seq, seq)
            self.tally.add(event)
            kind = event.get("type")
            if kind in CONVERSATION_EVENTS:
                line = self.conversation.add(event)  # worded with the time a person said it
            if kind == "tool_result" and event.get("isError"):
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
                self._append(line)
            self._changed()

    def _changed(self) -> None:
        """Hook for a subclass that renders: the state changed."""

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

    def mark_kernel_gone(self) -> None:
        """The kernel drawing this panel shuts down: from here the run's end is unknown (``kernel_gone_at``)."""
        with self._lock:
            self.kernel_gone_at = time.time()

    def gone_words(self) -> str:
        """``unknown: kernel shut down at 14:02:11 · nbsubagents.get_run("ID") says how it ended``."""
        stamp = time.strftime("%H:%M:%S", time.localtime(self.kernel_gone_at or time.time()))
        return (f'unknown: the kernel shut down or restarted at {stamp} · '
                f'nbsubagents.get_run("{self.run.run_id}") says how it ended')

    def settle(self) -> None:
        """The run is terminal and every event is in: its end is settled (``finish`` of a panel)."""
        with self._lock:
            status = self.run.status
            if status in TERMINAL:
                self._status = status
            self._finished = True

    @property
    def status(self) -> str:
        """queued, running, or the terminal status."""
        with self._lock:
            return self._current_status()

    def _current_status(self) -> str:
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
        with self._lock:
            status = status or self._current_status()
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

    def elapsed(self) -> float | None:
        """Seconds since the run started: live while it runs, frozen once it ended."""
        with self._lock:
            return self._elapsed(self._current_status())

    def _elapsed(self, status: str) -> float | None:
        if status in TERMINAL:
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
    def header_meta(self, status: str) -> list[str]:
        """model, tool calls, failed steps, tokens, cost, elapsed, timeout: the header's numbers, as words."""
        return [text for _, text in self.header_fields(status)]

    def header_fields(self, status: str) -> list[tuple[str, str]]:
        """``(field, words)`` of the header: model, calls, failed (when any), tokens, cost, elapsed, and the
        timeout while the run is active. Tokens and cost are always there, so nothing shifts as they come."""
        run, tally = self.run, self.tally
        result = run.result if status in TERMINAL else None
        calls, tokens, cost = tally.tool_calls, tally.tokens, tally.cost
        if result and not (calls or tokens):  # a run seen only through its result (failed before start)
            calls = result.get("toolCalls") or 0
            usage = result.get("usage") or {}
            tokens, cost = usage.get("totalTokens") or 0, usage.get("cost") or 0.0
        # the model a run ended on is in its result (after a fallback); while it goes its result.json is not read
        model = run.model if status in TERMINAL else run.record.resolved_model
        fields = [("model", model or tally.model or "no model"), ("calls", plural(calls, "tool call"))]
        if self.failed_steps:
            fields.append(("failed", plural(self.failed_steps, "failed step")))
        fields += [("tokens", f"{tokens:,} tokens"), ("cost", f"${cost:.4f}")]
        context = self.conversation.context_words(result)
        if context:
            fields.append(("context", context))
        turns = tally.turns or ((result or {}).get("turns") or 0)
        fields += [("extra", part) for part in extra_parts(
            run, {"max_turns": turns, "max_tool_calls": calls, "max_tokens": tokens, "max_cost": cost})]
        # the status given is the run's (its files are not read again), but "unknown" (a gone kernel's record)
        elapsed = self.elapsed() if status == "unknown" else self._elapsed(status)
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
        with self._lock:
            status = self._current_status()
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
        """The panel as one line of self-contained HTML: inline styles, no script, readable anywhere.

        It keeps the live panel's class names (``nbsubagents-panel``, ``-header``, ``-name``, ``-window``,
        ``-history``, ``-final``), so a page reads the same before and after the widget gave way to it.
        Secrets are masked (by ``mask``, the masker in force by default: a saved notebook keeps this record)
        and control bytes left out.
        """
        return strip_controls((mask or masker()).text(self._static_html()))

    def _static_html(self) -> str:
        with self._lock:
            status, final = self.static_parts()
            gone = self.kernel_gone_at is not None and not final
            if gone:
                status = "unknown"
            questions = [] if gone else self.open_questions(status)
            shown = self.shown_status(status, questions)
            run = self.run
            name = _esc(run.name)
            head = (f'<div class="nbsubagents-header" style="display:flex;flex-wrap:wrap;gap:2px 6px;'
                    f'align-items:baseline"><span class="nbsubagents-icon" style="font-weight:bold">{glyph(shown)}'
                    f'</span> <b class="nbsubagents-name" title="{name}" style="overflow:hidden;text-overflow:ellipsis;'
                    f'white-space:nowrap;max-width:100%">{name}</b> {badge(shown, shown, "nbsubagents-status")} '
                    f'<span class="nbsubagents-meta" style="{_MUTED}">{self._static_meta(status)}</span></div>')
            window = self.window()
            lines = "".join(_line_html(kind, text) for kind, text, _ in window)
            if not window and not (final and self.final_output()):
                lines = _line_html("placeholder", self.placeholder(status))
            if not final:
                lines += _line_html("waiting", self.waiting(status))
            parts = [head]
            if gone:
                parts.append(f'<div class="nbsubagents-gone" style="font-weight:600">{_esc(self.gone_words())}</div>')
            earlier = self.earlier_lines(window)
            if earlier > 0:  # the lines the window does not show, once: behind a toggle
                dropped = self.line_count - len(self.history)
                hidden = list(self.history)[:earlier - dropped]
                note = (f'<div style="{_MUTED}">({plural(dropped, "earlier line")} not kept here: '
                        f'run.transcript has them)</div>' if dropped > 0 else "")
                parts.append(f'<details class="nbsubagents-history-toggle" style="margin:2px 0"><summary '
                             f'style="{_MUTED};cursor:pointer">{plural(earlier, "earlier line")}</summary>'
                             f'<div class="nbsubagents-history" style="{_MONO}">{note}'
                             f'{"".join(_line_html(kind, text) for kind, text, _ in hidden)}</div></details>')
            if lines:
                parts.append(f'<div class="nbsubagents-window" style="{_MONO};margin:4px 0">{lines}</div>')
            if questions:
                parts.append(self._questions_html(questions))
            foot = []
            if final:
                output = self.final_output()
                if output:
                    foot.append(f'<div class="nbsubagents-output" style="{_MONO};border:1px solid '
                                f'rgba(127,127,127,.5);border-left:3px solid {status_color("completed")};'
                                f'padding:6px 8px;margin:4px 0">{_esc(output)}</div>')
                error = self.shown_error()
                if error:
                    foot.append(f'<div class="nbsubagents-error" style="{_MONO};{LINE_STYLES["error"]}">'
                                f'{_esc(error)}</div>')
            stamp = "" if final or gone else f' · as of {time.strftime("%H:%M:%S")}'
            foot.append(f'<div class="nbsubagents-runid" style="{_MUTED};font-size:12px">{_esc(run.run_id)}{stamp}'
                        f'</div>')
            parts.append(f'<div class="nbsubagents-final">{"".join(foot)}</div>' if final else "".join(foot))
            run_id = html.escape(run.run_id)
            dim = "opacity:.75;" if gone else ""
            return (f'<div class="nbsubagents-static nbsubagents-panel nbsubagents-run-{run_id} '
                    f'nbsubagents-status-{shown}" data-run-id="{run_id}" '
                    f'style="{dim}border:1px solid rgba(127,127,127,.5);border-left:4px solid {status_color(shown)};'
                    f'border-radius:3px;padding:6px 10px;margin:3px 0;font-family:var(--jp-ui-font-family,'
                    f'-apple-system,Segoe UI,Helvetica,Arial,sans-serif);font-size:13px;line-height:1.45">'
                    f'{"".join(parts)}</div>')

    def question_hint(self, question: dict[str, Any]) -> str:
        """How to answer ``question`` from any cell or shell (the panel's own box is gone without a kernel)."""
        run_id = self.run.run_id
        if question.get("approval") or question.get("method") == "confirm":
            return f'nbsubagents.answer("{run_id}", True) or False, or: nbsubagents approve {run_id} allow|deny'
        return f'nbsubagents.answer("{run_id}", "…"), or: nbsubagents answer {run_id} "…"'

    def _questions_html(self, questions: list[dict[str, Any]]) -> str:
        """The open questions, each with how to answer it: what the record says while the run waits."""
        rows = "".join(
            f'<div class="nbsubagents-open-question" data-question-id="{html.escape(str(q.get("id")))}" '
            f'style="{LINE_STYLES["question"]}">{glyph("waiting")} waiting for your answer: '
            f'{_esc(question_text(q))}<div style="{_MUTED};font-weight:normal">{_esc(self.question_hint(q))}'
            f'</div></div>' for q in questions)
        return f'<div class="nbsubagents-questions" style="margin:4px 0">{rows}</div>'

    def _static_meta(self, status: str) -> str:
        return " · ".join(f'<span class="nbsubagents-failed-steps" style="font-weight:600">{_esc(text)}</span>'
                          if field == "failed" else _esc(text) for field, text in self.header_fields(status))

    def static_text(self, mask: Masker | None = None) -> str:
        """The panel as plain text: header line, the window's lines, the output, the error, the run id; secrets
        masked (by ``mask``, the masker in force by default) and control characters shown escaped."""
        return terminal_safe((mask or masker()).text(self._static_text()))

    def _static_text(self) -> str:
        with self._lock:
            status, final = self.static_parts()
            questions = [] if final else self.open_questions(status)
            shown = self.shown_status(status, questions)
            lines = [f"{glyph(shown)} {self.run.name} {shown} · {' · '.join(self.header_meta(status))}"]
            if self.kernel_gone_at is not None and not final:
                lines = [f"? {self.run.name} unknown · {' · '.join(self.header_meta(status))}", self.gone_words()]
            window = self.window()
            earlier = self.earlier_lines(window)
            if earlier > 0:
                lines.append(f"  ({plural(earlier, 'earlier line')}: run.transcript has every line)")
            lines += [f"  {text}" for _, text, _ in window]
            if not window and not (final and self.final_output()) and self.placeholder(status):
                lines.append(f"  {self.placeholder(status)}")
            if not final and self.waiting(status):
                lines.append(f"  {self.waiting(status)}")
            if self.kernel_gone_at is None or final:
                for question in questions:
                    lines.append(f"{glyph('waiting')} waiting for your answer: {question_text(question)}")
                    lines.append(f"  {self.question_hint(question)}")
            if final:
                output = self.final_output()
                if output:
                    lines.append("Output:")
                    lines += [f"  {row}" for row in output.splitlines()]
                error = self.shown_error()
                if error:
                    lines.append(f"Error: {error}")
            lines.append(f"Run id: {self.run.run_id}" + ("" if final else f" · as of {time.strftime('%H:%M:%S')}"))
            return "\n".join(lines)


_CLASSED = frozenset({"failed", "error", "waiting", *CONVERSATION_KINDS})


def _line_html(kind: str, text: str) -> str:
    if not text:
        return ""
    style = LINE_STYLES.get(kind)
    cls = f' class="nbsubagents-{kind}"' if kind in _CLASSED else ""
    return f'<div{cls} style="{style}">{_esc(text)}</div>' if style else f"<div{cls}>{_esc(text)}</div>"


def group_header_text(states: Iterable[PanelState]) -> str:
    """``Sub-agents: 2 running, 1 waiting for an answer, 1 done, 1 failed``."""
    statuses = [s.shown_status(s.status) for s in states]
    counts = {word: n for status, word in GROUP_WORDS.items() if (n := statuses.count(status))}
    return "Sub-agents: " + ", ".join(f"{n} {word}" for word, n in counts.items())


def group_header_html(states: Iterable[PanelState]) -> str:
    """The group header with its waiting, failed and aborted counts in their colours."""
    return group_header_of([s.shown_status(s.status) for s in states])


def group_header_of(statuses: list[str]) -> str:
    """The group header of runs shown with these statuses (a live group gives what its panels show, which costs no
    look at the runs' files)."""
    parts = []
    for status, word in GROUP_WORDS.items():
        n = statuses.count(status)
        if n:
            text = f"{n} {word}"
            coloured = status in ("waiting", "failed", "aborted")
            parts.append(badge(status, text, f"nbsubagents-group-{status}") if coloured else text)
    return f"<b>Sub-agents: {', '.join(parts)}</b>"


def group_static_record(states: list[PanelState]) -> tuple[str, str]:
    """``(group_static_text(states), group_static_html(states))``, masked by one masker."""
    mask = masker()
    return group_static_text(states, mask), group_static_html(states, mask)


def group_static_html(states: list[PanelState], mask: Masker | None = None) -> str:
    mask = mask or masker()
    done = all(s.status in TERMINAL for s in states)
    ids = ""
    if done:
        ids = (f'<div class="nbsubagents-run-ids" style="{_MUTED};font-size:12px">Run ids: '
               + ", ".join(f"<code>{html.escape(s.run.run_id)}</code>" for s in states) + "</div>")
    return (f'<div class="nbsubagents-static-group nbsubagents-group"><div class="nbsubagents-group-header" '
            f'style="font-family:var(--jp-ui-font-family,sans-serif);font-size:13px">'
            f'{group_header_html(states)}</div>{"".join(s.static_html(mask) for s in states)}{ids}</div>')


def group_static_text(states: list[PanelState], mask: Masker | None = None) -> str:
    mask = mask or masker()
    parts = [group_header_text(states), *(s.static_text(mask) for s in states)]
    if all(s.status in TERMINAL for s in states):
        parts.append("Run ids: " + ", ".join(s.run.run_id for s in states))
    return "\n\n".join(parts)
