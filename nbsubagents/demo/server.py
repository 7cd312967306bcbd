"""``python -m nbsubagents.demo.server``: the scripted model as a program of its own, in the foreground, or detached
for other processes (``--state``: the demo's shared server, ``nbsubagents.demo.use_scripted_model``)."""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import signal
import sys
import threading
from collections.abc import Sequence

from ..child.artifacts import atomic_write_json
from ..child.procs import process_start_ticks
from .scripted import ScriptedModel, write_agent_dir


def serve_detached(state: pathlib.Path, idle_exit: float) -> int:
    """Serve demo mode for other processes: ``state`` (JSON: pid, startTicks, port, url) says where, until
    SIGTERM or ``idle_exit`` seconds without a request; the state file goes with the server."""
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: done.set())
    with ScriptedModel() as model:
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
    """Run the demo-mode server in the foreground until SIGTERM/SIGINT (or detached, see ``--state``)."""
    parser = argparse.ArgumentParser(prog="python -m nbsubagents.demo.server", description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--agent-dir", help="write pi's models.json/settings.json here")
    parser.add_argument("--state", help="serve detached: write pid and url to this JSON file (nbsubagents.demo)")
    parser.add_argument("--idle-exit", type=float, default=600.0,
                        help="with --state: exit after this many seconds without a request (default 600)")
    args = parser.parse_args(argv)
    if args.state:
        return serve_detached(pathlib.Path(args.state), args.idle_exit)
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    with ScriptedModel(port=args.port) as model:
        if args.agent_dir:
            write_agent_dir(args.agent_dir, model.url)
        print(f"scripted model listening on {model.url}", flush=True)
        while not done.wait(0.2):
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
