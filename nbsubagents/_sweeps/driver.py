"""The detached driver of a background sweep: ``python -m nbsubagents._sweeps.experiment ROOT NAME CONCURRENCY``
resumes the experiment in a process of its own session (it goes on when the kernel dies); its pid is kept
next to the plan so any process can tell whether it still runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from .._child.artifacts import atomic_write_json, now_iso, read_json
from .._child.procs import alive, process_start_ticks
from .plan import plans_dir

__all__ = ["start", "running"]


def _info(root: Path, name: str) -> Path:
    return plans_dir(root) / f"{name}.driver.json"


def start(root: Path, name: str, concurrency: int) -> subprocess.Popen:
    """Start the driver, its output in ``<name>.log`` beside the plan."""
    with open(plans_dir(root) / f"{name}.log", "ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "nbsubagents._sweeps.experiment", str(root), name,
                                 str(concurrency)], stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                start_new_session=True, cwd=root)
    atomic_write_json(_info(root, name), {"pid": proc.pid, "startTicks": process_start_ticks(proc.pid),
                                          "startedAt": now_iso()})
    return proc


def running(root: Path, name: str) -> bool:
    """True while the recorded driver of this experiment is alive (pid and start time)."""
    info = read_json(_info(root, name)) or {}
    return alive(info.get("pid"), info.get("startTicks"))
