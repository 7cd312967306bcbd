"""The run browser: ``browse()``, an ipywidgets explorer over the registry: filters, the runs, and for the
selected run its header, output, transcript, events and files.

ipywidgets and pandas are imported when a browser is built. A live browser subscribes to the process's
clock (``lifecycle.watcher.subscribe``): it re-reads the counts every ``interval`` seconds while runs are
active and every ``idle_interval`` otherwise, refreshes when they changed, and at once when the watcher
reports a change (a run started or ended). Its refresh is a pure read of the registry. Widgets are only
ever updated by setting their values; ``close()`` ends the subscription and closes the widgets.
"""

from __future__ import annotations

import threading
import weakref
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import _registry as registry
from .._child.artifacts import ACTIVE, STATUSES
from .._child.events import Tally
from .._config import NbSubagentsError
from .._lifecycle import watcher
from .._lifecycle.handle import Run, reread
from .._registry import query
from .._style import plural
from .._templates import part, stylesheet
from .._views.masking import MaskedRun, masker
from .._views.tables import styled_html
from .browser_html import events_html, header_html, list_colours, list_header, list_labels, output_html
from .display import widget_bundle, widgets_available
from .kernel import NotebookRecord, click_subshell, load_ipywidgets, route_clicks

if TYPE_CHECKING:
    import pandas

    from .._lifecycle.watcher import Subscription

__all__ = ["Browser", "browse", "FILTERS", "TIME_RANGES", "BROWSE_LIMIT"]

BROWSE_LIMIT = 500       # newest runs listed by browse()
TRANSCRIPT_LIMIT = 200_000
ANY = ""  # a dropdown's "any ..." entry (ipywidgets takes a None value for "nothing selected")
TIME_RANGES: list[tuple[str, str]] = [("any time", ANY), ("last hour", "1h"), ("last 24 hours", "24h"),
                                      ("last 7 days", "7d")]
FILTERS = ("status", "preset", "model", "since", "text")

_lock = threading.RLock()                  # guards the weak set and the hook below
_browsers: weakref.WeakSet[Browser] = weakref.WeakSet()
_hooked = False


def _hook() -> None:
    """Follow the watcher: one change handler for every browser."""
    global _hooked
    with _lock:
        if not _hooked:
            watcher.add_change_handler(_on_change)
            _hooked = True


def _on_change() -> None:
    """The watcher started following a run or saw one end: live browsers refresh at their next tick, now."""
    with _lock:
        browsers = list(_browsers)
    for browser in browsers:
        browser._wake()


class Browser:
    """An explorer over the registry: filters, the runs, and the selected run's details.

    Programmatic use (what the widgets do): ``set_filters(status=..., preset=..., model=..., since=...,
    text=...)``, ``select(run_id)``, ``refresh()``; ``run_ids``, ``frame``, ``selected`` and the widgets
    (``status_filter``, ``table``, ``header_html``, ``transcript_html``, ...) hold what a page shows.
    With ``live`` the process's clock refreshes it every ``interval`` seconds while runs are active (and on
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
        self._woken = threading.Event()   # the watcher saw a change: refresh at the next tick, whatever the counts
        self._closed = threading.Event()
        self._last: dict[str, int] | None = None
        self._clock: Subscription | None = None  # its subscription to the process's clock while live

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
        self.status_hint = w.HTML(part("bits.html", "hint", small=True,
                                       text="Ctrl-click (⌘-click on a Mac) to pick several; none: every status"))
        self.status_hint.add_class("nbsubagents-browse-status-hint")
        self.count_html = w.HTML().add_class("nbsubagents-browse-count")
        self.list_header = w.HTML().add_class("nbsubagents-browse-list-header")
        self.list_style = w.HTML().add_class("nbsubagents-browse-list-style")
        self.table = w.Select(options=[], rows=12, layout=full).add_class("nbsubagents-browse-list")
        self.select_hint = w.HTML(part("bits.html", "hint", text="Select a run in the list to see its output, "
                                       "transcript, events and files.")).add_class("nbsubagents-browse-hint")
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
        self._style = w.HTML(stylesheet())
        self.widget = w.VBox([self._style, self.list_style, filters_box, self.count_html, self.list_header, self.table,
                              self.table_box, self.select_hint, self.details])
        self.widget.add_class("nbsubagents-browse")
        self.widget._nbsubagents_browser = self  # an open widget keeps its browser alive
        # its output in a notebook: the widget while it is open, then (closed, or the kernel gone) its record
        self._record = NotebookRecord(f"nbsubagents-browse-{id(self):x}", lambda: (repr(self), self.static_html()),
                                      widget=self.widget)
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
            ref = weakref.ref(self)  # the clock does not keep a browser alive (its open widget does)

            def tick() -> bool:
                browser = ref()
                return browser is not None and browser._tick()

            self._last = registry.counts(db=self.db)
            self._clock = watcher.subscribe(tick, interval, name="browse() refresh", first=interval)

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
                        query.to_utc_iso(value, name="since")  # a clear error for what runs() would refuse
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
        with self._lock:
            if self._closed.is_set():
                return self
            try:
                frame = query.runs(**self.filters, limit=self.limit, root=self.root)
            except NbSubagentsError as exc:
                self.error = str(exc)
                self.count_html.value = part("browse.html", "failure", text=self.error)
                raise
            self.error = None
            self.frame = frame
            options = list_labels(frame)
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
                    self.list_header.value = list_header(frame)
                    self.list_style.value = list_colours(frame)
                    columns = [c for c in ("run_id", "name", "preset", "status", "model", "started", "duration_s",
                                           "tool_calls", "tokens", "cost", "task") if c in frame.columns]
                    self.table_html.value = masker().text(styled_html(frame[columns], sheet=False))
            finally:
                self._quiet = False
            active = int(frame["status"].isin(ACTIVE).sum()) if len(frame) else 0
            count = plural(len(frame), "run") + (f" · {active} running" if active else "")
            if len(frame) >= self.limit:
                count += f" · the newest {self.limit} shown"
            self.count_html.value = part("bits.html", "hint",
                                         text=f'{count} · updated {datetime.now().strftime("%H:%M:%S")}')
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
            self.header_html.value = part("browse.html", "failure", text=str(exc))

    def _render_details(self, run_id: str) -> None:
        row = registry.resolve(run_id, self.root)
        run = watcher.get(row["run_id"]) or Run(row["run_dir"])
        reread(run)  # read result.json again: it may have appeared since
        status = run.status if run.done else (row.get("status") or run.status)
        events = run.events()
        tally = Tally()
        for event in events:
            tally.add(event)
        self.selected = row["run_id"]
        self._shown = (row["run_id"], status)
        masks = masker()  # what a browser shows is masked before anything cuts it short (a saved notebook keeps it)
        shown_row, shown_run = masks.data(row), MaskedRun(run, masks)
        self.header_html.value = masks.text(header_html(shown_row, shown_run, status, tally))
        self.output_html.value = masks.text(output_html(shown_row, shown_run, status))
        transcript = shown_run.transcript
        if len(transcript) > TRANSCRIPT_LIMIT:
            transcript = f"… ({len(transcript) - TRANSCRIPT_LIMIT:,} characters before this: see " \
                         f"{run.paths.transcript})\n" + transcript[-TRANSCRIPT_LIMIT:]
        self.transcript_html.value = part("browse.html", "transcript", text=transcript or "(no transcript yet)")
        self.events_html.value = masks.text(events_html(run, events, masks.text))
        found = run.artifacts
        self.artifacts_html.value = part("browse.html", "files", where=str(run.dir), found=found,
                                         changed=[masks.text(path) for path in run.files_changed])
        self.tabs.titles = ("Output", "Transcript", f"Events ({len(events)})", f"Artifacts ({len(found)})")
        self.details.layout.display = None
        self.select_hint.layout.display = "none"

    def _clear_details(self) -> None:
        self.selected = None
        self._shown = None
        self.details.layout.display = "none"
        self.select_hint.layout.display = None

    # -- live updates -------------------------------------------------------------------------------
    def _tick(self) -> bool:
        """One tick of the clock: refresh when woken, while runs are active, or when the counts changed;
        False once closed."""
        if self._closed.is_set():
            return False
        woke = self._woken.is_set()
        self._woken.clear()
        counts = registry.counts(db=self.db)
        if woke or counts["running"] or counts != self._last:
            self.refresh()
        self._last = counts
        clock = self._clock
        if clock is not None:
            clock.interval = self.interval if counts["running"] else self.idle_interval
        return not self._closed.is_set()

    def _wake(self) -> None:
        self._woken.set()
        clock = self._clock
        if clock is not None:
            clock.poke()

    def _safe_refresh(self) -> None:
        try:
            self.refresh()
        except NbSubagentsError:
            pass  # shown in the count line

    def close(self) -> None:
        """Stop refreshing and close the widgets; a notebook keeps the list as it was (its static record)."""
        if self._record.shown and not self._record.ended:
            try:
                self._record.end()
            except Exception:  # the notebook is gone: nothing to keep
                pass
        self._closed.set()
        clock = self._clock
        if clock is not None:
            clock.cancel()
        with self._lock:  # a refresh under way on the clock ends before the widgets close
            pass
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

    def static_html(self) -> str:
        """The list as it reads now, without widgets: what a saved notebook keeps once the browser closed."""
        stamp = datetime.now().strftime("%H:%M:%S")
        return part("browse.html", "record", listing=repr(self), stamp=stamp)  # the page's ink: on any page

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return widget_bundle(lambda: self.widget, repr(self), self.static_html())

    def _ipython_display_(self) -> None:
        """In a notebook with widgets: the explorer, as an output that becomes its static record when the browser
        closes or the kernel shuts down (``kernel.NotebookRecord``)."""
        from IPython.display import display
        if widgets_available():
            self._record.show()
        else:
            display(self._repr_mimebundle_(), raw=True)


def browse(*, status: Any = None, preset: str | None = None, model: str | None = None, since: Any = None,
           text: str | None = None, root: str | Path | None = None, limit: int = BROWSE_LIMIT,
           live: bool = True) -> Browser:
    """An interactive explorer of the project's runs (needs ipywidgets); see ``Browser``."""
    return Browser(root=root, limit=limit, live=live, status=status, preset=preset, model=model, since=since,
                   text=text)
