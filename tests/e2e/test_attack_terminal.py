"""A hostile child against the person's terminal (issue 53 item 5): what a child writes (its text, its questions, the
commands it asks approval for) prints in a script with every control character escaped, so a clipboard write
(OSC 52), a window title (OSC 0), a cleared screen (ESC[2J), a C1 control or a bidi override never reaches the
terminal raw, and an approval line cannot be made to look harmless."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from faults import files_of, model, proj, record  # noqa: F401 (fixtures)
from helpers import REPO

pytestmark = pytest.mark.faults

# What a terminal obeys: ESC (OSC 52 clipboard, OSC 0 title, ESC[2J), BEL, a C1 CSI (U+009B) and a bidi override.
HOSTILE = ("\x1b]52;c;ZXZpbA==\x07", "\x1b]0;owned\x07", "\x1b[2J", "\x9b31m", "\u202e")
RAW = ("\x1b", "\x07", "\x9b", "\u202e")
SCRIPT = """
import json, sys
import nbsubagents
nbsubagents.configure(question_timeout=3)
run = nbsubagents.run("scout", json.load(open(sys.argv[1])), ask=True, approval={"tools": ["bash"]}, timeout=120)
print(repr(run))
"""


def test_a_scripts_output_shows_a_childs_control_characters_escaped(proj, tmp_path):
    before = files_of(proj)
    said = "".join(HOSTILE)
    task = (f"say: model text {said} end\n"
            f"ask: Which one {said}? [a{said} | b]\n"
            f"run: echo harmless {said}\n"
            f"say: final words {said}")
    (tmp_path / "task.json").write_text(json.dumps(task))
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / "task.json")], cwd=proj,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, timeout=300)
    out, err = done.stdout.decode(errors="replace"), done.stderr.decode(errors="replace")
    assert done.returncode == 0, err
    shown = out + err
    for line in ("model text \\x1b]52;c;ZXZpbA==\\x07\\x1b]0;owned\\x07\\x1b[2J\\x9b31m\\u202e end",
                 "Asks: Which one \\x1b]52;", "Asks for approval: Allow bash? — echo harmless \\x1b]52;",
                 "is waiting for an approval: Allow bash?: echo harmless \\x1b]52;", "final words \\x1b]52;"):
        assert line in shown, shown  # the child's words are there, escaped
    assert [c for c in RAW if c in shown] == [], shown  # and no control character reaches the terminal
    assert record("control characters in a script", proj, re.findall(r"\d{8}-\d{6}-[0-9a-f]{6}", out)[:1],
                  "every line a child wrote printed escaped", before=before) == []
