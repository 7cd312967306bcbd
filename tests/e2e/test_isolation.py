"""Isolation: real pi runs in real git worktrees (or copies), their changes captured as patches and applied."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import nbsubagents
from nbsubagents._child.record import load as load_record
from nbsubagents._child import procs
from nbsubagents._config import NbSubagentsError

from helpers import REPO, at_once, processes_inside, wait_for
from test_background import python, row_of, started_by_a_killed_launcher


def git(cwd, *args):
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd, check=True,
                          capture_output=True, text=True).stdout


@pytest.fixture
def worktrees(tmp_path, monkeypatch):
    folder = tmp_path / "worktrees"
    monkeypatch.setenv("NBSUBAGENTS_WORKTREES", str(folder))
    return folder


def make_repo(project: Path) -> None:
    (project / ".gitignore").write_text(".pi/subagents/runs/\n*.log\n")
    git(project, "init", "-q")
    git(project, "add", "README.md", "src", ".gitignore")
    git(project, "commit", "-qm", "start")


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and ".git" not in p.parts and "runs" not in p.parts and "registry" not in p.name}


@pytest.mark.parametrize("kind", ["git", "copy"])
def test_two_parallel_runs_edit_the_same_file_each_patch_holds_its_own_change(project, worktrees, tmp_path, kind):
    if kind == "git":
        make_repo(project)
        (project / "src" / "app.py").write_text("print('uncommitted')\n")  # the parent's uncommitted change
    (project / "notes.txt").write_text("untracked note\n")  # untracked: the worktree must see it too
    before = snapshot(project)

    a, b = nbsubagents.run_parallel([
        {"preset": "scribe", "task": "read notes.txt\nedit README.md: second line -> changed by A",
         "isolation": "worktree"},
        {"preset": "scribe", "task": "edit README.md: second line -> changed by B", "isolation": "worktree"},
    ], show=False)

    assert a.status == "completed" and b.status == "completed", (a.error, b.error)
    assert "untracked note" in a.output  # the run saw the notebook's folder, untracked files included
    assert snapshot(project) == before  # the original folder is untouched until apply()
    assert "+changed by A" in a.diff and "changed by B" not in a.diff and "app.py" not in a.diff
    assert "+changed by B" in b.diff and "changed by A" not in b.diff and "notes.txt" not in b.diff
    assert a.files_changed == ["README.md"] and b.files_changed == ["README.md"]
    assert a.changes["added"] == 1 and a.changes["removed"] == 1
    assert a.changes["fileChanges"][0]["change"] == "modified"
    assert not list(worktrees.iterdir())  # both workspaces were removed
    if kind == "git":
        assert "nbsubagents/" not in git(project, "branch", "--list")  # and their branches
        assert git(project, "worktree", "list").count("\n") == 1

    assert a.apply() == ["README.md"]
    assert (project / "README.md").read_text() == "# Demo project\nchanged by A\n"
    with pytest.raises(NbSubagentsError, match=r"README\.md") as refused:
        b.apply()
    assert "nothing was changed" in str(refused.value)
    assert (project / "README.md").read_text() == "# Demo project\nchanged by A\n"
    with pytest.raises(NbSubagentsError, match="already applied"):
        a.apply()
    frame = nbsubagents.runs()
    assert set(frame["changes"]) == {"+1 \u22121"} and set(frame["files_changed"]) == {1}
    assert processes_inside(tmp_path) == []


def test_binary_files_new_files_and_deletions_round_trip_through_the_patch(project, worktrees):
    make_repo(project)
    run = nbsubagents.run("scout", "run: printf 'a\\000b\\377' > blob.bin && rm src/app.py && mkdir -p new && "
                          "echo hi > new/x.txt", isolation="worktree", show=False)
    assert run.status == "completed", run.error
    assert "GIT binary patch" in run.diff
    changes = {f["path"]: f for f in run.changes["fileChanges"]}
    assert changes["blob.bin"]["binary"] and changes["blob.bin"]["change"] == "added"
    assert changes["src/app.py"]["change"] == "deleted" and changes["new/x.txt"]["change"] == "added"
    assert not (project / "blob.bin").exists() and (project / "src" / "app.py").exists()
    run.apply()
    assert (project / "blob.bin").read_bytes() == b"a\0b\xff"
    assert not (project / "src" / "app.py").exists() and (project / "new" / "x.txt").read_text() == "hi\n"


def test_keep_worktree_then_discard(project, worktrees):
    make_repo(project)
    run = nbsubagents.run("scribe", "write made.txt: kept", isolation="worktree", keep_worktree=True, show=False)
    kept = Path(run.result["worktree"]["path"])
    assert (kept / "made.txt").read_text() == "kept\n"
    assert run.result["worktree"]["branch"] == f"nbsubagents/{run.id}"
    run.discard()
    assert not kept.exists() and f"nbsubagents/{run.id}" not in git(project, "branch", "--list")
    with pytest.raises(NbSubagentsError, match="already discarded"):
        run.apply()
    assert not (project / "made.txt").exists()


def test_a_background_run_is_isolated_and_captured_by_its_supervisor(project, worktrees):
    make_repo(project)
    run = nbsubagents.start("scribe", "write bg.txt: from the background", isolation="worktree", show=False)
    run.wait(120)
    assert run.status == "completed", run.error
    assert run.files_changed == ["bg.txt"] and not (project / "bg.txt").exists()
    # another process (a restarted kernel) finds the same run and applies it
    again = nbsubagents.get_run(run.id)
    again.apply()
    assert (project / "bg.txt").read_text() == "from the background\n"


@pytest.mark.pi_matrix
def test_resume_continues_in_a_fresh_worktree_with_the_earlier_patch(project, worktrees):
    make_repo(project)
    first = nbsubagents.run("scribe", "write one.txt: first", isolation="worktree", show=False)
    assert first.status == "completed"
    second = nbsubagents.run("scribe", "write two.txt: second", isolation="worktree", resume=first.id, show=False)
    assert second.status == "completed", second.error
    assert second.result["worktree"]["path"] != first.result["worktree"]["path"]
    assert sorted(second.files_changed) == ["one.txt", "two.txt"]  # the earlier patch was applied first
    session = json.loads((second.dir / "child-session.jsonl").read_text().splitlines()[0])
    assert session["cwd"] == second.result["worktree"]["path"]
    second.apply()
    assert (project / "one.txt").read_text() == "first\n" and (project / "two.txt").read_text() == "second\n"


def test_isolation_from_a_preset_and_from_settings(project, worktrees):
    make_repo(project)
    (project / ".pi" / "subagents" / "iso.md").write_text(
        "---\nname: iso\ndescription: i\nmodel: demo/scripted\ntools: write\nisolation: worktree\n---\n")
    run = nbsubagents.run("iso", "write p.txt: x", show=False)
    assert run.files_changed == ["p.txt"] and not (project / "p.txt").exists()
    nbsubagents.configure(isolation="worktree")
    run = nbsubagents.run("scribe", "write s.txt: x", show=False)
    assert run.files_changed == ["s.txt"] and not (project / "s.txt").exists()
    run = nbsubagents.run("scribe", "write n.txt: x", show=False, isolation="none")  # the call wins
    assert (project / "n.txt").exists() and run.changes is None


def test_refused_inputs_name_what_was_wrong(project, worktrees):
    with pytest.raises(NbSubagentsError, match="isolation must be 'worktree' or 'none', got 'docker'"):
        nbsubagents.run("scribe", "x", isolation="docker", show=False)
    (project / "big.bin").write_bytes(b"\0" * (2 * 1024 * 1024))
    nbsubagents.configure(isolation_max_copy_mb=1)
    with pytest.raises(NbSubagentsError, match=r"not a git repository.*2\.0 MB, over the limit of 1 MB"):
        nbsubagents.run("scribe", "x", isolation="worktree", show=False)
    (project / ".gitignore").write_text("big.bin\n")  # ignored files are not copied, so not counted
    run = nbsubagents.run("scribe", "write ok.txt: y", isolation="worktree", show=False)
    assert run.status == "completed" and run.files_changed == ["ok.txt"]
    (project / "nocommit").mkdir()
    git(project / "nocommit", "init", "-q")
    with pytest.raises(NbSubagentsError, match="has no commit yet"):
        nbsubagents.run("scribe", "x", isolation="worktree", cwd=project / "nocommit", show=False)
    plain = nbsubagents.run("scribe", "write plain.txt: z", show=False)
    with pytest.raises(NbSubagentsError, match="has no changes.patch"):
        plain.apply()
    with pytest.raises(NbSubagentsError, match="keep_worktree must be True or False"):
        nbsubagents.run("scribe", "x", isolation="worktree", keep_worktree="yes", show=False)


def test_panels_and_summary_show_changes_and_spend_against_the_budget(project, worktrees, capsys):
    pytest.importorskip("ipywidgets")
    from nbsubagents._ui.panels import RunPanel

    make_repo(project)
    run = nbsubagents.run("scribe", "edit README.md: second line -> new\nwrite extra.txt: a\\nb", isolation="worktree",
                          max_tool_calls=10)
    printed = capsys.readouterr().err  # progress outside a notebook goes to stderr
    assert run.status == "completed", run.error
    assert "budget tools 2/10" in printed and "2 files +3 \u22121" in printed
    panel = RunPanel(run)
    for event in run.events():
        panel.add(event, None)
    panel.render()
    assert "budget tools 2/10" in panel.header.value and "2 files +3 \u22121" in panel.header.value


def test_an_isolated_run_resumed_without_isolation_continues_in_the_cwd(project, worktrees):
    make_repo(project)
    first = nbsubagents.run("scribe", "write one.txt: first", isolation="worktree", show=False)
    second = nbsubagents.run("scribe", "write two.txt: second", resume=first.id, show=False)
    assert second.status == "completed", second.error
    assert (project / "two.txt").read_text() == "second\n" and not (project / "one.txt").exists()
    session = json.loads((second.dir / "child-session.jsonl").read_text().splitlines()[0])
    assert session["cwd"] == str(project)


# -- a lost supervisor: its worktree is settled like the supervisor would have (issue 14) ------------------------
def supervisor_of(run_dir: Path) -> dict:
    return json.loads((run_dir / "supervisor.json").read_text())


def kill_supervisor_once_sleeping(run_dir: Path) -> None:
    """SIGKILL the run's supervisor once pi runs its `sleep` tool (after the run wrote its file)."""
    wait_for(lambda: (run_dir / "events.jsonl").exists() and '"tool_result"' in (run_dir / "events.jsonl").read_text()
             and "sleep 120" in (run_dir / "events.jsonl").read_text(), what="the run's second tool call")
    info = supervisor_of(run_dir)
    os.kill(info["pid"], signal.SIGKILL)
    wait_for(lambda: not procs.alive(info["pid"], info["startTicks"]), what="the supervisor's end")


def assert_no_workspace_left(project: Path, worktrees: Path) -> None:
    assert not worktrees.exists() or not list(worktrees.iterdir())
    assert git(project, "worktree", "list").count("\n") == 1
    assert "nbsubagents/" not in git(project, "branch", "--list")


LOST_TASK = "run: echo partial > partial.txt\nrun: sleep 120"


def test_a_foreground_run_whose_supervisor_is_killed_leaves_no_worktree_and_keeps_its_changes(project, worktrees):
    make_repo(project)
    runs = project / ".pi" / "subagents" / "runs"

    def killer():
        run_dir = wait_for(lambda: next(runs.glob("*/supervisor.json"), None), what="the supervisor").parent
        kill_supervisor_once_sleeping(run_dir)

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    run = nbsubagents.run("scout", LOST_TASK, isolation="worktree", timeout=100, show=False)  # the foreground loop
    thread.join(5)

    assert run.status == "failed" and run.result["stopReason"] == "interrupted", run.error
    assert run.error == "interrupted: supervisor exited without a result (exit code -9)"
    assert run.result["changes"] == {"files": 1, "added": 1, "removed": 0}  # captured by the settle step
    assert run.files_changed == ["partial.txt"] and "+partial" in run.diff
    assert run.result["worktree"]["kept"] is False
    assert_no_workspace_left(project, worktrees)
    assert sorted(p.name for p in run.dir.iterdir() if p.name.startswith(".")) == []  # no lock or reserve left
    assert not (project / "partial.txt").exists()
    run.apply()
    assert (project / "partial.txt").read_text() == "partial\n"


def test_an_isolated_background_run_whose_supervisor_is_killed_is_settled_by_a_later_process(project, worktrees):
    make_repo(project)
    (run_id,) = started_by_a_killed_launcher(
        f"print(nbsubagents.start('scout', {LOST_TASK!r}, isolation='worktree', show=False).id, flush=True)").split()
    run_dir = project / ".pi" / "subagents" / "runs" / run_id
    kill_supervisor_once_sleeping(run_dir)
    assert Path(json.loads((run_dir / "isolation.json").read_text())["path"]).is_dir()  # left behind for now

    later = python("import json, nbsubagents\n"  # a new kernel: its reconcile settles the run
                   "nbsubagents.status()\n"
                   f"r = nbsubagents.get_run({run_id!r})\n"
                   "print(json.dumps({'status': r.status, 'error': r.error, 'files': r.files_changed, "
                   "'applied': r.apply()}))\n")
    seen = json.loads(later.stdout.splitlines()[-1])
    assert seen == {"status": "failed", "error": "interrupted: supervisor exited without a result",
                    "files": ["partial.txt"], "applied": ["partial.txt"]}
    assert (project / "partial.txt").read_text() == "partial\n"
    assert_no_workspace_left(project, worktrees)
    row = row_of(project, run_id)
    assert (row["status"], row["stop_reason"], row["files_changed"], row["lines_added"]) == (
        "failed", "interrupted", 1, 1)


def test_a_supervisor_killed_while_setting_up_the_worktree_leaves_nothing_and_says_so(project, worktrees):
    """The workspace is recorded before it is made, so a settler finds what a dead set-up left."""
    from nbsubagents._child import isolation
    from nbsubagents._child.artifacts import RunPaths
    from nbsubagents._lifecycle import settle

    make_repo(project)
    run_dir = project / ".pi" / "subagents" / "runs" / "20261126-000000-abcdef"
    run_dir.mkdir(parents=True)
    iso = isolation.plan(project)
    meta = {"runId": run_dir.name, "isolation": iso, "createdAt": "2026-11-26T00:00:00Z"}
    (run_dir / "meta.json").write_text(json.dumps(meta))
    isolation._write_state(run_dir, {**iso, "path": str(worktrees / run_dir.name),
                                     "branch": f"nbsubagents/{run_dir.name}"})
    git(project, "clone", "-q", "--shared", str(project), str(worktrees / run_dir.name))
    # ... and the supervisor died here, before the starting state was recorded

    assert settle.lost(RunPaths(run_dir), load_record(run_dir))
    result = json.loads((run_dir / "result.json").read_text())
    assert result["status"] == "failed" and "changes" not in result
    assert "could not be captured: its supervisor was lost while it was setting up" in result["changesError"]
    assert result["errorMessage"].startswith(settle.LOST + "; the run's changes could not be captured")
    assert_no_workspace_left(project, worktrees)


def test_isolated_typed_and_budgeted_background_runs_outlive_their_killed_launcher(project, worktrees, scripted):
    from nbsubagents._pi.scripted import _after_last_user

    make_repo(project)

    def script(body, index):
        task = _after_last_user(body["messages"])[0]
        if "BUDGET" in task:  # never stops calling tools
            return {"tool_calls": [{"name": "bash", "arguments": {"command": f"echo step-{index}"}}], "hang": 0.5}
        if index == 0:
            return {"tool_calls": [{"name": "write", "arguments": {"path": "bg.txt", "content": "from bg\n"}}],
                    "hang": 1}
        return {"text": 'Wrote it.\n```json\n{"files": 1, "ok": true}\n```'}

    scripted.script = script
    schema = {"type": "object", "properties": {"files": {"type": "integer"}, "ok": {"type": "boolean"}},
              "required": ["files", "ok"]}
    typed, budgeted = started_by_a_killed_launcher(
        f"a = nbsubagents.start('scribe', 'TYPED: write bg.txt', isolation='worktree', output_schema={schema!r}, "
        "show=False)\n"
        "b = nbsubagents.start('scout', 'BUDGET: keep going', max_tool_calls=2, show=False)\n"
        "print(a.id, b.id, flush=True)").split()
    runs = project / ".pi" / "subagents" / "runs"
    assert not (runs / typed / "result.json").exists()  # the launcher died mid-run
    wait_for(lambda: (runs / typed / "result.json").exists() and (runs / budgeted / "result.json").exists(),
             what="both results")

    later = python("import json, nbsubagents\n"
                   "nbsubagents.status()\n"
                   f"a, b = nbsubagents.get_run({typed!r}), nbsubagents.get_run({budgeted!r})\n"
                   "print(json.dumps({'a': [a.status, a.data, a.files_changed, a.changes['added'], "
                   "'+from bg' in a.diff], 'b': [b.status, b.result['stopReason'], b.error, b.result['toolCalls']],"
                   " 'applied': a.apply()}))\n")
    seen = json.loads(later.stdout.splitlines()[-1])
    assert seen == {"a": ["completed", {"files": 1, "ok": True}, ["bg.txt"], 1, True],
                    "b": ["failed", "budget:tool_calls", "Stopped at 2 tool calls (max_tool_calls=2)", 3],
                    "applied": ["bg.txt"]}
    assert (project / "bg.txt").read_text() == "from bg\n"
    assert_no_workspace_left(project, worktrees)
    a, b = row_of(project, typed), row_of(project, budgeted)
    assert (a["status"], a["stop_reason"], a["files_changed"], a["lines_added"], json.loads(a["data"])) == (
        "completed", "stop", 1, 1, {"files": 1, "ok": True})
    assert (b["status"], b["stop_reason"], b["tool_calls"]) == ("failed", "budget:tool_calls", 3)


def test_a_check_of_an_isolated_run_in_a_plain_folder_scores_that_runs_changes(project, worktrees):
    """A copied folder's starting state goes with its workspace: a check runs on the folder as it is now plus the
    run's patch (not twice once applied), and says so; a patch that no longer applies is the check's error."""
    from nbsubagents._sweeps.scorers import check, score

    run = nbsubagents.run("scribe", "edit README.md: second line -> by the run", isolation="worktree", show=False)
    assert run.status == "completed" and run.record.isolation["kind"] == "copy"
    has = check("grep -q 'by the run' README.md", name="has")
    log = run.dir / "checks" / "has.log"
    assert score(run, [has]) == {"has": True}
    assert "the source folder as it is now with the run's changes.patch applied" in log.read_text()
    run.apply()
    assert score(run, [has]) == {"has": True}
    assert "already holds the run's changes.patch" in log.read_text()
    (project / "README.md").write_text("# Rewritten\nelsewhere\n")  # the run's patch applies neither way now
    score(run, [has])
    stored = json.loads((run.dir / "scores.json").read_text())
    assert "has" not in stored["scores"] and "changes could not be laid out" in stored["errors"]["has"]
    assert not list(worktrees.iterdir())  # every scratch workspace went


def test_a_check_after_git_pruned_the_runs_starting_state_uses_the_repository_as_it_is_now(project, worktrees):
    from nbsubagents._sweeps.scorers import check, score

    make_repo(project)
    run = nbsubagents.run("scribe", "write made.txt: by the run", isolation="worktree", show=False)
    has = check("grep -q 'by the run' made.txt", name="has")
    assert score(run, [has]) == {"has": True}
    assert "the run's starting state with its changes.patch applied" in (run.dir / "checks" / "has.log").read_text()
    git(project, "gc", "-q", "--prune=now")  # the starting tree was never referenced: it is gone now
    base = json.loads((run.dir / "isolation.json").read_text())["base"]
    assert subprocess.run(["git", "cat-file", "-e", base], cwd=project).returncode != 0
    assert score(run, [has]) == {"has": True}
    assert "its starting state is gone" in (run.dir / "checks" / "has.log").read_text()
    assert_no_workspace_left(project, worktrees)


def test_settlers_racing_on_a_lost_isolated_run_capture_once_and_leave_no_worktree(project, worktrees):
    """The watcher, wait(), the foreground loop and other kernels may settle one lost run at once: one of them
    captures and removes the workspace (a lock), the others find the result."""
    from nbsubagents._child import isolation
    from nbsubagents._child.artifacts import RunPaths
    from nbsubagents._lifecycle import settle

    make_repo(project)
    for attempt in range(3):
        run_dir = project / ".pi" / "subagents" / "runs" / f"20261126-000000-00000{attempt}"
        run_dir.mkdir(parents=True)
        meta = {"runId": run_dir.name, "isolation": isolation.plan(project), "createdAt": "2026-11-26T00:00:00Z"}
        (run_dir / "meta.json").write_text(json.dumps(meta))
        workdir = isolation.setup(dict(meta["isolation"]), run_dir.name, run_dir)
        (workdir / "made.txt").write_text("made before the supervisor died\n")
        start = threading.Barrier(6)
        outcomes: list[object] = []

        def settler() -> None:
            start.wait()
            try:
                outcomes.append(settle.lost(RunPaths(run_dir), load_record(run_dir)))
            except BaseException as exc:  # noqa: BLE001 - what a racing settler raised is the finding
                outcomes.append(exc)

        at_once(settler, [()] * 6)
        assert sorted(map(str, outcomes)) == ["False"] * 5 + ["True"]
        result = json.loads((run_dir / "result.json").read_text())
        assert result["changes"] == {"files": 1, "added": 1, "removed": 0} and "changesError" not in result
        assert "+made before the supervisor died" in (run_dir / "changes.patch").read_text()
        assert_no_workspace_left(project, worktrees)


def test_a_lost_run_settled_by_a_process_whose_forks_start_a_thread_is_captured_in_its_sandbox(project, worktrees):
    """A kernel that used MLflow's tracing has OpenTelemetry's fork handler, which starts a thread in every fork; a
    sandbox cannot be entered there, so the capture of a lost run runs in a process of its own."""
    from nbsubagents._child import isolation

    make_repo(project)
    run_dir = project / ".pi" / "subagents" / "runs" / "20261126-000000-000009"
    run_dir.mkdir(parents=True)
    meta = {"runId": run_dir.name, "isolation": isolation.plan(project), "createdAt": "2026-11-26T00:00:00Z"}
    (run_dir / "meta.json").write_text(json.dumps(meta))
    workdir = isolation.setup(dict(meta["isolation"]), run_dir.name, run_dir)
    (workdir / "made.txt").write_text("made before the supervisor died\n")
    # what the child left for git to run at the capture: outside the sandbox it writes the project
    subprocess.run(["git", "config", "filter.leak.clean", f"sh -c 'echo leaked > {project}/leaked.txt; cat'"],
                   cwd=workdir, check=True)
    (workdir / ".gitattributes").write_text("*.txt filter=leak\n")
    code = ("import os, sys, threading, time\nfrom pathlib import Path\n"
            "os.register_at_fork(after_in_child=lambda: threading.Thread(target=time.sleep, args=(9,), "
            "daemon=True).start())\nfrom nbsubagents._child.artifacts import RunPaths\n"
            "from nbsubagents._child.record import load\nfrom nbsubagents._lifecycle import settle\n"
            "print(settle.lost(RunPaths(Path(sys.argv[1])), load(Path(sys.argv[1]))))")
    done = subprocess.run([sys.executable, "-c", code, str(run_dir)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.stdout.strip() == "True", done.stderr
    result = json.loads((run_dir / "result.json").read_text())
    assert result["changes"] == {"files": 2, "added": 2, "removed": 0} and "changesError" not in result, result
    assert "+made before the supervisor died" in (run_dir / "changes.patch").read_text()
    assert not (project / "leaked.txt").exists()  # git ran in the sandbox
    assert_no_workspace_left(project, worktrees)


def test_workspaces_of_one_repository_set_up_and_removed_at_once_all_succeed(project, worktrees):
    """The runs of a sweep set up their workspaces at the same moment (git's own `worktree add` failed on an entry
    another add was writing, 11 of 80 concurrent adds here; a clone does not touch the repository's worktrees)."""
    from nbsubagents._child import isolation

    make_repo(project)
    for attempt in range(3):
        start = threading.Barrier(8)
        made: list[object] = []

        def make(i: int) -> None:
            run_dir = project / ".pi" / "subagents" / "runs" / f"20261128-00000{attempt}-{i:06d}"
            run_dir.mkdir(parents=True)
            iso = isolation.plan(project)
            start.wait()
            try:
                made.append((iso, isolation.setup(iso, run_dir.name, run_dir)))
            except Exception as exc:  # noqa: BLE001 - which add failed, and how, is the finding
                made.append(exc)

        at_once(make, [(i,) for i in range(8)])
        assert not [m for m in made if isinstance(m, Exception)], made
        assert all((workdir / "README.md").is_file() for _, workdir in made)  # each a checkout of the repository
        at_once(isolation.remove, [(iso,) for iso, _ in made])
        assert_no_workspace_left(project, worktrees)
