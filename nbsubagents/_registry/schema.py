"""The registry's schema: its columns, indexes and triggers, the runs() view's columns and how a schema of an
earlier version is brought up to this one (``init_schema``). Definitions only; ``store`` opens the database."""

from __future__ import annotations

import sqlite3
import time

__all__ = ["SCHEMA_VERSION", "COLUMNS", "NAMES", "FRAME", "FRAME_NUMBERS", "csv_line", "init_schema"]

SCHEMA_VERSION = 11  # 2: experiment, params, tags, scores; 3: an isolated run's changes, a typed run's data;
# 4: resumed_from; 5: harness; 6: two indexes that give rows in the order they are read, so nothing is sorted:
# runs_experiment_created (an experiment's runs, oldest first) and runs_status_preset (runs() filtered by a status
# and a preset, newest first, reading the index backwards); 7: runs_experiment dropped, runs_experiment_created
# serves every look-up by experiment (one index less to keep up at each write); 8: run_lines, each row's values as
# runs() reads them, kept by triggers; 9: run_lines and its triggers dropped (every write paid for a saving no one
# could see); 10: inputs, the run's inputs (JSON: name, kind, bytes, sha256 of each)
# 11: parent, root, depth (issue 58: a run's place in its delegation tree)

# (column, SQL type); the order is the table's.
COLUMNS: list[tuple[str, str]] = [
    ("run_id", "TEXT PRIMARY KEY"), ("name", "TEXT"), ("preset", "TEXT"), ("mode", "TEXT"),
    ("runner", "TEXT"), ("status", "TEXT NOT NULL"), ("task", "TEXT"), ("cwd", "TEXT"),
    ("requested_model", "TEXT"), ("model", "TEXT"), ("run_dir", "TEXT NOT NULL"),
    ("created_at", "TEXT"), ("started_at", "TEXT"), ("ended_at", "TEXT"), ("duration", "REAL"),
    ("exit_code", "INTEGER"), ("stop_reason", "TEXT"), ("error_message", "TEXT"), ("final_text", "TEXT"),
    ("input_tokens", "INTEGER"), ("output_tokens", "INTEGER"), ("cache_read_tokens", "INTEGER"),
    ("cache_write_tokens", "INTEGER"), ("total_tokens", "INTEGER"), ("cost", "REAL"),
    ("tool_calls", "INTEGER"), ("turns", "INTEGER"),
    ("host", "TEXT"), ("launcher_pid", "INTEGER"), ("launcher_ticks", "INTEGER"),
    ("notebook", "TEXT"), ("kernel", "TEXT"),
    ("supervisor_pid", "INTEGER"), ("supervisor_ticks", "INTEGER"), ("child_pid", "INTEGER"),
    ("owner_pid", "INTEGER"), ("owner_ticks", "INTEGER"), ("owner_host", "TEXT"),
    ("announced", "INTEGER NOT NULL DEFAULT 0"), ("updated_at", "TEXT"),
    # experiments (nbsubagents.experiment): params/tags/scores are JSON objects, rebuilt from meta.json/scores.json
    ("experiment", "TEXT"), ("params", "TEXT"), ("tags", "TEXT"), ("scores", "TEXT"),
    # issue 14: an isolated run's changes, a typed run's data (JSON)
    ("files_changed", "INTEGER"), ("lines_added", "INTEGER"), ("lines_removed", "INTEGER"), ("data", "TEXT"),
    # issue 26: the run this one continues (a resume, or a follow-up to a run that had ended)
    ("resumed_from", "TEXT"),
    # issue 28: the agent harness that ran it; the rows of an older registry were all pi's
    ("harness", "TEXT DEFAULT 'pi'"),
    # issue 57: the notebook's values a run was given (JSON list: name, kind, bytes, sha256)
    ("inputs", "TEXT"),
    # issue 58: the run that delegated this one, the first run of its tree (itself when none), its depth there
    ("parent", "TEXT"), ("root", "TEXT"), ("depth", "INTEGER"),
]
NAMES = [name for name, _ in COLUMNS]

# The runs() view's columns (``registry.query``): name -> the SQL that gives it from a row (None: the column of
# that name), and the ones that are numbers (the others are texts).
FRAME: dict[str, str | None] = {
    "run_id": None, "name": None, "preset": None, "harness": None, "status": None, "model": None, "task": None,
    "cwd": None, "started": "COALESCE(started_at, created_at)", "ended_at": None, "duration": None,
    "tool_calls": None, "total_tokens": None, "cost": None, "error_message": None, "run_dir": None, "mode": None,
    "notebook": None, "kernel": None, "stop_reason": None,
    "changes": "CASE WHEN lines_added IS NOT NULL AND lines_removed IS NOT NULL THEN "
               "'+' || CAST(lines_added AS INTEGER) || ' \u2212' || CAST(lines_removed AS INTEGER) END",
    "files_changed": None, "resumed_from": None, "parent": None, "root": None, "depth": None,
    "inputs": "(SELECT group_concat(json_extract(value, '$.name'), ', ') FROM json_each(inputs))"}
FRAME_NUMBERS = {"duration": "float64", "cost": "float64", "tool_calls": "int64", "total_tokens": "int64",
                 "files_changed": "int64", "depth": "int64"}


def csv_line(columns: dict[str, str | None], numbers: dict[str, str], *, floats: bool = True) -> str:
    """The SQL of one line of CSV of a row's ``columns`` (as ``FRAME``), which pyarrow parses at once
    (``query.arrow_columns``). ``printf``'s ``%Q`` quotes a text (doubling its quotes) and leaves NULL bare. A float
    is written with 17 digits, all that it holds (SQLite's own text of it has 15); a value of another type than its
    column's is quoted, so that pyarrow refuses it. ``floats=False`` leaves the floats out, for the caller to
    select apart."""
    parts: list[tuple[str, str]] = []
    for name, sql in columns.items():
        sql = sql or name
        if numbers.get(name) != "float64":
            parts.append(("%Q", sql))
        elif floats:
            parts.append(("%s", f"CASE WHEN typeof({sql}) IN ('real', 'integer') THEN printf('%!.17g', {sql}) "
                                f"ELSE quote({sql}) END"))
    return f"printf('{','.join(spec for spec, _ in parts)}', {', '.join(sql for _, sql in parts)})"


_SCHEMA = [
    f"CREATE TABLE IF NOT EXISTS runs ({', '.join(f'{n} {t}' for n, t in COLUMNS)})",
    "CREATE INDEX IF NOT EXISTS runs_status ON runs(status)",
    "CREATE INDEX IF NOT EXISTS runs_preset ON runs(preset)",
    "CREATE INDEX IF NOT EXISTS runs_model ON runs(model)",
    "CREATE INDEX IF NOT EXISTS runs_created ON runs(created_at)",
    "CREATE INDEX IF NOT EXISTS runs_started ON runs(started_at)",
    "CREATE INDEX IF NOT EXISTS runs_unannounced ON runs(status) WHERE announced = 0",
    "CREATE INDEX IF NOT EXISTS runs_experiment_created ON runs(experiment, created_at, run_id)",
    "CREATE INDEX IF NOT EXISTS runs_status_preset ON runs(status, preset, created_at, run_id)",
    "CREATE INDEX IF NOT EXISTS runs_root ON runs(root, created_at)",
    "DROP INDEX IF EXISTS runs_experiment",
    "DROP TRIGGER IF EXISTS run_lines_insert",  # 8 kept a CSV line of each row by triggers: runs() formats its
    "DROP TRIGGER IF EXISTS run_lines_update",  # rows' lines as it reads them (25,000 rows: ~35 ms more, unseen)
    "DROP TRIGGER IF EXISTS run_lines_delete",
    "DROP TABLE IF EXISTS run_lines",
]


def init_schema(conn: sqlite3.Connection) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                conn.execute("PRAGMA journal_mode = WAL")
            if conn.execute("PRAGMA user_version").fetchone()[0] < SCHEMA_VERSION:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    create, *others = _SCHEMA
                    conn.execute(create)
                    _add_missing_columns(conn)  # a table of an earlier version gets the new columns
                    for statement in others:
                        conn.execute(statement)
                    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                    conn.execute("COMMIT")
                except BaseException:  # an interrupt too: undo, and let it go on up
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _add_missing_columns(conn: sqlite3.Connection) -> None:
    """A registry made by an older version gains the columns added since (all nullable)."""
    have = {row[1] for row in conn.execute("PRAGMA table_info(runs)")}
    for name, kind in COLUMNS:
        if name not in have:
            conn.execute(f"ALTER TABLE runs ADD COLUMN {name} {kind}")
