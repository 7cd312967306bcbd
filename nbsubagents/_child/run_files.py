"""The supervisor's run-directory files: append-only artifact files that stop at their first write error (the
child's raw output masked line by line), ``supervisor.json``, the heartbeat file, and ``result.json`` written also
on a full disk (from room reserved at the start) or for a value JSON cannot hold.
Standard library only: the supervisor imports it at its start.
"""

from __future__ import annotations

import fcntl
import os
from contextlib import contextmanager
from pathlib import Path

from . import keys
from .artifacts import RunPaths, atomic_write, atomic_write_json, open_append, open_regular, read_bytes

from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from typing import IO, Any, Callable, Iterator

RESERVE = ".result-reserve"      # space held from the start so that result.json fits on a full disk
RESERVE_BYTES = 64 * 1024


class Sink:
    """An append-only artifact file that stops trying after its first write error. It is opened (made) at its first
    write, or at its close when nothing was written: a run's files are not made before its child is started."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fh: IO[bytes] | None = None
        self.opened = False

    def _open(self) -> None:
        self.opened = True
        try:
            self.fh = open_append(self.path)  # kept open until close()
        except OSError:
            self.fh = None

    def write(self, data: bytes) -> None:
        if not self.opened:
            self._open()
        if self.fh is None:
            return
        try:
            self.fh.write(data)
        except (OSError, ValueError):
            self.close()

    def flush(self) -> None:
        if self.fh is not None:
            try:
                self.fh.flush()
            except OSError:
                self.close()

    def close(self) -> None:
        if not self.opened:
            self._open()  # an artifact of the run even when empty
        if self.fh is not None:
            try:
                self.fh.close()
            except OSError:
                pass
            self.fh = None


def masked_bytes(data: bytes, mask: Callable[[str], str]) -> bytes:
    """``data`` masked as text, its bytes that are not UTF-8 kept as they were."""
    return mask(data.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")


def mask_file(path: Path, mask: Callable[[str], str]) -> None:
    """A file the child wrote itself (its stderr) masked once the child is gone, as what we write is (left as it is
    when it is no regular file of a sane size: the child may have put anything in its place)."""
    try:
        data = read_bytes(path)
    except OSError:
        return
    masked = masked_bytes(data, mask)
    if masked != data:
        atomic_write(path, masked, sync=False)


class MaskedSink(Sink):
    """A ``Sink`` of the child's raw output that masks each whole line before it is written (a line cut between two
    reads waits for its end, so a secret is never split where the masking cannot see it). A line longer than
    ``HELD`` is masked and written in parts, each but its last ``TAIL`` bytes (longer than any secret), which wait
    for what comes next: memory stays bounded however long a line the child prints."""

    HELD = 1 << 20
    TAIL = 4096

    def __init__(self, path: Path, mask: Callable[[str], str]) -> None:
        super().__init__(path)
        self.mask, self.rest = mask, b""

    def write(self, data: bytes) -> None:
        lines, end, self.rest = (self.rest + data).rpartition(b"\n")
        if end:
            super().write(masked_bytes(lines + end, self.mask))
        if len(self.rest) > self.HELD:
            masked = masked_bytes(self.rest, self.mask)
            if masked[-self.TAIL:] == self.rest[-self.TAIL:]:  # no mask reaches into the tail: it waits, raw
                masked, self.rest = masked[:-self.TAIL], self.rest[-self.TAIL:]
            else:
                self.rest = b""
            super().write(masked)

    def close(self) -> None:
        if self.rest:
            super().write(masked_bytes(self.rest, self.mask))
            self.rest = b""
        super().close()


def remove_half_folder(path: Path) -> None:
    """What the child or we wrote into a run folder after it was deleted (no meta.json in it): removed."""
    for top, dirs, files in os.walk(path, topdown=False):
        for name in files + dirs:
            entry = os.path.join(top, name)
            best_effort(os.rmdir if name in dirs and not os.path.islink(entry) else os.unlink, entry)
    best_effort(os.rmdir, path)


def describe(path: Path, info: dict[str, Any]) -> None:
    """supervisor.json, atomically but not synced to disk: it describes this process, which a crash of the
    machine ends too (and the fsync, a few ms, would come before pi's start)."""
    atomic_write_json(path, info, sync=False)


def touch(path: Path) -> None:
    open_append(path).close()


def sync(path: Path) -> None:
    """Make a file written without an fsync (``meta.json``) durable, off the path to pi's start."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def reserve(path: Path) -> None:
    atomic_write(path, b"\0" * RESERVE_BYTES, sync=False)


def write_result(paths: RunPaths, result: dict[str, Any]) -> None:
    """result.json, also on a full disk: the reserve made at the start is freed first, and a final text
    too long for what is left is shortened rather than lost with the rest. The run's key goes: nothing more is
    said to it."""
    keys.forget(paths.dir.name)
    try:
        os.unlink(paths.dir / RESERVE)
    except OSError:
        pass
    try:
        atomic_write_json(paths.result, result)
        return
    except ValueError:  # not JSON (a lone surrogate, a value that cannot be written): written cleaned
        result = clean(result)
    try:
        atomic_write_json(paths.result, result)
    except OSError:
        text = result.get("finalText") or ""
        keep = RESERVE_BYTES // 8
        short = text[:keep] + ("… [shortened: the disk was full]" if len(text) > keep else "")
        atomic_write_json(paths.result, {**result, "finalText": short})


def clean(value: Any) -> Any:
    """``value`` with every string made writable as UTF-8 (a lone surrogate becomes U+FFFD) and every value
    JSON cannot hold written as its text."""
    if isinstance(value, str):
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(value, dict):
        return {clean(str(k)): clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return clean(repr(value))


def tail(path: Path, size: int = 4096) -> str:
    """The last ``size`` bytes of a file, as text ("" when it cannot be read)."""
    try:
        with open_regular(path) as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - size))
            return fh.read().decode(errors="replace")
    except OSError:
        return ""


def last_line(path: Path) -> str:
    lines = [ln.strip() for ln in tail(path).splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""


def best_effort(fn: Any, *args: Any) -> None:
    try:
        fn(*args)
    except OSError:
        pass


@contextmanager
def exclusive(lock: Path) -> Iterator[None]:
    """Hold an advisory lock across processes (``flock`` on the file ``lock``, made if missing) while the block runs;
    released when the holder ends, however it ends. Without one when the file cannot be made (the block runs
    unlocked, as the callers' work would fail or do nothing there anyway)."""
    try:
        fd: int | None = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)  # not inherited by the block's processes
    except OSError:
        fd = None
    try:
        if fd is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        if fd is not None:
            os.close(fd)
