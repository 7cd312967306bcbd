"""The run registry on synthetic run directories: concurrency, reconcile, rebuild, prefixes, tables, CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import nbsubagents
from nbsubagents import NbSubagentsError, _registry as registry

from nbsubagents._child import keys, procs
from nbsubagents._lifecycle import reconcile
from nbsubagents._lifecycle.handle import get_run
from nbsubagents._child.artifacts import now_iso

RESULT = {"status": "completed", "exitCode": 0, "stopReason": "stop", "errorMessage": None,
          "finalText": "All done.\nsecond line", "usage": {"input": 10, "output": 5, "totalTokens": 15, "cost": 0.01},
          "turns": 2, "toolCalls": 1, "startedAt": "2026-01-01T10:00:00.000Z",
          "endedAt": "2026-01-01T10:00:03.000Z", "durationSeconds": 3.0}


def dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def make_run(root: Path, run_id: str, *, result: dict | None = None, supervisor: dict | None = None,
             created_at: str | None = None, launcher: dict | None = None, name: str = "scout",
             task: str = "read README.md", register: bool = True) -> Path:
    run_dir = root / ".pi" / "subagents" / "runs" / run_id
    run_dir.mkdir(parents=True)
    meta = {"runId": run_id, "name": name, "preset": "scout", "mode": "background", "runner": "process", "task": task,
            "cwd": str(root), "resolvedModel": "demo/scripted", "createdAt": created_at or now_iso(),
            "launcher": launcher or {"pid": dead_pid(), "host": registry.HOST, "startTicks": 1}}
    (run_dir / "meta.json").write_text(json.dumps(meta))
    if supervisor is not None:
        (run_dir / "supervisor.json").write_text(json.dumps(supervisor))
        (run_dir / "supervisor.log").write_text("")
    if result is not None:
        (run_dir / "result.json").write_text(json.dumps({"runId": run_id, **result}))
    if register:
        registry.record(run_dir)
    return run_dir


def rows(root: Path) -> dict[str, dict]:
    with registry.connect(registry.db_path(root)) as conn:
        return {r["run_id"]: dict(r) for r in conn.execute("SELECT * FROM runs")}


def test_two_processes_registering_200_runs_each_at_once_lose_no_row(root):
    for tag in ("a", "b"):
        for i in range(200):
            make_run(root, f"2026-{tag}-{i:03d}", register=False, launcher={"pid": 1, "host": "h"})
    go = root / "go"
    code = ("import sys, time, pathlib\n"
            "from nbsubagents import _registry as registry\n"
            "base, tag, go = pathlib.Path(sys.argv[1]), sys.argv[2], pathlib.Path(sys.argv[3])\n"
            "while not go.exists(): time.sleep(0.005)\n"
            "for i in range(200):\n"
            "    registry.record(base / f'2026-{tag}-{i:03d}', status='running')\n"
            "    registry.record(base / f'2026-{tag}-{i:03d}', status='running')\n")
    procs_ = [subprocess.Popen([sys.executable, "-c", code, str(root / ".pi/subagents/runs"), tag, str(go)],
                               stderr=subprocess.PIPE, text=True) for tag in ("a", "b")]
    time.sleep(1.0)  # both importing and waiting at the line
    go.touch()
    for proc in procs_:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    got = rows(root)
    assert len(got) == 400
    assert {r["status"] for r in got.values()} == {"running"}
    with registry.connect(registry.db_path(root)) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_terminal_row_is_never_taken_back_to_active(root):
    run_dir = make_run(root, "20260101-100000-aaaaaa", result=RESULT)
    registry.upsert(registry.db_path(root), {"run_id": "20260101-100000-aaaaaa", "status": "running",
                                             "run_dir": str(run_dir)})
    assert rows(root)["20260101-100000-aaaaaa"]["status"] == "completed"


def test_reconcile_ingests_results_settles_lost_supervisors_and_leaves_starting_runs(root):
    old = "2026-01-01T00:00:00.000Z"
    finished = make_run(root, "20260101-000001-aaaaaa", supervisor={"pid": dead_pid(), "startTicks": 5},
                        created_at=old)
    registry.record(finished, status="running")
    (finished / "result.json").write_text(json.dumps({"runId": finished.name, **RESULT}))
    lost = make_run(root, "20260101-000002-bbbbbb", supervisor={"pid": dead_pid(), "startTicks": 5}, created_at=old)
    # a leftover "pi" of the lost run: found by the run id in its environment, then killed
    leftover = subprocess.Popen(["sleep", "60"], env={**os.environ, "PI_SUBAGENTS_RUN_ID": lost.name},
                                cwd=root)
    starting = make_run(root, "20260101-000003-cccccc")  # launched just now, no supervisor.json yet
    (starting / "supervisor.log").touch()
    never = make_run(root, "20260101-000004-dddddd", created_at=old)  # launcher gone, never launched
    me = os.getpid()
    queued_here = make_run(root, "20260101-000005-eeeeee", created_at=old,
                           launcher={"pid": me, "host": registry.HOST, "startTicks": procs.process_start_ticks(me)})
    live = subprocess.Popen(["sleep", "60"])
    alive = make_run(root, "20260101-000006-ffffff", created_at=old,
                     supervisor={"pid": live.pid, "startTicks": procs.process_start_ticks(live.pid)})
    reused = make_run(root, "20260101-000007-gggggg", created_at=old,  # the pid lives on as another process
                      supervisor={"pid": live.pid, "startTicks": procs.process_start_ticks(live.pid) - 1})
    try:
        still = reconcile.reconcile(root)
        assert leftover.wait(10) == -9
    finally:
        live.kill()
        live.wait()
        leftover.kill()
        leftover.wait()

    assert [r.id for r in still] == [alive.name]
    got = rows(root)
    assert got[finished.name]["status"] == "completed" and got[finished.name]["final_text"].startswith("All done.")
    assert got[lost.name]["status"] == "failed"
    assert got[lost.name]["error_message"] == "interrupted: supervisor exited without a result"
    assert json.loads((lost / "result.json").read_text())["errorMessage"] == got[lost.name]["error_message"]
    assert got[starting.name]["status"] == "queued" and not (starting / "result.json").exists()
    assert got[never.name]["status"] == "aborted"
    assert "before it started" in got[never.name]["error_message"]
    assert got[queued_here.name]["status"] == "queued"
    assert got[alive.name]["status"] == "running" and got[alive.name]["supervisor_pid"] == live.pid
    assert got[reused.name]["status"] == "failed"


def test_finished_while_away_is_announced_once_and_a_live_owners_run_is_left_to_it(root, capsys):
    away = make_run(root, "20260101-000001-aaaaaa", result=RESULT)
    me = os.getpid()
    mine = make_run(root, "20260101-000002-bbbbbb", result={**RESULT, "endedAt": now_iso()},
                    launcher={"pid": me, "host": registry.HOST, "startTicks": procs.process_start_ticks(me)})

    first = reconcile.announce_finished_while_away(root)
    second = reconcile.announce_finished_while_away(root)

    assert [r["run_id"] for r in first] == [away.name] and second == []
    out = capsys.readouterr().err  # a notice outside a notebook goes to stderr
    assert out.strip() == f"✓ background run scout {away.name} completed while away: All done. second line"  # the whole answer
    assert rows(root)[mine.name]["announced"] == 0  # its owner (this process) is alive: its watcher tells
    assert registry.claim(mine.name, registry.db_path(root)) is True
    assert registry.claim(mine.name, registry.db_path(root)) is False


def test_rebuild_recreates_rows_from_run_directories_keeping_announcements(root):
    a = make_run(root, "20260101-000001-aaaaaa", result=RESULT)
    b = make_run(root, "20260101-000002-bbbbbb", result={**RESULT, "status": "failed", "errorMessage": "boom"})
    registry.claim(a.name, registry.db_path(root))
    make_run(root, "20260101-000003-cccccc", result=RESULT, register=False)  # a lost write
    assert nbsubagents.rebuild_registry(root) == 3
    got = rows(root)
    assert got[a.name]["announced"] == 1 and got[b.name]["announced"] == 0  # kept as they were
    assert got["20260101-000003-cccccc"]["announced"] == 1  # new to the registry: history, not news
    assert got[b.name]["error_message"] == "boom"

    registry.db_path(root).unlink()
    for suffix in ("-wal", "-shm"):
        Path(str(registry.db_path(root)) + suffix).unlink(missing_ok=True)
    assert nbsubagents.rebuild_registry(root) == 3
    assert set(rows(root)) == {a.name, b.name, "20260101-000003-cccccc"}


def test_prefixes_resolve_uniquely_or_say_what_matched(root):
    make_run(root, "20260101-000001-aaaaaa")
    make_run(root, "20260101-000002-bbbbbb")
    assert registry.resolve("20260101-000001")["run_id"] == "20260101-000001-aaaaaa"
    assert get_run("20260101-000002-b").id == "20260101-000002-bbbbbb"
    with pytest.raises(NbSubagentsError, match="ambiguous: it matches 20260101-000001-aaaaaa, 20260101-000002-bbbbbb"):
        registry.resolve("2026")
    with pytest.raises(NbSubagentsError, match='No run "2027"'):
        registry.resolve("2027")
    with pytest.raises(NbSubagentsError, match="run id"):
        registry.resolve("")
    make_run(root, "20260101-000003-cccccc", register=False)  # on disk only: still found
    assert registry.resolve("20260101-000003")["run_id"] == "20260101-000003-cccccc"


def test_status_table_text_html_and_frame(root):
    make_run(root, "20260101-000001-aaaaaa", result=RESULT, name="<scout>")
    make_run(root, "20260101-000002-bbbbbb", result={**RESULT, "status": "failed", "errorMessage": "pi exploded"})
    st = reconcile.status(include_completed=True, announce=False)
    text = repr(st).splitlines()
    assert text[0] == "0 running · 1 completed · 1 failed · 0 aborted · 2 total"
    assert text[1].split() == ["RUN", "ID", "NAME", "STATUS", "MODEL", "STARTED", "TOOK", "TASK", "RESULT"]
    assert text[2].index("completed") == text[1].index("STATUS")  # aligned columns
    assert "All done." in text[2] and "pi exploded" in text[3]
    html = st._repr_html_()
    assert "&lt;scout&gt;" in html and "<scout>" not in html and html.count("<tr>") == 3
    frame = st.to_frame()
    assert list(frame.index) == ["20260101-000001-aaaaaa", "20260101-000002-bbbbbb"]
    assert frame.loc["20260101-000002-bbbbbb", "status"] == "failed"
    assert str(frame["ended_at"].dtype).startswith("datetime")
    assert repr(reconcile.status(announce=False)).endswith("no active runs")
    one = repr(reconcile.status("20260101-000002", announce=False))
    assert one.splitlines()[0] == "run 20260101-000002-bbbbbb" and "  error        pi exploded" in one


def test_status_of_a_folder_without_runs_creates_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    st = reconcile.status(include_completed=True)
    assert st.counts["total"] == 0 and st.rows == [] and list(tmp_path.iterdir()) == []


def test_console_script_prints_the_same_tables(root):
    make_run(root, "20260101-000001-aaaaaa", result=RESULT)
    cli = [sys.executable, "-m", "nbsubagents._cli"]
    runs = subprocess.run(cli + ["runs"], capture_output=True, text=True, timeout=60, cwd=root)
    assert runs.returncode == 0 and runs.stdout.startswith("0 running · 1 completed")
    assert "20260101-000001-aaaaaa" in runs.stdout
    active = subprocess.run(cli + ["status"], capture_output=True, text=True, timeout=60, cwd=root)
    assert active.stdout.strip().endswith("no active runs")
    every = subprocess.run(cli + ["status", "--all"], capture_output=True, text=True, timeout=60, cwd=root)
    assert every.stdout == runs.stdout
    one = subprocess.run(cli + ["status", "20260101"], capture_output=True, text=True, timeout=60, cwd=root)
    assert one.stdout.startswith("run 20260101-000001-aaaaaa") and "All done." in one.stdout
    bad = subprocess.run(cli + ["status", "nope"], capture_output=True, text=True, timeout=60, cwd=root)
    assert bad.returncode == 1 and 'No run "nope"' in bad.stderr
    assert rows(root)["20260101-000001-aaaaaa"]["announced"] == 0  # a terminal look announces nothing


def test_registry_and_watcher_stay_light():
    code = ("import sys, nbsubagents._registry, nbsubagents._lifecycle.watcher, nbsubagents._lifecycle.tmux;"
            "print(sorted({'IPython', 'ipywidgets', 'pandas'} & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize("bad", ["../planted", "/etc", "..", "runs/../../planted", "*", "2026*", "a17 b"])
def test_run_ids_are_never_paths(root, bad):
    """Issue 13, item 3: only the run-id alphabet is looked up; a path is no run, and nothing is written."""
    import nbsubagents

    make_run(root, "20260101-000001-aaaaaa", result=RESULT)
    planted = root / ".pi" / "subagents" / "planted"
    planted.mkdir()
    (planted / "meta.json").write_text(json.dumps({"runId": "planted", "task": "x", "cwd": str(root)}))
    before = sorted(str(p.relative_to(root)) for p in root.rglob("*"))
    for call in (nbsubagents.get_run, nbsubagents.status, nbsubagents.cancel):
        with pytest.raises(NbSubagentsError) as err:
            call(bad)
        assert str(err.value).startswith(f'No run "{bad.strip()}"'), err.value
    after = sorted(str(p.relative_to(root)) for p in root.rglob("*") if "registry.sqlite" not in p.name)
    assert after == [p for p in before if "registry.sqlite" not in p]  # no result.json, no second registry
    assert not (planted / "result.json").exists()


def test_a_prefix_of_the_random_tail_finds_a_run(root):
    make_run(root, "20260101-000001-a17f00", result=RESULT)
    make_run(root, "20260101-000002-a18f00", result=RESULT)
    make_run(root, "20260101-000003-b17f00", result=RESULT, register=False)  # on disk only
    assert get_run("a17").id == "20260101-000001-a17f00"
    assert reconcile.status("a17f").run_id == "20260101-000001-a17f00"
    assert get_run("b17").id == "20260101-000003-b17f00"
    with pytest.raises(NbSubagentsError, match='"a1" is ambiguous: it matches 20260101-000001-a17f00, '
                                               '20260101-000002-a18f00'):
        get_run("a1")


def test_settlers_racing_on_a_lost_run_leave_one_whole_result_and_no_temporary_file(tmp_path):
    """The watcher and a waiting wait() may settle the same lost run at once: the first result stays."""
    import threading

    from nbsubagents._child.artifacts import atomic_write_json

    for trial in range(50):
        target = tmp_path / f"result{trial}.json"
        won: list[bool] = []
        threads = [threading.Thread(target=lambda i=i: won.append(atomic_write_json(target, {"i": i}, exclusive=True)))
                   for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(won) == [False, False, False, True]
        assert json.loads(target.read_text())["i"] in range(4)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(f"result{t}.json" for t in range(50))


def test_a_corrupt_registry_is_healed_once_when_processes_find_it_at_once_and_an_emptied_one_refills(root):
    """Overwritten under three processes at once: exactly one moves it aside and rebuilds, every process gets
    the rows; emptied (0 bytes) under a process that had set it up: the rows come back from the directories."""
    make_run(root, "20260101-000001-aaaaaa", result=RESULT)
    make_run(root, "20260101-000002-bbbbbb", result={**RESULT, "status": "failed", "errorMessage": "boom"})
    db = registry.db_path(root)
    db.write_bytes(b"not sqlite at all\n" * 300)
    code = ("import sys, warnings\nfrom nbsubagents import _registry as registry\nwarnings.simplefilter('ignore')\n"
            "print(registry.counts(sys.argv[1])['total'])\n")
    procs_ = [subprocess.Popen([sys.executable, "-c", code, str(root)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True) for _ in range(3)]
    outs = [p.communicate(timeout=120) for p in procs_]
    assert [p.returncode for p in procs_] == [0, 0, 0], [e for _, e in outs]
    assert [o.strip() for o, _ in outs] == ["2", "2", "2"]
    assert len(list(db.parent.glob("registry.sqlite.corrupt-*"))) == 1
    assert rows(root)["20260101-000002-bbbbbb"]["error_message"] == "boom"

    registry.ensure_loaded(db)  # this process has set it up and synced it
    db.write_bytes(b"")  # then it is emptied under it
    assert set(registry.snapshot(include_completed=True, root=root).rows[i]["run_id"] for i in range(2)) == {
        "20260101-000001-aaaaaa", "20260101-000002-bbbbbb"}


def test_no_connection_to_the_registry_outlives_its_use_so_a_fork_inherits_none(root):
    """Each use opens its own connection and closes it: between uses the process holds no descriptor of the
    registry's files (none to carry across a fork, none whose locks another part of the process could drop), and
    the last close folds the WAL in as SQLite does."""
    make_run(root, "20260101-000001-aaaaaa", result=RESULT)
    db = registry.db_path(root)

    def open_files() -> list[str]:  # this registry's files (another test's connections may await collection)
        return [name for fd in os.listdir("/proc/self/fd") if (name := _link(fd)).startswith(str(db))]

    with registry.connect(db) as first:
        with registry.connect(db) as inner:
            assert inner is not first and open_files()
    assert rows(root) and open_files() == []
    assert not db.with_name(db.name + "-wal").exists()


def _link(fd: str) -> str:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return ""


def test_runs_folds_and_clips_each_task_as_shorten_does_and_types_its_columns(root):
    """runs() passes a task that needs no folding straight from SQLite and folds the others in Python: both ways
    give shorten()'s text. Its changes column is +N −M, its numbers nullable, its statuses categorical."""
    import pandas as pd

    from nbsubagents._registry import query
    from nbsubagents._style import shorten

    tasks = ["read README.md", "", "x" * 80, "y" * 81, " leading", "trailing ", "two  spaces", "tab\there",
             "new\nline", "no\u00a0break", "em\u2003space", "ünïcode stays", "word " * 30, "~!@#$%^&*()_+{}|:\"<>?"]
    for i, task in enumerate(tasks):
        created = f"2026-01-01T00:00:{i:02d}" + (".000Z" if i < len(tasks) - 1 else "+00:00")  # any ISO form
        make_run(root, f"20260101-000000-{i:06x}", task=task, created_at=created,
                 result={**RESULT, "changes": {"files": 2, "added": 7, "removed": 3}} if i == 0 else
                 {**RESULT, "usage": {}, "durationSeconds": None} if i == 1 else None)
    frame = query.runs(root=root).iloc[::-1]  # oldest first: the order of tasks
    assert list(frame["task"]) == [shorten(task, query.TASK_WIDTH) for task in tasks]
    assert list(frame["changes"].iloc[:2]) == ["+7 \u22123", pd.NA] and frame["files_changed"].iloc[0] == 2
    assert frame["tokens"].iloc[0] == 15 and frame["tokens"].iloc[1] is pd.NA and frame["tokens"].dtype == "Int64"
    assert frame["duration_s"].iloc[0] == 3.0 and frame["duration_s"].iloc[1] is pd.NA
    assert frame["duration_s"].dtype == "Float64" and frame["task"].dtype == "string"
    assert list(frame["status"].iloc[:3]) == ["completed", "completed", "queued"]
    assert frame["started"].iloc[0] == pd.Timestamp("2026-01-01T10:00:00Z")  # the run's start...
    assert frame["started"].iloc[2] == pd.Timestamp("2026-01-01T00:00:02Z")  # ...else its creation
    assert frame["started"].iloc[-1] == pd.Timestamp("2026-01-01T00:00:13Z") and frame["ended"].isna().sum() == 12
    fast = query.runs(root=root, until="2026-01-01T00:00:05Z").iloc[::-1]  # the same times in a smaller frame
    assert fast["started"].dtype == frame["started"].dtype and list(fast["started"]) == list(frame["started"][:6])


def test_a_registry_of_schema_5_gains_the_status_preset_index_so_two_filters_need_no_sort(tmp_path):
    """runs(status=..., preset=...) reads its rows newest first from an index: an older registry gets it when
    opened, and SQLite then sorts nothing (no temporary B-tree) for such a query."""
    import sqlite3

    from nbsubagents._registry import query

    db = registry.db_path(tmp_path)
    db.parent.mkdir(parents=True)
    with sqlite3.connect(db) as conn:  # what schema 5 made: the table and its earlier indexes
        conn.execute(f"CREATE TABLE runs ({', '.join(f'{n} {t}' for n, t in registry.COLUMNS)})")
        conn.execute("CREATE INDEX runs_preset ON runs(preset)")
        conn.execute("PRAGMA user_version = 5")
    registry.forget_loaded()
    sql, args = query.build_query(status="completed", preset="scout", select=query.FRAME_SELECT)
    with registry.connect(db) as conn:
        indexes = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
        plan = " / ".join(row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql, args))
        assert conn.execute("PRAGMA user_version").fetchone()[0] == registry.SCHEMA_VERSION
    assert "runs_status_preset" in indexes
    assert "runs_status_preset" in plan and "TEMP B-TREE" not in plan, plan


def test_a_registry_of_schema_8_loses_its_line_copies_and_runs_reads_its_rows_typed(root):
    """Schema 8 kept a CSV line of each row by triggers at every write; opened now, the copies and the triggers go,
    the rows stay, and runs() reads them typed as they are (a float to its last digit)."""
    import sqlite3

    from nbsubagents._registry import query

    make_run(root, "20260101-000001-aaaaaa")  # queued: no result yet
    make_run(root, "20260101-000002-bbbbbb", result={**RESULT, "usage": {**RESULT["usage"], "cost": 1 / 3}})
    db = registry.db_path(root)
    with sqlite3.connect(db) as conn:  # as schema 8 left it
        conn.execute("CREATE TABLE run_lines (run_id TEXT PRIMARY KEY, line TEXT NOT NULL) WITHOUT ROWID")
        conn.execute("CREATE TRIGGER run_lines_delete AFTER DELETE ON runs BEGIN "
                     "DELETE FROM run_lines WHERE run_id = OLD.run_id; END")
        conn.execute("PRAGMA user_version = 8")
    registry.forget_loaded()
    frame = query.runs(root=root).set_index("run_id")
    assert frame.loc["20260101-000002-bbbbbb", "cost"] == 1 / 3
    assert list(frame.loc[:, "status"]) == ["completed", "queued"]
    with sqlite3.connect(db) as conn:
        left = conn.execute("SELECT name FROM sqlite_master WHERE name LIKE 'run_lines%'").fetchall()
        assert left == [] and conn.execute("PRAGMA user_version").fetchone()[0] == registry.SCHEMA_VERSION


def test_a_registry_of_schema_6_loses_its_redundant_experiment_index_and_keeps_its_rows(tmp_path):
    import sqlite3

    db = registry.db_path(tmp_path)
    db.parent.mkdir(parents=True)
    registry.fetch(db, "SELECT 1")  # a registry of the current schema, then made one of schema 6
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE INDEX runs_experiment ON runs(experiment)")
        conn.execute("INSERT INTO runs (run_id, status, run_dir, experiment) VALUES ('20260101-000000-abcdef', "
                     "'completed', 'x', 'e1')")
        conn.execute("PRAGMA user_version = 6")
    with sqlite3.connect(db) as conn:
        assert "runs_experiment" in {r[1] for r in conn.execute("PRAGMA index_list(runs)")}
    assert registry.fetch(db, "SELECT run_id FROM runs WHERE experiment = 'e1'") == [
        {"run_id": "20260101-000000-abcdef"}]
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == registry.SCHEMA_VERSION
        indexes = {r[1] for r in conn.execute("PRAGMA index_list(runs)")}
        plan = " ".join(r[3] for r in conn.execute("EXPLAIN QUERY PLAN SELECT run_id FROM runs WHERE experiment = 'e1'"))
    assert "runs_experiment" not in indexes and "runs_experiment_created" in indexes
    assert "runs_experiment_created" in plan


def test_runs_gives_the_same_frame_through_pyarrow_as_through_pandas_on_odd_rows(root):
    """Odd rows (every nullable column empty, numbers stored as text, non-ASCII and long tasks, a waiting run)
    give the same values whether pandas keeps its strings in pyarrow (the rows typed in one call, a column
    pyarrow refuses taken pandas' way) or in Python objects: pandas' own conversions."""
    import sqlite3

    import pandas as pd

    from nbsubagents._child import inbox
    from nbsubagents._child.artifacts import STATUSES
    from nbsubagents._registry import query

    tasks = ["read README.md", "ünïcode and 日本語", "word " * 40, "two  spaces", "", "tab\there"]
    for i, task in enumerate(tasks):
        make_run(root, f"20260101-000000-{i:06x}", task=task, created_at=f"2026-01-01T00:00:0{i}+00:00",
                 result=RESULT if i % 2 else None,
                 supervisor={"pid": 1, "startTicks": 1, "startedAt": "2026-01-01T00:00:09Z"} if i == 2 else None)
    inbox.set_waiting(root / ".pi/subagents/runs/20260101-000000-000002", [{"id": "q1", "title": "Go on?"}],
                      keys.create("20260101-000000-000002"))  # signed, as its supervisor does
    with sqlite3.connect(registry.db_path(root)) as conn:  # values SQLite keeps as text in number columns
        conn.execute("UPDATE runs SET tool_calls = 'n/a', cost = '?', lines_added = 4, lines_removed = 1, "
                     "files_changed = 2 WHERE run_id LIKE '%1'")
        conn.execute("UPDATE runs SET name = NULL, preset = NULL, model = NULL, task = NULL, cwd = NULL, "
                     "notebook = NULL, harness = NULL WHERE run_id LIKE '%4'")

    arrow = query.runs(root=root)
    with pd.option_context("mode.string_storage", "python"):
        plain = query.runs(root=root)
    assert arrow["run_id"].dtype.storage == "pyarrow" and plain["run_id"].dtype.storage == "python"
    # only the strings' storage differs (in the columns' labels and the statuses' categories too)
    pd.testing.assert_frame_equal(arrow, plain, check_dtype=False, check_column_type=False, check_categorical=False,
                                  check_exact=True)
    assert list(arrow["status"]) == list(plain["status"]) and list(arrow["status"].cat.categories) == list(STATUSES)
    assert [str(t) for t in arrow.dtypes if str(t) != "string"] == [str(t) for t in plain.dtypes if str(t) != "string"]
    by_id = arrow.set_index("run_id")
    odd = by_id.loc["20260101-000000-000001"]
    assert odd["tool_calls"] is pd.NA and odd["cost"] is pd.NA and odd["tokens"] == 15 and odd["changes"] == "+4 \u22121"
    assert by_id.loc["20260101-000000-000002", "status"] == "waiting"
    assert by_id.loc["20260101-000000-000004", "task"] == "" and by_id.loc["20260101-000000-000004", "name"] is pd.NA
    assert list(query.runs(root=root, status="waiting")["run_id"]) == ["20260101-000000-000002"]



def test_runs_reads_awkward_texts_and_exact_numbers_through_sqlites_csv_lines_as_python_does(root):
    """With pyarrow, runs() has SQLite write each row as a line of CSV that pyarrow parses: texts with quotes,
    commas, line breaks, the word NULL or nothing at all, and floats and integers at full precision come out as
    the plain tuples give them (the CSV path is taken, not the fallback)."""
    import sqlite3

    import pandas as pd

    from nbsubagents._registry import query, store

    tasks = ["it's 'quoted', twice", "NULL", "", "line\nbreak\r\nand, comma", "\"double\" quotes", "日本語 ü"]
    for i, task in enumerate(tasks):
        make_run(root, f"20260101-000000-{i:06x}", task=task, name=task or "x", created_at=f"2026-01-01T00:00:0{i}Z",
                 result={**RESULT, "usage": {**RESULT["usage"], "cost": 0.1 + i / 3, "totalTokens": 2**53 + i},
                         "durationSeconds": 1e-7 * (i + 1) / 3, "data": {"note": task, "n": i}})
    with sqlite3.connect(registry.db_path(root)) as conn:
        conn.execute("UPDATE runs SET error_message = 'NULL', stop_reason = '' WHERE run_id LIKE '%2'")
    sql, args = query.build_query(select=query.csv_select(store.FRAME, store.FRAME_NUMBERS))
    with registry.connect(registry.db_path(root)) as conn:
        assert query.arrow_columns(conn.execute(sql, args), list(store.FRAME), store.FRAME_NUMBERS) is not None

    arrow = query.runs(root=root)
    with pd.option_context("mode.string_storage", "python"):
        plain = query.runs(root=root)
    pd.testing.assert_frame_equal(arrow, plain, check_dtype=False, check_column_type=False, check_categorical=False,
                                  check_exact=True)
    by_id = arrow.set_index("run_id").iloc[::-1]
    assert list(by_id["name"]) == [t or "x" for t in tasks]
    assert by_id["cost"].iloc[4] == 0.1 + 4 / 3 and by_id["duration_s"].iloc[5] == 1e-7 * 6 / 3
    assert by_id["tokens"].iloc[3] == 2**53 + 3
    assert by_id["error"].iloc[2] == "NULL" and by_id["stop_reason"].iloc[2] == "" and by_id["error"].iloc[1] is pd.NA
    expanded = query.runs(root=root, expand_data=True)
    with pd.option_context("mode.string_storage", "python"):
        pd.testing.assert_frame_equal(expanded, query.runs(root=root, expand_data=True), check_dtype=False,
                                      check_column_type=False, check_categorical=False, check_exact=True)
    assert list(expanded["data.note"].iloc[::-1]) == tasks and list(expanded["data.n"].iloc[::-1]) == list(range(6))
