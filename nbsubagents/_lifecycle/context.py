"""What goes before the task in the prompt: file contents and, for resumed runs, the history.

Both follow the harms-haus conventions: ``=== path ===`` headers with placeholders for files that
are missing, unreadable or too large (the run goes on), and ``Previously: ... Instructions: ...``
for a resumed run whose child never wrote a session file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from .._config import NbSubagentsError

FILE_LIMIT = 1024 * 1024


def _file_spec(item: Any) -> tuple[str, dict[str, int]]:
    if isinstance(item, (str, Path)):
        return str(item), {}
    if isinstance(item, Mapping) and isinstance(item.get("path"), (str, Path)):
        opts = {k: item[k] for k in ("start", "end", "head", "tail") if k in item}
        unknown = set(item) - {"path", "start", "end", "head", "tail"}
        bad = [k for k, v in opts.items() if isinstance(v, bool) or not isinstance(v, int) or v < 1]
        if unknown or bad or (("head" in opts or "tail" in opts) and len(opts) > 1):
            raise NbSubagentsError(
                f"files item {dict(item)!r} is not understood: give a path, {{'path', 'start', 'end'}} "
                "(1-based line numbers), {'path', 'head': N} or {'path', 'tail': N}")
        if opts.get("start", 1) > opts.get("end", float("inf")):
            raise NbSubagentsError(
                f"files item {dict(item)!r}: start ({opts['start']}) is after end ({opts['end']}); "
                "give 1-based line numbers with start <= end")
        return str(item["path"]), opts
    raise NbSubagentsError(f"files item {item!r} is not understood: give a path or a dict with 'path'")


def files_block(files: Sequence[Any], cwd: Path) -> str:
    """The contents of ``files`` (relative to ``cwd``), each under its ``=== path ===`` header."""
    parts = []
    for item in files:
        name, opts = _file_spec(item)
        path = (cwd / name) if not Path(name).is_absolute() else Path(name)
        parts.append(f"=== {name} ===\n{_read_part(path, name, opts)}")
    return "\n".join(parts)


def _read_part(path: Path, name: str, opts: dict[str, int]) -> str:
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return f"[file not found: {name}]"
    except OSError:
        return f"[could not read file: {name}]"
    if not path.is_file():
        return f"[could not read file: {name}]"
    if size > FILE_LIMIT:
        return f"[file too large: {name} ({-(-size // 1024)}KB, limit {FILE_LIMIT // 1024}KB)]"  # rounded up
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return f"[could not read file: {name}]"
    lines = text.splitlines()
    if "head" in opts:
        lines = lines[: opts["head"]]
    elif "tail" in opts:
        lines = lines[-opts["tail"]:]
    elif opts:
        lines = lines[opts.get("start", 1) - 1: opts.get("end", len(lines))]
    else:
        return text.rstrip("\n")
    return "\n".join(lines)


def previously_block(transcript: str, task: str) -> str:
    """A resumed run without a session file: the earlier transcript stands in for the history."""
    return f"Previously:\n\n{transcript.strip()}\n\nInstructions:\n\n{task}"


def compose_prompt(task: str, *, files: Sequence[Any] | None, cwd: Path, previously: str | None) -> str:
    """Files first, then the resume history, then the task (the spec's order)."""
    body = previously_block(previously, task) if previously is not None else task
    if files:
        return files_block(files, cwd) + "\n" + body
    return body
