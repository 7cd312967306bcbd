"""A scripted, deterministic OpenAI-compatible Chat Completions server.

This is NOT an AI model. It replays a fixed script (or, in demo mode, turns
plain task lines such as ``read README.md`` into tool calls) so that tests and
offline demos can drive the real ``pi`` CLI without network access or keys.

Demo-mode lines, one step each: ``read PATH``, ``ls PATH``, ``run: CMD``,
``write PATH: CONTENT`` (``\\n`` for newlines), ``edit PATH: OLD -> NEW``,
``grep PATTERN``, ``read card NAME`` / ``read input NAME`` (a read of the card, or the file, of the run's input
NAME, as the prompt's ``Inputs`` lines name it), ``ask: QUESTION`` (a call of the ``ask`` tool of
``pi_extensions/ask.js``; with options: ``ask: QUESTION [A | B | C]``), ``python: CODE`` (a call of the Python
session's tool, ``\\n`` for newlines), ``fail: STATUS MESSAGE``; ``say: TEXT`` and ``sleep: SECONDS``
attach to the next step; ``fail once: STATUS MESSAGE`` makes the server answer the first request of the first
conversation with this task (the same system prompt, model and task text) with that HTTP error, and every
later one as if the line were not there: a run that is tried again succeeds (an infrastructure failure, as a
provider's 5xx is); ``fail for PROVIDER/ID: STATUS MESSAGE`` makes every request for model ID fail with that
HTTP error (the server sees only the id; other models ignore the line): a fallback model goes on. ``repair: LINE``
(or ``repair N: LINE`` for the Nth time) is a line of what the script does when a try that failed its check is asked
again (``child/repairs``); with none, the task is done again as it was. Other lines are prose. The last answer
summarises the first line of every tool result (every entry of a listing).

The step to answer is chosen statelessly: it is the number of assistant
messages after the last user message in the request, so one server can serve
many concurrent agents.
"""

from __future__ import annotations

import contextlib
import importlib
import hashlib
import json
import math
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from .._child.events import text_of
from .._child.repairs import REPAIR_PREFIX
from .._child.rpc import CONTINUE_PREFIX
from .._child.text import clip, plural

if TYPE_CHECKING:
    from typing_extensions import Self

Step = dict[str, Any]
Script = Sequence[Step] | Callable[[dict, int], Step]

# The wire formats spoken besides OpenAI's Chat Completions (pi's): the end of the request's path -> the module of
# this package that answers it with ``answer(model, handler, body)``, imported when first asked. Each turns its
# request into the Chat Completions messages the script reads and the step into its own stream.
DIALECTS = {"/messages": "scripted_anthropic", "/responses": "scripted_responses"}
KEEPALIVE = 0.5  # seconds between SSE comments while a step hangs


def _after_last_user(messages: list[dict]) -> tuple[str, list[dict]]:
    """Return the last user message text and the messages after it. The supervisor's "continue" after a fallback
    to another model is no new task: the task before it goes on (from the step the failed model did not take). A
    repair (a try that failed its check, asked again) is answered by the task's ``repair`` lines."""
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].get("role") == "user":
            text = text_of(messages[i].get("content"))
            if REPAIR_PREFIX in text[:200]:
                return _repair_task(messages), messages[i + 1 :]
            if not text.startswith(CONTINUE_PREFIX):
                return text, messages[i + 1 :]
    return "", messages


def _repair_task(messages: list[dict]) -> str:
    """What the script does when asked again for the Nth time: the first task's ``repair N:`` lines, else its
    ``repair:`` lines, else the task itself again (which fails its check again)."""
    users = [text_of(m.get("content")) for m in messages if m.get("role") == "user"]
    task = next((t for t in users if REPAIR_PREFIX not in t[:200] and not t.startswith(CONTINUE_PREFIX)), "")
    n = sum(REPAIR_PREFIX in t[:200] for t in users)
    lines = [line.strip() for line in task.splitlines()]
    numbered = [m[1] for line in lines if (m := re.fullmatch(rf"repair {n}:\s*(.*)", line))]
    anyone = [m[1] for line in lines if (m := re.fullmatch(r"repair:\s*(.*)", line))]
    return "\n".join(numbered or anyone) or task


def step_index(body: dict) -> int:
    """Count assistant messages after the last user message (the stateless step number)."""
    return sum(m.get("role") == "assistant" for m in _after_last_user(body.get("messages") or [])[1])


# --- demo mode -----------------------------------------------------------


def _edit(m: re.Match[str]) -> tuple[str, dict]:
    return "edit", {"path": m[1], "edits": [{"oldText": m[2], "newText": m[3]}]}


def _content(text: str | None) -> str:
    """A ``write`` body: literal ``\\n`` becomes a newline and the file ends with one."""
    return (text or "").replace("\\n", "\n").rstrip("\n") + "\n"


def _delegation(m: re.Match[str], background: bool) -> dict:
    """A ``delegate: PRESET | TASK`` line's arguments (``delegate_bg:``: in the background)."""
    return {"preset": m[1], "task": m[2].replace("\\n", "\n"), "background": background}


def _choices(text: str) -> list[str]:
    """``A | B | C`` -> ["A", "B", "C"] (the options of an ``ask:`` line)."""
    return [choice.strip() for choice in text.split("|") if choice.strip()]


_TOOL_LINES: list[tuple[str, Callable[[re.Match[str]], tuple[str, dict]]]] = [
    (r"read\s+(\S+)", lambda m: ("read", {"path": m[1]})),
    (r"ls\s+(\S+)", lambda m: ("ls", {"path": m[1]})),
    (r"run:\s*(.+)", lambda m: ("bash", {"command": m[1]})),
    (r"write\s+(\S+?):(?:\s(.*))?", lambda m: ("write", {"path": m[1], "content": _content(m[2])})),
    (r"edit\s+(\S+?):\s(.*?)\s->\s(.*)", _edit),
    (r"grep\s+(.+)", lambda m: ("grep", {"pattern": m[1]})),
    (r"ask:\s*(.+?)\s*\[([^\[\]]*)\]", lambda m: ("ask", {"question": m[1], "options": _choices(m[2])})),
    (r"ask:\s*(.+)", lambda m: ("ask", {"question": m[1]})),
    (r"python:\s*(.+)", lambda m: ("python", {"code": m[1].replace("\\n", "\n")})),
    # delegation (issue 58): the delegate tool server's tools; a literal \n in the task is a new line of it
    (r"delegate:\s*(\S+)\s*\|\s*(.+)", lambda m: ("delegate", _delegation(m, False))),
    (r"delegate_bg:\s*(\S+)\s*\|\s*(.+)", lambda m: ("delegate", _delegation(m, True))),
    (r"delegate_wait(?::\s*(\S+))?", lambda m: ("delegate_wait", {"run_id": m[1]} if m[1] else {})),
]


# A prompt's line of one input (``lifecycle.inputs.task_lines``): "- NAME (KIND: ABOUT): file PATH; card PATH".
_INPUT_LINE = re.compile(r"^- (\S+) \(.*\): file (.+?)(?:; card (.+))?$", re.M)


def _input_read(m: re.Match[str], task: str) -> tuple[str, dict]:
    """``read card NAME`` / ``read input NAME``: a read of that input's card or file, as the task's lines name it."""
    found = {i[1]: (i[2], i[3]) for i in _INPUT_LINE.finditer(task)}
    file, card = found.get(m[2], (None, None))
    path = card if m[1] == "card" else file
    return "read", {"path": path or f"(no {m[1]} for an input named {m[2]})"}


def demo_plan(task: str) -> list[Step]:
    """Turn task lines into steps; ``say:``/``sleep:`` fold into the next step.

    The returned plan ends with a ``{"final": True}`` step whose text is to be
    completed with the summary once the tool results are known.
    """
    plan: list[Step] = []
    says: list[str] = []
    hang = 0.0
    once: dict[str, Any] | None = None
    fail_for: list[dict[str, Any]] = []
    for raw in task.splitlines():
        line = raw.strip()
        step: Step | None = None
        if m := re.fullmatch(r"fail once:\s*(\d{3})\s*(.*)", line):
            once = {"status": int(m[1]), "message": m[2] or "scripted failure (once)"}
        elif m := re.fullmatch(r"fail for\s+(?:[^/\s]+/)?(\S+?):\s*(\d{3})\s*(.*)", line):
            fail_for.append({"model": m[1], "status": int(m[2]), "message": m[3] or "scripted failure"})
        elif m := re.fullmatch(r"say:\s*(.*)", line):
            says.append(m[1])
        elif m := re.fullmatch(r"sleep:\s*(\d+(?:\.\d+)?)", line):
            hang += float(m[1])
        elif m := re.fullmatch(r"fail:\s*(\d{3})\s*(.*)", line):
            step = {"error": {"status": int(m[1]), "message": m[2] or "scripted failure"}}
        else:
            for pattern, build in [(r"read (card|input)\s+(\S+)", lambda m: _input_read(m, task)), *_TOOL_LINES]:
                if m := re.fullmatch(pattern, line):
                    name, args = build(m)
                    label = line.split(":")[0] if name in ("write", "edit", "ask") else line
                    step = {"tool_calls": [{"name": name, "arguments": args}], "label": label}
                    break
        if step is not None:
            if says:
                step["text"] = "\n".join(says)
            if hang:
                step["hang"] = hang
            plan.append(step)
            says, hang = [], 0.0
    final: Step = {"final": True, "says": says}
    if hang:
        final["hang"] = hang
    plan.append(final)
    if once:
        plan[0]["fail_once"] = once  # the first request only (the step number is stateless)
    for step in plan if fail_for else ():
        step["fail_for"] = fail_for
    return plan


def demo_step(body: dict, index: int) -> Step:
    """Answer a request in demo mode from the last user message and tool results."""
    task, after = _after_last_user(body.get("messages") or [])
    plan = demo_plan(task)
    step = dict(plan[min(index, len(plan) - 1)])
    if not step.pop("final", False):
        return step
    tools = [s for s in plan if "tool_calls" in s]
    results = [text_of(m.get("content")) for m in after if m.get("role") == "tool"]
    says = step.pop("says")
    data = [say for say in says if say.lstrip()[:1] in ("{", "[")]  # a JSON value ends the answer, as a model's does
    says = [say for say in says if say not in data]
    if tools:
        lines = [f"Done. {plural(len(tools), 'step')}:"]
        for s, result in zip(tools, results + [""] * len(tools)):
            found = [ln.strip() for ln in result.splitlines() if ln.strip()] or ["(no output)"]
            quote = ", ".join(found) if s["tool_calls"][0]["name"] == "ls" else found[0]  # a listing: each entry
            lines.append(f"- {s['label']}: {clip(quote, 80)}")
        says.append("\n".join(lines))
    elif not says and not data:
        first = next((ln.strip() for ln in task.splitlines() if ln.strip()), "")
        says.append(f"Done: {clip(first, 80)}")
    step["text"] = "\n".join(says + data)
    return step


# --- HTTP server ---------------------------------------------------------


class _Server(ThreadingHTTPServer):
    """Threading server that remembers its handler threads so stop() can join them."""

    daemon_threads = True

    def __init__(self, addr: tuple[str, int], model: ScriptedModel) -> None:
        self.model = model
        self.handlers: list[threading.Thread] = []
        super().__init__(addr, _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        t = threading.Thread(target=self.process_request_thread, args=(request, client_address), daemon=True)
        self.handlers = [h for h in self.handlers if h.is_alive()] + [t]
        t.start()


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    timeout = 30  # a silent client must not pin a handler thread forever

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        pass

    def _json(self, status: int, obj: dict) -> None:
        data = json.dumps(obj).encode()
        self._headers(status, ("Content-Type", "application/json"), ("Content-Length", str(len(data))))
        self.wfile.write(data)

    def _headers(self, status: int, *headers: tuple[str, str]) -> None:
        self.send_response(status)
        for key, value in headers:
            self.send_header(key, value)
        self.end_headers()

    def do_GET(self) -> None:
        with self.server.model._activity():
            self._get()

    def do_POST(self) -> None:
        with self.server.model._activity():
            self._post()

    def _get(self) -> None:
        if not self.path.rstrip("/").endswith("/models"):
            return self._json(404, {"error": {"message": f"no route {self.path}"}})
        data = [{"id": i, "object": "model", "owned_by": "scripted"} for i in self.server.model.models]
        self._json(200, {"object": "list", "data": data})

    def _post(self) -> None:
        path = self.path.split("?", 1)[0].rstrip("/")
        dialect = next((module for end, module in DIALECTS.items() if path.endswith(end)), None)
        if dialect is None and not path.endswith("/chat/completions"):
            return self._json(404, {"error": {"message": f"no route {self.path}"}})
        try:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        except ValueError:
            return self._json(400, {"error": {"message": "invalid JSON body"}})
        try:
            if dialect is None:
                self.server.model._answer(self, body)
            else:
                importlib.import_module(f"{__package__}.{dialect}").answer(self.server.model, self, body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client went away (aborted run): nothing to clean up


class ScriptedModel:
    """Deterministic Chat Completions server on 127.0.0.1; use as a context manager.

    ``script`` is a list of steps or a callable ``(request_body, step_index) -> step``;
    None selects demo mode. A step is a dict with any of ``text``, ``reasoning``,
    ``tool_calls`` ([{"name", "arguments"}]), ``error`` ({"status", "message"}: an
    HTTP error), ``delay`` (seconds before each chunk) and ``hang`` (seconds to stall
    after the first chunk, with SSE keep-alive comments). Past the end of a list
    script the answer is the text "done".
    """

    def __init__(self, script: Script | None = None, *, port: int = 0, models: Sequence[str] = ("scripted",)) -> None:
        self.script = script
        self.models = tuple(models)
        self._port = port
        self._requests: list[dict] = []
        self._headers: list[dict[str, str]] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._in_flight = 0
        self._last_activity = time.monotonic()
        self._failed_once: set[str] = set()  # the conversations a ``fail once:`` line has failed

    @contextlib.contextmanager
    def _activity(self) -> Iterator[None]:
        """A request being answered: a detached server ends only after a quiet spell (``idle_seconds``)."""
        with self._lock:
            self._in_flight += 1
        try:
            yield
        finally:
            with self._lock:
                self._in_flight -= 1
                self._last_activity = time.monotonic()

    @property
    def idle_seconds(self) -> float:
        """Seconds since the last request ended; 0 while one is being answered."""
        with self._lock:
            return 0.0 if self._in_flight else time.monotonic() - self._last_activity

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("ScriptedModel is not started")
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def requests(self) -> list[dict]:
        """A snapshot of the chat completion bodies received so far."""
        with self._lock:
            return list(self._requests)

    @property
    def request_headers(self) -> list[dict[str, str]]:
        """The HTTP headers of each chat completion request so far (names lower-cased), in arrival order."""
        with self._lock:
            return list(self._headers)

    def start(self) -> Self:
        self._stopping.clear()
        self._server = _Server(("127.0.0.1", self._port), self)
        # a short poll interval keeps stop() fast
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, wake hanging responses, close the socket and join all threads."""
        if self._server is None:
            return
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()
        for t in [self._thread, *self._server.handlers]:
            if t is not None:
                t.join(timeout=5)
        self._server = self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def step_for(self, body: dict, index: int) -> Step:
        """The step answering this request: scripted, callable, or demo."""
        if self.script is None:
            return demo_step(body, index)
        if callable(self.script):
            return self.script(body, index)
        return self.script[index] if index < len(self.script) else {"text": "done"}

    def _first_failure(self, body: dict) -> bool:
        """True the first time this conversation asks (a ``fail once:`` line), False ever after."""
        key = _conversation(body)
        with self._lock:
            first = key not in self._failed_once
            self._failed_once.add(key)
        return first

    def _answer(self, h: _Handler, body: dict) -> None:
        with self._lock:
            self._requests.append(body)
            self._headers.append({k.lower(): v for k, v in h.headers.items()})
        messages, index = body.get("messages") or [], step_index(body)
        step = self.step_for(body, index)
        once = step.get("fail_once")
        if once and self._first_failure(body):
            step = {"error": once}
        failing = [f for f in step.get("fail_for") or () if f["model"] == body.get("model")]
        if failing:
            step = {"error": failing[0]}
        if "error" in step:
            self._stopping.wait(float(step.get("hang", 0)))
            err = step["error"]
            message = err.get("message", "scripted failure")
            return h._json(int(err.get("status", 500)), {"error": {"message": message}})
        users = sum(m.get("role") == "user" for m in messages)  # keeps ids unique across resumed sessions
        calls = [
            {
                "index": i,
                "id": f"call_{users}_{index}_{i}",
                "type": "function",
                "function": {"name": c["name"], "arguments": json.dumps(c.get("arguments", {}))},
            }
            for i, c in enumerate(step.get("tool_calls") or [])
        ]
        text, reasoning = step.get("text") or "", step.get("reasoning") or ""
        out_chars = len(text) + len(reasoning) + sum(len(c["function"]["arguments"]) for c in calls)
        prompt = max(1, len(json.dumps(messages, sort_keys=True)) // 4)
        completion = max(1, math.ceil(out_chars / 4))
        usage = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
        finish = "tool_calls" if calls else "stop"
        base = {"id": f"chatcmpl-scripted-{users}-{index}", "created": 0, "model": body.get("model") or self.models[0]}
        if not body.get("stream"):
            message: dict[str, Any] = {"role": "assistant", "content": text or None}
            if reasoning:
                message["reasoning_content"] = reasoning
            if calls:
                message["tool_calls"] = [{k: v for k, v in c.items() if k != "index"} for c in calls]
            choice = {"index": 0, "message": message, "finish_reason": finish}
            return h._json(200, {**base, "object": "chat.completion", "choices": [choice], "usage": usage})

        h._headers(200, ("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache"), ("Connection", "close"))
        delay = float(step.get("delay", 0))

        def send(delta: dict | None, finish_reason: str | None = None, **extra: Any) -> None:
            if delay and self._stopping.wait(delay):
                raise BrokenPipeError("server stopping")
            choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish_reason}]
            chunk = {**base, "object": "chat.completion.chunk", "choices": choices, **extra}
            h.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            h.wfile.flush()

        send({"role": "assistant", "content": ""})
        if step.get("drop"):  # the server goes away mid-stream: no finish, no usage, no [DONE]
            return
        hang = float(step.get("hang", 0))  # headers are out, so the client's timeout is not running
        while hang > 0 and not self._stopping.wait(min(KEEPALIVE, hang)):
            hang -= KEEPALIVE
            h.wfile.write(b": keepalive\n\n")  # an SSE comment: clients ignore it
            h.wfile.flush()
        if self._stopping.is_set():
            return
        for piece in pieces(reasoning):
            send({"reasoning_content": piece})
        for piece in pieces(text):
            send({"content": piece})
        for c in calls:
            args = c["function"]["arguments"]
            send({"tool_calls": [{**c, "function": {"name": c["function"]["name"], "arguments": ""}}]})
            for i in range(0, len(args), 24):
                send({"tool_calls": [{"index": c["index"], "function": {"arguments": args[i : i + 24]}}]})
        send({}, finish)
        send(None, usage=usage)
        h.wfile.write(b"data: [DONE]\n\n")
        h.wfile.flush()


def _conversation(body: dict) -> str:
    """What identifies a conversation across runs of the same task: the model, system prompt and task text."""
    messages = body.get("messages") or []
    system = [text_of(m.get("content")) for m in messages if m.get("role") in ("system", "developer")]
    task = _after_last_user(messages)[0]
    return hashlib.sha256(json.dumps([body.get("model"), system, task]).encode()).hexdigest()


def pieces(text: str) -> list[str]:
    """Split text into stream chunks of three words (whitespace kept)."""
    tokens = re.findall(r"\s*\S+\s*|\s+", text)
    return ["".join(tokens[i : i + 3]) for i in range(0, len(tokens), 3)]
