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
