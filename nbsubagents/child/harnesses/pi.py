"""pi as a harness: ``pi --mode rpc``, talked to through its RPC conversation (``child/rpc.py``).

The task and everything after it (steers, follow-ups, answers, fallback models) go to pi as RPC commands on its
stdin; a stop is an RPC ``abort`` first, then signals after ``ABORT_GRACE``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..events import PiEventAdapter as Adapter
from ..rpc import RpcSession
from . import version_of

if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

NAME = "pi"
PROGRAM = "pi"
PACKAGE = "@mariozechner/pi-coding-agent@0.73.1"  # what to install: the version the suite runs against
REFUSES: dict[str, str] = {}  # pi honours every run option
TASK_ON_STDIN = False         # the task is the first RPC prompt
ABORT_GRACE = 2.0             # seconds between the RPC abort of a stopped run and SIGTERM

__all__ = ["NAME", "PROGRAM", "PACKAGE", "REFUSES", "TASK_ON_STDIN", "ABORT_GRACE", "Adapter", "build", "session",
           "version"]


def build(run: dict[str, Any]) -> tuple[list[str], dict[str, str]]:
    raise NotImplementedError("pi's argv is built by nbsubagents.pi.args.build_argv (RPC mode), not by its harness")


def session(run_dir: Path, meta: dict[str, Any]) -> RpcSession:
    return RpcSession(run_dir, meta, Adapter())


def version(program: str) -> str | None:
    return version_of(program)
