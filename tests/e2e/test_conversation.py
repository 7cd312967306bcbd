"""Talking to a running child (issue 26): steers, follow-ups, questions, approvals and fallback models, through the
run directory's inbox (``child/inbox.py``) as another process posts them, with the real pi in RPC mode against the
scripted model. Marked pi_matrix: `make test` runs them against both pinned pi versions.

A step that must still be running when the test speaks is a bash command waiting for a file the test writes
(``run: until [ -f go ]; ...``): nothing here depends on timing.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from helpers import PI_VERSION, wait_for

import nbsubagents
from nbsubagents._child import inbox
from nbsubagents._child.record import RunRecord, write
from nbsubagents._lifecycle.handle import launch
from nbsubagents._lifecycle.prepare import prepare
from nbsubagents._lifecycle.spec import TaskSpec
from nbsubagents._child.harnesses.pi import write_agent_dir
from nbsubagents._pi.scripted import ScriptedModel

DIALOGS = Path(__file__).resolve().parents[1] / "fixtures" / "pi-extensions" / "dialogs.js"
WAIT_FOR_GO = "run: until [ -f go ]; do sleep 0.05; done; echo went"


STARTED: list = []


@pytest.fixture(autouse=True)
def no_run_left(project):
    """A test that fails half-way leaves no run waiting for its `go` file."""
    yield
    (project / "go").touch()
    for run in STARTED:
        if run.status == "running":
            run.cancel()
            run.wait(30)
    STARTED.clear()


def start(project: Path, task: str, preset: str = "scout", options: dict | None = None, **meta: object):
    """A run started with these run options (TaskSpec) and extra meta.json keys (those a test sets itself: the
    timeout of questions, which prepare.py decides from where it runs)."""
    run = prepare(TaskSpec(preset, task, **(options or {})), mode="single")
    run.record = RunRecord.from_json({**run.record.to_json(), **meta})
    write(run.dir, run.record)
    launch(run)
    STARTED.append(run)
    return run


def seen(run, kind: str, **fields: object) -> list[dict]:
    return [e for e in run.events() if e["type"] == kind and all(e.get(k) == v for k, v in fields.items())]


def finish(run) -> None:
    run.wait(120)
    assert not (run.dir / inbox.WAITING).exists()


def add_dialogs_preset(project: Path) -> None:
    (project / ".pi" / "subagents" / "asker.md").write_text(
        f"---\nname: asker\ndescription: asks\nmodel: demo/scripted\nextraArgs: [-e, {DIALOGS}]\n---\nAsk.\n")


@pytest.mark.pi_matrix
def test_a_steer_changes_the_next_tool_call(project):
    run = start(project, WAIT_FOR_GO)
    wait_for(lambda: seen(run, "tool_call"), what="the first tool call")
    inbox.post(run.dir, "steer", "read src/app.py")
    wait_for(lambda: seen(run, "user_message"), what="the steer delivered")
    (project / "go").touch()
    finish(run)
    assert run.status == "completed", run.error
    calls = [(e["name"], e["args"]) for e in seen(run, "tool_call")]
    assert calls == [("bash", {"command": WAIT_FOR_GO[len("run: "):]}), ("read", {"path": "src/app.py"})]
    [said] = run.result["conversation"]
    assert (said["type"], said["kind"], said["text"]) == ("user_message", "steer", "read src/app.py")
    assert said["from"] == f"{os.uname().nodename}:{os.getpid()}"
    if PI_VERSION >= (1,):  # pi 1.x says what it did with it: queued until its current tool calls end
        assert said["disposition"] == "queued" and "you (steer, queued): read src/app.py" in run.transcript
    else:
        assert "disposition" not in said and "you (steer): read src/app.py" in run.transcript
    stats = seen(run, "session_stats")
    assert stats and stats[-1]["contextWindow"] == 128000 and stats[-1]["tokens"] > 0
    assert run.result["contextUsage"]["window"] == 128000


@pytest.mark.pi_matrix
def test_a_follow_up_gets_a_second_answer_in_the_same_run(project, scripted):
    run = start(project, WAIT_FOR_GO)
    wait_for(lambda: seen(run, "tool_call"), what="the first tool call")
    inbox.post(run.dir, "follow_up", "say: the second answer")
    wait_for(lambda: not inbox.pending(run.dir), what="the follow-up taken")
    assert not seen(run, "user_message")  # held while the first answer is still to come
    (project / "go").touch()
    finish(run)
    assert run.status == "completed", run.error
    answers = [e["text"] for e in seen(run, "assistant_text")]
    assert answers == ["Done. 1 step:\n- " + WAIT_FOR_GO + ": went", "the second answer"]
    assert run.output == "the second answer"
    assert [(m["kind"], m["text"]) for m in run.result["conversation"]] == [("follow_up", "say: the second answer")]
    said = "follow-up, delivered" if PI_VERSION >= (1,) else "follow-up"  # a prompt to the idle pi: a turn at once
    assert f"you ({said}): say: the second answer" in run.transcript
    assert len({json.dumps(r["messages"][0]) for r in scripted.requests}) == 1  # one conversation, one system prompt


@pytest.fixture
def dialog_model(project):
    """The scripted model calling the dialogs extension's tool named in the task's first line, then answering."""
    def script(body: dict, index: int) -> dict:
        task = next(m for m in body["messages"] if m["role"] == "user")["content"]
        task = task if isinstance(task, str) else task[0]["text"]
        name, _, argument = task.partition(" ")
        if index == 0:
            key = "question" if name == "ask_person" else "action"
            return {"tool_calls": [{"name": name, "arguments": {key: argument}}]}
        result = [m for m in body["messages"] if m["role"] == "tool"][-1]["content"]
        return {"text": f"told: {result if isinstance(result, str) else result[0]['text']}"}

    with ScriptedModel(script) as model:
        write_agent_dir(os.environ["PI_CODING_AGENT_DIR"], model.url)
        add_dialogs_preset(project)
        yield model


@pytest.mark.pi_matrix
def test_a_question_answered_from_another_process_reaches_the_child(project, dialog_model):
    run = start(project, "ask_person Which colour?", preset="asker", questionTimeout=120)
    [question] = wait_for(lambda: inbox.waiting(run.dir), what="the question in waiting.json")
    assert (question["method"], question["title"], question["approval"]) == ("input", "Which colour?", False)
    inbox.post(run.dir, "answer", request_id=question["id"], value="blue")
    finish(run)
    assert run.status == "completed", run.error
    assert run.output == "told: answer: blue"
    [answer] = seen(run, "answer")
    assert (answer["id"], answer["value"], answer["by"]) == (question["id"], "blue", "person")
    [entry] = run.result["questions"]
    assert (entry["answer"], entry["by"], entry["method"]) == ("blue", "person", "input")
    assert entry["askedAt"] <= entry["answeredAt"]


@pytest.mark.pi_matrix
def test_an_unanswered_question_times_out_and_the_run_completes(project, dialog_model):
    run = start(project, "ask_person Anyone there?", preset="asker", questionTimeout=1)
    finish(run)
    assert run.status == "completed", run.error
    assert run.output == "told: no answer"
    [answer] = seen(run, "answer")
    assert (answer["value"], answer["by"]) == (None, "timeout")
    assert [(q["answer"], q["by"]) for q in run.result["questions"]] == [(None, "timeout")]


@pytest.mark.pi_matrix
def test_a_headless_run_answers_a_question_at_once(project, dialog_model):
    run = start(project, "confirm_action rm -rf build", preset="asker", questionTimeout=0,
                approval={"tools": ["bash"], "otherwise": "allow"})
    finish(run)
    assert run.status == "completed", run.error
    assert run.output == "told: allowed: rm -rf build"  # nobody to ask: the policy's `otherwise`
    assert [(a["value"], a["by"]) for a in seen(run, "answer")] == [(True, "nobody")]  # nobody was asked


@pytest.mark.pi_matrix
def test_a_denied_confirmation_is_recorded_and_the_child_is_told(project, dialog_model):
    run = start(project, "confirm_action delete the database", preset="asker", questionTimeout=120)
    [question] = wait_for(lambda: inbox.waiting(run.dir), what="the confirmation in waiting.json")
    assert question["approval"] is True and question["message"] == "delete the database"
    inbox.post(run.dir, "answer", request_id=question["id"], value=False)
    finish(run)
    assert run.status == "completed", run.error
    assert run.output == "told: denied: delete the database"
    assert [(q["answer"], q["by"], q["approval"]) for q in run.result["questions"]] == [(False, "person", True)]
    assert "Denied (you)" in run.transcript


@pytest.fixture
def two_models(project, scripted):
    write_agent_dir(os.environ["PI_CODING_AGENT_DIR"], scripted.url, models=("scripted", "backup"))


@pytest.mark.pi_matrix
def test_a_429_on_the_first_model_ends_the_run_completed_on_the_second(project, two_models, scripted):
    # The test's pi does not retry (write_agent_dir): the fallback model is asked to continue.
    run = start(project, "fail for demo/scripted: 429 rate limited\nread README.md",
                options={"fallback_models": ["backup"]})  # resolved as a model is: demo/backup
    assert run.record.fallback_models == ["demo/backup"]
    finish(run)
    assert run.status == "completed", run.error
    assert run.result["model"] == "demo/backup"
    assert nbsubagents.runs(project=project)["model"].tolist() == ["demo/backup"]  # the model that finished
    tried = run.result["modelsTried"]
    assert [t["model"] for t in tried] == ["demo/scripted", "demo/backup"]
    assert "429" in tried[0]["error"] and tried[1]["error"] is None
    [fallback] = seen(run, "model_fallback")
    assert (fallback["from"], fallback["to"]) == ("demo/scripted", "demo/backup")
    # The backup model goes on with the task (the scripted model takes the supervisor's "continue" as no new task).
    assert [r["model"] for r in scripted.requests] == ["scripted", "backup", "backup"]
    assert run.output == "Done. 1 step:\n- read README.md: # Demo project"


@pytest.mark.pi_matrix
def test_a_fallback_during_pis_own_retry_repeats_the_failed_request_on_the_next_model(project, scripted):
    agent = write_agent_dir(os.environ["PI_CODING_AGENT_DIR"], scripted.url, models=("scripted", "backup"))
    settings = json.loads((agent / "settings.json").read_text())
    del settings["retry"]  # pi's own retries, as they are by default
    (agent / "settings.json").write_text(json.dumps(settings))
    run = start(project, "fail for demo/scripted: 503 overloaded\nread README.md", fallbackModels=["demo/backup"])
    finish(run)
    assert run.status == "completed", run.error
    assert run.output == "Done. 1 step:\n- read README.md: # Demo project"  # the task itself, on the backup model
    assert [t["model"] for t in run.result["modelsTried"]] == ["demo/scripted", "demo/backup"]
    assert run.result["model"] == "demo/backup"
    assert [(e["from"], e["to"]) for e in seen(run, "model_fallback")] == [("demo/scripted", "demo/backup")]
    assert {r["model"] for r in scripted.requests} == {"scripted", "backup"}


@pytest.mark.pi_matrix
def test_the_ask_tool_waits_for_the_answer_and_a_notice_says_how_to_give_it(project, capsys):
    nbsubagents.configure(question_timeout=60)  # a script would not wait at all (0) unless told to
    run = nbsubagents.start("scout", "ask: Which file? [README.md | src/app.py]\nread src/app.py", ask=True)
    STARTED.append(run)
    question = run.wait_for_question(timeout=60)
    assert (question["method"], question["options"]) == ("select", ["README.md", "src/app.py"])
    said: list[str] = []
    wait_for(lambda: said.append(capsys.readouterr().err) or "is waiting" in "".join(said), what="the notice")
    assert (f"◷ run scout ({run.run_id}) is waiting for an answer: Which file? [1 README.md | 2 src/app.py] "
            f"(answer in its panel, or: nbsubagents answer {run.run_id} CHOICE)") in "".join(said)
    assert nbsubagents.runs(project=project, status="waiting")["run_id"].tolist() == [run.run_id]
    nbsubagents.answer(run.run_id, 2)  # an option by its number
    run.wait(60)
    assert run.status == "completed", run.error
    assert "- ask: src/app.py" in run.output  # the answer reached the child as the tool's result
    [asked] = run.result["questions"]
    assert (asked["answer"], asked["by"]) == ("src/app.py", "person")
