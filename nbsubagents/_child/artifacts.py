"""The run directory: its layout, atomic writes, and readers.

A run directory is the source of truth for one run; everything else (registry rows, panels) is
derived from it, so its files are written in an order that a reader can rely on: ``meta.json``
before the supervisor starts, ``events.jsonl``/``transcript.log``/``stdout.log`` while it runs,
``result.json`` last and atomically.
"""

from __future__ import annotations

import json
import os
import time
from datetime import datetime
from pathlib import Path

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any, Iterator

SCHEMA_VERSION = 1
# The one status vocabulary: every run is in one of these; ACTIVE ones may still change, TERMINAL ones never do.
# "waiting" is a running run with a question open (its waiting.json, ``child.inbox``): never written to
# result.json or the registry, which say "running"; the readers derive it (``registry.store.is_waiting``).
STATUSES = ("queued", "running", "waiting", "completed", "failed", "aborted")
ACTIVE = ("queued", "running", "waiting")
TERMINAL = ("completed", "failed", "aborted")
# A run whose folder (its meta.json) was deleted while it ran: its supervisor ends it and writes nothing more.
RUN_DIR_GONE = "its run folder was deleted while it ran"


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
        with open(path, "rb") as fh:
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
    """Readers see the old file or the whole new one, never a half-written one.

    With ``exclusive`` an existing file is kept (the first writer wins, atomically) and False is
    returned. The temporary name is unique, so threads and processes writing at once do not collide.
    ``sync=False`` skips the fsync (a few ms): for a file that only describes a live process, which a crash of
    the machine ends too.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=2, ensure_ascii=False)
            fh.write("\n")
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
            if path.exists():
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


def read_json(path: Path) -> dict[str, Any] | None:
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def read_events(path: Path) -> Iterator[dict[str, Any]]:
    """Every complete event line; a torn last line (run still writing) is skipped."""
    try:
        fh = open(path, "rb")
    except OSError:
        return
    with fh:
        for raw in fh:
            if raw.endswith(b"\n"):
                try:
                    yield json.loads(raw)
                except ValueError:
                    continue


class EventTail:
    """Follows a growing events.jsonl from where it last stopped: cheap to poll."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self._partial = b""

    def read_new(self) -> list[dict[str, Any]]:
        try:
            if os.stat(self.path).st_size == self.offset:  # nothing new: a stat, where an open costs 3 calls
                return []
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                chunk = fh.read()
        except OSError:
            return []
        if not chunk:
            return []
        self.offset += len(chunk)
        data = self._partial + chunk
        lines = data.split(b"\n")
        self._partial = lines.pop()
        out = []
        for raw in lines:
            try:
                out.append(json.loads(raw))
            except ValueError:
                continue
        return out
