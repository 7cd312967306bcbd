"""What is said to a running child, through its run directory, and what it is waiting for.

A person's words to a run (a steer, a follow-up, an answer to a question or a decision on an approval) are
files in the run's ``inbox/`` folder: any process on any machine that sees the run directory can post one, as
a cancel is asked with ``cancel.json``. The supervisor takes them in the order they were posted and relays
them to pi. The questions the child is waiting on are in ``waiting.json``, which the supervisor writes while a
question is open and removes once it is answered.

The child can write in the same folder, so both are signed with the run's key (``child/keys.py``): a message
posted here carries the MAC that only a holder of the key can make (an answer also the digest of the question
it answers), and ``waiting`` lists only the questions of a ``waiting.json`` the supervisor signed.

Standard library only: the supervisor imports it.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from . import keys
from .artifacts import atomic_write_json, now_iso, read_json

from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from typing import Any

INBOX = "inbox"
WAITING = "waiting.json"
KINDS = ("steer", "follow_up", "answer")


def post(run_dir: Path, kind: str, text: str | None = None, *, request_id: str | None = None,
         value: Any = None, question: dict[str, Any] | None = None) -> dict[str, Any]:
    """Leave a message for the run in ``run_dir``: a ``steer`` or ``follow_up`` (``text``), or an ``answer`` to
    question ``request_id`` (``value``: the text, the option chosen, True/False for a confirmation, None for
    no answer), bound to the ``question`` as the person saw it (default: as ``waiting.json`` says). Signed with
    the run's key (PermissionError when there is none here) and written atomically; returns the message."""
    if kind not in KINDS:
        raise ValueError(f"unknown message kind {kind!r}: expected one of {', '.join(KINDS)}")
    key = keys.load(run_dir.name)
    if key is None:
        raise PermissionError(f"Run {run_dir.name} has no key in {keys.folder()}: only the person who started it, "
                              "on a machine that shares that folder, can speak to it, and only until it ends")
    message: dict[str, Any] = {"kind": kind, "at": now_iso(), "from": f"{os.uname().nodename}:{os.getpid()}"}
    if kind == "answer":
        request_id = request_id or (question or {}).get("id")
        question = question or next((q for q in waiting(run_dir) if q.get("id") == request_id), None)
        message.update(requestId=request_id, value=value, question=keys.digest(question) if question else None)
    else:
        message["text"] = text or ""
    message = keys.sign(key, "message", message)
    folder = run_dir / INBOX
    folder.mkdir(exist_ok=True)
    # The name sorts by posting time; pid and random bytes keep posts of the same nanosecond apart.
    name = f"{time.time_ns():020d}-{os.getpid()}-{os.urandom(3).hex()}.json"
    atomic_write_json(folder / name, message)
    return message


def take(run_dir: Path) -> list[dict[str, Any]]:
    """The messages posted since the last take, oldest first, signed or not (the supervisor checks); each is
    removed from the inbox as it is read (an unreadable one is dropped, never read twice)."""
    folder = run_dir / INBOX
    try:
        names = sorted(n for n in os.listdir(folder) if n.endswith(".json") and not n.startswith("."))
    except OSError:
        return []
    out = []
    for name in names:
        path = folder / name
        message = read_json(path)
        try:
            os.unlink(path)
        except OSError:
            continue  # another reader took it
        if isinstance(message, dict) and message.get("kind") in KINDS:
            out.append(message)
    return out


def posted(run_dir: Path) -> list[dict[str, Any]]:
    """The person's messages (those signed with the run's key) not taken yet."""
    key = keys.load(run_dir.name)
    try:
        names = sorted(n for n in os.listdir(run_dir / INBOX) if n.endswith(".json") and not n.startswith("."))
    except OSError:
        return []
    return [m for m in (read_json(run_dir / INBOX / n) for n in names) if keys.verified(key, "message", m)]


def waiting(run_dir: Path) -> list[dict[str, Any]]:
    """The questions the run is waiting on (the ``question`` events not yet answered), oldest first: none unless
    its supervisor signed ``waiting.json`` (the child could write one)."""
    data = read_json(run_dir / WAITING)
    if not keys.verified(keys.load(run_dir.name), "waiting", data):
        return []
    questions = data.get("questions")
    return [q for q in questions if isinstance(q, dict)] if isinstance(questions, list) else []


def is_waiting(run_dir: Path) -> bool:
    """Whether the run has a question open: a ``waiting.json`` its supervisor signed (a stat when there is none)."""
    return (run_dir / WAITING).exists() and bool(waiting(run_dir))


def set_waiting(run_dir: Path, questions: list[dict[str, Any]], key: bytes | None = None) -> None:
    """Say which questions are open (the supervisor's call, with the run's ``key``: None reads it here):
    ``waiting.json`` while any is, none after."""
    path = run_dir / WAITING
    if questions:
        key = key or keys.load(run_dir.name)
        data = {"questions": questions}
        atomic_write_json(path, keys.sign(key, "waiting", data) if key else data, sync=False)
        return
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def pending(run_dir: Path) -> bool:
    """Whether anything was posted that the supervisor has not taken yet."""
    try:
        return any(n.endswith(".json") and not n.startswith(".") for n in os.listdir(run_dir / INBOX))
    except OSError:
        return False

