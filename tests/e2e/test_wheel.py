"""``pip install nbsubagents`` alone works: the wheel carries the example project and notebooks, and
``nbsubagents demo`` runs the tour from a fresh virtual environment (not from this checkout), with the
repository's pinned pi given through NBSUBAGENTS_PI; without pi it says how to get it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from helpers import PI, REPO, processes_inside

pytestmark = pytest.mark.slow  # builds a wheel and installs it with its dependencies (~30 s)


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "NBSUBAGENTS_PI", "NBSUBAGENTS_ROOT", "PI_CODING_AGENT_DIR",
                        "NBSUBAGENTS_DISPLAY")}
    return {**env, **extra}


def test_the_wheel_installs_into_a_fresh_venv_and_runs_the_demo_tour(tmp_path):
    wheels = tmp_path / "wheels"
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                            "-w", str(wheels), str(REPO)], capture_output=True, text=True, timeout=300,
                           stdin=subprocess.DEVNULL, cwd=tmp_path)
    assert build.returncode == 0, build.stderr[-3000:]
    (wheel,) = wheels.glob("nbsubagents-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for needed in ("nbsubagents/demo/_data/demo-project/.pi/subagents/scout.md",
                   "nbsubagents/demo/_data/demo-project/src/inventory.py",
                   "nbsubagents/demo/_data/notebooks/quickstart.ipynb",
                   # JupyterLab's extension: the prebuilt labextension, and the config that enables nbsubagents.lab
                   "nbsubagents-0.1.0.data/data/share/jupyter/labextensions/nbsubagents/package.json",
                   "nbsubagents-0.1.0.data/data/etc/jupyter/jupyter_server_config.d/nbsubagents.json"):
        assert needed in names, sorted(names)
    assert not [n for n in names if "__pycache__" in n or "/.pi/subagents/runs/" in n]

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120, cwd=tmp_path)
    install = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)],
                             capture_output=True, text=True, timeout=600, env=clean_env(), cwd=tmp_path,
                             stdin=subprocess.DEVNULL)
    assert install.returncode == 0, install.stderr[-3000:]
    where = subprocess.run([str(venv / "bin" / "python"), "-c",
                            "import nbsubagents, nbsubagents.demo as d; print(nbsubagents.__file__); "
                            "print(d.EXAMPLE_PROJECT); print(d.QUICKSTART)"],
                           capture_output=True, text=True, check=True, env=clean_env(), cwd=tmp_path).stdout.split()
    assert all(Path(p).is_relative_to(venv) for p in where), where  # nothing from this checkout
    assert Path(where[1], ".pi", "subagents", "scout.md").is_file() and Path(where[2]).is_file()

    tour = subprocess.run([str(venv / "bin" / "nbsubagents"), "demo", str(tmp_path / "tour")], capture_output=True,
                          text=True, timeout=600, env=clean_env(NBSUBAGENTS_PI=str(PI)), cwd=tmp_path,
                          stdin=subprocess.DEVNULL)
    assert tour.returncode == 0, tour.stdout[-3000:] + tour.stderr[-3000:]
    assert "== Three runs in parallel, two at a time ==" in tour.stdout and "Traceback" not in tour.stderr
    assert "✓ scout completed" in tour.stderr  # the progress, on stderr
    results = [json.loads(p.read_text()) for p in (tmp_path / "tour").glob(".pi/subagents/runs/*/result.json")]
    assert sorted(r["status"] for r in results) == ["completed"] * 4
    assert processes_inside(tmp_path) == []

    # Without pi anywhere it can look: a message that says how to get it, no traceback.
    nopi = subprocess.run([str(venv / "bin" / "nbsubagents"), "demo", str(tmp_path / "nopi")], capture_output=True,
                          text=True, timeout=120, env=clean_env(PATH=f"{venv / 'bin'}:/usr/bin:/bin"),
                          cwd=tmp_path, stdin=subprocess.DEVNULL)
    assert nopi.returncode == 1 and "Traceback" not in nopi.stderr
    assert "npm install @mariozechner/pi-coding-agent@" in nopi.stderr and "NBSUBAGENTS_PI" in nopi.stderr
