"""Driving foreground runs: launch queued runs (at most ``concurrency`` at once) and feed a renderer until all end.

The loop owns its port: a ``Renderer`` gets ``start(runs)``, ``event(run, event, progress_line)`` for every
normalized event (``progress_line`` is None when the formatter has nothing to say, e.g. for usage events that
only move a header's counters), ``end(run)`` when a run is terminal, then ``close()``. ``NullRenderer`` shows
nothing; the text and widget renderers live in ``nbsubagents._ui`` and are chosen there.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Protocol

from .. import _registry as registry
from .._config import current
from . import interrupts, settle, watcher
from .handle import launch, pump
from .launch import launcher_for

if TYPE_CHECKING:
    from .._child.formatter import ProgressLine
    from .handle import Run

__all__ = ["Renderer", "NullRenderer", "drive"]

HEADLESS_WAIT = 1.0  # s between looks when nothing is shown: a look costs the kernel CPU that pi could use


class Renderer(Protocol):
    def start(self, runs: list[Run]) -> None: ...
    def event(self, run: Run, event: dict[str, Any], line: ProgressLine | None) -> None: ...
    def end(self, run: Run) -> None: ...
    def close(self) -> None: ...


class NullRenderer:
    def start(self, runs: list[Run]) -> None: pass
    def event(self, run: Run, event: dict[str, Any], line: ProgressLine | None) -> None: pass
    def end(self, run: Run) -> None: pass
    def close(self) -> None: pass


def drive(runs: list[Run], *, concurrency: int, renderer: Renderer | None = None) -> list[Run]:
    """Run queued runs, at most ``concurrency`` at once, feeding the renderer until all are terminal.

    An interrupt (Ctrl-C, a kernel interrupt; SIGTERM outside a kernel) cancels every active run and marks
    queued ones aborted, then waits for the supervisors to record it: no child outlives the cell. In a kernel
    the runs are returned; elsewhere the interrupt goes on to the caller (``lifecycle.interrupts``).
    """
    if renderer is None:
        renderer = NullRenderer()
    renderer.start(runs)
    interval = current().poll_interval  # resolved once: each read of a setting stats the settings files
    if isinstance(renderer, NullRenderer) and all(run.record.question_timeout == 0 for run in runs):
        # Nothing to show and no question to say (headless runs: ``watcher.say_questions``): the runs' events are
        # read once each ends, and the loop wakes at an end (its pidfd, its future) or every HEADLESS_WAIT s.
        interval = max(interval, HEADLESS_WAIT)
    queued = [r for r in runs if r.status == "queued"]
    active: list[Run] = []
    for r in runs:
        if r.done:
            renderer.end(r)
    try:
        with interrupts.terminate_raises():  # outside a kernel SIGTERM, too, aborts the runs before it ends us
            try:
                while queued or active:
                    while queued and len(active) < concurrency:
                        run = queued.pop(0)
                        if run.done:  # cancelled (from its panel) while it waited: never launch it
                            registry.note(run, announced=True)
                            renderer.end(run)
                            continue
                        launch(run)
                        active.append(run)
                    active = _poll_active(active, renderer, interval)
            except interrupts.STOPS:
                _abort(queued, active, renderer, interval)
                if interrupts.stops_caller():  # a script, a terminal: it stops too, its background runs named
                    interrupts.say_left_running()
                    raise
    finally:
        renderer.close()
    return runs


def _abort(queued: list[Run], active: list[Run], renderer: Renderer, interval: float) -> None:
    """Mark the queued runs aborted and cancel the active ones, then wait until each has recorded its end."""
    for run in queued:
        settle.cancelled_before_start(run.paths, run.record, "the cell was interrupted")
        registry.note(run, announced=True)
        renderer.end(run)
    for run in active:
        run.cancel()
    while active:
        try:
            active = _poll_active(active, renderer, interval)
        except interrupts.STOPS:
            continue  # a second interrupt must not leave children behind


def _poll_active(active: list[Run], renderer: Renderer, interval: float) -> list[Run]:
    still = []
    for run in active:
        watcher.say_questions(run, pump(run, renderer))
        proc = run.process
        if proc is not None and proc.poll() is not None:
            watcher.say_questions(run, pump(run, renderer))
            if run.result is None:
                settle.lost(run.paths, run.record, exit_code=proc.returncode)
            registry.note(run, announced=True)  # seen in its cell: no notice later
            renderer.end(run)
        else:
            still.append(run)
    started = [run for run in still if run.process is not None]
    if started:
        # Woken by the first end its launcher sees: a pidfd each for local supervisors (Linux), the futures of Dask
        # runs. The runs of one call share a launcher; any other's are seen at the next look.
        runner = started[0].record.runner
        launcher_for(runner).wait_any([run.process for run in started if run.record.runner == runner], interval)
    elif still:
        time.sleep(interval)  # runs this process did not start: the next look is the only news
    return still

