"""The status bar: one line over every run of the project, foreground or background.

``runs: 2 running / 5 total`` (``· 1 failed`` and ``· 1 aborted`` when there are such runs, then the
last completion notice, ``· ✓ scout completed``), below it each run that waits for a person's answer
(``◷ scout waits for your answer``: a running run whose ``waiting.json`` lists a question) and the running
runs as the panels name them (``run_label``), the longest running first, with the time since each really started
(``started_ago``: ``↻ scout · demo/scripted 12s``, ``◷ …`` while it waits); queued runs are counted on the line,
not named. ``bar_record`` is one reading of it, for JupyterLab's repair of a saved bar. In a notebook the bar is
an output kept true (``kernel.NotebookRecord``, no widget: there is nothing to click; its rules go once, in an
output before it): its HTML is sent again under the bar's display id whenever it changes (a run that starts
waiting shows there in place), so the saved notebook holds what the bar last said, stamped with the time it
said it, and no frontend ever shows a widget error for it. Elsewhere the bar is its text.

Updates: bars are kept in a weak set and follow the watcher's change and notice handlers (registered
once per process; a notice reaches every bar of its project), and one subscription to the process's
clock (``lifecycle.watcher.subscribe``) re-reads the counts of every bar's project every
``BAR_ACTIVE_POLL`` seconds while runs go and every ``BAR_IDLE_POLL`` otherwise, so runs of other
kernels and foreground runs show up too; while runs go it also reconciles at most every
``RECONCILE_EVERY`` seconds (a gone supervisor is not "running"). The subscription ends when no bar is
left. Widgets are only ever updated by setting their values. An open widget keeps its bar alive;
``close()`` ends both.
"""

from __future__ import annotations

import json
import threading
import time
import weakref
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Iterable

from .. import _registry as registry
from .._child import inbox
from .._lifecycle import reconcile, watcher
from .._style import duration, glyph, plural
from .._sweeps.progress import cell_label
from .._templates import render, stylesheet
from .kernel import NotebookRecord, in_kernel, load_ipywidgets

if TYPE_CHECKING:
    from .._lifecycle.watcher import Notice, Subscription

__all__ = ["StatusBar", "status_bar", "bar_record", "run_label", "started_ago", "repeating", "live_leaves",
           "with_leaves", "BAR_ACTIVE_POLL", "BAR_IDLE_POLL", "RECONCILE_EVERY"]

BAR_ACTIVE_POLL = 1.0    # seconds between looks at the counts while something runs
BAR_IDLE_POLL = 5.0      # ... and while nothing runs (runs of other kernels still show up)
RECONCILE_EVERY = 5.0    # the bars' clock settles runs whose supervisor is gone at most this often
RUNNING_SHOWN = 8        # running runs named on the bar (then "+ N more")
WAITING_SHOWN = 3        # waiting runs named on the bar's line (then "+ N more")

_lock = threading.RLock()                  # guards the weak set, the hook and the clock below
_reading = threading.RLock()               # a read of the counts and its showing go together, so a read made
                                           # before a run ended never lands after one made since (any thread)
_bars: weakref.WeakSet[StatusBar] = weakref.WeakSet()
_hooked = False
_clock: Subscription | None = None
_last_reconcile: dict[Path, float] = {}


def _hook() -> None:
    """Follow the watcher: one change handler and one notice handler for every bar."""
    global _hooked
    with _lock:
        if not _hooked:
            watcher.add_change_handler(_on_change)
            watcher.add_notice_handler(_on_notice)
            _hooked = True


def _on_change() -> None:
    """The watcher started following a run or saw one end: bars re-read the counts."""
    with _lock:
        bars = list(_bars)
    for db, group in _by_db(bars).items():
        _show_counts(db, group)


def _show_counts(db: Path, bars: Iterable[StatusBar], notice: Notice | None = None) -> dict[str, int]:
    """Read the counts of ``db`` and its running runs, and show them on ``bars`` (with ``notice``, a run's
    completion, when given), as one step."""
    with _reading:
        counts = registry.counts(db=db, trees=True)  # a delegation tree counts once
        waiting = _waiting(db) if counts["running"] else []
        running = _running(db, {run_id for run_id, _, _ in waiting}) if counts["running"] else []
        for bar in bars:
            bar._show(counts, running, waiting, notice)
    return counts


def live_leaves(rows: Iterable[dict[str, Any]]) -> dict[str, int]:
    """Of active rows (``run_id``, ``parent``, ``root``): each tree's live leaves by its first run's id, the
    delegated runs that go while none of their own sub-agents does (a lead waiting on its scouts is not one)."""
    delegated = [row for row in rows if row.get("parent")]
    parents = {row["parent"] for row in delegated}
    out: dict[str, int] = {}
    for row in delegated:
        if row["run_id"] not in parents:
            out[row["root"]] = out.get(row["root"], 0) + 1
    return out


def with_leaves(label: str, leaves: int) -> str:
    """``lead · demo/scripted (3 sub-agents running)``: a tree's first run named with its live leaves."""
    return f"{label} ({plural(leaves, 'sub-agent')} running)" if leaves else label


def _running(db: Path, waiting: frozenset[str] | set[str] = frozenset()) -> list[tuple[str, str, float | None]]:
    """``(label, status, seconds since it started)`` of the project's running runs as the panels name them, the
    longest running first (queued runs are counted, not named); the status of a run in ``waiting`` (run ids) is
    ``waiting``. A delegation tree is its first run, named with its live leaves (``with_leaves``)."""
    rows = registry.fetch(db, "SELECT run_id, name, preset, model, requested_model, experiment, params, run_dir, "
                              "started_at FROM runs WHERE status = 'running' AND parent IS NULL "
                              "ORDER BY COALESCE(started_at, created_at) LIMIT ?", (RUNNING_SHOWN,))
    repeats = {name: repeating(db, name) for name in {row["experiment"] for row in rows if row.get("experiment")}}
    leaves = live_leaves(registry.fetch(db, "SELECT run_id, parent, root FROM runs WHERE parent IS NOT NULL AND "
                                            f"status IN {registry.ACTIVE_SQL}"))
    out = [(with_leaves(run_label(row, repeats.get(row.get("experiment"), False)), leaves.get(row["run_id"], 0)),
            "waiting" if row.get("run_id") in waiting else "running", started_ago(row)) for row in rows]
    return sorted(out, key=lambda r: (r[2] is None, -(r[2] or 0.0)))


def run_label(row: dict[str, Any], repeats: bool = False) -> str:
    """What the panels call a registry row's run: a sweep's cell as its panel names it (``preset · model · task id``,
    ``· #repeat`` when the sweep repeats, ``progress.cell_label``), else ``name · model``."""
    model = row.get("model") or row.get("requested_model")
    try:
        params = json.loads(row.get("params") or "{}") if row.get("experiment") else {}
    except ValueError:
        params = {}
    if params and isinstance(params, dict):
        return cell_label(SimpleNamespace(params=params, preset=row.get("preset"), model=model, name=row.get("name")),
                          repeats=repeats)
    return " · ".join(str(p) for p in (row.get("name") or row.get("preset") or row.get("run_id"), model) if p)


def repeating(db: Path, experiment: str) -> bool:
    """Whether an experiment's runs repeat (one has a repeat other than 1): its panel names the repeat then."""
    return bool(registry.fetch(db, "SELECT 1 FROM runs WHERE experiment = ? AND "
                                   "COALESCE(json_extract(params, '$.repeat'), 1) != 1 LIMIT 1", (experiment,)))


def started_ago(row: dict[str, Any]) -> float | None:
    """Seconds since a row's run really started: its ``run_start`` event (the panels' clock), else its supervisor's
    start; None before either (a run launched, not started yet: never the time since it was queued)."""
    try:
        with open(Path(str(row.get("run_dir"))) / "events.jsonl", "rb") as f:
            first = json.loads(f.readline(1 << 16) or b"{}")
        if first.get("type") == "run_start" and isinstance(first.get("ts"), (int, float)):
            return max(0.0, time.time() - first["ts"])
    except (OSError, ValueError, AttributeError):
        pass
    since = registry.age(row.get("started_at"))
    return None if since == float("inf") else max(0.0, since)


def _waiting(db: Path) -> list[tuple[str, str, str]]:
    """``(run id, name, first question)`` of the project's running runs that wait for an answer, oldest first
    (a run waits while its ``waiting.json`` lists a question: registry rows keep ``running``)."""
    rows = registry.fetch(db, "SELECT run_id, name, run_dir FROM runs WHERE status = 'running' ORDER BY created_at")
    out = []
    for row in rows:
        run_dir = Path(str(row.get("run_dir") or ""))
        if not (run_dir / inbox.WAITING).exists():  # one stat per running run; read only when it is there
            continue
        questions = inbox.waiting(run_dir)
        if questions:
            first = questions[0]
            out.append((str(row.get("run_id")), str(row.get("name") or "?"),
                        str(first.get("title") or first.get("message") or "")))
    return out


def _on_notice(notice: Notice) -> None:
    """A run's one completion notice: the bars of its project show it with counts read after it (its row is
    recorded before it), as one step: no bar says ``1 running`` beside ``✓ scout completed``."""
    run_dir = (notice.row or {}).get("run_dir")
    db = registry.db_of(Path(run_dir).resolve()) if run_dir else None
    with _lock:
        bars = [bar for bar in _bars if db is None or bar.db == db]
    for bar_db, group in _by_db(bars).items():
        _show_counts(bar_db, group, notice)


def _by_db(bars: Iterable[StatusBar]) -> dict[Path, list[StatusBar]]:
    groups: dict[Path, list[StatusBar]] = {}
    for bar in bars:
        groups.setdefault(bar.db, []).append(bar)
    return groups


def _ensure_clock() -> None:
    """Subscribe the bars' tick to the process's clock (once), and have it look now."""
    global _clock
    with _lock:
        if _clock is None or _clock.cancelled:
            _clock = watcher.subscribe(_tick, BAR_IDLE_POLL, name="status bars")
        else:
            _clock.poke()


def _tick() -> bool:
    """One look at the counts of every bar's project; False (the subscription ends) once no bar is left."""
    with _lock:
        bars = list(_bars)
        if not bars:
            if _clock is not None:
                _clock.cancel()  # under the lock: a bar made now subscribes anew
            return False
    active = False
    for db, group in _by_db(bars).items():
        counts = _show_counts(db, group)
        now = time.monotonic()
        if counts["running"] and now - _last_reconcile.get(db, 0.0) >= RECONCILE_EVERY:
            _last_reconcile[db] = now
            reconcile.reconcile(group[0].root, reattach=False)  # the clock's step: a gone supervisor is not "running"
            counts = _show_counts(db, group)
        active = active or counts["running"] > 0
    clock = _clock
    if clock is not None:
        clock.interval = BAR_ACTIVE_POLL if active else BAR_IDLE_POLL
    return True


class StatusBar:
    """``runs: 2 running / 5 total · 1 failed · ✓ scout completed``: the project's counts and last notice.

    ``text`` is the line (``running_text`` names the running runs); ``html`` the bar a notebook shows,
    ``widget`` an ``ipywidgets.HTML`` of it kept current from any thread (built only when asked for). In a
    notebook each display of the bar is a ``NotebookRecord`` kept current; elsewhere the bar is its text.
    """

    def __init__(self, root: str | Path | None = None, *, follow: bool = True) -> None:
        self.db = registry.db_path(root)
        self.root = self.db.parent.parent.parent  # <root>/.pi/subagents/registry.sqlite
        self.counts: dict[str, int] = {"running": 0, "completed": 0, "failed": 0, "aborted": 0, "total": 0}
        self.running: list[tuple[str, str, float | None]] = []
        self.waiting: list[tuple[str, str, str]] = []   # (run id, name, question) of runs waiting for an answer
        self.notice: Notice | None = None
        self.as_of = time.time()
        self._widget: Any = None
        self._record = NotebookRecord(f"nbsubagents-statusbar-{id(self):x}",
                                      lambda: (self.text, self._html(sheet=False)))
        self._bar_lock = threading.RLock()
        self.note = ""  # said beside "as of" (a bar read once for a record its kernel left behind)
        if not follow:  # one reading, kept by nothing
            self.refresh()
            return
        with _lock:
            _bars.add(self)
        _hook()
        self.refresh()
        _ensure_clock()

    # -- what it says -------------------------------------------------------------------------------
    @property
    def text(self) -> str:
        c = self.counts
        text = f"runs: {c['running']} running / {c['total']} total"
        for status in ("queued", "failed", "aborted"):
            if c.get(status):
                text += f" · {c[status]} {status}"
        if self.notice is not None:
            text += f" · {_notice_words(self.notice)}"
        if self.waiting:
            text += " · " + self.waiting_text
        return text

    @property
    def waiting_text(self) -> str:
        """``◷ scout waits for your answer``: each run waiting for a person (the first few), "" when none."""
        words = [f"{glyph('waiting')} {name} waits for your answer" for _, name, _ in self.waiting[:WAITING_SHOWN]]
        more = len(self.waiting) - WAITING_SHOWN
        return " · ".join(words + ([f"+ {more} more waiting"] if more > 0 else []))

    @property
    def running_text(self) -> str:
        """``↻ scout · demo/scripted 12s``: the running runs as the panels name them, with their clocks."""
        words = [f"{glyph(status)} {name} " + ("starting" if age is None else duration(age))
                 for name, status, age in self.running]
        more = self.counts["running"] - len(self.running)
        return " · ".join(words + ([f"+ {more} more"] if more > 0 else []))

    @property
    def html(self) -> str:
        """The bar with its rules (a notebook's record of it carries none: they go once, in an output before it)."""
        return self._html()

    def _html(self, sheet: bool = True) -> str:
        return render("statusbar.html", sheet=sheet, counts=self.counts, running=f"{self.counts['running']} running",
                      notice=self.notice, notice_words=_notice_words(self.notice) if self.notice else "",
                      waiting=self.waiting[:WAITING_SHOWN], more=len(self.waiting) - WAITING_SHOWN,
                      running_text=self.running_text if self.running else "",
                      stamp=time.strftime("%H:%M:%S", time.localtime(self.as_of)), note=self.note)

    @property
    def value(self) -> str:
        """The widget's value (its HTML); the same as ``html``."""
        return self.widget.value

    # -- the widget ---------------------------------------------------------------------------------
    @property
    def widget(self) -> Any:
        """An ``ipywidgets.HTML`` of this bar kept current (built on first use; needs ipywidgets). The bar's
        own display in a notebook is not this widget but its record (``_ipython_display_``)."""
        with self._bar_lock:
            if self._widget is None:
                w = load_ipywidgets()
                self._widget = w.HTML(value=self.html).add_class("nbsubagents-statusbar-widget")
                self._widget._nbsubagents_bar = self  # an open widget keeps its bar, and its updates, alive
            return self._widget

    def refresh(self) -> StatusBar:
        """Read the counts again now."""
        _show_counts(self.db, [self])
        return self

    def _show(self, counts: dict[str, int], running: list[tuple[str, str, float | None]] | None = None,
              waiting: list[tuple[str, str, str]] | None = None, notice: Notice | None = None) -> None:
        with self._bar_lock:
            said = (self.text, self.running_text)
            self.counts = dict(counts)
            self.running = list(running or [])
            self.waiting = list(waiting or [])
            if notice is not None:  # after the counts: a reader that sees the notice sees the counts after it
                self.notice = notice
            if self.running or said != (self.text, self.running_text):
                self.as_of = time.time()  # a reading that says something new (or moves a clock) is sent again
            if self._widget is not None:
                value = self.html
                if self._widget.value != value:
                    self._widget.value = value
        try:
            self._record.update()
        except Exception:  # the notebook is gone (the kernel outlived its frontend): the bar's text stays true
            pass

    def close(self) -> None:
        """Stop updating this bar (its outputs keep their last reading) and close its widget."""
        with _lock:
            _bars.discard(self)
        with self._bar_lock:
            widget, self._widget = self._widget, None
        if widget is not None:
            widget.close()

    def __repr__(self) -> str:
        return self.text + (f"\n{self.running_text}" if self.running else "")

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return {"text/plain": repr(self), "text/html": self.html}

    def _ipython_display_(self) -> None:
        """In a notebook: a new output of the bar's record, kept current with every other one."""
        from IPython.display import display
        if in_kernel():
            display({"text/plain": "", "text/html": stylesheet("statusbar")}, raw=True)  # once, not per update
            self._record.show()
            return
        display(self._repr_mimebundle_(), raw=True)


def _notice_words(notice: Notice) -> str:
    return f"{glyph(notice.status)} {notice.name} {notice.status}" + (" while away" if notice.away else "")


def bar_record(root: str | Path, note: str = "") -> tuple[str, str, int]:
    """``(text, html, running)`` of the project's bar as of now, as a notebook's record of it (no rules) with
    ``note`` beside its stamp: what JupyterLab puts in place of a bar's record whose kernel went away. A pure read:
    nothing follows it, nothing is reconciled."""
    bar = StatusBar(root, follow=False)
    bar.note = note
    return bar.text, bar._html(sheet=False), bar.counts["running"]


def status_bar(root: str | Path | None = None) -> StatusBar:
    """A compact, live status line of the project's runs: ``runs: 2 running / 5 total``.

    Display it from any cell (it is the cell's value); every bar stays current while runs start and
    end, from this kernel or others, and shows the last completion notice.
    """
    bar = StatusBar(root)  # first, so that what finished while away reaches it
    reconcile.first_use(root)
    reconcile.reconcile(root)
    return bar.refresh()
