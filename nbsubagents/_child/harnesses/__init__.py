"""The agent harnesses a run's child can be: pi (the default), Claude Code, Codex CLI; each one module here.

A harness is a module (standard library only, imported when a run uses it) that has what ``Harness`` lists: what
the kernel needs (its program, what it refuses, its argv and environment for a run, its version) and what the
supervisor needs (whether the task is its stdin, how long a stop waits for it, its session and stream adapter).
Nothing outside a harness's module branches on its name. A third party adds one through the entry point group
``nbsubagents.harnesses`` (``name = "package.module"``), as papermill's engines are added.
"""

from __future__ import annotations

import importlib
import subprocess
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping, Protocol

if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import IO

    from ..events import Event
    from ..record import RunRecord
    from ..tool_servers import ToolServer

DEFAULT = "pi"  # the harness of a run that names none (and of every run older than harnesses)
BUILT_IN = {"pi": f"{__name__}.pi", "claude-code": f"{__name__}.claude_code", "codex": f"{__name__}.codex"}
ENTRY_POINTS = "nbsubagents.harnesses"
VERSION_TIMEOUT = 10.0  # seconds `PROGRAM --version` may take


@dataclass(frozen=True)
class Request:
    """What a harness is asked to start: one run's options, resolved by the kernel (``build`` reads them)."""

    program: str                               # its executable, as found (``NBSUBAGENTS_<PROGRAM>``, the project, PATH)
    run_dir: str
    cwd: str
    model: str | None = None                   # as this harness takes it (pi: ``provider/id[:thinking]``)
    model_source: str | None = None            # who named it: "call" or "preset" (None: nobody)
    system_prompt: str | None = None           # the preset's body, appended to the harness's own
    system_prompt_path: str | None = None      # ... and the file it is written to beside meta.json
    tools: tuple[str, ...] | None = None       # the preset's, as its author wrote them (None: the harness's own)
    disallowed_tools: tuple[str, ...] | None = None
    exclude_tools: tuple[str, ...] | None = None
    no_tools: bool = False
    all_tools: bool = False                    # no tools line in a Claude Code agent file: all the harness's tools
    permission_mode: str | None = None
    thinking: str | None = None
    skills: tuple[str, ...] = ()
    no_skills: bool = False
    no_context_files: bool = False
    no_extensions: bool = False
    extension_files: tuple[str, ...] = ()
    extra_args: tuple[str, ...] = ()
    max_turns: int | None = None
    max_cost: float | None = None
    output_schema_path: str | None = None      # the reply's JSON schema, written beside meta.json
    ask: bool = False                          # the child may ask the person a question
    approval: bool = False                     # its tool calls wait for the person's approval (NBSUBAGENTS_APPROVAL)
    project_config: bool = False               # it loads the project's own agent config (hooks, extensions, ...)
    resume_session: str | None = None          # the session it continues (``continues``' answer)
    resumed_run_dir: str | None = None         # ... of this earlier run
    env: Mapping[str, str] = field(default_factory=dict)  # what the kernel gives the child (the offline model's)
    preset_file: str | None = None             # the preset's file, as its author wrote it
    preset_scope: str | None = None            # where it was found: claude-user, claude-project, global or project
    preset_extra: Mapping[str, Any] = field(default_factory=dict)  # its fields nbsubagents does not read itself
    tool_servers: tuple[ToolServer, ...] = ()  # tools nbsubagents gives the child (MCP servers over stdio): each
                                               # harness runs them as it runs MCP servers (pi: mcp_bridge.js)


class Session(Protocol):
    """The supervisor's side of one child: what goes in after the task, and what its stream says."""

    adapter: Any
    open: dict[str, Any]        # questions waiting for an answer
    refused: str | None         # the child refused the task itself
    follows_up: bool            # it takes a message after its task, before it ends (``follow_up``)

    def attach(self, pipe: IO[bytes] | None, task: str, cwd: str | None = None) -> None: ...
    def adapt(self, obj: Any) -> list[Event]: ...
    def tick(self, stopping: bool = False) -> list[Event]: ...
    def finished(self) -> bool: ...
    def follow_up(self, text: str) -> bool: ...   # a message of nbsubagents' own (a repair); False: not taken
    def abort(self) -> None: ...
    def close(self, now: bool = False) -> None: ...
    def end(self) -> None: ...
    def record(self) -> dict[str, Any]: ...
    def error_end(self) -> tuple[str, str] | None: ...
    def totals(self) -> dict[str, Any]: ...
    def structured(self) -> Any: ...


class Harness(Protocol):
    """A harness module's interface."""

    NAME: str                    # a run's ``harness``
    PROGRAM: str                 # its executable's name (NBSUBAGENTS_<PROGRAM> points at one)
    PACKAGE: str                 # its npm package (how to install it)
    REFUSES: Mapping[str, str]   # run option (TaskSpec spelling) -> why it cannot honour it (refused before writing)
    TASK_ON_STDIN: bool          # the task is its stdin (prompt.md); else its session sends it
    ABORT_GRACE: float           # seconds between asking it to stop and SIGTERM
    WRITES: Mapping[str, str]    # what its child writes in the run's folder: name -> "file" or "folder" (in a sandbox
                                 # these alone are writable there: the rest is the run's record and the person's words)

    LISTS_MODELS: bool           # its models are the ``provider/id`` list ``models`` gives; else it takes any name

    def command(self, program: str) -> list[str]: ...                 # how to start ``program``
    def build(self, run: Request) -> tuple[list[str], dict[str, str]]: ...  # argv (no task) and added environment
    def left_out(self, run: Request) -> list[str]: ...                 # the preset's tools it cannot give
    def keys(self, record: RunRecord, env: Mapping[str, str]) -> Iterable[str]: ...  # the secret-named variables
                                                                       # of ``env`` its child needs (the rest go)
    def models(self, program: str) -> tuple[str, ...]: ...             # what it can use here (LISTS_MODELS)
    def models_key(self, program: str) -> str: ...                     # what that list depends on (its cache key)
    def continues(self, run_dir: str, record: RunRecord, result: Mapping[str, Any] | None) -> str | None: ...
    def relocate(self, run_dir: str, cwd: str) -> None: ...            # a resumed session now runs in ``cwd``
    def offline_env(self, url: str, folder: str, offered: Any) -> dict[str, str]: ...  # to the scripted model
    def session(self, run_dir: Any, record: RunRecord) -> Session: ...
    def version(self, program: str) -> str | None: ...
    # optional: repair_argv(argv, session_id) -> list[str] | None, the argv that continues its ended session with a new
    # task on stdin (a repair of a harness whose session does not follow up: ``child/repairs``)
    # optional: failure_words(argv, stderr) -> str | None, its words for a child that failed where stderr's last line
    # says too little (pi: a node too old for it); ``verdict.judge`` uses it when the module has it


def names() -> list[str]:
    """Every harness this installation has: the built-in ones, then those of installed packages."""
    return [*BUILT_IN, *(name for name in _plugins() if name not in BUILT_IN)]


def known(name: str) -> bool:
    """Whether ``name`` is a harness here (a built-in name is answered without reading the installed packages)."""
    return name in BUILT_IN or name in _plugins()


def get(name: str) -> Harness:
    """The harness called ``name``; an unknown name is a ValueError naming the known ones."""
    if name in BUILT_IN:
        return importlib.import_module(BUILT_IN[name])  # type: ignore[return-value]
    plugin = _plugins().get(name)
    if plugin is None:
        raise ValueError(f"Unknown harness {name!r}; the harnesses are {', '.join(names())}")
    return plugin.load()  # type: ignore[no-any-return]


def name_of(row: Mapping[str, Any]) -> str:
    """The harness that ran a run, from its registry row (rows older than harnesses name none: those were pi's)."""
    return str(row.get("harness") or DEFAULT)


def _plugins() -> dict[str, Any]:
    """name -> entry point of the harnesses installed packages register (read only when a name is not built in)."""
    from importlib.metadata import entry_points  # noqa: PLC0415 (start-up: built-in harnesses never need it)

    return {ep.name: ep for ep in entry_points(group=ENTRY_POINTS)}


def version_of(program: str) -> str | None:
    """The first line ``program --version`` prints (None when it cannot be run or says nothing in time)."""
    try:
        done = subprocess.run([program, "--version"], stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=VERSION_TIMEOUT, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = (done.stdout or done.stderr).decode(errors="replace").strip().splitlines()
    return lines[0].strip() if done.returncode == 0 and lines else None
