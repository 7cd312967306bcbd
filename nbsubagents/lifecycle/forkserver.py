"""The process launcher's fork server: supervisors forked from a warm process (``child/forkserver.py``).

A supervisor started as a new interpreter spends ~25 ms starting Python and importing ``child/`` before it can
start pi; forked from a process that did that once, it starts at once. The server is started the first time a run
is launched (that run starts the usual way, so a first run never waits for it) and serves the runs after it; it
ends when this process does. A run it cannot serve (not ready, gone, a fork that failed) starts the usual way.
A Dask worker keeps one too, for the supervisors of the runs it takes (``dask_launcher.run_supervisor``).

A forked supervisor is the server's child, not ours: ``Forked`` is its ``Process`` handle (exit codes come from the
server, a pidfd wakes a wait the moment it exits).
"""

from __future__ import annotations

import atexit
import json
import os
import select
import subprocess
import sys
import threading
import time
from pathlib import Path

__all__ = ["Forked", "ForkServer", "server"]

_PACKAGE_PARENT = str(Path(__file__).resolve().parents[2])
# started like a supervisor (see lifecycle.process): without site, the package found where this process found it
_CODE = "import sys; sys.path[0] = sys.argv[1]; from nbsubagents.child.forkserver import main; sys.exit(main())"
REPLY_SECONDS = 5.0  # the longest a fork may take to be confirmed before the server is given up


class ForkServer:
    """One fork server of this process: ``spawn`` asks it for a supervisor; ``code`` reads how one ended."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-S", "-c", _CODE, _PACKAGE_PARENT], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True,
                                     cwd="/")
        assert self.proc.stdout is not None
        self.out = self.proc.stdout.fileno()
        os.set_blocking(self.out, False)
        self.lock = threading.Lock()
        self.ready = self.gone = False
        self.pending = b""
        self.codes: dict[int, int] = {}   # pid -> exit code, of forked supervisors not yet asked about
        self.replies: list[str] = []      # "started PID" / "failed ..." lines, in the order of the requests
        atexit.register(self.close, os.getpid())

    def close(self, owner: int | None = None) -> None:
        """End the server (its stdin closed: the supervisors it forked go on); by ``owner`` only, at exit."""
        if owner is not None and owner != os.getpid():
            return  # a forked copy of the process that started it: not its to end
        with self.lock:
            self.gone = True
            for pipe in (self.proc.stdin, self.proc.stdout):
                if pipe is not None:
                    pipe.close()
        try:
            self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def spawn(self, run_dir: Path, cwd: str | None, env: dict[str, str] | None = None) -> Forked | None:
        """A supervisor for ``run_dir`` forked with ``env`` (default: this process's environment now); None if the
        server cannot."""
        with self.lock:
            self._take()
            if not self.ready or self.gone:
                return None
            open(run_dir / "supervisor.log", "ab").close()  # as spawn_supervisor: a launched run has its log
            request = {"runDir": str(run_dir), "cwd": cwd, "env": dict(os.environ) if env is None else env}
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write(json.dumps(request).encode() + b"\n")
                self.proc.stdin.flush()
            except (OSError, ValueError):
                self.gone = True
                return None
            deadline = time.monotonic() + REPLY_SECONDS
            while not self.replies and not self.gone and time.monotonic() < deadline:
                self._take(deadline - time.monotonic())
            if not self.replies:
                self.gone = True  # it does not answer: runs start the usual way from now on
                return None
            word, _, rest = self.replies.pop(0).partition(" ")
        return Forked(self, int(rest)) if word == "started" else None

    def code(self, pid: int, wait: float = 0.0) -> int | None:
        """How forked supervisor ``pid`` ended, once the server said so (waiting up to ``wait`` s for that)."""
        with self.lock:
            deadline = time.monotonic() + wait
            self._take()
            while pid not in self.codes and not self.gone and time.monotonic() < deadline:
                self._take(deadline - time.monotonic())
            return self.codes.pop(pid, None)

    def wait_ready(self, timeout: float) -> bool:
        """Whether the server is ready to serve, waiting up to ``timeout`` s for its word (read lazily otherwise:
        a process that launched nothing since the server started has not heard it)."""
        with self.lock:
            deadline = time.monotonic() + timeout
            self._take()
            while not self.ready and not self.gone and time.monotonic() < deadline:
                self._take(deadline - time.monotonic())
            return self.ready and not self.gone

    def _take(self, wait: float = 0.0) -> None:
        """Read what the server said (waiting up to ``wait`` s for something)."""
        if self.gone:
            return
        if wait > 0:
            select.select([self.out], [], [], wait)
        try:
            chunk = os.read(self.out, 1 << 16)
        except BlockingIOError:
            return
        if not chunk:
            self.gone = True
            return
        self.pending += chunk
        *lines, self.pending = self.pending.split(b"\n")
        for line in map(bytes.decode, lines):
            word, _, rest = line.partition(" ")
            if word == "ready":
                self.ready = True
            elif word == "exited":
                pid, _, code = rest.partition(" ")
                self.codes[int(pid)] = int(code)
            elif word in ("started", "failed"):
                self.replies.append(line)


class Forked:
    """A supervisor the fork server started: the ``Process`` subset the kernel's side uses."""

    def __init__(self, server: ForkServer, pid: int) -> None:
        self.server = server
        self.pid = pid
        self.returncode: int | None = None
        self._lock = threading.Lock()  # the pidfd is closed once the supervisor ended, maybe by another thread
        try:
            self.pidfd: int | None = os.pidfd_open(pid)  # not reaped before the server hears of its exit
        except (AttributeError, OSError):
            self.pidfd = None

    def poll(self) -> int | None:
        if self.returncode is None and self._exited():  # gone: the server's word of its exit code is on its way
            code = self.server.code(self.pid, wait=1.0)
            self.returncode = 255 if code is None else code  # the server is gone too: the code is lost
            self._close()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired(f"supervisor {self.pid}", timeout or 0.0)
            fd = self.watch_fd()
            if fd is None:
                time.sleep(0.05 if left is None else min(0.05, left))
                continue
            try:
                select.select([fd], [], [], left)
            finally:
                os.close(fd)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def watch_fd(self) -> int | None:
        """A new descriptor (the caller closes it) readable once the supervisor has exited; None without one."""
        with self._lock:
            return os.dup(self.pidfd) if self.pidfd is not None else None

    def _exited(self) -> bool:
        with self._lock:
            if self.pidfd is not None:
                return bool(select.select([self.pidfd], [], [], 0)[0])
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        return False

    def _close(self) -> None:
        with self._lock:
            if self.pidfd is not None:
                os.close(self.pidfd)
                self.pidfd = None

    def __del__(self) -> None:
        self._close()


_server: ForkServer | None = None
_owner = 0  # the pid that started _server: a forked copy of this process starts its own


def server() -> ForkServer | None:
    """This process's fork server when it can serve a run; None otherwise (the first call starts it, and returns
    None: that run starts the usual way)."""
    global _server, _owner
    if _server is not None and _owner == os.getpid():
        return None if _server.gone else _server  # gone: not started again and again
    try:
        _server, _owner = ForkServer(), os.getpid()
    except OSError:
        pass
    return None
