"""The process launcher's fork server: runs after the first start from a warm process, with the environment of
the moment, outlive the process that launched them, and start the usual way when the server is gone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import nbsubagents
from nbsubagents.child.procs import descendants
from nbsubagents.lifecycle import forkserver
from nbsubagents.lifecycle.forkserver import Forked, ForkServer


def _ready(server: ForkServer) -> ForkServer:
    assert server.wait_ready(30), "the fork server never said it was ready"
    return server


def _gone(pid: int, seconds: float = 10) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def test_a_forked_supervisor_reports_its_exit_code_and_log(tmp_path):
    server = _ready(ForkServer())
    try:
        run_dir = tmp_path / "run"
        run_dir.mkdir()  # no meta.json: the supervisor says so and exits 2
        proc = server.spawn(run_dir, str(tmp_path))
        assert isinstance(proc, Forked)
        assert proc.wait(timeout=30) == 2 and proc.poll() == 2
        assert "no readable meta.json" in (run_dir / "supervisor.log").read_text()
        proc.send_signal(15)  # an ended supervisor: nothing is signalled, nothing raises
    finally:
        server.close()
        assert server.proc.returncode == 0  # its stdin closed: the server ends


def _one_child(pid: int) -> int:
    deadline = time.monotonic() + 10
    while len(children := set(descendants(pid))) != 1 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert len(children) == 1, f"the server has {len(children)} waiting children, not one spare"
    return children.pop()


def test_each_supervisor_is_forked_before_its_run_and_a_lost_one_is_replaced(tmp_path):
    server = _ready(ForkServer())
    try:
        spare = _one_child(server.proc.pid)  # forked before any request
        deadline = time.monotonic() + 10
        while os.getsid(spare) != spare and time.monotonic() < deadline:
            time.sleep(0.01)  # it detaches right after its fork
        assert os.getsid(spare) == spare, "the spare did not go into a session of its own before a request came"
        runs = []
        for name in ("first", "second"):
            run_dir = tmp_path / name
            run_dir.mkdir()
            runs.append(server.spawn(run_dir, str(tmp_path)))
            assert runs[-1].pid == spare, "the request was not taken by the supervisor that was waiting"
            assert runs[-1].wait(timeout=30) == 2  # no meta.json: it says so and exits 2
            spare = _one_child(server.proc.pid)  # the next one, already waiting
            assert spare not in (run.pid for run in runs)
        os.kill(spare, 9)  # a spare lost while it waited: the run is served all the same
        assert _gone(spare)
        run_dir = tmp_path / "third"
        run_dir.mkdir()
        third = server.spawn(run_dir, str(tmp_path))
        assert isinstance(third, Forked) and third.pid != spare and third.wait(timeout=30) == 2
        assert "no readable meta.json" in (run_dir / "supervisor.log").read_text()
        spare = _one_child(server.proc.pid)
    finally:
        server.close()
    assert _gone(spare), "the spare outlived its server"


def test_runs_after_the_first_are_forked_with_the_environment_of_the_moment(project, monkeypatch):
    monkeypatch.setattr(forkserver, "_server", None)
    first = nbsubagents.run("scout", "run: echo first", show=False)
    assert first.status == "completed" and isinstance(first.process, subprocess.Popen)
    _ready(forkserver._server)
    try:
        monkeypatch.setenv("NBS_FORKED_VALUE", "set-after-the-server-started")
        monkeypatch.setenv("NBS_FORKED_LARGE", "x" * 100_000)  # the request is more than a pipe holds at once
        second = nbsubagents.run("scout", "run: echo $NBS_FORKED_VALUE ${#NBS_FORKED_LARGE}", show=False)
        assert isinstance(second.process, Forked)
        assert second.status == "completed", second.error
        assert "set-after-the-server-started 100000" in second.output
        assert os.getsid(forkserver._server.proc.pid) != os.getsid(0)  # a kernel interrupt does not reach it
    finally:
        forkserver._server.close()


def test_without_its_server_a_run_starts_the_usual_way(project, monkeypatch):
    monkeypatch.setattr(forkserver, "_server", None)
    nbsubagents.run("scout", "ls src", show=False)
    server = _ready(forkserver._server)
    server.proc.kill()
    server.proc.wait()
    run = nbsubagents.run("scout", "ls src", show=False)
    assert run.status == "completed" and isinstance(run.process, subprocess.Popen)


def test_the_server_ends_with_its_process_and_its_runs_go_on(project, tmp_path):
    script = tmp_path / "launcher.py"
    script.write_text(
        "import json, os, time, nbsubagents\n"
        "from nbsubagents.lifecycle import forkserver\n"
        "nbsubagents.run('scout', 'ls src', show=False)\n"
        "assert forkserver._server.wait_ready(30)\n"
        "run = nbsubagents.start('scout', 'run: sleep 2', show=False)\n"
        "print(json.dumps({'server': forkserver._server.proc.pid, 'forked': run.process.pid, 'dir': str(run.dir)}))\n"
        "os._exit(0)  # the kernel dies with the run going on\n")
    env = {**os.environ, "PYTHONPATH": str(Path(nbsubagents.__file__).parents[1])}
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert _gone(seen["server"]), "the fork server outlived the process that started it"
    result = Path(seen["dir"]) / "result.json"
    deadline = time.monotonic() + 60
    while not result.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert json.loads(result.read_text())["status"] == "completed"
    assert _gone(seen["forked"])


@pytest.fixture(autouse=True)
def _own_server(monkeypatch):
    """Each test starts its own server (the process's one, if any, is left as it was)."""
    monkeypatch.setattr(forkserver, "_owner", os.getpid())
