"""Normalized events -> the words a person reads (the spec's shared progress formatter).

One formatter feeds every surface (live widget, plain text, ``transcript.log``) so they never drift.
Priority follows the spec: the child's own words first, then humanized tool activity built only from
the call's arguments, then short completion/failure wording tied to the remembered call. Nothing is
guessed: when an argument is missing the line falls back to the tool's name.

It runs on the hot path (every event of every run), so it does plain dict lookups and precompiled
regexes only, and keeps per-run state to the open tool calls.
"""

from __future__ import annotations

import os
import re
import time
from collections import namedtuple
from datetime import datetime, timezone

from .events import RESULT_TEXT_LIMIT
from .harnesses import DEFAULT
from .text import ELLIPSIS, clip

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any, Callable

    from .record import RunRecord

__all__ = ["ProgressLine", "ProgressFormatter", "message_words", "transcript_header", "transcript_line"]

SEP = " — "            # joins our words to pi's own text (a reason, an output line)
MIN_WIDTH = 20         # the spec's commandPreviewWidth floor
TASK_HEADER_LINES = 3  # the transcript header shows the start of a task, not all of it

# `path:12: text` is a match line in pi's grep output (context lines use `path-12- text`).
_GREP_MATCH = re.compile(r"^[^\n]*?:\d+: ", re.M)
# A leading `cd <dir> && ` (or `;`) that a model often adds although pi already runs in the cwd.
_CD_PREFIX = re.compile(r"""cd\s+(?:"([^"]*)"|'([^']*)'|([^\s;&|]+))\s*(?:&&|;)\s*""")
# pi's bash tool ends a failed command's text with one of these status lines.
# what a question of a run that nobody can answer (questionTimeout 0: a script, a headless notebook, a Dask worker)
# is logged with, in place of an answer
NOBODY = "nobody to ask here (set question_timeout or answer with `nbsubagents {command} …`)"
_BASH_STATUS = ("Command exited with code", "Command timed out", "Command aborted")

_PLURAL = {"match": "matches", "file": "files", "dir": "dirs", "edit": "edits", "line": "lines"}
# A person's message: its kind, and what pi did with it when pi says (pi 1.x's `disposition`: a prompt started a turn
# with it at once; a steer or follow-up pi holds until the current tool calls or turn end; an extension took it).
_MESSAGE_KINDS = {"steer": "steer", "follow_up": "follow-up"}
_DISPOSITIONS = {"started": "delivered", "queued": "queued", "handled": "taken by an extension"}


# typing.NamedTuple would cost the supervisor ~10 ms of start-up (importing typing); these are the same.
class ProgressLine(namedtuple("ProgressLine", "kind text")):
    """One line to show: ``kind`` ("assistant", "thinking", "tool", "done", "failed", "error" or
    "info") lets a renderer style it without parsing the text."""

    __slots__ = ()


def _n(count: int, word: str) -> str:
    return f"{count} {word if count == 1 else _PLURAL[word]}"


def message_words(event: dict[str, Any]) -> str:
    """``steer`` or ``follow-up``, then what pi did with it where it says (``steer, queued``, ``follow-up,
    delivered``): the words of a ``user_message`` event in every surface (transcript, panels)."""
    kind = event.get("kind")
    words = _MESSAGE_KINDS.get(kind) or (str(kind) if kind else "message")
    disposition = event.get("disposition")
    if isinstance(disposition, str) and disposition:
        words += ", " + _DISPOSITIONS.get(disposition, disposition)
    return words


def _first_line(text: str) -> str:
    return text.strip().partition("\n")[0].strip()


def _was_shortened(text: str) -> bool:
    """events.py cuts long result text; counts taken from such text are only lower bounds."""
    return len(text) >= RESULT_TEXT_LIMIT and text.endswith(ELLIPSIS)


def _listing_body(text: str) -> tuple[str, bool]:
    """pi's list-like output without its trailing ``[... limit reached]`` notice, and whether more exist."""
    more = False
    if _was_shortened(text):
        text = text[: text.rfind("\n")] if "\n" in text else ""  # drop the partial last line
        more = True
    i = text.rfind("\n\n[")
    if i >= 0 and text.endswith("]"):
        more = more or "limit reached" in text[i:]
        text = text[:i]
    return text, more


def _count_entries(body: str) -> tuple[int, int]:
    files = dirs = 0
    for entry in body.split("\n"):
        entry = entry.strip()
        if entry:
            if entry.endswith("/"):
                dirs += 1
            else:
                files += 1
    return files, dirs


def _entries_phrase(files: int, dirs: int, more: bool) -> str:
    parts = [_n(files, "file")] if files or not dirs else []
    if dirs:
        parts.append(_n(dirs, "dir"))
    return ("at least " if more else "") + ", ".join(parts)


def _diff_counts(diff: str) -> tuple[int, int]:
    added = removed = 0
    for row in diff.split("\n"):
        if row.startswith("+"):
            added += 1
        elif row.startswith("-"):
            removed += 1
    return added, removed


def _line_count(content: str) -> int:
    return content.count("\n") + (0 if not content or content.endswith("\n") else 1)


def _int_arg(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _str_arg(args: dict[str, Any], key: str) -> str | None:
    value = args.get(key)
    return value if isinstance(value, str) and value.strip() else None


class _Call(namedtuple("_Call", "name target generic")):
    """What a result line needs from its call: the tool, the shown target (path, command), and
    ``generic``: the call was shown as "Running <tool>", so its result gets generic words too."""

    __slots__ = ()


class ProgressFormatter:
    """Stateful per run: remembers open tool calls by id so their results can name what finished."""

    def __init__(self, cwd: str | None = None, *, width: int = 100, home: str | None = None) -> None:
        self.width = max(int(width), MIN_WIDTH)
        self._calls: dict[Any, _Call] = {}
        self._said_error: str | None = None  # the provider error already shown: the end does not repeat it
        home = os.path.expanduser("~") if home is None else home
        self._home = home.rstrip("/") if home not in ("", "/") else ""
        self._set_cwd(cwd)
        self._handlers: dict[str, Callable[[dict[str, Any]], ProgressLine | None]] = {
            "assistant_text": self._assistant,
            "thinking": self._thinking,
            "tool_call": self._tool_call,
            "tool_result": self._tool_result,
            "error": self._error,
            "retry": self._retry,
            "stdout_text": self._stdout,
            "run_end": self._run_end,
            "run_start": self._learn_cwd,
            "session": self._learn_cwd,
            "user_message": self._user_message,
            "question": self._question,
            "answer": self._answer,
            "notice": self._stdout,
            "model_fallback": self._fallback,
        }
        self._call_words: dict[str, Callable[[dict[str, Any]], tuple[str, str | None]]] = {
            "read": self._read_call, "grep": self._grep_call, "find": self._find_call,
            "ls": self._ls_call, "edit": self._edit_call, "write": self._write_call,
            "bash": self._bash_call,
        }

    @property
    def cwd(self) -> str | None:
        return self._cwd or None

    def _set_cwd(self, cwd: str | None) -> None:
        # "/" as cwd would turn every absolute path into a relative-looking one: keep them absolute.
        self._cwd = cwd.rstrip("/") if cwd and cwd.rstrip("/") else ""

    def format(self, event: dict[str, Any]) -> ProgressLine | None:
        """The line for one normalized event, or None when it has nothing worth showing."""
        handler = self._handlers.get(event.get("type"))  # type: ignore[arg-type]
        return handler(event) if handler is not None else None

    # -- paths and commands ----------------------------------------------------------------------
    def short_path(self, path: str) -> str:
        """Relative to the run's cwd when inside it, else with ``~`` for home; relative paths as given."""
        if not path.startswith("/"):
            return path
        cwd = self._cwd
        if cwd:
            if path.startswith(cwd) and (len(path) == len(cwd) or path[len(cwd)] == "/"):
                return path[len(cwd) + 1:] or "."
        home = self._home
        if home and path.startswith(home) and (len(path) == len(home) or path[len(home)] == "/"):
            return "~" + path[len(home):]
        return path

    def _is_cwd(self, target: str) -> bool:
        if target in (".", "./"):
            return True
        if target == "~" or target.startswith("~/"):
            if not self._home:
                return False
            target = self._home + target[1:]
        return bool(self._cwd) and target.rstrip("/") == self._cwd

    def short_command(self, command: str) -> str:
        """The command as a person reads it: no redundant ``cd <cwd> &&``, first line, within width."""
        command = command.strip()
        if self._cwd and command.startswith("cd"):
            m = _CD_PREFIX.match(command)
            if m and m.end() < len(command):
                target = next((g for g in m.groups() if g is not None), "")
                if self._is_cwd(target):
                    command = command[m.end():]
        first, _, rest = command.partition("\n")
        first = first.rstrip()
        if rest.strip():
            first += " " + ELLIPSIS
        return clip(first, self.width)

    def _reason(self, text: str, budget: int) -> str:
        """pi's failure text as one short line: first line, cut at a sentence end when it is too long."""
        line = _first_line(text)
        if self._cwd:
            line = line.replace(self._cwd + "/", "")
        budget = max(budget, MIN_WIDTH)
        if len(line) > budget:
            end = line.rfind(". ", 0, budget)
            line = line[:end] + ELLIPSIS if end > 0 else clip(line, budget)
        return line

    # -- events -----------------------------------------------------------------------------------
    def _assistant(self, event: dict[str, Any]) -> ProgressLine | None:
        text = event.get("text")
        if not isinstance(text, str):
            return None
        text = text.strip()
        return ProgressLine("assistant", text) if text else None

    def _thinking(self, event: dict[str, Any]) -> ProgressLine | None:
        text = event.get("text")
        if not isinstance(text, str):
            return None
        text = " ".join(text[: self.width * 2].split())  # bound the work before normalizing spaces
        return ProgressLine("thinking", clip(text, self.width)) if text else None

    def _learn_cwd(self, event: dict[str, Any]) -> None:
        cwd = event.get("cwd")
        if not self._cwd and isinstance(cwd, str):
            self._set_cwd(cwd)
        return None

    def _tool_call(self, event: dict[str, Any]) -> ProgressLine:
        name = event.get("name") or "tool"
        args = event.get("args")
        words = self._call_words.get(name)
        if words is not None and isinstance(args, dict):
            text, target = words(args)
        else:
            text, target = f"Running {name}", None
        self._calls[event.get("id")] = _Call(name, target, text == f"Running {name}")
        return ProgressLine("tool", text)

    def _read_call(self, args: dict[str, Any]) -> tuple[str, str | None]:
        path = _str_arg(args, "path")
        if path is None:
            return "Running read", None
        path = self.short_path(path)
        offset, limit = _int_arg(args.get("offset")), _int_arg(args.get("limit"))
        span = ""
        if offset is not None and limit is not None and limit > 0:
            span = f" (lines {offset}-{offset + limit - 1})"
        elif offset is not None:
            span = f" (from line {offset})"
        elif limit is not None and limit > 0:
            span = f" (first {_n(limit, 'line')})"
        return f"Reading {path}{span}", path

    def _grep_call(self, args: dict[str, Any]) -> tuple[str, str | None]:
        pattern = _str_arg(args, "pattern")
        if pattern is None:
            return "Running grep", None
        text = "Searching code for " + clip(_first_line(pattern), self.width // 2)
        path = _str_arg(args, "path")
        if path is not None and not self._is_cwd(path):
            text += " in " + self.short_path(path)
        glob = _str_arg(args, "glob")
        if glob is not None:
            text += f" ({glob})"
        return text, pattern

    def _find_call(self, args: dict[str, Any]) -> tuple[str, str | None]:
        pattern = _str_arg(args, "pattern")
        if pattern is None:
            return "Running find", None
        text = "Scanning for " + clip(_first_line(pattern), self.width // 2)
        path = _str_arg(args, "path")
        if path is not None and not self._is_cwd(path):
            text += " in " + self.short_path(path)
        return text, pattern

    def _ls_call(self, args: dict[str, Any]) -> tuple[str, str | None]:
        path = _str_arg(args, "path")
        if path is None or self._is_cwd(path):
            return "Listing files", None
        path = self.short_path(path)
        return f"Listing {path}", path

    def _edit_call(self, args: dict[str, Any]) -> tuple[str, str | None]:
        path = _str_arg(args, "path")
        if path is None:
            return "Running edit", None
        path = self.short_path(path)
        edits = args.get("edits")
        extra = f" ({_n(len(edits), 'edit')})" if isinstance(edits, list) and len(edits) > 1 else ""
        return f"Editing {path}{extra}", path

    def _write_call(self, args: dict[str, Any]) -> tuple[str, str | None]:
        path = _str_arg(args, "path")
        if path is None:
            return "Running write", None
        path = self.short_path(path)
        content = args.get("content")
        if not isinstance(content, str):
            return f"Writing {path}", path
        lines = _line_count(content)
        return f"Writing {path} ({'+' + _n(lines, 'line') if lines else 'empty'})", path

    def _bash_call(self, args: dict[str, Any]) -> tuple[str, str | None]:
        command = _str_arg(args, "command")
        if command is None:
            return "Running bash", None
        short = self.short_command(command)
        return short, short

    def _tool_result(self, event: dict[str, Any]) -> ProgressLine:
        call = self._calls.pop(event.get("id"), None)
        text = event.get("text")
        text = text if isinstance(text, str) else ""
        failed = bool(event.get("isError"))
        if call is None or call.generic:
            name = call.name if call is not None else (event.get("name") or "tool")
            if not failed:
                return ProgressLine("done", f"{name} finished")
            return ProgressLine("failed", self._with_reason(f"{name} failed", text))
        if failed:
            return ProgressLine("failed", self._failure(call, text))
        return ProgressLine("done", self._success(call, text, event.get("details")))

    def _with_reason(self, head: str, text: str) -> str:
        reason = self._reason(text, self.width - len(head) - len(SEP))
        return head + SEP + reason if reason else head

    def _failure(self, call: _Call, text: str) -> str:
        name, target = call.name, call.target
        if name == "read":
            return self._with_reason(f"Read failed: {target}", text)
        if name == "edit":
            return self._with_reason(f"Edit failed: {target}", text)
        if name == "write":
            return self._with_reason(f"Write failed: {target}", text)
        if name == "ls":
            return self._with_reason(f"Listing failed: {target}" if target else "Listing failed", text)
        if name == "grep":
            return self._with_reason("Search failed", text)
        if name == "find":
            return self._with_reason("Scan failed", text)
        if name == "bash":
            head = f"Command failed: {clip(target or '', self.width // 2)}"  # target is set: not generic
            status = text.rstrip().rpartition("\n")[2].strip()
            if status.startswith(_BASH_STATUS):
                return head + SEP + status[len("Command "):]
            return self._with_reason(head, text)
        return self._with_reason(f"{name} failed", text)

    def _success(self, call: _Call, text: str, details: Any) -> str:
        name, target = call.name, call.target
        if name == "read":
            return f"Finished reading {target}"
        if name == "edit":
            diff = details.get("diff") if isinstance(details, dict) else None
            if isinstance(diff, str) and diff and not _was_shortened(diff):
                added, removed = _diff_counts(diff)
                return f"Finished editing {target} (+{added} -{removed})"
            return f"Finished editing {target}"
        if name == "write":
            return f"Finished writing {target}"
        if name == "grep":
            if text.strip() == "No matches found":
                return "Search finished (no matches)"
            body, more = _listing_body(text)
            count = len(_GREP_MATCH.findall(body))
            if not count:
                return "Search finished"
            return f"Search finished ({'at least ' if more else ''}{_n(count, 'match')})"
        if name == "find":
            if text.strip() == "No files found matching pattern":
                return "Scan finished (no files)"
            body, more = _listing_body(text)
            files, dirs = _count_entries(body)
            return f"Scan finished ({_entries_phrase(files, dirs, more)})" if files or dirs \
                else "Scan finished"
        if name == "ls":
            if text.strip() == "(empty directory)":
                return "Listing finished (empty directory)"
            body, more = _listing_body(text)
            files, dirs = _count_entries(body)
            return f"Listing finished ({_entries_phrase(files, dirs, more)})" if files or dirs \
                else "Listing finished"
        if name == "bash":
            output = _first_line(text)
            if not output or output == "(no output)":
                return "Command finished (no output)"
            return "Command finished" + SEP + clip(output, self.width - len("Command finished") - len(SEP))
        return f"{name} finished"

    def _error(self, event: dict[str, Any]) -> ProgressLine:
        message = event.get("message")
        self._said_error = message or None
        return ProgressLine("error", f"Error: {message}" if message else "Error")

    def _retry(self, event: dict[str, Any]) -> ProgressLine | None:
        attempt, most = event.get("attempt"), event.get("maxAttempts")
        message = event.get("errorMessage") if event.get("phase") == "start" else event.get("finalError")
        tail = SEP + _first_line(message) if isinstance(message, str) and message.strip() else ""
        if event.get("phase") == "start":
            count = f" (attempt {attempt}{f' of {most}' if most else ''})" if attempt else ""
            return ProgressLine("info", f"Retrying after provider error{count}{tail}")
        if event.get("phase") == "end" and event.get("success") is False:
            return ProgressLine("info", f"Stopped retrying{tail}")
        return None

    # -- the conversation with the person (child/rpc.py) --------------------------------------------
    def _user_message(self, event: dict[str, Any]) -> ProgressLine:
        return ProgressLine("info", f"you ({message_words(event)}): {event.get('text') or ''}")

    def _question(self, event: dict[str, Any]) -> ProgressLine:
        head = "Asks for approval" if event.get("approval") else "Asks"
        words = [str(w) for w in (event.get("title"), event.get("message")) if isinstance(w, str) and w.strip()]
        options = event.get("options")
        if isinstance(options, list) and options:
            words.append("[" + " | ".join(str(o) for o in options) + "]")
        return ProgressLine("info", f"{head}: {SEP.join(words)}" if words else head)

    def _answer(self, event: dict[str, Any]) -> ProgressLine:
        value, by = event.get("value"), event.get("by")
        if isinstance(value, bool):
            said = "allowed" if value else "denied"
        else:
            said = "no answer" if value is None else f"answered: {value}"
        if by == "nobody":  # questionTimeout 0 (a headless run): nobody was asked; an approval got the policy's word
            approval = isinstance(value, bool)
            return ProgressLine("info", f"{said[0].upper()}{said[1:]}{' by the policy' if approval else ''}: "
                                        + NOBODY.format(command="approve" if approval else "answer"))
        who = {"person": "you", "timeout": "no reply in time", "policy": "the policy: no reply in time"}.get(by, by)
        return ProgressLine("info", f"{said[0].upper()}{said[1:]} ({who})")

    def _fallback(self, event: dict[str, Any]) -> ProgressLine:
        error = event.get("error")
        tail = SEP + _first_line(error) if isinstance(error, str) and error.strip() else ""
        return ProgressLine("error", f"{event.get('from')} failed{tail}; going on with {event.get('to')}")

    def _stdout(self, event: dict[str, Any]) -> ProgressLine | None:
        text = event.get("text")
        text = text.strip() if isinstance(text, str) else ""
        return ProgressLine("info", text) if text else None

    def _run_end(self, event: dict[str, Any]) -> ProgressLine:
        status, message = event.get("status"), event.get("errorMessage")
        if message and message == self._said_error:  # said a moment ago by the error line
            return ProgressLine("failed" if status == "failed" else "error", "Failed" if status == "failed"
                                else "Aborted" if status == "aborted" else f"Ended: {status}")
        if status == "completed":
            return ProgressLine("done", "Completed")
        if status == "aborted":  # with the calls it was making: what was stopped (a tally says only how many)
            flight = ", ".join(call.target or call.name for call in self._calls.values())
            text = f"Aborted: {message}" if message else "Aborted"
            return ProgressLine("error", text + (f"{SEP}while running: {clip(flight, self.width // 2)}" if flight
                                                 else ""))
        if status == "failed":
            if message:
                return ProgressLine("failed", f"Failed: {message}")
            code = event.get("exitCode")
            return ProgressLine("failed", f"Failed (exit code {code})" if code is not None else "Failed")
        text = f"Ended: {status}" if status else "Ended"
        return ProgressLine("error", f"{text}: {message}" if message else text)


# -- transcript ----------------------------------------------------------------------------------
def _local_time(value: Any, fmt: str) -> str | None:
    """Unix seconds or an ISO-8601 string (``...Z`` as written by artifacts.now_iso) -> local time."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return time.strftime(fmt, time.localtime(value))
    if isinstance(value, str) and value:
        try:
            moment = datetime.fromisoformat(value[:-1] + "+00:00" if value.endswith("Z") else value)
        except ValueError:
            return value
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=timezone.utc)
        return moment.astimezone().strftime(fmt)
    return None


def transcript_header(record: RunRecord, started_at: str | None = None) -> str:
    """The generic head of ``transcript.log``: what ran, where, with what (no agent-role line)."""
    model = record.resolved_model or record.requested_model
    started = _local_time(started_at or record.created_at, "%Y-%m-%d %H:%M:%S")
    harness = record.harness if record.harness != DEFAULT else None  # the default's runs keep their header
    rows = [("Run", record.run_id), ("Preset", record.preset), ("Harness", harness), ("Model", model),
            ("Cwd", record.cwd), ("Started", started)]
    lines = [f"{label + ':':<9}{value}" for label, value in rows if value]
    task = record.task
    if isinstance(task, str) and task.strip():
        task_lines = task.strip().split("\n")
        shown = task_lines[:TASK_HEADER_LINES]
        hidden = len(task_lines) - len(shown)
        if hidden:
            shown.append(f"{ELLIPSIS} ({hidden} more {'line' if hidden == 1 else 'lines'})")
        lines.append(f"{'Task:':<9}{shown[0]}")
        lines.extend(" " * 9 + row for row in shown[1:])
    return "\n".join(lines) + "\n"


def transcript_line(event: dict[str, Any], line: ProgressLine) -> str:
    """``[21:25:11] Reading src/auth.ts``; failures carry a ✗ so they stand out when scanning a log."""
    stamp = _local_time(event.get("ts"), "%H:%M:%S") or "--:--:--"
    mark = "✗ " if line.kind in ("failed", "error") else "thinking: " if line.kind == "thinking" else ""
    text = line.text
    if "\n" in text:  # keep the child's whole text, aligned under its first line
        text = text.replace("\n", "\n" + " " * (len(stamp) + 3 + len(mark)))
    return f"[{stamp}] {mark}{text}"
