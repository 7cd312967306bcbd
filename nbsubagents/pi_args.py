"""A preset and a model -> pi's argv. The prompt is not in it: pi reads it from stdin (a file).

pi reads a non-TTY stdin to EOF and uses it as the prompt, so the supervisor opens the run's
``prompt.md`` as the child's stdin: the task never shows in ``ps``, a task that starts with ``-``
is not taken for a flag, and a prompt with large file context does not hit the kernel's
per-argument limit (128 KiB).
"""

from __future__ import annotations

from pathlib import Path

from .config import NbSubagentsError
from .preset_files import Preset

PI_TOOLS = ("read", "bash", "edit", "write", "grep", "find", "ls")
# Claude Code tool names with a pi meaning; other Claude tools (WebFetch, Task, ...) have none.
_ALIASES = {"glob": "find", "multiedit": "edit"}


def pi_tool_names(names: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """Split preset tool names into pi's built-in tools and the names pi has no tool for."""
    kept: list[str] = []
    ignored: list[str] = []
    for name in names:
        pi_name = _ALIASES.get(name.lower(), name.lower())
        if pi_name in PI_TOOLS:
            if pi_name not in kept:
                kept.append(pi_name)
        else:
            ignored.append(name)
    return kept, ignored


def build_argv(pi: str, preset: Preset, model: str, *, session: Path,
               system_prompt: Path | None) -> tuple[list[str], list[str]]:
    """pi's argv for one run, and the preset tool names that were ignored (no pi meaning)."""
    argv = [pi, "--mode", "json", "-p", "--session", str(session), "--model", model]
    ignored: list[str] = []
    if system_prompt is not None:
        argv += ["--append-system-prompt", str(system_prompt)]
    if preset.exclude_tools is not None:
        unknown = [t for t in preset.exclude_tools if t.lower() not in PI_TOOLS]
        if unknown:
            raise NbSubagentsError(f'Preset "{preset.name}" ({preset.path}): excludeTools names '
                                   f"{', '.join(unknown)}, which pi does not have. pi's tools: {', '.join(PI_TOOLS)}")
        excluded = {t.lower() for t in preset.exclude_tools}
        argv += ["--tools", ",".join(t for t in PI_TOOLS if t not in excluded)]
    elif preset.tools is not None:
        tools, ignored = pi_tool_names(preset.tools)
        argv += ["--tools", ",".join(tools)] if tools else ["--no-tools"]
    if preset.no_tools:
        argv.append("--no-tools")
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
    argv += list(preset.extra_args)
    return argv, ignored
