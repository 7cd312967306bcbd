"""The opt-in tmux runner: foreground runs in a tmux session a person can attach to."""

from __future__ import annotations

import shutil
import signal
import subprocess
import time

import pytest
from helpers import as_in_a_kernel

import nbsubagents
from nbsubagents import _config as config
from nbsubagents._lifecycle.tmux import socket_name, socket_path

needs_tmux = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


def session_exists(run_id: str) -> bool:
    proc = subprocess.run(["tmux", "-L", socket_name(run_id), "has-session", "-t", run_id],
                          capture_output=True, stdin=subprocess.DEVNULL, timeout=30)
    return proc.returncode == 0


def wait_gone(run_id: str, timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while session_exists(run_id):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


@needs_tmux
def test_a_foreground_run_in_tmux_completes_and_leaves_no_session(project):
    nbsubagents.configure(runner="tmux")
    run = nbsubagents.run("scout", "read README.md", show=False)

    assert run.status == "completed", run.error
    assert "# Demo project" in run.output
    assert run.record.runner == "tmux"
    assert (run.dir / "supervisor.json").exists() and (run.dir / "result.json").exists()
    assert wait_gone(run.id)
    assert not socket_path(run.id).exists()  # issue 13, item 8: each run left its socket in /tmp/tmux-<uid>
    row = nbsubagents.status(run.id).rows[0]
    assert row["runner"] == "tmux" and row["status"] == "completed" and row["announced"] == 1


@needs_tmux
def test_parallel_runs_in_tmux_each_get_a_session_that_is_gone_at_the_end(project):
    nbsubagents.configure(runner="tmux")
    runs = nbsubagents.run_parallel([{"preset": "scout", "task": f"run: echo tmux{i}"} for i in range(2)],
                                    show=False)
    assert [r.status for r in runs] == ["completed", "completed"]
    assert all(f"tmux{i}" in r.output for i, r in enumerate(runs))
    assert all(wait_gone(r.id) for r in runs)
    assert [r.id for r in runs if socket_path(r.id).exists()] == []


@needs_tmux
def test_interrupting_a_tmux_run_aborts_it_and_kills_its_session(project):
    nbsubagents.configure(runner="tmux")

    def interrupt(*_):  # the cell's interrupt, once the run is going (a loaded machine may take a while)
        if not any((project / ".pi" / "subagents" / "runs").glob("*/supervisor.json")):
            signal.setitimer(signal.ITIMER_REAL, 0.5)
            return
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 4.0)
    try:
        with as_in_a_kernel():  # there the interrupt ends the cell's run, which the cell then has
            run = nbsubagents.run("scout", "run: sleep 120", show=False)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert run.status == "aborted"
    assert run.result["durationSeconds"] < 60
    assert wait_gone(run.id)
    assert not socket_path(run.id).exists()


def test_tmux_missing_is_a_clear_error_before_anything_starts(project, monkeypatch, tmp_path):
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    nbsubagents.configure(runner="tmux")
    message = r'runner="tmux" needs tmux on PATH: apt-get install tmux, or configure\(runner="process"\)'
    with pytest.raises(nbsubagents.NbSubagentsError, match=message):
        nbsubagents.run("scout", "read README.md", show=False)
    with pytest.raises(nbsubagents.NbSubagentsError, match="needs tmux on PATH"):
        nbsubagents.run_parallel([{"preset": "scout", "task": "read README.md"}], show=False)
    runs_dir = project / ".pi" / "subagents" / "runs"
    assert not runs_dir.exists() or not any(runs_dir.iterdir())


def test_background_runs_use_the_process_runner_even_when_tmux_is_configured(project, monkeypatch, tmp_path):
    only_node = tmp_path / "bin"
    only_node.mkdir()
    (only_node / "node").symlink_to(shutil.which("node"))
    monkeypatch.setenv("PATH", str(only_node))  # no tmux: a background run must not need it
    config.configure(runner="tmux")
    run = nbsubagents.start("scout", "read README.md", show=False)
    assert run.record.runner == "process"
    assert run.wait(120).status == "completed"
    deadline = time.monotonic() + 30
    while nbsubagents.status(run.id).rows[0]["announced"] != 1 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert nbsubagents.status(run.id).rows[0]["status"] == "completed"
