"""The user pages' examples run as written in a folder made by ``nbsubagents init --offline`` (issue 55, item 11).

The README test's convention and machinery (``test_readme``) over ``docs/user/*.md``: a block whose fence sits right
below a ``<!-- as-written -->`` line is run. A page's Python blocks (``python`` fences and MyST ``{code-cell}``
cells, magics included) run in order in one IPython shell of one process, as a reader's notebook runs them; its
``bash`` blocks run line by line as commands, in their place. Each page gets a fresh folder made by ``nbsubagents
init --offline``, the environment the README test gives a newcomer, and a home of its own (a global preset an
example writes lands there). A page passes when its blocks raise nothing and every run they made completed
without a failed tool call, as the page shows them.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import time

import pytest
from helpers import REPO, processes_inside
from test_readme import console_argv, marked_blocks, newcomer_env

MARKER = "as-written"
PAGES = {page.name: page.read_text() for page in sorted((REPO / "docs" / "user").glob("*.md"))}
CELL = "{code-cell} ipython3"
# One process per page: the blocks run in an IPython shell there; a failing block ends it, its traceback shown.
RUNNER = r"""
import json, subprocess, sys
from IPython.core.interactiveshell import InteractiveShell

shell = InteractiveShell.instance()
for number, (code, commands) in enumerate(json.load(sys.stdin), 1):
    print(f"--- block {number}", flush=True)
    for argv in commands or ():
        if subprocess.run(argv).returncode:
            sys.exit(f"block {number}: {argv} failed")
    if commands is None and not shell.run_cell(code, store_history=False).success:
        sys.exit(f"block {number} failed:\n{code}")
"""


def not_as_shown(folder) -> list[str]:
    """The runs an example made that did not end as the page shows them: each completes, and none of its tool
    calls fails (a file the folder does not have, a tool its preset lacks)."""
    wrong = []
    for run_dir in sorted((folder / ".pi" / "subagents" / "runs").glob("*")):
        result = json.loads((run_dir / "result.json").read_text()) if (run_dir / "result.json").exists() else {}
        events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()
                  if line.strip()] if (run_dir / "events.jsonl").exists() else []
        failed = [f"{e.get('name')}: {str(e.get('text'))[:80]}" for e in events
                  if e.get("type") == "tool_result" and e.get("isError")
                  and not str(e.get("text")).startswith("Denied by the person")]  # a Deny the page shows
        if result.get("status") != "completed" or failed:
            wrong.append(f"{run_dir.name}: {result.get('status')} {result.get('errorMessage') or ''} {failed}")
    return wrong


def cell_code(kind: str, code: str) -> str:
    """A block's code: a MyST cell's option lines (``:tags: ...``) left out."""
    lines = code.splitlines()
    while kind == CELL and lines and lines[0].startswith(":"):
        lines.pop(0)
    return "\n".join(lines)


def test_every_visible_notebook_cell_of_the_user_pages_is_marked():
    cells = [(name, body) for name, text in PAGES.items()
             for body in re.findall(r"```\{code-cell\} ipython3\n(.*?)\n```", text, re.S)
             if "remove-cell" not in body.split("\n", 1)[0]]
    marked = {(name, code) for name, text in PAGES.items() for kind, code in marked_blocks(text, MARKER)}
    left = [(name, body.splitlines()[0]) for name, body in cells if (name, body) not in marked]
    assert left == []


@pytest.mark.parametrize("page", [name for name, text in PAGES.items() if marked_blocks(text, MARKER)])
def test_the_marked_examples_of_a_user_page_run_as_written_in_an_init_offline_folder(page, tmp_path):
    blocks = marked_blocks(PAGES[page], MARKER)
    assert {kind for kind, _ in blocks} <= {"python", "bash", CELL}, blocks
    folder = tmp_path / "project"
    folder.mkdir()
    (tmp_path / "home").mkdir()  # a newcomer has a home (pi keeps its agent folder there)
    env = {**newcomer_env(tmp_path), "HOME": str(tmp_path / "home")}
    made = subprocess.run(console_argv("nbsubagents init --offline"), cwd=folder, env=env, capture_output=True,
                          text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    plan = [(cell_code(kind, code), [console_argv(line) for line in code.splitlines()
                                     if shlex.split(line, comments=True)] if kind == "bash" else None)
            for kind, code in blocks]
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", RUNNER], cwd=folder, env=env, input=json.dumps(plan),
                          capture_output=True, text=True, timeout=300)
    print(f"{page}: {len(blocks)} blocks in {time.monotonic() - started:.1f}s")
    assert done.returncode == 0, f"{page}:\n{done.stdout[-6000:]}\n{done.stderr[-3000:]}"
    assert not_as_shown(folder) == [], done.stdout[-6000:]
    deadline = time.monotonic() + 10
    while processes_inside(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processes_inside(tmp_path) == []
