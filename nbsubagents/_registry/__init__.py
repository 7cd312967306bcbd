"""The run registry: a SQLite index of every run of a project (storage and pure reads; never lifecycle/ or ui/).

- ``store``: the database (a connection per use), guarded upsert, the atomic ``claim`` and ``take_over``,
  counts, rebuild, healing and the sync from run directories;
- ``schema``: the columns, indexes, triggers and the runs() view's columns; ``rows``: a row as a run directory
  implies it (no database); ``lookup``: ``resolve`` (a run by id or unique prefix);
- ``status``: ``Status`` and its text/HTML views (pure functions of rows) and ``snapshot()``;
- ``query``: the ``runs()`` DataFrame (imported on use: it needs pandas).

The names the package uses are re-exported here: ``from nbsubagents import registry; registry.record(...)``.
"""

from __future__ import annotations

from .lookup import resolve
from .rows import (FINAL_TEXT_LIMIT, HOST, RUN_ID_CHARS, is_waiting, launcher_identity, row_from_dir, valid_run_id,
                   with_waiting)
from .status import MAX_TABLE_ROWS, Status, snapshot
from .store import (
                    ACTIVE,
                    ACTIVE_SQL,
                    COLUMNS,
                    NAMES,
                    SCHEMA_VERSION,
                    TERMINAL_SQL,
                    age,
                    claim,
                    connect,
                    counts,
                    db_of,
                    db_path,
                    ensure_loaded,
                    fetch,
                    forget_loaded,
                    gone,
                    heal,
                    ingest_ended,
                    note,
                    rebuild,
                    record,
                    take_over,
                    upsert,
                    waiting_count,
)

__all__ = ["Status", "snapshot", "MAX_TABLE_ROWS", "ACTIVE", "ACTIVE_SQL", "TERMINAL_SQL", "COLUMNS",
           "FINAL_TEXT_LIMIT", "HOST", "NAMES",
           "RUN_ID_CHARS", "SCHEMA_VERSION", "age", "claim", "connect", "counts", "db_of", "db_path",
           "ensure_loaded", "fetch", "forget_loaded", "gone", "heal", "ingest_ended", "is_waiting", "launcher_identity",
           "note", "waiting_count", "with_waiting",
           "rebuild", "record",
           "resolve", "row_from_dir", "take_over", "upsert", "valid_run_id"]
