"""The registry's files are SQLite's alone (issue 59).

SQLite's locks are POSIX locks, which belong to the process: opening and closing the database file outside SQLite
drops the locks of every connection the process holds, and another process closing its last connection then folds
the WAL in and deletes it under a live connection ("How To Corrupt An SQLite Database File", section 2.2). These tests
hold the package to its promise: it opens, renames, links or deletes the registry's files only where
``store.FILE_TOUCHES`` says (the suite-wide check is ``tests/conftest.py``'s ``registry_files_are_sqlites``).
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import warnings

import pytest
from test_registry import RESULT, make_run

import nbsubagents
from nbsubagents import _registry as registry
from nbsubagents._registry import store


def in_another_process(code: str, db) -> None:
    out = subprocess.run([sys.executable, "-c", f"import sqlite3, sys\nconn = sqlite3.connect(sys.argv[1])\n{code}\n"
                          "conn.close()\n", str(db)], capture_output=True, text=True, timeout=60,
                         stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr


def test_reads_of_the_registry_keep_the_locks_of_another_connection_of_the_process(root):
    """A process holds a connection to the registry (a reader's shared lock) and reads through the package; another
    checkpoints the registry; the first reads again; a third opens and closes a connection. The WAL must still be
    there: had the package opened and closed the file itself, the process's locks would be gone and the third
    process, believing itself the last user, would have folded the WAL in and deleted it under a live connection."""
    make_run(root, "20260101-000001-aaaaaa", result=RESULT)
    db = registry.db_path(root)
    wal = db.with_name(db.name + "-wal")
    held = sqlite3.connect(db, isolation_level=None)
    try:
        assert held.execute("SELECT COUNT(*) FROM runs").fetchone() == (1,)
        nbsubagents.runs(project=root)
        nbsubagents.status(project=root)
        in_another_process("conn.execute('PRAGMA wal_checkpoint(TRUNCATE)').fetchone()", db)
        nbsubagents.runs(project=root)
        nbsubagents.status(include_completed=True, project=root)
        in_another_process("conn.execute('SELECT COUNT(*) FROM runs').fetchone()", db)
        assert wal.exists(), "the WAL was deleted under a live connection"
        held.execute("UPDATE runs SET name = 'still-written' WHERE run_id = '20260101-000001-aaaaaa'")
    finally:
        held.close()
    assert registry.fetch(db, "SELECT name FROM runs") == [{"name": "still-written"}]
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]


def test_the_suites_check_catches_a_module_that_opens_the_registrys_file(root, registry_file_touches):
    """The check in conftest.py is real: a package function outside ``FILE_TOUCHES`` that opens the file is
    caught (here ``artifacts.read_json``, made to read the registry: its ``open_regular`` opens it), while the test's
    own open is not judged."""
    from nbsubagents._child.artifacts import read_json

    make_run(root, "20260101-000001-aaaaaa", result=RESULT)
    db = registry.db_path(root)
    db.read_bytes()  # a test may look at the file: only the package is held to the rule
    assert registry_file_touches == []
    read_json(db)
    assert [where for where, _ in registry_file_touches] == ["nbsubagents._child.artifacts.open_regular"]
    registry_file_touches.clear()  # planted: the suite's check must not fail this test


def test_every_place_that_touches_the_registrys_files_says_why_it_is_safe():
    assert store.FILE_TOUCHES, "the module lists the places"
    for where, why in store.FILE_TOUCHES.items():
        module, _, function = where.rpartition(".")
        assert module == store.__name__ and callable(getattr(store, function)), where
        assert len(why) > 40, f"{where}: say why it is safe"


def test_a_readable_registry_in_use_is_never_healed(root):
    """heal() is asked to heal a registry that other processes are using and that SQLite reads: it leaves it
    alone (nothing moved aside, no warning), and the rows stay."""
    make_run(root, "20260101-000001-aaaaaa", result=RESULT)
    db = registry.db_path(root)
    held = sqlite3.connect(db, isolation_level=None)
    try:
        held.execute("BEGIN")
        held.execute("SELECT COUNT(*) FROM runs").fetchone()  # a reader in a transaction
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert registry.heal(db, sqlite3.DatabaseError("database disk image is malformed")) is None
        held.execute("COMMIT")
    finally:
        held.close()
    assert list(db.parent.glob("registry.sqlite.corrupt-*")) == []
    assert [r["run_id"] for r in registry.fetch(db, "SELECT run_id FROM runs")] == ["20260101-000001-aaaaaa"]


def test_a_registry_that_is_no_database_is_healed_and_says_so(root):
    """A registry SQLite cannot read is moved aside and rebuilt, with a warning that names where it went."""
    make_run(root, "20260101-000001-aaaaaa", result=RESULT)
    make_run(root, "20260101-000002-bbbbbb", result={**RESULT, "status": "failed"})
    db = registry.db_path(root)
    db.write_bytes(b"not sqlite at all\n" * 300)
    with pytest.warns(RuntimeWarning, match=r"moved aside to registry\.sqlite\.corrupt-.*rebuilt .*\(2 runs\)"):
        assert registry.counts(root)["total"] == 2
    assert len([p for p in db.parent.glob("registry.sqlite.corrupt-*") if p.name[-4:] not in ("-wal", "-shm")]) == 1
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
