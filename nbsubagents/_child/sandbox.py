"""The original folder of an isolated run, read-only for pi and every process it starts (Linux).

An isolated run works in a copy (``isolation``), but a process could still write to the original folder by
its absolute path (``cd /home/me/project && ...``). So pi starts in a mount namespace of its own in which
the original folder is a read-only view of itself; only the places the run must write are left writable
("holes": the run's folder, its workspace, git's own folder, pi's settings when they lie inside). Reading
works as before (a project's ``.venv`` or ``node_modules`` that the copy leaves out still runs); a write there
fails with "Read-only file system" and reaches nothing. Nothing outside the mount namespace sees a change,
and the namespace ends with the last process in it.

A process that is not root gets the namespace inside a user namespace of its own (its uid and gid map to
themselves, so files keep their owner); where neither is allowed (macOS, a container without user
namespaces), ``probe`` says why and the run goes on uncontained, recording that in its result.
Standard library only.
"""

from __future__ import annotations

import ctypes
import os
import sys

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
MS_RDONLY = 1
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18


class SandboxError(OSError):
    """A step of entering the read-only view failed; the message names the step."""


def _call(libc: ctypes.CDLL, what: str, fn: str, *args: object) -> None:
    if getattr(libc, fn)(*args) != 0:
        err = ctypes.get_errno()
        raise SandboxError(f"{what}: {os.strerror(err)}")


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def enter(root: str, holes: list[str]) -> None:
    """Make ``root`` read-only for this process and its descendants, except ``holes`` (folders inside it).

    Meant for a child between fork and exec (``subprocess.Popen(preexec_fn=...)``) or a probe: it changes
    the calling process's mount namespace, never anyone else's.
    """
    if sys.platform != "linux":
        raise SandboxError(f"mount namespaces are Linux only (this is {sys.platform})")
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p]
    uid, gid = os.geteuid(), os.getegid()
    if uid == 0 and libc.unshare(CLONE_NEWNS) == 0:
        pass
    else:
        _call(libc, "a user and mount namespace (unshare)", "unshare", CLONE_NEWUSER | CLONE_NEWNS)
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{uid} {uid} 1")
        _write("/proc/self/gid_map", f"{gid} {gid} 1")
    _call(libc, "making the mounts private", "mount", None, b"/", None, MS_REC | MS_PRIVATE, None)
    for hole in holes:  # before the folder turns read-only: a bind keeps its source's flags
        path = os.fsencode(hole)
        _call(libc, f"keeping {hole} writable", "mount", path, path, None, MS_BIND | MS_REC, None)
    path = os.fsencode(root)
    _call(libc, f"a view of {root}", "mount", path, path, None, MS_BIND | MS_REC, None)
    _call(libc, f"making {root} read-only", "mount", None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY, None)


def probe(root: str, holes: list[str]) -> str | None:
    """None when ``enter(root, holes)`` works here (tried in a short-lived fork), else why not."""
    if sys.platform != "linux":
        return f"mount namespaces are Linux only (this is {sys.platform})"
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the probe: enter, report, leave (nothing of it outlives the fork)
        os.close(read)
        try:
            enter(root, holes)
            message = b""
        except BaseException as exc:  # noqa: BLE001 (any failure is the answer)
            message = str(exc).encode(errors="replace") or type(exc).__name__.encode()
        os.write(write, message[:1000])
        os._exit(0)
    os.close(write)
    try:
        chunks = []
        while chunk := os.read(read, 1024):
            chunks.append(chunk)
    finally:
        os.close(read)
        os.waitpid(pid, 0)
    message = b"".join(chunks).decode(errors="replace")
    return message or None
