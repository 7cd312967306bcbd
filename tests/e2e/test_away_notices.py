"""Issue 56, item 6: a "completed while away" notice appears in the notebook that started the run, never in
another notebook's cell. Real kernels (jupyter_client) on the real pi and the scripted model."""

from __future__ import annotations

import os
import queue
import signal
import time

import pytest
from helpers import wait_for
from jupyter_client.manager import start_new_kernel

from nbsubagents import _registry as registry


class Kernel:
    """A real kernel of one notebook (``JPY_SESSION_NAME``, as a Jupyter server sets it) in the project."""

    def __init__(self, project, notebook: str) -> None:
        env = {**os.environ, "JPY_SESSION_NAME": str(project / notebook), "NBSUBAGENTS_DISPLAY": "text"}
        self.km, self.kc = start_new_kernel(kernel_name="python3", cwd=str(project), env=env)
        self.streams: list[str] = []  # every stream text it sent, whichever cell it was for

    def run(self, code: str) -> str:
        """Execute a cell; what it printed (its own stream messages) once it is idle again."""
        msg_id = self.kc.execute(code)
        mine: list[str] = []
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            try:
                msg = self.kc.get_iopub_msg(timeout=5)
            except queue.Empty:
                continue
            parent = msg["parent_header"].get("msg_id")
            if msg["msg_type"] == "stream":
                self.streams.append(msg["content"]["text"])
                if parent == msg_id:
                    mine.append(msg["content"]["text"])
            elif msg["msg_type"] == "error" and parent == msg_id:
                raise AssertionError("\n".join(msg["content"]["traceback"]))
            elif (msg["msg_type"] == "status" and parent == msg_id
                  and msg["content"]["execution_state"] == "idle"):
                return "".join(mine)
        raise AssertionError(f"the cell did not finish: {code!r}")

    def kill(self) -> None:
        os.kill(self.km.provisioner.process.pid, signal.SIGKILL)
        wait_for(lambda: not self.km.is_alive(), what="the killed kernel gone")

    def close(self) -> None:
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)


@pytest.mark.notebook
@pytest.mark.serial  # three real kernels and a run taken over by another kernel's watcher
def test_a_run_of_a_dead_kernel_is_announced_in_its_notebook_not_in_another_ones(project):
    gate = project / "go"
    a = Kernel(project, "a.ipynb")
    try:
        ids = a.run("import nbsubagents\n"
                    "early = nbsubagents.start('scout', 'say: early done', name='early', show=False)\n"
                    "late = nbsubagents.start('scout', 'run: while [ ! -f go ]; do sleep 0.1; done\\nsay: late done',"
                    " name='late', show=False)\n"
                    "print(early.id, late.id)").split()
        early, late = ids
        runs = project / ".pi" / "subagents" / "runs"
        wait_for(lambda: (runs / late / "supervisor.json").exists(), what="the late run's supervisor")
        a.kill()  # the notebook's kernel dies; its runs go on
    finally:
        a.close()
    wait_for(lambda: (runs / early / "result.json").exists(), what="the early run's end")

    b = Kernel(project, "b.ipynb")
    try:
        # B's first run: reconciles (takes over the late run, whose owner is gone) and looks for news.
        b.run("import nbsubagents, os\nprint('B', os.getpid(), nbsubagents.run('scout', 'say: b', show=False).status)")
        with registry.connect(registry.db_path(project)) as conn:
            owner = conn.execute("SELECT owner_pid FROM runs WHERE run_id = ?", (late,)).fetchone()[0]
        assert not (runs / late / "result.json").exists()  # the late run was live when B looked
        assert owner == b.km.provisioner.process.pid  # B's watcher follows it now
        gate.write_text("")
        wait_for(lambda: (runs / late / "result.json").exists(), what="the late run's end")
        b.run("import time\nfrom nbsubagents._lifecycle import watcher\n"
              "while watcher.watching(): time.sleep(0.1)\nprint('B idle')")
        said = "".join(b.streams)
        assert "B idle" in said and "B " in said
        assert early not in said and late not in said and "background run" not in said, said
    finally:
        b.close()

    again = Kernel(project, "a.ipynb")  # the notebook reopened: a new kernel of it
    try:
        out = again.run("import nbsubagents\nprint('A2', nbsubagents.run('scout', 'say: a2', show=False).status)")
    finally:
        again.close()
    away = [line for line in out.splitlines() if "completed while away" in line]
    assert sorted(line.split()[4] for line in away) == sorted(ids), out
    assert "A2 completed" in out
