"""The ``Run`` handle: one run, backed by its run directory; ``get_run`` finds one.

The kernel's side of a run is thin on purpose: it writes ``meta.json`` (``lifecycle.prepare``), starts the
supervisor (``launch(run)``) and then only reads the run directory. So a run started here and one found later
on disk (another kernel, after a restart) are the same kind of object. What a person says to a run (a steer, a
follow-up, an answer) is posted to its run directory too (``lifecycle.converse``), so any process can say it.
A ``Run`` is a plain object: its text is the summary line of ``child.summary``; how it shows in a notebook is
registered from above by ``nbsubagents._ui.attach`` (IPython's display formatters), and its report is a
``views.reports`` page.
"""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from .. import _registry as registry
from .._registry import tree as registry_tree
from .._child import artifacts, inbox, isolation
from .._child.artifacts import TERMINAL, RunPaths, read_json
from .._child.formatter import ProgressFormatter
from .._child.record import RunRecord, blank
from .._child.procs import alive, send
from .._child.summary import summary_line
from .._child.text import terminal_safe
from .._config import NbSubagentsError, current
from .._views import reports
from .._views.children import Children
from . import converse, inspection, interrupts, liveness, settle, typed
from .edge import edge
from .launch import launcher_for

if TYPE_CHECKING:
    import pandas

    from .._views.tables import Artifacts
    from .drive import Renderer
    from .launch import Process

SUPERVISOR_START_TIMEOUT = 10.0  # seconds cancel() waits for a starting supervisor's SIGTERM handler
SETTLE_TIMEOUT = 10.0  # how long Run.wait() gives the follower (the watcher) to finish with a run that ended
CHECK_EVERY = 2.0  # seconds between liveness looks while waiting for a run no process of ours follows
NOTICE_WAIT = 2.0  # the longest wait_for_question waits for the watcher to say the question it returns


class Run:
    """One sub-agent run, backed by its run directory."""

    def __init__(self, run_dir: str | Path, record: RunRecord | None = None) -> None:
        self.paths = RunPaths(Path(run_dir))
        self.record: RunRecord = record or blank(self.paths.dir)
        self.process: Process | None = None  # the supervisor this process started (lifecycle.launch)
        self.noted_running = False  # this process wrote the run's registry row as running (prepare, launch)
        self._result: dict[str, Any] | None = None
        self._tail = artifacts.EventTail(self.paths.events)
        self._formatter = ProgressFormatter(self.record.cwd)
        self.counts: dict[str, int] | None = None  # the registry's counts when nbsubagents.start() returned
        self._says_questions = False  # this process says the run's questions where its notices go (the watcher)
        self._questions_said: set[str] = set()  # the ids of those it has said
        self.output_class: type | None = None  # the class output_schema was given as, in the call that made it

    # -- identity -----------------------------------------------------------------------------
    @property
    def run_id(self) -> str:
        """The run's id: its run directory's name (``get_run`` also takes a unique prefix of it)."""
        return self.record.run_id or self.paths.dir.name

    @property
    def id(self) -> str:
        """``run_id``, by its older name."""
        return self.run_id

    @property
    def dir(self) -> Path:
        return self.paths.dir

    @property
    def project(self) -> Path:
        """The project folder the run belongs to (its run folder is ``<project>/.pi/subagents/runs/<id>``)."""
        return self.paths.project

    @property
    def name(self) -> str:
        return self.record.display_name

    @property
    def preset(self) -> str | None:
        return self.record.preset

    @property
    def harness(self) -> str:
        """The agent harness that ran it (``pi``, ``claude-code``, ``codex``, or one a package adds)."""
        return self.record.harness

    @property
    def model(self) -> str | None:
        """The model the run was started on; after a fallback to another model, the one that finished."""
        result = self.result
        if result and len(result.get("modelsTried") or ()) > 1 and result.get("model"):
            return result["model"]
        return self.record.resolved_model

    @property
    def task(self) -> str:
        return self.record.task

    # -- state --------------------------------------------------------------------------------
    @property
    def result(self) -> dict[str, Any] | None:
        """The parsed result.json once the run is terminal, else None."""
        if self._result is None:
            self._result = read_json(self.paths.result) or settle.unwritten(self.paths)
        return self._result

    @property
    def status(self) -> str:
        result = self.result
        if result is not None:
            return result.get("status", "failed")
        remote = launcher_for(self.record.runner).remote
        if (self.process is None or remote) and not self.paths.supervisor.exists():
            return "queued"  # not started yet (on a Dask cluster: no worker took it yet)
        if inbox.is_waiting(self.paths.dir):
            return "waiting"  # a question is open: the supervisor keeps a signed waiting.json while one is
        return "running"

    @property
    def done(self) -> bool:
        return self.status in TERMINAL

    @property
    def output(self) -> str:
        """The child's final assistant text ('' until the run ends)."""
        return (self.result or {}).get("finalText") or ""

    @property
    def error(self) -> str | None:
        return (self.result or {}).get("errorMessage")

    def events(self) -> list[dict[str, Any]]:
        return list(artifacts.read_events(self.paths.events))

    @property
    def transcript(self) -> str:
        try:
            return artifacts.read_text(self.paths.transcript)
        except OSError:
            return ""

    def events_frame(self) -> pandas.DataFrame:
        """One row per normalized event with the formatter's words for it (a pandas DataFrame)."""
        return inspection.events_frame(self.events(), self.record.cwd)

    @property
    def artifacts(self) -> Artifacts:
        """The run directory's files with their sizes."""
        return inspection.artifacts(self.paths.dir)

    @property
    def scores(self) -> dict[str, Any]:
        """What the experiment's scorers said of this run (``scores.json``; {} before scoring)."""
        return (read_json(self.paths.dir / "scores.json") or {}).get("scores") or {}

    @property
    def params(self) -> dict[str, Any]:
        """Its cell of an experiment (preset, model, task id, repeat and extra columns); {} outside one."""
        return dict(self.record.params or {})

    @property
    def files_changed(self) -> list[str]:
        """Paths the run changed: from its ``changes.json`` for an isolated run (relative to the repository or
        folder), else the paths the child wrote or edited successfully, as its events show them."""
        changes = read_json(self.paths.dir / "changes.json")
        if changes is not None:
            return [f["path"] for f in changes.get("fileChanges", [])]
        return inspection.files_changed(artifacts.read_events(self.paths.events), self.record.cwd)

    # -- typed results and isolation ----------------------------------------------------------
    @property
    def data(self) -> Any:
        """The value the child ended with, validated against ``output_schema`` (None without one): an instance of
        the class it was given as (a pydantic model, dataclass or TypedDict) when that class is at hand (this
        kernel's call, or its module imported here), else the JSON value."""
        value = (self.result or {}).get("data")
        cls = self.output_class or typed.load_class(self.record.output_type)
        if value is None or cls is None:
            return value
        try:
            return typed.instance(value, cls)
        except ValueError as exc:  # pydantic's ValidationError: what the JSON Schema check could not say
            raise NbSubagentsError(f"Run {self.run_id}'s data does not fit {cls.__name__}: {exc}. Its JSON value is "
                                   "run.result['data']") from None

    @property
    def outputs(self) -> dict[str, Any]:
        """The files ``outputs`` named, read back as objects (a DataFrame, a JSON value, an image); {} without
        ``outputs`` or before a completed run wrote them."""
        if not self.record.outputs or self.status != "completed":
            return {}
        return typed.read_outputs(self.paths.dir, self.record.outputs)

    @property
    def value(self) -> Any:
        """The typed value of a run (what ``%%subagent -o VAR`` binds): ``data`` with an ``output_schema``,
        ``outputs`` with ``outputs``, with both ``{"data": data, **outputs}``; None for a run without either."""
        if self.record.outputs and self.record.output_schema is not None:
            return {"data": self.data, **self.outputs}
        return self.outputs if self.record.outputs else self.data

    @property
    def changes(self) -> dict[str, Any] | None:
        """An isolated run's ``changes.json``: files, added, removed and one entry per file."""
        return read_json(self.paths.dir / "changes.json")

    @property
    def diff(self) -> str:
        """An isolated run's patch (``changes.patch``, a binary-safe ``git diff``); '' without one."""
        try:
            return artifacts.read_text(self.paths.dir / "changes.patch")
        except OSError:
            return ""

    def apply(self, check: bool = True) -> list[str]:
        """Apply this isolated run's changes to its original folder; returns the files changed.

        With ``check`` nothing is written unless the whole patch applies; a conflict raises
        NbSubagentsError naming the file. A patch is applied once; ``discard()`` drops it instead.
        """
        if not self.done:
            raise NbSubagentsError(f"Run {self.run_id} is still running: wait for it before applying its changes")
        return isolation.apply(self.paths.dir, check=check)

    def discard(self) -> None:
        """Drop this isolated run's changes: a kept worktree is removed and ``apply()`` refuses afterwards."""
        if not self.done:
            raise NbSubagentsError(f"Run {self.run_id} is still running: cancel or wait for it before discarding")
        isolation.discard(self.paths.dir)

    # -- its delegation tree (issue 58) ---------------------------------------------------------
    @property
    def children(self) -> list[Run]:
        """The runs this one started with its delegate tool, oldest first."""
        return [Run(row["run_dir"]) for row in registry_tree.children(self.run_id, self.project)]

    def tree(self) -> registry_tree.Tree:
        """This run and every run under it (nested dicts of their registry rows, ``children`` in each);
        ``print(run.tree())`` draws it as indented lines."""
        registry.record(self)  # its own row as its folder says now
        return (registry_tree.subtree(self.run_id, self.project)
                or registry_tree.Tree(run_id=self.run_id, name=self.name, status=self.status, children=[]))

    # -- control ------------------------------------------------------------------------------
    def wait(self, timeout: float | None = None) -> Run:
        """Block until the run is terminal (or ``timeout`` seconds pass); returns self.

        A run this kernel follows in the background is waited for until its panel shows the end and its
        ``on_done`` returned: the waiting cell then carries the panel's last updates, which ipykernel sends
        with the executing cell, into a notebook saved by nbclient or nbconvert.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        self._wait_until(lambda: False, deadline)
        if self.done:
            left = SETTLE_TIMEOUT
            if deadline is not None:
                left = max(0.0, min(left, deadline - time.monotonic()))
            edge.follower.settle(self.run_id, left)
        return self

    def _wait_until(self, until: Callable[[], bool], deadline: float | None) -> None:
        """Wait until the run is terminal, ``until()`` is true or the monotonic ``deadline`` passes: on its
        supervisor when this process started it, else looking every poll interval (and at its liveness now and
        then, when nobody here follows it)."""
        try:
            with interrupts.terminate_raises():
                self._wait_loop(until, deadline)
        except interrupts.STOPS:
            if interrupts.stops_caller():  # a script stops; the runs it started in the background go on, named
                interrupts.say_left_running()
            raise

    def _wait_loop(self, until: Callable[[], bool], deadline: float | None) -> None:
        interval = current().poll_interval  # resolved once: each read of a setting stats the settings files
        next_check = time.monotonic() + CHECK_EVERY
        while not self.done and not until():
            if deadline is not None and time.monotonic() >= deadline:
                break
            if self.process is not None:
                try:
                    self.process.wait(interval)
                except subprocess.TimeoutExpired:
                    pass
                if self.process.poll() is not None and self.result is None:
                    settle.lost(self.paths, self.record, exit_code=self.process.returncode)
            else:
                time.sleep(interval)
                if time.monotonic() >= next_check and edge.follower.get(self.run_id) is None:
                    # nobody here follows it: its supervisor (or its Dask scheduler) may be gone; settled if so
                    next_check = time.monotonic() + CHECK_EVERY
                    liveness.check(self.dir)
                    reread(self)

    def cancel(self) -> bool:
        """Ask the supervisor to abort the child (SIGTERM, SIGKILL after 5 s); False if already done."""
        if self.done:
            return False
        cancelled = launcher_for(self.record.runner).cancel(self)
        if cancelled is not None:  # a supervisor its launcher reaches its own way (on a Dask worker)
            return cancelled
        if self.process is not None:
            settle.request_cancel(self.paths)  # first: a supervisor that dies without a result ends "aborted"
            if self.process.poll() is None:
                # Until supervisor.json exists the supervisor has no SIGTERM handler yet: a signal then would
                # kill it instead of letting it record the abort. The wait is bounded: a supervisor that does
                # not get there in time is ended all the same, and settled as cancelled.
                deadline = time.monotonic() + SUPERVISOR_START_TIMEOUT
                while (self.process.poll() is None and not self.paths.supervisor.exists()
                       and time.monotonic() < deadline):
                    time.sleep(0.01)
                if self.process.poll() is None:
                    self.process.send_signal(signal.SIGTERM)
            return True
        info = read_json(self.paths.supervisor)
        if info is None and (self.paths.dir / "supervisor.log").exists():
            info = self._await_supervisor()  # launched by another process and still starting
        if info and alive(info.get("pid"), info.get("startTicks")):  # the same process: pids are reused
            settle.request_cancel(self.paths)
            if send(int(info["pid"]), signal.SIGTERM):
                return True
            # it ended between the look and the signal: judged below, as any supervisor that is gone
        if self.status == "queued":
            settle.cancelled_before_start(self.paths, self.record)
            registry.note(self)
            return True
        if info and info.get("host", registry.HOST) == registry.HOST and not reread(self).done:
            # its supervisor (on this machine) is gone without a result: settled as cancelled
            settle.request_cancel(self.paths)
            settle.lost(self.paths, self.record)
            registry.note(self)
            return reread(self).done
        return False

    # -- conversation (lifecycle.converse: through the run directory, from any process) -----------
    def steer(self, text: str) -> None:
        """Tell the running child ``text``: it reads it after its current tool call (the steer shows in the
        transcript and the record as what the person said). An ended run raises: ``follow_up`` continues it."""
        converse.steer(self.paths, text)

    def follow_up(self, text: str) -> Run:
        """Give the child ``text`` after its current turn; returns self. On a run that has ended, starts a new
        run in the background that continues its session with ``text`` as its task (linked to this one:
        ``resumed_from``) and returns that one."""
        return converse.follow_up(self.paths, text) or self

    def answer(self, value: Any = None, *, question: str | None = None) -> dict[str, Any]:
        """Answer the oldest open question (or ``question``, its id or a unique prefix): text for a question,
        one of its options (its text, or its number from 1) for a choice, True/"allow"/"yes" or
        False/"deny"/"no" for a yes/no question; None is no answer (the child goes on without). Returns the
        question with ``answer``."""
        return converse.answer(self.paths, value, question)

    def approve(self, allow: bool = True, *, question: str | None = None) -> dict[str, Any]:
        """Allow (``allow=False``: deny) what the oldest open approval (or ``question``) asks; returns it."""
        return converse.approve(self.paths, allow, question)

    @property
    def questions(self) -> list[dict[str, Any]]:
        """The questions the child waits on, oldest first (each a dict: ``id``, ``method`` (input, select,
        confirm, editor), ``title``, ``message``, ``options``, ``timeoutAt``, ``approval``); [] when none."""
        return converse.questions(self.paths)

    def wait_for_question(self, timeout: float | None = None) -> dict[str, Any] | None:
        """Block until the child asks (the oldest open question, at once if one is open); None when the run
        ends first or ``timeout`` seconds pass. Where this process says the run's questions (a run it shows), the
        question's notice is said before this returns."""
        deadline = None if timeout is None else time.monotonic() + timeout
        self._wait_until(lambda: bool(converse.questions(self.paths)), deadline)
        asked = converse.questions(self.paths)
        if not asked:
            return None
        # The notice of it this process says (from the watcher's thread) comes first, whole: what the caller prints
        # next is then not cut by it.
        said_by = time.monotonic() + NOTICE_WAIT
        while (self._says_questions and str(asked[0].get("id")) not in self._questions_said and not self.done
               and time.monotonic() < said_by):
            time.sleep(0.01)
        return asked[0]

    # -- internals ----------------------------------------------------------------------------
    def _await_supervisor(self, timeout: float = 10.0) -> dict[str, Any] | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not self.done:
            info = read_json(self.paths.supervisor)
            if info:
                return info
            time.sleep(0.05)
        return None

    # -- representations ----------------------------------------------------------------------
    def __repr__(self) -> str:
        """Terminal-safe: a terminal IPython prints it as it is, and the child's output is in it."""
        if not self.done:
            return terminal_safe(f"<Run {self.run_id} {self.name} {self.status}>")
        text = summary_line(self)
        out = self.output.strip()
        if out:
            text += "\n" + "\n".join("  " + ln for ln in out.splitlines()[:20])
        children = Children(self)  # a run that may delegate: its sub-agents, one line each (from the registry)
        if children.refresh(force=True):
            text += "\n" + "\n".join(children.text_lines())
        return terminal_safe(text)

    def report(self, path: str | Path | None = None, *, format: str | None = None) -> Path:
        """Write this run's report (self-contained HTML, or Markdown for ``.md``; by default into its project's
        ``.pi/subagents/reports/``); see ``nbsubagents.report``."""
        return reports.report([self], path, format=format, root=self.project)


# -- what the lifecycle does with a run (functions, not methods: a Run's public face is what a user may call) ----
def launch(run: Run) -> None:
    """Start the run's supervisor through its launcher (the record's ``runner``: process, tmux or dask)."""
    if not run.noted_running:  # before the start: an interrupt right after it finds the handle set
        registry.note(run, status=launched_status(run))
        run.noted_running = True
    run.process = launcher_for(run.record.runner).start(run)


def launched_status(run: Run) -> str | None:
    """The registry status of a run being launched: running, or (None: what its folder says) queued while a
    remote launcher's run waits for a worker (a Dask run is queued until its supervisor.json shows)."""
    return None if launcher_for(run.record.runner).remote else "running"


def says_questions(run: Run, says: bool) -> None:
    """Whether this process says the run's questions where its notices go (the watcher, for a run it shows)."""
    run._says_questions = says


def question_said(run: Run, question_id: str) -> None:
    """The notice of question ``question_id`` is out, whole: ``Run.wait_for_question`` may return the question."""
    run._questions_said.add(question_id)


def reread(run: Run) -> Run:
    """``run``, whose ``result.json`` is read again on the next look (it may have appeared since)."""
    run._result = None
    return run


def pump(run: Run, renderer: Renderer) -> list[dict[str, Any]]:
    """Feed the run's new events, with the formatter's words for each, to ``renderer``; returns them."""
    events = run._tail.read_new()
    for event in events:
        renderer.event(run, event, run._formatter.format(event))
    return events


def get_run(id_or_prefix: str, root: str | Path | None = None) -> Run:
    """The ``Run`` of an id or unique prefix: this process's own handle when it watches the run."""
    row = registry.resolve(id_or_prefix, root)
    return edge.follower.get(row["run_id"]) or Run(row["run_dir"])

