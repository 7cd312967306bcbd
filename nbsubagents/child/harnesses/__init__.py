"""The agent harnesses a run's child can be: pi (the default), Claude Code, Codex CLI.

Each harness is a module of this package (standard library only, imported when a run uses it) with:

- ``NAME`` (a run's ``meta["harness"]``), ``PROGRAM`` (its executable's name), ``PACKAGE`` (its npm package);
- ``REFUSES``: run option (``TaskSpec`` spelling) -> why this harness cannot honour it (``prepare`` refuses such a
  call before anything is written, naming the harness and the option);
- ``build(run) -> (argv, env)``: the child's argv (program first; the task is not in it: the supervisor gives
  ``prompt.md`` on stdin) and the environment it adds, from ``run`` (program, model, systemPrompt, tools,
  disallowedTools, permissionMode, maxTurns, maxCost, outputSchemaPath, resumeSession, cwd, runDir);
- ``Adapter``: ``adapt(obj) -> list[event]`` turns one JSON line of the harness's stream into the events of
  ``child/events.py`` (tool names as pi's verbs: read, bash, edit, write, grep, find, ls), with
  ``conversation_over``, ``session_id`` and ``final`` (the harness's own end record);
- ``version(program) -> str | None``.

pi's argv comes from ``pi/args.py`` and its conversation from ``child/rpc.py``; every other harness is driven by
``stream.Stream`` (the harness's stdout read, nothing written to its stdin after the task).
"""

from __future__ import annotations

import importlib
import subprocess

from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from types import ModuleType

NAMES = ("pi", "claude-code", "codex")
_MODULES = {"pi": "pi", "claude-code": "claude_code", "codex": "codex"}
VERSION_TIMEOUT = 10.0  # seconds `PROGRAM --version` may take


def get(name: str) -> ModuleType:
    """The harness module called ``name``; an unknown name is a ValueError naming the known ones."""
    if name not in _MODULES:
        raise ValueError(f"Unknown harness {name!r}; the harnesses are {', '.join(NAMES)}")
    return importlib.import_module(f"{__name__}.{_MODULES[name]}")


def version_of(program: str) -> str | None:
    """The first line ``program --version`` prints (None when it cannot be run or says nothing in time)."""
    try:
        done = subprocess.run([program, "--version"], stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=VERSION_TIMEOUT, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = (done.stdout or done.stderr).decode(errors="replace").strip().splitlines()
    return lines[0].strip() if done.returncode == 0 and lines else None
