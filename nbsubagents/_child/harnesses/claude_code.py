"""Claude Code as a harness: ``claude -p --output-format stream-json --verbose``, the task on stdin.

A Claude Code agent file (a preset in a Claude Code agents folder, or with a field only Claude Code reads:
``AGENT_FIELDS``) is what Claude Code reads itself: ``build`` copies the file byte for byte into the run's own Claude
agents folder (``<run>/claude/agents``, its user scope) and runs it with ``--agent NAME``, so its prompt, tools,
model, hooks, MCP servers, memory, initialPrompt and any later field reach Claude Code as written; it adds
``--effort`` with the file's ``effort`` (2.1.197 applies an agent's effort to its sub-agents only). What Claude Code
would not honour as written is refused by name (an effort ``--effort`` cannot take; ``skills``, which it preloads
into sub-agents only; pi's tool names; a file without ``name:`` and ``description:``). With the project's config
loaded, a same-named project agent would outrank the run's own: the copy is then renamed ``NAME@RUN_ID`` (its
``name:`` line alone). A preset in pi's own style becomes flags instead:
its body appended to Claude Code's system prompt (``--append-system-prompt``), its tools in Claude Code's names (pi's
verbs read, bash, edit, write, grep, find, ls are given their Claude names) as the tools it has (``--tools``).

Both: the tools as written as the ones it may use without asking (``--allowedTools``, so rules such as
``Bash(git diff:*)`` hold); ``--model`` (aliases such as ``sonnet`` pass through; ``inherit`` or none: its default;
an agent file's own model is read by Claude Code, so only the call's is passed); ``--max-turns``;
``--max-budget-usd`` (max_cost); ``--json-schema`` (output_schema); ``--resume`` (the session of the run this one
continues); and ``--permission-mode`` as ``permission_mode`` says what each mode means headless (nobody can answer a
permission prompt in print mode). Its configuration and sessions live in the run's own folder
(``CLAUDE_CONFIG_DIR``): nothing of the machine's user goes in or out. The project's own configuration
(``.claude/settings.json`` and ``settings.local.json``: hooks, permissions, plugins; its agents; ``.mcp.json``'s
servers) is left out (``--setting-sources user``; ``--strict-mcp-config`` too for flags, as it would also drop an
agent file's own servers) unless the run says ``project_config``.

``Adapter`` reads its stream-json records: ``system``/init (the session), ``assistant`` messages (text, thinking,
tool_use blocks; one record per block, one turn per message id), ``user`` messages (tool_result blocks) and the
``result`` record (total cost, turns, usage, is_error, subtype, structured_output), the end of the run.
"""

from __future__ import annotations

import json
import os
import re
import shutil

from ..events import RESULT_TEXT_LIMIT, text_of
from ..text import clip
from . import Request, version_of
from .stream import Stream, command, continues_by_id, left_out, models, models_key, relocate  # noqa: F401

from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from ..record import RunRecord
    from collections.abc import Mapping, Sequence
    from typing import Any

    from ..events import Event

NAME = "claude-code"
PROGRAM = "claude"
TASK_ON_STDIN = True   # prompt.md is its stdin
LISTS_MODELS = False   # a model name is passed as written (its own aliases)
ABORT_GRACE = 0.0      # a stop is SIGTERM at once
# the secret-named variables its child sees: Anthropic's key or token, or Bedrock's or Vertex's credentials
KEYS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN", "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_BEARER_TOKEN_BEDROCK", "GOOGLE_APPLICATION_CREDENTIALS")
PACKAGE = "@anthropic-ai/claude-code"
CONFIG_DIR = "claude"  # CLAUDE_CONFIG_DIR, inside the run's folder
WRITES = {CONFIG_DIR: "folder"}  # its CLAUDE_CONFIG_DIR: all it writes in its run folder

_NO_TURN = "Claude Code in print mode reads its task once from stdin and takes no message while it runs"
REFUSES: dict[str, str] = {
    "ask": "Claude Code in print mode cannot ask the notebook a question (its questions need an interactive "
           "session); put what it needs in the task",
    "approval": "Claude Code's permission prompts cannot be answered from the notebook in print mode; restrict "
                "its tools with tools and disallowedTools (rules such as Bash(git diff:*)) and permissionMode",
    "fallback_models": "Claude Code's own --fallback-model switches only when the model is overloaded, not on the "
                       "rate-limit, quota, authentication and server failures fallback_models covers",
    "steer": _NO_TURN,
    "follow_up": _NO_TURN + "; resume the run (resume=run_id) to continue it",
    "thinking": "Claude Code sets its reasoning with its own effort levels, not pi's thinking levels",
    "excludeTools": "excludeTools names pi's tools; give Claude Code disallowedTools with its own tool names",
    "noTools": "noTools is a pi flag; give Claude Code tools: [] (no tools)",
    "skills": "skills are files pi loads; Claude Code finds its own skills in .claude/skills",
    "noSkills": "noSkills is a pi flag",
    "noContextFiles": "noContextFiles is a pi flag (Claude Code reads CLAUDE.md files itself)",
    "noExtensions": "noExtensions is a pi flag",
    "extensions": "pi extensions cannot be loaded into Claude Code",
    "extraArgs": "extraArgs are pi's command-line flags",
}

# pi's verbs (a pi preset's tools) -> Claude Code's tools; and Claude Code's tools -> the formatter's verbs.
CLAUDE_NAMES = {"read": "Read", "bash": "Bash", "edit": "Edit", "write": "Write", "grep": "Grep", "find": "Glob",
                "ls": "LS"}
VERBS = {"Read": "read", "Bash": "bash", "Edit": "edit", "MultiEdit": "edit", "Write": "write", "Grep": "grep",
         "Glob": "find", "LS": "ls"}
# What each permissionMode means when nobody can answer a prompt: what would be asked is denied (dontAsk).
PERMISSION_MODES = {"default": "dontAsk", "dontAsk": "dontAsk", "acceptEdits": "acceptEdits", "plan": "plan",
                    "bypassPermissions": "bypassPermissions"}
# The fields of Claude Code's agent files (2.1.197) that only Claude Code reads; a preset with one is given to it as
# written (nbsubagents reads the others itself: name, description, model, tools, disallowedTools, permissionMode,
# maxTurns, isolation)
AGENT_FIELDS = frozenset({"hooks", "mcpServers", "effort", "memory", "skills", "color", "background",
                          "initialPrompt"})
EFFORTS = ("low", "medium", "high", "xhigh", "max")  # what its --effort takes
# Why a run ended, from the result's subtype (result.json's stopReason)
STOP_WORDS = {"error_max_turns": "budget:turns", "error_max_budget_usd": "budget:cost",
              "error_max_structured_output_retries": "schema"}

__all__ = ["NAME", "PROGRAM", "PACKAGE", "REFUSES", "TASK_ON_STDIN", "ABORT_GRACE", "LISTS_MODELS", "Adapter",
           "build", "command", "continues", "keys", "left_out", "offline_env", "relocate", "repair_argv", "session",
           "version"]


def _claude_name(tool: str) -> str:
    return CLAUDE_NAMES.get(tool, tool)


def keys(record: RunRecord, env: Mapping[str, str]) -> tuple[str, ...]:
    """The secret-named variables its child may see (``KEYS``)."""
    return KEYS


def build(run: Request) -> tuple[list[str], dict[str, str]]:
    """Claude Code's argv and environment for ``run`` (see the module's docstring)."""
    argv = [run.program, "-p", "--output-format", "stream-json", "--verbose"]
    config = os.path.join(run.run_dir, CONFIG_DIR)
    os.makedirs(config, exist_ok=True)
    agent = _agent(run, config) if _as_written(run) else None
    if agent is not None:  # Claude Code reads the file itself: its prompt, tools, hooks, MCP servers, ...
        argv += ["--agent", agent]
        effort = run.preset_extra.get("effort")
        if effort is not None:  # 2.1.197 applies an agent's effort to its sub-agents only, not to --agent's thread
            argv += ["--effort", str(effort)]
    elif run.system_prompt:
        argv += ["--append-system-prompt", run.system_prompt]
    model = run.model
    if model and model != "inherit" and (agent is None or run.model_source == "call"):
        argv += ["--model", model]
    tools = run.tools
    mode = run.permission_mode
    if tools is not None:
        tools = [_claude_name(tool) for tool in tools]
        names = list(dict.fromkeys(tool.split("(", 1)[0] for tool in tools))  # Bash(git diff:*) -> Bash
        if agent is None:  # an agent file's tools are its own (MCP tools too); these say what runs unasked
            argv += ["--tools", ",".join(names)]
        if tools:
            argv += ["--allowedTools", *tools]
    servers = {server.name: {"type": "stdio", "command": server.argv[0], "args": list(server.argv[1:]),
                             "env": dict(server.env)} for server in run.tool_servers}
    if servers:  # nbsubagents' own tools (the Python session, ...): MCP servers it starts, allowed to run unasked
        argv += ["--mcp-config", json.dumps({"mcpServers": servers}, separators=(",", ":")),
                 "--allowedTools", *(f"mcp__{name}" for name in servers)]
    if run.disallowed_tools and agent is None:
        argv += ["--disallowedTools", *(_claude_name(tool) for tool in run.disallowed_tools)]
    # No mode written: every tool it has may run without asking, as for a pi child (tools as written: only they).
    default = "dontAsk" if tools is not None else "bypassPermissions"
    argv += ["--permission-mode", PERMISSION_MODES.get(mode or "", default)]
    if run.max_turns:
        argv += ["--max-turns", str(int(run.max_turns))]
    if run.max_cost:
        argv += ["--max-budget-usd", f"{float(run.max_cost):g}"]
    if run.output_schema_path:
        with open(run.output_schema_path, encoding="utf-8") as schema:
            argv += ["--json-schema", json.dumps(json.load(schema), separators=(",", ":"))]
    if not run.project_config:  # the project's .claude/settings*.json (hooks, agents, ...) and .mcp.json stay out
        # (--strict-mcp-config would also drop an agent file's own MCP servers: with the user source alone, the
        # project's .mcp.json is not read either)
        argv += ["--setting-sources", "user"] + (["--strict-mcp-config"] if agent is None else [])
    if run.resume_session:
        earlier = os.path.join(run.resumed_run_dir or "", CONFIG_DIR, "projects")
        if os.path.isdir(earlier):  # its sessions come along; the earlier run keeps its own
            shutil.copytree(earlier, os.path.join(config, "projects"), dirs_exist_ok=True)
        argv += ["--resume", run.resume_session]
    env = {"CLAUDE_CONFIG_DIR": config, "DISABLE_TELEMETRY": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
           "DISABLE_AUTOUPDATER": "1"}
    if argv[argv.index("--permission-mode") + 1] == "bypassPermissions" and os.geteuid() == 0:
        env["IS_SANDBOX"] = "1"  # Claude Code refuses to bypass permissions as root outside a sandbox
    return argv, env


def _as_written(run: Request) -> bool:
    """Whether the preset is a Claude Code agent file, which Claude Code reads itself: it lives in a Claude Code
    agents folder or has a field only Claude Code reads. A preset in pi's own style becomes flags."""
    return bool(run.preset_file) and (str(run.preset_scope).startswith("claude-")
                                      or any(key in AGENT_FIELDS for key in run.preset_extra))


def _agent(run: Request, config: str) -> str:
    """The name of the agent Claude Code runs: the preset's file copied as written into the run's own Claude
    agents folder (its user scope). What Claude Code would not honour as written is a ValueError naming it."""
    source = str(run.preset_file)
    with open(source, "rb") as file:
        data = file.read()
    text = data.decode("utf-8-sig", errors="replace")
    head = text.split("\n---", 1)[0]
    name = _top_level(head, "name")
    if not name or not _top_level(head, "description"):
        raise ValueError(f"{source} is given to Claude Code as written, and Claude Code loads an agent file only "
                         "with name: and description: lines; add them")
    pi_names = [tool for tool in (*(run.tools or ()), *(run.disallowed_tools or ())) if tool in CLAUDE_NAMES]
    if pi_names:
        raise ValueError(f"tools {', '.join(pi_names)} are pi's names, and Claude Code reads this agent file as "
                         f"written: write {', '.join(CLAUDE_NAMES[t] for t in pi_names)} (Claude Code's names)")
    if "skills" in run.preset_extra:
        raise ValueError("skills: Claude Code (2.1.197) preloads an agent file's skills only into a sub-agent it "
                         "starts, not into the thread --agent runs; remove the line (a skill Claude Code finds stays "
                         "available to its Skill tool)")
    effort = run.preset_extra.get("effort")
    if effort is not None and effort not in EFFORTS:
        raise ValueError(f"effort {effort!r}: Claude Code takes an agent's own effort only as one of "
                         f"{', '.join(EFFORTS)} (its --effort)")
    other = _shadowing(run, name) if run.project_config else None
    if other is not None:  # with the project's config, its agents outrank the run's own: this copy is named anew
        if "memory" in run.preset_extra:
            raise ValueError(f"{other} is also an agent named {name!r}, and with project_config Claude Code's "
                             "project agents outrank the run's own; this file's memory is kept under its name, so "
                             "it cannot be renamed for the run: rename one of the two files")
        name = f"{name}@{os.path.basename(run.run_dir)}"
        line = f"name: {json.dumps(name)}".encode()  # a JSON string is a YAML one
        data = re.sub(rb"^name[ \t]*:[^\r\n]*", lambda _: line, data, count=1, flags=re.M)
    agents = os.path.join(config, "agents")
    os.makedirs(agents, exist_ok=True)
    with open(os.path.join(agents, os.path.basename(source)), "wb") as copy:
        copy.write(data)
    return name


def _top_level(frontmatter: str, key: str) -> str | None:
    """The value of a top-level ``key:`` line of an agent file's frontmatter, as written (quotes removed)."""
    found = re.search(rf"^{key}[ \t]*:(.*)$", frontmatter, re.M)
    value = found[1].strip() if found else ""
    end = value.find(value[:1], 1) if value[:1] in ("'", '"') else -1
    if end > 0:  # quoted: as it is between the quotes (Claude Code keeps its spaces)
        return value[1:end] or None
    return re.sub(r"\s+#.*$", "", value).strip() or None  # a plain value ends at a comment


def _shadowing(run: Request, name: str) -> str | None:
    """Another agent file called ``name`` in a ``.claude/agents`` folder (or a subfolder of one: Claude Code reads
    those too) of the run's folder or one above it (Claude Code's project agents), if any."""
    here = os.path.abspath(run.cwd)
    while True:
        for folder, _, entries in os.walk(os.path.join(here, ".claude", "agents")):
            for entry in sorted(entries):
                path = os.path.join(folder, entry)
                if entry.endswith(".md") and not _same(path, str(run.preset_file)):
                    with open(path, encoding="utf-8-sig", errors="replace") as file:
                        if _top_level(file.read().split("\n---", 1)[0], "name") == name:
                            return path
        here, parent = os.path.dirname(here), here
        if here == parent:
            return None


def _same(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def version(program: str) -> str | None:
    return version_of(program)


def offline_env(url: str, folder: str, offered: Sequence[str]) -> dict[str, str]:
    """The scripted server as its Anthropic endpoint, a dummy key, no telemetry or other traffic."""
    return {"ANTHROPIC_BASE_URL": url.removesuffix("/v1"), "ANTHROPIC_API_KEY": "offline-dummy-key",
            "DISABLE_TELEMETRY": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}




def session(run_dir: Any, record: RunRecord) -> Stream:
    """Its stdout read through ``Adapter``; nothing said to it after the task (its stdin)."""
    return Stream(Adapter())


def _own_name(name: str) -> str:
    """An MCP tool's own name (``mcp__python__python`` -> ``python``), as the run's events name a tool."""
    return name.split("__", 2)[2] if name.startswith("mcp__") and name.count("__") >= 2 else name


def _args(name: str, given: Any) -> dict[str, Any]:
    """Claude Code's tool arguments in pi's words where the formatter reads them (path, edits)."""
    args = dict(given) if isinstance(given, dict) else {}
    if "file_path" in args:
        args["path"] = args.pop("file_path")
    if name == "Edit" and "old_string" in args:
        args["edits"] = [{"oldText": args.pop("old_string"), "newText": args.pop("new_string", "")}]
    elif name == "MultiEdit" and isinstance(args.get("edits"), list):
        args["edits"] = [{"oldText": e.get("old_string"), "newText": e.get("new_string")}
                         for e in args["edits"] if isinstance(e, dict)]
    return args


def _diff(record: dict[str, Any]) -> dict[str, Any] | None:
    """An edit's diff (for the formatter's +added -removed) from Claude Code's ``structuredPatch``."""
    result = record.get("tool_use_result")
    hunks = result.get("structuredPatch") if isinstance(result, dict) else None
    if not isinstance(hunks, list) or not hunks:
        return None
    lines = [line for hunk in hunks if isinstance(hunk, dict) for line in hunk.get("lines") or ()]
    return {"diff": clip("\n".join(str(line) for line in lines), RESULT_TEXT_LIMIT)}


class Adapter:
    """Claude Code's stream-json records -> normalized events (see the module's docstring)."""

    def __init__(self) -> None:
        self.turn = 0
        self.conversation_over = False
        self.session_id: str | None = None
        self.final: dict[str, Any] | None = None
        self.model: str | None = None
        self.message_id: str | None = None   # the assistant message being read (one record per content block)
        self.pending: Event | None = None    # its message_end, written once the message is complete
        self.names: dict[str, str] = {}      # tool_use id -> the formatter's verb
        self.counted = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0}

    def adapt(self, obj: Any) -> list[Event]:
        if not isinstance(obj, dict) or not isinstance(obj.get("type"), str):
            return [{"type": "pi_event", "piType": None, "data": obj}]
        kind = obj["type"]
        if kind == "system" and obj.get("subtype") == "init":
            self.session_id = obj.get("session_id") or self.session_id
            self.model = obj.get("model") or self.model
            return [{"type": "session", "sessionId": self.session_id, "cwd": obj.get("cwd")}]
        if obj.get("parent_tool_use_id"):  # a sub-agent's own messages (its Task tool): its result counts
            return []
        if kind == "assistant":
            return self._assistant(obj.get("message") or {})
        if kind == "user":
            return self._user(obj)
        if kind == "result":
            return self._result(obj)
        return [{"type": "pi_event", "piType": f"{kind}:{obj.get('subtype')}" if obj.get("subtype") else kind,
                 "data": obj}]

    def _flush(self) -> list[Event]:
        pending, self.pending = self.pending, None
        return [pending] if pending is not None else []

    def _assistant(self, message: dict[str, Any]) -> list[Event]:
        out: list[Event] = []
        blocks = [b for b in message.get("content") or () if isinstance(b, dict)]
        if message.get("id") != self.message_id or self.pending is None:
            out += self._flush()
            self.message_id = message.get("id")
            self.turn += 1
            out.append({"type": "turn_start", "turn": self.turn})
            out.append(self._usage(message.get("usage") or {}))
            self.pending = {"type": "message_end", "stopReason": "stop", "model": message.get("model"),
                            "provider": "anthropic", "errorMessage": None}
        for block in blocks:
            kind = block.get("type")
            if kind == "thinking" and str(block.get("thinking") or "").strip():
                out.append({"type": "thinking", "text": block["thinking"]})
            elif kind == "text" and str(block.get("text") or "").strip():
                out.append({"type": "assistant_text", "text": block["text"]})
            elif kind == "tool_use":
                name = str(block.get("name") or "")
                verb = VERBS.get(name, _own_name(name))
                self.names[str(block.get("id"))] = verb
                out.append({"type": "tool_call", "id": block.get("id"), "name": verb,
                            "args": _args(name, block.get("input"))})
                self.pending["stopReason"] = "toolUse"
        return out

    def _usage(self, usage: dict[str, Any], cost: float = 0.0) -> Event:
        """A usage event of what ``usage`` adds to what was counted so far (Claude's totals at the end)."""
        now = {"input": usage.get("input_tokens") or 0, "output": usage.get("output_tokens") or 0,
               "cacheRead": usage.get("cache_read_input_tokens") or 0,
               "cacheWrite": usage.get("cache_creation_input_tokens") or 0}
        for key, value in now.items():
            self.counted[key] += value
        return {"type": "usage", **now, "totalTokens": sum(now.values()), "cost": cost}

    def _user(self, record: dict[str, Any]) -> list[Event]:
        out: list[Event] = []
        content = (record.get("message") or {}).get("content")
        for block in content if isinstance(content, list) else ():
            if not isinstance(block, dict) or block.get("type") != "tool_result":
                continue
            tool_id = str(block.get("tool_use_id"))
            name = self.names.get(tool_id, "")
            out.append({"type": "tool_result", "id": block.get("tool_use_id"), "name": name,
                        "isError": bool(block.get("is_error")),
                        "text": clip(text_of(block.get("content")), RESULT_TEXT_LIMIT),
                        "details": _diff(record) if name == "edit" else None})
        return out

    def _result(self, record: dict[str, Any]) -> list[Event]:
        out = self._flush()
        totals = record.get("usage") if isinstance(record.get("usage"), dict) else {}
        rest = {"input_tokens": (totals.get("input_tokens") or 0) - self.counted["input"],
                "output_tokens": (totals.get("output_tokens") or 0) - self.counted["output"],
                "cache_read_input_tokens": (totals.get("cache_read_input_tokens") or 0) - self.counted["cacheRead"],
                "cache_creation_input_tokens": ((totals.get("cache_creation_input_tokens") or 0)
                                                - self.counted["cacheWrite"])}
        cost = record.get("total_cost_usd")
        out.append(self._usage({k: max(0, v) for k, v in rest.items()},
                               float(cost) if isinstance(cost, (int, float)) else 0.0))
        subtype = str(record.get("subtype") or "")
        failed = bool(record.get("is_error")) or (subtype not in ("", "success"))
        self.final = {"cost": cost, "turns": record.get("num_turns"), "isError": failed, "subtype": subtype,
                      "stopReason": record.get("stop_reason"), "durationMs": record.get("duration_ms"),
                      "structured": record.get("structured_output"),
                      "stopWord": STOP_WORDS.get(subtype, "harness_error") if failed else None,
                      "message": _end_message(record, subtype) if failed else None}
        if failed:
            out.append({"type": "error", "message": self.final["message"]})
        self.conversation_over = True
        return out


def _end_message(record: dict[str, Any], subtype: str) -> str:
    errors = record.get("errors")
    said = "; ".join(str(e) for e in errors) if isinstance(errors, list) and errors else ""
    said = said or (record.get("result") if isinstance(record.get("result"), str) else "") or ""
    if subtype == "error_max_turns":
        return "Claude Code stopped at its turn limit (max_turns, its --max-turns)"
    if subtype == "error_max_budget_usd":
        return f"Claude Code stopped at its cost limit (--max-budget-usd, ${record.get('total_cost_usd') or 0:.4f})"
    return f"Claude Code ended with an error ({subtype or 'is_error'})" + (f": {clip(said, 300)}" if said else "")


continues = continues_by_id(NAME)  # its own earlier session, resumed by id


def repair_argv(argv: Sequence[str], session_id: str) -> list[str]:
    """The argv that continues the session a run's Claude Code ended (``--resume``), a new task on its stdin: how a
    reply that failed its check is asked again (``child/repairs``). Its sessions are in the run's own config."""
    out = list(argv)
    if "--resume" in out[:-1]:
        out[out.index("--resume") + 1] = session_id
    else:
        out += ["--resume", session_id]
    return out
