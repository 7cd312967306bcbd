"""Which of a run's tool calls started which of its sub-runs (issue 58): reports and traces nest each sub-run under
the delegate call that started it.

The call that started a sub-run is found, in this order:

1. the sub-run's record names it (``tool_call``: the call's id, when its harness gave the delegate server one: pi
   through the package's bridge, Claude Code);
2. else the call's result names the run: ``details.run_id`` of a ``delegate`` result (pi keeps a result's details);
3. else the first ``delegate`` call not yet matched whose arguments (preset, task) are the sub-run's own: what Codex
   keeps of a call (its results keep the text only, and a foreground call's text is the answer);
4. else the first call left, in order (the sub-runs oldest first, as the registry gives them).

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


def calls_of(events: Iterable[Mapping[str, Any]], children: Iterable[tuple[Any, ...]]) -> dict[Any, list[str]]:
    """The sub-runs each ``delegate`` call of a run started: tool call id -> run ids, oldest first. ``events``: the
    run's events; ``children``: its sub-runs' ``(run_id, preset, task, tool_call)`` (the record's fields; the last
    may be left out), oldest first. A sub-run no call is found for is under the key ``None``."""
    calls: dict[Any, Mapping[str, Any]] = {}
    results: dict[Any, Mapping[str, Any]] = {}
    for event in events:
        if event.get("type") == "tool_call" and is_delegate(event.get("name")) and event.get("id") not in calls:
            calls[event.get("id")] = event.get("args") if isinstance(event.get("args"), Mapping) else {}
        elif event.get("type") == "tool_result" and event.get("id") in calls:
            results[event.get("id")] = event
    children = list(children)
    kids = [(k[0], k[1], k[2]) for k in children]
    named_by = {k[0]: k[3] for k in children if len(k) > 3 and k[3] is not None}
    found: dict[Any, list[str]] = {}
    matched: set[str] = set()
    free = [call for call in calls if not _refused(results.get(call))]
    for run_id, _, _ in kids:  # 1. its record names the call
        call = named_by.get(run_id)
        if call in free:
            found.setdefault(call, []).append(run_id)
            matched.add(run_id)
            free.remove(call)
    for call in list(free):  # 2. the result names the run
        details = (results.get(call) or {}).get("details")
        named = details.get("run_id") if isinstance(details, Mapping) else None
        if isinstance(named, str) and named:  # that run's call, and no other's
            free.remove(call)
            if any(named == run_id for run_id, _, _ in kids) and named not in matched:
                found.setdefault(call, []).append(named)
                matched.add(named)
    for run_id, preset, task in kids:  # 3. the arguments are the run's
        if run_id in matched:
            continue
        for call in free:
            args = calls[call]
            if args.get("preset") == preset and str(args.get("task") or "").strip() == str(task or "").strip():
                found.setdefault(call, []).append(run_id)
                matched.add(run_id)
                free.remove(call)
                break
    for run_id, _, _ in kids:  # 4. in order
        if run_id not in matched:
            call = free.pop(0) if free else None
            found.setdefault(call, []).append(run_id)
            matched.add(run_id)
    return found
