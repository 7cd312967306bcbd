"""Fault injection (issue 13): the real pi and supervisor under the failures a long-running tool meets.

Each case breaks one thing — the launcher, the supervisor or pi killed; the model answering HTTP 500 or not
listening at all; garbage and a 50 MB line on pi's stdout; a full disk; a read-only runs folder; ten cancels
at once from another process; 64 runs at once — and checks that the run says what happened, that
``result.json`` is whole, and that no process of the run is left. Every case adds a line to a report
printed at the end of the module (case, outcome, processes left).

The file builds its own project and model server instead of using the shared ``project`` fixture, and
is marked ``faults``: it runs once per test session, not once per variant of the shared fixtures.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import PI, SCOUT, processes_inside, wait_for

import nbsubagents
from nbsubagents import config, registry
from nbsubagents.child import procs
from nbsubagents.lifecycle import watcher
from nbsubagents.lifecycle import reconcile
from nbsubagents.demo.scripted import ScriptedModel, write_agent_dir

pytestmark = pytest.mark.faults

REPORT: list[tuple[str, str, list[str]]] = []


@pytest.fixture(scope="module", autouse=True)
def report(request):
    """Prints every case with its outcome and the processes it left, once the module is through."""
    yield
    lines = ["", "fault-injection report (case | outcome | processes left)"]
    lines += [f"  {case:<30} | {outcome} | {', '.join(left) if left else 'none'}" for case, outcome, left in REPORT]
    if hasattr(request.config, "workeroutput"):  # a pytest-xdist worker: its controller prints it (conftest.py)
        request.config.workeroutput["fault_report"] = "\n".join(lines)
        return
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    with capture.global_and_fixture_disabled() if capture is not None else open(os.devnull):
        print("\n".join(lines), file=sys.stderr, flush=True)


@pytest.fixture
def model():
    with ScriptedModel() as server:
        yield server


@pytest.fixture
def proj(tmp_path, monkeypatch, model):
    """A project with the scout preset, pi pointed at ``model``; cwd is set to it."""
    root = tmp_path / "project"
    (root / ".pi" / "subagents").mkdir(parents=True)
    (root / ".pi" / "subagents" / "scout.md").write_text(SCOUT)
    (root / "README.md").write_text("# Fault project\n")
    agent = write_agent_dir(tmp_path / "agent", model.url)
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(agent))
    monkeypatch.setenv("PI_OFFLINE", "1")
    monkeypatch.setenv("NBSUBAGENTS_PI", str(PI))
    monkeypatch.delenv("NBSUBAGENTS_ROOT", raising=False)
    monkeypatch.chdir(root)
    config.reset()
    yield root
    config.reset()
    watcher.stop()


def left_behind(project: Path, run_ids: list[str], settle: float = 5.0) -> list[str]:
    """Processes of these runs (by their marker) or inside the project folder, once ``settle`` seconds passed
    without any (or at its end)."""
    deadline = time.monotonic() + settle
    while True:
        left = [f"{pid} (run {rid})" for rid in run_ids for pid in procs.run_processes(rid)]
        left += processes_inside(project.parent)
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.1)


def record(case: str, project: Path, runs: list, outcome: str | None = None) -> list[str]:
    ids = [r if isinstance(r, str) else r.id for r in runs]
    left = left_behind(project, ids)
    if outcome is None:
        outcome = "; ".join(f"{r.status}: {r.error or (r.output or '')[:40]!r}" for r in runs
                            if not isinstance(r, str))
    REPORT.append((case, outcome, left))
    return left


def result_of(project: Path, run_id: str) -> dict:
    return json.loads((project / ".pi" / "subagents" / "runs" / run_id / "result.json").read_text())


def launcher(code: str, cwd: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", f"import nbsubagents, time\n{code}\ntime.sleep(600)\n"],
                            cwd=cwd, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)


def first_run_dir(project: Path, marker: str = '"tool_result"') -> Path:
    runs = project / ".pi" / "subagents" / "runs"

    def find() -> Path | None:
        for events in runs.glob("*/events.jsonl"):
            if marker in events.read_text(errors="replace"):
                return events.parent
        return None

    return wait_for(find, 60, f"a run showing {marker}")


# -- processes killed -------------------------------------------------------------------------------
def test_kill_the_launcher_of_a_foreground_run(proj):
    """The supervisor is detached: a foreground run whose kernel dies still ends and records its end."""
    proc = launcher("nbsubagents.run('scout', 'run: echo started\\nsleep: 2\\nsay: finished alone', show=False)",
                    proj)
    try:
        run_dir = first_run_dir(proj)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        proc.stdout.close()
    wait_for(lambda: (run_dir / "result.json").exists(), 60, "the result")
    result = result_of(proj, run_dir.name)
    assert result["status"] == "completed" and "finished alone" in result["finalText"]
    rows = {r["run_id"]: r for r in reconcile.status(include_completed=True, root=proj).rows}
    assert rows[run_dir.name]["status"] == "completed"
    assert record("kill the launcher", proj, [run_dir.name], f"completed: {result['finalText']!r}") == []


def test_kill_the_supervisor(proj):
    run = nbsubagents.start("scout", "run: sleep 60", show=False)
    wait_for(lambda: len(procs.run_processes(run.id)) >= 2, 60, "pi and its tool")
    os.kill(json.loads((run.dir / "supervisor.json").read_text())["pid"], signal.SIGKILL)
    run.wait(60)
    assert run.status == "failed" and run.error.startswith("interrupted: supervisor exited without a result")
    assert run.result["durationSeconds"] > 0
    assert record("kill the supervisor", proj, [run]) == []


def test_kill_pi(proj):
    run = nbsubagents.start("scout", "run: sleep 60", show=False)
    wait_for(lambda: len(procs.run_processes(run.id)) >= 2, 60, "pi and its tool")
    os.kill(json.loads((run.dir / "supervisor.json").read_text())["childPid"], signal.SIGKILL)
    run.wait(60)
    assert run.status == "failed" and run.error.startswith("pi exited with code -9")
    assert record("kill pi", proj, [run]) == []


# -- the model fails --------------------------------------------------------------------------------
def test_http_500_from_the_model(proj, model):
    model.script = [{"error": {"status": 500, "message": "upstream exploded"}}]
    run = nbsubagents.run("scout", "say: hi", show=False)
    assert run.status == "failed" and "upstream exploded" in run.error
    assert record("HTTP 500", proj, [run]) == []


def test_a_closed_port(proj, tmp_path):
    with socket.socket() as sock:  # a port that was just free: nothing listens there now
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    write_agent_dir(tmp_path / "agent", f"http://127.0.0.1:{port}/v1")
    started = time.monotonic()
    run = nbsubagents.run("scout", "say: hi", show=False)
    assert run.status == "failed" and "connection" in run.error.lower(), run.error
    assert time.monotonic() - started < 60
    assert record("closed port", proj, [run]) == []


# -- pi's output ------------------------------------------------------------------------------------
def test_garbage_and_a_50_mb_line_on_stdout(proj, tmp_path):
    """A wrapper prints garbage and one 50 MB line on pi's stdout, then becomes the real pi."""
    wrapper = tmp_path / "noisy-pi"
    wrapper.write_text("#!/bin/sh\n"
                       "printf 'not json {\\377\\376 broken utf8\\n'\n"
                       "head -c 52428800 /dev/zero | tr '\\0' x\n"
                       "printf '\\n'\n"
                       f"exec {PI} \"$@\"\n")
    wrapper.chmod(0o755)
    config.configure(pi=str(wrapper))
    run = nbsubagents.run("scout", "read README.md", show=False)
    assert run.status == "completed", run.error
    texts = [e["text"] for e in run.events() if e["type"] == "stdout_text"]
    assert texts[0] == "not json {\ufffd\ufffd broken utf8"
    assert texts[1] == "[a stdout line of 52428800 bytes was too long to parse]"
    assert (run.dir / "stdout.log").stat().st_size > 50 * 1024 * 1024
    assert "# Fault project" in run.output
    assert record("garbage + 50 MB stdout line", proj, [run]) == []


# -- the disk ---------------------------------------------------------------------------------------
def test_a_disk_that_fills_up_during_the_run(proj):
    """Lines are lost, never result.json: the supervisor holds room for it from its start."""
    from mounts import small_disk

    runs = proj / ".pi" / "subagents" / "runs"
    with small_disk(runs, "1m"):
        run = nbsubagents.start("scout", "run: echo before\nsleep: 2\nsay: after the disk filled", show=False)
        wait_for(lambda: any(e["type"] == "tool_result" for e in run.events()), 60, "the tool's result")
        filler = runs / "filler"
        fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
        try:  # fill the disk to the last byte
            while os.write(fd, b"\0" * 4096):
                pass
        except OSError:
            pass
        finally:
            os.close(fd)
        run.wait(60)
        result = json.loads((run.dir / "result.json").read_text())
        assert result["status"] in ("completed", "failed"), result
        assert result["status"] == "completed" or result["errorMessage"], result
        left = record("full disk during a run", proj, [run])
        files = sorted(p.name for p in run.dir.iterdir())
        filler.unlink()
    assert ".result-reserve" not in files and not any(f.endswith(".tmp") for f in files), files
    assert left == []


def test_a_full_disk_before_the_run_writes_nothing(proj):
    from mounts import small_disk

    runs = proj / ".pi" / "subagents" / "runs"
    with small_disk(runs, "16k"):
        (runs / "filler").write_bytes(b"\0" * 12 * 1024)
        big = "say: " + "x" * 20000  # the prompt alone does not fit
        with pytest.raises(nbsubagents.NbSubagentsError, match="Cannot write the run directory .*No space left"):
            nbsubagents.run("scout", big, show=False)
        assert sorted(p.name for p in runs.iterdir()) == ["filler"]
        REPORT.append(("full disk before a run", "NbSubagentsError: Cannot write the run directory",
                       left_behind(proj, [])))


def test_a_read_only_runs_folder(proj):
    from mounts import read_only

    runs = proj / ".pi" / "subagents" / "runs"
    runs.mkdir(parents=True)
    with read_only(runs):
        with pytest.raises(nbsubagents.NbSubagentsError, match="Cannot create the run directory") as err:
            nbsubagents.run_parallel([{"preset": "scout", "task": "say: a"}, {"preset": "scout", "task": "say: b"}],
                                     show=False)
    assert list(runs.iterdir()) == []
    REPORT.append(("read-only runs folder", f"NbSubagentsError: {str(err.value)[:60]}…", left_behind(proj, [])))


# -- many at once -----------------------------------------------------------------------------------
def test_ten_cancels_at_once_from_another_process(proj):
    run = nbsubagents.start("scout", "run: sleep 60", show=False)
    wait_for(lambda: len(procs.run_processes(run.id)) >= 2, 60, "pi and its tool")
    code = ("import sys, threading, nbsubagents\n"
            "barrier = threading.Barrier(10)\nanswers = []\n"
            "def cancel():\n"
            "    barrier.wait()\n"
            "    try:\n"
            "        answers.append(nbsubagents.cancel(sys.argv[1]))\n"
            "    except Exception as exc:\n"
            "        answers.append(repr(exc))\n"
            "threads = [threading.Thread(target=cancel) for _ in range(10)]\n"
            "[t.start() for t in threads]; [t.join() for t in threads]\n"
            "print(answers)\n")
    out = subprocess.run([sys.executable, "-c", code, run.id], capture_output=True, text=True, timeout=120,
                         stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr
    answers = eval(out.stdout)  # a list of True/False or error reprs printed by the child
    assert len(answers) == 10 and all(isinstance(a, bool) for a in answers) and any(answers), answers
    run.wait(60)
    assert run.status == "aborted" and run.error == "cancelled"
    assert [e["type"] for e in run.events()].count("run_end") == 1
    assert record("10 cancels at once", proj, [run], f"aborted; cancel() answered {answers.count(True)}x True") == []


@pytest.mark.slow
def test_sixty_four_runs_at_once(proj):
    config.configure(max_tasks=64)
    tasks = [{"preset": "scout", "task": f"say: run {i}", "name": f"r{i}"} for i in range(64)]
    started = time.monotonic()
    runs = nbsubagents.run_parallel(tasks, concurrency=64, show=False)
    took = time.monotonic() - started
    assert [r.status for r in runs] == ["completed"] * 64, [r.error for r in runs if r.status != "completed"][:3]
    assert all(f"run {i}" in r.output for i, r in enumerate(runs))
    counts = registry.counts(proj)
    assert counts["completed"] == 64 and counts["running"] == 0
    assert record("64 runs at once", proj, runs, f"64 completed in {took:.0f}s") == []


# -- experiments that cannot mix or double (issue 22, item 5) -----------------------------------------
def test_a_changed_plan_under_an_old_name_is_refused_and_replace_starts_it_afresh(proj):
    from nbsubagents.config import NbSubagentsError

    exp = nbsubagents.experiment("mix", tasks=[{"id": "a", "task": "say: alpha"}], presets="scout", show=False)
    first = [r.id for r in exp.runs()]
    assert len(first) == 1
    for changed, what in ((dict(tasks=[{"id": "a", "task": "say: beta"}]), "tasks"),
                          (dict(tasks=[{"id": "b", "task": "say: alpha"}]), "tasks"),
                          (dict(tasks=[{"id": "a", "task": "say: alpha"}], timeout=77), "run options"),
                          (dict(tasks=[{"id": "a", "task": "say: alpha"}], scorers=[nbsubagents.check("true")]),
                           "scorers")):
        with pytest.raises(NbSubagentsError, match=f"defined with other {what} .*new name.*replace=True"):
            nbsubagents.experiment("mix", presets="scout", show=False, **changed)
    assert [r.id for r in nbsubagents.get_experiment("mix").runs()] == first  # nothing ran, nothing mixed
    same = nbsubagents.experiment("mix", tasks=[{"id": "a", "task": "say: alpha"}], presets="scout", show=False)
    assert [r.id for r in same.runs()] == first  # the same definition resumes: nothing to run
    again = nbsubagents.experiment("mix", tasks=[{"id": "b", "task": "say: beta"}], presets="scout", show=False,
                                   replace=True)
    frame = again.frame()
    assert list(frame["params.task_id"]) == ["b"] and first[0] not in frame.index
    assert "beta" in again.runs()[0].output
    assert list(again.compare(by="task_id").table.index) == ["b"]  # the old cell does not mix in
    assert len(again.frame(all_runs=True)) == 1
    assert nbsubagents.experiments().set_index("name").loc["mix", "runs"] == 1
    assert (proj / ".pi" / "subagents" / "runs" / first[0] / "result.json").is_file()  # kept on disk
    assert record("changed plan, old name", proj, again.runs(), "refused (tasks, ids, options, scorers); "
                  "replace=True: 1 run of the new plan") == []


def test_one_experiment_runs_in_one_process_at_a_time(proj):
    from nbsubagents.config import NbSubagentsError

    tasks = ["sleep: 1.5\nsay: one", "sleep: 1.5\nsay: two"]
    code = (f"import nbsubagents\nnbsubagents.experiment('twice', tasks={tasks!r}, presets='scout', concurrency=1, "
            "show=False)\n")
    other = subprocess.Popen([sys.executable, "-c", code], cwd=proj, stdin=subprocess.DEVNULL)
    try:
        runs = proj / ".pi" / "subagents" / "runs"
        wait_for(lambda: runs.is_dir() and any(runs.iterdir()), 60, "the other process's first run")
        started = time.monotonic()
        with pytest.raises(NbSubagentsError, match=f"being run by process {other.pid} .*one process at a time"):
            nbsubagents.experiment("twice", tasks=tasks, presets="scout", concurrency=1, show=False)
        assert time.monotonic() - started < 5  # refused at once, not after running anything
        with pytest.raises(NbSubagentsError, match=f"process {other.pid}"):
            nbsubagents.get_experiment("twice").resume(show=False)
        assert other.wait(60) == 0
    finally:
        if other.poll() is None:
            other.kill()
            other.wait()
    exp = nbsubagents.get_experiment("twice")
    assert len(list(runs.iterdir())) == 2 and len(exp.frame()) == 2 and set(exp.frame()["status"]) == {"completed"}
    again = nbsubagents.experiment("twice", tasks=tasks, presets="scout", concurrency=1, show=False)  # free again
    assert len(list(runs.iterdir())) == 2 and len(again.frame()) == 2
    assert record("same experiment, two processes", proj, exp.runs(), "the second refused, naming the first; "
                  "2 runs, not 4") == []


def test_scorers_that_hang_or_exit_are_recorded_per_run_and_the_sweep_goes_on(proj):
    def stubborn(run):  # never returns, and swallows what it can
        while True:
            try:
                time.sleep(0.05)
            except Exception:
                pass

    def exits(run):
        raise SystemExit(3)

    def chars(run):
        return len(run.output)

    handler = signal.getsignal(signal.SIGALRM)
    started = time.monotonic()
    exp = nbsubagents.experiment("scorers", tasks=["say: one", "say: two"], presets="scout", concurrency=2,
                                 scorers=[stubborn, exits, chars], scorer_timeout=0.5, show=False)
    took = time.monotonic() - started
    runs = exp.runs()
    assert [r.status for r in runs] == ["completed", "completed"] and took < 30
    for run in runs:
        stored = json.loads((run.dir / "scores.json").read_text())
        assert stored["scores"] == {"chars": len(run.output)}
        assert stored["errors"]["stubborn"].startswith("ScorerTimeout: did not return within 0.5s")
        assert stored["errors"]["exits"] == "SystemExit: 3"
    assert signal.getsignal(signal.SIGALRM) == handler  # the process's own alarm handler is back
    exp.rescore(chars, timeout=0.5)  # rescore keeps the others' errors and runs under its limit too
    assert all(r.scores == {"chars": len(r.output)} for r in exp.runs())
    assert record("scorer hangs / SystemExit", proj, runs, f"both runs scored in {took:.1f}s; errors recorded "
                  "per run") == []


def test_score_names_are_unique_and_rescore_replaces_a_scorers_keys(proj):
    from nbsubagents.config import NbSubagentsError

    assert nbsubagents.check("pytest -q tests/a").name != nbsubagents.check("pytest -q tests/b").name
    present, absent = nbsubagents.check("test -f README.md"), nbsubagents.check("test -f missing.md")
    exp = nbsubagents.experiment("names", tasks=["say: one"], presets="scout", scorers=[present, absent], show=False)
    run = exp.runs()[0]
    assert run.scores == {present.name: True, absent.name: False}
    assert "README.md" in (run.dir / "checks" / f"{present.name}.log").read_text()
    assert "missing.md" in (run.dir / "checks" / f"{absent.name}.log").read_text()
    with pytest.raises(NbSubagentsError, match="Two scorers score under the name 'same'"):
        exp.rescore(nbsubagents.check("true", name="same"), nbsubagents.check("false", name="same"))

    def parts(run):
        return {"x": 1, "y": 2}

    exp.rescore(parts)
    assert run.scores == {present.name: True, absent.name: False, "x": 1, "y": 2}

    def parts(run):  # noqa: F811 (the same scorer, changed: it no longer says y)
        return {"x": 3}

    exp.rescore(parts)
    assert run.scores == {present.name: True, absent.name: False, "x": 3}
    assert exp.frame().loc[run.id].get("scores.y") is None
    assert record("score names, rescore", proj, [run], "distinct checks and logs; a dropped key is gone") == []


def test_a_failed_mlflow_export_is_done_again(proj, tmp_path):
    mlflow = pytest.importorskip("mlflow")
    exp = nbsubagents.experiment("export", tasks=["say: one"], presets="scout", show=False)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    blocker = tmp_path / "mlartifacts"
    blocker.write_text("a file where the artifact folder goes: the first export fails half-way\n")
    with pytest.raises(Exception):
        exp.to_mlflow(uri, artifact_location=blocker.as_uri())
    blocker.unlink()
    experiment_id = exp.to_mlflow(uri)
    assert exp.to_mlflow(uri) == experiment_id  # and a third adds nothing
    client = mlflow.MlflowClient(uri)
    found = client.search_runs([experiment_id])
    assert sorted(r.data.tags["nbsubagents.run_id"] for r in found) == sorted(r.id for r in exp.runs())
    for found_run in found:
        assert found_run.info.status == "FINISHED"
        assert {"meta.json", "result.json"} <= {a.path for a in client.list_artifacts(found_run.info.run_id)}
    assert record("failed MLflow export", proj, exp.runs(), "exported again: a finished MLflow run, none empty") == []
