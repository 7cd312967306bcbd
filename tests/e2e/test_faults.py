"""Fault injection (issue 13): the real pi and supervisor under the failures a long-running tool meets.

Each case breaks one thing — the launcher, the supervisor or pi killed; the model answering HTTP 500 or not
listening at all; garbage and a 50 MB line on pi's stdout; a full disk; a read-only runs folder; ten cancels
at once from another process; 64 runs at once — and checks that the run says what happened, that
``result.json`` is whole, and that no process of the run is left. Every case adds a line to a report
printed at the end of the module (case, outcome, processes left).

The file builds its own project and model server instead of using the shared ``project`` fixture, and
is marked ``faults``: it runs once per test session, not once per variant of the shared fixtures.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import PI, SCOUT, processes_inside, wait_for

import nbsubagents
from nbsubagents import config, registry
from nbsubagents.child import procs
from nbsubagents.lifecycle import watcher
from nbsubagents.lifecycle import reconcile
from nbsubagents.demo.scripted import ScriptedModel, write_agent_dir

pytestmark = pytest.mark.faults

REPORT: list[tuple[str, str, list[str]]] = []


@pytest.fixture(scope="module", autouse=True)
def report(request):
    """Prints every case with its outcome and the processes it left, once the module is through."""
    yield
    lines = ["", "fault-injection report (case | outcome | processes left)"]
    lines += [f"  {case:<30} | {outcome} | {', '.join(left) if left else 'none'}" for case, outcome, left in REPORT]
    if hasattr(request.config, "workeroutput"):  # a pytest-xdist worker: its controller prints it (conftest.py)
        request.config.workeroutput["fault_report"] = "\n".join(lines)
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
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(agent))
    monkeypatch.setenv("PI_OFFLINE", "1")
    monkeypatch.setenv("NBSUBAGENTS_PI", str(PI))
    monkeypatch.delenv("NBSUBAGENTS_ROOT", raising=False)
    monkeypatch.chdir(root)
    config.reset()
    yield root
    config.reset()
    watcher.stop()


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


def record(case: str, project: Path, runs: list, outcome: str | None = None) -> list[str]:
    ids = [r if isinstance(r, str) else r.id for r in runs]
    left = left_behind(project, ids)
    if outcome is None:
        outcome = "; ".join(f"{r.status}: {r.error or (r.output or '')[:40]!r}" for r in runs
                            if not isinstance(r, str))
    REPORT.append((case, outcome, left))
    return left


def result_of(project: Path, run_id: str) -> dict:
    return json.loads((project / ".pi" / "subagents" / "runs" / run_id / "result.json").read_text())


def launcher(code: str, cwd: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", f"import nbsubagents, time\n{code}\ntime.sleep(600)\n"],
                            cwd=cwd, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)


def first_run_dir(project: Path, marker: str = '"tool_result"') -> Path:
    runs = project / ".pi" / "subagents" / "runs"

    def find() -> Path | None:
        for events in runs.glob("*/events.jsonl"):
            if marker in events.read_text(errors="replace"):
                return events.parent
        return None

    return wait_for(find, 60, f"a run showing {marker}")


# -- processes killed -------------------------------------------------------------------------------
def test_kill_the_launcher_of_a_foreground_run(proj):
    """The supervisor is detached: a foreground run whose kernel dies still ends and records its end."""
    proc = launcher("nbsubagents.run('scout', 'run: echo started\\nsleep: 2\\nsay: finished alone', show=False)",
                    proj)
    try:
        run_dir = first_run_dir(proj)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        proc.stdout.close()
    wait_for(lambda: (run_dir / "result.json").exists(), 60, "the result")
    result = result_of(proj, run_dir.name)
    assert result["status"] == "completed" and "finished alone" in result["finalText"]
    rows = {r["run_id"]: r for r in reconcile.status(include_completed=True, root=proj).rows}
    assert rows[run_dir.name]["status"] == "completed"
    assert record("kill the launcher", proj, [run_dir.name], f"completed: {result['finalText']!r}") == []


def test_kill_the_supervisor(proj):
    run = nbsubagents.start("scout", "run: sleep 60", show=False)
    wait_for(lambda: len(procs.run_processes(run.id)) >= 2, 60, "pi and its tool")
    os.kill(json.loads((run.dir / "supervisor.json").read_text())["pid"], signal.SIGKILL)
    run.wait(60)
    assert run.status == "failed" and run.error.startswith("interrupted: supervisor exited without a result")
    assert run.result["durationSeconds"] > 0
    assert record("kill the supervisor", proj, [run]) == []


def test_kill_pi(proj):
    run = nbsubagents.start("scout", "run: sleep 60", show=False)
    wait_for(lambda: len(procs.run_processes(run.id)) >= 2, 60, "pi and its tool")
    os.kill(json.loads((run.dir / "supervisor.json").read_text())["childPid"], signal.SIGKILL)
    run.wait(60)
    assert run.status == "failed" and run.error.startswith("pi exited with code -9")
    assert record("kill pi", proj, [run]) == []


# -- the model fails --------------------------------------------------------------------------------
def test_http_500_from_the_model(proj, model):
    model.script = [{"error": {"status": 500, "message": "upstream exploded"}}]
    run = nbsubagents.run("scout", "say: hi", show=False)
    assert run.status == "failed" and "upstream exploded" in run.error
    assert record("HTTP 500", proj, [run]) == []


def test_a_closed_port(proj, tmp_path):
    with socket.socket() as sock:  # a port that was just free: nothing listens there now
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    write_agent_dir(tmp_path / "agent", f"http://127.0.0.1:{port}/v1")
    started = time.monotonic()
    run = nbsubagents.run("scout", "say: hi", show=False)
    assert run.status == "failed" and "connection" in run.error.lower(), run.error
    assert time.monotonic() - started < 60
    assert record("closed port", proj, [run]) == []


# -- pi's output ------------------------------------------------------------------------------------
def test_garbage_and_a_50_mb_line_on_stdout(proj, tmp_path):
    """A wrapper prints garbage and one 50 MB line on pi's stdout, then becomes the real pi."""
    wrapper = tmp_path / "noisy-pi"
    wrapper.write_text("#!/bin/sh\n"
                       "printf 'not json {\\377\\376 broken utf8\\n'\n"
                       "head -c 52428800 /dev/zero | tr '\\0' x\n"
                       "printf '\\n'\n"
                       f"exec {PI} \"$@\"\n")
    wrapper.chmod(0o755)
    config.configure(pi=str(wrapper))
    run = nbsubagents.run("scout", "read README.md", show=False)
    assert run.status == "completed", run.error
    texts = [e["text"] for e in run.events() if e["type"] == "stdout_text"]
    assert texts[0] == "not json {\ufffd\ufffd broken utf8"
    assert texts[1] == "[a stdout line of 52428800 bytes was too long to parse]"
    assert (run.dir / "stdout.log").stat().st_size > 50 * 1024 * 1024
    assert "# Fault project" in run.output
    assert record("garbage + 50 MB stdout line", proj, [run]) == []


# -- the disk ---------------------------------------------------------------------------------------
def test_a_disk_that_fills_up_during_the_run(proj):
    """Lines are lost, never result.json: the supervisor holds room for it from its start."""
    from mounts import small_disk

    runs = proj / ".pi" / "subagents" / "runs"
    with small_disk(runs, "1m"):
        run = nbsubagents.start("scout", "run: echo before\nsleep: 2\nsay: after the disk filled", show=False)
        wait_for(lambda: any(e["type"] == "tool_result" for e in run.events()), 60, "the tool's result")
        filler = runs / "filler"
        fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
        try:  # fill the disk to the last byte
            while os.write(fd, b"\0" * 4096):
                pass
        except OSError:
            pass
        finally:
            os.close(fd)
        run.wait(60)
        result = json.loads((run.dir / "result.json").read_text())
        assert result["status"] in ("completed", "failed"), result
        assert result["status"] == "completed" or result["errorMessage"], result
        left = record("full disk during a run", proj, [run])
        files = sorted(p.name for p in run.dir.iterdir())
        filler.unlink()
    assert ".result-reserve" not in files and not any(f.endswith(".tmp") for f in files), files
    assert left == []


def test_a_full_disk_before_the_run_writes_nothing(proj):
    from mounts import small_disk

    runs = proj / ".pi" / "subagents" / "runs"
    with small_disk(runs, "16k"):
        (runs / "filler").write_bytes(b"\0" * 12 * 1024)
        big = "say: " + "x" * 20000  # the prompt alone does not fit
        with pytest.raises(nbsubagents.NbSubagentsError, match="Cannot write the run directory .*No space left"):
            nbsubagents.run("scout", big, show=False)
        assert sorted(p.name for p in runs.iterdir()) == ["filler"]
        REPORT.append(("full disk before a run", "NbSubagentsError: Cannot write the run directory",
                       left_behind(proj, [])))


def test_a_read_only_runs_folder(proj):
    from mounts import read_only

    runs = proj / ".pi" / "subagents" / "runs"
    runs.mkdir(parents=True)
    with read_only(runs):
        with pytest.raises(nbsubagents.NbSubagentsError, match="Cannot create the run directory") as err:
            nbsubagents.run_parallel([{"preset": "scout", "task": "say: a"}, {"preset": "scout", "task": "say: b"}],
                                     show=False)
    assert list(runs.iterdir()) == []
    REPORT.append(("read-only runs folder", f"NbSubagentsError: {str(err.value)[:60]}…", left_behind(proj, [])))


# -- many at once -----------------------------------------------------------------------------------
def test_ten_cancels_at_once_from_another_process(proj):
    run = nbsubagents.start("scout", "run: sleep 60", show=False)
    wait_for(lambda: len(procs.run_processes(run.id)) >= 2, 60, "pi and its tool")
    code = ("import sys, threading, nbsubagents\n"
            "barrier = threading.Barrier(10)\nanswers = []\n"
            "def cancel():\n"
            "    barrier.wait()\n"
            "    try:\n"
            "        answers.append(nbsubagents.cancel(sys.argv[1]))\n"
            "    except Exception as exc:\n"
            "        answers.append(repr(exc))\n"
            "threads = [threading.Thread(target=cancel) for _ in range(10)]\n"
            "[t.start() for t in threads]; [t.join() for t in threads]\n"
            "print(answers)\n")
    out = subprocess.run([sys.executable, "-c", code, run.id], capture_output=True, text=True, timeout=120,
                         stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr
    answers = eval(out.stdout)  # a list of True/False or error reprs printed by the child
    assert len(answers) == 10 and all(isinstance(a, bool) for a in answers) and any(answers), answers
    run.wait(60)
    assert run.status == "aborted" and run.error == "cancelled"
    assert [e["type"] for e in run.events()].count("run_end") == 1
    assert record("10 cancels at once", proj, [run], f"aborted; cancel() answered {answers.count(True)}x True") == []


@pytest.mark.slow
def test_sixty_four_runs_at_once(proj):
    config.configure(max_tasks=64)
    tasks = [{"preset": "scout", "task": f"say: run {i}", "name": f"r{i}"} for i in range(64)]
    started = time.monotonic()
    runs = nbsubagents.run_parallel(tasks, concurrency=64, show=False)
    took = time.monotonic() - started
    assert [r.status for r in runs] == ["completed"] * 64, [r.error for r in runs if r.status != "completed"][:3]
    assert all(f"run {i}" in r.output for i, r in enumerate(runs))
    counts = registry.counts(proj)
    assert counts["completed"] == 64 and counts["running"] == 0
    assert record("64 runs at once", proj, runs, f"64 completed in {took:.0f}s") == []


# -- isolation and checks (issue 22: isolation that holds, no leaks) ----------------------------------------------
def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd, check=True,
                          capture_output=True, text=True).stdout


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


def worktrees_left(project: Path, worktrees: Path) -> list[str]:
    left = [p.name for p in worktrees.iterdir()] if worktrees.exists() else []
    if (project / ".git").exists():
        left += [line for line in git(project, "worktree", "list", "--porcelain").splitlines()
                 if line.startswith("worktree ") and Path(line[9:]).resolve() != project.resolve()]
    return left


@pytest.fixture
def worktrees(tmp_path, monkeypatch):
    folder = tmp_path / "worktrees"
    monkeypatch.setenv("NBSUBAGENTS_WORKTREES", str(folder))
    return folder


ESCAPES = [  # each writes through a way out of the workspace that isolation must close
    "run: echo new > abs_link/new.txt",  # an absolute link to a folder of the project
    "run: echo changed > abs_link/app.py",
    "run: echo up > abs_link/../escaped.txt",  # `..` of that link's folder
    "run: echo rel > rel_link/rel.txt",  # a relative link to a folder of the project (inside the workspace)
    "run: echo climbs > climb_link/climbed.txt",  # relative, climbing out of the project and back in
    "run: sh -c 'cd -P abs_link/.. && echo away > cd-away.txt'",  # a child process that cd's away
    "run: cd \"$OLDPWD\" && echo old > via-oldpwd.txt",  # the kernel's OLDPWD (the project) would lead back
    "run: echo env > \"$PROJECT_DIR/via-env.txt\"",  # a variable naming the project
    "run: echo more >> hard.txt",  # a hard link to a file outside the project
]
ESCAPED = ["cd-away.txt", "escaped.txt", "hard.txt", "src/app.py", "src/climbed.txt", "src/new.txt", "src/rel.txt",
           "via-env.txt", "via-oldpwd.txt"]


@pytest.mark.parametrize("kind", ["git", "copy"])
def test_an_isolated_run_reaches_the_original_folder_through_no_link(proj, worktrees, tmp_path, monkeypatch, kind):
    """Symbolic links (absolute, relative, climbing), `..`, a child that cd's away, the environment, hard links:
    nothing reaches the original folder before apply(), and the patch holds every change."""
    (proj / "src").mkdir()
    (proj / "src" / "app.py").write_text("print('hi')\n")
    os.symlink(proj / "src", proj / "abs_link")
    os.symlink("src", proj / "rel_link")
    os.symlink(f"../{proj.name}/src", proj / "climb_link")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "shared.txt").write_text("shared\n")
    os.link(outside / "shared.txt", proj / "hard.txt")
    if kind == "git":
        (proj / ".gitignore").write_text(".pi/subagents/runs/\n")
        git(proj, "init", "-q")
        git(proj, "add", ".")
        git(proj, "commit", "-qm", "start")
    monkeypatch.setenv("OLDPWD", str(proj))
    monkeypatch.setenv("PROJECT_DIR", str(proj))
    before = files_of(proj)

    run = nbsubagents.run("scout", "\n".join(ESCAPES), isolation="worktree", show=False)

    assert run.status == "completed", run.error
    assert run.meta["isolation"]["kind"] == kind
    assert files_of(proj) == before  # nothing reached the original folder
    assert (outside / "shared.txt").read_text() == "shared\n"
    assert sorted(run.files_changed) == ESCAPED
    assert "abs_link" not in run.diff and "climb_link" not in run.diff  # the links' rewrite is not a change
    left = worktrees_left(proj, worktrees)
    assert sorted(run.apply()) == ESCAPED
    assert (proj / "src" / "app.py").read_text() == "changed\n" and (proj / "escaped.txt").read_text() == "up\n"
    assert os.readlink(proj / "abs_link") == str(proj / "src")  # the project's own links are as they were
    assert record(f"isolation: links ({kind})", proj, [run], f"{run.status}; {len(ESCAPED)} escapes held; "
                  f"worktrees left: {left or 'none'}") == [] and left == []


@pytest.mark.parametrize("kind", ["git", "copy"])
def test_a_link_out_of_the_project_is_refused_before_the_run_by_name(proj, worktrees, tmp_path, kind):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "data.txt").write_text("precious\n")
    if kind == "git":
        git(proj, "init", "-q")
        git(proj, "add", "README.md")
        git(proj, "commit", "-qm", "start")
    refused = []
    for name, target in [("abs_out", str(outside)), ("rel_out", "../outside"), ("file_out", "../outside/data.txt")]:
        os.symlink(target, proj / name)
        with pytest.raises(nbsubagents.NbSubagentsError) as err:
            nbsubagents.run("scout", f"run: echo lost > {name}/x.txt; echo lost > file_out", isolation="worktree",
                            show=False)
        assert f"{name} -> {target}" in str(err.value) and "point outside" in str(err.value), str(err.value)
        refused.append(name)
        os.unlink(proj / name)
    assert sorted(p.name for p in outside.iterdir()) == ["data.txt"]
    assert (outside / "data.txt").read_text() == "precious\n"
    runs = proj / ".pi" / "subagents" / "runs"
    assert not any((d / "events.jsonl").exists() for d in runs.iterdir()) if runs.exists() else True  # never ran
    left = worktrees_left(proj, worktrees)
    REPORT.append((f"isolation: link out ({kind})", f"refused before the run: {', '.join(refused)}; "
                   f"worktrees left: {left or 'none'}", left_behind(proj, [])))
    assert left == []


def test_isolation_keeps_untracked_bulk_out_of_the_users_git(proj, worktrees):
    """A 30 MB untracked file is part of the workspace, but never of the user's .git."""
    (proj / ".gitignore").write_text(".pi/subagents/runs/\n")
    git(proj, "init", "-q")
    git(proj, "add", ".gitignore", "README.md")
    git(proj, "commit", "-qm", "start")
    (proj / "bulk.bin").write_bytes(os.urandom(30 * 1024 * 1024))

    def size_of_git() -> int:
        return sum(p.stat().st_size for p in (proj / ".git").rglob("*") if p.is_file())

    before = size_of_git()
    run = nbsubagents.run("scout", "run: wc -c bulk.bin && echo made > made.txt", isolation="worktree", show=False)
    assert run.status == "completed", run.error
    assert "31457280 bulk.bin" in "".join(str(e.get("text", "")) for e in run.events())  # the run saw it
    grew = size_of_git() - before
    assert run.files_changed == ["made.txt"]
    left = worktrees_left(proj, worktrees)
    assert record("isolation: 30 MB untracked", proj, [run], f"{run.status}; .git grew {grew} bytes; "
                  f"worktrees left: {left or 'none'}") == []
    assert grew < 1024 * 1024 and left == []
    from nbsubagents.sweeps.scorers import check, score

    assert score(run, [check("test -f made.txt", name="made")]) == {"made": True}  # without the big file's blob
    assert "its starting state is gone" in (run.dir / "checks" / "made.log").read_text()
    assert worktrees_left(proj, worktrees) == []


def kill_all(found: list[str]) -> None:
    for line in found:
        try:
            os.kill(int(line.split(":")[0]), signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_a_check_that_backgrounds_processes_leaves_none(proj):
    """`&`, nohup and setsid in a check, on a normal end and on a timeout: the check's whole tree ends with it."""
    from nbsubagents.sweeps.scorers import check, score

    run = nbsubagents.run("scout", "say: done", show=False)
    background = check("sleep 300 & nohup sleep 301 >/dev/null 2>&1 & setsid sleep 302 & echo started",
                       shell=True, name="background")
    slow = check("setsid sleep 303 & sleep 60", shell=True, name="slow", timeout=2)
    try:
        started = time.monotonic()
        assert score(run, [background, slow]) == {"background": True, "slow": False}
        assert time.monotonic() - started < 30
        assert "timed out after 2s" in (run.dir / "checks" / "slow.log").read_text()
        left = left_behind(proj, [], settle=2.0)
    finally:
        kill_all(processes_inside(proj.parent))
    REPORT.append(("check: & nohup setsid timeout", "scored; its processes ended", left))
    assert left == []


def test_a_check_killed_mid_way_leaves_no_worktree_and_no_process(proj, worktrees):
    """The process scoring an isolated run is SIGKILLed during its check: the check's processes end with it, and
    the next check sweeps the scratch worktree it left (registered with git, and its folder)."""
    from nbsubagents.sweeps.scorers import check, score

    git(proj, "init", "-q")
    git(proj, "add", "README.md")
    git(proj, "commit", "-qm", "start")
    run = nbsubagents.run("scout", "run: echo made > made.txt", isolation="worktree", show=False)
    assert run.status == "completed", run.error
    code = ("import sys, nbsubagents\nfrom nbsubagents.sweeps.scorers import check, score\n"
            "score(nbsubagents.get_run(sys.argv[1]), [check('setsid sleep 313 & sleep 314', shell=True)])\n")
    scorer = subprocess.Popen([sys.executable, "-c", code, run.id], cwd=proj, stdin=subprocess.DEVNULL)
    try:
        wait_for(lambda: any("sleep 314" in p for p in processes_inside(worktrees)), 60, "the check's sleep")
        assert len(list(worktrees.glob("check-*.json"))) == 1
    finally:
        scorer.kill()
        scorer.wait(30)
    left = left_behind(proj, [], settle=5.0) + processes_inside(worktrees)
    kill_all(processes_inside(worktrees))
    stale = worktrees_left(proj, worktrees)  # the killed scorer's finally never ran: its worktree is still there
    assert score(run, [check("test -f made.txt", name="made")]) == {"made": True}  # the next check sweeps it
    after = worktrees_left(proj, worktrees)
    REPORT.append(("check: scorer killed mid-check", f"left {len(stale)} stale entries, swept by the next check; "
                   f"worktrees left: {after or 'none'}", left))
    assert stale and left == [] and after == []
