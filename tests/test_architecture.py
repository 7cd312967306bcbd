"""The package's layering, checked on its source: each rule fails the moment a module breaks it.

- ``child/`` (what runs outside the kernel) imports only the standard library and itself;
- ``registry/`` (storage) never imports ``lifecycle/`` or ``ui/``;
- no module imports another module's ``_private`` name, nor reaches one through an imported module;
- ``import nbsubagents`` loads no IPython, ipywidgets or pandas, and the supervisor loads nothing outside
  ``child/``.

Imports are read from the syntax tree (also those inside functions), so a lazy import counts too.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import nbsubagents

PACKAGE = Path(nbsubagents.__file__).resolve().parent


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(source: str, module: str, is_package: bool) -> list[tuple[str, list[str], int]]:
    """(absolute module imported, names taken from it, line) for every import of ``source``."""
    found = []
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(alias.name, [], node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            names = [alias.name for alias in node.names]
            found.append((target, names, node.lineno))
            if node.level and not node.module:  # from . import x: x may be a module
                found += [(f"{target}.{name}", [], node.lineno) for name in names]
    return found


def _sources() -> list[tuple[str, Path, str]]:
    return [(_module_name(p), p, p.read_text(encoding="utf-8")) for p in sorted(PACKAGE.rglob("*.py"))]


def _is_stdlib(name: str) -> bool:
    return name.split(".")[0] in sys.stdlib_module_names


def child_violations(module: str, source: str, is_package: bool = False) -> list[str]:
    bad = []
    for target, _names, line in _imports(source, module, is_package):
        if target == "nbsubagents" or target.startswith("nbsubagents.child") or _is_stdlib(target):
            continue
        if target.startswith("nbsubagents."):
            bad.append(f"{module}:{line} imports {target} (child/ imports only itself and the standard library)")
        else:
            bad.append(f"{module}:{line} imports {target} (not the standard library)")
    return bad


def registry_violations(module: str, source: str, is_package: bool = False) -> list[str]:
    return [f"{module}:{line} imports {target} (registry/ is storage: it never imports lifecycle/ or ui/)"
            for target, _names, line in _imports(source, module, is_package)
            if target.startswith(("nbsubagents.lifecycle", "nbsubagents.ui"))]


def private_violations(module: str, source: str, is_package: bool = False) -> list[str]:
    """``from nbsubagents.x import _name`` and ``x._name`` on a module bound by an import of ours."""
    bad = []
    for target, names, line in _imports(source, module, is_package):
        if not target.startswith("nbsubagents") or target == module:
            continue
        for name in names:
            if name.startswith("_") and not name.startswith("__"):
                bad.append(f"{module}:{line} imports {target}.{name}, a private name")
    ours: set[str] = set()  # names bound to modules of this package
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("nbsubagents")):
            ours |= {alias.asname or alias.name for alias in node.names if not alias.name.startswith("_")}
        elif isinstance(node, ast.Import):
            ours |= {(alias.asname or alias.name).split(".")[0] for alias in node.names
                     if alias.name.startswith("nbsubagents")}
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in ours
                and node.attr.startswith("_") and not node.attr.startswith("__")):
            bad.append(f"{module}:{node.lineno} uses {node.value.id}.{node.attr}, another module's private name")
    return bad


# -- the checks can fail: each finds a planted violation ----------------------------------------------
def test_each_rule_catches_a_planted_violation():
    assert child_violations("nbsubagents.child.x", "from ..config import settings\n")
    assert child_violations("nbsubagents.child.x", "def f():\n    import yaml\n")
    assert not child_violations("nbsubagents.child.x", "import os\nfrom .artifacts import RunPaths\n")
    assert registry_violations("nbsubagents.registry.query", "def f():\n    from ..lifecycle import watcher\n")
    assert registry_violations("nbsubagents.registry", "from ..ui import display\n", is_package=True)
    assert not registry_violations("nbsubagents.registry", "from ..child import procs\n", is_package=True)
    assert private_violations("nbsubagents.ui.browser", "from .panels import _route_clicks\n")
    assert private_violations("nbsubagents.ui.browser", "from .. import registry\nregistry._fetch(1)\n")
    assert not private_violations("nbsubagents.ui.browser", "from .. import registry\nregistry.fetch(1)\n")


# -- the rules, on the package ------------------------------------------------------------------------
def test_child_imports_only_the_standard_library_and_itself():
    found = [(m, p, s) for m, p, s in _sources() if m.startswith("nbsubagents.child")]
    assert {m.rpartition(".")[2] for m, _, _ in found} >= {"supervisor", "artifacts", "events", "formatter",
                                                         "procs", "tmux_pane"}
    bad = [v for m, p, s in found for v in child_violations(m, s, p.name == "__init__.py")]
    assert not bad, "\n".join(bad)


def test_registry_never_imports_lifecycle_or_ui():
    found = [(m, p, s) for m, p, s in _sources() if m.startswith("nbsubagents.registry")]
    assert found
    bad = [v for m, p, s in found for v in registry_violations(m, s, p.name == "__init__.py")]
    assert not bad, "\n".join(bad)


def test_no_module_uses_another_modules_private_names():
    bad = [v for m, p, s in _sources() for v in private_violations(m, s, p.name == "__init__.py")]
    assert not bad, "\n".join(bad)


def run_private_names() -> set[str]:
    """The private members of ``Run`` (``self._x`` in its class), IPython's ``_x_`` hooks aside."""
    tree = ast.parse((PACKAGE / "lifecycle" / "handle.py").read_text(encoding="utf-8"))
    (run,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Run"]
    names = {n.attr for n in ast.walk(run) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
             and n.value.id == "self" and n.attr.startswith("_") and not n.attr.endswith("_")}
    names |= {n.name for n in run.body if isinstance(n, ast.FunctionDef) and n.name.startswith("_")
              and not n.name.endswith("_")}
    return names


def run_friend_violations(module: str, source: str, private: set[str]) -> list[str]:
    return [f"{module}:{n.lineno} uses Run's private {n.attr}" for n in ast.walk(ast.parse(source))
            if isinstance(n, ast.Attribute) and n.attr in private
            and not (isinstance(n.value, ast.Name) and n.value.id == "self")]


def test_run_has_no_private_friends():
    private = run_private_names()
    assert "_result" in private  # the check sees Run's privates
    assert run_friend_violations("x", "run._result = None\n", private)
    bad = [v for m, p, s in _sources() if m != "nbsubagents.lifecycle.handle"
           for v in run_friend_violations(m, s, private)]
    assert not bad, "\n".join(bad)


def test_the_light_imports_stay_light():
    code = ("import sys, nbsubagents, nbsubagents.api, nbsubagents.registry, nbsubagents.lifecycle.reconcile\n"
            "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('IPython', 'ipywidgets', 'pandas'))\n"
            "print(heavy)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_the_supervisor_loads_nothing_of_the_package_outside_child():
    code = ("import sys, nbsubagents.child.supervisor, nbsubagents.child.tmux_pane\n"
            "print(sorted(m for m in sys.modules if m.startswith('nbsubagents')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = eval(out.stdout)  # a printed list of module names
    assert loaded and all(m == "nbsubagents" or m.startswith("nbsubagents.child") for m in loaded), loaded
