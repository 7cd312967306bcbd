"""binder/ (repo2docker): the files parse, name things that exist, and cover what the notebooks import."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
BINDER = REPO / "binder"


def environment() -> dict:
    data = yaml.safe_load((BINDER / "environment.yml").read_text())
    assert isinstance(data, dict) and isinstance(data.get("dependencies"), list)
    return data


def _name(spec: str) -> str:
    return re.split(r"[<>=!~ \[]", spec.strip(), maxsplit=1)[0].lower().replace("_", "-")


IMPORTED_AS = {"mlflow-skinny": "mlflow"}  # packages whose import name is not their own


def conda_names() -> set[str]:
    names = set()
    for dep in environment()["dependencies"]:
        if isinstance(dep, str):
            names.add(_name(dep))
        elif isinstance(dep, dict):
            names.update(_name(p) for p in dep.get("pip", []))
    return names


def test_environment_has_python_311_node_20_and_pip():
    deps = [d for d in environment()["dependencies"] if isinstance(d, str)]
    assert "python=3.11" in deps
    node = [d for d in deps if _name(d) == "nodejs"]
    assert len(node) == 1 and re.fullmatch(r"nodejs\s*>=\s*(\d+)", node[0]) and int(node[0].split(">=")[1]) >= 20
    assert "pip" in deps
    assert "conda-forge" in environment().get("channels", [])


def test_environment_covers_the_package_dependencies_and_what_the_notebooks_import():
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    needed = {_name(d) for d in project["dependencies"]} | {_name(d) for d in project["optional-dependencies"]["demo"]}
    assert needed - conda_names() == set()
    assert {"jupyterlab", "jupyterlab-widgets"} <= conda_names()  # the panels render in Binder's JupyterLab

    imported = set()
    for notebook in (REPO / "notebooks").glob("*.ipynb"):
        for cell in nbformat.read(notebook, as_version=4).cells:
            if cell.cell_type == "code":
                imported.update(re.findall(r"^\s*(?:import|from)\s+(\w+)", cell.source, re.M))
    third_party = {m for m in imported if m not in sys.stdlib_module_names and m != "nbsubagents"}
    provided = conda_names() | {IMPORTED_AS[n] for n in conda_names() if n in IMPORTED_AS}
    assert third_party <= provided, third_party - provided
    sources = " ".join(c.source for nb in (REPO / "notebooks").glob("*.ipynb")
                       for c in nbformat.read(nb, as_version=4).cells)
    if "runs_timeline(" in sources:  # the timeline extra is what runs_timeline() needs
        assert "matplotlib" in conda_names()


def test_post_build_is_an_executable_bash_script_that_installs_the_package_and_the_pinned_pi():
    script = BINDER / "postBuild"
    text = script.read_text()
    assert os.access(script, os.X_OK)
    assert text.startswith("#!/bin/bash\n") and "set -euo pipefail" in text
    subprocess.run(["bash", "-n", str(script)], check=True)
    commands = [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    pip = [c for c in commands if " pip install " in c]
    assert len(pip) == 1 and pip[0].endswith("-e .")  # repo2docker runs it from the repository root
    assert (REPO / "pyproject.toml").is_file()
    assert any(c.startswith("npm ci") for c in commands)  # installs exactly what package-lock.json pins
    assert (REPO / "package.json").is_file() and (REPO / "package-lock.json").is_file()
    assert "node_modules/.bin/pi" in text


def test_the_lock_pins_the_pi_that_package_json_names():
    import json
    wanted = json.loads((REPO / "package.json").read_text())["dependencies"]["@mariozechner/pi-coding-agent"]
    lock = json.loads((REPO / "package-lock.json").read_text())
    assert lock["packages"]["node_modules/@mariozechner/pi-coding-agent"]["version"] == wanted


def test_the_install_page_binder_link_opens_a_notebook_that_exists():
    readme = (REPO / "docs" / "user" / "install.md").read_text()
    links = re.findall(r"https://mybinder\.org/v2/gh/[^\s)>`]+", readme)
    assert links, "docs/user/install.md has no Binder link"
    for link in links:
        match = re.search(r"[?&]labpath=([^&\s)`]+)", link)
        assert match, link
        assert (REPO / match.group(1).replace("%2F", "/")).is_file(), link
    assert "binder/" in readme
