"""Looking inside one finished (or running) run: its events as a table, its files, what it changed.

Everything here reads the run directory only, so it works the same for a run of this kernel, of
another kernel, or of a kernel that is long gone.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from .._child.formatter import ProgressFormatter
from .._views.tables import Artifact, Artifacts

if TYPE_CHECKING:
    import pandas


def events_frame(events: Iterable[dict[str, Any]], cwd: str | None) -> pandas.DataFrame:
    """One row per normalized event, with the formatter's words for it (the same as the panel's)."""
    import pandas as pd

    formatter = ProgressFormatter(cwd)
    rows = []
    for event in events:
        line = formatter.format(event)
        rows.append({
            "seq": event.get("seq"), "time": event.get("ts"), "type": event.get("type"),
            "tool": event.get("name") if event.get("type") in ("tool_call", "tool_result") else None,
            "is_error": event.get("isError") if event.get("type") == "tool_result" else None,
            "kind": line.kind if line else None, "text": line.text if line else None, "event": event,
        })
    frame = pd.DataFrame(rows, columns=["seq", "time", "type", "tool", "is_error", "kind", "text", "event"])
    frame["time"] = pd.to_datetime(frame["time"], unit="s", utc=True)
    frame["seq"] = frame["seq"].astype("Int64")
    frame["is_error"] = frame["is_error"].astype("boolean")
    for column in ("type", "tool", "kind", "text"):
        frame[column] = frame[column].astype("string")
    return frame


def files_changed(events: Iterable[dict[str, Any]], cwd: str | None) -> list[str]:
    """Paths the child wrote or edited successfully, in first-change order, as the events show them."""
    calls: dict[Any, str] = {}
    changed: list[str] = []
    for event in events:
        kind = event.get("type")
        if kind == "tool_call" and event.get("name") in ("write", "edit"):
            path = (event.get("args") or {}).get("path")
            if isinstance(path, str):
                calls[event.get("id")] = path
        elif kind == "tool_result" and event.get("id") in calls and not event.get("isError"):
            path = calls.pop(event.get("id"))
            shown = _relative(path, cwd)
            if shown not in changed:
                changed.append(shown)
    return changed


def _relative(path: str, cwd: str | None) -> str:
    if cwd and Path(path).is_absolute():
        try:
            return str(Path(path).relative_to(cwd))
        except ValueError:
            return path
    return path


def artifacts(run_dir: Path) -> Artifacts:
    found = Artifacts()
    try:
        entries = sorted(p for p in run_dir.iterdir() if p.is_file() and not p.name.startswith("."))
    except OSError:
        return found
    for path in entries:
        try:
            found.append(Artifact(path.name, path, path.stat().st_size))
        except OSError:
            continue
    return found
