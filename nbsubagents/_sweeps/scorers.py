"""Scoring ended runs: Python callables and shell checks, kept in the run directory's ``scores.json``.

A scorer is a callable ``(run) -> number | bool | dict`` or a ``check(...)``: a command run in the
run's folder after the run (for an isolated run, on that run's own changes: its kept worktree, else a
scratch workspace with its patch applied, removed after the check; ``run_folder``), scoring pass/fail by
its exit status, with its output kept as an artifact (``checks/<name>.log``). ``score(run, scorers)`` merges
what the scorers said into ``scores.json`` (written atomically) and updates the run's registry row: a
scorer's keys replace the ones it gave before (``keys`` records which are whose). A Python scorer runs
under a time limit (``timeout``, 60 s; by ``SIGALRM`` in the main thread, where notebook cells and sweeps
run; without a limit in another thread); one that raises, ``SystemExit`` included, or takes too long records
no score for itself and its error under ``errors``. ``KeyboardInterrupt`` still stops the sweep. A run the
infrastructure ended (``outcomes.excluded_reason``: it never started, the provider failed, ...) is not scored:
no scorer runs for it, its ``scores.json`` holds no score and says why (``excluded``).

Score names are unique in a scorer list: a check's default name holds every word of its command
(``pytest -q tests/a`` → ``check_pytest_q_tests_a``), and a list naming one score twice is refused.
"""

from __future__ import annotations

import math
import numbers
import os
import re
import shlex
import signal
import hashlib
import subprocess
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Sequence

from .. import _registry as registry
from .._child import isolation, procs
from .._child.artifacts import atomic_write_json, now_iso, read_json
from .._child.errors import positive_seconds
from .._config import NbSubagentsError
from .outcomes import excluded_reason

if TYPE_CHECKING:
    from .._lifecycle.handle import Run

__all__ = ["check", "Check", "shell_syntax", "score", "scorer_name", "unique_names", "check_timeout", "SCORES_FILE",
           "SCORER_TIMEOUT"]

SCORES_FILE = "scores.json"
SCORER_TIMEOUT = 60.0  # seconds a Python scorer may take for one run
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}")


class Check:
    """A shell check: ``argv`` run in the run's folder; the score ``name`` is True when it exits 0."""

    def __init__(self, command: str | Sequence[str], *, name: str | None = None, timeout: float = 300.0,
                 shell: bool | None = None) -> None:
        if shell not in (None, True, False):
            raise NbSubagentsError(f"check(shell=...) must be True, False or None (a shell when the command has "
                                   f"shell syntax), got {shell!r}")
        if isinstance(command, str):
            if not command.strip():
                raise NbSubagentsError("check() needs a command, such as check('pytest -q'); got an empty string")
            syntax = shell_syntax(command)
            if shell is False and syntax:
                raise NbSubagentsError(
                    f"check({command!r}, shell=False): {syntax!r} is shell syntax, which only a shell understands; "
                    f"without one it would reach {command.split()[0]!r} as an argument and the check would not "
                    "test what it says. Leave out shell=False (a command with shell syntax runs with bash -c), or "
                    "give the arguments as a list: check(['pytest', '-q'])")
            shell = bool(syntax) if shell is None else shell
            self.command = command
            try:
                self.argv = ["bash", "-c", command] if shell else shlex.split(command)
            except ValueError as exc:  # an unclosed quote
                raise NbSubagentsError(f"check({command!r}): {exc}; close the quote, or give the arguments as a "
                                       "list: check(['grep', '-q', 'text', 'file'])") from None
        elif isinstance(command, (list, tuple)) and command and all(isinstance(a, str) for a in command):
            self.command = shlex.join(command)
            self.argv = list(command)
        else:
            raise NbSubagentsError(f"check() needs a command: a string such as 'pytest -q' or a list of "
                                   f"arguments, got {command!r}")
        self.timeout = positive_seconds(timeout, "check timeout")
        self.shell = bool(shell)
        self.name = _check_name(name if name is not None else _default_name(self.argv, shell, self.command))

    def __repr__(self) -> str:
        return f"check({self.command!r}, name={self.name!r})"

    def spec(self) -> dict[str, Any]:
        """What a stored experiment plan keeps of it (checks survive the process; callables do not)."""
        return {"check": self.command, "name": self.name, "timeout": self.timeout, "shell": self.shell}

    def __call__(self, run: Run) -> dict[str, Any]:
        log = run.dir / "checks" / f"{self.name}.log"
        log.parent.mkdir(exist_ok=True)
        with open(log, "wb") as out, run_folder(run) as (folder, note):
            out.write(f"$ {self.command}\n(in {folder}{': ' + note if note else ''})\n".encode())
            out.flush()
            return self._run(folder, out)

    def _run(self, folder: Path, out: Any) -> dict[str, Any]:
        """The command under a keeper (``procs.contained_argv``): every process it starts, backgrounded or in a
        session of its own, ends with it, on a timeout, an interrupt, or this process's death."""
        started = time.monotonic()
        try:
            proc = subprocess.Popen(procs.contained_argv(self.argv), cwd=folder, stdin=subprocess.DEVNULL,
                                    stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        except OSError as exc:
            out.write(f"could not start: {exc}\n".encode())
            return {self.name: False}
        try:
            code = proc.wait(self.timeout)
        except subprocess.TimeoutExpired:
            _end(proc)
            code = None
        except BaseException:
            _end(proc)
            raise
        took = time.monotonic() - started
        out.write((f"\nexit code {code} after {took:.1f}s\n" if code is not None
                   else f"\ntimed out after {self.timeout:g}s\n").encode())
        return {self.name: code == 0}


def _end(keeper: subprocess.Popen[bytes]) -> None:
    """End a check: its keeper ends the command's whole tree on SIGTERM; SIGKILL to the group if it does not."""
    try:
        keeper.send_signal(signal.SIGTERM)
        keeper.wait(10)
    except subprocess.TimeoutExpired:
        pass
    finally:
        procs.send_group(keeper.pid, signal.SIGKILL)
        keeper.wait()


@contextmanager
def run_folder(run: Run) -> Iterator[tuple[Path, str]]:
    """The folder a check of ``run`` runs in, and a note on it: the run's cwd; for an isolated run its kept
    worktree, else a scratch workspace holding the run's own changes (its starting state with its
    ``changes.patch`` applied), made for the check and removed after it, so runs of one sweep are scored
    on their own changes and no workspace is left behind."""
    if not run.record.isolation:
        yield Path(run.record.cwd or run.dir), ""
        return
    kept = (run.result or {}).get("worktree") or {}
    if kept.get("kept") and kept.get("path") and Path(kept["path"]).is_dir():
        subdir = (run.record.isolation or {}).get("subdir", ".")
        yield (Path(kept["path"]) / subdir).resolve(), "the run's kept worktree"
        return
    isolation.sweep_checkouts()  # what checks killed mid-way left (their ``finally`` never ran)
    dest = isolation.worktrees_dir() / f"check-{run.run_id}-{os.urandom(3).hex()}"
    try:
        folder, note = isolation.checkout(run.dir, dest)
    except isolation.IsolationError as exc:
        raise NbSubagentsError(f"run {run.run_id}'s changes could not be laid out for the check: {exc}") from None
    try:
        yield folder, f"a scratch workspace of {note}, removed after the check"
    finally:
        isolation.remove_checkout(dest)


def check(command: str | Sequence[str], *, name: str | None = None, timeout: float = 300.0,
          shell: bool | None = None) -> Check:
    """A shell check scorer: ``check("pytest -q")`` scores True when the command exits 0 in the run's folder.

    A command with shell syntax (``&&``, ``||``, ``;``, pipes, redirections, ``$VAR``, ``$(...)``, backticks,
    globs, ``~``, ``VAR=value cmd``: ``shell_syntax``) runs with ``bash -c``; any other is split like a shell
    would (``shlex``) and run without one. ``shell=True`` always uses bash; ``shell=False`` never does, and
    refuses a command with shell syntax (its operators would reach the first program as arguments). A list
    is run as it is. Its output is kept as ``checks/<name>.log`` in the run directory.
    """
    return Check(command, name=name, timeout=timeout, shell=shell)


_TWO = ("&&", "||", ";;", ">>", "<<", "$(", "${", "&>", ">&", "<(", ">(")


def shell_syntax(command: str) -> str | None:
    """The first piece of ``command`` that only a shell understands (outside quotes: operators, redirections,
    substitutions, variables, globs, a leading ``~`` or ``#``, an assignment before the command), or None.
    bash is the reference: running a command that has none of them with bash or without changes nothing."""
    if re.match(r"\s*[A-Za-z_][A-Za-z0-9_]*=", command):
        return command.split("=", 1)[0].strip() + "="
    quote, word_start, i = "", True, 0
    while i < len(command):
        ch = command[i]
        special = ""
        if quote == "'":
            quote = "" if ch == "'" else quote
        elif quote == '"':
            if ch == "\\":
                i += 1
            elif ch == '"':
                quote = ""
            elif ch in "$`":
                special = ch
        elif ch == "\\":
            i += 1
        elif ch in "'\"":
            quote = ch
        elif ch in ";&|<>()`$*?[]{}\n" or (word_start and ch in "~#"):
            special = ch
        if special:
            two = command[i:i + 2]
            return two if two in _TWO else ("newline" if special == "\n" else special)
        word_start = not quote and ch in " \t"
        i += 1
    return None


def _default_name(argv: list[str], shell: bool, command: str) -> str:
    """``check_`` and every word of the command (two checks of one program differ by their arguments); a
    name too long for a score ends in a hash of the whole command instead."""
    words = re.findall(r"[A-Za-z0-9_]+", command if shell else " ".join(argv))
    name = "check_" + "_".join(words) if words else "check"
    if len(name) > 64 or (not words and command.strip()):
        name = f"{name[:55]}_{hashlib.sha256(command.encode()).hexdigest()[:8]}"
    return name


def unique_names(scorers: list[Any]) -> list[Any]:
    """``scorers`` when each scores under its own name (its score and its log are its own), else an error."""
    seen: dict[str, Any] = {}
    for scorer in scorers:
        name = scorer_name(scorer)
        if name in seen:
            raise NbSubagentsError(f"Two scorers score under the name {name!r} ({seen[name]!r} and {scorer!r}); "
                                   "give one another name: check('...', name='...') or a function of another name")
        seen[name] = scorer
    return scorers


def check_timeout(value: Any) -> float:
    return positive_seconds(value, "scorer_timeout")


def checked_name(name: Any, pattern: re.Pattern[str], rule: str) -> str:
    """``name`` when it is text matching ``pattern``, else NbSubagentsError stating ``rule``."""
    if not isinstance(name, str) or not pattern.fullmatch(name):
        raise NbSubagentsError(f"{rule}, got {name!r}")
    return name


def _check_name(name: Any) -> str:
    return checked_name(name, _NAME, "A score name must start with a letter or '_' and hold letters, digits, '_', "
                                     "'.' or '-' (at most 64)")


def scorer_name(scorer: Any) -> str:
    """The name a scorer's score goes under: a check's name, else the callable's ``__name__``."""
    if isinstance(scorer, Check):
        return scorer.name
    name = getattr(scorer, "__name__", None) or type(scorer).__name__
    return "score" if name == "<lambda>" else name


def as_scorer(item: Any) -> Any:
    """A scorer from what a call or a stored plan gives: a callable, a Check, ``{"check": ...}`` or a string."""
    if isinstance(item, Check) or (callable(item) and not isinstance(item, (str, dict))):
        return item
    if isinstance(item, str):
        return Check(item, shell=True)
    if isinstance(item, dict) and isinstance(item.get("check"), (str, list)):
        unknown = set(item) - {"check", "name", "timeout", "shell"}
        if unknown:
            raise NbSubagentsError(f"Scorer {item!r}: unknown key(s) {', '.join(sorted(unknown))}; a check has "
                                   "check, name, timeout, shell")
        return Check(item["check"], name=item.get("name"), timeout=item.get("timeout", 300.0),
                     shell=item.get("shell", True))
    raise NbSubagentsError(f"A scorer must be a function (run) -> number | bool | dict or check('command'), "
                           f"got {item!r}")


def _value(value: Any, where: str) -> float | int | bool | None:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, complex):
        return value if math.isfinite(value) else None
    try:  # numpy scalars
        if isinstance(value, numbers.Real):
            return float(value)
    except ImportError:  # pragma: no cover
        pass
    raise NbSubagentsError(f"{where} must be a number or a bool, got {value!r}")


def _normalize(scorer: Any, value: Any) -> dict[str, Any]:
    name = scorer_name(scorer)
    if isinstance(value, dict):
        return {_check_name(str(k)): _value(v, f"Scorer {name}'s score {k!r}") for k, v in value.items()}
    return {_check_name(name): _value(value, f"Scorer {name}'s result")}


class ScorerTimeout(BaseException):
    """A Python scorer ran past its time limit (a BaseException, so its own ``except Exception`` cannot keep it)."""


@contextmanager
def _time_limit(seconds: float | None) -> Iterator[None]:
    """Raise ``ScorerTimeout`` in the block after ``seconds`` (``SIGALRM``; the main thread only, where cells
    and sweeps run: elsewhere the block runs unbounded). The process's own alarm handler and timer come back."""
    if seconds is None or threading.current_thread() is not threading.main_thread():
        yield
        return

    armed, outer_due = [True], [False]

    def expire(signum: int, frame: Any) -> None:
        if not armed[0]:
            return
        spent = time.monotonic() - started
        if earlier and not outer_due[0] and spent >= earlier - 0.01:  # the process's own alarm is due first
            outer_due[0] = True
            if callable(previous):
                previous(signum, frame)  # it may raise (pytest-timeout does): then the block ends with it
            if spent < seconds - 0.01:
                signal.setitimer(signal.ITIMER_REAL, seconds - spent)
                return
        raise ScorerTimeout(f"did not return within {seconds:g}s (scorer_timeout)")

    previous = signal.signal(signal.SIGALRM, expire)
    started = time.monotonic()
    earlier, interval = signal.setitimer(signal.ITIMER_REAL, seconds)
    if earlier and earlier < seconds:
        signal.setitimer(signal.ITIMER_REAL, earlier)
    try:
        yield
    finally:
        armed[0] = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if earlier and not outer_due[0]:  # the process's own alarm: what is left of it
            signal.setitimer(signal.ITIMER_REAL, max(0.001, earlier - (time.monotonic() - started)), interval)
        elif earlier and interval:
            signal.setitimer(signal.ITIMER_REAL, interval, interval)


def score(run: Run, scorers: Iterable[Any], *, timeout: float | None = SCORER_TIMEOUT) -> dict[str, Any]:
    """Apply ``scorers`` to an ended run; merge into its ``scores.json`` and registry row; returns all its scores.

    What a scorer returns replaces what it returned before (its keys are recorded under ``keys``); a Python
    scorer may take ``timeout`` seconds (None: no limit; a check has its own)."""
    scorers = unique_names([as_scorer(s) for s in scorers])
    if not scorers:
        return run.scores
    path = run.dir / SCORES_FILE
    excluded = excluded_reason({"status": run.status, "stop_reason": (run.result or {}).get("stopReason")})
    if excluded:  # the infrastructure ended it: nothing of the agent's to score (and no score it had stays)
        atomic_write_json(path, {"scores": {}, "errors": None, "keys": {}, "excluded": excluded,
                                 "scoredAt": now_iso()})
        registry.note(run)
        return {}
    stored = read_json(path) or {}
    scores: dict[str, Any] = dict(stored.get("scores") or {})
    errors: dict[str, str] = dict(stored.get("errors") or {})
    keys: dict[str, list[str]] = dict(stored.get("keys") or {})
    for scorer in scorers:
        name = scorer_name(scorer)
        for key in keys.pop(name, [name]):  # what it said before goes; what it says now comes
            scores.pop(key, None)
        try:
            with _time_limit(None if isinstance(scorer, Check) else timeout):
                got = _normalize(scorer, scorer(run))
        except KeyboardInterrupt:
            raise
        except (Exception, SystemExit, ScorerTimeout) as exc:  # recorded for this run; the sweep goes on
            errors[name] = f"{type(exc).__name__}: {exc}"
            continue
        errors.pop(name, None)
        keys[name] = list(got)
        scores.update(got)
    atomic_write_json(path, {"scores": scores, "errors": errors or None, "keys": keys, "scoredAt": now_iso()})
    registry.note(run)
    return scores


def scorers_spec(scorers: Iterable[Any]) -> list[dict[str, Any]]:
    """The checks of a scorer list, as a stored plan keeps them."""
    return [s.spec() for s in scorers if isinstance(s, Check)]


def load_scorers(specs: Iterable[dict[str, Any]] | None) -> list[Check]:
    return [as_scorer(s) for s in specs or []]

