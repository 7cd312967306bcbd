"""The process that runs one sub-agent and writes its artifacts: ``python -m nbsubagents._child.supervisor RUN_DIR``.

It is started detached from the kernel (its own session), so a run outlives an interrupted,
restarted or killed kernel. It reads everything it needs from ``meta.json``, runs pi in RPC mode in a process
group of its own (so the whole tree can be stopped), talks to it through ``child/rpc.py`` (the task, steers,
follow-ups, answers to its questions, fallback models), turns pi's stdout into ``stdout.log`` (raw, but its
streaming ``message_update`` lines),
``events.jsonl`` (normalized) and ``transcript.log`` (formatted), enforces the guards (timeout
extended while the child is active, loop detection, cancel via SIGTERM or a ``cancel.json`` request file
in the run directory, which any process on any machine can write; each stop is an RPC ``abort`` first, then
signals), ends pi once the conversation is over (its stdin closed) and writes ``result.json`` last and
atomically. It touches ``heartbeat`` every ``HEARTBEAT`` seconds: the liveness of a supervisor on another
machine (a Dask worker's) is read from that file, not from a pid. Started by a Dask task
(``NBSUBAGENTS_WORKER_PID`` names the worker), it ends its run as ``failed: interrupted (worker lost)``
when that worker dies, so no run goes on outside the cluster's accounting. Artifact writes are best-effort: a
full disk costs lines, never the result. A step of its own that breaks (or a reply that would break it)
ends the run ``failed`` with the reason (stopReason ``supervisor_error``) and keeps what the child produced;
a reply is checked against ``output_schema`` in a process of its own (``reply_process`` runs ``reply_check``) that
the run's timeout and cancel end, and with the ``outputs`` files a try that fails is asked again (``repairs``).
``events.StreamLines`` cuts pi's stdout into lines and ``verdict`` names how a run ended.
Every harness is driven this way: its module (``child/harnesses/``) says whether the task is its stdin, how long a
stop waits for its own abort, and gives the session that talks to it and adapts its stream into the same events (a
harness that takes nothing after its task ends when it exits, or END_GRACE after its own end record; its own error
end fails the run and its native total cost wins).
Imports are kept to the standard library and the small core modules: start-up time is run time.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

from .artifacts import RUN_DIR_GONE, RunPaths, now_iso, open_append, open_regular, read_text, result_record
from . import harnesses, tree_end, verdict
from .events import StreamLines, Tally
from .formatter import ProgressFormatter, transcript_header, transcript_line
from .record import RunRecord, load
from .repairs import OUTPUTS_DIR, OUTPUTS_ENV, Repairing
from .procs import (MARKER, WORKER_PID, become_subreaper, end_run_processes, process_start_ticks, reap_children,
                    send_group)
from .run_files import (RESERVE, MaskedSink, Sink, best_effort, clean, describe, mask_file, remove_half_folder,
                        reserve, sync, touch, write_result)
from .secrets import Masker, needed_only, secret_values
from .text import clip

from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from typing import Any

    from .events import Event

KILL_GRACE = 5.0                 # seconds between SIGTERM and SIGKILL
TICK = 0.2                       # guard checks while the child is silent
END_GRACE = 3.0                  # seconds pi may take to exit after the end of the conversation
HEARTBEAT = 2.0                  # seconds between touches of the run's heartbeat file
PIPE_SIZE = 1 << 20              # the child's stdout pipe and one read of it (Linux's default is 64 KiB)
HEARTBEAT_FILE = "heartbeat"
CANCEL_FILE = "cancel.json"      # a cancel request (lifecycle.settle.request_cancel writes it)
WORKER_LOST = "interrupted (worker lost)"


class Supervisor(Repairing):
    def __init__(self, paths: RunPaths, record: RunRecord) -> None:
        self.paths = paths
        self.record = record
        self.tally = Tally()
        self.formatter = ProgressFormatter(record.cwd)
        self.harness = harnesses.get(record.harness)
        self.rpc = self.harness.session(paths.dir, record)  # what goes in after the task; its stream adapted
        self.seq = 0
        self.child: subprocess.Popen[bytes] | None = None
        self.subreaper = False  # orphans of the run's process tree come to us (once pi is started)
        self.stop_reason: tuple[str, str] | None = None  # (status, message) decided by a guard or cancel
        self.stop_word: str | None = None  # why: timeout, loop, cancelled, budget:<kind>, ... (result's stopReason)
        self.budget = None
        if record.budget:
            from .budgets import Budget  # noqa: PLC0415 (start-up: only runs that use it load it)
            self.budget = Budget(record.budget)
        self.workdir: str | None = record.cwd
        self.contain: Any = None  # the run's sandbox (``isolation.containment``): pi's, and git's on its workspace
        self.isolation: dict[str, Any] | None = dict(record.isolation) if record.isolation else None
        self.extra: dict[str, Any] = {}  # further result.json fields (changes, data, ...)
        self.term_at: float | None = None  # a stopped run: SIGTERM then (after the RPC abort), SIGKILL at kill_at
        self.kill_at: float | None = None
        self.timeout = float(record.timeout or 0)
        self.debounce = float(record.extend_timeout_debounce)
        self.loop_limit = int(record.looping_tool_count)
        self.last_activity: float | None = None  # the last tool call or result: only they extend the timeout
        self.last_signatures: list[str] = []
        self.conversation_over_at: float | None = None
        self.ended_after_conversation = False  # pi did not exit after agent_end/agent_settled: we ended it
        # The run's environment is known here only (an exporter's may lack its keys): what the run writes is masked
        # as it is written, with the values of the run's own secret-named variables and pi's config's keys.
        run_env = {**os.environ, **record.env}
        agent = run_env.get("PI_CODING_AGENT_DIR")
        self.masks = Masker(secret_values(run_env, Path(agent) if agent else None))
        self.events = Sink(paths.events)
        self.transcript = Sink(paths.transcript)
        self.stdout = MaskedSink(paths.stdout, lambda text: self.masks.text(text, pieces=True))
        self.heartbeat_at = 0.0
        self.broken: str | None = None  # the first failure of a step of our own (the run's error when set)
        self.begun = False  # the run's opening is written (_begin)
        worker = os.environ.get(WORKER_PID, "")
        self.worker_pid: int | None = int(worker) if worker.isdigit() else None
        self.tries: list[dict[str, Any]] = []  # each try of a typed result's check (``repairs``)
        self.last_check: tuple[str, Any] | None = None  # (reply, its check) of the current try
        self.earlier_sessions: list[Any] = []  # the sessions a repair replaced (a harness started again)

    # -- events -------------------------------------------------------------------------------
    def emit(self, event: Event) -> None:
        self.seq += 1
        event = {"seq": self.seq, "ts": round(time.time(), 3), **self.masks.data(event, pieces=True)}
        if self.record.offline and "cost" in event:  # the scripted model: nobody paid (what a harness prices is not)
            event["cost"] = 0
        data = json.dumps(event, ensure_ascii=False)
        try:
            encoded = data.encode()
        except UnicodeEncodeError:  # a lone surrogate (JSON allows "\ud800"): not text, replaced everywhere
            event = clean(event)
            encoded = json.dumps(event, ensure_ascii=False).encode()
        self.tally.add(event)
        self.events.write(encoded + b"\n")
        line = self.formatter.format(event)
        if line is not None:
            self.transcript.write(transcript_line(event, line).encode(errors="backslashreplace") + b"\n")
        if event["type"] == "tool_call":
            self._check_loop(event)
        if self.budget and self.stop_reason is None and event["type"] in ("turn_start", "tool_call", "usage"):
            over = self.budget.exceeded(self.tally)
            if over is not None:
                self.stop("failed", over[1], over[0])
        if event["type"] in ("tool_call", "tool_result"):
            self.last_activity = time.monotonic()

    def _check_loop(self, event: Event) -> None:
        if self.loop_limit <= 0:
            return
        signature = json.dumps([event.get("name"), event.get("args")], sort_keys=True)
        self.last_signatures = [s for s in self.last_signatures if s == signature] + [signature]
        if len(self.last_signatures) >= self.loop_limit:
            self.stop("failed", "Loop detected: sub-agent is repeating the same tool calls", "loop")

    # -- stopping -----------------------------------------------------------------------------
    def stop(self, status: str, message: str, word: str | None = None) -> None:
        """End the child: an RPC abort (sent by the loop: this may run in a signal handler), then SIGTERM to
        its whole process group after ABORT_GRACE, SIGKILL after KILL_GRACE more."""
        if self.stop_reason is None:
            self.stop_reason = (status, message)
            self.stop_word = word
        if self.term_at is None and self.child is not None:  # a harness that takes an abort has ABORT_GRACE
            self.term_at = time.monotonic() + self.harness.ABORT_GRACE

    def _on_signal(self, signum: int, _frame: Any) -> None:
        self.stop(*(tree_end.verdict(self.paths.dir) if signum == signal.SIGTERM  # a cancel: as its request says
                    else ("aborted", f"stopped by signal {signal.Signals(signum).name}", "signal")))

    def _beat(self, now: float) -> None:
        """Touch the heartbeat file (at most every HEARTBEAT s); notice a cancel request and a lost worker."""
        if now - self.heartbeat_at < HEARTBEAT:
            return
        self.heartbeat_at = now
        try:
            os.utime(self.paths.dir / HEARTBEAT_FILE, follow_symlinks=False)
        except FileNotFoundError:
            best_effort(touch, self.paths.dir / HEARTBEAT_FILE)
        except OSError:
            pass

    def _requests(self) -> None:
        """A cancel asked through the run directory, and the death of the Dask worker that started us."""
        if self.stop_reason is not None:
            return
        if os.path.exists(self.paths.dir / CANCEL_FILE):
            self.stop(*tree_end.verdict(self.paths.dir))  # its reason: a tree's budget, a parent that ended
        elif self.worker_pid is not None and os.getppid() != self.worker_pid:
            self.stop("failed", WORKER_LOST, "worker_lost")  # orphaned: our worker died
        elif not os.path.exists(self.paths.meta):  # the run's folder was deleted: end the child, write nothing
            self.stop("failed", RUN_DIR_GONE, "run_dir_deleted")

    def _guards(self) -> None:
        now = time.monotonic()
        self._beat(now)
        self._requests()
        if self.stop_reason is not None and self.term_at is None and self.child is not None:
            self.stop(*self.stop_reason)  # a cancel that arrived while the child was being spawned
        if self.term_at is not None:
            self.rpc.abort()
        if self.term_at is not None and now >= self.term_at and self.kill_at is None and self.child is not None:
            self.kill_at = now + KILL_GRACE
            send_group(self.child.pid, signal.SIGTERM)  # pi ends the tool commands it is running itself
        if self.kill_at is not None and now >= self.kill_at and self.child is not None:
            send_group(self.child.pid, signal.SIGKILL)
            self._end_leftovers(settle=0.0, reap=False)  # pi's exit status is still to be collected
            self.kill_at = now + KILL_GRACE
        if self.stop_reason is None and self.timeout > 0 and now - self.started >= self.timeout:
            # Extended only while tool calls go on: one within the last `debounce` seconds.
            if self.last_activity is None or now - self.last_activity >= self.debounce:
                self.stop("failed", f"Timed out after {self.timeout:g}s. "
                                    "Consider resuming with a longer timeout.", "timeout")

    # -- the run ------------------------------------------------------------------------------
    def _end_leftovers(self, settle: float = 2.0, reap: bool = True) -> None:
        """SIGKILL every process of the run still there: marked with its id, or our descendant (as the
        subreaper we inherit tool processes that left pi's tree, even with their environment cleared). A
        subreaper with no child left has no descendant either (an orphan of its tree would have come to it), so
        then nothing of the run is left: the look through every process of the machine is spared."""
        if reap and self.subreaper and not reap_children():
            return
        end_run_processes(self.record.run_id, subtree_of=os.getpid(), settle=settle, reap=reap)

    def run(self) -> dict[str, Any]:
        self.started = time.monotonic()
        started_at = now_iso()
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, self._on_signal)
        self.info = {"pid": os.getpid(), "startTicks": process_start_ticks(os.getpid()), "startedAt": started_at,
                     "host": os.uname().nodename}
        self._requests()  # a cancel asked while the run was queued
        exit_code: int | None = None
        spawn_error = None
        try:
            if self.isolation is not None and self.stop_reason is None:
                self._begin(started_at)  # a worktree takes a while: the run shows as started meanwhile
                spawn_error = self._setup_isolation()
            if self.stop_reason is None and spawn_error is None:  # a cancel can arrive before the child exists
                try:
                    self._spawn()
                    self._begin(started_at)  # while pi starts: nothing of ours comes before it
                    exit_code = self._pump()
                    while self._repair_after_exit(exit_code):  # a harness that ends with its task, asked again
                        exit_code = self._pump()
                except OSError as exc:
                    program = (self.record.argv or [self.harness.PROGRAM])[0]
                    spawn_error = _spawn_message(self.harness, program, exc)
                finally:  # its sub-runs end first, saying why (tree_end); then nothing of the run may remain
                    if self.record.delegate:
                        tree_end.settle_children(self.paths, self.record.run_id, self.stop_reason, self.stop_word)
                    self._end_leftovers()
                    self.rpc.end()  # no question stays open
        except Exception as exc:  # noqa: BLE001 (a step of ours broke: the run fails saying so, never silently)
            self._broke("running pi", exc)
        self._safely("writing the run's opening", self._begin, started_at)  # also when no child was started
        self.child = None  # pi is gone and reaped: no later stop may signal its (reusable) group id
        # Every step after the child is guarded: whatever breaks, the run ends failed with the reason, and what the
        # child produced (its text, transcript, events) is kept.
        status, error = ("failed", None) if self.broken is not None else self._safely(
            "judging how pi ended", self._verdict, exit_code, spawn_error, default=("failed", None))
        if self.isolation is not None and self.isolation.get("base"):
            self._safely("capturing the run's changes", self._capture_changes)
        if status == "completed" and self._typed() and self.broken is None:
            status, error = self._safely("checking the reply against output_schema", self._check_output,
                                         default=("failed", None))
        usage = self._safely("counting the usage", self._usage)
        reason = self._safely("naming why the run ended", verdict.reason, self.stop_word, status, spawn_error,
                              self.tally)
        status, error, reason = self._if_broken(status, error, reason)
        self._safely("writing the run's end event", self.emit,
                     {"type": "run_end", "status": status, "exitCode": exit_code,
                      "stopReason": reason, "errorMessage": error})
        status, error, reason = self._if_broken(status, error, reason)
        for sink in (self.events, self.transcript, self.stdout):
            sink.close()
        ended_at = now_iso()
        result = result_record(
            self.record.run_id, status, error=error, exit_code=exit_code, stop_reason=reason,
            final_text=self.tally.final_text, model=self.tally.model, usage=usage,
            turns=self.tally.turns, tool_calls=self.tally.tool_calls, started_at=started_at, ended_at=ended_at,
            duration=round(time.monotonic() - self.started, 3))
        if self.ended_after_conversation:
            result["endedAfterConversation"] = True  # pi had not exited END_GRACE s after the conversation ended
        result["piStopReason"] = self.tally.stop_reason
        result["harness"] = self.harness.NAME
        result.update(self.rpc.record())
        result.update(self.extra)
        result = self.masks.data(result, pieces=True)
        self._safely("masking the child's stderr", mask_file, self.paths.stderr, self.stdout.mask)
        if not os.path.exists(self.paths.meta):  # its folder was deleted: no half folder is left for it
            remove_half_folder(self.paths.dir)
            return result
        write_result(self.paths, result)
        return result

    def _if_broken(self, status: str, error: str | None, reason: str | None) -> tuple[str, str | None, str | None]:
        """The run's end once a step of ours broke: failed, with that failure (and the end it replaced)."""
        if self.broken is None or error == self.broken:
            return status, error, reason
        if status != "completed" and error:
            self.broken += f" (the run had already ended {status}: {error})"
        self.stop_word = "supervisor_error"
        return "failed", self.broken, "supervisor_error"

    def _broke(self, step: str, exc: BaseException) -> None:
        """Our own step ``step`` raised: the first such failure becomes the run's error."""
        if self.broken is None:
            self.broken = f"The supervisor failed while {step}: {type(exc).__name__}: {clip(str(exc), 300)}"

    def _safely(self, step: str, fn: Any, *args: Any, default: Any = None) -> Any:
        try:
            return fn(*args)
        except Exception as exc:  # noqa: BLE001 (see run: recorded as the run's failure)
            self._broke(step, exc)
            return default

    def _begin(self, started_at: str) -> None:
        """The run's opening, once: ``supervisor.json`` (the run has started; with pi's process group once there is
        one), the heartbeat, the transcript's header and the ``run_start`` event."""
        if self.begun:
            return
        self.begun = True
        best_effort(describe, self.paths.supervisor, self.info)
        self._beat(time.monotonic())
        header = self.masks.text(transcript_header(self.record, started_at), pieces=True)
        self.transcript.write(header.encode(errors="backslashreplace") + b"\n")
        self.emit({"type": "run_start", "runId": self.record.run_id, "preset": self.record.preset,
                   "model": self.record.resolved_model, "cwd": self.record.cwd,
                   "task": self.record.task})
        for note in self.record.notes or ():
            self.emit({"type": "notice", "text": str(note)})

    def _spawn(self, argv: list[str] | None = None, prompt: str | None = None) -> None:
        """Start pi (or the run's harness) and hand it the task: the first thing a run does (a repair: again, with
        its own ``argv`` and task)."""
        needed = self.harness.keys(self.record, os.environ)  # its provider's keys: no other secret reaches it
        env = {**needed_only(os.environ, needed, self.record.env), **self.record.env,
               "PI_SUBAGENTS_CHILD": "1", MARKER: self.record.run_id}  # finds leftovers if we die
        writes = self.harness.WRITES
        if self.record.outputs:  # the folder it writes its output files in
            env[OUTPUTS_ENV] = str(self.paths.dir / OUTPUTS_DIR)
            writes = {**writes, OUTPUTS_DIR: "folder"}
        if self.isolation is not None and self.isolation.get("path") and self.workdir:
            from .isolation import containment, workspace_env  # noqa: PLC0415 (start-up: only runs that use it load it)
            env = workspace_env(self.isolation, env, self.workdir)  # no variable leads back to the original
            self.contain, why = containment(self.isolation, self.paths.dir, env, writes, self.record.tool_servers)
            self.extra["worktree"]["contained"] = why is None  # the result says whether, and why not
            if why is not None:
                self.extra["worktree"]["uncontainedBecause"] = why
        prompt = prompt or self.record.prompt_path
        task = read_text(prompt) if prompt else ""
        # the task is the harness's stdin (prompt.md), or its session sends it (and what follows) on a pipe
        stdin: Any = ((open_regular(prompt) if prompt else open(os.devnull, "rb"))  # noqa: SIM115
                      if self.harness.TASK_ON_STDIN else subprocess.PIPE)
        try:
            with open_append(self.paths.stderr) as stderr:
                self.child = subprocess.Popen(
                    argv or self.record.argv, cwd=self.workdir, env=env, stdin=stdin,
                    stdout=subprocess.PIPE, stderr=stderr, start_new_session=True, preexec_fn=self.contain)
        finally:
            if stdin is not subprocess.PIPE:
                stdin.close()
        self.rpc.attach(self.child.stdin, task, self.workdir)
        # the child's group, for a reconcile after our death (a run that began before, with a worktree, says it now)
        self.info.update(childPid=self.child.pid, childStartTicks=process_start_ticks(self.child.pid))
        if self.begun:
            best_effort(describe, self.paths.supervisor, self.info)

    def _pump(self) -> int:
        """Read the child's stdout until it ends, keeping the guards and the conversation; its exit code."""
        assert self.child is not None and self.child.stdout is not None
        # Orphaned tool processes come to us, not init. Done once pi is started (off the start-up's path):
        # pi needs far longer to start its first tool than this takes.
        self.subreaper = become_subreaper()
        # while pi starts: meta.json to disk (the kernel leaves its fsync to us), room for result.json when the
        # disk fills up
        best_effort(sync, self.paths.meta)
        best_effort(reserve, self.paths.dir / RESERVE)
        fd = self.child.stdout.fileno()
        os.set_blocking(fd, False)
        with contextlib.suppress(OSError, AttributeError):  # a larger pipe: fewer, larger reads (Linux only)
            fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_SIZE)
        selector = selectors.DefaultSelector()
        selector.register(fd, selectors.EVENT_READ)
        lines = StreamLines(self.rpc, log=self.stdout.write)  # stdout.log: pi's lines but its streaming updates
        eof = False
        exited_at: float | None = None
        while not eof:
            if selector.select(TICK):
                try:
                    chunk = os.read(fd, PIPE_SIZE)
                except BlockingIOError:
                    chunk = None
                if chunk == b"":
                    eof = True
                elif chunk:
                    for event in lines.feed(chunk):
                        self.emit(event)
                    self.events.flush()
                    self.transcript.flush()
                    self.stdout.flush()
            said = self.rpc.tick(stopping=self.stop_reason is not None)
            for event in said:
                self.emit(event)
            if said:  # a refusal or an answer: shown now, pi may say nothing for a while
                self.events.flush()
                self.transcript.flush()
            if self.rpc.open:  # waiting for a person's answer is activity: the timeout is extended
                self.last_activity = time.monotonic()
            self._guards()
            self._end_after_conversation()
            if self.child.poll() is not None:
                # pi is gone; whatever still holds the pipe open (a stray tool process) must go too.
                exited_at = exited_at or time.monotonic()
                if time.monotonic() - exited_at > 0.5:
                    send_group(self.child.pid, signal.SIGKILL)
                    break
        for event in lines.end():
            self.emit(event)
        self.rpc.close(now=True)
        selector.close()
        self.child.stdout.close()
        return self.child.wait()

    def _end_after_conversation(self) -> None:
        """Once the conversation is over (pi idle, nothing queued, no question open) pi's stdin is closed and pi
        ends itself; a pi still there END_GRACE s later is ended."""
        now = time.monotonic()
        if self.conversation_over_at is None:
            if self.stop_reason is None and self.rpc.finished() and not self._repair_in_session():
                self.conversation_over_at = now
                self.rpc.close()
        elif (now - self.conversation_over_at >= END_GRACE and self.kill_at is None and self.term_at is None
              and self.child is not None and self.child.poll() is None):
            self.ended_after_conversation = True
            self.term_at = self.kill_at = now + KILL_GRACE
            send_group(self.child.pid, signal.SIGTERM)

    # -- isolation (imported only by runs that use it) ----------------------------------------------
    def _setup_isolation(self) -> str | None:
        from .isolation import IsolationError, remove, setup  # noqa: PLC0415 (start-up: only runs that use it load it)
        assert self.isolation is not None
        try:
            workdir = setup(self.isolation, self.record.run_id, self.paths.dir)
        except (IsolationError, OSError) as exc:
            self.stop_word = "isolation"
            if self.isolation.get("path"):
                remove(self.isolation)  # whatever part of the workspace was made goes
            return f"The run's worktree could not be set up: {exc}"
        self.workdir = str(workdir)
        self.formatter = ProgressFormatter(self.workdir)
        if self.record.resumed_from:
            self.harness.relocate(str(self.paths.dir), str(workdir))  # its copied session now runs there
        self.extra["worktree"] = {"path": self.isolation["path"], "branch": self.isolation.get("branch"),
                                  "kept": bool(self.isolation.get("keep"))}
        return None

    def _capture_changes(self) -> None:
        from .isolation import IsolationError, capture, remove  # noqa: PLC0415 (start-up: only runs that use it load it)
        assert self.isolation is not None
        try:
            self.extra["changes"] = capture(self.isolation, self.paths.dir, self.contain)
        except (IsolationError, OSError) as exc:
            self.extra["changesError"] = f"the run's changes could not be captured: {exc}"
        if not self.isolation.get("keep"):
            remove(self.isolation)

    def _verdict(self, exit_code: int | None, spawn_error: str | None) -> tuple[str, str | None]:
        """The stop a guard decided, the start that failed, the harness's own error end, else ``verdict.judge``."""
        if self.stop_reason is not None:
            return self.stop_reason
        if spawn_error:
            return "failed", spawn_error
        error_end = self.rpc.error_end()
        if error_end is not None:
            self.stop_word = error_end[1]
            return "failed", error_end[0]
        words = getattr(self.harness, "failure_words", None)  # a harness may say more than stderr's last line
        return verdict.judge(self.tally, self.rpc, self.harness.NAME, 0 if self.ended_after_conversation else exit_code,
                             self.paths.stderr, explain=words and (lambda text: words(self.record.argv, text)))


def _spawn_message(harness: harnesses.Harness, program: str, exc: OSError) -> str:
    if isinstance(exc, FileNotFoundError):
        return (f"{harness.NAME} could not be started: {program} does not exist. Install it with "
                f"`npm install {harness.PACKAGE}` or set NBSUBAGENTS_{harness.PROGRAM.upper()}.")
    return f"{harness.NAME} could not be started ({program}): {exc.strerror or exc}"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m nbsubagents._child.supervisor RUN_DIR", file=sys.stderr)
        return 2
    paths = RunPaths(Path(args[0]))
    record = load(paths.dir)
    if record is None:
        print(f"no readable meta.json in {paths.dir}", file=sys.stderr)
        return 2
    supervisor = None
    try:
        supervisor = Supervisor(paths, record)
        supervisor.run()
    except Exception as exc:  # noqa: BLE001 (the last resort: a run never ends without result.json)
        _last_resort(paths, record, supervisor, exc)
        return 1
    return 0


def _last_resort(paths: RunPaths, record: RunRecord, supervisor: Supervisor | None, exc: Exception) -> None:
    """A failure outside the guarded steps: the run's processes end and, unless result.json was written, a
    failed result says why and keeps the reply read so far."""
    run_id = record.run_id
    try:
        end_run_processes(run_id, subtree_of=os.getpid())
    except Exception:  # noqa: BLE001,S110 (ending them is best effort here; the result matters more)
        pass
    if paths.result.exists():
        return
    tally = supervisor.tally if supervisor is not None else Tally()  # what was read so far, or nothing
    ended_at = now_iso()
    result = result_record(run_id or None, "failed", stop_reason="supervisor_error",
                           error=f"The supervisor failed: {type(exc).__name__}: {clip(str(exc), 300)}",
                           final_text=tally.final_text, turns=tally.turns, tool_calls=tally.tool_calls,
                           started_at=ended_at, ended_at=ended_at)
    write_result(paths, result)


def exit_now(code: int) -> None:
    """End this process with ``code`` once the run is written (``result.json`` is on disk, every file closed):
    Python's teardown, freeing every module, would only delay whoever waits for this process to exit."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (AttributeError, OSError, ValueError):
            pass
    os._exit(code)


if __name__ == "__main__":
    exit_now(main())
