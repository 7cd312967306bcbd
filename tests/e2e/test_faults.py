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
from nbsubagents.lifecycle.prepare import prepare
from nbsubagents.lifecycle.spec import TaskSpec
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


# -- replies that could break the supervisor (issue 22, item 2) -------------------------------------
def replying(text: str):
    """A model that answers every request with ``text`` (the run's whole reply)."""
    return lambda body, index: {"text": text}


CATASTROPHIC = {"type": "object", "properties": {"word": {"type": "string", "pattern": "^(a+)+$"}},
                "required": ["word"]}
CATASTROPHIC_REPLY = 'The word:\n```json\n{"word": "' + "a" * 34 + '!"}\n```'


def reply_checkers(run_id: str) -> list[int]:
    """The run's processes checking its reply (``python -m nbsubagents.child.reply_check``)."""
    found = []
    for pid in procs.run_processes(run_id):
        try:
            if b"reply_check" in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(pid)
        except OSError:
            pass
    return found


@pytest.mark.parametrize("fenced", [True, False], ids=["fenced", "bare"])
def test_a_reply_nested_thousands_deep(proj, model, fenced):
    """json.loads of 5000 nested '[' raised RecursionError in the supervisor: no result, no output. Now the check
    refuses it by name and the reply is kept."""
    value = "[" * 5000 + "]" * 5000
    reply = f"The list:\n```json\n{value}\n```" if fenced else f"The list: {value}"
    model.script = replying(reply)
    run = nbsubagents.run("scout", "give the list", show=False, output_schema={"type": "array"})
    assert run.status == "failed", run.error
    assert run.result["stopReason"] == "schema" and "nested too deeply" in run.error, run.error
    assert run.output == reply and run.data is None
    assert any(e["type"] == "run_end" for e in run.events()) and "give the list" in run.transcript
    assert record(f"reply nested 5000 deep ({'fenced' if fenced else 'bare'})", proj, [run]) == []


def test_an_unresolvable_ref_is_refused_before_the_run(proj):
    """It raised at validation, after the whole run: now the run is refused before it starts, naming the ref."""
    schema = {"type": "object", "properties": {"item": {"$ref": "#/$defs/Missing"}}, "$defs": {"Item": {}}}
    with pytest.raises(nbsubagents.NbSubagentsError, match=r"the \$ref '#/\$defs/Missing' at \$\.properties\.item "
                                                          r"cannot be resolved") as err:
        nbsubagents.run("scout", "say: x", show=False, output_schema=schema)
    runs = proj / ".pi" / "subagents" / "runs"
    assert not runs.exists() or list(runs.iterdir()) == []
    REPORT.append(("unresolvable $ref", f"refused: {str(err.value)[:60]}…", left_behind(proj, [])))


def test_a_catastrophic_pattern_is_ended_by_the_runs_timeout(proj, model):
    """'^(a+)+$' against 34 a's and a '!' backtracks for hours: the supervisor spun at 90% CPU past its timeout.
    Now the check runs in a process of its own that the run's timeout ends."""
    model.script = replying(CATASTROPHIC_REPLY)
    started = time.monotonic()
    run = nbsubagents.run("scout", "say the word", show=False, output_schema=CATASTROPHIC, timeout=10)
    took = time.monotonic() - started
    assert run.status == "failed" and run.result["stopReason"] == "timeout", run.error
    assert "while the reply was checked against output_schema" in run.error, run.error
    assert run.output == CATASTROPHIC_REPLY
    assert took < 30, took
    assert record("catastrophic pattern: timeout", proj, [run], f"failed after {took:.0f}s: {run.error[:50]!r}") == []


@pytest.mark.parametrize("how", ["cancel", "SIGTERM"])
def test_a_catastrophic_pattern_is_ended_by_cancel_and_sigterm(proj, model, how):
    """cancel() answered True and changed nothing; SIGTERM did not end the supervisor. Both end the check now."""
    model.script = replying(CATASTROPHIC_REPLY)
    run = nbsubagents.start("scout", "say the word", show=False, output_schema=CATASTROPHIC)
    wait_for(lambda: reply_checkers(run.id), 60, "the reply's check")
    asked = time.monotonic()
    if how == "cancel":
        assert run.cancel() is True
    else:
        os.kill(json.loads((run.dir / "supervisor.json").read_text())["pid"], signal.SIGTERM)
    run.wait(60)
    took = time.monotonic() - asked
    assert run.status == "aborted" and run.error == "cancelled" and run.result["stopReason"] == "cancelled"
    assert run.output == CATASTROPHIC_REPLY
    assert took < 10, took
    assert record(f"catastrophic pattern: {how}", proj, [run], f"aborted {took:.1f}s after {how}") == []


def test_a_reply_with_a_lone_surrogate(proj, model):
    """JSON may carry a lone surrogate ("\\ud800"), which is no text: writing it raised in the supervisor, which
    died without a result. Now it is replaced (U+FFFD) and the run completes with the rest of its reply."""
    model.script = replying("half a pair: \ud800 and the rest of the reply")
    run = nbsubagents.run("scout", "say: x", show=False)
    assert run.status == "completed", run.error
    assert run.output == "half a pair: \ufffd and the rest of the reply"
    assert record("reply with a lone surrogate", proj, [run]) == []


def supervise(run, inject: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """The real supervisor module on ``run`` (prepared, not launched), after the Python code ``inject`` ran with the
    module as ``s``: a fault injected into one of its steps."""
    code = f"import sys\nfrom nbsubagents.child import supervisor as s\n{inject}\nsys.exit(s.main([sys.argv[1]]))\n"
    with open(run.dir / "supervisor.log", "ab") as log:
        return subprocess.run([sys.executable, "-c", code, str(run.dir)], stdout=log, stderr=log,
                              stdin=subprocess.DEVNULL, cwd=run.meta["cwd"], timeout=timeout)


def test_a_catastrophic_pattern_is_ended_by_the_checks_own_limit(proj, model):
    """A run with a long timeout: the check's own limit (30 s, shortened here to 2 s) ends it."""
    model.script = replying(CATASTROPHIC_REPLY)
    run = prepare(TaskSpec(preset="scout", task="say the word", output_schema=CATASTROPHIC, timeout=3600),
                  mode="background")
    started = time.monotonic()
    try:
        supervise(run, "s.REPLY_CHECK_SECONDS = 2", timeout=60)
    finally:
        for pid in procs.run_processes(run.id):  # before the fix: the check spun on inside the supervisor
            os.kill(pid, signal.SIGKILL)
    took = time.monotonic() - started
    result = result_of(proj, run.id)
    assert result["status"] == "failed" and result["stopReason"] == "schema", result
    assert result["errorMessage"].startswith("The reply could not be checked against output_schema within 2s: a "
                                             "`pattern` of the schema that backtracks catastrophically")
    assert result["finalText"] == CATASTROPHIC_REPLY
    assert record("catastrophic pattern: own limit", proj, [run.id],
                  f"failed after {took:.0f}s: {result['errorMessage'][:40]!r}") == []


SUPERVISOR_FAULTS = {
    # a guarded step after the child: the run fails with the step's name, keeping what the child said
    "a step after the child": ("Supervisor._reason", "The supervisor failed while naming why the run ended: "
                                                     "ZeroDivisionError"),
    # outside every guarded step: the last resort still writes a failed result with the reply
    "the supervisor's end": ("result_record", "The supervisor failed: ZeroDivisionError"),
}


@pytest.mark.parametrize("case", list(SUPERVISOR_FAULTS))
def test_a_supervisor_step_that_raises(proj, model, case):
    """A step of the supervisor's own raising (injected: the real supervisor module with one function replaced)
    left no result.json: 'interrupted: supervisor exited without a result' and run.output empty."""
    target, expected = SUPERVISOR_FAULTS[case]
    model.script = replying("the child's whole reply")
    run = prepare(TaskSpec(preset="scout", task="say: x"), mode="background")
    owner, _, name = target.rpartition(".")
    where = f"s.{owner}" if owner else "s"
    if owner:
        inject = f"{where}.{name} = lambda *a, **k: 1 / 0"
    else:  # a module-level function the end uses once: the first call raises, the last resort's succeeds
        inject = (f"real = s.{name}\ncalls = []\n"
                  f"def broken(*a, **k):\n    calls.append(1)\n    return real(*a, **k) if len(calls) > 1 else 1 / 0\n"
                  f"s.{name} = broken")
    proc = supervise(run, inject)
    result = result_of(proj, run.id)
    assert result["status"] == "failed" and result["stopReason"] == "supervisor_error", result
    assert result["errorMessage"].startswith(expected), result["errorMessage"]
    assert result["finalText"] == "the child's whole reply"
    assert "the child's whole reply" in (run.dir / "stdout.log").read_text()
    assert '"assistant_text"' in (run.dir / "events.jsonl").read_text()
    assert proc.returncode == (1 if not owner else 0)
    assert record(f"supervisor step raises ({case})", proj, [run.id],
                  f"failed: {result['errorMessage'][:50]!r}") == []
