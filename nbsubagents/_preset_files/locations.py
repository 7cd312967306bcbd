"""Where presets live: the four scopes' directories, lowest precedence first (see the package's docstring)."""

from __future__ import annotations

from pathlib import Path

from .._config import agent_dir, current

# Lowest precedence first: a later scope overrides an earlier one by name.
SCOPES: tuple[str, ...] = ("claude-user", "claude-project", "global", "project")


def global_presets_dir() -> Path:
    """Where global presets live (the directory need not exist)."""
    return agent_dir() / "subagents"


def resolve_cwd(cwd: str | Path | None) -> Path:
    """``cwd`` (default: the working directory) made absolute."""
    return (Path.cwd() if cwd is None else Path(cwd).expanduser()).resolve()


def find_project_presets_dir(cwd: str | Path | None = None) -> Path | None:
    """The ``.pi/subagents`` directory of the nearest ancestor of ``cwd`` (inclusive), if any."""
    start = resolve_cwd(cwd)
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
    start = resolve_cwd(cwd)
    home = Path.home().resolve()
    for directory in (start, *start.parents):
        if directory == home:
            continue
        candidate = directory / ".claude" / "agents"
        if candidate.is_dir():
            return candidate
    return None


def _claude_agents_enabled(cwd: str | Path | None) -> bool:
    return bool(current(resolve_cwd(cwd)).claude_agents)


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
