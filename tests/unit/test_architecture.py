"""The package's layering, checked on its source: each rule fails the moment a module breaks it.

- ``child/`` (what runs outside the kernel) imports only the standard library and itself;
- ``registry/`` (storage) never imports ``lifecycle/`` or ``ui/``;
- each band imports only the bands below it (child, storage and settings, views, lifecycle, sweeps, ui, faces),
  with no exception: the notebook edge attaches itself from above (``ui.attach``);
- every module belongs to a band (the folders are the architecture);
- ``views/`` holds renderings only: none of its modules imports threading, asyncio or concurrent;
- no import cycles: the run-time import graph has no strongly connected component of two or more modules;
- an own-module import inside a function only where ``LAZY_IMPORTS`` lists it with the start-up it keeps light
  (ruff's PLC0415 in ``.ci/run`` holds every other import at the top);
- no module imports another module's ``_private`` name, nor reaches one through an imported module;
- no module writes a ``style=`` attribute: HTML's rules live in ``_templates/nbsubagents.css``, its few inline
  styles in the macros of ``_templates/inline.html``;
- ``import nbsubagents`` loads no IPython, ipywidgets, pandas or jinja2, and the supervisor loads nothing outside
  ``child/``.

Imports are read from the syntax tree (also those inside functions), so a lazy import counts too.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

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


def _optional_import_lines(source: str) -> set[int]:
    """Lines of imports in the body of a ``try`` that catches ImportError: optional, used when installed."""
    lines = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Try) and any(
                isinstance(h.type, ast.Name) and h.type.id in ("ImportError", "ModuleNotFoundError")
                for h in node.handlers):
            lines |= {n.lineno for stmt in node.body for n in ast.walk(stmt)
                      if isinstance(n, (ast.Import, ast.ImportFrom))}
    return lines


def child_violations(module: str, source: str, is_package: bool = False) -> list[str]:
    bad = []
    optional = _optional_import_lines(source)
    for target, _names, line in _imports(source, module, is_package):
        if target == "nbsubagents" or target.startswith("nbsubagents._child") or _is_stdlib(target):
            continue
        if line in optional and not target.startswith("nbsubagents"):
            continue  # an optional library (jsonschema), used when importable; never needed to start
        if target.startswith("nbsubagents."):
            bad.append(f"{module}:{line} imports {target} (child/ imports only itself and the standard library)")
        else:
            bad.append(f"{module}:{line} imports {target} (not the standard library)")
    return bad


def registry_violations(module: str, source: str, is_package: bool = False) -> list[str]:
    return [f"{module}:{line} imports {target} (registry/ is storage: it never imports lifecycle/ or ui/)"
            for target, _names, line in _imports(source, module, is_package)
            if target.startswith(("nbsubagents._lifecycle", "nbsubagents._ui"))]


def _is_module(dotted: str) -> bool:
    """A module or package of ours (``nbsubagents._registry``: the package's internals are private by name)."""
    path = PACKAGE.parent.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def private_violations(module: str, source: str, is_package: bool = False) -> list[str]:
    """``from nbsubagents.x import _name`` and ``x._name`` on a module bound by an import of ours (a private
    module of the package is not a private name of another module: ``from .. import _registry``)."""
    bad = []
    for target, names, line in _imports(source, module, is_package):
        if not target.startswith("nbsubagents") or target == module:
            continue
        for name in names:
            if name.startswith("_") and not name.startswith("__") and not _is_module(f"{target}.{name}"):
                bad.append(f"{module}:{line} imports {target}.{name}, a private name")
    ours: set[str] = set()  # names bound to modules of this package
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("nbsubagents")):
            ours |= {alias.asname or alias.name for alias in node.names
                     if not alias.name.startswith("_") or alias.asname}
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
    assert child_violations("nbsubagents._child.x", "from .._config import settings\n")
    assert child_violations("nbsubagents._child.x", "def f():\n    import yaml\n")
    assert not child_violations("nbsubagents._child.x", "import os\nfrom .artifacts import RunPaths\n")
    assert not child_violations("nbsubagents._child.x", "try:\n    import jsonschema\nexcept ImportError:\n    pass\n")
    assert child_violations("nbsubagents._child.x", "try:\n    import jsonschema\nexcept KeyError:\n    pass\n")
    assert child_violations("nbsubagents._child.x", "try:\n    from .._config import x\nexcept ImportError:\n    x = 1\n")
    assert registry_violations("nbsubagents._registry.query", "def f():\n    from .._lifecycle import watcher\n")
    assert registry_violations("nbsubagents._registry", "from .._ui import display\n", is_package=True)
    assert not registry_violations("nbsubagents._registry", "from .._child import procs\n", is_package=True)
    assert private_violations("nbsubagents._ui.browser", "from .panels import _route_clicks\n")
    assert private_violations("nbsubagents._ui.browser", "from .. import registry\nregistry._fetch(1)\n")
    assert not private_violations("nbsubagents._ui.browser", "from .. import registry\nregistry.fetch(1)\n")
    assert private_violations("nbsubagents._ui.browser", "from .. import _registry as registry\nregistry._fetch(1)\n")
    assert not private_violations("nbsubagents._ui.browser", "from .. import _registry as registry\n")


# -- the rules, on the package ------------------------------------------------------------------------
def test_child_imports_only_the_standard_library_and_itself():
    found = [(m, p, s) for m, p, s in _sources() if m.startswith("nbsubagents._child")]
    assert {m.rpartition(".")[2] for m, _, _ in found} >= {"supervisor", "artifacts", "events", "formatter",
                                                         "procs", "tmux_pane"}
    bad = [v for m, p, s in found for v in child_violations(m, s, p.name == "__init__.py")]
    assert not bad, "\n".join(bad)


def test_registry_never_imports_lifecycle_or_ui():
    found = [(m, p, s) for m, p, s in _sources() if m.startswith("nbsubagents._registry")]
    assert found
    bad = [v for m, p, s in found for v in registry_violations(m, s, p.name == "__init__.py")]
    assert not bad, "\n".join(bad)


def test_no_module_uses_another_modules_private_names():
    bad = [v for m, p, s in _sources() for v in private_violations(m, s, p.name == "__init__.py")]
    assert not bad, "\n".join(bad)


def run_private_names() -> set[str]:
    """The private members of ``Run`` (``self._x`` in its class), IPython's ``_x_`` hooks aside."""
    tree = ast.parse((PACKAGE / "_lifecycle" / "handle.py").read_text(encoding="utf-8"))
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
    bad = [v for m, p, s in _sources() if m != "nbsubagents._lifecycle.handle"
           for v in run_friend_violations(m, s, private)]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("imports, touch, heavy", [
    ("nbsubagents, nbsubagents._api, nbsubagents._registry, nbsubagents._lifecycle.reconcile", "",
     ("IPython", "ipywidgets", "pandas", "jinja2")),
    ("nbsubagents._ui.browser, nbsubagents._ui.statusbar, nbsubagents._views.timeline, nbsubagents",
     "nbsubagents.status_bar; nbsubagents.browse",  # the explorer imports nothing heavy until used
     ("IPython", "ipywidgets", "pandas", "matplotlib")),
    ("nbsubagents, nbsubagents._api, nbsubagents._lifecycle.handle", "", ("dask", "distributed")),
])
def test_the_light_imports_stay_light(imports, touch, heavy):
    code = (f"import sys, {imports}\n{touch}\n"
            f"print(sorted(m for m in sys.modules if m.split('.')[0] in {heavy!r}))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]", out.stdout


def test_the_supervisor_loads_nothing_of_the_package_outside_child():
    code = ("import sys, nbsubagents._child.supervisor, nbsubagents._child.tmux_pane\n"
            "print(sorted(m for m in sys.modules if m.startswith('nbsubagents')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = eval(out.stdout)  # a printed list of module names
    assert loaded and all(m == "nbsubagents" or m.startswith("nbsubagents._child") for m in loaded), loaded


# -- the bands: each imports only the bands below it -----------------------------------------------------
BANDS = [  # lowest first
    ("child", ("nbsubagents._child", "nbsubagents.harnesses")),  # harnesses: the child's protocol, public
    ("storage and settings", ("nbsubagents._registry", "nbsubagents._config", "nbsubagents._pi",
                              "nbsubagents._preset_files", "nbsubagents._style", "nbsubagents._templates")),
    ("views", ("nbsubagents._views",)),
    ("lifecycle", ("nbsubagents._lifecycle",)),
    ("sweeps", ("nbsubagents._sweeps",)),
    ("ui", ("nbsubagents._ui",)),
    ("faces", ("nbsubagents._api", "nbsubagents._magics", "nbsubagents._magic_args", "nbsubagents._cli",
               "nbsubagents._cli_presets", "nbsubagents._cli_run", "nbsubagents._cli_shell", "nbsubagents._cli_talk",
               "nbsubagents._magic_completion",
               "nbsubagents._doctor", "nbsubagents.__main__", "nbsubagents._project_init",
               "nbsubagents.demo", "nbsubagents._sweeps.magic",
               "nbsubagents.lab")),  # JupyterLab's server extension (imports jupyter_server; never at import)
]


def band_of(module: str) -> int | None:
    """The band of the longest prefix that matches (``sweeps.magic`` is a face); None for the package itself,
    the face of lazy re-exports."""
    found = [(len(p), level) for level, (_name, prefixes) in enumerate(BANDS) for p in prefixes
             if module == p or module.startswith(p + ".")]
    return max(found)[1] if found else None


def _type_checking_lines(source: str) -> set[int]:
    """Lines under ``if TYPE_CHECKING:``: names for annotations, never imported at run time."""
    lines = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            lines |= {n.lineno for stmt in node.body for n in ast.walk(stmt) if hasattr(n, "lineno")}
    return lines


def band_violations(module: str, source: str, is_package: bool = False) -> list[str]:
    own = band_of(module)
    if own is None:
        return []
    skip = _type_checking_lines(source)
    bad = []
    for target, _names, line in _imports(source, module, is_package):
        other = band_of(target)
        if other is not None and other > own and line not in skip:
            bad.append(f"{module}:{line} imports {target}, a band above its own ({BANDS[other][0]} > "
                       f"{BANDS[own][0]})")
    return bad


def test_each_band_imports_only_the_bands_below_it():
    assert band_violations("nbsubagents._lifecycle.handle", "from .._sweeps import scorers\n")
    assert band_violations("nbsubagents._sweeps.experiment", "def f():\n    from .._ui import sweep_panel\n")
    assert not band_violations("nbsubagents._ui.panels", "from .._lifecycle import handle\n")
    assert not band_violations("nbsubagents._lifecycle.x", "if TYPE_CHECKING:\n    from .._ui.renderers import R\n")
    assert band_violations("nbsubagents._views.reports", "def f():\n    from .._lifecycle.handle import get_run\n")
    assert band_violations("nbsubagents._lifecycle.watcher", "def f():\n    from .._ui.kernel import in_cell\n")
    assert not band_violations("nbsubagents._lifecycle.handle", "from .._views import reports\n")
    bad = [v for m, p, s in _sources() for v in band_violations(m, s, p.name == "__init__.py")]
    assert not bad, "\n".join(bad)


def test_every_module_belongs_to_a_band():
    assert band_of("nbsubagents.somewhere_new") is None
    homeless = [m for m, _, _ in _sources() if m != "nbsubagents" and band_of(m) is None]
    assert not homeless, f"modules in no band (put them in a band's folder, or add them to BANDS): {homeless}"


# -- one clock: only the watcher starts threads ----------------------------------------------------------
CLOCK = "nbsubagents._lifecycle.watcher"
# the scripted model's server and the delegate tool server: programs of their own, not the kernel
THREAD_OWNERS = {CLOCK, "nbsubagents._pi.scripted", "nbsubagents._lifecycle.delegation_server"}


def thread_starts(source: str) -> list[int]:
    """Lines that make a ``Thread`` or a ``Timer`` (``threading.Thread(...)``, ``Thread(...)``, ...)."""
    return [node.lineno for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Call)
            and (getattr(node.func, "attr", None) or getattr(node.func, "id", None)) in ("Thread", "Timer")]


def test_only_the_clock_starts_threads():
    """Panels, status bars and browsers tick on the watcher's clock (``watcher.subscribe``): no other module of
    the package starts a thread of its own."""
    assert thread_starts("import threading\nthreading.Thread(target=print).start()\n") == [2]
    assert thread_starts("from threading import Timer\nTimer(1, print)\n") == [2]
    assert thread_starts((PACKAGE / "_lifecycle" / "watcher.py").read_text(encoding="utf-8"))  # the clock itself
    bad = [f"{m}:{line} starts a thread (subscribe a tick to the watcher's clock instead)"
           for m, _p, s in _sources() if m not in THREAD_OWNERS for line in thread_starts(s)]
    assert not bad, "\n".join(bad)


LIVE = ("threading", "asyncio", "concurrent")  # what a lock, a thread or an event loop comes from


def live_imports(module: str, source: str, is_package: bool = False) -> list[str]:
    return [f"{module}:{line} imports {target} (views hold no live state: locks and threads belong to ui/)"
            for target, _names, line in _imports(source, module, is_package) if target.split(".")[0] in LIVE]


def test_views_hold_renderings_only():
    """``_views/`` folds what a run did into what it shows, on one thread; the live panel (``_ui/panels.py``)
    holds the lock that serializes its threads' calls into them."""
    assert live_imports("nbsubagents._views.x", "import threading\nlock = threading.RLock()\n") == [
        "nbsubagents._views.x:1 imports threading (views hold no live state: locks and threads belong to ui/)"]
    assert live_imports("nbsubagents._views.x", "def f():\n    from concurrent.futures import Future\n")
    assert not live_imports("nbsubagents._views.x", "import time\nfrom .masking import masker\n")
    bad = [v for m, p, s in _sources() if m.startswith("nbsubagents._views")
           for v in live_imports(m, s, p.name == "__init__.py")]
    assert not bad, "\n".join(bad)


# -- no import cycles: the run-time import graph has no strongly connected component of two or more -------
def import_graph(sources: list[tuple[str, Path, str]]) -> dict[str, set[str]]:
    """Module → the package's modules it imports at run time (top-level and in-function imports, not those
    under ``if TYPE_CHECKING:``). ``from . import x`` counts as importing ``x`` when ``x`` is a module."""
    known = {m for m, _, _ in sources}
    graph: dict[str, set[str]] = {m: set() for m in known}
    for module, path, source in sources:
        skip = _type_checking_lines(source)
        for target, names, line in _imports(source, module, path.name == "__init__.py"):
            if line in skip or not target.startswith("nbsubagents"):
                continue
            submodules = {f"{target}.{n}" for n in names} & known
            if submodules:  # from package import module(s): an edge to each module, not to the package
                graph[module] |= submodules - {module}
                if set(names) <= {s.rpartition(".")[2] for s in submodules}:
                    continue
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != module:
                graph[module].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_no_import_cycles():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
    planted = [("nbsubagents.x", PACKAGE / "x.py", "from .y import f\n"),
               ("nbsubagents.y", PACKAGE / "y.py", "def g():\n    from . import x\n")]
    assert cycles(import_graph(planted)) == [["nbsubagents.x", "nbsubagents.y"]]
    found = cycles(import_graph(_sources()))
    assert not found, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in found)


# -- imports at the top: an own-module import inside a function only where it keeps a start light ----------
def lazy_own_imports(module: str, source: str, is_package: bool = False) -> set[tuple[str, str]]:
    """(module, what it imports) for each import of the package's own modules inside a function body: the
    module a ``from X import y`` names (``X``, or ``X.y`` for ``from . import y``), or an ``import X``."""
    tree = ast.parse(source)
    skip = _type_checking_lines(source)
    package = module if is_package else module.rpartition(".")[0]
    found = set()
    for func in ast.walk(tree):
        if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in (n for stmt in func.body for n in ast.walk(stmt)):
            if getattr(node, "lineno", None) in skip:
                continue
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    parts = parts[: len(parts) - (node.level - 1)]
                    base = ".".join(parts + ([node.module] if node.module else []))
                targets = [base] if node.module else [f"{base}.{alias.name}" for alias in node.names]
            else:
                continue
            found |= {(module, t) for t in targets if t.startswith("nbsubagents")}
    return found


def test_own_modules_are_imported_lazily_only_where_listed():
    assert lazy_own_imports("nbsubagents._api", "def f():\n    from ._ui import panels\n") == {
        ("nbsubagents._api", "nbsubagents._ui")}
    assert lazy_own_imports("nbsubagents._ui", "def f():\n    from . import panels\n", is_package=True) == {
        ("nbsubagents._ui", "nbsubagents._ui.panels")}
    assert not lazy_own_imports("nbsubagents._api", "from ._ui import panels\n")
    found = {pair for m, p, s in _sources() for pair in lazy_own_imports(m, s, p.name == "__init__.py")}
    unlisted = sorted(found - set(LAZY_IMPORTS))
    assert not unlisted, ("own-module imports inside functions (move them to the top, or list them in "
                          "LAZY_IMPORTS with the start-up they keep light):\n" + "\n".join(map(str, unlisted)))
    stale = sorted(set(LAZY_IMPORTS) - found)
    assert not stale, "LAZY_IMPORTS lists imports that are gone:\n" + "\n".join(map(str, stale))


# The only own-module imports inside functions, each with the start-up it keeps light. (The package face's other
# lazy imports are its re-exports: ``nbsubagents.__getattr__`` imports the module a public name lives in, from the
# ``_LAZY`` table, on its first use.)
LAZY_IMPORTS = {
    ("nbsubagents", "nbsubagents._magics"): "import nbsubagents: the magics need IPython, loaded on %load_ext",
    ("nbsubagents._child.supervisor", "nbsubagents._child.budgets"): "supervisor start-up: runs without a budget",
    ("nbsubagents._child.supervisor", "nbsubagents._child.isolation"): "supervisor start-up: runs without isolation",
    ("nbsubagents._lifecycle.delegation_server", "nbsubagents._lifecycle.delegation_start"):
        "the delegate server's start-up: its harness (Claude Code) lists its tools while its model already asks",
}


# -- harnesses are peers: nothing outside a harness's module branches on its name -----------------------------------
def name_branches(module: str, source: str, names: set[str]) -> list[str]:
    """Comparisons with a harness's name (``== "pi"``, ``in ("pi", ...)``, ``match``) and defaults to one
    (``or "pi"``) in ``source``; a harness's own module may speak of itself."""
    if module.startswith("nbsubagents._child.harnesses."):
        return []
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
        elif isinstance(node, ast.BoolOp):
            operands = node.values
        elif isinstance(node, ast.MatchValue):
            operands = [node.value]
        else:
            continue
        consts = [c for o in operands for c in ([o] if not isinstance(o, (ast.Tuple, ast.List, ast.Set)) else o.elts)]
        hit = [c.value for c in consts if isinstance(c, ast.Constant) and c.value in names]
        if hit:
            found.append(f"{module}:{node.lineno}: branches on harness {hit[0]!r}")
    return found


def test_nothing_outside_a_harness_module_branches_on_a_harness_name():
    from nbsubagents._child import harnesses

    names = set(harnesses.names())
    planted = 'def f(meta):\n    if meta["harness"] == "codex":\n        return meta.get("harness") or "pi"\n'
    assert len(name_branches("nbsubagents._lifecycle.x", planted, names)) == 2
    assert not name_branches("nbsubagents._child.harnesses.codex", planted, names)
    found = [hit for module, path, source in _sources()
             for hit in name_branches(module, source, names)]
    assert not found, "name branches outside the harness modules:\n" + "\n".join(found)


# -- one record of a run: meta.json is read only through child/record.py -------------------------------------------
READERS = {"read_json", "read_text", "read_bytes", "open", "loads", "load"}


def _named_meta(node: ast.AST) -> bool:
    return (isinstance(node, ast.Name) and node.id.endswith("meta")) or \
        (isinstance(node, ast.Attribute) and node.attr.endswith("meta"))


def _meta_file(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "meta") or \
        (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and isinstance(node.right, ast.Constant)
         and node.right.value == "meta.json")


def metadata_reads(module: str, source: str) -> list[str]:
    """Reads of a run's metadata by string key (``meta["runId"]``, ``run.meta.get("cwd")``) and reads of its file
    (``read_json(paths.meta)``, ``(run_dir / "meta.json").read_text()``) anywhere but the record module."""
    if module == "nbsubagents._child.record":
        return []
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Subscript) and _named_meta(node.value) and isinstance(node.slice, ast.Constant):
            found.append(f"{module}:{node.lineno}: reads meta[{node.slice.value!r}]")
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
        if name == "get" and isinstance(func, ast.Attribute) and _named_meta(func.value) and node.args and isinstance(node.args[0], ast.Constant):
            found.append(f"{module}:{node.lineno}: reads meta.get({node.args[0].value!r})")
        elif name in READERS and (any(_meta_file(a) for a in node.args)
                                  or (isinstance(func, ast.Attribute) and _meta_file(func.value))):
            found.append(f"{module}:{node.lineno}: reads the meta file")
    return found


def test_a_runs_metadata_is_read_only_through_its_record():
    planted = ('def f(run, paths, run_dir):\n    a = run.meta.get("cwd")\n    b = meta["runId"]\n'
               '    c = read_json(paths.meta)\n    d = (run_dir / "meta.json").read_text()\n'
               '    e = paths.meta.read_text()\n    return paths.meta.exists(), run.record.cwd\n')
    assert len(metadata_reads("nbsubagents._views.x", planted)) == 5
    assert not metadata_reads("nbsubagents._child.record", planted)
    found = [hit for module, path, source in _sources() for hit in metadata_reads(module, source)]
    assert not found, "metadata read outside child/record.py:\n" + "\n".join(found)


# -- wiring is explicit: importing a module changes nothing; the faces lend the edge in one call (api.wire) --------
IMPORT_EFFECTS = """
import atexit, importlib, json, sys
exits, register = [], atexit.register
atexit.register = lambda fn, *a, **k: exits.append(getattr(fn, "__module__", "")) or register(fn, *a, **k)
from nbsubagents._lifecycle.edge import Edge, edge
fresh = dict(vars(Edge()))
def changed():
    return sorted(k for k, v in vars(edge).items() if fresh[k] is not v)
for name in sys.argv[1:]:
    importlib.import_module(name)
imported = changed()
import nbsubagents
nbsubagents.status  # the first use of a public name
print(json.dumps({"imported": imported, "exits": [m for m in exits if m.startswith("nbsubagents")],
                  "used": changed()}))
"""


def test_importing_a_module_changes_nothing_and_the_public_api_lends_the_edge_when_used():
    modules = [m for m, _, _ in _sources() if not m.endswith("__main__")]
    assert "nbsubagents._api" in modules and "nbsubagents._magics" in modules and "nbsubagents._cli" in modules
    done = subprocess.run([sys.executable, "-c", IMPORT_EFFECTS, *modules], capture_output=True, text=True,
                          timeout=120, check=True)
    assert json.loads(done.stdout) == {
        "imported": [], "exits": [],
        "used": ["cell_parent", "in_cell", "in_kernel", "person_at_frontend", "show", "start", "sweep_panel",
                 "text_stream"]}, \
        done.stderr


def test_the_packages_internals_are_private_by_name():
    """Only the public surface has public names: the package (its ``__all__``), ``demo`` (the scripted model for
    a notebook), ``harnesses`` (what a third-party harness builds on) and ``lab`` (the Jupyter Server extension)."""
    names = {p.stem for p in PACKAGE.glob("*.py")} | {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    assert "_lifecycle" in names and "_api" in names
    assert {n for n in names if not n.startswith("_")} == {"demo", "harnesses", "lab"}


# -- HTML: every rule in the stylesheet, every inline style in one macro file ----------------------------------------
STYLE_ATTRIBUTE = re.compile(r"(?<![\w-])style\s*=", re.IGNORECASE)


def style_attributes(module: str, source: str) -> list[str]:
    """``style=`` written in a string of ``source`` (an f-string's text too): HTML's inline styles belong in
    ``_templates/inline.html``, every other rule in ``_templates/nbsubagents.css``."""
    return [f"{module}:{node.lineno} writes a style attribute: {node.value[:60]!r}"
            for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and STYLE_ATTRIBUTE.search(node.value)]


def test_no_module_writes_an_inline_style():
    assert style_attributes("x", "html = f'<div style=\"color:{c}\">'\n")
    assert style_attributes("x", "cell = (\"style='text-align:left'\", text)\n")
    assert not style_attributes("x", "w.Button(button_style='primary', style=shared(ButtonStyle))\n")
    assert not style_attributes("x", "'<div class=\"nbsubagents-muted\">'\n")
    bad = [v for m, _, s in _sources() for v in style_attributes(m, s)]
    assert not bad, "\n".join(bad)
