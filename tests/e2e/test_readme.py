"""The README's first steps, run as a newcomer runs them: its code blocks marked ``<!-- first-run -->`` are taken
out of README.md (not copied here) and run as written, in order, in a fresh empty folder, with an environment
that points at no scripted model: what the README's offline set-up does must be enough.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

from helpers import REPO, processes_inside

LIMIT = 300.0  # seconds for all of it: generous, a newcomer's first minutes


def marked_blocks(text: str, marker: str) -> list[tuple[str, str]]:
    """The fenced blocks right below a ``<!-- MARKER -->`` line, as (the fence's info string, the code), in order."""
    return re.findall(rf"<!-- {re.escape(marker)} -->\s*\n```([^\n]*)\n(.*?)\n```", text, re.S)


def first_run_blocks(text: str) -> list[tuple[str, str]]:
    return marked_blocks(text, "first-run")


def newcomer_env(tmp_path: Path) -> dict[str, str]:
    """This environment without what points pi at a scripted model or a project; pi's model list cached in
    ``tmp_path``, not in the machine's cache."""
    env = {name: value for name, value in os.environ.items()
           if name not in ("PI_CODING_AGENT_DIR", "PI_OFFLINE", "NBSUBAGENTS_PI", "NBSUBAGENTS_ROOT",
                           "NBSUBAGENTS_DISPLAY")}
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    return env


def test_first_run_blocks_are_the_marked_fenced_blocks_in_order():
    text = "x\n<!-- first-run -->\n```bash\nnbsubagents init\n```\n```python\nskipped\n```\n<!-- first-run -->\n```python\nprint(1)\n```\n"
    assert first_run_blocks(text) == [("bash", "nbsubagents init"), ("python", "print(1)")]


def console_argv(line: str) -> list[str]:
    """A shell line as argv; its program taken from next to this Python (the venv's console scripts) first."""
    argv = shlex.split(line, comments=True)
    beside = Path(sys.executable).parent / argv[0]
    program = str(beside) if beside.exists() else shutil.which(argv[0])
    assert program, f"the README runs {argv[0]!r}, which is neither next to {sys.executable} nor on PATH"
    return [program, *argv[1:]]


def test_the_readme_first_run_works_as_written_in_an_empty_folder(tmp_path):
    blocks = first_run_blocks((REPO / "README.md").read_text())
    assert [kind for kind, _ in blocks] == ["bash", "python"], blocks
    folder = tmp_path / "my-project"
    folder.mkdir()
    env = newcomer_env(tmp_path)
    started = time.monotonic()
    outputs = []
    for kind, code in blocks:
        commands = ([console_argv(line) for line in code.splitlines() if shlex.split(line, comments=True)]
                    if kind == "bash" else [[sys.executable, "-c", code]])
        for argv in commands:
            left = LIMIT - (time.monotonic() - started)
            done = subprocess.run(argv, cwd=folder, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                                  text=True, timeout=max(left, 1))
            assert done.returncode == 0, f"{argv} failed:\n{done.stdout}\n{done.stderr}"
            outputs.append(done.stdout)
    print(f"the README's first run took {time.monotonic() - started:.1f}s")
    assert "completed" in outputs[-1]
    assert ".pi" in outputs[-1], outputs[-1]  # the listing of the folder, with what init made
    results = [json.loads(path.read_text()) for path in folder.glob(".pi/subagents/runs/*/result.json")]
    assert [result["status"] for result in results] == ["completed"]
    deadline = time.monotonic() + 10
    while processes_inside(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processes_inside(tmp_path) == []
