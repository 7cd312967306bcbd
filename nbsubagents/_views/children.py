"""A run's sub-agents as compact lines under its panel (issue 58): one line per run it delegated, theirs under them.

``Children(run)`` finds them in the registry (``_registry.tree``: the rows whose ``parent`` links them to the run),
never in anything a child printed, and says of each ``✓ scout a1b2c3 · completed: 3 files · $0.0012``: its status
glyph, its preset, its run id's random tail (``get_run`` takes it), what it does now (its latest progress line,
read from its events.jsonl from where the last look stopped) or how it ended, and what it spent. ``refresh()`` is
what a panel's clock calls: a run that may not delegate costs nothing, one that may is read at most every
``CHILD_POLL`` seconds, and of a running sub-agent only the events it added since are read.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._child.artifacts import TERMINAL, EventTail, RunPaths, read_json
from .._child.events import Tally
from .._child.formatter import ProgressFormatter
from .._registry import tree as registry_tree
from .._style import glyph, shorten
from .masking import masker

if TYPE_CHECKING:
    from .._child.secrets import Masker
    from .._lifecycle.handle import Run

__all__ = ["Children", "ChildLine", "CHILD_POLL", "DOING_WIDTH"]

CHILD_POLL = 1.0   # seconds between two looks at a delegating run's sub-agents
DOING_WIDTH = 72   # what a sub-agent does (or how it ended), cut to this many characters


@dataclass(frozen=True)
class ChildLine:
    """One sub-agent under its panel: ``depth`` 1 for the run's own sub-agents, 2 for theirs."""

    run_id: str
    depth: int
    status: str
    preset: str
    doing: str
    cost: float
    tokens: int = 0  # its spend, which the budget of a run above it covers (issue 58: a tree's budget)
    calls: int = 0
    turns: int = 0

    @property
    def short(self) -> str:
        """The run id's random tail, which ``get_run`` takes."""
        return self.run_id.rpartition("-")[2] or self.run_id

    @property
    def rest(self) -> str:
        """``scout a1b2c3 · completed: merged · $0.0012``: the line after its glyph."""
        return " · ".join(p for p in (f"{self.preset} {self.short}", self.doing, f"${self.cost:.4f}") if p)

    @property
    def text(self) -> str:
        """``✓ scout a1b2c3 · completed: merged · $0.0012``, without its indent."""
        return f"{glyph(self.status)} {self.rest}"

    def indented(self, base: str = "  ") -> str:
        return base * self.depth + self.text


class _Follow:
    """A running sub-agent's latest progress line and spend, from the events it added since the last look."""

    def __init__(self, run_dir: Path) -> None:
        self.tail = EventTail(RunPaths(run_dir).events)
        self.formatter = ProgressFormatter()
        self.tally = Tally()
        self.latest = ""

    def read(self) -> None:
        for event in self.tail.read_new():
            self.tally.add(event)
            line = self.formatter.format(event)
            if line is not None and line.text.strip():
                self.latest = line.text.strip().splitlines()[0]


def ended_words(row: dict[str, Any], run_dir: Path) -> str:
    """How a sub-agent ended: ``completed: <its answer's first words>``, or its status, its stop reason (first: a
    line is cut short) and its error: ``failed (tree_budget:cost): The tree under run … reached its budget``."""
    status = str(row.get("status") or "")
    if status == "completed":
        answer = (read_json(RunPaths(run_dir).result) or {}).get("finalText") or ""
        return f"completed: {answer}" if str(answer).strip() else "completed"
    reason, error = row.get("stop_reason"), row.get("error_message")
    head = f"{status} ({reason})" if reason and reason != status else status
    return f"{head}: {error}" if error else head


def _levels(tree: registry_tree.Tree, level: int = 0) -> list[tuple[registry_tree.Tree, int]]:
    """Every node under ``tree`` with its level below it (1 for its children), depth first."""
    return [pair for kid in tree.kids for pair in [(kid, level + 1), *_levels(kid, level + 1)]]


class Children:
    """The sub-agents of ``run`` (at every depth) as ``ChildLine`` s, oldest first under each parent."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self.lines: list[ChildLine] = []
        self._follow: dict[str, _Follow] = {}
        self._ended: dict[str, str] = {}  # run id -> how it ended (read once)
        self._looked = float("-inf")

    @property
    def may_have(self) -> bool:
        """Whether the run may have sub-agents: it may delegate (its record says so), or some were found."""
        return bool(self.run.record.delegate) or bool(self.lines)

    def refresh(self, *, force: bool = False) -> bool:
        """Look again (at most every ``CHILD_POLL`` seconds unless ``force``); True when a line changed."""
        now = time.monotonic()
        if not self.may_have or (not force and now - self._looked < CHILD_POLL):
            return False
        self._looked = now
        try:
            tree = registry_tree.subtree(self.run.run_id, self.run.project)
        except Exception:  # the registry is a bonus here: a panel never fails over its sub-agents
            return False
        mask = masker()  # once a look (finding the masker in force costs more than a line)
        lines = [self._line(node, depth, mask) for node, depth in _levels(tree)] if tree else []
        changed = lines != self.lines
        self.lines = lines
        return changed

    def _line(self, node: dict[str, Any], depth: int, mask: Masker) -> ChildLine:
        run_id, status = str(node["run_id"]), str(node.get("status") or "queued")
        run_dir = Path(str(node.get("run_dir") or ""))
        cost = float(node.get("cost") or 0.0)
        tokens, calls, turns = int(node.get("total_tokens") or 0), int(node.get("tool_calls") or 0), 0
        if status in TERMINAL:
            self._follow.pop(run_id, None)
            if run_id not in self._ended:
                self._ended[run_id] = mask.text(ended_words(node, run_dir))
            doing = self._ended[run_id]
        else:
            follow = self._follow.get(run_id)
            if follow is None:
                follow = self._follow[run_id] = _Follow(run_dir)
            follow.read()
            doing = mask.text(follow.latest) if follow.latest else "queued" if status == "queued" else "starting"
            tally = follow.tally
            cost, tokens, calls = max(cost, tally.cost), max(tokens, tally.tokens), max(calls, tally.tool_calls)
            turns = tally.turns
        preset = str(node.get("preset") or node.get("name") or "?")
        return ChildLine(run_id, depth, status, preset, shorten(doing, DOING_WIDTH), cost, tokens, calls, turns)

    def text_lines(self) -> list[str]:
        """``Sub-agents:`` and one line each, indented by depth ([] when there are none)."""
        return ["Sub-agents:", *(child.indented() for child in self.lines)] if self.lines else []
