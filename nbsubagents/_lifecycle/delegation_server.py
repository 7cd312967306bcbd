"""The delegation tool server (issue 58): ``delegate``, ``delegate_wait`` and ``delegate_result``, over MCP stdio.

Started by the child's harness as ``delegation.tool_server`` says, its whole configuration in
``NBSUBAGENTS_DELEGATE`` (the run it serves, its tree's root and depth, the presets it may start, the tree's limits,
the budgets above it).
A sub-run starts through ``prepare`` and ``handle.launch`` as a notebook's does. While the server lives, a watch
thread adds up the spend of its run's subtree; once it reaches the run's budget the run is stopped with the tree's
reason (its cancel request says it), and its supervisor settles the runs under it the same way, leaves first.

When its harness ends (stdin closed) or it is stopped, the sub-runs it started that are still going are cancelled,
each saying its parent ended: a sub-agent never outlives the run that asked for it.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._child import tree_end
from .._child.procs import MARKER
from .._child.run_files import exclusive
from .._child.tool_servers import Result, Tool, serve

if TYPE_CHECKING:
    from .handle import Run

# The server answers its harness before it loads the launch path (``_launch_path``, at the first call): a harness
# that starts its MCP servers while its model already asks (Claude Code) would otherwise find no tool yet.
NAME, TOOLS, ENV = tree_end.SERVER, tree_end.TOOLS, tree_end.ENV


@functools.cache
def _launch_path() -> Any:
    """``delegation_start`` (the launch path and the registry), loaded once, at the first call that needs it."""
    from . import delegation_start  # noqa: PLC0415 (see above: start-up first)

    return delegation_start


def _ask_to_stop(run_dir: Path, reason: str, stop_reason: str) -> None:
    try:
        tree_end.request(run_dir, reason, stop_reason)
    except OSError:
        pass  # the cancel goes on all the same; only its words are at stake


WATCH_EVERY = 1.0  # seconds between looks at the subtree's spend
WAIT_LIMIT = 3600.0  # the longest a delegate_wait waits


class Delegator:
    """The state of one server: its configuration and the sub-runs it started."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.run_id = str(config["run"])
        self.run_dir = Path(config["runDir"])
        self.project = self.run_dir.parents[3]  # <project>/.pi/subagents/runs/<id>
        self.spend: Any = None  # delegation.Spend, once the launch path is loaded
        self.children: dict[str, Run] = {}
        self.lock = threading.Lock()
        self.lock_spend = threading.Lock()
        self.stopped = threading.Event()

    def _ready(self) -> Any:
        """The launch path (``_launch_path``), and this server's spend reader."""
        lp = _launch_path()
        with self.lock_spend:
            if self.spend is None:
                self.spend = lp.delegation.Spend()
        return lp

    # -- the tools ----------------------------------------------------------------------------------------
    def delegate(self, args: dict[str, Any], call_id: str | None = None) -> Result:
        lp = self._ready()
        preset, task, background = args.get("preset"), args.get("task"), bool(args.get("background"))
        # one spawn at a time in the whole tree (its servers are processes of their own): max_children holds
        with self.lock, exclusive(self.run_dir.parent / str(self.config["root"]) / ".delegate.lock"):
            why = self._refusal(preset, task)
            if why is not None:
                return Result(f"Refused: {why}", True, {"refused": why})
            try:
                run = lp.start(self.config, str(preset), str(task), call_id)
            except Exception as exc:  # a preset that does not load, a model that is not there: the model reads why
                return Result(f"Refused: {exc}", True, {"refused": str(exc)})
            self.children[run.run_id] = run
        if background:
            return Result(f"Started run {run.run_id} ({preset}) in the background: delegate_wait or delegate_result "
                          "with its run_id gives its answer", details={"run_id": run.run_id, "status": "running"})
        return self._answer(self._wait(run, None))

    def wait(self, args: dict[str, Any]) -> Result:
        """``delegate_wait``: one background run (``run_id``) or every one this run started, until each ends."""
        timeout = float(args.get("timeout") or WAIT_LIMIT)
        wanted = [self._child(args["run_id"])] if args.get("run_id") else list(self.children.values())
        if not wanted:
            return Result("No sub-agents to wait for", details={"runs": []})
        ended = [self._wait(run, timeout) for run in wanted]
        answers = [self._answer(run) for run in ended]
        text = "\n\n".join(f"[{run.run_id} {run.preset} {run.status}]\n{answer.text}"
                           for run, answer in zip(ended, answers))
        return Result(text, any(a.is_error for a in answers), {"runs": [dict(a.details) for a in answers]})

    def result(self, args: dict[str, Any]) -> Result:
        """``delegate_result``: a sub-run's status and, once it ended, its answer (no wait)."""
        run = self._child(args.get("run_id"))
        if not run.done:
            return Result(f"Run {run.run_id} is still {run.status}", details={"run_id": run.run_id,
                                                                                "status": run.status})
        return self._answer(run)

    # -- helpers ------------------------------------------------------------------------------------------
    def _child(self, run_id: Any) -> Run:
        run = self.children.get(str(run_id))
        if run is None:
            known = ", ".join(self.children) or "none"
            raise ValueError(f"no sub-agent {run_id!r} of this run (its sub-agents: {known})")
        return run

    def _refusal(self, preset: Any, task: Any) -> str | None:
        root = str(self.config["root"])
        lp = self._ready()
        rows = lp.registry_tree.tree_rows(root, self.project)
        started = sum(1 for row in rows if row["run_id"] != root)
        spent = {str(entry["run"]): self.spend.total(lp.delegation.subtree_dirs(str(entry["run"]), self.project))
                 for entry in self.config.get("budgets") or ()}
        return lp.delegation.refusal(self.config, preset, task, started, spent)

    def _wait(self, run: Run, timeout: float | None) -> Run:
        run.wait(timeout)
        self._ready().registry.record(run)
        return run

    def _answer(self, run: Run) -> Result:
        details = {"run_id": run.run_id, "status": run.status, "stop_reason": (run.result or {}).get("stopReason")}
        if not run.done:
            return Result(f"Run {run.run_id} is still {run.status}", details=details)
        if run.status == "completed":
            return Result(run.output or "(the sub-agent said nothing)", details=details)
        return Result(f"The sub-agent {run.status}: {run.error or 'no reason given'}\n{run.output}".rstrip(), True,
                      details)

    # -- the tree's budget, the end ----------------------------------------------------------------------
    def watch(self) -> None:
        """Stop the run once its subtree spent its budget (the run's own budget: the last of ``budgets``)."""
        own = [e for e in self.config.get("budgets") or () if str(e.get("run")) == self.run_id]
        while own and not self.stopped.wait(WATCH_EVERY):
            if not self.children:
                continue  # its own spend alone is its supervisor's to judge
            lp = self._ready()
            spent = self.spend.total(lp.delegation.subtree_dirs(self.run_id, self.project))
            stop = lp.delegation.tree_budget_stop(self.run_id, own[0]["budget"], spent)
            if stop is not None:  # its sub-runs first (they settle theirs), then the run itself, each saying why
                self._cancel_children(stop[1], stop[0])
                _ask_to_stop(self.run_dir, stop[1], stop[0])
                return

    def _cancel_children(self, reason: str, stop_reason: str) -> None:
        for run in list(self.children.values()):
            if not run.done:
                _ask_to_stop(run.dir, reason, stop_reason)
                run.cancel()

    def end(self) -> None:
        """The run's harness is gone: its sub-runs still going are cancelled, saying why (its tree's budget when that
        is what stopped the run, else that it ended), as its supervisor would (``child.tree_end``)."""
        self.stopped.set()
        _, message, word = tree_end.verdict(self.run_dir)
        if (self.run_dir / tree_end.CANCEL_FILE).exists() and word.startswith(tree_end.TREE_BUDGET):
            self._cancel_children(message, word)
        else:
            self._cancel_children(f"its parent run {self.run_id} ended", tree_end.PARENT_ENDED)
        for run in list(self.children.values()):
            self._wait(run, 60)


def tools(delegator: Delegator) -> list[Tool]:
    allowed = delegator.config.get("presets")
    which = "any preset of the project" if allowed is True else "one of: " + ", ".join(allowed or ())
    return [
        Tool(TOOLS[0], f"Start a sub-agent from a preset ({which}) with a task. In the foreground "
             "(default) its answer is this tool's result; with background=true you get its run_id at once and read "
             "its answer later with delegate_wait or delegate_result. Refused past this tree's depth, sub-agent count "
             "or budget.",
             {"type": "object", "properties": {
                 "preset": {"type": "string", "description": "the preset to start"},
                 "task": {"type": "string", "description": "what the sub-agent should do"},
                 "background": {"type": "boolean", "description": "return its run_id at once"}},
              "required": ["preset", "task"]}, delegator.delegate, with_call_id=True),
        Tool(TOOLS[1], "Wait until a background sub-agent (run_id), or every one you started, has ended; "
             "their answers.", {"type": "object", "properties": {
                 "run_id": {"type": "string"}, "timeout": {"type": "number", "description": "seconds"}}},
             delegator.wait),
        Tool(TOOLS[2], "A background sub-agent's status, and its answer once it ended (no wait).",
             {"type": "object", "properties": {"run_id": {"type": "string"}}, "required": ["run_id"]},
             delegator.result),
    ]


def main(argv: list[str] | None = None) -> None:  # noqa: ARG001 (no arguments: its config is ENV)
    config = json.loads(os.environ[ENV])
    os.environ.pop(ENV, None)  # its sub-runs' supervisors get their own, never this one
    os.environ.pop(MARKER, None)  # nor its run's marker: ending that run's leftovers is not ending its sub-runs
    delegator = Delegator(config)

    def stop(signum: int, _frame: Any) -> None:
        raise SystemExit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, stop)
    threading.Thread(target=delegator.watch, daemon=True, name="delegate-watch").start()
    try:
        serve(tools(delegator), name=NAME)
    finally:
        delegator.end()
