"""Wall time of one supervisor from spawn to exit around an instant child (``/bin/true``).

What it measures is the supervisor's own cost per run: interpreter start, imports, writing
supervisor.json / events / result.json, and the end-of-run sweep for leftover processes.
Prints the median and quartiles of N runs (default 40).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main(n: int = 40) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        times = []
        for i in range(n):
            run_dir = Path(tmp) / f"run{i}"
            run_dir.mkdir()
            meta = {"runId": f"20260101-000000-{i:06x}", "argv": ["/bin/true"], "cwd": tmp, "timeout": 60}
            (run_dir / "meta.json").write_text(json.dumps(meta))
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "nbsubagents.supervisor", str(run_dir)], check=True)
            times.append(time.perf_counter() - t0)
            assert json.loads((run_dir / "result.json").read_text())["exitCode"] == 0
    q = statistics.quantiles(times, n=4)
    print(f"supervisor start-to-exit around /bin/true: median {statistics.median(times) * 1000:.1f} ms "
          f"(quartiles {q[0] * 1000:.1f}-{q[2] * 1000:.1f} ms, n={n})")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 40)
