"""The registry's storage: a SQLite index of every run of a project, at ``<root>/.pi/subagents/registry.sqlite``.

One row per run (single, parallel, background), written when the run is created, launched and
once it is terminal. Several kernels and processes write it at once: WAL, a busy timeout and one
short statement (or one ``BEGIN IMMEDIATE`` transaction) per write. The run directories stay the
source of truth; ``rebuild()`` recreates every row from them, and a process's first use adds the
directories it finds without a row. A registry that is no database any more (overwritten, truncated) is moved
aside (``registry.sqlite.corrupt-<time>``) with a warning and rebuilt from the run directories, on the first
connection that finds it so (``rebuild()`` too). Every read of rows (``ensure_loaded``) ingests the
``result.json`` of rows still active, so a run that ended in another process never shows running here.

Storage only: it knows neither ``Run`` nor the watcher and prints nothing. Settling, taking over and
announcing are ``nbsubagents._lifecycle.reconcile``'s; this module gives it the atomic steps: a guarded
``upsert`` (a terminal row never goes back to active), ``claim()`` (an atomic ``UPDATE ... WHERE
announced = 0``: exactly one process announces a run's end) and ``take_over()``. Standard library only.
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import threading
import time
import warnings
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, Iterable, Iterator

from .._child import artifacts, procs
from .._child.artifacts import ACTIVE, RUN_DIR_GONE, TERMINAL, RunPaths, now_iso
from .._config import NbSubagentsError, project_root
from .rows import HOST, is_waiting, row_from_dir, valid_run_id
from .schema import COLUMNS, FRAME, FRAME_NUMBERS, NAMES, SCHEMA_VERSION, csv_line, init_schema

__all__ = ["db_path", "db_of", "connect", "upsert", "record", "note", "claim", "take_over", "fetch", "counts", "age",
           "ensure_loaded", "forget_loaded", "rebuild", "heal", "ingest_ended", "gone", "waiting_count", "COLUMNS",
           "NAMES", "ACTIVE", "ACTIVE_SQL", "TERMINAL_SQL", "SCHEMA_VERSION", "FRAME", "FRAME_NUMBERS",
           "csv_line", "FILE_TOUCHES"]

_INSERT_ONLY = {"run_id", "owner_pid", "owner_ticks", "owner_host"}  # owner changes only by take_over()

# The status sets as SQL lists, for ``status IN ...`` (the one vocabulary, child/artifacts).
ACTIVE_SQL = "(" + ", ".join(f"'{s}'" for s in ACTIVE) + ")"
TERMINAL_SQL = "(" + ", ".join(f"'{s}'" for s in TERMINAL) + ")"
_UPSERT = (
    f"INSERT INTO runs ({', '.join(NAMES)}) VALUES ({', '.join('?' for _ in NAMES)}) "
    "ON CONFLICT(run_id) DO UPDATE SET "
    + ", ".join(f"{n} = COALESCE(excluded.{n}, runs.{n})" for n in NAMES
                if n not in _INSERT_ONLY and n not in ("status", "announced"))
    + ", status = excluded.status, announced = MAX(runs.announced, excluded.announced) "
    # a snapshot taken before the end never overwrites the end
    f"WHERE runs.status NOT IN {TERMINAL_SQL} OR excluded.status IN {TERMINAL_SQL}"
)

_ready: set[Path] = set()
_loaded: set[Path] = set()   # projects whose directories this process has synced
_lock = threading.Lock()
_warned = False


# -- the database ---------------------------------------------------------------------------------
def db_path(root: str | Path | None = None) -> Path:
    """``<root>/.pi/subagents/registry.sqlite`` of the project (the current one by default)."""
    base = Path(root).expanduser().resolve() if root is not None else project_root()
    return artifacts.runs_dir(base).parent / "registry.sqlite"


def db_of(run_dir: Path) -> Path:
    return Path(run_dir).parent.parent / "registry.sqlite"  # <root>/.pi/subagents/runs/<id>


# Every place in the package that opens, renames, links or deletes the registry's files (registry.sqlite, its -wal
# and -shm) other than through SQLite, and why it is safe there. Anywhere else it is not: SQLite's locks are POSIX
# locks, held by the process, so closing any descriptor of the file drops those of every connection the process
# has, and another process that closes its last connection then believes itself the last user and folds the WAL in
# and deletes it under a live connection ("How To Corrupt An SQLite Database File", 2.2). The test suite fails on
# a touch from any other function (tests/conftest.py, an audit hook); whether a file is a database is asked of SQLite.
FILE_TOUCHES = {
    f"{__name__}.heal": "moves a registry that SQLite itself has just found unreadable (``_readable``, under the "
                        "folder's lock every healer takes) aside: a hard link and renames, which open no descriptor "
                        "of the file and so drop no lock; then renames the rebuilt file (closed) over it, or deletes "
                        "that half-built file of its own when it could not",
}


@contextmanager
def connect(db: Path) -> Iterator[sqlite3.Connection]:
    """``with connect(db) as conn``: an autocommit connection for one use, schema ensured, closed after it; a
    registry that is no database any more is moved aside and rebuilt first (``heal``).

    A connection never outlives its use, so none is carried across a fork or kept while another part of the
    process looks at the files. Opening one costs ~1 ms (SQLite makes the WAL again when it was folded in by the
    last close), a few times in a run whose model takes seconds: nothing a person notices
    (docs/developer/benchmarks.md has the measurement)."""
    conn = _open_healing(Path(db))
    try:
        yield conn
    finally:
        conn.close()


def _open_healing(db: Path) -> sqlite3.Connection:
    db.parent.mkdir(parents=True, exist_ok=True)
    try:
        return _open(db)
    except sqlite3.DatabaseError as exc:
        if not _corrupt(exc) or getattr(_healing, "db", None) == db:
            raise
        heal(db, exc)
        return _open(db)


def _open(db: Path) -> sqlite3.Connection:
    if not db.exists():  # new, or deleted under us: set it up again
        _ready.discard(db)
        _loaded.discard(db)
    conn = sqlite3.connect(db, timeout=30.0, isolation_level=None)  # timeout: SQLite's busy timeout
    try:
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA synchronous = NORMAL")
        # user_version reads the file's header: a file overwritten since raises here; one emptied since is set up
        # again and filled from the run directories on the next ensure_loaded
        if db not in _ready or conn.execute("PRAGMA user_version").fetchone()[0] < SCHEMA_VERSION:
            init_schema(conn)
            with _lock:
                if db in _ready:
                    _loaded.discard(db)
                _ready.add(db)
    except BaseException:
        conn.close()
        raise
    return conn


_healing = threading.local()  # the registry this thread is rebuilding (a second failure then is an error)


def _corrupt(exc: sqlite3.DatabaseError) -> bool:
    """The file is no SQLite database (or a damaged one); a locked or busy database is not corrupt."""
    if isinstance(exc, sqlite3.OperationalError):
        return False
    name = getattr(exc, "sqlite_errorname", "")
    return name in ("SQLITE_NOTADB", "SQLITE_CORRUPT") or "not a database" in str(exc) or "malformed" in str(exc)


def _readable(db: Path) -> bool:
    """SQLite reads ``db`` as a whole database (its quick check finds nothing); a locked or busy one is in use, so
    a database."""
    try:
        conn = sqlite3.connect(db, timeout=30.0, isolation_level=None)
    except sqlite3.Error:
        return False
    try:
        return conn.execute("PRAGMA quick_check(1)").fetchone() == ("ok",)
    except sqlite3.OperationalError:
        return True
    except sqlite3.DatabaseError:
        return False
    finally:
        conn.close()


def heal(db: Path, exc: BaseException | None = None) -> Path | None:
    """Move a registry that SQLite cannot read aside (``registry.sqlite.corrupt-<time>``, with its -wal and -shm)
    with a warning, in favour of one rebuilt from the run directories. The new one is built beside it and takes its
    place in one rename, so no process ever reads a half-built registry. One process heals (``flock`` on the
    registry's folder) and only a file SQLite finds unreadable then: a registry that others use and SQLite reads is
    left alone, whatever error led here. Returns where the old file went, None when it was readable after all."""
    db = Path(db)
    fd = os.open(db.parent, os.O_RDONLY)  # the lock is on the registry's folder: no lock file is left
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with _lock:
            _ready.discard(db)
            _loaded.discard(db)
        if not db.exists() or _readable(db):
            return None  # another process healed it first, or it was never damaged
        stamp, n = time.strftime("%Y%m%d-%H%M%S"), 0
        aside = db.with_name(f"{db.name}.corrupt-{stamp}")
        while aside.exists():  # an earlier one of the same second is kept too
            n += 1
            aside = db.with_name(f"{db.name}.corrupt-{stamp}-{n}")
        fresh = db.with_name(f".{db.name}.rebuild-{os.getpid()}")
        _healing.db = fresh
        try:
            runs = _rebuild(fresh)  # closed when it returns: its -wal is folded in and gone
            try:
                os.link(db, aside)  # the damaged file is kept under its new name...
            except OSError:  # a filesystem without hard links: moved (a moment without a registry)
                os.replace(db, aside)
            for suffix in ("-wal", "-shm"):  # ...with what belonged to it, never applied to the new one
                try:
                    os.replace(db.with_name(db.name + suffix), aside.with_name(aside.name + suffix))
                except FileNotFoundError:
                    pass
            os.replace(fresh, db)  # ...and the new one takes its place at once
        except OSError as err:
            for leftover in (fresh, fresh.with_name(fresh.name + "-wal"), fresh.with_name(fresh.name + "-shm")):
                leftover.unlink(missing_ok=True)
            raise NbSubagentsError(f"The run registry {db} is not a readable database{f' ({exc})' if exc else ''} "
                                   f"and could not be replaced ({err.strerror or err}): move it away by hand; "
                                   "the next use rebuilds it from the run directories") from None
        finally:
            _healing.db = None
            with _lock:
                _ready.discard(fresh)
                _loaded.discard(fresh)
        with _lock:
            _loaded.add(db)  # synced: it was just built from the directories
        warnings.warn(f"nbsubagents: the run registry {db} was not a readable database"
                      f"{f' ({exc})' if exc else ''}: it was moved aside to {aside.name} and rebuilt from the run "
                      f"directories ({runs} runs)", RuntimeWarning, stacklevel=4)
        return aside
    finally:
        os.close(fd)


def upsert(db: Path, row: dict[str, Any], *, announced: bool = False) -> None:
    """Insert or update one row (keyed by run_id); a terminal row is never taken back to active."""
    values = {**row, "announced": 1 if announced else 0, "updated_at": now_iso()}
    with connect(db) as conn:
        conn.execute(_UPSERT, [values.get(n) for n in NAMES])


def record(run: Any, *, status: str | None = None, announced: bool = False) -> dict[str, Any] | None:
    """Write the row of a run from its directory (``status`` overrides what the directory says)."""
    run_dir = Path(run.dir) if not isinstance(run, (str, Path)) else Path(run)
    row = row_from_dir(run_dir)
    if row is None:
        return gone(db_of(run_dir), run_dir) if not RunPaths(run_dir).meta.exists() else None
    if status is not None and row["status"] not in TERMINAL:
        row["status"] = status
    upsert(db_of(run_dir), row, announced=announced)
    return row


def gone(db: Path, run_dir: Path, message: str = RUN_DIR_GONE) -> dict[str, Any] | None:
    """Settle the row of a still active run whose folder (its ``meta.json``) was deleted: ``failed`` with
    ``message``; the row as it is then (None when there is none)."""
    if not db.exists():
        return None
    now = now_iso()
    with connect(db) as conn:
        conn.execute(f"UPDATE runs SET status = 'failed', error_message = ?, stop_reason = 'run_dir_deleted', "
                     f"ended_at = COALESCE(ended_at, ?), updated_at = ? WHERE run_id = ? AND status IN {ACTIVE_SQL}",
                     (message, now, now, Path(run_dir).name))
        got = conn.execute("SELECT * FROM runs WHERE run_id = ?", (Path(run_dir).name,)).fetchone()
    return dict(got) if got is not None else None


def note(run: Any, *, status: str | None = None, announced: bool = False) -> None:
    """``record()`` that never fails a run: a registry problem is a warning (rebuild() repairs it)."""
    global _warned
    try:
        record(run, status=status, announced=announced)
    except (sqlite3.Error, OSError, NbSubagentsError) as exc:  # the last: a damaged registry that cannot be moved
        if not _warned:
            _warned = True
            where = db_of(Path(run) if isinstance(run, (str, Path)) else run.dir)
            warnings.warn(f"nbsubagents: the run registry {where} could not be written ({exc}); "
                          "runs still work, and nbsubagents.rebuild_registry() recreates it from the run "
                          "directories", RuntimeWarning, stacklevel=2)


def claim(run_id: str, root_or_db: Path) -> bool:
    """Atomically take the right to announce a run's end; True for exactly one caller, ever."""
    db = root_or_db if root_or_db.suffix == ".sqlite" else db_path(root_or_db)
    with connect(db) as conn:
        return conn.execute("UPDATE runs SET announced = 1 WHERE run_id = ? AND announced = 0",
                            (run_id,)).rowcount == 1


def take_over(db: Path, row: dict[str, Any]) -> bool:
    """Become the owner (watcher) of a run whose owner is gone; only one process wins."""
    me = os.getpid()
    with connect(db) as conn:
        return conn.execute(
            "UPDATE runs SET owner_pid = ?, owner_ticks = ?, owner_host = ? WHERE run_id = ? "
            "AND owner_pid IS ? AND owner_ticks IS ?",
            (me, procs.process_start_ticks(me), HOST, row["run_id"], row.get("owner_pid"),
             row.get("owner_ticks"))).rowcount == 1


def fetch(db: Path, sql: str, args: Iterable[Any] = ()) -> list[dict[str, Any]]:
    """The rows of a query as dicts (built from plain tuples: ``dict(sqlite3.Row)`` costs twice as much)."""
    with connect(db) as conn:
        conn.row_factory = None
        cursor = conn.execute(sql, tuple(args))
        names = [column[0] for column in cursor.description or ()]
        return [dict(zip(names, row)) for row in cursor.fetchall()]


def fetch_columns(db: Path, sql: str, args: Iterable[Any] = ()) -> dict[str, list[Any]]:
    """The rows of a query as columns: each column's name and its values in the rows' order (no object per row:
    what a frame is built from)."""
    with connect(db) as conn:
        conn.row_factory = None
        cursor = conn.execute(sql, tuple(args))
        names = [column[0] for column in cursor.description or ()]
        rows = cursor.fetchall()
    return {name: list(values) for name, values in zip(names, zip(*rows) if rows else [()] * len(names))}


def counts(root: str | Path | None = None, *, db: Path | None = None, trees: bool = False) -> dict[str, int]:
    """``{"running", "queued", "completed", "failed", "aborted", "total"}``: a run waiting on a question counts as
    running; a queued one (its launcher, e.g. a Dask cluster, has not started it) as queued. ``trees``: a
    delegation tree counts once, by its first run (the runs it delegated are not counted apart)."""
    db = db or db_path(root)
    out = {"running": 0, "queued": 0, "completed": 0, "failed": 0, "aborted": 0, "total": 0}
    if not db.exists():
        return out
    with connect(db) as conn:
        where = " WHERE parent IS NULL" if trees else ""
        for status_, n in conn.execute(f"SELECT status, COUNT(*) FROM runs{where} GROUP BY status"):
            key = "running" if status_ in ACTIVE and status_ != "queued" else status_
            out[key] = out.get(key, 0) + n
            out["total"] += n
    return out


def waiting_count(db: Path) -> int:
    """How many running runs wait on a question (counted among the running ones by ``counts``)."""
    if not db.exists():
        return 0
    rows = fetch(db, "SELECT run_dir FROM runs WHERE status = 'running'")
    return sum(1 for row in rows if is_waiting(row["run_dir"]))


# -- keeping rows truthful ------------------------------------------------------------------------
def age(iso: str | None) -> float:
    if not iso:
        return float("inf")
    try:
        return time.time() - datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return float("inf")


def _sync_dirs(db: Path) -> None:
    """Rows for run directories that have none (runs of older versions, a lost write); drop rows of
    deleted directories, except that of a run still active: it is settled failed (``gone``). Once per process
    and project."""
    base = db.parent / "runs"
    try:
        names = {e.name for e in os.scandir(base) if e.is_dir() and valid_run_id(e.name)}
    except OSError:
        names = set()
    rows = fetch(db, "SELECT run_id, run_dir, status FROM runs")
    known_names = {Path(r["run_dir"]).name for r in rows}
    for name in sorted(names - known_names):
        row = row_from_dir(base / name)
        if row is not None:
            upsert(db, row, announced=row["status"] in TERMINAL)  # history, not news
    deleted = [r for r in rows if Path(r["run_dir"]).name not in names and not Path(r["run_dir"]).is_dir()]
    for row in deleted:
        if row["status"] in ACTIVE:
            gone(db, Path(row["run_dir"]))  # deleted while it ran: it ended, and says why
    ended = [(r["run_id"],) for r in deleted if r["status"] not in ACTIVE]
    if ended:
        with connect(db) as conn:
            conn.executemany("DELETE FROM runs WHERE run_id = ?", ended)


def forget_loaded() -> None:
    """Forget which projects this process has synced and which databases it has set up (the next use
    syncs the directories and checks the schema again)."""
    with _lock:
        _loaded.clear()
        _ready.clear()


def ingest_ended(db: Path) -> int:
    """Rows still active whose run directory holds a ``result.json`` (a run that ended in another process)
    take it in; a stat per active row. Returns how many changed."""
    changed = 0
    for row in fetch(db, f"SELECT run_dir FROM runs WHERE status IN {ACTIVE_SQL}"):
        if RunPaths(Path(row["run_dir"])).result.exists():
            new = row_from_dir(row["run_dir"])
            if new is None:
                continue
            try:
                upsert(db, new)  # not announced: its owner (or the next reconcile) announces it
            except (sqlite3.Error, OSError):
                return changed  # a registry this process cannot write: the read goes on without
            changed += 1
    return changed


def ensure_loaded(db: Path) -> None:
    """Rows for the directories this process has not seen (once per process and project), and the ends of
    active rows (``ingest_ended``, every time)."""
    with connect(db):
        pass  # a registry emptied or overwritten since is set up (or healed) again, and synced below
    with _lock:
        fresh = db not in _loaded
        _loaded.add(db)
    if fresh:
        _sync_dirs(db)
    ingest_ended(db)


def rebuild(root: str | Path | None = None) -> int:
    """Recreate every row from the run directories; returns how many runs it holds.

    Announcement flags survive for runs that had a row; runs new to the registry count as already
    announced when terminal (they are history, not news). A registry that is no database any more is moved
    aside first (``heal``).
    """
    return _rebuild(db_path(root))


def _rebuild(db: Path) -> int:
    base = db.parent / "runs"
    rows = []
    if base.is_dir():
        for entry in sorted(os.scandir(base), key=lambda e: e.name):
            if entry.is_dir() and valid_run_id(entry.name):
                row = row_from_dir(entry.path)
                if row is not None:
                    rows.append(row)
    with connect(db) as conn:
        old = {r["run_id"]: (r["announced"], r["owner_pid"], r["owner_ticks"], r["owner_host"])
               for r in conn.execute("SELECT run_id, announced, owner_pid, owner_ticks, owner_host FROM runs")}
        now = now_iso()
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute("DELETE FROM runs")
            for row in rows:
                prior = old.get(row["run_id"])
                values = {**row, "updated_at": now,
                          "announced": prior[0] if prior else int(row["status"] in TERMINAL)}
                if prior:
                    values.update(owner_pid=prior[1], owner_ticks=prior[2], owner_host=prior[3])
                conn.execute(f"INSERT INTO runs ({', '.join(NAMES)}) VALUES ({', '.join('?' for _ in NAMES)})",
                             [values.get(n) for n in NAMES])
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
    with _lock:
        _loaded.add(db)
    return len(rows)


