"""The console script, as a person runs it."""

from __future__ import annotations

import os
import subprocess
import sys


def nbsubagents_cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "nbsubagents.cli", *args], capture_output=True, text=True,
                          timeout=120, env=env or os.environ.copy(), stdin=subprocess.DEVNULL)


def test_doctor_reports_pi_presets_and_models(project):
    proc = nbsubagents_cli("doctor")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "✓ pi" in out and "0.73.1" in out
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
    assert "✗ presets" in proc.stdout and "broken.md" in proc.stdout
