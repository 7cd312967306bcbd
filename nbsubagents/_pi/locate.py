"""Where a harness's program is (its setting, the project, PATH), and pi's npm package.

Resolved on demand (not at import), so changing ``NBSUBAGENTS_PI`` or ``configure(pi=...)`` takes effect for the
next run.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from .._child import harnesses
from .._child.errors import NbSubagentsError
from .._child.harnesses import pi as pi_harness
from .._child.harnesses.pi import command as pi_command
from .._config import SPECS, Settings, current

__all__ = ["find_pi", "find_program", "pi_command", "pi_package", "PiPackage", "HarnessNotFoundError",
           "PiNotFoundError", "PI_PACKAGE", "PI_VERSION", "TESTED_PI"]

PI_PACKAGE = "@mariozechner/pi-coding-agent"
PI_VERSION = "0.73.1"
PACKAGE_ROOT = Path(__file__).resolve().parent.parent.parent  # a checkout's node_modules is looked at last


class HarnessNotFoundError(NbSubagentsError):
    """A harness's program is not where its setting says, or nowhere."""


PiNotFoundError = HarnessNotFoundError  # the default harness's


def find_pi(cwd: Path | None = None) -> str:
    """The default harness's program (pi): see ``find_program``."""
    return find_program(harnesses.get(harnesses.DEFAULT), cwd)


def find_program(harness: harnesses.Harness, cwd: Path | None = None, settings: Settings | None = None) -> str:
    """The program of ``harness``: its setting when there is one (pi's: ``configure(pi=...)``, ``NBSUBAGENTS_PI``
    or a settings file's ``pi``), else ``NBSUBAGENTS_<PROGRAM>``; else ``harnesses/node_modules/.bin`` or
    ``node_modules/.bin`` of the working folder or a parent (this checkout's last), then PATH. ``settings``: the
    call's (None: read now)."""
    program = harness.PROGRAM
    variable = f"NBSUBAGENTS_{program.upper()}"
    in_force = settings or current(cwd)
    explicit, source = in_force.source(program) if program in SPECS else (os.environ.get(variable), variable)
    if explicit:
        if not Path(str(explicit)).is_file():
            where = {"configure()": f"configure({program}=...)", variable: variable}.get(
                source, f'"{program}" in the settings file {source}')
            raise HarnessNotFoundError(f"{program} not found at {explicit} (from {where}). Point it at an existing "
                                       f"{program}, or unset it to search the project and PATH.")
        return str(explicit)
    start = Path(cwd or Path.cwd()).resolve()
    for base in (start, *start.parents, PACKAGE_ROOT):
        for folder in (base / "harnesses" / "node_modules" / ".bin", base / "node_modules" / ".bin"):
            if (folder / program).is_file():
                return str(folder / program)
    on_path = shutil.which(program)
    if on_path:
        return on_path
    raise HarnessNotFoundError(
        f"{program} (the {harness.NAME} harness) was not found: looked at {variable}, harnesses/node_modules/.bin "
        f"and node_modules/.bin of the project and its parents, and PATH. Install it with "
        f"`npm install {harness.PACKAGE}` in the project (or globally with -g), or set {variable} to its path.")


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
    found = pi_harness.package(pi)
    if found is None:
        return None
    data, path = found
    engines = data.get("engines") if isinstance(data.get("engines"), dict) else {}
    return PiPackage(str(data["name"]), str(data.get("version", "?")), path, engines.get("node"))
