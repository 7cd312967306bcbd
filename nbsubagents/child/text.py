"""The one way text is cut short: at most ``limit`` characters, ``…`` where it was cut (stdlib only, so the
supervisor's events and formatter use it; ``style.shorten`` folds whitespace and then cuts the same way)."""

ELLIPSIS = "…"


def clip(text: str, limit: int) -> str:
    """``text`` if it fits in ``limit`` characters, else its start and ``…`` (``limit`` characters in all)."""
    return text if len(text) <= limit else text[: max(limit - 1, 0)] + ELLIPSIS
