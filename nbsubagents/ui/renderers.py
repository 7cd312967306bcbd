"""Renderers place what the formatter produced; they never word anything themselves.

A renderer gets ``start(runs)``, ``event(run, event, progress_line)`` for every normalized event
(``progress_line`` is None when the formatter has nothing to say, e.g. for usage events that only
move the header's counters), ``end(run)`` when a run is terminal, then ``close()``. The plain-text one lives here (it needs no
Jupyter); the widget one lives at the edge (``nbsubagents.ui.panels``), and ``nbsubagents.ui.display``
chooses between them.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Protocol, TextIO

from ..style import glyph

if TYPE_CHECKING:
    from ..child.formatter import ProgressLine
    from ..lifecycle.handle import Run

class Renderer(Protocol):
    def start(self, runs: list[Run]) -> None: ...
    def event(self, run: Run, event: dict[str, Any], line: ProgressLine | None) -> None: ...
    def end(self, run: Run) -> None: ...
    def close(self) -> None: ...


def summary_line(run: Run) -> str:
    """One line a person reads at the end of a run, shared by every text surface."""
    result = run.result or {}
    status = run.status
    parts = [f"{glyph(status)} {run.name} {status}"]
    if result.get("durationSeconds") is not None:
        parts[0] += f" in {result['durationSeconds']:.1f}s"
    usage = result.get("usage") or {}
    calls = result.get("toolCalls", 0)
    parts.append(f"{calls} tool call{'' if calls == 1 else 's'}")
    if usage.get("totalTokens"):
        parts.append(f"{usage['totalTokens']:,} tokens")
    if usage.get("cost"):
        parts.append(f"${usage['cost']:.4f}")
    scores = getattr(run, "scores", None)
    if scores:
        parts.append("scores " + ", ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}"
                                           for k, v in scores.items()))
    parts += extra_parts(run, {"max_turns": result.get("turns") or 0, "max_tool_calls": calls,
                               "max_tokens": usage.get("totalTokens") or 0, "max_cost": usage.get("cost") or 0})
    parts.append(run.id)
    text = " · ".join(parts)
    if result.get("errorMessage"):
        text += f"\n  {result['errorMessage']}"
    return text


def extra_parts(run: Run, spent: dict[str, Any]) -> list[str]:
    """Spend against the run's budget (``budget tools 3/20``) and an isolated run's ``+N −M``: the words
    every surface (summary line, panel header) shows for them."""
    parts = []
    budget = run.meta.get("budget")
    if budget:
        from ..child.budgets import describe
        parts.append("budget " + describe(budget, spent))
    changes = (run.result or {}).get("changes")
    if changes:
        parts.append(f"{changes.get('files', 0)} file{'' if changes.get('files') == 1 else 's'} "
                     f"+{changes.get('added', 0)} \u2212{changes.get('removed', 0)}")
    elif run.meta.get("isolation") and not run.done:
        parts.append("isolated")
    return parts


class TextRenderer:
    """Prints progress as plain lines: every line of a normal run, a flood folded with a count.

    Each run may print a burst of ``burst`` lines and then ``rate`` lines a second; lines beyond that are
    folded, and the fold is said on its own line where the lines were left out (``… 12 lines folded``),
    before the next printed line or the summary. Errors and the child's own words always print. The
    run's end is the summary line (not the formatter's ``Completed``), so nothing is said twice.

    Outside a notebook the lines go to stderr (``display.text_stream()``): a script's stdout stays its
    own. A closed stream (``| head``, a consumer that quit) ends the output quietly, never the run.
    """

    def __init__(self, stream: TextIO | None = None, *, rate: float = 20.0, burst: int = 60) -> None:
        if stream is None:
            from .display import text_stream
            stream = text_stream()
        self.stream = stream
        self.rate = rate
        self.burst = burst
        self._budget: dict[str, tuple[float, float]] = {}  # run id -> (lines it may print now, when)
        self._folded: dict[str, int] = {}
        self._prefix_runs = False
        self.closed = False  # the stream went away: nothing more is printed

    def start(self, runs: list[Run]) -> None:
        self._prefix_runs = len(runs) > 1
        for run in runs:
            first = run.task.strip().splitlines()[0][:80] if run.task.strip() else ""
            self._print(f"▶ {run.name} ({run.model or 'no model'}): {first}")

    def _print(self, text: str) -> None:
        if self.closed:
            return
        try:
            print(text, file=self.stream, flush=True)
        except (BrokenPipeError, ValueError, OSError):  # ValueError: the stream was closed
            self.closed = True

    def _prefix(self, run: Run) -> str:
        return f"[{run.name}] " if self._prefix_runs else ""

    def _allow(self, run_id: str) -> bool:
        now = time.monotonic()
        tokens, then = self._budget.get(run_id, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - then) * self.rate)
        allowed = tokens >= 1.0
        self._budget[run_id] = (tokens - 1.0 if allowed else tokens, now)
        return allowed

    def _say_folded(self, run: Run) -> None:
        folded = self._folded.pop(run.id, 0)
        if folded:
            self._print(f"{self._prefix(run)}… {folded} line{'' if folded == 1 else 's'} folded "
                        f"(run.transcript has every line)")

    def event(self, run: Run, event: dict[str, Any], line: ProgressLine | None) -> None:
        if line is None or event.get("type") == "run_end" or self.closed:
            return
        important = line.kind in ("assistant", "failed", "error")
        if not self._allow(run.id) and not important:
            self._folded[run.id] = self._folded.get(run.id, 0) + 1
            return
        text = line.text if line.kind != "assistant" else (line.text.strip().splitlines() or [""])[0][:200]
        self._say_folded(run)
        self._print(f"{self._prefix(run)}{text}")

    def end(self, run: Run) -> None:
        self._say_folded(run)
        self._print(summary_line(run))

    def close(self) -> None:
        pass


class NullRenderer:
    def start(self, runs: list[Run]) -> None: pass
    def event(self, run: Run, event: dict[str, Any], line: ProgressLine | None) -> None: pass
    def end(self, run: Run) -> None: pass
    def close(self) -> None: pass
