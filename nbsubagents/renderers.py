"""Renderers place what the formatter produced; they never word anything themselves.

A renderer gets ``start(runs)``, ``event(run, event, progress_line)`` for every normalized event
(``progress_line`` is None when the formatter has nothing to say, e.g. for usage events that only
move the header's counters), ``end(run)`` when a run is terminal, then ``close()``. The plain-text one lives here (it needs no
Jupyter); the widget one lives at the edge (``nbsubagents.widgets``), and ``nbsubagents.display``
chooses between them.
"""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, Any, Protocol, TextIO

if TYPE_CHECKING:
    from .formatter import ProgressLine
    from .runner import Run

ICONS = {"queued": "…", "running": "⏳", "completed": "✓", "failed": "✗", "aborted": "■"}


class Renderer(Protocol):
    def start(self, runs: list[Run]) -> None: ...
    def event(self, run: Run, event: dict[str, Any], line: ProgressLine | None) -> None: ...
    def end(self, run: Run) -> None: ...
    def close(self) -> None: ...


def summary_line(run: Run) -> str:
    """One line a person reads at the end of a run, shared by every text surface."""
    result = run.result or {}
    status = run.status
    parts = [f"{ICONS.get(status, '?')} {run.name} {status}"]
    if result.get("durationSeconds") is not None:
        parts[0] += f" in {result['durationSeconds']:.1f}s"
    usage = result.get("usage") or {}
    calls = result.get("toolCalls", 0)
    parts.append(f"{calls} tool call{'' if calls == 1 else 's'}")
    if usage.get("totalTokens"):
        parts.append(f"{usage['totalTokens']:,} tokens")
    if usage.get("cost"):
        parts.append(f"${usage['cost']:.4f}")
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
        from .budgets import describe
        parts.append("budget " + describe(budget, spent))
    changes = (run.result or {}).get("changes")
    if changes:
        parts.append(f"{changes.get('files', 0)} file{'' if changes.get('files') == 1 else 's'} "
                     f"+{changes.get('added', 0)} \u2212{changes.get('removed', 0)}")
    elif run.meta.get("isolation") and not run.done:
        parts.append("isolated")
    return parts


class TextRenderer:
    """Prints progress as plain lines; a run that floods is throttled to ~20 lines a second.

    Skipped lines are counted and the count is said on the next printed line; errors and the
    child's own words always print. The run's end is the summary line (not the formatter's
    ``Completed``), so nothing is said twice.
    """

    def __init__(self, stream: TextIO | None = None, *, min_interval: float = 0.05) -> None:
        self.stream = stream or sys.stdout
        self.min_interval = min_interval
        self._last: dict[str, float] = {}
        self._skipped: dict[str, int] = {}
        self._prefix_runs = False

    def start(self, runs: list[Run]) -> None:
        self._prefix_runs = len(runs) > 1
        for run in runs:
            first = run.task.strip().splitlines()[0][:80] if run.task.strip() else ""
            self._print(f"▶ {run.name} ({run.model or 'no model'}): {first}")

    def _print(self, text: str) -> None:
        print(text, file=self.stream, flush=True)

    def event(self, run: Run, event: dict[str, Any], line: ProgressLine | None) -> None:
        if line is None or event.get("type") == "run_end":
            return
        now = time.monotonic()
        important = line.kind in ("assistant", "failed", "error")
        if not important and now - self._last.get(run.id, 0.0) < self.min_interval:
            self._skipped[run.id] = self._skipped.get(run.id, 0) + 1
            return
        self._last[run.id] = now
        prefix = f"[{run.name}] " if self._prefix_runs else ""
        text = line.text if line.kind != "assistant" else line.text.strip().splitlines()[0][:200]
        skipped = self._skipped.pop(run.id, 0)
        self._print(f"{prefix}{text}" + (f"  (+{skipped} lines skipped)" if skipped else ""))

    def end(self, run: Run) -> None:
        self._print(summary_line(run))

    def close(self) -> None:
        pass


class NullRenderer:
    def start(self, runs: list[Run]) -> None: pass
    def event(self, run: Run, event: dict[str, Any], line: ProgressLine | None) -> None: pass
    def end(self, run: Run) -> None: pass
    def close(self) -> None: pass
