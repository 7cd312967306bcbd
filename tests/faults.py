"""What the fault-injection modules share: a project on its own scripted model, and a report of every case.

``tests/e2e/test_faults.py`` breaks the product's own parts (issue 13); the modules named ``test_attack_*.py``
play a hostile child (issue 53). Each case calls ``record``: its outcome, the processes of its runs left behind,
the worktrees left and (when it passes the files it saw before) the files outside the run folder it changed. Each
module prints its cases once it is through; under pytest-xdist the controller prints them (``conftest.py``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import PI, SCOUT, processes_inside, seed_model_list, wait_for

from nbsubagents import _config as config
from nbsubagents._child import procs
from nbsubagents._child.harnesses.pi import write_agent_dir
from nbsubagents._lifecycle import watcher
from nbsubagents._pi.scripted import ScriptedModel

# module name -> (case, outcome, processes left, worktrees left, files changed outside the run folder or None)
REPORT: dict[str, list[tuple[str, str, list[str], list[str], list[str] | None]]] = {}


@pytest.fixture(scope="module", autouse=True)
def report(request):
    """Prints the module's cases, with what each left behind, once the module is through (autouse from
    conftest.py: every module that records a case)."""
    yield
    cases = REPORT.pop(request.module.__name__, [])
    if not cases:
        return
    lines = ["", f"fault-injection report, {request.module.__name__} "
                 "(case | outcome | processes left | worktrees left | files changed outside the run folder)"]
    for case, outcome, left, trees, files in cases:
        files_text = "not checked" if files is None else ", ".join(files) or "none"
        lines.append(f"  {case:<30} | {outcome} | {', '.join(left) or 'none'} | {', '.join(trees) or 'none'} | "
                     f"{files_text}")
    if hasattr(request.config, "workeroutput"):  # a pytest-xdist worker: its controller prints it (conftest.py)
        request.config.workeroutput.setdefault("fault_reports", []).append("\n".join(lines))
        return
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    with capture.global_and_fixture_disabled() if capture is not None else open(os.devnull):
        print("\n".join(lines), file=sys.stderr, flush=True)


@pytest.fixture
def model():
    with ScriptedModel() as server:
        yield server


@pytest.fixture
def proj(tmp_path, monkeypatch, model):
    """A project with the scout preset, pi pointed at ``model``; cwd is set to it."""
    root = tmp_path / "project"
    (root / ".pi" / "subagents").mkdir(parents=True)
    (root / ".pi" / "subagents" / "scout.md").write_text(SCOUT)
    (root / "README.md").write_text("# Fault project\n")
    agent = write_agent_dir(tmp_path / "agent", model.url)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    seed_model_list(agent)
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(agent))
    monkeypatch.setenv("PI_OFFLINE", "1")
    monkeypatch.setenv("NBSUBAGENTS_PI", str(PI))
    monkeypatch.delenv("NBSUBAGENTS_ROOT", raising=False)
    monkeypatch.chdir(root)
    config.reset()
    yield root
    config.reset()
    watcher.stop()


@pytest.fixture
def worktrees(tmp_path, monkeypatch):
    folder = tmp_path / "worktrees"
    monkeypatch.setenv("NBSUBAGENTS_WORKTREES", str(folder))
    return folder


def git(cwd: Path, *args: str) -> str:
    """git in a project, whoever owns it (a case may give it to another user)."""
    return subprocess.run(["git", "-c", "safe.directory=*", "-c", "user.name=t", "-c", "user.email=t@t", *args],
                          cwd=cwd, check=True, capture_output=True, text=True).stdout


def files_of(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (links not followed), but git's and the runs' own."""
    out = {}
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if rel.parts[0] == ".git" or "runs" in rel.parts or "registry" in rel.name:
            continue
        out[str(rel)] = os.readlink(path).encode() if path.is_symlink() else (
            path.read_bytes() if path.is_file() else b"<dir>")
    return out


def changed(before: dict[str, bytes], after: dict[str, bytes]) -> list[str]:
    """The names added, removed or changed between two ``files_of``."""
    return sorted(name for name in before.keys() | after.keys() if before.get(name) != after.get(name))


def worktrees_left(project: Path, worktrees: Path | None = None) -> list[str]:
    left = [p.name for p in worktrees.iterdir()] if worktrees is not None and worktrees.exists() else []
    if (project / ".git").exists():
        left += [line for line in git(project, "worktree", "list", "--porcelain").splitlines()
                 if line.startswith("worktree ") and Path(line[9:]).resolve() != project.resolve()]
    return left


def left_behind(project: Path, run_ids: list[str], settle: float = 5.0) -> list[str]:
    """Processes of these runs (by their marker) or inside the project folder, once ``settle`` seconds passed
    without any (or at its end)."""
    deadline = time.monotonic() + settle
    while True:
        left = [f"{pid} (run {rid})" for rid in run_ids for pid in procs.run_processes(rid)]
        left += processes_inside(project.parent)
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.1)


def record(case: str, project: Path, runs: list, outcome: str | None = None, *,
           before: dict[str, bytes] | None = None, worktrees: Path | None = None) -> list[str]:
    """Adds ``case`` to its module's report; returns what it left behind: processes; with ``worktrees`` (the
    fixture), the worktrees too; with ``before`` (``files_of(project)`` before the case), the files it changed
    outside the run folder."""
    ids = [r if isinstance(r, str) else r.id for r in runs]
    left = left_behind(project, ids)
    trees = worktrees_left(project, worktrees)
    files = None if before is None else changed(before, files_of(project))
    if outcome is None:
        outcome = "; ".join(f"{r.status}: {r.error or (r.output or '')[:40]!r}" for r in runs
                            if not isinstance(r, str))
    module = sys._getframe(1).f_globals.get("__name__", "?")
    REPORT.setdefault(module, []).append((case, outcome, left, trees, files))
    return left + (trees if worktrees is not None else []) + (files or [])


def note(case: str, outcome: str, left: list[str]) -> None:
    """Adds a case that started no run (or counted what it left itself) to its module's report."""
    module = sys._getframe(1).f_globals.get("__name__", "?")
    REPORT.setdefault(module, []).append((case, outcome, left, [], None))


def result_of(project: Path, run_id: str) -> dict:
    return json.loads((project / ".pi" / "subagents" / "runs" / run_id / "result.json").read_text())


def first_run_dir(project: Path, marker: str = '"tool_result"') -> Path:
    runs = project / ".pi" / "subagents" / "runs"

    def find() -> Path | None:
        for events in runs.glob("*/events.jsonl"):
            if marker in events.read_text(errors="replace"):
                return events.parent
        return None

    return wait_for(find, 60, f"a run showing {marker}")


__all__ = ["PI", "REPORT", "changed", "files_of", "first_run_dir", "git", "left_behind", "model", "note", "proj", "record",
           "report", "result_of", "worktrees", "worktrees_left"]
