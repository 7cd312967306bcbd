"""The one way text is cut short (at most ``limit`` characters, ``…`` where it was cut), the one way a count
is worded (``3 runs``), the one way control characters are made harmless (``terminal_safe`` shows them escaped,
``strip_controls`` removes them) and the one way a line is printed from a thread (terminal-safe: what a child
wrote never drives the person's terminal). Stdlib only, so the supervisor's events and formatter use them;
``style`` re-exports the first two and its ``shorten`` folds whitespace and then cuts the same way."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from typing import TextIO

ELLIPSIS = "…"
# C0 but tab and newline, DEL, C1; and the bidirectional overrides that reorder what a terminal shows.
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_ESCAPE_SEQUENCES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"                        # CSI: colours, cursor moves, ESC[2J
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"             # OSC: window title, clipboard (52), hyperlinks
    r"|\x1b[P^_X][^\x1b]*(?:\x1b\\)?"                  # DCS, PM, APC, SOS strings
    r"|\x1b[ -/]*[0-~]?")                              # any other escape


def clip(text: str, limit: int) -> str:
    """``text`` if it fits in ``limit`` characters, else its start and ``…`` (``limit`` characters in all)."""
    return text if len(text) <= limit else text[: max(limit - 1, 0)] + ELLIPSIS


def plural(count: int, word: str) -> str:
    """``1 run``, ``3 runs``: the count and the word, with an ``s`` unless the count is one."""
    return f"{count} {word}{'' if count == 1 else 's'}"


def _escaped(match: re.Match[str]) -> str:
    char = match.group(0)
    return f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}"


def terminal_safe(text: str) -> str:
    """``text`` with every control character (C0 but ``\\n`` and ``\\t``, ESC, DEL, C1, bidi overrides) shown
    escaped (``\\x1b``): safe to print to a terminal, and what was there stays visible."""
    return _CONTROLS.sub(_escaped, text) if isinstance(text, str) else text


def strip_controls(text: str) -> str:
    """``text`` without escape sequences and control characters (but ``\\n`` and ``\\t``): for a report."""
    if not isinstance(text, str):
        return text
    if "\x1b" in text:
        text = _ESCAPE_SEQUENCES.sub("", text)
    return _CONTROLS.sub("", text)


def write_line(stream: TextIO, text: str) -> bool:
    """``text`` and its newline in one write, flushed and terminal-safe: a line said from another thread never
    mixes with what the cell prints meanwhile (``print`` writes the text and its end apart), and a control
    character in it (a child's words are in most lines) shows escaped. False when the stream is closed."""
    try:
        stream.write(terminal_safe(text) + "\n")
        stream.flush()
    except (BrokenPipeError, ValueError, OSError):  # ValueError: the stream was closed
        return False
    return True
