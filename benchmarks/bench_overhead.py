"""Wall time of nbsubagents.run over a direct `pi --mode json` run of the same scripted task.

Both sides run the real pinned pi against the same scripted model, alternating, several times;
the ratio of medians is printed. Target: <= 1.02. A warm-up run comes first (the model list, the OS page cache, and
the fork server the process launcher starts at a process's first run: the runs measured are forked, as a kernel's
runs after its first are). Run with `make bench` or
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
from nbsubagents.pi import find_pi
from nbsubagents.demo import copy_example_project, stop_scripted_model, use_scripted_model

TASK = "read README.md\nls src\nrun: echo hi"


def main() -> None:
    # pi's own wall time varies by +-15% from run to run here: 15 alternating pairs steady the medians.
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    project = copy_example_project(Path(tempfile.mkdtemp(prefix="nbsubagents-bench-")) / "project")
    os.chdir(project)
    use_scripted_model(project / ".pi" / "demo-agent")
    pi = find_pi()
    argv = [pi, "--mode", "json", "-p", "--no-session", "--model", "demo/scripted", "--tools", "read,ls,bash", TASK]
    nbsubagents.run("scout", TASK, show=False)  # warm caches: the model list, the OS page cache
    direct, wrapped = [], []
    for _ in range(n):
        t0 = time.perf_counter()
        proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, env={**os.environ, "PI_SUBAGENTS_CHILD": "1"})
        direct.append(time.perf_counter() - t0)
        assert proc.returncode == 0 and b'"agent_end"' in proc.stdout
        t0 = time.perf_counter()
        run = nbsubagents.run("scout", TASK, show=False)
        wrapped.append(time.perf_counter() - t0)
        assert run.status == "completed", run.error
    d, w = statistics.median(direct), statistics.median(wrapped)
    print(f"direct pi --mode json : median {d:.3f} s over {n} runs")
    print(f"nbsubagents.run       : median {w:.3f} s over {n} runs")
    print(f"ratio (target <= 1.02): {w / d:.3f}")


if __name__ == "__main__":
    try:
        main()
    finally:
        stop_scripted_model()  # the detached demo model server this benchmark started
