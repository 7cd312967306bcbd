"""The read-only view of an isolated run's original folder (child/sandbox), as root and as a user who is not."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from nbsubagents._child.isolation import readonly_view

NOBODY = 65534
REPO = Path(__file__).resolve().parents[2]
PR_SET_DUMPABLE = 4
pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="mount namespaces are Linux only")


def _tree(tmp_path: Path, owner: int | None = None) -> tuple[Path, Path]:
    root = tmp_path / "project"
    hole = root / ".pi" / "runs" / "r1"
    hole.mkdir(parents=True)
    (root / "kept.txt").write_text("original\n")
    (tmp_path / "runtime").mkdir()
    (tmp_path / "runtime" / "kernel-1.json").write_text('{"key": "the kernel\'s key"}')
    if owner is not None:
        os.chmod(tmp_path, 0o755)
        for path in (root, root / ".pi", root / ".pi" / "runs", hole, root / "kept.txt", tmp_path / "runtime",
                     tmp_path / "runtime" / "kernel-1.json"):
            os.chown(path, owner, owner)
    return root, hole


def _try_writes(root: Path, hole: Path, user: int | None = None) -> subprocess.CompletedProcess[str]:
    runtime = root.parent / "runtime"
    script = (f"echo changed > {root}/kept.txt; touch {root}/new.txt; rm -f {root}/kept.txt; "
              f"mkdir {root}/made; echo ok > {hole}/out.txt; cat {root}/kept.txt; id -u; "
              f"mount -o remount,bind,rw {root}; umount {root}; umount {runtime}; "  # as root: locked, not undone
              f"unshare -Urm sh -c 'mount -o remount,bind,rw {root} || echo refused'; "  # nor in a namespace below
              f"echo again > {root}/kept.txt; ls -A {runtime}; cat {runtime}/kernel-1.json")
    # as a supervisor does it, in a process of its own (this worker's fork handlers, such as OpenTelemetry's that
    # MLflow's tracing leaves, may start a thread in a fork, and a process of two threads cannot enter a namespace);
    # a process that changed its uid is not dumpable (its /proc files are root's) until told so, as one the user
    # started is
    code = ("import ctypes, os, sys\nfrom nbsubagents._child import sandbox\nroot, hole, runtime, user, script = "
            "sys.argv[1:]\nif user:\n    os.setgroups([]); os.setgid(int(user)); os.setuid(int(user))\n"
            f"    ctypes.CDLL(None).prctl({PR_SET_DUMPABLE}, 1, 0, 0, 0)\n"
            "sandbox.enter([root], [hole], [runtime])\nos.execvp('sh', ['sh', '-c', script])\n")
    return subprocess.run([sys.executable, "-c", code, str(root), str(hole), str(runtime), str(user or ""), script],
                          capture_output=True, text=True, timeout=30, env={**os.environ, "PYTHONPATH": str(REPO)})


def _probe(*lists: list[str]) -> str | None:
    """``sandbox.probe`` in a process of its own (see ``_try_writes``)."""
    code = ("import json, sys\nfrom nbsubagents._child import sandbox\n"
            "print(json.dumps(sandbox.probe(*json.loads(sys.argv[1]))))")
    done = subprocess.run([sys.executable, "-c", code, json.dumps(lists)], capture_output=True, text=True, timeout=30,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, check=True)
    return json.loads(done.stdout)


@pytest.mark.parametrize("who", ["this user", "a user who is not root"])
def test_the_original_folder_is_read_only_and_the_holes_are_not(tmp_path, request, who):
    if who == "a user who is not root" and os.geteuid() != 0:
        user = None  # this user is already not root
        root, hole = _tree(tmp_path)
    elif who == "a user who is not root":
        user = NOBODY  # the user-namespace path
        # pytest's own folder is root's alone, and so may be tempfile's (it keeps the first TMPDIR it saw, which
        # an earlier test in this worker may have pointed into pytest's folder): /tmp is open to every user
        shared = Path(tempfile.mkdtemp(prefix="nbsubagents-sandbox-", dir="/tmp"))
        request.addfinalizer(lambda: shutil.rmtree(shared, ignore_errors=True))
        root, hole = _tree(shared, owner=NOBODY)
    else:
        user = None
        root, hole = _tree(tmp_path)
    assert _probe([str(root)], [str(hole)], [str(root.parent / "runtime")]) is None

    proc = _try_writes(root, hole, user)

    assert proc.stderr.count("Read-only file system") == 5, proc.stderr
    assert proc.stdout.splitlines() == ["original", str(user or os.geteuid()), "refused"]
    assert "kernel-1.json: No such file" in proc.stderr  # the runtime folder is an empty one
    assert sorted(p.name for p in root.iterdir()) == [".pi", "kept.txt"]  # nothing reached the folder
    assert (root / "kept.txt").read_text() == "original\n"
    assert (hole / "out.txt").read_text() == "ok\n"  # the hole was written
    if user:
        assert (hole / "out.txt").stat().st_uid == NOBODY  # files keep their owner (uid maps to itself)


def test_probe_names_the_step_that_cannot_be_done(tmp_path):
    missing = tmp_path / "gone"
    assert _probe([str(missing)], []) == f"a view of {missing}: No such file or directory"
    root, hole = _tree(tmp_path)
    assert _probe([str(root)], [str(root / "nowhere")]).startswith(f"keeping {root}/nowhere writable: ")
    assert _probe([str(root)], [], [str(root / "nowhere")]).startswith(f"hiding {root}/nowhere: ")
    assert not (root / "nowhere").exists() and sorted(os.listdir(root)) == [".pi", "kept.txt"]


def test_a_project_holding_the_home_folder_is_not_made_read_only(tmp_path, monkeypatch):
    root, hole = _tree(tmp_path)
    monkeypatch.delenv("JUPYTER_RUNTIME_DIR", raising=False)
    iso = {"applyRoot": str(root), "kind": "copy", "path": str(tmp_path / "ws")}
    assert readonly_view(iso, hole, {"HOME": str(root / "home")}) == (
        f"the original folder {root} holds the home folder {root / 'home'}")
    assert readonly_view(iso, hole, {"HOME": str(root)}).startswith("the original folder")
    assert readonly_view({**iso, "applyRoot": "/"}, hole, {"HOME": "/root"}).startswith("the original folder / holds")
    view = readonly_view(iso, hole, {"HOME": str(tmp_path / "elsewhere"), "TMPDIR": str(tmp_path)},
                         {"child-session.jsonl": "file", "home": "folder"})
    hidden = [str(tmp_path / "elsewhere" / ".local" / "share" / "jupyter" / "runtime"),
              str(tmp_path / "elsewhere" / ".local" / "state" / "nbsubagents")]
    # the run's folder is read-only with the project; what the harness writes there is a hole (made now), and the
    # other holes are the places inside the folder, and only those
    assert view == ([str(root)], [str(hole / "child-session.jsonl"), str(hole / "home")], hidden)
    assert (hole / "child-session.jsonl").is_file() and (hole / "home").is_dir()
    outside = readonly_view(iso, tmp_path / "runs" / "r2", {"HOME": str(tmp_path / "elsewhere")})
    assert outside[0] == [str(root), str(tmp_path / "runs" / "r2")]  # a run folder outside the project: read-only
    assert all(os.path.isdir(place) for place in hidden)  # made now: one made during the run is hidden too


def test_a_process_whose_fork_handler_starts_a_thread_is_told_why_it_cannot_enter(tmp_path):
    """OpenTelemetry's batch processors (MLflow's tracing) restart their thread in every fork: the kernel then
    refuses the user namespace with a bare EINVAL, which the probe explains."""
    root, hole = _tree(tmp_path)
    code = ("import os, sys, threading, time\nfrom nbsubagents._child import sandbox\n"
            "os.register_at_fork(after_in_child=lambda: threading.Thread(target=time.sleep, args=(9,), "
            "daemon=True).start())\nprint(sandbox.probe([sys.argv[1]], [sys.argv[2]]))")
    done = subprocess.run([sys.executable, "-c", code, str(root), str(hole)], capture_output=True, text=True,
                          timeout=30, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert "this process has 2 threads (a library's fork handler may have started one)" in done.stdout, done
