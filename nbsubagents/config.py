"""Where things are: the agent dir, the project root; and the few settings.

Everything here is resolved on demand (not at import) so that changing an environment variable or
``nbsubagents.configure(...)`` takes effect for the next run.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, fields
from pathlib import Path

from .child.budgets import problem
from .child.errors import NbSubagentsError
from .child.secrets import compile_patterns

__all__ = ["NbSubagentsError"]  # and the settings below


@dataclass
class Settings:
    """The settings in force; see ``current()`` for where each value comes from."""

    pi: str | None = None          # path of the pi binary
    root: str | None = None        # project root holding .pi/subagents/runs
    concurrency: int = 4           # parallel children at once
    max_tasks: int = 16            # tasks per parallel call
    timeout: float = 600.0         # seconds per run, extended while the child is active
    extend_timeout_debounce: float = 30.0
    looping_tool_count: int = 5
    panel_lines: int = 15          # lines in a panel's rolling window
    runner: str = "process"        # "process" or "tmux" (foreground runs only)
    poll_interval: float = 0.05    # how often a waiting kernel looks at events.jsonl
    claude_agents: bool = True     # also read Claude Code's .claude/agents/ and ~/.claude/agents/ (lowest precedence)
    isolation: str | None = None   # "worktree": every run works in a fresh worktree (or copy) of its cwd
    isolation_max_copy_mb: float = 200.0  # a non-git folder larger than this is refused for isolation
    max_turns: int | None = None   # budgets (None: no limit); see nbsubagents/budgets.py
    max_tool_calls: int | None = None
    max_tokens: int | None = None
    max_cost: float | None = None
    executor: str = "local"        # "local" (this machine) or "dask" (a Dask cluster: lifecycle/dask_launcher.py)
    dask_scheduler: str | None = None  # the scheduler executor="dask" uses, else distributed.get_client()
    secret_patterns: tuple[str, ...] = ()  # regular expressions masked beside the built-in ones (child/secrets.py)
    offline: bool = False          # every run uses the scripted model demo/scripted (pi/offline.py), whatever its model


# What each numeric setting may hold: (whole numbers only, lowest, highest or None, what a right value looks like).
# A value outside its range is an error naming where it came from, never silently clamped.
_NUMERIC: dict[str, tuple[bool, float, float | None, str]] = {
    "concurrency": (True, 1, 64, "a whole number from 1 to 64"),
    "max_tasks": (True, 1, 1000, "a whole number from 1 to 1000"),
    "timeout": (False, 0, None, "a number of seconds > 0"),
    "extend_timeout_debounce": (False, 0, 300, "a number of seconds from 0 to 300"),
    "looping_tool_count": (True, 0, 50, "a whole number from 0 to 50"),
    "panel_lines": (True, 1, 500, "a whole number from 1 to 500"),
    "poll_interval": (False, 0, 10, "a number of seconds > 0 and at most 10"),
    "isolation_max_copy_mb": (False, 0, None, "a number of megabytes > 0"),
}
_BUDGET_KEYS = frozenset({"max_turns", "max_tool_calls", "max_tokens", "max_cost"})
_FILE_KEYS = {k for k in _NUMERIC if k != "poll_interval"}


def numeric_problem(key: str, value: object) -> str | None:
    """What a right value of numeric setting ``key`` looks like, when ``value`` is not one (else None).

    NaN and infinities are refused everywhere: they are not JSON, and ``timeout=inf`` means no timeout.
    """
    whole, low, high, right = _NUMERIC[key]
    kinds = (int,) if whole else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or not math.isfinite(value):
        return right
    exclusive_low = key in ("timeout", "poll_interval", "isolation_max_copy_mb")
    if (value <= low if exclusive_low else value < low) or (high is not None and value > high):
        return right
    return None


_CAMEL = {"maxTasks": "max_tasks", "extendTimeoutDebounce": "extend_timeout_debounce",
          "loopingToolCount": "looping_tool_count", "panelLines": "panel_lines", "claudeAgents": "claude_agents",
          "isolationMaxCopyMb": "isolation_max_copy_mb", "maxTurns": "max_turns", "maxToolCalls": "max_tool_calls",
          "maxTokens": "max_tokens", "maxCost": "max_cost", "daskScheduler": "dask_scheduler",
          "secretPatterns": "secret_patterns"}
_BOOL_KEYS = frozenset({"claude_agents", "offline"})

_overrides: dict[str, object] = {}
_file_cache: dict[Path, tuple[tuple[int, int], dict[str, object]]] = {}


def _read_subagents_settings(path: Path) -> dict[str, object]:
    """The ``subagents`` object of one pi settings.json, validated; cached by mtime and size."""
    try:
        st = path.stat()
    except OSError:
        return {}
    stamp = (st.st_mtime_ns, st.st_size)
    cached = _file_cache.get(path)
    if cached and cached[0] == stamp:
        return cached[1]
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        line = getattr(exc, "lineno", None)
        raise NbSubagentsError(f"Settings file {path}: malformed JSON" + (f" at line {line}" if line else "")
                               + f": {getattr(exc, 'msg', exc)}. Fix the JSON or remove the file.") from None
    except OSError as exc:
        raise NbSubagentsError(f"Settings file {path} cannot be read: {exc.strerror or exc}") from None
    section = data.get("subagents", {}) if isinstance(data, dict) else {}
    if not isinstance(section, dict):
        raise NbSubagentsError(f'Settings file {path}: "subagents" must be an object like '
                               '{"concurrency": 4, "timeout": 600}')
    values: dict[str, object] = {}
    for raw_key, value in section.items():
        key = _CAMEL.get(raw_key, raw_key)
        if key in _BOOL_KEYS:
            if not isinstance(value, bool):
                raise NbSubagentsError(f'Settings file {path}: "subagents.{raw_key}" must be true or false, '
                                  f'got {value!r}')
            values[key] = value
            continue
        if key == "secret_patterns":
            values[key] = _secret_patterns(value, f'Settings file {path}: "subagents.{raw_key}"')
            continue
        if key in ("isolation", "executor", "dask_scheduler") or key in _BUDGET_KEYS:
            right = _other_problem(key, value)
            if right is not None:
                raise NbSubagentsError(f'Settings file {path}: "subagents.{raw_key}" must be {right}, got {value!r}')
            values[key] = value
            continue
        if key not in _FILE_KEYS:
            continue  # other tools may keep their own keys here
        right = numeric_problem(key, value)
        if right is not None:
            raise NbSubagentsError(f'Settings file {path}: "subagents.{raw_key}" must be {right}, got {value!r}')
        values[key] = value
    _file_cache[path] = (stamp, values)
    return values


def current(cwd: Path | None = None) -> Settings:
    """Defaults, then ``<agent dir>/settings.json``, then the project's ``.pi/settings.json``, then ``configure()``."""
    merged: dict[str, object] = {}
    merged.update(_read_subagents_settings(agent_dir() / "settings.json"))
    project = project_root(cwd, _explicit=_overrides.get("root"))  # type: ignore[arg-type]
    merged.update(_read_subagents_settings(project / ".pi" / "settings.json"))
    merged.update(_overrides)
    return Settings(**merged)  # type: ignore[arg-type]


class _LiveSettings:
    """``config.settings.x`` reads the value in force now; assigning to it is ``configure(x=...)``."""

    def __getattr__(self, name: str) -> object:
        return getattr(current(), name)

    def __setattr__(self, name: str, value: object) -> None:
        configure(**{name: value})


settings = _LiveSettings()


def configure(**changes: object) -> Settings:
    """Change settings for this process: ``configure(concurrency=2, pi="/opt/pi")``; ``None`` resets one."""
    known = {f.name for f in fields(Settings)}
    for key, value in changes.items():  # every value is checked before any is applied
        if key not in known:
            raise NbSubagentsError(f"Unknown setting {key!r}. Known settings: {', '.join(sorted(known))}")
        if key == "runner" and value not in (None, "process", "tmux"):
            raise NbSubagentsError(f'runner must be "process" or "tmux", got {value!r}')
        if (key in ("isolation", "executor", "dask_scheduler") or key in _BUDGET_KEYS) and value is not None:
            right = _other_problem(key, value)
            if right is not None:
                raise NbSubagentsError(f"configure({key}=...) must be {right}, got {value!r}")
        if key in _NUMERIC and value is not None:
            right = numeric_problem(key, value)
            if right is not None:
                raise NbSubagentsError(f"configure({key}=...) must be {right}, got {value!r}")
        if key == "secret_patterns" and value is not None:
            changes[key] = _secret_patterns(value, "configure(secret_patterns=...)")
    for key, value in changes.items():
        if value is None and key not in ("pi", "root"):
            _overrides.pop(key, None)
        else:
            _overrides[key] = value
    return current()


def _secret_patterns(value: object, where: str) -> tuple[str, ...]:
    """The ``secret_patterns`` setting checked: a list of regular expressions (one string is a list of one)."""
    patterns = [value] if isinstance(value, str) else value
    if not isinstance(patterns, (list, tuple)):
        raise NbSubagentsError(f"{where} must be a list of regular expressions such as [\"corp-[0-9a-f]{{32}}\"], "
                               f"got {value!r}")
    try:
        compile_patterns(patterns, where)
    except ValueError as exc:
        raise NbSubagentsError(str(exc)) from None
    return tuple(patterns)  # type: ignore[arg-type]


def _other_problem(key: str, value: object) -> str | None:
    """What a right value of the isolation or a budget setting looks like, when ``value`` is not one."""
    if key == "isolation":
        return None if value in ("worktree", "none") else '"worktree" or "none"'
    if key == "executor":
        return None if value in ("local", "dask") else '"local" or "dask"'
    if key == "dask_scheduler":
        return None if isinstance(value, str) and value.strip() else 'a scheduler address such as "tcp://host:8786"'
    return problem(key, value)


def reset() -> None:
    """Forget every ``configure()`` change (tests, and notebooks that want a clean slate)."""
    _overrides.clear()


def overridden(key: str) -> object | None:
    """The value ``configure()`` set for ``key`` in this process (None: not set), files aside."""
    return _overrides.get(key)


def agent_dir() -> Path:
    """pi's agent dir: models, auth, settings and the global presets live here."""
    return Path(os.environ.get("PI_CODING_AGENT_DIR") or Path.home() / ".pi" / "agent").expanduser()


def project_root(cwd: Path | None = None, *, _explicit: str | None = None) -> Path:
    """Nearest ancestor with a .pi/ folder (not the home folder's, which holds pi's own agent dir)."""
    explicit = (_explicit if _explicit is not None else _overrides.get("root")) or os.environ.get("NBSUBAGENTS_ROOT")
    if explicit:
        return Path(explicit).expanduser().resolve()
    start = Path(cwd or Path.cwd()).resolve()
    home = Path.home().resolve()
    for base in (start, *start.parents):
        if base != home and (base / ".pi").is_dir():
            return base
    return start
