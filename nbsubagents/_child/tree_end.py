"""A run's cancel request with its reason, and the end of a run that delegated (issue 58): its sub-runs first.

A cancel request (``cancel.json``) may say why: ``reason`` and ``stopReason``. Two reasons are known: the tree's
budget was spent (``tree_budget:<kind>``: the run ends ``failed`` with the tree's message, as a budget of its own
would end it) and the parent ended (``parent_ended``: ``aborted``, "cancelled: its parent run ... ended"). Any other
request is the plain cancel it always was. The file is in the run's folder, which its child may write: a reason
changes only the words of that run's own end.

``settle_children``: before a delegating run's supervisor ends what is left of its run, it asks each of its
sub-runs still going (the registry's rows whose ``parent`` it is) to stop with the reason, and waits for their
results: they settle their own sub-runs the same way first, so a tree ends from its leaves up, every run saying why.
Standard library only: the supervisor imports it.
"""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

from .artifacts import RunPaths, atomic_write_json, now_iso, read_json
from .text import clip

# The delegate tool server (``_lifecycle.delegation_server``): its name (Claude Code calls its tool
# mcp__delegate__delegate), the tools it serves, and the variable holding its whole configuration (set by the kernel)
SERVER = "delegate"
TOOLS = ("delegate", "delegate_wait", "delegate_result")
ENV = "NBSUBAGENTS_DELEGATE"
CANCEL_FILE = "cancel.json"
TREE_BUDGET = "tree_budget:"
PARENT_ENDED = "parent_ended"
CHILDREN_WAIT = 90.0  # seconds a parent waits for its sub-runs to end before its leftovers are killed


def request(run_dir: Path, reason: str | None = None, stop_reason: str | None = None) -> None:
    """Ask the run in ``run_dir`` to stop; the first request's reason stands (a later one adds nothing)."""
    path = Path(run_dir) / CANCEL_FILE
    if path.exists():
        return
    data = {"requestedAt": now_iso(), "pid": os.getpid()}
    if reason:
        data.update(reason=reason, stopReason=stop_reason)
    atomic_write_json(path, data)


def verdict(run_dir: Path) -> tuple[str, str, str]:
    """``(status, message, stopReason)`` of a run whose cancel was asked, as its request says."""
    data = read_json(Path(run_dir) / CANCEL_FILE) or {}
    reason, word = data.get("reason"), data.get("stopReason")
    if isinstance(reason, str) and isinstance(word, str) and word.startswith(TREE_BUDGET):
        return "failed", clip(reason, 400), word
    if isinstance(reason, str) and word == PARENT_ENDED:
        return "aborted", f"cancelled: {clip(reason, 400)}", "cancelled"
    return "aborted", "cancelled", "cancelled"


def _children(paths: RunPaths, run_id: str) -> list[Path]:
    db = paths.dir.parent.parent / "registry.sqlite"
    if not run_id or not db.exists():
        return []
    try:
        conn = sqlite3.connect(db, timeout=10)  # read only, but not mode=ro: that cannot open a WAL file alone
        try:
            rows = conn.execute("SELECT run_dir FROM runs WHERE parent = ?", (run_id,)).fetchall()
        finally:
            conn.close()
    except sqlite3.Error:
        return []
    return [Path(row[0]) for row in rows if isinstance(row[0], str) and not (Path(row[0]) / "result.json").exists()]


def settle_children(paths: RunPaths, run_id: str, stop_reason: tuple[str, str] | None, stop_word: str | None,
                    wait: float = CHILDREN_WAIT) -> list[Path]:
    """Stop the sub-runs of ``run_id`` still going, with the reason its own end gives, and wait (up to ``wait`` s)
    for their results; returns their folders. ``stop_reason``/``stop_word``: how this run was stopped, if it was."""
    children = _children(paths, run_id)
    if not children:
        return []
    if stop_word and stop_word.startswith(TREE_BUDGET) and stop_reason is not None:
        reason, word = stop_reason[1], stop_word  # the tree's budget: every run under it says the same
    else:
        how = f" ({stop_reason[0]}: {stop_reason[1]})" if stop_reason is not None else ""
        reason, word = f"its parent run {run_id} ended{how}", PARENT_ENDED
    for child in children:
        try:
            request(child, reason, word)
        except OSError:
            pass
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline and any(not (c / "result.json").exists() for c in children):
        time.sleep(0.1)
    return children

