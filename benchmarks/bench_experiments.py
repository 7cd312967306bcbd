"""A 200-run sweep on the scripted model against the same runs via run_parallel, and compare() over 10,000 runs.

1. Wall time of ``nbsubagents.experiment`` (2 tasks x 2 presets x 50 repeats = 200 runs, concurrency 4) against
   ``run_parallel`` of the same 200 tasks at the same concurrency, alternating; the ratio is printed (what the
   experiment adds: the plan, params/tags in meta.json, the registry columns, a scorer per run).
2. ``Experiment.compare()`` (frame from the registry + per-cell statistics) over 10,000 stored runs of one
   experiment, each with meta.json/result.json/scores.json (target < 100 ms), against reading the same rows
   (the columns ``frame()`` reads) with plain sqlite3, alternating; both sides and their ratio are printed, the
   process's first compare() (its failed-steps look-ups and t quantiles not cached yet) on its own, and
   ``frame()`` alone.

``make bench`` runs it; ``.venv/bin/python benchmarks/bench_experiments.py [RUNS | compare]``.
"""

from __future__ import annotations

import atexit
import json
import os
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

import nbsubagents
from nbsubagents import _registry as registry
from nbsubagents._child.artifacts import runs_dir
from nbsubagents.demo import copy_example_project, stop_scripted_model, use_scripted_model
from nbsubagents._sweeps import frames

TASKS = ["ls src", "read README.md"]
PRESETS = ["scout", "scribe"]
CONCURRENCY = 4


def sweep(runs: int) -> None:
    project = copy_example_project(Path(tempfile.mkdtemp(prefix="nbsubagents-bench-exp-")) / "project")
    os.chdir(project)
    use_scripted_model(project / ".pi" / "demo-agent")
    nbsubagents.configure(max_tasks=1000)
    repeats = max(1, runs // (len(TASKS) * len(PRESETS)))
    n = repeats * len(TASKS) * len(PRESETS)
    items = [{"preset": p, "task": t} for t in TASKS for p in PRESETS for _ in range(repeats)]
    nbsubagents.run("scout", "ls src", show=False)  # warm caches
    times: dict[str, list[float]] = {"experiment": [], "run_parallel": []}
    for round_ in range(2):
        t0 = time.perf_counter()
        done = nbsubagents.run_parallel(items, concurrency=CONCURRENCY, show=False)
        times["run_parallel"].append(time.perf_counter() - t0)
        assert all(r.status == "completed" for r in done)
        t0 = time.perf_counter()
        exp = nbsubagents.experiment(f"bench-{round_}", tasks=TASKS, presets=PRESETS, repeats=repeats,
                                     concurrency=CONCURRENCY, scorers=[lambda run: len(run.output)], show=False)
        times["experiment"].append(time.perf_counter() - t0)
        assert exp.counts()["completed"] == n, exp
    e, p = statistics.median(times["experiment"]), statistics.median(times["run_parallel"])
    print(f"sweep of {n} runs, concurrency {CONCURRENCY}, 2 rounds alternating")
    print(f"run_parallel           : median {p:.1f} s ({p / n * 1000:.0f} ms/run)")
    print(f"experiment (+1 scorer) : median {e:.1f} s ({e / n * 1000:.0f} ms/run)")
    print(f"ratio experiment/run_parallel: {e / p:.3f}")


def compare_10k(n: int = 10_000) -> None:
    root = Path(tempfile.mkdtemp(prefix="nbsubagents-bench-cmp-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)  # its many run folders go with it
    base = runs_dir(root)
    base.mkdir(parents=True)
    rng = random.Random(3)
    for i in range(n):
        d = base / f"20260101-000000-{i:06x}"
        d.mkdir()
        preset, model = rng.choice(PRESETS), rng.choice(["demo/scripted", "demo/mini"])
        params = {"task_id": f"task-{i % 5}", "preset": preset, "model": model, "repeat": i}
        (d / "meta.json").write_text(json.dumps({"runId": d.name, "preset": preset, "resolvedModel": model,
                                                 "experiment": "big", "params": params, "tags": {"n": "10k"},
                                                 "createdAt": "2026-01-01T00:00:00.000Z"}))
        (d / "result.json").write_text(json.dumps({"status": rng.choice(["completed"] * 9 + ["failed"]),
                                                   "durationSeconds": rng.random() * 20, "toolCalls": rng.randint(0, 9),
                                                   "usage": {"totalTokens": rng.randint(100, 9000),
                                                             "cost": rng.random() / 100}}))
        (d / "scores.json").write_text(json.dumps({"scores": {"ok": rng.random() < 0.7, "quality": rng.random()}}))
    assert registry.rebuild(root) == n
    exp = nbsubagents.get_experiment("big", root)
    sql = (f"SELECT {', '.join(frames.READ)} FROM runs WHERE experiment = ? ORDER BY created_at, run_id")

    def bare() -> list:
        conn = sqlite3.connect(registry.db_path(root))
        rows = conn.execute(sql, ("big",)).fetchall()
        conn.close()
        return rows

    t0 = time.perf_counter()
    table = exp.compare(by=("preset", "model")).table
    first = time.perf_counter() - t0
    ours, plain, framed = [], [], []
    for _ in range(11):
        t0 = time.perf_counter()
        table = exp.compare(by=("preset", "model")).table
        ours.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        rows = bare()
        plain.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        frame = exp.frame()
        framed.append(time.perf_counter() - t0)
    assert int(table[("runs", "ran")].sum()) == n == len(rows) == len(frame)
    o, b = statistics.median(ours), statistics.median(plain)
    print(f"load average: {os.getloadavg()[0]:.2f}")
    print(f"compare() over {n:,} stored runs: median {o * 1000:.0f} ms (target < 100 ms); "
          f"the process's first: {first * 1000:.0f} ms; frame() alone: median {statistics.median(framed) * 1000:.0f} ms")
    print(f"plain sqlite3 read of the same rows: median {b * 1000:.0f} ms; "
          f"ratio compare()/read: {o / b:.2f} ({o * 1000:.0f} ms / {b * 1000:.0f} ms)")


if __name__ == "__main__":
    if sys.argv[1:] != ["compare"]:  # "compare": the second part alone
        try:
            sweep(int(sys.argv[1]) if len(sys.argv) > 1 else 200)
        finally:
            stop_scripted_model()
    compare_10k()
