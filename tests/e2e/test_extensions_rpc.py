"""The extensions nbsubagents ships (``pi_extensions/ask.js``, ``approve.js``) in the real pi's RPC mode.

Each test starts ``pi --mode rpc --extension ...`` itself (no supervisor): it sends the task as the first ``prompt``,
reads pi's stdout, answers each ``extension_ui_request`` as a notebook would, and checks what reached the scripted
model (its recorded requests: the tool results the model saw). Marked pi_matrix: run on both pinned pi versions.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
from pathlib import Path
from typing import Any, Callable

import pytest
from helpers import PI

from nbsubagents._pi import pi_command
from nbsubagents._child.harnesses.pi import APPROVE_EXTENSION, ASK_EXTENSION
from nbsubagents._child.harnesses.pi import write_agent_dir

pytestmark = pytest.mark.pi_matrix

WAIT = 60.0  # seconds for one record of pi's; a hang fails the test instead of blocking it
NO_ANSWER = "No answer (the person did not reply in time); go on with your best judgement."


class RpcPi:
    """One ``pi --mode rpc`` child: records in, commands out; ended (SIGTERM, then SIGKILL) by ``close``."""

    def __init__(self, cwd: Path, agent: Path, extensions: list[Path], env: dict[str, str] | None = None) -> None:
        argv = [*pi_command(str(PI)), "--mode", "rpc", "--no-session", "--model", "demo/scripted"]
        for path in extensions:
            argv += ["--extension", str(path)]
        self.proc = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL,
                                     env={**os.environ, "PI_CODING_AGENT_DIR": str(agent), "PI_OFFLINE": "1",
                                          **(env or {})})
        self.records: queue.Queue[dict[str, Any] | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                self.records.put(json.loads(line))
            except ValueError:
                continue  # not a record
        self.records.put(None)

    def send(self, command: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(command) + "\n").encode())
        self.proc.stdin.flush()

    def converse(self, task: str, answer: Callable[[dict[str, Any]], dict[str, Any]]) -> list[dict[str, Any]]:
        """Send ``task``, answer every dialog with ``answer(request)`` (the response's fields), return the dialogs
        asked, once the agent has ended."""
        self.send({"type": "prompt", "message": task})
        dialogs = []
        while True:
            record = self.records.get(timeout=WAIT)
            assert record is not None, "pi exited before the agent ended"
            kind = record.get("type")
            if kind == "response" and record.get("success") is False:
                raise AssertionError(f"pi refused a command: {record}")
            if kind == "extension_ui_request" and record.get("method") in ("input", "select", "confirm", "editor"):
                dialogs.append(record)
                self.send({"type": "extension_ui_response", "id": record["id"], **answer(record)})
            elif kind == "agent_end":
                return dialogs

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()


@pytest.fixture
def workdir(tmp_path, scripted):
    """A folder to work in (a README and src/) and pi's agent dir naming the scripted model."""
    work = tmp_path / "work"
    (work / "src").mkdir(parents=True)
    (work / "README.md").write_text("# Demo\n")
    write_agent_dir(tmp_path / "agent", scripted.url)
    return work


@pytest.fixture
def start_pi(workdir, tmp_path):
    started: list[RpcPi] = []

    def start(*extensions: Path, env: dict[str, str] | None = None) -> RpcPi:
        child = RpcPi(workdir, tmp_path / "agent", list(extensions), env)
        started.append(child)
        return child

    yield start
    for child in started:
        child.close()


def tool_results(scripted) -> list[str]:
    """The text of every tool result in the last request the scripted model received."""
    messages = scripted.requests[-1]["messages"]
    return [m["content"] if isinstance(m["content"], str) else "".join(p.get("text", "") for p in m["content"])
            for m in messages if m.get("role") == "tool"]


def approval(**policy: Any) -> dict[str, str]:
    return {"NBSUBAGENTS_APPROVAL": json.dumps({"allow": [], "inside": [], "otherwise": "deny", **policy})}


def test_the_ask_tool_puts_the_question_to_the_notebook_and_the_model_gets_the_answer(start_pi, scripted):
    pi = start_pi(ASK_EXTENSION)
    dialogs = pi.converse("ask: Which file should I read?\nask: Which format? [json | csv]",
                          lambda request: {"value": "README.md" if request["method"] == "input" else "csv"})
    assert [(d["method"], d["title"]) for d in dialogs] == [("input", "Which file should I read?"),
                                                           ("select", "Which format?")]
    assert dialogs[1]["options"] == ["json", "csv"]
    assert tool_results(scripted) == ["README.md", "csv"]
    assert "ask" in [t["function"]["name"] for t in scripted.requests[0]["tools"]]  # declared to the model


def test_a_question_nobody_answers_tells_the_model_to_go_on(start_pi, scripted):
    pi = start_pi(ASK_EXTENSION)
    dialogs = pi.converse("ask: Shall I go on?", lambda request: {"cancelled": True})
    assert len(dialogs) == 1
    assert tool_results(scripted) == [NO_ANSWER]


def test_a_bash_command_outside_the_allowlist_asks_and_a_denial_blocks_it(start_pi, scripted, workdir):
    pi = start_pi(APPROVE_EXTENSION, env=approval(tools=["bash"], allow=["ls *", "echo *"]))
    dialogs = pi.converse("run: touch made.txt\nrun: echo fine", lambda request: {"confirmed": False})
    assert [(d["method"], d["title"], d["message"]) for d in dialogs] == [
        ("confirm", "Allow bash?", "touch made.txt")]  # echo matches the allowlist: not asked
    denied, allowed = tool_results(scripted)
    assert denied.startswith("Denied by the person in the notebook")
    assert not (workdir / "made.txt").exists()
    assert allowed.strip() == "fine"


def test_an_allowed_approval_lets_the_call_run(start_pi, scripted, workdir):
    pi = start_pi(APPROVE_EXTENSION, env=approval(tools=["bash"], allow=["ls *"]))
    dialogs = pi.converse("run: ls README.md && touch made.txt", lambda request: {"confirmed": True})
    assert [d["message"] for d in dialogs] == ["ls README.md && touch made.txt"]  # its second command: not allowed
    assert (workdir / "made.txt").exists()
    assert tool_results(scripted) == ["README.md\n"]


def test_writes_inside_the_allowed_folder_need_no_approval(start_pi, scripted, workdir):
    pi = start_pi(APPROVE_EXTENSION, env=approval(tools=["write", "edit"], inside=["src"]))
    dialogs = pi.converse("write src/ok.py: x = 1\nwrite notes.md: hello", lambda request: {"confirmed": False})
    assert [(d["title"], d["message"]) for d in dialogs] == [("Allow write?", "notes.md")]
    assert (workdir / "src" / "ok.py").read_text() == "x = 1\n"
    assert not (workdir / "notes.md").exists()


def test_both_extensions_together_never_ask_approval_for_a_question(start_pi, scripted):
    pi = start_pi(ASK_EXTENSION, APPROVE_EXTENSION, env=approval(tools=["*"]))
    dialogs = pi.converse("ask: Ready?\nread README.md",
                          lambda request: {"value": "yes"} if request["method"] == "input" else {"confirmed": True})
    assert [d["method"] for d in dialogs] == ["input", "confirm"]
    assert dialogs[1]["title"] == "Allow read?" and dialogs[1]["message"] == "README.md"
    assert tool_results(scripted) == ["yes", "# Demo\n"]


def test_an_approval_policy_that_cannot_be_read_asks_for_every_call(start_pi, scripted):
    pi = start_pi(APPROVE_EXTENSION, env={"NBSUBAGENTS_APPROVAL": "bash"})
    dialogs = pi.converse("read README.md", lambda request: {"confirmed": False})
    assert [d["title"] for d in dialogs] == ["Allow read?"]
    assert tool_results(scripted)[0].startswith("Denied by the person in the notebook")


@pytest.mark.parametrize("otherwise", ["allow", "deny"])
def test_without_dialogs_print_mode_follows_the_policy(workdir, tmp_path, scripted, otherwise):
    """``pi -p`` has no UI to ask with: the policy's ``otherwise`` decides, and says so."""
    argv = [*pi_command(str(PI)), "--mode", "json", "-p", "--no-session", "--model", "demo/scripted",
            "--extension", str(APPROVE_EXTENSION), "run: touch made.txt"]
    env = {**os.environ, "PI_CODING_AGENT_DIR": str(tmp_path / "agent"), "PI_OFFLINE": "1",
           **approval(tools=["bash"], otherwise=otherwise)}
    subprocess.run(argv, cwd=workdir, env=env, stdin=subprocess.DEVNULL, capture_output=True, timeout=WAIT,
                   check=True)
    assert (workdir / "made.txt").exists() == (otherwise == "allow")
    if otherwise == "deny":
        assert tool_results(scripted) == ["Denied by the run's approval policy (there was no one to ask)"]
