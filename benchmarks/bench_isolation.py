"""Worktree set-up and patch capture for a repository of 1,000 files, as a ratio to the run.

A git repository of 1,000 small files (one commit, a few uncommitted and untracked files on top) and the
same files as a plain folder (copied instead). For each: the median time of ``isolation.setup`` (worktree
or copy + the parent's changes + the starting snapshot) and of ``capture`` + ``remove`` (snapshot, binary
diff, changes.json, worktree removal) and of the scratch workspace a shell check of an isolated run gets
(``checkout`` + ``remove_checkout``), then the median wall time of a real ``nbsubagents.run`` (pinned pi,
scripted model, one edit) with and without ``isolation="worktree"``. Run with `make bench` or
`.venv/bin/python benchmarks/bench_isolation.py [N]`.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbsubagents
from nbsubagents._child import isolation
from nbsubagents.demo import copy_example_project, stop_scripted_model, use_scripted_model

TASK = "write out-{}.txt: made by the run\nrun: echo done"
FILES = 1000


def fill(project: Path, git: bool) -> None:
    for i in range(FILES):
        folder = project / "pkg" / f"m{i // 50:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"f{i:04d}.py").write_text(f"# module {i}\n" + "x = 1\n" * 40)
    if git:
        (project / ".gitignore").write_text(".pi/subagents/runs/\n.pi/subagents/registry.sqlite*\n")
        env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "b",
               "GIT_COMMITTER_EMAIL": "b@b"}
        for argv in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "bench"]):
            subprocess.run(argv, cwd=project, check=True, env=env)
        (project / "pkg" / "m00" / "f0000.py").write_text("# changed, not committed\n")
        (project / "untracked.txt").write_text("new\n")


def time_parts(project: Path, n: int) -> tuple[float, float, float]:
    setups, captures, checks = [], [], []
    for i in range(n):
        run_dir = Path(tempfile.mkdtemp(prefix="bench-run-"))
        plan = isolation.plan(project)
        t0 = time.perf_counter()
        work = isolation.setup(plan, f"bench-{os.getpid()}-{i}", run_dir)
        setups.append(time.perf_counter() - t0)
        (work / "pkg" / "m01" / "f0050.py").write_text("# edited by the run\n")
        t0 = time.perf_counter()
        isolation.capture(plan, run_dir)
        isolation.remove(plan)
        captures.append(time.perf_counter() - t0)
        t0 = time.perf_counter()  # what a shell check of an isolated run costs on top: its scratch workspace
        scratch = isolation.worktrees_dir() / f"check-bench-{os.getpid()}-{i}"
        folder, _ = isolation.checkout(run_dir, scratch)
        assert (folder / "pkg" / "m01" / "f0050.py").read_text() == "# edited by the run\n"
        isolation.remove_checkout(scratch)
        checks.append(time.perf_counter() - t0)
        shutil.rmtree(run_dir)
    return statistics.median(setups), statistics.median(captures), statistics.median(checks)


def time_runs(project: Path, n: int) -> tuple[float, float]:
    plain, isolated = [], []
    for i in range(n):
        t0 = time.perf_counter()
        run = nbsubagents.run("scribe", TASK.format(f"plain{i}"), cwd=project, show=False)
        plain.append(time.perf_counter() - t0)
        assert run.status == "completed", run.error
        t0 = time.perf_counter()
        run = nbsubagents.run("scribe", TASK.format(f"iso{i}"), cwd=project, show=False, isolation="worktree")
        isolated.append(time.perf_counter() - t0)
        assert run.status == "completed" and run.files_changed == [f"out-iso{i}.txt"], (run.error, run.files_changed)
    return statistics.median(plain), statistics.median(isolated)


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    base = Path(tempfile.mkdtemp(prefix="nbsubagents-bench-iso-"))
    os.environ["NBSUBAGENTS_WORKTREES"] = str(base / "worktrees")
    for kind in ("git", "copy"):
        project = copy_example_project(base / kind)
        fill(project, git=kind == "git")
        os.chdir(project)
        use_scripted_model(project / ".pi" / "demo-agent")
        nbsubagents.run("scout", "read README.md", show=False)  # warm caches
        setup, capture, check = time_parts(project, n)
        plain, isolated = time_runs(project, n)
        print(f"[{kind}] {FILES} files: set-up median {setup * 1000:.0f} ms, capture + removal "
              f"{capture * 1000:.0f} ms, a check's scratch workspace (made + removed) {check * 1000:.0f} ms "
              f"over {n}")
        print(f"[{kind}] run without isolation: median {plain:.3f} s; with isolation='worktree': {isolated:.3f} s")
        print(f"[{kind}] set-up / run {setup / plain:.3f} · capture / run {capture / plain:.3f} · "
              f"isolated run / plain run {isolated / plain:.3f}")
    shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    try:
        main()
    finally:
        stop_scripted_model()
