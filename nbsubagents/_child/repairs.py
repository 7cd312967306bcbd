"""A typed result's check and its repairs: the reply against ``output_schema``, the ``outputs`` files, each try kept.

Before a run with an ``output_schema`` or ``outputs`` may complete, the supervisor checks what the child gave: its
reply against the schema (``reply_process``, in a process of its own) and each output file it was told to write
(there, a regular file, in its format: Parquet and PNG by their signatures, JSON parsed, CSV text with a header
line; the kernel reads them as objects afterwards). A try that fails its check is asked again, with the error, up
to ``maxRepairs`` times (default ``DEFAULT_MAX_REPAIRS``), in the child's own session: a harness whose session
takes a message after its task (``Session.follows_up``: pi) gets it as a follow-up before it ends; one that ends
with its task (Claude Code, Codex in print mode) is started again on its session (the harness's
``repair_argv``: ``--resume``) with the error as the task, in the same run folder. Only then does the run fail.
Every try is kept once one failed: ``tries/N.json`` (its reply, its error, the output files' sizes) and the result's
``tries``. Standard library only: the supervisor imports it (``Repairing`` is its part that does this).
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from . import reply_process, verdict
from .artifacts import atomic_write, atomic_write_json, now_iso
from .run_files import best_effort

from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from typing import Any, Mapping

OUTPUTS_DIR = "outputs"                  # the run folder's, where the child writes its output files
OUTPUTS_ENV = "NBSUBAGENTS_OUTPUTS"      # the child's variable naming that folder
TIME_RAN_OUT = " The time ran out while the reply was checked against output_schema."
TRIES_DIR = "tries"                      # tries/N.json: each try of a run whose check failed once
DEFAULT_MAX_REPAIRS = 2
REPAIR_PREFIX = "Your result did not pass its check"  # the repair's first words (the scripted model knows them)
MAX_JSON = 64 << 20                      # the largest JSON output file parsed here


def check_outputs(run_dir: Path, plan: Mapping[str, Mapping[str, str]] | None) -> str | None:
    """None when every output file is there and readable as its format, else what is wrong with the first that
    is not (and where it should be)."""
    for name, spec in (plan or {}).items():
        path = run_dir / spec["file"]
        fmt = spec["format"]
        problem = _file_problem(path, fmt)
        if problem:
            return f"The output {name!r} ({spec['file']}) {problem}: write it as {fmt.upper()} at {path}"
    return None


def _file_problem(path: Path, fmt: str) -> str | None:
    if os.path.islink(path.parent):
        return f"is in {path.parent}, which is a link (it is not read)"
    try:
        info = os.lstat(path)
    except OSError:
        return "was not written"
    if not stat.S_ISREG(info.st_mode):
        return "is not a regular file (a link or a folder is not read)"
    if info.st_size == 0:
        return "is empty"
    try:
        with open(path, "rb") as file:
            head = file.read(8)
            if fmt == "parquet":
                file.seek(-4, os.SEEK_END)
                return None if head[:4] == b"PAR1" and file.read(4) == b"PAR1" else "is not a Parquet file"
            if fmt == "png":
                return None if head == b"\x89PNG\r\n\x1a\n" else "is not a PNG image"
            file.seek(0)
            if fmt == "json":
                if info.st_size > MAX_JSON:
                    return f"is larger than {MAX_JSON >> 20} MiB of JSON"
                json.loads(file.read())
                return None
            first = file.readline(1 << 16).decode("utf-8").strip()  # csv: a header line of text
            return None if first else "has no header line"
    except (OSError, UnicodeDecodeError) as exc:
        return f"cannot be read ({exc})"
    except ValueError as exc:
        return f"is not valid JSON ({exc})"


class Repairing:
    """The supervisor's part that checks a typed result and asks again (a mixin of ``Supervisor``: it uses its
    record, paths, session, tally, guards and spawn)."""

    def _typed(self) -> bool:
        return self.record.output_schema is not None or bool(self.record.outputs)

    def _limit(self) -> int:
        limit = self.record.max_repairs
        return DEFAULT_MAX_REPAIRS if not isinstance(limit, int) or limit < 0 else limit

    def _repairs_left(self) -> bool:
        return len(self.tries) <= self._limit()

    def _reply_text(self) -> str:
        structured = self.rpc.structured()  # the harness's own typed output (Claude's structured_output)
        return self.tally.final_text if structured is None else json.dumps(structured)

    def _check_try(self) -> tuple[Any, str | None] | None:
        """This try's check (once per reply): ``(data, None)``, ``(None, why)``, or None when the guards stopped the
        run meanwhile. A failed try, and every try after one, is written to ``tries/``."""
        text = self._reply_text()
        if self.last_check is not None and self.last_check[0] == text:
            return self.last_check[1]
        data, error = None, None
        if self.record.output_schema is not None:
            checked = reply_process.check(text, self.record.output_schema, self.record.run_id, self._stopped)
            if checked is None:
                self._stopped_in_check()
                return None
            data, error = checked
        if error is None:
            error = check_outputs(self.paths.dir, self.record.outputs)
        entry = {"try": len(self.tries) + 1, "error": error, "at": now_iso(), "reply": text,
                 "outputs": {name: _size(self.paths.dir / spec["file"])
                             for name, spec in (self.record.outputs or {}).items()}}
        self.tries.append(entry)
        if error is not None or len(self.tries) > 1:
            best_effort((self.paths.dir / TRIES_DIR).mkdir)  # once: then it is there
            for earlier in self.tries:
                best_effort(atomic_write_json, self.paths.dir / TRIES_DIR / f"{earlier['try']}.json",
                            self.masks.data(earlier, pieces=True))
        self.last_check = (text, (data, error))
        return data, error

    def _repair_text(self, error: str) -> str:
        return (f"{REPAIR_PREFIX} (try {len(self.tries)} of at most {self._limit() + 1}): {error}\n\nFix it and "
                "finish again as the task asked: the same final reply format and the same output files.")

    def _asking_again(self, error: str) -> None:
        self.last_check = None
        self.emit({"type": "notice", "text": f"Try {len(self.tries)} did not pass its check ({error}); the child is "
                                             "asked again"})

    def _repair_in_session(self) -> bool:
        """At the end of the conversation of a harness that takes a follow-up: a try that fails its check is
        sent back as one (True: the conversation goes on)."""
        if (not self._typed() or not getattr(self.rpc, "follows_up", False) or self.stop_reason is not None
                or self.tally.stop_reason in ("error", "aborted")):
            return False
        checked = self._check_try()
        if checked is None or checked[1] is None or not self._repairs_left():
            return False
        if not self.rpc.follow_up(self._repair_text(checked[1])):
            return False
        self._asking_again(checked[1])
        return True

    def _repair_after_exit(self, exit_code: int | None) -> bool:
        """After a harness that ends with its task completed: a try that fails its check starts it again on its
        session with the error as the task (True: it was started)."""
        again = getattr(self.harness, "repair_argv", None)
        if not self._typed() or again is None or getattr(self.rpc, "follows_up", False) or self.stop_reason:
            return False
        if self._verdict(exit_code, None)[0] != "completed":
            return False
        checked = self._check_try()
        if checked is None or checked[1] is None or not self._repairs_left():
            return False
        session = self.rpc.record().get("sessionId")
        argv = again(list(self.record.argv), str(session)) if session else None
        if not argv:
            return False
        text = self._repair_text(checked[1])
        task = self.paths.dir / TRIES_DIR / f"{len(self.tries) + 1}.task.md"
        os.makedirs(task.parent, exist_ok=True)
        atomic_write(task, text.encode())
        self._end_leftovers()
        self.earlier_sessions.append(self.rpc)
        self.rpc = self.harness.session(self.paths.dir, self.record)
        self.conversation_over_at = self.term_at = self.kill_at = None
        self.ended_after_conversation = False
        self._asking_again(checked[1])
        self._spawn(argv, str(task))
        return True

    def _check_output(self) -> tuple[str, str | None]:
        """The last try checked (the reply against output_schema in a process of its own, ``reply_process``, the
        guards going on: the run's timeout and cancel end the check as they end the child; then the output files)."""
        checked = self._check_try()
        if checked is None or self.stop_reason is not None:  # cancelled, timed out, signalled or orphaned meanwhile
            return self._stopped_in_check()
        if len(self.tries) > 1 or checked[1] is not None:
            self.extra["tries"] = [{"try": t["try"], "error": t["error"], "file": f"{TRIES_DIR}/{t['try']}.json"}
                                   for t in self.tries]
        data, error = checked
        if error is not None:
            self.stop_word = "schema"
            return "failed", error + (f" (after {len(self.tries)} tries: each is in {TRIES_DIR}/)"
                                      if len(self.tries) > 1 else "")
        if self.record.output_schema is not None:
            self.extra["data"] = data
        return "completed", None

    def _stopped_in_check(self) -> tuple[str, str]:
        """How the run stopped while its reply was checked (at the end, or before a repair): its timeout says so."""
        assert self.stop_reason is not None
        status, message = self.stop_reason
        if self.stop_word == "timeout" and not message.endswith(TIME_RAN_OUT):
            self.stop_reason = status, message + TIME_RAN_OUT
        return self.stop_reason

    def _stopped(self) -> bool:
        """The guards' turn while the reply is checked; whether they stopped the run."""
        self._guards()
        return self.stop_reason is not None

    def _usage(self) -> dict[str, Any]:
        """The run's usage; the native cost of each session a repair replaced counts too."""
        found = verdict.usage(self.tally, self.rpc, bool(self.record.offline))
        earlier = sum(float(s.totals().get("cost") or 0) for s in self.earlier_sessions)
        if earlier and not self.record.offline:
            found["cost"] = round(float(found.get("cost") or 0) + earlier, 8)
        return found


def _size(path: Path) -> int | None:
    try:
        info = os.lstat(path)
    except OSError:
        return None
    return info.st_size if stat.S_ISREG(info.st_mode) else None
