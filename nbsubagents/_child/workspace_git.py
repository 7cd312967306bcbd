"""The git plumbing of an isolated run's workspace (``isolation``): one way to call git (hooks and prompts off), a
repository's workspace as a clone with a git folder of its own, a folder's files as git lists and copies them (its
``.gitignore`` respected, the project's own run records left out), and the workspace's states as git trees.
Standard library only; ``isolation`` decides what is done with them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

from .errors import NbSubagentsError

from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from typing import Any, Callable

SHARE_LIMIT = 256 * 1024  # a starting state's file up to this size may enter the repository's store (``share_base``)
# The project's own run records are never copied into a run's workspace.
_OWN = (".pi/subagents/runs/", ".pi/subagents/registry.sqlite")
SKIP_OWN = ("--exclude=**/.pi/subagents/runs/", "--exclude=**/.pi/subagents/registry.sqlite*")  # not even listed


class IsolationError(NbSubagentsError):
    """Setting up, capturing or applying a run's workspace failed; the message says what and where."""


def git(args: list[str], cwd: Path | str | None = None, *, input: bytes | None = None, check: bool = True,
        git_dir: str | None = None, contain: Callable[[], None] | None = None) -> subprocess.CompletedProcess[bytes]:
    """A git command, with hooks and prompts off and none of git's folder variables of the caller; ``contain``
    (the run's sandbox) when it reads a workspace the child could write: its config and attributes can name
    commands (a filter, an fsmonitor) that must run no more freely than the child."""
    argv = ["git", "-c", "core.hooksPath=/dev/null", "-c", "core.quotepath=off", "-c", "gc.auto=0"]
    if git_dir:
        argv += ["--git-dir", git_dir, "--work-tree", str(cwd)]
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}
    for key in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY",
                "GIT_ALTERNATE_OBJECT_DIRECTORIES"):
        env.pop(key, None)
    try:
        proc = subprocess.run(argv + args, cwd=cwd, input=input, capture_output=True, env=env,
                              stdin=None if input is not None else subprocess.DEVNULL, preexec_fn=contain)
    except FileNotFoundError:
        raise IsolationError("isolation='worktree' needs git, and git is not installed (apt-get install git)") from None
    if check and proc.returncode != 0:
        raise IsolationError(f"git {' '.join(args[:2])} failed in {cwd}: "
                             f"{proc.stderr.decode(errors='replace').strip()}")
    return proc


def common_dir(repo: Path) -> Path:
    """The repository's common git folder: its objects, refs and config, whichever worktree ``repo`` is."""
    return repo / git(["rev-parse", "--git-common-dir"], repo).stdout.decode().strip()


def _own(rel: str) -> bool:
    rel = "/" + rel
    return any("/" + own in rel for own in _OWN)


def listed(out: bytes) -> list[str]:
    return [p for p in out.decode("utf-8", errors="surrogateescape").split("\0")
            if p and not p.endswith("/") and not _own(p)]


def copy_listing(source: Path) -> tuple[list[str], int]:
    """The files of a non-git folder that its .gitignore files do not exclude, and their total size."""
    with tempfile.TemporaryDirectory(prefix="nbsubagents-ls-") as tmp:
        git(["init", "-q", "--bare", tmp], None)
        out = git(["ls-files", "-o", "--exclude-standard", "-z", *SKIP_OWN], source, git_dir=tmp).stdout
    files = listed(out)
    size = 0
    for rel in files:
        try:
            size += os.lstat(source / rel).st_size
        except OSError:
            pass
    return files, size


def add_parent_state(repo: Path, path: Path) -> None:
    """The parent's uncommitted changes and its untracked, not ignored files, into a worktree at HEAD."""
    diff = git(["diff", "--binary", "HEAD"], repo).stdout
    if diff.strip():
        git(["apply", "--binary", "--whitespace=nowarn", "-"], path, input=diff)
    untracked = listed(git(["ls-files", "-o", "--exclude-standard", "-z", *SKIP_OWN], repo).stdout)
    _copy_files(repo, path, untracked)


def copy_folder(source: Path, path: Path) -> None:
    """A copy of a non-git folder. It goes through git: the source's files (its .gitignore files respected)
    are hashed into the workspace's own repository and checked out there, which leaves the index fresh
    for the snapshots."""
    path.mkdir()
    git(["init", "-q", str(path)], None)
    _exclude_own(path)
    git(["add", "-A", "."], source, git_dir=str(path / ".git"))
    git(["checkout-index", "-a", "-f"], path)


def clone(repo: Path, path: Path, branch: str | None = None) -> None:
    """A workspace at the repository's HEAD with a git folder of its own: a clone that reads the repository's
    objects through alternates (``--shared``) and writes its own objects and refs, so that nothing done in it
    (commits, tags, a gc) changes the repository, whose git folder the run's sandbox makes read-only. On ``branch``
    (else detached), ignoring what the repository ignores (its ``info/exclude`` too) and the project's run records.
    A shallow repository is copied instead of shared (git's choice), which works the same."""
    head = git(["rev-parse", "HEAD"], repo).stdout.decode().strip()
    git(["clone", "-q", "--shared", "--no-checkout", str(repo), str(path)], None)
    git(["checkout", "-q", *(["-b", branch] if branch else ["--detach"]), head], path)
    try:
        (path / ".git" / "info" / "exclude").write_bytes((common_dir(repo) / "info" / "exclude").read_bytes())
    except FileNotFoundError:
        pass
    _exclude_own(path)


def _exclude_own(path: Path) -> None:
    with open(path / ".git" / "info" / "exclude", "a", encoding="utf-8") as fh:
        fh.write("".join(f"\n**/{own}{'' if own.endswith('/') else '*'}" for own in _OWN) + "\n")


def _copy_files(source: Path, dest: Path, files: list[str]) -> None:
    for rel in files:
        src, dst = source / rel, dest / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        if os.path.islink(src):
            if os.path.lexists(dst):
                os.unlink(dst)
            os.symlink(os.readlink(src), dst)
        elif src.is_file():
            shutil.copy2(src, dst)


def snapshot(path: Path, contain: Callable[[], None] | None = None) -> str:
    """A git tree of the workspace as it is now (the index of the workspace only; no commit is made), its objects in
    the workspace's own store."""
    git(["add", "-A", "."], path, contain=contain)
    return git(["write-tree"], path, contain=contain).stdout.decode().strip()


def share_base(iso: dict[str, Any], path: Path) -> None:
    """The starting state's trees and its files up to SHARE_LIMIT bytes, copied from the workspace's store into
    the repository's (before the run starts), so that a check can restore that state exactly after the workspace is
    gone (until git prunes them); a bigger file stays in the workspace's store and goes with it (the check then uses
    the folder as it is now)."""
    listing = git(["ls-tree", "-r", "-t", "-l", "-z", iso["base"]], path).stdout
    wanted = {iso["base"]}
    for entry in listing.split(b"\0"):
        fields = entry.split(b"\t", 1)[0].split()
        if len(fields) == 4 and (fields[1] == b"tree" or (fields[1] == b"blob" and int(fields[3]) <= SHARE_LIMIT)):
            wanted.add(fields[2].decode())
    store, shared = path / ".git" / "objects", Path(iso["sharedObjects"])
    for sha in wanted:
        src, dst = store / sha[:2] / sha[2:], shared / sha[:2] / sha[2:]
        if src.is_file() and not dst.exists():
            dst.parent.mkdir(exist_ok=True)
            tmp = dst.with_name(f"{dst.name}.{os.getpid()}.{threading.get_ident()}.tmp")  # a sweep's threads race
            shutil.copyfile(src, tmp)
            os.replace(tmp, dst)


def has_all(base: str, cwd: Path) -> bool:
    """True when the repository holds tree ``base`` and every file in it."""
    if git(["cat-file", "-e", f"{base}^{{tree}}"], cwd, check=False).returncode != 0:
        return False
    listing = git(["ls-tree", "-r", "-z", base], cwd).stdout
    blobs = [e.split(b"\t", 1)[0].split()[2] for e in listing.split(b"\0") if b" blob " in e.split(b"\t", 1)[0]]
    if not blobs:
        return True
    found = git(["cat-file", "--batch-check"], cwd, input=b"\n".join(blobs) + b"\n").stdout
    return b" missing" not in found
