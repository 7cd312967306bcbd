"""Tools nbsubagents gives a child beyond its harness's own, each served by a small MCP server over stdio.

A tool server is a Python process (``python -m nbsubagents._child.<module>``) that speaks the Model Context
Protocol's stdio transport: one JSON-RPC 2.0 message a line, ``initialize``, ``tools/list``, ``tools/call``.
Every harness runs it the way it runs MCP servers: Claude Code and Codex natively (their MCP configuration), pi
through one bridge extension. So a tool is written once, in Python, and the harness is not asked what it is.

``ToolServer`` is what a run's options turn into (its name, argv and environment, decided by the kernel, never by
the child); ``serve`` is the loop a server module runs, given its tools.

Standard library only: a server starts in the child's time.
"""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping

if TYPE_CHECKING:
    from typing import IO

PROTOCOL = "2025-06-18"  # the MCP revision answered when the client asks for none we know
KNOWN = ("2024-11-05", "2025-03-26", "2025-06-18")
DETAILS = "nbsubagents/details"  # the key of a result's details in its _meta (the run's record; pi's tool details)
# where a harness names the call in a tools/call request's _meta: the pi bridge (mcp_bridge.js), Claude Code
CALL_IDS = ("nbsubagents/toolCallId", "claudecode/toolUseId")


_PACKAGE_PARENT = str(Path(__file__).resolve().parents[2])  # a server imports this package from where we have it


def python_argv(module: str, *args: str) -> tuple[str, ...]:
    """How a tool server written in this package starts: this interpreter, this package from where it is here,
    ``module``'s ``main(args)``."""
    code = f"import sys; sys.path[0] = sys.argv[1]; from {module} import main; main(sys.argv[2:])"
    return (sys.executable, "-c", code, _PACKAGE_PARENT, *args)


@dataclass(frozen=True)
class ToolServer:
    """One server a run's child gets: ``name`` (its tools appear under it), how to start it, its environment (added
    to the child's), the names of the tools it serves (a harness that allows tools by name lists them) and what it
    writes in the run's folder (name -> "file" or "folder", as a harness's ``WRITES``: writable in a sandbox).
    Decided by the kernel from the run's options, so the child cannot change it; kept in the run's record
    (``as_json``) and read back by the supervisor (``from_json``)."""

    name: str
    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    tools: tuple[str, ...] = ()
    writes: Mapping[str, str] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "argv": list(self.argv), "env": dict(self.env), "tools": list(self.tools),
                "writes": dict(self.writes)}

    @classmethod
    def from_json(cls, data: Any) -> ToolServer | None:
        """The server a record holds (None for an entry that is not one)."""
        if not (isinstance(data, dict) and isinstance(data.get("name"), str) and isinstance(data.get("argv"), list)):
            return None
        env, writes = data.get("env"), data.get("writes")
        return cls(data["name"], tuple(str(a) for a in data["argv"]),
                   {str(k): str(v) for k, v in env.items()} if isinstance(env, dict) else {},
                   tuple(str(t) for t in data.get("tools") or () if isinstance(t, str)),
                   {str(k): str(v) for k, v in writes.items()} if isinstance(writes, dict) else {})


def writes_of(servers: Any) -> dict[str, str]:
    """What the tool servers of a record (its ``toolServers``) write in the run's folder."""
    found: dict[str, str] = {}
    for entry in servers if isinstance(servers, list) else ():
        server = ToolServer.from_json(entry)
        if server is not None:
            found.update(server.writes)
    return found


@dataclass(frozen=True)
class Result:
    """What a tool call gives back: text for the model, whether it failed, and details for the run's record."""

    text: str
    is_error: bool = False
    details: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Tool:
    """A tool of a server: its name, what the model reads of it, its parameters (a JSON Schema object) and the
    function that runs a call (its arguments in, a ``Result`` out; an exception becomes an error result)."""

    name: str
    description: str
    input_schema: Mapping[str, Any]
    call: Callable[..., Result]
    with_call_id: bool = False  # call(arguments, call_id): the harness's id of the call (``call_id``), or None


def call_id(params: Mapping[str, Any]) -> str | None:
    """The id the harness gave a tools/call request in its ``_meta`` (its tool call's id), None when it gave none."""
    meta = params.get("_meta")
    found = next((meta[k] for k in CALL_IDS if isinstance(meta, Mapping) and isinstance(meta.get(k), str)), None)
    return found[:200] if found else None


def _reply(out: IO[str], request_id: Any, result: Any = None, error: dict[str, Any] | None = None) -> None:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id}
    message.update({"error": error} if error is not None else {"result": result})
    out.write(json.dumps(message, default=str) + "\n")
    out.flush()


def _call(tools: Mapping[str, Tool], params: Mapping[str, Any]) -> dict[str, Any]:
    tool = tools.get(str(params.get("name")))
    if tool is None:
        result = Result(f"no tool {params.get('name')!r} here (there are: {', '.join(tools) or 'none'})", True)
    else:
        try:
            args = dict(params.get("arguments") or {})
            result = tool.call(args, call_id(params)) if tool.with_call_id else tool.call(args)
        except Exception as exc:  # a failing call is the model's to read, not the end of the server
            result = Result(f"{type(exc).__name__}: {exc}", True, {"traceback": traceback.format_exc(limit=5)})
    answer: dict[str, Any] = {"content": [{"type": "text", "text": result.text}], "isError": result.is_error}
    if result.details:  # not structuredContent: Claude Code gives a model that in place of the text
        answer["_meta"] = {DETAILS: dict(result.details)}
    return answer


def handle(tools: Mapping[str, Tool], message: Mapping[str, Any], *, name: str, version: str) -> dict[str, Any] | None:
    """The reply to one JSON-RPC message (None for a notification): the whole protocol this package needs."""
    method, request_id = message.get("method"), message.get("id")
    if request_id is None:
        return None  # notifications/initialized, notifications/cancelled: nothing to answer
    params = message.get("params") or {}
    if method == "initialize":
        asked = params.get("protocolVersion")
        result = {"protocolVersion": asked if asked in KNOWN else PROTOCOL, "capabilities": {"tools": {}},
                  "serverInfo": {"name": name, "version": version}}
    elif method == "tools/list":
        result = {"tools": [{"name": t.name, "description": t.description, "inputSchema": dict(t.input_schema)}
                            for t in tools.values()]}
    elif method == "tools/call":
        result = _call(tools, params)
    elif method == "ping":
        result = {}
    else:
        return {"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": f"no method {method!r}"}}
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def serve(tools: list[Tool], *, name: str, version: str = "1", stdin: IO[str] | None = None,
          stdout: IO[str] | None = None) -> None:
    """Answer MCP messages on stdin until it closes. Calls run one at a time, in the order they came."""
    by_name = {tool.name: tool for tool in tools}
    src, out = stdin or sys.stdin, stdout or sys.stdout
    for line in src:
        if not line.strip():
            continue
        try:
            message = json.loads(line)
        except ValueError:
            _reply(out, None, error={"code": -32700, "message": "not JSON"})
            continue
        if not isinstance(message, dict):
            _reply(out, None, error={"code": -32600, "message": "not a JSON-RPC message"})
            continue
        answer = handle(by_name, message, name=name, version=version)
        if answer is not None:
            out.write(json.dumps(answer, default=str) + "\n")
            out.flush()
