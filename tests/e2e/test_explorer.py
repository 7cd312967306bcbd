"""The status bar (issue 4), the run browser and the timeline (issue 6), without a browser.

Widgets work without a frontend, so every value a page would show is read here. Runs are the real pi
against the scripted model (``project`` fixture); synthetic rows come from ``test_query.synthetic``.
"""

from __future__ import annotations

import html
import io
import re
import sys
import threading
import time
from datetime import datetime, timezone

import pytest
from helpers import wait_for

import nbsubagents
from nbsubagents._ui import browser as explorer
from nbsubagents._ui import statusbar
from nbsubagents._lifecycle import watcher
from nbsubagents._pi import find_pi
from nbsubagents._ui.display import VIEW_MIME
from nbsubagents._pi.models import available_models
from nbsubagents import _style as style
from nbsubagents._templates import stylesheet
from nbsubagents._style import color as status_color

from test_query import synthetic


def plain(value: str) -> str:
    """What a page shows of an HTML widget value."""
    return html.unescape(re.sub(r"<[^>]+>", "", re.sub(r"<style>.*?</style>", "", value, flags=re.S)))


def bar_line(value: str) -> str:
    """What a page shows of a bar's first line (its counts and notice; below it come the running runs and the
    time of the reading)."""
    return plain(re.search(r'<div class="nbsubagents-statusbar-now">(.*?)</div>', value).group(1))


@pytest.fixture
def explore(project):
    """A project whose bars and browsers are closed (and watcher stopped) at the end of the test."""
    yield project
    for browser in list(explorer._browsers):
        browser.close()
    for bar in list(statusbar._bars):
        bar.close()
    watcher.stop()


@pytest.fixture
def warm(explore):
    """Model list cached, as after a first run in a kernel."""
    available_models(find_pi())
    yield explore


# -- the status bar -------------------------------------------------------------------------------------
def test_status_bar_follows_a_background_run_from_start_to_end_and_shows_its_notice(warm):
    bar = nbsubagents.status_bar()
    assert bar.text == "runs: 0 running / 0 total" and repr(bar) == bar.text
    widget = bar.widget
    assert "nbsubagents-statusbar-widget" in widget._dom_classes
    assert bar_line(widget.value) == "runs: 0 running / 0 total" and bar.value == widget.value
    assert re.search(r">as of \d\d:\d\d:\d\d</div>", widget.value)  # when it read what it says

    run = nbsubagents.start("scout", "sleep: 2\nread README.md", name="scouter", show=False)
    # start() tells the watcher, whose change handler updated the bar before start() returned
    assert bar.text == "runs: 1 running / 1 total"
    assert bar_line(widget.value) == "runs: 1 running / 1 total"
    assert f'background:{status_color("running")};color:#fff' in widget.value
    # the running run as its panel names it (name · model), with its clock since it started ("starting" before)
    assert re.fullmatch(r"↻ scouter · demo/scripted ([\d.]+s|starting)", bar.running_text), bar.running_text
    assert bar.running_text in plain(widget.value) and repr(bar) == f"{bar.text}\n{bar.running_text}"

    wait_for(lambda: "✓" in bar.text, what="the completion notice on the bar")
    assert run.status == "completed"
    assert bar.text == "runs: 0 running / 1 total · ✓ scouter completed"
    assert bar_line(widget.value) == bar.text and bar.running_text == ""
    assert f"background run scouter {run.id} completed" in widget.value  # the full notice as a tooltip


def test_every_bar_stays_current_and_failures_are_counted(warm):
    first, second = nbsubagents.status_bar(), nbsubagents.status_bar()
    assert first is not second and {first, second} <= set(statusbar._bars)
    first.widget  # one shown as a widget, one used as text: both stay current
    nbsubagents.start("scout", "fail: 500 upstream exploded", name="broken", show=False)
    wait_for(lambda: "broken failed" in first.text and "broken failed" in second.text, what="both bars")
    for bar in (first, second):
        assert bar.text == "runs: 0 running / 1 total · 1 failed · ✗ broken failed"
    assert bar_line(first.widget.value) == first.text
    assert f'style="background:{status_color("failed")};color:#fff' in first.widget.value

    first.close()
    assert first not in statusbar._bars and second in statusbar._bars
    nbsubagents.start("scout", "read README.md", name="again", show=False).wait(90)
    wait_for(lambda: "again completed" in second.text, what="the second bar")
    assert "again" not in first.text  # a closed bar no longer changes


def test_a_read_of_the_counts_made_before_a_run_ended_never_lands_after_one_made_since(explore, monkeypatch):
    # The race seen on a loaded machine: start() told the bars (the launching thread read "1 running"), the
    # run failed at once and the watcher's notice showed "1 failed", then the launching thread's older read
    # landed on top, leaving "1 running · ✗ broken failed" until the next tick.
    bar = nbsubagents.status_bar()
    before = {"running": 1, "completed": 0, "failed": 0, "aborted": 0, "total": 1}
    after = {"running": 0, "completed": 0, "failed": 1, "aborted": 0, "total": 1}
    read, release = threading.Event(), threading.Event()

    def counts(*args, **kwargs):
        if threading.current_thread().name == "launching":
            read.set()
            release.wait(10)  # this read is made; its showing is late
            return before
        return after

    monkeypatch.setattr(statusbar.registry, "counts", counts)
    launching = threading.Thread(target=statusbar._on_change, name="launching")
    launching.start()
    assert read.wait(10)
    noticed = threading.Thread(target=bar.refresh, name="notice")
    noticed.start()
    noticed.join(0.3)
    release.set()
    launching.join(10)
    noticed.join(10)
    assert bar.counts == after and bar.text == "runs: 0 running / 1 total · 1 failed"


def test_a_notice_never_shows_beside_counts_read_before_its_run_ended(explore, monkeypatch):
    # The race a loaded fresh clone's CI met: the clock's read ("1 running") was in flight when the watcher's
    # notice arrived, and a reader saw "1 running · ✓ scouter completed" between the two showings.
    bar = nbsubagents.status_bar()
    before = {"running": 1, "completed": 0, "failed": 0, "aborted": 0, "total": 1}
    after = {"running": 0, "completed": 1, "failed": 0, "aborted": 0, "total": 1}
    read, release, ended = threading.Event(), threading.Event(), threading.Event()

    def counts(*args, **kwargs):  # the registry: "1 running" until the notice's thread reads it (the run ended)
        name = threading.current_thread().name
        if name == "tick":
            read.set()
            release.wait(10)
            return before
        if name == "notice":
            ended.set()
        return after if ended.is_set() else before

    monkeypatch.setattr(statusbar.registry, "counts", counts)
    monkeypatch.setattr(statusbar, "_running", lambda *args: [("scouter", "running", 1.0)])
    bar._show(before, [("scouter", "running", 1.0)])  # what start() had the bar say
    ticking = threading.Thread(target=statusbar._show_counts, args=(bar.db, [bar]), name="tick")
    ticking.start()
    assert read.wait(10)
    row = {"run_id": "r1", "name": "scouter", "status": "completed", "run_dir": str(bar.db.parent / "runs" / "r1")}
    notice = watcher.Notice(run_id="r1", name="scouter", status="completed", mode="background", summary="",
                            away=False, row=row, quiet=True)
    noticed = threading.Thread(target=statusbar._on_notice, args=(notice,), name="notice")
    noticed.start()
    noticed.join(0.3)
    seen = bar.text  # while the tick's old read is still in flight
    release.set()
    ticking.join(10)
    noticed.join(10)
    assert seen == "runs: 1 running / 1 total", seen  # the notice waits for the counts it is shown with
    assert bar.text == "runs: 0 running / 1 total · ✓ scouter completed"


def test_status_bar_sees_runs_its_watcher_does_not(warm, monkeypatch):
    monkeypatch.setattr(statusbar, "BAR_IDLE_POLL", 0.2)
    monkeypatch.setattr(statusbar, "BAR_ACTIVE_POLL", 0.2)
    bar = nbsubagents.status_bar()
    assert bar.text == "runs: 0 running / 0 total"
    nbsubagents.run("scout", "read README.md", name="fg", show=False)  # a foreground run: no watcher
    wait_for(lambda: bar.text == "runs: 0 running / 1 total", timeout=30, what="the poll")


def test_status_bar_is_a_record_kept_current_never_a_widget_view(explore, monkeypatch):
    """A bar has nothing to click: in a notebook it is an output its display id keeps current (what the saved
    notebook holds is its last reading), never a widget view a reopened notebook could not draw."""
    bar = nbsubagents.status_bar()
    for mode in ("text", "widgets"):
        monkeypatch.setenv("NBSUBAGENTS_DISPLAY", mode)
        bundle = bar._repr_mimebundle_()
        assert set(bundle) == {"text/plain", "text/html"} and bar._widget is None
        assert bundle["text/plain"] == "runs: 0 running / 0 total"
        assert bar_line(bundle["text/html"]) == "runs: 0 running / 0 total"
    sent = []
    bar._record._publish = lambda bundle, display_id, update: sent.append((bundle, display_id, update))
    bar._record.show()
    nbsubagents.run("scout", "read README.md", name="fg", show=False)
    bar.refresh()
    assert [update for _, _, update in sent][:2] == [False, True]
    assert {display_id for _, display_id, _ in sent} == {bar._record.display_id}
    assert sent[-1][0]["text/plain"] == "runs: 0 running / 1 total"
    assert all(VIEW_MIME not in bundle for bundle, _, _ in sent)


# -- the browser ------------------------------------------------------------------------------------------
def test_browse_lists_runs_and_its_filters_change_the_list(explore):
    synthetic(explore)
    browser = nbsubagents.browse(live=False)
    assert isinstance(browser, nbsubagents.Browser)
    assert len(browser.run_ids) == 40 and browser.run_ids[0] == "20260101-000000-000000"  # newest first
    first = browser.labels[0]
    assert first.startswith("✓ completed") and "job0" in first and "5.0s" in first and first.endswith("000000")
    assert browser.table.options[0] == (first, "20260101-000000-000000")
    assert browser.preset_filter.label == "any preset" and browser.since_filter.label == "any time"
    assert [v for _, v in browser.preset_filter.options] == ["", "scout", "scribe"]
    assert [v for _, v in browser.model_filter.options] == ["", "demo/other", "demo/scripted"]
    assert [v for _, v in browser.since_filter.options] == ["", "1h", "24h", "7d"]
    assert 'class="nbsubagents-c-failed nbsubagents-status-failed nbsubagents-bold"' in browser.table_html.value
    assert "40 runs" in plain(browser.count_html.value)
    for name in ("browse", "browse-list", "browse-status", "browse-preset", "browse-model", "browse-since",
                 "browse-text", "browse-table", "browse-header", "browse-transcript", "browse-tabs"):
        assert any(f"nbsubagents-{name}" in w._dom_classes for w in browser._all), name

    browser.set_filters(status="failed")
    assert len(browser.run_ids) == 10 and all(" failed " in label for label in browser.labels)
    browser.set_filters(status=["completed", "aborted"], preset="scout")
    assert len(browser.run_ids) == 10 and all("completed" in label for label in browser.labels)
    assert browser.filters == {"status": ["completed", "aborted"], "preset": "scout", "model": None, "since": None,
                               "text": None}
    browser.set_filters(status=None, preset=None, model="demo/other")
    assert len(browser.run_ids) == 14 and browser.preset_filter.label == "any preset"
    browser.set_filters(model=None, text="needle")
    assert [label.split()[2] for label in browser.labels] == ["job7"]
    browser.set_filters(text=None, since="1h")
    assert [label.split()[2] for label in browser.labels] == ["job0"]
    browser.set_filters(since="24h")
    assert len(browser.run_ids) == 24
    browser.set_filters(since="2h")  # an age not in the menu becomes an entry of it
    assert len(browser.run_ids) == 2 and ("since 2h", "2h") in browser.since_filter.options

    # A person using the controls: the observers refresh the list.
    browser.since_filter.value = ""  # "any time"
    browser.status_filter.value = ("aborted",)
    assert len(browser.run_ids) == 10 and all("aborted" in label for label in browser.labels)
    browser.text_filter.value = "number 12 "
    assert [label.split()[2] for label in browser.labels] == []  # job12 is completed, not aborted
    browser.status_filter.value = ()
    assert [label.split()[2] for label in browser.labels] == ["job12"]

    with pytest.raises(nbsubagents.NbSubagentsError, match="Unknown status 'done'"):
        browser.set_filters(status="done")
    with pytest.raises(nbsubagents.NbSubagentsError, match="Unknown filter 'colour'"):
        browser.set_filters(colour="red")
    with pytest.raises(nbsubagents.NbSubagentsError, match="since='whenever' is not understood"):
        browser.set_filters(since="whenever")
    assert "job12" in repr(browser) and repr(browser).startswith("browse(): 1 run")
    with pytest.raises(nbsubagents.NbSubagentsError, match="Unknown status 'done'"):
        nbsubagents.browse(status="done", live=False)
    assert set(explorer._browsers) == {browser}


def test_selecting_a_synthetic_row_shows_its_header_and_error(explore):
    synthetic(explore, 4)
    browser = nbsubagents.browse(live=False)
    assert browser.details.layout.display == "none"
    browser.select("20260101-000000-000001")  # job1: failed with "boom"
    assert browser.selected == "20260101-000000-000001" and browser.table.value == browser.selected
    assert browser.details.layout.display is None
    header = plain(browser.header_html.value)
    assert header.startswith("✗ job1 failed") and "preset scout" in header and "demo/scripted" in header
    assert "1 tool call" in header and "100 tokens" in header and "$0.0010" in header and "5.0s" in header
    assert "boom" in browser.output_html.value and "output 1" in browser.output_html.value
    assert "(no transcript yet)" in browser.transcript_html.value
    assert "(no events yet)" in browser.events_html.value
    with pytest.raises(nbsubagents.NbSubagentsError, match='No run "nope"'):
        browser.select("nope")


def test_browse_over_real_runs_shows_output_transcript_events_and_files(explore):
    writer, reader = nbsubagents.run_parallel([
        {"preset": "scribe", "task": "write notes.md: hello\nedit notes.md: hello -> bye", "name": "writer"},
        {"preset": "scout", "task": "read README.md", "name": "reader"},
    ], show=False)
    browser = nbsubagents.browse(live=False)
    assert set(browser.run_ids) == {writer.id, reader.id}

    browser.select(reader.id)
    header = plain(browser.header_html.value)
    tokens = reader.result["usage"]["totalTokens"]
    assert header.startswith("✓ reader completed") and "preset scout" in header and "1 tool call" in header
    assert f"{tokens:,} tokens" in header and reader.id in header and "read README.md" in header
    assert "# Demo project" in browser.output_html.value
    transcript = plain(browser.transcript_html.value)
    assert "Reading README.md" in transcript and transcript.strip() == reader.transcript.strip()
    assert "Finished reading README.md" in browser.events_html.value and "tool_call" in browser.events_html.value
    assert "result.json" in browser.artifacts_html.value and "transcript.log" in browser.artifacts_html.value
    titles = browser.tabs.titles
    assert titles[:2] == ("Output", "Transcript") and titles[2] == f"Events ({len(reader.events())})"

    browser.table.value = writer.id  # a click in the list
    assert plain(browser.header_html.value).startswith("✓ writer completed")
    assert "<code>notes.md</code>" in browser.artifacts_html.value  # files changed
    assert "Writing notes.md (+1 line)" in plain(browser.transcript_html.value)


def test_browse_refreshes_while_a_run_is_active(warm):
    browser = explorer.Browser(interval=0.2, idle_interval=0.5)
    assert browser.run_ids == [] and "0 runs" in plain(browser.count_html.value)
    run = nbsubagents.start("scout", "sleep: 3\nread README.md", name="live", show=False)
    wait_for(lambda: run.id in browser.run_ids, timeout=30, what="the new run in the list")
    label = browser.labels[0]
    assert "running…" in label or "queued" in label
    browser.select(run.id)
    assert "(running: the output comes when it ends)" in browser.output_html.value
    wait_for(lambda: browser.labels[0].startswith("✓ completed"), what="the end in the list")
    # The refresh thread redraws the list, then the selected run: wait for the details to catch up.
    wait_for(lambda: "# Demo project" in browser.output_html.value, what="the final output")
    wait_for(lambda: "Reading README.md" in browser.transcript_html.value, what="the transcript")
    assert plain(browser.header_html.value).startswith("✓ live completed")
    browser.close()
    assert browser._clock.cancelled and browser not in explorer._browsers


def test_browse_is_a_widget_in_a_notebook_and_text_elsewhere(explore, monkeypatch):
    synthetic(explore, 3)
    browser = nbsubagents.browse(live=False)
    monkeypatch.setenv("NBSUBAGENTS_DISPLAY", "text")
    bundle = browser._repr_mimebundle_()
    assert VIEW_MIME not in bundle and bundle["text/plain"].startswith("browse(): 3 runs")
    assert "job2" in bundle["text/plain"] and "job2" in bundle["text/html"]
    listing = bundle["text/html"].replace(stylesheet("browse"), "")
    assert "<style" not in listing and "color:" not in listing  # the page's ink: any page
    monkeypatch.setenv("NBSUBAGENTS_DISPLAY", "widgets")
    assert browser._repr_mimebundle_()[VIEW_MIME]["model_id"] == browser.widget.model_id
    # shown in a notebook, closing it leaves its record alone (the list as it was), never a widget view
    sent = []
    browser._record._publish = lambda bundle, display_id, update: sent.append((bundle, update))
    browser._ipython_display_()
    browser.close()
    (shown, first), (closed, update) = sent
    assert VIEW_MIME in shown and not first
    assert update and VIEW_MIME not in closed and "job2" in closed["text/html"]


# -- one clock -------------------------------------------------------------------------------------------
def nbsubagents_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("nbsubagents")]


def test_one_clock_drives_a_panel_a_bar_and_a_browser_and_stops_when_nothing_is_left(warm):
    """A panel, a status bar and a browser live while two background runs go: the process runs one thread of
    nbsubagents (the watcher's clock), every one of them still changes as the runs end, and the thread ends
    once nothing is watched or subscribed; the next bar starts it again."""
    from nbsubagents._ui.panels import WidgetRenderer

    watcher.stop()
    assert not nbsubagents_threads()
    bar = nbsubagents.status_bar()
    bar.widget
    browser = explorer.Browser(interval=0.2, idle_interval=0.5)
    slow = nbsubagents.start("scout", "sleep: 3\nread README.md", name="slow", show=False)
    quick = nbsubagents.start("scout", "sleep: 1\nsay: quick done", name="quick", show=False)
    renderer = WidgetRenderer(display=lambda widget: None)
    renderer.start([slow])
    watcher.watch(slow, renderer=renderer)  # its panel is fed and ended by the clock
    panel = renderer.view

    counts, headers, bars, lists = set(), set(), set(), set()
    deadline = time.monotonic() + 90
    while not (slow.done and quick.done and not panel.active) and time.monotonic() < deadline:
        counts.add(tuple(t.name for t in nbsubagents_threads()))
        headers.add(plain(panel.header.value))
        bars.add(bar.text)
        lists.add(tuple(browser.labels))
        time.sleep(0.05)
    assert slow.status == quick.status == "completed"
    assert counts == {("nbsubagents-watcher",)}, counts  # never a second thread, and the clock was there
    # the panel: elapsed time moving while it waited (no event for seconds), then its end
    running = [h for h in headers if " running " in f" {h} "]
    assert len(running) >= 2, headers
    wait_for(lambda: "# Demo project" in panel.final_html.value, what="the panel's final output")
    assert plain(panel.header.value).startswith("✓ slow completed")
    # the bar: both running, then each end with its notice
    assert "runs: 2 running / 2 total" in bars
    wait_for(lambda: bar.text.startswith("runs: 0 running / 2 total · ✓"), what="the bar's end")
    # the browser: its list showed the runs going and then ended
    assert any(any("running…" in label for label in labels) for labels in lists), lists
    wait_for(lambda: [label[:11] for label in browser.labels] == ["✓ completed"] * 2, what="the browser's end")

    # the ended panel lets go of the clock at its clock's next tick after its end
    wait_for(lambda: "panel clock" not in [s.name for s in watcher.subscriptions()], what="the panel's clock to end")
    assert watcher.subscriptions()
    assert watcher.thread() is not None  # the bar and the browser still poll (runs of other kernels)
    bar.close()
    browser.close()
    wait_for(lambda: not nbsubagents_threads(), timeout=10, what="the clock to stop once idle")
    assert watcher.thread() is None and not watcher.subscriptions()
    again = nbsubagents.status_bar()  # on demand: the clock comes back
    assert [t.name for t in nbsubagents_threads()] == ["nbsubagents-watcher"]
    again.close()
    wait_for(lambda: not nbsubagents_threads(), timeout=10, what="the clock to stop again")


# -- the timeline -----------------------------------------------------------------------------------------
def bars_of(fig) -> dict:
    return {p.get_gid(): p for p in fig.axes[0].patches if p.get_gid()}


def test_timeline_has_one_bar_per_run_coloured_by_status(explore):
    from matplotlib.colors import to_hex
    from matplotlib.figure import Figure

    synthetic(explore, 8)
    frame = nbsubagents.runs()
    fig = nbsubagents.runs_timeline(theme="light")
    assert isinstance(fig, Figure)
    bars = bars_of(fig)
    assert set(bars) == set(frame["run_id"])
    for run_id, status in zip(frame["run_id"], frame["status"]):
        assert to_hex(bars[run_id].get_facecolor()) == status_color(status)
        assert bars[run_id].get_width() * 86400 == pytest.approx(5.0, abs=0.01)  # 5 s, in days
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert labels == [f"job{i}" for i in range(7, -1, -1)]  # earliest first
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert legend == ["completed", "failed", "aborted"]
    png = io.BytesIO()
    fig.savefig(png, format="png")
    assert png.getvalue().startswith(b"\x89PNG")

    failed = bars_of(nbsubagents.runs_timeline(status="failed"))
    assert set(failed) == set(frame.loc[frame["status"] == "failed", "run_id"])


def test_timeline_shows_parallel_runs_overlapping_and_a_running_run_up_to_now(warm):
    from matplotlib.dates import date2num

    first, second = nbsubagents.run_parallel([
        {"preset": "scout", "task": "sleep: 2\nread README.md", "name": "left"},
        {"preset": "scout", "task": "sleep: 2\nls src", "name": "right"},
    ], concurrency=2, show=False)
    later = nbsubagents.start("scout", "sleep: 4\nread README.md", name="later", show=False)
    fig = nbsubagents.runs_timeline()
    now = date2num(datetime.now(timezone.utc))
    bars = bars_of(fig)
    assert set(bars) == {first.id, second.id, later.id}
    a, b = sorted((bars[first.id], bars[second.id]), key=lambda p: p.get_x())
    assert a.get_x() <= b.get_x() < a.get_x() + a.get_width()  # they ran at the same time
    assert a.get_width() * 86400 > 2 and b.get_width() * 86400 > 2
    running = bars[later.id]
    assert running.get_x() >= a.get_x() + a.get_width() - 1 / 86400  # started after the pair ended
    assert abs(running.get_x() + running.get_width() - now) * 86400 < 5  # up to now
    assert running.get_hatch() == "//"
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert labels[-1] == "later" and set(labels[:2]) == {"left", "right"}
    later.wait(90)
    assert later.status == "completed"


def test_timeline_of_no_runs_says_so(explore):
    fig = nbsubagents.runs_timeline()
    assert bars_of(fig) == {}
    assert [t.get_text() for t in fig.axes[0].texts] == ["no runs"]


def test_timeline_without_matplotlib_says_how_to_install_it(explore, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(ImportError, match=r"pip install 'nbsubagents\[timeline\]' \(or pip install matplotlib\)"):
        nbsubagents.runs_timeline()


@pytest.mark.notebook
def test_in_a_notebook_the_bar_browser_and_timeline_each_show_once(explore, monkeypatch):
    """A real kernel (nbclient): the bar is a record, the browser a widget until it closes, then its record; the
    timeline is one picture (the cell's value, not a second copy from pyplot)."""
    import nbformat
    from nbclient import NotebookClient

    monkeypatch.delenv("NBSUBAGENTS_DISPLAY", raising=False)
    synthetic(explore, 4)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src) for src in (
        "import nbsubagents\nnbsubagents.status_bar()",
        "browser = nbsubagents.browse(live=False)\nbrowser.select('20260101-000000-000002')\nbrowser",
        "nbsubagents.runs_timeline()",
        "browser.close()",
    )]
    NotebookClient(nb, kernel_name="python3", timeout=180, store_widget_state=True,
                   resources={"metadata": {"path": str(explore)}}).execute()
    sheet, bar = nb.cells[0].outputs  # the bar's rules go once, before the record its updates replace
    assert sheet["data"]["text/html"].startswith("<style>") and sheet["data"]["text/html"].endswith("</style>")
    assert "<style" not in bar["data"]["text/html"] and VIEW_MIME not in bar["data"]  # a record, not a widget
    assert bar["data"]["text/plain"] == "runs: 0 running / 4 total · 1 failed · 1 aborted"
    (browser,) = nb.cells[1].outputs
    # browser.close() turned the explorer into its static record: the saved notebook holds no widget view
    assert VIEW_MIME not in browser["data"] and browser["data"]["text/plain"].startswith("browse(): 4 runs")
    assert 'class="nbsubagents-browse-static"' in browser["data"]["text/html"] and "job2" in browser["data"]["text/html"]
    images = [o for o in nb.cells[2].outputs if "image/png" in o.get("data", {})]
    assert len(images) == 1 and images[0]["output_type"] == "execute_result"


def test_without_ipywidgets_the_bar_is_text_and_browse_says_how_to_install_it(explore, monkeypatch):
    monkeypatch.setitem(sys.modules, "ipywidgets", None)
    monkeypatch.setenv("NBSUBAGENTS_DISPLAY", "widgets")
    bar = nbsubagents.status_bar()
    bundle = bar._repr_mimebundle_()
    assert VIEW_MIME not in bundle and bundle["text/plain"] == "runs: 0 running / 0 total"
    with pytest.raises(ImportError, match=r"pip install 'ipywidgets>=8'"):
        bar.widget
    with pytest.raises(ImportError, match=r"pip install 'ipywidgets>=8'"):
        nbsubagents.browse()


def test_status_bar_says_it_counts_every_run_foreground_ones_too(warm):
    """Issue 13, item 8: 'bg: 0 running / 1 total' counted a foreground run as a background one."""
    nbsubagents.run("scout", "say: in the foreground", show=False)
    bar = nbsubagents.status_bar()
    assert bar.text == "runs: 0 running / 1 total"


def test_browse_details_follow_the_filter_and_say_how_to_pick(explore):
    synthetic(explore, 8)
    browser = nbsubagents.browse(live=False)
    assert browser.details.layout.display == "none" and browser.select_hint.layout.display is None
    assert "Select a run in the list" in plain(browser.select_hint.value)
    assert "Ctrl-click" in plain(browser.status_hint.value)  # the multi-select says how it works
    browser.table.value = "20260101-000000-000005"  # a click in the list: job5
    assert browser.selected == "20260101-000000-000005" and browser.select_hint.layout.display == "none"

    browser.set_filters(text="task number 3 ")  # job5 is no longer listed: its details go with it
    assert browser.run_ids == ["20260101-000000-000003"]
    assert browser.selected is None and browser.details.layout.display == "none"
    assert browser.select_hint.layout.display is None
    browser.select("20260101-000000-000006")  # asked for by id: shown although the filter does not list it
    browser.refresh()
    assert browser.selected == "20260101-000000-000006" and browser.details.layout.display is None


def test_browse_list_has_a_header_and_each_run_its_status_colour(explore):
    synthetic(explore, 4)
    browser = nbsubagents.browse(live=False)
    header = plain(browser.list_header.value)
    assert header.split() == ["status", "name", "started", "took", "task", "run", "id"]
    # the header's columns line up with the labels' (both monospace): "name" starts where the names do
    assert header.index("name") == browser.labels[0].index("job0")
    css = browser.list_style.value
    statuses = list(browser.frame["status"].astype(str))
    for i, status in enumerate(statuses, start=1):
        assert status in style.PALETTE  # its variable, which switches with the page's theme
        assert f".nbsubagents-browse-list option:nth-child({i}){{color:var(--nbsubagents-{status})}}" in css


def test_browse_artifacts_tab_names_each_file_once_with_its_size(explore):
    run = nbsubagents.run("scout", "read README.md", name="reader", show=False)
    browser = nbsubagents.browse(live=False).select(run.id)
    value = browser.artifacts_html.value
    assert value.count(str(run.dir)) == 1 + len(run.artifacts)  # the folder once, each path only as a tooltip
    assert "<code>result.json</code>" in value and re.search(r"<td[^>]*>\d+(\.\d)? (B|KB)</td>", value)
    shown = plain(re.sub(r'title="[^"]*"', "", value))
    assert shown.count(str(run.dir)) == 1
