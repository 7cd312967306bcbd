"""Every preset visible from a folder: each scope's files parsed, a higher scope overriding a lower one by name,
a broken file reported as a ``Problem`` instead of stopping the others."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .locations import global_presets_dir, resolve_cwd, scope_dirs
from .parse import Preset, PresetError, Problem, is_disabled, parse_preset, read_frontmatter, warn_once


def preset_files(directory: Path) -> list[Path]:
    """``*.md`` files, sorted; dotfiles (editor and macOS ``._`` droppings) are not presets."""
    return sorted(
        p for p in directory.glob("*.md") if p.is_file() and not p.name.startswith(".")
    )


def claimed_name(path: Path) -> str:
    """The name a broken file claims: its ``name:`` if the frontmatter reads, else its stem."""
    try:
        data, _ = read_frontmatter(path)
    except PresetError:
        return path.stem
    name = data.get("name")
    return name.strip() if isinstance(name, str) and name.strip() else path.stem


def _load_scope(directory: Path, scope: str) -> tuple[dict[str, Preset], dict[str, Problem]]:
    """The good presets of one directory by name, and the broken names (a broken file, or a name two files claim)."""
    found: dict[str, list[Preset]] = {}
    broken: dict[str, Problem] = {}
    for path in preset_files(directory):
        try:
            read = read_frontmatter(path)
            if is_disabled(read[0]):
                continue
            preset = parse_preset(path, scope, read=read)
        except PresetError as exc:
            name = claimed_name(path)
            if name not in broken:
                broken[name] = Problem(name, scope, path, str(exc))
            continue
        found.setdefault(preset.name, []).append(preset)
    good: dict[str, Preset] = {}
    for name, presets in found.items():
        if len(presets) > 1:
            paths = " and ".join(str(p.path) for p in presets)
            broken.setdefault(name, Problem(name, scope, presets[0].path,
                                            f"Two presets named '{name}' in {scope} scope: {paths}. Rename one."))
        elif name not in broken:
            good[name] = presets[0]
    return good, broken


@dataclass
class Scan:
    """What discovery found: the presets a run can name, and the broken files with their errors."""

    presets: dict[str, Preset]
    problems: list[Problem]
    broken: dict[str, Problem]  # by the name a run would use: the error to raise for it


def scan(cwd: str | Path | None = None) -> Scan:
    """All presets visible from ``cwd`` (a higher scope overriding a lower one by name) and the problems.

    A broken file in a higher scope shadows a good preset of the same name in a lower one: the person
    meant the higher one, and running the other would be a surprise.
    """
    merged: dict[str, Preset] = {}
    broken: dict[str, Problem] = {}
    problems: list[Problem] = []
    for scope, directory in scope_dirs(cwd):
        good, bad = _load_scope(directory, scope)
        for name, preset in good.items():
            merged[name] = preset
            broken.pop(name, None)
        for name, problem in bad.items():
            broken[name] = problem
            merged.pop(name, None)
        problems.extend(sorted(bad.values(), key=lambda p: str(p.path)))
    for problem in problems:
        warn_once(problem.path, f"{problem.message} (this file is skipped; the other presets work)")
    return Scan({name: merged[name] for name in sorted(merged)}, problems, broken)


def discover(cwd: str | Path | None = None) -> dict[str, Preset]:
    """The good presets visible from ``cwd``, sorted by name; broken files are skipped with a warning."""
    return scan(cwd).presets


def _where_hint(cwd: str | Path | None) -> str:
    return f"{global_presets_dir()}/ or {resolve_cwd(cwd)}/.pi/subagents/"


def get(name: str, cwd: str | Path | None = None) -> Preset:
    """The preset called ``name``; a broken one raises its file's error, an unknown one lists what exists."""
    found = scan(cwd)
    if name in found.presets:
        return found.presets[name]
    if name in found.broken:
        raise PresetError(found.broken[name].message)
    if found.presets:
        raise PresetError(f'Unknown preset: "{name}". Available presets: {", ".join(found.presets)}')
    raise PresetError(
        f'Unknown preset: "{name}". No presets found: add a markdown file to {_where_hint(cwd)}'
    )
