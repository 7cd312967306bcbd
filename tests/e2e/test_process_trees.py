"""No process of a run outlives it (issue 13, item 1), however the run ends.

pi starts each bash tool command in a process group of its own, so signalling pi's group is not
enough: a SIGKILLed pi used to leave its tool's ``sleep`` running under init. Each test gives its
tool commands a unique sleep length and looks for that in every process's command line, which does
not depend on how the supervisor finds the processes it ends.
"""

from __future__ import annotations

import os
import random
import signal
import time
from pathlib import Path

import pytest
from helpers import wait_for

import nbsubagents
from nbsubagents import _config as config
from nbsubagents._child.artifacts import read_json


def token() -> str:
    """A sleep length no other process on the machine has: ``120.<random digits>``."""
    return f"120.{random.randrange(10**6, 10**7)}"


def processes_with(text: str) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if text in cmd and state != "Z":
            found.append(f"{entry.name}: {cmd.strip()}")
    return found


def gone_within(text: str, seconds: float = 5.0) -> list[str]:
    """The processes still carrying ``text`` after ``seconds`` (empty as soon as none is left)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        left = processes_with(text)
        if not left:
            return []
        time.sleep(0.1)
    return processes_with(text)


def started_sleeping(run: nbsubagents.Run, text: str) -> dict:
    wait_for(lambda: processes_with(text), 60, f"the tool's sleep {text} of {run.id}")
    return wait_for(lambda: (read_json(run.paths.supervisor) or {}).get("childPid") and read_json(run.paths.supervisor),
                    10, "supervisor.json with the child's pid")


def test_sigkill_of_pi_while_its_bash_tool_sleeps_leaves_nothing(project):
    t = token()
    run = nbsubagents.start("scout", f"run: sleep {t}", show=False)
    info = started_sleeping(run, t)
    os.kill(info["childPid"], signal.SIGKILL)
    run.wait(60)
    assert run.status == "failed", run.result
    assert gone_within(t) == []


def test_cancel_while_the_bash_tool_sleeps_leaves_nothing(project):
    t = token()
    run = nbsubagents.start("scout", f"run: sleep {t}", show=False)
    started_sleeping(run, t)
    assert nbsubagents.cancel(run.id) is True
    run.wait(60)
    assert run.status == "aborted"
    assert gone_within(t) == []


def test_timeout_while_the_bash_tool_sleeps_leaves_nothing(project):
    config.configure(extend_timeout_debounce=0.5)
    t = token()
    run = nbsubagents.run("scout", f"run: sleep {t}", timeout=2, show=False)
    assert run.error == "Timed out after 2s. Consider resuming with a longer timeout."
    assert gone_within(t) == []


def test_loop_detection_ends_tool_processes_that_left_pis_tree(project):
    """Each call starts a background sleep and returns: pi no longer tracks it when the loop ends the run."""
    config.configure(looping_tool_count=2)
    t = token()
    line = f"run: sleep {t} >/dev/null 2>&1 &"
    run = nbsubagents.run("scout", f"{line}\n{line}\n{line}", show=False)
    assert run.error == "Loop detected: sub-agent is repeating the same tool calls"
    assert gone_within(t) == []


def test_a_completed_run_ends_even_a_detached_env_scrubbed_process(project):
    """``env -i setsid`` drops the run's environment marker and leaves pi's session: the supervisor,
    as the child subreaper, still inherits the orphan and ends it."""
    t = token()
    run = nbsubagents.run("scout", f"run: env -i setsid sleep {t} >/dev/null 2>&1 < /dev/null &\nsay: done",
                          show=False)
    assert run.status == "completed", run.error
    assert gone_within(t) == []


def test_a_killed_supervisor_leaves_nothing(project):
    t = token()
    run = nbsubagents.start("scout", f"run: sleep {t}", show=False)
    info = started_sleeping(run, t)
    os.kill(info["pid"], signal.SIGKILL)
    run.wait(60)
    assert run.status == "failed" and "supervisor exited without a result" in run.error
    assert gone_within(t) == []
    assert gone_within(str(run.id)) == []  # nor pi


@pytest.mark.parametrize("how", ["SIGKILL", "SIGTERM"])
def test_foreground_run_whose_pi_dies_ends_its_tool_processes(project, how):
    import threading

    t = token()
    killed = threading.Event()

    def kill_pi() -> None:
        runs = project / ".pi" / "subagents" / "runs"
        wait_for(lambda: processes_with(t), 60, "the sleep")
        info = wait_for(lambda: next((read_json(p) for p in runs.glob("*/supervisor.json")
                                      if (read_json(p) or {}).get("childPid")), None), 10, "child pid")
        os.kill(info["childPid"], getattr(signal, how))
        killed.set()

    thread = threading.Thread(target=kill_pi, daemon=True)
    thread.start()
    run = nbsubagents.run("scout", f"run: sleep {t}", show=False)
    thread.join(5)
    assert killed.is_set() and run.status == "failed"
    assert gone_within(t) == []
