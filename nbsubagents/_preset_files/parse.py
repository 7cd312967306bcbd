"""One preset file -> a ``Preset``: the frontmatter's keys checked and read, and what a person should be told.

The parser knows the syntax and says what holds whatever harness runs the file (``Preset.notes``); the harness that runs
it says what it cannot honour (its ``preset_notes``: pi's tools and fields, ``discover.notes`` joins the two).
"""

from __future__ import annotations

import difflib
import re
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .._child import budgets
from .._child import harnesses
from .._child.errors import positive_seconds
from .._child.harnesses.pi import extension_name, extension_selector
from .frontmatter import PresetError, ReadLeniently, read_frontmatter
from .locations import SCOPES
from .shared_fields import approval_policy, delegate_presets, model_list, split_tool_list

# pi's --thinking values (pi-coding-agent cli/args VALID_THINKING_LEVELS).
THINKING_LEVELS: tuple[str, ...] = ("off", "minimal", "low", "medium", "high", "xhigh")
KNOWN_KEYS = frozenset({"name", "description", "model", "tools", "thinking", "noTools", "excludeTools",
                        "noSkills", "noContextFiles", "noExtensions", "skills", "extraArgs", "timeout",
                        "disallowedTools", "permissionMode", "disabled", "enabled", "isolation", "maxTurns",
                        "maxToolCalls", "maxTokens", "maxCost", "ask", "approval", "fallbackModels", "harness",
                        "projectConfig", "pythonSession", "delegate"})
# The one table of the fields with two spellings: a file's camelCase (pi's, written by ``write``) and the
# snake_case that ``run()`` and other agent files (pi-subagents' ``max_turns``, ``disallowed_tools``) use.
# Either is read; both spellings of one field in one file is an error naming both.
SNAKE_CASE: dict[str, str] = {
    "no_tools": "noTools", "exclude_tools": "excludeTools", "no_skills": "noSkills",
    "no_context_files": "noContextFiles", "no_extensions": "noExtensions", "extra_args": "extraArgs",
    "disallowed_tools": "disallowedTools", "permission_mode": "permissionMode", "fallback_models": "fallbackModels",
    "project_config": "projectConfig", "python_session": "pythonSession",
    **{snake: camel for snake, (camel, _, _) in budgets.FIELDS.items()},
}
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
# (``mcp__server__tool``, ``mcp__server__*``), ``server:tool``, or an extension's tools (``ext:NAME``,
# ``ext:NAME/TOOL``: tintinweb's pi-subagents' selectors).
_TOOL_NAME = re.compile(r"^(\*|[A-Za-z0-9_.-]+(\*|\([^()]*\)|:[A-Za-z0-9_.*-]+)?"
                        r"|ext:[A-Za-z0-9_.@-]+(/[A-Za-z0-9_.-]+)?)$")
_SKILL_NAME = re.compile(r"^[A-Za-z0-9_./~-]+$")


class PresetWarning(UserWarning):
    """Something in a preset file was not understood but the preset still loads (or a broken file was skipped)."""


_warned: set[tuple[str, str]] = set()


def warn_once(path: Path, message: str) -> None:
    """One warning per file and message: listing presets again does not repeat it."""
    key = (str(path), message)
    if key not in _warned:
        _warned.add(key)
        warnings.warn(message, PresetWarning, stacklevel=3)


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
    all_tools: bool = False  # a Claude Code agent file without a tools line: Claude Code's "all tools"
    exclude_tools: tuple[str, ...] | None = None
    no_skills: bool = False
    no_context_files: bool = False
    no_extensions: bool = False
    skills: tuple[str, ...] | None = None
    extra_args: tuple[str, ...] = ()
    timeout: float | None = None
    disallowed_tools: tuple[str, ...] | None = None   # Claude Code's denylist (tools with no pi meaning dropped)
    permission_mode: str | None = None                # Claude Code's; "plan" keeps only read-only tools
    isolation: str | None = None                      # "worktree" or "none" (Claude Code's isolation: worktree)
    budget: dict[str, Any] | None = field(default=None, compare=False, hash=False)  # max_turns, ... (budgets.py)
    extension_files: tuple[Path, ...] = ()           # loaded with --extension: what tools' ext:NAME entries name
    ask: bool = False                                 # the child may ask the notebook (pi_extensions/ask.js)
    approval: dict[str, Any] | None = field(default=None, compare=False, hash=False)  # approval_policy()'s
    fallback_models: tuple[str, ...] | None = None    # as written; resolved like ``model`` when a run is prepared
    harness: str | None = None                        # pi (None), claude-code or codex: the child's agent harness
    project_config: bool = False                      # the child loads the project's own agent config (hooks, ...)
    python_session: bool = False                      # the child gets a scratch Python session (_child/pysession)
    delegate: tuple[str, ...] | bool | None = None    # presets its delegate tool may start (True: all; issue 58)
    notes: tuple[str, ...] = field(default=(), compare=False, hash=False)  # what to say of this file, any harness

    @property
    def restricts_tools(self) -> bool:
        return (self.tools is not None or self.exclude_tools is not None or self.no_tools
                or self.disallowed_tools is not None or self.permission_mode == "plan")


@dataclass(frozen=True)
class Problem:
    """A preset file that could not be loaded: shown by ``presets()`` (a name several files claim is a ``Duplicate``).

    ``name`` is the preset name the file claims (its ``name:`` when that much could be read, else
    the file's stem): asking for that name raises ``message``.
    """

    name: str
    scope: str
    path: Path
    message: str


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


def is_disabled(data: dict[Any, Any]) -> bool:
    """Claude Code's ``disabled: true`` and pi extensions' ``enabled: false`` switch a file off."""
    return data.get("disabled") is True or data.get("enabled") is False


def parse_preset(path: Path, scope: str, *, warn: bool = True,
                 read: tuple[dict[Any, Any], str] | None = None) -> Preset:
    """Parse one preset file; raise PresetError naming the file on any problem.

    A missing ``name`` is the file's stem and a missing ``description`` is empty (as pi extensions' agent
    files have them); that, unknown keys and tools with no pi meaning give a ``PresetWarning`` once.
    ``read``: the file's ``read_frontmatter()``, when the caller has it already.
    """
    path = Path(path)
    where = f"Preset file {path}"
    if scope not in SCOPES:
        raise ValueError(f"scope must be one of {', '.join(SCOPES)}, got {scope!r}")
    data, body = read if read is not None else read_frontmatter(path)
    quoted = data.quoted if isinstance(data, ReadLeniently) else ()
    data, spelled = one_spelling(data, where)
    try:
        preset = _parse(path, scope, data, body, where)
    except PresetError as exc:
        raise PresetError([respell(message, spelled) for message in exc.problems]) from None
    if quoted:
        note = (f"not strict YAML: the value of {', '.join(repr(key) for key in quoted)} holds ': ' or another YAML "
                "sign unquoted; read as quoted text, as Claude Code reads it (quote it to silence this)")
        preset = _with_notes(preset, [note, *preset.notes])
    if warn:
        for note in preset.notes:
            warn_once(path, f"{where}: {note}")
    return preset


def one_spelling(data: dict[Any, Any], where: str) -> tuple[dict[Any, Any], dict[str, str]]:
    """The frontmatter with every field under its camelCase key (``SNAKE_CASE``), and the snake_case spellings
    the file used (camel -> snake) so an error names the field as written; both spellings of one is an error."""
    out: dict[Any, Any] = {}
    spelled: dict[str, str] = {}
    for key, value in data.items():
        camel = SNAKE_CASE.get(key, key) if isinstance(key, str) else key
        if camel != key:
            if camel in data:
                raise PresetError(f"{where}: '{key}' and '{camel}' are two spellings of one field; keep one")
            spelled[camel] = key
        out[camel] = value
    return out, spelled


def respell(message: str, spelled: dict[str, str]) -> str:
    """``message`` with each quoted field name (``'maxToolCalls'``) in the spelling the writer used."""
    for camel, written in spelled.items():
        message = message.replace(f"'{camel}'", f"'{written}'")
    return message


def _parse(path: Path, scope: str, data: dict[Any, Any], body: str, where: str) -> Preset:
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
    model = _text_field(data, "model", where) or None
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
        all_tools=claude and "tools" not in data,
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
        extension_files=_extension_files(data, path, scope, notes),
        ask=_flag(data, "ask", where),
        approval=approval_policy(data.get("approval"), f"{where}: 'approval'", PresetError),
        fallback_models=model_list(data.get("fallbackModels"), f"{where}: 'fallbackModels'", PresetError),
        harness=_parse_harness(data.get("harness"), where),
        project_config=_flag(data, "projectConfig", where),
        python_session=_flag(data, "pythonSession", where),
        delegate=delegate_presets(data.get("delegate"), f"{where}: 'delegate'", PresetError),
    )
    _check_combinations(preset, where)
    return _with_notes(preset, notes)


def _with_notes(preset: Preset, notes: list[str]) -> Preset:
    return replace(preset, notes=tuple(notes)) if notes else preset


def _flag(data: dict[str, Any], key: str, where: str) -> bool:
    value = data.get(key, False)
    if not isinstance(value, bool):
        raise PresetError(f"{where}: '{key}' must be true or false, got {value!r}")
    return value


def _parse_timeout(value: Any, where: str) -> float | None:
    if value is None:
        return None
    return positive_seconds(value, f"{where}: 'timeout'", PresetError)


def _parse_isolation(value: Any, where: str) -> str | None:
    if value is None:
        return None
    if value not in ("worktree", "none"):
        raise PresetError(f"{where}: 'isolation' must be worktree or none, got {value!r}")
    return str(value)


def _parse_harness(value: Any, where: str) -> str | None:
    if value is None or value == harnesses.DEFAULT:
        return None
    if not isinstance(value, str) or not harnesses.known(value):
        raise PresetError(f"{where}: 'harness' must be one of {', '.join(harnesses.names())}, got {value!r}")
    return str(value)


def _parse_budget(data: dict[Any, Any], where: str) -> dict[str, Any] | None:
    """maxTurns, maxToolCalls, maxTokens, maxCost (or their snake_case spellings) as budget fields."""
    values = {key: data.get(camel) for key, (camel, _, _) in budgets.FIELDS.items()}
    return budgets.check(values, f"{where}: ", camel=True, error=PresetError) or None


def _extension_files(data: dict[Any, Any], path: Path, scope: str, notes: list[str]) -> tuple[Path, ...]:
    """The extension files the ``ext:NAME`` entries of ``tools`` name, from the paths in ``extensions:`` (tintinweb's
    pi-subagents: a path entry answers to its file name without ``.ts``/``.js``, or its folder's for ``index.ts``).

    A relative path is taken from the project root (the folder holding ``.pi``/``.claude``) for project presets, from
    the preset's folder for the others. A name no path matches is left to pi's own extension discovery."""
    tools = data.get("tools")
    names = split_tool_list(tools) if isinstance(tools, str) else tools if isinstance(tools, list) else []
    wanted = {found[0] for name in names if isinstance(name, str) and (found := extension_selector(name.strip()))}
    if not wanted:
        return ()
    entries = data.get("extensions")
    if isinstance(entries, str):
        entries = entries.split(",")
    base = path.parent.parent.parent if scope in ("project", "claude-project") else path.parent
    found: list[Path] = []
    for entry in entries if isinstance(entries, list) else ():
        entry = str(entry).strip()
        if not any(sep in entry for sep in ("/", "\\")) and not entry.startswith("~"):
            continue  # a name: an extension pi discovers itself
        file = Path(entry).expanduser()
        file = (file if file.is_absolute() else base / file).resolve()
        if extension_name(file) not in wanted:
            continue
        if file.is_file():
            found.append(file)
        else:
            notes.append(f"extension file {file} (extensions: {entry}) not found: the child runs without it")
    return tuple(found)


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
