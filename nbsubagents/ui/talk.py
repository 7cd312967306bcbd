"""A running run's conversation controls in its panel: one row per open question (a text box and Answer, a
button per option, or Allow / Deny) and the message box (Steer, Follow up).

Everything is posted to the run directory's inbox (``child.inbox.post``), so it works for any run, whoever
started it; what the run took shows in the panel's lines (its events), not here. Clicks and typed text may
arrive on the kernel's click subshell: the panel's lock guards the state.
"""

from __future__ import annotations

import html
import threading
import time
from typing import TYPE_CHECKING, Any

from ..child import inbox
from ..style import MUTED_STYLE, attrs, glyph
from ..views.conversation import at_words, question_text
from .kernel import route_clicks

if TYPE_CHECKING:
    from ..lifecycle.handle import Run

__all__ = ["TalkBox"]


class TalkBox:
    """The open questions' rows (``questions_box``) and the message box (``steer_box``) of one run's panel."""

    def __init__(self, run: Run, lock: threading.RLock, widgets: Any, subshell: Any) -> None:
        w = self._w = widgets
        self.run, self._lock, self._subshell = run, lock, subshell
        self.questions_box = w.VBox([]).add_class("nbsubagents-questions")
        self._rows: dict[str, Any] = {}         # open question id -> its row (rebuilt when the open ones change)
        self._sent: dict[str, Any] = {}         # question id -> the answer posted from here (until it is taken)
        self._taken = 0                         # messages the run has taken (its user_message events)
        self._taken_at_note: int | None = None  # ... when the note said one was sent
        self.steer_text = w.Textarea(placeholder="A message to the run: Steer (after the current tool call) or "
                                     "Follow up (after this turn)", rows=1,
                                     layout=w.Layout(flex="1 1 auto", width="auto"))
        self.steer_text.add_class("nbsubagents-steer-text")
        self.steer_button = w.Button(description="Steer", icon="share", tooltip="Deliver the message after the "
                                     "current tool call", layout=w.Layout(width="auto", flex="0 0 auto"))
        self.steer_button.add_class("nbsubagents-steer")
        self.follow_button = w.Button(description="Follow up", icon="reply", tooltip="Deliver the message when "
                                      "the run's current turn ends", layout=w.Layout(width="auto", flex="0 0 auto"))
        self.follow_button.add_class("nbsubagents-followup")
        self.steer_button.on_click(lambda _b: self._on_message("steer"))
        self.follow_button.on_click(lambda _b: self._on_message("follow_up"))
        self.note = w.HTML().add_class("nbsubagents-talk-note")
        self.steer_box = w.VBox([w.HBox([self.steer_text, self.steer_button, self.follow_button],
                                        layout=w.Layout(align_items="center")), self.note],
                                layout=w.Layout(display="none"))
        self.steer_box.add_class("nbsubagents-steer-box")
        self.ended = False
        for control in (self.steer_text, self.steer_button, self.follow_button):
            route_clicks(control, subshell)  # a typed message syncs on the subshell too, before its click

    # -- what the panel calls ---------------------------------------------------------------------------
    def update(self, questions: list[dict[str, Any]], *, live: bool, taken: int) -> None:
        """Show these open questions and, while the run is ``live``, the message box; ``taken`` is how many
        messages the run has taken so far (a note that one was sent goes once the run took it)."""
        self._taken = taken
        if self._taken_at_note is not None and taken > self._taken_at_note:
            self._taken_at_note = None  # the run took the message: its line says it, the note goes
            self.note.value = ""
        self._show_questions(questions)
        display = None if live else "none"
        if self.steer_box.layout.display != display:
            self.steer_box.layout.display = display

    def end(self) -> None:
        """The run ended: nothing more can be sent."""
        self.ended = True
        self.steer_button.disabled = self.follow_button.disabled = self.steer_text.disabled = True

    def typed(self) -> bool:
        """Text typed in the message box or an answer box and not sent yet."""
        boxes = [self.steer_text] + [c for row in self._rows.values() for c in row._nbsubagents["controls"]
                                     if not c.disabled and isinstance(getattr(c, "value", None), str)]
        return any(box.value.strip() for box in boxes)

    # -- questions ------------------------------------------------------------------------------------
    def _show_questions(self, questions: list[dict[str, Any]]) -> None:
        """One row per open question, kept while it stays open (a row answered from here stays, disabled, until
        the run takes the answer)."""
        ids = [str(q.get("id")) for q in questions]
        if ids == list(self._rows):
            return
        rows = {}
        for question, qid in zip(questions, ids):
            rows[qid] = self._rows.pop(qid, None) or self._question_row(question)
        for row in self._rows.values():
            row.close()
        self._rows = rows
        self.questions_box.children = tuple(rows.values())

    def _question_row(self, question: dict[str, Any]) -> Any:
        """The controls of one question: a text box and Answer (input, editor), a button per option (select),
        or Allow / Deny (a confirmation: an approval)."""
        w = self._w
        qid = str(question.get("id"))
        method = str(question.get("method") or "input")
        approval = bool(question.get("approval")) or method == "confirm"
        words = "approval" if approval else "asks"
        title = w.HTML(f'<span {attrs("waiting", "nbsubagents-question-glyph")}>{glyph("waiting")}</span> '
                       f'<b>{words}:</b> {html.escape(question_text(question), quote=False)}')
        title.add_class("nbsubagents-question-title")
        controls: list[Any] = []
        if approval:
            for description, value, style_name, cls in (("Allow", True, "success", "nbsubagents-allow"),
                                                        ("Deny", False, "danger", "nbsubagents-deny")):
                button = w.Button(description=description, button_style=style_name,
                                  tooltip=f"{description} this: the run goes on with your decision",
                                  layout=w.Layout(width="auto"))
                button.add_class(cls)
                button.on_click(lambda _b, v=value: self._on_answer(qid, v))
                controls.append(button)
        elif method == "select" and isinstance(question.get("options"), list) and question["options"]:
            for option in question["options"]:
                button = w.Button(description=str(option), tooltip=f"Answer: {option}", layout=w.Layout(width="auto"))
                button.add_class("nbsubagents-option")
                button.on_click(lambda _b, v=str(option): self._on_answer(qid, v))
                controls.append(button)
        else:
            box = (w.Textarea(rows=3) if method == "editor" else w.Text())
            box.placeholder = str(question.get("placeholder") or "Your answer")
            box.layout = w.Layout(flex="1 1 auto", width="auto")
            box.add_class("nbsubagents-answer-text")
            button = w.Button(description="Answer", button_style="primary", tooltip="Send this answer to the run",
                              layout=w.Layout(width="auto"))
            button.add_class("nbsubagents-answer-button")
            button.on_click(lambda _b: self._on_answer(qid, box.value))
            controls += [box, button]
        note = w.HTML().add_class("nbsubagents-answer-note")
        for control in controls:
            route_clicks(control, self._subshell)
        row = w.VBox([title, w.HBox(controls, layout=w.Layout(flex_flow="row wrap", align_items="center")), note])
        row.add_class("nbsubagents-open-question")
        row.add_class(f"nbsubagents-open-question-{method}")
        row._nbsubagents = {"id": qid, "controls": controls, "note": note, "question": question}
        return row

    # -- clicks (may run on the click subshell) -------------------------------------------------------------
    def _on_answer(self, qid: str, value: Any) -> None:
        """Post the answer to question ``qid`` (True/False for Allow/Deny)."""
        with self._lock:
            row = self._rows.get(qid)
            if row is None or qid in self._sent:
                return
            self._sent[qid] = value
            for control in row._nbsubagents["controls"]:
                control.disabled = True
        inbox.post(self.run.dir, "answer", request_id=qid, value=value)
        words = ("Allow" if value is True else "Deny") if isinstance(value, bool) else str(value)
        row._nbsubagents["note"].value = (f'<span style="{MUTED_STYLE}">sent at {at_words(time.time())}: '
                                          f'{html.escape(words, quote=False)} · the run takes it next</span>')

    def _on_message(self, kind: str) -> None:
        """Post the message box's text as a steer or a follow-up."""
        with self._lock:
            text = self.steer_text.value.strip()
            if self.ended:
                return
            if not text:
                self.note.value = (f'<span style="{MUTED_STYLE}">Type a message first: Steer delivers it after '
                                   f'the current tool call, Follow up when the current turn ends.</span>')
                return
            self.steer_text.value = ""
            taken = self._taken
        inbox.post(self.run.dir, kind, text)
        self._taken_at_note = taken
        said = "steer" if kind == "steer" else "follow-up"
        self.note.value = (f'<span style="{MUTED_STYLE}">{said} sent at {at_words(time.time())}: it shows '
                           f'above once the run takes it</span>')
