"""Looking at the project's runs while they come and go: a status bar, a run browser and a timeline.

- ``status_bar()``: one line over every run of the project, foreground or background,
  ``runs: 2 running / 5 total`` (``· 1 failed`` and ``· 1 aborted`` when there are such runs, then the
  last completion notice, ``· ✓ scout completed``), as a widget in a notebook and as text elsewhere.
- ``browse()``: an ipywidgets explorer over the registry: filters, the runs, and for the selected run
  its header, output, transcript, events and files.
- ``runs_timeline()``: a matplotlib figure, one bar per run from its start to its end.

An edge module: ipywidgets, pandas and matplotlib are imported inside the functions that need them.

Threads: bars and browsers are kept in weak sets and updated by the watcher's change and notice
handlers (registered once per process) from whatever thread the watcher calls them on, and by a poll
(a status-bar thread for all bars, one thread per browser with a stop ``Event``) that sees runs of
other kernels and foreground runs. Widgets are only ever updated by setting their values. An open
widget keeps its bar or browser alive (it holds a reference to it); ``close()`` ends both.
"""

from __future__ import annotations

import html
import sys
import threading
import time
import traceback
import weakref
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from .. import registry
from ..lifecycle import reconcile, watcher
from ..config import NbSubagentsError
from .display import VIEW_MIME, widgets_available
from ..style import MONO_STYLE as _MONO
from ..style import MUTED_STYLE as _MUTED
from ..style import DARK_SCOPE, PALETTE, STATUS_CSS, STATUSES, attrs, color, filesize, glyph, plural, shorten
from ..style import duration as _duration
from .panels import click_subshell, load_ipywidgets, route_clicks

if TYPE_CHECKING:
    import pandas
    from matplotlib.figure import Figure

    from ..lifecycle.handle import Run
    from ..lifecycle.watcher import Notice

__all__ = ["StatusBar", "status_bar", "Browser", "browse", "runs_timeline", "TIME_RANGES", "FILTERS"]

BAR_ACTIVE_POLL = 1.0    # seconds between looks at the counts while something runs
BAR_IDLE_POLL = 5.0      # ... and while nothing runs (runs of other kernels still show up)
RECONCILE_EVERY = 5.0    # the bar settles runs whose supervisor is gone at most this often
BROWSE_LIMIT = 500       # newest runs listed by browse()
TIMELINE_LIMIT = 200     # newest runs drawn by runs_timeline()
TRANSCRIPT_LIMIT = 200_000
EVENT_ROWS = 400
ANY = ""  # a dropdown's "any ..." entry (ipywidgets takes a None value for "nothing selected")
TIME_RANGES: list[tuple[str, str]] = [("any time", ANY), ("last hour", "1h"), ("last 24 hours", "24h"),
                                      ("last 7 days", "7d")]
FILTERS = ("status", "preset", "model", "since", "text")
ACTIVE = ("queued", "running")

_lock = threading.RLock()                  # guards the weak sets and the hooks below
_bars: weakref.WeakSet[StatusBar] = weakref.WeakSet()
_browsers: weakref.WeakSet[Browser] = weakref.WeakSet()
_hooked = False
_poller: threading.Thread | None = None
_poller_stop = threading.Event()


def _report(message: str) -> None:
    print(message, file=sys.stderr)
    traceback.print_exc()


def _bundle(widget_of: Any, text: str, html_text: str) -> dict[str, Any]:
    """text/plain and text/html always; the widget view too where runs show as widgets."""
    bundle: dict[str, Any] = {"text/plain": text, "text/html": html_text}
    if widgets_available():  # the one place that decides widget or text
        try:
            widget = widget_of()
        except ImportError:  # ipywidgets missing although forced: the text still shows
            return bundle
        view = widget._repr_mimebundle_().get(VIEW_MIME)
        if view is not None:
            bundle[VIEW_MIME] = view
    return bundle


def _hook() -> None:
    """Follow the watcher: one change handler and one notice handler for every bar and browser."""
    global _hooked
    with _lock:
        if not _hooked:
            watcher.add_change_handler(_on_change)
            watcher.add_notice_handler(_on_notice)
            _hooked = True


def _on_change() -> None:
    """The watcher started following a run or saw one end: bars re-read the counts, browsers wake up."""
    with _lock:
        bars, browsers = list(_bars), list(_browsers)
    for db, group in _by_db(bars).items():
        counts = registry.counts(db=db)
        for bar in group:
            bar._show(counts)
    for browser in browsers:
        browser._wake.set()


def _on_notice(notice: Notice) -> None:
    """A run's one completion notice: the bars of its project show it."""
    run_dir = (notice.row or {}).get("run_dir")
    db = registry.db_of(Path(run_dir).resolve()) if run_dir else None
    with _lock:
        bars = [bar for bar in _bars if db is None or bar.db == db]
    for bar in bars:
        bar.notice = notice
        bar.refresh()


def _by_db(bars: Iterable[StatusBar]) -> dict[Path, list[StatusBar]]:
    groups: dict[Path, list[StatusBar]] = {}
    for bar in bars:
        groups.setdefault(bar.db, []).append(bar)
    return groups


# -- the status bar ---------------------------------------------------------------------------------
class StatusBar:
    """``runs: 2 running / 5 total · 1 failed · ✓ scout completed``: the project's counts and last notice.

    ``text`` is the line; ``widget`` an ``ipywidgets.HTML`` whose value is kept current from any thread;
    in a notebook the bar shows as that widget, elsewhere as its text.
    """

    def __init__(self, root: str | Path | None = None) -> None:
        self.db = registry.db_path(root)
        self.root = self.db.parent.parent.parent  # <root>/.pi/subagents/registry.sqlite
        self.counts: dict[str, int] = {"running": 0, "completed": 0, "failed": 0, "aborted": 0, "total": 0}
        self.notice: Notice | None = None
        self._widget: Any = None
        self._bar_lock = threading.RLock()
        with _lock:
            _bars.add(self)
        _hook()
        self.refresh()
        _ensure_poller()

    # -- what it says -------------------------------------------------------------------------------
    @property
    def text(self) -> str:
        c = self.counts
        text = f"runs: {c['running']} running / {c['total']} total"
        for status in ("failed", "aborted"):
            if c.get(status):
                text += f" · {c[status]} {status}"
        if self.notice is not None:
            text += f" · {_notice_words(self.notice)}"
        return text

    @property
    def html(self) -> str:
        c = self.counts
        esc = html.escape
        running = f"{c['running']} running"
        if c["running"]:
            running = f'<b {attrs("running")}>{running}</b>'
        parts = [f'<span class="nbsubagents-statusbar-counts">runs: {running} / {c["total"]} total</span>']
        for status in ("failed", "aborted"):
            if c.get(status):
                parts.append(f'<span {attrs(status, f"nbsubagents-statusbar-{status}")}> · {c[status]} {status}</span>')
        if self.notice is not None:
            parts.append(f'<span {attrs(self.notice.status, "nbsubagents-statusbar-notice")} '
                         f'title="{esc(self.notice.text)}"> · {esc(_notice_words(self.notice))}</span>')
        return (f'{STATUS_CSS}<div class="nbsubagents-statusbar-line" '
                f'style="font-family:var(--jp-ui-font-family,sans-serif);font-size:12px">{"".join(parts)}</div>')

    @property
    def value(self) -> str:
        """The widget's value (its HTML); the same as ``html``."""
        return self.widget.value

    # -- the widget ---------------------------------------------------------------------------------
    @property
    def widget(self) -> Any:
        """The ``ipywidgets.HTML`` of this bar (built on first use; needs ipywidgets)."""
        with self._bar_lock:
            if self._widget is None:
                w = load_ipywidgets()
                self._widget = w.HTML(value=self.html).add_class("nbsubagents-statusbar")
                self._widget._nbsubagents_bar = self  # an open widget keeps its bar, and its updates, alive
            return self._widget

    def refresh(self) -> StatusBar:
        """Read the counts again now."""
        self._show(registry.counts(db=self.db))
        return self

    def _show(self, counts: dict[str, int]) -> None:
        with self._bar_lock:
            self.counts = dict(counts)
            if self._widget is not None:
                value = self.html
                if self._widget.value != value:
                    self._widget.value = value

    def close(self) -> None:
        """Stop updating this bar and close its widget."""
        with _lock:
            _bars.discard(self)
        with self._bar_lock:
            widget, self._widget = self._widget, None
        if widget is not None:
            widget.close()

    def __repr__(self) -> str:
        return self.text

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return _bundle(lambda: self.widget, self.text, self.html)


def _notice_words(notice: Notice) -> str:
    return f"{glyph(notice.status)} {notice.name} {notice.status}" + (" while away" if notice.away else "")


def _ensure_poller() -> None:
    global _poller
    with _lock:
        if _poller is None or not _poller.is_alive():
            _poller_stop.clear()
            _poller = threading.Thread(target=_poll_bars, name="nbsubagents-statusbar", daemon=True)
            _poller.start()


def _poll_bars() -> None:
    """Keep every bar current with runs the watcher does not see (other kernels, foreground runs)."""
    global _poller
    last_reconcile: dict[Path, float] = {}
    failing = False
    while not _poller_stop.is_set():
        try:
            active = _poll_once(last_reconcile)
            failing = False
        except _NoBars:
            return
        except Exception:
            if not failing:
                _report("nbsubagents: the status bar could not read the registry (will retry)")
            failing = True
            active = False
        _poller_stop.wait(BAR_ACTIVE_POLL if active else BAR_IDLE_POLL)
    with _lock:
        if _poller is threading.current_thread():
            _poller = None


class _NoBars(Exception):
    pass


def _poll_once(last_reconcile: dict[Path, float]) -> bool:
    """One look at the counts of every bar's project; True while something runs. Holds no bar after it."""
    global _poller
    with _lock:
        bars = list(_bars)
        if not bars:
            if _poller is threading.current_thread():
                _poller = None
            raise _NoBars
    active = False
    for db, group in _by_db(bars).items():
        counts = registry.counts(db=db)
        now = time.monotonic()
        if counts["running"] and now - last_reconcile.get(db, 0.0) >= RECONCILE_EVERY:
            last_reconcile[db] = now
            reconcile.reconcile(group[0].root, reattach=False)  # the bars' clock: a gone supervisor is not "running"
            counts = registry.counts(db=db)
        active = active or counts["running"] > 0
        for bar in group:
            bar._show(counts)
    return active


def status_bar(root: str | Path | None = None) -> StatusBar:
    """A compact, live status line of the project's runs: ``runs: 2 running / 5 total``.

    Display it from any cell (it is the cell's value); every bar stays current while runs start and
    end, from this kernel or others, and shows the last completion notice.
    """
    bar = StatusBar(root)  # first, so that what finished while away reaches it
    reconcile.first_use(root)
    reconcile.reconcile(root)
    return bar.refresh()


# -- the browser ------------------------------------------------------------------------------------
_BROWSE_CSS = (
    "<style>"
    ".nbsubagents-browse-list select{font-family:var(--jp-code-font-family,monospace);font-size:12px}"
    ".nbsubagents-browse pre{" + _MONO + ";max-height:420px;overflow:auto;margin:0;padding:4px 6px;"
    "background:var(--jp-layout-color2,#f5f5f5)}"
    ".nbsubagents-browse table.nbsubagents-browse-events td{vertical-align:top;padding:1px 6px;text-align:left}"
    ".nbsubagents-browse table.nbsubagents-browse-events{font-size:12px}"
    "</style>"
)


def _local(value: Any, fmt: str = "%m-%d %H:%M:%S") -> str:
    if _missing(value):
        return ""
    try:
        if hasattr(value, "to_pydatetime"):
            value = _pydt(value)
        elif isinstance(value, str):
            value = datetime.fromisoformat(value.replace("Z", "+00:00"))
        return value.astimezone().strftime(fmt)
    except (TypeError, ValueError):
        return str(value)


def _pydt(stamp: Any) -> datetime:
    """A pandas Timestamp as a datetime (its nanoseconds, which no clock here has, dropped quietly)."""
    try:
        return stamp.to_pydatetime(warn=False)
    except TypeError:
        return stamp.to_pydatetime()


def _missing(value: Any) -> bool:
    """None, NaN, NaT or pandas.NA."""
    try:
        return value is None or bool(value != value)
    except (TypeError, ValueError):  # pandas.NA compares to NA
        return True


class Browser:
    """An explorer over the registry: filters, the runs, and the selected run's details.

    Programmatic use (what the widgets do): ``set_filters(status=..., preset=..., model=..., since=...,
    text=...)``, ``select(run_id)``, ``refresh()``; ``run_ids``, ``frame``, ``selected`` and the widgets
    (``status_filter``, ``table``, ``header_html``, ``transcript_html``, ...) hold what a page shows.
    With ``live`` a daemon thread refreshes every ``interval`` seconds while runs are active (and on
    the watcher's changes); ``close()`` stops it and closes the widgets.
    """

    def __init__(self, *, root: str | Path | None = None, limit: int = BROWSE_LIMIT, live: bool = True,
                 interval: float = 1.0, idle_interval: float = 5.0, **filters: Any) -> None:
        w = load_ipywidgets()
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise NbSubagentsError(f"limit must be a whole number >= 1, got {limit!r}")
        self.db = registry.db_path(root)
        self.root = self.db.parent.parent.parent
        self.limit = limit
        self.interval = interval
        self.idle_interval = idle_interval
        self.frame: pandas.DataFrame | None = None
        self.selected: str | None = None
        self.refreshes = 0
        self.error: str | None = None
        self._lock = threading.RLock()
        self._quiet = False          # True while code (not a person) sets widget values
        self._options: list[tuple[str, str]] = []
        self._shown: tuple[str, str] | None = None   # (run id, status) of the details on screen
        self._pinned = False         # the selected run was asked for by id (select()), not picked in the list
        self._wake = threading.Event()
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None

        full = w.Layout(width="100%")
        self.status_filter = w.SelectMultiple(options=STATUSES, value=(), rows=len(STATUSES), description="status",
                                              layout=w.Layout(width="230px")).add_class("nbsubagents-browse-status")
        self.preset_filter = w.Dropdown(options=[("any preset", ANY)], value=ANY, description="preset")
        self.preset_filter.add_class("nbsubagents-browse-preset")
        self.model_filter = w.Dropdown(options=[("any model", ANY)], value=ANY, description="model")
        self.model_filter.add_class("nbsubagents-browse-model")
        self.since_filter = w.Dropdown(options=list(TIME_RANGES), value=ANY, description="started")
        self.since_filter.add_class("nbsubagents-browse-since")
        self.text_filter = w.Text(value="", placeholder="task or output contains…", description="text",
                                  continuous_update=False).add_class("nbsubagents-browse-text")
        self.refresh_button = w.Button(description="Refresh", icon="refresh", layout=w.Layout(width="auto"))
        self.refresh_button.add_class("nbsubagents-browse-refresh")
        self.status_hint = w.HTML(f'<div style="{_MUTED};font-size:11px">Ctrl-click (⌘-click on a Mac) '
                                  'to pick several; none: every status</div>').add_class("nbsubagents-browse-status-hint")
        self.count_html = w.HTML().add_class("nbsubagents-browse-count")
        self.list_header = w.HTML().add_class("nbsubagents-browse-list-header")
        self.list_style = w.HTML().add_class("nbsubagents-browse-list-style")
        self.table = w.Select(options=[], rows=12, layout=full).add_class("nbsubagents-browse-list")
        self.select_hint = w.HTML(f'<div style="{_MUTED}">Select a run in the list to see its output, transcript, '
                                  'events and files.</div>').add_class("nbsubagents-browse-hint")
        self.table_html = w.HTML().add_class("nbsubagents-browse-table")
        self.table_box = w.Accordion(children=[self.table_html], selected_index=None)
        self.table_box.titles = ("Table",)
        self.header_html = w.HTML().add_class("nbsubagents-browse-header")
        self.output_html = w.HTML().add_class("nbsubagents-browse-output")
        self.transcript_html = w.HTML().add_class("nbsubagents-browse-transcript")
        self.events_html = w.HTML().add_class("nbsubagents-browse-events")
        self.artifacts_html = w.HTML().add_class("nbsubagents-browse-artifacts")
        self.tabs = w.Tab(children=[self.output_html, self.transcript_html, self.events_html, self.artifacts_html])
        self.tabs.titles = ("Output", "Transcript", "Events", "Artifacts")
        self.tabs.add_class("nbsubagents-browse-tabs")
        self.details = w.VBox([self.header_html, self.tabs]).add_class("nbsubagents-browse-details")
        self.details.layout.display = "none"  # until a run is selected
        filters_box = w.HBox([w.VBox([self.status_filter, self.status_hint]),
                              w.VBox([self.preset_filter, self.model_filter, self.since_filter, self.text_filter]),
                              w.VBox([self.refresh_button])]).add_class("nbsubagents-browse-filters")
        self._style = w.HTML(_BROWSE_CSS)
        self.widget = w.VBox([self._style, self.list_style, filters_box, self.count_html, self.list_header, self.table,
                              self.table_box, self.select_hint, self.details])
        self.widget.add_class("nbsubagents-browse")
        self.widget._nbsubagents_browser = self  # an open widget keeps its browser alive
        self._all = [self.status_filter, self.preset_filter, self.model_filter, self.since_filter, self.text_filter,
                     self.refresh_button, self.count_html, self.table, self.table_html, self.table_box,
                     self.header_html, self.output_html, self.transcript_html, self.events_html,
                     self.artifacts_html, self.tabs, self.details, filters_box, *filters_box.children,
                     self.status_hint, self.list_header, self.list_style, self.select_hint, self._style, self.widget]

        for control in (self.status_filter, self.preset_filter, self.model_filter, self.since_filter,
                        self.text_filter):
            control.observe(self._on_filter, names="value")
        self.table.observe(self._on_select, names="value")
        self.refresh_button.on_click(lambda _button: self._safe_refresh())
        subshell = click_subshell()  # clicks are served while a foreground run keeps the main thread busy
        for control in (self.status_filter, self.preset_filter, self.model_filter, self.since_filter,
                        self.text_filter, self.refresh_button, self.table):
            route_clicks(control, subshell)

        try:
            self._apply(filters)
            self.refresh()
        except BaseException:
            self.close()  # a refused filter leaves nothing behind
            raise
        with _lock:
            _browsers.add(self)
        _hook()
        if live:
            self._thread = threading.Thread(target=self._loop, name="nbsubagents-browse", daemon=True)
            self._thread.start()

    # -- filters ------------------------------------------------------------------------------------
    @property
    def filters(self) -> dict[str, Any]:
        """The filters as ``nbsubagents.runs()`` takes them."""
        return {"status": list(self.status_filter.value) or None, "preset": self.preset_filter.value or None,
                "model": self.model_filter.value or None, "since": self.since_filter.value or None,
                "text": self.text_filter.value.strip() or None}

    def set_filters(self, **filters: Any) -> Browser:
        """Set some filters (``None`` clears one) and refresh: ``set_filters(status="failed", since="24h")``."""
        self._apply(filters)
        return self.refresh()

    def _apply(self, filters: dict[str, Any]) -> None:
        unknown = sorted(set(filters) - set(FILTERS))
        if unknown:
            raise NbSubagentsError(f"Unknown filter {unknown[0]!r}: browse() filters by {', '.join(FILTERS)}")
        with self._lock:
            self._quiet = True
            try:
                if "status" in filters:
                    value = filters["status"]
                    values = () if value is None else (value,) if isinstance(value, str) else tuple(value)
                    bad = [v for v in values if v not in STATUSES]
                    if bad:
                        raise NbSubagentsError(f"Unknown status {bad[0]!r}; statuses are {', '.join(STATUSES)}")
                    self.status_filter.value = values
                for name, control in (("preset", self.preset_filter), ("model", self.model_filter)):
                    if name in filters:
                        value = filters[name] or ANY
                        if not isinstance(value, str):
                            raise NbSubagentsError(f"{name} must be a name, got {value!r}")
                        if value not in [v for _, v in control.options]:
                            control.options = [*control.options, (value, value)]
                        control.value = value
                if "since" in filters:
                    value = filters["since"] or ANY
                    if value not in [v for _, v in self.since_filter.options]:
                        from ..registry.query import to_utc_iso
                        to_utc_iso(value, name="since")  # a clear error for what runs() would refuse
                        self.since_filter.options = [*self.since_filter.options, (f"since {value}", value)]
                    self.since_filter.value = value
                if "text" in filters:
                    self.text_filter.value = filters["text"] or ""
            finally:
                self._quiet = False

    def _on_filter(self, _change: Any) -> None:
        if not self._quiet:
            self._safe_refresh()

    # -- the list -----------------------------------------------------------------------------------
    @property
    def run_ids(self) -> list[str]:
        """The runs listed now, newest first."""
        return [v for _, v in self._options]

    @property
    def labels(self) -> list[str]:
        return [label for label, _ in self._options]

    def refresh(self) -> Browser:
        """Query the registry with the filters and show the result (and the selected run again)."""
        from ..registry import query

        with self._lock:
            if self._closed.is_set():
                return self
            try:
                frame = query.runs(**self.filters, limit=self.limit, root=self.root)
            except NbSubagentsError as exc:
                self.error = str(exc)
                self.count_html.value = f'<div {attrs("failed")}>{html.escape(self.error)}</div>'
                raise
            self.error = None
            self.frame = frame
            options = _labels(frame)
            self._quiet = True
            try:
                self._update_choices()
                if options != self._options:
                    keep = self.table.value
                    self.table.index = None
                    self.table.options = options
                    self._options = options
                    if keep in self.run_ids:
                        self.table.value = keep
                    self.table.rows = max(3, min(12, len(options)))
                    self.list_header.value = _list_header(frame)
                    self.list_style.value = _list_colours(frame)
                    columns = [c for c in ("run_id", "name", "preset", "status", "model", "started", "duration_s",
                                           "tool_calls", "tokens", "cost", "task") if c in frame.columns]
                    self.table_html.value = query.styled_html(frame[columns])
            finally:
                self._quiet = False
            active = int(frame["status"].isin(ACTIVE).sum()) if len(frame) else 0
            count = plural(len(frame), "run") + (f" · {active} running" if active else "")
            if len(frame) >= self.limit:
                count += f" · the newest {self.limit} shown"
            self.count_html.value = (f'<div style="{_MUTED}">{count} · updated '
                                     f'{datetime.now().strftime("%H:%M:%S")}</div>')
            self.refreshes += 1
            if self.selected is not None and self.selected not in self.run_ids and not self._pinned:
                self._clear_details()  # the filters no longer list it: its details go too
            elif self.selected is not None:
                status = self._status_in_frame(self.selected)
                if self._shown is None or self._shown[1] in ACTIVE or (status and status != self._shown[1]):
                    self._render_details(self.selected)
        return self

    def _update_choices(self) -> None:
        """The preset and model dropdowns list what the registry holds (and keep their choice)."""
        if not self.db.exists():
            return
        for column, control, anything in (("preset", self.preset_filter, "any preset"),
                                          ("model", self.model_filter, "any model")):
            names = [r[column] for r in registry.fetch(
                self.db, f"SELECT DISTINCT {column} FROM runs WHERE {column} IS NOT NULL ORDER BY {column}")]
            value = control.value
            if value and value not in names:
                names.append(value)
            options = [(anything, ANY), *((n, n) for n in names)]
            if list(control.options) != options:
                control.options = options
                control.value = value

    def _status_in_frame(self, run_id: str) -> str | None:
        frame = self.frame
        if frame is None or not len(frame):
            return None
        hit = frame.loc[frame["run_id"] == run_id, "status"]
        return str(hit.iloc[0]) if len(hit) else None

    # -- one run ------------------------------------------------------------------------------------
    def select(self, run_id: str) -> Browser:
        """Show one run (its id or a unique prefix), whether or not the filters list it."""
        with self._lock:
            ids = self.run_ids
            match = run_id if run_id in ids else None
            if match is None:
                starting = [i for i in ids if i.startswith(run_id)]
                match = starting[0] if len(starting) == 1 else registry.resolve(run_id, self.root)["run_id"]
            self._quiet = True
            try:
                self.table.value = match if match in ids else None
            finally:
                self._quiet = False
            self._pinned = match not in ids  # asked for by id: shown even though the filters do not list it
            self._render_details(match)
        return self

    def _on_select(self, change: dict[str, Any]) -> None:
        if self._quiet or not change.get("new"):
            return
        self._pinned = False
        try:
            with self._lock:
                self._render_details(change["new"])
        except Exception as exc:
            self.header_html.value = f'<div {attrs("failed")}>{html.escape(str(exc))}</div>'

    def _render_details(self, run_id: str) -> None:
        from ..child.events import Tally
        from ..lifecycle.handle import Run

        row = registry.resolve(run_id, self.root)
        run = watcher.get(row["run_id"]) or Run(row["run_dir"])
        run.refresh()  # read result.json again: it may have appeared since
        status = run.status if run.done else (row.get("status") or run.status)
        events = run.events()
        tally = Tally()
        for event in events:
            tally.add(event)
        self.selected = row["run_id"]
        self._shown = (row["run_id"], status)
        self.header_html.value = _header_html(row, run, status, tally)
        self.output_html.value = _output_html(row, run, status)
        transcript = run.transcript
        if len(transcript) > TRANSCRIPT_LIMIT:
            transcript = f"… ({len(transcript) - TRANSCRIPT_LIMIT:,} characters before this: see " \
                         f"{run.paths.transcript})\n" + transcript[-TRANSCRIPT_LIMIT:]
        self.transcript_html.value = (f'<pre class="nbsubagents-browse-transcript-text">'
                                      f'{html.escape(transcript or "(no transcript yet)", quote=False)}</pre>')
        self.events_html.value = _events_html(run, events)
        found = run.artifacts
        changed = run.files_changed
        files = (f'<div>files changed: {", ".join(f"<code>{html.escape(p)}</code>" for p in changed)}</div>'
                 if changed else "")
        where = f'<div style="{_MUTED}">in <code>{html.escape(str(run.dir))}</code></div>'
        self.artifacts_html.value = where + files + (_artifacts_html(found) if found else "<i>(no files)</i>")
        self.tabs.titles = ("Output", "Transcript", f"Events ({len(events)})", f"Artifacts ({len(found)})")
        self.details.layout.display = None
        self.select_hint.layout.display = "none"

    def _clear_details(self) -> None:
        self.selected = None
        self._shown = None
        self.details.layout.display = "none"
        self.select_hint.layout.display = None

    # -- live updates -------------------------------------------------------------------------------
    def _loop(self) -> None:
        last: dict[str, int] | None = None
        wait = self.interval
        failing = False
        while not self._closed.is_set():
            woke = self._wake.wait(wait)
            if self._closed.is_set():
                return
            self._wake.clear()
            try:
                counts = registry.counts(db=self.db)
                if woke or counts["running"] or counts != last:
                    self.refresh()
                last = counts
                wait = self.interval if counts["running"] else self.idle_interval
                failing = False
            except Exception:
                if not failing:
                    _report("nbsubagents: browse() could not refresh (will retry)")
                failing = True

    def _safe_refresh(self) -> None:
        try:
            self.refresh()
        except NbSubagentsError:
            pass  # shown in the count line

    def close(self) -> None:
        """Stop refreshing and close the widgets."""
        self._closed.set()
        self._wake.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(5)
        with _lock:
            _browsers.discard(self)
        for widget in self._all:
            widget.close()

    # -- display ------------------------------------------------------------------------------------
    def __repr__(self) -> str:
        shown = {k: v for k, v in self.filters.items() if v is not None}
        head = f"browse(): {plural(len(self._options), 'run')}" + (f" ({shown})" if shown else "")
        lines = [head, *self.labels[:20]]
        if len(self._options) > 20:
            lines.append(f"… {len(self._options) - 20} more (browser.frame has all)")
        return "\n".join(lines)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return _bundle(lambda: self.widget, repr(self), self.count_html.value + self.table_html.value)


def _labels(frame: pandas.DataFrame) -> list[tuple[str, str]]:
    """One aligned line per run for the list: icon, status, name, start, took, task, id."""
    if frame is None or not len(frame):
        return []
    rows = []
    for row in frame.itertuples(index=False):
        status = str(row.status)
        if status in ACTIVE:
            took = "running…"
        else:
            took = "" if _missing(row.duration_s) else _duration(float(row.duration_s))
        name = shorten(row.name if not _missing(row.name) else row.run_id, 24)
        task = shorten("" if _missing(row.task) else row.task, 50)
        rows.append((glyph(status), status, name, _local(row.started), took, task, str(row.run_id)))
    width = max(len(r[2]) for r in rows)
    return [(f"{icon} {status:<9}  {name:<{width}}  {started:<14}  {took:>8}  {task:<50}  {run_id}", run_id)
            for icon, status, name, started, took, task, run_id in rows]


LIST_COLUMNS = ("status", "name", "started", "took", "task", "run id")


def _list_header(frame: pandas.DataFrame) -> str:
    """Column names over the run list, aligned with ``_labels`` (both monospace)."""
    if frame is None or not len(frame):
        return ""
    width = max(len(shorten(n if not _missing(n) else r, 24)) for n, r in zip(frame["name"], frame["run_id"]))
    text = f"  {'status':<9}  {'name':<{width}}  {'started':<14}  {'took':>8}  {'task':<50}  run id"
    return (f'<div class="nbsubagents-browse-columns" style="{_MONO};white-space:pre;font-weight:600;'
            f'font-size:12px;padding-left:4px">{html.escape(text)}</div>')


def _list_colours(frame: pandas.DataFrame) -> str:
    """Each listed run in its status colour: one CSS rule per option of the list (the light and dark values)."""
    if frame is None or not len(frame):
        return ""
    rules = []
    for i, status in enumerate(frame["status"].astype(str), start=1):
        if status in PALETTE:
            light, dark = PALETTE[status]
            rules.append(f".nbsubagents-browse-list option:nth-child({i}){{color:{light}}}"
                         f"{DARK_SCOPE} .nbsubagents-browse-list option:nth-child({i}){{color:{dark}}}")
    return "<style>" + "".join(rules) + "</style>"


def _artifacts_html(found: Any) -> str:
    rows = "".join(f'<tr><td title="{html.escape(str(a.path))}"><code>{html.escape(a.name)}</code></td>'
                   f'<td style="text-align:right">{html.escape(filesize(a.size))}</td></tr>' for a in found)
    return f'<table class="nbsubagents-browse-artifacts"><tr><th>file</th><th>size</th></tr>{rows}</table>'


def _header_html(row: dict[str, Any], run: Run, status: str, tally: Any) -> str:
    esc = html.escape
    result = run.result or {}
    usage = result.get("usage") or {}
    calls = row.get("tool_calls") if row.get("tool_calls") is not None else result.get("toolCalls", tally.tool_calls)
    tokens = row.get("total_tokens") if row.get("total_tokens") is not None else usage.get("totalTokens", tally.tokens)
    cost = row.get("cost") if row.get("cost") is not None else usage.get("cost", tally.cost)
    if row.get("duration") is not None:
        took = _duration(float(row["duration"]))
    elif result.get("durationSeconds") is not None:
        took = _duration(float(result["durationSeconds"]))
    elif status in ACTIVE and (row.get("started_at") or row.get("created_at")):
        age = registry.age(row.get("started_at") or row.get("created_at"))
        took = f"{_duration(age)}…" if age != float("inf") else ""
    else:
        took = ""
    parts = [f"preset {row.get('preset') or '?'}", row.get("model") or run.model or "no model",
             plural(int(calls or 0), "tool call"), f"{int(tokens or 0):,} tokens", f"${float(cost or 0):.4f}"]
    if took:
        parts.append(took)
    name = row.get("name") or run.name
    task = shorten(row.get("task") or run.task, 200)
    started = _local(row.get("started_at") or row.get("created_at"), "%Y-%m-%d %H:%M:%S")
    ended = _local(row.get("ended_at"), "%H:%M:%S")
    when = f"started {started}" + (f" · ended {ended}" if ended else "")
    return (f'<div class="nbsubagents-browse-run nbsubagents-status-{esc(status)}">'
            f'{STATUS_CSS}<span {attrs(status, "nbsubagents-icon")}>{glyph(status)}</span> '
            f'<b class="nbsubagents-name">{esc(name)}</b> '
            f'<span {attrs(status, "nbsubagents-status", "font-weight:600")}>{esc(status)}</span> '
            f'<span class="nbsubagents-meta" style="{_MUTED}">· {esc(" · ".join(parts))}</span>'
            f'<div style="{_MUTED};font-size:11px"><code>{esc(row["run_id"])}</code> · {esc(when)}'
            f'{" · " + esc(row["mode"]) if row.get("mode") else ""}</div>'
            f'<div class="nbsubagents-browse-task">{esc(task)}</div></div>')


def _output_html(row: dict[str, Any], run: Run, status: str) -> str:
    output = (run.output or row.get("final_text") or "").strip()
    error = run.error or row.get("error_message")
    parts = []
    if output:
        parts.append(f'<pre class="nbsubagents-browse-output-text">{html.escape(output, quote=False)}</pre>')
    if error and status not in ("completed",):
        parts.append(f'<div {attrs("failed", "nbsubagents-error", _MONO)}>{html.escape(error, quote=False)}</div>')
    if not parts:
        parts.append(f'<i style="{_MUTED}">' + ("(running: the output comes when it ends)" if status in ACTIVE
                                                 else "(no output)") + "</i>")
    return "".join(parts)


def _events_html(run: Run, events: list[dict[str, Any]]) -> str:
    if not events:
        return f'<i style="{_MUTED}">(no events yet)</i>'
    frame = run.events_frame()
    shown = frame.tail(EVENT_ROWS)
    note = (f'<div style="{_MUTED}">the last {EVENT_ROWS} of {len(frame)} events '
            f'(run.events_frame() has all)</div>' if len(frame) > EVENT_ROWS else "")
    rows = []
    for item in shown.itertuples(index=False):
        failed = (not _missing(item.is_error) and bool(item.is_error)) or \
            (not _missing(item.kind) and str(item.kind) in ("error", "failed"))
        style = f' {attrs("failed")}' if failed else ""
        text = "" if _missing(item.text) else str(item.text)
        rows.append(f"<tr{style}><td>{'' if _missing(item.seq) else int(item.seq)}</td>"
                    f"<td>{_local(item.time, '%H:%M:%S')}</td><td>{html.escape(str(item.type))}</td>"
                    f"<td>{'' if _missing(item.tool) else html.escape(str(item.tool))}</td>"
                    f'<td style="white-space:pre-wrap">{html.escape(_short_lines(text, 600), quote=False)}</td></tr>')
    return (f'{note}<table class="nbsubagents-browse-events"><thead><tr><th>seq</th><th>time</th><th>type</th>'
            f'<th>tool</th><th>text</th></tr></thead><tbody>{"".join(rows)}</tbody></table>')


def _short_lines(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def browse(*, status: Any = None, preset: str | None = None, model: str | None = None, since: Any = None,
           text: str | None = None, root: str | Path | None = None, limit: int = BROWSE_LIMIT,
           live: bool = True) -> Browser:
    """An interactive explorer of the project's runs (needs ipywidgets); see ``Browser``."""
    return Browser(root=root, limit=limit, live=live, status=status, preset=preset, model=model, since=since,
                   text=text)


# -- the timeline -----------------------------------------------------------------------------------
def _matplotlib() -> Any:
    try:
        import matplotlib
        import matplotlib.dates
        import matplotlib.figure  # noqa: F401  (what it draws with: a broken install fails here, with the hint)
    except ImportError:
        raise ImportError("runs_timeline() draws with matplotlib, which is not installed: "
                          "pip install 'nbsubagents[timeline]' (or pip install matplotlib)") from None
    return matplotlib


def _in_ipython() -> bool:
    ipython = sys.modules.get("IPython")
    try:
        return ipython is not None and ipython.get_ipython() is not None
    except Exception:
        return False


def new_figure(figsize: tuple[float, float]) -> Figure:
    """In IPython a pyplot figure (so the notebook's backend shows it) closed at once (so it shows once, as
    the returned value); elsewhere a figure on the Agg canvas, which needs no display."""
    if _in_ipython():
        import matplotlib.pyplot as plt
        fig = plt.figure(figsize=figsize)
        plt.close(fig)
        return fig
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    fig = Figure(figsize=figsize)
    FigureCanvasAgg(fig)
    return fig


def runs_timeline(*, status: Any = None, preset: Any = None, model: Any = None, since: Any = None,
                  until: Any = None, text: str | None = None, limit: int | None = TIMELINE_LIMIT,
                  root: str | Path | None = None, theme: str = "auto") -> Figure:
    """Runs over time: one horizontal bar per run from its start to its end (now while it runs), coloured
    by status, earliest at the top, so runs that ran in parallel overlap. Filters as ``runs()``; the
    newest ``limit`` runs are drawn. Returns the matplotlib ``Figure`` (each bar's gid is its run id).

    ``theme``: ``"light"``, ``"dark"`` or ``"auto"`` (JupyterLab's chosen theme, light when unknown). The
    figure's background is transparent and its text and bars take the theme's colours.
    """
    _matplotlib()
    dark = _dark_theme(theme)
    ink = "#e5e7eb" if dark else "#1f2937"
    import pandas as pd
    from matplotlib import dates as mdates
    from matplotlib.patches import Patch

    from ..registry import query

    frame = query.runs(status=status, preset=preset, model=model, since=since, until=until, text=text,
                       limit=limit, root=root)
    frame = frame.sort_values(["started", "run_id"], kind="stable").reset_index(drop=True)
    n = len(frame)
    fig = new_figure((10.0, min(1.6 + 0.32 * max(n, 1), 30.0)))
    fig.patch.set_alpha(0.0)  # the notebook's own background shows through, light or dark
    ax = fig.add_subplot()
    ax.set_facecolor("none")
    ax.tick_params(colors=ink, labelcolor=ink)
    for spine in ax.spines.values():
        spine.set_color(ink)
    if not n:
        ax.text(0.5, 0.5, "no runs", transform=ax.transAxes, ha="center", va="center", color=ink)
        ax.set_axis_off()
        return fig

    now = pd.Timestamp.now(tz="UTC")
    starts, ends = [], []
    for row in frame.itertuples(index=False):
        start = row.started
        if _missing(start):
            start = now
        end = row.ended
        if str(row.status) in ACTIVE:
            end = now
        elif _missing(end):
            end = start + pd.Timedelta(seconds=0 if _missing(row.duration_s) else float(row.duration_s))
        starts.append(mdates.date2num(_pydt(start)))
        ends.append(mdates.date2num(_pydt(max(start, end))))
    span = max(ends) - min(starts)
    pad = span * 0.02 if span > 0 else 30 / 86400
    for i, row in enumerate(frame.itertuples(index=False)):
        status_ = str(row.status)
        face = color(status_, dark=dark)
        # true lengths; the edge in the bar's own colour keeps a run of a few seconds visible as a line
        # (a run still going: a lighter face, hatched in its colour, up to now)
        active = status_ in ACTIVE
        (bar,) = ax.barh(i, ends[i] - starts[i], left=starts[i], height=0.6, color=face + "66" if active else face,
                         edgecolor=face, linewidth=1.0, hatch="//" if active else None)
        bar.set_gid(str(row.run_id))
    names = [str(name) if not _missing(name) else str(rid) for name, rid in zip(frame["name"], frame["run_id"])]
    ax.set_yticks(range(n))
    ax.set_yticklabels(names if n <= 80 else [""] * n, fontsize=9 if n <= 30 else 7)
    ax.set_ylim(n - 0.5, -0.5)  # the earliest run at the top
    local = datetime.now(timezone.utc).astimezone().tzinfo
    low, high = min(starts) - pad, max(ends) + pad
    ax.xaxis.set_major_locator(mdates.AutoDateLocator(tz=local, minticks=3, maxticks=8))
    ax.xaxis.set_major_formatter(mdates.DateFormatter(_tick_format(high - low, low, high), tz=local))
    ax.set_xlim(low, high)
    ax.grid(axis="x", alpha=0.3, color=ink)
    ax.set_axisbelow(True)
    present = [s for s in STATUSES if s in set(frame["status"].astype(str))]
    ax.legend(handles=[Patch(color=color(s, dark=dark), label=s) for s in present], loc="upper left",
              bbox_to_anchor=(1.0, 1.0), frameon=False, fontsize=9, labelcolor=ink)
    title = plural(n, "run")
    if limit is not None and n >= limit:
        title = f"the newest {title}"
    ax.set_title(title, loc="left", fontsize=10, color=ink)
    fig.tight_layout()
    return fig


def _tick_format(span_days: float, low: float, high: float) -> str:
    """Every tick reads as a whole time: seconds only for short spans, the date once runs span days."""
    from matplotlib import dates as mdates

    if mdates.num2date(low).astimezone().date() != mdates.num2date(high).astimezone().date():
        return "%m-%d %H:%M"
    return "%H:%M:%S" if span_days * 86400 < 1800 else "%H:%M"


def _dark_theme(theme: str) -> bool:
    if theme not in ("auto", "light", "dark"):
        raise NbSubagentsError(f'theme must be "auto", "light" or "dark", got {theme!r}')
    if theme != "auto":
        return theme == "dark"
    return "dark" in (jupyterlab_theme() or "").lower()


def jupyterlab_theme() -> str | None:
    """The theme chosen in JupyterLab's user settings (``JupyterLab Dark``, ...), None when never chosen."""
    import json
    import os
    import re

    folder = os.environ.get("JUPYTERLAB_SETTINGS_DIR")
    if not folder:
        try:
            from jupyter_core.paths import jupyter_config_dir
        except ImportError:
            return None
        folder = os.path.join(jupyter_config_dir(), "lab", "user-settings")
    path = Path(folder) / "@jupyterlab" / "apputils-extension" / "themes.jupyterlab-settings"
    try:
        text = path.read_text(encoding="utf-8")
        text = re.sub(r"^\s*//.*$", "", text, flags=re.MULTILINE)  # the file is JSON with comments
        value = json.loads(text).get("theme")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, str) else None
