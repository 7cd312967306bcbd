"""Talking to a run: a steer, a follow-up, an answer to the child's question, a decision on an approval.

Every word goes through the run directory (``child.inbox``): a message posted in its ``inbox/``, which the run's
supervisor relays to pi, and ``waiting.json``, where the supervisor lists the questions the child waits on. So
any process that sees the folder talks to a run the same way: the kernel that started it, another kernel, a
shell (``nbsubagents answer``), the notebook of a run on a Dask worker, as long as it can read the run's key in
the person's state folder (``child.keys``): the child writes in the same folder, and only signed words count.

A follow-up to a run that has ended is no message: it starts a new run that resumes the ended one's session
(``resume=``, so its record says ``resumed_from`` and its registry row ``resumed_from``). Starting a run is the
faces' (``api.start``, lent as ``edge.start``): this module is below them, and ``Run``'s methods
are its callers.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from .._child import harnesses, inbox
from .._child.artifacts import RunPaths, read_json
from .._config import NbSubagentsError
from .._child.record import load
from .edge import edge
from .spec import options

if TYPE_CHECKING:
    from .handle import Run

__all__ = ["steer", "follow_up", "answer", "approve", "questions", "describe", "how_to_answer", "CONFIRM_WORDS"]

# What a yes/no question (a confirm: an approval) takes besides True and False, in any case.
CONFIRM_WORDS = {"allow": True, "yes": True, "deny": False, "no": False}
# The options a follow-up of an ended run keeps (call option -> meta.json key); the rest come from its preset
# and the settings again, as for any resume. Only options the task schema has are passed.
CARRIED = {"model": "requested_model", "cwd": "cwd", "name": "name", "timeout": "timeout", "ask": "ask",
           "approval": "approval", "fallback_models": "fallback_models", "harness": "harness",
           "project_config": "project_config"}

# -- saying something ---------------------------------------------------------------------------------------------
def steer(paths: RunPaths, text: str) -> dict[str, Any]:
    """Post a steer to a running (or queued) run: the child reads it after its current tool call. Returns the
    message as posted."""
    text = _text(paths, text, "steer", "run.steer('look at the tests first')")
    ended = _ended(paths)
    if ended:
        raise NbSubagentsError(f"Run {_id(paths)} has ended ({ended}): a steer reaches only a running run; "
                               "run.follow_up(text) continues its session as a new run")
    _refuse_while_running(paths, "steer")
    return _post_or_refuse(paths, "steer", text)


def follow_up(paths: RunPaths, text: str, **start_options: Any) -> Run | None:
    """A follow-up: posted to a running run (the child reads it after its current turn; returns None), or, for a
    run that has ended, a new run that resumes its session with ``text`` as its task (returned; started in the
    background through the registered starter with ``start_options``)."""
    text = _text(paths, text, "follow-up", "run.follow_up('now write the summary to NOTES.md')")
    if not _ended(paths):
        _refuse_while_running(paths, "follow_up")
    if not _ended(paths) and _post(paths, "follow_up", text) is not None:
        return None
    return _resume(paths, text, start_options)


def answer(paths: RunPaths, value: Any = None, question: str | None = None) -> dict[str, Any]:
    """Answer an open question of a running run: ``question`` (its id or a unique prefix of it), else the oldest
    open one. ``value`` must suit the question: text for an input or editor, one of the options (its text, or its
    number counted from 1) for a select, True/False or allow/yes/deny/no for a confirm; None is "no answer" to
    any. Returns the question with the answer posted as ``answer``."""
    asked = _question(paths, question, "answer")
    value = _checked(paths, asked, value)
    _post_or_refuse(paths, "answer", question=asked, value=value)
    return {**asked, "answer": value}


def approve(paths: RunPaths, allow: bool = True, question: str | None = None) -> dict[str, Any]:
    """Allow (or deny, ``allow=False``) an approval the run waits on: ``question``, else its oldest open yes/no
    question. Returns the question with the decision as ``answer``."""
    if not isinstance(allow, bool):
        raise NbSubagentsError(f"allow must be True (allow) or False (deny), got {allow!r}")
    asked = _question(paths, question, "approval")
    if asked.get("method") != "confirm":
        raise NbSubagentsError(f"Question {asked['id']} of run {_id(paths)} is no yes/no question ({describe(asked)}): "
                               "answer it with run.answer(...)")
    _post_or_refuse(paths, "answer", question=asked, value=allow)
    return {**asked, "answer": allow}


def questions(paths: RunPaths) -> list[dict[str, Any]]:
    """The questions the run waits on, oldest first: those of its ``waiting.json`` that no posted answer (not yet
    taken by the supervisor) settles, so two answers in a row answer two questions."""
    listed = inbox.waiting(paths.dir)
    if not listed:
        return []
    answered = _posted_answers(paths)
    return [q for q in listed if q.get("id") not in answered]


# -- words --------------------------------------------------------------------------------------------------------
def describe(question: dict[str, Any]) -> str:
    """A question on one line: its title, its message and, for a choice, the options numbered from 1."""
    words = " ".join(str(question.get("title") or "").split())
    message = " ".join(str(question.get("message") or "").split())
    if message and message != words:
        words = f"{words}: {message}" if words else message
    choices = question.get("options") or []
    if question.get("method") == "select" and choices:
        words += " [" + " | ".join(f"{i} {c}" for i, c in enumerate(choices, start=1)) + "]"
    return words or f"(a {question.get('method') or 'question'} without words)"


def how_to_answer(run_id: str, question: dict[str, Any]) -> str:
    """The shell command that answers ``question``."""
    if question.get("method") == "confirm":
        return f"nbsubagents approve {run_id} allow|deny"
    return f"nbsubagents answer {run_id} {'CHOICE' if question.get('method') == 'select' else 'TEXT'}"


# -- internals ----------------------------------------------------------------------------------------------------
def _id(paths: RunPaths) -> str:
    return paths.dir.name


def _refuse_while_running(paths: RunPaths, option: str) -> None:
    """A message the run's harness cannot take while it runs is an error naming both (a pi run takes any)."""
    harness = getattr(load(paths.dir), "harness", None)
    why = harnesses.get(harness).REFUSES.get(option) if isinstance(harness, str) and harnesses.known(harness) else None
    if why:
        raise NbSubagentsError(f"Run {_id(paths)} runs under the {harness} harness, which cannot take a {option} "
                               f"while it runs: {why}")


def _ended(paths: RunPaths) -> str | None:
    """The status of a run that has ended (its result.json), else None."""
    result = read_json(paths.result)
    return (result.get("status") or "failed") if isinstance(result, dict) else None


def _text(paths: RunPaths, text: Any, what: str, example: str) -> str:
    if not isinstance(text, str) or not text.strip():
        raise NbSubagentsError(f"A {what} for run {_id(paths)} needs the words the child should read, e.g. "
                               f"{example}; got {text!r}")
    return text


def _post(paths: RunPaths, kind: str, text: str | None = None, **answer: Any) -> dict[str, Any] | None:
    """Post a message; None when the run ended as it was posted and its supervisor never took it (it is
    withdrawn: nobody would read it)."""
    try:
        message = inbox.post(paths.dir, kind, text, **answer)
    except PermissionError as exc:  # its key is gone: it ended meanwhile, or it is not the person's here
        if paths.result.exists():
            return None
        raise NbSubagentsError(str(exc)) from None
    if not paths.result.exists():
        return message
    folder = paths.dir / inbox.INBOX
    for name in os.listdir(folder):
        if read_json(folder / name) == message:
            try:
                os.unlink(folder / name)
            except FileNotFoundError:
                return message  # taken after all
            return None
    return message


def _post_or_refuse(paths: RunPaths, kind: str, text: str | None = None, **answer: Any) -> dict[str, Any]:
    message = _post(paths, kind, text, **answer)
    if message is None:
        words = "steer" if kind == "steer" else "answer"
        raise NbSubagentsError(f"Run {_id(paths)} ended ({_ended(paths)}) before the {words} reached it")
    return message


def _posted_answers(paths: RunPaths) -> set[str]:
    """The question ids of the person's answers posted and not yet taken by the supervisor."""
    return {m.get("requestId") for m in inbox.posted(paths.dir) if m.get("kind") == "answer"}


def _question(paths: RunPaths, chosen: str | None, what: str) -> dict[str, Any]:
    """The open question an answer (``what``: "answer" or "approval") goes to."""
    ended = _ended(paths)
    if ended:
        raise NbSubagentsError(f"Run {_id(paths)} has ended ({ended}): it waits for no {what} any more")
    open_ = questions(paths)
    if chosen is None:
        fitting = [q for q in open_ if what == "answer" or q.get("method") == "confirm"]
        if fitting:
            return fitting[0]
        if open_:  # an approval asked of a run that waits on another kind of question
            raise NbSubagentsError(f"Run {_id(paths)} is not waiting for an approval: it asks "
                                   f"{describe(open_[0])} (answer that with run.answer(...))")
        raise NbSubagentsError(f"Run {_id(paths)} is not waiting for an {what}: no question is open "
                               "(run.questions lists the open ones; run.wait_for_question() waits for the next)")
    if not isinstance(chosen, str) or not chosen.strip():
        raise NbSubagentsError(f"question must be the id of an open question of run {_id(paths)}, got {chosen!r}")
    key = chosen.strip()
    exact = [q for q in open_ if q.get("id") == key]
    found = exact or [q for q in open_ if str(q.get("id") or "").startswith(key)]
    if len(found) == 1:
        return found[0]
    listing = "; ".join(f"{q.get('id')} ({describe(q)})" for q in open_)
    if found:
        raise NbSubagentsError(f"Question id {key!r} of run {_id(paths)} is ambiguous: it starts {listing}. "
                               "Give more characters.")
    raise NbSubagentsError(f"Run {_id(paths)} has no open question {key!r}: "
                           + (f"its open ones are {listing}" if open_ else
                              "none is open (answered, timed out, or never asked)"))


def _checked(paths: RunPaths, question: dict[str, Any], value: Any) -> Any:
    """The value to post for ``question``: None (no answer) for any; True/False (or allow/yes, deny/no in any case)
    for a confirm; one of the options for a select (its text, or its number counted from 1); text for the rest."""
    if value is None:
        return None
    method = question.get("method")
    where = f"Question {question.get('id')} of run {_id(paths)} ({describe(question)})"
    if method == "confirm":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in CONFIRM_WORDS:
            return CONFIRM_WORDS[value.strip().lower()]
        raise NbSubagentsError(f"{where} asks yes or no: answer True, 'allow' or 'yes' to allow, False, 'deny' or "
                               f"'no' to deny (None: no answer); got {value!r}")
    if method == "select":
        choices = [str(c) for c in question.get("options") or []]
        if isinstance(value, str):
            if value in choices:
                return value
            folded = [c for c in choices if c.strip().lower() == value.strip().lower()]
            if len(folded) == 1:
                return folded[0]
        number = value if isinstance(value, int) and not isinstance(value, bool) else (
            int(value.strip()) if isinstance(value, str) and value.strip().isdigit() else None)
        if number is not None and 1 <= number <= len(choices):
            return choices[number - 1]
        raise NbSubagentsError(f"{where} takes one of its options, by its text or its number from 1 (None: no "
                               f"answer); got {value!r}")
    if not isinstance(value, str):
        raise NbSubagentsError(f"{where} takes text (None: no answer), got {value!r}")
    if not value.strip():
        raise NbSubagentsError(f"{where} takes text: give the answer's words, or None for no answer; got {value!r}")
    return value


def _resume(paths: RunPaths, text: str, start_options: dict[str, Any]) -> Run:
    """The new run that continues an ended one's session with ``text`` as its task."""
    if edge.start is None:
        raise NbSubagentsError(f"Run {_id(paths)} has ended: a follow-up starts a new run, which needs "
                               "nbsubagents' public API (import nbsubagents; nbsubagents.follow_up(...))")
    record = load(paths.dir)
    if record is None or not record.preset:
        raise NbSubagentsError(f"Run {_id(paths)} has ended and names no preset in its meta.json: it cannot be "
                               "continued")
    known = {o.name for o in options("call")}
    carried = {name: getattr(record, field) for name, field in CARRIED.items()
               if name in known and getattr(record, field) is not None}
    return edge.start(record.preset, text, resume=_id(paths), **{**carried, **start_options})
