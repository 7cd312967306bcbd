"""The demo model server is a small detached process (issue 13, item 7): it survives the kernel that
started it, later kernels reuse it, and it ends with ``stop_scripted_model()`` or after a quiet spell."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest
from helpers import wait_for

from nbsubagents import demo

from nbsubagents._child import procs


@pytest.fixture
def server_dir(tmp_path, monkeypatch):
    """A state folder of the test's own, and no server left at the end."""
    monkeypatch.setenv("NBSUBAGENTS_SCRIPTED_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("NBSUBAGENTS_SCRIPTED_IDLE", raising=False)
    yield tmp_path / "state"
    demo.stop_scripted_model()


def kernel(code: str, cwd) -> subprocess.Popen:
    """A Python process standing in for a kernel: it runs ``code``, prints a line, and waits to be killed."""
    return subprocess.Popen([sys.executable, "-c", f"import time\n{code}\ntime.sleep(600)\n"], cwd=cwd,
                            stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                            env={**os.environ, "NBSUBAGENTS_PI": str(demo.Path(demo.__file__).parents[2]
                                                                     / "node_modules" / ".bin" / "pi")})


def test_a_background_run_of_the_demo_completes_after_its_kernel_is_killed(server_dir, tmp_path):
    project = demo.copy_example_project(tmp_path / "project")
    first = kernel("from nbsubagents.demo import use_scripted_model\nimport nbsubagents\n"
                   f"server = use_scripted_model({str(tmp_path / 'agent')!r})\n"
                   "run = nbsubagents.start('scout', 'sleep: 3\\nsay: survived the kernel', show=False)\n"
                   "print(run.id, server.pid, flush=True)", project)
    try:
        run_id, pid = first.stdout.readline().split()
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(30)
        first.stdout.close()
    result_file = project / ".pi" / "subagents" / "runs" / run_id / "result.json"
    result = wait_for(lambda: result_file.exists() and json.loads(result_file.read_text()), 60, "the result")
    assert result["status"] == "completed", result["errorMessage"]  # was: Connection error
    assert "survived the kernel" in result["finalText"]

    # A later kernel reuses the same server; stop_scripted_model() ends it.
    second = subprocess.run([sys.executable, "-c", "from nbsubagents.demo import use_scripted_model\n"
                             "print(use_scripted_model().pid)"], capture_output=True, text=True, timeout=60)
    assert second.stdout.split() == [pid], second.stderr
    info = json.loads(next(server_dir.glob("scripted-model-*.json")).read_text())
    assert procs.alive(info["pid"], info["startTicks"])
    assert demo.stop_scripted_model() is True
    assert not procs.alive(info["pid"], info["startTicks"])
    assert list(server_dir.glob("scripted-model-*.json")) == []
    assert demo.stop_scripted_model() is False


def test_the_detached_server_ends_by_itself_when_idle(server_dir, monkeypatch):
    monkeypatch.setenv("NBSUBAGENTS_SCRIPTED_IDLE", "1")
    server = demo.scripted_server()
    assert server.alive and demo.scripted_server().pid == server.pid  # reused while it lives
    wait_for(lambda: not server.alive, 15, "the idle server to exit")
    assert list(server_dir.glob("scripted-model-*.json")) == []
