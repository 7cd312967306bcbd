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
are kept as written here; mapping them onto pi's tools is its harness's business (``child.harnesses.pi``).

Claude Code's folders are read as Claude Code 2.1 reads them: subfolders too, a frontmatter strict YAML refuses
given Claude Code's second reading (an unquoted value holding ``: `` read as text), and of several files of one
folder claiming a name the last in the folder's listing order is kept (a ``Duplicate``; running that name warns once).
A broken file costs that file only: discovery keeps every good preset and reports each broken file as a ``Problem``,
and asking for a broken preset by name raises that file's error. Nothing is warned while discovering: the preset
listing (``presets()``, ``nbsubagents presets``) shows the problems, duplicates and notes, grouped. Nothing is cached
but parsed frontmatter: a notebook user who edits a preset expects the next call to see it.

The package: ``locations`` (the scopes' directories), ``parse`` (one file -> a ``Preset``), ``discover`` (every
scope merged, problems collected), ``write`` (presets made and changed from code: new, edit, copy, delete, each
file read back by ``parse`` before it is moved into place). The list a notebook shows (``nbsubagents.presets()``) is
drawn by ``views.presets``.
"""

from __future__ import annotations

from .._config import agent_dir
from .discover import Duplicate, Scan, discover, get, notes, scan
from .locations import (
    SCOPES,
    claude_user_dir,
    find_claude_project_dir,
    find_project_presets_dir,
    global_presets_dir,
    resolve_cwd,
    scope_dirs,
)
from .parse import (
    IGNORED_KEYS,
    KNOWN_KEYS,
    PERMISSION_MODES,
    THINKING_LEVELS,
    Preset,
    PresetError,
    PresetWarning,
    Problem,
    is_disabled,
    parse_preset,
    read_frontmatter,
)
from .shared_fields import split_tool_list

__all__ = [
    "Duplicate",
    "IGNORED_KEYS",
    "KNOWN_KEYS",
    "PERMISSION_MODES",
    "SCOPES",
    "THINKING_LEVELS",
    "Preset",
    "PresetError",
    "PresetWarning",
    "Problem",
    "Scan",
    "agent_dir",
    "claude_user_dir",
    "discover",
    "find_claude_project_dir",
    "find_project_presets_dir",
    "get",
    "global_presets_dir",
    "is_disabled",
    "notes",
    "parse_preset",
    "read_frontmatter",
    "resolve_cwd",
    "scan",
    "scope_dirs",
    "split_tool_list",
]
