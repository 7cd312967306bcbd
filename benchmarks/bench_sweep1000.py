"""A 1,000-run sweep: ``experiment()`` locally and through a Dask LocalCluster against bare pi, at concurrency 16.

Three arms run the same scripted tasks at the same concurrency: bare ``pi --mode json`` (16 threads, each starting
pi and waiting for it), ``nbsubagents.experiment(..., concurrency=16)`` with the local process launcher, and the
same experiment on a Dask LocalCluster (2 worker processes x 8 slots, Dask's timers set as the Dask guide
sets them: ``bench_dask.py`` says why). The runs are split into BLOCKS blocks and
the arms alternate block by block, so a change of the machine's load falls on every arm alike. Printed:

- each arm's throughput (runs per second) and its ratio to bare pi (target: within 10 %);
- the kernel's resident memory before, after every block and at its peak (target: flat), and each supervisor's
  peak memory (``VmHWM``, sampled every 0.5 s from ``/proc`` while the sweep runs: median and largest);
- the registry's size and the time of ``nbsubagents.runs()`` over every run at the end;
- a check that every run ended and was recorded exactly once (one registry row per run directory, every
  experiment's runs all ``completed``).

``make bench`` runs it; ``.venv/bin/python benchmarks/bench_sweep1000.py [--runs N] [--blocks B]`` (on 2 cores
1,000 runs per arm take a while: ``--runs 200`` measures the same at a fifth of the time).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbsubagents
from nbsubagents import _registry as registry
from nbsubagents._child.artifacts import TERMINAL, runs_dir
from nbsubagents.demo import copy_example_project, stop_scripted_model, use_scripted_model
from nbsubagents._pi import find_pi

CONCURRENCY = 16
WORKERS, SLOTS = 2, 8  # the Dask arm: 2 worker processes x 8 slots = CONCURRENCY
TASK = "read README.md\nrun: echo {i}"


def rss_mb(pid: int | str = "self", field: str = "VmRSS") -> float | None:
    """A process's resident memory (``VmRSS``) or its peak (``VmHWM``) in MB; None when it is gone."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


class SupervisorPeaks:
    """Samples the peak resident memory (``VmHWM``) of every supervisor of the runs under ``runs`` every ``every``
    seconds: a supervisor names its run directory in its argv. Other jobs' supervisors on the machine are left
    out."""

    def __init__(self, runs: Path, every: float = 0.5) -> None:
        self.marker = str(runs).encode()
        self.peaks: dict[int, float] = {}
        self.every = every
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self.stop.wait(self.every):
            for name in os.listdir("/proc"):
                if not name.isdigit():
                    continue
                try:
                    with open(f"/proc/{name}/cmdline", "rb") as fh:
                        argv = fh.read()
                    if b"nbsubagents._child.supervisor" not in argv or self.marker not in argv:
                        continue
                except OSError:
                    continue
                peak = rss_mb(name, "VmHWM")
                if peak is not None:
                    self.peaks[int(name)] = max(peak, self.peaks.get(int(name), 0.0))

    def __enter__(self) -> SupervisorPeaks:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()


def bare_pi(tasks: list[str]) -> None:
    """``tasks`` through bare pi, CONCURRENCY at once (the scripted model, the scout preset's tools)."""
    argv = [find_pi(), "--mode", "json", "-p", "--no-session", "--model", "demo/scripted", "--tools", "read,ls,bash"]
    env = {**os.environ, "PI_SUBAGENTS_CHILD": "1"}

    def one(task: str) -> None:
        proc = subprocess.run([*argv, task], stdin=subprocess.DEVNULL, capture_output=True, env=env)
        assert proc.returncode == 0 and b'"agent_end"' in proc.stdout, proc.stderr[-500:]

    with ThreadPoolExecutor(CONCURRENCY) as pool:
        list(pool.map(one, tasks))


def sweep(name: str, tasks: list[str], **executor: object) -> None:
    exp = nbsubagents.experiment(name, tasks=tasks, presets=["scout"], concurrency=CONCURRENCY, show=False,
                                 **executor)
    counts = exp.counts()
    assert counts["completed"] == len(tasks), (name, counts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000, help="runs per arm (default 1000)")
    parser.add_argument("--blocks", type=int, default=4, help="blocks the arms alternate over (default 4)")
    args = parser.parse_args()
    import dask
    import distributed

    from nbsubagents._lifecycle.dask_cluster import CLUSTER_CONFIG, RESOURCE

    base = Path(os.environ.get("TMPDIR", "/tmp")) / f"nbsubagents-bench-sweep-{os.getpid()}"
    project = copy_example_project(base / "project")
    use_scripted_model(project / ".pi" / "demo-agent")  # its environment is the workers' too: set it first
    nbsubagents.configure(max_tasks=max(1000, args.runs))
    os.chdir(project)
    per_block = max(1, args.runs // args.blocks)
    seconds = {"bare pi": 0.0, "experiment, local": 0.0, "experiment, dask": 0.0}
    kernel = [rss_mb()]
    dask.config.set(CLUSTER_CONFIG)  # before the cluster: its workers take it
    with distributed.LocalCluster(n_workers=WORKERS, threads_per_worker=SLOTS, processes=True,
                                  resources={RESOURCE: SLOTS}, local_directory=str(base / "workers"),
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client, \
            SupervisorPeaks(runs_dir(project)) as peaks:
        warm = {nbsubagents.run("scout", "ls src", show=False).run_id,  # warm caches (the model list, bytecode)
                nbsubagents.run("scout", "ls src", show=False, executor="dask", dask_client=client).run_id}
        kernel.append(rss_mb())
        for block in range(args.blocks):
            tasks = [TASK.format(i=f"{block}-{i}") for i in range(per_block)]
            arms = {"bare pi": lambda: bare_pi(tasks),
                    "experiment, local": lambda: sweep(f"local-{block}", tasks),
                    "experiment, dask": lambda: sweep(f"dask-{block}", tasks, executor="dask", dask_client=client)}
            for arm, go in arms.items():
                t0 = time.perf_counter()
                go()
                seconds[arm] += time.perf_counter() - t0
            kernel.append(rss_mb())
    stop_scripted_model()

    root = project
    t0 = time.perf_counter()
    frame = nbsubagents.runs(limit=None)
    runs_seconds = time.perf_counter() - t0
    dirs = {p.name for p in runs_dir(root).iterdir() if p.is_dir()}
    ids = list(frame["run_id"])
    n = per_block * args.blocks
    db = registry.db_path(root)
    size = sum(p.stat().st_size for p in db.parent.glob(db.name + "*"))

    print(f"{n} scripted runs per arm, concurrency {CONCURRENCY}, {args.blocks} blocks alternating, "
          f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
    bare = n / seconds["bare pi"]
    for arm, s in seconds.items():
        print(f"{arm:18}: {s:7.1f} s, {n / s:5.2f} runs/s, throughput ratio to bare pi {n / s / bare:.3f}")
    sup = sorted(peaks.peaks.values())
    print(f"kernel RSS (MB): start {kernel[0]:.0f}, after warm-up {kernel[1]:.0f}, after each block "
          f"{', '.join(f'{m:.0f}' for m in kernel[2:])}; peak {rss_mb('self', 'VmHWM'):.0f}")
    if sup:
        print(f"supervisor peak RSS (MB) over {len(sup)} sampled: median {statistics.median(sup):.1f}, "
              f"largest {sup[-1]:.1f}")
    print(f"registry: {len(ids)} rows, {size / 1e6:.1f} MB; runs() over them: {runs_seconds * 1000:.0f} ms")
    assert len(ids) == len(set(ids)), "a run recorded twice"
    assert set(ids) == dirs, f"rows and run directories differ: {len(set(ids) ^ dirs)} runs"
    assert set(frame["status"]) <= set(TERMINAL), f"runs not ended: {sorted(set(frame['status']) - set(TERMINAL))}"
    assert len(set(ids) - warm) == 2 * n, f"{len(set(ids) - warm)} experiment runs recorded, {2 * n} started"
    print(f"every run ended and was recorded exactly once: {len(ids)} rows = {len(dirs)} run directories")


if __name__ == "__main__":
    try:
        main()
    finally:
        stop_scripted_model()
