"""Read-only folders and full disks for tests: real mounts when this process may mount (root), else
what an ordinary user has (``chmod`` for read-only; there is no full disk without a mount)."""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import subprocess
from pathlib import Path
from typing import Iterator

import pytest


def _mount(*args: str) -> bool:
    return shutil.which("mount") is not None and subprocess.run(
        ["mount", *args], capture_output=True).returncode == 0


def _umount(path: Path) -> None:
    subprocess.run(["umount", "-l", str(path)], capture_output=True)


@contextlib.contextmanager
def read_only(path: Path) -> Iterator[None]:
    """``path`` (an existing folder) cannot be written for the duration, by root too."""
    if os.geteuid() != 0:
        mode = path.stat().st_mode
        path.chmod(stat.S_IMODE(mode) & ~0o222)
        try:
            yield
        finally:
            path.chmod(stat.S_IMODE(mode))
        return
    if not (_mount("--bind", str(path), str(path)) and _mount("-o", "remount,bind,ro", str(path))):
        _umount(path)
        pytest.skip("running as root without the right to mount: no way to make a folder read-only")
    try:
        yield
    finally:
        _umount(path)


@contextlib.contextmanager
def small_disk(path: Path, size: str = "64k") -> Iterator[None]:
    """A tmpfs of ``size`` mounted at ``path`` (created if missing): a disk that fills up at once."""
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0 or not _mount("-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)):
        pytest.skip("a full disk needs a tmpfs mount (root with the right to mount)")
    try:
        yield
    finally:
        _umount(path)
