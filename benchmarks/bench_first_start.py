"""The first ``nbsubagents.start()`` in a fresh process (a new kernel): cold and warm model-list cache.

Each sample is a new Python process in a copy of the example project, pointed at the scripted model through
the real pinned pi. It imports nbsubagents, then times its first ``start()`` (which resolves the preset's model
against pi's model list), waits for the run and exits. "cold" gives each process an empty cache directory
(``XDG_CACHE_HOME``): the model list costs a ``pi --list-models`` start-up; "warm" shares one cache that a first
process filled, with nothing changed since: no pi start-up. Samples alternate cold/warm so machine load hits both
alike. Target: warm < 0.1 s (cold is pi's own start, once per pi and provider change). Run with
``.venv/bin/python benchmarks/bench_first_start.py [PAIRS]``; set
``NBSUBAGENTS_PI`` to measure another pi (``pi1/node_modules/.bin/pi`` for pi 1.x).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from nbsubagents.demo import copy_example_project
from nbsubagents._pi.locate import find_pi, pi_package
from nbsubagents._child.harnesses.pi import write_agent_dir
from nbsubagents._pi.scripted import ScriptedModel

CHILD = """
import time
import nbsubagents
from nbsubagents._lifecycle import watcher
watcher.remove_notice_handler(watcher.print_notice)
t0 = time.perf_counter()
run = nbsubagents.start("scout", "read README.md", show=False)
took = time.perf_counter() - t0
run.wait(120)
assert run.status == "completed", run.error
print(took)
"""


def first_start(project: Path, env: dict[str, str]) -> float:
    out = subprocess.run([sys.executable, "-c", CHILD], cwd=project, env=env, capture_output=True, text=True,
                         timeout=180, stdin=subprocess.DEVNULL)
    if out.returncode != 0:
        raise SystemExit(f"the child failed:\n{out.stdout}\n{out.stderr}")
    return float(out.stdout.strip().splitlines()[-1])


def main(pairs: int = 7) -> None:
    base = Path(tempfile.mkdtemp(prefix="nbsubagents-bench-first-"))
    project = copy_example_project(base / "project")
    with ScriptedModel() as model:
        agent = write_agent_dir(base / "agent", model.url)
        env = {**os.environ, "PI_CODING_AGENT_DIR": str(agent), "PI_OFFLINE": "1", "NBSUBAGENTS_DISPLAY": "text"}
        warm_env = {**env, "XDG_CACHE_HOME": str(base / "warm-cache")}
        first_start(project, warm_env)  # fills the shared cache (and lets pi create its auth.json once)
        first_start(project, warm_env)
        cold, warm = [], []
        for i in range(pairs):
            cold.append(first_start(project, {**env, "XDG_CACHE_HOME": str(base / f"cold-cache-{i}")}))
            warm.append(first_start(project, warm_env))
    cold_ms, warm_ms = 1000 * statistics.median(cold), 1000 * statistics.median(warm)
    package = pi_package(find_pi(project))
    print(f"pi {package.name}@{package.version}" if package else f"pi {find_pi(project)}")
    print(f"first start() in a fresh process, cold model cache: median {cold_ms:.0f} ms "
          f"(min {1000 * min(cold):.0f}, max {1000 * max(cold):.0f}) over {pairs}  (pi asked once)")
    print(f"first start() in a fresh process, warm model cache: median {warm_ms:.0f} ms "
          f"(min {1000 * min(warm):.0f}, max {1000 * max(warm):.0f}) over {pairs}  (target < 100 ms)")
    print(f"cold / warm: {cold_ms / warm_ms:.1f}x")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 7)
