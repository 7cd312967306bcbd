"""The registry as data: ``runs()`` returns a pandas DataFrame of runs, newest first (``views.tables`` draws it).

Filtering happens in SQLite (indexed columns, parameters, no string-built values), so a registry of
100,000 runs answers in a fraction of a second; pandas is imported only here, only when called.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from ..child.artifacts import STATUSES
from ..config import NbSubagentsError
from ..style import shorten
from . import store

if TYPE_CHECKING:
    import pandas

TASK_WIDTH = 80
_RELATIVE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|sec|m|min|h|hr|d|day|w|wk)s?\s*$", re.IGNORECASE)
_UNITS = {"s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "hr": 3600, "d": 86400, "day": 86400,
          "w": 604800, "wk": 604800}
_SELECT = ("run_id, name, preset, status, model, task, cwd, started_at, created_at, ended_at, duration, "
           "tool_calls, total_tokens, cost, error_message, run_dir, mode, notebook, kernel, final_text, "
           "stop_reason, files_changed, lines_added, lines_removed, data, resumed_from, harness")
SELECTED = [column.strip() for column in _SELECT.split(",")]  # the registry columns a runs query returns
# What runs() selects: its columns, with SQLite doing what needs no Python. ``plain`` says that ``shorten`` would
# leave the task as it is (printable ASCII of at most TASK_WIDTH characters without doubled, leading or trailing
# spaces), so only the other tasks are folded in Python.
_PLAIN_TASK = (f"length(task) <= {TASK_WIDTH} AND task NOT GLOB '*[^ -~]*' AND task NOT GLOB '*  *' "
               "AND task NOT GLOB ' *' AND task NOT GLOB '* '")
FRAME_SELECT = ("run_id, name, preset, harness, status, model, "
                f"task, {_PLAIN_TASK} AS plain, "
                "cwd, COALESCE(started_at, created_at) AS started, ended_at, duration, tool_calls, total_tokens, cost, "
                "error_message, run_dir, mode, notebook, kernel, stop_reason, "
                "CASE WHEN lines_added IS NOT NULL AND lines_removed IS NOT NULL THEN "
                "'+' || CAST(lines_added AS INTEGER) || ' \u2212' || CAST(lines_removed AS INTEGER) END AS changes, "
                "files_changed, resumed_from")


def to_utc_iso(value: Any, *, name: str) -> str:
    """A datetime, a pandas Timestamp, an ISO string or a relative age like ``"2h"`` -> registry time text."""
    if isinstance(value, str):
        match = _RELATIVE.match(value)
        if match:
            seconds = float(match.group(1)) * _UNITS[match.group(2).lower()]
            value = datetime.now(timezone.utc) - timedelta(seconds=seconds)
        else:
            try:
                value = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
            except ValueError:
                raise NbSubagentsError(
                    f"{name}={value!r} is not understood: give a datetime, an ISO time like "
                    "'2026-11-25 14:00', or an age like '30m', '2h', '7d'") from None
    if hasattr(value, "to_pydatetime"):
        value = value.to_pydatetime()
    if not isinstance(value, datetime):
        raise NbSubagentsError(f"{name} must be a datetime, an ISO time or an age like '2h', got {value!r}")
    if value.tzinfo is None:
        value = value.astimezone()  # a naive time is the user's local time
    value = value.astimezone(timezone.utc)
    return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"


def _one_or_many(value: str | Iterable[str] | None, name: str) -> list[str] | None:
    if value is None:
        return None
    values = [value] if isinstance(value, str) else list(value) if isinstance(value, (list, tuple, set)) else None
    if not values or not all(isinstance(v, str) for v in values):
        raise NbSubagentsError(f"{name} must be a name or a list of names, got {value!r}")
    return values


def build_query(*, status: Any = None, preset: Any = None, model: Any = None, harness: Any = None,
                since: Any = None, until: Any = None, text: str | None = None, limit: int | None = None,
                select: str = _SELECT) -> tuple[str, list[Any]]:
    """The SQL and its parameters for a runs query: the ``SELECTED`` columns, or ``select`` (``runs()`` gives
    ``FRAME_SELECT``; the benchmark's baseline runs the same)."""
    where: list[str] = []
    args: list[Any] = []
    statuses = _one_or_many(status, "status")
    if statuses:
        unknown = [s for s in statuses if s not in STATUSES]
        if unknown:
            raise NbSubagentsError(f"Unknown status {unknown[0]!r}; statuses are {', '.join(STATUSES)}")
        statuses = sorted({"running" if s == "waiting" else s for s in statuses})  # a waiting run's row: running
    for column, values in (("status", statuses), ("preset", _one_or_many(preset, "preset")),
                           ("model", _one_or_many(model, "model")), ("harness", _one_or_many(harness, "harness"))):
        if values:
            where.append(f"{column} IN ({', '.join('?' * len(values))})")
            args += values
    if since is not None:
        where.append("created_at >= ?")
        args.append(to_utc_iso(since, name="since"))
    if until is not None:
        where.append("created_at <= ?")
        args.append(to_utc_iso(until, name="until"))
    if text:
        pattern = "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        where.append("(task LIKE ? ESCAPE '\\' OR final_text LIKE ? ESCAPE '\\')")
        args += [pattern, pattern]
    sql = f"SELECT {select} FROM runs"
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += " ORDER BY created_at DESC, run_id DESC"
    if limit is not None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise NbSubagentsError(f"limit must be a whole number >= 1, got {limit!r}")
        if not split_running(status):  # else the limit applies once waiting and running are told apart
            sql += " LIMIT ?"
            args.append(limit)
    return sql, args


def split_running(status: Any) -> bool:
    """Whether a status filter tells ``waiting`` from ``running`` (one of them asked, not both), which only the
    run directories know: the rows of the query are then filtered (``shown``) after it."""
    statuses = _one_or_many(status, "status") or []
    return ("waiting" in statuses) != ("running" in statuses)


def shown(rows: list[dict[str, Any]], status: Any = None, limit: int | None = None) -> list[dict[str, Any]]:
    """Rows of a runs query as a reader shows them: ``waiting`` for a running run with an open question, and the
    status filter and limit applied again where ``split_running``."""
    rows = store.with_waiting(rows)
    if split_running(status):
        wanted = set(_one_or_many(status, "status") or ())
        rows = [row for row in rows if row["status"] in wanted][:limit]
    return rows


def runs(*, status: Any = None, preset: Any = None, model: Any = None, harness: Any = None, since: Any = None,
         until: Any = None, text: str | None = None, limit: int | None = None, root: str | Path | None = None,
         expand_data: bool = False) -> pandas.DataFrame:
    """Every run of the project as a DataFrame, newest first, filtered in the registry.

    ``status``/``preset``/``model``/``harness`` (``"pi"``, ``"claude-code"``, ``"codex"``) take a name or a
    list; ``since``/``until`` a datetime, an ISO time or an age (``"30m"``, ``"2h"``, ``"7d"``); ``text``
    searches the task and the final output.
    ``expand_data`` adds a typed run's ``data`` as ``data.*`` columns (nested keys joined by dots).
    """
    import pandas as pd

    sql, args = build_query(status=status, preset=preset, model=model, harness=harness, since=since, until=until,
                            text=text, limit=limit, select=FRAME_SELECT + (", data" if expand_data else ""))
    db = store.db_path(root)
    store.ensure_loaded(db)  # rows for directories it has not seen (a pure read otherwise)
    with store.connect(db) as conn:
        conn.row_factory = None
        cursor = conn.execute(sql, args)
        names = [column[0] for column in cursor.description]
        rows = cursor.fetchall()
    rows = _with_waiting(rows, names, status, limit)
    got = dict(zip(names, zip(*rows))) if rows else {name: () for name in names}  # a tuple per column

    def text(name: str) -> Any:
        return _strings(got[name])

    def number(name: str, dtype: str) -> Any:
        return pd.to_numeric(pd.Series(got[name], dtype=object), errors="coerce").astype(dtype).array

    tasks = [task if plain else shorten(task, TASK_WIDTH) for task, plain in zip(got["task"], got["plain"])]
    out = pd.DataFrame({
        "run_id": text("run_id"), "name": text("name"), "preset": text("preset"), "harness": text("harness"),
        "status": pd.Categorical(got["status"], categories=list(STATUSES)),
        "model": text("model"), "task": _strings(tasks), "cwd": text("cwd"),
        "started": pd.to_datetime(pd.Series(got["started"], dtype=object), utc=True, format="ISO8601"),
        "ended": pd.to_datetime(pd.Series(got["ended_at"], dtype=object), utc=True, format="ISO8601"),
        "duration_s": number("duration", "Float64"), "tool_calls": number("tool_calls", "Int64"),
        "tokens": number("total_tokens", "Int64"), "cost": number("cost", "Float64"),
        "error": text("error_message"), "run_dir": text("run_dir"), "mode": text("mode"),
        "notebook": text("notebook"), "kernel": text("kernel"), "stop_reason": text("stop_reason"),
        "changes": text("changes"), "files_changed": number("files_changed", "Int64"),
        "resumed_from": text("resumed_from"),
    })
    if expand_data:
        out = _expand_data(out, got["data"])
    return out


def _strings(values: Any) -> Any:
    """``pd.array(values, dtype="string")``; when pandas keeps that dtype in pyarrow, the column of texts (and
    Nones) is handed to pyarrow at once, three times faster than pandas checking each value first. Anything
    else in the column (a number SQLite stored in a text column) takes pandas' own way, which turns it to text."""
    import pandas as pd

    if pd.StringDtype().storage == "pyarrow":
        import pyarrow as pa

        try:
            return pd.array(pa.array(values, type=pa.large_string()), dtype="string")
        except (TypeError, ValueError):  # pyarrow's ArrowTypeError and ArrowInvalid among them
            pass
    return pd.array(values, dtype="string")


def _with_waiting(rows: list[tuple[Any, ...]], names: list[str], status: Any, limit: int | None
                  ) -> list[tuple[Any, ...]]:
    """``shown`` for the frame's plain tuples: only running rows are looked at (a stat each)."""
    at, where = names.index("status"), names.index("run_dir")
    rows = [row[:at] + ("waiting",) + row[at + 1:] if row[at] == "running" and store.is_waiting(row[where]) else row
            for row in rows]
    if split_running(status):
        wanted = set(_one_or_many(status, "status") or ())
        rows = [row for row in rows if row[at] in wanted][:limit]
    return rows


def _expand_data(out: pandas.DataFrame, data: Any) -> pandas.DataFrame:
    """``data.*`` columns from each typed run's JSON data (a non-object value is the column ``data``)."""

    import pandas as pd

    records = []
    for raw in data:
        value = json.loads(raw) if isinstance(raw, str) else None
        records.append(value if isinstance(value, dict) else ({"": value} if value is not None else {}))
    flat = pd.json_normalize(records, sep=".") if records else pd.DataFrame(index=out.index)
    flat.columns = ["data" if c == "" else f"data.{c}" for c in flat.columns]
    flat.index = out.index
    return pd.concat([out, flat], axis=1)
