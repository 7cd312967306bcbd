"""One process at a time runs an experiment: its lock refuses a live holder at once, and waits out a lock that a
killed holder's child still keeps open for a moment (it had not yet started its own program)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading

import pytest

from nbsubagents._child.procs import process_start_ticks
from nbsubagents._config import NbSubagentsError
from nbsubagents._sweeps import plan
from nbsubagents._sweeps.plan import lock_path, locked

HOLD = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
sys.stdin.readline()
"""


def hold(path):
    """A process holding the lock until its stdin is closed."""
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout.readline() == "held\n"
    return proc


def release(proc):
    proc.stdin.close()
    proc.wait(30)


def test_a_live_holder_is_refused_at_once_naming_it(tmp_path):
    path = lock_path(tmp_path, "sweep")
    path.parent.mkdir(parents=True)
    holder = hold(path)
    try:
        path.write_text(json.dumps({"pid": holder.pid, "startTicks": process_start_ticks(holder.pid), "since": "now",
                                    "command": "python x"}))
        with pytest.raises(NbSubagentsError, match=f"being run by process {holder.pid} "):
            with locked(tmp_path, "sweep"):
                pass
    finally:
        release(holder)


def test_a_lock_whose_recorded_holder_is_gone_is_waited_for_not_refused(tmp_path, monkeypatch):
    path = lock_path(tmp_path, "sweep")
    path.parent.mkdir(parents=True)
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    keeper = hold(path)  # as a child of the killed holder keeps the file open until its exec
    path.write_text(json.dumps({"pid": gone.pid, "startTicks": None, "since": "then", "command": "python sweep"}))
    outcome: list[object] = []
    asked = threading.Event()  # the taker found the lock held and asked who holds it

    holder = plan._holder

    def holder_of(lock):
        found = holder(lock)
        asked.set()
        return found

    monkeypatch.setattr(plan, "_holder", holder_of)

    def take() -> None:
        try:
            with locked(tmp_path, "sweep"):
                outcome.append("held")
        except NbSubagentsError as exc:
            outcome.append(exc)

    taker = threading.Thread(target=take)
    taker.start()
    assert asked.wait(60)
    release(keeper)
    taker.join(60)
    assert outcome == ["held"]
