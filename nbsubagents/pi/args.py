"""A preset and a model -> pi's argv. The prompt is not in it: pi reads it from stdin (a file).

pi reads a non-TTY stdin to EOF and uses it as the prompt, so the supervisor opens the run's
``prompt.md`` as the child's stdin: the task never shows in ``ps``, a task that starts with ``-``
is not taken for a flag, and a prompt with large file context does not hit the kernel's
per-argument limit (128 KiB).

Tool names arrive as their authors wrote them (pi's, or Claude Code's ``Read``, ``Glob``,
``Agent(a, b)``, ``mcp__github__*``, ``*``); this module decides what a pi child gets: pi's built-in
tools, minus ``excludeTools``/``disallowedTools``, read-only ones under ``permissionMode: plan``.
Names with no pi meaning are left out and said so (``tool_notes``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..config import NbSubagentsError

if TYPE_CHECKING:  # a preset is read, never made, here: presets/ build them and import this module
    from ..preset_files import Preset

PI_TOOLS = ("read", "bash", "edit", "write", "grep", "find", "ls")
READ_ONLY_TOOLS = ("read", "grep", "find", "ls")  # permissionMode: plan
# Claude Code tool names with a pi meaning; other Claude tools (WebFetch, Task, ...) have none.
_ALIASES = {"glob": "find", "multiedit": "edit", "notebookread": "read"}
_CALL_FORM = re.compile(r"^([A-Za-z0-9_.-]+)\((.*)\)$")
# A pi extension that marks every request of a github-copilot child as agent-initiated (X-Initiator: agent).
COPILOT_EXTENSION = Path(__file__).resolve().parent.parent / "pi_extensions" / "copilot_agent_initiator.js"


def classify_tool(name: str) -> tuple[str | None, str | None]:
    """One tool entry -> (pi tool name, None), ("*", None) for all tools, or (None, why a pi child cannot have it)."""
    if name == "*":
        return "*", None
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
    everything = False
    for name in names:
        pi_name, _why = classify_tool(name)
        if pi_name == "*":
            everything = True
        elif pi_name is not None:
            if pi_name not in kept:
                kept.append(pi_name)
        else:
            ignored.append(name)
    return (None if everything else kept), ignored


def effective_tools(preset: Preset) -> tuple[list[str] | None, list[str]]:
    """The pi tools the child gets (None: pi's defaults, no ``--tools``) and the names left out."""
    ignored: list[str] = []
    if preset.no_tools:
        return [], []
    tools: list[str] | None = None
    if preset.tools is not None:
        tools, ignored = pi_tool_names(preset.tools)
    excluded: set[str] = set()
    for name in preset.exclude_tools or ():
        excluded.add(name.lower())
    if preset.disallowed_tools:
        denied, _ = pi_tool_names(preset.disallowed_tools)
        excluded.update(PI_TOOLS if denied is None else denied)  # disallowedTools: "*" denies everything
    read_only = preset.permission_mode == "plan"
    if tools is None and (excluded or read_only):
        tools = list(PI_TOOLS)
    if tools is not None:
        tools = [t for t in tools if t not in excluded and (not read_only or t in READ_ONLY_TOOLS)]
    return tools, ignored


def tool_notes(preset: Preset) -> list[str]:
    """What a person should be told about a preset's tools: entries left out, and a child left with none."""
    notes = []
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


def build_argv(pi: str | Sequence[str], preset: Preset, model: str, *, session: Path,
               system_prompt: Path | None) -> tuple[list[str], list[str]]:
    """pi's argv for one run, and the preset tool names that were left out (no pi meaning).

    ``pi`` is the binary, or the command that starts it (``[node, cli.js]`` when pi needs its own node).
    """
    command = [pi] if isinstance(pi, str) else list(pi)
    argv = [*command, "--mode", "json", "-p", "--session", str(session), "--model", model]
    if system_prompt is not None:
        argv += ["--append-system-prompt", str(system_prompt)]
    unknown = [t for t in preset.exclude_tools or () if t.lower() not in PI_TOOLS]
    if unknown:
        raise NbSubagentsError(f'Preset "{preset.name}" ({preset.path}): excludeTools names '
                               f"{', '.join(unknown)}, which pi does not have. pi's tools: {', '.join(PI_TOOLS)}")
    tools, ignored = effective_tools(preset)
    if tools is not None:
        argv += ["--tools", ",".join(tools)] if tools else ["--no-tools"]
    if preset.thinking:
        argv += ["--thinking", preset.thinking]
    if preset.no_skills:
        argv.append("--no-skills")
    for skill in preset.skills or ():
        argv += ["--skill", skill]
    if preset.no_context_files:
        argv.append("--no-context-files")
    if preset.no_extensions:
        argv.append("--no-extensions")
    if model.split("/", 1)[0] == "github-copilot":
        argv += ["--extension", str(COPILOT_EXTENSION)]  # explicit -e paths load even with --no-extensions
    argv += list(preset.extra_args)
    return argv, ignored
