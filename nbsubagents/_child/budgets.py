"""Budgets: the limits a run may spend (turns, tool calls, tokens, cost), checked and enforced.

The kernel checks the values (``check``) and writes them into ``meta.json`` as ``budget``; the
supervisor builds a ``Budget`` from them and asks it after every event whether the run's tally
has reached a limit (``exceeded``). Standard library only: the supervisor imports it.
"""

from __future__ import annotations

import math

from .errors import NbSubagentsError

from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from typing import Any

    from .events import Tally

# Python name -> (meta.json / preset / settings key, whole numbers only, what it counts)
FIELDS: dict[str, tuple[str, bool, str]] = {
    "max_turns": ("maxTurns", True, "turns"),
    "max_tool_calls": ("maxToolCalls", True, "tool calls"),
    "max_tokens": ("maxTokens", True, "tokens"),
    "max_cost": ("maxCost", False, "cost"),
}
KINDS = {"max_turns": "turns", "max_tool_calls": "tool_calls", "max_tokens": "tokens", "max_cost": "cost"}


def problem(key: str, value: object) -> str | None:
    """What a right value of budget ``key`` looks like, when ``value`` is not one (else None)."""
    whole = FIELDS[key][1]
    kinds = (int,) if whole else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or not math.isfinite(value) or value <= 0:
        return "a whole number of at least 1" if whole else "a positive amount (the model's cost units, e.g. 0.5)"
    return None


def check(values: dict[str, Any], where: str = "", *, camel: bool = False, error: type[Exception] | None = None
          ) -> dict[str, Any]:
    """The budget fields that are set, validated: the one check of calls, tasks, experiments and preset files.

    A wrong value raises ``error`` (NbSubagentsError by default) naming ``where`` and the field, as the
    caller wrote it: ``max_cost`` for a call, ``'maxCost'`` (``camel``) for a preset file.
    """

    out: dict[str, Any] = {}
    for key, value in values.items():
        if value is None:
            continue
        right = problem(key, value)
        if right is not None:
            name = f"'{FIELDS[key][0]}'" if camel else key
            raise (error or NbSubagentsError)(f"{where}{name} must be {right}, got {value!r}")
        out[key] = value
    return out


def to_meta(values: dict[str, Any]) -> dict[str, Any] | None:
    """The ``budget`` object of meta.json (camelCase keys), None when no limit is set."""
    meta = {FIELDS[k][0]: v for k, v in values.items() if v is not None}
    return meta or None


def spent(tally: Tally) -> dict[str, float]:
    """What a run has spent so far, by budget field."""
    return {"max_turns": tally.turns, "max_tool_calls": tally.tool_calls, "max_tokens": tally.tokens,
            "max_cost": tally.cost}


class Budget:
    """The limits of one run (from meta.json's ``budget``): which one, if any, the tally has reached."""

    __slots__ = ("limits",)

    def __init__(self, meta_budget: dict[str, Any] | None) -> None:
        by_meta = {camel: key for key, (camel, _, _) in FIELDS.items()}
        self.limits = {by_meta[k]: v for k, v in (meta_budget or {}).items() if k in by_meta and v}

    def __bool__(self) -> bool:
        return bool(self.limits)

    def exceeded(self, tally: Tally) -> tuple[str, str] | None:
        """``(stopReason, message)`` once a limit is reached: ``("budget:tool_calls", "Stopped at 20 tool
        calls (max_tool_calls=20)")``. Turns and tool calls stop as the one past the limit starts (so
        ``max_tool_calls=20`` lets 20 run); tokens and cost stop once the spend reaches the limit."""
        used = spent(tally)
        for key, limit in self.limits.items():
            value = used[key]
            if key in ("max_turns", "max_tool_calls"):
                if value <= limit:
                    continue
                shown = f"{limit:g}"  # that many ran; the one past the limit is stopped as it starts
            elif value >= limit:
                shown = f"{value:.4g}" if key == "max_cost" else f"{int(value)}"
            else:
                continue
            return f"budget:{KINDS[key]}", f"Stopped at {shown} {FIELDS[key][2]} ({key}={limit:g})"
        return None


def describe(meta_budget: dict[str, Any] | None, tally_values: dict[str, Any]) -> str:
    """Spend against the budget for a panel: ``turns 2/5 · tools 3/20 · tokens 1.2k/50k · $0.01/$0.50``."""
    budget = Budget(meta_budget)
    parts = []
    short = {"max_turns": "turns", "max_tool_calls": "tools", "max_tokens": "tokens", "max_cost": "cost"}
    for key, limit in budget.limits.items():
        value = tally_values.get(key, 0) or 0
        if key == "max_cost":
            parts.append(f"{short[key]} {value:.4g}/{limit:g}")
        else:
            parts.append(f"{short[key]} {_k(value)}/{_k(limit)}")
    return " · ".join(parts)


def _k(n: float) -> str:
    return f"{n / 1000:.1f}k" if n >= 10000 else f"{int(n)}"
