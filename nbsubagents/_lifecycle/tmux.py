"""The tmux runner (opt-in, foreground runs only): the supervisor runs in a tmux session a person can attach to.

``configure(runner="tmux")`` makes ``run``/``run_parallel`` start each run as

    tmux -L nbsubagents-<runId> new-session -d -s <runId> -- python -m nbsubagents._child.tmux_pane RUN_DIR

whose pane starts the supervisor and prints the run's transcript as it grows; attach with
``tmux -L nbsubagents-<runId> attach``. Ctrl-C in the pane aborts the run. Each run has its own tmux
server so the pane gets exactly the kernel's environment (a shared server would hand new panes its
own, older environment). The kernel waits on ``result.json`` through ``TmuxProcess`` (the subset of
``subprocess.Popen`` the runner uses); cancel and interrupt SIGTERM the supervisor found in
``supervisor.json``; at the end the tmux server is killed so nothing is left.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._child import procs
from .._child.artifacts import RunPaths, read_json
from .._child.tmux_pane import attach_command, socket_name  # noqa: F401 - the session naming is the pane's
from .._config import NbSubagentsError
from .._child.record import RunRecord
from . import settle
from .process import wait_any

if TYPE_CHECKING:
    from .handle import Run
    from .launch import Process

SETTLE = 2.0  # seconds after result.json before the session is killed even if the supervisor lingers


def require_tmux() -> str:
    """The tmux binary, or the error that says how to get it or how to do without."""
    found = shutil.which("tmux")
    if not found:
        raise NbSubagentsError('runner="tmux" needs tmux on PATH: apt-get install tmux, '
                               'or configure(runner="process")')
    return found


def socket_path(run_id: str) -> Path:
    """Where tmux puts the socket of a run's server (``$TMUX_TMPDIR`` or /tmp, then ``tmux-<uid>``)."""
    return Path(os.environ.get("TMUX_TMPDIR") or "/tmp") / f"tmux-{os.getuid()}" / socket_name(run_id)


class TmuxProcess:
    """A run's supervisor inside tmux, seen through ``poll``/``wait``/``send_signal`` like a Popen."""

    def __init__(self, tmux: str, run_id: str, paths: RunPaths, pane_pid: int | None,
                 socket: str | None = None) -> None:
        self.tmux = tmux
        self.socket = socket
        self.run_id = run_id
        self.paths = paths
        self.pid = pane_pid or 0
        self.pane_ticks = procs.process_start_ticks(pane_pid) if pane_pid else None
        self.returncode: int | None = None
        self.args = [tmux, "-L", socket_name(run_id)]
        self._pending: int | None = None
        self._result_seen: float | None = None

    def _supervisor(self) -> tuple[int, int] | None:
        info = read_json(self.paths.supervisor) or {}
        if procs.alive(info.get("pid"), info.get("startTicks")):
            return info["pid"], info["startTicks"]
        return None

    def poll(self) -> int | None:
        if self.returncode is not None:
            return self.returncode
        supervisor = self._supervisor()
        if self._pending is not None and supervisor is not None:
            self.send_signal(self._pending)
        if self.paths.result.exists():
            self._result_seen = self._result_seen or time.monotonic()
            if supervisor is None or time.monotonic() - self._result_seen > SETTLE:
                self._finish(0)
        elif supervisor is None and not procs.alive(self.pid, self.pane_ticks) and not self.paths.result.exists():
            self._finish(1)  # the pane went without a result: the runner records it lost
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
            time.sleep(0.05)
        return self.returncode  # type: ignore[return-value]

    def send_signal(self, sig: int) -> None:
        supervisor = self._supervisor()
        if supervisor is None:
            if self.returncode is None:
                self._pending = sig  # not up yet: delivered once supervisor.json names it
            return
        self._pending = None
        procs.send(supervisor[0], sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self._finish(-9)

    def _finish(self, code: int) -> None:
        self.returncode = code
        kill_server(self.tmux, self.run_id, self.socket)


def kill_server(tmux: str, run_id: str, socket: str | None = None) -> None:
    """End the run's tmux server and remove its socket file (tmux leaves it in /tmp/tmux-<uid>)."""
    try:
        subprocess.run([tmux, "-L", socket_name(run_id), "kill-server"], stdin=subprocess.DEVNULL,
                       capture_output=True, timeout=10, cwd="/")
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        Path(socket or socket_path(run_id)).unlink()
    except OSError:
        pass


def launch(run: Run) -> TmuxProcess:
    """Start the run's supervisor in a new detached tmux session; a failure to do so fails the run."""
    tmux = require_tmux()
    env = {k: v for k, v in os.environ.items() if k not in ("TMUX", "TMUX_PANE")}
    cwd = run.record.cwd or str(run.dir)
    argv = [tmux, "-L", socket_name(run.run_id), "-f", "/dev/null", "new-session", "-d", "-s", run.run_id,
            "-x", "200", "-y", "50", "-c", cwd, "-P", "-F", "#{pane_pid} #{socket_path}", "--",
            sys.executable, "-m", "nbsubagents._child.tmux_pane", str(run.dir)]
    try:
        # cwd="/": the tmux server keeps its client's working directory for its whole life.
        proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=30, env=env, cwd="/")
        error = proc.stderr.decode(errors="replace").strip() if proc.returncode else None
        pane, _, socket = proc.stdout.decode(errors="replace").strip().partition(" ")
    except (OSError, subprocess.SubprocessError) as exc:
        error, pane, socket = str(exc), "", ""
    handle = TmuxProcess(tmux, run.run_id, run.paths, int(pane) if pane.isdigit() else None, socket or None)
    if error is not None:
        settle.never_ran(run.paths, run.record, "failed", f"tmux could not start the run's session: {error}")
        handle._finish(1)
    return handle


class TmuxLauncher:
    """The supervisor in a tmux session of its own (``configure(runner="tmux")``, foreground runs)."""

    name = "tmux"
    remote = False
    log_before_start = False  # the pane's supervisor opens its log once tmux has started it

    def start(self, run: Run) -> TmuxProcess:
        return launch(run)

    def cancel(self, run: Run) -> bool | None:
        return None  # a local supervisor: the request file and a signal to its pid (Run.cancel)

    def check(self, paths: RunPaths, record: RunRecord, row: dict[str, Any]) -> str | None:
        return None  # a local supervisor: its pid says (reconcile.check)

    def slots(self, runs: list[Run]) -> int | None:
        return None  # this machine: the call's concurrency bounds its runs

    def require(self) -> None:
        """The tmux runner needs tmux: said before any run is created."""
        require_tmux()

    def wait_any(self, processes: list[Process], timeout: float) -> None:
        wait_any(processes, timeout)  # no pidfd for a pane: the first one's own wait
