"""Where nobody can answer (a script: ``question_timeout`` 0 unless set), a run that may ask or needs approval says
so before it starts, and each question is logged as nobody to ask, not as a reply that did not come in time (issue
55 item 3). Each test runs a real script (real pi, the scripted model) as its own process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import nbformat
import pytest
from nbclient import NotebookClient

NOBODY_ANSWER = "No answer: nobody to ask here (set question_timeout or answer with `nbsubagents answer …`)"
NOBODY_APPROVAL = "Denied by the policy: nobody to ask here (set question_timeout or answer with `nbsubagents approve …`)"
SAID_BEFORE = "nobody to ask here (question_timeout is 0 where no person is at a notebook"

SCRIPT = textwrap.dedent("""
    import json, sys
    import nbsubagents

    if sys.argv[1] != "unset":
        nbsubagents.configure(question_timeout=float(sys.argv[1]))
    asks = nbsubagents.start("scout", "ask: Which file? [README.md | src/app.py]\\nread src/app.py", ask=True,
                             name="asks")
    question = asks.wait_for_question(timeout=60)
    if question is not None:
        asks.answer("src/app.py")
    asks.wait()
    guarded = nbsubagents.start("scout", "run: echo guarded", approval=["bash"], name="guarded")
    if guarded.wait_for_question(timeout=60) is not None:
        guarded.approve()
    guarded.wait()
    print(json.dumps({"asked": question is not None, "output": asks.output + guarded.output,
                      "by": [q["by"] for r in (asks, guarded) for q in r.result["questions"]],
                      "transcripts": asks.transcript + guarded.transcript,
                      "notes": [asks.record.notes, guarded.record.notes]}))
""")


def script(project, argument: str) -> tuple[dict, str]:
    path = project / "questions.py"
    path.write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if k != "NBSUBAGENTS_DISPLAY"}
    proc = subprocess.run([sys.executable, str(path), argument], capture_output=True, text=True, timeout=240,
                          env=env, stdin=subprocess.DEVNULL, cwd=project)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), proc.stderr


def test_a_script_says_before_its_runs_start_that_nobody_can_answer_and_logs_each_question_so(project):
    found, stderr = script(project, "unset")
    assert not found["asked"] and found["by"] == ["nobody", "nobody"]
    for text in (stderr, found["transcripts"]):
        assert NOBODY_ANSWER in text and NOBODY_APPROVAL in text, text
        assert "no reply in time" not in text
    assert "No answer (nobody is there to answer questions in this run)" in found["output"]  # what its model read
    assert "did not reply in time" not in found["output"]
    lines = stderr.splitlines()
    said = [i for i, line in enumerate(lines) if line.startswith(SAID_BEFORE)]
    assert len(said) == 2, stderr  # one line per run, before its first question
    assert said[0] < lines.index("Asks: Which file? — [README.md | src/app.py]")
    assert said[1] < lines.index("Asks for approval: Allow bash? — echo guarded")
    asks_note, guarded_note = (notes[-1] for notes in found["notes"])  # in each run's record too
    assert "its questions get no answer at once" in asks_note
    assert "its approvals get the policy's deny at once" in guarded_note


def test_with_question_timeout_set_a_script_answers_its_runs(project):
    found, stderr = script(project, "60")
    assert found["asked"] and "- ask: src/app.py" in found["output"] and "guarded" in found["output"]
    assert found["by"] == ["person", "person"] and SAID_BEFORE not in stderr


@pytest.mark.notebook
def test_a_notebook_executed_headless_says_nobody_can_answer(project):
    """As ``jupyter execute`` and papermill run a notebook (nbclient, no person at it): the run says so before it
    starts, and its question is logged as nobody to ask."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "import nbsubagents\n"
        "run = nbsubagents.run('scout', 'ask: Which file? [README.md | src/app.py]\\nls src', ask=True, show=False)\n"
        "print(run.record.question_timeout, run.record.notes)\n"
        "print(run.transcript)")])
    NotebookClient(nb, kernel_name="python3", timeout=240, startup_timeout=120,
                   resources={"metadata": {"path": str(project)}}).execute()
    printed = "".join(o.get("text", "") for o in nb.cells[0].outputs if o.output_type == "stream")
    assert printed.startswith(f"0.0 ['{SAID_BEFORE}"), printed
    assert NOBODY_ANSWER in printed and "no reply in time" not in printed
