"""The public functions: thin wrappers over ``runs`` that pick a renderer and validate the call."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from . import runner as _runs
from .config import NbSubagentsError, settings
from .runner import Run, TaskSpec


def _renderer(show: bool) -> Any:
    if not show:
        from .renderers import NullRenderer
        return NullRenderer()
    from .display import choose_renderer
    return choose_renderer()


def run(preset: str, task: str, *, model: str | None = None, cwd: str | Path | None = None,
        timeout: float | None = None, name: str | None = None, files: list[Any] | None = None,
        resume: str | None = None, show: bool = True) -> Run:
    """Run one sub-agent in the foreground and return its finished ``Run``.

    ``files`` puts file contents before the task (paths, or dicts with ``path`` and ``start``/``end``,
    ``head`` or ``tail``); ``resume`` continues an earlier run (its id or a unique prefix) with its
    history. Bad input (unknown preset or model, empty task, missing cwd) raises before anything
    starts. Interrupting the cell aborts the run and returns it with status ``aborted``.
    """
    spec = TaskSpec(preset=preset, task=task, model=model, cwd=str(cwd) if cwd is not None else None,
                    name=name, timeout=timeout, files=files, resume=resume)
    (the_run,) = _runs.drive([_runs.prepare(spec, mode="single")], concurrency=1, renderer=_renderer(show))
    return the_run


def run_parallel(tasks: Iterable[Any], *, concurrency: int | None = None, show: bool = True) -> list[Run]:
    """Run several sub-agents, at most ``concurrency`` at once; returns their finished runs in order.

    Each task is a dict (or object) with ``preset`` and ``task`` and optionally ``model``, ``cwd``,
    ``name``, ``timeout``. A task whose preset or model is unknown fails alone; the others run.
    """
    items = list(tasks)
    limit = settings.concurrency if concurrency is None else concurrency
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise NbSubagentsError(f"concurrency must be a whole number of at least 1, got {concurrency!r}")
    if not items:
        raise NbSubagentsError("run_parallel needs at least one task: a list of {'preset': ..., 'task': ...}")
    if len(items) > settings.max_tasks:
        raise NbSubagentsError(f"Too many tasks: {len(items)} given, at most {settings.max_tasks} per call "
                               f"(nbsubagents.configure(max_tasks=...) raises the limit)")
    built = _runs.build_runs(items, mode="parallel")
    return _runs.drive(built, concurrency=limit, renderer=_renderer(show))


def presets(cwd: str | Path | None = None) -> Any:
    """The presets a run can name here: project ones override global ones by name."""
    from .preset_files import list_presets
    return list_presets(cwd)
