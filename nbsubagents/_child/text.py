"""The one way text is cut short (at most ``limit`` characters, ``…`` where it was cut), the one way a count
is worded (``3 runs``) and the one way a line is printed from a thread. Stdlib only, so the supervisor's events and
formatter use them; ``style`` re-exports the first two and its ``shorten`` folds whitespace and then cuts the same
way."""

from __future__ import annotations

from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from typing import TextIO

ELLIPSIS = "…"


def clip(text: str, limit: int) -> str:
    """``text`` if it fits in ``limit`` characters, else its start and ``…`` (``limit`` characters in all)."""
    return text if len(text) <= limit else text[: max(limit - 1, 0)] + ELLIPSIS


def plural(count: int, word: str) -> str:
    """``1 run``, ``3 runs``: the count and the word, with an ``s`` unless the count is one."""
    return f"{count} {word}{'' if count == 1 else 's'}"


def write_line(stream: TextIO, text: str) -> bool:
    """``text`` and its newline in one write, flushed: a line said from another thread never mixes with what the
    cell prints meanwhile (``print`` writes the text and its end apart). False when the stream is closed."""
    try:
        stream.write(text + "\n")
        stream.flush()
    except (BrokenPipeError, ValueError, OSError):  # ValueError: the stream was closed
        return False
    return True
