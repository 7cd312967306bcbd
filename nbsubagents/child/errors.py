"""The one base class of the errors a user can fix, here so that ``child/`` can raise it without importing
the kernel's side (``nbsubagents.config`` re-exports it)."""

from __future__ import annotations


class NbSubagentsError(ValueError):
    """Base of the errors a user can fix; the message says what was wrong and what would be right."""
