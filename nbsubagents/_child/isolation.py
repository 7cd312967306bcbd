"""Isolation: a run works in a fresh git worktree (or a copy), and what it changed becomes a patch.

The kernel calls ``plan`` (checks, before anything is written) and stores the plan in meta.json as
``isolation``; the supervisor calls ``setup`` before pi starts (a clone of the cwd's repository sharing its
objects, at ``HEAD`` on the branch ``nbsubagents/<runId>``, plus the parent's uncommitted changes and untracked
files; for a folder outside git, a copy of its files that ``.gitignore`` does not exclude), then
``capture`` (``changes.patch``, a binary-safe ``git diff`` against the state the run started from, and
``changes.json``) and ``remove``. ``apply`` and ``discard`` act on a finished run. ``salvage`` does the
capture and removal for a run whose supervisor died (the settle step calls it), and ``checkout`` lays an
ended run's changes out in a scratch workspace for a shell check. The original folder is never written
before ``apply``. Standard library only, imported by the supervisor only for an isolated run; every git call
is an argv list with hooks and prompts off (``workspace_git``, the git plumbing).

What keeps the original folder out of the run's reach:

- symbolic links: a link that points inside the project but would lead out of the workspace (an absolute
  link, or a relative one that climbs out of the project and back) is rewritten *in the workspace* as the
  relative link to the same place in the workspace (before the starting state is recorded, so it is not
  part of the patch); a link pointing outside the project is refused before the run (``plan``) and again
  when the workspace is made (``setup``), naming the link and its target, since a run could change the
  files there through it. Only a link to an existing file that this user cannot write (such as
  ``.venv/bin/python -> /usr/bin/python3``) is left as it is;
- hard links and ``..``: the workspace holds copies (a checkout, never links to the original's files), and
  with no link leading out, ``..`` from the workspace stays outside the original folder;
- the environment: pi gets ``PWD`` as the workspace, no ``OLDPWD``, and a variable naming the original
  folder names the workspace (``workspace_env``);
- absolute paths: on Linux the supervisor starts pi where the original folder is read-only (``sandbox``;
  ``readonly_view`` names the places that stay writable), so a process that reaches it by its absolute path
  can read it, and a write fails.

The workspace of a git repository is a clone that reads the repository's objects through alternates and writes
its own objects and refs (the run's commits and the snapshots' untracked or ignored bulk), removed with the
workspace, so the run needs no write to the repository's ``.git``, which its sandbox makes read-only: only the
starting state's trees and its files up to SHARE_LIMIT are copied there before the run (so a later check can restore
that state exactly).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from .artifacts import atomic_write, atomic_write_json, now_iso, read_json
from .procs import alive, process_start_ticks
from .record import load
from .sandbox import enter, probe
from .tool_servers import writes_of
from .workspace_git import (SKIP_OWN, IsolationError, add_parent_state, clone, common_dir, copy_folder, copy_listing,
                            git, has_all, listed, share_base, snapshot)

from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from typing import Any, Callable, Mapping

MODES = ("worktree", "none")
DEFAULT_MAX_COPY_MB = 200.0
PATCH = "changes.patch"
CHANGES = "changes.json"
APPLIED = "applied.json"


def worktrees_dir() -> Path:
    """Where workspaces are made: ``$NBSUBAGENTS_WORKTREES``, else ``<tmp>/nbsubagents-worktrees``."""
    return Path(os.environ.get("NBSUBAGENTS_WORKTREES") or Path(tempfile.gettempdir()) / "nbsubagents-worktrees")


# -- the kernel's side: checks before anything is written -------------------------------------------
def plan(cwd: Path, *, keep: bool = False, max_copy_mb: float = DEFAULT_MAX_COPY_MB,
         base_patch: str | None = None, hide: list[str] | None = None) -> dict[str, Any]:
    """What ``setup`` will do for a run in ``cwd``; IsolationError when it cannot be done. ``hide``: folders the
    kernel knows hold its keys (Jupyter's runtime folder as jupyter_core names it), hidden from the run's sandbox."""
    top = git(["rev-parse", "--show-toplevel"], cwd, check=False)
    if top.returncode == 0:
        repo = Path(top.stdout.decode().strip()).resolve()
        if git(["rev-parse", "--verify", "-q", "HEAD"], repo, check=False).returncode != 0:
            raise IsolationError(f"isolation='worktree': the git repository {repo} has no commit yet; "
                                 "commit once (a worktree starts at HEAD) or run without isolation")
        files = listed(git(["ls-files", "-c", "-o", "--exclude-standard", "-z", *SKIP_OWN], repo).stdout)
        _refuse_escaping_links(repo, _links_in(repo, files))
        return {"mode": "worktree", "kind": "git", "source": str(cwd), "applyRoot": str(repo),
                "subdir": os.path.relpath(cwd, repo), "keep": keep, "basePatch": base_patch, "hide": hide or []}
    files, size = copy_listing(cwd)
    _refuse_escaping_links(cwd, _links_in(cwd, files))
    limit = max_copy_mb * 1024 * 1024
    if size > limit:
        raise IsolationError(
            f"isolation='worktree': {cwd} is not a git repository, so it would be copied, and its files "
            f"(not excluded by .gitignore) hold {size / 1048576:.1f} MB, over the limit of {max_copy_mb:g} MB. "
            "Make it a git repository (a worktree is made instead of a copy), ignore large files in .gitignore, "
            "or raise configure(isolation_max_copy_mb=...)")
    return {"mode": "worktree", "kind": "copy", "source": str(cwd), "applyRoot": str(cwd), "subdir": ".",
            "keep": keep, "basePatch": base_patch, "hide": hide or [], "files": len(files), "bytes": size}


# -- symbolic links: rewritten to stay in the workspace, or refused ----------------------------------
def _links_in(root: Path, rels: list[str]) -> list[tuple[str, str]]:
    """(path, target) of the symbolic links among ``rels`` (paths relative to ``root``)."""
    found = []
    for rel in dict.fromkeys(rels):
        try:
            found.append((rel, os.readlink(root / rel)))
        except OSError:  # not a link (or gone)
            pass
    return found


def _judge_link(real_root: str, rel: str, text: str) -> tuple[str | None, bool]:
    """(the link text to use in the workspace instead, or None to keep it; whether it must be refused) for a
    link at ``rel`` pointing at ``text``, judged where it points from the original folder ``real_root``."""
    parent = os.path.dirname(rel)
    real = os.path.realpath(os.path.join(real_root, parent, text))  # an absolute ``text`` replaces the rest
    if real == real_root or real.startswith(real_root.rstrip(os.sep) + os.sep):
        lexical = os.path.normpath(os.path.join(parent, text))
        if os.path.isabs(text) or lexical == ".." or lexical.startswith(".." + os.sep):
            return os.path.relpath(real, os.path.join(real_root, parent)), False
        return None, False  # relative and inside: it points inside the workspace too
    if os.path.exists(real) and not os.path.isdir(real) and not os.access(real, os.W_OK):
        return None, False  # a file this user cannot write (a virtualenv's python): nothing to protect
    return None, True


def _refuse_escaping_links(root: Path, links: list[tuple[str, str]]) -> dict[str, str]:
    """The rewrites ``links`` need in a workspace of ``root``; IsolationError naming every link that points
    outside ``root``."""
    real_root = os.path.realpath(root)
    rewrites, refused = {}, []
    for rel, text in links:
        new, refuse = _judge_link(real_root, rel, text)
        if refuse:
            refused.append(f"{rel} -> {text}")
        elif new is not None:
            rewrites[rel] = new
    if refused:
        shown = "; ".join(refused[:10]) + (f"; and {len(refused) - 10} more" if len(refused) > 10 else "")
        raise IsolationError(
            f"isolation='worktree' cannot isolate {root}: {len(refused)} symbolic link(s) point outside it, and a run "
            f"could change the files there through them: {shown}. Make each point inside the project, remove it "
            "(or, if it is untracked, list it in .gitignore: ignored files are not part of the workspace), or run "
            "without isolation")
    return rewrites


def _hold_links(root: Path, workspace: Path) -> None:
    """Rewrite the workspace's links that would lead back into the original folder ``root`` (absolute ones and
    relative ones that climb out), as relative links inside the workspace; IsolationError for any link that
    points outside the project (the project may have changed since ``plan``)."""
    links = []
    for folder, dirs, files in os.walk(workspace):
        if folder == str(workspace):
            dirs[:] = [d for d in dirs if d != ".git"]
        for name in dirs + files:
            full = os.path.join(folder, name)
            if os.path.islink(full):
                links.append((os.path.relpath(full, workspace), os.readlink(full)))
    for rel, new in _refuse_escaping_links(root, links).items():
        os.unlink(workspace / rel)
        os.symlink(new, workspace / rel)


# Where pi and its tools find their own settings: never moved into the workspace, even when the project is there.
_ENV_KEPT = ("HOME", "PWD", "OLDPWD")
_ENV_KEPT_PREFIXES = ("PI_", "NBSUBAGENTS_", "XDG_", "GIT_")


def workspace_env(iso: dict[str, Any], env: dict[str, str], workdir: str) -> dict[str, str]:
    """``env`` for pi in an isolated run: ``PWD`` is the workspace, no ``OLDPWD`` (``cd -`` would lead back),
    and a variable naming the original folder (or a folder in it) names the same place in the workspace."""
    out = dict(env)
    out.pop("OLDPWD", None)
    roots = []
    for key in ("applyRoot", "source"):
        for spelling in {iso.get(key) or "", os.path.realpath(iso.get(key) or "/")}:
            if spelling and spelling != "/":
                roots.append(spelling.rstrip(os.sep))
    workspace = Path(iso.get("path") or workdir)
    apply_root = Path(iso["applyRoot"]).resolve() if iso.get("applyRoot") else None
    for key, value in env.items():
        if key in _ENV_KEPT or key.startswith(_ENV_KEPT_PREFIXES):
            continue
        for root in roots if os.pathsep not in value else ():  # one path, not a list such as PATH
            if value == root or value.startswith(root + os.sep):
                inside = os.path.relpath(os.path.realpath(value), apply_root) if apply_root else "."
                if not inside.startswith("..") and os.path.lexists(workspace / inside):  # not an ignored .venv
                    out[key] = str(workspace / inside)
                break
    out["PWD"] = workdir
    return out


def readonly_view(iso: dict[str, Any], run_dir: Path, env: dict[str, str],
                  writes: Mapping[str, str] = {}) -> tuple[list[str], list[str], list[str]] | str:
    """What pi's sandbox (``sandbox.enter``) makes read-only, the places in it the run must still write, and what it
    hides; or why it cannot be done here.

    Read-only: the original folder, its repository's git folder wherever that is (a worktree's or a submodule's may
    lie outside it), and the run's folder (its record, and the person's words in ``inbox/``: the child cannot
    rewrite what the supervisor reads or what settles it). Writable inside them: what the harness ``writes`` in the
    run's folder (made now when missing; pi: its session file), the workspace, pi's settings, the temporary
    folder. Hidden: Jupyter's runtime folders (kernel connection files: with one, a process can run code
    in the notebook's kernel, outside the sandbox) and nbsubagents' state folder (the person's keys to their
    runs). A hidden folder that does not exist yet is made now (only the person may read it), so that one made
    during the run cannot be seen either."""
    root = os.path.realpath(iso["applyRoot"])
    home = os.path.realpath(env.get("HOME") or os.path.expanduser("~"))
    if root == os.sep or home == root or home.startswith(root + os.sep):
        return f"the original folder {root} holds the home folder {home}"
    readonly = [root]
    if iso.get("kind") == "git" and not _inside(os.path.realpath(Path(iso["sharedObjects"]).parent), [root]):
        readonly.append(os.path.realpath(Path(iso["sharedObjects"]).parent))
    if not _inside(os.path.realpath(run_dir), readonly):
        readonly.append(os.path.realpath(run_dir))
    wanted = [iso.get("path"), env.get("TMPDIR") or tempfile.gettempdir(), env.get("PI_CODING_AGENT_DIR")]
    holes = []
    for name, kind in writes.items():
        own = Path(run_dir) / name
        try:
            own.mkdir(exist_ok=True) if kind == "folder" else own.touch()
        except OSError as exc:
            return f"{own} cannot be made for the child to write: {exc.strerror}"
        holes.append(os.path.realpath(own))
    for place in wanted:
        real = os.path.realpath(place) if place else ""
        if real and _inside(real, readonly) and real not in readonly and os.path.isdir(real) and real not in holes:
            holes.append(real)
    data = env.get("XDG_DATA_HOME") or os.path.join(home, ".local", "share")
    state = env.get("XDG_STATE_HOME") or os.path.join(home, ".local", "state")
    hidden: list[str] = []
    for place in [*iso.get("hide", ()), env.get("JUPYTER_RUNTIME_DIR"), os.path.join(data, "jupyter", "runtime"),
                  os.path.join(state, "nbsubagents")]:
        try:
            if place and (real := os.path.realpath(place)) not in hidden:
                os.makedirs(real, mode=0o700, exist_ok=True)
                hidden.append(real)
        except OSError as exc:
            return f"{place} cannot be hidden from the run: {exc.strerror}"
    return readonly, holes, hidden


def _inside(path: str, folders: list[str]) -> bool:
    return any(path == folder or path.startswith(folder + os.sep) for folder in folders)


def containment(iso: dict[str, Any], run_dir: Path, env: dict[str, str], writes: Mapping[str, str] = {},
                servers: Any = ()) -> tuple[Callable[[], None] | None, str | None]:
    """What makes the original folder read-only for pi (run between fork and exec), or None and why that cannot be
    done here (the run's result says which: ``worktree.contained``, ``uncontainedBecause``). ``writes``: what the
    harness writes in the run's folder; the run's tool servers (its record's ``toolServers``) add theirs."""
    view = readonly_view(iso, run_dir, env, {**writes, **writes_of(servers)})
    if isinstance(view, str):
        return None, view
    why = probe(*view)
    if why is not None:
        return None, why
    return (lambda: enter(*view)), None


# -- the supervisor's side ------------------------------------------------------------------------
def setup(iso: dict[str, Any], run_id: str, run_dir: Path) -> Path:
    """Make the run's workspace; returns the folder pi runs in. Records ``path``/``base`` in ``iso``."""
    path = worktrees_dir() / run_id
    path.parent.mkdir(parents=True, exist_ok=True)
    iso["path"] = str(path)
    source = Path(iso["source"])
    if iso["kind"] == "git":
        iso["branch"] = f"nbsubagents/{run_id}"
        repo = Path(iso["applyRoot"])
        iso["sharedObjects"] = str((common_dir(repo) / "objects").resolve())
    # Recorded before anything is made: whoever settles a supervisor killed from here on finds it (``salvage``).
    _write_state(run_dir, iso)
    if iso["kind"] == "git":
        clone(repo, path, iso["branch"])
        add_parent_state(repo, path)
        workdir = path / iso.get("subdir", ".")
        _hold_links(repo, path)
    else:
        copy_folder(source, path)
        workdir = path
        _hold_links(source, path)
    iso["base"] = snapshot(path)  # the state the run starts from: what changes.patch is measured against
    if iso["kind"] == "git":
        share_base(iso, path)
    if iso.get("basePatch"):
        patch = Path(iso["basePatch"])
        _apply_patch(patch, path, f"the earlier run's {patch} does not apply to the current state of "
                                  f"{patch.parent}'s folder; apply or discard it by hand before resuming")
    _write_state(run_dir, iso)
    return workdir.resolve()


def _apply_patch(patch: Path, path: Path, refused: str) -> bool:
    """Apply ``patch`` (an earlier run's, for a resume; an ended run's, for a check) in ``path``; False when ``path``
    already holds it (applied earlier), IsolationError(``refused``) when it applies neither way."""
    if not patch.is_file() or patch.stat().st_size == 0:
        return True
    if git(["apply", "--check", "--binary", str(patch)], path, check=False).returncode == 0:
        git(["apply", "--binary", str(patch)], path)
        return True
    if git(["apply", "--check", "--reverse", "--binary", str(patch)], path, check=False).returncode != 0:
        raise IsolationError(refused)
    return False


def _write_state(run_dir: Path, iso: dict[str, Any], name: str = "isolation.json") -> None:
    atomic_write_json(run_dir / name, iso)


def capture(iso: dict[str, Any], run_dir: Path, contain: Callable[[], None] | None = None) -> dict[str, Any]:
    """Write ``changes.patch`` and ``changes.json``; returns the summary (files, added, removed). git runs in the
    run's sandbox (``contain``): the child wrote the workspace, and with it what git may run."""
    path = Path(iso["path"])
    after = snapshot(path, contain)
    base = iso["base"]
    diff = ["diff", "--no-renames", "--no-ext-diff", "--no-textconv"]
    patch = git([*diff, "--binary", "--full-index", base, after], path, contain=contain).stdout
    numstat = git([*diff, "--numstat", "-z", base, after], path, contain=contain).stdout
    status = git([*diff, "--name-status", "-z", base, after], path, contain=contain).stdout
    kinds = {"A": "added", "M": "modified", "D": "deleted", "T": "modified"}
    parts = status.decode("utf-8", errors="surrogateescape").split("\0")
    change_of = {parts[i + 1]: kinds.get(parts[i][:1], "modified") for i in range(0, len(parts) - 1, 2) if parts[i]}
    files = []
    for entry in numstat.decode("utf-8", errors="surrogateescape").split("\0"):
        if not entry:
            continue
        added, removed, name = entry.split("\t", 2)
        binary = added == "-"
        files.append({"path": name, "change": change_of.get(name, "modified"), "binary": binary,
                      "added": 0 if binary else int(added), "removed": 0 if binary else int(removed)})
    summary = {"files": len(files), "added": sum(f["added"] for f in files),
               "removed": sum(f["removed"] for f in files)}
    atomic_write(run_dir / PATCH, patch)
    atomic_write_json(run_dir / CHANGES, {**summary, "applyRoot": iso["applyRoot"], "kind": iso["kind"],
                                          "fileChanges": files})
    return summary


_APART = """import json, sys
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from nbsubagents._child import isolation as i
run_dir = Path(sys.argv[2])
try:
    iso = i._read(run_dir / "isolation.json")
    print(json.dumps(i.capture(iso, run_dir, i.containment(iso, run_dir, dict(i.os.environ))[0])))
except (i.IsolationError, OSError) as exc:
    print(json.dumps({"error": str(exc)}))
"""


def capture_apart(run_dir: Path) -> dict[str, Any]:
    """``capture`` of a lost run, in its sandbox, by a new interpreter: a sandbox is entered in a fork that must stay
    one thread, which a process whose fork handlers start one (a kernel that used OpenTelemetry, as MLflow's
    tracing does) cannot give; there the sandbox failed and the capture with it."""
    package_parent = str(Path(__file__).resolve().parents[2])
    done = subprocess.run([sys.executable, "-c", _APART, package_parent, str(run_dir)], capture_output=True,
                          text=True, timeout=600)
    try:
        answer = json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise IsolationError(f"its capture's process failed: {done.stderr.strip()[-300:] or done.returncode}") \
            from None
    if "error" in answer:
        raise IsolationError(answer["error"])
    return answer


def remove(iso: dict[str, Any]) -> None:
    """Remove the workspace (with its git folder and branch); nothing of it stays. Only a folder of the workspaces'
    own folder is removed, whatever ``isolation.json`` (in a folder the child may have written) names."""
    path = iso.get("path")
    if path and os.path.realpath(path).startswith(os.path.realpath(worktrees_dir()) + os.sep):
        shutil.rmtree(path, ignore_errors=True)


def salvage(run_dir: Path) -> dict[str, Any]:
    """What is left of a run whose supervisor died before it was done with the workspace (a *lost* run).

    Its changes are captured when they still can be (``changes.patch`` and ``changes.json``, as the
    supervisor would have), then the workspace and its branch are removed (kept with ``keep_worktree``).
    Returns the fields for its ``result.json``: ``changes`` or ``changesError`` (why nothing could be
    captured), and ``worktree``; {} when the run had no workspace. Call it once the run's processes are gone.
    """
    iso = _read(run_dir / "isolation.json")
    if not iso or not iso.get("path"):
        return {}
    path = Path(iso["path"])
    out: dict[str, Any] = {}
    done = _read(run_dir / CHANGES)
    if done is not None and (run_dir / PATCH).exists():  # captured before the supervisor died
        out["changes"] = {k: done.get(k) for k in ("files", "added", "removed")}
    elif iso.get("base") and path.is_dir():
        try:
            out["changes"] = capture_apart(run_dir)
        except (IsolationError, OSError) as exc:
            out["changesError"] = f"the run's changes could not be captured: {exc}"
    elif iso.get("base"):
        out["changesError"] = f"the run's changes could not be captured: its workspace {path} is gone"
    else:
        out["changesError"] = ("the run's changes could not be captured: its supervisor was lost while it was "
                               "setting up the workspace, before the run started")
    keep = bool(iso.get("keep")) and "changes" in out and path.is_dir()
    if not keep:
        remove(iso)
    out["worktree"] = {"path": str(path), "branch": iso.get("branch"), "kept": keep}
    return out


def checkout(run_dir: Path, dest: Path) -> tuple[Path, str]:
    """A fresh workspace at ``dest`` holding what an ended isolated run left: the state it started from
    with its ``changes.patch`` applied (for shell checks after its own worktree is gone).

    Returns the folder matching the run's cwd inside it and a note on how it was made. In a git
    repository the run's starting tree is restored exactly while the repository has it and every file in it
    (``share_base``: files over SHARE_LIMIT never enter the repository's store); otherwise (and for a copied
    folder) the source's current state is used, and a patch the source already holds is not applied twice.
    Remove it with ``remove_checkout(dest)``. IsolationError when the patch does not apply;
    the workspace is then removed.
    """
    iso = _read(run_dir / "isolation.json") or getattr(load(run_dir), "isolation", None)
    if not iso:
        raise IsolationError(f"run {run_dir.name} did not run with isolation='worktree': it has no workspace")
    state = {"kind": iso["kind"], "source": iso["source"], "applyRoot": iso["applyRoot"],
             "subdir": iso.get("subdir", "."), "path": str(dest),
             "owner": {"pid": os.getpid(), "startTicks": process_start_ticks(os.getpid())}}
    dest.parent.mkdir(parents=True, exist_ok=True)
    _write_state(dest.parent, state, name=f"{dest.name}.json")  # what remove_checkout() removes
    try:
        note = _restore(iso, dest)
        _hold_links(Path(state["applyRoot"]), dest)  # a check is held in its workspace too
        if not _apply_patch(run_dir / PATCH, dest, f"run {run_dir.name}'s changes.patch does not apply to the "
                            f"current state of {state['applyRoot']} (its starting state is gone)"):
            note = "the source folder as it is now, which already holds the run's changes.patch"
    except BaseException:
        remove_checkout(dest)
        raise
    return (dest / state["subdir"]).resolve(), note


def _restore(iso: dict[str, Any], dest: Path) -> str:
    """``dest`` as the run's starting state (git, while the tree exists), else the source as it is now."""
    source = Path(iso["applyRoot"] if iso["kind"] == "git" else iso["source"])
    if iso["kind"] == "git":
        clone(source, dest)
        base = iso.get("base")
        if base and has_all(base, dest):
            git(["read-tree", "-u", "--reset", base], dest)
            return "the run's starting state with its changes.patch applied"
        add_parent_state(source, dest)
    else:
        copy_folder(source, dest)
    return "the source folder as it is now with the run's changes.patch applied (its starting state is gone)"


def sweep_checkouts(folder: Path | None = None) -> list[str]:
    """Remove the scratch workspaces of checks (``check-*``) whose process is gone (killed mid-check: its
    ``finally`` never ran); returns their paths."""
    folder = folder or worktrees_dir()
    swept = []
    for record in sorted(folder.glob("check-*.json")) if folder.is_dir() else []:
        owner = (_read(record) or {}).get("owner") or {}
        if alive(owner.get("pid"), owner.get("startTicks")):
            continue
        dest = folder / record.name[:-len(".json")]
        remove_checkout(dest)
        swept.append(str(dest))
    return swept


def remove_checkout(dest: Path) -> None:
    """Remove a workspace made by ``checkout``."""
    record = dest.parent / f"{dest.name}.json"
    state = _read(record) or {"kind": "copy", "path": str(dest)}
    remove(state)
    try:
        record.unlink()
    except OSError:
        pass


# -- the kernel's side after the run ---------------------------------------------------------------
def apply(run_dir: Path, *, check: bool = True) -> list[str]:
    """Apply a finished run's patch to its original folder; returns the files it changed.

    With ``check`` (the default) nothing is written unless the whole patch applies: a conflict raises
    IsolationError naming the file. ``check=False`` applies what applies and leaves ``.rej`` files.
    """
    changes = _read(run_dir / CHANGES)
    patch = run_dir / PATCH
    if changes is None or not patch.exists():
        raise IsolationError(f"run {run_dir.name} has no changes.patch: it did not run with isolation='worktree' "
                             "or ended before its changes were captured")
    if (run_dir / APPLIED).exists():
        state = _read(run_dir / APPLIED) or {}
        raise IsolationError(f"run {run_dir.name}'s changes were already {state.get('action', 'applied')} "
                             f"({state.get('at', '')})")
    root = Path(changes["applyRoot"])
    files = [f["path"] for f in changes.get("fileChanges", [])]
    if patch.stat().st_size:
        probe = git(["apply", "--check", "--binary", str(patch)], root, check=False)
        if probe.returncode != 0:
            reason = probe.stderr.decode(errors="replace").strip()
            if check:
                raise IsolationError(f"run {run_dir.name}'s changes do not apply to {root}; nothing was changed. "
                                     f"{reason}. Resolve the conflict (or run.discard()) and try again")
            git(["apply", "--binary", "--reject", str(patch)], root, check=False)
        else:
            git(["apply", "--binary", str(patch)], root)
    _mark(run_dir, "applied")
    return files


def discard(run_dir: Path) -> None:
    """Drop a run's changes: its kept workspace (if any) goes and ``apply`` refuses afterwards."""
    state = _read(run_dir / "isolation.json")
    if state and Path(state.get("path") or "/nonexistent").exists():
        remove(state)
    if not (run_dir / APPLIED).exists():
        _mark(run_dir, "discarded")


def _mark(run_dir: Path, action: str) -> None:
    atomic_write_json(run_dir / APPLIED, {"action": action, "at": now_iso()})


def _read(path: Path) -> dict[str, Any] | None:
    return read_json(path)
