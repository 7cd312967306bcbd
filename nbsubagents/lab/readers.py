"""What JupyterLab's nbsubagents extension asks the server: pure, cheap reads of a project's registry and run folders.

- ``project_of(server_root, path)``: the project of a notebook (``path`` relative to the server's root; "" for the
  root itself), as a kernel started in the notebook's folder finds it; ``project_at(folder)``: the project a kernel
  works in (its working folder, wherever it is);
- ``running(*projects)``: the active runs with their clocks, the line JupyterLab's status bar shows and the list it
  opens, in the panels' words and order;
- ``current_record(projects, run_ids, group=)``: a run's (or a group's) static record as of now, rendered by the
  kernel's own renderer (``views.panel_record``), for a saved record the kernel that drew it left behind;
- ``current_bar(projects)``: the same for a saved ``status_bar()`` record (``ui.statusbar.bar_record``).

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
from .._style import duration, glyph, shorten
from .._ui.statusbar import bar_record, live_leaves, repeating, run_label, started_ago, with_leaves
from .._templates import part
from .._views.masking import mask_text
from .._views.panel_record import GROUP_WORDS, group_static_record
from .._views.panel_state import PanelState

__all__ = ["project_of", "project_at", "running", "current_record"]


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


def project_at(folder: str | Path) -> Path | None:
    """The project of a folder a kernel works in (its working folder: ``os.chdir`` moves it, anywhere on the machine),
    when that project has a registry (runs were started there); else None. Not bounded by the server's root: the
    kernel, not the page, chose it."""
    try:
        project = find_project(folder)
    except (NbSubagentsError, OSError):
        return None
    return project if registry.db_path(project).exists() else None


def running(*projects: Path) -> dict[str, Any]:
    """The active runs of ``projects`` (the first is the one named) as JupyterLab's status item shows them:
    ``{"project", "projects", "summary", "waiting", "running", "queued", "runs", "sweeps"}``.

    ``summary`` is the bar's line, counts only so that it never grows (``nbsubagents: ◷ 1 waiting · ↻ 4 running ·
    196 queued``). ``runs`` lists the waiting runs, then the running ones, each longest going first as a sweep's panel
    orders them, each ``{"run_id", "label", "status", "clock", "seconds", "task", "line", "experiment"}``: ``label``
    is what the panels call it (a sweep's cell, ``preset · model · task id · #repeat``; else ``name · model``) and the
    clock counts from the run's own start (its ``run_start`` event; "starting" before it). Queued runs are only
    counted. ``sweeps``: each experiment with active runs, ``{"name", "notebook", "running", "queued"}``
    (``notebook``: the path, in the server, of the notebook that started its last listed run, "" if unknown).
    A delegation tree is one run, its first, labelled with its live leaves (``lead · demo/scripted (3 sub-agents
    running)``, their number in ``leaves``); a delegated run is listed apart only while it waits for an answer."""
    rows = [(project, row) for project in _with_registry(list(projects))
            for row in registry.snapshot(root=project).rows]
    leaves = live_leaves(row for _, row in rows)
    rows = [(p, row) for p, row in rows if not row.get("parent") or row.get("status") == "waiting"]
    repeats = {(p, name): repeating(registry.db_path(p), name)
               for p, name in {(p, row["experiment"]) for p, row in rows if row.get("experiment")}}
    runs = [_run(row, repeats.get((project, row.get("experiment")), False), leaves.get(row["run_id"], 0))
            for project, row in rows]
    counts = {status: sum(r["status"] == status for r in runs) for status in ("waiting", "running", "queued")}
    listed = sorted((r for r in runs if r["status"] != "queued"),
                    key=lambda r: (r["status"] != "waiting", r["seconds"] is None, -(r["seconds"] or 0.0)))
    sweeps: dict[str, dict[str, Any]] = {}
    for (_, row), run in zip(rows, runs):
        if run["experiment"]:
            sweep = sweeps.setdefault(run["experiment"], {"name": run["experiment"], "notebook": "", "running": 0,
                                                          "queued": 0})
            sweep["queued" if run["status"] == "queued" else "running"] += 1
            sweep["notebook"] = row.get("notebook") or sweep["notebook"]
    return {"project": str(projects[0]) if projects else "", "projects": [str(p) for p in dict.fromkeys(projects)],
            "summary": _summary(counts), **counts, "runs": listed,
            "sweeps": list(sweeps.values())}


def _run(row: dict[str, Any], repeats: bool = False, leaves: int = 0) -> dict[str, Any]:
    status = row.get("status") or "queued"  # the registry's readers say "waiting" of a running run with a question
    seconds = started_ago(row) if status in ("running", "waiting") else None
    seconds = round(seconds, 1) if seconds is not None else None
    label = mask_text(with_leaves(run_label(row, repeats), leaves))
    clock = duration(seconds) if seconds is not None else ("starting" if status != "queued" else "")
    task = mask_text(shorten((row.get("task") or "").strip().partition("\n")[0], 80))
    line = " · ".join(p for p in (f"{glyph(status)} {label}", GROUP_WORDS[status], clock) if p)
    return {"run_id": row["run_id"], "label": label, "status": status, "clock": clock, "seconds": seconds,
            "task": task, "line": line, "experiment": row.get("experiment") or "", "leaves": leaves}


def _summary(counts: dict[str, int]) -> str:
    """The bar's line: counts only (no name, no clock), so its width stays within a few words at any scale."""
    parts = [f"{glyph(status)} {counts[status]} {status}" for status in ("waiting", "running") if counts[status]]
    if counts["queued"]:
        parts.append(f"{counts['queued']} queued")
    return "nbsubagents: " + (" · ".join(parts) if parts else "none running")


def current_record(projects: list[Path], run_ids: list[str], *, group: bool = False) -> dict[str, Any]:
    """The record of ``run_ids`` (one run, or a group's runs with ``group``) as of now: ``{"ended", "statuses"}``,
    and once every run ended its ``text`` and ``html``, the static record the kernel would have written at the
    end, stamped "as of" now. Each run is looked for in each of ``projects`` in turn; one no registry knows has status
    ``"missing"``."""
    if not run_ids:
        raise NbSubagentsError("no run id given: ask with run_id=<id> (one, or each run of a group)")
    if len(run_ids) > 1 and not group:
        raise NbSubagentsError(f"{len(run_ids)} run ids given for one run's record: give one, or group=1")
    known = _with_registry(projects)
    runs: dict[str, Run | None] = {run_id: _find(run_id, known) for run_id in run_ids}
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


def _with_registry(projects: list[Path]) -> list[Path]:
    """``projects`` that have a registry (runs were started there), each once, in order."""
    return [p for p in dict.fromkeys(projects) if registry.db_path(p).exists()]


def _find(run_id: str, projects: list[Path]) -> Run | None:
    for project in projects:
        try:
            row = registry.resolve(run_id, project)
        except NbSubagentsError:  # no such run in this project
            continue
        if row["run_id"] == run_id:
            return Run(row["run_dir"])
    return None


def current_bar(projects: list[Path]) -> dict[str, Any]:
    """A notebook's ``status_bar()`` record as of now, read from the first of ``projects`` with a registry:
    ``{"found", "running", "text", "html"}`` (``found`` False, and nothing else, when none has one)."""
    known = _with_registry(projects)
    if not known:
        return {"found": False}
    registry.ensure_loaded(registry.db_path(known[0]))  # runs that ended meanwhile count as ended (no settling)
    text, html_text, running_now = bar_record(known[0], note="read after the kernel that showed it had gone")
    return {"found": True, "running": running_now, "text": text, "html": html_text}
