"""Fault injection (issue 13): the real pi and supervisor under the failures a long-running tool meets.

Each case breaks one thing — the launcher, the supervisor or pi killed; the model answering HTTP 500 or not
listening at all; garbage and a 50 MB line on pi's stdout; a full disk; a read-only runs folder; ten cancels
at once from another process; 64 runs at once — and checks that the run says what happened, that
``result.json`` is whole, and that no process of the run is left. Every case adds a line to a report
printed at the end of the module (case, outcome, processes left).

The file builds its own project and model server instead of using the shared ``project`` fixture, and
is marked ``faults``: it runs once per test session, not once per variant of the shared fixtures.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from faults import (PI, files_of, first_run_dir, git, left_behind, model, note, proj, record,  # noqa: F401 (fixtures)
                    result_of, worktrees, worktrees_left)
from helpers import SCRIBE, processes_inside, wait_for

import nbsubagents
from nbsubagents import _config as config, _registry as registry
from nbsubagents._child import procs
from nbsubagents._lifecycle import dask_launcher, watcher
from nbsubagents._pi.locate import pi_command
from nbsubagents._lifecycle import reconcile
from nbsubagents._lifecycle.prepare import prepare
from nbsubagents._lifecycle.spec import TaskSpec
from nbsubagents._child.harnesses.pi import write_agent_dir

pytestmark = pytest.mark.faults


def launcher(code: str, cwd: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", f"import nbsubagents, time\n{code}\ntime.sleep(600)\n"],
                            cwd=cwd, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)

# -- processes killed -------------------------------------------------------------------------------
def test_kill_the_launcher_of_a_foreground_run(proj):
    """The supervisor is detached: a foreground run whose kernel dies still ends and records its end."""
    proc = launcher("nbsubagents.run('scout', 'run: echo started\\nsleep: 2\\nsay: finished alone', show=False)",
                    proj)
    try:
        run_dir = first_run_dir(proj)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        proc.stdout.close()
    wait_for(lambda: (run_dir / "result.json").exists(), 60, "the result")
    result = result_of(proj, run_dir.name)
    assert result["status"] == "completed" and "finished alone" in result["finalText"]
    rows = {r["run_id"]: r for r in reconcile.status(include_completed=True, root=proj).rows}
    assert rows[run_dir.name]["status"] == "completed"
    assert record("kill the launcher", proj, [run_dir.name], f"completed: {result['finalText']!r}") == []


def test_kill_the_supervisor(proj):
    run = nbsubagents.start("scout", "run: sleep 60", show=False)
    wait_for(lambda: len(procs.run_processes(run.id)) >= 2, 60, "pi and its tool")
    os.kill(json.loads((run.dir / "supervisor.json").read_text())["pid"], signal.SIGKILL)
    run.wait(60)
    assert run.status == "failed" and run.error.startswith("interrupted: supervisor exited without a result")
    assert run.result["durationSeconds"] > 0
    assert record("kill the supervisor", proj, [run]) == []


def test_kill_pi(proj):
    run = nbsubagents.start("scout", "run: sleep 60", show=False)
    wait_for(lambda: len(procs.run_processes(run.id)) >= 2, 60, "pi and its tool")
    os.kill(json.loads((run.dir / "supervisor.json").read_text())["childPid"], signal.SIGKILL)
    run.wait(60)
    assert run.status == "failed" and run.error.startswith("pi exited with code -9")
    assert record("kill pi", proj, [run]) == []


# -- the model fails --------------------------------------------------------------------------------
def test_http_500_from_the_model(proj, model):
    model.script = [{"error": {"status": 500, "message": "upstream exploded"}}]
    run = nbsubagents.run("scout", "say: hi", show=False)
    assert run.status == "failed" and "upstream exploded" in run.error
    assert record("HTTP 500", proj, [run]) == []


def test_a_closed_port(proj, tmp_path):
    with socket.socket() as sock:  # a port that was just free: nothing listens there now
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    write_agent_dir(tmp_path / "agent", f"http://127.0.0.1:{port}/v1")
    started = time.monotonic()
    run = nbsubagents.run("scout", "say: hi", show=False)
    assert run.status == "failed" and "connection" in run.error.lower(), run.error
    assert time.monotonic() - started < 60
    assert record("closed port", proj, [run]) == []


# -- pi's output ------------------------------------------------------------------------------------
def test_garbage_and_a_50_mb_line_on_stdout(proj, tmp_path):
    """A wrapper prints garbage and one 50 MB line on pi's stdout, then becomes the real pi."""
    wrapper = tmp_path / "noisy-pi"
    wrapper.write_text("#!/bin/sh\n"
                       "printf 'not json {\\377\\376 broken utf8\\n'\n"
                       "head -c 52428800 /dev/zero | tr '\\0' x\n"
                       "printf '\\n'\n"
                       f"exec {shlex.join(pi_command(str(PI)))} \"$@\"\n")  # pi 1.x: on the node beside it
    wrapper.chmod(0o755)
    config.configure(pi=str(wrapper))
    run = nbsubagents.run("scout", "read README.md", show=False)
    assert run.status == "completed", run.error
    texts = [e["text"] for e in run.events() if e["type"] == "stdout_text"]
    assert texts[0] == "not json {\ufffd\ufffd broken utf8"
    assert texts[1] == "[a stdout line of 52428800 bytes was too long to parse]"
    assert (run.dir / "stdout.log").stat().st_size > 50 * 1024 * 1024
    assert "# Fault project" in run.output
    assert record("garbage + 50 MB stdout line", proj, [run]) == []


# -- the disk ---------------------------------------------------------------------------------------
def test_a_disk_that_fills_up_during_the_run(proj):
    """Lines are lost, never result.json: the supervisor holds room for it from its start."""
    from mounts import small_disk

    runs = proj / ".pi" / "subagents" / "runs"
    with small_disk(runs, "1m"):
        run = nbsubagents.start("scout", "run: echo before\nsleep: 2\nsay: after the disk filled", show=False)
        wait_for(lambda: any(e["type"] == "tool_result" for e in run.events()), 60, "the tool's result")
        filler = runs / "filler"
        fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
        try:  # fill the disk to the last byte
            while os.write(fd, b"\0" * 4096):
                pass
        except OSError:
            pass
        finally:
            os.close(fd)
        run.wait(60)
        result = json.loads((run.dir / "result.json").read_text())
        assert result["status"] in ("completed", "failed"), result
        assert result["status"] == "completed" or result["errorMessage"], result
        left = record("full disk during a run", proj, [run])
        files = sorted(p.name for p in run.dir.iterdir())
        filler.unlink()
    assert ".result-reserve" not in files and not any(f.endswith(".tmp") for f in files), files
    assert left == []


def test_a_full_disk_before_the_run_writes_nothing(proj):
    from mounts import small_disk

    runs = proj / ".pi" / "subagents" / "runs"
    with small_disk(runs, "16k"):
        (runs / "filler").write_bytes(b"\0" * 12 * 1024)
        big = "say: " + "x" * 20000  # the prompt alone does not fit
        with pytest.raises(nbsubagents.NbSubagentsError, match="Cannot write the run directory .*No space left"):
            nbsubagents.run("scout", big, show=False)
        assert sorted(p.name for p in runs.iterdir()) == ["filler"]
        note("full disk before a run", "NbSubagentsError: Cannot write the run directory",
             left_behind(proj, []))


def test_a_read_only_runs_folder(proj):
    from mounts import read_only

    runs = proj / ".pi" / "subagents" / "runs"
    runs.mkdir(parents=True)
    with read_only(runs):
        with pytest.raises(nbsubagents.NbSubagentsError, match="Cannot create the run directory") as err:
            nbsubagents.run_parallel([{"preset": "scout", "task": "say: a"}, {"preset": "scout", "task": "say: b"}],
                                     show=False)
    assert list(runs.iterdir()) == []
    note("read-only runs folder", f"NbSubagentsError: {str(err.value)[:60]}…", left_behind(proj, []))


# -- many at once -----------------------------------------------------------------------------------
def test_ten_cancels_at_once_from_another_process(proj):
    run = nbsubagents.start("scout", "run: sleep 60", show=False)
    wait_for(lambda: len(procs.run_processes(run.id)) >= 2, 60, "pi and its tool")
    code = ("import sys, threading, nbsubagents\n"
            "barrier = threading.Barrier(10)\nanswers = []\n"
            "def cancel():\n"
            "    barrier.wait()\n"
            "    try:\n"
            "        answers.append(nbsubagents.cancel(sys.argv[1]))\n"
            "    except Exception as exc:\n"
            "        answers.append(repr(exc))\n"
            "threads = [threading.Thread(target=cancel) for _ in range(10)]\n"
            "[t.start() for t in threads]; [t.join() for t in threads]\n"
            "print(answers)\n")
    out = subprocess.run([sys.executable, "-c", code, run.id], capture_output=True, text=True, timeout=120,
                         stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr
    answers = eval(out.stdout)  # a list of True/False or error reprs printed by the child
    assert len(answers) == 10 and all(isinstance(a, bool) for a in answers) and any(answers), answers
    run.wait(60)
    assert run.status == "aborted" and run.error == "cancelled"
    assert [e["type"] for e in run.events()].count("run_end") == 1
    assert record("10 cancels at once", proj, [run], f"aborted; cancel() answered {answers.count(True)}x True") == []


@pytest.mark.slow
def test_sixty_four_runs_at_once(proj):
    config.configure(max_tasks=64)
    tasks = [{"preset": "scout", "task": f"say: run {i}", "name": f"r{i}"} for i in range(64)]
    started = time.monotonic()
    runs = nbsubagents.run_parallel(tasks, concurrency=64, show=False)
    took = time.monotonic() - started
    assert [r.status for r in runs] == ["completed"] * 64, [r.error for r in runs if r.status != "completed"][:3]
    assert all(f"run {i}" in r.output for i, r in enumerate(runs))
    counts = registry.counts(proj)
    assert counts["completed"] == 64 and counts["running"] == 0
    assert record("64 runs at once", proj, runs, f"64 completed in {took:.0f}s") == []


# -- secrets and terminal safety (issue 22: items 3, 4 and 9) ------------------------------------------
LONG_KEY = "sk-test-SUPERSECRETVALUE0123456789" + "abcdefghij" * 8  # longer than any line the formatter keeps
HOSTILE = "\x1b]52;c;ZXZpbA==\x07\x1b]0;pwned\x07\x1b[2J"  # clipboard write, window title, clear screen


def test_a_key_is_masked_in_reports_static_records_and_browse_also_cut_short(proj, monkeypatch):
    """The key in a secret-named variable, printed by the run: the report's lines cut it short
    (``sk-test-SUPERSECRETVALUE012345…``); nothing a person shares holds any of it."""
    from nbsubagents._ui.display import run_mimebundle
    from nbsubagents._views.panel_state import PanelState

    monkeypatch.setenv("ACME_API_KEY", LONG_KEY)
    run = nbsubagents.run("scout", f"say: the key is {LONG_KEY}\nrun: echo {LONG_KEY}", show=False)
    assert run.status == "completed" and LONG_KEY in run.record.task  # planted where every view reads
    assert "SUPERSECRET" not in run.transcript  # what the run wrote is masked already (its supervisor knew the key)
    pages = {"html": run.report(proj / "r.html").read_text(), "md": run.report(proj / "r.md").read_text()}
    assert all("SUPERSECRET" not in page and "••••••" in page for page in pages.values()), \
        [page[page.find("SUPERSECRET") - 40:page.find("SUPERSECRET") + 40] for page in pages.values()]
    bundle = run_mimebundle(run)  # the static record a saved notebook keeps
    state = PanelState.of_run(run)
    records = [bundle["text/plain"], bundle["text/html"], state.static_text(), state.static_html()]
    assert not any("SUPERSECRET" in r for r in records) and all("••••••" in r for r in records)
    browser = nbsubagents.browse(live=False)
    try:
        browser.select(run.id)
        shown = [browser.header_html.value, browser.output_html.value, browser.transcript_html.value,
                 browser.events_html.value, browser.table_html.value, *browser.labels]
    finally:
        browser.close()
    assert not any("SUPERSECRET" in s for s in shown) and "••••••" in browser.transcript_html.value
    note("key cut short: report/record/browse", "masked in html, md, static record, browse",
         left_behind(proj, [run.id]))


def test_to_mlflow_masks_params_tags_and_every_artifact(proj, tmp_path, monkeypatch):
    """A real SQLite-backed MLflow store: no param, tag or artifact (events, stdout, session, meta,
    transcript, result, ...) holds the key; nor does the experiment's frame (what ``to_parquet`` writes)."""
    mlflow = pytest.importorskip("mlflow")
    monkeypatch.setenv("ACME_API_KEY", LONG_KEY)
    exp = nbsubagents.experiment(
        "leaky", tasks=[{"id": "t", "task": f"run: echo {LONG_KEY}", "hint": f"key {LONG_KEY}"}], presets="scout",
        tags={"note": f"uses {LONG_KEY}"}, scorers=[lambda run: len(run.output)], show=False)
    (run,) = exp.runs()
    assert "SUPERSECRET" not in (run.dir / "stdout.log").read_text() and LONG_KEY in run.record.task
    table = exp.frame()  # what to_parquet/to_csv export travels in
    assert "SUPERSECRET" not in table.to_csv() and table["params.hint"].iloc[0] == "key ••••••"
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    experiment_id = exp.to_mlflow(uri, artifact_location=(tmp_path / "mlartifacts").as_uri())
    (found,) = mlflow.MlflowClient(uri).search_runs([experiment_id])
    values = json.dumps([found.info.run_name, found.data.params, found.data.tags], ensure_ascii=False)
    assert "SUPERSECRET" not in values and found.data.params["hint"] == "key ••••••", values
    assert found.data.tags["note"] == "uses ••••••"
    files = [p for p in (tmp_path / "mlartifacts").rglob("*") if p.is_file()]
    names = {p.name for p in files}
    assert {"meta.json", "events.jsonl", "stdout.log", "transcript.log", "result.json"} <= names, names
    leaked = [p.name for p in files if b"SUPERSECRET" in p.read_bytes()]
    assert leaked == []
    assert json.loads(next(p for p in files if p.name == "meta.json").read_text())["task"].startswith("run: echo ")
    mlflow.set_tracking_uri(uri)
    (trace,) = mlflow.search_traces(locations=[experiment_id], return_type="list")  # its spans: task, tool calls
    spans = trace.to_json()
    assert "SUPERSECRET" not in spans
    assert "run: echo ••••••" in json.loads(spans)["data"]["spans"][0]["attributes"]["mlflow.spanInputs"]
    assert b"SUPERSECRET" not in (tmp_path / "mlflow.db").read_bytes()  # nowhere in the store
    note("to_mlflow of a leaky run", f"{len(files)} artifacts, params and tags masked",
         left_behind(proj, [run.id]))


def test_cli_status_and_runs_show_control_characters_escaped(proj):
    """OSC 52, OSC 0 and ESC[2J in a run's words reach the terminal as text (``\\x1b``), never as bytes."""
    run = nbsubagents.run("scout", f"run: printf 'out \\033]0;title\\007 \\233x'\nsay: look {HOSTILE} here",
                          show=False, name=f"name{HOSTILE}")
    assert "\x1b]52" in run.output
    env = {**os.environ, "NBSUBAGENTS_ROOT": str(proj)}
    outs = [subprocess.run([sys.executable, "-m", "nbsubagents._cli", *args], capture_output=True, env=env,
                           cwd=proj, timeout=60) for args in (["status", run.id], ["runs"], ["status", "--all"])]
    for out in outs:
        assert out.returncode == 0, out.stderr
        text = out.stdout.decode("utf-8")
        bad = [hex(ord(c)) for c in text if (ord(c) < 0x20 and c not in "\n\t") or 0x7f <= ord(c) <= 0x9f]
        assert bad == [], bad
    detail = outs[0].stdout.decode()
    assert "\\x1b]52;c;ZXZpbA==\\x07" in detail and "\\x1b[2J" in detail and f"run {run.id}" in detail
    assert "name\\x1b]52" in outs[1].stdout.decode()
    note("CLI: OSC 52, OSC 0, ESC[2J", "shown escaped in status RUN, runs, status --all",
         left_behind(proj, [run.id]))


def test_reports_escape_markdown_and_carry_no_control_bytes(proj):
    """A run named to break Markdown and a file name with backticks: the report reads as written; NUL and ESC
    the run printed are not in either format."""
    mistune = pytest.importorskip("mistune")
    name = "evil`](http://x) <img src=x onerror=alert(1)> | # **b**"
    task = f"say: out \x1b[31mred{HOSTILE}\nwrite a`b`<i>.md: hello\nrun: printf 'nul\\000 esc\\033[2J end'"
    (proj / ".pi" / "subagents" / "scribe.md").write_text(SCRIBE.replace("read, write, edit", "read, write, bash"))
    run = nbsubagents.run("scribe", task, show=False, name=name)
    assert run.status == "completed" and "a`b`<i>.md" in run.files_changed, (run.error, run.files_changed)
    md_text = run.report(proj / "r.md").read_text()
    html_text = run.report(proj / "r.html").read_text()
    for text in (md_text, html_text):
        assert not any(c in text for c in "\x00\x1b\x07\x9b"), [hex(ord(c)) for c in text if c in "\x00\x1b\x07"]
    rendered = mistune.create_markdown(escape=False, plugins=["table"])(md_text)
    assert "<img" not in rendered and "<strong>b</strong>" not in rendered and 'href="http://x"' not in rendered
    assert "<code>a`b`&lt;i&gt;.md</code>" in rendered, rendered[rendered.find("Files changed"):][:300]
    heading = next(line for line in rendered.splitlines() if line.startswith("<h2>"))
    assert "evil`](http://x) &lt;img" in heading
    note("report: markdown and control bytes", "escaped name, unbreakable code span, no NUL/ESC",
         left_behind(proj, [run.id]))


def test_a_full_disk_leaves_no_temporary_report_and_the_old_one_whole(proj):
    from mounts import small_disk

    run = nbsubagents.run("scout", "say: " + "words " * 2000, show=False)
    reports = proj / "reports"
    with small_disk(reports, "64k"):
        old = run.report(reports / "r.html")
        before = old.read_bytes()
        fd = os.open(reports / "filler", os.O_WRONLY | os.O_CREAT)
        try:  # fill the disk to the last byte
            while os.write(fd, b"\0" * 4096):
                pass
        except OSError:
            pass
        finally:
            os.close(fd)
        with pytest.raises(nbsubagents.NbSubagentsError, match=r"Cannot write the report to .*No space left"):
            run.report(reports / "r.html")
        with pytest.raises(nbsubagents.NbSubagentsError, match=r"Cannot write the report to .*No space left"):
            run.report(reports / "new.md")
        left = sorted(p.name for p in reports.iterdir())
        same = old.read_bytes() == before
    assert left == ["filler", "r.html"] and same, left
    note("report on a full disk", "NbSubagentsError; no temporary file; old report whole",
         left_behind(proj, [run.id]))


# -- runs that settle and a registry that heals (issue 22: items 6 and 7) -----------------------------------
def test_a_run_whose_folder_is_deleted_ends_failed_and_leaves_no_half_folder(proj):
    """Deleting a running run's folder: its supervisor ends the child and makes no half folder; the run (and its
    registry row) end failed saying why, here and in another process's status()."""
    run = nbsubagents.start("scout", "run: sleep 60", show=False)
    wait_for(lambda: len(procs.run_processes(run.id)) >= 2, 60, "pi and its tool")
    sup = json.loads((run.dir / "supervisor.json").read_text())
    subprocess.run(["rm", "-rf", str(run.dir)], check=True)
    run.wait(30)
    assert run.status == "failed" and run.error == "its run folder was deleted while it ran", (run.status, run.error)
    wait_for(lambda: not procs.alive(sup["pid"], sup["startTicks"]), 30, "the supervisor to end")
    time.sleep(0.5)
    assert not run.dir.exists(), sorted(p.name for p in run.dir.iterdir())  # nothing recreated
    row = {r["run_id"]: r for r in registry.snapshot(include_completed=True, root=proj).rows}[run.id]
    assert row["status"] == "failed" and row["error_message"] == "its run folder was deleted while it ran"
    assert record("run folder deleted", proj, [run]) == []


def test_a_run_of_a_killed_launcher_whose_folder_is_deleted_is_settled_by_status(proj):
    proc = launcher("r = nbsubagents.start('scout', 'run: sleep 60', show=False)\nprint(r.id, flush=True)", proj)
    try:
        run_id = proc.stdout.readline().strip()
        wait_for(lambda: len(procs.run_processes(run_id)) >= 2, 60, "pi and its tool")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        proc.stdout.close()
    run_dir = proj / ".pi" / "subagents" / "runs" / run_id
    subprocess.run(["rm", "-rf", str(run_dir)], check=True)
    rows = {r["run_id"]: r for r in reconcile.status(include_completed=True, root=proj).rows}
    assert rows[run_id]["status"] == "failed", rows[run_id]
    assert rows[run_id]["error_message"] == "its run folder was deleted while it ran"
    wait_for(lambda: not procs.run_processes(run_id), 30, "the run's processes to end")
    time.sleep(0.5)
    assert not run_dir.exists()
    assert record("folder deleted, launcher gone", proj, [run_id], "failed: run folder deleted") == []


def test_runs_shows_the_end_of_a_run_that_another_process_saw_finish(proj):
    """runs() stays a pure read (no reconcile) yet shows what the run directory says: a run of a killed kernel
    that completed is completed in runs() and snapshot(), without status() being called."""
    proc = launcher("r = nbsubagents.start('scout', 'run: sleep 3\\nsay: done elsewhere', show=False)\n"
                    "print(r.id, flush=True)", proj)
    try:
        run_id = proc.stdout.readline().strip()
        wait_for(lambda: (proj / ".pi" / "subagents" / "runs" / run_id / "supervisor.json").exists(), 60,
                 "the supervisor")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        proc.stdout.close()
    before = nbsubagents.runs()
    assert before.set_index("run_id").loc[run_id, "status"] in ("queued", "running")
    wait_for(lambda: result_of(proj, run_id) if (proj / ".pi" / "subagents" / "runs" / run_id / "result.json")
             .exists() else None, 60, "the run's result")
    frame = nbsubagents.runs().set_index("run_id")
    assert frame.loc[run_id, "status"] == "completed", frame.loc[run_id, "status"]
    assert frame.loc[run_id, "tool_calls"] == 1
    row = registry.snapshot(run_id, root=proj).rows[0]
    assert row["status"] == "completed" and "done elsewhere" in row["final_text"]
    assert record("runs() of another's run", proj, [run_id], "completed in runs() without status()") == []


def test_a_corrupt_registry_is_moved_aside_and_rebuilt_from_the_run_directories(proj, capfd):
    first = nbsubagents.run("scout", "say: before the damage", show=False)
    db = registry.db_path(proj)

    def damage():
        db.write_bytes(b"this is no database\n" * 400)

    damage()  # a process that used it before: the next connection heals it
    with pytest.warns(RuntimeWarning, match="moved aside to registry.sqlite.corrupt-"):
        frame = nbsubagents.runs()
    assert frame.set_index("run_id").loc[first.id, "status"] == "completed"
    # the damaged file, with the WAL and shared memory this process had open on it (moved with it, never applied)
    aside = sorted(p.name for p in db.parent.glob("registry.sqlite.corrupt-*") if not p.name.endswith(("-wal", "-shm")))
    assert len(aside) == 1 and (db.parent / aside[0]).read_bytes().startswith(b"this is no database")

    damage()  # rebuild() itself heals
    with pytest.warns(RuntimeWarning, match="moved aside"):
        assert registry.rebuild(proj) == 1

    damage()  # a run that ends over a damaged registry: no traceback, its row is there
    capfd.readouterr()
    with pytest.warns(RuntimeWarning, match="moved aside"):
        second = nbsubagents.start("scout", "say: after the damage", show=False)
        second.wait(60)
        watcher.settle(second.id, 10)
    err = capfd.readouterr().err
    assert "Traceback" not in err and "not a database" not in err.replace("(file is not a database)", ""), err
    assert second.status == "completed"
    assert {r["run_id"]: r["status"] for r in registry.snapshot(include_completed=True, root=proj).rows} == {
        first.id: "completed", second.id: "completed"}

    damage()  # another process, the CLI, on first use
    cli = subprocess.run([sys.executable, "-m", "nbsubagents._cli", "runs"], capture_output=True, text=True,
                         timeout=120, cwd=proj, stdin=subprocess.DEVNULL)
    assert cli.returncode == 0, cli.stderr
    assert first.id in cli.stdout and second.id in cli.stdout and "moved aside" in cli.stderr
    assert "Traceback" not in cli.stderr
    assert len(list(db.parent.glob("registry.sqlite.corrupt-*[0-9]"))) == 4  # every damaged file kept
    assert record("corrupt registry", proj, [first, second], "moved aside and rebuilt 4x; no traceback") == []


def test_queued_dask_runs_of_a_dead_kernels_local_cluster_settle_and_cancel(proj, monkeypatch):
    """The kernel owning a LocalCluster dies with one run running and two queued: the running one ends (worker
    lost), a cancel of a queued one settles it cancelled, the other ends failed once its scheduler has been
    unreachable for the grace; nothing stays queued or running."""
    pytest.importorskip("distributed", reason="the dask extra: pip install -e '.[dask]'")
    code = ("import distributed\n"
            "lc = distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, protocol='tcp://',"
            " resources={'nbsubagents': 1}, dashboard_address=None)\n"
            "client = distributed.Client(lc)\n"
            "rs = [nbsubagents.start('scout', task, executor='dask', dask_client=client, show=False)\n"
            "      for task in ('run: sleep 60', 'say: never one', 'say: never two')]\n"
            "print(' '.join(r.id for r in rs), flush=True)\n")
    proc = launcher(code, proj)
    try:
        ids = proc.stdout.readline().split()
        assert len(ids) == 3, ids
        wait_for(lambda: len(procs.run_processes(ids[0])) >= 2, 90, "the first run's pi and its tool")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        proc.stdout.close()
    monkeypatch.setattr(dask_launcher, "SCHEDULER_GRACE", 3.0)  # 10 s by default: the bound, not its length
    started = time.monotonic()
    assert nbsubagents.cancel(ids[1]) is True
    assert nbsubagents.get_run(ids[1]).status == "aborted"

    def settled():
        rows = {r["run_id"]: r for r in reconcile.status(include_completed=True, root=proj).rows}
        return rows if all(rows[i]["status"] not in ("queued", "running") for i in ids) else None

    rows = wait_for(settled, dask_launcher.SCHEDULER_GRACE + 60, "every run to settle")
    took = time.monotonic() - started
    assert rows[ids[1]]["status"] == "aborted"
    assert rows[ids[2]]["status"] == "failed" and "scheduler" in rows[ids[2]]["error_message"]
    assert rows[ids[0]]["status"] in ("failed", "aborted")
    assert record("dask: scheduler gone", proj, ids,
                  f"{', '.join(rows[i]['status'] for i in ids)} within {took:.0f}s") == []


def cli_statuses(root: Path) -> dict[str, str]:
    """``nbsubagents status --all`` in a process of its own (a short CLI call): each run id's status."""
    out = subprocess.run([sys.executable, "-m", "nbsubagents", "status", "--all"], cwd=root, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    found = {}
    for line in out.stdout.splitlines():
        words = line.split()
        for status in ("queued", "running", "completed", "failed", "aborted"):
            if status in words:
                found.update({w: status for w in words if w[:8].isdigit() and "-" in w})
    return found


def test_a_queued_dask_run_shows_queued_and_short_cli_calls_settle_it_once_its_scheduler_is_gone(proj):
    """Issue 55, item 9: a queued Dask run is ``queued`` (not ``running``) in ``runs()`` and the CLI; once the
    process holding its scheduler is killed, short ``nbsubagents status --all`` calls (each a new process) settle
    it after the grace the run folder measures (the last time its scheduler was seen), not one each call starts
    afresh."""
    pytest.importorskip("distributed", reason="the dask extra: pip install -e '.[dask]'")
    code = ("import distributed\n"
            "lc = distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, protocol='tcp://',"
            " resources={'nbsubagents': 1}, dashboard_address=None)\n"
            "client = distributed.Client(lc)\n"
            "rs = [nbsubagents.start('scout', task, executor='dask', dask_client=client, show=False)\n"
            "      for task in ('run: sleep 60', 'say: never')]\n"
            "print(' '.join(r.id for r in rs), flush=True)\n")
    proc = launcher(code, proj)
    try:
        ids = proc.stdout.readline().split()
        assert len(ids) == 2, ids
        wait_for(lambda: len(procs.run_processes(ids[0])) >= 2, 90, "the first run's pi and its tool")
        listed = nbsubagents.runs()
        assert dict(zip(listed["run_id"], listed["status"]))[ids[1]] == "queued"
        seen = cli_statuses(proj)
        assert (seen[ids[0]], seen[ids[1]]) == ("running", "queued")
        counted = nbsubagents.status()
        assert counted.counts_line().startswith("1 running · 1 queued · "), counted.counts_line()  # not 2 running
    finally:
        proc.send_signal(signal.SIGKILL)  # the scheduler and its worker go with it
        proc.wait(30)
        proc.stdout.close()
    calls = []

    def settled():
        calls.append(cli_statuses(proj))
        return calls[-1] if calls[-1][ids[1]] not in ("queued", "running") else None

    seen = wait_for(settled, dask_launcher.SCHEDULER_GRACE + 50, "a short CLI call to settle the queued run")
    assert seen[ids[1]] == "failed"
    row = next(r for r in reconcile.status(include_completed=True, root=proj).rows if r["run_id"] == ids[1])
    assert "scheduler" in row["error_message"] and "never started" in row["error_message"]
    wait_for(lambda: cli_statuses(proj)[ids[0]] not in ("queued", "running"), 90, "the running one to settle")
    assert record("dask: scheduler gone, CLI", proj, ids, f"settled by the CLI after {len(calls)} calls") == []


# -- experiments that cannot mix or double (issue 22, item 5) -----------------------------------------
def test_a_changed_plan_under_an_old_name_is_refused_and_replace_starts_it_afresh(proj):
    from nbsubagents._config import NbSubagentsError

    exp = nbsubagents.experiment("mix", tasks=[{"id": "a", "task": "say: alpha"}], presets="scout", show=False)
    first = [r.id for r in exp.runs()]
    assert len(first) == 1
    for changed, what in ((dict(tasks=[{"id": "a", "task": "say: beta"}]), "tasks"),
                          (dict(tasks=[{"id": "b", "task": "say: alpha"}]), "tasks"),
                          (dict(tasks=[{"id": "a", "task": "say: alpha"}], timeout=77), "run options"),
                          (dict(tasks=[{"id": "a", "task": "say: alpha"}], scorers=[nbsubagents.check("true")]),
                           "scorers")):
        with pytest.raises(NbSubagentsError, match=f"defined with other {what} .*new name.*replace=True"):
            nbsubagents.experiment("mix", presets="scout", show=False, **changed)
    assert [r.id for r in nbsubagents.get_experiment("mix").runs()] == first  # nothing ran, nothing mixed
    same = nbsubagents.experiment("mix", tasks=[{"id": "a", "task": "say: alpha"}], presets="scout", show=False)
    assert [r.id for r in same.runs()] == first  # the same definition resumes: nothing to run
    again = nbsubagents.experiment("mix", tasks=[{"id": "b", "task": "say: beta"}], presets="scout", show=False,
                                   replace=True)
    frame = again.frame()
    assert list(frame["params.task_id"]) == ["b"] and first[0] not in frame.index
    assert "beta" in again.runs()[0].output
    assert list(again.compare(by="task_id").table.index) == ["b"]  # the old cell does not mix in
    assert len(again.frame(all_runs=True)) == 1
    assert nbsubagents.experiments().set_index("name").loc["mix", "runs"] == 1
    assert (proj / ".pi" / "subagents" / "runs" / first[0] / "result.json").is_file()  # kept on disk
    assert record("changed plan, old name", proj, again.runs(), "refused (tasks, ids, options, scorers); "
                  "replace=True: 1 run of the new plan") == []


def test_one_experiment_runs_in_one_process_at_a_time(proj):
    from nbsubagents._config import NbSubagentsError

    tasks = ["sleep: 1.5\nsay: one", "sleep: 1.5\nsay: two"]
    code = (f"import nbsubagents\nnbsubagents.experiment('twice', tasks={tasks!r}, presets='scout', concurrency=1, "
            "show=False)\n")
    other = subprocess.Popen([sys.executable, "-c", code], cwd=proj, stdin=subprocess.DEVNULL)
    try:
        runs = proj / ".pi" / "subagents" / "runs"
        wait_for(lambda: runs.is_dir() and any(runs.iterdir()), 60, "the other process's first run")
        started = time.monotonic()
        with pytest.raises(NbSubagentsError, match=f"being run by process {other.pid} .*one process at a time"):
            nbsubagents.experiment("twice", tasks=tasks, presets="scout", concurrency=1, show=False)
        assert time.monotonic() - started < 5  # refused at once, not after running anything
        with pytest.raises(NbSubagentsError, match=f"process {other.pid}"):
            nbsubagents.get_experiment("twice").resume(show=False)
        assert other.wait(60) == 0
    finally:
        if other.poll() is None:
            other.kill()
            other.wait()
    exp = nbsubagents.get_experiment("twice")
    assert len(list(runs.iterdir())) == 2 and len(exp.frame()) == 2 and set(exp.frame()["status"]) == {"completed"}
    again = nbsubagents.experiment("twice", tasks=tasks, presets="scout", concurrency=1, show=False)  # free again
    assert len(list(runs.iterdir())) == 2 and len(again.frame()) == 2
    assert record("same experiment, two processes", proj, exp.runs(), "the second refused, naming the first; "
                  "2 runs, not 4") == []


def test_scorers_that_hang_or_exit_are_recorded_per_run_and_the_sweep_goes_on(proj):
    def stubborn(run):  # never returns, and swallows what it can
        while True:
            try:
                time.sleep(0.05)
            except Exception:
                pass

    def exits(run):
        raise SystemExit(3)

    def chars(run):
        return len(run.output)

    handler = signal.getsignal(signal.SIGALRM)
    started = time.monotonic()
    exp = nbsubagents.experiment("scorers", tasks=["say: one", "say: two"], presets="scout", concurrency=2,
                                 scorers=[stubborn, exits, chars], scorer_timeout=0.5, show=False)
    took = time.monotonic() - started
    runs = exp.runs()
    assert [r.status for r in runs] == ["completed", "completed"] and took < 30
    for run in runs:
        stored = json.loads((run.dir / "scores.json").read_text())
        assert stored["scores"] == {"chars": len(run.output)}
        assert stored["errors"]["stubborn"].startswith("ScorerTimeout: did not return within 0.5s")
        assert stored["errors"]["exits"] == "SystemExit: 3"
    assert signal.getsignal(signal.SIGALRM) == handler  # the process's own alarm handler is back
    exp.rescore(chars, timeout=0.5)  # rescore keeps the others' errors and runs under its limit too
    assert all(r.scores == {"chars": len(r.output)} for r in exp.runs())
    assert record("scorer hangs / SystemExit", proj, runs, f"both runs scored in {took:.1f}s; errors recorded "
                  "per run") == []


def test_score_names_are_unique_and_rescore_replaces_a_scorers_keys(proj):
    from nbsubagents._config import NbSubagentsError

    assert nbsubagents.check("pytest -q tests/a").name != nbsubagents.check("pytest -q tests/b").name
    present, absent = nbsubagents.check("test -f README.md"), nbsubagents.check("test -f missing.md")
    exp = nbsubagents.experiment("names", tasks=["say: one"], presets="scout", scorers=[present, absent], show=False)
    run = exp.runs()[0]
    assert run.scores == {present.name: True, absent.name: False}
    assert "README.md" in (run.dir / "checks" / f"{present.name}.log").read_text()
    assert "missing.md" in (run.dir / "checks" / f"{absent.name}.log").read_text()
    with pytest.raises(NbSubagentsError, match="Two scorers score under the name 'same'"):
        exp.rescore(nbsubagents.check("true", name="same"), nbsubagents.check("false", name="same"))

    def parts(run):
        return {"x": 1, "y": 2}

    exp.rescore(parts)
    assert run.scores == {present.name: True, absent.name: False, "x": 1, "y": 2}

    def parts(run):  # noqa: F811 (the same scorer, changed: it no longer says y)
        return {"x": 3}

    exp.rescore(parts)
    assert run.scores == {present.name: True, absent.name: False, "x": 3}
    assert exp.frame().loc[run.id].get("scores.y") is None
    assert record("score names, rescore", proj, [run], "distinct checks and logs; a dropped key is gone") == []


def test_a_failed_mlflow_export_is_done_again(proj, tmp_path):
    mlflow = pytest.importorskip("mlflow")
    exp = nbsubagents.experiment("export", tasks=["say: one"], presets="scout", show=False)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    blocker = tmp_path / "mlartifacts"
    blocker.write_text("a file where the artifact folder goes: the first export fails half-way\n")
    with pytest.raises(Exception):
        exp.to_mlflow(uri, artifact_location=blocker.as_uri())
    blocker.unlink()
    experiment_id = exp.to_mlflow(uri)
    assert exp.to_mlflow(uri) == experiment_id  # and a third adds nothing
    client = mlflow.MlflowClient(uri)
    found = client.search_runs([experiment_id])
    assert sorted(r.data.tags["nbsubagents.run_id"] for r in found) == sorted(r.id for r in exp.runs())
    for found_run in found:
        assert found_run.info.status == "FINISHED"
        assert {"meta.json", "result.json"} <= {a.path for a in client.list_artifacts(found_run.info.run_id)}
    assert record("failed MLflow export", proj, exp.runs(), "exported again: a finished MLflow run, none empty") == []


# -- replies that could break the supervisor (issue 22, item 2) -------------------------------------
def replying(text: str):
    """A model that answers every request with ``text`` (the run's whole reply)."""
    return lambda body, index: {"text": text}


CATASTROPHIC = {"type": "object", "properties": {"word": {"type": "string", "pattern": "^(a+)+$"}},
                "required": ["word"]}
CATASTROPHIC_REPLY = 'The word:\n```json\n{"word": "' + "a" * 34 + '!"}\n```'


def reply_checkers(run_id: str) -> list[int]:
    """The run's processes checking its reply (``python -m nbsubagents._child.reply_check``)."""
    found = []
    for pid in procs.run_processes(run_id):
        try:
            if b"reply_check" in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(pid)
        except OSError:
            pass
    return found


@pytest.mark.parametrize("fenced", [True, False], ids=["fenced", "bare"])
def test_a_reply_nested_thousands_deep(proj, model, fenced):
    """json.loads of 5000 nested '[' raised RecursionError in the supervisor: no result, no output. Now the check
    refuses it by name and the reply is kept."""
    value = "[" * 5000 + "]" * 5000
    reply = f"The list:\n```json\n{value}\n```" if fenced else f"The list: {value}"
    model.script = replying(reply)
    run = nbsubagents.run("scout", "give the list", show=False, output_schema={"type": "array"})
    assert run.status == "failed", run.error
    assert run.result["stopReason"] == "schema" and "nested too deeply" in run.error, run.error
    assert run.output == reply and run.data is None
    assert any(e["type"] == "run_end" for e in run.events()) and "give the list" in run.transcript
    assert record(f"reply nested 5000 deep ({'fenced' if fenced else 'bare'})", proj, [run]) == []


def test_an_unresolvable_ref_is_refused_before_the_run(proj):
    """It raised at validation, after the whole run: now the run is refused before it starts, naming the ref."""
    schema = {"type": "object", "properties": {"item": {"$ref": "#/$defs/Missing"}}, "$defs": {"Item": {}}}
    with pytest.raises(nbsubagents.NbSubagentsError, match=r"the \$ref '#/\$defs/Missing' at \$\.properties\.item "
                                                          r"cannot be resolved") as err:
        nbsubagents.run("scout", "say: x", show=False, output_schema=schema)
    runs = proj / ".pi" / "subagents" / "runs"
    assert not runs.exists() or list(runs.iterdir()) == []
    note("unresolvable $ref", f"refused: {str(err.value)[:60]}…", left_behind(proj, []))


def test_a_catastrophic_pattern_is_ended_by_the_runs_timeout(proj, model):
    """'^(a+)+$' against 34 a's and a '!' backtracks for hours: the supervisor spun at 90% CPU past its timeout.
    Now the check runs in a process of its own that the run's timeout ends."""
    model.script = replying(CATASTROPHIC_REPLY)
    started = time.monotonic()
    run = nbsubagents.run("scout", "say the word", show=False, output_schema=CATASTROPHIC, timeout=10)
    took = time.monotonic() - started
    assert run.status == "failed" and run.result["stopReason"] == "timeout", run.error
    assert "while the reply was checked against output_schema" in run.error, run.error
    assert run.output == CATASTROPHIC_REPLY
    assert took < 30, took
    assert record("catastrophic pattern: timeout", proj, [run], f"failed after {took:.0f}s: {run.error[:50]!r}") == []


@pytest.mark.parametrize("how", ["cancel", "SIGTERM"])
def test_a_catastrophic_pattern_is_ended_by_cancel_and_sigterm(proj, model, how):
    """cancel() answered True and changed nothing; SIGTERM did not end the supervisor. Both end the check now."""
    model.script = replying(CATASTROPHIC_REPLY)
    run = nbsubagents.start("scout", "say the word", show=False, output_schema=CATASTROPHIC)
    wait_for(lambda: reply_checkers(run.id), 60, "the reply's check")
    asked = time.monotonic()
    if how == "cancel":
        assert run.cancel() is True
    else:
        os.kill(json.loads((run.dir / "supervisor.json").read_text())["pid"], signal.SIGTERM)
    run.wait(60)
    took = time.monotonic() - asked
    assert run.status == "aborted" and run.error == "cancelled" and run.result["stopReason"] == "cancelled"
    assert run.output == CATASTROPHIC_REPLY
    assert took < 10, took
    assert record(f"catastrophic pattern: {how}", proj, [run], f"aborted {took:.1f}s after {how}") == []


def test_a_reply_with_a_lone_surrogate(proj, model):
    """JSON may carry a lone surrogate ("\\ud800"), which is no text: writing it raised in the supervisor, which
    died without a result. Now it is replaced (U+FFFD) and the run completes with the rest of its reply."""
    model.script = replying("half a pair: \ud800 and the rest of the reply")
    run = nbsubagents.run("scout", "say: x", show=False)
    assert run.status == "completed", run.error
    assert run.output == "half a pair: \ufffd and the rest of the reply"
    assert record("reply with a lone surrogate", proj, [run]) == []


def supervise(run, inject: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """The real supervisor module on ``run`` (prepared, not launched), after the Python code ``inject`` ran with the
    module as ``s``: a fault injected into one of its steps."""
    code = f"import sys\nfrom nbsubagents._child import supervisor as s\n{inject}\nsys.exit(s.main([sys.argv[1]]))\n"
    with open(run.dir / "supervisor.log", "ab") as log:
        return subprocess.run([sys.executable, "-c", code, str(run.dir)], stdout=log, stderr=log,
                              stdin=subprocess.DEVNULL, cwd=run.record.cwd, timeout=timeout)


def test_a_catastrophic_pattern_is_ended_by_the_checks_own_limit(proj, model):
    """A run with a long timeout: the check's own limit (30 s, shortened here to 2 s) ends it."""
    model.script = replying(CATASTROPHIC_REPLY)
    run = prepare(TaskSpec(preset="scout", task="say the word", output_schema=CATASTROPHIC, timeout=3600),
                  mode="background")
    started = time.monotonic()
    try:
        supervise(run, "from nbsubagents._child import reply_process\nreply_process.REPLY_CHECK_SECONDS = 2", timeout=60)
    finally:
        for pid in procs.run_processes(run.id):  # before the fix: the check spun on inside the supervisor
            os.kill(pid, signal.SIGKILL)
    took = time.monotonic() - started
    result = result_of(proj, run.id)
    assert result["status"] == "failed" and result["stopReason"] == "schema", result
    assert result["errorMessage"].startswith("The reply could not be checked against output_schema within 2s: a "
                                             "`pattern` of the schema that backtracks catastrophically")
    assert result["finalText"] == CATASTROPHIC_REPLY
    assert record("catastrophic pattern: own limit", proj, [run.id],
                  f"failed after {took:.0f}s: {result['errorMessage'][:40]!r}") == []


SUPERVISOR_FAULTS = {
    # a guarded step after the child: the run fails with the step's name, keeping what the child said
    "a step after the child": ("verdict.reason", "The supervisor failed while naming why the run ended: "
                                                 "ZeroDivisionError"),
    # outside every guarded step: the last resort still writes a failed result with the reply
    "the supervisor's end": ("result_record", "The supervisor failed: ZeroDivisionError"),
}


@pytest.mark.parametrize("case", list(SUPERVISOR_FAULTS))
def test_a_supervisor_step_that_raises(proj, model, case):
    """A step of the supervisor's own raising (injected: the real supervisor module with one function replaced)
    left no result.json: 'interrupted: supervisor exited without a result' and run.output empty."""
    target, expected = SUPERVISOR_FAULTS[case]
    model.script = replying("the child's whole reply")
    run = prepare(TaskSpec(preset="scout", task="say: x"), mode="background")
    owner, _, name = target.rpartition(".")
    where = f"s.{owner}" if owner else "s"
    if owner:
        inject = f"{where}.{name} = lambda *a, **k: 1 / 0"
    else:  # a module-level function the end uses once: the first call raises, the last resort's succeeds
        inject = (f"real = s.{name}\ncalls = []\n"
                  f"def broken(*a, **k):\n    calls.append(1)\n    return real(*a, **k) if len(calls) > 1 else 1 / 0\n"
                  f"s.{name} = broken")
    proc = supervise(run, inject)
    result = result_of(proj, run.id)
    assert result["status"] == "failed" and result["stopReason"] == "supervisor_error", result
    assert result["errorMessage"].startswith(expected), result["errorMessage"]
    assert result["finalText"] == "the child's whole reply"
    assert "the child's whole reply" in (run.dir / "stdout.log").read_text()
    assert '"assistant_text"' in (run.dir / "events.jsonl").read_text()
    assert proc.returncode == (1 if not owner else 0)
    assert record(f"supervisor step raises ({case})", proj, [run.id],
                  f"failed: {result['errorMessage'][:50]!r}") == []


# -- isolation and checks (issue 22: isolation that holds, no leaks) ----------------------------------------------
ESCAPES = [  # each writes through a way out of the workspace that isolation must close
    "run: echo new > abs_link/new.txt",  # an absolute link to a folder of the project
    "run: echo changed > abs_link/app.py",
    "run: echo up > abs_link/../escaped.txt",  # `..` of that link's folder
    "run: echo rel > rel_link/rel.txt",  # a relative link to a folder of the project (inside the workspace)
    "run: echo climbs > climb_link/climbed.txt",  # relative, climbing out of the project and back in
    "run: sh -c 'cd -P abs_link/.. && echo away > cd-away.txt'",  # a child process that cd's away
    "run: cd \"$OLDPWD\" && echo old > via-oldpwd.txt",  # the kernel's OLDPWD (the project) would lead back
    "run: echo env > \"$PROJECT_DIR/via-env.txt\"",  # a variable naming the project
    "run: echo more >> hard.txt",  # a hard link to a file outside the project
]
ESCAPED = ["cd-away.txt", "escaped.txt", "hard.txt", "src/app.py", "src/climbed.txt", "src/new.txt", "src/rel.txt",
           "via-env.txt", "via-oldpwd.txt"]


@pytest.mark.parametrize("kind", ["git", "copy"])
def test_an_isolated_run_reaches_the_original_folder_through_no_link(proj, worktrees, tmp_path, monkeypatch, kind):
    """Symbolic links (absolute, relative, climbing), `..`, a child that cd's away, the environment, hard links:
    nothing reaches the original folder before apply(), and the patch holds every change."""
    (proj / "src").mkdir()
    (proj / "src" / "app.py").write_text("print('hi')\n")
    os.symlink(proj / "src", proj / "abs_link")
    os.symlink("src", proj / "rel_link")
    os.symlink(f"../{proj.name}/src", proj / "climb_link")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "shared.txt").write_text("shared\n")
    os.link(outside / "shared.txt", proj / "hard.txt")
    if kind == "git":
        (proj / ".gitignore").write_text(".pi/subagents/runs/\n")
        git(proj, "init", "-q")
        git(proj, "add", ".")
        git(proj, "commit", "-qm", "start")
    monkeypatch.setenv("OLDPWD", str(proj))
    monkeypatch.setenv("PROJECT_DIR", str(proj))
    before = files_of(proj)
    by_path = [f"run: echo abs > {proj}/via-abs.txt",  # the original folder by its absolute path
               f"run: cd {proj}/src && echo there > cd-abs.txt",
               f"run: sh -c 'cd {proj} && rm -rf src'"]
    git_works = ["run: git add -A && git commit -qm 'work in progress' && echo commits: $(git rev-list --count HEAD)"
                 ] * (kind == "git")

    run = nbsubagents.run("scout", "\n".join(ESCAPES + by_path + git_works), isolation="worktree", show=False)

    assert run.status == "completed", run.error
    assert run.record.isolation["kind"] == kind
    assert run.result["worktree"]["contained"] is True, run.result["worktree"]
    assert files_of(proj) == before  # nothing reached the original folder
    said = "".join(str(e.get("text", "")) for e in run.events())
    assert said.count("Read-only file system") >= 3, said  # what the child was told, each time
    if kind == "git":
        assert "commits: 2" in said, said  # git works in the workspace (its state is writable)
    assert (outside / "shared.txt").read_text() == "shared\n"
    assert sorted(run.files_changed) == ESCAPED
    assert "abs_link" not in run.diff and "climb_link" not in run.diff  # the links' rewrite is not a change
    left = worktrees_left(proj, worktrees)
    assert sorted(run.apply()) == ESCAPED
    assert (proj / "src" / "app.py").read_text() == "changed\n" and (proj / "escaped.txt").read_text() == "up\n"
    assert os.readlink(proj / "abs_link") == str(proj / "src")  # the project's own links are as they were
    assert record(f"isolation: links ({kind})", proj, [run], f"{run.status}; {len(ESCAPES) + len(by_path)} ways out held; "
                  f"worktrees left: {left or 'none'}") == [] and left == []


def test_an_isolated_run_that_cannot_be_contained_says_so(proj, worktrees, monkeypatch):
    """A project that holds the home folder cannot be made read-only (pi's own settings live there): the run goes
    on in its copy, and its result says it was not contained, and why."""
    monkeypatch.setenv("HOME", str(proj / "home"))
    run = nbsubagents.run("scout", "run: echo made > made.txt", isolation="worktree", show=False)
    assert run.status == "completed", run.error
    assert run.result["worktree"]["contained"] is False
    assert run.result["worktree"]["uncontainedBecause"] == (
        f"the original folder {proj.resolve()} holds the home folder {(proj / 'home').resolve()}")
    assert run.files_changed == ["made.txt"] and not (proj / "made.txt").exists()
    left = worktrees_left(proj, worktrees)
    assert record("isolation: uncontained", proj, [run], f"{run.status}; contained: false, said why; "
                  f"worktrees left: {left or 'none'}") == [] and left == []


@pytest.mark.parametrize("kind", ["git", "copy"])
def test_a_link_out_of_the_project_is_refused_before_the_run_by_name(proj, worktrees, tmp_path, kind):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "data.txt").write_text("precious\n")
    if kind == "git":
        git(proj, "init", "-q")
        git(proj, "add", "README.md")
        git(proj, "commit", "-qm", "start")
    refused = []
    for name, target in [("abs_out", str(outside)), ("rel_out", "../outside"), ("file_out", "../outside/data.txt")]:
        os.symlink(target, proj / name)
        with pytest.raises(nbsubagents.NbSubagentsError) as err:
            nbsubagents.run("scout", f"run: echo lost > {name}/x.txt; echo lost > file_out", isolation="worktree",
                            show=False)
        assert f"{name} -> {target}" in str(err.value) and "point outside" in str(err.value), str(err.value)
        refused.append(name)
        os.unlink(proj / name)
    assert sorted(p.name for p in outside.iterdir()) == ["data.txt"]
    assert (outside / "data.txt").read_text() == "precious\n"
    runs = proj / ".pi" / "subagents" / "runs"
    assert not any((d / "events.jsonl").exists() for d in runs.iterdir()) if runs.exists() else True  # never ran
    left = worktrees_left(proj, worktrees)
    note(f"isolation: link out ({kind})", f"refused before the run: {', '.join(refused)}; "
         f"worktrees left: {left or 'none'}", left_behind(proj, []))
    assert left == []


def test_isolation_keeps_untracked_bulk_out_of_the_users_git(proj, worktrees):
    """A 30 MB untracked file is part of the workspace, but never of the user's .git."""
    (proj / ".gitignore").write_text(".pi/subagents/runs/\n")
    git(proj, "init", "-q")
    git(proj, "add", ".gitignore", "README.md")
    git(proj, "commit", "-qm", "start")
    (proj / "bulk.bin").write_bytes(os.urandom(30 * 1024 * 1024))

    def size_of_git() -> int:
        return sum(p.stat().st_size for p in (proj / ".git").rglob("*") if p.is_file())

    before = size_of_git()
    run = nbsubagents.run("scout", "run: wc -c bulk.bin && echo made > made.txt", isolation="worktree", show=False)
    assert run.status == "completed", run.error
    assert "31457280 bulk.bin" in "".join(str(e.get("text", "")) for e in run.events())  # the run saw it
    grew = size_of_git() - before
    assert run.files_changed == ["made.txt"]
    left = worktrees_left(proj, worktrees)
    assert record("isolation: 30 MB untracked", proj, [run], f"{run.status}; .git grew {grew} bytes; "
                  f"worktrees left: {left or 'none'}") == []
    assert grew < 1024 * 1024 and left == []
    from nbsubagents._sweeps.scorers import check, score

    assert score(run, [check("test -f made.txt", name="made")]) == {"made": True}  # without the big file's blob
    assert "its starting state is gone" in (run.dir / "checks" / "made.log").read_text()
    assert worktrees_left(proj, worktrees) == []


def kill_all(found: list[str]) -> None:
    for line in found:
        try:
            os.kill(int(line.split(":")[0]), signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_a_check_that_backgrounds_processes_leaves_none(proj):
    """`&`, nohup and setsid in a check, on a normal end and on a timeout: the check's whole tree ends with it."""
    from nbsubagents._sweeps.scorers import check, score

    run = nbsubagents.run("scout", "say: done", show=False)
    background = check("sleep 300 & nohup sleep 301 >/dev/null 2>&1 & setsid sleep 302 & echo started",
                       shell=True, name="background")
    slow = check("setsid sleep 303 & sleep 60", shell=True, name="slow", timeout=2)
    try:
        started = time.monotonic()
        assert score(run, [background, slow]) == {"background": True, "slow": False}
        assert time.monotonic() - started < 30
        assert "timed out after 2s" in (run.dir / "checks" / "slow.log").read_text()
        left = left_behind(proj, [], settle=2.0)
    finally:
        kill_all(processes_inside(proj.parent))
    note("check: & nohup setsid timeout", "scored; its processes ended", left)
    assert left == []


def test_a_check_killed_mid_way_leaves_no_worktree_and_no_process(proj, worktrees):
    """The process scoring an isolated run is SIGKILLed during its check: the check's processes end with it, and
    the next check sweeps the scratch worktree it left (registered with git, and its folder)."""
    from nbsubagents._sweeps.scorers import check, score

    git(proj, "init", "-q")
    git(proj, "add", "README.md")
    git(proj, "commit", "-qm", "start")
    run = nbsubagents.run("scout", "run: echo made > made.txt", isolation="worktree", show=False)
    assert run.status == "completed", run.error
    code = ("import sys, nbsubagents\nfrom nbsubagents._sweeps.scorers import check, score\n"
            "score(nbsubagents.get_run(sys.argv[1]), [check('setsid sleep 313 & sleep 314', shell=True)])\n")
    scorer = subprocess.Popen([sys.executable, "-c", code, run.id], cwd=proj, stdin=subprocess.DEVNULL)
    try:
        wait_for(lambda: any("sleep 314" in p for p in processes_inside(worktrees)), 60, "the check's sleep")
        assert len(list(worktrees.glob("check-*.json"))) == 1
    finally:
        scorer.kill()
        scorer.wait(30)
    left = left_behind(proj, [], settle=5.0) + processes_inside(worktrees)
    kill_all(processes_inside(worktrees))
    stale = worktrees_left(proj, worktrees)  # the killed scorer's finally never ran: its worktree is still there
    assert score(run, [check("test -f made.txt", name="made")]) == {"made": True}  # the next check sweeps it
    after = worktrees_left(proj, worktrees)
    note("check: scorer killed mid-check", f"left {len(stale)} stale entries, swept by the next check; "
         f"worktrees left: {after or 'none'}", left)
    assert stale and left == [] and after == []


# -- the registry under several processes at once (issue 59) -------------------------------------------------------
READS = """
import os, sys, threading, nbsubagents

def read(until):
    while not until():
        nbsubagents.runs(); nbsubagents.status(include_completed=True)
"""
# Each starter reads in a thread of its own too: a process with two connections to the registry at once is what the
# bug of issue 59 needed (one use dropped the other's locks).
STARTER = READS + """
waves, per_wave, me = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
finished = threading.Event()
reader = threading.Thread(target=read, args=(finished.is_set,))
reader.start()
try:  # a failed wave ends this starter at once (its reader too), naming the run: the test fails, it does not hang
    for wave in range(waves):
        runs = [nbsubagents.start("scout", f"say: {me} {wave} {i}", show=False) for i in range(per_wave)]
        read(lambda: all(r.done for r in runs))
        for r in runs:
            assert r.wait(300).status == "completed", (r.id, r.status, r.error)
finally:
    finished.set()
    reader.join()
"""
# A reader that starts, reads and exits, as `nbsubagents runs` in a terminal would: its exit closes its last
# connection, which folds the WAL in and deletes it when SQLite believes no other process has the registry open.
READER = "import nbsubagents\nnbsubagents.runs(); nbsubagents.status(include_completed=True)\n"


@pytest.mark.stress
@pytest.mark.timeout(1800)  # ~80 s on a quiet machine; a loaded one (CI beside other work) takes several times that
@pytest.mark.parametrize("repetition", range(5))
def test_four_processes_starting_and_reading_runs_at_once_leave_a_whole_registry(proj, tmp_path, repetition):
    """Four processes each start three waves of 20 background runs and read the registry while they run (in two
    threads), beside short-lived readers one after another: every run completes, no process saw an error, the
    registry's integrity check is ok, every run folder has its row with its folder's status (no write was lost with
    a WAL) and nothing was healed. On the code before issue 59's fix, 2 of 5 repetitions failed (one with "database
    disk image is malformed"): a process's own open() of the file dropped SQLite's locks."""
    stop, failures = threading.Event(), []

    def read_and_exit() -> None:
        while not stop.is_set():
            out = subprocess.run([sys.executable, "-c", READER], cwd=proj, capture_output=True, text=True,
                                 stdin=subprocess.DEVNULL, timeout=300)
            if out.returncode != 0 or "malformed" in out.stderr or "Traceback" in out.stderr:
                failures.append(out.stderr[-2000:])

    starters = [subprocess.Popen([sys.executable, "-c", STARTER, "3", "20", f"p{n}"], cwd=proj, text=True,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
                for n in range(4)]
    readers = [threading.Thread(target=read_and_exit) for _ in range(2)]
    for reader in readers:
        reader.start()
    try:
        outs = [p.communicate(timeout=1500) for p in starters]
    finally:
        stop.set()
        for reader in readers:
            reader.join()
    assert [p.returncode for p in starters] == [0] * 4, [err.strip().splitlines()[-1:] for _, err in outs]
    assert failures == []
    assert all("Traceback" not in err and "malformed" not in err for _, err in outs), [e[-2000:] for _, e in outs]
    db = registry.db_path(proj)
    assert list(db.parent.glob("registry.sqlite.corrupt-*")) == [], "the registry had to be healed"
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        rows = dict(conn.execute("SELECT run_id, status FROM runs").fetchall())
    folders = {d.name: json.loads((d / "result.json").read_text())["status"]
               for d in (proj / ".pi" / "subagents" / "runs").iterdir()}
    assert len(folders) == 240 and set(folders.values()) == {"completed"}
    assert rows == folders
    assert record("4 processes x 60 runs", proj, list(folders), f"240 rows, integrity ok (#{repetition + 1})") == []
