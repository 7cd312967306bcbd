"""Fixtures shared by every test folder: a temp project, the real pinned pi, the scripted model.

Every run in these tests is the real ``pi`` talking to the project's scripted model on 127.0.0.1. Plain helpers
(``PI``, ``wait_for``, ``processes_inside``...) are in helpers.py. Under pytest-xdist each worker is its own
session: its own temp folders (``tmp_path_factory``), so its own detached demo model server.
"""

from __future__ import annotations

import os
import time

import pytest
from helpers import NOMODEL, PI, REPO, SCOUT, SCRIBE, interrupt_when_running, processes_inside, wait_for  # noqa: F401

from nbsubagents import config
from nbsubagents.demo.scripted import ScriptedModel, write_agent_dir


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
    from nbsubagents import preset_files  # the machine's own ~/.claude/agents must not change what tests see
    monkeypatch.setattr(preset_files, "claude_user_dir", lambda: tmp_path / "home" / ".claude" / "agents")
    monkeypatch.delenv("NBSUBAGENTS_ROOT", raising=False)
    monkeypatch.chdir(root)
    config.reset()
    yield root
    config.reset()
    deadline = time.monotonic() + 10
    while processes_inside(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processes_inside(tmp_path) == [], "a run left processes behind"
