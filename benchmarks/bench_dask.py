"""64 scripted runs through Dask (a LocalCluster of 2 worker processes) against the local process launcher.

Both arms run the same 64 tasks at the same concurrency (2 workers x SLOTS runs each, and ``run_parallel`` with
``concurrency=2 * SLOTS``) over ROUNDS rounds, each round in another order of the arms; what Dask adds on one
machine (a task submit per run, a worker thread starting the supervisor, the heartbeat, the claim file) is judged
as the median over the rounds of each Dask arm's time over the local arm's of the same round (the arms of a round
share the machine's state of the moment); the ratio of the medians is printed beside it, and each round's ratio.
Beside them, the CPU this process (the notebook's side and the LocalCluster's scheduler) and the cluster's worker
processes spent on each arm: what Dask adds on 2 cores that the runs keep busy is taken from pi.

The Dask arm submits every run at once (``run_parallel`` without ``concurrency``: the workers' slots bound it, the
scheduler refills them); a third arm passes ``concurrency=2 * SLOTS``, so the notebook refills the slots as runs
end, as ``experiment()`` and ``bench_sweep1000.py`` do: how soon the kernel sees a run's end counts there.

The cluster is set up as the Dask guide (docs/user/dask.md) sets it up: with Dask's timers that a run's task does
not need (the profiler, the event loop's watchdog, the memory monitor: ``dask_cluster.CLUSTER_CONFIG``) turned off
or slowed, since a run's task only waits for its supervisor and on 2 busy cores their CPU is taken from pi.
``--dask-defaults`` leaves Dask's defaults, to measure what they cost.

``make bench`` runs it; ``.venv/bin/python benchmarks/bench_dask.py [RUNS] [SLOTS] [--dask-defaults]``.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psutil

import nbsubagents
from nbsubagents.demo import copy_example_project, stop_scripted_model, use_scripted_model

ROUNDS = 6  # a round's ratio moves by 5-10 % here: two rounds left the median within several hundredths of itself,
# four (the tenth to eighteenth sessions) anywhere between 0.96 and 1.11


def main(runs: int = 64, slots: int = 4, dask_defaults: bool = False) -> None:
    import dask
    import distributed

    from nbsubagents._lifecycle.dask_cluster import CLUSTER_CONFIG, RESOURCE

    base = Path(tempfile.mkdtemp(prefix="nbsubagents-bench-dask-"))
    project = copy_example_project(base / "project")
    use_scripted_model(project / ".pi" / "demo-agent")  # its environment is the workers' too: set it first
    nbsubagents.configure(max_tasks=1000)
    concurrency = 2 * slots
    items = [{"preset": "scout", "task": f"read README.md\nrun: echo run{i}"} for i in range(runs)]
    times: dict[str, list[float]] = {"dask": [], "local": [], "dask, kernel refills": []}
    cpu: dict[str, list[float]] = {name: [] for name in times}
    if not dask_defaults:
        dask.config.set(CLUSTER_CONFIG)  # before the cluster: its workers take it
    with distributed.LocalCluster(n_workers=2, threads_per_worker=slots, processes=True,
                                  resources={RESOURCE: slots}, local_directory=str(base / "workers"),
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        os.chdir(project)
        nbsubagents.run("scout", "ls src", show=False)  # warm caches (model list, bytecode)
        nbsubagents.run("scout", "ls src", show=False, executor="dask", dask_client=client)
        arms = {
            "local": lambda: nbsubagents.run_parallel(items, concurrency=concurrency, show=False),
            "dask": lambda: nbsubagents.run_parallel(items, show=False, executor="dask", dask_client=client),
            "dask, kernel refills": lambda: nbsubagents.run_parallel(items, concurrency=concurrency, show=False,
                                                                     executor="dask", dask_client=client),
        }
        names = list(arms)
        for i in range(ROUNDS):
            for name in names[i % 3:] + names[:i % 3]:  # each arm first, second and third in turn
                t0, c0 = time.perf_counter(), cluster_cpu()
                done = arms[name]()
                times[name].append(time.perf_counter() - t0)
                cpu[name].append(cluster_cpu() - c0)
                assert all(r.status == "completed" for r in done), [r.error for r in done if r.status != "completed"]
    stop_scripted_model()
    print(f"{runs} scripted runs, concurrency {concurrency} ({2} Dask workers x {slots} slots), "
          f"{ROUNDS} rounds, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}, "
          f"{'Dask' if dask_defaults else 'the Dask guide'}'s timers")
    p = statistics.median(times["local"])
    print(f"local process launcher : median {p:.1f} s ({p / runs * 1000:.0f} ms/run)  {times['local']}")
    print(f"{'':22s}   CPU of this process and the cluster's workers: median {statistics.median(cpu['local']):.2f} s")
    for name in ("dask", "dask, kernel refills"):
        m = statistics.median(times[name])
        paired = statistics.median(a / b for a, b in zip(times[name], times["local"]))
        print(f"{name:22s} : median {m:.1f} s ({m / runs * 1000:.0f} ms/run)  {times[name]}")
        ratios = ", ".join(f"{a / b:.3f}" for a, b in zip(times[name], times["local"]))
        print(f"{'':22s}   over local: median of the rounds' ratios {paired:.3f} (target <= 1.02), "
              f"ratio of the medians {m / p:.3f}; the rounds: {ratios}")
        print(f"{'':22s}   CPU of this process and the cluster's workers: median {statistics.median(cpu[name]):.2f} s")


def cluster_cpu() -> float:
    """CPU seconds spent so far by this process (the notebook's side, the LocalCluster's scheduler) and the cluster's
    nannies and workers (its processes started by multiprocessing), not by the runs' supervisors and pi."""
    me = psutil.Process()
    total = sum(me.cpu_times()[:2])
    for child in me.children(recursive=True):
        try:
            if "multiprocessing" in " ".join(child.cmdline()):
                total += sum(child.cpu_times()[:2])
        except psutil.Error:
            pass  # it ended meanwhile
    return total


if __name__ == "__main__":
    numbers = [int(a) for a in sys.argv[1:] if a != "--dask-defaults"]
    main(*numbers[:2], dask_defaults="--dask-defaults" in sys.argv[1:])
