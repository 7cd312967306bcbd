"""A preset file's frontmatter read: strict YAML first, then, where that fails, the second reading Claude Code gives
it (``_claude_reading``), so every file Claude Code loads loads here."""

from __future__ import annotations

import copy
import functools
import re
from pathlib import Path
from typing import Any

import yaml

from .._child.text import clip
from .._config import NbSubagentsError

_FENCE = "---"

class PresetError(NbSubagentsError):
    """A preset file is broken, or a preset name is unknown.

    ``problems`` holds one message per problem; ``str(err)`` joins them one per line.
    """

    def __init__(self, message: str | list[str]):
        self.problems: list[str] = [message] if isinstance(message, str) else list(message)
        super().__init__("\n".join(self.problems))


def _split_frontmatter(text: str, where: str) -> tuple[str, str]:
    """Return (yaml text, body); the YAML text starts at file line 2."""
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].rstrip() != _FENCE:
        raise PresetError(
            f"{where}: no YAML frontmatter; start the file with '---', "
            "then name: and description:, then '---'"
        )
    for index in range(1, len(lines)):
        if lines[index].rstrip() == _FENCE:
            return "".join(lines[1:index]), "".join(lines[index + 1:])
    raise PresetError(
        f"{where}: the YAML frontmatter opened with '---' on line 1 is never closed; "
        "add a line with just '---' after the last frontmatter field"
    )


class ReadLeniently(dict):
    """A frontmatter that strict YAML refused and Claude Code's fallback reading accepted (``quoted``: the keys whose
    values it read as quoted text)."""

    quoted: tuple[str, ...] = ()


def _load_yaml(text: str, where: str) -> dict[Any, Any]:
    """The frontmatter's mapping (a copy: the caller may change it), parsed once per distinct text: every run
    looks at each preset file of its project, and PyYAML took most of a run's preparation doing it again."""
    return copy.deepcopy(_parsed_yaml(text, where))


@functools.lru_cache(maxsize=2048)
def _parsed_yaml(text: str, where: str) -> dict[Any, Any]:
    try:
        return _mapping(yaml.safe_load(text), where)
    except yaml.MarkedYAMLError as exc:
        lenient = _claude_reading(text)
        if lenient is not None:
            return lenient
        # YAML marks are 0-based within the frontmatter, which starts on file line 2.
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "invalid YAML"
        at = f" at line {mark.line + 2}, column {mark.column + 1}" if mark is not None else ""
        if exc.problem and exc.context and exc.context_mark is not None:
            # e.g. an unclosed '[' is only noticed at the end; say where it was opened
            problem += f" ({exc.context} started at line {exc.context_mark.line + 2})"
        hint = "Fix the YAML between the '---' lines."
        if mark is not None and exc.problem == "mapping values are not allowed here":
            hint = _colon_hint(text, mark.line) or hint
        raise PresetError(f"{where}: malformed YAML frontmatter{at}: {problem}. {hint}") from None
    except yaml.YAMLError as exc:
        raise PresetError(
            f"{where}: malformed YAML frontmatter: {exc}. Fix the YAML between the '---' lines."
        ) from None


def _mapping(data: Any, where: str) -> dict[Any, Any]:
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise PresetError(
            f"{where}: the YAML frontmatter must be 'key: value' lines "
            f"(name:, description:, ...), got {type(data).__name__} {data!r}"
        )
    return data


# Claude Code's second reading of a frontmatter strict YAML refuses (measured on 2.1.197, whose loader does this): a
# one-line ``key: value`` whose value is not quoted, not a list that parses, and holds a YAML indicator or ': ' is
# read as quoted text; tabs that indent a line become two spaces each. Nothing else is forgiven.
_PLAIN_LINE = re.compile(r"^([a-zA-Z_-]+):\s+(.+)$")
_INDICATOR = re.compile(r"[{}\[\]*&#!|>%@`]|: ")


def _claude_reading(text: str) -> ReadLeniently | None:
    lines, quoted = [], []
    for line in text.split("\n"):
        found = _PLAIN_LINE.match(line)
        value = found[2] if found else ""
        if found and not (value[:1] == value[-1:] and value[:1] in ("'", '"') and len(value) > 1) \
                and not _parses_as_list(value) and _INDICATOR.search(value):
            escaped = value.replace("\\", "\\\\").replace('"', '\\"')
            line = f'{found[1]}: "{escaped}"'
            quoted.append(found[1])
        lines.append(re.sub(r"^\t+", lambda tabs: "  " * len(tabs[0]), line))
    if lines == text.split("\n"):
        return None
    try:
        data = yaml.safe_load("\n".join(lines))
    except yaml.YAMLError:
        return None
    if not isinstance(data, dict):
        return None
    read = ReadLeniently(data)
    read.quoted = tuple(quoted)
    return read


def _parses_as_list(value: str) -> bool:
    if not (value.startswith("[") and value.endswith("]")):
        return False
    try:
        return isinstance(yaml.safe_load(value), list)
    except yaml.YAMLError:
        return False


def _colon_hint(text: str, line_index: int) -> str | None:
    """``description: Use when: ...`` is the common case: a value holding ': ' must be quoted."""
    lines = text.splitlines()
    if not 0 <= line_index < len(lines):
        return None
    key, sep, value = lines[line_index].partition(":")
    if not sep or not key.strip() or " " in key.strip() or not value.strip():
        return None
    quoted = value.strip().replace("\\", "\\\\").replace('"', '\\"')
    shown = clip(quoted, 60)
    return (f"The value of '{key.strip()}' contains ': ', which YAML reads as a new key: put the value in "
            f'quotes, e.g. {key.strip()}: "{shown}"')


def read_frontmatter(path: Path) -> tuple[dict[Any, Any], str]:
    """The frontmatter mapping and the body of one file; PresetError naming the file on any problem."""
    where = f"Preset file {path}"
    try:
        text = path.read_text(encoding="utf-8-sig")  # -sig: tolerate a BOM from Windows editors
    except (OSError, UnicodeDecodeError) as exc:
        raise PresetError(f"{where}: cannot be read as UTF-8 text: {exc}") from None
    frontmatter, body = _split_frontmatter(text, where)
    return _load_yaml(frontmatter, where), body
