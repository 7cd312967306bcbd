"""The one base class of the errors a user can fix, here so that ``child/`` can raise it without importing
the kernel's side (``nbsubagents._config`` re-exports it)."""

from __future__ import annotations


class NbSubagentsError(ValueError):
    """Base of the errors a user can fix; the message says what was wrong and what would be right."""


def positive_seconds(value: object, what: str, error: type[NbSubagentsError] = NbSubagentsError) -> float:
    """``value`` as seconds when it is a positive, finite number; else ``error`` naming ``what`` and the value (the
    one check of every timeout: a call's, a preset's, a check's, a scorer's)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf"):
        raise error(f"{what} must be a positive, finite number of seconds, got {value!r}")
    return float(value)
