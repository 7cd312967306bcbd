"""The conversation with a pi child in RPC mode (``pi --mode rpc``): commands out, replies and dialogs in.

The supervisor starts pi with a pipe on its stdin and hands it to an ``RpcSession``, which sends the task as the
first ``prompt`` and then, while the run goes on:

- relays what a person posted to the run's inbox (``child/inbox.py``), if it is signed with the run's key (read
  before pi starts: ``child/keys.py``); anything else there was written by someone else, the child say, and is
  refused with a notice (an answer so refused leaves its question open). A steer while pi works becomes an RPC
  ``steer`` (pi delivers it after the current tool calls); a follow-up, and a steer that comes after pi's last
  turn, wait until pi is idle and go as a new ``prompt`` (pi 0.73.1 would keep a ``follow_up`` queued forever when
  it arrives as pi ends its run, and a prompt to a busy pi is refused and tried again: nothing is ever lost);
- turns every dialog an extension opens (``ctx.ui.input/select/confirm/editor``) into a ``question`` event and
  ``waiting.json``, answers it from the inbox, or once ``questionTimeout`` s have passed (input, select, editor:
  no answer; confirm: the approval policy's ``otherwise``);
- asks pi for its session numbers after each turn (``session_stats`` events, the result's ``contextUsage``);
- moves on to the next of ``fallbackModels`` when a turn fails for provider reasons (``model_fallback``): during
  pi's own retry delay when pi retries (pi then repeats the failed request unchanged on the new model), else with
  ``set_model`` and a prompt asking the model to continue.

Writes to pi's stdin never block: they are queued and written as far as the pipe takes them (``flush``), so a pi
that stops reading cannot stall the supervisor. Standard library only: the supervisor imports it.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

from . import inbox, keys
from .artifacts import iso, now_iso
from .events import PiEventAdapter

from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from .record import RunRecord
    from typing import IO, Any

    from .events import Event

SETTLE_GRACE = 0.3   # pi 0.73.1 has no agent_settled: after a failed turn's agent_end it may retry; it says so in ms
DIALOGS = ("input", "select", "confirm", "editor")
# A turn that failed for these reasons may succeed on another model: pi's errorMessage of a failed request starts
# with the HTTP status, and a provider's own failures are a refused or exhausted key (401, 402, 403), a timeout
# (408), a rate limit (429) or the server's failure (5xx); without a status, a body whose error type says so, or no
# answer at all (a connection that failed). A client error (400, 404, 413, 422, ...) is the request's own: another
# model would refuse it too, whatever words its message holds.
PROVIDER_STATUS = frozenset({401, 402, 403, 408, 429})
STATUS = re.compile(r"\s*(?:error:?\s*)?(\d{3})\b", re.I)
PROVIDER_TYPE = re.compile(r'"(?:rate_limit_error|overloaded_error|api_error|server_error|insufficient_quota|'
                           r'RESOURCE_EXHAUSTED|UNAVAILABLE|DEADLINE_EXCEEDED)"')
NO_ANSWER = re.compile(r"\s*(?:connection error|request timed out|fetch failed|socket hang up|"
                       r"(?:connect )?(?:ECONNREFUSED|ECONNRESET|ETIMEDOUT|ENOTFOUND|EAI_AGAIN))", re.I)


def provider_failure(error: str) -> bool:
    """Whether a failed request's ``error`` (pi's errorMessage) is the provider's failure, not the request's."""
    status = STATUS.match(error)
    if status is not None:
        code = int(status[1])
        return code in PROVIDER_STATUS or 500 <= code <= 599
    return PROVIDER_TYPE.search(error) is not None or NO_ANSWER.match(error) is not None


CONTINUE_PREFIX = "Continue the task from where it stopped:"  # the scripted model knows it: no new task
CONTINUE = CONTINUE_PREFIX + " the previous model failed ({error}), so {model} now takes over."
BUSY = re.compile(r"already processing|streaming", re.I)  # pi refused a prompt because it still works


class RpcSession:
    """One pi child's RPC conversation; ``adapt`` takes its stdout records, ``tick`` does the timed work."""

    def __init__(self, run_dir: Path, record: RunRecord, adapter: PiEventAdapter) -> None:
        self.run_dir = run_dir
        self.adapter = adapter
        self.question_timeout = max(0.0, float(record.question_timeout or 0))
        approval = record.approval
        self.allow_otherwise = isinstance(approval, dict) and approval.get("otherwise") == "allow"
        self.model = str(record.resolved_model or "")
        self.fallbacks = []  # each model once: never the run's own model again, nor one named twice
        for name in record.fallback_models:
            if isinstance(name, str) and "/" in name and name != self.model and name not in self.fallbacks:
                self.fallbacks.append(name)
        self.models_tried: list[dict[str, Any]] = [{"model": self.model, "error": None}]
        self.me = f"{os.uname().nodename}:{os.getpid()}"
        self.key = keys.load(run_dir.name)  # before pi starts; None: nothing posted can be the person's
        self.macs: set[str] = set()  # of the messages taken: a copy of one is no new message
        self.pipe: IO[bytes] | None = None
        self.cwd: str | None = None
        self.out = bytearray()        # commands not yet taken by the pipe
        self.closing = False          # close pi's stdin once `out` is written
        self.aborted = False
        self.ids = 0
        self.sent: dict[str, tuple[str, Any]] = {}   # command id -> (what it was for, its message)
        self.held: list[dict[str, Any]] = []         # inbox messages waiting for an idle pi
        self.open: dict[str, dict[str, Any]] = {}    # question id -> its event (and its deadline)
        self.conversation: list[Event] = []          # user_message and answer events: the result's
        self.questions: list[dict[str, Any]] = []    # the result's, one per question
        self.context_usage: dict[str, Any] | None = None
        self.refused: str | None = None  # pi refused the task itself (the first prompt)
        # what pi is doing, as its stream says
        self.settles = False      # pi 1.x: agent_settled says pi will not go on by itself
        self.running = False      # between agent_start and agent_end
        self.starting = False     # a prompt was accepted and its agent_start is still to come
        self.ended_at: float | None = None  # the last agent_end (monotonic)
        self.settled = False
        self.retrying = False     # pi's own retry is waiting to repeat a failed request
        self.final_turn = False   # the last assistant message of this run called no tool: a steer is too late
        self.errored = False      # the last assistant message failed: pi 0.73.1 may retry it after agent_end
        self.pi_queue: list[str] = []  # what pi says it still holds to deliver (its last queue_update)
        self.failure: str | None = None     # the last turn's provider failure, if it failed so
        self.switching: str | None = None   # set_model sent for this model; a prompt follows unless pi retries

    # -- commands ------------------------------------------------------------------------------
    def attach(self, pipe: IO[bytes], task: str, cwd: str | None = None) -> None:
        """pi's stdin (made non-blocking) and the task, sent as the first prompt, after a question for pi's
        session (the ``session`` event JSON mode's header made)."""
        self.pipe, self.cwd = pipe, cwd
        os.set_blocking(pipe.fileno(), False)
        self.starting = True
        self.send({"type": "get_state"}, "state")
        self.send({"type": "prompt", "message": task}, "task")

    def send(self, command: dict[str, Any], purpose: str | None = None, message: Any = None) -> None:
        """Queue ``command`` for pi (one JSON line); ``purpose`` names what its response settles."""
        if purpose is not None:
            self.ids += 1
            command = {"id": f"nbs-{self.ids}", **command}
            self.sent[command["id"]] = (purpose, message)
        if self.pipe is not None and not self.closing:
            self.out += json.dumps(command, ensure_ascii=False).encode(errors="backslashreplace") + b"\n"
            self.flush()

    def flush(self) -> None:
        """Write what the pipe takes now; close it once everything is written and the end was asked."""
        if self.pipe is None:
            return
        while self.out:
            try:
                written = os.write(self.pipe.fileno(), self.out[:1 << 16])
            except BlockingIOError:
                return
            except OSError:  # pi is gone or closed its stdin: nothing more can reach it
                self.out.clear()
                break
            del self.out[:written]
        if self.closing:
            self.close(now=True)

    def close(self, now: bool = False) -> None:
        """End pi's input (pi then shuts down); ``now`` drops what it has not read yet."""
        self.closing = True
        if self.pipe is not None and (now or not self.out):
            self.out.clear()
            try:
                self.pipe.close()
            except OSError:
                pass
            self.pipe = None

    follows_up = True  # it takes a message after its task, before it ends (a repair: ``child/repairs``)

    def follow_up(self, text: str) -> bool:
        """``text`` as the next prompt of an idle pi's conversation, from nbsubagents itself (a repair); False
        when pi can take nothing more (its input is closed)."""
        if self.pipe is None or self.closing or self.aborted:
            return False
        self.starting = True
        self.send({"type": "prompt", "message": text}, "prompt",
                  {"kind": "repair", "text": text, "at": now_iso(), "from": "nbsubagents"})
        return True

    def abort(self) -> None:
        """Stop pi's current work (RPC ``abort``), then end its input: the run is being stopped."""
        if not self.aborted:
            self.aborted = True
            self.send({"type": "abort"})
            self.close()

    # -- pi's stdout ---------------------------------------------------------------------------
    def adapt(self, obj: Any) -> list[Event]:
        """One parsed stdout record -> the normalized events it makes (``events.parse_line`` calls it as it calls
        the adapter): responses and dialogs are the conversation's, the rest the adapter's."""
        if isinstance(obj, dict):
            kind = obj.get("type")
            if kind == "response":
                return self.handle(obj)
            if kind == "extension_ui_request":
                return self.handle(obj)
            return self._observe(kind, obj) + self.adapter.adapt(obj)
        return self.adapter.adapt(obj)

    def _observe(self, kind: Any, obj: dict[str, Any]) -> list[Event]:
        """What pi's stream says about its state; a fallback when pi is about to retry a failed request."""
        if kind == "agent_start":
            self.running, self.starting, self.settled, self.retrying = True, False, False, False
            self.final_turn = False
        elif kind == "agent_end":
            self.running, self.starting, self.ended_at = False, False, time.monotonic()
        elif kind == "agent_settled":
            self.settled = self.settles = True
        elif kind == "auto_retry_start":
            self.retrying = True
            if self.failure is not None and self._next_model() is not None:
                return self._fall_back(retry=False)  # pi repeats the failed request itself, on the new model
        elif kind == "auto_retry_end":
            self.retrying = False
        elif kind == "queue_update":
            self.pi_queue = [str(m) for m in (obj.get("steering") or []) + (obj.get("followUp") or [])]
        elif kind == "turn_start":
            self.final_turn = False
        elif kind == "turn_end":
            self.send({"type": "get_session_stats"}, "stats")
        elif kind == "message_end":
            message = obj.get("message") or {}
            if isinstance(message, dict) and message.get("role") == "assistant":
                stop, error = message.get("stopReason"), message.get("errorMessage")
                self.final_turn, self.errored = stop != "toolUse", stop == "error"
                if stop == "error":  # each model keeps its (last) error, whether or not another follows
                    self.models_tried[-1]["error"] = str(error or "the model's request failed")
                provider = stop == "error" and isinstance(error, str) and provider_failure(error)
                self.failure = (error or "provider error") if provider else None
        return []

    def handle(self, record: dict[str, Any]) -> list[Event]:
        """A ``response`` to one of our commands, or an ``extension_ui_request`` (a dialog or a notice)."""
        if record.get("type") == "extension_ui_request":
            return self._request(record)
        purpose, message = self.sent.pop(str(record.get("id")), (None, None))
        ok, data = record.get("success") is True, record.get("data")
        disposition = data.get("disposition") if isinstance(data, dict) else None
        if purpose in ("task", "prompt", "retry") and isinstance(data, dict):
            self.settles = True  # pi 1.x says what became of a prompt, and ends its work with agent_settled
            if disposition == "handled":  # an extension took it: no run starts
                self.starting, self.settled, self.ended_at = False, True, self.ended_at or time.monotonic()
        if purpose == "task":
            self.starting = self.starting and ok
            if not ok:
                self.refused = str(record.get("error") or "pi refused the task")
        elif purpose == "stats" and ok and isinstance(data, dict):
            return [self._stats(data)]
        elif purpose == "state" and ok and isinstance(data, dict):
            return [{"type": "session", "sessionId": data.get("sessionId"), "cwd": self.cwd}]
        elif purpose in ("steer", "prompt"):
            return self._delivered(purpose, message, ok, record.get("error"), disposition)
        elif purpose == "model":
            return self._switched(ok, record.get("error"))
        elif purpose in ("retry", "again"):
            self.starting = self.starting and ok
            if not ok:
                return [{"type": "error", "message": f"pi refused to go on with {self.models_tried[-1]['model']}: "
                                                     f"{record.get('error')}"}]
        elif not ok and record.get("command") not in ("abort", "get_session_stats"):
            return [{"type": "error", "message": f"pi refused {record.get('command')}: {record.get('error')}"}]
        return []

    # -- the inbox and the idle pi -------------------------------------------------------------
    def tick(self, stopping: bool = False) -> list[Event]:
        """Deliver what was posted, answer questions whose time is up, retry on a fallback model."""
        self.flush()
        if self.aborted or self.pipe is None:
            return []
        events: list[Event] = []
        for message in inbox.take(self.run_dir):
            if not keys.verified(self.key, "message", message) or message[keys.MAC] in self.macs:
                events.append(self._refused(message))
                continue
            self.macs.add(message[keys.MAC])
            if message["kind"] == "answer":
                events += self._answer_from(message)
            elif message["kind"] == "steer" and (self.running or self.starting) and not self.final_turn:
                self.send({"type": "steer", "message": message.get("text") or ""}, "steer", message)
            else:
                self.held.append(message)
        events += self._expire()
        if stopping or not self.idle():
            return events
        if self.failure is not None and self.switching is None and self._next_model() is not None:
            events += self._fall_back(retry=True)
        elif self.held and self.switching is None:
            message = self.held.pop(0)
            self.starting = True
            self.send({"type": "prompt", "message": message.get("text") or ""}, "prompt", message)
        elif self.pi_queue:  # pi 0.73.1 took a steer as its run ended and keeps it: only a prompt delivers it
            text, self.pi_queue, self.starting = self.pi_queue[0], [], True
            self.send({"type": "prompt", "message": text}, "again")
            events.append({"type": "notice", "text": f"pi kept a message that reached it as its run ended; it is "
                                                     f"sent again (the child may see it twice): {text}"})
        return events

    def idle(self) -> bool:
        """pi has ended its work and will not go on by itself (no retry, no prompt on its way)."""
        if self.running or self.starting or self.retrying or self.ended_at is None and self.refused is None:
            return False
        if self.refused is not None and self.ended_at is None:
            return True
        if self.settles:
            return self.settled
        return not self.errored or time.monotonic() - (self.ended_at or 0) >= SETTLE_GRACE

    def finished(self) -> bool:
        """The conversation is over: pi idle, nothing to deliver, no question open, nothing more posted."""
        return (self.idle() and not self.held and not self.open and self.switching is None and not self.pi_queue
                and (self.failure is None or self._next_model() is None) and not inbox.pending(self.run_dir))

    def _refused(self, message: dict[str, Any]) -> Event:
        why = ("this run has no key to check it with" if self.key is None else "it is a copy of one already taken"
               if keys.verified(self.key, "message", message) else "it is not signed with the run's key")
        words = {"answer": f"An answer to question {message.get('requestId')}", "steer": "A steer",
                 "follow_up": "A follow-up"}[message["kind"]]
        return {"type": "notice", "text": f"{words} was refused: only the person can speak for the person, and "
                                          f"{why} (it was left in the run's inbox by something else, the child "
                                          f"perhaps; from {message.get('from')!r}, which anyone can write)"}

    def _delivered(self, purpose: str, message: dict[str, Any], ok: bool, error: Any,
                   disposition: Any) -> list[Event]:
        """pi's answer to a person's message: taken (a ``user_message``, with what pi did with it when it says:
        ``disposition`` started, queued or handled), refused while busy (held again), or refused."""
        if ok and message["kind"] == "repair":  # nbsubagents' own words, not the person's: its notice says them
            return []
        if ok:
            event = {"type": "user_message", "kind": message["kind"], "text": message.get("text") or "",
                     "at": message.get("at"), "from": message.get("from")}
            if isinstance(disposition, str) and disposition:
                event["disposition"] = disposition[:40]
            self.conversation.append(event)
            return [event]
        if purpose == "prompt":
            self.starting = False
        if BUSY.search(str(error or "")):  # pi was still busy: delivered once it is idle
            self.held.insert(0, message)
            return []
        return [{"type": "error", "message": f"The {message['kind'].replace('_', '-')} could not be delivered: "
                                             f"{error}"}]

    # -- questions -----------------------------------------------------------------------------
    def _request(self, record: dict[str, Any]) -> list[Event]:
        method = record.get("method")
        if method == "notify":
            return [{"type": "notice", "text": str(record.get("message") or "")}]
        if method not in DIALOGS:
            return []  # setStatus, setWidget, setTitle, set_editor_text: nothing a run shows
        deadline = time.time() + self.question_timeout
        question: Event = {"type": "question", "id": str(record.get("id")), "method": method,
                           "title": record.get("title"), "message": record.get("message"),
                           "placeholder": record.get("placeholder"),
                           "timeoutAt": iso(deadline), "approval": method == "confirm"}
        if method == "select":
            question["options"] = list(record.get("options") or [])
        self.questions.append({"id": question["id"], "method": method, "title": question["title"],
                               "message": question["message"], "approval": question["approval"],
                               "answer": None, "by": None, "askedAt": now_iso(), "answeredAt": None})
        self.open[question["id"]] = {**question, "_deadline": deadline}
        self._publish()
        return [question, *self._expire()]  # a headless run (questionTimeout 0) answers at once

    def _expire(self) -> list[Event]:
        events: list[Event] = []
        for qid, question in list(self.open.items()):
            if time.time() >= question["_deadline"]:  # questionTimeout 0: nobody was there to ask (a headless run)
                confirm = question["method"] == "confirm"
                by = "nobody" if self.question_timeout == 0 else "policy" if confirm else "timeout"
                events += self._answer(qid, self.allow_otherwise if confirm else None, by, now_iso(), self.me)
        return events

    def _answer_from(self, message: dict[str, Any]) -> list[Event]:
        qid = message.get("requestId") or next(iter(self.open), None)
        if qid not in self.open:
            return [{"type": "notice", "text": f"An answer to question {qid} came after it was closed; ignored."}]
        if message.get("question") != keys.digest(self.open[qid]):
            return [{"type": "notice", "text": f"An answer to question {qid} was refused: it was given to a "
                                               "question worded otherwise than the one asked, which stays open"}]
        return self._answer(str(qid), message.get("value"), "person", message.get("at"), message.get("from"))

    def _answer(self, qid: str, value: Any, by: str, at: Any, sender: Any) -> list[Event]:
        question = self.open.pop(qid)
        if question["method"] == "confirm":
            if value is not None:
                value = value is True or str(value).strip().lower() in ("allow", "yes", "true", "y")
            reply = {"cancelled": True} if value is None else {"confirmed": value}
        else:
            reply = {"cancelled": True} if value is None else {"value": str(value)}
        self.send({"type": "extension_ui_response", "id": qid, **reply})
        self._publish()
        event = {"type": "answer", "id": qid, "value": value, "by": by, "at": at, "from": sender}
        self.conversation.append(event)
        for entry in self.questions:
            if entry["id"] == qid:
                entry.update(answer=value, by=by, answeredAt=now_iso())
        return [event]

    def _publish(self) -> None:
        try:
            inbox.set_waiting(self.run_dir, [{k: v for k, v in q.items() if k != "_deadline"}
                                             for q in self.open.values()], self.key)
        except OSError:
            pass  # best effort: the events say the same

    def end(self) -> None:
        """The run is over: no question stays open in ``waiting.json``."""
        self.open.clear()
        self._publish()

    # -- numbers and fallbacks -----------------------------------------------------------------
    def _stats(self, data: dict[str, Any]) -> Event:
        usage = data.get("contextUsage") if isinstance(data.get("contextUsage"), dict) else {}
        tokens = data.get("tokens") if isinstance(data.get("tokens"), dict) else {}
        self.context_usage = {"tokens": usage.get("tokens"), "window": usage.get("contextWindow"),
                              "percent": usage.get("percent")}
        return {"type": "session_stats", "contextTokens": usage.get("tokens"),
                "contextWindow": usage.get("contextWindow"), "contextPercent": usage.get("percent"),
                "tokens": tokens.get("total") or 0, "cost": data.get("cost") or 0}

    def _next_model(self) -> str | None:
        tried = len(self.models_tried) - 1
        return self.fallbacks[tried] if tried < len(self.fallbacks) else None

    def _fall_back(self, retry: bool) -> list[Event]:
        """Move on to the next fallback model; ``retry``: prompt it to continue (pi does not retry itself)."""
        target, error = self._next_model(), self.failure
        assert target is not None
        self.models_tried[-1]["error"] = error
        self.models_tried.append({"model": target, "error": None})
        provider, _, model_id = target.partition("/")
        self.switching = target if retry else None
        self.failure = None
        self.send({"type": "set_model", "provider": provider, "modelId": model_id}, "model", (target, error))
        return [{"type": "model_fallback", "from": self.models_tried[-2]["model"], "to": target, "error": error}]

    def _switched(self, ok: bool, error: Any) -> list[Event]:
        target, self.switching = self.switching, None
        if not ok:
            self.models_tried[-1]["error"] = f"pi could not switch to it: {error}"
            self.failure = self.models_tried[-1]["error"]  # the next fallback, if any, is tried on the next tick
            return [{"type": "error", "message": f"pi could not switch to {self.models_tried[-1]['model']}: {error}"}]
        if target is not None:
            self.starting = True
            failed = self.models_tried[-2]["error"]
            self.send({"type": "prompt", "message": CONTINUE.format(error=failed, model=target)}, "retry")
        return []

    def error_end(self) -> tuple[str, str] | None:
        """pi's own error end is in its stream's events (the tally reads it): none here."""
        return None

    def totals(self) -> dict[str, Any]:
        return {}  # pi's cost is the sum of its events

    def structured(self) -> Any:
        return None  # pi's reply is text; output_schema reads it

    def record(self) -> dict[str, Any]:
        """The result.json fields of the conversation."""
        fields: dict[str, Any] = {"conversation": self.conversation, "questions": self.questions}
        if self.fallbacks:
            fields["modelsTried"] = self.models_tried
        if self.context_usage is not None:
            fields["contextUsage"] = self.context_usage
        return fields
