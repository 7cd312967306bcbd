"""Where output goes: the one place that decides between widgets and plain text."""

from __future__ import annotations

from .renderers import Renderer, TextRenderer


def choose_renderer() -> Renderer:
    """Plain text for now: widget panels are chosen here once a widget frontend is detected."""
    return TextRenderer()
