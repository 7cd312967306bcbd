"""What Ctrl-C (SIGINT) and SIGTERM do while this process waits on runs (``drive``, ``Run.wait``).

In a kernel an interrupt ends the cell's runs and the cell goes on with them (aborted). Outside a kernel (a script,
a terminal, the console script) it stops the caller too, as it stops any program: the foreground runs are aborted
first (``drive``), then ``KeyboardInterrupt`` is raised again, so the script ends with status 130. SIGTERM, whose
default ends the process at once and would leave the foreground runs going, raises ``Terminated`` (a
``SystemExit`` with status 143, 128 + SIGTERM) while a wait is under way, so the same clean-up runs first.
Background runs (``start()``) are detached: they go on, and one line on stderr names them.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from .._child.text import write_line
from .edge import edge

__all__ = ["Terminated", "STOPS", "terminate_raises", "stops_caller", "say_left_running"]


class Terminated(SystemExit):
    """SIGTERM arrived while runs were waited on: the process ends with 128 + SIGTERM once they are aborted."""

    def __init__(self) -> None:
        super().__init__(128 + signal.SIGTERM)


STOPS = (KeyboardInterrupt, Terminated)  # what aborts the foreground runs of a wait


def _raise_terminated(signum: int, frame: object) -> None:
    raise Terminated()


@contextmanager
def terminate_raises() -> Iterator[None]:
    """Within it, outside a kernel and on the main thread, SIGTERM raises ``Terminated`` where the wait is (a
    handler the program set itself is kept: its choice); elsewhere it changes nothing."""
    if edge.in_kernel() or threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)
    if previous is not signal.SIG_DFL:
        yield
        return
    signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def stops_caller() -> bool:
    """Whether an interrupt goes on to stop the caller once the runs are aborted: everywhere but in a kernel."""
    return not edge.in_kernel()


def say_left_running() -> None:
    """One line on stderr naming the background runs this process started that go on after it stops."""
    left = [run for run in edge.follower.runs() if not run.done]
    if not left:
        return
    names = ", ".join(f"{run.run_id} ({run.name})" for run in left)
    plural = "s go" if len(left) > 1 else " goes"
    write_line(sys.stderr, f"nbsubagents: background run{plural} on: {names} (`nbsubagents cancel RUN` stops one)")
