"""A running run's conversation controls in its panel: one row per open question (a text box and Answer, a
button per option, or Allow / Deny) and the message box (Steer, Follow up).

Everything is posted to the run directory's inbox (``child.inbox.post``), so it works for any run, whoever
started it; what the run took shows in the panel's lines (its events), not here. Clicks and typed text may
arrive on the kernel's click subshell: the panel's lock guards the state.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

from .._child import inbox
from .._templates import part
from .._views.conversation import at_words, question_text
from .kernel import new_widget, route_clicks, shared

if TYPE_CHECKING:
    from .._lifecycle.handle import Run

__all__ = ["TalkBox"]


# The layouts of a panel's buttons and of what it hides (each a shared part: ``kernel.shared``).
BUTTON_LAYOUT = {"width": "auto", "flex": "0 0 auto"}
HIDDEN_LAYOUT = {"display": "none"}


def _label_style(w: Any) -> Any:
    """The style of a text box with a visible label (its ``description``, which ipywidgets ties to the box) as wide
    as its words."""
    return shared(w.Text.class_traits()["style"].klass, description_width="initial")


class TalkBox:
    """The open questions' rows (``questions_box``) and the message box (``steer_box``) of one run's panel, which
    the Message button (``message_button``, placed by the panel beside Cancel) opens while the run goes.

    The message box (a text box, Steer, Follow up and a note) is built when a person first opens it: most runs
    are never written to, and its widgets would be a third of every panel's. Until then ``steer_text``,
    ``steer_button``, ``follow_button`` and ``note`` are None.
    """

    def __init__(self, run: Run, lock: threading.RLock, widgets: Any, subshell: Any, *, live: bool = False) -> None:
        w = self._w = widgets
        self.run, self._lock, self._subshell = run, lock, subshell
        self.questions_box = new_widget(w.VBox, "nbsubagents-questions")
        self._rows: dict[str, Any] = {}         # open question id -> its row (rebuilt when the open ones change)
        self._sent: dict[str, Any] = {}         # question id -> the answer posted from here (until it is taken)
        self._taken = 0                         # messages the run has taken (its user_message events)
        self._taken_at_note: int | None = None  # ... when the note said one was sent
        self._live = live
        self.message_button = new_widget(w.Button, "nbsubagents-message", description="Message", icon="comment",
                                         tooltip="Write to the run: Steer or Follow up",
                                         layout=BUTTON_LAYOUT if live else {**BUTTON_LAYOUT, **HIDDEN_LAYOUT})
        self.message_button.on_click(lambda _b: self.open())
        self.steer_box = new_widget(w.VBox, "nbsubagents-steer-box", layout=HIDDEN_LAYOUT)
        self.steer_text: Any = None
        self.steer_button: Any = None
        self.follow_button: Any = None
        self.note: Any = None
        self.ended = False
        route_clicks(self.message_button, subshell)

    def open(self) -> None:
        """Build and show the message box (the Message button's click; may run on the click subshell)."""
        w = self._w
        with self._lock:
            if self.steer_text is not None or self.ended:
                return
            self.steer_text = new_widget(w.Textarea, "nbsubagents-steer-text", rows=1, description="Message:",
                                         style=_label_style(w),
                                         placeholder="A message to the run: Steer (after the current tool call) "
                                         "or Follow up (after this turn)", layout={"flex": "1 1 auto", "width": "auto"})
            self.steer_button = new_widget(w.Button, "nbsubagents-steer", description="Steer", icon="share",
                                           tooltip="Deliver the message after the current tool call",
                                           layout=BUTTON_LAYOUT)
            self.follow_button = new_widget(w.Button, "nbsubagents-followup", description="Follow up", icon="reply",
                                            tooltip="Deliver the message when the run's current turn ends",
                                            layout=BUTTON_LAYOUT)
            self.steer_button.on_click(lambda _b: self._on_message("steer"))
            self.follow_button.on_click(lambda _b: self._on_message("follow_up"))
            self.note = new_widget(w.HTML, "nbsubagents-talk-note")
            for control in (self.steer_text, self.steer_button, self.follow_button):
                route_clicks(control, self._subshell)  # a typed message syncs on the subshell too, before its click
            row = new_widget(w.HBox, children=[self.steer_text, self.steer_button, self.follow_button],
                             layout={"align_items": "center"})
            with self.steer_box.hold_sync():  # its children and its layout in one message
                self.steer_box.children = (row, self.note)
                self._show(self.steer_box, self._live, {})
            self._show(self.message_button, False, BUTTON_LAYOUT)

    # -- what the panel calls ---------------------------------------------------------------------------
    def update(self, questions: list[dict[str, Any]], *, live: bool, taken: int) -> None:
        """Show these open questions and, while the run is ``live``, the message box or the button that opens it;
        ``taken`` is how many messages the run has taken so far (a note that one was sent goes once the run
        took it)."""
        self._taken = taken
        if self._taken_at_note is not None and taken > self._taken_at_note:
            self._taken_at_note = None  # the run took the message: its line says it, the note goes
            self.note.value = ""
        self._show_questions(questions)
        self._live = live
        opened = self.steer_text is not None
        self._show(self.message_button, live and not opened, BUTTON_LAYOUT)
        self._show(self.steer_box, live and opened, {})

    def _show(self, widget: Any, shown: bool, layout: dict[str, Any]) -> None:
        """Show or hide ``widget`` by giving it the shared layout that does (one message, none if it has it)."""
        wanted = shared(self._w.Layout, **(layout if shown else {**layout, **HIDDEN_LAYOUT}))
        if widget.layout is not wanted:
            widget.layout = wanted

    def end(self) -> None:
        """The run ended: nothing more can be sent."""
        with self._lock:
            self.ended = True
            for control in (self.steer_button, self.follow_button, self.steer_text):
                if control is not None:
                    control.disabled = True

    def typed(self) -> bool:
        """Text typed in the message box or an answer box and not sent yet."""
        boxes = [self.steer_text] if self.steer_text is not None else []
        boxes += [c for row in self._rows.values() for c in row._nbsubagents["controls"]
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
        title = new_widget(w.HTML, "nbsubagents-question-title",
                           value=part("bits.html", "question", words=words, text=question_text(question)))
        controls: list[Any] = []
        if approval:
            for description, value, style_name, cls in (("Allow", True, "success", "nbsubagents-allow"),
                                                        ("Deny", False, "danger", "nbsubagents-deny")):
                button = new_widget(w.Button, cls, description=description, button_style=style_name,
                                    tooltip=f"{description} this: the run goes on with your decision",
                                    layout={"width": "auto"})
                button.on_click(lambda _b, v=value: self._on_answer(qid, v))
                controls.append(button)
        elif method == "select" and isinstance(question.get("options"), list) and question["options"]:
            for option in question["options"]:
                button = new_widget(w.Button, "nbsubagents-option", description=str(option),
                                    tooltip=f"Answer: {option}", layout={"width": "auto"})
                button.on_click(lambda _b, v=str(option): self._on_answer(qid, v))
                controls.append(button)
        else:
            editor = {"rows": 3} if method == "editor" else {}
            box = new_widget(w.Textarea if editor else w.Text, "nbsubagents-answer-text", description="Your answer:",
                             style=_label_style(w),
                             placeholder=str(question.get("placeholder") or "Your answer"),
                             layout={"flex": "1 1 auto", "width": "auto"}, **editor)
            button = new_widget(w.Button, "nbsubagents-answer-button", description="Answer", button_style="primary",
                                tooltip="Send this answer to the run", layout={"width": "auto"})
            button.on_click(lambda _b: self._on_answer(qid, box.value))
            controls += [box, button]
        note = new_widget(w.HTML, "nbsubagents-answer-note")
        for control in controls:
            route_clicks(control, self._subshell)
        row = new_widget(w.VBox, "nbsubagents-open-question", f"nbsubagents-open-question-{method}",
                         children=[title, new_widget(w.HBox, children=controls,
                                                     layout={"flex_flow": "row wrap", "align_items": "center"}), note])
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
        try:  # bound to the question as shown: an answer to other words is refused
            inbox.post(self.run.dir, "answer", question=row._nbsubagents["question"], value=value)
        except PermissionError as exc:
            row._nbsubagents["note"].value = part("bits.html", "note", text=f"Not sent: {exc}")
            return
        words = ("Allow" if value is True else "Deny") if isinstance(value, bool) else str(value)
        row._nbsubagents["note"].value = part("bits.html", "note",
                                              text=f"sent at {at_words(time.time())}: {words} · the run takes it next")

    def _on_message(self, kind: str) -> None:
        """Post the message box's text as a steer or a follow-up."""
        with self._lock:
            text = self.steer_text.value.strip()
            if self.ended:  # it ended between the typing and the click: say so rather than drop it unseen
                self.note.value = part("bits.html", "note", text="The run had ended: this was not sent. "
                                       "run.follow_up(text) continues its session as a new run.")
                return
            if not text:
                self.note.value = part("bits.html", "note", text="Type a message first: Steer delivers it after "
                                       "the current tool call, Follow up when the current turn ends.")
                return
            self.steer_text.value = ""
            taken = self._taken
        try:
            inbox.post(self.run.dir, kind, text)
        except PermissionError as exc:
            self.note.value = part("bits.html", "note", text=f"Not sent: {exc}")
            return
        self._taken_at_note = taken
        said = "steer" if kind == "steer" else "follow-up"
        self.note.value = part("bits.html", "note",
                               text=f"{said} sent at {at_words(time.time())}: it shows above once the run takes it")
