"""How a run's end is worded: the status glyphs and the one summary line every text surface shows.

``summary_line(run)`` is what a person reads when a run ends (``repr(run)``, the text renderer's last
line, a panel's plain record); ``extra_parts`` are the budget and isolation words a panel's header shares
with it. They take any run-like object (``result``, ``status``, ``name``, ``record``, ``id``, ``done`` and
optionally ``scores``), so they sit next to the formatter, below everything that shows runs. Standard
library only.
"""

from __future__ import annotations

from .budgets import describe

from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from typing import Any

__all__ = ["GLYPHS", "glyph", "summary_line", "extra_parts", "change_words"]

GLYPHS = {"queued": "○", "running": "↻", "waiting": "◷", "completed": "✓", "failed": "✗", "aborted": "■"}


def glyph(status: str) -> str:
    return GLYPHS.get(status, "?")


def summary_line(run: Any) -> str:
    """One line a person reads at the end of a run, shared by every text surface."""
    result = run.result or {}
    status = run.status
    parts = [f"{glyph(status)} {run.name} {status}"]
    if result.get("durationSeconds") is not None:
        parts[0] += f" in {result['durationSeconds']:.1f}s"
    usage = result.get("usage") or {}
    calls = result.get("toolCalls", 0)
    parts.append(f"{calls} tool call{'' if calls == 1 else 's'}")
    if usage.get("totalTokens"):
        parts.append(f"{usage['totalTokens']:,} tokens")
    if usage.get("cost"):
        parts.append(f"${usage['cost']:.4f}")
    scores = getattr(run, "scores", None)
    if scores:
        parts.append("scores " + ", ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}"
                                           for k, v in scores.items()))
    parts += extra_parts(run, {"max_turns": result.get("turns") or 0, "max_tool_calls": calls,
                               "max_tokens": usage.get("totalTokens") or 0, "max_cost": usage.get("cost") or 0})
    parts.append(run.run_id)
    text = " · ".join(parts)
    if result.get("errorMessage"):
        text += f"\n  {result['errorMessage']}"
    return text


def change_words(changes: dict[str, Any]) -> str:
    """An isolated run's changes as words: ``1 file +2 −0``."""
    return (f"{changes.get('files', 0)} file{'' if changes.get('files') == 1 else 's'} "
            f"+{changes.get('added', 0)} \u2212{changes.get('removed', 0)}")


def extra_parts(run: Any, spent: dict[str, Any]) -> list[str]:
    """``offline model`` (the project's offline setting sent the run to the scripted model; ``offline model in place
    of NAME`` when the call named a model), ``project config``
    (the agent loaded its project's own hooks, extensions, settings), ``inputs df, params`` (the notebook's values it
    was given, ``inputs=``), spend against the run's budget (``budget
    tools 3/20``) and an isolated run's ``+N −M``: the words every surface (summary line, panel header) shows for
    them."""
    record = run.record  # offline: the scripted model answered, in place of the model the call named (if any)
    asked, used = record.requested_model, record.resolved_model or ""
    instead = f" in place of {asked}" if record.requested_model_source == "call" and asked not in (
        used, used.partition("/")[2]) else ""
    parts = [f"offline model{instead}"] if record.offline else []
    if run.record.project_config:
        parts.append("project config")
    given = [e.get("name") for e in record.inputs or [] if isinstance(e, dict)]
    if given:
        parts.append("inputs " + ", ".join(map(str, given)))
    budget = run.record.budget
    if budget:  # a run that may delegate: its budget is its tree's (spent: the tree's)
        parts.append(("tree budget " if record.delegate else "budget ") + describe(budget, spent))
    changes = (run.result or {}).get("changes")
    if changes:
        parts.append(change_words(changes))
    elif run.record.isolation and not run.done:
        parts.append("isolated")
    return parts
