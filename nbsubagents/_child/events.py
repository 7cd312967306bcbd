"""pi's JSON event stream -> nbsubagents' normalized events.

pi (``--mode rpc``, as ``--mode json``) prints one JSON object per line. Most of it is redundant for a person watching
(streaming deltas, large message snapshots), so the supervisor keeps a small, stable vocabulary in
``events.jsonl`` that the formatter, the widgets and the registry share. Each normalized event is a
dict with ``seq`` (1, 2, ...), ``ts`` (Unix seconds) and ``type``, one of:

=================  =========================================================================
``run_start``      runId, preset, model, cwd, task (written by the supervisor, not pi)
``session``        sessionId, cwd (pi's session header)
``turn_start``     turn (1-based)
``thinking``       text (the assistant's reasoning, when the model shares it)
``assistant_text`` text (the assistant's visible text of one message)
``tool_call``      id, name, args
``tool_result``    id, name, isError, text (shortened), details (edit diff and similar, shortened)
``usage``          input, output, cacheRead, cacheWrite, totalTokens, cost (one assistant message)
``message_end``    stopReason, model, provider, errorMessage (one assistant message)
``retry``          phase (start|end), plus pi's fields (attempt, delayMs, errorMessage, ...)
``error``          message (pi reported an error, or the supervisor did)
``stdout_text``    text (a stdout line that is not JSON: kept, shown as text)
``pi_event``       piType, data (an event type this module does not know: kept, never dropped)
``run_end``        status, exitCode, stopReason, errorMessage (written by the supervisor)
=================  =========================================================================

The conversation with the child (``child/rpc.py``) adds, written by the supervisor: ``user_message`` (kind steer or
follow_up, text, at, from, and disposition where pi says what it did with the message: started, queued or handled),
``question`` (id, method, title, message, options, placeholder, timeoutAt, approval), ``answer`` (id, value, by:
person, timeout or policy, at, from), ``notice`` (text), ``model_fallback`` (from, to, error) and ``session_stats``
(contextTokens, contextWindow, contextPercent, tokens, cost).

The adapter is stateful only to number turns; it never needs pi's large snapshots.
"""

from __future__ import annotations

import json

from .text import clip

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any, Callable, Iterator

    from .rpc import RpcSession

    Event = dict[str, Any]

RESULT_TEXT_LIMIT = 2000  # enough for a person and the formatter; stdout.log keeps everything
MAX_LINE = 8 * 1024 * 1024  # a longer stdout line is kept in stdout.log but not parsed

# pi event types whose information reaches us through other events, deliberately not repeated.
_FOLDED = frozenset(
    {"agent_start", "agent_end", "agent_settled", "turn_end", "message_start", "message_update",
     "tool_execution_update", "model_change", "thinking_level_change", "queue_update"}
)


def text_of(content: Any) -> str:
    """Join the text parts of a content list (pi's, Chat Completions', Anthropic's blocks) or pass a string through."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "\n".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")


class PiEventAdapter:
    """Turns pi's JSON objects into zero or more normalized events (without seq/ts)."""

    # stdout lines left out of stdout.log: pi's streaming updates, whose deltas message_end and the tool events
    # repeat (pi 0.x put the whole message so far in each: a stream the square of the message's size)
    UNLOGGED = (b'{"type":"message_update"',)

    def __init__(self) -> None:
        self.turn = 0
        # pi said the conversation is over (agent_end; pi 1.x adds agent_settled) and no new one started
        self.conversation_over = False

    def adapt(self, obj: Any) -> list[Event]:
        if not isinstance(obj, dict) or not isinstance(obj.get("type"), str):
            return [{"type": "pi_event", "piType": None, "data": obj}]
        kind = obj["type"]
        if kind in ("agent_end", "agent_settled", "agent_start"):
            self.conversation_over = kind != "agent_start"
        if kind == "session":
            return [{"type": "session", "sessionId": obj.get("id"), "cwd": obj.get("cwd")}]
        if kind == "turn_start":
            self.turn += 1
            return [{"type": "turn_start", "turn": self.turn}]
        if kind == "message_end":
            return self._message_end(obj.get("message") or {})
        if kind == "tool_execution_start":
            return [{"type": "tool_call", "id": obj.get("toolCallId"), "name": obj.get("toolName"),
                     "args": obj.get("args") or {}}]
        if kind == "tool_execution_end":
            result = obj.get("result") or {}
            details = result.get("details") if isinstance(result, dict) else None
            return [{"type": "tool_result", "id": obj.get("toolCallId"), "name": obj.get("toolName"),
                     "isError": bool(obj.get("isError")),
                     "text": clip(text_of(result.get("content") if isinstance(result, dict) else result),
                                  RESULT_TEXT_LIMIT),
                     "details": _short_details(details)}]
        if kind in ("auto_retry_start", "auto_retry_end"):
            data = {k: v for k, v in obj.items() if k != "type"}
            return [{"type": "retry", "phase": kind.rsplit("_", 1)[1], **data}]
        if kind in _FOLDED:
            return []
        return [{"type": "pi_event", "piType": kind, "data": obj}]

    def _message_end(self, message: dict[str, Any]) -> list[Event]:
        if message.get("role") != "assistant":
            return []  # user prompts and tool results arrive through other events
        out: list[Event] = []
        content = message.get("content") or []
        thinking = "\n".join(p.get("thinking", "") for p in content
                             if isinstance(p, dict) and p.get("type") == "thinking").strip()
        if thinking:
            out.append({"type": "thinking", "text": thinking})
        text = text_of(content)
        if text.strip():
            out.append({"type": "assistant_text", "text": text})
        usage = message.get("usage") or {}
        if usage:
            cost = usage.get("cost") or {}
            out.append({"type": "usage", "input": usage.get("input", 0), "output": usage.get("output", 0),
                        "cacheRead": usage.get("cacheRead", 0), "cacheWrite": usage.get("cacheWrite", 0),
                        "totalTokens": usage.get("totalTokens", 0),
                        "cost": cost.get("total", 0) if isinstance(cost, dict) else 0})
        out.append({"type": "message_end", "stopReason": message.get("stopReason"),
                    "model": message.get("model"), "provider": message.get("provider"),
                    "errorMessage": message.get("errorMessage")})
        if message.get("stopReason") == "error":
            out.append({"type": "error", "message": message.get("errorMessage") or "provider error"})
        return out


def _short_details(details: Any) -> dict[str, Any] | None:
    if not isinstance(details, dict) or not details:
        return None
    return {k: clip(v, RESULT_TEXT_LIMIT) if isinstance(v, str) else v for k, v in details.items()
            if isinstance(v, (str, int, float, bool))}


def parse_line(raw: bytes, adapter: PiEventAdapter | RpcSession) -> list[Event]:
    """One raw stdout line (without its newline) -> normalized events. Never raises."""
    text = raw.decode("utf-8", errors="replace").rstrip("\r")
    if not text.strip():
        return []
    try:
        obj = json.loads(text)
    except ValueError:
        return [{"type": "stdout_text", "text": clip(text, RESULT_TEXT_LIMIT)}]
    return adapter.adapt(obj)


class StreamLines:
    """A child's stdout, in the chunks it comes in, into normalized events line by line. The line being read is
    joined once it ends (a long line costs its length, not its length times its chunks); past MAX_LINE only its
    length is counted, and it becomes one ``stdout_text`` saying so. ``log`` gets every line as it came (a line past
    MAX_LINE in parts) but those its adapter's ``UNLOGGED`` prefixes mark as streaming updates."""

    def __init__(self, adapter: PiEventAdapter | RpcSession, log: Callable[[bytes], None] | None = None) -> None:
        self.adapter = adapter
        self.partial: list[bytes] = []
        self.size = self.overflow = 0
        self.log = log
        inner = getattr(adapter, "adapter", adapter)  # a session's stream adapter
        self.unlogged: tuple[bytes, ...] = tuple(getattr(inner, "UNLOGGED", ()))
        self.copying: bool | None = None  # whether the line being read goes to the log (None: none begun)

    def _log(self, data: bytes, ends: bool) -> None:
        """``data`` (a line, or the part of one too long to hold) into the log, unless its line is unlogged."""
        if self.log is None:
            return
        if self.copying is None:
            self.copying = not data.startswith(self.unlogged)
        if self.copying:
            self.log(data + b"\n" if ends else data)
        if ends:
            self.copying = None

    def feed(self, chunk: bytes) -> Iterator[Event]:
        """The events of the lines ``chunk`` ends."""
        lines: list[bytes] = []
        if b"\n" in chunk:
            *lines, rest = b"".join([*self.partial, chunk]).split(b"\n")
            self.partial, self.size = [rest], len(rest)
        else:
            self.partial.append(chunk)
            self.size += len(chunk)
        for raw in lines:
            self._log(raw, ends=True)
            if self.overflow:
                yield {"type": "stdout_text",
                       "text": f"[a stdout line of {self.overflow + len(raw)} bytes was too long to parse]"}
                self.overflow = 0
                continue
            yield from parse_line(raw, self.adapter)
        if self.size > MAX_LINE:
            self._log(b"".join(self.partial), ends=False)
            self.overflow += self.size
            self.partial, self.size = [], 0

    def end(self) -> list[Event]:
        """The events of a last line the stream ended without a newline."""
        rest = b"".join(self.partial)
        if rest:
            self._log(rest, ends=False)
        return parse_line(rest, self.adapter) if rest.strip() else []


def iter_stream(lines: Iterator[bytes]) -> Iterator[Event]:
    """Normalize a whole recorded pi stream (fixtures, benchmarks)."""
    adapter = PiEventAdapter()
    for raw in lines:
        yield from parse_line(raw.rstrip(b"\n"), adapter)


class Tally:
    """Running totals over normalized events: what result.json and panel headers report."""

    __slots__ = ("turns", "tool_calls", "input", "output", "cache_read", "cache_write", "cost",
                 "final_text", "stop_reason", "error_message", "model")

    def __init__(self) -> None:
        self.turns = self.tool_calls = self.input = self.output = self.cache_read = self.cache_write = 0
        self.cost = 0.0
        self.final_text = ""
        self.stop_reason: str | None = None
        self.error_message: str | None = None
        self.model: str | None = None

    def add(self, event: Event) -> None:
        kind = event.get("type")
        if kind == "turn_start":
            self.turns += 1
        elif kind == "model_fallback":  # the failed turn is taken again by the next model: one turn, not two
            self.turns = max(0, self.turns - 1)
        elif kind == "tool_call":
            self.tool_calls += 1
        elif kind == "assistant_text":
            self.final_text = event.get("text", "")
        elif kind == "usage":
            self.input += event.get("input") or 0
            self.output += event.get("output") or 0
            self.cache_read += event.get("cacheRead") or 0
            self.cache_write += event.get("cacheWrite") or 0
            self.cost += event.get("cost") or 0
        elif kind == "message_end":
            self.stop_reason = event.get("stopReason")
            self.error_message = event.get("errorMessage")
            if event.get("provider") and event.get("model"):
                self.model = f"{event['provider']}/{event['model']}"

    @property
    def tokens(self) -> int:
        return self.input + self.output + self.cache_read + self.cache_write

    def usage(self) -> dict[str, Any]:
        return {"input": self.input, "output": self.output, "cacheRead": self.cache_read,
                "cacheWrite": self.cache_write, "totalTokens": self.tokens, "cost": round(self.cost, 8)}
