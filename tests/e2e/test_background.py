"""Background runs end to end: the real pi against the scripted model, launched, watched, killed and
settled across several Python processes sharing one project registry."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import PI_VERSION, wait_for

import nbsubagents
from nbsubagents import _registry as registry
from nbsubagents._child import procs
from nbsubagents._lifecycle import watcher
from nbsubagents._pi import find_pi
from nbsubagents._pi.models import available_models


def python(code: str, *, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    """A separate Python process in the project with the test's environment."""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    return proc


def row_of(project: Path, run_id: str) -> dict:
    with registry.connect(registry.db_path(project)) as conn:
        return dict(conn.execute("SELECT * FROM runs WHERE run_id = ?", (run_id,)).fetchone())


def started_by_a_killed_launcher(code: str) -> str:
    """Run ``code`` in a separate Python process, then SIGKILL it, as when the launching kernel dies.

    ``code`` starts runs and prints a line about them; that line is returned once the launcher is gone.
    """
    launcher = subprocess.Popen([sys.executable, "-c", f"import nbsubagents, time\n{code}\ntime.sleep(600)\n"],
                                stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    try:
        return launcher.stdout.readline()
    finally:
        launcher.send_signal(signal.SIGKILL)
        launcher.wait(30)
        launcher.stdout.close()


def child_running(run_dir: Path) -> bool:
    """The run's pi is up and has started its bash tool (a grandchild)."""
    info = json.loads((run_dir / "supervisor.json").read_text()) if (run_dir / "supervisor.json").exists() else {}
    return "childPid" in info and len(procs.run_processes(run_dir.name)) >= 2


@pytest.fixture
def warm(project):
    """Model list cached, as after a first run in a kernel: start() then costs only its own work."""
    available_models(find_pi())
    yield project
    watcher.stop()


def test_start_returns_at_once_then_the_watcher_records_announces_and_calls_on_done_once(warm, capsys):
    done = []
    notices: list = []
    watcher.add_notice_handler(notices.append)
    t0 = time.perf_counter()
    run = nbsubagents.start("scout", "sleep: 3\nread README.md", name="bg", on_done=done.append, show=False)
    took = time.perf_counter() - t0

    assert not (run.dir / "result.json").exists()  # it did not wait for the run
    assert took < 10.0  # ~0.02 s here (benchmarks/bench_registry.py); generous for a loaded machine
    assert run.status in ("queued", "running") and run.record.mode == "background"
    assert run.record.runner == "process"
    assert run.counts is not None and run.counts["running"] >= 1 and run.counts["total"] >= 1
    assert row_of(warm, run.id)["status"] in ("queued", "running")

    wait_for(lambda: done, what="on_done")
    time.sleep(0.5)  # a second call would come within a poll or two
    assert done == [run]
    assert run.status == "completed" and "# Demo project" in run.output
    row = row_of(warm, run.id)
    assert row["status"] == "completed" and row["announced"] == 1 and row["tool_calls"] == 1
    assert "# Demo project" in row["final_text"] and row["total_tokens"] > 0
    watcher.remove_notice_handler(notices.append)
    (notice,) = [n for n in notices if n.run_id == run.id]
    assert notice.text.startswith(f"✓ background run bg {run.id} completed: ") and notice.quiet
    printed = capsys.readouterr()
    assert printed.out == "" and printed.err == ""  # show=False: the notice is told to handlers, not printed


def test_wait_returns_once_the_watcher_is_through_with_the_run(warm, capsys):
    done = []

    def slow_callback(run):
        time.sleep(0.5)  # the end is already in result.json; wait() still holds for this
        done.append(run.wait())  # waiting inside on_done returns at once instead of deadlocking

    run = nbsubagents.start("scout", "read README.md", name="waited", on_done=slow_callback)
    assert run.wait(timeout=60) is run
    assert done == [run] and run.status == "completed"
    assert run.id not in {r.id for r in watcher.watching()}
    # announced before it (outside a notebook on stderr, with the run's progress)
    assert f"✓ background run waited {run.id} completed" in capsys.readouterr().err
    late = nbsubagents.start("scout", "sleep: 5", name="late", show=False)
    t0 = time.monotonic()
    assert late.wait(timeout=0.5) is late and not late.done  # a timeout still bounds the wait
    assert time.monotonic() - t0 < 5
    late.wait()


def test_an_on_done_that_raises_is_reported_and_the_watcher_goes_on(warm, capsys):
    def boom(run):
        raise RuntimeError("callback exploded")

    first = nbsubagents.start("scout", "read README.md", on_done=boom, show=False)
    second = nbsubagents.start("scout", "sleep: 1\nls src", show=False)
    wait_for(lambda: first.done and second.done and not watcher.watching(), what="both runs")
    err = capsys.readouterr().err
    assert f"on_done of run {first.id} raised" in err and "callback exploded" in err
    assert row_of(warm, second.id)["status"] == "completed"


def test_show_feeds_the_launching_renderer_from_the_watcher(warm, capsys):
    run = nbsubagents.start("scout", "read README.md", show=True)
    wait_for(lambda: run.id not in {r.id for r in watcher.watching()}, what="the end")
    printed = capsys.readouterr()
    out = printed.err  # outside a notebook progress goes to stderr; stdout stays the program's
    assert out.index("▶ scout") < out.index("Reading README.md") < out.index("scout completed")
    assert printed.out == ""


def test_runs_outlive_their_killed_launcher_and_are_announced_exactly_once(warm):
    ids = started_by_a_killed_launcher(
        "runs = [nbsubagents.start('scout', f'sleep: 3\\nrun: echo bg{i}', name=f'bg{i}', show=False)"
        " for i in range(3)]\n"
        "print(' '.join(r.id for r in runs), flush=True)").split()
    assert len(ids) == 3
    runs_dir = warm / ".pi" / "subagents" / "runs"
    assert not any((runs_dir / i / "result.json").exists() for i in ids)  # mid-run

    wait_for(lambda: all((runs_dir / i / "result.json").exists() for i in ids), what="the three results")

    # Two later processes look at the same time: each run is announced by exactly one of them.
    code = ("import nbsubagents, json\n"
            "s = nbsubagents.status(include_completed=True)\n"
            "print('STATUS', json.dumps({r['run_id']: r['status'] for r in s.rows}))\n")
    later = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              stdin=subprocess.DEVNULL, text=True) for _ in range(2)]
    outputs, notices = [], []
    for proc in later:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        outputs.append(out)
        notices.append(err)  # a script's notices go to stderr: its stdout is its own
    assert not any("while away" in out for out in outputs)
    announced = [line for err in notices for line in err.splitlines() if "completed while away" in line]
    assert sorted(line.split()[4] for line in announced) == sorted(ids)
    for out in outputs:
        seen = json.loads(next(ln for ln in out.splitlines() if ln.startswith("STATUS"))[len("STATUS "):])
        assert all(seen[i] == "completed" for i in ids)
    again = python("import nbsubagents; nbsubagents.status(include_completed=True)")
    assert "while away" not in again.stdout + again.stderr
    for i, run_id in enumerate(ids):
        row = row_of(warm, run_id)
        assert row["status"] == "completed" and row["announced"] == 1 and f"bg{i}" in row["final_text"]


@pytest.mark.pi_matrix
def test_a_killed_supervisor_is_settled_failed_and_leaves_no_process(warm):
    run_id = python("import nbsubagents\n"
                    "print(nbsubagents.start('scout', 'run: sleep 120', show=False).id)").stdout.strip()
    run_dir = warm / ".pi" / "subagents" / "runs" / run_id
    wait_for(lambda: child_running(run_dir), what="pi and its bash tool")
    supervisor = json.loads((run_dir / "supervisor.json").read_text())
    os.kill(supervisor["pid"], signal.SIGKILL)
    wait_for(lambda: not procs.alive(supervisor["pid"], supervisor["startTicks"]), what="the supervisor's end")
    if PI_VERSION < (1,):
        assert procs.run_processes(run_id)  # pi 0.73.1 does not die with its supervisor (1.x ends with it)

    status = nbsubagents.status(run_id[:-2])

    assert status.run_id == run_id and status.rows[0]["status"] == "failed"
    assert status.rows[0]["error_message"] == "interrupted: supervisor exited without a result"
    result = json.loads((run_dir / "result.json").read_text())
    assert result["status"] == "failed" and result["errorMessage"] == status.rows[0]["error_message"]
    wait_for(lambda: not procs.run_processes(run_id), timeout=10, what="the orphaned child's end")
    assert status.counts["failed"] == 1 and status.counts["running"] == 0


def test_cancel_from_another_process_aborts_a_background_run(warm):
    done = []
    run = nbsubagents.start("scout", "run: sleep 120", on_done=done.append, show=False)
    wait_for(lambda: child_running(run.dir), what="pi and its bash tool")

    out = python(f"import nbsubagents; print(nbsubagents.cancel({run.id[:-1]!r}))").stdout

    assert out.strip() == "True"
    wait_for(lambda: done, what="on_done")
    assert run.status == "aborted" and run.error == "cancelled"
    assert run.result["durationSeconds"] < 60
    assert row_of(warm, run.id)["status"] == "aborted"
    assert nbsubagents.cancel(run.id) is False  # already over


def test_the_cancel_request_file_alone_aborts_a_local_run(warm):
    """The request file is the one cancel path (a supervisor on another machine gets no signal): written by a
    process that sends no signal, the local supervisor reads it and ends the run aborted."""
    run = nbsubagents.start("scout", "run: sleep 120", show=False)
    wait_for(lambda: child_running(run.dir), what="pi and its bash tool")

    python("from pathlib import Path\nfrom nbsubagents._child.artifacts import RunPaths\n"
           f"from nbsubagents._lifecycle.settle import request_cancel\nrequest_cancel(RunPaths(Path({str(run.dir)!r})))")

    run.wait(60)
    assert run.status == "aborted" and run.error == "cancelled" and run.result["stopReason"] == "cancelled"
    assert run.result["durationSeconds"] < 60
    wait_for(lambda: not procs.run_processes(run.id), what="the run's processes to end")


def test_status_counts_and_filters_for_every_status(warm):
    completed = nbsubagents.run("scout", "read README.md", name="ok", show=False)
    failed = nbsubagents.run("scout", "fail: 500 upstream exploded", name="bad", show=False)
    aborted = nbsubagents.start("scout", "run: sleep 120", name="stopped", show=False)
    running = nbsubagents.start("scout", "run: sleep 120", name="<busy>", show=False)
    wait_for(lambda: child_running(aborted.dir) and child_running(running.dir), what="both children")
    assert aborted.cancel()
    wait_for(lambda: aborted.done, what="the cancel")
    try:
        active = nbsubagents.status()
        assert active.counts == {"running": 1, "queued": 0, "completed": 1, "failed": 1, "aborted": 1, "total": 4}
        assert [r["run_id"] for r in active.rows] == [running.id]
        assert active.rows[0]["status"] == "running" and active.rows[0]["supervisor_pid"] > 0

        every = nbsubagents.status(include_completed=True)
        assert {r["run_id"]: r["status"] for r in every.rows} == {
            completed.id: "completed", failed.id: "failed", aborted.id: "aborted", running.id: "running"}
        assert [r["mode"] for r in every.rows] == ["single", "single", "background", "background"]

        one = nbsubagents.status(failed.id)
        (row,) = one.rows
        assert row["status"] == "failed" and "upstream exploded" in row["error_message"]
        assert row["exit_code"] == 0 and row["ended_at"] and row["duration"] is not None
        done = nbsubagents.status(completed.id[:-1])
        assert done.rows[0]["final_text"].startswith(completed.output[:20]) and done.rows[0]["tool_calls"] == 1

        text = repr(every)
        assert text.splitlines()[0] == "1 running · 1 completed · 1 failed · 1 aborted · 4 total"
        assert "RUN ID" in text and completed.id in text and "upstream exploded" in text
        assert "&lt;busy&gt;" in every._repr_html_() and "<busy>" not in every._repr_html_()
        assert "exit code" in repr(one) and failed.id in one._repr_html_()

        with pytest.raises(nbsubagents.NbSubagentsError, match="ambiguous"):
            nbsubagents.status(completed.id[:9])
        with pytest.raises(nbsubagents.NbSubagentsError, match='No run "nope"'):
            nbsubagents.status("nope")
        assert nbsubagents.get_run(running.id) is running  # this process's own handle
        assert nbsubagents.get_run(failed.id[:-1]).error == failed.error
    finally:
        running.cancel()
        wait_for(lambda: running.done, what="the last run's end")


def test_a_run_cancelled_by_another_handle_while_its_supervisor_starts_is_aborted(warm):
    run = nbsubagents.start("scout", "run: sleep 120", show=False)
    other = nbsubagents.Run(run.dir)  # as another kernel sees it: no process handle
    assert other.cancel() is True
    assert run.wait(60).status == "aborted"
    assert not procs.run_processes(run.id)


def test_a_kernel_takes_over_watching_runs_whose_launcher_died(warm):
    run_id = started_by_a_killed_launcher(
        "print(nbsubagents.start('scout', 'sleep: 4\\nrun: echo adopted', name='orphan', show=False).id,"
        " flush=True)").strip()
    wait_for(lambda: (warm / ".pi/subagents/runs" / run_id / "supervisor.json").exists(), what="the supervisor")

    # What a new kernel does on load: reconcile with reattach, then its watcher announces the end.
    adopter = python("import time\n"
                     "from nbsubagents._lifecycle import reconcile, watcher\n"
                     "live = reconcile.reconcile(reattach=True)\n"
                     "print('LIVE', [r.id for r in live], [r.id for r in watcher.watching()], flush=True)\n"
                     "while watcher.watching(): time.sleep(0.1)\n")
    assert f"LIVE ['{run_id}'] ['{run_id}']" in adopter.stdout
    assert f"✓ background run orphan {run_id} completed: " in adopter.stderr  # a script's notices: stderr
    assert "while away" not in adopter.stdout + adopter.stderr
    row = row_of(warm, run_id)
    assert row["status"] == "completed" and row["announced"] == 1 and row["owner_pid"] != row["launcher_pid"]
    final = python("import nbsubagents; nbsubagents.status()")
    assert "while away" not in final.stdout + final.stderr


def test_the_first_run_after_a_restart_brings_the_finished_while_away_notice(warm):
    """Issue 13, item 8: the notice came only with a status()-like call, not with the first run()."""
    (run_id,) = started_by_a_killed_launcher(
        "print(nbsubagents.start('scout', 'sleep: 1\\nsay: bg done', show=False).id, flush=True)").split()
    runs_dir = warm / ".pi" / "subagents" / "runs"
    wait_for(lambda: (runs_dir / run_id / "result.json").exists(), what="the background result")
    done = python("import nbsubagents, sys\nr = nbsubagents.run('scout', 'say: fg', show=False)\n"
                  "print('RUN', r.status, file=sys.stderr)")  # on stderr too, to see the order with the notice
    out = done.stderr
    assert "completed while away" in out and run_id in out and "RUN completed" in out
    assert out.index(run_id) < out.index("RUN completed")  # before the run, not after a later status()


def test_a_run_belongs_to_the_project_of_its_cwd(warm, tmp_path):
    """Issue 13, item 8: run(cwd=X) used X for the child only, the current project's presets and registry."""
    other = tmp_path / "other"
    (other / ".pi" / "subagents").mkdir(parents=True)
    (other / ".pi" / "subagents" / "helper.md").write_text(
        "---\nname: helper\ndescription: Only in the other project.\nmodel: demo/scripted\n---\nHelp.\n")
    (other / ".pi" / "settings.json").write_text('{"subagents": {"timeout": 77}}')
    assert "helper" in [p.name for p in nbsubagents.presets(project=other)]
    run = nbsubagents.run("helper", "say: there", cwd=other, show=False)
    assert run.status == "completed" and run.record.timeout == 77
    assert run.dir.parent == other / ".pi" / "subagents" / "runs"
    assert row_of(other, run.id)["status"] == "completed"
    assert not (warm / ".pi" / "subagents" / "runs").exists() or run.id not in os.listdir(
        warm / ".pi" / "subagents" / "runs")


def test_a_lost_run_keeps_its_real_start_and_ends_at_its_last_sign_of_life(warm):
    """Issue 13, item 5: a run reconciled after its supervisor died read 'failed in 0.0s'."""
    from datetime import datetime

    def parse_iso(text: str) -> float:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()

    run = nbsubagents.start("scout", "run: echo first\nsleep: 60\nsay: never", show=False)
    wait_for(lambda: any(e["type"] == "tool_result" for e in run.events()), what="the tool's result")
    time.sleep(1.5)
    last_ts = run.events()[-1]["ts"]
    started_at = json.loads((run.dir / "supervisor.json").read_text())["startedAt"]
    time.sleep(1.5)  # the run stalls (the model hangs): no sign of life after last_ts
    killed_at = time.time()
    os.kill(json.loads((run.dir / "supervisor.json").read_text())["pid"], signal.SIGKILL)
    run.wait(60)
    result = run.result
    assert run.status == "failed" and "supervisor exited without a result" in run.error
    assert result["startedAt"] == started_at
    assert abs(parse_iso(result["endedAt"]) - last_ts) < 0.01 and parse_iso(result["endedAt"]) < killed_at - 1
    assert result["durationSeconds"] == pytest.approx(last_ts - parse_iso(started_at), abs=0.01)
    assert result["durationSeconds"] > 0.2  # pi's start and one tool call: never the 0.0 s of the moment of settling
    row = row_of(warm, run.id)
    assert (row["started_at"], row["ended_at"], row["duration"]) == (
        started_at, result["endedAt"], result["durationSeconds"])
