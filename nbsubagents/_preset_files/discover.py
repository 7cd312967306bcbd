"""Every preset visible from a folder: each scope's files parsed, a higher scope overriding a lower one by name,
a broken file reported as a ``Problem`` instead of stopping the others."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from .._child import harnesses
from .locations import global_presets_dir, resolve_cwd, scope_dirs
from .parse import Preset, PresetError, Problem, is_disabled, parse_preset, read_frontmatter, warn_once


def preset_files(directory: Path, *, nested: bool = False) -> list[Path]:
    """``*.md`` files in the folder's own listing order (the file system's, not alphabetical: the order Claude Code
    reads them in); ``nested``: its subfolders' too, each where the listing has it (Claude Code's agent folders).
    Dotfiles and dot-folders (editor and macOS ``._`` droppings) are not presets; a linked folder is not entered."""
    found: list[Path] = []
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return found
    for entry in entries:
        if entry.name.startswith("."):
            continue
        if nested and entry.is_dir(follow_symlinks=False):
            found += preset_files(Path(entry.path), nested=True)
        elif entry.name.endswith(".md") and entry.is_file():
            found.append(Path(entry.path))
    return found


def claimed_name(path: Path) -> str:
    """The name a broken file claims: its ``name:`` if the frontmatter reads, else its stem."""
    try:
        data, _ = read_frontmatter(path)
    except PresetError:
        return path.stem
    name = data.get("name")
    return name.strip() if isinstance(name, str) and name.strip() else path.stem


@dataclass(frozen=True)
class Duplicate:
    """A name more than one file of one scope claims: the file kept (the last in listing order, as Claude Code keeps
    it) and the ones it shadows."""

    name: str
    scope: str
    kept: Path
    shadowed: tuple[Path, ...]

    @property
    def message(self) -> str:
        return (f"{len(self.shadowed) + 1} {self.scope} files are named '{self.name}': {self.kept} is kept (the last "
                f"in its folder's listing, the one Claude Code keeps); shadowed: {', '.join(map(str, self.shadowed))}")


@dataclass
class Scan:
    """What discovery found: the presets a run can name, the files that could not be loaded, the names several files
    of one scope claim."""

    presets: dict[str, Preset]
    problems: list[Problem]
    broken: dict[str, Problem]  # by the name a run would use: the error to raise for it
    duplicates: dict[str, Duplicate] = field(default_factory=dict)


def _load_scope(directory: Path, scope: str) -> tuple[dict[str, Preset], dict[str, Problem], list[Problem],
                                                      list[Duplicate]]:
    """One directory: its good presets by name (of several files claiming a name, the last listed), the broken
    names (no good file claims them), every broken file, and the names several good files claim."""
    found: dict[str, list[Preset]] = {}
    broken: dict[str, Problem] = {}
    problems: list[Problem] = []
    for path in preset_files(directory, nested=scope.startswith("claude-")):
        try:
            read = read_frontmatter(path)
            if is_disabled(read[0]):
                continue
            preset = parse_preset(path, scope, read=read, warn=False)
        except PresetError as exc:
            problem = Problem(claimed_name(path), scope, path, str(exc))
            problems.append(problem)
            broken.setdefault(problem.name, problem)
            continue
        found.setdefault(preset.name, []).append(preset)
    good = {name: presets[-1] for name, presets in found.items()}
    duplicates = [Duplicate(name, scope, presets[-1].path, tuple(p.path for p in presets[:-1]))
                  for name, presets in found.items() if len(presets) > 1]
    return good, {name: p for name, p in broken.items() if name not in good}, problems, duplicates


def scan(cwd: str | Path | None = None) -> Scan:
    """All presets visible from ``cwd`` (a higher scope overriding a lower one by name), the problems and the
    duplicate names; nothing is warned here (``presets()`` and ``nbsubagents presets`` show them, grouped).

    A broken file in a higher scope shadows a good preset of the same name in a lower one: the person
    meant the higher one, and running the other would be a surprise.
    """
    merged: dict[str, Preset] = {}
    broken: dict[str, Problem] = {}
    problems: list[Problem] = []
    duplicates: dict[str, Duplicate] = {}
    for scope, directory in scope_dirs(cwd):
        good, bad, skipped, claimed = _load_scope(directory, scope)
        for name, preset in good.items():
            merged[name] = preset
            broken.pop(name, None)
            duplicates.pop(name, None)
        for name, problem in bad.items():
            broken[name] = problem
            merged.pop(name, None)
            duplicates.pop(name, None)
        duplicates.update((d.name, d) for d in claimed)
        problems.extend(sorted(skipped, key=lambda p: str(p.path)))
    return Scan({name: merged[name] for name in sorted(merged)}, problems, broken,
                {name: duplicates[name] for name in sorted(duplicates)})


def notes(preset: Preset, harness: str | None = None) -> list[str]:
    """What to say about a preset run by ``harness`` (default: its own): its file's notes, then the harness's (its
    ``preset_notes``, where it has them: pi's tools left out, the Claude Code fields it cannot honour)."""
    module = harnesses.get(harness or preset.harness or harnesses.DEFAULT)
    return [*preset.notes, *getattr(module, "preset_notes", lambda _: [])(preset)]


def discover(cwd: str | Path | None = None) -> dict[str, Preset]:
    """The good presets visible from ``cwd``, sorted by name; broken files are skipped (``scan`` has them)."""
    return scan(cwd).presets


def _where_hint(cwd: str | Path | None) -> str:
    return f"{global_presets_dir()}/ or {resolve_cwd(cwd)}/.pi/subagents/"


def get(name: str, cwd: str | Path | None = None) -> Preset:
    """The preset called ``name``; a broken one raises its file's error, an unknown one lists what exists."""
    found = scan(cwd)
    if name in found.presets:
        if name in found.duplicates:
            warn_once(found.duplicates[name].kept, found.duplicates[name].message)
        return found.presets[name]
    if name in found.broken:
        raise PresetError(found.broken[name].message)
    if found.presets:
        raise PresetError(f'Unknown preset: "{name}". Available presets: {", ".join(found.presets)}')
    raise PresetError(
        f'Unknown preset: "{name}". No presets found: add a markdown file to {_where_hint(cwd)}'
    )
