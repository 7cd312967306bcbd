"""A sweep's progress, without widgets: the model of its lines and their text.

An experiment drives its runs through the ``lifecycle.drive.Renderer`` port like ``run_parallel`` does, but one
full panel per run (history, answer) buries what is running under what has ended. Here each run is one line:
its status glyph, its cell (preset · model · task id · repeat), and while it runs its current step and clock,
once it ended its duration, cost and scores (the experiment scores a run before it calls ``end(run)``, so
``run.scores`` holds them then). What leads is what matters (``digest``): the failures grouped by kind of reason
with the cells each hit, then the cells' scores, then the running runs (at most ``LINE_CAP`` lines, the rest "and N
more"), the completed ones as one count (listed in a fold) and the queued ones as one count. Above them: the counts,
an n/N progress bar
and an estimate of the time left (from the durations of ended runs and the slots the runs have: the concurrency,
or fewer where they go, a Dask cluster's run slots). The counts are the runs' own (``refresh``: a run is running
once its supervisor started, on a Dask cluster once a worker took it), not what was launched.

``SweepState`` is that model (the tests drive it with plain objects); ``state_text`` and ``SweepTextRenderer``
are its text. ``sweep_renderer`` chooses what shows a sweep: the live panel the notebook edge lends
(``lifecycle.edge.sweep_panel``, ``ui/sweep_panel.py``), else these lines, where notices go (``edge.text_stream``).
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable, TextIO

from .._child.artifacts import TERMINAL
from .._child.summary import change_words
from .._child.text import write_line
from .._lifecycle.edge import edge
from .._lifecycle.drive import NullRenderer, Renderer
from .._lifecycle.launch import launcher_for
from .._style import duration, glyph, plural, shorten
from .._views.masking import masker
from .._views.panel_record import GROUP_WORDS
from .digest import REASON_CAP, CellScores, FailureGroup, cell_axes, cell_name, cell_scores, cells_text
from .digest import group_failures, group_text, reason_kind

if TYPE_CHECKING:
    from .._child.formatter import ProgressLine
    from .._lifecycle.handle import Run

__all__ = ["SweepState", "SweepLine", "SweepTextRenderer", "sweep_renderer", "state_text", "line_text",
           "digest_lines", "cell_label", "failure_reason", "LINE_CAP", "GROUP_RUNS"]

LINE_CAP = 40            # run lines shown at most (running, or in the completed fold live); the rest is "and N more"
GROUP_RUNS = 20          # runs a failure reason lists at most
TEXT_INTERVAL = 10.0     # outside a notebook, a progress line at most every this many seconds
_ACTIVE_KINDS = ("tool", "assistant", "thinking", "done", "failed", "error")


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
    group: str = ""                # its cell without the repeat (``digest.cell_name``)
    kind: str = ""                 # its reason's kind (``digest.reason_kind``), what groups failures
    order: int = 0                 # its place in the sweep

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
        self.slots = self.concurrency  # what goes at once: ``refresh`` asks where the runs go
        self.cap = cap
        self._clock = clock
        self._repeats = any((getattr(r, "params", None) or {}).get("repeat", 1) not in (1, None) for r in runs)
        self._axes = cell_axes(getattr(r, "params", None) or {} for r in runs)
        self.lines: dict[str, SweepLine] = {}
        for run in runs:
            self._line(run)
        self._ends = 0
        self.version = 0   # one more at each end: what the failures' groups and the cells' scores are drawn from
        self._digest: tuple[tuple[int, int], list[FailureGroup], tuple[list[CellScores], list[str]]] | None = None
        self._counted: tuple[int, dict[str, int]] | None = None  # the counts, until a status changes
        self.changed = True

    def _line(self, run: Run) -> SweepLine:
        line = self.lines.get(run.run_id)
        if line is None:  # a run the sweep was not started with: it joins
            line = self.lines[run.run_id] = SweepLine(run, cell_label(run, repeats=self._repeats),
                                                      group=cell_name(run, self._axes), order=len(self.lines))
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
            self._counted = None
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
        row.kind = reason_kind(row.reason) or row.status if row.reason else ""
        row.activity = ""
        if not row.ended:
            self._ends += 1
            row.ended = self._ends
        self.version += 1
        self._counted = None
        self.changed = True

    def refresh(self) -> None:
        """What the runs themselves say: a queued line whose run started (its supervisor is there; on a Dask
        cluster, a worker took it) is running before its first event, and a launched run a cluster still holds
        back stays queued. The slots are asked again where the runs go (``slots_of``)."""
        launched = [row for row in self.lines.values()  # one not launched yet is queued: no file to look at
                    if row.status == "queued" and getattr(row.run, "process", None) is not None]
        for row in launched:
            if row.run.status not in ("queued", *TERMINAL):  # running, or waiting on a question
                row.status = "running"
                row.started = self._clock()
                self._counted = None
                self.changed = True
        if not self.done:
            self.slots = slots_of([row.run for row in self.lines.values() if row.status not in TERMINAL],
                                  self.concurrency)

    # -- what is shown --------------------------------------------------------------------------------------
    def counts(self) -> dict[str, int]:
        """Runs per status, in the header's order (running, queued, completed, failed, aborted), zeros left out:
        counted again once a status changed (a render asks several times)."""
        if self._counted is None or self._counted[0] != len(self.lines):
            found = dict.fromkeys(GROUP_WORDS, 0)
            for row in self.lines.values():
                found[row.status] = found.get(row.status, 0) + 1
            self._counted = (len(self.lines), {status: n for status, n in found.items() if n})
        return dict(self._counted[1])

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

    def _digested(self) -> tuple[list[FailureGroup], tuple[list[CellScores], list[str]]]:
        """The failures' groups and the cells' scores, reckoned again only once a run ended (or joined)."""
        key = (self.version, len(self.lines))
        if self._digest is None or self._digest[0] != key:
            self._digest = (key, group_failures(self.failures()), cell_scores(self.lines.values()))
        return self._digest[1], self._digest[2]

    def failure_groups(self) -> list[FailureGroup]:
        """The failures by kind of reason, the biggest first (``digest.group_failures``)."""
        return self._digested()[0]

    def cells(self) -> tuple[list[CellScores], list[str]]:
        """Each cell's runs, ends and scores in the sweep's order, and the scores' names (``digest.cell_scores``)."""
        return self._digested()[1]

    def completed(self, *, final: bool = False) -> list[SweepLine]:
        """The completed runs: the latest first while the sweep goes, in the sweep's order once it ended."""
        rows = [r for r in self.lines.values() if r.status == "completed"]
        return rows if final else sorted(rows, key=lambda r: -r.ended)

    def time_left(self, now: float | None = None) -> float | None:
        """Seconds until the last run ends, estimated: the work left (each queued run the mean duration of the
        runs that ended, each running run what is left of that mean) over the runs that go at once (the slots,
        at most as many as are left), or the runs left at the pace so far when that says longer (the time since
        the first run started per run done, a running run counting for the part of the mean it ran: what the
        slots truly gave, starts and waits between runs included). None before any run ended (nothing to go by)."""
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
        by_slots = work / min(self.slots, queued + len(running))
        first = min((r.started for r in rows if r.started is not None), default=now)
        done = len(took) + sum(min((r.clock(now) or 0.0) / mean, 1.0) for r in running) if mean else 0.0
        left = queued + len(running) - (done - len(took))
        return max(by_slots, (now - first) / done * left) if done else by_slots

    def shown(self) -> tuple[list[SweepLine], int]:
        """The running runs' lines (the longest running on top), at most ``cap``, and how many more run (ended
        runs are their failures' groups and the completed count, queued runs a count)."""
        rows = sorted((r for r in self.lines.values() if r.status == "running"), key=lambda r: r.started or 0.0)
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


def slots_of(runs: Iterable[Any], concurrency: int) -> int:
    """How many of ``runs`` go at once: the concurrency asked, or fewer where their launcher says so (a Dask
    cluster's run slots; ``Launcher.slots``)."""
    by_runner: dict[Any, list[Any]] = {}
    for run in runs:
        record = getattr(run, "record", None)
        if record is not None:
            by_runner.setdefault(record.runner, []).append(run)
    found = [launcher_for(runner).slots(group) for runner, group in by_runner.items()]
    held = [n for n in found if n]
    return max(1, min(concurrency, sum(held)) if held and len(held) == len(found) else concurrency)


def line_text(row: SweepLine, now: float, width: int) -> str:
    """One run as a line of the text table."""
    clock = row.clock(now)
    last = row.activity if row.status == "running" else " · ".join(
        p for p in (row.outcome(), row.reason.partition("\n")[0]) if p)
    cost = f"${row.cost:.4f}" if row.cost else ""
    return (f"{glyph(row.status)} {row.cell:<{width}}  {duration(clock) if clock is not None else '':>7}  "
            f"{cost:>8}  {shorten(last, 80)}").rstrip()


def digest_lines(state: SweepState) -> list[str]:
    """The failures by reason (each with its cells and its first run ids) and the cells' scores, as lines."""
    lines: list[str] = []
    groups = state.failure_groups()
    for group in groups[:REASON_CAP]:
        ids = [r.run.run_id for r in group.rows]
        more = f" and {len(ids) - 3} more" if ids[3:] else ""
        lines += [group_text(group), f"    runs: {', '.join(ids[:3])}{more}"]
    if len(groups) > REASON_CAP:
        rest = groups[REASON_CAP:]
        lines.append(f"… and {len(rest)} more reasons ({plural(sum(len(g.rows) for g in rest), 'run')})")
    cells, names = state.cells()
    if state.ended:
        lines += [f"cells ({len(cells)}):", *cells_text(cells, names)]
    return lines


def state_text(state: SweepState) -> str:
    """The header, a text progress bar, the failures by reason, the cells' scores, the running runs' lines, the
    completed and the queued runs as counts."""
    filled = round(20 * state.ended / max(1, state.total))
    lines = [state.header_text(), f"[{'#' * filled}{'.' * (20 - filled)}]", *digest_lines(state)]
    rows, more = state.shown()
    width = min(48, max((len(r.cell) for r in rows), default=0))
    now = state.now()
    lines += [line_text(r, now, width) for r in rows]
    if more:
        lines.append(f"… and {more} more running")
    for status in ("completed", "queued"):
        n = state.counts().get(status, 0)
        if n:
            lines.append(f"{glyph(status)} {n} {status}")
    return "\n".join(lines)


# -- outside a notebook --------------------------------------------------------------------------------------
class SweepTextRenderer:
    """The sweep as text: a line per run as it ends, a progress line at most every ``every`` seconds, and at
    the end the counts and each failure's reason, to ``stream`` (where notices go: stderr outside a kernel)."""

    def __init__(self, *, title: str = "Sweep", concurrency: int = 1, stream: TextIO | None = None,
                 every: float = TEXT_INTERVAL) -> None:
        self.title, self.concurrency, self.every = title, concurrency, every
        self.stream = stream if stream is not None else edge.text_stream()
        self.state: SweepState | None = None
        self._said = 0.0
        self.closed = self.stream is None  # notices go nowhere (NBSUBAGENTS_DISPLAY=none): neither do these lines

    def _print(self, text: str) -> None:
        if self.closed:
            return
        self.closed = not write_line(self.stream, text)  # closed: the sweep goes on

    def start(self, runs: list[Run]) -> None:
        self.state = SweepState(runs, title=self.title, concurrency=self.concurrency)
        self.state.refresh()
        self._print(f"▶ {self.title}: {plural(len(runs), 'run')}, at most {self.state.slots} at once")
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
            self.state.refresh()  # the counts the runs say, not only what their events said so far
            self._print(self.state.header_text())

    def close(self) -> None:
        state = self.state
        if state is None:
            return
        self._print(state.header_text())
        for line in digest_lines(state):
            self._print(masker().text(line))


def sweep_renderer(show: bool, *, title: str, concurrency: int) -> Renderer:
    """The renderer of a sweep's ``show=``: the live panel the notebook edge lends where runs show as widgets,
    else its text lines: on stderr wherever nobody is at the notebook (a script, papermill, nbconvert), in the
    cell's output where a person runs it; nothing when not shown or silenced (``NBSUBAGENTS_DISPLAY=none``)."""
    stream = edge.text_stream() if show else None
    if stream is None:
        return NullRenderer()
    panel = edge.sweep_panel(title, concurrency)
    if panel is not None:
        return panel
    if not edge.person_at_frontend():  # a script, a headless notebook: progress is a log, stdout stays the code's
        stream = sys.stderr
    return SweepTextRenderer(title=title, concurrency=concurrency, stream=stream)
