"""Guards, resume, file context and bad input (issue 7): the real pi against the scripted model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
from helpers import interrupt_when_running

import nbsubagents
from nbsubagents import _config as config
from nbsubagents._lifecycle.handle import launch
from nbsubagents._lifecycle.prepare import prepare
from nbsubagents._lifecycle.spec import TaskSpec


def user_text(request: dict) -> str:
    users = [m for m in request["messages"] if m["role"] == "user"]
    content = users[-1]["content"]
    return content if isinstance(content, str) else "".join(p.get("text", "") for p in content)


@pytest.mark.serial
@pytest.mark.pi_matrix
def test_timeout_is_extended_while_the_child_keeps_calling_tools(project):
    # The first tool call must come before the timeout (a child without one is not extended): 8 s leave room for
    # pi's start on a machine loaded beyond 20 (3 s did not, once); the calls' sleeps alone then run past it, and
    # any call in the 30 s before it counts as activity, however slowly a loaded machine runs them.
    config.configure(extend_timeout_debounce=30)
    task = "\n".join(f"run: sleep 1.2; echo step{i}" for i in range(10))
    run = nbsubagents.run("scout", task, timeout=8, show=False)
    assert run.status == "completed", run.error
    assert run.result["durationSeconds"] > 12 and run.result["toolCalls"] == 10


@pytest.mark.serial
@pytest.mark.pi_matrix
def test_timeout_kills_an_idle_child_with_the_spec_message(project):
    config.configure(extend_timeout_debounce=0.5)
    run = nbsubagents.run("scout", "run: sleep 30", timeout=1, show=False)
    assert run.status == "failed"
    assert run.error == "Timed out after 1s. Consider resuming with a longer timeout."
    assert run.result["durationSeconds"] < 10


@pytest.mark.pi_matrix
def test_identical_consecutive_tool_calls_are_a_loop(project):
    config.configure(looping_tool_count=3)
    run = nbsubagents.run("scout", "run: echo same\nrun: echo same\nrun: echo same\nrun: echo same", show=False)
    assert run.status == "failed"
    assert run.error == "Loop detected: sub-agent is repeating the same tool calls"


def test_loop_detection_is_off_at_zero(project):
    config.configure(looping_tool_count=0)
    run = nbsubagents.run("scout", "\n".join(["run: echo same"] * 6), show=False)
    assert run.status == "completed" and run.result["toolCalls"] == 6


def test_project_settings_override_global_ones(project):
    agent = config.agent_dir()
    data = json.loads((agent / "settings.json").read_text())
    data["subagents"] = {"looping_tool_count": 2, "timeout": 99, "concurrency": 3}
    (agent / "settings.json").write_text(json.dumps(data))
    (project / ".pi" / "settings.json").write_text(json.dumps({"subagents": {"loopingToolCount": 4}}))
    now = config.current()
    assert (now.looping_tool_count, now.timeout, now.concurrency) == (4, 99, 3)
    config.configure(concurrency=1)
    assert config.current().concurrency == 1
    run = prepare(TaskSpec("scout", "say: hi"), mode="single")
    assert run.record.looping_tool_count == 4 and run.record.timeout == 99


@pytest.mark.parametrize("text, message", [
    ('{"subagents": {"timeout": 0}}', '"subagents.timeout" must be a number of seconds > 0, got 0'),
    ('{"subagents": {"concurrency": "four"}}', '"subagents.concurrency" must be a whole number from 1 to 64'),
    ('{"subagents": [1]}', '"subagents" must be an object'),
    ('{"subagents": {\n  "timeout": 5,,\n}}', "malformed JSON at line 2"),
])
def test_malformed_settings_are_clear_errors_naming_the_file(project, text, message):
    (project / ".pi" / "settings.json").write_text(text)
    with pytest.raises(nbsubagents.NbSubagentsError) as err:
        nbsubagents.run("scout", "say: hi", show=False)
    assert message in str(err.value) and str(project / ".pi" / "settings.json") in str(err.value)


@pytest.mark.pi_matrix
def test_resume_continues_the_pi_session_so_the_model_sees_its_history(project, scripted):
    first = nbsubagents.run("scout", "say: remember the word PELICAN", show=False)
    assert first.status == "completed"
    second = nbsubagents.run("scout", "read README.md", resume=first.id[:-2], show=False)
    assert second.status == "completed" and second.record.resumed_from == first.id
    history = json.dumps(scripted.requests[-1]["messages"])
    assert "remember the word PELICAN" in history  # the earlier turn, replayed by pi from the session
    assert user_text(scripted.requests[-1]) == "read README.md"
    assert (first.dir / "child-session.jsonl").read_text() != (second.dir / "child-session.jsonl").read_text()


@pytest.mark.pi_matrix
def test_resume_without_a_session_file_prepends_the_transcript(project, scripted):
    # stopped once the model has the request (it then waits 30 s): an abort at turn_start could reach pi before it
    # asked the model, with no reply yet to end and nothing to write (seen with 0.73.1 under load)
    with interrupt_when_running(project, lambda: scripted.requests):
        first = nbsubagents.run("scout", "sleep: 30\nread README.md", show=False)
    assert first.status == "aborted"
    # Stopped by an RPC abort, pi writes its session (the prompt, the aborted reply): a resume continues it natively
    assert (first.dir / "child-session.jsonl").exists()
    second = nbsubagents.run("scout", "say: carrying on", resume=first.id, show=False)
    assert second.status == "completed"
    assert "sleep: 30" in json.dumps(scripted.requests[-1]["messages"])
    assert user_text(scripted.requests[-1]) == "say: carrying on"
    (first.dir / "child-session.jsonl").unlink()  # as a child killed before it wrote one leaves it
    third = nbsubagents.run("scout", "say: carrying on", resume=first.id, show=False)
    prompt = user_text(scripted.requests[-1])
    assert prompt.startswith("Previously:\n\n") and first.id in prompt
    assert prompt.endswith("Instructions:\n\nsay: carrying on")
    assert third.status == "completed"


def test_resuming_a_running_run_is_an_error(project):
    running = prepare(TaskSpec("scout", "run: sleep 30"), mode="single")
    launch(running)
    try:
        with pytest.raises(nbsubagents.NbSubagentsError, match="is still running"):
            nbsubagents.run("scout", "say: x", resume=running.id, show=False)
    finally:
        running.cancel()
        running.wait(30)
    assert running.status == "aborted"


def test_files_are_prepended_with_headers_and_placeholders(project, scripted):
    (project / "big.txt").write_text("x" * (1024 * 1024 + 10))
    (project / "lines.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    files = ["README.md", {"path": "lines.txt", "start": 2, "end": 3}, {"path": "lines.txt", "tail": 1},
             "missing.txt", "big.txt", "src"]
    run = nbsubagents.run("scout", "say: read them", files=files, show=False)
    assert run.status == "completed"
    assert user_text(scripted.requests[0]) == textwrap.dedent("""\
        === README.md ===
        # Demo project
        second line
        === lines.txt ===
        line 2
        line 3
        === lines.txt ===
        line 10
        === missing.txt ===
        [file not found: missing.txt]
        === big.txt ===
        [file too large: big.txt (1025KB, limit 1024KB)]
        === src ===
        [could not read file: src]
        say: read them""")


@pytest.mark.pi_matrix
def test_a_task_starting_with_a_dash_reaches_the_child_unchanged(project, scripted):
    run = nbsubagents.run("scout", "--help me: say: hi {x} $HOME", show=False)
    assert run.status == "completed"
    assert user_text(scripted.requests[0]) == "--help me: say: hi {x} $HOME"
    assert "--help me" not in " ".join(run.record.argv)


@pytest.mark.pi_matrix
def test_exclude_tools_resolves_against_pis_tool_names(project, scripted):
    (project / ".pi" / "subagents" / "nobash.md").write_text(
        "---\nname: nobash\ndescription: d\nmodel: demo/scripted\nexcludeTools: bash, write\n---\n")
    run = nbsubagents.run("nobash", "say: hi", show=False)
    assert run.status == "completed"
    assert sorted(t["function"]["name"] for t in scripted.requests[0]["tools"]) == ["edit", "find", "grep", "ls", "read"]


@pytest.mark.pi_matrix
def test_claude_code_agent_file_loads_and_maps_tools(project, scripted):
    (project / ".pi" / "subagents" / "claude.md").write_text(
        "---\nname: claude-reviewer\ndescription: Reviews code\ntools: Read, Grep, Glob, WebFetch\n"
        "model: inherit\n---\nYou review code.\n")
    run = nbsubagents.run("claude-reviewer", "say: ok", model="demo/scripted", show=False)
    assert run.status == "completed"
    assert sorted(t["function"]["name"] for t in scripted.requests[0]["tools"]) == ["find", "grep", "read"]
    assert run.record.ignored_tools == ["WebFetch"]


@pytest.mark.parametrize("cwd, message", [
    ("../project", "contains '..'"),
    ("README.md", "is not a directory"),
    ("nowhere", "does not exist"),
])
def test_bad_cwd_is_a_clear_error(project, cwd, message):
    with pytest.raises(nbsubagents.NbSubagentsError, match=message):
        nbsubagents.run("scout", "say: hi", cwd=cwd, show=False)


def test_unwritable_run_directory_is_a_clear_error_before_spawning(project):
    (project / ".pi" / "subagents" / "runs").write_text("a file where the runs folder should be")
    with pytest.raises(nbsubagents.NbSubagentsError, match="Cannot create the run directory"):
        nbsubagents.run("scout", "say: hi", show=False)


def _supervise(tmp_path, child_code: str) -> tuple[dict, list[dict], float]:
    """Runs the supervisor over a stand-in child (for what pi itself never prints).

    Returns the result, the events and the peak memory (MiB) of the supervisor and that child,
    measured by a fresh Python process that has no other children.
    """
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    # A run id of its own: a supervisor ends every process marked with its id, and under pytest-xdist another
    # worker may supervise a stand-in child at the same moment.
    run_id = f"r-{os.getpid()}-{tmp_path.name}"
    (run_dir / "meta.json").write_text(json.dumps({"runId": run_id, "argv": [sys.executable, "-c", child_code],
                                                   "cwd": str(tmp_path)}))
    measure = ("import resource, subprocess, sys\n"
               "subprocess.run([sys.executable, '-m', 'nbsubagents._child.supervisor', sys.argv[1]], check=True)\n"
               "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    out = subprocess.run([sys.executable, "-c", measure, str(run_dir)], check=True, timeout=120,
                         capture_output=True, text=True).stdout
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    return json.loads((run_dir / "result.json").read_text()), events, int(out) / 1024


def test_non_json_and_invalid_utf8_lines_are_kept_and_shown_as_text(tmp_path):
    code = r"""import sys; sys.stdout.buffer.write(b'not json at all\n\xff\xfe broken utf8\n{"type":"agent_start"}\n')"""
    result, events, _ = _supervise(tmp_path, code)
    texts = [e["text"] for e in events if e["type"] == "stdout_text"]
    assert texts == ["not json at all", "\ufffd\ufffd broken utf8"]
    assert (tmp_path / "run" / "stdout.log").read_bytes().startswith(b"not json at all\n\xff\xfe")
    assert result["status"] == "failed" and "without a reply" in result["errorMessage"]


def test_a_child_printing_hundreds_of_megabytes_keeps_memory_bounded(tmp_path):
    code = ("import sys\nw = sys.stdout.buffer.write\nblock = b'x' * (1 << 20)\n"
            "for _ in range(300): w(block)\nw(b'\\n')\n"
            "line = b'{\"type\":\"turn_start\"}\\n' * 4096\nfor _ in range(12): w(line)\n")
    result, events, peak_mib = _supervise(tmp_path, code)
    assert (tmp_path / "run" / "stdout.log").stat().st_size > 300 * (1 << 20)
    assert any("too long to parse" in e.get("text", "") for e in events)
    assert sum(e["type"] == "turn_start" for e in events) == 12 * 4096
    assert peak_mib < 100, f"supervisor peaked at {peak_mib:.0f} MiB after 300 MiB of output"


def test_a_line_longer_than_a_read_is_parsed_whole_and_so_is_a_last_line_without_its_newline(tmp_path):
    code = ("import sys, time\nw = sys.stdout.buffer.write\n"
            "w(b'{\"type\":\"turn_start\",\"pad\":\"' + b'x' * 3_000_000 + b'\"}\\n')\n"  # ~46 reads of 64 KiB
            "w(b'{\"type\":\"turn_start\"}\\n{\"type\":\"turn_')\nsys.stdout.flush()\ntime.sleep(0.2)\n"
            "w(b'start\"}')\n")  # a line cut between two writes, and no newline at the end
    _, events, _ = _supervise(tmp_path, code)
    starts = [e for e in events if e["type"] == "turn_start"]
    assert len(starts) == 3, [e["type"] for e in events]
    assert not any("too long" in e.get("text", "") for e in events)


def test_an_api_key_from_the_environment_never_reaches_argv_meta_logs_or_registry(project, scripted, monkeypatch):
    secret = "sk-nbsubagents-test-4f9a1c"
    agent = config.agent_dir()
    models = json.loads((agent / "models.json").read_text())
    models["providers"]["demo"]["apiKey"] = "NBSUBAGENTS_TEST_KEY"  # pi reads a key named by an env var
    (agent / "models.json").write_text(json.dumps(models))
    monkeypatch.setenv("NBSUBAGENTS_TEST_KEY", secret)
    run = nbsubagents.run("scout", "read README.md", show=False)
    assert run.status == "completed"
    assert secret not in " ".join(run.record.argv)
    for path in [*run.dir.iterdir(), project / ".pi" / "subagents" / "registry.sqlite"]:
        assert secret.encode() not in path.read_bytes(), path.name


def test_timeout_is_not_extended_for_a_child_that_makes_no_tool_calls(project):
    """Issue 13, item 6: the extension is for a child still calling tools, not for one that never did."""
    run = nbsubagents.run("scout", "sleep: 25\nsay: late", timeout=2, show=False)  # the model stalls, no tools
    assert run.status == "failed" and run.error == "Timed out after 2s. Consider resuming with a longer timeout."
    assert run.result["durationSeconds"] < 10 and run.result["toolCalls"] == 0


def run_dirs(project) -> list:
    runs = project / ".pi" / "subagents" / "runs"
    return sorted(runs.iterdir()) if runs.is_dir() else []


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_timeouts_are_refused_before_anything_is_written(project, value):
    """Issue 13, item 4: NaN is not JSON and inf is no timeout at all."""
    with pytest.raises(nbsubagents.NbSubagentsError, match="timeout must be a positive, finite number of seconds"):
        nbsubagents.run("scout", "say: hi", timeout=value, show=False)
    with pytest.raises(nbsubagents.NbSubagentsError, match=r"configure\(timeout=\.\.\.\) must be a number"):
        config.configure(timeout=value)
    assert run_dirs(project) == []


@pytest.mark.parametrize("key, value", [
    ("concurrency", 0), ("concurrency", 65), ("max_tasks", 0), ("extend_timeout_debounce", 301),
    ("extend_timeout_debounce", float("nan")), ("looping_tool_count", 51), ("looping_tool_count", -1),
    ("panel_lines", 0), ("panel_lines", 501), ("poll_interval", 0), ("timeout", 0),
])
def test_out_of_range_settings_are_errors_not_clamped(project, key, value):
    before = config.current()
    with pytest.raises(nbsubagents.NbSubagentsError, match=rf"configure\({key}=\.\.\.\) must be"):
        config.configure(**{"panel_lines" if key != "panel_lines" else "max_tasks": 7, key: value})
    assert config.current() == before  # nothing of a refused call is applied


@pytest.mark.parametrize("text, message", [
    ('{"subagents": {"loopingToolCount": 51}}',
     '"subagents.loopingToolCount" must be a whole number from 0 to 50, got 51'),
    ('{"subagents": {"extend_timeout_debounce": 1000}}',
     '"subagents.extend_timeout_debounce" must be a number of seconds from 0 to 300'),
    ('{"subagents": {"timeout": NaN}}', '"subagents.timeout" must be a number of seconds > 0, got nan'),
    ('{"subagents": {"timeout": Infinity}}', '"subagents.timeout" must be a number of seconds > 0, got inf'),
    ('{"subagents": {"concurrency": 500}}', '"subagents.concurrency" must be a whole number from 1 to 64, got 500'),
])
def test_out_of_range_and_non_finite_settings_files_name_the_file_and_key(project, text, message):
    (project / ".pi" / "settings.json").write_text(text)
    with pytest.raises(nbsubagents.NbSubagentsError) as err:
        nbsubagents.run("scout", "say: hi", show=False)
    assert message in str(err.value) and str(project / ".pi" / "settings.json") in str(err.value)
    assert run_dirs(project) == []


def test_a_files_range_that_starts_after_its_end_is_an_error(project):
    with pytest.raises(nbsubagents.NbSubagentsError, match=r"start \(5\) is after end \(2\)"):
        nbsubagents.run("scout", "say: hi", files=[{"path": "README.md", "start": 5, "end": 2}], show=False)
    assert run_dirs(project) == []


def test_a_file_just_over_the_limit_does_not_read_as_the_limit(tmp_path):
    """Issue 13, item 8: 1 MB + 1 byte read '(1024KB, limit 1024KB)'."""
    from nbsubagents._lifecycle.context import FILE_LIMIT, files_block

    (tmp_path / "big.txt").write_bytes(b"x" * (FILE_LIMIT + 1))
    (tmp_path / "exact.txt").write_bytes(b"y" * FILE_LIMIT)
    block = files_block(["big.txt", "exact.txt"], tmp_path)
    assert "[file too large: big.txt (1025KB, limit 1024KB)]" in block
    assert "=== exact.txt ===\n" + "y" * FILE_LIMIT in block  # at the limit is still read


@pytest.mark.parametrize("value", [".inf", ".nan"])
def test_a_preset_with_a_non_finite_timeout_is_refused_naming_its_file(project, value):
    (project / ".pi" / "subagents" / "slow.md").write_text(
        f"---\nname: slow\ndescription: Never ends.\nmodel: demo/scripted\ntimeout: {value}\n---\n")
    with pytest.raises(nbsubagents.NbSubagentsError) as err:
        nbsubagents.run("slow", "say: hi", show=False)
    assert "slow.md" in str(err.value)
    assert "'timeout' must be a positive, finite number of seconds" in str(err.value)
    assert run_dirs(project) == []
