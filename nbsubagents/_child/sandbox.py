"""The original folder of an isolated run, read-only for pi and every process it starts (Linux).

An isolated run works in a copy (``isolation``), but a process could still write to the original folder by
its absolute path (``cd /home/me/project && ...``). So pi starts in a mount namespace of its own in which
the original folder (and the git folder of its repository, wherever that is, and the run's own folder) is a
read-only view of itself; only the places the run must write are left writable ("holes": what the harness writes
in the run's folder, the workspace, pi's settings, the temporary folder, when they lie inside). Reading works as
before (a project's ``.venv`` or ``node_modules`` that the copy leaves out still runs); a write there fails with
"Read-only file system" and reaches nothing.
Folders that hold the person's keys to running processes (Jupyter's kernel connection files, nbsubagents' own
state) are covered by an empty read-only folder. Nothing outside the mount namespace sees a change, and the
namespace ends with the last process in it.

The mounts are made in one namespace, and pi starts in a user namespace below it, as root too: mounts handed down
to a less privileged namespace are locked, so neither ``mount -o remount,rw`` nor unmounting the view undoes them
(a root's process keeps every uid and its rights over files, but no capability outside that namespace). A process
that is not root makes the first namespace inside a user namespace of its own (its uid and gid map to themselves,
so files keep their owner); where this is not allowed (macOS, a container without user namespaces), ``probe``
says why and the run goes on uncontained, recording that in its result. Standard library only.
"""

from __future__ import annotations

import ctypes
import os
import sys

from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from collections.abc import Sequence

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
EVERY_ID = 4294967295  # uids 0 .. 2**32 - 2: the whole range, each mapped to itself


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


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p]
    return libc


def _user_namespace(libc: ctypes.CDLL, what: str) -> None:
    """Enter a user and mount namespace whose ids are this process's own: this uid and gid alone for a user who is
    not root (who may map no other), every id for root, so that it keeps its rights over every file. A process may
    map only its own id from inside, so root's map is written by a helper left outside."""
    threads = len(os.listdir("/proc/self/task"))
    if threads > 1:  # the kernel's EINVAL says no more
        raise SandboxError(f"{what}: this process has {threads} threads (a library's fork handler may have started "
                           "one), and only a process of one thread can enter a user namespace")
    uid, gid = os.geteuid(), os.getegid()
    if uid != 0:
        _call(libc, what, "unshare", CLONE_NEWUSER | CLONE_NEWNS)
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{uid} {uid} 1")
        _write("/proc/self/gid_map", f"{gid} {gid} 1")
        return
    me, (read, write) = os.getpid(), os.pipe()
    helper = os.fork()
    if helper == 0:
        os.close(write)
        os.read(read, 1)  # end of file: this process has entered the namespace (or failed to)
        try:
            for name in ("uid_map", "gid_map"):
                _write(f"/proc/{me}/{name}", f"0 0 {EVERY_ID}")
        except OSError:
            os._exit(1)
        os._exit(0)
    os.close(read)
    try:
        _call(libc, what, "unshare", CLONE_NEWUSER | CLONE_NEWNS)
    finally:
        os.close(write)
        status = os.waitpid(helper, 0)[1]
    if status != 0:
        raise SandboxError(f"{what}: the ids could not be mapped")


def enter(readonly: list[str], holes: list[str], hidden: Sequence[str] = ()) -> None:
    """Make the folders ``readonly`` read-only for this process and its descendants, except ``holes`` (folders
    inside them), cover each of ``hidden`` with an empty read-only folder, and lock it all.

    Meant for a child between fork and exec (``subprocess.Popen(preexec_fn=...)``) or a probe: it changes
    the calling process's mount namespace, never anyone else's.
    """
    if sys.platform != "linux":
        raise SandboxError(f"mount namespaces are Linux only (this is {sys.platform})")
    libc = _libc()
    if os.geteuid() != 0 or libc.unshare(CLONE_NEWNS) != 0:
        _user_namespace(libc, "a user and mount namespace (unshare)")
    _call(libc, "making the mounts private", "mount", None, b"/", None, MS_REC | MS_PRIVATE, None)
    for hole in holes:  # before the folder turns read-only: a bind keeps its source's flags
        path = os.fsencode(hole)
        _call(libc, f"keeping {hole} writable", "mount", path, path, None, MS_BIND | MS_REC, None)
    for place in readonly:
        path = os.fsencode(place)
        _call(libc, f"a view of {place}", "mount", path, path, None, MS_BIND | MS_REC, None)
        _call(libc, f"making {place} read-only", "mount", None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY, None)
    for place in hidden:
        _call(libc, f"hiding {place}", "mount", b"tmpfs", os.fsencode(place), b"tmpfs",
              MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, b"size=4k,mode=0500")
    _user_namespace(libc, "locking the mounts (a user namespace below them)")


def _undo(readonly: list[str]) -> str | None:
    """Why the view does not hold: a place that can be written, or remounted writable (None when none can)."""
    libc = _libc()
    for place in readonly:
        if os.access(place, os.W_OK):
            return f"{place} is still writable"
        if libc.mount(None, os.fsencode(place), None, MS_REMOUNT | MS_BIND, None) == 0:
            return f"{place} can be remounted writable inside the sandbox"
    return None


def probe(readonly: list[str], holes: list[str], hidden: Sequence[str] = ()) -> str | None:
    """None when ``enter(readonly, holes, hidden)`` works here and holds against a remount (tried in a
    short-lived fork), else why not."""
    if sys.platform != "linux":
        return f"mount namespaces are Linux only (this is {sys.platform})"
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the probe: enter, try to undo it, report, leave (nothing of it outlives the fork)
        os.close(read)
        try:
            enter(readonly, holes, hidden)
            message = (_undo(readonly) or "").encode()
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
