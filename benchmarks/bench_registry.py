"""How long ``nbsubagents.start()`` takes to return, and ``status()`` over a 10,000-row registry.

``start()``: the real pinned pi against the scripted model in a copy of the example project; one
foreground run warms the caches first (as in a kernel after its first run), then N background runs are started one
by one and the time to return is measured (the runs themselves finish in the background and are
waited for before the next start, so each start sees the same machine load).

``status()``: 10,000 synthetic terminal runs (directories with meta.json and result.json, as a long
project history), a few of them active; the registry is rebuilt from the directories once, then
``status()``, ``status(include_completed=True)`` (and its text table) and ``status(run_id)`` are
timed. Run with ``.venv/bin/python benchmarks/bench_registry.py [N] [ROWS]``.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import nbsubagents
from nbsubagents import _registry as registry
from nbsubagents._lifecycle import watcher
from nbsubagents._lifecycle import reconcile
from nbsubagents.demo import copy_example_project, stop_scripted_model, use_scripted_model


def _median_ms(samples: list[float]) -> str:
    med, low, high = (1000 * f(samples) for f in (statistics.median, min, max))
    return f"median {med:.1f} ms (min {low:.1f}, max {high:.1f})"


def bench_start(n: int) -> None:
    project = copy_example_project(Path(tempfile.mkdtemp(prefix="nbsubagents-bench-")) / "project")
    os.chdir(project)
    use_scripted_model(project / ".pi" / "demo-agent")
    for _ in range(2):  # warm: the model list (the 1st listing creates auth.json, which the 2nd caches on),
        nbsubagents.run("scout", "read README.md", show=False)  # the page cache, the registry
    watcher.remove_notice_handler(watcher.print_notice)
    times = []
    for i in range(n):
        t0 = time.perf_counter()
        run = nbsubagents.start("scout", f"read README.md\nrun: echo {i}", show=False)
        times.append(time.perf_counter() - t0)
        run.wait(120)
        while watcher.watching():
            time.sleep(0.05)
        assert run.status == "completed", run.error
    print(f"start() returns          : {_median_ms(times)} over {n} starts")


def _synthetic(runs: Path, count: int) -> list[str]:
    ids = []
    t0 = time.time() - count * 60
    for i in range(count):
        run_id = time.strftime("%Y%m%d-%H%M%S", time.gmtime(t0 + i * 60)) + f"-{i:06x}"
        run_dir = runs / run_id
        run_dir.mkdir(parents=True)
        created = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(t0 + i * 60))
        meta = {"runId": run_id, "name": f"task{i % 7}", "preset": ("scout", "scribe")[i % 2], "mode": "background",
                "task": f"read file{i}.py\nsummarise it", "cwd": str(runs), "resolvedModel": "demo/scripted",
                "createdAt": created, "launcher": {"pid": 1, "host": "elsewhere"}}
        (run_dir / "meta.json").write_text(json.dumps(meta))
        if i % 1000 != 999:  # ten stay active
            status = ("completed", "completed", "completed", "failed", "aborted")[i % 5]
            (run_dir / "result.json").write_text(json.dumps({
                "runId": run_id, "status": status, "exitCode": 0, "stopReason": "stop",
                "errorMessage": None if status == "completed" else "it went wrong",
                "finalText": f"Summary of file{i}.py\n" + "details " * 40,
                "usage": {"input": 900, "output": 100, "totalTokens": 1000, "cost": 0.001},
                "turns": 2, "toolCalls": 1, "startedAt": created, "endedAt": created, "durationSeconds": 3.0}))
        ids.append(run_id)
    return ids


def bench_status(rows: int, repeat: int = 7) -> None:
    root = Path(tempfile.mkdtemp(prefix="nbsubagents-bench-registry-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)  # its many run folders go with it
    ids = _synthetic(root / ".pi" / "subagents" / "runs", rows)
    t0 = time.perf_counter()
    registry.rebuild(root)
    print(f"rebuild() of {rows:,} runs   : {(time.perf_counter() - t0) * 1000:.0f} ms")
    os.chdir(root)
    registry.forget_loaded()
    reconcile.forget()
    t0 = time.perf_counter()
    reconcile.status()
    print(f"first status() in a process (syncs the {rows:,} run directories once): "
          f"{(time.perf_counter() - t0) * 1000:.0f} ms")
    for label, call in [
        ("status()                ", lambda: reconcile.status(announce=False)),
        ("status() + announce     ", lambda: reconcile.status()),
        ("status(all)             ", lambda: reconcile.status(include_completed=True, announce=False)),
        ("status(all) + its table ", lambda: repr(reconcile.status(include_completed=True, announce=False))),
        ("status(run_id prefix)   ", lambda: reconcile.status(ids[rows // 2][:-2], announce=False)),
        ("counts()                ", lambda: registry.counts()),
    ]:
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            call()
            times.append(time.perf_counter() - t0)
        print(f"{label} : {_median_ms(times)} over {rows:,} rows")


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    rows = int(sys.argv[2]) if len(sys.argv) > 2 else 10_000
    bench_start(n)
    bench_status(rows)


if __name__ == "__main__":
    try:
        main()
    finally:
        stop_scripted_model()  # the detached demo model server this benchmark started
