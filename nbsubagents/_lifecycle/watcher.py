"""The watcher: the one clock of a process, on one daemon thread, following runs and ticking subscribers.

Every ``POLL`` seconds it feeds new ``events.jsonl`` lines of each watched run to that run's
renderer (the launching cell's panel) and looks for ``result.json``. When a run ends it ingests
the result into the registry, ends the renderer, and, if this process wins the atomic claim,
emits the run's one completion notice to the notice handlers (a status bar subscribes; the
default handler prints a line); then it calls the run's ``on_done(run)``. What it prints for a run
(text progress, the notice, on_done's prints) goes to the cell that launched the run, never into
whichever cell happens to be running (ipykernel's per-thread parent). Nothing it calls can stop it:
exceptions are reported on stderr. No cell is ever executed.

It knows no notebook: where a notice is printed and how a thread's prints reach a cell are what the notebook
edge lends (``lifecycle.edge``); the defaults print on stderr and attribute nothing.

The same thread ticks every ``subscribe()``d callback at that subscriber's own interval: panels move
their clocks and flush pending renders, status bars and browsers re-read the registry. So a process runs
one thread of nbsubagents however many panels, bars and browsers are live. The thread starts with the
first ``watch()`` or ``subscribe()`` and ends when nothing is left to watch and nobody is subscribed (or
on ``stop()``, which sets its stop ``threading.Event`` and cancels every subscription; the next
``watch()``/``subscribe()`` starts it again).
"""

from __future__ import annotations

import atexit
import sqlite3
import sys
import threading
import time
import traceback
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from .. import _registry as registry
from .._child.text import write_line
from .._config import NbSubagentsError
from .._style import glyph, shorten
from . import converse
from . import settle as settling  # `settle()` below is the watcher's own
from .edge import edge, lend
from .handle import SETTLE_TIMEOUT, pump, question_said, reread, says_questions
from .liveness import check

if TYPE_CHECKING:
    from .drive import Renderer
    from .handle import Run

__all__ = ["Notice", "watch", "get", "watching", "settle", "stop", "add_notice_handler",
           "remove_notice_handler", "print_notice", "add_change_handler",
           "Subscription", "subscribe", "thread"]

POLL = 0.1           # seconds between looks at the watched runs (and the finest tick a subscriber gets)
THREAD_NAME = "nbsubagents-watcher"
CHECK_EVERY = 2.0    # seconds between liveness checks of a supervisor that is not our child


@dataclass
class Notice:
    """One run's completion, as told to notice handlers (once per run across all processes)."""

    run_id: str
    name: str
    status: str
    mode: str | None
    summary: str
    away: bool = False
    row: dict[str, Any] = field(default_factory=dict, repr=False)
    quiet: bool = False  # launched with show=False: handlers see it, nothing is printed

    @property
    def text(self) -> str:
        kind = "background run" if self.mode == "background" else "run"
        when = " while away" if self.away else ""
        line = f"{glyph(self.status)} {kind} {self.name} {self.run_id} {self.status}{when}"
        return line + (f": {self.summary}" if self.summary else "")

    def __str__(self) -> str:
        return self.text


def _summary(row: dict[str, Any]) -> str:
    text = row.get("final_text") if row.get("status") == "completed" else row.get("error_message")
    return shorten(text, 120)  # the whole answer on one line, not just its first line


def print_notice(notice: Notice) -> None:
    """The default notice handler: one printed line on ``edge.text_stream()`` (the cell's output in a
    notebook, stderr elsewhere); nothing for a run started with ``show=False`` or where that hook says
    nowhere (``NBSUBAGENTS_DISPLAY=none``), and nothing more once that stream is closed."""
    if notice.quiet:
        return
    stream = edge.text_stream()
    if stream is None:
        return
    write_line(stream, notice.text)


def say_questions(run: Run, events: list[dict[str, Any]]) -> None:
    """A question the child asks, said once where its run's notices go (the launching cell in a notebook, stderr
    elsewhere), with how to answer it: its panel may be scrolled away, or there is none. Not for a run whose
    questions time out at once (``questionTimeout`` 0: headless) or that was started with ``show=False``."""
    if run.record.question_timeout == 0:
        return
    for event in events:
        if event.get("type") != "question":
            continue
        stream = edge.text_stream()
        if stream is None:
            return
        what = "an approval" if event.get("method") == "confirm" else "an answer"
        line = (f"{glyph('waiting')} run {run.name or run.run_id} ({run.run_id}) is waiting for {what}: "
                f"{converse.describe(event)} (answer in its panel, or: {converse.how_to_answer(run.run_id, event)})")
        if not write_line(stream, line):  # a closed stream: the run goes on
            return
        question_said(run, str(event.get("id")))


_handlers: list[Callable[[Notice], Any]] = [print_notice]
_change_handlers: list[Callable[[], Any]] = []


def add_notice_handler(handler: Callable[[Notice], Any]) -> None:
    """Call ``handler(notice)`` for every completion this process announces."""
    if handler not in _handlers:
        _handlers.append(handler)


def remove_notice_handler(handler: Callable[[Notice], Any]) -> None:
    """Stop calling ``handler`` (``remove_notice_handler(print_notice)`` silences the printed lines)."""
    if handler in _handlers:
        _handlers.remove(handler)


def add_change_handler(handler: Callable[[], Any]) -> None:
    """Call ``handler()`` whenever this process starts following a run or sees one end (a status bar
    re-reads the counts then)."""
    if handler not in _change_handlers:
        _change_handlers.append(handler)


def changed() -> None:
    for handler in list(_change_handlers):
        try:
            handler()
        except Exception:
            _report(f"nbsubagents: change handler {handler!r} raised")


def notify(row: dict[str, Any], *, away: bool = False, quiet: bool = False) -> Notice:
    """Tell every notice handler that a run ended (the caller has won ``registry.claim``)."""
    notice = Notice(run_id=row["run_id"], name=row.get("name") or row["run_id"], status=row.get("status") or "",
                    mode=row.get("mode"), summary=_summary(row), away=away, row=row, quiet=quiet)
    for handler in list(_handlers):
        try:
            handler(notice)
        except Exception:
            _report(f"nbsubagents: notice handler {handler!r} raised")
    return notice


def _say(message: str) -> None:
    try:
        print(message, file=sys.stderr)
    except (BrokenPipeError, ValueError, OSError):  # stderr is gone: nothing to tell
        pass


def _report(message: str) -> None:
    try:
        print(message, file=sys.stderr)
        traceback.print_exc()
    except (BrokenPipeError, ValueError, OSError):  # stderr is gone: nothing to tell
        pass


def _guarded(holder: Any, call: Callable[[], Any], default: Any, message: str) -> Any:
    """``call()``, or ``default`` when it raises; the first failure of a streak is reported (``holder.failing``),
    so one broken panel or run cannot stop the clock, nor fill the log."""
    try:
        value = call()
    except Exception:
        if not holder.failing:
            _report(message)
        holder.failing = True
        return default
    holder.failing = False
    return value


class Subscription:
    """A callback the clock calls every ``interval`` seconds (``tick()``); ``tick`` returning False, or
    ``cancel()``, ends it. ``interval`` may be changed at any time (a bar polls faster while runs go);
    ``poke()`` makes the next tick come at once."""

    def __init__(self, tick: Callable[[], Any], interval: float, name: str = "", first: float = 0.0) -> None:
        self.tick = tick
        self.interval = float(interval)
        self.name = name or getattr(tick, "__qualname__", repr(tick))
        self.due = time.monotonic() + first
        self.cancelled = False
        self.failing = False

    def poke(self) -> None:
        self.due = time.monotonic()

    def cancel(self) -> None:
        self.cancelled = True

    def __repr__(self) -> str:
        return f"<Subscription {self.name} every {self.interval:g}s{' (cancelled)' if self.cancelled else ''}>"


class Clock:
    """A view's place on the process's clock: ``tick()`` every ``interval`` seconds from ``start()`` (at most one
    subscription, none when ``enabled`` is false) until ``tick`` returns False or ``stop()``, which is for good."""

    def __init__(self, tick: Callable[[], Any], interval: float, name: str, *, enabled: bool = True) -> None:
        self._tick, self.interval, self.name, self.enabled = tick, interval, name, enabled
        self.subscription: Subscription | None = None
        self.stopped = False

    @property
    def running(self) -> bool:
        """Whether the clock renders for the view (else the view renders as events come)."""
        return self.subscription is not None and not self.subscription.cancelled

    def start(self) -> None:
        if self.enabled and self.subscription is None and not self.stopped:
            self.subscription = subscribe(lambda: not self.stopped and self._tick() is not False, self.interval,
                                          name=self.name)

    def stop(self) -> None:
        self.stopped = True
        if self.subscription is not None:
            self.subscription.cancel()


class _Entry:
    def __init__(self, run: Run, renderer: Renderer | None, on_done: Callable[[Run], Any] | None,
                 quiet: bool = False, announce: bool = True) -> None:
        self.run = run
        # the files each step looks at, made once (a RunPaths property makes a new Path on every access)
        self.meta_file, self.result_file, self.supervisor_file = run.paths.meta, run.paths.result, run.paths.supervisor
        self.parent = edge.cell_parent()  # the launching cell: its progress lines and notice go there
        self.quiet = quiet
        self.announce = announce  # False: another notebook's run taken over; its end is news there, not here
        self.renderer = renderer
        self.on_done = on_done
        self.next_check = time.monotonic() + CHECK_EVERY
        self.failing = False
        self.seen_supervisor = False
        self.settled = threading.Event()  # its end is rendered, announced, and on_done returned

    @property
    def says_questions(self) -> bool:
        """Its questions are said where its notices go (``_step``): a run shown here, not quietly, whose questions
        are not answered at once."""
        return self.renderer is not None and not self.quiet and self.run.record.question_timeout != 0


class Watcher:
    """Follows runs on one daemon thread; see the module docstring."""

    def __init__(self) -> None:
        self._entries: dict[str, _Entry] = {}
        self._subscriptions: list[Subscription] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._stops_at_exit = False

    def watch(self, run: Run, *, renderer: Renderer | None = None,
              on_done: Callable[[Run], Any] | None = None, quiet: bool = False, announce: bool = True) -> None:
        with self._lock:
            entry = self._entries.get(run.run_id)
            if entry is None:
                entry = self._entries[run.run_id] = _Entry(run, renderer, on_done, quiet, announce)
            else:
                if announce and not entry.announce:  # shown here after all: its notice goes to the cell showing it
                    entry.announce, entry.parent = True, edge.cell_parent()
                entry.renderer = entry.renderer or renderer
                entry.on_done = entry.on_done or on_done
            says_questions(entry.run, entry.says_questions)  # Run.wait_for_question returns one once it is said
            self._ensure_thread()
        changed()

    def subscribe(self, tick: Callable[[], Any], interval: float, name: str = "", first: float = 0.0) -> Subscription:
        sub = Subscription(tick, interval, name, first)
        with self._lock:
            self._subscriptions.append(sub)
            self._ensure_thread()
        return sub

    def subscriptions(self) -> list[Subscription]:
        with self._lock:
            return [s for s in self._subscriptions if not s.cancelled]

    def _ensure_thread(self) -> None:
        """Start the clock if it is not running (the caller holds the lock)."""
        if self._thread is None or not self._thread.is_alive():
            if not self._stops_at_exit:  # at the first start, not at import: the clock stops with the process
                atexit.register(self.stop, 1.0)
                self._stops_at_exit = True
            self._stop.clear()
            self._thread = threading.Thread(target=self._loop, name=THREAD_NAME, daemon=True)
            self._thread.start()

    @property
    def thread(self) -> threading.Thread | None:
        with self._lock:
            return self._thread if self._thread is not None and self._thread.is_alive() else None

    def get(self, run_id: str) -> Run | None:
        with self._lock:
            entry = self._entries.get(run_id)
        return entry.run if entry else None

    def runs(self) -> list[Run]:
        with self._lock:
            return [e.run for e in self._entries.values()]

    def settle(self, run_id: str, timeout: float) -> bool:
        with self._lock:
            entry = self._entries.get(run_id)
        if entry is None or threading.current_thread() is self._thread:  # on_done may call run.wait()
            return True
        return entry.settled.wait(timeout)

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        with self._lock:
            thread = self._thread
            for sub in self._subscriptions:
                sub.cancel()
            self._subscriptions = []
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
        with self._lock:
            if self._thread is thread:
                self._thread = None

    def _loop(self) -> None:
        me = threading.current_thread()
        while not self._stop.is_set():
            with self._lock:
                self._subscriptions = [sub for sub in self._subscriptions if not sub.cancelled]
                entries = list(self._entries.values())
                subs = list(self._subscriptions)
                if not entries and not subs:
                    if self._thread is me:
                        self._thread = None
                    return
            for entry in entries:
                if self._stop.is_set():
                    break
                finished = _guarded(entry, lambda: self._step_in_cell(entry), False,
                                    f"nbsubagents watcher: following run {entry.run.run_id} failed (will retry)")
                if finished:
                    with self._lock:
                        self._entries.pop(entry.run.run_id, None)
                    entry.settled.set()
            for sub in subs:
                if self._stop.is_set():
                    break
                if not sub.cancelled and time.monotonic() >= sub.due:
                    self._tick(sub)
            now = time.monotonic()
            wait = min([POLL, *(max(0.0, sub.due - now) for sub in subs if not sub.cancelled)])
            self._stop.wait(max(wait, 0.005))
        with self._lock:
            if self._thread is me:
                self._thread = None

    def _step_in_cell(self, entry: _Entry) -> bool:
        with nullcontext() if entry.parent is None else edge.in_cell(entry.parent):
            return self._step(entry)

    @staticmethod
    def _tick(sub: Subscription) -> None:
        keep = _guarded(sub, sub.tick, True, f"nbsubagents: {sub.name} raised on the clock (will retry)")
        if keep is False:
            sub.cancelled = True
        sub.due = time.monotonic() + sub.interval

    def _step(self, entry: _Entry) -> bool:
        run = entry.run
        if not entry.meta_file.exists() and not entry.result_file.exists():
            # Its folder was deleted under us: it ends failed (its supervisor stops too), in the registry as well.
            settling.lost(run.paths, run.record)
            self._finish(entry)
            return True
        if entry.renderer is not None:
            events = pump(run, entry.renderer)
            if entry.says_questions:
                say_questions(run, events)
        if entry.result_file.exists():
            self._finish(entry)
            return True
        if not entry.seen_supervisor and entry.supervisor_file.exists():
            entry.seen_supervisor = True
            registry.note(run, status="running")  # its supervisor pid and start time
        proc = run.process
        if proc is not None:
            if proc.poll() is None:
                return False
            if not entry.result_file.exists():  # it writes result.json before it exits
                settling.lost(run.paths, run.record, exit_code=proc.returncode)
            self._finish(entry)
            return True
        now = time.monotonic()
        if now >= entry.next_check:  # a supervisor of another process: is it still there?
            entry.next_check = now + CHECK_EVERY
            if check(run.dir) == "ended":
                self._finish(entry)
                return True
        return False

    def _finish(self, entry: _Entry) -> None:
        run = entry.run
        reread(run)
        if run.process is not None:
            try:
                run.process.wait(5)  # reap it: it exits right after writing result.json
            except Exception:
                pass
        renderer = entry.renderer
        if renderer is not None:
            _safely(pump, run, renderer)
        row = None
        won = False
        try:
            row = registry.record(run)
            won = entry.announce and row is not None and registry.claim(run.run_id, registry.db_of(run.dir))
        except (sqlite3.Error, OSError, NbSubagentsError) as exc:  # the registry's trouble, not a bug: one line
            _say(f"nbsubagents: the registry could not record the end of run {run.run_id} ({exc}); "
                 "nbsubagents.rebuild_registry() recreates it from the run directories")
        except Exception:
            _report(f"nbsubagents: the registry could not record the end of run {run.run_id}")
        if renderer is not None:
            _safely(renderer.end, run)
            _safely(renderer.close)
        if won and row is not None:
            notify(row, quiet=entry.quiet)
        changed()
        if entry.on_done is not None:
            try:
                entry.on_done(run)
            except Exception:
                _report(f"nbsubagents: on_done of run {run.run_id} raised")


def _safely(fn: Callable[..., Any], *args: Any) -> None:
    try:
        fn(*args)
    except Exception:
        _report(f"nbsubagents: {getattr(fn, '__qualname__', fn)} raised")


_watcher = Watcher()


def watch(run: Run, *, renderer: Renderer | None = None, on_done: Callable[[Run], Any] | None = None,
          quiet: bool = False, announce: bool = True) -> None:
    """Follow ``run`` until it ends: events to ``renderer``, the end to the registry, notices (not printed
    when ``quiet``, none at all without ``announce``: another notebook's run, left to it), ``on_done``. From then
    this process's watcher is the runs' follower (``lifecycle.edge``): ``get_run`` finds its handles and
    ``Run.wait`` waits for it."""
    lend(follower=_watcher)
    _watcher.watch(run, renderer=renderer, on_done=on_done, quiet=quiet, announce=announce)


def get(run_id: str) -> Run | None:
    """This process's handle of a run it watches, else None."""
    return _watcher.get(run_id)


def watching() -> list[Run]:
    """The runs this process's watcher follows now."""
    return _watcher.runs()


def settle(run_id: str, timeout: float = SETTLE_TIMEOUT) -> bool:
    """Wait until the watcher is through with a run that ended: its panel shows the end, its notice is out
    and its on_done returned. ``Run.wait()`` calls it so the cell that waits also carries those last widget
    updates (a saved notebook keeps them) and what follows the wait can rely on on_done having run."""
    return _watcher.settle(run_id, timeout)


def stop(timeout: float = 5.0) -> None:
    """Stop the clock's thread and cancel every subscription (the next ``watch()`` or ``subscribe()`` starts
    it again; runs still watched are followed again then)."""
    _watcher.stop(timeout)


def subscribe(tick: Callable[[], Any], interval: float, name: str = "", first: float = 0.0) -> Subscription:
    """Call ``tick()`` on the clock's thread every ``interval`` seconds (the first time after ``first``)
    until it returns False or the subscription is cancelled; starts the thread if it is not running.
    ``tick`` runs beside the runs the clock follows: it should take milliseconds, not seconds."""
    return _watcher.subscribe(tick, interval, name, first)


def subscriptions() -> list[Subscription]:
    """The live subscriptions (for tests and ``doctor``)."""
    return _watcher.subscriptions()


def thread() -> threading.Thread | None:
    """The clock's thread while it runs, else None."""
    return _watcher.thread
