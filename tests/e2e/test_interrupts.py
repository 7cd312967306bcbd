"""Ctrl-C and SIGTERM stop a script: its foreground run is aborted, the runs after it never start, the process
ends with the shell's status, and a background run it started goes on, named on stderr.

A real script in a subprocess (real pi, the scripted model held by ``sleep:`` lines), sent a real signal once the
model has both runs' requests.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from contextlib import contextmanager

import pytest
from helpers import wait_for

import nbsubagents
from nbsubagents._child.procs import run_processes
from nbsubagents._lifecycle.handle import Run

SCRIPT = textwrap.dedent("""
    import nbsubagents

    bg = nbsubagents.start("scout", "sleep: 120\\nsay: background", name="bg", show=False)
    print(bg.id, flush=True)
    for i in range(3):
        nbsubagents.run("scout", f"sleep: 120\\nsay: foreground {i}", name=f"fg{i}")
    print("the loop ended", flush=True)
""")


def _catches_sigterm(pid: int) -> bool:
    """Whether the process has a handler for SIGTERM (as it has while it waits on runs, outside a kernel)."""
    with open(f"/proc/{pid}/status") as status:
        caught = next(line.split()[1] for line in status if line.startswith("SigCgt:"))
    return bool(int(caught, 16) >> (signal.SIGTERM - 1) & 1)


def _asked(scripted, words: str) -> bool:
    return any(words in json.dumps(request) for request in scripted.requests)


@contextmanager
def signalled(project, scripted, name: str, sig: int):
    """Script ``name`` started (its first line: its background run's id) and sent ``sig`` once its first foreground
    run and its background run are at the model: yields (the script, stdout, stderr, the background run's id); the
    script and the background run end with the test."""
    script = subprocess.Popen([sys.executable, name], cwd=project, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    bg_id = None
    try:
        bg_id = script.stdout.readline().strip()
        wait_for(lambda: _asked(scripted, "foreground 0") and _asked(scripted, "say: background"), 90,
                 "both runs' requests at the model")
        script.send_signal(sig)
        out, err = script.communicate(timeout=90)
        yield script, out, err, bg_id
    finally:
        if script.poll() is None:
            script.kill()
            script.wait()
        if bg_id:
            nbsubagents.cancel(bg_id)
            wait_for(lambda: Run(str(project / ".pi" / "subagents" / "runs" / bg_id)).done, 60, "bg to end")


@pytest.mark.parametrize("sig, status", [(signal.SIGINT, -signal.SIGINT), (signal.SIGTERM, 128 + signal.SIGTERM)])
def test_a_signal_stops_the_script_after_aborting_its_run_and_leaves_its_background_run_going(project, scripted,
                                                                                          sig, status):
    (project / "loop.py").write_text(SCRIPT)
    with signalled(project, scripted, "loop.py", sig) as (script, out, err, bg_id):
        # Python ends on an uncaught KeyboardInterrupt by SIGINT itself (the shell's 130); SIGTERM: SystemExit(143)
        assert script.returncode == status, err
        assert "the loop ended" not in out
        runs = {run.name: run for run in map(Run, (project / ".pi" / "subagents" / "runs").iterdir())}
        assert sorted(runs) == ["bg", "fg0"], err  # fg1 and fg2 never started, not even prepared
        fg0 = runs["fg0"]
        assert fg0.status == "aborted" and fg0.result is not None, err
        assert run_processes(fg0.id) == []  # its supervisor saw pi and its tools gone before it recorded the end
        assert runs["bg"].id == bg_id and runs["bg"].status == "running"
        assert f"background run goes on: {bg_id} (bg)" in err
        assert "foreground 1" not in err and not _asked(scripted, "foreground 1")


@pytest.mark.parametrize("sig, status", [(signal.SIGINT, -signal.SIGINT), (signal.SIGTERM, 128 + signal.SIGTERM)])
def test_a_signal_during_run_parallel_or_a_wait_stops_the_script_and_names_the_background_run(project, scripted,
                                                                                             sig, status):
    (project / "many.py").write_text(textwrap.dedent("""
        import nbsubagents

        bg = nbsubagents.start("scout", "sleep: 120\\nsay: background", name="bg", show=False)
        print(bg.id, flush=True)
        nbsubagents.run_parallel([{"preset": "scout", "task": f"sleep: 120\\nsay: foreground {i}", "name": f"fg{i}"}
                                  for i in range(3)], concurrency=1, show=False)
        print("run_parallel returned", flush=True)
    """))
    with signalled(project, scripted, "many.py", sig) as (script, out, err, bg_id):
        assert script.returncode == status and "run_parallel returned" not in out, err
        runs = {run.name: run for run in map(Run, (project / ".pi" / "subagents" / "runs").iterdir())}
        assert {name: run.status for name, run in runs.items()} == {
            "bg": "running", "fg0": "aborted", "fg1": "aborted", "fg2": "aborted"}, err  # the queued two: never started
        assert not _asked(scripted, "foreground 1") and not _asked(scripted, "foreground 2")
        assert f"background run goes on: {bg_id} (bg)" in err
        # a wait on the background run, stopped the same way: the run goes on, named
        (project / "wait.py").write_text(f"import nbsubagents\nprint('waiting', flush=True)\n"
                                         f"nbsubagents.get_run({bg_id!r}).wait()\n")
        waiting = subprocess.Popen([sys.executable, "wait.py"], cwd=project, stdin=subprocess.DEVNULL,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert waiting.stdout.readline() == "waiting\n"
        wait_for(lambda: _catches_sigterm(waiting.pid), 60, "the wait under way (its SIGTERM handler set)")
        waiting.send_signal(sig)
        _, err = waiting.communicate(timeout=60)
        assert waiting.returncode == status, err
        assert Run(str(runs["bg"].dir)).status == "running"


@pytest.mark.notebook
@pytest.mark.serial  # a real kernel: alone, as in a serial run
def test_in_a_kernel_an_interrupt_ends_the_cell_s_run_and_the_cell_goes_on(project, scripted):
    import queue

    from jupyter_client.manager import start_new_kernel

    km, kc = start_new_kernel(kernel_name="python3", cwd=str(project))
    try:
        cell = kc.execute('import nbsubagents\nrun = nbsubagents.run("scout", "sleep: 60\\nsay: late", show=False)\n'
                          'print("the cell goes on:", run.status)')
        wait_for(lambda: _asked(scripted, "say: late"), 90, "the run's request at the model")
        km.interrupt_kernel()
        reply = kc.get_shell_msg(timeout=90)
        while reply["parent_header"].get("msg_id") != cell:  # an earlier request's reply (kernel_info)
            reply = kc.get_shell_msg(timeout=90)
        assert reply["content"]["status"] == "ok", reply["content"]
        said = ""
        while "the cell goes on" not in said:
            try:
                msg = kc.get_iopub_msg(timeout=30)
            except queue.Empty:
                break
            if msg["msg_type"] == "stream" and msg["parent_header"].get("msg_id") == cell:
                said += msg["content"]["text"]
        assert "the cell goes on: aborted" in said
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
