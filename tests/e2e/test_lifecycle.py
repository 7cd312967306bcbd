"""A run's life outside its supervisor: the one settle module, the one verdict, a bounded cancel.

These use run directories written by hand (no pi: what is under test is what the kernel's side writes when
the supervisor never ran or died), and real processes where a supervisor is needed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from nbsubagents._child.record import load as load_record
from nbsubagents import _registry as registry
from nbsubagents._child.artifacts import RunPaths, atomic_write_json, now_iso, read_json
from nbsubagents._lifecycle import handle, reconcile, settle, watcher
from nbsubagents._lifecycle.handle import Run

from helpers import at_once


def make_run(root: Path, run_id: str, *, supervisor: bool = True) -> RunPaths:
    """A run directory as a launched run leaves it: meta.json, supervisor.log and (if ``supervisor``)
    supervisor.json of a supervisor that is gone (this pid with another start time is nobody)."""
    run_dir = root / ".pi" / "subagents" / "runs" / run_id
    run_dir.mkdir(parents=True)
    paths = RunPaths(run_dir)
    created = "2026-01-01T00:00:00.000Z"
    atomic_write_json(paths.meta, {"runId": run_id, "name": "scout", "preset": "scout", "task": "t",
                                   "cwd": str(root), "root": str(root), "createdAt": created})
    (run_dir / "supervisor.log").write_text("")
    if supervisor:
        atomic_write_json(paths.supervisor, {"pid": os.getpid(), "startTicks": -1, "startedAt": created})
    registry.record(run_dir)
    return paths


def test_threads_settling_one_run_at_once_write_one_result_and_never_raise(tmp_path):
    for attempt in range(20):
        paths = make_run(tmp_path, f"20260101-000000-{attempt:06d}")
        meta = load_record(paths.dir)
        start = threading.Barrier(8)
        outcomes: list[object] = []

        def settler(i: int) -> None:
            start.wait()
            try:
                if i % 2:
                    outcomes.append(settle.lost(paths, meta, exit_code=1))
                else:
                    outcomes.append(settle.never_ran(paths, meta, "aborted", "cancelled before it started"))
            except BaseException as exc:  # noqa: BLE001 - what a racing writer raised is the finding
                outcomes.append(exc)

        at_once(settler, [(i,) for i in range(8)])
        assert [o for o in outcomes if isinstance(o, BaseException)] == []
        assert outcomes.count(True) == 1, outcomes  # exactly one settler wrote the result
        assert read_json(paths.result)["status"] in ("failed", "aborted")
        assert not [p.name for p in paths.dir.iterdir() if p.name.endswith(".tmp")]


def test_a_cancelled_run_that_loses_its_supervisor_ends_the_same_on_every_path(tmp_path):
    """The watcher, wait() and another process's reconcile settle a lost run; once a cancel was asked for,
    each says aborted/cancelled, and without one each says failed/interrupted."""
    verdicts = {}
    for cancelled in (True, False):
        # another process's path: reconcile sees a gone supervisor
        other = make_run(tmp_path, f"20260101-00000{int(cancelled)}-aaaaaa")
        # this process's own paths: its supervisor (a real child) exited without writing a result
        own_wait = make_run(tmp_path, f"20260101-00000{int(cancelled)}-bbbbbb")
        own_watch = make_run(tmp_path, f"20260101-00000{int(cancelled)}-cccccc")
        if cancelled:
            for paths in (other, own_wait, own_watch):
                settle.request_cancel(paths)
        assert reconcile.check(other.dir) == "ended"

        waited = Run(own_wait.dir)
        waited.process = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
        waited.wait(20)

        watched = Run(own_watch.dir)
        watched.process = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
        watched.process.wait()
        watcher.watch(watched, quiet=True)
        assert watcher.settle(watched.id, 20)

        got = {path: (r["status"], r["errorMessage"].split(" (exit code")[0])
               for path, r in (("reconcile", read_json(other.result)), ("wait", read_json(own_wait.result)),
                               ("watcher", read_json(own_watch.result)))}
        assert len(set(got.values())) == 1, got
        verdicts[cancelled] = next(iter(got.values()))
    assert verdicts[True] == ("aborted", settle.CANCELLED)
    assert verdicts[False] == ("failed", settle.LOST)


@pytest.mark.serial
def test_cancel_before_the_supervisor_is_ready_is_bounded_and_ends_it(tmp_path, monkeypatch):
    """A supervisor that never gets to write supervisor.json (hung at start) does not hang cancel(): after
    the bound it is signalled all the same, and the run is settled as cancelled."""
    monkeypatch.setattr(handle, "SUPERVISOR_START_TIMEOUT", 0.5)
    paths = make_run(tmp_path, "20260101-000009-dddddd", supervisor=False)
    run = Run(paths.dir)
    run.process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        t0 = time.monotonic()
        assert run.cancel() is True
        took = time.monotonic() - t0
        assert 0.4 <= took < 3.0, took
        assert run.wait(20).status == "aborted"
        assert run.error == settle.CANCELLED
        assert run.process.poll() is not None  # the hung supervisor is gone
    finally:
        if run.process.poll() is None:
            run.process.kill()
            run.process.wait()


def test_a_disk_that_refuses_the_result_leaves_the_truth_in_this_process(tmp_path, monkeypatch):
    paths = make_run(tmp_path, "20260101-000010-eeeeee")

    def refuse(*_args, **_kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(settle, "atomic_write_json", refuse)
    with pytest.warns(RuntimeWarning, match="No space left on device"):
        assert settle.lost(paths, load_record(paths.dir)) is True
    assert not paths.result.exists()
    assert Run(paths.dir).status == "failed"  # any handle of this process knows it


def test_a_run_whose_launcher_died_before_launching_it_is_settled_at_once(tmp_path):
    """No supervisor yet, just created: its launcher alive means queued, its launcher dead with no
    supervisor.log means it never will start (settled now, not after the start-up grace), and launched by a
    dead launcher means its detached supervisor may still come up (the grace holds)."""
    from nbsubagents._child.procs import process_start_ticks

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()

    def queued(run_id: str, launcher_pid: int, launched: bool) -> RunPaths:
        paths = make_run(tmp_path, run_id, supervisor=False)
        if not launched:
            (paths.dir / "supervisor.log").unlink()
        meta = read_json(paths.meta)
        meta.update(createdAt=now_iso(), runner="process",  # just now: within the start-up grace
                    launcher={"pid": launcher_pid, "startTicks": process_start_ticks(launcher_pid) or 1,
                              "host": registry.HOST})
        atomic_write_json(paths.meta, meta)
        return paths

    mine = queued("20260101-000020-aaaaaa", os.getpid(), launched=False)
    orphan = queued("20260101-000021-bbbbbb", dead.pid, launched=False)
    starting = queued("20260101-000022-cccccc", dead.pid, launched=True)

    assert reconcile.check(mine.dir) == "owned" and not mine.result.exists()
    assert reconcile.check(orphan.dir) == "ended"
    assert read_json(orphan.result)["status"] == "aborted"
    assert read_json(orphan.result)["errorMessage"] == f"{settle.NOT_STARTED}: {reconcile.QUEUER_GONE}"
    assert reconcile.check(starting.dir) == "starting" and not starting.result.exists()


def test_reads_do_not_settle(tmp_path, monkeypatch):
    """runs(), a status bar's refresh and registry.snapshot() leave a lost run as the registry has it;
    status() settles it."""
    import nbsubagents
    from nbsubagents._registry import query

    monkeypatch.chdir(tmp_path)
    (tmp_path / ".git").mkdir()
    paths = make_run(tmp_path, "20260101-000011-ffffff")
    reconcile.first_use(tmp_path)  # a process's first use may settle: what comes after it are reads
    lost = make_run(tmp_path, "20260101-000012-ffffff")
    frame = query.runs(root=tmp_path)
    assert frame.set_index("run_id").loc[lost.dir.name, "status"] == "running"
    shown = registry.snapshot(root=tmp_path)
    assert shown.counts["running"] == 1
    assert lost.dir.name in repr(shown) and lost.dir.name in shown._repr_html_()  # an active row's table
    assert not lost.result.exists()
    assert json.loads(paths.result.read_text())["status"] == "failed"  # settled by the first use
    st = reconcile.status(root=tmp_path, include_completed=True)
    assert st.counts["running"] == 0 and lost.result.exists()
    assert nbsubagents.status  # the public face is the reconciling one


@pytest.mark.notebook
@pytest.mark.serial  # a real kernel and a background run's watcher thread: alone, as in a serial run
def test_a_notice_from_the_watcher_thread_goes_to_the_launching_cell_not_the_running_one(project, monkeypatch):
    """A real kernel: cell A starts a background run, cell B is busy when it ends. The watcher thread's
    progress lines and notice carry cell A's msg_id; cell B gets none of them."""
    import queue

    from jupyter_client.manager import start_new_kernel

    monkeypatch.setenv("NBSUBAGENTS_DISPLAY", "text")
    km, kc = start_new_kernel(kernel_name="python3", cwd=str(project))
    try:
        launch = kc.execute('import nbsubagents\nrun = nbsubagents.start("scout", "sleep: 2\\nsay: bg done", '
                            'name="bg")')
        kc.get_shell_msg(timeout=120)
        busy = kc.execute("import time\nrun.wait(90)\ntime.sleep(1)\nprint('B done', flush=True)")
        kc.get_shell_msg(timeout=120)
        # Read until cell B is idle again (all it printed is in) and the notice has come, however long a loaded
        # machine takes: no gap in the messages is taken for their end.
        streams: list[tuple[str, str]] = []
        busy_idle = False
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not (busy_idle and any("background run bg" in t for _, t in streams)):
            try:
                msg = kc.get_iopub_msg(timeout=5)
            except queue.Empty:
                continue
            parent = msg["parent_header"].get("msg_id")
            if msg["msg_type"] == "stream":
                streams.append((parent, msg["content"]["text"]))
            busy_idle |= (msg["msg_type"] == "status" and parent == busy
                          and msg["content"]["execution_state"] == "idle")
        notices = [(parent, text) for parent, text in streams if "background run bg" in text]
        assert notices, streams
        assert all(parent == launch for parent, _ in notices), (launch, busy, notices)
        assert not [text for parent, text in streams if parent == busy and "bg" in text], streams
        assert any(parent == busy and "B done" in text for parent, text in streams)
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
