"""Which runs of a sweep count: a run the infrastructure cut short says nothing about the agent.

A run is *excluded* from a sweep's scores, rates, durations and costs when it ended for a reason outside the
agent: it never started, pi could not start, the model provider failed or the connection to it dropped, its
supervisor or Dask worker was lost, its workspace could not be made, a step of the supervisor failed, or a person
cancelled it. Every other end (completed, a failed task, a timeout, a loop, a budget, a reply that does not match
its schema) is the agent's outcome and counts. ``retry_reason`` is the part of the exclusions that another
attempt may cure (not a person's cancel, nor a run that never started).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._lifecycle.settle import LOST, NOT_STARTED

# stopReason -> why a run with it is excluded (result.json's stopReason, the stop_reason column of runs()).
EXCLUDED: dict[str, str] = {
    "not_started": "never started",
    "spawn_error": "pi could not start",
    "provider_error": "the model provider failed",
    "no_reply": "no reply from the model (the connection dropped)",
    "interrupted": "its supervisor was lost",
    "worker_lost": "its Dask worker was lost",
    "isolation": "its workspace could not be made",
    "supervisor_error": "a step of the supervisor failed",
    "cancelled": "cancelled",
}
# The exclusions another attempt will not cure: a person's cancel; a run that never started (an unknown model, a
# sweep's spend cap: it failed before spending anything, and would again).
NOT_RETRIED = frozenset({"cancelled", "not_started"})


def excluded_reason(row: Mapping[str, Any]) -> str | None:
    """Why the run of ``row`` (a runs() or frame() row) is not scored, or None when it counts."""
    if row.get("status") in ("queued", "running"):
        return "not ended yet"
    return EXCLUDED.get(str(row.get("stop_reason") or ""))


def retry_reason(row: Mapping[str, Any]) -> str | None:
    """Why the run of ``row`` may be tried again (an infrastructure failure), or None."""
    reason = str(row.get("stop_reason") or "")
    return EXCLUDED[reason] if reason in EXCLUDED and reason not in NOT_RETRIED else None


def cut_short(row: Mapping[str, Any]) -> bool:
    """Whether the run of ``row`` was cut short by its launcher's death (or never started: the call or process
    that queued it went), not by itself nor by a person: an experiment's resume starts its cell again."""
    message = str(row.get("error_message") or "")
    return message.startswith(f"{NOT_STARTED}: ") or message.startswith(LOST)


def cancelled_by_person(row: Mapping[str, Any]) -> bool:
    """Whether a person cancelled the run of ``row`` (queued or running): final, for resume and ``retries``
    alike (``resume(rerun_cancelled=True)`` starts its cell again on purpose). A queued run a person cancelled
    says ``NOT_STARTED`` alone; one its launcher left says why after it (``cut_short``)."""
    return row.get("status") == "aborted" and row.get("stop_reason") == "cancelled" and not cut_short(row)
