"""A run panel's static record: what a saved notebook keeps beside (and, at the end, instead of) the widget view.

``record_html`` and ``record_text`` render a ``PanelState`` (its ``static_html``/``static_text`` mask them) as
self-contained HTML (the package's stylesheet, status colours inline) without JavaScript, and as plain text, so
GitHub, nbviewer, ``nbconvert --to html/markdown`` and a kernel-less JupyterLab show the final panel;
``group_static_html``/``group_static_text`` do the same for a group of runs. The HTML keeps the live panel's
class names and holds no newline, so it stays one HTML block where Markdown embeds it.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Iterable

from .._child.artifacts import TERMINAL
from .._style import glyph, plural
from .._templates import Html, part, render, stylesheet
from .conversation import question_text
from .masking import masker

if TYPE_CHECKING:
    from .._child.secrets import Masker
    from .panel_state import PanelState

# Group header words for each status, in the order they are listed.
GROUP_WORDS = {"running": "running", "waiting": "waiting for an answer", "queued": "queued", "completed": "done",
               "failed": "failed", "aborted": "aborted"}
def gone_words(state: PanelState) -> str:
    """``unknown: kernel shut down at 14:02:11 · nbsubagents.get_run("ID") says how it ended``."""
    stamp = time.strftime("%H:%M:%S", time.localtime(state.kernel_gone_at or time.time()))
    return (f'unknown: the kernel shut down or restarted at {stamp} · '
            f'nbsubagents.get_run("{state.run.run_id}") says how it ended')


def record_html(state: PanelState) -> str:
    """The panel as one line of HTML (``PanelState.static_html`` masks it)."""
    status, final = state.static_parts()
    gone = state.kernel_gone_at is not None and not final
    if gone:
        status = "unknown"
    questions = [] if gone else state.open_questions(status)
    window = state.window()
    lines = [(kind, text) for kind, text, _ in state.without_open_questions(window, questions)]  # said below
    if not window and not (final and state.final_output()):
        lines = [("placeholder", state.placeholder(status))]
    if not final:
        lines.append(("waiting", state.waiting(status)))
    earlier = state.earlier_lines(window)
    dropped = state.line_count - len(state.history)
    return render("record.html", run_id=state.run.run_id, name=state.run.name, gone=gone,
                  shown=state.shown_status(status, questions), meta=state.header_fields(status),
                  gone_words=gone_words(state) if gone else "", earlier=earlier, dropped=dropped,
                  hidden=[(kind, text) for kind, text, _ in list(state.history)[:earlier - dropped]],
                  lines=[(kind, text) for kind, text in lines if text],
                  questions=[(str(q.get("id")), question_text(q), question_hint(state, q)) for q in questions],
                  children=state.children_lines(final), final=final, output=state.final_output() if final else "",
                  error=state.shown_error() if final else "",
                  stamp="" if final or gone else f' · as of {time.strftime("%H:%M:%S")}')


def question_hint(state: PanelState, question: dict[str, Any]) -> str:
    """How to answer ``question`` from any cell or shell (the panel's own box is gone without a kernel)."""
    run_id = state.run.run_id
    if question.get("approval") or question.get("method") == "confirm":
        return f'nbsubagents.answer("{run_id}", True) or False, or: nbsubagents approve {run_id} allow|deny'
    return f'nbsubagents.answer("{run_id}", "…"), or: nbsubagents answer {run_id} "…"'


def record_text(state: PanelState) -> str:
    """The panel as plain text (``PanelState.static_text`` masks it)."""
    status, final = state.static_parts()
    questions = [] if final else state.open_questions(status)
    shown = state.shown_status(status, questions)
    meta = " · ".join(words for _, words in state.header_fields(status))
    lines = [f"{glyph(shown)} {state.run.name} {shown} · {meta}"]
    if state.kernel_gone_at is not None and not final:
        lines = [f"? {state.run.name} unknown · {meta}", gone_words(state)]
    window = state.window()
    earlier = state.earlier_lines(window)
    if earlier > 0:
        lines.append(f"  ({plural(earlier, 'earlier line')}: run.transcript has every line)")
    asked = questions if state.kernel_gone_at is None or final else []  # said below, with how to answer
    lines += [f"  {text}" for _, text, _ in state.without_open_questions(window, asked)]
    if not window and not (final and state.final_output()) and state.placeholder(status):
        lines.append(f"  {state.placeholder(status)}")
    if not final and state.waiting(status):
        lines.append(f"  {state.waiting(status)}")
    state.children_lines(final)
    lines += state.children.text_lines()
    for question in asked:
        lines.append(f"{glyph('waiting')} waiting for your answer: {question_text(question)}")
        lines.append(f"  {question_hint(state, question)}")
    if final:
        output = state.final_output()
        if output:
            lines.append("Output:")
            lines += [f"  {row}" for row in output.splitlines()]
        error = state.shown_error()
        if error:
            lines.append(f"Error: {error}")
    lines.append(f"Run id: {state.run.run_id}" + ("" if final else f" · as of {time.strftime('%H:%M:%S')}"))
    return "\n".join(lines)


def group_header_text(states: Iterable[PanelState]) -> str:
    """``Sub-agents: 2 running, 1 waiting for an answer, 1 done, 1 failed``."""
    statuses = [s.shown_status(s.status) for s in states]
    counts = {word: n for status, word in GROUP_WORDS.items() if (n := statuses.count(status))}
    return "Sub-agents: " + ", ".join(f"{n} {word}" for word, n in counts.items())


def group_header_of(statuses: list[str]) -> str:
    """The group header of runs shown with these statuses, the waiting, failed and aborted counts in their colours (a
    live group gives what its panels show, which costs no look at the runs' files)."""
    return part("bits.html", "group_header", counts=_counts(statuses))


def _counts(statuses: list[str]) -> list[tuple[str, int, str]]:
    return [(status, n, word) for status, word in GROUP_WORDS.items() if (n := statuses.count(status))]


def group_static_record(states: list[PanelState]) -> tuple[str, str]:
    """``(group_static_text(states), group_static_html(states))``, masked by one masker."""
    mask = masker()
    return group_static_text(states, mask), group_static_html(states, mask)


def group_static_html(states: list[PanelState], mask: Masker | None = None) -> str:
    mask = mask or masker()
    sheet = stylesheet("record", "edges")  # once for the group, not once per record
    return part("bits.html", "group", counts=_counts([s.shown_status(s.status) for s in states]),
                records=Html("".join(s.static_html(mask).replace(sheet, "", 1) for s in states)),
                run_ids=[s.run.run_id for s in states] if all(s.status in TERMINAL for s in states) else [])


def group_static_text(states: list[PanelState], mask: Masker | None = None) -> str:
    mask = mask or masker()
    parts = [group_header_text(states), *(s.static_text(mask) for s in states)]
    if all(s.status in TERMINAL for s in states):
        parts.append("Run ids: " + ", ".join(s.run.run_id for s in states))
    return "\n\n".join(parts)
