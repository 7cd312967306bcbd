"""Codex CLI (``@openai/codex``, 0.171.0) as a harness: ``codex exec --json``, the task on stdin.

Each run has a Codex home of its own (``CODEX_HOME`` = ``<run dir>/codex-home``), so the machine's user config
neither leaks in nor is written; its ``config.toml`` holds what is the same for every run of a setup: the
preset's body as ``developer_instructions`` (added to Codex's own instructions), the approval policy ``never``
(nobody is there to approve), network access for commands (as pi's bash has), and, when the environment names
an OpenAI-compatible endpoint (``OPENAI_BASE_URL``) or key (``OPENAI_API_KEY``), a model provider for it (Codex
0.171.0 ignores ``OPENAI_BASE_URL`` itself; the key stays in the environment: ``env_key``). The argv carries the
choices of the call: the model, the sandbox, the output schema, the session resumed.

Sandbox: ``workspace-write``: the run works in its folder as pi does (commands may read anywhere and use the
network) while Codex stops a write outside it, a protection of its own that does not hinder a task, isolated
(the worktree is the folder) or not. A read-only preset (``permissionMode: plan``, or tools only among read,
grep, find, ls) runs in ``read-only``; ``permissionMode: bypassPermissions`` in ``danger-full-access``. Codex
cannot limit its tools to a list, so any other ``tools``/``disallowedTools`` is refused (``build`` raises
ValueError naming the harness and the option).

The stream (``Adapter``): ``thread.started`` -> session (its thread id resumes it), ``turn.started`` and each
answer of the model after a tool's result -> turn_start (a turn is one model answer, as pi counts them, so
max_turns means the same), ``item.*`` -> assistant_text, thinking, tool_call/tool_result (a command as ``bash``,
or as ``read``/``ls``/``grep`` when it is only ``cat``/``sed -n``/``ls``/``grep -rn``; a file change as ``edit``
or ``write``), ``turn.completed`` -> usage and the end, ``turn.failed`` -> error and a failed end. Codex reports
tokens but no cost, and its tokens only at its end: the cost is 0, and a cost or token budget is refused
(max_turns and max_tool_calls are counted from the events by the supervisor).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
from pathlib import Path

from ..text import clip
from . import Request, version_of
from .stream import Stream, command, continues_by_id, left_out, models, models_key, relocate  # noqa: F401

from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from ..record import RunRecord
    from collections.abc import Mapping, Sequence
    from typing import Any

    Event = dict[str, Any]

NAME = "codex"
PROGRAM = "codex"
TASK_ON_STDIN = True   # prompt.md is its stdin
LISTS_MODELS = False   # a model name is passed as written (its own aliases)
ABORT_GRACE = 0.0      # a stop is SIGTERM at once
KEYS = ("OPENAI_API_KEY", "CODEX_API_KEY")  # the secret-named variables its child sees: its provider's key only
PACKAGE = "@openai/codex"
REFUSES: dict[str, str] = {
    "ask": "codex exec cannot put a question to the notebook (its own question tool works only in its Plan mode)",
    "approval": "codex exec runs with the approval policy 'never': it cannot ask the notebook to approve a call",
    "fallback_models": "a codex run has one model",
    "steer": "codex exec takes its task once, on stdin: nothing can be said to it while it runs",
    "follow_up": "codex exec takes its task once, on stdin: a follow-up continues its thread once it has ended",
    "thinking": "the reasoning effort of a Codex model is its own configuration (model_reasoning_effort), "
                "which a run does not set",
    "max_cost": "Codex reports tokens but no cost, so a cost budget could never stop it",
    "project_config": "a codex run has a home of its own (CODEX_HOME) that trusts no project, so a project's .codex/ "
                      "config is not loaded",
    "max_tokens": "codex exec reports its tokens only when its run ends (turn.completed), so a token budget could "
                  "not stop it in time (max_turns and max_tool_calls can)",
    **{field: "it is a preset field of pi" for field in ("excludeTools", "noTools", "skills", "noSkills",
                                                         "noContextFiles", "noExtensions", "extensions",
                                                         "extraArgs")},
}
HOME = "codex-home"  # the run's CODEX_HOME, inside its run directory
WRITES = {HOME: "folder"}  # its CODEX_HOME: all it writes in its run folder
PROVIDER = "nbsubagents"  # the model provider entry written for an endpoint named by the environment
OFFLINE_MODEL = "scripted"  # the offline model's id (pi.offline.OFFLINE_MODEL without its provider)
READ_TOOLS = frozenset({"read", "grep", "find", "ls"})
ALL_TOOLS = READ_TOOLS | {"bash", "edit", "write"}  # pi's tools: Codex's shell and apply_patch do all of them
SANDBOXES = {None: "workspace-write", "default": "workspace-write", "acceptEdits": "workspace-write",
             "dontAsk": "workspace-write", "plan": "read-only", "bypassPermissions": "danger-full-access"}

__all__ = ["NAME", "PROGRAM", "PACKAGE", "REFUSES", "TASK_ON_STDIN", "ABORT_GRACE", "LISTS_MODELS", "Adapter",
           "build", "command", "continues", "keys", "left_out", "offline_env", "relocate", "repair_argv", "session",
           "version"]


def keys(record: RunRecord, env: Mapping[str, str]) -> tuple[str, ...]:
    """The secret-named variables its child may see (``KEYS``)."""
    return KEYS


def build(run: Request) -> tuple[list[str], dict[str, str]]:
    """The argv of ``codex exec`` (the task comes on stdin: ``-``) and the environment it adds (its home)."""
    sandbox = _sandbox(run)  # first: a run refused leaves nothing written
    given = dict(run.env)  # what prepare gives the child: the offline model's endpoint, when offline
    env = {**os.environ, **given}  # what the child will see
    offline = bool(given.get("PI_OFFLINE"))  # the offline setting (pi.offline.child_env), not the user's shell
    home = Path(run.run_dir) / HOME
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(_config(run, env, offline), encoding="utf-8")
    argv = [run.program, "exec"]
    if run.resume_session:
        argv.append("resume")
        if run.resumed_run_dir:  # the earlier run's sessions, copied: that run keeps its own
            shutil.copytree(Path(run.resumed_run_dir) / HOME / "sessions", home / "sessions", dirs_exist_ok=True)
    argv += ["--json", "--skip-git-repo-check", "-c", f'sandbox_mode="{sandbox}"']
    model = OFFLINE_MODEL if offline else run.model
    if model:
        argv += ["-m", model.removeprefix("openai/")]
    if run.output_schema_path:
        argv += ["--output-schema", run.output_schema_path]
    for server in run.tool_servers:  # nbsubagents' own tools (the Python session, ...): MCP servers it starts
        key = f"mcp_servers.{server.name}"
        env = ", ".join(f"{_toml(name)} = {_toml(value)}" for name, value in server.env.items())
        argv += ["-c", f"{key}.command={_toml(server.argv[0])}",
                 "-c", f"{key}.args=[{', '.join(_toml(arg) for arg in server.argv[1:])}]",
                 "-c", f"{key}.env={{{env}}}", "-c", f"{key}.startup_timeout_sec=60"]
    if run.resume_session:
        argv.append(run.resume_session)
    return [*argv, "-"], {"CODEX_HOME": str(home)}


def _toml(text: str) -> str:
    """A TOML basic string: JSON's escapes are TOML's; the text stays UTF-8 (JSON would write a character
    beyond U+FFFF as a surrogate pair, which TOML refuses) and DEL, which JSON leaves bare, is escaped."""
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def _config(run: Request, env: dict[str, str], offline: bool) -> str:
    """The run's ``config.toml``."""
    lines = ['approval_policy = "never"']
    if run.system_prompt:
        lines.append(f"developer_instructions = {_toml(run.system_prompt)}")
    lines += ["", "[sandbox_workspace_write]", "network_access = true"]
    if env.get("OPENAI_BASE_URL") or env.get("OPENAI_API_KEY"):
        lines[:0] = [f'model_provider = "{PROVIDER}"']
        lines += ["", f"[model_providers.{PROVIDER}]", 'name = "OpenAI-compatible endpoint (nbsubagents)"',
                  f"base_url = {_toml(env.get('OPENAI_BASE_URL') or 'https://api.openai.com/v1')}",
                  'wire_api = "responses"']
        if env.get("OPENAI_API_KEY"):
            lines.append('env_key = "OPENAI_API_KEY"')  # the key is read from the environment, never written
        if offline:  # a scripted failure ends the run at once, as pi's offline agent dir does
            lines += ["request_max_retries = 0", "stream_max_retries = 0"]
    return "\n".join(lines) + "\n"


def _sandbox(run: Request) -> str:
    """Codex's sandbox mode for the run's permissionMode and tools; a list it cannot honour is a ValueError."""
    mode = run.permission_mode
    if mode not in SANDBOXES:
        known = ", ".join(str(m) for m in SANDBOXES if m)
        raise ValueError(f"The codex harness does not know permissionMode {mode!r}; it knows {known}")
    tools, denied = run.tools, run.disallowed_tools
    if tools is None and not denied:
        return SANDBOXES[mode]
    allowed = set(ALL_TOOLS if tools is None else tools) - set(denied or ())
    if allowed <= READ_TOOLS:
        return "read-only"
    if allowed >= {"bash", "edit", "write"} and allowed <= ALL_TOOLS:
        return SANDBOXES[mode]
    option = "tools" if tools is not None else "disallowedTools"
    given = ", ".join(tools if tools is not None else denied or ())
    raise ValueError(
        f"The codex harness cannot honour {option} ({given}): Codex cannot limit its tools to a list (its shell "
        "runs any command, its apply_patch writes any file). It honours only read tools (read, grep, find, ls: "
        "a read-only sandbox) or all of bash, edit and write. Change the list, or run this task with harness='pi'.")


def version(program: str) -> str | None:
    return version_of(program)


def offline_env(url: str, folder: str, offered: Sequence[str]) -> dict[str, str]:
    """The scripted server as its OpenAI endpoint, a dummy key."""
    return {"OPENAI_BASE_URL": url, "OPENAI_API_KEY": "offline-dummy-key"}




def session(run_dir: Any, record: RunRecord) -> Stream:
    """Its stdout read through ``Adapter``; nothing said to it after the task (its stdin)."""
    return Stream(Adapter())


# --- the stream -----------------------------------------------------------------------------------------

_TOOL_ITEMS = frozenset({"command_execution", "file_change", "mcp_tool_call", "web_search", "collab_tool_call"})
_SHELL = re.compile(r"(?:/usr)?(?:/bin/)?(?:ba|z)?sh")


def _unwrapped(command: str) -> str:
    """The command Codex ran, without the shell it wraps it in (``/bin/bash -lc '...'``)."""
    try:
        words = shlex.split(command)
    except ValueError:
        return command
    if len(words) == 3 and _SHELL.fullmatch(words[0]) and words[1] in ("-c", "-lc"):
        return words[2]
    return command


def _command_call(command: str) -> tuple[str, dict[str, Any]]:
    """A command as the verb a person reads: ``cat F``/``sed -n A,Bp F`` read, ``ls [D]`` ls, ``grep -rn P [D]``
    grep; any other command is bash."""
    try:
        words = shlex.split(command)
    except ValueError:
        words = []
    if len(words) == 2 and words[0] == "cat" and not words[1].startswith("-"):
        return "read", {"path": words[1]}
    if len(words) == 4 and words[:2] == ["sed", "-n"] and (m := re.fullmatch(r"(\d+),(\d+)p", words[2])):
        return "read", {"path": words[3], "offset": int(m[1]), "limit": int(m[2]) - int(m[1]) + 1}
    if words[:1] == ["ls"] and len(words) <= 2 and not any(w.startswith("-") for w in words[1:]):
        return "ls", {"path": words[1] if len(words) == 2 else "."}
    if words[:2] == ["grep", "-rn"] and len(words) in (3, 4):
        return "grep", {"pattern": words[2], "path": words[3] if len(words) == 4 else "."}
    return "bash", {"command": command}


def _call(item: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """A tool item as a tool call: (name, args)."""
    kind = item.get("type")
    if kind == "command_execution":
        return _command_call(_unwrapped(str(item.get("command", ""))))
    if kind == "file_change":
        changes = [c for c in item.get("changes") or [] if isinstance(c, dict)]
        paths = [str(c.get("path", "")) for c in changes]
        name = "write" if changes and all(c.get("kind") == "add" for c in changes) else "edit"
        args: dict[str, Any] = {"path": paths[0] if paths else ""}
        if len(paths) > 1:
            args["paths"] = paths
        return name, args
    if kind == "mcp_tool_call":
        return str(item.get("tool")), dict(item.get("arguments") or {})  # by its own name, as every harness
    if kind == "web_search":
        return "web_search", {"query": item.get("query", "")}
    return str(item.get("tool") or kind), {"prompt": item.get("prompt")}


def _result(item: dict[str, Any]) -> tuple[bool, str]:
    """A completed tool item's (isError, text)."""
    kind, status = item.get("type"), item.get("status")
    failed = status in ("failed", "declined")
    if kind == "command_execution":
        code = item.get("exit_code")
        text = str(item.get("aggregated_output") or "")
        if code not in (0, None):
            text += f"\n(exit code {code})"
        return failed or code not in (0, None), text
    if kind == "file_change":
        marks = {"add": "A", "delete": "D", "update": "M"}
        lines = [f"{marks.get(c.get('kind'), '?')} {c.get('path')}" for c in item.get("changes") or []]
        return failed, ("The patch failed:\n" if failed else "") + "\n".join(lines)
    if kind == "mcp_tool_call":
        error = item.get("error") or {}
        if error:
            return True, str(error.get("message", "the MCP tool failed"))
        content = (item.get("result") or {}).get("content") or []
        return failed, "\n".join(str(c.get("text", "")) for c in content if isinstance(c, dict))
    if kind == "web_search":
        return failed, f"searched: {item.get('query', '')}"
    return failed, str(status or "")


def _message(text: Any) -> str:
    """An error's message; Codex passes a provider's JSON error body on as it came: its ``error.message``."""
    text = str(text or "")
    try:
        body = json.loads(text)
    except ValueError:
        return text
    error = body.get("error") if isinstance(body, dict) else None
    return str(error["message"]) if isinstance(error, dict) and error.get("message") else text


class Adapter:
    """Codex's JSONL events -> normalized events (``child/events.py``)."""

    def __init__(self) -> None:
        self.turn = 0
        self.conversation_over = False
        self.session_id: str | None = None
        self.final: dict[str, Any] | None = None
        self._called: set[str] = set()  # tool items whose tool_call was said
        self._running: set[str] = set()  # ... and whose result was not yet
        self._answered = False  # a tool's result went back: the next item is the model's next answer
        self._plan = ""
        self._error = ""

    def adapt(self, obj: Any) -> list[Event]:
        kind = obj.get("type") if isinstance(obj, dict) else None
        if kind == "thread.started":
            self.session_id = str(obj.get("thread_id") or "") or None
            return [{"type": "session", "sessionId": self.session_id}]
        if kind == "turn.started":
            self.conversation_over = False
            return self._turn()
        if kind in ("item.started", "item.updated", "item.completed") and isinstance(obj.get("item"), dict):
            return self._item(kind == "item.completed", obj["item"])
        if kind == "turn.completed":
            return self._end(obj.get("usage") or {})
        if kind == "turn.failed":
            return self._end({}, _message((obj.get("error") or {}).get("message")) or "the Codex turn failed")
        if kind == "error":
            message = _message(obj.get("message"))
            if message.startswith("Reconnecting"):  # Codex tries the request again itself
                return [{"type": "retry", "phase": "start", "errorMessage": message}]
            self._error = message
            return [{"type": "error", "message": message}]
        return [{"type": "pi_event", "piType": kind, "data": obj}]

    def _turn(self) -> list[Event]:
        self.turn += 1
        self._answered = False
        return [{"type": "turn_start", "turn": self.turn}]

    def _next_answer(self) -> list[Event]:
        """A new turn when this item is the model's answer to the results of its tools."""
        return self._turn() if self._answered and not self._running else []

    def _item(self, completed: bool, item: dict[str, Any]) -> list[Event]:
        kind, item_id = item.get("type"), str(item.get("id"))
        if kind in _TOOL_ITEMS:
            out: list[Event] = []
            if item_id not in self._called:
                out += self._next_answer()
                name, args = _call(item)
                out.append({"type": "tool_call", "id": item_id, "name": name, "args": args})
                self._called.add(item_id)
                self._running.add(item_id)
            if completed and item_id in self._running:
                self._running.discard(item_id)
                self._answered = True
                is_error, text = _result(item)
                name = _call(item)[0]
                out.append({"type": "tool_result", "id": item_id, "name": name, "isError": is_error,
                            "text": clip(text, 2000)})
            return out
        if kind == "agent_message" and completed:
            return [*self._next_answer(), {"type": "assistant_text", "text": str(item.get("text", ""))}]
        if kind == "reasoning" and completed:
            return [*self._next_answer(), {"type": "thinking", "text": str(item.get("text", ""))}]
        if kind == "todo_list":
            return self._todo(completed, item)
        if kind == "error":  # a warning of Codex's (e.g. no metadata for the model's name): the run goes on
            return [{"type": "notice", "text": f"Codex: {item.get('message', '')}"}]
        if completed or kind not in ("agent_message", "reasoning"):
            return [{"type": "pi_event", "piType": f"item:{kind}", "data": item}]
        return []

    def _todo(self, completed: bool, item: dict[str, Any]) -> list[Event]:
        """Codex's to-do list (its update_plan tool), said when it changes."""
        steps = [s for s in item.get("items") or [] if isinstance(s, dict)]
        plan = "; ".join(f"[{'x' if s.get('completed') else ' '}] {s.get('text', '')}" for s in steps)
        if completed or plan == self._plan:
            return []
        self._plan = plan
        out = self._next_answer()
        self._answered = True  # the plan went back to the model as a tool's result
        return [*out, {"type": "notice", "text": f"Plan: {plan}"}]

    def _end(self, usage: dict[str, Any], error: str | None = None) -> list[Event]:
        """turn.completed (usage) or turn.failed (error): the conversation is over."""
        self.conversation_over = True
        out: list[Event] = []
        if usage:
            cached = int(usage.get("cached_input_tokens") or 0)
            written = int(usage.get("cache_write_input_tokens") or 0)
            fresh = max(0, int(usage.get("input_tokens") or 0) - cached - written)  # OpenAI's input counts them
            output = int(usage.get("output_tokens") or 0)
            out.append({"type": "usage", "input": fresh, "output": output, "cacheRead": cached, "cacheWrite": written,
                        "totalTokens": fresh + output + cached + written, "cost": 0})
        out.append({"type": "message_end", "stopReason": "error" if error else "stop", "model": None,
                     "provider": None, "errorMessage": error})
        if error is not None:
            if error != self._error:
                out.append({"type": "error", "message": error})
            self.final = {"isError": True, "subtype": "turn_failed", "message": error, "stopWord": "provider_error"}
        else:
            self.final = {"isError": False, "subtype": "success"}
        return out


continues = continues_by_id(NAME)  # its own earlier session, resumed by id


def repair_argv(argv: Sequence[str], session_id: str) -> list[str] | None:
    """The argv that continues the thread a run's Codex ended (``codex exec resume THREAD -``), a new task on its
    stdin: how a reply that failed its check is asked again (``child/repairs``). None for an argv not ``build``'s."""
    out = list(argv)
    if len(out) < 3 or out[1] != "exec" or out[-1] != "-":
        return None
    if out[2] == "resume":  # a resumed run: the thread it names is the one that goes on
        out[-2] = session_id
        return out
    return [out[0], "exec", "resume", *out[2:-1], session_id, "-"]
