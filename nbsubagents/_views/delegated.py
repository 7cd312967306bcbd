"""Which of a run's tool calls started which of its sub-runs (issue 58): reports and traces nest each sub-run under
the delegate call that started it.

A sub-run's record knows its parent, not the call. The call is found, in this order:

1. the call's result names the run: ``details.run_id`` of a ``delegate`` result (pi keeps a tool result's details);
2. else the first ``delegate`` call not yet matched whose arguments (preset, task) are the sub-run's own: what Claude
   Code and Codex keep of a call (their results keep the text only), and a foreground call's text is the answer;
3. else the first call left, in order (the sub-runs oldest first, as the registry gives them).

A refused call (its result says ``Refused:`` or carries ``refused``) started nothing and matches no run. What a run
wrote in its events is only matched against, never trusted for more: a wrong match misplaces a line of a report.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

__all__ = ["DELEGATE", "is_delegate", "calls_of"]

DELEGATE = "delegate"  # the tool's name (Claude Code and Codex prefix it with its server's: mcp__delegate__delegate)


def is_delegate(name: Any) -> bool:
    return isinstance(name, str) and (name == DELEGATE or name.endswith("__" + DELEGATE))


def _refused(result: Mapping[str, Any] | None) -> bool:
    if result is None:
        return False
    details = result.get("details")
    return (isinstance(details, Mapping) and "refused" in details) or str(result.get("text") or "").startswith(
        "Refused:")


def calls_of(events: Iterable[Mapping[str, Any]], children: Iterable[tuple[str, str | None, str | None]]
             ) -> dict[Any, list[str]]:
    """The sub-runs each ``delegate`` call of a run started: tool call id -> run ids, oldest first. ``events``: the
    run's events; ``children``: its sub-runs' ``(run_id, preset, task)``, oldest first. A sub-run no call is found
    for is under the key ``None``."""
    calls: dict[Any, Mapping[str, Any]] = {}
    results: dict[Any, Mapping[str, Any]] = {}
    for event in events:
        if event.get("type") == "tool_call" and is_delegate(event.get("name")) and event.get("id") not in calls:
            calls[event.get("id")] = event.get("args") if isinstance(event.get("args"), Mapping) else {}
        elif event.get("type") == "tool_result" and event.get("id") in calls:
            results[event.get("id")] = event
    kids = list(children)
    found: dict[Any, list[str]] = {}
    matched: set[str] = set()
    free = [call for call in calls if not _refused(results.get(call))]
    for call in list(free):  # 1. the result names the run
        details = (results.get(call) or {}).get("details")
        named = details.get("run_id") if isinstance(details, Mapping) else None
        if isinstance(named, str) and named:  # that run's call, and no other's
            free.remove(call)
            if any(named == run_id for run_id, _, _ in kids) and named not in matched:
                found.setdefault(call, []).append(named)
                matched.add(named)
    for run_id, preset, task in kids:  # 2. the arguments are the run's
        if run_id in matched:
            continue
        for call in free:
            args = calls[call]
            if args.get("preset") == preset and str(args.get("task") or "").strip() == str(task or "").strip():
                found.setdefault(call, []).append(run_id)
                matched.add(run_id)
                free.remove(call)
                break
    for run_id, _, _ in kids:  # 3. in order
        if run_id not in matched:
            call = free.pop(0) if free else None
            found.setdefault(call, []).append(run_id)
            matched.add(run_id)
    return found
