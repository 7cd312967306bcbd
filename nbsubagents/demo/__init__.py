"""The embedded default: run sub-agents offline against the scripted demo model.

The scripted model is a deterministic test double, not an AI: it turns task lines such as
``read README.md``, ``ls src``, ``run: python -V`` or ``write notes.md: text`` into real pi tool
calls and ends with a summary that quotes what the tools returned. ``python -m nbsubagents.demo``
copies the example project, runs a single and a parallel delegation in it, and prints what each
run did; ``python -m nbsubagents.demo --notebook [NOTEBOOK]`` (the README's ``make demo``) executes
``notebooks/quickstart.ipynb`` headless instead and prints its text outputs.
"""

from __future__ import annotations

import fcntl
import hashlib
import html
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from .. import api
from ..child.artifacts import read_json
from ..child.procs import alive
from .scripted import write_agent_dir

DEMO_MODEL = "demo/scripted"


def data_path(name: str) -> Path:
    """The example project (``demo-project``) or ``notebooks``: package data in an installed wheel
    (``nbsubagents/demo/_data/``), the repository's own folders in a checkout."""
    packaged = Path(__file__).resolve().parent / "_data" / name
    if packaged.exists():
        return packaged
    checkout = Path(__file__).resolve().parents[2]
    return checkout / "examples" / name if name == "demo-project" else checkout / name


EXAMPLE_PROJECT = data_path("demo-project")
QUICKSTART = data_path("notebooks") / "quickstart.ipynb"

IDLE_EXIT = 600.0  # seconds without a request after which the detached demo model server exits


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
        return f"<scripted model {DEMO_MODEL} at {self.url} (pid {self.pid}; not an AI)>"


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
    """The detached demo model server, started if none is running: later kernels reuse it, and it
    outlives a killed kernel (so its background runs go on). It exits after ``IDLE_EXIT`` seconds
    without a request (``NBSUBAGENTS_SCRIPTED_IDLE``) or with ``stop_scripted_model()``."""

    state = _state_file()
    state.parent.mkdir(parents=True, exist_ok=True)
    with open(state.parent / ".scripted-model.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two kernels starting at once get one server
        server = _running(state)
        if server is not None:
            return server
        idle = os.environ.get("NBSUBAGENTS_SCRIPTED_IDLE") or str(IDLE_EXIT)
        with open(state.parent / "scripted-model.log", "ab") as log:
            proc = subprocess.Popen([sys.executable, "-m", "nbsubagents.demo.server", "--state", str(state),
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
        raise RuntimeError(f"the scripted demo model server did not start: see {state.parent / 'scripted-model.log'}")


def stop_scripted_model() -> bool:
    """Stop the detached demo model server (its runs in flight fail); False when none was running."""


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


def use_scripted_model(agent_dir: str | Path | None = None) -> ScriptedServer:
    """Point pi at the scripted demo model (a detached server, see ``scripted_server``) through
    PI_CODING_AGENT_DIR.

    Runs started afterwards from this process inherit the setting. Real models need none of this:
    name them in a preset's ``model:`` and give pi their keys as usual.
    """
    server = scripted_server()
    target = Path(agent_dir) if agent_dir else Path(tempfile.mkdtemp(prefix="nbsubagents-demo-agent-"))
    write_agent_dir(target, server.url)
    os.environ["PI_CODING_AGENT_DIR"] = str(target)
    os.environ["PI_OFFLINE"] = "1"
    return server


def copy_example_project(dest: str | Path) -> Path:
    """A fresh copy of the example project (presets and a few files) to delegate in."""
    dest = Path(dest)
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(EXAMPLE_PROJECT, dest)
    return dest


def run_notebook(notebook: str | Path = QUICKSTART, out_dir: str | Path = ".demo") -> int:
    """Execute a notebook headless (nbclient, widget state kept) and print its text outputs.

    The kernel works in ``out_dir`` (temporary folders the notebook makes go there too, so the example
    project and its runs stay next to the executed copy, ``out_dir/<name>.ipynb``). Returns 1 when a
    cell failed.
    """
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    notebook, out = Path(notebook), Path(out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    os.environ["TMPDIR"] = str(out)  # the kernel inherits it: the notebook's temp project lands in out_dir
    os.environ["NBSUBAGENTS_SCRIPTED_DIR"] = str(out)  # and its demo model server is this demo's, stopped below
    nb = nbformat.read(notebook, as_version=4)
    print(f"Executing {notebook} (scripted demo model {DEMO_MODEL}: deterministic, not an AI)\n")
    client = NotebookClient(nb, kernel_name="python3", timeout=600, store_widget_state=True,
                            resources={"metadata": {"path": str(out)}})
    failed = False
    try:
        client.execute()
    except CellExecutionError:
        failed = True
    finally:
        nbformat.write(nb, out / notebook.name)
        stop_scripted_model()
    for cell in nb.cells:
        if cell.cell_type != "code" or cell.get("execution_count") is None:
            continue
        print(f"[{cell.execution_count}] {cell.source.splitlines()[0] if cell.source else ''}")
        for output in cell.outputs:
            text = output.get("text") if output.output_type == "stream" else \
                output.get("data", {}).get("text/plain", "")
            if output.output_type == "error":
                text = f"{output.ename}: {output.evalue}"
            view = output.get("data", {}).get("application/vnd.jupyter.widget-view+json")
            if view is not None and output.output_type != "execute_result":
                text = widget_text(nb, view.get("model_id", "")) or "(a panel)"
            print("\n".join("    " + line for line in str(text).rstrip().splitlines()))
        print()
    print(f"Executed notebook: {out / notebook.name} (open it in JupyterLab to see the panels)")
    return 1 if failed else 0


def widget_text(nb: Any, model_id: str) -> str:
    """The text a saved widget (and its children) shows, from an executed notebook's widget state."""

    state = nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {}).get("state", {})
    lines: list[str] = []

    def visit(mid: str) -> None:
        model = state.get(mid, {}).get("state", {})
        kind = model.get("_model_name")
        if kind == "HTMLModel":
            body = re.sub(r"(?s)<style.*?</style>", "", model.get("value") or "")
            body = re.sub(r"(?i)<br\s*/?>|</div>|</p>|</tr>", "\n", body)
            text = html.unescape(re.sub(r"<[^>]+>", " ", body))
            lines.extend(" ".join(line.split()) for line in text.splitlines() if line.strip())
        if kind == "AccordionModel" and model.get("selected_index") is None:
            return  # collapsed: its content is not on screen
        for child in model.get("children", []):
            visit(str(child).removeprefix("IPY_MODEL_"))

    visit(model_id)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] == "--notebook":
        return run_notebook(args[1] if len(args) > 1 else QUICKSTART)
    where = Path(args[0]) if args else Path(".demo") / "project"
    project = copy_example_project(where).resolve()
    os.chdir(project)
    os.environ["NBSUBAGENTS_SCRIPTED_DIR"] = str(project / ".pi")  # this tour's own server, stopped at its end
    use_scripted_model(project / ".pi" / "demo-agent")
    try:
        return _tour(project)
    finally:
        stop_scripted_model()


def _tour(project: Path) -> int:
    print(f"Demo project: {project}\n(scripted demo model {DEMO_MODEL}: deterministic, not an AI)\n")
    print(api.presets(), "\n")

    print("== One run: the scout reads the project ==")
    scout = api.run("scout", "Look around.\nread README.md\nls src\nrun: python3 -c 'print(6*7)'")
    print(f"\nOutput of {scout.run_id}:\n{scout.output}\n")

    print("== Three runs in parallel, two at a time ==")
    runs = api.run_parallel([
        {"preset": "scout", "task": "read src/inventory.py", "name": "reader"},
        {"preset": "scribe", "task": "write NOTES.md: pears are out of stock\\nreorder soon", "name": "writer"},
        {"preset": "scribe", "task": "read README.md\nedit README.md: tiny -> small", "name": "editor"},
    ], concurrency=2)
    for run in runs:
        print(f"\n{run.name} ({run.status}): {run.output}")
    print(f"\nArtifacts of every run: {project / '.pi' / 'subagents' / 'runs'}")
    failed = [r for r in [scout, *runs] if r.status != "completed"]
    return 1 if failed else 0

