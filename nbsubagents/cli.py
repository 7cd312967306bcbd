"""The ``nbsubagents`` console script: ``doctor`` says whether this machine can run sub-agents;
``runs`` and ``status [RUN_ID] [--all]`` print the registry's tables; ``demo`` runs the offline tour."""

from __future__ import annotations

import argparse
import platform
import shutil
import subprocess
import sys

from .config import NbSubagentsError, agent_dir, find_pi, project_root


def _line(label: str, value: str, ok: bool = True) -> str:
    return f"{'✓' if ok else '✗'} {label:<14} {value}"


def doctor() -> int:
    """Print python, node, pi, agent dir, presets, runs root and models; exit 1 if something is missing."""
    from .artifacts import runs_dir
    from .models import available_models
    from .preset_files import PresetError, discover

    problems = 0
    print(_line("python", f"{platform.python_version()} ({sys.executable})"))
    node = shutil.which("node")
    if node:
        version = subprocess.run([node, "--version"], capture_output=True, text=True, stdin=subprocess.DEVNULL)
        print(_line("node", f"{version.stdout.strip()} ({node})"))
    else:
        problems += 1
        print(_line("node", "not found: install Node.js >= 20 (pi runs on it)", False))
    pi = None
    try:
        pi = find_pi()
        version = subprocess.run([pi, "--version"], capture_output=True, text=True, stdin=subprocess.DEVNULL,
                                 timeout=60)
        print(_line("pi", f"{(version.stdout or version.stderr).strip()} ({pi})"))
    except (NbSubagentsError, OSError, subprocess.TimeoutExpired) as exc:
        problems += 1
        print(_line("pi", str(exc), False))
    adir = agent_dir()
    print(_line("agent dir", str(adir), adir.is_dir()))
    try:
        found = discover()
        names = ", ".join(f"{p.name} ({p.scope})" for p in found.values()) or "none yet"
        print(_line("presets", names))
    except PresetError as exc:
        problems += 1
        print(_line("presets", str(exc), False))
    print(_line("runs root", str(runs_dir(project_root()))))
    if pi:
        models = available_models(pi)
        print(_line("models", ", ".join(models) if models else "none: configure a provider for pi", bool(models)))
        problems += not models
    return 1 if problems else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="nbsubagents", description="Delegate tasks to pi sub-agents.")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("doctor", help="check python, node, pi, presets and models")
    sub.add_parser("runs", help="every run of this project: counts and a table")
    status = sub.add_parser("status", help="active runs (or every run with --all, or one run) and the counts")
    status.add_argument("run_id", nargs="?", help="a run id or a unique prefix of one")
    status.add_argument("--all", action="store_true", help="list completed, failed and aborted runs too")
    demo = sub.add_parser("demo", help="the offline tour on the scripted demo model (one run, three in parallel)")
    demo.add_argument("dir", nargs="?", help="where to copy the example project (default: .demo/project; "
                                             "with --notebook, where the executed notebook goes: .demo)")
    demo.add_argument("--notebook", action="store_true",
                      help="execute the quickstart notebook headless instead (needs nbsubagents[demo])")
    args = parser.parse_args(argv)
    if args.command == "demo":
        return run_demo(args.dir, notebook=args.notebook)
    if args.command == "doctor":
        return doctor()
    if args.command in ("runs", "status"):
        return show_status(getattr(args, "run_id", None), include_completed=args.command == "runs" or args.all)
    return 2


def run_demo(directory: str | None, *, notebook: bool) -> int:
    """``nbsubagents demo``: the tour of ``nbsubagents.demo``; a missing pi or extra is a message, not a traceback."""
    from . import demo

    try:
        find_pi()
    except NbSubagentsError as exc:
        print(f"nbsubagents demo: {exc}", file=sys.stderr)
        return 1
    if notebook:
        try:
            import nbclient  # noqa: F401
            import nbformat  # noqa: F401
        except ImportError:
            print("nbsubagents demo --notebook executes a notebook and needs nbclient and nbformat: "
                  "pip install 'nbsubagents[demo]'", file=sys.stderr)
            return 1
        return demo.run_notebook(demo.QUICKSTART, directory or ".demo")
    return demo.main([directory] if directory else [])


def show_status(run_id: str | None, *, include_completed: bool) -> int:
    """The tables of ``nbsubagents.status()``; a terminal look does not take a kernel's announcements."""
    from .registry import status

    try:
        print(repr(status(run_id, include_completed=include_completed, announce=False)))
    except NbSubagentsError as exc:
        print(f"nbsubagents: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
