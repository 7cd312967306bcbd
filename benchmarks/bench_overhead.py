"""Wall time of nbsubagents.run over a direct `pi --mode json` run of the same scripted task.

Both sides run the real pinned pi against the same scripted model, in pairs whose order alternates (direct first,
then run() first), so a drift of the machine's speed falls on both sides alike. Printed: each side's median and their
ratio, the median of the pairs' own ratios (the figure judged: a pair's two runs share the machine's state of the
moment), and the mean difference in ms with its standard error. Target: <= 1.02. A warm-up run comes first (the
model list, the OS page cache). Run with `make bench` or
`.venv/bin/python benchmarks/bench_overhead.py [N]`.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbsubagents
from nbsubagents._pi import find_pi
from nbsubagents._pi.locate import pi_command
from nbsubagents.demo import copy_example_project, stop_scripted_model, use_scripted_model

TASK = "read README.md\nls src\nrun: echo hi"


def main() -> None:
    # pi's own wall time varies by +-15% from run to run here: the mean difference of 30 pairs had a standard error
    # of 10-19 ms (1-2 % of a run), as large as the margin judged; 60 pairs halve its variance.
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 60
    project = copy_example_project(Path(tempfile.mkdtemp(prefix="nbsubagents-bench-")) / "project")
    os.chdir(project)
    use_scripted_model(project / ".pi" / "demo-agent")
    pi = find_pi()
    argv = [*pi_command(pi), "--mode", "json", "-p", "--no-session", "--model", "demo/scripted", "--tools", "read,ls,bash", TASK]
    nbsubagents.run("scout", TASK, show=False)  # warm caches: the model list, the OS page cache
    env = {**os.environ, "PI_SUBAGENTS_CHILD": "1"}

    def direct_run() -> float:
        t0 = time.perf_counter()
        proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, env=env)
        took = time.perf_counter() - t0
        assert proc.returncode == 0 and b'"agent_end"' in proc.stdout
        return took

    spans: list[tuple[float, ...]] = []  # per run(), in ms: before run_start, to run_end, after run_end

    def wrapped_run() -> float:
        called, t0 = time.time(), time.perf_counter()
        run = nbsubagents.run("scout", TASK, show=False)
        took = time.perf_counter() - t0
        returned = time.time()
        assert run.status == "completed", run.error
        events = run.events()
        start, end = events[0], events[-1]
        assert (start["type"], end["type"]) == ("run_start", "run_end")
        spans.append(tuple(1000 * t for t in (start["ts"] - called, end["ts"] - start["ts"], returned - end["ts"])))
        return took

    direct, wrapped = [], []
    for i in range(n):
        if i % 2:
            wrapped.append(wrapped_run())
            direct.append(direct_run())
        else:
            direct.append(direct_run())
            wrapped.append(wrapped_run())
    d, w = statistics.median(direct), statistics.median(wrapped)
    pairs = statistics.median(b / a for a, b in zip(direct, wrapped))
    diffs = [(b - a) * 1000 for a, b in zip(direct, wrapped)]
    error = standard_error(diffs)
    print(f"direct pi --mode json : median {d:.3f} s over {n} runs")
    print(f"nbsubagents.run       : median {w:.3f} s over {n} runs (ratio of the medians {w / d:.3f})")
    mean = statistics.mean(diffs)
    low, high = mean - 1.96 * error, mean + 1.96 * error  # the 95 % interval, in ms
    print(f"run() over direct pi, {n} pairs: mean difference {mean:.1f} ms +- {error:.1f} (95 %: {low:.1f} to "
          f"{high:.1f} ms, {low / d / 10:+.1f} to {high / d / 10:+.1f} % of a direct run)")
    # Where the difference lies: the supervisor writes run_start just after it starts pi (1-3 ms: pi starts first)
    # and run_end once pi has exited (timestamps in ms). Before run_start: the kernel's preparation, the supervisor's
    # start and pi's spawn; between them: pi's life under a supervisor, against a direct run's whole wall time;
    # after run_end: result.json, the supervisor's exit and the kernel's registry row.
    before, during, after = zip(*spans)
    lives = [b - 1000 * a for a, b in zip(direct, during)]  # pi's life under a supervisor over a direct run, in ms
    print(f"run() split (medians): call to run_start {statistics.median(before):.1f} ms, run_start to run_end "
          f"{statistics.median(during):.0f} ms (a direct run: {d * 1000:.0f} ms), run_end to return "
          f"{statistics.median(after):.1f} ms")
    print(f"the mean difference, split: before run_start {statistics.mean(before):.1f} ms, run_start to run_end "
          f"{statistics.mean(lives):+.1f} ms +- {standard_error(lives):.1f} over a direct run, "
          f"after run_end {statistics.mean(after):.1f} ms")
    print(f"ratio, median of the pairs (target <= 1.02): {pairs:.3f}")


def standard_error(values: list[float]) -> float:
    """The standard error of the mean of ``values``."""
    return statistics.stdev(values) / len(values) ** 0.5


if __name__ == "__main__":
    try:
        main()
    finally:
        stop_scripted_model()  # the detached demo model server this benchmark started
