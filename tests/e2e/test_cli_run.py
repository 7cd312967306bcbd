"""``nbsubagents run PRESET TASK`` as a person runs it from the shell (real pi, the scripted model), the bare
command's help and ``report`` without run ids."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest
from helpers import wait_for

import nbsubagents
from nbsubagents import _cli as cli
from nbsubagents._lifecycle.handle import Run
from nbsubagents._lifecycle.spec import options


def nbsubagents_cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "nbsubagents._cli", *args], capture_output=True, text=True,
                          timeout=120, env=os.environ.copy(), input=stdin,
                          stdin=subprocess.DEVNULL if stdin is None else None)


def _runs(project) -> list[Run]:
    return [Run(str(d)) for d in sorted((project / ".pi" / "subagents" / "runs").iterdir())]


def test_run_prints_the_answer_on_stdout_and_its_progress_on_stderr(project):
    proc = nbsubagents_cli("run", "scout", "read", "README.md")
    assert proc.returncode == 0, proc.stderr
    (run,) = _runs(project)
    assert run.status == "completed" and run.task == "read README.md"
    assert proc.stdout == run.output.rstrip("\n") + "\n"
    assert "read README.md: # Demo project" in proc.stdout
    assert "▶ scout (demo/scripted): read README.md" in proc.stderr and "✓ scout completed" in proc.stderr
    assert "▶" not in proc.stdout


def test_run_takes_its_task_from_stdin_or_a_file_and_says_the_run_as_json(project):
    proc = nbsubagents_cli("run", "scout", "-", "--json", stdin="read src/app.py\n")
    assert proc.returncode == 0, proc.stderr
    said = json.loads(proc.stdout)
    assert said["status"] == "completed" and said["task"] == "read src/app.py\n"
    assert "print('hi')" in said["output"] and said["run_id"] == _runs(project)[0].id
    (project / "task.md").write_text("ls src\n")
    proc = nbsubagents_cli("run", "scout", "--task-file", "task.md", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["task"] == "ls src\n"
    refused = nbsubagents_cli("run", "scout", "ls", "--task-file", "task.md")
    assert refused.returncode == 2 and "not both" in refused.stderr
    refused = nbsubagents_cli("run", "scout")
    assert refused.returncode == 2 and "no task" in refused.stderr


def test_the_run_flags_are_the_option_table_s_and_reach_the_run(project, scripted):
    parser = cli.parser().get_default("commands")["run"]
    flags = {s for action in parser._actions for s in action.option_strings}
    assert {opt.spelling for opt in options("call")} <= flags  # one flag per run option of the table
    (project / "src" / "notes.txt").write_text("FIRST LINE\nSECOND LINE\n")
    proc = nbsubagents_cli("run", "scout", "run: basename $PWD", "--cwd", "src", "--name", "here", "--model", "demo/scripted",
                           "--file", '[{"path": "notes.txt", "head": 1}]', "--max-turns", "5", "--json")
    assert proc.returncode == 0, proc.stderr
    said = json.loads(proc.stdout)
    assert said["name"] == "here" and said["model"] == "demo/scripted"
    assert said["output"].rstrip().endswith(": src"), said["output"]
    sent = json.dumps(scripted.requests[0])
    assert "FIRST LINE" in sent and "SECOND LINE" not in sent  # the file's first line only: its JSON form
    bad = nbsubagents_cli("run", "scout", "x", "--max-turns", "many")
    assert bad.returncode == 2 and "--max-turns: a whole number is needed, got 'many'" in bad.stderr
    bad = nbsubagents_cli("run", "nosuch", "x")
    assert bad.returncode == 1 and 'Unknown preset: "nosuch"' in bad.stderr


@pytest.mark.parametrize("task, flags, code, status, stop", [
    ("read README.md\nls src", ["--max-turns", "1"], 3, "failed", "budget:turns"),
    ("sleep: 30\nsay: late", ["--timeout", "1"], 124, "failed", "timeout"),
])
def test_the_exit_status_says_how_the_run_ended(project, task, flags, code, status, stop):
    proc = nbsubagents_cli("run", "scout", task, *flags)
    (run,) = _runs(project)
    assert (proc.returncode, run.status, run.result.get("stopReason")) == (code, status, stop), proc.stderr
    assert f"✗ scout {status}" in proc.stderr


@pytest.mark.parametrize("how, code", [("cancel", 4), (signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_cancelled_or_interrupted_run_ends_the_command_with_its_status(project, scripted, how, code):
    proc = subprocess.Popen([sys.executable, "-m", "nbsubagents._cli", "run", "scout", "sleep: 60\nsay: late"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: scripted.requests, 90, "the run's request at the model")
        (run,) = _runs(project)
        if how == "cancel":
            nbsubagents.cancel(run.id)
        else:
            proc.send_signal(how)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == code, err
    assert Run(str(run.dir)).status == "aborted"  # recorded before the command ended


def test_run_bg_prints_the_run_id_and_the_run_goes_on(project):
    proc = nbsubagents_cli("run", "scout", "sleep: 1\nread README.md", "--bg")
    assert proc.returncode == 0, proc.stderr
    (run,) = _runs(project)
    assert proc.stdout == f"{run.id}\n"
    assert wait_for(lambda: Run(str(run.dir)).status == "completed", 60, "the background run's end")


def test_bare_nbsubagents_prints_the_help(project):
    proc = nbsubagents_cli()
    assert proc.returncode == 0 and proc.stderr == ""
    assert proc.stdout.startswith("usage: nbsubagents") and "run       run a preset on a task" in proc.stdout


def test_report_without_run_ids_reports_every_run(project):
    nobody = nbsubagents_cli("report")
    assert nobody.returncode == 1 and "no runs to report in" in nobody.stderr
    first = nbsubagents.run("scout", "read README.md", show=False)
    second = nbsubagents.run("scout", "ls src", show=False)
    proc = nbsubagents_cli("report", "--format", "md")
    assert proc.returncode == 0, proc.stderr
    text = open(proc.stdout.strip()).read()
    assert first.id in text and second.id in text
