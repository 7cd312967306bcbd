"""A harness a third party adds: one module and an entry point in the group ``nbsubagents.harnesses``.

The package here is a real distribution on ``sys.path`` (a ``.dist-info`` with ``entry_points.txt``), found by
``importlib.metadata`` as an installed package's would be; its program is a script that answers in Claude Code's
stream-json. The run goes through the product's own path: the call, preparation, the supervisor, the registry.
"""

from __future__ import annotations

import os
import sys
import textwrap

import pytest

import nbsubagents
from nbsubagents._child import harnesses

MODULE = '''
"""echo-agent: a harness that repeats its task, in Claude Code's stream-json."""
from nbsubagents.harnesses import Stream, claude_code as _claude

NAME, PROGRAM, PACKAGE = "echo-agent", "echoagent", "echo-agent"
REFUSES = {"ask": "echo-agent cannot ask the notebook a question"}
TASK_ON_STDIN, ABORT_GRACE, LISTS_MODELS = True, 0.0, False
WRITES: dict = {}
Adapter = _claude.Adapter

def command(program): return [program]
def build(run): return [run.program, "--say", run.system_prompt or ""], {"ECHO_RUN_DIR": run.run_dir}
def left_out(run): return []
def keys(record, env): return ()  # it needs no key
def continues(run_dir, record, result): return None
def relocate(run_dir, cwd): pass
def offline_env(url, folder, models): return {}
def session(run_dir, record): return Stream(Adapter())
def version(program): return "echo-agent 1.0"
'''

PROGRAM = '''#!{python}
import json, sys
task = sys.stdin.read().strip().splitlines()[0]
for record in ({{"type": "system", "subtype": "init", "session_id": "e1", "model": "echo"}},
               {{"type": "assistant", "message": {{"id": "m1", "model": "echo",
                 "content": [{{"type": "text", "text": "echo: " + task}}]}}}},
               {{"type": "result", "subtype": "success", "is_error": False, "total_cost_usd": 0.25,
                 "num_turns": 1, "usage": {{"input_tokens": 3, "output_tokens": 2}}}}):
    print(json.dumps(record), flush=True)
'''


def install_plugin(base, monkeypatch):
    """echo_harness.py and its distribution's entry point, on sys.path (here and in the supervisor's process)."""
    (base / "echo_harness.py").write_text(textwrap.dedent(MODULE))
    info = base / "echo_harness-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: echo-harness\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[{harnesses.ENTRY_POINTS}]\necho-agent = echo_harness\n")
    program = base / "echoagent"
    program.write_text(PROGRAM.format(python=sys.executable))
    program.chmod(0o755)
    monkeypatch.syspath_prepend(str(base))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(base), os.environ.get("PYTHONPATH")])))
    monkeypatch.setenv("NBSUBAGENTS_ECHOAGENT", str(program))


def test_a_harness_a_package_registers_runs_like_the_built_in_ones(project, tmp_path, monkeypatch):
    assert "echo-agent" not in harnesses.names()
    (tmp_path / "site").mkdir()
    install_plugin(tmp_path / "site", monkeypatch)
    assert harnesses.names()[-1] == "echo-agent" and harnesses.get("echo-agent").NAME == "echo-agent"

    run = nbsubagents.run("scout", "hello from the notebook", harness="echo-agent", show=False)
    assert run.status == "completed", run.error
    assert run.output == "echo: hello from the notebook"
    assert run.harness == "echo-agent" and run.record.argv[1] == "--say"
    assert run.record.env["ECHO_RUN_DIR"] == str(run.dir)
    assert run.result["usage"]["cost"] == 0.25  # its own end record's total wins, as Claude Code's does
    assert nbsubagents.runs(harness="echo-agent")["run_id"].tolist() == [run.id]
    with pytest.raises(nbsubagents.NbSubagentsError, match="The echo-agent harness cannot honour ask \\(set by the "
                       "call\\): echo-agent cannot ask the notebook a question"):
        nbsubagents.run("scout", "a question?", harness="echo-agent", ask=True, show=False)
