"""A newcomer's first run: ``nbsubagents init --offline`` in an empty folder, then the README's first example runs
unchanged there, on the real pi and the scripted model, with nothing else set up."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from helpers import PI

from nbsubagents._pi.offline import OFFLINE_MODEL
from nbsubagents._project_init import STARTER_MODEL

FIRST_RUN = 'import nbsubagents; run = nbsubagents.run("scout", "ls ."); print(run.output)'


def test_init_offline_then_the_first_example_runs_in_an_empty_folder(tmp_path):
    folder = tmp_path / "newcomer"
    folder.mkdir()
    home = tmp_path / "home"  # a machine where pi was never set up: no agent dir, no models, no keys
    env = {key: value for key, value in os.environ.items()
           if not key.startswith("PI_") and key not in ("NBSUBAGENTS_ROOT", "NBSUBAGENTS_TEST_PI")
           and not key.endswith("_API_KEY")}
    env.update(HOME=str(home), XDG_CACHE_HOME=str(tmp_path / "cache"), NBSUBAGENTS_PI=str(PI))
    # NBSUBAGENTS_SCRIPTED_DIR stays: the detached scripted server is this test session's, stopped at its end.

    made = subprocess.run([sys.executable, "-m", "nbsubagents._cli", "init", "--offline", str(folder)], env=env,
                          capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    assert "made  .pi/settings.json" in made.stdout and 'nbsubagents.run("scout", "ls .")' in made.stdout
    assert 'Remove "offline" from .pi/settings.json' in made.stdout  # the file it made, by its name
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    (folder / "notes.txt").write_text("first notes\n")

    first = subprocess.run([sys.executable, "-c", FIRST_RUN], cwd=folder, env=env, capture_output=True,
                           text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    assert first.stdout.splitlines() == ["Done. 1 step:", "- ls .: .git/, .gitignore, .pi/, notes.txt"]
    assert "offline model" in first.stderr  # the run's summary says which model answered

    (run_dir,) = (folder / ".pi" / "subagents" / "runs").iterdir()
    meta = json.loads((run_dir / "meta.json").read_text())
    assert (meta["requestedModel"], meta["requestedModelSource"], meta["resolvedModel"], meta["offline"]) == (
        STARTER_MODEL, "preset", OFFLINE_MODEL, True)
    assert not (home / ".pi").exists()  # the offline setting alone: no agent dir of the user's was made or read
    assert json.loads((run_dir / "result.json").read_text())["status"] == "completed"

    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=folder,
                            capture_output=True, text=True, check=True).stdout.split("\n")
    assert sorted(line[3:] for line in status if line) == [
        ".gitignore", ".pi/settings.json", ".pi/subagents/editor.md", ".pi/subagents/reviewer.md",
        ".pi/subagents/scout.md", "notes.txt"]  # what a person commits; the run and the registry are ignored
