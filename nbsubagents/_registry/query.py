"""The registry as data: ``runs()`` returns a pandas DataFrame of runs, newest first (``views.tables`` draws it).

Filtering happens in SQLite (indexed columns, parameters, no string-built values), so a registry of
100,000 runs answers in a fraction of a second; pandas is imported only here, only when called.
"""

from __future__ import annotations

import functools
import json
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from .._child.artifacts import STATUSES
from .._config import NbSubagentsError
from .._style import shorten
from . import store
from .rows import is_waiting, shown_name, with_waiting

if TYPE_CHECKING:
    import pandas

TASK_WIDTH = 80
_RELATIVE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|sec|m|min|h|hr|d|day|w|wk)s?\s*$", re.IGNORECASE)
_UNITS = {"s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "hr": 3600, "d": 86400, "day": 86400,
          "w": 604800, "wk": 604800}
_SELECT = ("run_id, name, preset, status, model, task, cwd, started_at, created_at, ended_at, duration, "
           "tool_calls, total_tokens, cost, error_message, run_dir, mode, notebook, kernel, final_text, "
           "stop_reason, files_changed, lines_added, lines_removed, data, resumed_from, harness, parent, root, depth, "
           "inputs")
SELECTED = [column.strip() for column in _SELECT.split(",")]  # the registry columns a runs query returns
def _select(columns: dict[str, str | None]) -> str:
    """The SELECT list of ``columns`` (name -> its SQL, None: the registry column of that name)."""
    return ", ".join(name if sql is None else f"{sql} AS {name}" for name, sql in columns.items())


FRAME_SELECT = _select(store.FRAME)  # what runs() selects (``store.FRAME``), as columns
# A task that ``shorten`` leaves as it is: printable ASCII words, each after a single space, at most TASK_WIDTH
# characters (or nothing at all). pyarrow finds them at once; only the others are folded in Python.
_PLAIN_TASK = r"^([!-~]+( [!-~]+)*)?$"


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
    """The SQL and its parameters for a runs query: the ``SELECTED`` columns, or ``select`` (``FRAME_SELECT``: the
    columns of runs()' frame, the benchmark's baseline)."""
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
    rows = with_waiting(rows)
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

    frame = {**store.FRAME, **({"data": None} if expand_data else {})}
    db = store.db_path(root)
    store.ensure_loaded(db)  # rows for directories it has not seen (a pure read otherwise)
    filters = dict(status=status, preset=preset, model=model, harness=harness, since=since, until=until, text=text,
                   limit=limit)
    with store.connect(db) as conn:
        got = None
        if pd.StringDtype().storage == "pyarrow":
            sql, args = build_query(**filters, select=csv_select(frame, store.FRAME_NUMBERS))
            got = arrow_columns(conn.execute(sql, args), list(frame), store.FRAME_NUMBERS)
        if got is None:
            sql, args = build_query(**filters, select=_select(frame))
            rows = conn.execute(sql, args).fetchall()
            got = dict(zip(frame, zip(*rows))) if rows else {name: () for name in frame}

    def text(name: str) -> Any:
        return pd.array(got[name], dtype="string")

    def number(name: str, dtype: str) -> Any:
        values = got[name]
        if isinstance(values, tuple):
            return pd.to_numeric(pd.Series(values, dtype=object), errors="coerce").astype(dtype).array
        return pd.api.types.pandas_dtype(dtype).__from_arrow__(values)

    columns = {  # by their registry names; shown by the names every face shows (rows.SHOWN)
        "run_id": text("run_id"), "name": text("name"), "preset": text("preset"), "harness": text("harness"),
        "status": _statuses(got["status"]), "model": text("model"), "task": _tasks(got["task"]), "cwd": text("cwd"),
        "started_at": _times(got["started"]), "ended_at": _times(got["ended_at"]),
        "duration": number("duration", "Float64"), "tool_calls": number("tool_calls", "Int64"),
        "total_tokens": number("total_tokens", "Int64"), "cost": number("cost", "Float64"),
        "error_message": text("error_message"), "run_dir": text("run_dir"), "mode": text("mode"),
        "notebook": text("notebook"), "kernel": text("kernel"), "stop_reason": text("stop_reason"),
        "changes": text("changes"), "files_changed": number("files_changed", "Int64"),
        "resumed_from": text("resumed_from"), "parent": text("parent"), "root": text("root"),
        "depth": number("depth", "Int64"), "inputs": text("inputs"),
    }
    out = pd.DataFrame({shown_name(name): column for name, column in columns.items()})
    out = _with_waiting(out, status, limit)
    if expand_data:
        data = _objects(got["data"])
        out = _expand_data(out, [data[i] for i in out.index])
    return out.reset_index(drop=True)


def csv_select(columns: dict[str, str | None], numbers: dict[str, str]) -> str:
    """What to select for ``arrow_columns``: a row's texts and integers as one line of CSV (``store.csv_line``),
    then its floats as they are. ``columns``: name -> its SQL (None: the registry column of that name);
    ``numbers``: the names of the number columns -> ``"int64"`` or ``"float64"`` (the others are texts)."""
    floats = [sql or name for name, sql in columns.items() if numbers.get(name) == "float64"]
    return ", ".join([store.csv_line(columns, numbers, floats=False), *floats])


def arrow_columns(cursor: Any, names: list[str], numbers: dict[str, str]) -> dict[str, Any] | None:
    """The columns of ``csv_select`` rows (``names`` in its order) as pyarrow arrays of their type, by name:
    pyarrow parses the lines at once, so no text or integer becomes a Python object (which is most of what
    sqlite3 spends on a large query). None when a value is not of its column's type (a number SQLite stored as
    text, text that is not UTF-8): the caller then reads the rows as tuples. A text with a NUL character ends there
    (``printf`` stops at it)."""
    import pyarrow as pa
    import pyarrow.csv as csv

    floats = [name for name in names if numbers.get(name) == "float64"]
    line = [name for name in names if name not in floats]
    types = {name: pa.type_for_alias(numbers.get(name, "large_string")) for name in line}
    conn, factory = cursor.connection, cursor.row_factory
    conn.text_factory, cursor.row_factory = bytes, None  # plain tuples: rows are only taken apart here
    try:
        rows = cursor.fetchall()
    finally:
        conn.text_factory, cursor.row_factory = str, factory
    lines, *values = zip(*rows) if rows else [()] * (1 + len(floats))
    try:
        got = {name: pa.array(column, type=pa.float64()) for name, column in zip(floats, values)}
        if lines:
            # in one thread: the lines are a few megabytes, and pyarrow's thread pool cost more than it gave (an
            # experiment's 10,000 lines: 5 ms against 9 on two cores; runs()' ratio 1.10 against 1.13-1.15)
            table = csv.read_csv(
                pa.py_buffer(b"\n".join(lines)), read_options=csv.ReadOptions(column_names=line, use_threads=False),
                parse_options=csv.ParseOptions(quote_char="'", newlines_in_values=True),
                convert_options=csv.ConvertOptions(column_types=types, null_values=["NULL"],
                                                   strings_can_be_null=True, quoted_strings_can_be_null=False))
            got.update((name, column.combine_chunks()) for name, column in zip(line, table.columns))
        else:
            got.update((name, pa.array([], type=kind)) for name, kind in types.items())
    except (TypeError, ValueError, OverflowError):  # pyarrow's ArrowInvalid and ArrowTypeError among them
        return None
    return {name: got[name] for name in names}


def _objects(values: Any) -> Any:
    """A column as Python values (a tuple stays as it is)."""
    return values if isinstance(values, tuple) else values.to_numpy(zero_copy_only=False)


def _statuses(values: Any) -> Any:
    """The status column as a categorical of ``STATUSES`` (pyarrow finds each value's code at once)."""
    import pandas as pd

    if isinstance(values, tuple):
        return pd.Categorical(values, categories=list(STATUSES))
    import pyarrow as pa
    import pyarrow.compute as pc

    codes = pc.index_in(values, value_set=pa.array(STATUSES, type=values.type)).fill_null(-1)  # -1: no status
    return pd.Categorical.from_codes(codes.to_numpy(), categories=list(STATUSES))


def _times(values: Any) -> Any:
    """``pd.to_datetime(values, utc=True, format="ISO8601")``: by pyarrow at once (``arrow_times``), else (times
    pyarrow cannot parse: without a zone, nanoseconds; a column without any time, to which pandas gives another
    unit) pandas' way."""
    import pandas as pd

    if not isinstance(values, tuple) and values.null_count < len(values):
        parsed = arrow_times(values)
        if parsed is not None:
            return parsed
    return pd.to_datetime(pd.Series(_objects(values), dtype=object), utc=True, format="ISO8601")


def arrow_times(values: Any) -> Any:
    """A pyarrow array of ISO times with their zone as the pandas array ``pd.to_datetime(..., utc=True)`` makes of
    them (in its unit: us in pandas 3, ns before), parsed at once; None where pyarrow cannot parse one."""
    import pyarrow as pa

    try:
        parsed = values.cast(pa.timestamp("us", "UTC"))
    except (TypeError, ValueError):  # pyarrow's ArrowInvalid among them
        return None
    return parsed.to_pandas().astype(_iso_time_dtype()).array


@functools.cache
def _iso_time_dtype() -> Any:
    import pandas as pd

    return pd.to_datetime(pd.Series(["2026-01-01T00:00:00.000Z"]), utc=True, format="ISO8601").dtype


def _tasks(values: Any) -> Any:
    """``shorten(task, TASK_WIDTH)`` of each task, as a string array: only the tasks it would change are folded
    in Python (with pyarrow: ``_PLAIN_TASK``)."""
    import pandas as pd

    if isinstance(values, tuple):
        return pd.array([shorten(task, TASK_WIDTH) for task in values], dtype="string")
    import pyarrow as pa
    import pyarrow.compute as pc

    plain = pc.and_(pc.less_equal(pc.utf8_length(values), TASK_WIDTH), pc.match_substring_regex(values, _PLAIN_TASK))
    folded = pc.invert(plain.fill_null(False))  # a missing task is folded too: shorten makes it ""
    if pc.any(folded).as_py():
        shortened = [shorten(task, TASK_WIDTH) for task in values.filter(folded).to_pylist()]
        values = pc.replace_with_mask(values, folded, pa.array(shortened, type=values.type))
    return pd.array(values, dtype="string")


def _with_waiting(out: pandas.DataFrame, status: Any, limit: int | None) -> pandas.DataFrame:
    """``shown`` for the frame: only running rows are looked at (a stat each), and only when the status filter
    lets them through and there are any (most registries have none)."""
    asked = set(_one_or_many(status, "status") or STATUSES)
    running = (out["status"] == "running").to_numpy()
    if asked & {"running", "waiting"} and running.any():
        waiting = [is_waiting(run_dir) for run_dir in out["run_dir"][running]]
        out.loc[out.index[running][waiting], "status"] = "waiting"
    if split_running(status):
        out = out[out["status"].isin(_one_or_many(status, "status") or ())][:limit]
    return out


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
