"""An experiment's stored plan: ``<root>/.pi/subagents/experiments/<name>.json`` (its cells, concurrency,
shell checks and executor), and the listing of a project's experiments from the plans and the registry."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Sequence

from .. import registry
from ..child.artifacts import atomic_write_json, now_iso, read_json, runs_dir
from .scorers import checked_name, scorers_spec

__all__ = ["check_name", "plans_dir", "plan_path", "read_plan", "save_plan", "listing"]

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")


def check_name(name: Any) -> str:
    return checked_name(name, _NAME, "An experiment name must be 1-100 letters, digits, '_', '.' or '-' (starting "
                                     "with a letter or digit)")


def plans_dir(root: Path) -> Path:
    return runs_dir(root).parent / "experiments"


def plan_path(root: Path, name: str) -> Path:
    return plans_dir(root) / f"{name}.json"


def read_plan(root: Path, name: str) -> dict[str, Any]:
    return read_json(plan_path(root, name)) or {}


def save_plan(root: Path, name: str, cells: list[dict[str, Any]], scorers: Sequence[Any], concurrency: int,
              executor: dict[str, Any] | None = None) -> None:
    """Write the plan (its first ``createdAt`` kept when the experiment is run again)."""
    path = plan_path(root, name)
    earlier = read_json(path) or {}
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, {
        "name": name, "createdAt": earlier.get("createdAt") or now_iso(), "updatedAt": now_iso(),
        "concurrency": concurrency, "checks": scorers_spec(scorers), "cells": cells, **(executor or {})})


def listing(root: Path) -> list[dict[str, Any]]:
    """Each experiment of the project: its name, planned cells, creation time and its runs' counts by status."""
    names: dict[str, dict[str, Any]] = {}
    folder = plans_dir(root)
    if folder.is_dir():
        for path in sorted(folder.glob("*.json")):
            if not path.name.endswith(".driver.json"):
                plan = read_json(path) or {}
                names[path.stem] = {"name": path.stem, "planned": len(plan.get("cells") or []),
                                    "created_at": plan.get("createdAt")}
    db = registry.db_path(root)
    if db.exists():
        registry.ensure_loaded(db)
        for row in registry.fetch(db, "SELECT experiment, status, COUNT(*) AS n FROM runs WHERE experiment IS NOT "
                                       "NULL GROUP BY experiment, status"):
            entry = names.setdefault(row["experiment"], {"name": row["experiment"], "planned": None,
                                                         "created_at": None})
            entry[row["status"]] = entry.get(row["status"], 0) + row["n"]
            entry["runs"] = entry.get("runs", 0) + row["n"]
    return sorted(names.values(), key=lambda e: (e.get("created_at") or "", e["name"]))
