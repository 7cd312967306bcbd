"""How a run ended, in its result's words, judged once its child is gone and no guard stopped it: its status and
error (semantic completion: pi exits 0 even when its provider failed), the one word of its ``stopReason``, and its
usage. What the supervisor saw goes in (its tally of the events, the harness's session, the child's exit); nothing
is written here.
"""

from __future__ import annotations

from .run_files import last_line, tail

from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any, Callable

    from .events import Tally
    from .harnesses import Session

# node's ENOBUFS on stdout: more than 2 GiB waited in its write queue (pi 0.73.1 without compact_updates.js wrote
# the whole message so far into every streaming update: a 100 KB tool argument was enough)
OUT_OF_BUFFER = ("it could not write its output stream (ENOBUFS: more than 2 GiB of it waited to be written). A very "
                 "large message streamed in small pieces does that on pi 0.73.1; pi 1.x does not (npm install "
                 "@earendil-works/pi-coding-agent), or ask for the content in smaller parts")


def judge(tally: Tally, session: Session, program: str, exit_code: int | None, stderr: Path,
          explain: Callable[[str], str | None] | None = None) -> tuple[str, str | None]:
    """(status, error) of a child that ran; ``exit_code`` is 0 for one the supervisor ended after its conversation.
    ``explain``: the harness's words for a failed child's stderr (its ``failure_words``; pi: a node too old for it)."""
    if tally.stop_reason == "error":
        return "failed", tally.error_message or "The model provider returned an error"
    if tally.stop_reason == "aborted":
        return "aborted", tally.error_message or "pi aborted the request"
    if exit_code != 0:
        text = tail(stderr)
        said = OUT_OF_BUFFER if "ENOBUFS" in text else (explain and explain(text)) or last_line(stderr)
        return "failed", f"{program} exited with code {exit_code}" + (f": {said}" if said else "")
    if tally.stop_reason is None:
        return "failed", (f"pi refused the task: {session.refused}" if session.refused
                          else f"{program} ended without a reply from the model")
    if not tally.final_text.strip() and not tally.tokens:
        return "failed", ("The model sent an empty reply and no token usage: the connection to the "
                          "model provider probably dropped")
    return "completed", None


def reason(word: str | None, status: str, spawn_error: str | None, tally: Tally) -> str | None:
    """Why the run ended, in one word: the guard's (``word``), else what pi said (``error`` is ``provider_error``)."""
    if word is not None:
        return word
    if spawn_error:
        return "spawn_error"
    pi = tally.stop_reason
    if pi == "error":
        return "provider_error"
    if status == "failed" and pi in (None, "stop"):
        return "no_reply" if pi is None else "exit_code"
    return pi


def usage(tally: Tally, session: Session, offline: bool = False) -> dict[str, Any]:
    """The run's usage from its events; the harness's native total cost (Claude's total_cost_usd) wins, but an
    ``offline`` run (on the scripted model) costs 0: nobody paid for it. (Turns
    are counted from the events alike for every harness: Claude's num_turns counts a turn it did not take
    when its --max-turns stops it; the result's ``harnessEnd`` keeps it.)"""
    found = tally.usage()
    totals = session.totals()
    if "cost" in totals:
        found["cost"] = round(float(totals["cost"]), 8)
    if offline:
        found["cost"] = 0
    return found
