"""Delegation (issue 58): what a run may delegate, the tool server that lets it, and the limits of its tree.

A run whose ``delegate`` option names presets (or is True) gets the tool server ``delegate``
(``nbsubagents._lifecycle.delegation_server``): its model calls ``delegate`` (a preset and a task, in the foreground
or the background), ``delegate_wait`` and ``delegate_result``. A sub-run starts through the same path as a notebook's
call (``prepare``, then ``handle.launch``: run folder, registry row, isolation, guards), with its place in the tree:
``parent`` (the run that delegated it), ``tree_root`` (the first run of the tree) and ``depth``.

The limits of a tree are the root call's: ``max_depth`` (default 2: the root's children and theirs) and
``max_children`` (default 8: sub-agents started in the whole tree, all depths counted). Budgets (``max_cost``,
``max_tokens``, ``max_turns``, ``max_tool_calls``) are each run's own as before, and a delegating run's budget also
covers every run under it: the root's is the tree's. So ``run("lead", ..., max_cost=1)`` costs at most 1 with all it
delegated, which is what the person who wrote it bought (separate ``tree_max_*`` options would leave the root's own
``max_cost`` silently leaking through its children: the peers' #94013, #38519).

Everything the server trusts comes from the environment the kernel gave it (``tool_server``): the child cannot
change it. Run folders and the registry are the child's to write to as well, so what is read from them counts
spend and finds rows, never grants anything.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any, Mapping

from .._child import budgets
from .._child.events import Tally
from .._child.tree_end import ENV, TOOLS, SERVER as NAME
from .._child.tool_servers import ToolServer, python_argv
from .._config import NbSubagentsError
from .._preset_files.shared_fields import delegate_presets
from .._registry import tree as registry_tree

__all__ = ["NAME", "TOOLS", "ENV", "MAX_DEPTH", "MAX_CHILDREN", "tree_fields", "tool_server", "refusal", "Spend",
           "tree_budget_stop"]

MAX_DEPTH = 2
MAX_CHILDREN = 8
TREE_BUDGET = "tree_budget"  # a run stopped because its tree's budget was spent: stopReason tree_budget:<kind>


def _presets(value: Any) -> tuple[str, ...] | bool | None:
    """The ``delegate`` value as resolved (a magic's ``--delegate yes`` collects ``[True]``)."""
    if isinstance(value, (list, tuple)) and any(v is True for v in value):
        return True
    if isinstance(value, (list, tuple)) and all(v is False for v in value):
        return None
    return delegate_presets(value, "delegate")


def tree_fields(run_id: str, delegate: Any, max_depth: int | None, max_children: int | None,
                budget: Mapping[str, Any] | None, position: Mapping[str, Any] | None = None, *,
                isolated: bool = False) -> dict[str, Any]:
    """The record's ``parent``, ``tree_root``, ``depth`` and ``delegate`` of a run being prepared: ``position`` is
    what the delegating run's server gave (None: a notebook's run, the root of its own tree). A sub-run keeps its
    tree's ``max_depth`` and ``max_children`` (its own call cannot widen them) and the budgets of the runs above
    it, to which its own is added. ``isolated``: the run works in a sandboxed worktree, where it cannot delegate."""
    position = dict(position or {})
    presets = _presets(delegate)
    for key, value in (("max_depth", max_depth), ("max_children", max_children)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise NbSubagentsError(f"{key} must be a whole number of at least 0, got {value!r}")
    fields: dict[str, Any] = {"parent": position.get("parent"), "tree_root": position.get("root"),
                              "depth": int(position.get("depth") or 0)}
    if isinstance(position.get("toolCall"), str):  # the parent's call that started it, as its harness named it
        fields["tool_call"] = position["toolCall"]
    if presets is None:
        fields["delegate"] = None
        return fields
    if isolated:  # its sandbox makes the project's run folders and the run keys read-only: no sub-run could start
        raise NbSubagentsError("A run that may delegate cannot run isolated (isolation='worktree') yet: its sandbox "
                               "keeps it from writing the run folders its sub-agents need. Drop one of the two.")
    above = list(position.get("budgets") or [])
    fields["delegate"] = {
        "presets": True if presets is True else list(presets),
        "maxDepth": position["maxDepth"] if "maxDepth" in position else (MAX_DEPTH if max_depth is None
                                                                          else max_depth),
        "maxChildren": position["maxChildren"] if "maxChildren" in position else (
            MAX_CHILDREN if max_children is None else max_children),
        "budgets": above + ([{"run": run_id, "budget": dict(budget)}] if budget else []),
    }
    return fields


def tool_server(run_id: str, run_dir: Path, cwd: str, fields: Mapping[str, Any]) -> ToolServer | None:
    """The run's delegation tool server (None: it may not delegate). ``fields`` are its record's tree fields
    (``tree_fields``); the kernel's prepare step calls this with the values it is writing, never reading them back
    from the run folder."""
    delegate = fields.get("delegate")
    if not delegate:
        return None
    config = {"run": run_id, "runDir": str(run_dir), "cwd": cwd, "root": fields.get("tree_root") or run_id,
              "depth": int(fields.get("depth") or 0), **delegate}
    return ToolServer(NAME, python_argv(f"{__package__}.delegation_server"), {ENV: json.dumps(config)}, TOOLS)


def position_for_child(config: Mapping[str, Any]) -> dict[str, Any]:
    """What a server gives ``prepare`` for a sub-run of its run (``tree_fields``' ``position``)."""
    return {"parent": config["run"], "root": config["root"], "depth": int(config["depth"]) + 1,
            "maxDepth": config["maxDepth"], "maxChildren": config["maxChildren"],
            "budgets": config.get("budgets") or []}


# -- spend ---------------------------------------------------------------------------------------------------------
class Spend:
    """Each run's spend so far from its ``events.jsonl``, read on from where the last look stopped."""

    def __init__(self) -> None:
        self._seen: dict[Path, tuple[int, Tally]] = {}
        self._lock = threading.Lock()  # a server's calls and its budget watch read the same runs

    def of(self, run_dir: Path) -> Tally:
        with self._lock:
            return self._of(Path(run_dir) / "events.jsonl")

    def _of(self, path: Path) -> Tally:
        offset, tally = self._seen.get(path, (0, Tally()))
        try:
            with open(path, "rb") as fh:
                fh.seek(offset)
                data = fh.read()
        except OSError:
            return tally
        end = data.rfind(b"\n") + 1  # a line still being written waits for the next look
        for line in data[:end].splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict):
                tally.add(event)
        self._seen[path] = (offset + end, tally)
        return tally

    def total(self, run_dirs: list[Path]) -> Tally:
        """The spend of ``run_dirs`` together."""
        total = Tally()
        for run_dir in run_dirs:
            one = self.of(run_dir)
            for name in ("turns", "tool_calls", "input", "output", "cache_read", "cache_write", "cost"):
                setattr(total, name, getattr(total, name) + getattr(one, name))
        return total


def subtree_dirs(run_id: str, project: Path) -> list[Path]:
    """The folders of ``run_id`` and every run under it, as the registry knows them."""
    found = registry_tree.subtree(run_id, project)
    return [Path(node["run_dir"]) for node in found.walk()] if found is not None else []


def tree_budget_stop(run_id: str, budget: Mapping[str, Any], spent: Tally) -> tuple[str, str] | None:
    """``(stopReason, message)`` when the runs under ``run_id`` together reached ``budget`` (meta.json's form)."""
    over = budgets.Budget(dict(budget)).exceeded(spent)
    if over is None:
        return None
    kind = over[0].split(":", 1)[1]
    return f"{TREE_BUDGET}:{kind}", f"The tree under run {run_id} reached its budget: {over[1]}"


# -- what a spawn may not do ------------------------------------------------------------------------------------
def refusal(config: Mapping[str, Any], preset: Any, task: Any, started: int,
            spent: Mapping[str, Tally]) -> str | None:
    """Why the run of ``config`` may not start a sub-agent of ``preset`` now (None: it may). ``started``: how many
    sub-agents its tree has started; ``spent``: the spend of the subtree of each run whose budget covers it."""
    if not isinstance(preset, str) or not preset.strip():
        return "preset must be the name of a preset"
    if not isinstance(task, str) or not task.strip():
        return "task must say what the sub-agent should do"
    allowed = config.get("presets")
    if allowed is not True and preset not in (allowed or ()):
        return (f'preset "{preset}" is not one this run may delegate to (it may: '
                f"{', '.join(allowed or ()) or 'none'})")
    depth = int(config.get("depth") or 0) + 1
    if depth > int(config.get("maxDepth", MAX_DEPTH)):
        return (f"a sub-agent here would be at depth {depth}, and this tree's max_depth is {config.get('maxDepth')}:"
                " do the work yourself")
    most = int(config.get("maxChildren", MAX_CHILDREN))
    if started >= most:
        return f"this tree has started {started} sub-agents, its max_children: do the work yourself"
    for entry in config.get("budgets") or ():
        owner = str(entry.get("run"))
        stop = tree_budget_stop(owner, entry.get("budget") or {}, spent.get(owner) or Tally())
        if stop is not None:
            return f"{stop[1]}; no sub-agent may start under it"
    return None
