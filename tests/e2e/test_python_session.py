"""The scratch Python session of a run's child (issue 57, python_session): the real pi (0.73.1 and 1.x) and Claude
Code call its tool against the scripted model; the session keeps its state between calls, is its own process (never
the caller's, never a notebook's kernel), ends with the run, runs inside an isolated run's sandbox, and its calls
are in the run's events with their outputs."""

from __future__ import annotations

import json
import os
import queue
import subprocess

import pytest
from helpers import processes_inside, wait_for
from test_harness_claude import claude  # noqa: F401 (the fixture: Claude Code pointed at the scripted model)

import nbsubagents
from nbsubagents._views.panel_state import PanelState

THREE_CALLS = ("python: import os\\nx = 41\\nos.getpid(), os.getppid()\n"
               "python: x += 1\n"
               "python: print('x is', x)\\nimport matplotlib.pyplot as plt\\nplt.plot([1, 2, 3])\\nx * 2")


def tool_events(run) -> list[dict]:
    events = [json.loads(line) for line in run.paths.events.read_text().splitlines()]
    return [e for e in events if e["type"] in ("tool_call", "tool_result")]


def session_pids(run) -> tuple[int, int]:
    """The session process's pid and its parent's, as its first call printed them."""
    first = next(e for e in tool_events(run) if e["type"] == "tool_result")
    found = first["text"].rpartition("Out[1]: (")[2].rstrip(")").split(", ")
    return int(found[0]), int(found[1])


def check_three_calls(run, harness_pid_said_by) -> None:
    assert run.status == "completed", run.error
    events = tool_events(run)
    calls = [e for e in events if e["type"] == "tool_call"]
    results = [e for e in events if e["type"] == "tool_result"]
    assert [e["name"] for e in calls] == ["python"] * 3 and [e["name"] for e in results] == ["python"] * 3
    assert calls[1]["args"] == {"code": "x += 1"}
    assert not any(e["isError"] for e in results)
    figure = run.paths.dir / "python" / "figure-1.png"
    assert results[2]["text"] == f"x is 42\nOut[3]: 84\nFigure saved: {figure}"  # state across three calls
    assert figure.read_bytes().startswith(b"\x89PNG")
    pid, parent = session_pids(run)
    assert pid != os.getpid() and parent != os.getpid()  # its own process, started by the harness
    assert parent == harness_pid_said_by(run)
    assert not os.path.exists(f"/proc/{pid}")  # ended with the run
    assert "Done. 3 steps:" in run.result["finalText"] and "x is 42" in run.result["finalText"]


def harness_pid(run) -> int:
    return json.loads((run.paths.dir / "supervisor.json").read_text())["childPid"]


@pytest.mark.pi_matrix
def test_a_pi_child_s_python_session_keeps_state_across_three_calls_and_ends_with_the_run(project):
    run = nbsubagents.run("scout", THREE_CALLS, python_session=True, show=False)
    assert run.record.tool_servers[0]["name"] == "python" and "--extension" in run.record.argv
    assert "python" in run.record.argv[run.record.argv.index("--tools") + 1].split(",")  # joins the preset's tools
    check_three_calls(run, harness_pid)
    text, _ = PanelState.of_run(run).static_record()  # the calls as the panel shows them
    assert text.count("python finished") == 3
    assert "Running python" in run.transcript


def test_without_the_option_a_child_has_no_python_tool(project, scripted):
    run = nbsubagents.run("scout", "python: x = 1", show=False)
    assert run.record.tool_servers == [] and "NBSUBAGENTS_TOOL_SERVERS" not in run.record.env
    offered = [t["function"]["name"] for r in scripted.requests for t in r.get("tools") or []]
    assert offered and "python" not in offered
    result = next(e for e in tool_events(run) if e["type"] == "tool_result")
    assert result["isError"] and "python" in result["text"]  # pi: a tool it does not have


def test_a_claude_code_child_s_python_session_is_its_mcp_server(claude, scripted):
    run = nbsubagents.run("scout", THREE_CALLS, python_session=True, harness="claude-code", show=False)
    assert "--mcp-config" in run.record.argv and "mcp__python" in run.record.argv
    check_three_calls(run, harness_pid)
    offered = {t["name"] for r in scripted.requests for t in r.get("tools") or []}
    assert "mcp__python__python" in offered
    assert "Running python" in run.transcript and "python finished" in run.transcript


def test_an_error_is_the_tool_s_failure_and_the_session_goes_on(project):
    run = nbsubagents.run("scout", "python: y = 2\npython: 1 / 0\npython: y * 21", python_session=True,
                          show=False)
    assert run.status == "completed", run.error
    results = [e for e in tool_events(run) if e["type"] == "tool_result"]
    assert [e["isError"] for e in results] == [False, True, False]
    assert "ZeroDivisionError: division by zero" in results[1]["text"] and results[2]["text"] == "Out[3]: 42"
    assert "python failed" in run.transcript and "ZeroDivisionError" in run.transcript


@pytest.mark.pi_matrix
def test_a_run_cancelled_while_its_session_works_ends_the_session(project):
    """The session's process, busy in a call (its pid written to a file first), ends with the cancelled run."""
    pid_file = project / "session.pid"
    task = f"python: import os, time\\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\\ntime.sleep(300)"
    run = nbsubagents.start("scout", task, python_session=True, show=False)
    wait_for(lambda: pid_file.exists() and pid_file.read_text(), 120, "the session at work")
    pid = int(pid_file.read_text())
    assert os.path.exists(f"/proc/{pid}")
    assert run.cancel() is True
    assert run.wait(120).status == "aborted"
    wait_for(lambda: not os.path.exists(f"/proc/{pid}"), 30, "the session's process gone")


def git(cwd, *args):
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd, check=True,
                          capture_output=True, text=True).stdout


def test_an_isolated_run_s_python_session_is_inside_its_sandbox(project, tmp_path, monkeypatch):
    monkeypatch.setenv("NBSUBAGENTS_WORKTREES", str(tmp_path / "worktrees"))
    (project / ".gitignore").write_text(".pi/subagents/runs/\n")
    git(project, "init", "-q")
    git(project, "add", "README.md", "src", ".gitignore")
    git(project, "commit", "-qm", "start")
    task = (f"python: open({str(project / 'escape.txt')!r}, 'w').write('out')\n"
            "python: import os\\nopen('inside.txt', 'w').write('in')\\nos.getcwd()\n"
            "python: import matplotlib.pyplot as plt\\nplt.plot([1])\\n0")
    run = nbsubagents.run("scout", task, python_session=True, isolation="worktree", show=False)
    assert run.status == "completed", run.error
    assert run.result["worktree"]["contained"] is True, run.result["worktree"]
    results = [e for e in tool_events(run) if e["type"] == "tool_result"]
    assert results[0]["isError"] and "Read-only file system" in results[0]["text"]
    assert not (project / "escape.txt").exists()  # the original folder: read-only for the session too
    assert results[1]["text"].startswith("Out[2]: ") and str(project) not in results[1]["text"]  # its workspace
    assert "inside.txt" in run.diff  # what it wrote there is the run's change
    assert (run.paths.dir / "python" / "figure-1.png").is_file()  # its own folder in the run's: writable


@pytest.mark.notebook
def test_a_run_from_a_kernel_never_touches_the_kernel(project, scripted):
    """Started from a real Jupyter kernel: the session sets x and y in its own interpreter; the kernel's x is the
    same after, its y never set, and the session's process is neither the kernel nor a child of it."""
    from jupyter_client.manager import start_new_kernel

    km, kc = start_new_kernel(kernel_name="python3", cwd=str(project))
    try:
        code = ("import os, nbsubagents\nx = 'mine'\n"
                "run = nbsubagents.run('scout', 'python: x = 99\\\\ny = 1\\\\nimport os\\\\nos.getpid(), os.getppid()"
                "\\npython: x += 1\\npython: x, y', python_session=True, show=False)\n"
                "print('STATUS', run.status, run.error)\nprint('KERNEL', os.getpid(), x, 'y' in dir())\n"
                "print('RESULTS', [e['text'] for e in run.events() if e['type'] == 'tool_result'])")
        said = execute(kc, code)
        assert "STATUS completed None" in said, said
        kernel_pid, x, has_y = said.split("KERNEL ", 1)[1].splitlines()[0].rsplit(" ", 2)
        assert (x, has_y) == ("mine", "False")  # its variables unchanged
        results = eval(said.split("RESULTS ", 1)[1].splitlines()[0])  # noqa: S307 (the test's own print)
        assert results[2] == "Out[3]: (100, 1)"  # the session's x and y, kept across its calls
        pid, parent = (int(n) for n in results[0].rpartition("Out[1]: (")[2].rstrip(")").split(", "))
        assert int(kernel_pid) not in (pid, parent)
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    wait_for(lambda: not processes_inside(project.parent), 30, "no process of the run left")


def execute(kc, code: str) -> str:
    """What ``code`` printed in the kernel (its stream output), once it has run."""
    msg_id = kc.execute(code)
    said = ""
    while True:
        try:
            msg = kc.get_iopub_msg(timeout=240)
        except queue.Empty:
            raise AssertionError(f"the kernel said no more: {said!r}") from None
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["msg_type"] == "stream":
            said += msg["content"]["text"]
        elif msg["msg_type"] == "error":
            raise AssertionError("\n".join(msg["content"]["traceback"]))
        elif msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            return said


def test_a_claude_code_child_reads_a_frame_s_card_cleans_it_in_its_session_and_gives_it_back(claude):  # noqa: F811
    import pandas as pd
    import pandas.testing

    frame = pd.DataFrame({"city": ["Oslo", "Lima", "Pune"], "temp": [3.5, None, 31.0]})
    task = ("read card df\n"
            "python: import os\\ndf.dropna().reset_index(drop=True).to_parquet("
            "os.path.join(os.environ['NBSUBAGENTS_OUTPUTS'], 'clean.parquet'))")
    run = nbsubagents.run("scout", task, inputs={"df": frame}, python_session=True, outputs={"clean": pd.DataFrame},
                          harness="claude-code", show=False)

    assert run.status == "completed", run.error
    card, cleaned = [e for e in tool_events(run) if e["type"] == "tool_result"]
    assert "DataFrame, 3 rows × 2 columns" in card["text"], card  # the child read the card
    pandas.testing.assert_frame_equal(run.outputs["clean"], frame.dropna().reset_index(drop=True))
