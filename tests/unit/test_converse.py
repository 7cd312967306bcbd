"""Talking to a run through its run directory (``lifecycle.converse``), on run directories made by hand: the test
process stands for the run's supervisor (its pid and start time are in ``supervisor.json``, so the run is live),
and a ``waiting.json`` written here stands for the questions the supervisor says the child waits on. What is
posted is read back with ``inbox.take``, as the supervisor reads it."""

from __future__ import annotations


import json
import os
from pathlib import Path

import pytest
from IPython.core.error import UsageError
from IPython.testing import globalipapp

from helpers import live_run_dir

import nbsubagents
from nbsubagents._lifecycle.edge import edge
from nbsubagents import NbSubagentsError, _api as api, _config as config, _registry as registry
from nbsubagents._child import inbox
from nbsubagents._lifecycle import watcher, batch, converse, handle
from nbsubagents._lifecycle.handle import Run
from nbsubagents._lifecycle.spec import spec_from_call

ASK = {"id": "q-1111", "method": "input", "title": "Which database?", "message": "", "timeoutAt": None,
       "approval": False}
PICK = {"id": "q-2222", "method": "select", "title": "Which file?", "options": ["README.md", "NOTES.md"],
        "timeoutAt": None, "approval": False}
ALLOW = {"id": "q-3333", "method": "confirm", "title": "Allow bash?", "message": "rm -rf build", "timeoutAt": None,
         "approval": True}
PRESET = "---\nname: scout\ndescription: Looks around.\nmodel: demo/scripted\n---\nLook.\n"


def make_run(root: Path, run_id: str, **how) -> Run:
    return Run(live_run_dir(root, run_id, **how))


@pytest.fixture
def live(root):
    return make_run(root, "20260101-100000-aaaaa1")


# -- steer and follow-up ----------------------------------------------------------------------------------------
def test_a_steer_and_a_follow_up_reach_the_inbox_in_order_as_what_the_person_said(live):
    live.steer("look at tests/ first")
    assert live.follow_up("now summarise") is live
    nbsubagents.steer(live.run_id[-6:], "and the docs")  # a unique prefix of its random tail, from any process
    taken = inbox.take(live.dir)
    assert [(m["kind"], m["text"]) for m in taken] == [
        ("steer", "look at tests/ first"), ("follow_up", "now summarise"), ("steer", "and the docs")]
    assert all(m["from"].endswith(f":{os.getpid()}") and m["at"] for m in taken)


@pytest.mark.parametrize("text", ["", "   ", None, 3])
def test_a_steer_or_follow_up_without_words_is_refused_naming_the_run(live, text):
    with pytest.raises(NbSubagentsError, match=rf"A steer for run {live.run_id} needs the words the child should "
                                               r"read, e\.g\. run\.steer\("):
        live.steer(text)
    with pytest.raises(NbSubagentsError, match=rf"A follow-up for run {live.run_id} needs the words"):
        live.follow_up(text)
    assert inbox.take(live.dir) == []


def test_steering_a_run_that_ended_says_so_and_how_to_continue_it(root):
    done = make_run(root, "20260101-100000-bbbbb1", ended="completed")
    with pytest.raises(NbSubagentsError) as err:
        done.steer("look again")
    assert str(err.value) == (f"Run {done.run_id} has ended (completed): a steer reaches only a running run; "
                              "run.follow_up(text) continues its session as a new run")
    assert not (done.dir / inbox.INBOX).exists()


def test_a_follow_up_to_a_run_that_ended_continues_it_as_a_new_run_linked_to_it(project, monkeypatch):
    """The starter here prepares the new run without launching it (api.start launches what it prepares): the
    link, the task and what is carried over are what a follow-up decides."""
    ended = make_run(project, "20260101-100000-ccccc1", ended="completed", meta={"name": "mapper"})
    prepared = []

    def prepare_only(preset, task, **options):
        prepared.append(options)
        return batch.prepare_one(spec_from_call(preset, task, options, "start()"), mode="background")

    monkeypatch.setattr(edge, "start", prepare_only)
    new = ended.follow_up("now list the slow tests")
    assert new is not ended and new.run_id != ended.run_id
    assert (new.preset, new.task, new.name, new.record.resumed_from) == (
        "scout", "now list the slow tests", "mapper", ended.run_id)
    assert prepared == [{"resume": ended.run_id, "model": "demo/scripted", "cwd": str(project), "name": "mapper",
                         "timeout": 120, "ask": False, "fallback_models": [], "harness": "pi", "project_config": False}]
    assert registry.fetch(registry.db_path(project), "SELECT resumed_from FROM runs WHERE run_id = ?",
                          (new.run_id,)) == [{"resumed_from": ended.run_id}]
    assert not (ended.dir / inbox.INBOX).exists()  # nothing was posted to the run that ended


def test_the_public_follow_up_of_an_ended_run_starts_through_api_start(root, monkeypatch):
    ended = make_run(root, "20260101-100000-ccccc2", ended="failed")
    monkeypatch.setattr(edge, "start", None)  # nothing lent yet (put back after the test)
    with pytest.raises(NbSubagentsError, match="has ended: a follow-up starts a new run, which needs"):
        converse.follow_up(ended.paths, "again")
    started = []
    monkeypatch.setattr(api, "start", lambda *a, **k: started.append((a, k)) or "the new run")
    api.wire()  # what the package does at the first use of a public name
    assert edge.start is api.start
    assert nbsubagents.follow_up(ended.run_id, "again") == "the new run"
    assert started == [(("scout", "again"), {"resume": ended.run_id, "model": "demo/scripted", "cwd": str(root),
                                             "name": "mapper", "timeout": 120, "ask": False,
                                             "fallback_models": [], "harness": "pi", "project_config": False})]


def test_a_message_posted_as_the_run_ends_is_withdrawn_not_left_unread(live, monkeypatch):
    """The run's supervisor writes result.json right after the post (its end raced the message): a steer says
    it came too late, a follow-up continues the run instead; neither is left in the inbox."""
    post = inbox.post

    def post_then_end(run_dir, *args, **kwargs):
        message = post(run_dir, *args, **kwargs)
        (run_dir / "result.json").write_text(json.dumps({"status": "completed"}))
        return message

    monkeypatch.setattr(inbox, "post", post_then_end)
    with pytest.raises(NbSubagentsError, match=rf"Run {live.run_id} ended \(completed\) before the steer reached it"):
        live.steer("look at tests/ first")
    (live.dir / "result.json").unlink()
    monkeypatch.setattr(edge, "start", lambda preset, task, **options: ("continued", task, options["resume"]))
    assert converse.follow_up(live.paths, "now summarise") == ("continued", "now summarise", live.run_id)
    assert inbox.take(live.dir) == []


# -- questions and answers ---------------------------------------------------------------------------------------
def test_answers_go_to_the_oldest_open_question_and_the_next_answer_to_the_next(root):
    run = make_run(root, "20260101-100000-ddddd1", questions=[ASK, PICK])
    assert run.status == "waiting" and [q["id"] for q in run.questions] == ["q-1111", "q-2222"]
    assert run.answer("the staging one")["id"] == "q-1111"
    assert [q["id"] for q in run.questions] == ["q-2222"]  # answered, though the supervisor has not taken it yet
    assert nbsubagents.answer(run.run_id, 2) == {**PICK, "answer": "NOTES.md"}
    assert run.questions == []
    taken = inbox.take(run.dir)
    assert [(m["kind"], m["requestId"], m["value"]) for m in taken] == [
        ("answer", "q-1111", "the staging one"), ("answer", "q-2222", "NOTES.md")]


def test_a_question_is_chosen_by_its_id_or_a_unique_prefix_and_an_unknown_one_lists_the_open_ones(root):
    run = make_run(root, "20260101-100000-ddddd2", questions=[ASK, PICK])
    assert run.answer("README.md", question="q-2")["id"] == "q-2222"
    with pytest.raises(NbSubagentsError) as err:
        run.answer("x", question="q-9")
    assert str(err.value) == (f"Run {run.run_id} has no open question 'q-9': its open ones are "
                              "q-1111 (Which database?)")
    with pytest.raises(NbSubagentsError, match="Question id 'q-' of run .* is ambiguous"):
        make_run(root, "20260101-100000-ddddd3", questions=[ASK, PICK]).answer("x", question="q-")


def test_answering_when_nothing_is_open_or_after_the_end_says_what_would_be_right(root, live):
    with pytest.raises(NbSubagentsError) as err:
        live.answer("yes")
    assert str(err.value) == (f"Run {live.run_id} is not waiting for an answer: no question is open "
                              "(run.questions lists the open ones; run.wait_for_question() waits for the next)")
    with pytest.raises(NbSubagentsError, match=rf"Run {live.run_id} has no open question 'q-1111': none is open"):
        live.answer("yes", question="q-1111")
    done = make_run(root, "20260101-100000-eeeee1", ended="aborted", questions=[ASK])
    with pytest.raises(NbSubagentsError, match=rf"Run {done.run_id} has ended \(aborted\): it waits for no answer"):
        done.answer("yes")
    assert inbox.take(live.dir) == [] and inbox.take(done.dir) == []


@pytest.mark.parametrize("given, posted", [(True, True), ("allow", True), (" YES ", True), (False, False),
                                           ("deny", False), ("No", False), (None, None)])
def test_a_yes_no_question_takes_true_false_and_allow_deny_yes_no(root, given, posted):
    run = make_run(root, "20260101-100000-fffff1", questions=[ALLOW])
    assert run.answer(given)["answer"] is posted
    assert inbox.take(run.dir)[0]["value"] is posted


def test_a_value_a_question_cannot_take_is_refused_with_what_it_takes(root):
    run = make_run(root, "20260101-100000-fffff2", questions=[ASK, PICK, ALLOW])
    with pytest.raises(NbSubagentsError) as err:
        run.answer("maybe", question="q-3333")
    assert str(err.value) == (f"Question q-3333 of run {run.run_id} (Allow bash?: rm -rf build) asks yes or no: "
                              "answer True, 'allow' or 'yes' to allow, False, 'deny' or 'no' to deny (None: no "
                              "answer); got 'maybe'")
    for bad in ("CHANGES.md", 0, 3, "3", True):
        with pytest.raises(NbSubagentsError, match=r"\(Which file\? \[1 README.md \| 2 NOTES.md\]\) takes one of "
                                                   r"its options, by its text or its number from 1"):
            run.answer(bad, question="q-2222")
    for bad in (7, "", "  ", ["a"]):
        with pytest.raises(NbSubagentsError, match=r"Question q-1111 of run .* \(Which database\?\) takes text"):
            run.answer(bad)
    assert run.answer("readme.md", question="q-2222")["answer"] == "README.md"  # its text in any case
    assert run.answer(None)["answer"] is None  # no answer: the child goes on without one
    assert [m["value"] for m in inbox.take(run.dir)] == ["README.md", None]


def test_approve_decides_the_oldest_open_approval_and_refuses_other_questions(root):
    run = make_run(root, "20260101-100000-fffff3", questions=[ASK, ALLOW])
    assert run.approve(False) == {**ALLOW, "answer": False}  # the input question before it is not an approval
    with pytest.raises(NbSubagentsError, match=r"Question q-1111 of run .* is no yes/no question \(Which database\?\)"
                                               r": answer it with run.answer"):
        run.approve(question="q-1111")
    with pytest.raises(NbSubagentsError, match="allow must be True"):
        run.approve("deny")
    with pytest.raises(NbSubagentsError, match=rf"Run {run.run_id} is not waiting for an approval: it asks Which "
                                               r"database\? \(answer that with run.answer"):
        run.approve()
    assert [(m["requestId"], m["value"]) for m in inbox.take(run.dir)] == [("q-3333", False)]


def test_wait_for_question_returns_the_open_one_or_none_when_the_run_ends_or_time_is_up(root, live):
    asking = make_run(root, "20260101-100000-ggggg1", questions=[PICK])
    assert asking.wait_for_question() == PICK
    assert make_run(root, "20260101-100000-ggggg2", ended="completed").wait_for_question() is None
    assert live.wait_for_question(timeout=0) is None


# -- the status "waiting" ----------------------------------------------------------------------------------------
def test_a_running_run_with_an_open_question_shows_waiting_where_runs_are_listed(root, live):
    asking = make_run(root, "20260101-100001-hhhhh1", questions=[ASK])
    make_run(root, "20260101-100002-hhhhh2", ended="completed")
    assert (asking.status, live.status) == ("waiting", "running")
    frame = nbsubagents.runs()
    assert dict(zip(frame["run_id"], frame["status"].astype(str))) == {
        asking.run_id: "waiting", live.run_id: "running", "20260101-100002-hhhhh2": "completed"}
    assert list(nbsubagents.runs(status="waiting")["run_id"]) == [asking.run_id]
    assert list(nbsubagents.runs(status="running")["run_id"]) == [live.run_id]
    assert set(nbsubagents.runs(status=["running", "waiting"])["run_id"]) == {asking.run_id, live.run_id}
    assert list(nbsubagents.runs(status=["waiting", "completed"], limit=1)["run_id"]) == ["20260101-100002-hhhhh2"]
    shown = nbsubagents.status()
    assert {r["run_id"]: r["status"] for r in shown.rows} == {asking.run_id: "waiting", live.run_id: "running"}
    assert shown.counts_line().startswith("2 running (1 waiting) · 1 completed")
    assert "◷ waiting" in shown._repr_html_() and "waiting" in repr(shown)
    one = repr(nbsubagents.status(asking.run_id))
    assert "  status       waiting" in one and "  asks         Which database?" in one
    # the registry keeps "running": waiting is derived where it is shown
    rows = registry.fetch(registry.db_path(root), "SELECT run_id, status FROM runs WHERE status = 'running'")
    assert {r["run_id"] for r in rows} == {asking.run_id, live.run_id}
    inbox.set_waiting(asking.dir, [])  # answered: the supervisor removes waiting.json
    assert asking.status == "running" and list(nbsubagents.runs(status="waiting")["run_id"]) == []


def test_a_question_is_said_once_where_the_runs_notices_go_with_how_to_answer_it(root, live, capsys):
    watcher.say_questions(live, [{"type": "tool_execution_start"}, {"type": "question", **PICK},
                                 {"type": "question", **ALLOW}])
    name = f"{live.name or live.run_id} ({live.run_id})"
    assert capsys.readouterr().err.splitlines() == [
        f"◷ run {name} is waiting for an answer: Which file? [1 README.md | 2 NOTES.md] "
        f"(answer in its panel, or: nbsubagents answer {live.run_id} CHOICE)",
        f"◷ run {name} is waiting for an approval: Allow bash?: rm -rf build "
        f"(answer in its panel, or: nbsubagents approve {live.run_id} allow|deny)"]
    headless = make_run(root, "20260101-100000-iiiii1", meta={"questionTimeout": 0})
    watcher.say_questions(headless, [{"type": "question", **ASK}])  # its questions time out at once: not said
    assert capsys.readouterr().err == ""


@pytest.fixture
def writes(monkeypatch) -> list[str]:
    """What is written where a run's notices go, one item a write."""
    written: list[str] = []

    class Recorder:
        def write(self, text: str) -> int:
            written.append(text)
            return len(text)

        def flush(self) -> None:
            pass

    monkeypatch.setattr(edge, "text_stream", lambda: Recorder())
    return written


def test_a_notice_line_is_one_write_so_a_cells_own_print_cannot_land_inside_it(live, writes):
    """The watcher says questions and notices from its thread while the cell may print: each line goes out with its
    newline in one write (print() writes the text and its end apart, and a cell's line landed between them)."""
    watcher.say_questions(live, [{"type": "question", **PICK}])
    notice = watcher.Notice(run_id=live.run_id, name="asks", status="completed", mode="background", summary="done")
    watcher.print_notice(notice)
    assert len(writes) == 2 and writes[0].endswith("CHOICE)\n") and writes[1] == notice.text + "\n"


def test_wait_for_question_returns_once_the_watcher_has_said_the_question_whole(root, writes):
    """The watcher says a question from its thread while the cell that waited for it goes on to print: the cell's
    line must not be cut by the notice (a run of the conversation notebook printed its question with the notice
    inside), so where this process says the run's questions, wait_for_question returns after the notice."""
    import threading
    import time

    asking = make_run(root, "20260101-100003-jjjjj1", questions=[PICK])
    assert asking.wait_for_question(timeout=5)["id"] == PICK["id"] and writes == []  # nobody here says it: at once
    handle.says_questions(asking, True)  # as the watcher does for a run it shows
    saying = threading.Timer(0.3, watcher.say_questions, args=(asking, [{"type": "question", **PICK}]))
    saying.start()
    started = time.monotonic()
    got = asking.wait_for_question(timeout=5)
    assert got["id"] == PICK["id"] and len(writes) == 1 and "Which file?" in writes[0]
    assert time.monotonic() - started >= 0.25  # it waited for the notice
    saying.join()


# -- the magics ------------------------------------------------------------------------------------------------
@pytest.fixture
def shell(root):
    globalipapp.start_ipython()
    ip = globalipapp.get_ipython()
    ip.run_line_magic("load_ext", "nbsubagents")
    config.reset()
    yield ip
    ip.run_line_magic("unload_ext", "nbsubagents")
    ip.user_ns.pop("job", None)


def test_the_talking_magics_post_the_text_as_typed_and_expand_only_the_run(shell, root, live, capsys):
    asking = make_run(root, "20260101-100000-jjjjj1", questions=[ASK, ALLOW])
    shell.user_ns["job"] = live
    shell.run_line_magic("subagent_steer", "{job.run_id} read {OTHER}.md and $HOME")
    shell.run_line_magic("subagent_followup", f"{live.run_id[-6:]} then stop")
    assert [(m["kind"], m["text"]) for m in inbox.take(live.dir)] == [
        ("steer", "read {OTHER}.md and $HOME"), ("follow_up", "then stop")]
    shell.run_line_magic("subagent_answer", f"{asking.run_id} --question q-1111 the staging one")
    shell.run_line_magic("subagent_approve", f"{asking.run_id} deny")
    assert [(m["requestId"], m["value"]) for m in inbox.take(asking.dir)] == [("q-1111", "the staging one"),
                                                                              ("q-3333", False)]
    out = capsys.readouterr().out
    assert f"Answered run {asking.run_id}: Which database?: the staging one" in out
    assert f"Denied for run {asking.run_id}: Allow bash?: rm -rf build" in out
    with pytest.raises(UsageError, match="not waiting for an answer"):
        shell.run_line_magic("subagent_answer", f"{live.run_id} yes")
    with pytest.raises(UsageError, match="Name a run first"):
        shell.run_line_magic("subagent_steer", "")
    with pytest.raises(UsageError, match="invalid choice: 'maybe'"):
        shell.run_line_magic("subagent_approve", f"{asking.run_id} maybe")


def test_the_talking_magics_come_and_go_with_the_extension(shell):
    talking = {"subagent_steer", "subagent_followup", "subagent_answer", "subagent_approve"}
    assert talking <= set(shell.magics_manager.magics["line"])
    shell.run_line_magic("unload_ext", "nbsubagents")
    assert not talking & set(shell.magics_manager.magics["line"])
    shell.run_line_magic("load_ext", "nbsubagents")  # as the fixture left it
