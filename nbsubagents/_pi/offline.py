"""The offline model: the scripted model (``pi.scripted``, not an AI) served on this machine for every process
that needs it, and the agent dir that points pi at it.

``scripted_server()`` starts ``python -m nbsubagents._pi.offline --state FILE`` detached, once: later kernels and
runs reuse it, it outlives a killed kernel (so background runs go on), and it exits after ``IDLE_EXIT`` seconds
without a request (``NBSUBAGENTS_SCRIPTED_IDLE``) or with ``stop_scripted_model()``. The ``offline`` setting sends
every run of a project to it: ``child_env()`` is the environment a child needs for that. In the foreground
(``python -m nbsubagents._pi.offline [--port N] [--agent-dir DIR]``) the same program serves until Ctrl-C.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .._child import harnesses
from .._child.artifacts import atomic_write_json, read_json
from .._child.harnesses.pi import write_agent_dir
from .._child.procs import alive, process_start_ticks
from .models import ModelChoice, ModelError, available_models, resolve_name
from .scripted import ScriptedModel

__all__ = ["OFFLINE_MODEL", "IDLE_EXIT", "ScriptedServer", "scripted_server", "stop_scripted_model", "choice",
           "child_env"]

OFFLINE_MODEL = "demo/scripted"
# The names the scripted model answers to: demo/backup is the same model under a second name, a fallback to go on
# with when a task says ``fail for demo/scripted: 429 ...``.
OFFLINE_MODELS = ("scripted", "backup")
IDLE_EXIT = 600.0  # seconds without a request after which the detached server exits


class ScriptedServer:
    """The detached scripted-model server this process uses: ``url``, ``port``, ``pid``, ``stop()``."""

    def __init__(self, info: dict[str, Any], state: Path) -> None:
        self.url: str = info["url"]
        self.port: int = info["port"]
        self.pid: int = info["pid"]
        self.start_ticks = info.get("startTicks")
        self.state = state

    @property
    def alive(self) -> bool:
        return alive(self.pid, self.start_ticks)

    def stop(self) -> bool:
        return stop_scripted_model()

    def __repr__(self) -> str:
        return f"<scripted model {OFFLINE_MODEL} at {self.url} (pid {self.pid}; not an AI)>"


def _state_dir() -> Path:
    """Where the detached server's state file lives: ``NBSUBAGENTS_SCRIPTED_DIR``, else the user's cache."""
    explicit = os.environ.get("NBSUBAGENTS_SCRIPTED_DIR")
    if explicit:
        return Path(explicit)
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "nbsubagents"


def _state_file() -> Path:
    """One server per checkout of this package: another version's server is never reused."""
    key = hashlib.sha1(str(Path(__file__).resolve().parent).encode()).hexdigest()[:10]
    return _state_dir() / f"scripted-model-{key}.json"


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/models", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def _running(state: Path) -> ScriptedServer | None:
    info = read_json(state)
    if not info or not isinstance(info.get("pid"), int) or not isinstance(info.get("url"), str):
        return None
    server = ScriptedServer(info, state)
    return server if server.alive and _answers(server.url) else None


def scripted_server() -> ScriptedServer:
    """The detached scripted model server, started if none is running (see the module's docstring)."""
    state = _state_file()
    state.parent.mkdir(parents=True, exist_ok=True)
    with open(state.parent / ".scripted-model.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two kernels starting at once get one server
        server = _running(state)
        if server is not None:
            return server
        idle = os.environ.get("NBSUBAGENTS_SCRIPTED_IDLE") or str(IDLE_EXIT)
        with open(state.parent / "scripted-model.log", "ab") as log:
            proc = subprocess.Popen([sys.executable, "-m", "nbsubagents._pi.offline", "--state", str(state),
                                     "--idle-exit", idle], stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                    start_new_session=True, cwd="/")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            server = _running(state)
            if server is not None and server.pid == proc.pid:
                return server
            if proc.poll() is not None:
                break
            time.sleep(0.05)
        proc.kill()
        raise ModelError(f"The scripted model server ({OFFLINE_MODEL}) did not start: see "
                         f"{state.parent / 'scripted-model.log'}")


def stop_scripted_model() -> bool:
    """Stop the detached scripted model server (its runs in flight fail); False when none was running."""
    state = _state_file()
    info = read_json(state) or {}
    pid, ticks = info.get("pid"), info.get("startTicks")
    if not alive(pid, ticks):
        state.unlink(missing_ok=True)
        return False
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    while alive(pid, ticks) and time.monotonic() < deadline:
        time.sleep(0.05)
    if alive(pid, ticks):
        os.kill(pid, signal.SIGKILL)
    state.unlink(missing_ok=True)
    return True


def choice(requested: str | None, preset_model: str | None, program: str,
           harness: harnesses.Harness) -> ModelChoice:
    """The model of a run under the ``offline`` setting: the scripted model, with what the call or the preset
    asked for kept as asked (meta.json's ``requestedModel``). A model given on the call is checked as it is online,
    against the models the harness lists here (pi's) and the scripted model's own names: a misspelt one is the same
    error. A run whose call names another model says which model answers instead (its ``note``; a preset's model is
    overridden in every offline run, which its summary's ``offline model`` says)."""
    source = "call" if requested else "preset" if preset_model else None
    named = _checked(requested, program, harness) if requested and harness.LISTS_MODELS else requested
    if named in OFFLINE_NAMES:  # the scripted model by one of its names: no other model was asked for
        return ModelChoice(requested=requested, source=source, resolved=named, thinking=None)
    note = None
    if named:
        also = f": {named}" if named != requested else ""
        note = (f'model "{requested}" (from the call\'s model={also}) not used: the offline setting sends every run to '
                f"the scripted model {OFFLINE_MODEL} (not an AI), which answers instead")
    return ModelChoice(requested=requested or preset_model, source=source, resolved=OFFLINE_MODEL, thinking=None,
                       note=note)


OFFLINE_NAMES = tuple(f"demo/{name}" for name in OFFLINE_MODELS)


def _checked(name: str, program: str, harness: harnesses.Harness) -> str:
    """``name`` as ``provider/id`` among the models the harness lists here and the scripted model's (a dated
    Anthropic id: its nearest, as online); an unknown one is the error it is online. The scripted model's own
    names need no question to pi (a sweep over them starts no pi to list models)."""
    if name in OFFLINE_NAMES:
        return name
    known = (*available_models(program, harness), *OFFLINE_NAMES)
    try:
        return resolve_name(name, known, "the call's model=")[0][0]
    except ModelError as exc:
        if not set(known) <= set(OFFLINE_NAMES):
            raise
        raise ModelError(f"{exc}. pi has no provider configured here, so under the offline setting only the scripted "
                         "model's names are known: drop model= (the run uses the scripted model) or configure a "
                         "provider") from None  # pi lists none of its own


def child_env(harness: harnesses.Harness) -> dict[str, str]:
    """The variables that send a child of ``harness`` to the offline model (its ``offline_env``: pi's agent dir
    beside the server's state file, shared by every project; Claude Code's Anthropic endpoint; Codex's OpenAI
    endpoint; each with a dummy key), and ``PI_OFFLINE``."""
    server = scripted_server()
    folder = server.state.with_name(server.state.stem + "-agent")
    return {**harness.offline_env(server.url, str(folder), OFFLINE_MODELS), "PI_OFFLINE": "1"}


# -- the program ---------------------------------------------------------------------------------------------------
def serve_detached(state: Path, idle_exit: float) -> int:
    """Serve other processes: ``state`` (JSON: pid, startTicks, port, url) says where, until SIGTERM or
    ``idle_exit`` seconds without a request; the state file goes with the server."""
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: done.set())
    with ScriptedModel(models=OFFLINE_MODELS) as model:
        me = os.getpid()
        atomic_write_json(state, {"pid": me, "startTicks": process_start_ticks(me), "port": model.port,
                                  "url": model.url, "idleExit": idle_exit})
        while not done.wait(0.5):
            if model.idle_seconds > idle_exit:
                break
    try:
        if json.loads(state.read_text()).get("pid") == os.getpid():
            state.unlink()
    except (OSError, ValueError):
        pass
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Serve the scripted model in the foreground until SIGTERM/SIGINT (or detached, see ``--state``)."""
    parser = argparse.ArgumentParser(prog="python -m nbsubagents._pi.offline",
                                     description="The scripted model (not an AI) as a program of its own.")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--agent-dir", help="write pi's models.json/settings.json here")
    parser.add_argument("--state", help="serve detached: write pid and url to this JSON file")
    parser.add_argument("--idle-exit", type=float, default=IDLE_EXIT,
                        help="with --state: exit after this many seconds without a request (default 600)")
    args = parser.parse_args(argv)
    if args.state:
        return serve_detached(Path(args.state), args.idle_exit)
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    with ScriptedModel(port=args.port, models=OFFLINE_MODELS) as model:
        if args.agent_dir:
            write_agent_dir(args.agent_dir, model.url, models=OFFLINE_MODELS)
        print(f"scripted model listening on {model.url}", flush=True)
        while not done.wait(0.2):
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
