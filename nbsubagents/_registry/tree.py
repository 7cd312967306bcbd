"""A run's delegation tree as the registry holds it (issue 58): its children, its subtree, what the tree spent.

Every row has ``parent`` (the run whose delegate tool started it; None for a run a notebook started), ``root`` (the
first run of its tree: itself for a notebook's run) and ``depth`` (0 at the root). ``Tree`` is one node of a
subtree: the row's main columns and ``children``, nested; ``str(tree)`` draws it as indented lines. Pure reads of
the registry: nothing here settles a run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .store import ACTIVE_SQL, db_path, ensure_loaded, fetch

__all__ = ["Tree", "children", "subtree", "tree_rows", "spend", "live"]

_COLUMNS = ("run_id, name, preset, status, parent, root, depth, stop_reason, error_message, cost, total_tokens, "
            "turns, tool_calls, created_at, started_at, ended_at, run_dir")
SPEND = ("cost", "total_tokens", "turns", "tool_calls")


class Tree(dict):
    """One run of a tree with its ``children`` (each a ``Tree``), oldest first; ``str()`` draws the subtree."""

    @property
    def kids(self) -> list[Tree]:
        return list(self.get("children") or [])

    def walk(self) -> list[Tree]:
        """This node, then every node under it, depth first."""
        out = [self]
        for child in self.kids:
            out += child.walk()
        return out

    def lines(self, indent: str = "") -> list[str]:
        why = f" ({self['stop_reason']})" if self.get("stop_reason") and self.get("status") != "completed" else ""
        head = f"{indent}{self['run_id']} {self.get('name') or self.get('preset') or ''} {self.get('status')}{why}"
        return [head.rstrip()] + [line for child in self.kids for line in child.lines(indent + "  ")]

    def __str__(self) -> str:
        return "\n".join(self.lines())


def _db(root: str | Path | None, db: Path | None) -> Path:
    db = db or db_path(root)
    ensure_loaded(db)
    return db


def tree_rows(tree_root: str, root: str | Path | None = None, *, db: Path | None = None) -> list[dict[str, Any]]:
    """Every row of the tree whose first run is ``tree_root``, oldest first."""
    return fetch(_db(root, db), f"SELECT {_COLUMNS} FROM runs WHERE root = ? OR run_id = ? ORDER BY created_at, "
                                "run_id", (tree_root, tree_root))


def children(run_id: str, root: str | Path | None = None, *, db: Path | None = None) -> list[dict[str, Any]]:
    """The rows of the runs ``run_id`` delegated, oldest first."""
    return fetch(_db(root, db), f"SELECT {_COLUMNS} FROM runs WHERE parent = ? ORDER BY created_at, run_id",
                 (run_id,))


def subtree(run_id: str, root: str | Path | None = None, *, db: Path | None = None) -> Tree | None:
    """``run_id`` and every run under it as nested ``Tree`` nodes (None: no such row)."""
    db = _db(root, db)
    found = fetch(db, f"SELECT {_COLUMNS} FROM runs WHERE run_id = ?", (run_id,))
    if not found:
        return None
    rows = tree_rows(found[0]["root"] or run_id, db=db)
    by_parent: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        if row["parent"]:
            by_parent.setdefault(row["parent"], []).append(row)

    def node(row: dict[str, Any], seen: frozenset[str]) -> Tree:
        seen = seen | {row["run_id"]}  # a cycle (rows the child could have written) ends the walk
        kids = [node(kid, seen) for kid in by_parent.get(row["run_id"], []) if kid["run_id"] not in seen]
        return Tree({**row, "children": kids})

    return node(found[0], frozenset())


def spend(nodes: list[dict[str, Any]]) -> dict[str, float]:
    """What ``nodes`` spent together, by registry column (cost, total_tokens, turns, tool_calls)."""
    return {key: sum(float(n.get(key) or 0) for n in nodes) for key in SPEND}


def live(run_ids: list[str], root: str | Path | None = None, *, db: Path | None = None) -> list[dict[str, Any]]:
    """The rows of ``run_ids`` that are still active (queued or running)."""
    if not run_ids:
        return []
    marks = ", ".join("?" * len(run_ids))
    return fetch(_db(root, db), f"SELECT {_COLUMNS} FROM runs WHERE run_id IN ({marks}) AND status IN {ACTIVE_SQL}",
                 run_ids)
