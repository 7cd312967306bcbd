"""Events formatted per second over a large recorded pi stream, as a ratio to bare ``json.loads``.

The recorded streams of ``tests/fixtures/pi-0.73.1`` (real pi 0.73.1 output) are repeated to about
100k lines, each repetition being a new run (a new adapter and formatter, as in a supervisor). The
hot path of every run, normalizing each stdout line (``events.parse_line``) and formatting each
normalized event (``ProgressFormatter.format``), is timed against ``json.loads`` of the same lines.
Best of several rounds. Target: ratio <= 3. Run: ``python benchmarks/bench_formatter.py [LINES]``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from nbsubagents._child.events import PiEventAdapter, Tally, parse_line
from nbsubagents._child.formatter import ProgressFormatter

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "pi-0.73.1"
ROUNDS = 5


def recorded_runs(target_lines: int) -> list[list[bytes]]:
    """Fixture streams (one list of raw lines each), repeated until ``target_lines`` lines."""
    streams = [[line.rstrip(b"\n") for line in path.read_bytes().splitlines(keepends=True)]
               for path in sorted(FIXTURES.glob("*.jsonl"))]
    runs: list[list[bytes]] = []
    total = 0
    while total < target_lines:
        for stream in streams:
            runs.append(stream)
            total += len(stream)
    return runs


def bare_json(runs: list[list[bytes]]) -> int:
    count = 0
    loads = json.loads
    for lines in runs:
        for raw in lines:
            loads(raw)
            count += 1
    return count


def normalize_and_format(runs: list[list[bytes]]) -> tuple[int, int]:
    events = shown = 0
    for lines in runs:
        adapter = PiEventAdapter()
        formatter = ProgressFormatter("/home/user/project")
        fmt = formatter.format
        for raw in lines:
            for event in parse_line(raw, adapter):
                events += 1
                if fmt(event) is not None:
                    shown += 1
    return events, shown


def with_tally(runs: list[list[bytes]]) -> int:
    """The same plus the header counters a panel keeps (``events.Tally``)."""
    events = 0
    for lines in runs:
        adapter = PiEventAdapter()
        formatter = ProgressFormatter("/home/user/project")
        tally = Tally()
        for raw in lines:
            for event in parse_line(raw, adapter):
                events += 1
                tally.add(event)
                formatter.format(event)
    return events


def best(fn, *args) -> tuple[float, object]:
    times, out = [], None
    for _ in range(ROUNDS):
        t0 = time.perf_counter()
        out = fn(*args)
        times.append(time.perf_counter() - t0)
    return min(times), out


def main() -> None:
    target = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    runs = recorded_runs(target)
    lines = sum(len(r) for r in runs)
    size = sum(len(raw) for r in runs for raw in r)
    t_json, _ = best(bare_json, runs)
    t_ours, (events, shown) = best(normalize_and_format, runs)  # type: ignore[misc]
    t_tally, _ = best(with_tally, runs)
    print(f"{lines:,} pi lines ({size / 1e6:.1f} MB) in {len(runs):,} recorded runs -> {events:,} normalized events, "
          f"{shown:,} progress lines (best of {ROUNDS})")
    print(f"json.loads only           {t_json:7.3f} s   {lines / t_json:12,.0f} lines/s")
    print(f"parse_line + format       {t_ours:7.3f} s   {lines / t_ours:12,.0f} lines/s   "
          f"{events / t_ours:12,.0f} events/s")
    print(f"  + Tally (panel header)  {t_tally:7.3f} s   {lines / t_tally:12,.0f} lines/s")
    ratio = t_ours / t_json
    print(f"ratio to bare json.loads: {ratio:.2f} (with Tally {t_tally / t_json:.2f}); target <= 3: "
          f"{'met' if ratio <= 3 else 'NOT met'}")


if __name__ == "__main__":
    main()
