"""Where a harness's program is (its setting, the project, PATH), and pi's npm package.

Resolved on demand (not at import), so changing ``NBSUBAGENTS_PI`` or ``configure(pi=...)`` takes effect for the
next run.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from .._child import harnesses
from .._child.errors import NbSubagentsError
from .._child.harnesses import pi as pi_harness
from .._child.harnesses.pi import command as pi_command
from .._config import SPECS, Settings, current

__all__ = ["find_pi", "find_program", "install_pi", "newest_tested", "pi_command", "pi_package", "standing",
           "version_key", "PiPackage", "HarnessNotFoundError", "PiNotFoundError", "PI_PACKAGE", "PI_VERSION",
           "PI1_PACKAGE", "TESTED_PI"]

PI_PACKAGE = "@mariozechner/pi-coding-agent"   # the pi that runs on Node 20 (the package.json pin): its last version
PI_VERSION = "0.73.1"
PI1_PACKAGE = "@earendil-works/pi-coding-agent"  # pi 1.x (renamed at 1.0): Node >= 22.19
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
    def standing(self) -> str:
        """Where this version stands among the tested ones (``standing``)."""
        return standing(self.name, self.version)

    @property
    def tested(self) -> bool:
        """Whether this version is one the tests ran against, or between two of its package line."""
        return self.standing in ("tested", "between")


# The pi versions the pi-version tests (tests/e2e, marked pi_matrix) passed against, by package line, oldest first.
# The newest of each line is the one `make test` runs (package.json, pi1/package.json); 1.3.0 was pi1/'s pin before
# 1.6.0 and passed them again when 1.6.0 was pinned. A pi is placed by its line and the order of versions, never by
# an exact match: one newer than all of its line is "newer" (expected to work), and nothing suggests an older one.
TESTED_PI: tuple[tuple[str, str], ...] = ((PI_PACKAGE, PI_VERSION), (PI1_PACKAGE, "1.3.0"), (PI1_PACKAGE, "1.6.0"))
PI1_NODE = (22, 19)  # pi 1.x's engines.node: >= 22.19


def version_key(version: str) -> tuple[int, ...]:
    """``"1.6.0"`` -> ``(1, 6, 0)``: the leading numbers of a version (a pre-release or build tail is left out,
    ``"1.7.0-rc.1"`` -> ``(1, 7, 0)``); ``()`` when it starts with none."""
    numbers = re.match(r"v?(\d+(?:\.\d+)*)", version.strip())
    return tuple(int(part) for part in numbers[1].split(".")) if numbers else ()


def newest_tested(name: str | None = None) -> tuple[str, str]:
    """The newest tested ``(package, version)`` of the package line ``name`` (of all lines when None or unknown)."""
    line = [pair for pair in TESTED_PI if pair[0] == name] or list(TESTED_PI)
    return max(line, key=lambda pair: version_key(pair[1]))


def standing(name: str, version: str) -> str:
    """``tested`` (its major.minor is a tested one of its package line), ``between`` (between two tested versions
    of its line), ``newer`` (newer than every tested version of its line), ``older`` (older than all of them) or
    ``unknown`` (no version number). A package line the tests have not seen is placed among all tested versions."""
    key = version_key(version)[:2]
    line = [version_key(v)[:2] for n, v in TESTED_PI if n == name] or [version_key(v)[:2] for _, v in TESTED_PI]
    if not key:
        return "unknown"
    if key > max(line):
        return "newer"
    if key < min(line):
        return "older"
    return "tested" if key in line else "between"


def install_pi(node: tuple[int, ...] | None) -> str:
    """The npm command that installs the newest tested pi the ``node`` version found (None: none) runs: pi 1.x on
    Node >= 22.19 or with no node yet (Node 22 is what to install), else the last pi that runs on Node 20."""
    name, version = newest_tested(PI1_PACKAGE if node is None or node[:2] >= PI1_NODE else PI_PACKAGE)
    return f"npm install -g {name}@{version}"


def pi_package(pi: str) -> PiPackage | None:
    """The package.json above pi's real script whose name ends in ``pi-coding-agent``; None if there is none."""
    found = pi_harness.package(pi)
    if found is None:
        return None
    data, path = found
    engines = data.get("engines") if isinstance(data.get("engines"), dict) else {}
    return PiPackage(str(data["name"]), str(data.get("version", "?")), path, engines.get("node"))
