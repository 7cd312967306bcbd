"""Finding a run by its id, a unique prefix of it, or of its random tail."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .._config import NbSubagentsError
from .rows import valid_run_id
from .store import db_path, ensure_loaded, fetch, record

__all__ = ["resolve"]


def resolve(id_or_prefix: str, root: str | Path | None = None) -> dict[str, Any]:
    """The row of a run id, a unique prefix of one, or a unique prefix of its random tail (``"a17"``).

    Only the run-id alphabet is looked up: anything else (``../x``, ``/etc``, ``*``) is no run.
    """
    if not isinstance(id_or_prefix, str) or not id_or_prefix.strip():
        raise NbSubagentsError(f"A run id (or a unique prefix of one) is needed, got {id_or_prefix!r}")
    prefix = id_or_prefix.strip()
    db = db_path(root)
    if not valid_run_id(prefix):
        raise NbSubagentsError(f'No run "{prefix}" in {db.parent / "runs"}: a run id is made of letters, digits '
                               "and '-' (like 20261126-054801-a1b2c3); "
                               "nbsubagents.status(include_completed=True) lists the runs")
    rows: list[dict[str, Any]] = []
    if db.exists() or db.parent.joinpath("runs").is_dir():
        ensure_loaded(db)
        rows = fetch(db, "SELECT * FROM runs WHERE run_id >= ? AND run_id < ? ORDER BY run_id LIMIT 21",
                      (prefix, prefix + "\U0010ffff"))
        tail = "-" not in prefix and len(prefix) <= 6
        if tail:  # the random tail of YYYYMMDD-HHMMSS-xxxxxx
            seen = {r["run_id"] for r in rows}
            rows += [r for r in fetch(db, "SELECT * FROM runs WHERE run_id GLOB ? ORDER BY run_id LIMIT 21",
                                       (f"????????-??????-{prefix}*",)) if r["run_id"] not in seen]
        if not rows:  # a directory written since this process synced (another process's lost write)
            base = db.parent / "runs"
            patterns = [f"{prefix}*"] + ([f"????????-??????-{prefix}*"] if tail else [])
            found = sorted({p for pattern in patterns for p in base.glob(pattern)}) if base.is_dir() else []
            for path in found:
                row = record(path) if path.is_dir() else None
                if row is not None:
                    rows.append(row)
    exact = [r for r in rows if r["run_id"] == prefix]
    if exact:
        return exact[0]
    if len(rows) == 1:
        return rows[0]
    if not rows:
        raise NbSubagentsError(f'No run "{prefix}" in {db.parent / "runs"}: '
                               "nbsubagents.status(include_completed=True) lists the runs")
    listing = ", ".join(r["run_id"] for r in rows[:20]) + (", …" if len(rows) > 20 else "")
    raise NbSubagentsError(f'Run id prefix "{prefix}" is ambiguous: it matches {listing}. Give more characters.')
