"""Live panels without a browser: widget values after real runs and recorded events.

Widgets work without a frontend (they just have no comm), so every value a page would show can be
read here. Real runs are the real pi against the scripted model (``project`` fixture).
"""

from __future__ import annotations

import html as html_lib
import json
import os
import re
import subprocess
import sys
import threading
import time
import types
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

import nbsubagents
from nbsubagents import _config as config
from nbsubagents._lifecycle import drive as driving
from nbsubagents._lifecycle import prepare as preparing
from nbsubagents import _style as style
from nbsubagents._templates import stylesheet
from nbsubagents._ui.display import VIEW_MIME, choose_renderer, run_mimebundle
from nbsubagents._child import keys
from nbsubagents._child.events import iter_stream
from nbsubagents._child.formatter import ProgressFormatter, ProgressLine
from nbsubagents._ui.renderers import TextRenderer
from nbsubagents._lifecycle.handle import Run
from nbsubagents._lifecycle.spec import TaskSpec
from nbsubagents._ui.panels import HISTORY_LIMIT, GroupPanel, RunPanel, WidgetRenderer, live_panel

from helpers import wait_for

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "pi-0.73.1"
LINE = re.compile(r'<div class="nbsubagents-line nbsubagents-(\w+)">(.*?)</div>')


def page_text(value: str) -> str:
    """What a page shows of an HTML value: no stylesheet, no tags, the hidden kernel-gone note left out."""
    value = re.sub(r"<style>.*?</style>", "", value, flags=re.S)
    value = re.sub(r'<span class="nbsubagents-gone".*?</span>', "", value, flags=re.S)
    return html_lib.unescape(re.sub(r"<[^>]+>", "", value))


def lines_of(value: str) -> list[tuple[str, str]]:
    """(kind, text) of every formatter line in a window or history value (placeholders left out)."""
    return [(kind, text) for kind, text in LINE.findall(value) if kind != "placeholder"]


def fake_run(tmp_path: Path, name: str, status: str | None = None, **extra) -> Run:
    """A run directory without a child: queued, running (a supervisor.json) or terminal (a result.json)."""
    run_dir = tmp_path / "runs" / name
    run_dir.mkdir(parents=True)
    meta = {"runId": name, "name": name, "preset": "scout", "resolvedModel": "demo/scripted",
            "timeout": 600.0, "cwd": str(tmp_path), "task": "x", **extra}
    (run_dir / "meta.json").write_text(json.dumps(meta))
    if status == "running":
        (run_dir / "supervisor.json").write_text("{}")
        keys.create(name)  # as prepare makes it: the panel signs what it posts
    elif status is not None:
        finish(run_dir, status)
    return Run(run_dir)


def finish(run_dir: Path, status: str, *, duration: float = 1.0, text: str = "", error: str | None = None) -> None:
    (run_dir / "result.json").write_text(json.dumps({
        "status": status, "finalText": text, "errorMessage": error, "durationSeconds": duration, "toolCalls": 0,
        "usage": {"totalTokens": 0, "cost": 0}}))


def drive_one(task: str, **kwargs) -> tuple[Run, WidgetRenderer, list]:
    shown: list = []
    renderer = WidgetRenderer(display=shown.append, **kwargs)
    (run,) = driving.drive([preparing.prepare(TaskSpec(preset="scout", task=task), mode="single")],
                          concurrency=1, renderer=renderer)
    return run, renderer, shown


# -- one real run ---------------------------------------------------------------------------------------
def test_panel_of_a_finished_run_shows_icon_counts_tokens_cost_and_final_text(project):
    run, renderer, shown = drive_one("read README.md\nls src\nrun: echo hello")
    panel = renderer.view
    assert isinstance(panel, RunPanel) and shown == [panel.widget]
    assert run.status == "completed"

    header = panel.header.value
    usage = run.result["usage"]
    assert f'<span class="nbsubagents-c-completed nbsubagents-icon" style="color:{style.color("completed")}">✓</span>' \
        in header
    assert '<b class="nbsubagents-name" title="scout">scout</b>' in header and "completed" in header
    assert "demo/scripted" in header and "3 tool calls" in header
    assert f"{usage['totalTokens']:,} tokens" in header and f"${usage['cost']:.4f}" in header
    assert panel.tally.tool_calls == run.result["toolCalls"] == 3
    assert panel.tally.tokens == usage["totalTokens"] > 0
    assert "timeout" not in header  # said while the run goes, not once it ended
    assert "failed step" not in header

    texts = [text for _, text in lines_of(panel.window_html.value)]
    assert texts[:3] == ["Reading README.md", "Finished reading README.md", "Listing src"]
    assert "echo hello" in texts and "Command finished — hello" in texts
    assert "# Demo project" in panel.final_html.value and run.id in panel.final_html.value
    # The final message is in the output box; the window ends with what led to it, not a second copy.
    assert "Done. 3 steps:" in panel.final_html.value
    assert texts[-2:] == ["Command finished — hello", "Completed"]
    assert panel.history_box.layout.display == "none"  # the window shows every line: no history to offer
    assert panel.cancel_button.disabled

    assert panel.elapsed() == pytest.approx(run.result["durationSeconds"])  # frozen at the end
    time.sleep(1.3)
    assert panel.header.value == header


def test_provider_failure_is_red_with_pi_message(project):
    run, renderer, _ = drive_one("fail: 500 upstream exploded")
    panel = renderer.view
    assert run.status == "failed"
    assert "✗" in panel.header.value and "nbsubagents-status-failed" in panel.header.value
    failed = style.color("failed")
    assert f'nbsubagents-icon" style="color:{failed}">✗' in panel.header.value  # the icon and the word are red
    assert f'nbsubagents-status nbsubagents-bold" style="color:{failed}">failed' in panel.header.value
    red = [text for kind, text in lines_of(panel.window_html.value) if kind in ("error", "failed")]
    # said once, in pi's words ("500 upstream exploded"; pi 1.x: '500: {"message":"upstream exploded"}'), then how
    # the run ended
    assert len(red) == 2 and red[0].startswith("Error: 500") and "upstream exploded" in red[0] and red[1] == "Failed"
    css = stylesheet()  # the panel's, sent once
    assert stylesheet() in [child.value for child in panel.widget.children if hasattr(child, "value")]
    assert ".nbsubagents-failed,.nbsubagents-lines .nbsubagents-error{color:var(--nbsubagents-failed)}" in css
    assert f":root{{--nbsubagents-queued:{style.color('queued')};" in css and f"--nbsubagents-failed:{failed};" in css
    dark = css.split(f"{style.DARK_SCOPE}{{", 1)[1].split("}", 1)[0]  # the variables of a dark JupyterLab theme
    assert f'--nbsubagents-failed:{style.color("failed", dark=True)};' in dark


def test_cancel_button_aborts_its_run_alone(project):
    shown: list = []
    renderer = WidgetRenderer(display=shown.append)
    runs = preparing.build_runs([{"preset": "scout", "task": "run: sleep 30", "name": "slow"},
                              {"preset": "scout", "task": "sleep: 2\nrun: echo fine", "name": "quick"}],
                             mode="parallel")
    clicked = threading.Event()

    def click_when_sleeping() -> None:  # a person clicks while the main thread drives the runs
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if renderer.view is not None:
                slow = renderer.view.panels[0]
                if any(text == "sleep 30" for _, text in lines_of(slow.window_html.value)):
                    slow.cancel_button.click()
                    clicked.set()
                    return
            time.sleep(0.05)

    clicker = threading.Thread(target=click_when_sleeping)
    clicker.start()
    t0 = time.monotonic()
    driving.drive(runs, concurrency=2, renderer=renderer)
    clicker.join()
    assert clicked.is_set() and time.monotonic() - t0 < 25
    slow, quick = runs
    assert slow.status == "aborted" and quick.status == "completed"
    group = renderer.view
    assert isinstance(group, GroupPanel)
    assert "■" in group.panels[0].header.value and "aborted" in group.panels[0].header.value
    assert "✓" in group.panels[1].header.value
    assert page_text(group.header.value) == "Sub-agents: 1 done, 1 aborted"
    assert f'nbsubagents-group-aborted" style="background:{style.color("aborted")};color:#fff' in group.header.value
    assert slow.id in group.ids_html.value and quick.id in group.ids_html.value


def test_cancelling_a_queued_run_means_it_never_starts(project):
    renderer = WidgetRenderer(display=lambda widget: None)
    runs = preparing.build_runs([{"preset": "scout", "task": "sleep: 2\nrun: echo first", "name": "first"},
                              {"preset": "scout", "task": "run: echo second", "name": "second"}], mode="parallel")

    def click_while_queued() -> None:
        deadline = time.monotonic() + 30
        while renderer.view is None and time.monotonic() < deadline:
            time.sleep(0.02)
        renderer.view.panels[1].cancel_button.click()

    clicker = threading.Thread(target=click_while_queued)
    clicker.start()
    driving.drive(runs, concurrency=1, renderer=renderer)
    clicker.join()
    assert [r.status for r in runs] == ["completed", "aborted"]
    assert not (runs[1].dir / "supervisor.log").exists()  # never launched
    assert renderer.view.header_text() == "Sub-agents: 1 done, 1 aborted"


# -- panels fed with events -------------------------------------------------------------------------------
def test_rolling_window_keeps_the_latest_lines_and_history_is_bounded(tmp_path):
    run = fake_run(tmp_path, "r1", "running")
    panel = RunPanel(run, lines=5)
    formatter = ProgressFormatter(str(tmp_path))
    for i in range(600):
        event = {"type": "tool_call", "id": f"c{i}", "name": "read", "args": {"path": f"f{i}.txt"}, "ts": time.time()}
        panel.add(event, formatter.format(event))
    panel.render()
    assert lines_of(panel.window_html.value) == [("tool", f"Reading f{i}.txt") for i in range(595, 600)]
    assert panel.line_count == 600 and len(panel.history) == HISTORY_LIMIT == 500
    assert panel.history_box.titles == ("595 earlier lines (latest 500 kept)",)  # what the window does not show
    assert panel.history_box.layout.display is None
    assert panel.history_html.value == ""  # built only when expanded
    panel.history_box.selected_index = 0
    history = lines_of(panel.history_html.value)
    # the lines above the window, once (the window has the latest five)
    assert history[0] == ("tool", "Reading f100.txt") and history[-1] == ("tool", "Reading f594.txt")
    assert len(history) == 495 and "(100 earlier lines not kept here: see" in panel.history_html.value


def test_window_size_follows_the_panel_lines_setting(tmp_path):
    try:
        nbsubagents.configure(panel_lines=3)
        panel = RunPanel(fake_run(tmp_path, "r1", "running"))
        for i in range(10):
            panel.add({"type": "assistant_text", "text": f"step {i}"}, ProgressLine("assistant", f"step {i}"))
        panel.render()
        assert [text for _, text in lines_of(panel.window_html.value)] == ["step 7", "step 8", "step 9"]
        with pytest.raises(nbsubagents.NbSubagentsError, match="panel_lines must be a whole number"):
            RunPanel(fake_run(tmp_path, "r2"), lines=0)
    finally:
        config.reset()


def test_recorded_stream_styles_failures_red_and_assistant_text_apart(tmp_path):
    panel = RunPanel(fake_run(tmp_path, "r1", "running"), lines=100)
    for name in ("run_write_edit.jsonl", "run_thinking.jsonl", "run_err500_noretry.jsonl"):
        formatter = ProgressFormatter("/home/user/project")
        with open(FIXTURES / name, "rb") as fh:
            for event in iter_stream(iter(fh)):
                panel.add(event, formatter.format(event))
    panel.render()
    kinds = {kind for kind, _ in lines_of(panel.window_html.value)}
    assert {"tool", "done", "assistant", "thinking", "error"} <= kinds
    assert ".nbsubagents-lines .nbsubagents-assistant{color:var(--nbsubagents-running)" in stylesheet()
    assert "<script" not in panel.window_html.value


def test_text_is_escaped_and_multiline_assistant_text_becomes_lines(tmp_path):
    panel = RunPanel(fake_run(tmp_path, "r1", "running"))
    panel.add({"type": "assistant_text"}, ProgressLine("assistant", "<b>bold</b> & co\n\n\x1b[31mred\x1b[0m"))
    panel.render()
    assert lines_of(panel.window_html.value) == [("assistant", "&lt;b&gt;bold&lt;/b&gt; &amp; co"),
                                                 ("assistant", "red")]


@pytest.mark.parametrize("output, window", [
    ("Found it.\nThe bug is in auth.ts", ["Let me look", "Reading auth.ts", "Completed"]),
    ("Something else entirely", ["Let me look", "Reading auth.ts", "Found it.", "The bug is in auth.ts",
                                 "Completed"]),
])
def test_the_final_window_leaves_out_only_what_the_output_box_shows(tmp_path, output, window):
    run = fake_run(tmp_path, "r1", "running")
    panel = RunPanel(run)
    for kind, text in (("assistant", "Let me look"), ("tool", "Reading auth.ts"),
                       ("assistant", "Found it.\nThe bug is in auth.ts"), ("done", "Completed")):
        panel.add({"type": "x"}, ProgressLine(kind, text))
    panel.render()
    assert len(lines_of(panel.window_html.value)) == 5  # while it runs, the window shows everything
    finish(run.dir, "completed", text=output)
    panel.finish()
    assert [text for _, text in lines_of(panel.window_html.value)] == window
    assert output.partition("\n")[0] in panel.final_html.value
    assert panel.line_count == 5


def test_the_end_is_drawn_once_every_event_is_in_not_when_result_json_appears(tmp_path):
    run = fake_run(tmp_path, "r1", "running")
    panel = RunPanel(run)
    panel.add({"type": "tool_call"}, ProgressLine("tool", "Reading a.py"))
    finish(run.dir, "completed", text="All done")  # the result is written; its last events are not read yet
    panel.render()
    assert panel.final_html.value == "" and panel.active
    panel.add({"type": "assistant_text"}, ProgressLine("assistant", "All done"))
    panel.add({"type": "run_end", "status": "completed"}, ProgressLine("done", "Completed"))
    panel.render()
    assert "All done" in panel.final_html.value and not panel.active
    assert [text for _, text in lines_of(panel.window_html.value)] == ["Reading a.py", "Completed"]


def test_header_counts_come_from_every_event_even_without_a_line(tmp_path):
    panel = RunPanel(fake_run(tmp_path, "r1", "running"))
    for _ in range(2):
        panel.add({"type": "usage", "input": 1000, "output": 234, "cacheRead": 0, "cacheWrite": 0, "cost": 0.0125},
                  None)
    panel.add({"type": "tool_call", "id": "a", "name": "ls", "args": {}}, ProgressLine("tool", "Listing files"))
    panel.render()
    assert page_text(panel.header.value) == "↻ r1 running · demo/scripted · 1 tool call · 2,468 tokens · $0.0250 · " \
        + page_text(panel.header.value).split(" · ")[-2] + " · timeout 10m"
    for field in ("calls", "tokens", "cost", "elapsed"):  # as wide as their words: no gap after a short figure
        assert f'<span class="nbsubagents-{field}">· ' in panel.header.value, field  # hidden with its dot


def test_elapsed_time_ticks_without_events_and_freezes_at_the_end(tmp_path):
    run = fake_run(tmp_path, "r1", "running")
    renderer = WidgetRenderer(display=lambda widget: None)
    renderer.start([run])
    renderer.event(run, {"type": "run_start", "ts": time.time() - 3}, None)
    panel = renderer.view
    first = panel.elapsed()
    assert 2.9 < first < 10
    before = panel.header.value
    time.sleep(2.5)  # no event: the ticker moves the clock
    assert panel.header.value != before and panel.elapsed() > first + 2
    finish(run.dir, "completed", duration=7.25, text="all done")
    renderer.end(run)
    renderer.close()
    assert "7.2s" in panel.header.value and "✓" in panel.header.value
    frozen = panel.header.value
    time.sleep(1.3)
    assert panel.header.value == frozen and panel.elapsed() == 7.25
    assert "all done" in panel.final_html.value


@pytest.mark.serial
def test_many_events_render_at_most_ten_times_a_second_and_the_final_state_always(tmp_path):
    run = fake_run(tmp_path, "r1", "running")
    renderer = WidgetRenderer(display=lambda widget: None, ticker=False)
    renderer.start([run])
    panel = renderer.view
    start_renders = panel.renders
    t0 = time.monotonic()
    events = 0
    while time.monotonic() - t0 < 0.8:  # as fast as events can come
        renderer.event(run, {"type": "assistant_text"}, ProgressLine("assistant", f"line {events}"))
        events += 1
    spent = time.monotonic() - t0
    renders = panel.renders - start_renders
    assert events > 20 * renders and 3 <= renders <= spent / 0.1 + 2
    finish(run.dir, "completed", text="final words")
    renderer.end(run)
    renderer.close()
    assert lines_of(panel.window_html.value)[-1] == ("assistant", f"line {events - 1}")
    assert "✓" in panel.header.value and "final words" in panel.final_html.value


def test_the_ticker_renders_what_a_burst_left_pending(tmp_path):
    run = fake_run(tmp_path, "r1", "running")
    renderer = WidgetRenderer(display=lambda widget: None)
    renderer.start([run])
    for i in range(200):
        renderer.event(run, {"type": "assistant_text"}, ProgressLine("assistant", f"line {i}"))
    time.sleep(0.6)
    assert lines_of(renderer.view.window_html.value)[-1] == ("assistant", "line 199")
    renderer.close()


def test_a_burst_of_events_is_one_render_on_the_next_tick_and_an_unchanged_panel_is_not_redrawn(tmp_path,
                                                                                                 monkeypatch):
    from nbsubagents._lifecycle import watcher
    from nbsubagents._ui import panels

    ticks = []  # the process's clock, ticked by hand here
    monkeypatch.setattr(watcher, "subscribe", lambda tick, interval, name="", first=0.0:
                        ticks.append(tick) or watcher.Subscription(tick, interval, name))
    runs = [fake_run(tmp_path, "a", "running"), fake_run(tmp_path, "b", "running")]
    renderer = WidgetRenderer(display=lambda widget: None, min_interval=0)
    renderer.start(runs)
    (tick,) = ticks
    group, (a, b) = renderer.view, renderer.view.panels
    before = (a.renders, b.renders, group.renders)
    for i in range(50):
        renderer.event(runs[0], {"type": "assistant_text", "seq": i}, ProgressLine("assistant", f"line {i}"))
    assert (a.renders, b.renders, group.renders) == before  # an event only changes the state
    assert tick() is True
    assert (a.renders, b.renders) == (before[0] + 1, before[1])  # the panel that changed, once for the burst
    assert lines_of(a.window_html.value)[-1] == ("assistant", "line 49")
    tick()
    assert a.renders == before[0] + 1  # nothing changed since: nothing drawn
    monkeypatch.setattr(panels, "CLOCK_INTERVAL", 0)  # the clock moves the elapsed times of running panels
    tick()
    if panels.PANELS_PER_TICK < 2:  # b, drawn longest ago, first; a at the next tick
        assert (a.renders, b.renders) == (before[0] + 1, before[1] + 1)
        tick()
    assert (a.renders, b.renders) == (before[0] + 2, before[1] + 1)
    renderer.close()
    assert tick() is False  # a closed renderer leaves the clock


def test_a_tick_draws_at_most_a_few_panels_those_waiting_longest_first(tmp_path, monkeypatch):
    from nbsubagents._lifecycle import watcher
    from nbsubagents._ui import panels

    ticks = []
    monkeypatch.setattr(watcher, "subscribe", lambda tick, interval, name="", first=0.0:
                        ticks.append(tick) or watcher.Subscription(tick, interval, name))
    runs = [fake_run(tmp_path, f"r{i}", "running") for i in range(panels.PANELS_PER_TICK + 2)]
    renderer = WidgetRenderer(display=lambda widget: None, min_interval=0)
    renderer.start(runs)
    (tick,) = ticks
    group = renderer.view
    for run in runs:
        renderer.event(run, {"type": "tool_call", "seq": 1}, ProgressLine("tool", f"Reading {run.name}.py"))
    before = [p.renders for p in group.panels]
    for ticked in range(1, len(runs) + 1):  # those drawn longest ago (the first built) first, the others at the next ticks
        tick()
        drawn = [i for i, p in enumerate(group.panels) if p.renders > before[i]]
        assert drawn == list(range(min(len(runs), ticked * panels.PANELS_PER_TICK)))
    assert all(("tool", f"Reading {run.name}.py") in lines_of(p.window_html.value) for run, p in zip(runs, group.panels))
    renderer.close()


def test_group_header_counts_each_status_and_lists_ids_only_when_all_are_done(tmp_path):
    runs = [fake_run(tmp_path, "a", "running"), fake_run(tmp_path, "b", "running"), fake_run(tmp_path, "c"),
            fake_run(tmp_path, "d", "completed"), fake_run(tmp_path, "e", "failed"),
            fake_run(tmp_path, "f", "aborted")]
    group = GroupPanel(runs)
    assert group.header_text() == "Sub-agents: 2 running, 1 queued, 1 done, 1 failed, 1 aborted"
    assert group.ids_html.value == ""
    for run in runs[:3]:
        finish(run.dir, "completed")
    group.render()  # it counts what its panels show: they did not draw the ends yet
    assert page_text(group.header.value) == "Sub-agents: 2 running, 1 queued, 1 done, 1 failed, 1 aborted"
    for panel in group.panels:  # as the renderer's tick does: the panels, then their group
        panel.render()
    group.render()
    assert page_text(group.header.value) == "Sub-agents: 4 done, 1 failed, 1 aborted"
    asking = [fake_run(tmp_path, "g", "running"), fake_run(tmp_path, "h", "running")]
    from nbsubagents._child import inbox

    inbox.set_waiting(asking[1].dir, [{"id": "q1", "method": "input", "title": "Which file?"}])
    assert GroupPanel(asking).header_text() == "Sub-agents: 1 running, 1 waiting for an answer"  # not 2 running
    for status in ("failed", "aborted"):  # white on the palette's colour: readable on any page
        assert f'nbsubagents-group-{status}" style="background:{style.color(status)};color:#fff' in group.header.value
    assert "nbsubagents-group-completed" not in group.header.value
    assert all(f"<code>{name}</code>" in group.ids_html.value for name in "abcdef")


def test_final_text_waits_for_the_result_written_after_the_run_end_event(tmp_path):
    run = fake_run(tmp_path, "r1", "running")
    panel = RunPanel(run)
    panel.add({"type": "run_end", "status": "completed", "ts": time.time()}, ProgressLine("done", "Completed"))
    panel.render()  # the supervisor has said run_end but not yet written result.json
    assert "✓" in panel.header.value and panel.active and "nbsubagents-output" not in panel.final_html.value
    finish(run.dir, "completed", text="the final words")
    panel.finish()
    assert "the final words" in panel.final_html.value and not panel.active


def test_a_run_seen_only_through_its_result_shows_its_error(tmp_path):
    run = fake_run(tmp_path, "r1")
    finish(run.dir, "failed", duration=0.0, error='Unknown preset: "ghost"')
    panel = RunPanel.from_run(run)
    assert "✗" in panel.header.value and "0.0s" in panel.header.value
    assert 'Unknown preset: "ghost"' in panel.final_html.value and "nbsubagents-error" in panel.final_html.value
    assert "(no output)" in panel.window_html.value


# -- choosing a renderer; how a Run shows --------------------------------------------------------------------
def test_choose_renderer_is_text_outside_a_kernel_and_follows_the_env_var(monkeypatch):
    monkeypatch.delenv("NBSUBAGENTS_DISPLAY", raising=False)
    assert isinstance(choose_renderer(), TextRenderer)
    monkeypatch.setenv("NBSUBAGENTS_DISPLAY", "widgets")
    assert isinstance(choose_renderer(), WidgetRenderer)
    monkeypatch.setenv("NBSUBAGENTS_DISPLAY", "text")
    assert isinstance(choose_renderer(), TextRenderer)
    monkeypatch.setenv("NBSUBAGENTS_DISPLAY", "fancy")
    with pytest.warns(UserWarning, match="NBSUBAGENTS_DISPLAY='fancy' is not one of auto, text, widgets"):
        assert isinstance(choose_renderer(), TextRenderer)


def test_a_finished_run_shows_its_static_record_and_a_running_one_its_live_panel_when_forced(tmp_path, monkeypatch):
    monkeypatch.delenv("NBSUBAGENTS_DISPLAY", raising=False)
    run = fake_run(tmp_path, "r1")
    finish(run.dir, "completed", text="the answer <42>")
    bundle = run_mimebundle(run)  # what IPython shows for a Run (ui.attach registers it)
    assert set(bundle) == {"text/plain", "text/html"}
    assert bundle["text/plain"].startswith("✓ r1 completed · demo/scripted · 0 tool calls · 0 tokens · $0.0000 · 1.0s\n")
    assert "Output:\n  the answer <42>\nRun id: r1" in bundle["text/plain"]
    assert "the answer &lt;42&gt;" in bundle["text/html"] and '<b class="nbsubagents-name" title="r1"' in bundle["text/html"]
    assert bundle["text/html"].count("<style") == 1  # the stylesheet, once; a status's colour inline
    assert "\n" not in bundle["text/html"] and "<script" not in bundle["text/html"]
    monkeypatch.setenv("NBSUBAGENTS_DISPLAY", "widgets")
    assert set(run_mimebundle(run)) == {"text/plain", "text/html"}  # finished: no widget needed
    running = fake_run(tmp_path, "r2", "running")
    bundle = run_mimebundle(running)
    assert bundle[VIEW_MIME]["model_id"] and bundle["text/plain"].startswith("↻ r2 running")
    assert live_panel(running).widget.model_id == bundle[VIEW_MIME]["model_id"]


def test_missing_ipywidgets_is_a_clear_error_when_a_panel_is_built(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ipywidgets", None)
    with pytest.raises(ImportError, match=r"pip install 'ipywidgets>=8'.*NBSUBAGENTS_DISPLAY=text"):
        RunPanel(fake_run(tmp_path, "r1"))


def test_display_and_widgets_stay_out_of_a_bare_import():
    code = ("import sys, nbsubagents, nbsubagents._ui.display; nbsubagents._ui.display.choose_renderer();"
            "print(sorted({'IPython', 'ipywidgets', 'pandas'} & set(sys.modules)))")
    env = {k: v for k, v in os.environ.items() if k != "NBSUBAGENTS_DISPLAY"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env).stdout
    assert out.strip() == "[]"


@pytest.mark.notebook
def test_importing_nbsubagents_in_a_widget_kernel_opens_no_widget_and_waits_for_nothing(project, monkeypatch):
    """A real ipykernel with ipywidgets installed: ``import nbsubagents`` opens no comm (no widget, nothing on
    iopub) and takes far less than the frontend wait a widget would cost; the first panel readies the frontend."""
    from jupyter_client.manager import start_new_kernel

    monkeypatch.delenv("NBSUBAGENTS_DISPLAY", raising=False)
    km, kc = start_new_kernel(kernel_name="python3", cwd=str(project))
    try:
        kc.execute("import sys, time, json", reply=True, timeout=60)
        messages = cell_messages(kc, "start = time.perf_counter()\nimport nbsubagents\ntook = time.perf_counter() - start\n"
                                 "kernel = get_ipython().kernel\n"
                                 "print(json.dumps({'took': took, 'comms': len(kernel.comm_manager.comms),"
                                 " 'ipywidgets': 'ipywidgets' in sys.modules}))")
        (printed,) = [m["content"]["text"] for m in messages if m["msg_type"] == "stream"]
        facts = json.loads(printed)
        assert facts["comms"] == 0 and not facts["ipywidgets"], facts
        assert not [m for m in messages if m["msg_type"].startswith("comm_")]
        assert facts["took"] < 0.4, facts  # a widget at import waited up to kernel.FRONTEND_SUBSHELL_WAIT (0.5 s)
        # What needs the frontend happens when something is first shown: the panel's ipywidgets opens it then.
        reply = kc.execute("from nbsubagents._ui.kernel import load_ipywidgets\nload_ipywidgets()\n"
                           "print(len(kernel.comm_manager.comms) > 0)", reply=True, timeout=60)
        assert reply["content"]["status"] == "ok", reply["content"]
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def cell_messages(kc, code: str) -> list[dict]:
    """The iopub messages of one cell run to its end in a kernel (``kc`` its client)."""
    reply = kc.execute(code, reply=True, timeout=60)
    assert reply["content"]["status"] == "ok", reply["content"]
    messages = []
    while True:
        try:
            messages.append(kc.get_iopub_msg(timeout=2))
        except Exception:  # queue.Empty: the cell's messages are all in
            break
    return messages


# Builds panels in a kernel: a first one, then a group of two (the group's messages are the ones counted).
BUILD_PANELS = """
import json, pathlib, tempfile, time, types
from nbsubagents._lifecycle.handle import Run
from nbsubagents._ui.panels import GroupPanel, RunPanel
from nbsubagents._views import panel_state
# the wall clock stands still: a slow build (a busy machine) cannot move a header's elapsed time between a
# widget's open and the panel's first render, which would be one update more (a real one)
panel_state.time = types.SimpleNamespace(time=lambda: 1_800_000_000.0, monotonic=time.monotonic)
def running(name):
    run_dir = pathlib.Path(tempfile.mkdtemp()) / name
    run_dir.mkdir()
    meta = {"runId": name, "name": name, "resolvedModel": "demo/scripted", "timeout": 600.0}
    (run_dir / "meta.json").write_text(json.dumps(meta))
    (run_dir / "supervisor.json").write_text("{}")
    return Run(run_dir)
first = RunPanel(running("first"))
"""


@pytest.mark.notebook
def test_in_a_kernel_each_widget_of_a_panel_opens_with_its_state_in_one_message(project, monkeypatch):
    """Every comm message is kernel CPU: building panels sends one comm_open per widget of their own (each with its
    CSS classes, values and shared layout and style) and no update after it; the message box is not built yet."""
    from jupyter_client.manager import start_new_kernel

    monkeypatch.delenv("NBSUBAGENTS_DISPLAY", raising=False)
    km, kc = start_new_kernel(kernel_name="python3", cwd=str(project))

    def comm_messages(code: str) -> list[dict]:
        return [m for m in cell_messages(kc, code) if m["msg_type"].startswith("comm_")]

    try:
        comm_messages(BUILD_PANELS)
        sent = comm_messages("group = GroupPanel([running('a'), running('b')])")
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    opened = [m["content"]["data"]["state"] for m in sent if m["msg_type"] == "comm_open"]
    assert [m for m in sent if m["msg_type"] != "comm_open"] == []  # no update once open
    models = {state["_model_name"] for state in opened}
    assert "LayoutModel" not in models and not any(name.endswith("StyleModel") for name in models)  # shared
    assert "TextareaModel" not in models  # the message box: built when a person opens it
    # 13 widgets a panel (header, its live region for screen readers, Message, Cancel, window, history toggle and
    # lines, questions, message box, the final text, the stylesheet and two boxes) and 3 of the group's
    assert len(opened) == 2 * 13 + 3, sorted(state["_model_name"] for state in opened)
    classes = [c for state in opened for c in state.get("_dom_classes", [])]
    assert {"nbsubagents-panel", "nbsubagents-header", "nbsubagents-cancel", "nbsubagents-message",
            "nbsubagents-window", "nbsubagents-steer-box", "nbsubagents-group-header"} <= set(classes)
    (group_header,) = [state for state in opened if "nbsubagents-group-header" in state.get("_dom_classes", [])]
    assert "Sub-agents: 2 running" in group_header["value"]


@pytest.mark.notebook
def test_in_a_real_kernel_runs_show_live_panels_that_end_as_static_records(project, monkeypatch):
    """nbclient drives a real ipykernel: choose_renderer picks widgets; the saved widget state has the lines."""
    monkeypatch.delenv("NBSUBAGENTS_DISPLAY", raising=False)
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("import nbsubagents\nfrom nbsubagents._ui.display import choose_renderer\n"
                                  "print(type(choose_renderer()).__name__)"),
        nbformat.v4.new_code_cell('r = nbsubagents.run("scout", "read README.md\\nrun: echo hi")'),
        nbformat.v4.new_code_cell("r"),
    ]
    NotebookClient(nb, kernel_name="python3", timeout=180, store_widget_state=True,
                   resources={"metadata": {"path": str(project)}}).execute()
    assert nb.cells[0].outputs[0]["text"].strip() == "WidgetRenderer"
    run = Run(next((project / ".pi" / "subagents" / "runs").iterdir()))
    usage = run.result["usage"]
    (shown,) = [o for o in nb.cells[1].outputs if o["output_type"] == "display_data"]
    # The live panel was replaced at the end by its static record: readable without a kernel or widgets.
    assert VIEW_MIME not in shown["data"]
    plain = shown["data"]["text/plain"]
    assert plain.startswith(f"✓ scout completed · demo/scripted · 2 tool calls · {usage['totalTokens']:,} tokens")
    for line in ("  Reading README.md", "  Command finished — hi", "Output:", f"Run id: {run.id}"):
        assert line in plain, plain
    page = shown["data"]["text/html"]
    assert f'class="nbsubagents-static nbsubagents-panel nbsubagents-run-{run.id} nbsubagents-status-completed"' in page
    assert "Reading README.md" in page
    assert html_lib.escape(run.output.splitlines()[0], quote=False) in page
    (value,) = nb.cells[2].outputs
    assert value["output_type"] == "execute_result" and VIEW_MIME not in value["data"]
    assert value["data"]["text/plain"] == plain and value["data"]["text/html"] == page
    # While it ran the output held the widget: its model is in the saved state with the lines.
    state = nb.metadata.widgets["application/vnd.jupyter.widget-state+json"]["state"]
    values = [m["state"].get("value", "") for m in state.values() if m["model_name"] == "HTMLModel"]
    assert sum("Reading README.md" in v for v in values) == 1


# -- issue 17: a panel a person trusts at a glance ---------------------------------------------------------
def test_a_new_panel_ticks_and_says_pi_is_starting_before_any_event(tmp_path):
    run = fake_run(tmp_path, "r1", "running")  # launched (its supervisor is there), no event yet
    renderer = WidgetRenderer(display=lambda widget: None)
    renderer.start([run])
    panel = renderer.view
    assert lines_of(panel.window_html.value) == [] and "placeholder\">starting pi…<" in panel.window_html.value
    first = panel.elapsed()
    assert first is not None and first < 1
    before = page_text(panel.header.value)
    time.sleep(2.3)  # still no event: the ticker moves the clock
    assert page_text(panel.header.value) != before and panel.elapsed() > first + 2
    renderer.close()
    queued = RunPanel(fake_run(tmp_path, "q1"))  # not launched yet: no clock, and it says so
    assert queued.elapsed() is None and "(waiting to start)" in queued.window_html.value


def test_failed_tool_calls_show_in_the_header_and_stay_in_the_folded_window(tmp_path):
    run = fake_run(tmp_path, "r1", "running")
    panel = RunPanel(run, lines=4)
    formatter = ProgressFormatter(str(tmp_path))
    events = [{"type": "tool_call", "id": "a", "name": "read", "args": {"path": "missing.py"}},
              {"type": "tool_result", "id": "a", "name": "read", "isError": True, "text": "ENOENT: missing.py"}]
    events += [e for i in range(2) for e in (
        {"type": "tool_call", "id": f"b{i}", "name": "bash", "args": {"command": f"echo {i}"}},
        {"type": "tool_result", "id": f"b{i}", "name": "bash", "isError": i == 1, "text": f"out {i}"})]
    events += [{"type": "tool_call", "id": f"c{i}", "name": "ls", "args": {"path": f"d{i}"}} for i in range(5)]
    for event in events:
        panel.add(event, formatter.format(event))
    panel.render()
    assert panel.failed_steps == 2
    assert f'nbsubagents-failed-steps nbsubagents-bold" style="color:{style.color("failed")}">2 failed steps' \
        in panel.header.value
    window = lines_of(panel.window_html.value)
    assert len(window) == 4
    failed = [text for kind, text in window if kind == "failed"]
    assert failed and all(kind == "failed" for kind, _ in window[:len(failed)])  # kept above the latest lines
    assert window[-1] == ("tool", "Listing d4")
    assert "2 failed steps" in panel.static_text().splitlines()[0]


def test_a_dead_kernels_panel_hides_its_controls_and_says_it_shows_the_last_state(tmp_path):
    panel = RunPanel(fake_run(tmp_path, "r1", "running"))
    css = stylesheet()  # the panel's, sent once
    # JupyterLab marks every view of a gone kernel's widgets jupyter-widgets-disconnected
    assert ".nbsubagents-cancel.jupyter-widgets-disconnected{display:none !important}" in css
    assert ".nbsubagents-message.jupyter-widgets-disconnected{display:none !important}" in css
    assert ".nbsubagents-header.jupyter-widgets-disconnected .nbsubagents-gone{display:block;font-weight:600}" in css
    assert ".nbsubagents-header.jupyter-widgets-disconnected .nbsubagents-status," in css  # "running" is not said
    assert ".nbsubagents-panel.nbsubagents-live:has(.jupyter-widgets-disconnected){filter:grayscale(1)" in css
    assert 'unknown: kernel restarted' in panel.header.value
    assert 'nbsubagents.get_run(&quot;r1&quot;)' in panel.header.value
    assert "nbsubagents-cancel" in panel.cancel_button._dom_classes
    assert "nbsubagents-header" in panel.header._dom_classes


def test_a_notice_sums_up_the_whole_answer_on_one_line():
    from nbsubagents._lifecycle.watcher import _summary

    row = {"status": "completed", "final_text": "Done. 3 steps:\n- read README.md: # Demo\n- ls src: app.py\n"}
    assert _summary(row) == "Done. 3 steps: - read README.md: # Demo - ls src: app.py"
    assert len(_summary({"status": "completed", "final_text": "word " * 100})) == 120


@pytest.mark.notebook
def test_any_display_of_a_running_run_follows_it_to_its_end_whoever_launched_it(project, monkeypatch):
    """A background run started without a panel, shown as a cell value and again through get_run; and a run
    started by another process (a script that exited): each display is live and saved as the run's end."""
    monkeypatch.delenv("NBSUBAGENTS_DISPLAY", raising=False)
    launcher = ("import sys, nbsubagents; r = nbsubagents.start('scout', 'sleep: 3\\nrun: echo elsewhere', "
                "name='other', show=False); print(r.id)")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src) for src in (
        'import subprocess, sys, nbsubagents\njob = nbsubagents.start("scout", "sleep: 3\\nread README.md", '
        'name="quiet", show=False)',
        "job",
        "display(nbsubagents.get_run(job.id[:-2]))",
        f"other_id = subprocess.run([sys.executable, '-c', {launcher!r}], capture_output=True, text=True, "
        "check=True).stdout.strip()\nother = nbsubagents.get_run(other_id)\nother",
        "job.wait(); other.wait(); print(job.status, other.status)",
    )]
    NotebookClient(nb, kernel_name="python3", timeout=180, store_widget_state=True,
                   resources={"metadata": {"path": str(project)}}).execute()
    assert nb.cells[4].outputs[-1]["text"].strip() == "completed completed"
    shown = {i: [o for o in nb.cells[i].outputs if o["output_type"] == "display_data"] for i in (1, 2, 3)}
    for i, name, line in ((1, "quiet", "Reading README.md"), (2, "quiet", "Reading README.md"),
                          (3, "other", "Command finished — elsewhere")):
        (output,) = shown[i]
        data = output["data"]
        assert VIEW_MIME not in data, (i, data)  # the live panel gave way to the record of the end
        assert data["text/plain"].startswith(f"✓ {name} completed"), (i, data["text/plain"])
        assert line in data["text/plain"] and "Output:" in data["text/plain"]
    # while they ran, the displays were live panels: their models are in the saved widget state
    state = nb.metadata.widgets["application/vnd.jupyter.widget-state+json"]["state"]
    headers = [m["state"]["value"] for m in state.values()
               if m["model_name"] == "HTMLModel" and "nbsubagents-status-" in m["state"].get("value", "")]
    assert any("quiet" in h and "completed" in h for h in headers) and any("other" in h and "completed" in h
                                                                           for h in headers)


def test_static_record_is_shown_with_the_view_refreshed_while_running_and_replaces_it_at_the_end(tmp_path,
                                                                                                 monkeypatch):
    from nbsubagents._ui import panels as widgets

    monkeypatch.setattr(widgets, "STATIC_INTERVAL", 0.3)
    sent: list = []
    renderer = WidgetRenderer(publish=lambda bundle, display_id, update: sent.append((bundle, display_id, update)))
    runs = [fake_run(tmp_path, "a", "running"), fake_run(tmp_path, "b", "running")]
    renderer.start(runs)
    group_id = renderer.view.display_id
    bundle, display_id, update = sent[0]
    assert display_id == group_id and not update and VIEW_MIME in bundle
    assert bundle["text/plain"].startswith("Sub-agents: 2 running")
    renderer.event(runs[0], {"type": "tool_call", "seq": 1}, ProgressLine("tool", "Reading a.py"))
    time.sleep(1.8)  # the ticker (moving the clocks every second) refreshes the record, view kept
    refreshed = [b for b, i, u in sent if u and VIEW_MIME in b]
    assert refreshed and "Reading a.py" in refreshed[-1]["text/plain"] and all(i == group_id for _, i, _ in sent)
    for run, text in zip(runs, ("done a", "done b")):
        finish(run.dir, "completed", text=text)
        renderer.end(run)
    renderer.close()
    final, display_id, update = sent[-1]
    assert update and display_id == group_id and VIEW_MIME not in final
    assert final["text/plain"].startswith("Sub-agents: 2 done") and "Run ids: a, b" in final["text/plain"]
    assert "done a" in final["text/html"] and "done b" in final["text/html"]
    count = len(sent)
    time.sleep(0.8)
    assert len(sent) == count  # nothing after the end


# -- records a saved notebook keeps true (issue 25) ---------------------------------------------------------
def test_a_run_that_ends_while_its_panel_is_being_shown_leaves_its_final_record(tmp_path):
    """The clock's thread renders a run's end while the cell still shows its panel: the notebook keeps the final
    record, never the "as of" record the show was sending (a background run that ends at once, on a loaded host)."""
    sent: list = []
    run = fake_run(tmp_path, "r1", "running")
    panel = RunPanel(run)
    ender = threading.Thread(target=panel.finish)

    def publish(bundle, display_id, update):
        sent.append((bundle, display_id, update))
        if not ender.is_alive() and ender.ident is None:  # the run ends as its first record goes out
            finish(run.dir, "completed", text="all done")
            ender.start()
            ender.join(1.0)  # the end is rendered meanwhile, or waits for the show (then it follows it)

    panel.show(publish)
    ender.join(30)
    final, display_id, update = sent[-1]
    assert display_id == panel.display_id and VIEW_MIME not in final
    assert "completed" in final["text/plain"] and "as of" not in final["text/plain"], final["text/plain"]


def test_a_record_carries_the_widget_view_only_while_its_view_lives_and_the_kernels_exit_ends_it(tmp_path,
                                                                                                 monkeypatch):
    from nbsubagents._ui import kernel
    from nbsubagents._views import panel_record, panel_state

    # the record's "as of" clock moves only when the test moves it, and the run's elapsed time stands still (a
    # loaded machine crossing a second between two updates would otherwise send one more, a real one)
    clock = ["10:00:00"]
    monkeypatch.setattr(panel_record, "time", types.SimpleNamespace(**{**vars(time), "strftime": lambda *a: clock[0]}))
    monkeypatch.setattr(panel_state, "time", types.SimpleNamespace(**{**vars(time), "time": lambda: 1_800_000_000.0}))
    sent: list = []
    panel = RunPanel(fake_run(tmp_path, "r1", "running"))
    panel.static_html()  # the record's template compiled (once per process) before its clock counts
    record = panel.notebook_record(lambda bundle, display_id, update: sent.append((bundle, display_id, update)))
    assert record is panel.notebook_record()  # one record per panel: every display of it updates together
    record.show()
    assert sent[-1][1] == "nbsubagents-run-r1" and not sent[-1][2] and VIEW_MIME in sent[-1][0]
    assert "as of 10:00:00" in sent[-1][0]["text/plain"]
    count = len(sent)
    assert not record.update() and len(sent) == count  # nothing new: nothing sent
    clock[0] = "10:00:01"
    assert record.update() and len(sent) == count + 1 and "as of 10:00:01" in sent[-1][0]["text/plain"]
    # the kernel shuts down while the run goes: the output becomes its record alone, which says what is known
    kernel.end_live_records()
    final, display_id, update = sent[-1]
    assert update and display_id == "nbsubagents-run-r1" and VIEW_MIME not in final
    assert final["text/plain"].startswith("? r1 unknown")
    assert 'nbsubagents.get_run("r1") says how it ended' in final["text/plain"]
    assert "nbsubagents-status-unknown" in final["text/html"] and "running" not in page_text(final["text/html"])
    count = len(sent)
    kernel.end_live_records()
    record.update()
    assert len(sent) == count  # ended for good


def test_between_steps_the_panel_says_it_waits_for_the_model_with_a_clock(tmp_path):
    panel = RunPanel(fake_run(tmp_path, "r1", "running"))
    assert "starting pi…" in panel.window_html.value  # nothing from pi yet
    now = time.time()
    panel.add({"type": "session", "ts": now - 12}, None)
    panel.render()
    assert "starting pi…" not in panel.window_html.value
    assert re.search(r'nbsubagents-waiting">waiting for the model · 1\d(\.\d)?s<', panel.window_html.value)
    panel.add({"type": "tool_call", "id": "a", "name": "ls", "args": {}, "ts": now}, ProgressLine("tool", "Listing"))
    panel.render()
    assert "waiting for the model" not in panel.window_html.value  # a tool runs: pi is not waiting on the model
    panel.add({"type": "tool_result", "id": "a", "name": "ls", "text": "x", "ts": now}, None)
    panel.render()
    assert "waiting for the model · " in panel.window_html.value
    assert "waiting for the model · " in panel.static_text() and "waiting for the model · " in panel.static_html()


def test_a_static_record_says_each_line_once_with_one_toggle_for_hidden_lines_and_no_style_block(tmp_path):
    run = fake_run(tmp_path, "r1", "running")
    panel = RunPanel(run, lines=3)
    for i in range(8):
        panel.add({"type": "tool_call", "id": f"c{i}", "name": "read", "ts": time.time()},
                  ProgressLine("tool", f"Reading f{i}.txt"))
    running = panel.static_html()
    assert "as of " in running and "as of " in panel.static_text()  # a reading that may be stale says when
    finish(run.dir, "completed", text="all read")
    panel.finish()
    record = panel.static_html()
    assert all(record.count(f"Reading f{i}.txt") == 1 for i in range(8)), record
    assert record.count("<details") == 1 and ">5 earlier lines</summary>" in record
    assert record.count("<style") == 1 and "as of" not in record
    assert panel.history_box.titles == ("5 earlier lines",)
    small = RunPanel(fake_run(tmp_path, "r2", "running"), lines=15)  # nothing hidden: no toggle, live or static
    small.add({"type": "tool_call", "id": "a", "name": "ls", "ts": time.time()}, ProgressLine("tool", "Listing"))
    small.render()
    assert small.history_box.layout.display == "none" and "<details" not in small.static_html()


# -- the conversation (issue 26): steer, follow up, questions, approvals, fallbacks, context use --------------
WAIT = style.glyph("waiting")


def conversation_panel(tmp_path: Path, name: str = "r1") -> tuple[Run, RunPanel]:
    """A running run's panel that has seen the run start (its message box shows while it runs)."""
    run = fake_run(tmp_path, name, "running")
    panel = RunPanel(run)
    panel.add({"type": "run_start", "seq": 0, "ts": time.time()}, None)
    panel.render()
    return run, panel


def question_row(panel: RunPanel, qid: str):
    (row,) = [r for r in panel.questions_box.children if r._nbsubagents["id"] == qid]
    return row


def controls(row, cls: str) -> list:
    return [c for c in row._nbsubagents["controls"] if cls in c._dom_classes]


def test_the_message_box_posts_steers_and_follow_ups_to_the_inbox_and_is_gone_when_the_run_ends(tmp_path):
    from nbsubagents._child import inbox

    run, panel = conversation_panel(tmp_path)
    talk = panel.talk
    # while the run goes, its Message button shows beside Cancel; the box is built when a person opens it
    assert talk.message_button in panel.widget.children[0].children and talk.message_button.layout.display is None
    assert panel.steer_box.layout.display == "none" and talk.steer_text is None
    talk.message_button.click()
    assert panel.steer_box.layout.display is None and panel.steer_box in panel.widget.children
    assert talk.message_button.layout.display == "none"  # the box is open: no second one
    assert "nbsubagents-steer-box" in panel.steer_box._dom_classes
    talk.steer_button.click()  # nothing typed: nothing posted, the box says why
    assert inbox.take(run.dir) == [] and "Type a message first" in talk.note.value
    talk.steer_text.value = "read b.md instead"
    talk.steer_button.click()
    assert talk.steer_text.value == "" and "steer sent at " in talk.note.value  # the browser may not see it: gone fast
    talk.steer_text.value = "now summarise b.md"
    talk.follow_button.click()
    posted = inbox.take(run.dir)
    assert [(m["kind"], m["text"]) for m in posted] == [("steer", "read b.md instead"),
                                                         ("follow_up", "now summarise b.md")]
    assert talk.steer_text.value == "" and "follow-up sent at " in talk.note.value
    # what the person said shows once the run took it (its user_message event), with when it was said and what pi
    # did with it where pi says (pi 1.x's disposition; pi 0.73.1 does not say)
    at = "2026-01-02T03:04:05.000Z"
    panel.add({"type": "user_message", "kind": "steer", "text": "read b.md instead", "at": at, "seq": 1,
               "disposition": "queued"}, None)
    panel.add({"type": "user_message", "kind": "follow_up", "text": "now summarise b.md", "at": at, "seq": 2}, None)
    panel.render()
    assert talk.note.value == ""  # the lines say it now
    stamp = time.strftime("%H:%M:%S", time.localtime(1767323045))
    assert lines_of(panel.window_html.value) == [("user", f"you (steer, queued, {stamp}): read b.md instead"),
                                                 ("user", f"you (follow-up, {stamp}): now summarise b.md")]
    finish(run.dir, "completed", text="done")
    panel.finish()
    assert panel.steer_box.layout.display == "none" and talk.steer_button.disabled and talk.follow_button.disabled
    assert talk.message_button.layout.display == "none"
    talk.steer_text.value = "too late"
    talk.steer_button.click()
    assert inbox.take(run.dir) == []  # an ended run's box posts nothing, and says so
    assert "had ended: this was not sent" in talk.note.value and talk.steer_text.value == "too late"


def test_a_queued_run_offers_no_message_box_yet(tmp_path):
    panel = RunPanel(fake_run(tmp_path, "r1"))
    assert panel.status == "queued" and panel.steer_box.layout.display == "none"
    assert panel.talk.message_button.layout.display == "none"


def test_an_ended_run_opens_no_message_box(tmp_path):
    run, panel = conversation_panel(tmp_path)
    finish(run.dir, "completed", text="done")
    panel.finish()
    assert panel.talk.message_button.layout.display == "none"
    panel.talk.open()  # a click that was on its way
    assert panel.talk.steer_text is None and panel.steer_box.children == ()


def test_open_questions_show_their_controls_and_each_answer_posts_the_question_id_and_value(tmp_path):
    from nbsubagents._child import inbox

    run, panel = conversation_panel(tmp_path)
    for seq, event in enumerate([
            {"type": "question", "id": "q-in", "method": "input", "title": "Which branch?", "placeholder": "main"},
            {"type": "question", "id": "q-sel", "method": "select", "title": "Which file?",
             "options": ["a.md", "b.md"], "approval": False},
            {"type": "question", "id": "q-ok", "method": "confirm", "title": "Allow bash?", "message": "rm -rf build",
             "approval": True},
            {"type": "question", "id": "q-no", "method": "confirm", "title": "Allow write?", "message": "notes.md",
             "approval": True}], start=1):
        panel.add({**event, "seq": seq, "timeoutAt": None}, None)
    panel.render()
    assert page_text(panel.header.value).startswith(f"{WAIT} r1 waiting · ")  # the header says it waits
    assert "nbsubagents-status-waiting" in panel.header.value
    assert [r._nbsubagents["id"] for r in panel.questions_box.children] == ["q-in", "q-sel", "q-ok", "q-no"]
    assert "nbsubagents-open-question-select" in question_row(panel, "q-sel")._dom_classes
    assert "Allow bash? — rm -rf build" in question_row(panel, "q-ok").children[0].value
    # each open question is said once, in its row with its controls: not again as a line above (issue 56)
    assert [k for k, _ in lines_of(panel.window_html.value)] == []
    shown = panel.window_html.value + "".join(row.children[0].value for row in panel.questions_box.children)
    assert shown.count("Which file?") == 1 and shown.count("Allow bash?") == 1
    for record in panel.static_record():  # the saved record too: once, with how to answer it
        assert record.count("Which file?") == 1 and record.count("Allow bash?") == 1, record

    (box,) = controls(question_row(panel, "q-in"), "nbsubagents-answer-text")
    assert box.placeholder == "main"
    box.value = "feature/x"
    controls(question_row(panel, "q-in"), "nbsubagents-answer-button")[0].click()
    options = controls(question_row(panel, "q-sel"), "nbsubagents-option")
    assert [b.description for b in options] == ["a.md", "b.md"]
    options[1].click()
    controls(question_row(panel, "q-ok"), "nbsubagents-allow")[0].click()
    controls(question_row(panel, "q-no"), "nbsubagents-deny")[0].click()
    controls(question_row(panel, "q-no"), "nbsubagents-allow")[0].click()  # answered from here already
    answers = [(m["kind"], m["requestId"], m["value"]) for m in inbox.take(run.dir)]
    assert answers == [("answer", "q-in", "feature/x"), ("answer", "q-sel", "b.md"), ("answer", "q-ok", True),
                       ("answer", "q-no", False)]
    assert all(c.disabled for c in question_row(panel, "q-sel")._nbsubagents["controls"])
    assert "sent at " in question_row(panel, "q-no")._nbsubagents["note"].value

    # the run takes the answers: the rows go, the lines say the answer and who gave it
    for seq, (qid, value, by) in enumerate([("q-in", "feature/x", "person"), ("q-sel", "b.md", "person"),
                                            ("q-ok", True, "person"), ("q-no", False, "policy")], start=10):
        panel.add({"type": "answer", "id": qid, "value": value, "by": by, "at": "2026-01-02T03:04:05Z",
                   "seq": seq}, None)
    panel.render()
    assert panel.questions_box.children == ()
    assert page_text(panel.header.value).startswith("↻ r1 running · ")
    assert lines_of(panel.window_html.value)[1] == ("question", "asks: Which file? [a.md | b.md]")  # back, answered
    assert [text for kind, text in lines_of(panel.window_html.value) if kind == "answer"] == [
        "answer (person): feature/x", "answer (person): b.md", "approval: Allow bash? — rm -rf build: allowed (person)",
        "approval: Allow write? — notes.md: denied (policy)"]


def test_a_question_listed_only_in_waiting_json_is_open_too(tmp_path):
    from nbsubagents._child import inbox

    run, panel = conversation_panel(tmp_path)
    inbox.set_waiting(run.dir, [{"type": "question", "id": "w1", "method": "input", "title": "Name?"}])
    panel.render()
    assert "nbsubagents-status-waiting" in panel.header.value
    assert [r._nbsubagents["id"] for r in panel.questions_box.children] == ["w1"]
    assert "waiting for your answer: Name?" in panel.static_text()
    inbox.set_waiting(run.dir, [])
    panel.render()
    assert panel.questions_box.children == () and "nbsubagents-status-running" in panel.header.value


def test_the_header_shows_context_use_from_the_latest_session_stats(tmp_path):
    run, panel = conversation_panel(tmp_path)
    assert "ctx" not in page_text(panel.header.value)  # nothing said yet: nothing shown
    panel.add({"type": "session_stats", "contextTokens": 1230, "contextWindow": 10000, "contextPercent": 12.3,
               "tokens": 1500, "cost": 0.01, "seq": 1}, None)
    panel.render()
    assert " · $0.0000 · ctx 12% · " in page_text(panel.header.value)
    assert '<span class="nbsubagents-context">· ctx 12%</span>' in panel.header.value
    panel.add({"type": "session_stats", "contextTokens": 4100, "contextWindow": 10000, "contextPercent": None,
               "tokens": 5000, "cost": 0.02, "seq": 2}, None)
    panel.render()
    assert "ctx 41%" in page_text(panel.header.value) and "ctx 41%" in panel.static_text()
    assert [kind for kind, _ in lines_of(panel.window_html.value) if kind != "waiting"] == []  # numbers, not lines
    # a run seen only through its result: the result's contextUsage
    done = fake_run(tmp_path, "r2")
    (done.dir / "result.json").write_text(json.dumps({
        "status": "completed", "finalText": "ok", "durationSeconds": 1.0, "toolCalls": 0,
        "usage": {"totalTokens": 10, "cost": 0}, "contextUsage": {"tokens": 700, "window": 1000, "percent": 70.0}}))
    assert "ctx 70%" in RunPanel.from_run(done).header.value


def write_conversation_run(tmp_path: Path) -> Run:
    """A finished run whose events.jsonl holds a whole conversation, written by hand."""
    run = fake_run(tmp_path, "talk", "running")
    at = "2026-01-02T03:04:05Z"
    events = [
        {"type": "run_start"},
        {"type": "tool_call", "id": "c1", "name": "read", "args": {"path": "a.md"}},
        {"type": "tool_result", "id": "c1", "name": "read", "text": "alpha"},
        {"type": "user_message", "kind": "steer", "text": "read b.md <now>", "at": at, "from": "h:1"},
        {"type": "question", "id": "q1", "method": "select", "title": "Which file?", "options": ["a.md", "b.md"],
         "approval": False, "timeoutAt": None},
        {"type": "answer", "id": "q1", "value": "b.md", "by": "person", "at": at, "from": "h:1"},
        {"type": "question", "id": "q2", "method": "confirm", "title": "Allow bash?", "message": "ls -la",
         "approval": True, "timeoutAt": None},
        {"type": "answer", "id": "q2", "value": False, "by": "policy", "at": at},
        {"type": "model_fallback", "from": "offline/scripted", "to": "offline/other", "error": "429 rate limited"},
        {"type": "tool_call", "id": "c2", "name": "read", "args": {"path": "b.md"}},
        {"type": "tool_result", "id": "c2", "name": "read", "text": "beta"},
        {"type": "session_stats", "contextTokens": 500, "contextWindow": 2000, "contextPercent": 25.0, "tokens": 900,
         "cost": 0.0},
        {"type": "assistant_text", "text": "b.md says beta"},
        {"type": "run_end", "status": "completed"},
    ]
    with open(run.paths.events, "w") as fh:
        for seq, event in enumerate(events):
            fh.write(json.dumps({**event, "seq": seq, "ts": 1767323045.0 + seq}) + "\n")
    (run.dir / "supervisor.json").unlink()
    finish(run.dir, "completed", text="b.md says beta")
    return Run(run.dir, run.record)


def test_the_saved_record_tells_the_conversation_in_order_with_the_tool_calls_without_javascript(tmp_path):
    run = write_conversation_run(tmp_path)
    bundle = run_mimebundle(run)  # what a finished run shows as a cell's value: the static record alone
    assert VIEW_MIME not in bundle
    stamp = time.strftime("%H:%M:%S", time.localtime(1767323045))
    said = ["Reading a.md", f"you (steer, {stamp}): read b.md <now>", "asks: Which file? [a.md | b.md]",
            "answer (person): b.md", "approval: Allow bash? — ls -la", "approval: Allow bash? — ls -la: denied (policy)",
            "model fallback: offline/scripted → offline/other (429 rate limited)", "Reading b.md"]
    text = bundle["text/plain"]
    positions = [text.find(line) for line in said]
    assert -1 not in positions and positions == sorted(positions), (positions, text)
    assert "ctx 25%" in text.splitlines()[0]
    page = page_text(bundle["text/html"])
    positions = [page.find(line) for line in said]
    assert -1 not in positions and positions == sorted(positions), (positions, page)
    record = bundle["text/html"]
    assert "<script" not in record and record.count("<style") == 1 and "&lt;now&gt;" in record
    for kind in ("user", "question", "answer", "fallback"):
        assert f'<div class="nbsubagents-{kind} nbsubagents-rline">' in record, kind
    assert "nbsubagents-status-completed" in record and "waiting for your answer" not in record


def test_a_record_taken_while_the_run_waits_says_so_and_how_to_answer(tmp_path):
    run, panel = conversation_panel(tmp_path, "asker")
    panel.add({"type": "question", "id": "q1", "method": "input", "title": "Which file?", "seq": 1}, None)
    record = panel.static_html()
    assert "nbsubagents-status-waiting" in record
    # its rule's colour, from the record's own rules (a live panel's from the sheet it sends once)
    assert 'data-status="waiting"' in record and (
            '.nbsubagents-static[data-status="waiting"]{border-left-color:var(--nbsubagents-waiting)}') in record
    assert (".nbsubagents-panel.nbsubagents-live:has(.nbsubagents-icon.nbsubagents-c-waiting)"
            "{border-left-color:var(--nbsubagents-waiting)}") in stylesheet() and ":has(" not in record
    assert WAIT != "?"  # "?" is the glyph of a record whose end is unknown (its kernel gone)
    assert '<div class="nbsubagents-open-question" data-question-id="q1"' in record and "waiting for your answer: Which file?" in page_text(record)
    assert 'nbsubagents.answer("asker", "…")' in page_text(record)
    text = panel.static_text()
    assert text.startswith(f"{WAIT} asker waiting · ") and f"{WAIT} waiting for your answer: Which file?" in text


def test_the_status_bar_names_runs_that_wait_for_an_answer_apart_from_running_ones(project):
    from nbsubagents._child import inbox
    from nbsubagents._ui import statusbar

    bar = nbsubagents.status_bar()
    try:
        run = nbsubagents.start("scout", "sleep: 60\nread README.md", name="asker", show=False)
        wait_for(lambda: bar.refresh().running_text.startswith("↻ asker"), what="the run on the bar")
        assert "waits" not in bar.text
        inbox.set_waiting(run.dir, [{"type": "question", "id": "q1", "method": "input", "title": "Which file?"}])
        bar.refresh()
        assert bar.text == f"runs: 1 running / 1 total · {WAIT} asker waits for your answer"
        assert bar.running_text.startswith(f"{WAIT} asker ")
        assert 'class="nbsubagents-statusbar-waiting"' in bar.html and f'data-run-id="{run.id}"' in bar.html
        assert f"nbsubagents-badge-waiting\" style=\"background:{style.color('waiting')};color:#fff" in bar.html
        assert "Which file?" in bar.html  # the question, as the badge's tooltip
        inbox.set_waiting(run.dir, [])
        bar.refresh()
        assert bar.text == "runs: 1 running / 1 total" and "statusbar-waiting" not in bar.html
        run.cancel()
        run.wait(60)
    finally:
        bar.close()
        for other in list(statusbar._bars):
            other.close()


def test_the_record_says_at_once_that_a_run_waits_but_never_refreshes_while_a_person_types(tmp_path, monkeypatch):
    from nbsubagents._ui import panels as widgets

    run, panel = conversation_panel(tmp_path)
    sent: list = []
    panel.show(lambda bundle, display_id, update: sent.append(bundle))
    panel.add({"type": "question", "id": "q1", "method": "input", "title": "Which file?", "seq": 1}, None)
    panel.render()  # long before the periodic refresh: the record says it waits now
    assert len(sent) == 2 and sent[-1]["text/plain"].startswith(f"{WAIT} r1 waiting")
    monkeypatch.setattr(widgets, "STATIC_INTERVAL", 0.0)
    panel.talk.open()
    panel.talk.steer_text.value = "half a thought"  # a refresh re-creates the view in JupyterLab: not while typing
    panel.add({"type": "tool_call", "id": "a", "name": "ls", "args": {}, "seq": 2}, ProgressLine("tool", "Listing"))
    panel.render()
    assert len(sent) == 2
    panel.talk.steer_text.value = ""
    panel.render()
    assert len(sent) == 3 and "Listing" in sent[-1]["text/plain"]


def test_a_call_denied_at_its_approval_says_who_denied_it_and_is_no_failed_step(tmp_path):
    """Issue 56: the line read approve.js's reason for the model, cut off, and the header counted a failed step."""
    from nbsubagents._child.formatter import ProgressFormatter

    run, panel = conversation_panel(tmp_path)
    formatter = ProgressFormatter(str(tmp_path))
    for seq, event in enumerate([
            {"type": "question", "id": "q1", "method": "confirm", "title": "Allow bash?", "message": "rm -rf build",
             "approval": True},
            {"type": "answer", "id": "q1", "value": False, "by": "person"},
            {"type": "tool_call", "id": "c1", "name": "bash", "args": {"command": "rm -rf build"}},
            {"type": "tool_result", "id": "c1", "name": "bash", "isError": True,
             "text": "Denied by the person in the notebook (or, when nobody answered in time, by the run's approval "
                     "policy)"}], start=1):
        event = {**event, "seq": seq, "ts": time.time()}
        panel.add(event, formatter.format(event))
    panel.render()
    assert [line for line in lines_of(panel.window_html.value) if line[0] == "failed"] == [
        ("failed", "Command denied: rm -rf build — by the person asked")]
    header = page_text(panel.header.value)
    assert "1 call denied" in header and "failed step" not in header


def test_a_screen_reader_is_told_when_a_run_waits_and_when_it_ends_and_its_boxes_are_labelled(tmp_path):
    """Issue 56: nothing announced "waiting" or "ended"; the answer and message boxes had no label."""
    run, panel = conversation_panel(tmp_path)
    region = re.compile(r'<span class="nbsubagents-sr-only" role="status" aria-live="polite">([^<]*)</span>')
    assert region.fullmatch(panel.announcer.value)[1] == ""  # running: nothing to say
    assert panel.announcer in panel.widget.children[0].children  # in the header's row
    panel.add({"type": "question", "id": "q1", "method": "input", "title": "Which branch?", "seq": 1}, None)
    panel.render()
    assert region.fullmatch(panel.announcer.value)[1] == "r1 is waiting for your answer"
    (box,) = controls(question_row(panel, "q1"), "nbsubagents-answer-text")
    assert box.description == "Your answer:"
    panel.talk.open()
    assert panel.talk.steer_text.description == "Message:"
    finish(run.dir, "completed", text="done")
    panel.finish()
    assert region.fullmatch(panel.announcer.value)[1] == "r1 ended: completed"
