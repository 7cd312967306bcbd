"""End to end: the real pi, supervised, against the scripted model."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime

import pytest
from helpers import interrupt_when_running

import nbsubagents
from nbsubagents._pi import locate
from nbsubagents._pi.models import ModelError
from nbsubagents._preset_files import PresetError


# Marked pi_matrix (run again against pi 1.x): the tests that read pi's event stream, errors and artifacts or
# check what reaches pi (argv, prompt, tools, env, abort); the rest check what nbsubagents decides before pi starts.


def iso(ts: str) -> datetime:
    return datetime.fromisoformat(ts.replace("Z", "+00:00"))


@pytest.mark.pi_matrix
def test_single_run_reads_a_file_and_writes_every_artifact(project, capsys):
    run = nbsubagents.run("scout", "read README.md")

    assert run.status == "completed"
    assert "# Demo project" in run.output
    names = {p.name for p in run.dir.iterdir()}
    assert {"meta.json", "events.jsonl", "result.json", "stdout.log", "stderr.log", "transcript.log",
            "child-session.jsonl", "system-prompt.md"} <= names
    assert run.dir.parent == project / ".pi" / "subagents" / "runs"

    meta = json.loads((run.dir / "meta.json").read_text())
    for key in ("runId", "mode", "taskIndex", "preset", "presetSource", "task", "cwd", "requestedModel",
                "resolvedModel", "tools", "systemPromptPath", "sessionPath", "argv", "createdAt", "schemaVersion"):
        assert key in meta, key
    assert meta["mode"] == "single" and meta["preset"] == "scout" and meta["resolvedModel"] == "demo/scripted"
    assert meta["presetSource"].endswith("scout.md") and meta["tools"] == ["read", "ls", "bash"]

    result = json.loads((run.dir / "result.json").read_text())
    assert result["status"] == "completed" and result["exitCode"] == 0 and result["stopReason"] == "stop"
    assert result["toolCalls"] == 1 and result["turns"] == 2
    assert result["usage"]["input"] > 0 and result["usage"]["output"] > 0 and result["usage"]["cost"] > 0
    assert iso(result["startedAt"]) <= iso(result["endedAt"])

    kinds = [e["type"] for e in run.events()]
    assert kinds[0] == "run_start" and kinds[-1] == "run_end"
    assert [e["seq"] for e in run.events()] == list(range(1, len(kinds) + 1))
    call = next(e for e in run.events() if e["type"] == "tool_call")
    assert call["name"] == "read" and call["args"] == {"path": "README.md"}
    assert "Reading README.md" in run.transcript and "Finished reading README.md" in run.transcript
    assert "Agent:" not in run.transcript
    assert kinds[1] == "session" and run.events()[1]["cwd"] == str(project)
    assert json.loads((run.dir / "stdout.log").read_bytes().splitlines()[0])["type"] == "response"  # pi's, raw
    printed = capsys.readouterr()
    assert "Reading README.md" in printed.err and "scout completed" in printed.err  # progress: stderr
    assert printed.out == ""


def test_three_parallel_runs_with_concurrency_two_never_overlap_three(project):
    tasks = [{"preset": "scout", "task": f"sleep: 0.6\nrun: echo task{i}", "name": f"t{i}"} for i in range(3)]
    runs = nbsubagents.run_parallel(tasks, concurrency=2, show=False)

    assert [r.status for r in runs] == ["completed"] * 3
    assert [r.name for r in runs] == ["t0", "t1", "t2"]
    assert all(f"task{i}" in r.output for i, r in enumerate(runs))
    spans = [(iso(r.result["startedAt"]), iso(r.result["endedAt"])) for r in runs]
    moments = sorted({s for s, _ in spans})
    most = max(sum(1 for s, e in spans if s <= m < e) for m in moments)
    assert most == 2  # two ran together, never three


@pytest.mark.pi_matrix
def test_provider_error_is_a_failed_run_with_pi_message(project):
    run = nbsubagents.run("scout", "fail: 500 upstream exploded", show=False)
    assert run.status == "failed"
    assert run.result["exitCode"] == 0  # pi exits 0: the failure is only in the stream
    assert "upstream exploded" in run.error


def test_pi_missing_is_a_clear_error_for_run_and_a_failed_task_in_parallel(project, monkeypatch):
    monkeypatch.setenv("NBSUBAGENTS_PI", str(project / "no-such-pi"))
    with pytest.raises(nbsubagents.NbSubagentsError, match="pi not found at .*no-such-pi"):
        nbsubagents.run("scout", "read README.md", show=False)
    monkeypatch.delenv("NBSUBAGENTS_PI")
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setattr(locate, "PACKAGE_ROOT", project)
    (run,) = nbsubagents.run_parallel([{"preset": "scout", "task": "read README.md"}], show=False)
    assert run.status == "failed"
    assert "npm install @mariozechner/pi-coding-agent@0.73.1" in run.error


def test_supervisor_records_a_pi_that_cannot_start_as_failed(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "meta.json").write_text(json.dumps({"runId": f"r1-{tmp_path.name}", "argv": [str(tmp_path / "gone" / "pi"), "x"],
                                                   "cwd": str(tmp_path)}))
    subprocess.run([sys.executable, "-m", "nbsubagents._child.supervisor", str(run_dir)], check=True, timeout=30)
    result = json.loads((run_dir / "result.json").read_text())
    assert result["status"] == "failed" and "does not exist" in result["errorMessage"]


def test_one_unknown_preset_fails_that_task_while_others_run(project):
    runs = nbsubagents.run_parallel([{"preset": "scout", "task": "read README.md"},
                                     {"preset": "ghost", "task": "read README.md"}], show=False)
    assert runs[0].status == "completed"
    assert runs[1].status == "failed"
    assert runs[1].error == 'Unknown preset: "ghost". Available presets: nomodel, scout, scribe'
    assert (runs[1].dir / "result.json").exists()


def test_unknown_preset_in_a_single_run_raises_naming_the_available_ones(project):
    with pytest.raises(PresetError, match='Unknown preset: "scot". Available presets: nomodel, scout, scribe'):
        nbsubagents.run("scot", "read README.md")


@pytest.mark.pi_matrix
def test_model_resolution_call_over_preset_and_clear_errors(project):
    with pytest.raises(ModelError, match='No model for preset "nomodel".*model='):
        nbsubagents.run("nomodel", "read README.md", show=False)
    with pytest.raises(ModelError, match=r'Unknown model "demo/gpt-9" \(from the call.s model=\)\. Available models \(1\): demo/scripted'):
        nbsubagents.run("scout", "read README.md", model="demo/gpt-9", show=False)
    run = nbsubagents.run("nomodel", "say: hi", model="demo/scripted", show=False)
    assert run.status == "completed" and run.record.requested_model == "demo/scripted"


@pytest.mark.pi_matrix
def test_preset_prompt_and_tools_reach_pi(project, scripted):
    run = nbsubagents.run("scout", "read README.md", show=False)
    assert run.status == "completed"
    first = scripted.requests[0]
    system = " ".join(str(m.get("content")) for m in first["messages"] if m["role"] == "system")
    assert "MARKER-SCOUT-PROMPT" in system
    assert sorted(t["function"]["name"] for t in first["tools"]) == ["bash", "ls", "read"]
    assert (run.dir / "system-prompt.md").read_text().strip().endswith("MARKER-SCOUT-PROMPT")


@pytest.mark.pi_matrix
def test_child_sees_pi_subagents_child(project):
    run = nbsubagents.run("scout", "run: echo child=$PI_SUBAGENTS_CHILD", show=False)
    assert "child=1" in run.output


@pytest.mark.pi_matrix
def test_interrupting_a_foreground_run_aborts_it_and_leaves_no_process(project):
    with interrupt_when_running(project, '"tool_call"') as interrupt:
        run = nbsubagents.run("scout", "run: sleep 60", show=False)
    assert interrupt.fired.is_set()
    assert run.status == "aborted"
    assert run.result["durationSeconds"] < 10


def test_bad_inputs_raise_before_anything_starts(project):
    runs_dir = project / ".pi" / "subagents" / "runs"
    with pytest.raises(nbsubagents.NbSubagentsError, match="task is empty"):
        nbsubagents.run("scout", "   ")
    with pytest.raises(nbsubagents.NbSubagentsError, match="must be a string"):
        nbsubagents.run("scout", 42)  # type: ignore[arg-type]
    with pytest.raises(nbsubagents.NbSubagentsError, match="does not exist"):
        nbsubagents.run("scout", "x", cwd=project / "nope")
    with pytest.raises(nbsubagents.NbSubagentsError, match="concurrency"):
        nbsubagents.run_parallel([{"preset": "scout", "task": "x"}], concurrency=0)
    with pytest.raises(nbsubagents.NbSubagentsError, match="Too many tasks: 17"):
        nbsubagents.run_parallel([{"preset": "scout", "task": "x"}] * 17)
    with pytest.raises(nbsubagents.NbSubagentsError, match="timeout"):
        nbsubagents.run("scout", "x", timeout=0)
    assert not runs_dir.exists() or not any(runs_dir.iterdir())


@pytest.mark.parametrize("module", ["nbsubagents", "_lifecycle.handle", "_child.supervisor", "_api", "_registry",
                                    "_lifecycle.watcher", "_registry.query", "_lifecycle.inspection", "_ui.browser",
                                    "_ui.panels", "_ui.display", "_cli", "demo", "_views.panel_state", "_views.reports", "_ui.attach",
                                    "_lifecycle.reconcile", "_lifecycle.settle", "_lifecycle.spec", "_lifecycle.launch",
                                    "_style", "_ui.statusbar", "_views.timeline", "_ui.kernel", "_registry.store",
                                    "_registry.status"])
def test_import_stays_light(module):
    """Every module but the magics imports no IPython, ipywidgets or pandas until a function needs them."""
    name = module if module == "nbsubagents" else f"nbsubagents.{module}"
    code = (f"import sys, {name};"
            "heavy = {'IPython', 'ipywidgets', 'pandas'} & set(sys.modules); print(sorted(heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def registry_rows(project) -> list:
    import sqlite3

    db = project / ".pi" / "subagents" / "registry.sqlite"
    if not db.exists():
        return []
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT run_id, status FROM runs").fetchall()


def test_run_parallel_checks_every_task_before_it_writes_anything(project):
    """Issue 13, item 2: a bad key in task 2 used to leave task 1's directory and a 'queued' row behind."""
    with pytest.raises(nbsubagents.NbSubagentsError, match=r"Task 1: unknown key\(s\) promt"):
        nbsubagents.run_parallel([{"preset": "scout", "task": "say: one"},
                                  {"preset": "scout", "promt": "say: two"}], show=False)
    runs = project / ".pi" / "subagents" / "runs"
    assert not runs.exists() or list(runs.iterdir()) == []
    assert registry_rows(project) == []
    assert nbsubagents.status().running == 0


def test_a_read_only_runs_folder_is_the_documented_error_for_every_call(project):
    from mounts import read_only

    runs = project / ".pi" / "subagents" / "runs"
    runs.mkdir(parents=True)
    with read_only(runs):
        for call in (lambda: nbsubagents.run("scout", "say: hi", show=False),
                     lambda: nbsubagents.start("scout", "say: hi", show=False),
                     lambda: nbsubagents.run_parallel([{"preset": "scout", "task": "say: hi"},
                                                       {"preset": "nosuch", "task": "say: hi"}], show=False)):
            with pytest.raises(nbsubagents.NbSubagentsError, match="Cannot create the run directory .*runs/"):
                call()
    assert list(runs.iterdir()) == []
    assert registry_rows(project) == []
