"""The run browser's HTML (``browse()``), as functions of the registry's rows and a run: the list's lines, its column
header and status colours, and the selected run's header, output and events (their markup: _templates/browse.html).
No widgets and no state: ``browser.Browser`` sets what these return as its widgets' values.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from .. import _registry as registry
from .._child.artifacts import ACTIVE
from .._style import PALETTE, clip, duration, glyph, is_missing, plural, pydatetime, shorten
from .._templates import part
from .._views.masking import masker

if TYPE_CHECKING:
    import pandas

    from .._lifecycle.handle import Run

EVENT_ROWS = 400  # the last events a run's Events tab shows (run.events_frame() has all)


def local_time(value: Any, fmt: str = "%m-%d %H:%M:%S") -> str:
    """A registry time (ISO text or a pandas Timestamp) in this machine's time zone; "" when missing."""
    if is_missing(value):
        return ""
    try:
        if hasattr(value, "to_pydatetime"):
            value = pydatetime(value)
        elif isinstance(value, str):
            value = datetime.fromisoformat(value.replace("Z", "+00:00"))
        return value.astimezone().strftime(fmt)
    except (TypeError, ValueError):
        return str(value)


def list_labels(frame: pandas.DataFrame) -> list[tuple[str, str]]:
    """One aligned line per run for the list: icon, status, name, start, took, task, id."""
    if frame is None or not len(frame):
        return []
    masks = masker()  # names and tasks masked before shorten() cuts a secret short
    rows = []
    for row in frame.itertuples(index=False):
        status = str(row.status)
        if status in ACTIVE:
            took = "running…"
        else:
            took = "" if is_missing(row.duration_s) else duration(float(row.duration_s))
        name = shorten(masks.text(str(row.name)) if not is_missing(row.name) else row.run_id, 24)
        task = shorten("" if is_missing(row.task) else masks.text(str(row.task)), 50)
        rows.append((glyph(status), status, name, local_time(row.started), took, task, str(row.run_id)))
    width = max(len(r[2]) for r in rows)
    return [(f"{icon} {status:<9}  {name:<{width}}  {started:<14}  {took:>8}  {task:<50}  {run_id}", run_id)
            for icon, status, name, started, took, task, run_id in rows]


def list_header(frame: pandas.DataFrame) -> str:
    """Column names over the run list, aligned with ``list_labels`` (both monospace)."""
    if frame is None or not len(frame):
        return ""
    width = max(len(shorten(n if not is_missing(n) else r, 24)) for n, r in zip(frame["name"], frame["run_id"]))
    text = f"  {'status':<9}  {'name':<{width}}  {'started':<14}  {'took':>8}  {'task':<50}  run id"
    return part("browse.html", "columns", text=text)


def list_colours(frame: pandas.DataFrame) -> str:
    """Each listed run in its status colour: one CSS rule per option of the list (the palette's variable)."""
    if frame is None or not len(frame):
        return ""
    rules = [f".nbsubagents-browse-list option:nth-child({i}){{color:var(--nbsubagents-{status})}}"
             for i, status in enumerate(frame["status"].astype(str), start=1) if status in PALETTE]
    return "<style>" + "".join(rules) + "</style>"


def header_html(row: dict[str, Any], run: Run, status: str, tally: Any) -> str:
    result = run.result or {}
    usage = result.get("usage") or {}
    calls = row.get("tool_calls") if row.get("tool_calls") is not None else result.get("toolCalls", tally.tool_calls)
    tokens = row.get("total_tokens") if row.get("total_tokens") is not None else usage.get("totalTokens", tally.tokens)
    cost = row.get("cost") if row.get("cost") is not None else usage.get("cost", tally.cost)
    if row.get("duration") is not None:
        took = duration(float(row["duration"]))
    elif result.get("durationSeconds") is not None:
        took = duration(float(result["durationSeconds"]))
    elif status in ACTIVE and (row.get("started_at") or row.get("created_at")):
        age = registry.age(row.get("started_at") or row.get("created_at"))
        took = f"{duration(age)}…" if age != float("inf") else ""
    else:
        took = ""
    parts = [f"preset {row.get('preset') or '?'}", row.get("model") or run.model or "no model",
             plural(int(calls or 0), "tool call"), f"{int(tokens or 0):,} tokens", f"${float(cost or 0):.4f}"]
    if took:
        parts.append(took)
    started = local_time(row.get("started_at") or row.get("created_at"), "%Y-%m-%d %H:%M:%S")
    ended = local_time(row.get("ended_at"), "%H:%M:%S")
    return part("browse.html", "header", status=status, name=row.get("name") or run.name, facts=parts,
                run_id=row["run_id"], when=f"started {started}" + (f" · ended {ended}" if ended else ""),
                mode=row.get("mode"), task=shorten(row.get("task") or run.task, 200))


def output_html(row: dict[str, Any], run: Run, status: str) -> str:
    error = run.error or row.get("error_message")
    return part("browse.html", "output", output=(run.output or row.get("final_text") or "").strip(),
                error=error if status != "completed" else "", active=status in ACTIVE)


def events_html(run: Run, events: list[dict[str, Any]], mask: Any = None) -> str:
    if not events:
        return part("bits.html", "empty", text="(no events yet)")
    frame = run.events_frame()
    rows = []
    for item in frame.tail(EVENT_ROWS).itertuples(index=False):
        failed = (not is_missing(item.is_error) and bool(item.is_error)) or \
            (not is_missing(item.kind) and str(item.kind) in ("error", "failed"))
        text = "" if is_missing(item.text) else str(item.text)
        text = mask(text) if mask is not None else text  # before clip() cuts a secret short
        rows.append((failed, "" if is_missing(item.seq) else str(int(item.seq)), local_time(item.time, "%H:%M:%S"),
                     str(item.type), "" if is_missing(item.tool) else str(item.tool), clip(text, 600)))
    return part("browse.html", "events", rows=rows, total=len(frame), limit=EVENT_ROWS)
