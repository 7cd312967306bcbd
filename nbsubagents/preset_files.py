"""Named subagent presets: markdown files with YAML frontmatter.

A preset names a reusable subagent role: a description (so a person or the main agent can pick
one), an optional default model, an optional built-in tool allowlist, an optional thinking level
and an appended system prompt (the markdown body). There are no bundled presets; they live in,
from the lowest precedence to the highest,

* claude-user: ``~/.claude/agents/*.md`` (Claude Code's user agents),
* claude-project: ``.claude/agents/*.md`` in the nearest ancestor of the working directory that has one,
* global: ``<agent dir>/subagents/*.md`` (agent dir = ``$PI_CODING_AGENT_DIR`` or ``~/.pi/agent``,
  the same directory pi itself uses), and
* project: ``.pi/subagents/*.md`` in the nearest ancestor of the working directory that has one.

A later scope overrides an earlier one by name; the two Claude scopes can be switched off with the
``claude_agents`` setting. Files written for Claude Code (``tools: Read, Grep``, ``disallowedTools``,
``permissionMode``, ``model: sonnet``, ``Agent(a, b)``, ``mcp__server__*``) and for pi extensions (no
``name``: the file's stem is the name; no ``description``) load as their authors meant. Tool names
are kept as written here; mapping them onto pi's tools is ``pi_args``' business.

A broken file costs that file only: discovery keeps every good preset and reports each broken file
as a ``Problem`` (with a warning, once per file and content), and asking for a broken preset by name
raises that file's error. Nothing is cached: the files are tiny, and a notebook user who edits a
preset expects the next call to see it.
"""

from __future__ import annotations

import difflib
import html
import math
import re
import warnings
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
    "PresetWarning",
    "Problem",
    "scan",
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
# Lowest precedence first: a later scope overrides an earlier one by name.
SCOPES: tuple[str, ...] = ("claude-user", "claude-project", "global", "project")
KNOWN_KEYS = frozenset({"name", "description", "model", "tools", "thinking", "noTools", "excludeTools",
                        "noSkills", "noContextFiles", "noExtensions", "skills", "extraArgs", "timeout",
                        "disallowedTools", "permissionMode", "disabled", "enabled", "isolation", "maxTurns",
                        "maxToolCalls", "maxTokens", "maxCost", "max_turns"})
# Keys other agent-file formats use that have no meaning for a pi child: accepted without a warning and
# kept in ``Preset.extra`` (the README's preset table lists them).
IGNORED_KEYS = frozenset({
    # Claude Code
    "color", "mcpServers", "hooks", "memory", "background", "effort", "initialPrompt",
    # pi extensions' own agent files (pi-subagents styles)
    "display_name", "prompt_mode", "inherit_context", "run_in_background", "isolated",
    "extensions", "skill", "output", "defaultReads", "defaultProgress", "interactive", "spawns",
})
# Claude Code's permission modes; a pi child never asks for permission, so only ``plan`` changes anything.
PERMISSION_MODES: tuple[str, ...] = ("default", "acceptEdits", "dontAsk", "bypassPermissions", "plan")
# pi flags that would undo a preset's tool restriction if smuggled in through extraArgs.
_TOOL_FLAGS = ("--tools", "-t", "--no-tools", "-nt")
_SHELL_META = set(";&|`$<>(){}*?!~\\\n\r'\"")

# A tool entry: a plain name, ``*``, ``Name(args)`` (Claude's Task/Agent/Bash(...) forms), an MCP tool
# (``mcp__server__tool``, ``mcp__server__*``) or ``server:tool``.
_TOOL_NAME = re.compile(r"^(\*|[A-Za-z0-9_.-]+(\*|\([^()]*\)|:[A-Za-z0-9_.*-]+)?)$")
_SKILL_NAME = re.compile(r"^[A-Za-z0-9_./~-]+$")
_FENCE = "---"
_DESCRIPTION_WIDTH = 60  # text table only; keeps a row on one line in a notebook cell
_TOOLS_WIDTH = 30


class PresetWarning(UserWarning):
    """Something in a preset file was not understood but the preset still loads (or a broken file was skipped)."""


_warned: set[tuple[str, str]] = set()


def _warn_once(path: Path, message: str) -> None:
    """One warning per file and message: listing presets again does not repeat it."""
    key = (str(path), message)
    if key not in _warned:
        _warned.add(key)
        warnings.warn(message, PresetWarning, stacklevel=3)


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
    disallowed_tools: tuple[str, ...] | None = None   # Claude Code's denylist (tools it has no pi meaning for are dropped)
    permission_mode: str | None = None                # Claude Code's; "plan" keeps only read-only tools
    isolation: str | None = None                      # "worktree" or "none" (Claude Code's isolation: worktree)
    budget: dict[str, Any] | None = field(default=None, compare=False, hash=False)  # max_turns, ... (budgets.py)
    notes: tuple[str, ...] = field(default=(), compare=False, hash=False)  # the warnings given for this file

    @property
    def restricts_tools(self) -> bool:
        return (self.tools is not None or self.exclude_tools is not None or self.no_tools
                or self.disallowed_tools is not None or self.permission_mode == "plan")


@dataclass(frozen=True)
class Problem:
    """A preset file that could not be loaded (or a name two files claim): shown by ``presets()``.

    ``name`` is the preset name the file claims (its ``name:`` when that much could be read, else
    the file's stem): asking for that name raises ``message``.
    """

    name: str
    scope: str
    path: Path
    message: str


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


def claude_user_dir() -> Path:
    """Claude Code's user agents (the directory need not exist)."""
    return Path.home() / ".claude" / "agents"


def find_claude_project_dir(cwd: str | Path | None = None) -> Path | None:
    """The ``.claude/agents`` directory of the nearest ancestor of ``cwd`` (not the home folder's, which is
    the claude-user scope), if any."""
    start = _resolve_cwd(cwd)
    home = Path.home().resolve()
    for directory in (start, *start.parents):
        if directory == home:
            continue
        candidate = directory / ".claude" / "agents"
        if candidate.is_dir():
            return candidate
    return None


def _claude_agents_enabled(cwd: str | Path | None) -> bool:
    from .config import current
    return bool(current(_resolve_cwd(cwd)).claude_agents)


def scope_dirs(cwd: str | Path | None = None) -> list[tuple[str, Path]]:
    """The existing preset directories visible from ``cwd``, lowest precedence first; a directory that two
    scopes share (an agent dir inside the project) is read once, in the first."""
    found: list[tuple[str, Path]] = []
    if _claude_agents_enabled(cwd):
        found.append(("claude-user", claude_user_dir()))
        project = find_claude_project_dir(cwd)
        if project is not None:
            found.append(("claude-project", project))
    found.append(("global", global_presets_dir()))
    project = find_project_presets_dir(cwd)
    if project is not None:
        found.append(("project", project))
    found = [(scope, d) for scope, d in found if d.is_dir()]
    return [(scope, d) for i, (scope, d) in enumerate(found)
            if not any(_same_dir(d, earlier) for _, earlier in found[:i])]


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
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise PresetError(
            f"{where}: the YAML frontmatter must be 'key: value' lines "
            f"(name:, description:, ...), got {type(data).__name__} {data!r}"
        )
    return data


def _colon_hint(text: str, line_index: int) -> str | None:
    """``description: Use when: ...`` is the common case: a value holding ': ' must be quoted."""
    lines = text.splitlines()
    if not 0 <= line_index < len(lines):
        return None
    key, sep, value = lines[line_index].partition(":")
    if not sep or not key.strip() or " " in key.strip() or not value.strip():
        return None
    quoted = value.strip().replace("\\", "\\\\").replace('"', '\\"')
    shown = quoted if len(quoted) <= 60 else quoted[:59] + "…"
    return (f"The value of '{key.strip()}' contains ': ', which YAML reads as a new key: put the value in "
            f'quotes, e.g. {key.strip()}: "{shown}"')


def _text_field(data: dict[Any, Any], key: str, where: str) -> str | None:
    """A text field that may be missing (None); present, it must be a string."""
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise PresetError(
            f"{where}: '{key}' must be a string, got {value!r}; quote it if YAML reads it as something else"
        )
    return value.strip()


def _optional_text(data: dict[Any, Any], key: str, where: str) -> str | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise PresetError(f"{where}: '{key}' must be a string, got {value!r}; quote it")
    return value.strip() or None


def split_tool_list(text: str) -> list[str]:
    """Split ``Read, Agent(a, b), Bash(git diff:*)`` on the commas outside parentheses."""
    items, depth, current = [], 0, []
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth = max(0, depth - 1)
        if char == "," and depth == 0:
            items.append("".join(current))
            current = []
        else:
            current.append(char)
    items.append("".join(current))
    return items


def _parse_tools(value: Any, where: str, key: str = "tools") -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        names = split_tool_list(value) if key != "skills" else value.split(",")
    elif isinstance(value, list) and all(isinstance(item, str) for item in value):
        names = value
    else:
        raise PresetError(
            f"{where}: '{key}' must be a comma-separated string or a list of "
            f"{'skill' if key == 'skills' else 'tool'} names, got {value!r}"
        )
    cleaned = tuple(" ".join(name.split()) for name in names if name.strip())
    pattern = _SKILL_NAME if key == "skills" else _TOOL_NAME
    bad = [name for name in cleaned if not pattern.match(name)]
    if bad:
        listed = ", ".join(repr(name) for name in bad)
        if key == "skills":
            raise PresetError(f"{where}: invalid skill name {listed} in 'skills'; give skill names or paths "
                              "without spaces (e.g. skills: lint, ./skills/review)")
        raise PresetError(
            f"{where}: invalid tool name {listed} in '{key}'; a tool is a name of letters, digits, '_', '.' "
            "and '-' (e.g. tools: read, grep, find), '*', Name(...), mcp__server__tool or server:tool"
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


def _parse_permission_mode(value: Any, where: str) -> str | None:
    if value is None:
        return None
    if isinstance(value, str) and value.strip() in PERMISSION_MODES:
        return value.strip()
    raise PresetError(f"{where}: 'permissionMode' must be one of {', '.join(PERMISSION_MODES)}, got {value!r} "
                      "(plan keeps only read-only tools; the others change nothing, since a pi child never asks "
                      "for permission)")


def _unknown_key_notes(data: dict[Any, Any]) -> list[str]:
    notes = []
    known = sorted(KNOWN_KEYS | IGNORED_KEYS)
    for key in data:
        if not isinstance(key, str) or key in KNOWN_KEYS or key in IGNORED_KEYS:
            continue
        close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
        notes.append(f"unknown key '{key}' (ignored)" + (f"; did you mean '{close[0]}'?" if close else ""))
    return notes


def read_frontmatter(path: Path) -> tuple[dict[Any, Any], str]:
    """The frontmatter mapping and the body of one file; PresetError naming the file on any problem."""
    where = f"Preset file {path}"
    try:
        text = path.read_text(encoding="utf-8-sig")  # -sig: tolerate a BOM from Windows editors
    except (OSError, UnicodeDecodeError) as exc:
        raise PresetError(f"{where}: cannot be read as UTF-8 text: {exc}") from None
    frontmatter, body = _split_frontmatter(text, where)
    return _load_yaml(frontmatter, where), body


def is_disabled(data: dict[Any, Any]) -> bool:
    """Claude Code's ``disabled: true`` and pi extensions' ``enabled: false`` switch a file off."""
    return data.get("disabled") is True or data.get("enabled") is False


def parse_preset(path: Path, scope: str, *, warn: bool = True) -> Preset:
    """Parse one preset file; raise PresetError naming the file on any problem.

    A missing ``name`` is the file's stem and a missing ``description`` is empty (as pi extensions' agent
    files have them); that, unknown keys and tools with no pi meaning give a ``PresetWarning`` once.
    """
    path = Path(path)
    where = f"Preset file {path}"
    if scope not in SCOPES:
        raise ValueError(f"scope must be one of {', '.join(SCOPES)}, got {scope!r}")
    data, body = read_frontmatter(path)
    notes: list[str] = []
    name = _text_field(data, "name", where)
    if name is None:
        name = path.stem
    elif not name:
        raise PresetError(f"{where}: 'name' is empty; give the preset a name (or remove the line: the file name "
                          f"'{path.stem}' is then the name)")
    description = _text_field(data, "description", where)
    if not description:
        notes.append("no description (a description tells people and agents when to pick this preset)")
    model = _optional_text(data, "model", where)
    notes += _unknown_key_notes(data)
    extra = {key: value for key, value in data.items() if key not in KNOWN_KEYS}
    claude = scope.startswith("claude-")
    skills = _parse_tools(data.get("skills"), where, "skills")
    if claude and skills:
        extra["skills"] = list(skills)  # Claude's skills are names of Claude skills, not files pi can load
        skills = None
    preset = Preset(
        name=name,
        description=description or "",
        model=None if model == "inherit" else model,  # Claude Code's "use the caller's model"
        tools=_parse_tools(data.get("tools"), where),
        thinking=_parse_thinking(data.get("thinking"), where),
        prompt=body.strip(),
        scope=scope,
        path=path,
        extra=extra,
        no_tools=_flag(data, "noTools", where),
        exclude_tools=_parse_tools(data.get("excludeTools"), where, "excludeTools"),
        no_skills=_flag(data, "noSkills", where),
        no_context_files=_flag(data, "noContextFiles", where),
        no_extensions=_flag(data, "noExtensions", where),
        skills=skills,
        extra_args=_parse_extra_args(data.get("extraArgs"), where),
        timeout=_parse_timeout(data.get("timeout"), where),
        disallowed_tools=_parse_tools(data.get("disallowedTools"), where, "disallowedTools"),
        permission_mode=_parse_permission_mode(data.get("permissionMode"), where),
        isolation=_parse_isolation(data.get("isolation"), where),
        budget=_parse_budget(data, where),
    )
    _check_combinations(preset, where)
    from .pi_args import tool_notes  # the parser knows syntax; pi_args knows what pi has
    notes += tool_notes(preset)
    preset = _with_notes(preset, notes)
    if warn:
        for note in notes:
            _warn_once(path, f"{where}: {note}")
    return preset


def _with_notes(preset: Preset, notes: list[str]) -> Preset:
    from dataclasses import replace
    return replace(preset, notes=tuple(notes)) if notes else preset


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


def _parse_isolation(value: Any, where: str) -> str | None:
    if value is None:
        return None
    if value not in ("worktree", "none"):
        raise PresetError(f"{where}: 'isolation' must be worktree or none, got {value!r}")
    return str(value)


def _parse_budget(data: dict[Any, Any], where: str) -> dict[str, Any] | None:
    """maxTurns, maxToolCalls, maxTokens, maxCost (and pi-subagents' max_turns) as budget fields."""
    from .child import budgets
    values = {key: data.get(camel, data.get(key) if key == "max_turns" else None)
              for key, (camel, _, _) in budgets.FIELDS.items()}
    return budgets.check(values, f"{where}: ", camel=True, error=PresetError) or None


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


def _claimed_name(path: Path) -> str:
    """The name a broken file claims: its ``name:`` if the frontmatter reads, else its stem."""
    try:
        data, _ = read_frontmatter(path)
    except PresetError:
        return path.stem
    name = data.get("name")
    return name.strip() if isinstance(name, str) and name.strip() else path.stem


def _load_scope(directory: Path, scope: str) -> tuple[dict[str, Preset], dict[str, Problem]]:
    """The good presets of one directory by name, and the broken names (a broken file, or a name two files claim)."""
    found: dict[str, list[Preset]] = {}
    broken: dict[str, Problem] = {}
    for path in _preset_files(directory):
        try:
            data, _ = read_frontmatter(path)
            if is_disabled(data):
                continue
            preset = parse_preset(path, scope)
        except PresetError as exc:
            name = _claimed_name(path)
            if name not in broken:
                broken[name] = Problem(name, scope, path, str(exc))
            continue
        found.setdefault(preset.name, []).append(preset)
    good: dict[str, Preset] = {}
    for name, presets in found.items():
        if len(presets) > 1:
            paths = " and ".join(str(p.path) for p in presets)
            broken.setdefault(name, Problem(name, scope, presets[0].path,
                                            f"Two presets named '{name}' in {scope} scope: {paths}. Rename one."))
        elif name not in broken:
            good[name] = presets[0]
    return good, broken


@dataclass
class Scan:
    """What discovery found: the presets a run can name, and the broken files with their errors."""

    presets: dict[str, Preset]
    problems: list[Problem]
    broken: dict[str, Problem]  # by the name a run would use: the error to raise for it


def scan(cwd: str | Path | None = None) -> Scan:
    """All presets visible from ``cwd`` (a higher scope overriding a lower one by name) and the problems.

    A broken file in a higher scope shadows a good preset of the same name in a lower one: the person
    meant the higher one, and running the other would be a surprise.
    """
    merged: dict[str, Preset] = {}
    broken: dict[str, Problem] = {}
    problems: list[Problem] = []
    for scope, directory in scope_dirs(cwd):
        good, bad = _load_scope(directory, scope)
        for name, preset in good.items():
            merged[name] = preset
            broken.pop(name, None)
        for name, problem in bad.items():
            broken[name] = problem
            merged.pop(name, None)
        problems.extend(sorted(bad.values(), key=lambda p: str(p.path)))
    for problem in problems:
        _warn_once(problem.path, f"{problem.message} (this file is skipped; the other presets work)")
    return Scan({name: merged[name] for name in sorted(merged)}, problems, broken)


def discover(cwd: str | Path | None = None) -> dict[str, Preset]:
    """The good presets visible from ``cwd``, sorted by name; broken files are skipped with a warning."""
    return scan(cwd).presets


def _where_hint(cwd: str | Path | None) -> str:
    return f"{global_presets_dir()}/ or {_resolve_cwd(cwd)}/.pi/subagents/"


def get(name: str, cwd: str | Path | None = None) -> Preset:
    """The preset called ``name``; a broken one raises its file's error, an unknown one lists what exists."""
    found = scan(cwd)
    if name in found.presets:
        return found.presets[name]
    if name in found.broken:
        raise PresetError(found.broken[name].message)
    if found.presets:
        raise PresetError(f'Unknown preset: "{name}". Available presets: {", ".join(found.presets)}')
    raise PresetError(
        f'Unknown preset: "{name}". No presets found: add a markdown file to {_where_hint(cwd)}'
    )


# --- listing --------------------------------------------------------------------------------


def _shorten(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1].rstrip() + "…"


def _tools_text(preset: Preset) -> str:
    """The tools the child gets, as pi names, and what the file named that a pi child cannot have."""
    from .pi_args import effective_tools
    tools, dropped = effective_tools(preset)
    text = "(all)" if tools is None else (", ".join(tools) if tools else "(none)")
    return text + (f" (not for pi: {', '.join(dropped)})" if dropped else "")


class PresetList(list):
    """A list of presets that shows itself as a table in a notebook or a terminal.

    ``problems`` holds the files that could not be loaded (each a ``Problem`` with its error); the
    table shows them under the presets.
    """

    _COLUMNS = ("name", "scope", "model", "tools", "description")

    def __init__(
        self,
        presets: Any = (),
        *,
        global_dir: Path | None = None,
        project_dir: Path | None = None,
        cwd: Path | None = None,
        problems: list[Problem] | None = None,
    ):
        super().__init__(presets)
        self.global_dir = global_dir if global_dir is not None else global_presets_dir()
        self.project_dir = project_dir
        self.cwd = cwd if cwd is not None else _resolve_cwd(None)
        self.problems: list[Problem] = list(problems or [])

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
                _shorten(_tools_text(p), _TOOLS_WIDTH),
                _shorten(p.description, _DESCRIPTION_WIDTH),
            )
            for p in self
        ]

    def _problem_lines(self) -> list[str]:
        if not self.problems:
            return []
        lines = [f"Problems ({len(self.problems)} file{'s' if len(self.problems) != 1 else ''} skipped; "
                 "running one of these names raises its error):"]
        lines += [f"  {p.name} ({p.scope}): {p.message}" for p in self.problems]
        return lines

    def __repr__(self) -> str:
        if not self:
            return "\n".join([self._empty_message(), *self._problem_lines()])
        rows = [tuple(c.upper() for c in self._COLUMNS), *self._rows()]
        widths = [max(len(row[i]) for row in rows) for i in range(len(self._COLUMNS))]
        table = [
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip()
            for row in rows
        ]
        return "\n".join(table + self._problem_lines())

    __str__ = __repr__

    def _problems_html(self) -> str:
        if not self.problems:
            return ""
        items = "".join(
            f"<li><code>{html.escape(p.name)}</code> ({html.escape(p.scope)}): "
            f"<span style='color:#b00'>{html.escape(p.message)}</span></li>" for p in self.problems)
        return (f"<p>Problems ({len(self.problems)} file{'s' if len(self.problems) != 1 else ''} skipped; "
                f"running one of these names raises its error):</p><ul>{items}</ul>")

    def _repr_html_(self) -> str:
        if not self:
            return f"<p>{html.escape(self._empty_message())}</p>{self._problems_html()}"
        head = "".join(f"<th style='text-align:left'>{html.escape(c)}</th>" for c in self._COLUMNS)
        body = []
        for p in self:
            cells = (
                f"<td title='{html.escape(str(p.path))}'><code>{html.escape(p.name)}</code></td>",
                f"<td>{html.escape(p.scope)}</td>",
                f"<td>{html.escape(p.model or '-')}</td>",
                f"<td>{html.escape(_tools_text(p))}</td>",
                f"<td style='text-align:left'>{html.escape(p.description)}</td>",
            )
            body.append(f"<tr>{''.join(cells)}</tr>")
        table = f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
        return table + self._problems_html()

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

    def problem_records(self) -> list[dict[str, Any]]:
        """The broken files as plain dicts: name, scope, path, error."""
        return [{"name": p.name, "scope": p.scope, "path": str(p.path), "error": p.message} for p in self.problems]


def list_presets(cwd: str | Path | None = None) -> PresetList:
    """All presets visible from ``cwd`` as a displayable list, sorted by name, with the broken files."""
    found = scan(cwd)
    return PresetList(
        found.presets.values(),
        global_dir=global_presets_dir(),
        project_dir=find_project_presets_dir(cwd),
        cwd=_resolve_cwd(cwd),
        problems=found.problems,
    )
