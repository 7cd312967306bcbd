"""``nbsubagents.init()`` and ``nbsubagents init [DIR]``: a project's first presets, its settings and its ignore
lines, so that the README's first run works in a new folder.

It makes ``.pi/subagents/`` with three starter presets (``scout``, ``editor``, ``reviewer``), a ``subagents``
section of ``.pi/settings.json`` whose ``"//"`` keys explain the common settings, and the lines that keep runs,
the registry, reports and experiments out of git. It never overwrites a file a person wrote: what is there is
skipped (or, for ``.pi/settings.json`` and ``.gitignore``, added to), and the result says which.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ._child.artifacts import atomic_write_json
from ._config import NbSubagentsError
from ._pi.offline import OFFLINE_MODEL
from ._preset_files.parse import PresetError, read_frontmatter
from ._templates import part

__all__ = ["init", "InitResult", "STARTER_MODEL", "IGNORE_LINES"]

STARTER_MODEL = "anthropic/claude-sonnet-4-5"
NEXT_STEP = 'nbsubagents.run("scout", "ls .")'

IGNORE_LINES = (".pi/subagents/runs/", ".pi/subagents/registry.sqlite*", ".pi/subagents/reports/",
                ".pi/subagents/experiments/")
_IGNORE_HEADER = "# nbsubagents: what runs leave behind (the presets and .pi/settings.json are worth committing)"

_PRESETS = {  # name: (what it does in a word, its description, its tools, its system prompt)
    "scout": ("explores, read-only",
              "Explores the project read-only (read, grep, find, ls) and reports what it found with file:line "
              "references; changes nothing.", "read, grep, find, ls", """\
You are a scout: you find out what is in a codebase, quickly and precisely, and change nothing.

- Start broad (ls, find) and narrow down (grep, then read): read only what the task needs.
- Quote what you found with its place (path:line), and say what you looked for and did not find.
- Answer the task first, in a few sentences; then list the evidence: the files and lines that support it.
"""),
    "editor": ("makes changes",
               "Makes the change a task asks for (read, edit, write, bash), checks it, and lists the files it "
               "changed.", "read, edit, write, bash", """\
You are an editor: you make the change the task asks for, and only that change.

- Read the code around a change before you edit it, and follow the style you find there.
- Prefer small, exact edits to rewriting files; create a file only when the task needs one.
- After the change, run the quickest check that covers it (the relevant tests, a linter, or the program
  itself) and fix what you broke. Never commit, push or delete files unless the task says so.
- End with a short summary: each file you changed and why, and the check you ran with its result.
"""),
    "reviewer": ("reviews, read-only",
                 "Reviews a diff or files read-only (read, grep, find, ls) and reports findings as file:line "
                 "with a severity; changes nothing.", "read, grep, find, ls", """\
You are a reviewer: you read a diff (in the task, or a .patch file) or the files you are given, and report
problems; you change nothing.

- Read the code around each change: a change is judged in its context (callers, tests, error paths).
- Look for, in this order: bugs and wrong behaviour, unhandled errors and edge cases, security problems,
  missing tests, then unclear names or code.
- Report each finding on its own line: `path:line: high|medium|low: what is wrong; what would be right`.
- Say plainly when you found nothing worth changing; never invent findings to fill the list.
"""),
}

_SETTINGS_COMMENTS = {
    "//": "nbsubagents' settings for this project. A key that starts with // is a comment: to use a setting, "
          "add it without the // (for example \"timeout\": 900). A call's own argument wins over a setting.",
    "// timeout": "Seconds a run may take; extended while the run is still working. Default 600.",
    "// concurrency": "How many runs of one run_parallel call or experiment run at once (1-64). Default 4.",
    "// isolation": "\"worktree\": each run works in a fresh git worktree (or a copy of a folder that is not a "
                    "repository); run.apply() brings its changes back. Default: the run works in its folder.",
    "// maxTurns, maxToolCalls, maxTokens, maxCost": "A run's budget: the run is stopped when it reaches one "
                                                     "(maxCost in dollars). Default: no limit.",
    "// offline": f"true: every run of this project uses the scripted model {OFFLINE_MODEL} (no key, no network; "
                  "a test double that turns task lines such as \"ls DIR\" or \"read FILE\" into tool calls, "
                  "not an AI), whatever a preset's model says. Default false.",
}


def _preset_text(name: str) -> str:
    _role, description, tools, prompt = _PRESETS[name]
    return (f"---\nname: {name}\ndescription: {description}\nmodel: {STARTER_MODEL}\ntools: {tools}\n---\n"
            f"{prompt}")


@dataclass(frozen=True)
class InitResult:
    """What ``init`` did: ``steps`` are ``(what, path, why)`` with ``what`` one of ``made``, ``added``
    (to a file that was there) and ``skipped``; paths are relative to ``root``."""

    root: Path
    steps: tuple[tuple[str, str, str], ...]
    offline: bool  # the project's settings send its runs to the scripted model

    @property
    def made(self) -> list[str]:
        """The paths made or added to."""
        return [path for what, path, _ in self.steps if what != "skipped"]

    @property
    def skipped(self) -> list[str]:
        """The paths left as they were."""
        return [path for what, path, _ in self.steps if what == "skipped"]

    @property
    def next_step(self) -> str:
        """The first run to try, from the project's folder."""
        return NEXT_STEP

    @property
    def model_note(self) -> str:
        """Which model that run will use, and how to change it."""
        if self.offline:
            return (f"It runs offline on the scripted model {OFFLINE_MODEL}, which turns task lines such as "
                    "\"ls DIR\", \"read FILE\" or \"run: CMD\" into tool calls (a test double, not an AI). Remove "
                    "\"offline\" from .pi/settings.json to use the presets' own model.")
        return (f"The presets use {STARTER_MODEL}: give pi its key (export ANTHROPIC_API_KEY=..., or /login in "
                "pi) or change their model: line; or `nbsubagents init --offline` to try it offline first.")

    def lines(self) -> list[str]:
        width = max((len(what) for what, _, _ in self.steps), default=0)
        rows = [f"  {what:<{width}}  {path}" + (f": {why}" if why else "") for what, path, why in self.steps]
        return [f"nbsubagents init {self.root}", *rows, f"Next, from that folder: {self.next_step}",
                f"  {self.model_note}"]

    def __repr__(self) -> str:
        return "\n".join(self.lines())

    def _repr_html_(self) -> str:
        return part("tables.html", "init", root=str(self.root), steps=self.steps, next_step=self.next_step,
                    model_note=self.model_note)


def init(path: str | Path = ".", *, offline: bool = False) -> InitResult:
    """Make ``path`` a project: starter presets, a commented settings section, the ignore lines.

    ``offline=True`` also sets ``"offline": true``: every run of the project then uses the scripted model. A
    file that exists is never overwritten; the result lists what was made and what was skipped, and why.
    """
    root = Path(path).expanduser().resolve()
    if root.exists() and not root.is_dir():
        raise NbSubagentsError(f"Cannot init {root}: it is a file. Name a folder (it is made when missing), "
                               "for example `nbsubagents init .`")
    if root == Path.home().resolve():
        raise NbSubagentsError(f"Cannot init the home folder {root}: its .pi/ is pi's own (the agent dir), never a "
                               "project's. Init a project's folder, for example `nbsubagents init ~/myproject`.")
    presets_dir = root / ".pi" / "subagents"
    for folder in (root, root / ".pi", presets_dir):
        if folder.exists() and not folder.is_dir():
            raise NbSubagentsError(f"Cannot init {root}: {folder} is a file where a folder belongs. Move it away "
                                   "and init again.")
    presets_dir.mkdir(parents=True, exist_ok=True)
    steps = [_write_preset(presets_dir, name) for name in _PRESETS]
    settings_steps, offline_now = _write_settings(root / ".pi" / "settings.json", offline)
    steps += settings_steps
    steps.append(_append_ignore_lines(root / ".gitignore"))
    return InitResult(root, tuple((what, str(Path(where).relative_to(root)), why) for what, where, why in steps),
                      offline_now)


def _write_preset(folder: Path, name: str) -> tuple[str, Path, str]:
    target = folder / f"{name}.md"
    for other in sorted(folder.glob("*.md")):
        if other != target and not other.name.startswith(".") and _claimed_name(other) == name:
            return "skipped", target, f"{other.name} is already a preset named {name}"
    try:
        with open(target, "x", encoding="utf-8") as fh:  # "x": a file made meanwhile is not overwritten either
            fh.write(_preset_text(name))
    except FileExistsError:
        return "skipped", target, "exists (kept as it is)"
    role, _description, tools, _prompt = _PRESETS[name]
    return "made", target, f"{role} ({tools}); model {STARTER_MODEL}"


def _claimed_name(path: Path) -> str | None:
    try:
        data, _ = read_frontmatter(path)
    except PresetError:
        return None
    name = data.get("name")
    return name.strip() if isinstance(name, str) else path.stem


def _write_settings(path: Path, offline: bool) -> tuple[list[tuple[str, Path, str]], bool]:
    """The steps for ``.pi/settings.json``, and whether the project's runs are then offline."""
    section = dict(_SETTINGS_COMMENTS, **({"offline": True} if offline else {}))
    what = "the \"subagents\" section (its // keys explain the settings)" + ("; \"offline\": true" if offline else "")
    if not path.exists() and atomic_write_json(path, {"subagents": section}, exclusive=True):
        return [("made", path, what)], offline
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return [("skipped", path, f"cannot be read as JSON ({exc}): left as it is")], False
    if not isinstance(data, dict):
        return [("skipped", path, "is not a JSON object: left as it is")], False
    existing = data.get("subagents")
    if existing is None:
        data["subagents"] = section
        atomic_write_json(path, data)
        others = [key for key in data if key != "subagents"]
        return [("added", path, what + (f" beside {', '.join(others)}" if others else ""))], offline
    if not isinstance(existing, dict):
        return [("skipped", path, "its \"subagents\" is not an object: left as it is")], False
    steps = [("skipped", path, "it already has a \"subagents\" section (left as it is)")]
    if offline and "offline" not in existing:
        existing["offline"] = True
        atomic_write_json(path, data)
        steps.append(("added", path, "\"offline\": true to its \"subagents\" section"))
    elif offline and existing.get("offline") is not True:
        steps.append(("skipped", path, f"its \"offline\" is {json.dumps(existing['offline'])}: set it to true "
                                       "yourself for the scripted model"))
    return steps, existing.get("offline") is True


def _append_ignore_lines(path: Path) -> tuple[str, Path, str]:
    try:
        text = path.read_text(encoding="utf-8") if path.exists() else ""
    except (OSError, UnicodeDecodeError) as exc:
        return "skipped", path, f"cannot be read ({exc}): add {', '.join(IGNORE_LINES)} yourself"

    def norm(line: str) -> str:
        return line.strip().strip("/")

    present = {norm(line) for line in text.splitlines()}
    missing = [line for line in IGNORE_LINES if norm(line) not in present]
    if not missing:
        return "skipped", path, "already ignores runs, the registry, reports and experiments"
    header = [] if _IGNORE_HEADER in text.splitlines() else [_IGNORE_HEADER]
    before = ("\n" if text and not text.endswith("\n") else "") + ("\n" if header and text.strip() else "")
    with open(path, "a", encoding="utf-8") as fh:  # the file's own lines and final newline stay as they are
        fh.write(before + "\n".join(header + missing) + "\n")
    return ("made" if not text else "added"), path, ", ".join(missing)
