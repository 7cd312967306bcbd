"""Named subagent presets: markdown files with YAML frontmatter.

A preset names a reusable subagent role: a description (so a person or the main agent can pick
one), an optional default model, an optional built-in tool allowlist, an optional thinking level
and an appended system prompt (the markdown body). There are no bundled presets; they live in

* global: ``<agent dir>/subagents/*.md`` (agent dir = ``$PI_CODING_AGENT_DIR`` or ``~/.pi/agent``,
  the same directory pi itself uses), and
* project: ``.pi/subagents/*.md`` in the nearest ancestor of the working directory that has one.

Project presets override global ones by name. Claude Code agent files use the same keys (``name``,
``description``, ``tools``, ``model``) and load unchanged; tool names are kept as written because
mapping them onto pi's tools is the runner's business, not the parser's. Keys this module does not
know are kept in ``Preset.extra`` so later features (``timeout``, ``noTools``, ``excludeTools``,
...) can read them without a format change.

Discovery is all-or-nothing: one broken file fails it, because silently skipping a preset turns a
typo into a confusing "unknown preset" later. The error lists every broken file at once so they
can all be fixed in one pass. Nothing is cached: the files are tiny, and a notebook user who edits
a preset expects the next call to see it.
"""

from __future__ import annotations

import html
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .config import NbSubagentsError, agent_dir

__all__ = [
    "THINKING_LEVELS",
    "Preset",
    "PresetError",
    "PresetList",
    "agent_dir",
    "discover",
    "find_project_presets_dir",
    "get",
    "global_presets_dir",
    "list_presets",
    "parse_preset",
]

# pi's --thinking values (pi-coding-agent cli/args VALID_THINKING_LEVELS).
THINKING_LEVELS: tuple[str, ...] = ("off", "minimal", "low", "medium", "high", "xhigh")
SCOPES: tuple[str, ...] = ("global", "project")
KNOWN_KEYS = frozenset({"name", "description", "model", "tools", "thinking", "noTools", "excludeTools",
                        "noSkills", "noContextFiles", "noExtensions", "skills", "extraArgs", "timeout"})
# pi flags that would undo a preset's tool restriction if smuggled in through extraArgs.
_TOOL_FLAGS = ("--tools", "-t", "--no-tools", "-nt")
_SHELL_META = set(";&|`$<>(){}*?!~\\\n\r'\"")

_TOOL_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")
_FENCE = "---"
_DESCRIPTION_WIDTH = 60  # text table only; keeps a row on one line in a notebook cell
_TOOLS_WIDTH = 30


class PresetError(NbSubagentsError):
    """A preset file is broken, or a preset name is unknown.

    ``problems`` holds one message per problem; ``str(err)`` joins them one per line.
    """

    def __init__(self, message: str | list[str]):
        self.problems: list[str] = [message] if isinstance(message, str) else list(message)
        super().__init__("\n".join(self.problems))


@dataclass(frozen=True)
class Preset:
    """One parsed preset file.

    ``tools`` is None when the file has no ``tools`` key (no restriction), and a tuple otherwise,
    so an explicit empty value (``tools: ""`` or ``tools: []``) stays distinguishable as "none".
    """

    name: str
    description: str
    model: str | None
    tools: tuple[str, ...] | None
    thinking: str | None
    prompt: str
    scope: str
    path: Path
    extra: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    no_tools: bool = False
    exclude_tools: tuple[str, ...] | None = None
    no_skills: bool = False
    no_context_files: bool = False
    no_extensions: bool = False
    skills: tuple[str, ...] | None = None
    extra_args: tuple[str, ...] = ()
    timeout: float | None = None

    @property
    def restricts_tools(self) -> bool:
        return self.tools is not None or self.exclude_tools is not None or self.no_tools


# --- locations ------------------------------------------------------------------------------


def global_presets_dir() -> Path:
    """Where global presets live (the directory need not exist)."""
    return agent_dir() / "subagents"


def _resolve_cwd(cwd: str | Path | None) -> Path:
    return (Path.cwd() if cwd is None else Path(cwd).expanduser()).resolve()


def find_project_presets_dir(cwd: str | Path | None = None) -> Path | None:
    """The ``.pi/subagents`` directory of the nearest ancestor of ``cwd`` (inclusive), if any."""
    start = _resolve_cwd(cwd)
    for directory in (start, *start.parents):
        candidate = directory / ".pi" / "subagents"
        if candidate.is_dir():
            return candidate
    return None


def _same_dir(a: Path, b: Path) -> bool:
    try:
        return a.samefile(b)
    except OSError:
        return False


# --- parsing --------------------------------------------------------------------------------


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


def _load_yaml(text: str, where: str) -> dict[Any, Any]:
    try:
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        # YAML marks are 0-based within the frontmatter, which starts on file line 2.
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "invalid YAML"
        at = f" at line {mark.line + 2}" if mark is not None else ""
        if exc.problem and exc.context and exc.context_mark is not None:
            # e.g. an unclosed '[' is only noticed at the end; say where it was opened
            problem += f" ({exc.context} started at line {exc.context_mark.line + 2})"
        raise PresetError(
            f"{where}: malformed YAML frontmatter{at}: {problem}. "
            "Fix the YAML between the '---' lines."
        ) from None
    except yaml.YAMLError as exc:
        raise PresetError(
            f"{where}: malformed YAML frontmatter: {exc}. Fix the YAML between the '---' lines."
        ) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise PresetError(
            f"{where}: the YAML frontmatter must be 'key: value' lines "
            f"(name:, description:, ...), got {type(data).__name__} {data!r}"
        )
    return data


def _required_text(data: dict[Any, Any], key: str, where: str) -> str:
    if key not in data or data[key] is None:
        raise PresetError(f"{where}: missing required field '{key}'")
    value = data[key]
    if not isinstance(value, str) or not value.strip():
        raise PresetError(
            f"{where}: '{key}' must be a non-empty string, got {value!r}; quote it if YAML "
            "reads it as something else"
        )
    return value.strip()


def _optional_text(data: dict[Any, Any], key: str, where: str) -> str | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise PresetError(f"{where}: '{key}' must be a string, got {value!r}; quote it")
    return value.strip() or None


def _parse_tools(value: Any, where: str, key: str = "tools") -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        names = value.split(",")
    elif isinstance(value, list) and all(isinstance(item, str) for item in value):
        names = value
    else:
        raise PresetError(
            f"{where}: '{key}' must be a comma-separated string or a list of tool names, "
            f"got {value!r}"
        )
    cleaned = tuple(name.strip() for name in names if name.strip())
    bad = [name for name in cleaned if not _TOOL_NAME.match(name)]
    if bad:
        listed = ", ".join(repr(name) for name in bad)
        raise PresetError(
            f"{where}: invalid {'tool ' if key != 'skills' else 'skill '}name {listed} in '{key}'; names use only letters, "
            "digits, '_', '.' and '-' (e.g. tools: read, grep, find)"
        )
    return cleaned


def _parse_thinking(value: Any, where: str) -> str | None:
    if value is None:
        return None
    if value is False:  # YAML 1.1 reads a bare `off` as false; pi's YAML 1.2 reads "off"
        return "off"
    if isinstance(value, str) and value.strip().lower() in THINKING_LEVELS:
        return value.strip().lower()
    raise PresetError(
        f"{where}: 'thinking' must be one of {', '.join(THINKING_LEVELS)}, got {value!r}"
    )


def parse_preset(path: Path, scope: str) -> Preset:
    """Parse one preset file; raise PresetError naming the file on any problem."""
    path = Path(path)
    where = f"Preset file {path}"
    if scope not in SCOPES:
        raise ValueError(f"scope must be one of {', '.join(SCOPES)}, got {scope!r}")
    try:
        text = path.read_text(encoding="utf-8-sig")  # -sig: tolerate a BOM from Windows editors
    except (OSError, UnicodeDecodeError) as exc:
        raise PresetError(f"{where}: cannot be read as UTF-8 text: {exc}") from None
    frontmatter, body = _split_frontmatter(text, where)
    data = _load_yaml(frontmatter, where)
    name = _required_text(data, "name", where)
    description = _required_text(data, "description", where)
    model = _optional_text(data, "model", where)
    preset = Preset(
        name=name,
        description=description,
        model=None if model == "inherit" else model,  # Claude Code's "use the caller's model"
        tools=_parse_tools(data.get("tools"), where),
        thinking=_parse_thinking(data.get("thinking"), where),
        prompt=body.strip(),
        scope=scope,
        path=path,
        extra={key: value for key, value in data.items() if key not in KNOWN_KEYS},
        no_tools=_flag(data, "noTools", where),
        exclude_tools=_parse_tools(data.get("excludeTools"), where, "excludeTools"),
        no_skills=_flag(data, "noSkills", where),
        no_context_files=_flag(data, "noContextFiles", where),
        no_extensions=_flag(data, "noExtensions", where),
        skills=_parse_tools(data.get("skills"), where, "skills"),
        extra_args=_parse_extra_args(data.get("extraArgs"), where),
        timeout=_parse_timeout(data.get("timeout"), where),
    )
    _check_combinations(preset, where)
    return preset


def _flag(data: dict[str, Any], key: str, where: str) -> bool:
    value = data.get(key, False)
    if not isinstance(value, bool):
        raise PresetError(f"{where}: '{key}' must be true or false, got {value!r}")
    return value


def _parse_timeout(value: Any, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise PresetError(f"{where}: 'timeout' must be a positive number of seconds (not NaN or infinite), "
                          f"got {value!r}")
    return float(value)


def _parse_extra_args(value: Any, where: str) -> tuple[str, ...]:
    """Extra pi flags; passed as argv items (never through a shell), yet refused if shell-like."""
    if value is None:
        return ()
    if isinstance(value, str):
        items = value.split()
    elif isinstance(value, list) and all(isinstance(item, str) for item in value):
        items = value
    else:
        raise PresetError(f"{where}: 'extraArgs' must be a list of pi arguments, got {value!r}")
    for item in items:
        if "\0" in item:
            raise PresetError(f"{where}: extraArg {item!r} contains a null byte")
        bad = sorted(set(item) & _SHELL_META)
        if bad:
            raise PresetError(f"{where}: extraArg {item!r} contains shell metacharacters ({' '.join(bad)}); "
                              "give plain pi flags and values, e.g. extraArgs: [--no-themes]")
    return tuple(items)


def _check_combinations(preset: Preset, where: str) -> None:
    if preset.tools is not None and preset.exclude_tools is not None:
        raise PresetError(f"{where}: 'tools' and 'excludeTools' are mutually exclusive; keep one")
    if preset.no_tools and (preset.tools or preset.exclude_tools is not None):
        raise PresetError(f"{where}: 'noTools' cannot be combined with 'tools' or 'excludeTools'")
    if preset.skills and preset.no_skills:
        raise PresetError(f"{where}: 'skills' and 'noSkills' are mutually exclusive — --no-skills would "
                          "override the --skill flags")
    for arg in preset.extra_args:
        if arg.split("=", 1)[0] == "--api-key":
            raise PresetError(f'{where}: Refusing extraArg "--api-key": an API key may only come from the '
                              "environment (e.g. ANTHROPIC_API_KEY) or pi's auth.json, never from argv")
    if preset.restricts_tools:
        for arg in preset.extra_args:
            if arg.split("=", 1)[0] in _TOOL_FLAGS:
                raise PresetError(f'{where}: Refusing extraArg "{arg}" which would override profile tool '
                                  "restrictions. Use the dedicated profile fields instead.")


# --- discovery ------------------------------------------------------------------------------


def _preset_files(directory: Path) -> list[Path]:
    """``*.md`` files, sorted; dotfiles (editor and macOS ``._`` droppings) are not presets."""
    return sorted(
        p for p in directory.glob("*.md") if p.is_file() and not p.name.startswith(".")
    )


def _load_scope(directory: Path, scope: str, problems: list[str]) -> dict[str, Preset]:
    presets: dict[str, Preset] = {}
    for path in _preset_files(directory):
        try:
            preset = parse_preset(path, scope)
        except PresetError as exc:
            problems.extend(exc.problems)
            continue
        first = presets.get(preset.name)
        if first is not None:
            problems.append(
                f"Two presets named '{preset.name}' in {scope} scope: {first.path} and "
                f"{preset.path}. Rename one."
            )
            continue
        presets[preset.name] = preset
    return presets


def discover(cwd: str | Path | None = None) -> dict[str, Preset]:
    """All presets visible from ``cwd``, project overriding global, sorted by name."""
    problems: list[str] = []
    global_dir = global_presets_dir()
    merged: dict[str, Preset] = {}
    if global_dir.is_dir():
        merged.update(_load_scope(global_dir, "global", problems))
    project_dir = find_project_presets_dir(cwd)
    if project_dir is not None and not (global_dir.is_dir() and _same_dir(project_dir, global_dir)):
        merged.update(_load_scope(project_dir, "project", problems))
    if problems:
        raise PresetError(problems)
    return {name: merged[name] for name in sorted(merged)}


def _where_hint(cwd: str | Path | None) -> str:
    return f"{global_presets_dir()}/ or {_resolve_cwd(cwd)}/.pi/subagents/"


def get(name: str, cwd: str | Path | None = None) -> Preset:
    """The preset called ``name``; the error lists what exists so the fix is obvious."""
    presets = discover(cwd)
    if name in presets:
        return presets[name]
    if presets:
        raise PresetError(f'Unknown preset: "{name}". Available presets: {", ".join(presets)}')
    raise PresetError(
        f'Unknown preset: "{name}". No presets found: add a markdown file to {_where_hint(cwd)}'
    )


# --- listing --------------------------------------------------------------------------------


def _shorten(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1].rstrip() + "…"


def _tools_text(tools: tuple[str, ...] | None) -> str:
    if tools is None:
        return "(all)"
    return ", ".join(tools) if tools else "(none)"


class PresetList(list):
    """A list of presets that shows itself as a table in a notebook or a terminal."""

    _COLUMNS = ("name", "scope", "model", "tools", "description")

    def __init__(
        self,
        presets: Any = (),
        *,
        global_dir: Path | None = None,
        project_dir: Path | None = None,
        cwd: Path | None = None,
    ):
        super().__init__(presets)
        self.global_dir = global_dir if global_dir is not None else global_presets_dir()
        self.project_dir = project_dir
        self.cwd = cwd if cwd is not None else _resolve_cwd(None)

    def _empty_message(self) -> str:
        project = (
            f"{self.project_dir}/" if self.project_dir is not None
            else f"{self.cwd}/.pi/subagents/ (or the same in any parent directory)"
        )
        return (
            "No presets found. Add a markdown file with 'name:' and 'description:' frontmatter to "
            f"{self.global_dir}/ (global) or {project} (project)."
        )

    def _rows(self) -> list[tuple[str, ...]]:
        return [
            (
                p.name,
                p.scope,
                p.model or "-",
                _shorten(_tools_text(p.tools), _TOOLS_WIDTH),
                _shorten(p.description, _DESCRIPTION_WIDTH),
            )
            for p in self
        ]

    def __repr__(self) -> str:
        if not self:
            return self._empty_message()
        rows = [tuple(c.upper() for c in self._COLUMNS), *self._rows()]
        widths = [max(len(row[i]) for row in rows) for i in range(len(self._COLUMNS))]
        return "\n".join(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip()
            for row in rows
        )

    __str__ = __repr__

    def _repr_html_(self) -> str:
        if not self:
            return f"<p>{html.escape(self._empty_message())}</p>"
        head = "".join(f"<th style='text-align:left'>{html.escape(c)}</th>" for c in self._COLUMNS)
        body = []
        for p in self:
            cells = (
                f"<td title='{html.escape(str(p.path))}'><code>{html.escape(p.name)}</code></td>",
                f"<td>{html.escape(p.scope)}</td>",
                f"<td>{html.escape(p.model or '-')}</td>",
                f"<td>{html.escape(_tools_text(p.tools))}</td>",
                f"<td style='text-align:left'>{html.escape(p.description)}</td>",
            )
            body.append(f"<tr>{''.join(cells)}</tr>")
        return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"

    def to_records(self) -> list[dict[str, Any]]:
        """Plain dicts (e.g. for ``pandas.DataFrame``); tools as a list, path as a string."""
        return [
            {
                "name": p.name,
                "description": p.description,
                "model": p.model,
                "tools": list(p.tools) if p.tools is not None else None,
                "scope": p.scope,
                "path": str(p.path),
            }
            for p in self
        ]


def list_presets(cwd: str | Path | None = None) -> PresetList:
    """All presets visible from ``cwd`` as a displayable list, sorted by name."""
    return PresetList(
        discover(cwd).values(),
        global_dir=global_presets_dir(),
        project_dir=find_project_presets_dir(cwd),
        cwd=_resolve_cwd(cwd),
    )
