"""What JupyterLab's nbsubagents extension asks the server: pure, cheap reads of a project's registry and run folders.

- ``project_of(server_root, path)``: the project of a notebook (``path`` relative to the server's root; "" for the
  root itself), as a kernel started in the notebook's folder finds it;
- ``running(project)``: the active runs with their clocks and the line JupyterLab's status bar shows;
- ``current_record(project, run_ids, group=)``: a run's (or a group's) static record as of now, rendered by the
  kernel's own renderer (``views.panel_record``), for a saved record the kernel that drew it left behind.

Nothing here settles, takes over or launches a run: a run whose supervisor is gone stays as the registry says
until a kernel reconciles it (``nbsubagents.status()``).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from .. import _registry as registry
from .._child.artifacts import TERMINAL, unreadable
from .._config import NbSubagentsError, find_project
from .._lifecycle.handle import Run
from .._style import duration, shorten
from .._templates import part
from .._views.masking import mask_text
from .._views.panel_record import group_static_record
from .._views.panel_state import PanelState

__all__ = ["NAMED", "project_of", "running", "current_record"]

NAMED = 3  # runs the status bar names; the list it opens has them all


def project_of(server_root: str | Path, path: str = "") -> Path:
    """The project of the notebook at ``path`` (relative to ``server_root``, the way Jupyter names files; a
    folder works too): the nearest folder with ``.pi/`` above it up to the root, else its folder: the server reads
    nothing above its root, not even the project it sits in. A path outside the root is refused
    (``NbSubagentsError``)."""
    root = Path(server_root).expanduser().resolve()
    target = (root / path.lstrip("/")).resolve() if path else root
    if target != root and root not in target.parents:
        raise NbSubagentsError(f"path {path!r} is outside the server's root {root}: give a path inside it")
    folder = target if target.is_dir() else target.parent
    while not folder.is_dir() and folder != root:  # a notebook not saved yet in a folder not made yet
        folder = folder.parent
    project = find_project(folder)
    return project if project == root or root in project.parents else folder


def running(project: Path) -> dict[str, Any]:
    """The project's active runs, oldest first: ``{"project", "summary", "running", "queued", "waiting", "runs"}``,
    each run ``{"run_id", "name", "status", "clock", "seconds", "waiting", "task", "line"}``. ``summary`` is the
    status bar's line (``nbsubagents: 2 running · 1 waiting · scout 12s · fixer 3.1s``); ``waiting`` counts the
    runs waiting for an answer (a question in their ``waiting.json``)."""
    rows = registry.snapshot(root=project).rows if registry.db_path(project).exists() else []
    runs = [_run(row) for row in rows]
    counts = {"running": sum(r["status"] == "running" for r in runs),
              "queued": sum(r["status"] == "queued" for r in runs),
              "waiting": sum(r["waiting"] for r in runs)}
    return {"project": str(project), "summary": _summary(runs, counts), **counts, "runs": runs}


def _run(row: dict[str, Any]) -> dict[str, Any]:
    status = row.get("status") or "queued"
    waiting = status == "waiting"  # the registry's readers derive it (a running run with an open question)
    status = "running" if waiting else status
    since = row.get("started_at") or row.get("created_at")
    seconds = registry.age(since) if status == "running" else float("inf")
    seconds = round(seconds, 1) if seconds != float("inf") else None
    name = mask_text(row.get("name") or row.get("preset") or row["run_id"])
    clock = duration(max(0.0, seconds)) if seconds is not None else ""
    state = "waiting for an answer" if waiting else status
    task = mask_text(shorten((row.get("task") or "").strip().partition("\n")[0], 80))
    return {"run_id": row["run_id"], "name": name, "status": status, "clock": clock, "seconds": seconds,
            "waiting": waiting, "task": task, "line": " · ".join(p for p in (name, state, clock, row["run_id"]) if p)}


def _summary(runs: list[dict[str, Any]], counts: dict[str, int]) -> str:
    if not runs:
        return "nbsubagents: none running"
    parts = [f"{counts['running']} running"]
    parts += [f"{counts[key]} {key}" for key in ("queued", "waiting") if counts[key]]
    parts += [f"{r['name']} {r['clock'] or r['status']}" for r in runs[:NAMED]]
    if len(runs) > NAMED:
        parts.append(f"+{len(runs) - NAMED} more")
    return "nbsubagents: " + " · ".join(parts)


def current_record(project: Path, run_ids: list[str], *, group: bool = False) -> dict[str, Any]:
    """The record of ``run_ids`` (one run, or a group's runs with ``group``) as of now: ``{"ended", "statuses"}``,
    and once every run ended its ``text`` and ``html``, the static record the kernel would have written at the
    end, stamped "as of" now. A run the registry does not know has status ``"missing"``."""
    if not run_ids:
        raise NbSubagentsError("no run id given: ask with run_id=<id> (one, or each run of a group)")
    if len(run_ids) > 1 and not group:
        raise NbSubagentsError(f"{len(run_ids)} run ids given for one run's record: give one, or group=1")
    known = registry.db_path(project).exists()
    runs: dict[str, Run | None] = {}
    for run_id in run_ids:
        try:
            row = registry.resolve(run_id, project) if known else None
        except NbSubagentsError:  # no such run in this project
            row = None
        runs[run_id] = Run(row["run_dir"]) if row is not None and row["run_id"] == run_id else None
    statuses = {run_id: run.status if run is not None else "missing" for run_id, run in runs.items()}
    answer: dict[str, Any] = {"ended": all(s in TERMINAL for s in statuses.values()), "statuses": statuses}
    unread = [mask_text(why) for run in runs.values() if run is not None for why in unreadable(run.dir)]
    if unread:  # files a child put in place of its run's, which nothing reads
        answer["unread"] = unread
    if not answer["ended"]:
        return answer
    states = [PanelState.of_run(run) for run in runs.values() if run is not None]
    text, html_text = group_static_record(states) if group else states[0].static_record()
    stamp = time.strftime("%H:%M:%S")
    words = " · ".join([f"as of {stamp}", "read from the run's folder after the kernel that showed it had gone",
                        *unread])
    answer["text"] = f"{text}\n{words[0].upper()}{words[1:]}"
    note = part("bits.html", "as_of", words=words)
    answer["html"] = html_text[:-len("</div>")] + note + "</div>" if html_text.endswith("</div>") else html_text + note
    return answer
