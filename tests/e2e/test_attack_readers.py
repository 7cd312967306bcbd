"""A hostile child against the readers of its run folder (issue 53 items 6 and 10): a FIFO in its inbox or in place
of its ``meta.json``, ``result.json``, ``events.jsonl`` or ``waiting.json``, a 1 GB line in its events, and a
Jupyter server rooted below the project. The supervisor still times out and cancels; ``show``, ``report``, ``runs()``
and the server's ``/record`` answer at once with what they could read and say which file they did not; a huge line
is cut, never loaded whole; the server reads nothing above its root.

The CLI and ``runs()`` run in their own processes, with a timeout: on a reader that hangs they fail, not the suite."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from faults import files_of, model, proj, record  # noqa: F401 (fixtures)
from helpers import REPO, wait_for
from jupyterlab_harness import JupyterLab

import nbsubagents

pytestmark = pytest.mark.faults

ENV = {"PYTHONPATH": str(REPO)}  # the server and the CLI import this checkout


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """One Jupyter server whose root holds every test's project."""
    with JupyterLab(tmp_path_factory.getbasetemp(), tmp_path_factory.mktemp("jupyter"), env=ENV) as server:
        yield server


def get(lab: JupyterLab, path: str) -> tuple[int, dict]:
    """The status and JSON body of a GET; a server that does not answer in 60 s fails the test."""
    try:
        with urllib.request.urlopen(lab.url(path), timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def record_of(lab: JupyterLab, project: Path, run_id: str) -> tuple[int, dict]:
    return get(lab, f"nbsubagents/record?path={project.relative_to(lab.root)}&run_id={run_id}")


def python(project: Path, *argv: str) -> str:
    """What a command of this checkout prints (stdout and stderr); a command still going after 120 s fails."""
    done = subprocess.run([sys.executable, *argv], cwd=project, env={**os.environ, **ENV}, capture_output=True,
                          timeout=120)
    return (done.stdout + done.stderr).decode(errors="replace")


def release(fifo: Path) -> None:
    """A reader blocked on ``fifo`` (the code before the fix) gets its end of file, so nothing stays hung."""
    try:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    except OSError:  # no reader waits
        pass


def quick_run(project: Path):
    run = nbsubagents.run("scout", "say: looked around\nread README.md", show=False, timeout=120)
    assert run.status == "completed", run.error
    return run


# -- the supervisor -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("end", ["cancel", "timeout"])
def test_a_fifo_in_the_inbox_neither_hangs_the_supervisor_nor_keeps_the_run_from_ending(proj, model, end):
    before = files_of(proj)
    run = nbsubagents.start("scout", "sleep: 90\nread README.md", show=False, timeout=300 if end == "cancel" else 30)
    wait_for(lambda: model.requests, 120, "pi's first request (the model holds it 90 s)")
    (run.dir / "inbox").mkdir(exist_ok=True)
    fifo = run.dir / "inbox" / f"{0:020d}-1-aaaaaa.json"  # sorts first: the next message the supervisor takes
    os.mkfifo(fifo)
    try:
        wait_for(lambda: not fifo.exists(), 60, "the supervisor to drop the FIFO from its inbox")
        if end == "cancel":
            run.cancel()
        run.wait(120)
        assert (run.status, run.result["stopReason"]) == ("aborted", "cancelled") if end == "cancel" else \
            ("failed", "timeout"), run.error
    finally:
        release(fifo)
        fifo.unlink(missing_ok=True)
    assert record(f"FIFO in the inbox, then {end}", proj, [run], before=before) == []


# -- the readers ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["meta.json", "result.json", "events.jsonl", "waiting.json"])
def test_a_fifo_in_place_of_a_runs_file_is_said_and_never_waited_on(proj, lab, tmp_path, name):
    run = quick_run(proj)
    before = files_of(proj)
    fifo = run.dir / name
    fifo.unlink(missing_ok=True)
    os.mkfifo(fifo)
    try:
        shown = python(proj, "-m", "nbsubagents", "show", run.id)
        listed = python(proj, "-c", "import nbsubagents; print(nbsubagents.runs()[['run_id', 'status']])")
        report = python(proj, "-m", "nbsubagents", "report", run.id, "--out", str(tmp_path / "report.md"))
        status, answer = record_of(lab, proj, run.id)
    finally:
        release(fifo)
    assert f"{name} is a FIFO, not a regular file: not read" in shown, shown
    assert run.id in listed, listed
    assert "report.md" in report, report
    assert f"- {name} is a FIFO, not a regular file: not read" in (tmp_path / "report.md").read_text()
    assert status == 200 and answer["unread"] == [f"{name} is a FIFO, not a regular file: not read"], answer
    assert record(f"FIFO as {name}", proj, [run], "show, runs(), report and /record answered",
                  before=before) == []


def test_a_one_gigabyte_line_in_events_is_cut_and_never_loaded_whole(proj, lab):
    run = quick_run(proj)
    before = files_of(proj)
    status, answer = record_of(lab, proj, run.id)  # the server has read a record once: its modules are loaded
    assert status == 200 and "looked around" in answer["text"], answer
    with open(run.paths.events, "r+b") as fh:  # 1 GiB of zero bytes that take no room on the disk, then a newline
        fh.truncate(fh.seek(0, os.SEEK_END) + (1 << 30))
        fh.seek(0, os.SEEK_END)
        fh.write(b"\n")
    peak = peak_rss(lab.proc.pid)
    status, answer = record_of(lab, proj, run.id)
    grown = peak_rss(lab.proc.pid) - peak
    assert status == 200 and "looked around" in answer["text"], answer
    assert "[cut] a line of 1 GiB in events.jsonl" in answer["text"], answer["text"]
    assert grown < 400 << 20, f"the server grew by {grown >> 20} MiB reading a record"  # was 2.8 GiB
    shown = python(proj, "-m", "nbsubagents", "show", run.id)
    assert "looked around" in shown, shown
    assert record("1 GiB line in events.jsonl", proj, [run], f"/record cut it; the server grew {grown >> 20} MiB",
                  before=before) == []


def peak_rss(pid: int) -> int:
    """The most memory the process ever held (``VmHWM``), in bytes."""
    line = next(ln for ln in Path(f"/proc/{pid}/status").read_text().splitlines() if ln.startswith("VmHWM:"))
    return int(line.split()[1]) * 1024


# -- the server's root ----------------------------------------------------------------------------------------------
def test_a_server_rooted_below_a_project_reads_none_of_its_runs(proj, tmp_path):
    run = quick_run(proj)
    before = files_of(proj)
    root = proj / "notebooks"  # no .pi/ here: the project is above the server's root
    root.mkdir()
    with JupyterLab(root, tmp_path / "jupyter", env=ENV) as lab:
        status, answer = get(lab, f"nbsubagents/record?run_id={run.id}")
        listed = get(lab, "nbsubagents/runs?path=")
    assert (status, answer) == (200, {"ended": False, "statuses": {run.id: "missing"}}), answer
    assert listed[1]["project"] == str(root.resolve()), listed
    shutil.rmtree(root)  # what the server made there too
    assert record("server rooted below the project", proj, [run], "its runs are not read", before=before) == []
