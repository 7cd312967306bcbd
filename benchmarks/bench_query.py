"""`runs()` with two filters over 100,000 registry rows, against the same query in plain sqlite3.

Target: runs() < 200 ms, well under what a person notices as a wait. The ratio's baseline is the same query in plain sqlite3: the
frame's columns (``FRAME_SELECT``), the same WHERE and ORDER BY, through the same index. runs() itself selects
each row as one line of CSV (``query.csv_select``); that SQL fetched with plain sqlite3 is timed too (what runs()
adds to its own query: parsing the lines into typed columns), and so is the full-row query (every ``SELECTED``
column, what the CSV export reads).
21 alternating pairs, medians of wall time and of the process's CPU time (which moves less with the machine's
load; pyarrow's parsing threads count in it); the query plan and the load average are printed with them. Only the
results' lengths are kept between calls, so neither side pays for collecting the other's objects.
"""

from __future__ import annotations

import atexit
import random
import shutil
import sqlite3
import statistics
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable

from nbsubagents import _registry as registry

from nbsubagents._registry import query, store

N = 100_000


def fill(root: Path) -> None:
    db = registry.db_path(root)
    (root / ".pi" / "subagents" / "runs").mkdir(parents=True)
    runs_dir = root / ".pi" / "subagents" / "runs"
    for i in range(N):  # the registry drops rows whose run directory is gone: give each one
        (runs_dir / f"bench-{i:06d}").mkdir()
    rng = random.Random(7)
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    rows = []
    for i in range(N):
        t = start + timedelta(seconds=i * 60)
        iso = t.strftime("%Y-%m-%dT%H:%M:%S.000Z")
        status = rng.choice(["completed"] * 6 + ["failed", "aborted"])
        row = {name: None for name in registry.NAMES}
        row.update(run_id=f"bench-{i:06d}", name=f"task{i % 50}", preset=rng.choice(["scout", "scribe", "reviewer"]),
                   mode="single", status=status, task=f"read file{i}.py and summarise", cwd=str(root),
                   model="demo/scripted", run_dir=str(root / ".pi/subagents/runs" / f"bench-{i:06d}"),
                   created_at=iso, started_at=iso, ended_at=iso, duration=rng.random() * 30, tool_calls=rng.randint(0, 20),
                   total_tokens=rng.randint(100, 9000), cost=rng.random() / 100, final_text="Done.", announced=1)
        rows.append([row[n] for n in registry.NAMES])
    with registry.connect(db) as conn:
        conn.execute("BEGIN")
        conn.executemany(f"INSERT INTO runs ({', '.join(registry.NAMES)}) VALUES ({', '.join('?' * len(registry.NAMES))})", rows)
        conn.execute("COMMIT")


def main() -> None:
    root = Path(tempfile.mkdtemp(prefix="nbsubagents-bench-query-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)  # its many run folders go with it
    fill(root)
    filters = dict(status="completed", preset="scout")
    sql, args = query.build_query(**filters, select=query.FRAME_SELECT)
    full_sql, _ = query.build_query(**filters)
    lines_sql, _ = query.build_query(**filters, select=query.csv_select(store.FRAME, store.FRAME_NUMBERS))
    db = registry.db_path(root)
    query.runs(root=root, **filters)  # first use: schema, sync

    def bare(statement: str) -> list:
        conn = sqlite3.connect(db)
        rows = conn.execute(statement, args).fetchall()
        conn.close()
        return rows

    def timed(wall: list, cpu: list, work: Callable[[], Any]) -> Any:
        c0, t0 = time.process_time(), time.perf_counter()
        out = work()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
        return out

    with sqlite3.connect(db) as conn:
        plan = " / ".join(row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql, args))
        lines_plan = " / ".join(row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + lines_sql, args))
    load_before = Path("/proc/loadavg").read_text().split()[0]
    ours, same, full, lines, ours_cpu, same_cpu, full_cpu, lines_cpu = [], [], [], [], [], [], [], []
    for _ in range(21):  # only the lengths are kept: neither side's garbage is left for the other's collector
        frame = len(timed(ours, ours_cpu, lambda: query.runs(root=root, **filters)))
        rows = len(timed(same, same_cpu, lambda: bare(sql)))
        timed(full, full_cpu, lambda: bare(full_sql))
        timed(lines, lines_cpu, lambda: bare(lines_sql))
    assert frame == rows
    o, b, f = statistics.median(ours), statistics.median(same), statistics.median(full)
    kept = statistics.median(lines)
    oc, bc = statistics.median(ours_cpu), statistics.median(same_cpu)
    print(f"rows in registry               : {N:,}; matching status=completed & preset=scout: {frame:,}")
    print(f"runs() (DataFrame)             : median {o * 1000:.0f} ms (target < 200 ms)")
    print(f"plain sqlite3, runs()'s query  : median {b * 1000:.0f} ms")
    print(f"ratio                          : {o / b:.2f} ({o * 1000:.0f} ms / {b * 1000:.0f} ms)")
    print(f"plain sqlite3, full-row query  : median {f * 1000:.0f} ms (every SELECTED column; "
          f"runs() / it = {o / f:.2f})")
    print(f"plain sqlite3, runs()' lines   : median {kept * 1000:.0f} ms (the SQL runs() sends; runs() / it = "
          f"{o / kept:.2f})")
    print(f"CPU time                       : runs() {oc * 1000:.0f} ms, its query {bc * 1000:.0f} ms, ratio {oc / bc:.2f}")
    print(f"query plan                     : {plan}")
    print(f"query plan of runs()           : {lines_plan}")
    print(f"load average (1 min)           : {load_before} -> {Path('/proc/loadavg').read_text().split()[0]}")

if __name__ == "__main__":
    main()
