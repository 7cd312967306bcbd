"""The scripted model's Anthropic Messages dialect (``POST .../v1/messages``), which Claude Code speaks.

NOT an AI model: the request is turned into the Chat Completions ``messages`` the script reads (system text, user
text, assistant text and ``tool_calls``, ``tool`` results), so ``demo_step``, ``step_index``, ``fail once:``,
``fail for`` and ``sleep:`` work as they do for pi; the step is written back as Anthropic's stream
(``message_start``, ``content_block_*``, ``message_delta``, ``message_stop``) or, unstreamed, as one message.

Demo-mode tools become Claude Code's, with its argument names: ``read`` -> ``Read{file_path}``, ``bash`` ->
``Bash{command}``, ``edit`` -> ``Edit{file_path, old_string, new_string}``, ``write`` -> ``Write{file_path,
content}``, ``grep``/``find``/``ls`` -> ``Bash{command: grep -rn/find/ls ...}`` (Claude Code 2.1 offers no Grep,
Glob or LS tool: it searches with Bash), a tool server's tool (``python``, ``delegate``) -> the offered
``mcp__SERVER__TOOL``; paths are made absolute against the working directory Claude Code's system prompt names
(its tools want absolute paths). Claude Code's Edit (and Write over an existing file) needs the file read first in
the conversation: a demo task reads a file before it edits it. A request that offers no tools (a side request: a
title, a summary) gets the step's text alone. With ``--json-schema`` Claude Code offers a ``StructuredOutput`` tool:
a final reply ending with a JSON object is given through it.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
from typing import TYPE_CHECKING, Any

from .._child.events import text_of
from .scripted import KEEPALIVE, pieces, step_index

if TYPE_CHECKING:
    from collections.abc import Iterable

    from .scripted import ScriptedModel, Step

    _Handler = Any  # the server's request handler (its _json and _headers write the answer)


STRUCTURED = "StructuredOutput"  # the tool Claude Code adds for --json-schema
_REMINDER = re.compile(r"<system-reminder>.*?</system-reminder>", re.S)  # Claude Code's context notes, not the task
_WORKDIR = re.compile(r"[Ww]orking directory:\s*(/\S+)")


def to_chat(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The Anthropic request's conversation as Chat Completions messages (what the script reads)."""
    messages: list[dict[str, Any]] = []
    system = text_of(body.get("system"))
    if system:
        messages.append({"role": "system", "content": system})
    for message in body.get("messages") or []:
        content = message.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content or ""}]
        if message.get("role") == "system":  # Claude Code's notes between turns (agent types, skills)
            messages.append({"role": "system", "content": text_of(blocks)})
            continue
        if message.get("role") == "assistant":
            calls = [{"id": b.get("id"), "type": "function",
                      "function": {"name": b.get("name"), "arguments": json.dumps(b.get("input") or {})}}
                     for b in blocks if isinstance(b, dict) and b.get("type") == "tool_use"]
            messages.append({"role": "assistant", "content": text_of(blocks) or None,
                             **({"tool_calls": calls} if calls else {})})
            continue
        results = [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"]
        if results:  # a turn's tool results (and any notes beside them) continue the task: no new user message
            messages += [{"role": "tool", "tool_call_id": b.get("tool_use_id"), "content": text_of(b.get("content"))}
                         for b in results]
            continue
        text = _REMINDER.sub("", text_of(blocks)).strip()
        if text:
            messages.append({"role": "user", "content": text})
    return messages


def claude_call(name: str, args: dict[str, Any], workdir: str | None,
                offered: Iterable[str] = ()) -> tuple[str, dict[str, Any]]:
    """A demo-mode tool call (pi's verbs) as Claude Code's tool and arguments; other names pass through."""
    def where(path: str) -> str:
        return os.path.join(workdir, path) if workdir and not os.path.isabs(path) else path

    if name == "read":
        return "Read", {"file_path": where(args["path"])}
    if name == "bash":
        return "Bash", {"command": args["command"]}
    if name == "ls":
        return "Bash", {"command": f"ls {shlex.quote(args['path'])}"}
    if name == "write":
        return "Write", {"file_path": where(args["path"]), "content": args["content"]}
    if name == "edit":
        edit = (args.get("edits") or [{}])[0]
        return "Edit", {"file_path": where(args["path"]), "old_string": edit.get("oldText", ""),
                        "new_string": edit.get("newText", "")}
    if name == "grep":  # Claude Code 2.1 searches with Bash (it offers no Grep or Glob tool)
        return "Bash", {"command": f"grep -rn -- {shlex.quote(args['pattern'])} ."}
    if name == "find":
        return "Bash", {"command": f"find . -name {shlex.quote(args.get('pattern', '*'))}"}
    # a tool server's tool (the Python session's, the delegate tools): Claude Code names it mcp__SERVER__TOOL
    return next((tool for tool in offered if tool.startswith("mcp__") and tool.endswith(f"__{name}")), name), args


def _structured(body: dict[str, Any], messages: list[dict[str, Any]], text: str) -> Any:
    """The JSON object a final reply ends with, when Claude Code offers its StructuredOutput tool (``--json-schema``)
    and it was not called yet since the last user message (a repair asks anew): the reply is given through that
    tool, as a model asked for typed output does."""
    offered = {tool.get("name") for tool in body.get("tools") or () if isinstance(tool, dict)}
    last_user = max((i for i, m in enumerate(messages) if m["role"] == "user"), default=-1)
    called = any(call["function"]["name"] == STRUCTURED for m in messages[last_user + 1:]
                 for call in m.get("tool_calls") or ())
    if STRUCTURED not in offered or called:
        return None
    start = text.find("{")
    while start >= 0:
        try:
            return json.loads(text[start:].strip().removesuffix("```").strip())
        except ValueError:
            start = text.find("{", start + 1)
    return None


def answer(model: ScriptedModel, h: _Handler, body: dict[str, Any]) -> None:
    """Answer one Messages request with the script's step (see the module's docstring)."""
    messages = to_chat(body)
    chat = {"model": body.get("model"), "messages": messages, "stream": body.get("stream")}
    with model._lock:
        model._requests.append(body)
        model._headers.append({k.lower(): v for k, v in h.headers.items()})
    index = step_index(chat)
    step: Step = model.step_for(chat, index)
    once = step.get("fail_once")
    if once and model._first_failure(chat):
        step = {"error": once}
    failing = [f for f in step.get("fail_for") or () if f["model"] == body.get("model")]
    if failing:
        step = {"error": failing[0]}
    if "error" in step:
        model._stopping.wait(float(step.get("hang", 0)))
        err = step["error"]
        return h._json(int(err.get("status", 500)), {"type": "error", "error": {
            "type": "api_error", "message": err.get("message", "scripted failure")}})
    found = _WORKDIR.search(messages[0]["content"]) if messages and messages[0]["role"] == "system" else None
    workdir = found[1] if found else None
    users = sum(m["role"] == "user" for m in messages)
    calls = []
    offered = [t["name"] for t in body.get("tools") or () if isinstance(t, dict) and isinstance(t.get("name"), str)]
    if offered:  # a side request (no tools offered) gets the text alone
        for i, call in enumerate(step.get("tool_calls") or []):
            name, args = claude_call(call["name"], call.get("arguments") or {}, workdir, offered)
            calls.append({"type": "tool_use", "id": f"toolu_{users}_{index}_{i}", "name": name, "input": args})
    text = step.get("text") or ("" if calls else "Done.")
    typed = _structured(body, messages, text) if not calls else None
    if typed is not None:  # --json-schema: the reply goes through Claude Code's StructuredOutput tool
        calls.append({"type": "tool_use", "id": f"toolu_{users}_{index}_0", "name": STRUCTURED, "input": typed})
        text = ""
    reasoning = step.get("reasoning") or ""
    usage = {"input_tokens": max(1, len(json.dumps(messages, sort_keys=True)) // 4),
             "output_tokens": max(1, math.ceil((len(text) + len(reasoning) + len(json.dumps(calls))) / 4))}
    message = {"id": f"msg_scripted_{users}_{index}", "type": "message", "role": "assistant",
               "model": body.get("model") or model.models[0], "stop_sequence": None}
    stop = "tool_use" if calls else "end_turn"
    blocks: list[dict[str, Any]] = ([{"type": "thinking", "thinking": reasoning, "signature": "scripted"}]
                                    if reasoning else [])
    blocks += ([{"type": "text", "text": text}] if text else []) + calls
    if not body.get("stream"):
        return h._json(200, {**message, "content": blocks, "stop_reason": stop, "usage": usage})
    _stream(model, h, step, message, blocks, stop, usage)


def _stream(model: ScriptedModel, h: _Handler, step: Step, message: dict[str, Any], blocks: list[dict[str, Any]],
            stop: str, usage: dict[str, int]) -> None:
    h._headers(200, ("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache"), ("Connection", "close"))
    delay = float(step.get("delay", 0))

    def send(kind: str, data: dict[str, Any]) -> None:
        if delay and model._stopping.wait(delay):
            raise BrokenPipeError("server stopping")
        h.wfile.write(f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n".encode())
        h.wfile.flush()

    send("message_start", {"message": {**message, "content": [], "stop_reason": None,
                                       "usage": {"input_tokens": usage["input_tokens"], "output_tokens": 1}}})
    if step.get("drop"):  # the server goes away mid-stream
        return
    hang = float(step.get("hang", 0))
    while hang > 0 and not model._stopping.wait(min(KEEPALIVE, hang)):
        hang -= KEEPALIVE
        send("ping", {})
    if model._stopping.is_set():
        return
    for i, block in enumerate(blocks):
        kind = block["type"]
        if kind == "text":
            send("content_block_start", {"index": i, "content_block": {"type": "text", "text": ""}})
            for piece in pieces(block["text"]):
                send("content_block_delta", {"index": i, "delta": {"type": "text_delta", "text": piece}})
        elif kind == "thinking":
            send("content_block_start", {"index": i, "content_block": {"type": "thinking", "thinking": ""}})
            for piece in pieces(block["thinking"]):
                send("content_block_delta", {"index": i, "delta": {"type": "thinking_delta", "thinking": piece}})
            send("content_block_delta", {"index": i, "delta": {"type": "signature_delta",
                                                               "signature": block["signature"]}})
        else:
            send("content_block_start", {"index": i, "content_block": {**block, "input": {}}})
            args = json.dumps(block["input"])
            for k in range(0, len(args), 24):
                send("content_block_delta", {"index": i, "delta": {"type": "input_json_delta",
                                                                   "partial_json": args[k:k + 24]}})
        send("content_block_stop", {"index": i})
    send("message_delta", {"delta": {"stop_reason": stop, "stop_sequence": None},
                           "usage": {"output_tokens": usage["output_tokens"]}})
    send("message_stop", {})
