"""The tmux pane's entry point: ``python -m nbsubagents._child.tmux_pane RUN_DIR``.

Runs inside the tmux session ``nbsubagents._lifecycle.tmux`` starts: it starts the supervisor, prints the
run's transcript as it grows, then the end. Standard library only (it runs outside the kernel).
"""

from __future__ import annotations

import codecs
import signal
import subprocess
import sys
import time
from pathlib import Path

from .artifacts import CHUNK, RunPaths, open_append, open_regular, read_json
from .record import blank
from .text import terminal_safe


def socket_name(run_id: str) -> str:
    """The tmux server (``-L``) of a run: one per run, so its pane gets exactly the kernel's environment."""
    return f"nbsubagents-{run_id}"


def attach_command(run_id: str) -> str:
    return f"tmux -L {socket_name(run_id)} attach"


def pane_main(run_dir: str) -> int:
    """Runs in the tmux pane: start the supervisor, print the transcript as it grows, then the end."""
    paths = RunPaths(Path(run_dir))
    record = blank(paths.dir)
    signal.signal(signal.SIGINT, lambda *_: None)  # Ctrl-C reaches the supervisor (same group): it aborts
    print(f"nbsubagents run {record.run_id} ({record.display_name}) in {record.cwd}\n"
          "Ctrl-C aborts the run; Ctrl-b d detaches.\n", flush=True)
    with open_append(paths.dir / "supervisor.log") as log:
        supervisor = subprocess.Popen([sys.executable, "-m", "nbsubagents._child.supervisor", str(paths.dir)],
                                      stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    offset = 0
    decode = codecs.getincrementaldecoder("utf-8")(errors="replace").decode
    while True:
        ended = supervisor.poll() is not None
        try:
            with open_regular(paths.transcript) as fh:
                fh.seek(offset)
                chunk = fh.read(CHUNK)
        except OSError:
            chunk = b""
        if chunk:
            offset += len(chunk)
            sys.stdout.write(terminal_safe(decode(chunk)))  # a child's escapes never drive the pane
            sys.stdout.flush()
        if len(chunk) < CHUNK:  # all of it read so far
            if ended:
                break
            time.sleep(0.1)
    result = read_json(paths.result) or {}
    print(f"\nrun {result.get('status', 'ended without a result')}", flush=True)
    return supervisor.returncode or 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: python -m nbsubagents._child.tmux_pane RUN_DIR", file=sys.stderr)
        sys.exit(2)
    sys.exit(pane_main(sys.argv[1]))
