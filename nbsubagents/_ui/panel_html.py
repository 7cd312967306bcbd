"""A run panel's HTML, from its state (``views.panel_state.PanelState``): the header, the window of the latest lines,
the lines above it, and the final output and error, each with the CSS it needs (sent with every value, so a saved
notebook keeps the look). Functions without widgets: ``panels.RunPanel`` sets what they return as its widgets' values.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

from .._style import DARK_SCOPE, ERROR_STYLE, MONO_STYLE, MUTED_STYLE, STATUS_CSS, attrs, glyph, plural
from .._style import color as status_color

if TYPE_CHECKING:
    from .._views.panel_state import PanelState

# How each kind of formatter line looks; sent with every window so a saved notebook keeps it.
LINE_CSS = (
    "<style>"
    ".nbsubagents-lines{" + MONO_STYLE + "}"
    ".nbsubagents-lines .nbsubagents-failed,.nbsubagents-lines .nbsubagents-error{" + ERROR_STYLE + "}"
    + DARK_SCOPE + " .nbsubagents-lines .nbsubagents-failed," + DARK_SCOPE + " .nbsubagents-lines .nbsubagents-error"
    "{color:" + status_color("failed", dark=True) + "}"
    ".nbsubagents-lines .nbsubagents-assistant{color:var(--jp-brand-color1,#1976d2);"
    "border-left:2px solid var(--jp-brand-color1,#1976d2);padding-left:6px}"
    ".nbsubagents-lines .nbsubagents-thinking{" + MUTED_STYLE + ";font-style:italic}"
    ".nbsubagents-lines .nbsubagents-done,.nbsubagents-lines .nbsubagents-info,"
    ".nbsubagents-lines .nbsubagents-placeholder{" + MUTED_STYLE + "}"
    ".nbsubagents-lines .nbsubagents-waiting{" + MUTED_STYLE + ";font-style:italic}"
    ".nbsubagents-lines .nbsubagents-user{font-weight:600;border-left:3px solid " + status_color("queued")
    + ";padding-left:6px}"
    ".nbsubagents-lines .nbsubagents-question{font-weight:600;border-left:3px solid " + status_color("waiting")
    + ";padding-left:6px}"
    ".nbsubagents-lines .nbsubagents-answer{border-left:3px solid " + status_color("waiting") + ";padding-left:6px}"
    ".nbsubagents-lines .nbsubagents-fallback{border-left:3px solid " + status_color("aborted") + ";padding-left:6px}"
    ".nbsubagents-lines .nbsubagents-notice{" + MUTED_STYLE + "}"
    "</style>"
)


# One card for queued, running and ended (the static record draws the same card inline). Once the kernel is gone
# (restart, shutdown), JupyterLab marks every widget view of the old kernel ``jupyter-widgets-disconnected``: the
# panel then greys out, drops its live controls and its status, and says what is known: nothing, until a kernel
# looks at the run again (``nbsubagents.get_run(ID)``).
PANEL_CSS = (
    "<style>"
    ".nbsubagents-panel.nbsubagents-live{border:1px solid rgba(127,127,127,.5);border-left:4px solid "
    + status_color("queued") + ";border-radius:3px;padding:6px 10px;margin:3px 0}"
    + "".join(f".nbsubagents-panel.nbsubagents-live:has(.nbsubagents-status-{s}){{border-left-color:{status_color(s)}}}"
              for s in ("running", "waiting", "completed", "failed", "aborted"))
    + ".nbsubagents-header .nbsubagents-name{overflow:hidden;text-overflow:ellipsis;white-space:nowrap;"
    "max-width:60ch;display:inline-block;vertical-align:bottom}"
    ".nbsubagents-header .nbsubagents-gone{display:none}"
    ".nbsubagents-header.jupyter-widgets-disconnected .nbsubagents-gone{display:block;font-weight:600}"
    ".nbsubagents-header.jupyter-widgets-disconnected .nbsubagents-status,"
    ".nbsubagents-header.jupyter-widgets-disconnected .nbsubagents-icon,"
    ".nbsubagents-header.jupyter-widgets-disconnected .nbsubagents-elapsed{display:none}"
    ".nbsubagents-panel.nbsubagents-live:has(.jupyter-widgets-disconnected){filter:grayscale(1);opacity:.7;"
    "border-left-color:rgba(127,127,127,.6)}"
    ".nbsubagents-panel:has(.jupyter-widgets-disconnected) .nbsubagents-waiting{display:none}"
    ".nbsubagents-cancel.jupyter-widgets-disconnected{display:none !important}"
    ".nbsubagents-message.jupyter-widgets-disconnected{display:none !important}"
    ".nbsubagents-panel:has(.jupyter-widgets-disconnected) .nbsubagents-steer-box,"
    ".nbsubagents-panel:has(.jupyter-widgets-disconnected) .nbsubagents-questions{display:none !important}"
    "</style>"
)


def header(state: PanelState, status: str, run_status: str | None = None) -> str:
    """The header of ``status`` as shown (``waiting`` for a running run with an open question); its numbers
    are those of ``run_status`` (the run's own status, the same but for ``waiting``)."""
    pieces = []
    for field, text in state.header_fields(run_status or status):
        text = html.escape(text, quote=False)
        if field == "failed":
            pieces.append(f'· <span {attrs("failed", "nbsubagents-failed-steps", "font-weight:600")}>{text}</span>')
        else:
            pieces.append(f'<span class="nbsubagents-{field}">· {text}</span>')  # hidden with its dot
    name = html.escape(state.run.name)
    hint = html.escape(f'nbsubagents.get_run("{state.run.run_id}")')
    return (f'{STATUS_CSS}{PANEL_CSS}<div class="nbsubagents-status-{status}">'
            f'<span {attrs(status, "nbsubagents-icon")}>{glyph(status)}</span> '
            f'<b class="nbsubagents-name" title="{name}">{name}</b> '
            f'<span {attrs(status, "nbsubagents-status", "font-weight:600")}>{status}</span> '
            f'<span class="nbsubagents-meta" style="{MUTED_STYLE}">{" ".join(pieces)}</span>'
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
    return f'{LINE_CSS}<div class="nbsubagents-lines">{body}</div>'


def history(state: PanelState) -> str:
    """The lines above the window (each line shows once: here or in the window)."""
    dropped = state.line_count - len(state.history)
    earlier = list(state.history)[:max(0, state.earlier_lines(state.window()) - dropped)]
    note = (f'<div class="nbsubagents-line nbsubagents-placeholder">({plural(dropped, "earlier line")} '
            f'not kept here: see {html.escape(str(state.run.paths.transcript), quote=False)})</div>'
            if dropped > 0 else "")
    return f'{LINE_CSS}<div class="nbsubagents-lines">{note}{"".join(piece for _, _, piece in earlier)}</div>'


def final(state: PanelState) -> str:
    """An ended run's output, its error and its run id."""
    parts = []
    output = state.final_output()
    if output:
        parts.append(f'<div class="nbsubagents-output" style="{MONO_STYLE};border-left:3px solid '
                     f'var(--jp-success-color1,#388e3c);padding-left:8px;margin:4px 0">'
                     f'{html.escape(output, quote=False)}</div>')
    error = state.shown_error()
    if error:
        parts.append(f'<div {attrs("failed", "nbsubagents-error", MONO_STYLE)}>'
                     f'{html.escape(error, quote=False)}</div>')
    parts.append(f'<div class="nbsubagents-runid" style="{MUTED_STYLE};font-size:11px">'
                 f'{html.escape(state.run.run_id, quote=False)}</div>')
    return "".join(parts)
