"""Isolation: real pi runs in real git worktrees (or copies), their changes captured as patches and applied."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

import nbsubagents
from nbsubagents.config import NbSubagentsError

from conftest import processes_inside


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
    from nbsubagents.ui.panels import RunPanel

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
