"""What a whole sweep may spend and when it stops: retries, ``max_failures``, ``max_total_cost`` and the estimate.

``Limits`` are a sweep's stop rules, checked once. ``Guard`` is the renderer a sweep's runs are driven through:
it counts the failed runs this call launched and the sweep's spend (the cost of its ended runs, every attempt,
plus what its running runs have cost so far, from their usage events), and once a limit is reached it ends
the runs not started yet as ``not_started`` with the reason (``stopped_reason`` tells a resume to start them
again). ``estimate`` is what the cells about to run cost before (the same preset, model and task in the
project's registry), shown before the launch as a ``CostEstimate`` line (``lifecycle.edge.show``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import _registry as registry
from .._child.artifacts import TERMINAL
from .._child.harnesses import DEFAULT
from .._child.text import plural
from .._config import NbSubagentsError
from .._lifecycle import settle
from .._lifecycle.handle import Run
from .._templates import part
from .outcomes import excluded_reason

__all__ = ["Limits", "Guard", "CostEstimate", "estimate", "stopped_reason", "usd", "STOPS"]

# The words a run a sweep stopped before it started says (its error message begins with one): resume starts it.
STOPS = ("max_failures reached", "max_total_cost reached")


def stopped_reason(row: Mapping[str, Any]) -> str | None:
    """The stop rule that kept the run of ``row`` from starting, or None."""
    message = str(row.get("error_message") or "")
    return message if row.get("stop_reason") == "not_started" and message.startswith(STOPS) else None


def usd(value: float) -> str:
    return f"${value:.4g}" if value < 1 else f"${value:.2f}"


@dataclass(frozen=True)
class Limits:
    """A sweep's stop rules: ``retries`` per cell and call, ``max_failures`` (a count, or a fraction of the
    planned runs when 0 < x < 1) and ``max_total_cost`` (USD, the whole sweep)."""

    retries: int = 0
    max_failures: int | float | None = None
    max_total_cost: float | None = None

    @classmethod
    def checked(cls, retries: Any = 0, max_failures: Any = None, max_total_cost: Any = None) -> Limits:
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise NbSubagentsError(f"retries must be a whole number of at least 0 (the extra attempts a run that "
                                   f"ended for an infrastructure reason gets), got {retries!r}")
        count_or_fraction = (isinstance(max_failures, (int, float)) and not isinstance(max_failures, bool)
                             and (0 < max_failures < 1 or (max_failures >= 1 and max_failures == int(max_failures))))
        if max_failures is not None and not count_or_fraction:
            raise NbSubagentsError(f"max_failures must be a whole number of at least 1 (failed runs) or a fraction "
                                   f"between 0 and 1 (of the planned runs), got {max_failures!r}")
        if max_total_cost is not None and (isinstance(max_total_cost, bool)
                                           or not isinstance(max_total_cost, (int, float)) or max_total_cost <= 0):
            raise NbSubagentsError(f"max_total_cost must be a positive amount in USD (the whole sweep; max_cost is "
                                   f"each run's budget), got {max_total_cost!r}")
        return cls(retries, max_failures, None if max_total_cost is None else float(max_total_cost))

    def failures_allowed(self, planned: int) -> int | None:
        """``max_failures`` as a count of runs: a fraction of ``planned`` rounds up (at least 1)."""
        if self.max_failures is None:
            return None
        if self.max_failures < 1:
            return max(1, math.ceil(self.max_failures * planned))
        return int(self.max_failures)

    def record(self) -> dict[str, Any]:
        """The plan's record of them."""
        return {"retries": self.retries, "maxFailures": self.max_failures, "maxTotalCost": self.max_total_cost}

    @classmethod
    def from_plan(cls, plan: Mapping[str, Any]) -> Limits:
        return cls(plan.get("retries") or 0, plan.get("maxFailures"), plan.get("maxTotalCost"))


def _cost(row: Mapping[str, Any]) -> float:
    return float(row.get("cost") or 0)


class Guard:
    """The renderer a sweep's runs go through (wrapping the one that scores and shows them): it counts failures
    and spend, and ends the runs not started yet once a limit is reached."""

    def __init__(self, inner: Any, limits: Limits, planned: int, rows: list[dict[str, Any]]) -> None:
        self.inner, self.limits = inner, limits
        self.allowed = limits.failures_allowed(planned)
        self.failures = 0
        self.spent_before = sum(_cost(r) for r in rows if r.get("status") in TERMINAL)  # every attempt so far
        self.ended = 0.0
        self.running: dict[str, float] = {}
        self.waiting: list[Run] = []  # this round's runs, until they start
        self.stopped: str | None = None

    @property
    def spent(self) -> float:
        return self.spent_before + self.ended + sum(self.running.values())

    def check(self) -> str | None:
        """The limit reached, if any (then the runs not started yet are ended with it)."""
        if self.stopped is None:
            if self.allowed is not None and self.failures >= self.allowed:
                self.stopped = (f"max_failures reached ({self.failures} of {self.allowed} allowed runs failed in "
                                "this call)")
            elif self.limits.max_total_cost is not None and self.spent >= self.limits.max_total_cost:
                self.stopped = f"max_total_cost reached ({usd(self.spent)} of {usd(self.limits.max_total_cost)})"
        if self.stopped is not None:
            for run in self.waiting:
                if run.process is None and not run.done:  # the drive loop has not launched it: it never will
                    settle.never_ran(run.paths, run.record, "failed", self.stopped)
            self.waiting = []
        return self.stopped

    # -- the renderer -------------------------------------------------------------------------------------------
    def start(self, runs: list[Run]) -> None:
        self.waiting = list(runs)
        self.check()
        self.inner.start(runs)

    def event(self, run: Run, event: dict[str, Any], line: Any) -> None:
        if event.get("type") == "usage" and event.get("cost"):
            self.running[run.run_id] = self.running.get(run.run_id, 0.0) + float(event["cost"])
            self.check()
        self.inner.event(run, event, line)

    def end(self, run: Run) -> None:
        result = run.result or {}
        self.running.pop(run.run_id, None)
        if result.get("stopReason") != "not_started":
            self.ended += float((result.get("usage") or {}).get("cost") or 0)
            if result.get("status") == "failed":
                self.failures += 1
            self.check()
        self.inner.end(run)

    def close(self) -> None:
        self.inner.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class CostEstimate:
    """A sweep's cost estimated before it launches, from what the same cells cost before; shown as one line."""

    def __init__(self, runs: int, total: float, known: int, samples: int, cap: float | None, spent: float) -> None:
        self.runs, self.total, self.known, self.samples, self.cap, self.spent = runs, total, known, samples, cap, spent

    @property
    def text(self) -> str:
        if self.known:
            unknown = self.runs - self.known
            some = f" for the {self.known} with history" if unknown else ""
            rest = f"; {unknown} without history" if unknown else ""
            what = (f"estimated cost of {plural(self.runs, 'run')}: ~{usd(self.total)}{some} (from "
                    f"{plural(self.samples, 'earlier run')} of the same preset, model and task{rest})")
        else:
            what = f"{plural(self.runs, 'run')} to start, no cost history yet"
        if self.cap is not None:
            what += f" · max_total_cost {usd(self.cap)}, {usd(self.spent)} spent so far"
        return "Sweep: " + what

    def __repr__(self) -> str:
        return self.text

    def _repr_html_(self) -> str:
        return part("bits.html", "spend", text=self.text)


def estimate(root: Path, specs: list[dict[str, Any]], limits: Limits, spent: float) -> CostEstimate:
    """The estimate for the runs of ``specs`` (each a run's spec: preset, model, task, harness): per run, the mean
    cost of the earlier runs in the project's registry with the same preset, task, model and harness (the model
    and harness the sweep names; any, when it names none and the preset chooses) that counted (not cut short by
    the infrastructure)."""
    history: dict[tuple[Any, Any, Any, Any], list[float]] = {}
    db = registry.db_path(root)
    if db.exists():
        registry.ensure_loaded(db)
        rows = registry.fetch(db, "SELECT preset, requested_model, task, harness, cost, status, stop_reason FROM runs "
                                  "WHERE cost IS NOT NULL")
        for row in rows:
            if row.get("status") in TERMINAL and excluded_reason(row) is None:
                for model in {row["requested_model"], None}:  # None: any model
                    for harness in {row["harness"] or DEFAULT, None}:  # None: any harness
                        history.setdefault((row["preset"], model, row["task"], harness), []).append(_cost(row))
    total, known, used = 0.0, 0, set()
    for spec in specs:
        key = (spec.get("preset"), spec.get("model"), spec.get("task"), spec.get("harness"))
        if history.get(key):
            total += sum(history[key]) / len(history[key])
            known += 1
            used.add(key)
    samples = sum(len(history[key]) for key in used)
    return CostEstimate(len(specs), total, known, samples, limits.max_total_cost, spent)
