"""The plain-text renderer: it places what the formatter produced and never words anything itself.

The protocol (``Renderer``) and the null renderer are the drive loop's (``nbsubagents._lifecycle.drive``);
the text one lives here (it needs no Jupyter), the widget one in ``nbsubagents._ui.panels``, and
``nbsubagents._ui.display`` chooses between them. A run's last line is ``child.summary.summary_line``.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, TextIO

from .._child.summary import summary_line
from .._child.text import write_line
from .._views.children import Children
from .kernel import progress_stream

if TYPE_CHECKING:
    from .._child.formatter import ProgressLine
    from .._lifecycle.handle import Run

class TextRenderer:
    """Prints progress as plain lines: every line of a normal run, a flood folded with a count.

    Each run may print a burst of ``burst`` lines and then ``rate`` lines a second; lines beyond that are
    folded, and the fold is said on its own line where the lines were left out (``… 12 lines folded``),
    before the next printed line or the summary. Errors and the child's own words always print. The
    run's end is the summary line (not the formatter's ``Completed``), so nothing is said twice.

    Outside a notebook a person runs the lines go to stderr (``kernel.progress_stream()``): a script's
    stdout, and a headless notebook's, stays its own.
    A closed stream (``| head``, a consumer that quit) ends the output quietly, never the run.
    """

    def __init__(self, stream: TextIO | None = None, *, rate: float = 20.0, burst: int = 60) -> None:
        if stream is None:
            stream = progress_stream()
        self.stream = stream
        self.rate = rate
        self.burst = burst
        self._budget: dict[str, tuple[float, float]] = {}  # run id -> (lines it may print now, when)
        self._folded: dict[str, int] = {}
        self._prefix_runs = False
        self.closed = False  # the stream went away: nothing more is printed
        self._children: dict[str, Children] = {}  # a delegating run's sub-agents (from the registry)
        self._said: dict[str, str] = {}  # a sub-agent's run id -> the status last printed of it

    def start(self, runs: list[Run]) -> None:
        self._prefix_runs = len(runs) > 1
        for run in runs:
            first = run.task.strip().splitlines()[0][:80] if run.task.strip() else ""
            self._print(f"▶ {run.name} ({run.model or 'no model'}): {first}")

    def _print(self, text: str) -> None:
        if self.closed:
            return
        self.closed = not write_line(self.stream, text)

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
        folded = self._folded.pop(run.run_id, 0)
        if folded:
            self._print(f"{self._prefix(run)}… {folded} line{'' if folded == 1 else 's'} folded "
                        f"(run.transcript has every line)")

    def _say_children(self, run: Run, *, force: bool = False) -> None:
        """A line for each sub-agent of a run that may delegate as it appears and as it ends (``Children``: a look
        at the registry at most once a second), indented by its depth."""
        if not run.record.delegate or self.closed:
            return
        children = self._children.setdefault(run.run_id, Children(run))
        children.refresh(force=force)
        for child in children.lines:
            if self._said.get(child.run_id) != child.status:
                self._said[child.run_id] = child.status
                self._print(f"{self._prefix(run)}{child.indented()}")

    def event(self, run: Run, event: dict[str, Any], line: ProgressLine | None) -> None:
        self._say_children(run)
        if line is None or event.get("type") == "run_end" or self.closed:
            return
        important = line.kind in ("assistant", "failed", "error")
        if not self._allow(run.run_id) and not important:
            self._folded[run.run_id] = self._folded.get(run.run_id, 0) + 1
            return
        text = line.text if line.kind != "assistant" else (line.text.strip().splitlines() or [""])[0][:200]
        self._say_folded(run)
        self._print(f"{self._prefix(run)}{text}")

    def end(self, run: Run) -> None:
        self._say_folded(run)
        self._say_children(run, force=True)
        self._print(summary_line(run))

    def close(self) -> None:
        pass
