"""What a pi child's tools are: tool entries as their authors wrote them (pi's, or Claude Code's ``Read``, ``Glob``,
``Agent(a, b)``, ``mcp__github__*``, ``*``) made pi's built-in tools, minus ``excludeTools``/``disallowedTools``,
read-only ones under ``permissionMode: plan``; names with no pi meaning left out and said so (``tool_notes``), with
the Claude Code fields a pi child cannot honour (``preset_notes``). A preset or a request is read by duck typing (the
same field names). Part of the pi harness (``pi``), which re-exports these names."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

PI_TOOLS = ("read", "bash", "edit", "write", "grep", "find", "ls")
READ_ONLY_TOOLS = ("read", "grep", "find", "ls")  # permissionMode: plan
# Claude Code's agent-file fields that change what its child does and that a pi child has no way to honour.
UNHONOURED = ("hooks", "mcpServers", "effort", "memory", "background", "initialPrompt", "skills")
# Claude Code tool names with a pi meaning; other Claude tools (WebFetch, Task, ...) have none.
_ALIASES = {"glob": "find", "multiedit": "edit", "notebookread": "read"}
_CALL_FORM = re.compile(r"^([A-Za-z0-9_.-]+)\((.*)\)$")


def extension_selector(name: str) -> tuple[str, str | None] | None:
    """tintinweb's pi-subagents' extension tools: ``ext:NAME`` -> (name, None), ``ext:NAME/TOOL`` -> (name, tool);
    None for any other entry. The name matches case-insensitively (lowercased here), the tool as written."""
    if not name.startswith("ext:"):
        return None
    extension, _, tool = name[len("ext:"):].partition("/")
    return extension.strip().lower(), tool.strip() or None


def extension_name(path: Path) -> str:
    """The name an extension file answers to in ``ext:NAME``: its file name without ``.ts``/``.js`` (lowercased), or
    its folder's name for ``index.ts``/``index.js`` (as tintinweb's pi-subagents names them)."""
    if path.name in ("index.ts", "index.js"):
        return path.parent.name.lower()
    return re.sub(r"\.(ts|js)$", "", path.name).lower()


def classify_tool(name: str) -> tuple[str | None, str | None]:
    """One tool entry -> (pi tool name, None), ("*", None) for all tools, or (None, why a pi child cannot have it).

    An extension's tool (``ext:NAME/TOOL``) is (TOOL, None); a whole extension (``ext:NAME``) cannot be named to
    pi's ``--tools``. ``all`` is ``*`` (tintinweb's spelling)."""
    if name == "*" or name.lower() == "all":
        return "*", None
    selector = extension_selector(name)
    if selector is not None:
        return (selector[1], None) if selector[1] else (None, "whole extensions (name each tool: ext:NAME/TOOL)")
    call = _CALL_FORM.match(name)
    if call:
        base = call[1].lower()
        if base in ("task", "agent"):
            return None, "sub-agents"
        if _ALIASES.get(base, base) in PI_TOOLS:
            return None, "argument-restricted tools"  # e.g. Bash(git diff:*): pi cannot restrict arguments
        return None, "no pi equivalent"
    lowered = name.lower()
    if lowered.startswith("mcp__") or ":" in name:
        return None, "MCP tools"
    if lowered in ("task", "agent"):
        return None, "sub-agents"
    pi_name = _ALIASES.get(lowered, lowered)
    if pi_name in PI_TOOLS:
        return pi_name, None
    return None, "no pi equivalent"


def pi_tool_names(names: Sequence[str]) -> tuple[list[str] | None, list[str]]:
    """Split tool entries into pi's built-in tools (None: all of them, for ``*``) and the names pi has no tool for."""
    kept: list[str] = []
    ignored: list[str] = []
    extension_tools: list[str] = []  # ext:NAME/TOOL entries (what was done with each: extension_notes)
    everything = whole_extension = False
    for name in names:
        selector = extension_selector(name)
        if selector is not None:
            whole_extension |= selector[1] is None
            if selector[1] is not None and selector[1] not in extension_tools:
                extension_tools.append(selector[1])
            continue
        pi_name, _why = classify_tool(name)
        if pi_name == "*":
            everything = True
        elif pi_name is not None:
            if pi_name not in kept:
                kept.append(pi_name)
        elif name.lower() != "none":  # tintinweb's "no built-in tools"
            ignored.append(name)
    if everything:
        if whole_extension or not extension_tools:
            return None, ignored  # every tool (a whole extension's tools cannot be listed to --tools)
        kept = list(PI_TOOLS)
    return kept + [t for t in extension_tools if t not in kept], ignored


def effective_tools(preset: Any) -> tuple[list[str] | None, list[str]]:
    """The pi tools the child gets (None: no ``--tools``, pi's default four and every tool of the extensions it loads:
    a pi preset without a ``tools`` line, or ``*``) and the names left out. A Claude Code agent file without a
    ``tools`` line (``all_tools``) gets every built-in tool pi has, ``PI_TOOLS``: what Claude Code's "all tools" means
    here, not pi's default four."""
    ignored: list[str] = []
    if preset.no_tools:
        return [], []
    tools: list[str] | None = list(PI_TOOLS) if getattr(preset, "all_tools", False) else None
    if preset.tools is not None:
        tools, ignored = pi_tool_names(preset.tools)
    excluded: set[str] = set()
    for name in preset.exclude_tools or ():
        excluded.add(name.lower())
    if preset.disallowed_tools:
        denied, _ = pi_tool_names(preset.disallowed_tools)
        excluded.update(PI_TOOLS if denied is None else denied)  # disallowedTools: "*" denies everything
        excluded.update(preset.disallowed_tools)  # an extension's tool, by the name it registers
    read_only = preset.permission_mode == "plan"
    if tools is None and (excluded or read_only):
        tools = list(PI_TOOLS)
    if tools is not None:
        tools = [t for t in tools if t not in excluded and (not read_only or t in READ_ONLY_TOOLS)]
    return tools, ignored


def extension_notes(preset: Any) -> list[str]:
    """What was done with each ``ext:`` entry of a preset's tools: the tool allowed or not, the extension's file."""
    files = {extension_name(path): path for path in preset.extension_files}
    tools, _ = effective_tools(preset)
    notes = []
    for name in preset.tools or ():
        selector = extension_selector(name)
        if selector is None:
            continue
        extension, tool = selector
        if tool is None:
            what = ("every tool of every loaded extension is allowed (pi's --tools cannot name a whole extension)"
                    if tools is None else "left out: pi's --tools cannot name a whole extension; list its tools "
                    f"as ext:{extension}/TOOL")
        else:
            what = f"tool {tool} " + ("allowed" if tools is None or tool in tools else "left out by the preset's "
                                       "other fields")
        if extension in files:
            where = f"loaded from {files[extension]} (--extension)"
        elif preset.no_extensions:
            where = "not loaded: no file for it in 'extensions:', and noExtensions turns pi's discovery off"
        else:
            where = ("expected from pi's own extension discovery (its agent dir; the project's .pi/extensions only "
                     "with projectConfig)")
        notes.append(f"{name}: {what}; extension {extension} {where}")
    return notes


def tool_notes(preset: Any) -> list[str]:
    """What a person should be told about a preset's tools: entries left out, and a child left with none."""
    notes = extension_notes(preset)
    tools, ignored = effective_tools(preset)
    if ignored:
        by_reason: dict[str, list[str]] = {}
        for name in ignored:
            by_reason.setdefault(classify_tool(name)[1] or "no pi equivalent", []).append(name)
        reasons = "; ".join(f"{why}: {', '.join(names)}" for why, names in by_reason.items())
        notes.append(f"tools a pi child cannot have are left out ({reasons})")
    named = bool(ignored) or bool(preset.tools and preset.permission_mode == "plan")
    if tools == [] and not preset.no_tools and named:  # an explicit `tools: []` needs no warning
        why = "permissionMode: plan and its tools leave" if preset.permission_mode == "plan" else "its tools leave"
        notes.append(f"{why} no pi tool: the child runs with no tools (pi's tools: {', '.join(PI_TOOLS)})")
    return notes


def preset_notes(preset: Any) -> list[str]:
    """What the preset listing says about a preset a pi child runs, once per file: its tool notes, and the Claude
    Code fields it carries that pi cannot honour (the child runs without them)."""
    fields = [key for key in UNHONOURED if key in (preset.extra or {})]
    said = [f"pi cannot honour {', '.join(fields)} (Claude Code's): the child runs without them"] if fields else []
    return [*tool_notes(preset), *said]
