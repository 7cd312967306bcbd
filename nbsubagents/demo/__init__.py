"""The embedded default: run sub-agents offline against the scripted demo model.

The scripted model is a deterministic test double, not an AI: it turns task lines such as
``read README.md``, ``ls src``, ``run: python -V`` or ``write notes.md: text`` into real pi tool
calls and ends with a summary that quotes what the tools returned. ``python -m nbsubagents.demo``
copies the example project, runs a single and a parallel delegation in it, and prints what each
run did; ``python -m nbsubagents.demo --notebook [NOTEBOOK]`` (the README's ``make demo``) executes
``notebooks/quickstart.ipynb`` headless instead and prints its text outputs.
"""

from __future__ import annotations

import html
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path
from collections.abc import Sequence
from typing import Any

from .. import _api as api
from .._pi.offline import OFFLINE_MODEL as DEMO_MODEL
from .._pi.offline import OFFLINE_MODELS, ScriptedServer, scripted_server, stop_scripted_model
from .._child.harnesses.pi import write_agent_dir


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


def use_scripted_model(agent_dir: str | Path | None = None, models: Sequence[str] = OFFLINE_MODELS) -> ScriptedServer:
    """Point pi at the scripted demo model (a detached server, see ``nbsubagents._pi.offline``) through
    PI_CODING_AGENT_DIR, offered as ``demo/<name>`` for each of ``models`` (a sweep can compare two names).

    Runs started afterwards from this process inherit the setting. Real models need none of this:
    name them in a preset's ``model:`` and give pi their keys as usual.
    """
    server = scripted_server()
    target = Path(agent_dir) if agent_dir else Path(tempfile.mkdtemp(prefix="nbsubagents-demo-agent-"))
    write_agent_dir(target, server.url, models=models)
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
    api.wire()  # the tour's runs go through the public API
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

