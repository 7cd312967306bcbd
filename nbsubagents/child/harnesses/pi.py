"""pi as a harness: what exists, under the harness interface (pi's argv is built by ``pi/args.py`` and its
conversation is ``child/rpc.py``: nothing here changes how a pi run goes)."""

from __future__ import annotations

from ..events import PiEventAdapter as Adapter
from . import version_of

from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from typing import Any

NAME = "pi"
PROGRAM = "pi"
PACKAGE = "@mariozechner/pi-coding-agent"
REFUSES: dict[str, str] = {}  # pi honours every run option

__all__ = ["NAME", "PROGRAM", "PACKAGE", "REFUSES", "Adapter", "build", "version"]


def build(run: dict[str, Any]) -> tuple[list[str], dict[str, str]]:
    raise NotImplementedError("pi's argv is built by nbsubagents.pi.args.build_argv (RPC mode), not by its harness")


def version(program: str) -> str | None:
    return version_of(program)
