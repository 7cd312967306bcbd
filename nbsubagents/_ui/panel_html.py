"""A run panel's HTML, from its state (``views.panel_state.PanelState``): the header, the window of the latest lines,
the lines above it, and the final output and error, in the classes of the package's stylesheet (which the panel
sends once, ``_templates.stylesheet()``). Functions without widgets: ``panels.RunPanel`` sets what they return as
its widgets' values.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

from .._style import glyph, plural
from .._templates import ink

if TYPE_CHECKING:
    from .._views.panel_state import PanelState

def header(state: PanelState, status: str, run_status: str | None = None) -> str:
    """The header of ``status`` as shown (``waiting`` for a running run with an open question); its numbers
    are those of ``run_status`` (the run's own status, the same but for ``waiting``)."""
    pieces = []
    for field, text in state.header_fields(run_status or status):
        text = html.escape(text, quote=False)
        if field == "failed":
            pieces.append(f'· <span {ink("failed", "nbsubagents-failed-steps nbsubagents-bold")}>{text}</span>')
        else:
            pieces.append(f'<span class="nbsubagents-{field}">· {text}</span>')  # hidden with its dot
    name = html.escape(state.run.name)
    hint = html.escape(f'nbsubagents.get_run("{state.run.run_id}")')
    return (f'<div class="nbsubagents-status-{status}">'
            f'<span {ink(status, "nbsubagents-icon")}>{glyph(status)}</span> '
            f'<b class="nbsubagents-name" title="{name}">{name}</b> '
            f'<span {ink(status, "nbsubagents-status nbsubagents-bold")}>{status}</span> '
            f'<span class="nbsubagents-meta nbsubagents-muted">{" ".join(pieces)}</span>'
            f'<span class="nbsubagents-gone">unknown: kernel restarted · this is the last state it showed; '
            f'<code>{hint}</code> in a cell says how the run ended</span></div>')


def window(state: PanelState, status: str, lines: list[tuple[str, str, str]]) -> str:
    """The window: the latest ``lines`` (``state.window()``), else what stands in for them; then what the run
    waits on."""
    if lines:
        body = "".join(piece for _, _, piece in lines)
    else:
        placeholder = state.placeholder(status)
        body = f'<div class="nbsubagents-line nbsubagents-placeholder">{placeholder}</div>' if placeholder else ""
    waiting = state.waiting(status)
    if waiting:
        body += f'<div class="nbsubagents-line nbsubagents-waiting">{waiting}</div>'
    return f'<div class="nbsubagents-lines">{body}</div>'


def history(state: PanelState) -> str:
    """The lines above the window (each line shows once: here or in the window)."""
    dropped = state.line_count - len(state.history)
    earlier = list(state.history)[:max(0, state.earlier_lines(state.window()) - dropped)]
    note = (f'<div class="nbsubagents-line nbsubagents-placeholder">({plural(dropped, "earlier line")} '
            f'not kept here: see {html.escape(str(state.run.paths.transcript), quote=False)})</div>'
            if dropped > 0 else "")
    return f'<div class="nbsubagents-lines">{note}{"".join(piece for _, _, piece in earlier)}</div>'


def final(state: PanelState) -> str:
    """An ended run's output, its error and its run id."""
    parts = []
    output = state.final_output()
    if output:
        parts.append(f'<div class="nbsubagents-output nbsubagents-live-output nbsubagents-mono">'
                     f'{html.escape(output, quote=False)}</div>')
    error = state.shown_error()
    if error:
        parts.append(f'<div {ink("failed", "nbsubagents-error nbsubagents-mono")}>'
                     f'{html.escape(error, quote=False)}</div>')
    parts.append(f'<div class="nbsubagents-runid nbsubagents-muted nbsubagents-small">'
                 f'{html.escape(state.run.run_id, quote=False)}</div>')
    return "".join(parts)
