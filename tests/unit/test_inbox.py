"""The run directory's inbox: what any process posts to a running child, taken once and in order."""

from __future__ import annotations

import pytest

from nbsubagents._child import inbox


def test_messages_are_taken_once_in_the_order_they_were_posted(tmp_path):
    inbox.post(tmp_path, "steer", "look at tests/ first")
    inbox.post(tmp_path, "follow_up", "now summarise")
    inbox.post(tmp_path, "answer", request_id="q1", value=True)
    assert inbox.pending(tmp_path)
    taken = inbox.take(tmp_path)
    assert [(m["kind"], m.get("text"), m.get("value")) for m in taken] == [
        ("steer", "look at tests/ first", None), ("follow_up", "now summarise", None), ("answer", None, True)]
    assert taken[2]["requestId"] == "q1"
    assert inbox.take(tmp_path) == [] and not inbox.pending(tmp_path)


def test_an_unknown_kind_is_refused_naming_the_known_ones(tmp_path):
    with pytest.raises(ValueError, match="steer, follow_up, answer"):
        inbox.post(tmp_path, "shout", "hey")
    assert inbox.take(tmp_path) == []


def test_waiting_lists_open_questions_until_none_is_left(tmp_path):
    assert inbox.waiting(tmp_path) == []
    inbox.set_waiting(tmp_path, [{"id": "q1", "method": "input", "title": "Which file?"}])
    assert [q["id"] for q in inbox.waiting(tmp_path)] == ["q1"]
    inbox.set_waiting(tmp_path, [])
    assert inbox.waiting(tmp_path) == [] and not (tmp_path / inbox.WAITING).exists()
