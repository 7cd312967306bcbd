"""Where things are: the agent dir, the project root; and the settings.

Each setting is declared once, as a field of ``Settings`` with its ``setting(...)``: its default, what a right
value looks like (and the check of it), whether a settings file may hold it (and why not), and the environment
variable that sets it. ``configure()``, the settings files, ``sources()`` (what ``nbsubagents doctor`` shows) and
docs/user/settings.md all follow from it.

Everything here is resolved on demand (not at import) so that changing an environment variable, a settings file or
``nbsubagents.configure(...)`` takes effect for the next call. ``current(folder)`` reads them into a frozen
``Settings``: a public call reads it once per folder and passes it down (``lifecycle.batch``).
"""

from __future__ import annotations

import difflib
import json
import math
import os
import warnings
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Callable

from ._child.budgets import problem
from ._child.errors import NbSubagentsError
from ._child.harnesses.pi import agent_dir
from ._child.record import camel
from ._child.secrets import compile_patterns

__all__ = ["NbSubagentsError", "Settings", "configure", "current", "sources", "reset", "agent_dir",
           "project_root", "find_project", "project_arg", "file_key", "SPECS"]


@dataclass(frozen=True)
class Kind:
    """What a setting's values look like: ``right`` in words (the errors' "must be ..."), ``ok`` the check of one
    value, ``clean`` what an accepted value is stored as (it may refuse with its own words)."""

    right: str
    ok: Callable[[object], bool]
    clean: Callable[[object, str], object] | None = None
    path: bool = False  # a path: a relative one in a settings file is taken from the project folder


@dataclass(frozen=True)
class Spec:
    """One setting's declaration (``Settings``' field metadata)."""

    kind: Kind
    help: str
    not_in_file: str | None = None  # why a settings file may not hold it; None: it may
    env: str | None = None          # the environment variable that sets it


def setting(default: Any, kind: Kind, help: str, *, not_in_file: str | None = None, env: str | None = None) -> Any:
    """A ``Settings`` field with its declaration."""
    return field(default=default, metadata={"setting": Spec(kind, help, not_in_file, env)})


def _number(right: str, low: float, high: float | None = None, *, whole: bool = False, above: bool = False) -> Kind:
    """Numbers from ``low`` (excluded with ``above``) to ``high``. NaN and infinities are refused everywhere: they
    are not JSON, and ``timeout=inf`` means no timeout."""

    def ok(value: object) -> bool:
        if isinstance(value, bool) or not isinstance(value, int if whole else (int, float)):
            return False
        if not math.isfinite(value):
            return False
        return (value > low if above else value >= low) and (high is None or value <= high)

    return Kind(right, ok)


def _whole(low: int, high: int) -> Kind:
    return _number(f"a whole number from {low} to {high}", low, high, whole=True)


def _choice(*values: str) -> Kind:
    return Kind(" or ".join(f'"{v}"' for v in values), lambda value: isinstance(value, str) and value in values)


def _budget(key: str) -> Kind:
    """A budget, checked by the one check of calls, tasks and preset files (``child.budgets``)."""
    return Kind(problem(key, 0) or "", lambda value: problem(key, value) is None)


def _patterns(value: object, where: str) -> tuple[str, ...]:
    """The ``secret_patterns`` value: a list of regular expressions (one string is a list of one)."""
    patterns = [value] if isinstance(value, str) else value
    if not isinstance(patterns, (list, tuple)):
        raise NbSubagentsError(f"{where} must be {PATTERNS.right}, got {value!r}")
    try:
        compile_patterns(patterns, where)
    except ValueError as exc:
        raise NbSubagentsError(str(exc)) from None
    return tuple(patterns)


def _path(example: str) -> Kind:
    def ok(value: object) -> bool:
        return isinstance(value, (str, os.PathLike)) and bool(os.fspath(value).strip())

    return Kind(f'a path such as "{example}"', ok, lambda value, where: os.fspath(value), path=True)


BOOL = Kind("true or false", lambda value: isinstance(value, bool))
PATTERNS = Kind('a list of regular expressions such as ["corp-[0-9a-f]{32}"]', lambda value: True, _patterns)
SCHEDULER = Kind('a scheduler address such as "tcp://host:8786"',
                 lambda value: isinstance(value, str) and bool(value.strip()))

_ROOT_NOT_IN_FILE = ("the project's settings file is found from the root, so the root cannot come from one: "
                     "use configure(root=...) or the NBSUBAGENTS_ROOT variable")


@dataclass(frozen=True)
class Settings:
    """The settings in force for a folder, read once (``current``): a public call reads them once and passes
    them down; ``source(name)`` says where each value came from."""

    pi: str | None = setting(None, _path("/usr/local/bin/pi"), "the pi binary (None: the project's "
                             "node_modules/.bin/pi, then PATH); a relative path in a settings file is taken from the "
                             "project folder", env="NBSUBAGENTS_PI")
    root: str | None = setting(None, _path("/home/me/project"), "the project root holding .pi/subagents/ (None: "
                               "the nearest folder with a .pi/ folder above the current one)",
                               not_in_file=_ROOT_NOT_IN_FILE, env="NBSUBAGENTS_ROOT")
    concurrency: int = setting(4, _whole(1, 64), "parallel children at once")
    max_tasks: int = setting(16, _whole(1, 1000), "tasks per parallel call")
    timeout: float = setting(600.0, _number("a number of seconds > 0", 0, above=True),
                             "seconds per run, extended while the child is active")
    extend_timeout_debounce: float = setting(30.0, _number("a number of seconds from 0 to 300", 0, 300),
                                             "seconds of activity that extend a timeout that passed")
    looping_tool_count: int = setting(5, _whole(0, 50), "the same tool call this many times in a row ends the run "
                                      "(0: never)")
    question_timeout: float = setting(300.0, _number("a number of seconds >= 0", 0),
                                      "seconds a child's question or approval waits for an answer (0: none is "
                                      "waited for). Left unset, a run prepared outside a notebook a person uses "
                                      "(a script, papermill or nbconvert, a Dask worker) waits 0: a headless run "
                                      "never hangs")
    panel_lines: int = setting(15, _whole(1, 500), "lines in a panel's rolling window")
    runner: str = setting("process", _choice("process", "tmux"), "what foreground runs start under")
    poll_interval: float = setting(0.1, _number("a number of seconds > 0 and at most 10", 0, 10, above=True),
                                   "how often a waiting kernel looks at a run's events (an end wakes it at once "
                                   "where it can: a pidfd, a Dask future)")
    claude_agents: bool = setting(True, BOOL, "also read Claude Code's .claude/agents/ and ~/.claude/agents/ "
                                  "(lowest precedence)")
    isolation: str | None = setting(None, _choice("worktree", "none"), '"worktree": every run works in a fresh '
                                    "worktree (or copy) of its cwd")
    isolation_max_copy_mb: float = setting(200.0, _number("a number of megabytes > 0", 0, above=True),
                                           "a non-git folder larger than this is refused for isolation")
    input_max_mb: float = setting(100.0, _number("a number of megabytes > 0", 0, above=True),
                                  "one input of a run (inputs=, --with) larger than this is refused before the run")
    inputs_max_mb: float = setting(500.0, _number("a number of megabytes > 0", 0, above=True),
                                   "a run's inputs together larger than this are refused before the run")
    max_turns: int | None = setting(None, _budget("max_turns"), "turns per run (None: no limit)")
    max_tool_calls: int | None = setting(None, _budget("max_tool_calls"), "tool calls per run (None: no limit)")
    max_tokens: int | None = setting(None, _budget("max_tokens"), "tokens per run (None: no limit)")
    max_cost: float | None = setting(None, _budget("max_cost"), "cost per run (None: no limit)")
    executor: str = setting("local", _choice("local", "dask"), '"local" (this machine) or "dask" (a Dask cluster)')
    dask_scheduler: str | None = setting(None, SCHEDULER, 'the scheduler executor="dask" uses '
                                         "(None: distributed.get_client())")
    secret_patterns: tuple[str, ...] = setting((), PATTERNS, "regular expressions masked beside the built-in ones")
    offline: bool = setting(False, BOOL, "every run uses the scripted demo model (nbsubagents init --offline)")
    # where each value came from: a settings file's path, an environment variable, "configure()"; else "default"
    origin: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    def source(self, name: str) -> tuple[object, str]:
        """Setting ``name``'s value and where it came from."""
        return getattr(self, name), self.origin.get(name, "default")

    def __repr__(self) -> str:
        """One line: the settings that are not at their defaults, each with where it came from (``configure()``'s
        value in a notebook cell is this, not twenty fields wrapped over five lines)."""
        changed = [f"{name}={value!r} ({where})" for name in SPECS
                   for value, where in [self.source(name)] if value != _DEFAULTS[name]]
        rest = len(SPECS) - len(changed)
        return f"Settings({', '.join([*changed, f'{rest} more at their defaults'])})"


SPECS: dict[str, Spec] = {f.name: f.metadata["setting"] for f in fields(Settings) if "setting" in f.metadata}
_DEFAULTS: dict[str, object] = {name: Settings.__dataclass_fields__[name].default for name in SPECS}


def file_key(name: str) -> str:
    """A setting's camelCase spelling in a settings file (the snake_case one works too)."""
    return camel(name)


_FILE_KEYS = {spelling: name for name in SPECS for spelling in (name, file_key(name))}


def _did_you_mean(word: str, known: list[str]) -> str:
    close = difflib.get_close_matches(word, known, n=1, cutoff=0.6)
    return f' (did you mean "{close[0]}"?)' if close else ""


def _checked(name: str, value: object, where: str) -> object:
    """``value`` of setting ``name`` as stored, or an error: ``{where} must be {right}, got {value!r}``."""
    kind = SPECS[name].kind
    if value is None and _DEFAULTS[name] is None:
        return None  # "no value": no budget, no isolation setting, no scheduler, pi searched
    if not kind.ok(value):
        raise NbSubagentsError(f"{where} must be {kind.right}, got {value!r}")
    return kind.clean(value, where) if kind.clean else value


_overrides: dict[str, object] = {}
_file_cache: dict[Path, tuple[tuple[int, int], dict[str, object]]] = {}


def _read_subagents_settings(path: Path) -> dict[str, object]:
    """The ``subagents`` object of one pi settings.json, every key checked; cached by mtime and size."""
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
    spelt: dict[str, str] = {}
    for key, value in section.items():
        if key.startswith("//"):
            continue  # a comment
        where = f'Settings file {path}: "subagents.{key}"'
        name = _FILE_KEYS.get(key)
        if name is None:
            raise NbSubagentsError(f"{where} is not a setting{_did_you_mean(key, list(_FILE_KEYS))}. The settings "
                                   f"are {', '.join(file_key(n) for n in SPECS if not SPECS[n].not_in_file)} "
                                   f'(or in snake_case); a key starting with "//" is a comment.')
        if SPECS[name].not_in_file:
            raise NbSubagentsError(f"{where} cannot be set in a settings file: {SPECS[name].not_in_file}")
        if name in spelt:
            raise NbSubagentsError(f'{where} is "{spelt[name]}" again: give it once')
        spelt[name] = key
        values[name] = _checked(name, value, where)
        if SPECS[name].kind.path and isinstance(values[name], str):
            values[name] = str(_file_folder(path) / Path(values[name]).expanduser())  # type: ignore[arg-type]
    _file_cache[path] = (stamp, values)
    return values


def _file_folder(path: Path) -> Path:
    """What a relative path in settings file ``path`` starts from: the project folder for ``.pi/settings.json``,
    else the file's folder (the agent dir)."""
    return path.parent.parent if path.parent.name == ".pi" else path.parent


def _layers(cwd: Path | None) -> list[tuple[str, dict[str, object]]]:
    """Where settings come from, lowest precedence first: each source's name and the values it sets."""
    project = project_root(cwd) / ".pi" / "settings.json"
    layers = [(str(path), _read_subagents_settings(path)) for path in (agent_dir() / "settings.json", project)]
    for name, spec in SPECS.items():
        if spec.env and os.environ.get(spec.env):
            layers.append((spec.env, {name: os.environ[spec.env]}))
    layers.append(("configure()", dict(_overrides)))
    return layers


def current(cwd: Path | None = None) -> Settings:
    """The settings in force for a folder (default: the current one): the defaults, then
    ``<agent dir>/settings.json``, then the project's ``.pi/settings.json``, then the environment variables, then
    ``configure()``."""
    merged: dict[str, object] = {}
    origin: dict[str, str] = {}
    for source, values in _layers(cwd):
        merged.update(values)
        origin.update(dict.fromkeys(values, source))
    return Settings(**merged, origin=origin)  # type: ignore[arg-type]


def sources(cwd: Path | str | None = None) -> dict[str, tuple[object, str]]:
    """Each setting's value in force and where it came from: ``"default"``, ``"configure()"``, a settings file's
    path or an environment variable's name (``NBSUBAGENTS_ROOT``)."""
    in_force = current(Path(cwd) if cwd is not None else None)
    return {name: in_force.source(name) for name in SPECS}


def configure(**changes: object) -> Settings:
    """Change settings for this process: ``configure(concurrency=2, pi="/opt/pi")``; ``None`` resets one.

    Every value is checked before any is applied: a wrong one changes nothing."""
    checked: dict[str, object] = {}
    for key, value in changes.items():
        if key not in SPECS:
            raise NbSubagentsError(f"Unknown setting {key!r}{_did_you_mean(key, list(SPECS))}. Known settings: "
                                   f"{', '.join(sorted(SPECS))}")
        checked[key] = None if value is None else _checked(key, value, f"configure({key}=...)")
    for key, value in checked.items():
        if value is None:
            _overrides.pop(key, None)
        else:
            _overrides[key] = value
    return current()


def reset() -> None:
    """Forget every ``configure()`` change (tests, and notebooks that want a clean slate)."""
    _overrides.clear()


def project_root(cwd: Path | None = None, *, _explicit: str | None = None) -> Path:
    """The root setting (``configure(root=...)``, ``NBSUBAGENTS_ROOT``), else the project ``cwd`` is in."""
    explicit = (_explicit if _explicit is not None else _overrides.get("root")) or os.environ.get("NBSUBAGENTS_ROOT")
    if explicit:
        return Path(explicit).expanduser().resolve()  # type: ignore[arg-type]
    return _nearest_project(Path(cwd or Path.cwd()).resolve())


def find_project(project: str | Path | None = None) -> Path:
    """The root of the project that ``project`` (a folder inside it) belongs to; None: the project in force
    (``project_root()``). This is what every public ``project=`` argument means."""
    if project is None:
        return project_root()
    folder = Path(project).expanduser()
    if not folder.is_dir():
        raise NbSubagentsError(f"project={str(project)!r} is not a folder: give a folder inside the project "
                               "(or leave it out for the current folder's project)")
    return _nearest_project(folder.resolve())


def project_arg(project: str | Path | None, where: str, **older: str | Path | None) -> Path:
    """``find_project(project)`` for a public function's ``project=``; ``older`` holds the older names of that
    argument (``cwd=``, ``root=``), still taken, with a DeprecationWarning."""
    for name, value in older.items():
        if value is None:
            continue
        if project is not None:
            raise NbSubagentsError(f"{where}: give project=... alone ({name}= is its older name)")
        warnings.warn(f"{where}({name}=...) is deprecated: use project=... (a folder inside the project)",
                      DeprecationWarning, stacklevel=3)
        project = value
    return find_project(project)


def _nearest_project(start: Path) -> Path:
    """Nearest ancestor with a .pi/ folder (not the home folder's, which holds pi's own agent dir), else ``start``."""
    home = Path.home().resolve()
    for base in (start, *start.parents):
        if base != home and (base / ".pi").is_dir():
            return base
    return start


