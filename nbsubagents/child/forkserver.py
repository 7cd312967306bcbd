"""A warm process that forks supervisors: a run's supervisor starts in about a millisecond instead of ~25 ms.

Starting a supervisor as a new Python interpreter costs the interpreter's start and the imports of ``child/``
(~25 ms here) on every run, before pi can start. The process launcher (``lifecycle.forkserver``) keeps one of
these per kernel: it has imported the supervisor once and forks it for each run, so a run's supervisor begins
where a fresh one would be after its imports.

It forks each supervisor ahead of its run: one waits (a *spare*, detached in a session of its own, reading a pipe)
until a request comes, then takes it at once, and the next is forked while that run starts. The fork, and the
first steps of a forked process, are then off the run's path (~1.3 ms here).

It speaks JSON lines. On stdin, one request per run: ``{"runDir", "cwd", "env"}`` (the kernel's environment at
that moment: a variable set since this process started reaches the run). On stdout: ``ready`` once it can fork,
``started PID`` for each request in order (``failed MESSAGE`` when no supervisor could be forked), and
``exited PID CODE`` when a supervisor it forked ends (``CODE`` as ``Popen.returncode`` gives it: ``-N`` for
signal N). It exits when its stdin closes (the kernel is gone), and so does its spare (its pipe closes); the
supervisors it forked go on, each in a session of its own.
"""

from __future__ import annotations

import json
import gc
import os
import selectors
import signal
import sys

from . import supervisor  # imported once here, before any fork: what the fork saves


def main() -> int:
    # What was imported stays out of the collector's sight: a supervisor's collections would otherwise walk (and so
    # copy, page by page) the objects it shares with this process; it has ~25% fewer page faults while pi starts.
    gc.freeze()
    os.set_blocking(0, False)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # the handler is needed for the wake-up byte
    signal.set_wakeup_fd(wake_w)
    selector = selectors.DefaultSelector()
    selector.register(0, selectors.EVENT_READ)
    selector.register(wake_r, selectors.EVENT_READ)
    server_fds = (wake_r, wake_w, selector.fileno())
    spare = _spare(server_fds)
    _say("ready")
    pending = b""
    while True:
        for key, _ in selector.select():
            if key.fd == wake_r:
                _drain(wake_r)
                _reap()
                continue
            chunk = _read(0)
            if chunk == b"":
                return 0  # the kernel is gone: the supervisors are not ours to end (the spare's pipe closes)
            pending += chunk or b""
            *lines, pending = pending.split(b"\n")
            for line in lines:
                if line.strip():
                    spare = _serve(line, spare, server_fds)


def _serve(request: bytes, spare: tuple[int, int] | None, server_fds: tuple[int, ...]) -> tuple[int, int] | None:
    """Give ``request`` to the spare (to one forked now when there is none, or it is gone) and say which process
    took it; returns the next spare."""
    try:
        if spare is None or not _hand(spare, request):
            spare = _spare(server_fds)
            if spare is None or not _hand(spare, request):
                raise OSError("no supervisor could be forked")
        _say(f"started {spare[0]}")
    except OSError as exc:
        _say(f"failed {exc}")
    return _spare(server_fds)


def _spare(server_fds: tuple[int, ...]) -> tuple[int, int] | None:
    """A supervisor forked ahead of its run, waiting for the request on a pipe: its pid and the pipe's write end
    (None when the fork failed)."""
    r, w = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        os.close(r)
        os.close(w)
        return None
    if pid:
        os.close(r)
        return pid, w
    try:  # the supervisor, as spawn_supervisor would start it
        os.close(w)
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for fd in server_fds:
            os.close(fd)
        os.setsid()  # its own session: neither a kernel interrupt nor this process's end reaches it
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        os.dup2(null, 1)  # the server's replies are not this process's to keep open
        os.close(null)
        data = b""
        while chunk := os.read(r, 1 << 16):
            data += chunk
        if not data:
            os._exit(0)  # the server ended before a run came
        request = json.loads(data)
        run_dir = request["runDir"]
        log = os.open(os.path.join(run_dir, "supervisor.log"), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        os.environ.clear()
        os.environ.update(request["env"])
        if request.get("cwd"):
            os.chdir(request["cwd"])
        code = supervisor.main([run_dir])
    except BaseException as exc:  # noqa: BLE001 (nothing may return into the server's loop in this process)
        try:
            os.write(2, f"the supervisor could not start: {type(exc).__name__}: {exc}\n".encode())
        finally:
            os._exit(1)
    supervisor.exit_now(code)


def _hand(spare: tuple[int, int], request: bytes) -> bool:
    """Write the request to the spare's pipe and close it; False when the spare is gone (killed while it waited)."""
    _pid, w = spare
    try:
        left = memoryview(request)
        while left:  # a large environment is more than a pipe holds: the spare reads it as it comes
            left = left[os.write(w, left):]
        return True
    except OSError:
        return False
    finally:
        os.close(w)


def _reap() -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if not pid:
            return
        _say(f"exited {pid} {-os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)}")


def _say(line: str) -> None:
    os.write(1, (line + "\n").encode())


def _read(fd: int) -> bytes | None:
    try:
        return os.read(fd, 1 << 16)
    except BlockingIOError:
        return None


def _drain(fd: int) -> None:
    while _read(fd):
        pass


if __name__ == "__main__":
    sys.exit(main())
