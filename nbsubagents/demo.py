"""The embedded default: run sub-agents offline against the scripted demo model.

The scripted model is a deterministic test double, not an AI: it turns task lines such as
``read README.md``, ``ls src``, ``run: python -V`` or ``write notes.md: text`` into real pi tool
calls and ends with a summary that quotes what the tools returned. ``python -m nbsubagents.demo``
is the README's main job: it copies the example project, runs a single and a parallel delegation
in it, and prints what each run did.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

from .scripted import ScriptedModel, write_agent_dir

DEMO_MODEL = "demo/scripted"
EXAMPLE_PROJECT = Path(__file__).resolve().parent.parent / "examples" / "demo-project"

_active: ScriptedModel | None = None


def use_scripted_model(agent_dir: str | Path | None = None) -> ScriptedModel:
    """Start the scripted model (once per process) and point pi at it through PI_CODING_AGENT_DIR.

    Runs started afterwards from this process inherit the setting. Real models need none of this:
    name them in a preset's ``model:`` and give pi their keys as usual.
    """
    global _active
    if _active is None:
        _active = ScriptedModel().start()
    target = Path(agent_dir) if agent_dir else Path(tempfile.mkdtemp(prefix="nbsubagents-demo-agent-"))
    write_agent_dir(target, _active.url)
    os.environ["PI_CODING_AGENT_DIR"] = str(target)
    os.environ["PI_OFFLINE"] = "1"
    return _active


def copy_example_project(dest: str | Path) -> Path:
    """A fresh copy of the example project (presets and a few files) to delegate in."""
    dest = Path(dest)
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(EXAMPLE_PROJECT, dest)
    return dest


def main(argv: list[str] | None = None) -> int:
    import nbsubagents

    args = sys.argv[1:] if argv is None else argv
    where = Path(args[0]) if args else Path(".demo") / "project"
    project = copy_example_project(where).resolve()
    os.chdir(project)
    use_scripted_model(project / ".pi" / "demo-agent")
    print(f"Demo project: {project}\n(scripted demo model {DEMO_MODEL}: deterministic, not an AI)\n")
    print(nbsubagents.presets(), "\n")

    print("== One run: the scout reads the project ==")
    scout = nbsubagents.run("scout", "Look around.\nread README.md\nls src\nrun: python3 -c 'print(6*7)'")
    print(f"\nOutput of {scout.id}:\n{scout.output}\n")

    print("== Three runs in parallel, two at a time ==")
    runs = nbsubagents.run_parallel([
        {"preset": "scout", "task": "read src/inventory.py", "name": "reader"},
        {"preset": "scribe", "task": "write NOTES.md: pears are out of stock\\nreorder soon", "name": "writer"},
        {"preset": "scribe", "task": "read README.md\nedit README.md: tiny -> small", "name": "editor"},
    ], concurrency=2)
    for run in runs:
        print(f"\n{run.name} ({run.status}): {run.output}")
    print(f"\nArtifacts of every run: {project / '.pi' / 'subagents' / 'runs'}")
    failed = [r for r in [scout, *runs] if r.status != "completed"]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
