"""Fixtures for end-to-end tests: a temp project, the real pinned pi, the scripted model.

Every run in these tests is the real ``pi`` talking to the project's scripted model on 127.0.0.1.
"""

from __future__ import annotations

import _thread
import os
import threading
import time
from pathlib import Path

import pytest

from nbsubagents import config
from nbsubagents.demo.scripted import ScriptedModel, write_agent_dir

REPO = Path(__file__).resolve().parents[1]
# The pi under test: package.json's pin by default; `make test` runs the tests marked pi_matrix (the ones that
# exercise pi's event stream) a second time with NBSUBAGENTS_TEST_PI=pi1/node_modules/.bin/pi (pi 1.x).
PI = Path(os.environ.get("NBSUBAGENTS_TEST_PI") or REPO / "node_modules" / ".bin" / "pi").absolute()

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


@pytest.fixture(autouse=True, scope="session")
def scripted_demo_server(tmp_path_factory):
    """The detached demo model server that notebooks and demos start (``use_scripted_model()``) is this test
    session's own, and it is stopped at the end: tests leave no process behind."""
    from nbsubagents import demo

    os.environ["NBSUBAGENTS_SCRIPTED_DIR"] = str(tmp_path_factory.mktemp("scripted-server"))
    yield
    demo.stop_scripted_model()


@pytest.fixture(autouse=True)
def forget_watched_runs():
    """A run that a test left to this process's watcher (reattached by ``reconcile``, say) must not announce
    its end during a later test, whose captured output it would join."""
    yield
    from nbsubagents.lifecycle import watcher

    with watcher._watcher._lock:
        watcher._watcher._entries.clear()


@pytest.fixture
def scripted():
    with ScriptedModel() as model:
        yield model


@pytest.fixture
def project(tmp_path, monkeypatch, scripted):
    """A project with two presets, a few files, an agent dir for the scripted model; cwd is set to it."""
    root = tmp_path / "project"
    (root / ".pi" / "subagents").mkdir(parents=True)
    (root / ".pi" / "subagents" / "scout.md").write_text(SCOUT)
    (root / ".pi" / "subagents" / "scribe.md").write_text(SCRIBE)
    (root / ".pi" / "subagents" / "nomodel.md").write_text(NOMODEL)
    (root / "src").mkdir()
    (root / "README.md").write_text("# Demo project\nsecond line\n")
    (root / "src" / "app.py").write_text("print('hi')\n")
    agent = write_agent_dir(tmp_path / "agent", scripted.url)
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(agent))
    monkeypatch.setenv("PI_OFFLINE", "1")
    monkeypatch.setenv("NBSUBAGENTS_PI", str(PI))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # the model-list cache stays in the test
    from nbsubagents.preset_files import locations  # the machine's own ~/.claude/agents must not change what tests see
    monkeypatch.setattr(locations, "claude_user_dir", lambda: tmp_path / "home" / ".claude" / "agents")
    monkeypatch.delenv("NBSUBAGENTS_ROOT", raising=False)
    monkeypatch.chdir(root)
    config.reset()
    yield root
    config.reset()
    deadline = time.monotonic() + 10
    while processes_inside(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processes_inside(tmp_path) == [], "a run left processes behind"


class interrupt_when_running:
    """Interrupts the main thread (as a kernel interrupt does) once a run of ``project`` shows ``marker``
    in its events: deterministic, unlike a timer that may fire while the run is still being prepared."""

    def __init__(self, project: Path, marker: str = '"turn_start"', timeout: float = 60.0) -> None:
        self.runs = project / ".pi" / "subagents" / "runs"
        self.marker = marker
        self.timeout = timeout
        self.fired = threading.Event()
        self._stop = threading.Event()

    def _watch(self) -> None:
        deadline = time.monotonic() + self.timeout
        while not self._stop.is_set() and time.monotonic() < deadline:
            for events in self.runs.glob("*/events.jsonl"):
                try:
                    seen = self.marker in events.read_text(errors="replace")
                except OSError:
                    seen = False
                if seen:
                    self.fired.set()
                    _thread.interrupt_main()
                    return
            time.sleep(0.05)

    def __enter__(self) -> "interrupt_when_running":
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def wait_for(predicate, timeout: float = 90.0, what: str = "condition"):
    """Poll ``predicate`` until it returns something true (which is returned), or fail the test."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")
