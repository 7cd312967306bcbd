"""The one way text is cut short (at most ``limit`` characters, ``…`` where it was cut) and the one way a count
is worded (``3 runs``). Stdlib only, so the supervisor's events and formatter use them; ``style`` re-exports both
and its ``shorten`` folds whitespace and then cuts the same way."""

ELLIPSIS = "…"


def clip(text: str, limit: int) -> str:
    """``text`` if it fits in ``limit`` characters, else its start and ``…`` (``limit`` characters in all)."""
    return text if len(text) <= limit else text[: max(limit - 1, 0)] + ELLIPSIS


def plural(count: int, word: str) -> str:
    """``1 run``, ``3 runs``: the count and the word, with an ``s`` unless the count is one."""
    return f"{count} {word}{'' if count == 1 else 's'}"
