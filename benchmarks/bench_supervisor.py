"""A supervisor's own cost per run, around an instant child (``/bin/true``).

Two figures: start-up (spawn until ``supervisor.json`` exists: interpreter, imports, the first write)
and its whole life (spawn to exit: also the child, events, ``result.json`` and the end-of-run sweep for
leftover processes). Prints medians and quartiles of N runs (default 60).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def once(run_dir: Path) -> tuple[float, float]:
    run_dir.mkdir()
    meta = {"runId": f"20260101-000000-{run_dir.name}", "argv": ["/bin/true"], "cwd": str(run_dir), "timeout": 60}
    (run_dir / "meta.json").write_text(json.dumps(meta))
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "nbsubagents.child.supervisor", str(run_dir)])
    while not (run_dir / "supervisor.json").exists() and proc.poll() is None:
        time.sleep(0.0005)
    started = time.perf_counter() - t0
    proc.wait()
    assert json.loads((run_dir / "result.json").read_text())["exitCode"] == 0
    return started, time.perf_counter() - t0


def describe(label: str, values: list[float]) -> str:
    q = statistics.quantiles(values, n=4)
    return f"{label}: median {statistics.median(values) * 1000:.1f} ms (quartiles {q[0] * 1000:.1f}-{q[2] * 1000:.1f})"


def main(n: int = 60) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        times = [once(Path(tmp) / f"{i:06x}") for i in range(n)]
    print(f"supervisor around /bin/true, n={n}: " + describe("start-up", [t[0] for t in times]) + "; "
          + describe("spawn to exit", [t[1] for t in times]))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 60)
