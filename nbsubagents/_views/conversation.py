"""A run's conversation with the person: what they said, what the child asked and how it was answered.

The supervisor records the conversation as events (``user_message``, ``question``, ``answer``,
``model_fallback``, ``notice``, ``session_stats``; see ``child/inbox.py``); ``Conversation`` follows them
for a panel: the lines a panel and its static record show, in order with the tool calls (``line``), the
questions still open (``open_questions``, also from ``waiting.json``) and the context use of the latest
``session_stats`` (``context_words``).

The words are the transcript's (``you (steer, queued): …``, ``asks: …``, ``answer (person): …``, ``approval: Allow
bash? — ls: denied (policy)``, ``model fallback: a → b (429 …)``); a person's message also says when it was
sent, which a panel line (unlike a transcript line) does not carry otherwise.
"""

from __future__ import annotations

import time
from typing import Any

from .._child.artifacts import parse_iso
from .._child.formatter import ProgressLine, message_words
from .._child.text import clip

__all__ = ["CONVERSATION_EVENTS", "CONVERSATION_KINDS", "Conversation", "answer_words", "at_words", "question_text"]

# The events a panel words itself (the formatter's line for them, if any, is not used: it has no time of day).
CONVERSATION_EVENTS = frozenset({"user_message", "question", "answer", "model_fallback", "notice", "session_stats"})
# The kinds of line they become, for styling (``nbsubagents-user`` ...).
CONVERSATION_KINDS = ("user", "question", "answer", "fallback", "notice")
BY_WORDS = {"person": "person", "timeout": "timeout", "policy": "policy"}
TEXT_LIMIT = 2000  # a message or question kept in a line (the events keep all of it)
# The start of the reason pi_extensions/approve.js gives the model for a call that was not allowed (it cannot tell
# who said no: the answer event can), and who said no in a line's words.
DENIED = "Denied by the person in the notebook"
DENIED_BY = {"person": "by the person asked", "timeout": "by the approval policy (no answer in time)",
             "policy": "by the approval policy (no answer in time)"}


def at_words(value: Any) -> str:
    """``14:02:11`` (local time) of an ISO time or Unix seconds; "" when there is none."""
    seconds = value if isinstance(value, (int, float)) and not isinstance(value, bool) else parse_iso(value)
    return time.strftime("%H:%M:%S", time.localtime(seconds)) if seconds is not None else ""


def question_text(question: dict[str, Any]) -> str:
    """``Which file? [a.md | b.md]``, or ``Allow bash? — ls -la`` (title, message, options): whole, never cut (what
    is approved is all of it)."""
    title = str(question.get("title") or question.get("message") or "(no question text)")
    message = question.get("message")
    text = title + (f" — {message}" if message and message != title else "")
    options = question.get("options")
    if isinstance(options, list) and options:
        text += " [" + " | ".join(str(o) for o in options) + "]"
    return text


def answer_words(question: dict[str, Any] | None, value: Any) -> str:
    """The answer as words: ``allowed``/``denied`` for an approval, ``no answer`` for none, else the text."""
    if question is not None and (question.get("approval") or question.get("method") == "confirm"):
        return "no answer" if value is None else "allowed" if value is True else "denied"
    return "no answer" if value is None or value == "" else clip(str(value), TEXT_LIMIT)


class Conversation:
    """The conversation of one run so far, from its events (``add``), and the words of each."""

    def __init__(self) -> None:
        self.questions: dict[str, dict[str, Any]] = {}  # question events by id, in the order asked
        self.answers: dict[str, dict[str, Any]] = {}    # answer events by question id
        self.messages: list[dict[str, Any]] = []        # the person's user_message events
        self.fallbacks: list[dict[str, Any]] = []
        self.stats: dict[str, Any] | None = None        # the latest session_stats event

    def add(self, event: dict[str, Any]) -> ProgressLine | None:
        """Take one conversation event; its line (None for one that shows no line, like session_stats)."""
        kind = event.get("type")
        if kind == "session_stats":
            self.stats = event
            return None
        if kind == "user_message":
            self.messages.append(event)
            said = message_words(event)
            stamp = at_words(event.get("at") or event.get("ts"))
            who = f"you ({said}, {stamp})" if stamp else f"you ({said})"
            return ProgressLine("user", f"{who}: {clip(str(event.get('text') or ''), TEXT_LIMIT)}")
        if kind == "question":
            qid = str(event.get("id"))
            self.questions[qid] = event
            if event.get("approval"):
                return ProgressLine("question", f"approval: {question_text(event)}")
            return ProgressLine("question", f"asks: {question_text(event)}")
        if kind == "answer":
            qid = str(event.get("id"))
            self.answers[qid] = event
            question = self.questions.get(qid)
            by = BY_WORDS.get(str(event.get("by")), str(event.get("by") or "person"))
            words = answer_words(question, event.get("value"))
            if question is not None and question.get("approval"):
                return ProgressLine("answer", f"approval: {question_text(question)}: {words} ({by})")
            return ProgressLine("answer", f"answer ({by}): {words}")
        if kind == "model_fallback":
            self.fallbacks.append(event)
            error = event.get("error")
            text = f"model fallback: {event.get('from') or '?'} → {event.get('to') or '?'}"
            return ProgressLine("fallback", text + (f" ({clip(str(error), 200)})" if error else ""))
        if kind == "notice":
            text = str(event.get("text") or "").strip()
            return ProgressLine("notice", text) if text else None
        return None

    @staticmethod
    def is_denial(event: dict[str, Any]) -> bool:
        """A tool call's result that says an approval was refused (not a step that failed)."""
        return bool(event.get("isError")) and str(event.get("text") or "").startswith(DENIED)

    def denied(self, line: ProgressLine | None) -> ProgressLine:
        """The line of a refused call: ``Command denied: rm -rf build — by the person asked`` (who said no is the
        latest approval answered no), not approve.js's reason for the model, which a line cuts short."""
        refusals = [a for qid, a in self.answers.items() if a.get("value") is not True
                    and (self.questions.get(qid) or {}).get("approval")]
        by = DENIED_BY.get(str(refusals[-1].get("by")), "") if refusals else ""
        head = line.text.partition(" — ")[0] if line is not None else "Tool call failed"
        head = head.replace(" failed", " denied", 1) if " failed" in head else f"{head} (denied)"
        return ProgressLine("failed", f"{head} — {by}" if by else head)

    def open_questions(self, waiting: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
        """The questions not answered yet, oldest first: asked in the events, or listed in ``waiting``
        (the run's signed ``waiting.json``, which may name one whose event is not read yet). A question listed
        there is shown in its words: the events are in the child's reach, the signed file is not."""
        listed = {str(q.get("id")): q for q in waiting or ()}
        out = [listed.pop(qid, q) for qid, q in self.questions.items() if qid not in self.answers]
        return out + [q for qid, q in listed.items() if qid not in self.answers]

    def context_words(self, result: dict[str, Any] | None = None) -> str | None:
        """``ctx 12%`` (or ``ctx 12,345 tokens`` without a window) from the latest session_stats, else from
        the result's ``contextUsage``; None when neither says."""
        stats = self.stats or {}
        percent, tokens = stats.get("contextPercent"), stats.get("contextTokens")
        window = stats.get("contextWindow")
        if not stats and result:
            usage = result.get("contextUsage") or {}
            percent, tokens, window = usage.get("percent"), usage.get("tokens"), usage.get("window")
        if not _number(percent) and _number(tokens) and _number(window) and window > 0:
            percent = 100.0 * tokens / window
        if _number(percent):
            return f"ctx {percent:.0f}%" if percent >= 1 or percent == 0 else f"ctx {percent:.1f}%"
        if _number(tokens):
            return f"ctx {int(tokens):,} tokens"
        return None


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
