"""The run directory: its layout, atomic writes, and readers.

A run directory is the source of truth for one run; everything else (registry rows, panels) is
derived from it, so its files are written in an order that a reader can rely on: ``meta.json``
before the supervisor starts, ``events.jsonl``/``transcript.log``/``stdout.log`` while it runs,
``result.json`` last and atomically.

Every read of a run's files goes through ``open_regular``: a child can put a FIFO, a device or a huge file where
a file of its run should be, and no reader may hang on it or load it whole. A file read whole is bounded by
``MAX_FILE`` (past it, JSON is unreadable and text is cut with ``CUT``), a line of ``events.jsonl`` by ``MAX_LINE``
(``Lines``: a longer one is given cut, never held whole). Both are far above what a real run writes.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import time
from datetime import datetime
from pathlib import Path

from .events import MAX_LINE as _PI_LINE

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import IO, Any, Iterator

SCHEMA_VERSION = 1
# The one status vocabulary: every run is in one of these; ACTIVE ones may still change, TERMINAL ones never do.
# "waiting" is a running run with a question open (its waiting.json, ``child.inbox``): never written to
# result.json or the registry, which say "running"; the readers derive it (``registry.store.is_waiting``).
STATUSES = ("queued", "running", "waiting", "completed", "failed", "aborted")
ACTIVE = ("queued", "running", "waiting")
TERMINAL = ("completed", "failed", "aborted")
# A run whose folder (its meta.json) was deleted while it ran: its supervisor ends it and writes nothing more.
RUN_DIR_GONE = "its run folder was deleted while it ran"
# Bounds of a read. A run's JSON files hold its task, final text and questions (kilobytes); its transcript and patch
# rarely reach megabytes. An events line holds at most one line of pi's (the supervisor parses none over
# events.MAX_LINE), written again with its non-ASCII characters as they are: twice that is room to spare.
MAX_FILE = 64 * 1024 * 1024
MAX_LINE = 2 * _PI_LINE
CHUNK = 1024 * 1024
CUT = "[cut]"  # the marker of what a bound left out


class RunPaths:
    """Where each artifact of one run lives (a plain class: dataclasses would slow the supervisor's start)."""

    __slots__ = ("dir",)

    def __init__(self, dir: Path) -> None:  # noqa: A002 - the run directory
        self.dir = dir

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RunPaths) and other.dir == self.dir

    def __hash__(self) -> int:
        return hash(self.dir)

    def __repr__(self) -> str:
        return f"RunPaths({str(self.dir)!r})"

    @property
    def project(self) -> Path:
        """The project folder the run belongs to: ``<project>/.pi/subagents/runs/<id>``."""
        return self.dir.parents[3]

    @property
    def meta(self) -> Path: return self.dir / "meta.json"
    @property
    def events(self) -> Path: return self.dir / "events.jsonl"
    @property
    def result(self) -> Path: return self.dir / "result.json"
    @property
    def stdout(self) -> Path: return self.dir / "stdout.log"
    @property
    def stderr(self) -> Path: return self.dir / "stderr.log"
    @property
    def transcript(self) -> Path: return self.dir / "transcript.log"
    @property
    def session(self) -> Path: return self.dir / "child-session.jsonl"
    @property
    def system_prompt(self) -> Path: return self.dir / "system-prompt.md"
    @property
    def prompt(self) -> Path: return self.dir / "prompt.md"
    @property
    def supervisor(self) -> Path: return self.dir / "supervisor.json"


def new_run_id() -> str:
    """Sortable by start time, unique without coordination between kernels."""
    return time.strftime("%Y%m%d-%H%M%S") + "-" + os.urandom(3).hex()


def runs_dir(root: Path) -> Path:
    return root / ".pi" / "subagents" / "runs"


def iso(t: float) -> str:
    """Unix seconds as the ISO time the artifacts use (UTC, milliseconds, ``Z``)."""
    seconds, ms = divmod(round(t * 1000), 1000)  # rounded: iso(parse_iso(x)) == x
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{ms:03d}Z"


def now_iso() -> str:
    return iso(time.time())


def parse_iso(text: Any) -> float | None:
    """The Unix seconds of an ISO time written by ``iso`` (None when it is not one)."""
    if not isinstance(text, str):
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def last_event_time(path: Path) -> float | None:
    """The ``ts`` of the last complete event in an events.jsonl: a run's last sign of life."""
    try:
        with open_regular(path) as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - 65536))
            lines = fh.read().split(b"\n")[:-1]  # the part after the last newline is torn or empty
    except OSError:
        return None
    for raw in reversed(lines):
        try:
            ts = json.loads(raw).get("ts")
        except (ValueError, AttributeError):
            continue
        if isinstance(ts, (int, float)):
            return float(ts)
    return None


EMPTY_USAGE = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0, "cost": 0}


def result_record(run_id: str | None, status: str, *, error: str | None, started_at: str, ended_at: str,
                  duration: float = 0.0, exit_code: int | None = None, stop_reason: str | None = None,
                  final_text: str = "", model: str | None = None, usage: dict[str, Any] | None = None,
                  turns: int = 0, tool_calls: int = 0) -> dict[str, Any]:
    """The one shape of result.json, whether the supervisor or the kernel (for a run that never ran) writes it."""
    return {"schemaVersion": SCHEMA_VERSION, "runId": run_id, "status": status, "exitCode": exit_code,
            "stopReason": stop_reason, "errorMessage": error, "finalText": final_text, "model": model,
            "usage": usage or dict(EMPTY_USAGE), "turns": turns, "toolCalls": tool_calls,
            "startedAt": started_at, "endedAt": ended_at, "durationSeconds": duration}


def atomic_write_json(path: Path, data: Any, *, exclusive: bool = False, sync: bool = True) -> bool:
    """``data`` as indented JSON, written with ``atomic_write``."""
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    return atomic_write(path, text.encode("utf-8"), exclusive=exclusive, sync=sync)


def atomic_write(path: Path, data: bytes, *, exclusive: bool = False, sync: bool = True) -> bool:
    """Readers see the old file or the whole new one, never a half-written one; a link or a FIFO in its place is
    replaced, never written through.

    With ``exclusive`` an existing file is kept (the first writer wins, atomically) and False is
    returned. The temporary name is unique, so threads and processes writing at once do not collide.
    ``sync=False`` skips the fsync (a few ms): for a file that only describes a live process, which a crash of
    the machine ends too.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    try:
        with open(tmp, "xb") as fh:
            fh.write(data)
            fh.flush()
            if sync:
                os.fsync(fh.fileno())
        if not exclusive:
            os.replace(tmp, path)
            return True
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
        except OSError:  # a filesystem without hard links: the next best, check then replace
            if os.path.lexists(path):
                return False
            os.replace(tmp, path)
            return True
        finally:
            if os.path.lexists(tmp):
                os.unlink(tmp)
        return True
    except BaseException:  # a full disk, say: no half-written temporary file stays behind
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


class NotAFile(OSError):
    """A run's file that is a FIFO, a device, a socket or a folder: never read (it could block or never end)."""


def open_regular(path: Path | str) -> IO[bytes]:
    """``path`` opened for reading when it is a regular file (a link to one is followed, as ``open`` does); else
    ``NotAFile`` at once: the open never waits for a FIFO's writer (``O_NONBLOCK``), nothing is read from it, and a
    terminal device never becomes our controlling one (``O_NOCTTY``)."""
    return _regular(os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC), path, "rb")


def open_append(path: Path | str) -> IO[bytes]:
    """``path`` opened to append to, made when missing, when it is a regular file; else an ``OSError`` at once: a
    FIFO a child put in its place never makes us wait for its reader, nor a link makes us write where it points."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_NOCTTY | os.O_CLOEXEC
    return _regular(os.open(path, flags, 0o644), path, "ab")


def _regular(fd: int, path: Path | str, mode: str) -> IO[bytes]:
    try:
        st_mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(st_mode):
            raise NotAFile(errno.EINVAL, _not_read(os.path.basename(path), st_mode), str(path))
        os.set_blocking(fd, True)
        return os.fdopen(fd, mode)
    except BaseException:
        os.close(fd)
        raise


def _not_read(name: str, mode: int) -> str:
    kind = ("a FIFO" if stat.S_ISFIFO(mode) else "a folder" if stat.S_ISDIR(mode) else
            "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "a socket")
    return f"{name} is {kind}, not a regular file: not read"


def unreadable(run_dir: Path) -> list[str]:
    """What a person is told of the run's files that no reader reads (a FIFO, a device, a socket where a file
    should be: each reader takes it for missing), one sentence a file."""
    try:
        entries = sorted(os.scandir(run_dir), key=lambda entry: entry.name)
    except OSError:
        return []
    out = []
    for entry in entries:
        try:
            mode = entry.stat().st_mode  # through a link, as open_regular opens it
        except OSError:
            continue
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
            out.append(_not_read(entry.name, mode))
    return out


def read_bytes(path: Path | str, limit: int = MAX_FILE) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes; ``OSError`` for a longer one (or none)."""
    with open_regular(path) as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise OSError(errno.EFBIG, f"{os.path.basename(path)} is over {size_words(limit)}: not read", str(path))
    return data


def read_text(path: Path | str, limit: int = MAX_FILE) -> str:
    """A run's text file (a transcript, a patch), decoded with replacement and cut after ``limit`` bytes with a
    line that says so; ``OSError`` when there is none or it is not a regular file."""
    with open_regular(path) as fh:
        data = fh.read(limit + 1)
    text = data[:limit].decode("utf-8", errors="replace")
    return text if len(data) <= limit else f"{text}\n{CUT} {os.path.basename(path)} is read up to {size_words(limit)}"


def size_words(size: int) -> str:
    """``16 MiB``, ``2.5 KiB``, ``12 bytes``."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:.3g} {unit}"
    return f"{size} bytes"


def read_json(path: Path) -> dict[str, Any] | None:
    """The JSON object in a run's file; None when it is missing, not a regular file, over ``MAX_FILE`` or not one."""
    try:
        data = json.loads(read_bytes(path))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


class Lines:
    """Cuts bytes into lines as they come, holding at most ``limit`` bytes of one: a longer line is given as a
    ``notice`` event that starts like it and says it was cut, and the rest of it is counted, never kept."""

    def __init__(self, name: str = "events.jsonl", limit: int = MAX_LINE) -> None:
        self.name, self.limit = name, limit
        self.parts: list[bytes] = []
        self.held = 0
        self.cut: int | None = None  # the length so far of the line being cut, else None
        self.head = b""

    def feed(self, chunk: bytes) -> list[bytes | dict[str, Any]]:
        """The lines ``chunk`` ends (without their newline), a cut one as its notice; the rest waits for more."""
        out: list[bytes | dict[str, Any]] = []
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            self._add(chunk[start:] if end < 0 else chunk[start:end])
            if end < 0:
                return out
            out.append(self._line())
            start = end + 1

    def _add(self, piece: bytes) -> None:
        if self.cut is not None:
            self.cut += len(piece)
        elif self.held + len(piece) > self.limit:
            self.head = (self.parts[0] if self.parts else piece)[:200]
            self.cut, self.parts, self.held = self.held + len(piece), [], 0
        elif piece:
            self.parts.append(piece)
            self.held += len(piece)

    def _line(self) -> bytes | dict[str, Any]:
        if self.cut is None:
            line = b"".join(self.parts)
        else:
            text = self.head.decode("utf-8", errors="replace")
            line = {"type": "notice", "text": f"{text}… {CUT} a line of {size_words(self.cut)} in {self.name}, "
                                              f"over the {size_words(self.limit)} a line is read up to"}
        self.parts, self.held, self.cut, self.head = [], 0, None, b""
        return line


def parsed(lines: list[bytes | dict[str, Any]]) -> list[dict[str, Any]]:
    """The events among ``lines`` (``Lines.feed``'s): each JSON object, each cut line's notice."""
    out = []
    for raw in lines:
        try:
            event = json.loads(raw) if isinstance(raw, bytes) else raw
        except ValueError:
            continue
        if isinstance(event, dict):
            out.append(event)
    return out


def read_events(path: Path) -> Iterator[dict[str, Any]]:
    """Every complete event line, a line over ``MAX_LINE`` as a notice that it was cut; a torn last line (the run
    still writing) is skipped."""
    try:
        fh = open_regular(path)
    except OSError:
        return
    lines = Lines(path.name)
    with fh:
        while chunk := fh.read(CHUNK):
            yield from parsed(lines.feed(chunk))


class EventTail:
    """Follows a growing events.jsonl from where it last stopped: cheap to poll."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self._lines = Lines(path.name)

    def read_new(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        try:
            if os.stat(self.path).st_size == self.offset:  # nothing new: a stat, where an open costs 3 calls
                return []
            with open_regular(self.path) as fh:
                fh.seek(self.offset)
                while chunk := fh.read(CHUNK):
                    self.offset += len(chunk)
                    out += parsed(self._lines.feed(chunk))
        except OSError:
            pass
        return out
