"""The supervisor's side of a reply's check against ``output_schema``: ``reply_check`` started as a process of its own,
fed the reply and the schema, its one line of answer read back, while the run's guards go on.

A reply nested thousands deep, or a ``pattern`` that backtracks catastrophically (Python's ``re`` cannot be
interrupted), can only hang or break that process: the run's timeout and cancel end it, and so does
``REPLY_CHECK_SECONDS``; never the supervisor.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import time

from .procs import MARKER, send_group
from .run_files import best_effort
from .text import clip

from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from typing import Any, Callable

REPLY_CHECK = "nbsubagents._child.reply_check"  # the module that checks a reply against output_schema
REPLY_CHECK_SECONDS = 30.0       # the most a reply's check may take, within the run's own timeout
TICK = 0.2                       # guard checks while the check runs


def check(text: str, schema: Any, run_id: str, stopped: Callable[[], bool]) -> tuple[Any, str | None] | None:
    """``(data, None)`` for a reply that matches, ``(None, why)`` for one that does not or could not be checked;
    None when ``stopped`` (the run's guards, called every TICK: true once they stopped the run) ended it first."""
    request = json.dumps({"text": text, "schema": schema}).encode()
    env = {**os.environ, MARKER: run_id}
    checker = subprocess.Popen([sys.executable, "-m", REPLY_CHECK], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    out, over, halted = b"", False, False
    try:
        out, over, halted = _converse(checker, request, stopped)
    finally:
        try:  # once its answer is read it is exiting: a moment for that, none when it was stopped
            checker.wait(0 if over or halted else 2)
        except subprocess.TimeoutExpired:
            send_group(checker.pid, signal.SIGKILL)  # its own session: the group is the checker's alone
            checker.wait()
        for pipe in (checker.stdin, checker.stdout):
            if pipe is not None and not pipe.closed:
                best_effort(pipe.close)
    if halted:
        return None
    if over:
        return None, (f"The reply could not be checked against output_schema within {REPLY_CHECK_SECONDS:g}s: a "
                      "`pattern` of the schema that backtracks catastrophically on this reply (such as '^(a+)+$'), "
                      "or a very large reply. Simplify the pattern or the schema.")
    lines = out.decode(errors="replace").strip().splitlines()
    try:
        answer = json.loads(lines[-1])
        data, error = answer["data"], answer["error"]
    except (IndexError, ValueError, KeyError, TypeError):
        tail = lines[-1] if lines else f"it exited with code {checker.returncode} and printed nothing"
        return None, f"The reply could not be checked against output_schema: {clip(tail, 300)}"
    return (data, None) if error is None else (None, str(error))


def _converse(proc: subprocess.Popen[bytes], request: bytes,
              stopped: Callable[[], bool]) -> tuple[bytes, bool, bool]:
    """``request`` to ``proc``'s stdin and its whole stdout back: ``(output, over, halted)``, ``over`` when
    REPLY_CHECK_SECONDS ran out first, ``halted`` when ``stopped`` said the run was stopped (with what came so far)."""
    assert proc.stdin is not None and proc.stdout is not None
    deadline = time.monotonic() + REPLY_CHECK_SECONDS
    selector = selectors.DefaultSelector()
    out_fd, in_fd = proc.stdout.fileno(), proc.stdin.fileno()
    os.set_blocking(out_fd, False)
    os.set_blocking(in_fd, False)
    selector.register(out_fd, selectors.EVENT_READ)
    selector.register(in_fd, selectors.EVENT_WRITE)
    chunks: list[bytes] = []
    pending = memoryview(request)
    try:
        while True:
            for key, _ in selector.select(TICK):
                if key.fd == in_fd:
                    try:
                        pending = pending[os.write(in_fd, pending[:1 << 16]):]
                    except BlockingIOError:
                        continue
                    except OSError:  # it stopped reading (and will say why on stdout)
                        pending = pending[:0]
                    if not pending:
                        selector.unregister(in_fd)
                        proc.stdin.close()
                else:
                    try:
                        chunk = os.read(out_fd, 1 << 16)
                    except BlockingIOError:
                        continue
                    if not chunk:
                        return b"".join(chunks), False, False
                    chunks.append(chunk)
            if stopped():
                return b"".join(chunks), False, True
            if time.monotonic() >= deadline:
                return b"".join(chunks), True, False
    finally:
        selector.close()
