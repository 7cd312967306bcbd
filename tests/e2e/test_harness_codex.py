"""Codex CLI as a run's harness: the real pinned ``codex`` (harnesses/) against the scripted model's Responses
dialect, through the supervisor: the three scripted tasks, an isolated run's patch, cancel, resume."""

from __future__ import annotations

import json

import pytest
from helpers import wait_for
from test_isolation import make_repo, worktrees  # noqa: F401 (a fixture)

import nbsubagents
from nbsubagents import _config as config
from nbsubagents._child.artifacts import read_json
from nbsubagents._config import NbSubagentsError
from nbsubagents._views.panel_state import PanelState

CODER = """---
name: coder
description: Codex does the task.
harness: codex
model: openai/gpt-5.5
---
Work carefully. MARKER-CODEX-PRESET
"""


@pytest.fixture
def codex_project(project, scripted, monkeypatch):
    """The project with a Codex preset; Codex's endpoint is the test's scripted model (its OpenAI base URL), on
    gpt-5.5 (whose tools Codex 0.171.0 knows: apply_patch among them; the offline model's are only its shell)."""
    (project / ".pi" / "subagents" / "coder.md").write_text(CODER)
    monkeypatch.setenv("OPENAI_BASE_URL", scripted.url)
    monkeypatch.setenv("OPENAI_API_KEY", "dummy-key")
    return project


def events_of(run) -> list[dict]:
    return [json.loads(line) for line in (run.dir / "events.jsonl").read_text().splitlines()]


@pytest.mark.parametrize(("task", "tool", "effect"), [
    ("read README.md", "read", None),
    ("edit README.md: second line -> edited by codex", "edit", "# Demo project\nedited by codex\n"),
    ("run: echo ran-by-codex > out.txt", "bash", None),
])
def test_the_three_scripted_tasks_complete_under_codex(codex_project, scripted, task, tool, effect):
    run = nbsubagents.run("coder", task, show=False)

    assert run.status == "completed", run.error
    assert run.record.harness == "codex" and run.record.argv[1] == "exec"
    assert scripted.requests[0]["model"] == "gpt-5.5"  # the preset's openai/gpt-5.5, as Codex names it
    events = events_of(run)
    calls = [e for e in events if e["type"] == "tool_call"]
    results = [e for e in events if e["type"] == "tool_result"]
    assert [c["name"] for c in calls] == [tool] and [r["isError"] for r in results] == [False]
    assert [e["turn"] for e in events if e["type"] == "turn_start"] == [1, 2]  # one per model answer, as pi's
    assert run.result["sessionId"] == next(e["sessionId"] for e in events if e["type"] == "session")
    assert run.result["toolCalls"] == 1 and run.result["turns"] == 2
    assert run.result["usage"]["totalTokens"] > 0 and run.result["usage"]["cost"] == 0
    assert run.output.startswith("Done. 1 step:")
    assert "Done. 1 step" in run.transcript
    assert run.id in set(nbsubagents.runs()["run_id"])  # its registry row
    text, html = PanelState.of_run(run).static_record()  # its panel, as a saved notebook keeps it
    assert text.startswith("✓ ") and "1 tool call" in text and "Done. 1 step" in text and 'class="nbsubagents-static' in html
    if effect is not None:
        assert (codex_project / "README.md").read_text() == effect
        kinds = {i.get("type") for i in scripted.requests[-1]["input"]}
        assert "custom_tool_call" in kinds  # Codex's own apply_patch tool, as it offers it on gpt-5.5
    if tool == "bash":
        assert (codex_project / "out.txt").read_text() == "ran-by-codex\n"
    developer = [i for i in scripted.requests[0]["input"] if i.get("role") == "developer"]
    assert any("MARKER-CODEX-PRESET" in json.dumps(i) for i in developer)  # the preset body, beside Codex's own


def test_an_isolated_codex_run_yields_a_patch_and_leaves_the_project_alone(codex_project, worktrees):  # noqa: F811
    make_repo(codex_project)
    run = nbsubagents.run("coder", "edit README.md: second line -> isolated edit", isolation="worktree", show=False)

    assert run.status == "completed", run.error
    assert (codex_project / "README.md").read_text() == "# Demo project\nsecond line\n"
    assert run.changes["added"] == 1 and run.changes["removed"] == 1
    assert "-second line" in run.diff and "+isolated edit" in run.diff


def test_cancel_ends_a_codex_run(codex_project):
    run = nbsubagents.start("coder", "run: sleep 60", show=False)
    wait_for(lambda: (run.dir / "events.jsonl").exists() and '"tool_call"' in (run.dir / "events.jsonl").read_text(),
             what="codex's command")  # the project fixture then checks that no process of the run is left

    with pytest.raises(NbSubagentsError, match="runs under the codex harness, which cannot take a steer while it runs"):
        run.steer("faster")
    assert run.cancel()
    run.wait(60)
    assert run.status == "aborted" and run.error == "cancelled"
    assert run.result["durationSeconds"] < 30


def test_a_codex_failure_fails_the_run_with_its_message(codex_project):
    run = nbsubagents.run("coder", "fail: 400 scripted refusal", show=False)

    assert run.status == "failed"
    assert "scripted refusal" in run.error
    assert read_json(run.dir / "result.json")["harnessEnd"]["subtype"] == "turn_failed"


def test_resume_continues_the_codex_thread(codex_project, scripted):
    first = nbsubagents.run("coder", "read README.md", show=False)
    second = nbsubagents.run("coder", "ls src", resume=first.id, show=False)

    assert second.status == "completed", second.error
    assert second.record.argv[1:3] == ["exec", "resume"] and first.result["sessionId"] in second.record.argv
    assert second.result["sessionId"] == first.result["sessionId"]
    last = json.dumps(scripted.requests[-1]["input"])
    assert "read README.md" in last and "ls src" in last  # the same conversation, told once
    assert "app.py" in second.output


def test_the_offline_setting_sends_codex_to_the_scripted_model(project, monkeypatch):
    """No endpoint in the environment: the project's offline setting alone points Codex at the scripted model."""
    (project / ".pi" / "subagents" / "coder.md").write_text(CODER)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("PI_OFFLINE")  # the setting, not the test's environment, says offline
    config.configure(offline=True)

    run = nbsubagents.run("coder", "edit README.md: second line -> offline edit", show=False)

    assert run.status == "completed", run.error
    assert run.record.argv[run.record.argv.index("-m") + 1] == "scripted"  # whatever the preset names
    assert (project / "README.md").read_text() == "# Demo project\noffline edit\n"  # apply_patch by its shell


def test_output_schema_is_codexs_own_and_the_reply_is_checked(codex_project, scripted):
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"],
              "additionalProperties": False}
    run = nbsubagents.run("coder", 'say: {"n": 7}', output_schema=schema, show=False)

    assert run.status == "completed", run.error
    assert run.data == {"n": 7}
    assert scripted.requests[0]["text"]["format"]["schema"] == schema  # Codex sent it to the model itself


def test_max_turns_counts_codexs_model_answers_as_pis_turns(codex_project):
    task = "read README.md\nls src\nrun: echo three\nsleep: 60"  # the final answer never comes in time
    run = nbsubagents.run("coder", task, max_turns=2, show=False)

    assert run.status == "failed" and run.result["stopReason"] == "budget:turns", run.error
    assert run.error == "Stopped at 2 turns (max_turns=2)"
    assert run.result["turns"] == 3 and run.result["toolCalls"] == 3  # as pi's: the one past the limit was started


def test_the_pinned_codex_is_found_and_says_its_version(codex_project):
    from nbsubagents._child.harnesses import codex
    from nbsubagents._pi.locate import find_program

    assert codex.version(find_program(codex, codex_project)) == "codex-cli 0.171.0"


def test_a_preset_whose_tools_codex_cannot_honour_is_refused_before_anything_is_written(codex_project):
    runs = codex_project / ".pi" / "subagents" / "runs"
    before = set(runs.iterdir()) if runs.exists() else set()

    with pytest.raises(NbSubagentsError, match=r'Preset "scout": The codex harness cannot honour tools \(read, ls, bash\)'):
        nbsubagents.run("scout", "read README.md", harness="codex", show=False)  # scout: tools read, ls, bash

    assert (set(runs.iterdir()) if runs.exists() else set()) == before


def test_a_codex_run_tried_again_after_a_fail_once_succeeds(codex_project):
    config.configure(offline=True)  # offline, Codex does not try a failed request again itself
    task = "fail once: 503 warming up\nread README.md"
    first = nbsubagents.run("coder", task, show=False)
    again = nbsubagents.run("coder", task, show=False)

    assert first.status == "failed" and again.status == "completed", (first.error, again.error)
