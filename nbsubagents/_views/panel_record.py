"""A run panel's static record: what a saved notebook keeps beside (and, at the end, instead of) the widget view.

``record_html`` and ``record_text`` render a ``PanelState`` (its ``static_html``/``static_text`` mask them) as
self-contained HTML with inline styles and no JavaScript, and as plain text, so GitHub, nbviewer, ``nbconvert --to
html/markdown`` and a kernel-less JupyterLab show the final panel; ``group_static_html``/``group_static_text`` do the
same for a group of runs. The HTML keeps the live panel's class names and holds no newline, so it stays one HTML
block where Markdown embeds it.
"""

from __future__ import annotations

import html
import time
from typing import TYPE_CHECKING, Any, Iterable

from .._child.artifacts import TERMINAL
from .._style import MONO_STYLE, MUTED_INK, badge, glyph, plural
from .._style import color as status_color
from .conversation import CONVERSATION_KINDS, question_text
from .masking import masker

if TYPE_CHECKING:
    from .._child.secrets import Masker
    from .panel_state import PanelState

# Group header words for each status, in the order they are listed.
GROUP_WORDS = {"running": "running", "waiting": "waiting for an answer", "queued": "queued", "completed": "done",
               "failed": "failed", "aborted": "aborted"}
# How each kind of formatter line looks, inline (a static record carries no stylesheet). Text keeps the page's
# colour; a kind is told by a coloured rule at its left (a colour that reads on any background) and words.
LINE_STYLES = {
    "failed": f"border-left:3px solid {status_color('failed')};padding-left:6px;font-weight:600",
    "error": f"border-left:3px solid {status_color('failed')};padding-left:6px;font-weight:600",
    "assistant": f"border-left:2px solid {status_color('running')};padding-left:6px",
    "thinking": MUTED_INK + ";font-style:italic",
    "done": MUTED_INK, "info": MUTED_INK, "placeholder": MUTED_INK, "waiting": MUTED_INK + ";font-style:italic",
    # the conversation: the person's words stand out; what the child asked and its answers in the waiting colour
    "user": f"border-left:3px solid {status_color('queued')};padding-left:6px;font-weight:600",
    "question": f"border-left:3px solid {status_color('waiting')};padding-left:6px;font-weight:600",
    "answer": f"border-left:3px solid {status_color('waiting')};padding-left:6px",
    "fallback": f"border-left:3px solid {status_color('aborted')};padding-left:6px",
    "notice": MUTED_INK,
}


def _esc(text: str) -> str:
    """Escaped text on one HTML line: newlines become ``<br>``."""
    return html.escape(text, quote=False).replace("\r", "").replace("\n", "<br>")


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
    shown = state.shown_status(status, questions)
    run = state.run
    name = _esc(run.name)
    head = (f'<div class="nbsubagents-header" style="display:flex;flex-wrap:wrap;gap:2px 6px;'
            f'align-items:baseline"><span class="nbsubagents-icon" style="font-weight:bold">{glyph(shown)}'
            f'</span> <b class="nbsubagents-name" title="{name}" style="overflow:hidden;text-overflow:ellipsis;'
            f'white-space:nowrap;max-width:100%">{name}</b> {badge(shown, shown, "nbsubagents-status")} '
            f'<span class="nbsubagents-meta" style="{MUTED_INK}">{_meta(state, status)}</span></div>')
    window = state.window()
    lines = "".join(_line_html(kind, text) for kind, text, _ in window)
    if not window and not (final and state.final_output()):
        lines = _line_html("placeholder", state.placeholder(status))
    if not final:
        lines += _line_html("waiting", state.waiting(status))
    parts = [head]
    if gone:
        parts.append(f'<div class="nbsubagents-gone" style="font-weight:600">{_esc(gone_words(state))}</div>')
    earlier = state.earlier_lines(window)
    if earlier > 0:  # the lines the window does not show, once: behind a toggle
        dropped = state.line_count - len(state.history)
        hidden = list(state.history)[:earlier - dropped]
        note = (f'<div style="{MUTED_INK}">({plural(dropped, "earlier line")} not kept here: '
                f'run.transcript has them)</div>' if dropped > 0 else "")
        parts.append(f'<details class="nbsubagents-history-toggle" style="margin:2px 0"><summary '
                     f'style="{MUTED_INK};cursor:pointer">{plural(earlier, "earlier line")}</summary>'
                     f'<div class="nbsubagents-history" style="{MONO_STYLE}">{note}'
                     f'{"".join(_line_html(kind, text) for kind, text, _ in hidden)}</div></details>')
    if lines:
        parts.append(f'<div class="nbsubagents-window" style="{MONO_STYLE};margin:4px 0">{lines}</div>')
    if questions:
        parts.append(_questions_html(state, questions))
    foot = []
    if final:
        output = state.final_output()
        if output:
            foot.append(f'<div class="nbsubagents-output" style="{MONO_STYLE};border:1px solid '
                        f'rgba(127,127,127,.5);border-left:3px solid {status_color("completed")};'
                        f'padding:6px 8px;margin:4px 0">{_esc(output)}</div>')
        error = state.shown_error()
        if error:
            foot.append(f'<div class="nbsubagents-error" style="{MONO_STYLE};{LINE_STYLES["error"]}">'
                        f'{_esc(error)}</div>')
    stamp = "" if final or gone else f' · as of {time.strftime("%H:%M:%S")}'
    foot.append(f'<div class="nbsubagents-runid" style="{MUTED_INK};font-size:12px">{_esc(run.run_id)}{stamp}'
                f'</div>')
    parts.append(f'<div class="nbsubagents-final">{"".join(foot)}</div>' if final else "".join(foot))
    run_id = html.escape(run.run_id)
    dim = "opacity:.75;" if gone else ""
    return (f'<div class="nbsubagents-static nbsubagents-panel nbsubagents-run-{run_id} '
            f'nbsubagents-status-{shown}" data-run-id="{run_id}" '
            f'style="{dim}border:1px solid rgba(127,127,127,.5);border-left:4px solid {status_color(shown)};'
            f'border-radius:3px;padding:6px 10px;margin:3px 0;font-family:var(--jp-ui-font-family,'
            f'-apple-system,Segoe UI,Helvetica,Arial,sans-serif);font-size:13px;line-height:1.45">'
            f'{"".join(parts)}</div>')


def question_hint(state: PanelState, question: dict[str, Any]) -> str:
    """How to answer ``question`` from any cell or shell (the panel's own box is gone without a kernel)."""
    run_id = state.run.run_id
    if question.get("approval") or question.get("method") == "confirm":
        return f'nbsubagents.answer("{run_id}", True) or False, or: nbsubagents approve {run_id} allow|deny'
    return f'nbsubagents.answer("{run_id}", "…"), or: nbsubagents answer {run_id} "…"'


def _questions_html(state: PanelState, questions: list[dict[str, Any]]) -> str:
    """The open questions, each with how to answer it: what the record says while the run waits."""
    rows = "".join(
        f'<div class="nbsubagents-open-question" data-question-id="{html.escape(str(q.get("id")))}" '
        f'style="{LINE_STYLES["question"]}">{glyph("waiting")} waiting for your answer: '
        f'{_esc(question_text(q))}<div style="{MUTED_INK};font-weight:normal">{_esc(question_hint(state, q))}'
        f'</div></div>' for q in questions)
    return f'<div class="nbsubagents-questions" style="margin:4px 0">{rows}</div>'


def _meta(state: PanelState, status: str) -> str:
    return " · ".join(f'<span class="nbsubagents-failed-steps" style="font-weight:600">{_esc(text)}</span>'
                      if field == "failed" else _esc(text) for field, text in state.header_fields(status))


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
    lines += [f"  {text}" for _, text, _ in window]
    if not window and not (final and state.final_output()) and state.placeholder(status):
        lines.append(f"  {state.placeholder(status)}")
    if not final and state.waiting(status):
        lines.append(f"  {state.waiting(status)}")
    if state.kernel_gone_at is None or final:
        for question in questions:
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


_CLASSED = frozenset({"failed", "error", "waiting", *CONVERSATION_KINDS})


def _line_html(kind: str, text: str) -> str:
    if not text:
        return ""
    style = LINE_STYLES.get(kind)
    cls = f' class="nbsubagents-{kind}"' if kind in _CLASSED else ""
    return f'<div{cls} style="{style}">{_esc(text)}</div>' if style else f"<div{cls}>{_esc(text)}</div>"


def group_header_text(states: Iterable[PanelState]) -> str:
    """``Sub-agents: 2 running, 1 waiting for an answer, 1 done, 1 failed``."""
    statuses = [s.shown_status(s.status) for s in states]
    counts = {word: n for status, word in GROUP_WORDS.items() if (n := statuses.count(status))}
    return "Sub-agents: " + ", ".join(f"{n} {word}" for word, n in counts.items())


def group_header_html(states: Iterable[PanelState]) -> str:
    """The group header with its waiting, failed and aborted counts in their colours."""
    return group_header_of([s.shown_status(s.status) for s in states])


def group_header_of(statuses: list[str]) -> str:
    """The group header of runs shown with these statuses (a live group gives what its panels show, which costs no
    look at the runs' files)."""
    parts = []
    for status, word in GROUP_WORDS.items():
        n = statuses.count(status)
        if n:
            text = f"{n} {word}"
            coloured = status in ("waiting", "failed", "aborted")
            parts.append(badge(status, text, f"nbsubagents-group-{status}") if coloured else text)
    return f"<b>Sub-agents: {', '.join(parts)}</b>"


def group_static_record(states: list[PanelState]) -> tuple[str, str]:
    """``(group_static_text(states), group_static_html(states))``, masked by one masker."""
    mask = masker()
    return group_static_text(states, mask), group_static_html(states, mask)


def group_static_html(states: list[PanelState], mask: Masker | None = None) -> str:
    mask = mask or masker()
    done = all(s.status in TERMINAL for s in states)
    ids = ""
    if done:
        ids = (f'<div class="nbsubagents-run-ids" style="{MUTED_INK};font-size:12px">Run ids: '
               + ", ".join(f"<code>{html.escape(s.run.run_id)}</code>" for s in states) + "</div>")
    return (f'<div class="nbsubagents-static-group nbsubagents-group"><div class="nbsubagents-group-header" '
            f'style="font-family:var(--jp-ui-font-family,sans-serif);font-size:13px">'
            f'{group_header_html(states)}</div>{"".join(s.static_html(mask) for s in states)}{ids}</div>')


def group_static_text(states: list[PanelState], mask: Masker | None = None) -> str:
    mask = mask or masker()
    parts = [group_header_text(states), *(s.static_text(mask) for s in states)]
    if all(s.status in TERMINAL for s in states):
        parts.append("Run ids: " + ", ".join(s.run.run_id for s in states))
    return "\n\n".join(parts)
