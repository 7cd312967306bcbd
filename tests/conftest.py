"""Fixtures shared by every test folder: a temp project, the real pinned pi, the scripted model.

Every run in these tests is the real ``pi`` talking to the project's scripted model on 127.0.0.1. Plain helpers
(``PI``, ``wait_for``, ``processes_inside``...) are in helpers.py. Under pytest-xdist each worker is its own
session: its own temp folders (``tmp_path_factory``), so its own detached demo model server.
"""

from __future__ import annotations

import fcntl
import os
import sys
import time
from pathlib import Path

import pytest
from helpers import (NOMODEL, PI, REPO, SCOUT, SCRIBE, interrupt_when_running, make_project,  # noqa: F401
                     processes_inside, seed_model_list, wait_for)

from nbsubagents import _config as config
from nbsubagents._pi.scripted import ScriptedModel


@pytest.fixture(autouse=True, scope="session")
def scripted_demo_server(tmp_path_factory):
    """The detached demo model server that notebooks and demos start (``use_scripted_model()``) is this test
    session's own, and it is stopped at the end: tests leave no process behind."""
    from nbsubagents import demo

    os.environ["NBSUBAGENTS_SCRIPTED_DIR"] = str(tmp_path_factory.mktemp("scripted-server"))
    yield
    demo.stop_scripted_model()


@pytest.fixture(autouse=True, scope="session")
def private_state(tmp_path_factory):
    """The runs' keys (``child.keys``) go to this session's own state folder, not the person's."""
    os.environ["XDG_STATE_HOME"] = str(tmp_path_factory.mktemp("state"))


@pytest.fixture(autouse=True)
def forget_watched_runs():
    """A run that a test left to this process's watcher (reattached by ``reconcile``, say) must not announce
    its end during a later test, whose captured output it would join."""
    yield
    from nbsubagents._lifecycle import watcher

    with watcher._watcher._lock:
        watcher._watcher._entries.clear()


@pytest.fixture
def scripted():
    with ScriptedModel() as model:
        yield model


@pytest.fixture
def root(tmp_path, monkeypatch):
    """An empty project (its runs folder made, no runs, no presets); cwd is set to it, pi's agent dir is the test's."""
    base = tmp_path / "proj"
    (base / ".pi" / "subagents" / "runs").mkdir(parents=True)
    monkeypatch.chdir(base)
    monkeypatch.delenv("NBSUBAGENTS_ROOT", raising=False)
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path / "agent"))
    return base


@pytest.fixture
def project(tmp_path, monkeypatch, scripted):
    """A project with two presets, a few files, an agent dir for the scripted model; cwd is set to it."""
    root = make_project(tmp_path, monkeypatch, scripted.url)
    yield root
    config.reset()
    deadline = time.monotonic() + 10
    while processes_inside(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processes_inside(tmp_path) == [], "a run left processes behind"


# -- running in parallel (pytest-xdist) --------------------------------------------------------------------------
# `make test` runs the suite on three workers (TEST_WORKERS). Each worker is its own session (own temp folders, own
# demo model server, own watcher); what would still race is grouped (`xdist_group`, with `--dist loadgroup`: the
# Dask tests share one module-scoped cluster, the fault-injection tests one report), and so is a module whose tests
# share an expensive module-scoped fixture, which each worker running one of them would make again (the contrast
# tests' runs and JupyterLab, the docs build). Tests marked `serial` measure time (budgets, timeouts, render rates):
# they take an exclusive lock that every other test takes shared, so while one runs no other test runs on another
# worker; their assertions stay as strict as in a serial run. They come first in the session's order.

def _lock_dir(factory: pytest.TempPathFactory) -> Path:
    base = factory.getbasetemp()
    return base.parent if base.name.startswith("popen-gw") else base  # the workers' common parent


@pytest.fixture(scope="session")
def _test_locks(tmp_path_factory):
    folder = _lock_dir(tmp_path_factory)
    with open(folder / "serial.lock", "a+") as lock, open(folder / "serial.turnstile", "a+") as turnstile:
        yield lock, turnstile


@pytest.fixture(autouse=True)
def serial_when_marked(request, _test_locks):
    """Exclusive for tests marked ``serial``, shared for the rest. The turnstile lets a waiting serial test in
    before the other worker's next test (Linux's flock would let shared holders starve it)."""
    lock, turnstile = _test_locks
    exclusive = request.node.get_closest_marker("serial") is not None
    fcntl.flock(turnstile, fcntl.LOCK_EX)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
    finally:
        fcntl.flock(turnstile, fcntl.LOCK_UN)
    yield
    fcntl.flock(lock, fcntl.LOCK_UN)


@pytest.hookimpl(tryfirst=True)  # before xdist's own, which reads the groups
def pytest_collection_modifyitems(config, items):
    # The serial tests first: started with the session they wait for each other only, where one started later
    # waited for whatever the other worker was running then (up to a 3-minute browser test), both workers idle.
    items.sort(key=lambda item: item.get_closest_marker("serial") is None)
    for item in items:
        if item.get_closest_marker("dask"):
            item.add_marker(pytest.mark.xdist_group("dask"))
        if item.get_closest_marker("faults"):
            item.add_marker(pytest.mark.xdist_group("faults"))


GROUPS_LOST: list[str] = []  # why this worker's grouped tests fail, if xdist did not take their groups


@pytest.hookimpl(tryfirst=True)  # before xdist's worker sends its collection
def pytest_collection_finish(session):
    """A group that xdist did not take (its mark not in the node id) would let its tests run on several workers,
    silently (pytest 9.2 with pytest-xdist 3.8 did, pytest-dev/pytest-xdist#1386): each of them fails instead."""
    if session.config.getoption("loadgroup", default=False) and any(
            item.get_closest_marker("xdist_group") and "@" not in item.nodeid for item in session.items):
        GROUPS_LOST.append(f"--dist loadgroup ignored the xdist_group marks: this pytest ({pytest.__version__}) and "
                           "pytest-xdist do not work together (pyproject.toml's test extra says which pytest does)")


@pytest.fixture(autouse=True)
def grouped_as_marked(request):
    if GROUPS_LOST and request.node.get_closest_marker("xdist_group"):
        pytest.fail(GROUPS_LOST[0])


FAULT_REPORTS: list[str] = []
from faults import report  # noqa: E402, F401 (every module's fault-injection cases, printed at its end)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """xdist's controller: the fault-injection reports a worker printed where nobody sees it, shown at the end."""
    FAULT_REPORTS.extend(getattr(node, "workeroutput", {}).get("fault_reports", []))


def pytest_terminal_summary(terminalreporter):
    for text in FAULT_REPORTS:
        terminalreporter.write_line(text)


# -- the registry's files are SQLite's (issue 59) ----------------------------------------------------------------
# Package code that opens, renames, links, truncates or deletes `registry.sqlite` (or its -wal, -shm) anywhere but
# where `store.FILE_TOUCHES` says drops SQLite's POSIX locks or moves a live database: every test of the suite is
# watched for it, through an audit hook (CPython's `open`, `os.*` events; SQLite's own C calls raise none).
_FILE_EVENTS = {"open": 1, "os.remove": 1, "os.truncate": 1, "os.rename": 2, "os.link": 2, "os.symlink": 2,
                "shutil.copyfile": 2}
_REGISTRY_TOUCHES: list[tuple[str, str]] = []  # (module.function, path) of each touch outside FILE_TOUCHES


def _watch_registry_files(event: str, args: tuple) -> None:
    count = _FILE_EVENTS.get(event)
    if count is None:
        return
    paths = [os.fsdecode(p) for p in args[:count] if isinstance(p, (str, bytes, os.PathLike))]
    touched = [p for p in paths if "registry.sqlite" in os.path.basename(p)]
    if not touched:
        return
    from nbsubagents._registry import store

    frame = sys._getframe(1)
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if module == "nbsubagents" or module.startswith("nbsubagents."):  # the package's nearest frame judges
            where = f"{module}.{frame.f_code.co_name}"
            if where not in store.FILE_TOUCHES:
                _REGISTRY_TOUCHES.append((where, touched[0]))
            return
        frame = frame.f_back


sys.addaudithook(_watch_registry_files)


@pytest.fixture(autouse=True)
def registry_file_touches():
    """The touches of the registry's files this test made outside ``store.FILE_TOUCHES``: none, or it fails."""
    _REGISTRY_TOUCHES.clear()
    yield _REGISTRY_TOUCHES
    touches, _REGISTRY_TOUCHES[:] = list(_REGISTRY_TOUCHES), []
    assert touches == [], "the registry's files touched outside SQLite (store.FILE_TOUCHES says where that is safe)"
