"""A supervisor's own cost per run, around an instant child (``/bin/true``), and per event of pi's stream.

Three figures: start-up (spawn until ``supervisor.json`` exists: interpreter, imports, the first write), its
whole life (spawn to exit: also the child, events, ``result.json`` and the end-of-run sweep for leftover
processes), and its cost per event: the same around ``cat`` of a recorded pi stream (the fixtures of
``tests/fixtures/pi-0.73.1``, about 2,000 lines), less the ``/bin/true`` run, per normalized event written.
The supervisor is started as the process launcher starts it (``lifecycle.process.supervisor_argv``). Prints medians
and quartiles of N runs (default 60).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from nbsubagents._lifecycle.process import supervisor_argv


FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "pi-0.73.1"


def once(run_dir: Path, argv: list[str] = ["/bin/true"]) -> tuple[float, float]:  # noqa: B006 (never changed)
    """(spawn to ``supervisor.json``, spawn to exit) of one supervisor."""
    run_dir.mkdir()
    meta = {"runId": f"20260101-000000-{run_dir.name}", "argv": argv, "cwd": str(run_dir), "timeout": 60,
            "loopingToolCount": 0}  # the recorded streams repeat: no loop guard
    (run_dir / "meta.json").write_text(json.dumps(meta))
    t0 = time.perf_counter()
    proc = subprocess.Popen(supervisor_argv(run_dir))
    while not (run_dir / "supervisor.json").exists() and proc.poll() is None:
        time.sleep(0.0005)
    started = time.perf_counter() - t0
    proc.wait()
    assert json.loads((run_dir / "result.json").read_text())["exitCode"] == 0
    return started, time.perf_counter() - t0


def stream(folder: Path, lines: int = 2000) -> Path:
    """Recorded pi streams, one after another, to about ``lines`` lines (each a whole run's stream)."""
    streams = [p.read_bytes() for p in sorted(FIXTURES.glob("*.jsonl"))]
    out, count = [], 0
    while count < lines:
        for data in streams:
            out.append(data if data.endswith(b"\n") else data + b"\n")
            count += data.count(b"\n")
    path = folder / "stream.jsonl"
    path.write_bytes(b"".join(out))
    return path


def describe(label: str, values: list[float]) -> str:
    q = statistics.quantiles(values, n=4)
    return f"{label}: median {statistics.median(values) * 1000:.1f} ms (quartiles {q[0] * 1000:.1f}-{q[2] * 1000:.1f})"


def main(n: int = 60) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        recorded = stream(Path(tmp))
        times, streamed = [], []
        for i in range(n):  # alternating: the machine's load falls on each alike
            times.append(once(Path(tmp) / f"{i:06x}"))
            streamed.append(once(Path(tmp) / f"s{i:06x}", ["cat", str(recorded)])[1])
        events = len((Path(tmp) / f"s{0:06x}" / "events.jsonl").read_bytes().splitlines()) - 2  # less start, end
        lines = len(recorded.read_bytes().splitlines())
    print(f"supervisor around /bin/true, n={n}: " + describe("start-up", [t[0] for t in times]) + "; "
          + describe("spawn to exit", [t[1] for t in times]))
    per_event = (statistics.median(streamed) - statistics.median([t[1] for t in times])) / events
    print(f"per event of pi's stream ({events} events of {lines} lines, cat of a "
          f"recorded stream): {per_event * 1e6:.1f} us (stdout.log, events.jsonl, transcript.log, guards)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 60)
