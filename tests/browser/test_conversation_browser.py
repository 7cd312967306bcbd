"""Talking to a running sub-agent from its panel (issue 26), in JupyterLab + Chromium.

A person answers the child's question with the panel's option buttons and steers the run with its message
box, while the run's cell keeps the kernel's main thread busy (the panel's controls are served by a kernel
subshell). The runs are the real pi against the scripted model; what reached the child is read from the run's
own files afterwards.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import wait_for
from jupyterlab_harness import ARTIFACTS, JupyterLab, lab_page, panel, write_notebook

from nbsubagents._child.artifacts import parse_iso

pytestmark = [pytest.mark.browser, pytest.mark.notebook, pytest.mark.slow]

SETUP = ("import os\nfrom nbsubagents.demo import use_scripted_model\n"
         "use_scripted_model(os.path.abspath('agent'))\nimport nbsubagents")


def run_dir(project: Path, name: str) -> Path:
    (found,) = [d for d in (project / ".pi" / "subagents" / "runs").iterdir()
                if json.loads((d / "meta.json").read_text()).get("name") == name]
    return found


def events(directory: Path) -> list[dict]:
    return [json.loads(line) for line in (directory / "events.jsonl").read_text().splitlines() if line.strip()]


@pytest.mark.browser
def test_a_question_is_answered_and_the_run_steered_from_its_panel(project, tmp_path, monkeypatch):
    from playwright.sync_api import expect

    monkeypatch.delenv("NBSUBAGENTS_DISPLAY", raising=False)
    # The child asks first; the next step is slow (the scripted model takes 20 s) so that the steer lands while
    # the model thinks: after that step's tool call the steer's words are the last user message, which the
    # scripted model plans from, so the run then reads src/app.py. (With 8 s, the whole suite at once once left the
    # click to the kernel after the run's end.)
    write_notebook(project / "talk.ipynb", [
        SETUP,
        'talk = nbsubagents.run("scout", "ask: Which file? [a.md | b.md]\\nsleep: 20\\nread README.md", '
        'name="talk", ask=True)',
    ])
    with JupyterLab(project, tmp_path / "jupyter") as lab, lab_page(lab, "talk.ipynb") as session:
        page = session.page
        session.run_all_cells()
        talk = panel(page, "talk")
        header = talk.locator(".nbsubagents-header")
        expect(header).to_contain_text("waiting", timeout=120_000)  # the question is open: the header says so
        question = talk.locator(".nbsubagents-open-question")
        expect(question.locator(".nbsubagents-question-title")).to_contain_text("Which file?")
        expect(question.locator(".nbsubagents-option")).to_have_count(2)
        talk.scroll_into_view_if_needed()
        page.screenshot(path=str(ARTIFACTS / "conversation-question.png"))
        question.locator(".nbsubagents-option", has_text="b.md").click()
        expect(talk.locator(".nbsubagents-line.nbsubagents-answer").first).to_contain_text("answer (person): b.md",
                                                                                     timeout=60_000)
        expect(header).not_to_contain_text("waiting")
        expect(talk.locator(".nbsubagents-open-question")).to_have_count(0)

        talk.locator(".nbsubagents-message").click()  # the message box opens beside the run's lines
        talk.locator(".nbsubagents-steer-text textarea").fill("read src/app.py")
        talk.locator(".nbsubagents-steer").click()
        # the click's round trip through the kernel: seconds when the machine is busy (the whole suite at once). Its
        # note lasts until the run takes the steer, which pi may do at once: then the note can be gone before the
        # page is looked at again, and the run's line says it instead
        sent = talk.locator(".nbsubagents-talk-note", has_text="steer sent at").or_(
            talk.locator(".nbsubagents-user", has_text="you (steer, "))
        expect(sent.first).to_be_attached(timeout=30_000)
        expect(talk.locator(".nbsubagents-user").first).to_contain_text("you (steer, ", timeout=60_000)
        expect(talk.locator(".nbsubagents-user").first).to_contain_text("): read src/app.py")
        page.screenshot(path=str(ARTIFACTS / "conversation-steered.png"))

        expect(header).to_contain_text("completed", timeout=120_000)
        # the end: the record replaces the live panel; its message box is gone, the conversation stays
        expect(talk.locator(".nbsubagents-steer-box")).to_have_count(0)
        expect(talk.locator(".nbsubagents-user").first).to_contain_text("read src/app.py")
        expect(talk.locator(".nbsubagents-answer").first).to_contain_text("answer (person): b.md")
        page.screenshot(path=str(ARTIFACTS / "conversation-ended.png"))
    assert session.errors == [] and session.offsite() == []

    directory = run_dir(project, "talk")
    result = json.loads((directory / "result.json").read_text())
    assert result["status"] == "completed"
    ((question_event,),) = [[q for q in result["questions"] if q["title"].startswith("Which file?")]]
    assert question_event["answer"] == "b.md" and question_event["by"] == "person"
    assert [(m["type"], m.get("kind"), m.get("text")) for m in result["conversation"]
            if m["type"] == "user_message"] == [("user_message", "steer", "read src/app.py")]
    seen = events(directory)
    asked = [e for e in seen if e["type"] == "tool_result" and e.get("name") == "ask"]
    assert asked and "b.md" in asked[0]["text"]  # the answer reached the child as the ask tool's result
    steered = next(i for i, e in enumerate(seen) if e["type"] == "user_message")
    reads = [(i, e["args"].get("path")) for i, e in enumerate(seen) if e["type"] == "tool_call"
             and e.get("name") == "read"]
    # the steer went to pi while the model was still thinking about README.md: that read ends, then the steer
    # is the last user message, so the run reads what it said (and read it only after it)
    assert [path for i, path in reads if i > steered][-1] == "src/app.py", reads
    assert "src/app.py" not in [path for i, path in reads if i < steered], reads
    assert "src/app.py" in result["finalText"]


@pytest.mark.browser
def test_the_message_box_posts_while_a_foreground_run_keeps_the_kernel_busy(project, tmp_path, monkeypatch):
    """The box's typed text and its click reach the kernel while the run's cell still executes: the message is
    in the run directory (its inbox, or already taken by the run as a ``user_message`` event) before the run
    ended."""
    from playwright.sync_api import expect

    monkeypatch.delenv("NBSUBAGENTS_DISPLAY", raising=False)
    write_notebook(project / "busy.ipynb", [SETUP, 'slow = nbsubagents.run("scout", "sleep: 6\\nread README.md", '
                                                   'name="slow")'])
    with JupyterLab(project, tmp_path / "jupyter") as lab, lab_page(lab, "busy.ipynb") as session:
        page = session.page
        session.run_all_cells()
        slow = panel(page, "slow")
        expect(slow.locator(".nbsubagents-header")).to_contain_text("running", timeout=120_000)
        slow.locator(".nbsubagents-message").click()
        box = slow.locator(".nbsubagents-steer-box")
        expect(box).to_be_visible()
        box.locator(".nbsubagents-steer-text textarea").fill("say: steered from the panel")
        box.locator(".nbsubagents-followup").click()
        # the note, or (the run's turn had ended and it took the follow-up at once) the line that replaced it
        sent = slow.locator(".nbsubagents-talk-note", has_text="follow-up sent at ").or_(
            slow.locator(".nbsubagents-user", has_text="you (follow-up, "))
        expect(sent.first).to_be_attached(timeout=12_000)
        expect(slow.locator(".nbsubagents-header")).to_contain_text("completed", timeout=120_000)
        expect(slow.locator(".nbsubagents-steer-box")).to_have_count(0)  # the record of the end has no box
    assert session.errors == []

    directory = run_dir(project, "slow")
    wait_for(lambda: (directory / "result.json").exists(), what="the run's result")
    posted = [json.loads(p.read_text()) for p in sorted((directory / "inbox").glob("*.json"))] \
        if (directory / "inbox").is_dir() else []
    posted += [e for e in events(directory) if e["type"] == "user_message"]
    assert [(m["kind"], m["text"]) for m in posted] == [("follow_up", "say: steered from the panel")], posted
    (end,) = [e for e in events(directory) if e["type"] == "run_end"]
    assert parse_iso(posted[0]["at"]) < end["ts"]  # posted while the run went, not once the cell was done
