"""The scripted model speaking OpenAI's Responses API, as Codex CLI uses it (``POST .../v1/responses``, streamed).

Not an AI model: ``scripted.py`` routes a Responses request here (see its ``DIALECTS``). The request's ``input``
items become the Chat Completions ``messages`` the script reads (one assistant message per answer: its text,
reasoning and calls; a ``function_call_output`` is a ``tool`` message), so ``demo_step``/``step_index`` and the
``fail for``/``fail once``/``sleep:`` lines work unchanged. The step is written as Codex reads it: the SSE events
``response.created``, ``response.output_item.added``/``done`` (reasoning, message, function or custom tool call
items), ``response.output_text.delta``/``done``, ``response.function_call_arguments.delta``/``done``, and
``response.completed`` with the usage; an ``error`` step is an HTTP error status.

Demo-mode tools become Codex's own, as offered in the request's ``tools``: read, ls, grep and bash are a command for
its shell tool (``exec_command`` {cmd}, else ``shell_command`` {command}, else ``shell`` {command: argv}; not a
login shell): ``cat PATH``, ``ls PATH``, ``grep -rn PATTERN .``, the command itself; write and edit are a patch in
Codex's ``apply_patch`` format, given to its ``apply_patch`` tool when one is offered, else as the ``apply_patch``
command its shell tool runs itself. (Codex 0.171.0 offers ``exec_command`` on a model it has no metadata for, such
as ``scripted``, ``exec_command`` and a custom ``apply_patch`` on gpt-5.5, and on its default model a JavaScript
"code mode" in an ``additional_tools`` input item instead of ``tools``: there the calls are ``exec_command`` too,
which Codex still runs.) apply_patch replaces whole lines, so an edit's patch is written from the file as it is (the
server runs on the machine of the run and reads the file under the ``<cwd>`` Codex names in its request).
"""

from __future__ import annotations

import json
import math
import re
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .scripted import KEEPALIVE, pieces, step_index

if TYPE_CHECKING:
    from .scripted import ScriptedModel, Step

    _Handler = Any  # scripted.py's request handler: _json(status, obj), _headers(status, *pairs), wfile

__all__ = ["answer", "chat_messages", "codex_call", "patch_for"]

_SHELL_TOOLS = ("exec_command", "shell_command", "shell")


def _text(content: Any) -> str:
    """The text of a Responses message's content (a string, or input_text/output_text parts)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict) and "text" in p)


# The header Codex's shell tools put before a command's output (apply_patch run by the shell tool: two of them)
_HEADER = re.compile(r"(?:(?:Chunk ID|Wall time|Process exited with code|Exit code|Original token count|Total output "
                     r"lines)\b[^\n]*\n|Output:\n)+")


def _output(output: Any) -> str:
    """A tool's output as the script reads it: the text without the header of Codex's shell tools."""
    if isinstance(output, dict):
        output = output.get("output", "")
    text = output if isinstance(output, str) else _text(output)
    header = _HEADER.match(text)
    return text[header.end() :] if header else text


_CONTEXT = re.compile(r"<environment_context\s*/>|<environment_context>.*</environment_context>", re.S)


def chat_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The request's ``instructions`` and ``input`` items as Chat Completions messages: the items of one answer
    (reasoning, text, calls) make one assistant message, as the script counts its steps by assistant messages; a
    user message that is only Codex's ``<environment_context>`` is a system message (context, not a task)."""
    messages: list[dict[str, Any]] = []
    if body.get("instructions"):
        messages.append({"role": "system", "content": str(body["instructions"])})

    def assistant() -> dict[str, Any]:
        if not messages or messages[-1]["role"] != "assistant":
            messages.append({"role": "assistant", "content": ""})
        return messages[-1]

    for item in body.get("input") or []:
        if not isinstance(item, dict):
            continue
        kind = item.get("type") or "message"
        if kind == "message" and item.get("role") == "assistant":
            message = assistant()
            message["content"] = "\n".join(filter(None, [message["content"], _text(item.get("content"))]))
        elif kind == "message":
            text = _text(item.get("content"))
            context = _CONTEXT.fullmatch(text.strip())  # Codex's environment context is no task (a resumed thread
            role = "system" if item.get("role") in ("system", "developer") or context else "user"  # puts it last)
            messages.append({"role": role, "content": text})
        elif kind in ("function_call", "custom_tool_call"):
            arguments = item.get("arguments") if kind == "function_call" else item.get("input")
            call = {"id": item.get("call_id"), "type": "function",
                    "function": {"name": item.get("name"), "arguments": arguments or ""}}
            assistant().setdefault("tool_calls", []).append(call)
        elif kind in ("function_call_output", "custom_tool_call_output"):
            result = _output(item.get("output"))
            messages.append({"role": "tool", "tool_call_id": item.get("call_id"), "content": result})
        elif kind == "reasoning":
            assistant()
    return messages


def _cwd(body: dict[str, Any]) -> str | None:
    """The working folder Codex names in its environment context (``<cwd>...</cwd>``)."""
    for item in body.get("input") or []:
        if isinstance(item, dict) and (m := re.search(r"<cwd>(.*?)</cwd>", _text(item.get("content")))):
            return m[1]
    return None


def patch_for(name: str, args: dict[str, Any], cwd: str | None) -> str:
    """A demo ``write`` or ``edit`` as a patch in Codex's apply_patch format. An edit replaces the first line
    holding its old text (read from the file under ``cwd``); a file that cannot be read, or a line not found,
    gives a patch that fails as the edit would."""
    path = str(args.get("path", ""))
    if name == "write":
        lines = str(args.get("content", "")).splitlines()
        return "\n".join(["*** Begin Patch", f"*** Add File: {path}", *(f"+{ln}" for ln in lines), "*** End Patch"])
    edit = (args.get("edits") or [{}])[0]
    old, new = str(edit.get("oldText", "")), str(edit.get("newText", ""))
    try:
        lines = Path(cwd or ".", path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        lines = []
    line = next((ln for ln in lines if old in ln), old)
    return "\n".join(["*** Begin Patch", f"*** Update File: {path}", "@@", f"-{line}",
                      f"+{line.replace(old, new, 1)}", "*** End Patch"])


def _command(name: str, args: dict[str, Any]) -> str:
    """A demo read, ls, grep or bash step as the shell command Codex runs."""
    if name == "read":
        return f"cat {shlex.quote(str(args.get('path', '')))}"
    if name == "ls":
        return f"ls {shlex.quote(str(args.get('path', '.')))}"
    if name == "grep":
        return f"grep -rn {shlex.quote(str(args.get('pattern', '')))} ."
    return str(args.get("command", ""))


def codex_call(name: str, args: dict[str, Any], tools: dict[str, str], cwd: str | None) -> tuple[str, str, str]:
    """A demo tool call as Codex's: (item type, tool name, arguments or input). ``tools`` maps the names Codex
    offers to their kind (function, custom). A tool the demo has and Codex has not keeps its name and arguments
    (Codex answers that it does not know it)."""
    if name in ("write", "edit"):
        patch = patch_for(name, args, cwd)
        if tools.get("apply_patch") == "custom":
            return "custom_tool_call", "apply_patch", patch
        if tools.get("apply_patch") == "function":
            return "function_call", "apply_patch", json.dumps({"input": patch})
        command = f"apply_patch <<'PATCH'\n{patch}\nPATCH"
    elif name in ("read", "ls", "grep", "bash"):
        command = _command(name, args)
    else:  # another tool (the Python session's: an MCP tool, which Codex offers under a longer name) as it is
        offered = next((tool for tool in tools if tool.endswith(f"__{name}")), name)
        return "function_call", offered, json.dumps(args)
    shell = next((tool for tool in _SHELL_TOOLS if tool in tools), "exec_command")
    if shell == "shell":
        return "function_call", shell, json.dumps({"command": ["bash", "-c", command]})
    key = "cmd" if shell == "exec_command" else "command"
    return "function_call", shell, json.dumps({key: command, "login": False})  # no login profile's noise


def _offered(body: dict[str, Any]) -> dict[str, str]:
    """The tools the request offers: name -> its kind (``function``, ``custom``, ...)."""
    return {t["name"]: t.get("type", "function") for t in body.get("tools") or []
            if isinstance(t, dict) and isinstance(t.get("name"), str)}


def _without_paths(chat: dict[str, Any]) -> dict[str, Any]:
    """The conversation with no absolute path in its system messages: what makes two runs of one task the same
    conversation for ``fail once:``, as Codex's instructions name the run's own folders (its home, its cwd)."""
    messages = [{**m, "content": re.sub(r"/[^\s`'\"<>]+", "PATH", m["content"])} if m["role"] == "system" else m
                for m in chat["messages"]]
    return {**chat, "messages": messages}


def _failure(model: ScriptedModel, chat: dict[str, Any], step: Step) -> dict[str, Any] | None:
    """The HTTP error this request gets, if any: the step's own, a ``fail once:`` the first time this conversation
    asks, a ``fail for`` naming the request's model (as the Chat Completions dialect decides)."""
    once = step.get("fail_once")
    if once and model._first_failure(_without_paths(chat)):
        return once
    failing = [f for f in step.get("fail_for") or () if f["model"] == chat.get("model")]
    return failing[0] if failing else step.get("error")


def answer(model: ScriptedModel, h: _Handler, body: dict[str, Any]) -> None:
    """Answer one Responses request with the script's step, streamed as Codex reads it (or as one JSON
    response when the request does not ask for a stream)."""
    messages = chat_messages(body)
    chat = {"model": body.get("model"), "messages": messages}
    with model._lock:
        model._requests.append(body)
        model._headers.append({k.lower(): v for k, v in h.headers.items()})
    index = step_index(chat)
    step = model.step_for(chat, index)
    error = _failure(model, chat, step)
    if error is not None:
        model._stopping.wait(float(step.get("hang", 0)))
        status, message = int(error.get("status", 500)), error.get("message", "scripted failure")
        return h._json(status, {"error": {"message": message, "type": "scripted_error", "code": str(status)}})

    users = sum(m["role"] == "user" for m in messages)  # keeps ids unique across resumed sessions
    tools, cwd = _offered(body), _cwd(body)
    calls = [codex_call(c["name"], c.get("arguments") or {}, tools, cwd) for c in step.get("tool_calls") or []]
    text, reasoning = step.get("text") or "", step.get("reasoning") or ""
    output: list[dict[str, Any]] = []
    if reasoning:
        summary = [{"type": "summary_text", "text": reasoning}]
        output.append({"type": "reasoning", "id": f"rs_{users}_{index}", "summary": summary})
    if text:
        content = [{"type": "output_text", "text": text, "annotations": []}]
        output.append({"type": "message", "id": f"msg_{users}_{index}", "role": "assistant", "status": "completed",
                       "content": content})
    for i, (kind, name, payload) in enumerate(calls):
        field = "arguments" if kind == "function_call" else "input"
        output.append({"type": kind, "id": f"fc_{users}_{index}_{i}", "call_id": f"call_{users}_{index}_{i}",
                       "name": name, field: payload, "status": "completed"})
    out_chars = len(text) + len(reasoning) + sum(len(payload) for _, _, payload in calls)
    prompt = max(1, len(json.dumps(messages, sort_keys=True)) // 4)
    completion = max(1, math.ceil(out_chars / 4))
    usage = {"input_tokens": prompt, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": completion,
             "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": prompt + completion}
    response = {"id": f"resp_{users}_{index}", "object": "response", "created_at": 0,
                "model": body.get("model") or model.models[0]}
    if not body.get("stream"):
        return h._json(200, {**response, "status": "completed", "output": output, "usage": usage})
    _Stream(model, h, float(step.get("delay", 0))).write(step, response, output, usage)


class _Stream:
    """The SSE events of one answer."""

    def __init__(self, model: ScriptedModel, h: _Handler, delay: float) -> None:
        self.model, self.h, self.delay = model, h, delay

    def send(self, kind: str, **data: Any) -> None:
        if self.delay and self.model._stopping.wait(self.delay):
            raise BrokenPipeError("server stopping")
        self.h.wfile.write(f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n".encode())
        self.h.wfile.flush()

    def write(self, step: Step, response: dict[str, Any], output: list[dict[str, Any]], usage: dict) -> None:
        h = self.h
        h._headers(200, ("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache"), ("Connection", "close"))
        self.send("response.created", response={**response, "status": "in_progress", "output": []})
        if step.get("drop"):  # the server goes away mid-stream: no items, no response.completed
            return
        hang = float(step.get("hang", 0))  # headers are out, so the client's timeout is not running
        while hang > 0 and not self.model._stopping.wait(min(KEEPALIVE, hang)):
            hang -= KEEPALIVE
            h.wfile.write(b": keepalive\n\n")  # an SSE comment: clients ignore it
            h.wfile.flush()
        if self.model._stopping.is_set():
            return
        for n, item in enumerate(output):
            self.item(n, item)
        self.send("response.completed", response={**response, "status": "completed", "output": output,
                                                  "usage": usage})

    def item(self, n: int, item: dict[str, Any]) -> None:
        """One output item: added, its deltas, done."""
        at = {"item_id": item["id"], "output_index": n}
        kind = item["type"]
        if kind == "reasoning":
            self.send("response.output_item.added", output_index=n, item={**item, "summary": []})
            text = item["summary"][0]["text"]
            for piece in pieces(text):
                self.send("response.reasoning_summary_text.delta", **at, summary_index=0, delta=piece)
            self.send("response.reasoning_summary_text.done", **at, summary_index=0, text=text)
        elif kind == "message":
            self.send("response.output_item.added", output_index=n,
                      item={**item, "status": "in_progress", "content": []})
            text = item["content"][0]["text"]
            part = {"type": "output_text", "text": "", "annotations": []}
            self.send("response.content_part.added", **at, content_index=0, part=part)
            for piece in pieces(text):
                self.send("response.output_text.delta", **at, content_index=0, delta=piece)
            self.send("response.output_text.done", **at, content_index=0, text=text)
            self.send("response.content_part.done", **at, content_index=0, part={**part, "text": text})
        else:
            field = "arguments" if kind == "function_call" else "input"
            event = "function_call_arguments" if kind == "function_call" else "custom_tool_call_input"
            self.send("response.output_item.added", output_index=n, item={**item, field: "", "status": "in_progress"})
            payload = item[field]
            for i in range(0, len(payload), 24):
                self.send(f"response.{event}.delta", **at, delta=payload[i : i + 24])
            self.send(f"response.{event}.done", **at, **{field: payload})
        self.send("response.output_item.done", output_index=n, item=item)
