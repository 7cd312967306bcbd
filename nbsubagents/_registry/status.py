"""``Status``, what ``nbsubagents.status()`` returns, and its text and HTML views: pure functions of registry
rows. ``snapshot()`` reads the rows (a pure read: ``nbsubagents.status()`` reconciles first).

Standard library only; pandas is imported by ``Status.to_frame()`` alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from .._child import inbox
from .._child.harnesses import DEFAULT, name_of
from .._child.artifacts import TERMINAL
from .._child.text import terminal_safe
from .._child.tmux_pane import attach_command
from .._style import shorten
from .._templates import part
from .lookup import resolve
from .rows import with_waiting
from .store import ACTIVE, ACTIVE_SQL, NAMES, age, counts, db_path, ensure_loaded, fetch

if TYPE_CHECKING:
    import pandas

__all__ = ["Status", "snapshot", "MAX_TABLE_ROWS"]


def snapshot(run_id: str | None = None, *, include_completed: bool = False,
             root: str | Path | None = None) -> Status:
    """Counts and rows as the registry holds them (a pure read): active runs by default, every run with
    ``include_completed``, one with ``run_id``. ``nbsubagents.status()`` reconciles first."""
    db = db_path(root)
    if run_id is not None:
        row = resolve(run_id, root)
        return Status(counts(db=db), with_waiting([_refresh(db, row)]), run_id=row["run_id"])
    if not db.exists():
        return Status(counts(db=db), [])
    ensure_loaded(db)  # the ends of active rows that another process saw (result.json), no settling
    where = "" if include_completed else f"WHERE status IN {ACTIVE_SQL} "
    rows = with_waiting(fetch(db, f"SELECT * FROM runs {where}ORDER BY created_at, run_id"))
    waiting = sum(1 for row in rows if row["status"] == "waiting")  # every active row is among them
    return Status(counts(db=db), rows, include_completed=include_completed, waiting=waiting)


def _refresh(db: Path, row: dict[str, Any]) -> dict[str, Any]:
    got = fetch(db, "SELECT * FROM runs WHERE run_id = ?", (row["run_id"],))
    return got[0] if got else row


def _local(iso: str | None, *, seconds: bool = True) -> str:
    if not iso:
        return ""
    try:
        moment = datetime.fromisoformat(iso.replace("Z", "+00:00")).astimezone()
    except ValueError:
        return iso
    return moment.strftime("%Y-%m-%d %H:%M:%S" if seconds else "%m-%d %H:%M")


def _took(row: dict[str, Any]) -> str:
    if row.get("duration") is not None:
        return f"{row['duration']:.1f}s"
    since = row.get("started_at") or row.get("created_at")
    if row.get("status") in ACTIVE and since:
        seconds = age(since)
        return f"{seconds:.0f}s…" if seconds != float("inf") else ""
    return ""


def _outcome(row: dict[str, Any], limit: int = 50) -> str:
    """The answer (or the error) on one line: every line of it, whitespace folded, cut at ``limit``."""
    return shorten(row.get("final_text") if row.get("status") == "completed" else row.get("error_message"), limit)


def _question_words(question: dict[str, Any]) -> str:
    """The question on one line, whole: an approval's tail may be what matters."""
    title, message = question.get("title") or "", question.get("message") or ""
    return " ".join(str(f"{title}: {message}" if title and message and message != title else title or message).split())


_TABLE = [("RUN ID", "run_id"), ("NAME", "name"), ("STATUS", "status"), ("MODEL", "model"),
          ("STARTED", "started"), ("TOOK", "took"), ("TASK", "task"), ("RESULT", "result")]
MAX_TABLE_ROWS = 50


def _columns(rows: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """The table's columns: a HARNESS column too when a shown run ran under another harness than pi."""
    if all(name_of(row) == DEFAULT for row in rows):
        return _TABLE
    return [*_TABLE[:2], ("HARNESS", "harness"), *_TABLE[2:]]


@dataclass
class Status:
    """What ``nbsubagents.status()`` returns: ``counts`` and ``rows`` (dicts of registry columns)."""

    counts: dict[str, int]
    rows: list[dict[str, Any]] = field(default_factory=list)
    run_id: str | None = None
    include_completed: bool = False
    max_rows: int = MAX_TABLE_ROWS  # the table shows the last this many rows
    waiting: int = 0  # of the running runs, how many wait on a question (counted among running)

    @property
    def running(self) -> int:
        return self.counts["running"]

    @property
    def total(self) -> int:
        return self.counts["total"]

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    def counts_line(self) -> str:
        c = self.counts
        waiting = f" ({self.waiting} waiting)" if self.waiting else ""
        queued = f"{c['queued']} queued · " if c.get("queued") else ""
        return (f"{c['running']} running{waiting} · {queued}{c['completed']} completed · {c['failed']} failed · "
                f"{c['aborted']} aborted · {c['total']} total")

    def _cells(self, row: dict[str, Any]) -> dict[str, str]:
        return {"run_id": row["run_id"], "name": row.get("name") or "", "harness": name_of(row),
                "status": row.get("status") or "",
                "model": row.get("model") or "", "started": _local(row.get("started_at") or row.get("created_at"),
                                                                    seconds=False),
                "took": _took(row), "task": shorten((row.get("task") or "").strip().partition("\n")[0], 40),
                "result": _outcome(row)}

    def _shown(self) -> list[dict[str, Any]]:
        return self.rows[-self.max_rows:]

    def _details(self, row: dict[str, Any]) -> list[tuple[str, str]]:
        items = [("status", row.get("status") or ""), ("name", row.get("name") or ""),
                 ("preset", row.get("preset") or ""), ("harness", name_of(row)),
                 ("mode", row.get("mode") or ""),
                 ("runner", row.get("runner") or ""), ("model", row.get("model") or ""),
                 ("task", (row.get("task") or "").strip()), ("cwd", row.get("cwd") or ""),
                 ("created", _local(row.get("created_at"))), ("started", _local(row.get("started_at"))),
                 ("ended", _local(row.get("ended_at"))), ("took", _took(row))]
        if row.get("status") in TERMINAL:
            items += [("exit code", str(row.get("exit_code"))), ("stop reason", str(row.get("stop_reason"))),
                      ("turns", str(row.get("turns") or 0)), ("tool calls", str(row.get("tool_calls") or 0)),
                      ("tokens", f"{row.get('total_tokens') or 0:,}"), ("cost", f"${row.get('cost') or 0:.4f}")]
            if row.get("error_message"):
                items.append(("error", row["error_message"]))
        elif row.get("runner") == "tmux":
            items.append(("attach", attach_command(row["run_id"])))
        if row.get("status") == "waiting":
            items += [("asks", _question_words(q)) for q in inbox.waiting(Path(row["run_dir"]))]
        if row.get("resumed_from"):
            items.append(("resumed from", row["resumed_from"]))
        items += [("run dir", row.get("run_dir") or ""), ("transcript", str(Path(row.get("run_dir") or "") /
                                                                              "transcript.log"))]
        if row.get("status") in TERMINAL and row.get("final_text"):
            items.append(("output", row["final_text"].strip()))
        return [(k, v) for k, v in items if v not in ("", "None")]

    def __repr__(self) -> str:
        if self.run_id is not None and self.rows:
            row = self.rows[0]
            lines = [f"run {terminal_safe(row['run_id'])}"]
            for key, value in self._details(row):
                first, *rest = [terminal_safe(ln) for ln in value.split("\n")] or [""]
                lines.append(f"  {key:<12} {first}")
                lines += [f"  {'':<12} {ln}" for ln in rest[:30]]
            return "\n".join(lines)
        lines = [self.counts_line()]
        shown = self._shown()
        if not shown:
            lines.append("no active runs" if not self.include_completed else "no runs yet")
            return "\n".join(lines)
        # control characters shown escaped (``\x1b``): a run's words never drive the terminal that prints them
        cells = [{k: terminal_safe(v) for k, v in self._cells(r).items()} for r in shown]
        columns = _columns(shown)
        widths = {key: max(len(title), *(len(c[key]) for c in cells)) for title, key in columns}
        lines.append("  ".join(title.ljust(widths[key]) for title, key in columns).rstrip())
        for c in cells:
            lines.append("  ".join(c[key].ljust(widths[key]) for _, key in columns).rstrip())
        if len(self.rows) > len(shown):
            lines.append(f"… {len(self.rows) - len(shown)} earlier runs not shown (status.rows has all)")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        if self.run_id is not None and self.rows:
            row = self.rows[0]
            return part("tables.html", "status_run", run_id=row["run_id"], details=self._details(row))
        shown = self._shown()
        return part("tables.html", "status", counts=self.counts_line(), columns=_columns(shown) if shown else [],
                    rows=[self._cells(r) for r in shown], more=len(self.rows) - len(shown),
                    empty="no active runs" if not self.include_completed else "no runs yet")

    def to_frame(self) -> pandas.DataFrame:
        """The rows as a pandas DataFrame indexed by run id (pandas is imported here only)."""
        import pandas as pd

        frame = pd.DataFrame(self.rows, columns=NAMES)
        for col in ("created_at", "started_at", "ended_at"):
            frame[col] = pd.to_datetime(frame[col], utc=True, errors="coerce")
        return frame.set_index("run_id")
