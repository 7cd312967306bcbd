"""One task, before it becomes a run: ``TaskSpec``, its keys and their checks.

``run``, ``run_parallel``, ``start``, the ``%subagent`` magic and the ``%%subagents`` YAML body all build a
``TaskSpec`` through this module, so every option (``model``, ``cwd``, ``name``, ``timeout``, ``files``,
``resume``, isolation, budgets, ``output_schema``) means the same and is checked the same everywhere. The shape is checked here (types, known keys);
what needs the project (the preset exists, the cwd is a directory, the run to resume) is ``prepare``'s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from ..config import NbSubagentsError, settings

__all__ = ["TaskSpec", "TASK_KEYS", "as_spec", "check_shape", "check_task", "check_cwd", "check_timeout",
           "check_isolation"]

TASK_KEYS = ("preset", "task", "model", "cwd", "name", "timeout", "files", "resume", "isolation", "keep_worktree",
             "max_turns", "max_tool_calls", "max_tokens", "max_cost", "output_schema", "experiment", "params", "tags")


@dataclass
class TaskSpec:
    """One task of a call, before it becomes a run."""

    preset: str
    task: str
    model: str | None = None
    cwd: str | None = None
    name: str | None = None
    timeout: float | None = None
    files: list[Any] | None = None
    resume: str | None = None
    isolation: str | None = None
    keep_worktree: bool | None = None
    max_turns: int | None = None
    max_tool_calls: int | None = None
    max_tokens: int | None = None
    max_cost: float | None = None
    output_schema: Any = None
    experiment: str | None = None          # the experiment this run belongs to (nbsubagents.experiment)
    params: dict[str, Any] | None = None   # its cell of the experiment: preset, model, task id, repeat, ...
    tags: dict[str, Any] | None = None


def check_shape(item: Mapping[str, Any], where: str) -> None:
    """The keys and value types of one task given as a mapping; ``where`` names it in the error
    ("Task 2", "%%subagents: item 2 (line 4)")."""
    unknown = [str(k) for k in item if k not in TASK_KEYS]
    if unknown:
        raise NbSubagentsError(f"{where}: unknown key(s) {', '.join(unknown)}; a task may have "
                               f"{', '.join(TASK_KEYS)}")
    preset = item.get("preset")
    if not isinstance(preset, str) or not preset.strip():
        raise NbSubagentsError(f"{where}: 'preset' must be a preset name, got {preset!r}")
    for key in ("model", "cwd", "name", "resume"):
        if item.get(key) is not None and not isinstance(item[key], (str, Path) if key == "cwd" else str):
            raise NbSubagentsError(f"{where}: '{key}' must be text, got {item[key]!r}")
    timeout = item.get("timeout")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                or not math.isfinite(timeout) or timeout <= 0):
        raise NbSubagentsError(f"{where}: 'timeout' must be a positive number of seconds, got {timeout!r}")
    files = item.get("files")
    if files is not None and (isinstance(files, (str, bytes)) or not isinstance(files, (list, tuple))):
        raise NbSubagentsError(f"{where}: 'files' must be a list of paths, got {files!r}")


def as_spec(item: Any, index: int) -> TaskSpec:
    """A ``TaskSpec`` from a TaskSpec, a mapping or an object with the same attributes."""
    if isinstance(item, TaskSpec):
        return item
    if isinstance(item, Mapping):
        check_shape(item, f"Task {index}")
        get = item.get
    else:
        def get(key: str, default: Any = None) -> Any:
            return getattr(item, key, default)
        preset = get("preset")
        if not isinstance(preset, str) or not preset:
            raise NbSubagentsError(f"Task {index}: 'preset' must be a preset name, got {preset!r}")
    fields = {key: get(key) for key in TASK_KEYS}
    if fields["cwd"] is not None:
        fields["cwd"] = str(fields["cwd"])
    return TaskSpec(**fields)


def check_task(task: Any) -> str:
    if not isinstance(task, str):
        raise NbSubagentsError(f"The task must be a string (what the sub-agent should do), got {type(task).__name__}")
    if not task.strip():
        raise NbSubagentsError("The task is empty: say what the sub-agent should do")
    return task


def check_cwd(cwd: str | Path | None) -> Path:
    path = Path(cwd).expanduser() if cwd is not None else Path.cwd()
    if cwd is not None and ".." in Path(cwd).parts:
        raise NbSubagentsError(f"cwd {str(cwd)!r} contains '..': give the directory without parent references")
    if not path.exists():
        raise NbSubagentsError(f"cwd {str(path)!r} does not exist: give an existing directory")
    if not path.is_dir():
        raise NbSubagentsError(f"cwd {str(path)!r} is not a directory: give a directory")
    return path.resolve()


def check_isolation(mode: Any, keep_worktree: Any = None) -> None:
    """``isolation`` is "worktree" or "none" (or unset), ``keep_worktree`` True or False (or unset)."""
    if mode not in (None, "none", "worktree"):
        raise NbSubagentsError(f"isolation must be 'worktree' or 'none', got {mode!r}")
    if keep_worktree is not None and not isinstance(keep_worktree, bool):
        raise NbSubagentsError(f"keep_worktree must be True or False, got {keep_worktree!r}")


def check_timeout(timeout: Any, default: float | None = None) -> float:
    value = (settings.timeout if default is None else default) if timeout is None else timeout
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise NbSubagentsError(f"timeout must be a positive, finite number of seconds, got {timeout!r}")
    return float(value)
