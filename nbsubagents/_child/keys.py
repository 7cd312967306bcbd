"""Each run's secret, which tells the person's words from anything else written in the run's folder.

The child can write in its run folder, so a message in ``inbox/`` (or a ``waiting.json``) proves nothing by being
there. When a run is prepared it gets 32 random bytes, kept in the person's private state folder
(``$XDG_STATE_HOME/nbsubagents/keys``, else ``~/.local/state/nbsubagents/keys``; folder 0700, file 0600, named by
the run's id), never in the run folder, ``meta.json``, argv, a log or the child's environment. What the person
posts carries an HMAC-SHA256 of its canonical JSON made with it (``sign``); the supervisor, which read the key
before the child started, delivers only what verifies (``verified``), and signs ``waiting.json`` the same way so
that the faces show only the questions it wrote. The key is deleted once the run's result is written (``forget``):
an ended run takes no message.

Without a sandbox the child runs as the person and could read this folder; the sandbox of ``isolation="worktree"``
(Linux, ``contained: true``) covers it with an empty read-only folder.

Standard library only: the supervisor imports it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from pathlib import Path

from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from typing import Any

KEY_BYTES = 32
MAC = "mac"  # the field a signed object carries its MAC in


def folder() -> Path:
    """The person's key folder (the sandbox hides ``…/nbsubagents`` from the child)."""
    state = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    return Path(state) / "nbsubagents" / "keys"


def _path(run_id: str) -> Path:
    if not run_id or "/" in run_id or run_id.startswith("."):
        raise ValueError(f"a run id names one run folder (like 20260101-120000-a1b2c3), got {run_id!r}")
    return folder() / run_id


def create(run_id: str, key: bytes | None = None) -> bytes:
    """Make (or, on a Dask worker, keep the given) key of run ``run_id``; returns it. An existing key stays."""
    path = _path(run_id)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(path.parent, 0o700)  # made earlier by someone else's umask: still the person's alone
    key = os.urandom(KEY_BYTES) if key is None else key
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return load(run_id) or key
    with os.fdopen(fd, "wb") as out:
        out.write(key)
    return key


def load(run_id: str) -> bytes | None:
    """The key of run ``run_id``; None when there is none here (the run ended, or was made elsewhere)."""
    try:
        key = _path(run_id).read_bytes()
    except (OSError, ValueError):
        return None
    return key if len(key) == KEY_BYTES else None


def forget(run_id: str) -> None:
    """Delete the key of run ``run_id`` (its result is written: nothing more is said to it)."""
    try:
        os.unlink(_path(run_id))
    except (OSError, ValueError):
        pass


def _mac(key: bytes, purpose: str, obj: dict[str, Any]) -> str:
    """The MAC of ``obj`` (but its own ``mac``) as ``purpose``: a signed waiting file is no signed message."""
    body = json.dumps({k: v for k, v in obj.items() if k != MAC}, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=True)
    return hmac.new(key, f"{purpose}\n{body}".encode(), hashlib.sha256).hexdigest()


def sign(key: bytes, purpose: str, obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` with its MAC (``purpose``: what it is, ``message`` or ``waiting``)."""
    return {**obj, MAC: _mac(key, purpose, obj)}


def verified(key: bytes | None, purpose: str, obj: Any) -> bool:
    """Whether ``obj`` was signed as ``purpose`` with ``key`` (never without a key)."""
    mac = obj.get(MAC) if isinstance(obj, dict) else None
    return key is not None and isinstance(mac, str) and hmac.compare_digest(mac, _mac(key, purpose, obj))


def digest(question: dict[str, Any]) -> str:
    """What binds an answer to the question it was given to: a hash of its id, kind, words and options."""
    words = {k: question.get(k) for k in ("id", "method", "title", "message", "options")}
    return hashlib.sha256(json.dumps(words, sort_keys=True, ensure_ascii=True).encode()).hexdigest()
