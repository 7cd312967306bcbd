"""The preset list ``nbsubagents.presets()`` returns: a list of presets that shows itself as a table in a notebook
(HTML) and a terminal (text), with what a person should know under it, grouped: the files that could not be loaded,
the names several files claim (which one is kept), and each preset's notes (for the harness that runs it: the fields
pi cannot honour, ...), once per file here instead of a warning at every run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .._child.harnesses.pi import effective_tools
from .._preset_files import (Duplicate, Preset, Problem, find_project_presets_dir, global_presets_dir, notes,
                             resolve_cwd, scan)
from .._style import plural, shorten
from .._templates import part

__all__ = ["PresetList", "list_presets", "notes"]

DESCRIPTION_WIDTH = 60  # text table only; keeps a row on one line in a notebook cell
TOOLS_WIDTH = 30


def tools_text(preset: Preset) -> str:
    """The tools the child gets, as pi names, and what the file named that a pi child cannot have."""
    tools, dropped = effective_tools(preset)
    text = "(all)" if tools is None else (", ".join(tools) if tools else "(none)")
    return text + (f" (not for pi: {', '.join(dropped)})" if dropped else "")


class PresetList(list):
    """A list of presets that shows itself as a table in a notebook or a terminal.

    ``problems`` holds the files that could not be loaded (each a ``Problem`` with its error) and ``duplicates`` the
    names several files of one scope claim (each a ``Duplicate``); the table shows them, and each preset's notes,
    under the presets.
    """

    _COLUMNS = ("name", "scope", "model", "tools", "description")

    def __init__(
        self,
        presets: Any = (),
        *,
        global_dir: Path | None = None,
        project_dir: Path | None = None,
        cwd: Path | None = None,
        problems: list[Problem] | None = None,
        duplicates: list[Duplicate] | None = None,
    ):
        super().__init__(presets)
        self.global_dir = global_dir if global_dir is not None else global_presets_dir()
        self.project_dir = project_dir
        self.cwd = cwd if cwd is not None else resolve_cwd(None)
        self.problems: list[Problem] = list(problems or [])
        self.duplicates: list[Duplicate] = list(duplicates or [])

    def _empty_message(self) -> str:
        project = (
            f"{self.project_dir}/" if self.project_dir is not None
            else f"{self.cwd}/.pi/subagents/ (or the same in any parent directory)"
        )
        return (
            "No presets found. Add a markdown file with 'name:' and 'description:' frontmatter to "
            f"{self.global_dir}/ (global) or {project} (project)."
        )

    def _rows(self) -> list[tuple[str, ...]]:
        return [
            (
                p.name,
                p.scope,
                p.model or "-",
                shorten(tools_text(p), TOOLS_WIDTH),
                shorten(p.description, DESCRIPTION_WIDTH),
            )
            for p in self
        ]

    def sections(self) -> list[tuple[str, list[tuple[str, str, str]]]]:
        """What is shown under the table: (heading, [(name, scope, text)]) for each group that has something."""
        noted = [(p, said) for p in self if (said := notes(p))]
        groups = [
            (f"Not loaded ({plural(len(self.problems), 'file')}; running one of these names raises its error):",
             [(p.name, p.scope, p.message) for p in self.problems]),
            (f"Names several files claim ({len(self.duplicates)}; the last in its folder's listing is kept, as Claude "
             "Code keeps it):", [(d.name, d.scope, f"kept {d.kept}; shadowed {', '.join(map(str, d.shadowed))}")
                                for d in self.duplicates]),
            (f"Notes ({plural(len(noted), 'preset')}):", [(p.name, p.scope, "; ".join(said)) for p, said in noted]),
        ]
        return [(head, items) for head, items in groups if items]

    def _problem_lines(self) -> list[str]:
        return [line for head, items in self.sections()
                for line in (head, *(f"  {name} ({scope}): {text}" for name, scope, text in items))]

    def __repr__(self) -> str:
        if not self:
            return "\n".join([self._empty_message(), *self._problem_lines()])
        rows = [tuple(c.upper() for c in self._COLUMNS), *self._rows()]
        widths = [max(len(row[i]) for row in rows) for i in range(len(self._COLUMNS))]
        table = [
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip()
            for row in rows
        ]
        return "\n".join(table + self._problem_lines())

    __str__ = __repr__

    def _repr_html_(self) -> str:
        return part("tables.html", "presets", found=list(self), columns=self._COLUMNS, tools=tools_text,
                    empty=self._empty_message(), sections=self.sections())

    def to_records(self) -> list[dict[str, Any]]:
        """Plain dicts (e.g. for ``pandas.DataFrame``); tools as a list, path as a string."""
        return [
            {
                "name": p.name,
                "description": p.description,
                "model": p.model,
                "tools": list(p.tools) if p.tools is not None else None,
                "scope": p.scope,
                "path": str(p.path),
            }
            for p in self
        ]

    def problem_records(self) -> list[dict[str, Any]]:
        """The broken files as plain dicts: name, scope, path, error."""
        return [{"name": p.name, "scope": p.scope, "path": str(p.path), "error": p.message} for p in self.problems]


def list_presets(cwd: str | Path | None = None) -> PresetList:
    """All presets visible from ``cwd`` as a displayable list, sorted by name, with the broken files."""
    found = scan(cwd)
    return PresetList(
        found.presets.values(),
        global_dir=global_presets_dir(),
        project_dir=find_project_presets_dir(cwd),
        cwd=resolve_cwd(cwd),
        problems=found.problems,
        duplicates=list(found.duplicates.values()),
    )
