"""Helpers the tests of every folder import (``from helpers import wait_for``): the repo, the pi under test,
preset texts, process checks, waiting. Fixtures live in conftest.py files; these are plain functions."""

from __future__ import annotations

import _thread
import json
import os
import shutil
import signal
import threading
import time
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parents[1]
# The pi under test: pi 1.x (pi1/, on the Node 22 installed beside it) by default; `make test` runs the tests marked
# pi_matrix (where pi versions differ) a second time with NBSUBAGENTS_TEST_PI=node_modules/.bin/pi (0.73.1,
# package.json's pin, which the demo and the notebooks run). 1.x first because it is what installing pi gives today,
# and because a run of it costs a third of 0.73.1's CPU (0.8 s against 2.1 s here), which the suite's time is made of.
# Any other pi can be tested the same way (NBSUBAGENTS_TEST_PI=/path/to/pi): nothing in the tests names a version.
PI1 = REPO / "pi1" / "node_modules" / ".bin" / "pi"
PI = Path(os.environ.get("NBSUBAGENTS_TEST_PI") or PI1).absolute()


def _pi_version() -> tuple[int, ...]:
    from nbsubagents._pi.locate import pi_package, version_key

    package = pi_package(str(PI))
    return version_key(package.version) if package else ()


PI_VERSION = _pi_version()  # (1, 6, 0) or (0, 73, 1): compared by line ((1,) and above: pi 1.x), never exactly


def pi_saying(folder: Path, version: str, pi: Path = PI1) -> Path:
    """A pi whose package says it is ``version``, made in ``folder`` from the installed ``pi`` (a ``node_modules/
    .bin/pi``) without installing anything: the folders from ``node_modules`` down to the script pi starts from
    made anew (its package is the one above that script) with everything beside them linked to the installed
    files, the script's own folder copied (~10 MB), its package.json rewritten, and the node next to ``pi`` linked
    next to it. Returns
    the new ``node_modules/.bin/pi``."""
    from nbsubagents._child.harnesses.pi import package  # noqa: PLC0415

    script = Path(os.path.realpath(pi))
    modules = Path(os.path.realpath(Path(pi).parent.parent))
    way = script.relative_to(modules).parts  # ("@earendil-works", "pi-coding-agent", ..., "cli.js")
    made = folder / "node_modules"
    for depth in range(len(way) - 1):
        (made / Path(*way[:depth])).mkdir(parents=True, exist_ok=True)
        for entry in (modules / Path(*way[:depth])).iterdir():
            if entry.name not in (way[depth], ".bin"):
                (made / Path(*way[:depth]) / entry.name).symlink_to(entry)
    shutil.copytree(script.parent, made / Path(*way[:-1]), symlinks=True)  # pi's bundle: where it finds its package
    data, manifest = package(str(pi))
    copied = made / manifest.relative_to(modules)
    copied.unlink()
    copied.write_text(json.dumps({**data, "version": version}, indent=2))
    (made / ".bin").mkdir()
    (made / ".bin" / "pi").symlink_to(made / Path(*way))
    if (Path(pi).parent / "node").exists():
        (made / ".bin" / "node").symlink_to(os.path.realpath(Path(pi).parent / "node"))
    return made / ".bin" / "pi"

SCOUT = """---
name: scout
description: Reads files and reports.
model: demo/scripted
tools: read, ls, bash
---
You are a scout. MARKER-SCOUT-PROMPT
"""
SCRIBE = """---
name: scribe
description: Writes notes.
model: demo/scripted
tools: read, write, edit
---
Write carefully.
"""
NOMODEL = """---
name: nomodel
description: Has no model.
---
"""


def make_project(tmp_path: Path, monkeypatch, model_url: str) -> Path:
    """A project with two presets, a few files, an agent dir for the scripted model; cwd is set to it (the
    ``project`` fixture's, and a module-scoped fixture's with its own ``pytest.MonkeyPatch.context()``)."""
    from nbsubagents import _config as config
    from nbsubagents._child.harnesses.pi import write_agent_dir
    from nbsubagents._preset_files import locations  # the machine's own ~/.claude/agents must not change what tests see

    root = tmp_path / "project"
    (root / ".pi" / "subagents").mkdir(parents=True)
    (root / ".pi" / "subagents" / "scout.md").write_text(SCOUT)
    (root / ".pi" / "subagents" / "scribe.md").write_text(SCRIBE)
    (root / ".pi" / "subagents" / "nomodel.md").write_text(NOMODEL)
    (root / "src").mkdir()
    (root / "README.md").write_text("# Demo project\nsecond line\n")
    (root / "src" / "app.py").write_text("print('hi')\n")
    agent = write_agent_dir(tmp_path / "agent", model_url)
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(agent))
    monkeypatch.setenv("PI_OFFLINE", "1")
    monkeypatch.setenv("NBSUBAGENTS_PI", str(PI))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # the model-list cache stays in the test
    seed_model_list(agent)
    monkeypatch.setattr(locations, "claude_user_dir", lambda: tmp_path / "home" / ".claude" / "agents")
    monkeypatch.delenv("NBSUBAGENTS_ROOT", raising=False)
    monkeypatch.chdir(root)
    config.reset()
    return root


CLAUDE = REPO / "harnesses" / "node_modules" / ".bin" / "claude"


def use_claude_code(monkeypatch, model_url: str, home: Path) -> None:
    """Claude Code (``make setup-test`` installs it) pointed at the scripted model, through its environment only;
    ``home`` is its HOME: were its config dir ignored, nothing real is touched."""
    assert CLAUDE.is_file(), "Claude Code is installed by `make setup-test` (harnesses/package.json)"
    monkeypatch.setenv("NBSUBAGENTS_CLAUDE", str(CLAUDE))
    monkeypatch.setenv("ANTHROPIC_BASE_URL", model_url.removesuffix("/v1"))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "scripted-dummy-key")
    monkeypatch.setenv("HOME", str(home))


def processes_inside(folder: Path) -> list[str]:
    """Processes whose working directory is inside ``folder``: a run's leftovers if any."""
    found = []
    folder = folder.resolve()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cwd = Path(os.readlink(entry / "cwd"))
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if cwd == folder or folder in cwd.parents:
            found.append(f"{entry.name}: {cmd}")
    return found


class as_in_a_kernel:
    """Within it this process counts as a Jupyter kernel for what an interrupt does (``lifecycle.interrupts``): the
    runs it waits on are aborted and returned, the interrupt goes no further. Outside a kernel it stops the caller."""

    def __enter__(self) -> "as_in_a_kernel":
        import nbsubagents
        from nbsubagents._lifecycle.edge import edge, lend

        nbsubagents.run, nbsubagents.run_parallel  # noqa: B018 (their first use lends the edge: done before ours)
        self._was = edge.in_kernel
        lend(in_kernel=lambda: True)
        return self

    def __exit__(self, *exc: object) -> None:
        from nbsubagents._lifecycle.edge import lend

        lend(in_kernel=self._was)


class interrupt_when_running(as_in_a_kernel):
    """Interrupts the main thread (as a kernel interrupt does, and the process counts as a kernel meanwhile) once a
    run of ``project`` shows ``marker`` in its events, or once ``marker()`` is true when it is a function:
    deterministic, unlike a timer that may fire while the run is still being prepared."""

    def __init__(self, project: Path, marker: str | Callable[[], object] = '"turn_start"',
                 timeout: float = 60.0) -> None:
        self.runs = project / ".pi" / "subagents" / "runs"
        self.seen = marker if callable(marker) else lambda: self._in_events(marker)
        self.timeout = timeout
        self.fired = threading.Event()
        self._stop = threading.Event()

    def _in_events(self, marker: str) -> bool:
        for events in self.runs.glob("*/events.jsonl"):
            try:
                if marker in events.read_text(errors="replace"):
                    return True
            except OSError:
                continue
        return False

    def _watch(self) -> None:
        deadline = time.monotonic() + self.timeout
        while not self._stop.is_set() and time.monotonic() < deadline:
            if self.seen():
                self.fired.set()
                _thread.interrupt_main()
                return
            time.sleep(0.05)

    def __enter__(self) -> "interrupt_when_running":
        # As in a kernel, Ctrl-C raises KeyboardInterrupt: interrupt_main() does nothing while SIGINT is ignored or
        # default, as an earlier test in the same (xdist worker) process may have left it.
        self._old_handler = signal.signal(signal.SIGINT, signal.default_int_handler)
        super().__enter__()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        super().__exit__(*exc)
        signal.signal(signal.SIGINT, self._old_handler)


def at_once(target: Callable[..., object], calls: list[tuple]) -> None:
    """``target(*args)`` for each ``args`` of ``calls``, each in a thread of its own, all started before any is
    joined (racers meet at a ``threading.Barrier`` of their own when the moment matters); returns when all ended."""
    threads = [threading.Thread(target=target, args=args) for args in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def wait_for(predicate, timeout: float = 90.0, what: str = "condition"):
    """Poll ``predicate`` until it returns something true (which is returned), or fail the test."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def live_run_dir(root: Path, run_id: str, *, ended: str | None = None, questions: list | None = None,
                 meta: dict | None = None) -> Path:
    """A run directory as a live supervisor keeps it (this test process stands for the supervisor, so the run is
    live), with ``questions`` as the waiting.json the supervisor writes while the child waits on them; with
    ``ended``, as a supervisor leaves it (its key gone, else made as ``prepare`` makes it). Recorded in the
    registry."""
    import json  # noqa: PLC0415 (kept beside the one helper that needs them)

    from nbsubagents import _registry as registry  # noqa: PLC0415
    from nbsubagents._child import inbox, keys, procs  # noqa: PLC0415
    from nbsubagents._child.artifacts import now_iso  # noqa: PLC0415

    run_dir = root / ".pi" / "subagents" / "runs" / run_id
    run_dir.mkdir(parents=True)
    me = os.getpid()
    ident = {"pid": me, "host": registry.HOST, "startTicks": procs.process_start_ticks(me)}
    (run_dir / "meta.json").write_text(json.dumps({
        "runId": run_id, "name": "mapper", "preset": "scout", "mode": "background", "task": "map the tests",
        "cwd": str(root), "requestedModel": "demo/scripted", "resolvedModel": "demo/scripted", "timeout": 120,
        "createdAt": now_iso(), "launcher": ident, "runner": "process", **(meta or {})}))
    (run_dir / "supervisor.json").write_text(json.dumps({**ident, "startedAt": now_iso()}))
    if ended:
        (run_dir / "result.json").write_text(json.dumps({
            "runId": run_id, "status": ended, "exitCode": 0, "stopReason": "stop", "finalText": "Mapped.",
            "usage": {"totalTokens": 10, "cost": 0.0}, "turns": 1, "toolCalls": 1, "startedAt": now_iso(),
            "endedAt": now_iso(), "durationSeconds": 1.0}))
    keys.forget(run_id) if ended else keys.create(run_id)
    if questions:
        inbox.set_waiting(run_dir, questions)
    registry.record(run_dir)
    return run_dir


_SCRIPTED_ANSWERS: dict[str, tuple[tuple[str, ...], dict[str, bytes]]] = {}


def seed_model_list(agent: Path) -> None:
    """Give the model-list cache (``$XDG_CACHE_HOME`` as it is now) pi's own answer for ``agent``, an agent dir that
    ``write_agent_dir`` made with its defaults, and the files that asking leaves there (pi 1.x writes an empty
    ``auth.json`` and ``models-store.json``): the tests' runs then do not each start pi to ask it again (~1.3 s of
    CPU). The answer is pi's, asked once per test process of an agent dir made the same way; asking on a cold cache
    is tested in test_models.py."""
    from nbsubagents._pi import models
    from nbsubagents._child.harnesses import pi
    from nbsubagents._child.harnesses.pi import write_agent_dir

    from unittest import mock

    if str(PI) not in _SCRIPTED_ANSWERS:
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            reference = write_agent_dir(Path(tmp), "http://127.0.0.1:9/v1")
            before = set(os.listdir(reference))
            with mock.patch.dict(os.environ, PI_CODING_AGENT_DIR=str(reference)):
                answer = pi.models(str(PI))
            left = {name: (reference / name).read_bytes() for name in set(os.listdir(reference)) - before
                    if (reference / name).is_file()}  # pi 0.73.1 also makes sessions/, made again as needed
        _SCRIPTED_ANSWERS[str(PI)] = answer, left
    answer, left = _SCRIPTED_ANSWERS[str(PI)]
    for name, data in left.items():
        if not (agent / name).exists():
            (agent / name).write_bytes(data)
            (agent / name).chmod(0o600)
    with mock.patch.dict(os.environ, PI_CODING_AGENT_DIR=str(agent)):
        models.remember(pi.models_key(str(PI)), answer)


def pi_argv(preset, model: str = "demo/scripted", *, run_dir=".", system_prompt_path=None,
            **request) -> tuple[list[str], list[str]]:
    """pi's argv for ``preset`` (its harness's build, as prepare asks it) and the tool entries left out."""
    from nbsubagents._child.harnesses import Request, pi  # noqa: PLC0415
    from nbsubagents._lifecycle.prepare import preset_fields  # noqa: PLC0415

    run = Request(program="pi", run_dir=str(run_dir), cwd=str(run_dir), model=model,
                  system_prompt_path=None if system_prompt_path is None else str(system_prompt_path),
                  **{**preset_fields(preset), **request})
    return pi.build(run)[0], pi.left_out(run)
