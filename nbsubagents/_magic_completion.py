"""Tab completion of the ``%subagent`` magics: preset names after ``%subagent``/``%%subagent`` and in a
``%%subagents`` body, model names after ``--model``, the flags after ``-``. ``suggest`` decides what to offer
(plain text in, names out); ``register_completer`` hooks it into IPython's completer (its matcher API v2, else the older
``complete_command`` hook) and ``unregister_completer`` takes it out. IPython is imported when a matcher is made.
"""

from __future__ import annotations

import re
from typing import Any, Callable

from . import _api as api
from ._magic_args import run_flags
from ._pi import available_models, find_pi

# The magics' own flags; the run options' flags come from TaskSpec (magic_args.run_flags()).
_OWN_VALUE_FLAGS = ("-o", "--out", "--concurrency", "--executor")
_OWN_RUN_FLAGS = ("--bg", "--expand", "-o", "--executor")
_GROUP_FLAGS = ("--concurrency", "--expand", "-o", "--executor")


def _preset_names() -> list[str]:
    try:
        return [p.name for p in api.presets()]
    except Exception:  # a broken preset file must not break completion
        return []


def _model_names() -> list[str]:
    try:
        return list(available_models(find_pi()))
    except Exception:
        return []


def _value_flags() -> tuple[str, ...]:
    return (*run_flags(), *_OWN_VALUE_FLAGS)


def suggest(line_before_cursor: str, text_before_cursor: str | None = None) -> tuple[str, list[str]] | None:
    """What to offer at the cursor: ``("preset"|"model"|"option", names)`` or None (not ours).

    ``line_before_cursor`` is the cursor's line up to the cursor; ``text_before_cursor`` the whole cell
    up to it (for preset names inside a ``%%subagents`` body).
    """
    words = line_before_cursor.split()
    current = "" if not words or line_before_cursor[-1:].isspace() else words[-1]
    before = words if not current else words[:-1]
    cell = (text_before_cursor if text_before_cursor is not None else line_before_cursor).lstrip()
    if not words or words[0] not in ("%subagent", "%%subagent", "%%subagents"):
        if cell.startswith("%%subagents") and "\n" in cell and \
                re.fullmatch(r"\s*(-\s+)?preset:\s*\S*", line_before_cursor):
            return "preset", _preset_names()
        return None
    if words[0] == "%%subagents":
        return ("option", list(_GROUP_FLAGS)) if current.startswith("-") and len(before) >= 1 else None
    if len(before) == 0:  # still typing the magic's name
        return None
    previous = before[-1]
    if previous == "--model" or current.startswith("--model="):
        return "model", _model_names()
    if previous in _value_flags():
        return None  # a directory, a number, a name: not ours
    if current.startswith("-"):
        return "option", [*run_flags(), *_OWN_RUN_FLAGS]
    positional, skip = 0, False
    for word in before[1:]:
        if skip:
            skip = False
        elif word.startswith("-"):
            skip = "=" not in word and word in _value_flags()
        else:
            positional += 1
    return ("preset", _preset_names()) if positional == 0 else None


def _make_matcher() -> Callable[..., Any]:
    """IPython's matcher (API v2) of ``suggest``; ImportError on an IPython without that API (< 8.6)."""
    from IPython.core.completer import SimpleCompletion, context_matcher

    @context_matcher()
    def nbsubagents_matcher(context: Any) -> dict[str, Any]:
        lines = context.full_text.split("\n")
        before = "\n".join(lines[:context.cursor_line] + [context.text_until_cursor])
        found = suggest(context.text_until_cursor, before)
        if found is None:
            return {"completions": []}
        kind, names = found
        token = context.token.removeprefix("--model=")
        matches = [SimpleCompletion(name, type=kind) for name in names if name.startswith(token)]
        return {"completions": matches, "suppress": bool(matches)}

    nbsubagents_matcher._nbsubagents = True  # type: ignore[attr-defined]
    return nbsubagents_matcher


def _legacy_completer(_shell: Any, event: Any) -> list[str]:
    """``complete_command`` hook for IPython < 8.6 (no matcher API v2)."""
    found = suggest(event.text_until_cursor)
    return found[1] if found else []


def register_completer(shell: Any) -> None:
    completer = getattr(shell, "Completer", None)
    if completer is None:
        return
    unregister_completer(shell)
    try:
        completer.custom_matchers.append(_make_matcher())
    except ImportError:
        for key in ("%subagent", "%%subagent", "%%subagents"):
            shell.set_hook("complete_command", _legacy_completer, str_key=key)


def unregister_completer(shell: Any) -> None:
    completer = getattr(shell, "Completer", None)
    matchers = getattr(completer, "custom_matchers", None)
    if matchers is not None:
        matchers[:] = [m for m in matchers if not getattr(m, "_nbsubagents", False)]
