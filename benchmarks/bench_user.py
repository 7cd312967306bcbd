"""What a person sees of a run at a real model's latency: its first visible step, and the CPU it costs us.

The scripted model answers each step after 1-3 s, as real models do (``sleep:`` lines of the task). In pairs whose
order alternates, the same task runs once as a bare ``pi --mode json`` and once through ``nbsubagents.start()``:

- **time to the first visible step**: from the call to the first step a panel shows (the first ``tool_call`` in
  ``events.jsonl``), against bare pi's from its spawn to the first ``tool_execution_start`` on its stdout;
- **our CPU per run**: the kernel's own CPU over the run (``time.process_time``) plus its children's
  (``getrusage(RUSAGE_CHILDREN)``: the supervisor and the pi it reaped) less what a bare pi of the pair took,
  against that pi's CPU.

Printed: medians, the pairs' median differences and a 95 % interval of the mean difference, beside bare pi's
figures (no target: issue 52 asks for them to be seen; a person notices a tenth of a second as a pause). Run with `make bench` or `.venv/bin/python benchmarks/bench_user.py [PAIRS]` (default 10: each pair
takes ~12 s).
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbsubagents
from nbsubagents.demo import copy_example_project, stop_scripted_model, use_scripted_model
from nbsubagents._pi import find_pi
from nbsubagents._pi.locate import pi_command

TASK = "sleep: 2\nread README.md\nsleep: 1.5\nls src\nsleep: 1\nrun: echo hi\nsleep: 1.5\nsay: done"


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    pairs = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    project = copy_example_project(Path(tempfile.mkdtemp(prefix="nbsubagents-bench-user-")) / "project")
    os.chdir(project)
    use_scripted_model(project / ".pi" / "demo-agent")
    argv = [*pi_command(find_pi()), "--mode", "json", "-p", "--no-session", "--model", "demo/scripted", "--tools",
            "read,ls,bash", TASK]
    env = {**os.environ, "PI_SUBAGENTS_CHILD": "1"}
    nbsubagents.run("scout", "say: warm", show=False)  # the model list, the OS page cache

    def bare() -> tuple[float, float]:
        cpu, t0 = children_cpu(), time.perf_counter()
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, env=env)
        first = None
        for line in proc.stdout:  # type: ignore[union-attr]
            if first is None and json.loads(line).get("type") == "tool_execution_start":
                first = time.perf_counter() - t0
        assert proc.wait() == 0 and first is not None
        return first, children_cpu() - cpu

    def ours() -> tuple[float, float]:
        cpu, own, t0 = children_cpu(), time.process_time(), time.time()
        run = nbsubagents.start("scout", TASK, show=False)
        run.wait(120)
        spent = children_cpu() - cpu + time.process_time() - own
        assert run.status == "completed", run.error
        first = next(e["ts"] for e in run.events() if e["type"] == "tool_call") - t0
        return first, spent

    bare_first, bare_cpu, our_first, our_cpu = [], [], [], []
    for i in range(pairs):
        for side in ((bare, ours) if i % 2 else (ours, bare)):
            first, cpu = side()
            (bare_first if side is bare else our_first).append(first)
            (bare_cpu if side is bare else our_cpu).append(cpu)
    extra_cpu = [o - b for o, b in zip(our_cpu, bare_cpu)]  # our part of a run's CPU: all of it less pi's
    later = [1000 * (o - b) for o, b in zip(our_first, bare_first)]
    print(f"load average (1 min)         : {Path('/proc/loadavg').read_text().split()[0]}; {pairs} pairs")
    print(f"first visible step           : bare pi {statistics.median(bare_first):.3f} s, start() "
          f"{statistics.median(our_first):.3f} s; later by {interval(later)} ms")
    print(f"CPU per run                  : pi {1000 * statistics.median(bare_cpu):.0f} ms; ours (kernel + supervisor) "
          f"{interval([1000 * c for c in extra_cpu])} ms, "
          f"{statistics.median(e / b for e, b in zip(extra_cpu, bare_cpu)):.3f} of pi's")


def interval(values: list[float]) -> str:
    """The median, and the mean with its 95 % interval."""
    mean = statistics.mean(values)
    half = 1.96 * statistics.stdev(values) / len(values) ** 0.5
    return f"median {statistics.median(values):.1f} (mean {mean:.1f}, 95 %: {mean - half:.1f} to {mean + half:.1f})"


if __name__ == "__main__":
    try:
        main()
    finally:
        stop_scripted_model()  # the detached demo model server this benchmark started
