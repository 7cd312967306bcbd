"""Kernel CPU while 16 runs stream at full speed into live panels.

16 real runs (the pinned pi against the scripted model, 20 quick tool calls each) run at once; the
same workload is driven with no renderer, with plain text, and with widget panels, and this
process's CPU time (all its threads: the polling loop and the renderer, and the watcher's clock that ticks the panels) is
measured around ``lifecycle.drive.drive``. The scripted model runs in its own process so its CPU is not
counted. Reported: CPU seconds per run-second (CPU / sum of the runs' durations), share of one
core, events and renders.

Two placements: ``in-process`` (widgets without a frontend: no comm, so no message is serialized)
and ``kernel`` (the same code in a real ipykernel whose widget messages go out over ZMQ to a client
that reads them, as a notebook's would). A third, ``replay``, feeds 16 panels recorded events as
fast as one thread can (no pi): the renderer's ceiling, and the throttle holding renders near 10 a second
across the panels.
``profile`` runs the widgets case once in a real kernel under ``cProfile`` timing each thread's CPU (the drive loop on the main thread
and the clock's ticks, each apart) and prints each thread's CPU and the costliest functions.
``build`` times the one-off part apart: building the 16 panels of a group in a real kernel (median of 5).
Run: ``python benchmarks/bench_panels.py [replay|in-process|kernel|both|profile|build]``.
"""

from __future__ import annotations

import cProfile
import io
import json
import os
import pstats
import queue
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RUNS = 16
STEPS = 20
TASK = "\n".join(("ls src", "read README.md", f"run: echo step{i}")[i % 3] for i in range(STEPS))


class _CountingNull:
    """The renderer protocol doing nothing but counting events (the floor)."""

    def __init__(self) -> None:
        self.events = 0

    def start(self, runs): pass
    def event(self, run, event, line): self.events += 1
    def end(self, run): pass
    def close(self): pass


def measure(kind: str, *, display=None) -> dict:
    """Drive RUNS runs at once with a renderer of ``kind`` (null, text, widgets); CPU and counts."""
    from nbsubagents._lifecycle.drive import drive
    from nbsubagents._lifecycle.prepare import build_runs

    if kind == "null":
        renderer = _CountingNull()
    elif kind == "text":
        from nbsubagents._ui.renderers import TextRenderer
        renderer = TextRenderer(open(os.devnull, "w"))
    else:
        from nbsubagents._ui.panels import WidgetRenderer
        renderer = WidgetRenderer(display=display)
    runs = build_runs([{"preset": "scout", "task": TASK, "name": f"r{i}"} for i in range(RUNS)], mode="parallel")
    threads0 = _thread_cpu()
    cpu0, wall0 = time.process_time(), time.monotonic()
    drive(runs, concurrency=RUNS, renderer=renderer)
    cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0
    run_seconds = sum((r.result or {}).get("durationSeconds") or 0 for r in runs)
    out = {"kind": kind, "cpu": cpu, "wall": wall, "run_seconds": run_seconds, "threads": _threads_since(threads0),
           "statuses": sorted({r.status for r in runs}), "events": sum(len(r.events()) for r in runs),
           "tool_calls": sum((r.result or {}).get("toolCalls", 0) for r in runs)}
    if kind == "widgets":
        out["renders"] = renderer.renders
        out["renders_per_panel_second"] = renderer.renders / max(run_seconds, 1e-9)
    return out


def _fake_runs(what: str) -> tuple[Path, list]:
    """RUNS running runs without a child (a directory each, in a new temporary folder)."""
    from nbsubagents._child import record
    from nbsubagents._lifecycle.handle import Run

    base = Path(tempfile.mkdtemp(prefix=f"nbsubagents-bench-{what}-"))
    runs = []
    for i in range(RUNS):
        run_dir = base / f"r{i}"
        run_dir.mkdir()
        meta = {"runId": f"r{i}", "name": f"r{i}", "resolvedModel": "demo/scripted", "timeout": 600.0}
        (run_dir / "meta.json").write_text(json.dumps(meta))
        (run_dir / "supervisor.json").write_text("{}")
        runs.append(Run(run_dir, record.load(run_dir)))
    return base, runs


def build(kind: str = "build", repeats: int = 5) -> dict:
    """The one-off cost of the panels: CPU of building the RUNS panels of a group (their widgets opened over the
    kernel's comms, as ``start`` does), the median of ``repeats`` builds after a first that imports ipywidgets."""
    from nbsubagents._ui.panels import WidgetRenderer

    base, runs = _fake_runs("build")
    times, opened = [], 0
    for _ in range(repeats + 1):
        renderer = WidgetRenderer(display=lambda widget: None, ticker=False)
        before = _open_widgets()
        cpu0 = time.process_time()
        renderer.start(runs)
        times.append(time.process_time() - cpu0)
        opened = _open_widgets() - before
        renderer.close()
    shutil.rmtree(base, ignore_errors=True)
    times = sorted(times[1:])
    return {"kind": kind, "cpu": times[len(times) // 2], "cpus": times, "widgets": opened}


def _open_widgets() -> int:
    import ipywidgets
    return len(ipywidgets.Widget.widgets)


def replay(seconds: float = 5.0) -> dict:
    """No pi: 16 panels fed recorded events round-robin as fast as one thread can (the renderer's ceiling)."""
    from nbsubagents._child.events import iter_stream
    from nbsubagents._child.formatter import ProgressFormatter
    from nbsubagents._ui.panels import PANELS_PER_TICK, TICK_INTERVAL, WidgetRenderer

    fixtures = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "pi-0.73.1"
    recorded = []
    for path in sorted(fixtures.glob("*.jsonl")):
        with open(path, "rb") as fh:
            events = list(iter_stream(iter(fh)))
        formatter = ProgressFormatter("/home/user/project")
        recorded += [(event, formatter.format(event)) for event in events]
    base, runs = _fake_runs("replay")
    renderer = WidgetRenderer(display=lambda widget: None)
    renderer.start(runs)
    fed = 0
    cpu0, wall0 = time.process_time(), time.monotonic()
    while time.monotonic() - wall0 < seconds:
        for event, line in recorded:
            for run in runs:
                renderer.event(run, event, line)
            fed += len(runs)
    renderer.close()
    cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0
    shutil.rmtree(base, ignore_errors=True)
    row = {"events": fed, "cpu": cpu, "wall": wall, "renders": renderer.renders}
    print(f"{'replay':10s} widgets  {fed:,} events into {RUNS} panels in {wall:.1f}s: {fed / cpu:,.0f} events per "
          f"CPU second ({1e6 * cpu / fed:.1f} us each), renders {row['renders']} "
          f"({row['renders'] / RUNS / wall:.1f}/panel/s: at most {PANELS_PER_TICK / TICK_INTERVAL:.0f} a second across "
          f"the panels, plus the first and the final)")
    return row


def _thread_cpu() -> dict[str, float]:
    """CPU seconds of each thread of this process so far, by thread id (Linux's /proc)."""
    cpu = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        cpu[tid] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return cpu


def _threads_since(before: dict[str, float]) -> dict[str, float]:
    """CPU seconds of each thread of this process since ``before``, by thread name (the ones that spent any)."""
    import threading

    names = {str(t.native_id): t.name for t in threading.enumerate()}
    spent: dict[str, float] = {}
    for tid, cpu in _thread_cpu().items():
        name = names.get(tid, "other")
        if cpu - before.get(tid, 0.0) > 0:
            spent[name] = spent.get(name, 0.0) + cpu - before.get(tid, 0.0)
    return spent


def profiled(kind: str = "widgets", top: int = 30) -> str:
    """``measure(kind)`` under cProfile: the drive loop (this thread) and the clock's ticks, each apart, and
    each thread's CPU; returned as text (it runs inside the kernel, whose stdout the client reads)."""
    import threading

    from nbsubagents._lifecycle import watcher

    loop, ticks = cProfile.Profile(time.thread_time), cProfile.Profile(time.thread_time)
    tick = watcher.Watcher._tick

    def profiled_tick(sub: watcher.Subscription) -> None:
        ticks.enable()
        try:
            tick(sub)
        finally:
            ticks.disable()

    watcher.Watcher._tick = staticmethod(profiled_tick)
    before = _thread_cpu()
    loop.enable()
    try:
        row = measure(kind)
    finally:
        loop.disable()
        watcher.Watcher._tick = staticmethod(tick)
    names = {str(t.native_id): t.name for t in threading.enumerate()}
    out = io.StringIO()
    out.write(f"{kind}: cpu {row['cpu']:.2f}s in {row['wall']:.1f}s ({100 * row['cpu'] / row['wall']:.1f}% of a "
              f"core), {row['events']} events, {row.get('renders', 0)} renders\n")
    for tid, cpu in sorted(_thread_cpu().items()):
        spent = cpu - before.get(tid, 0.0)
        if spent > 0:
            out.write(f"  thread {names.get(tid, tid)}: {spent:.2f}s\n")
    for title, profile in (("drive loop (main thread)", loop), ("the clock's ticks", ticks)):
        out.write(f"-- {title}\n")
        if profile.getstats():
            for order in ("tottime", "cumtime"):
                pstats.Stats(profile, stream=out).sort_stats(order).print_stats(top)
    return out.getvalue()


def _project() -> tuple[Path, subprocess.Popen]:
    from nbsubagents.demo import copy_example_project
    base = Path(tempfile.mkdtemp(prefix="nbsubagents-bench-panels-"))
    project = copy_example_project(base / "project")
    agent = base / "agent"
    model = subprocess.Popen([sys.executable, "-m", "nbsubagents._pi.offline", "--agent-dir", str(agent)],
                             stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    assert model.stdout is not None and "listening" in model.stdout.readline()
    os.environ.update({"PI_CODING_AGENT_DIR": str(agent), "PI_OFFLINE": "1"})
    return project, model


def _print(row: dict, where: str) -> None:
    extra = ""
    if "renders" in row:
        extra = f"  renders {row['renders']:5d} ({row['renders_per_panel_second']:.1f}/panel/s)"
    print(f"{where:10s} {row['kind']:8s} cpu {row['cpu']:6.2f}s  wall {row['wall']:5.1f}s  "
          f"cpu/run-second {row['cpu'] / row['run_seconds']:.4f}  core {100 * row['cpu'] / row['wall']:5.1f}%  "
          f"events {row['events']}  tool calls {row['tool_calls']}  {','.join(row['statuses'])}{extra}")
    threads = ", ".join(f"{name} {cpu:.2f}s" for name, cpu in sorted(row["threads"].items(), key=lambda t: -t[1]))
    print(f"{'':10s} {'':8s} by thread: {threads}")


def in_process() -> list[dict]:
    rows = []
    for kind in ("null", "text", "widgets", "null", "text", "widgets"):
        rows.append(measure(kind, display=lambda widget: None))
        _print(rows[-1], "in-process")
    return rows


def in_kernel(project: Path, kinds: tuple[str, ...] = ("null", "widgets", "null", "widgets"),
              call: str = "measure") -> list[dict]:
    """The same measurement inside a real ipykernel, its iopub drained by this process (``call="profiled"``
    prints the profile instead)."""
    from jupyter_client import KernelManager

    km = KernelManager(kernel_name="python3")
    km.start_kernel(cwd=str(project), env={**os.environ, "NBSUBAGENTS_DISPLAY": "widgets"})
    kc = km.client()
    kc.start_channels()
    rows = []
    try:
        kc.wait_for_ready(60)
        setup = f"import sys; sys.path.insert(0, {str(Path(__file__).resolve().parent)!r}); import bench_panels"
        kc.execute_interactive(setup, timeout=60)
        for kind in kinds:
            msg_id = kc.execute(f"import json; print('RESULT' + json.dumps(bench_panels.{call}({kind!r})))")
            messages = 0
            while True:
                try:
                    msg = kc.get_iopub_msg(timeout=300)
                except queue.Empty:
                    raise RuntimeError("the kernel went silent") from None
                messages += 1
                content = msg["content"]
                if msg["msg_type"] == "stream" and content["text"].startswith("RESULT") and call == "profiled":
                    print(json.loads(content["text"][6:]))
                elif msg["msg_type"] == "stream" and content["text"].startswith("RESULT"):
                    row = json.loads(content["text"][6:])
                    row["iopub_messages"] = messages
                    rows.append(row)
                elif msg["msg_type"] == "error":
                    raise RuntimeError("\n".join(content["traceback"]))
                elif (msg["msg_type"] == "status" and content["execution_state"] == "idle"
                      and msg["parent_header"].get("msg_id") == msg_id):
                    break
            if call == "profiled":
                continue
            if call == "build":
                row = rows[-1]
                print(f"{'kernel':10s} build    {RUNS} panels, {row['widgets']} widgets: cpu {1000 * row['cpu']:.0f} ms "
                      f"(median of {len(row['cpus'])}: {', '.join(f'{1000 * t:.0f}' for t in row['cpus'])})  "
                      f"iopub messages {row['iopub_messages']}")
                continue
            _print(rows[-1], "kernel")
            print(f"{'':10s} {'':8s} iopub messages read by the client: {rows[-1]['iopub_messages']}")
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    return rows


def main() -> None:
    where = sys.argv[1] if len(sys.argv) > 1 else "both"
    project, model = _project()
    os.chdir(project)
    try:
        print(f"{RUNS} runs at once, {STEPS} tool calls each (scripted model in its own process)")
        if where in ("replay", "in-process", "both"):
            replay()
        if where in ("in-process", "both"):
            in_process()
        if where in ("kernel", "both"):
            in_kernel(project)
        if where == "build":
            in_kernel(project, ("build",), call="build")
        if where == "profile":
            in_kernel(project, ("widgets",), call="profiled")
    finally:
        model.terminate()
        model.wait(10)
        os.chdir("/")
        shutil.rmtree(project.parent, ignore_errors=True)


if __name__ == "__main__":
    main()
