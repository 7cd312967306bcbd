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


def _asked(scripted, words: str) -> bool:
    return any(words in json.dumps(request) for request in scripted.requests)


@pytest.mark.parametrize("sig, status", [(signal.SIGINT, -signal.SIGINT), (signal.SIGTERM, 128 + signal.SIGTERM)])
def test_a_signal_stops_the_script_after_aborting_its_run_and_leaves_its_background_run_going(project, scripted,
                                                                                          sig, status):
    (project / "loop.py").write_text(SCRIPT)
    script = subprocess.Popen([sys.executable, "loop.py"], cwd=project, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    bg_id = None
    try:
        bg_id = script.stdout.readline().strip()
        wait_for(lambda: _asked(scripted, "foreground 0") and _asked(scripted, "say: background"), 90,
                 "both runs' requests at the model")
        script.send_signal(sig)
        out, err = script.communicate(timeout=90)
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
    finally:
        if script.poll() is None:
            script.kill()
            script.wait()
        if bg_id:
            nbsubagents.cancel(bg_id)
            wait_for(lambda: Run(str(project / ".pi" / "subagents" / "runs" / bg_id)).done, 60, "bg to end")
