"""The process launcher: a supervisor that nothing in the run's folder can break, and a wait that wakes the
foreground loop when any supervisor it started exits."""

from __future__ import annotations

import json
import subprocess
import sys

from nbsubagents._child.artifacts import RunPaths, read_json
from nbsubagents._lifecycle.process import spawn_supervisor, wait_any


def test_a_module_of_the_runs_folder_does_not_shadow_what_the_supervisor_imports(tmp_path):
    # The supervisor runs in the run's cwd (the user's project); a project module named like one of the standard
    # library's must not be imported in its place.
    project = tmp_path / "project"
    project.mkdir()
    (project / "selectors.py").write_text("raise SystemExit('the project selectors.py was imported')\n")
    run_dir = tmp_path / "20260101-000000-abcdef"
    run_dir.mkdir()
    meta = {"runId": run_dir.name, "argv": ["/bin/true"], "cwd": str(project), "timeout": 60}
    (run_dir / "meta.json").write_text(json.dumps(meta))
    proc = spawn_supervisor(run_dir, str(project))
    assert proc.wait() == 0, (run_dir / "supervisor.log").read_text()
    assert read_json(RunPaths(run_dir).result)["exitCode"] == 0


def test_wait_any_returns_when_a_later_process_exits_while_the_first_goes_on():
    # The first one runs until its stdin closes; the second ends at once. Waiting on the first alone (what the
    # loop did before) would sit out the whole hour (pytest-timeout fails it long before).
    first = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    second = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        wait_any([first, second], 3600)
        assert second.poll() == 0
        assert first.poll() is None
    finally:
        first.stdin.close()
        first.wait()
        second.wait()


def test_wait_any_with_nothing_started_returns():
    wait_any([], 3600)
