"""The ``nbsubagents`` console script (also ``python -m nbsubagents``).

Each subcommand is one entry of ``COMMANDS``: a function that adds its parser (help, options, examples) and
sets ``handler``, the function that runs it and returns the exit code. A handler raises ``NbSubagentsError``
for a problem; ``main`` prints it (in its shell form) and exits 1. Every word printed goes through ``echo``
(``cli_shell``): control characters a run wrote are shown escaped, never sent to the terminal. ``run`` is
``cli_run``'s, the commands that talk to a run are ``cli_talk``'s, ``presets`` is ``cli_presets``'.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
from collections.abc import Callable
from typing import Any

from . import __version__, _api as api, demo, _doctor as doctor, _registry as registry
from ._child.artifacts import STATUSES
from ._child.text import terminal_safe
from ._cli_presets import add_presets
from ._cli_run import add_run
from ._cli_shell import EXIT_CODES, echo, echo_json, for_shell, subcommand
from ._cli_talk import add_answer, add_approve, add_followup, add_steer, question_lines, run_facts
from ._config import NbSubagentsError, project_root
from ._lifecycle import reconcile
from ._lifecycle.handle import Run, get_run, reread
from ._pi import find_pi
from ._project_init import init
from ._registry.query import SELECTED, build_query, shown, to_utc_iso
from ._registry.rows import shown_name, shown_row
from ._views.masking import masker
from ._views.reports import FORMATS

TABLE_LIMIT = 50      # the runs table shows the newest 50 unless --limit says otherwise
CANCEL_WAIT = 15.0    # seconds `cancel` waits for a run to record its end
BROKEN_PIPE = 141     # 128 + SIGPIPE: what a shell reports for git or cat in the same pipe
INTERRUPTED = 130     # 128 + SIGINT


# -- doctor ---------------------------------------------------------------------------------------------
def add_doctor(sub: Any) -> None:
    cmd = subcommand(sub, "doctor", "check python, node, pi, presets and models", """\
  nbsubagents doctor                      # can runs start on this machine?
  nbsubagents doctor --json | jq '.[] | select(.ok == false)'
  nbsubagents doctor --dask tcp://scheduler:8786""",
                     "Check python, node, pi, the agent dir, presets and models. Each line is ✓ (fine), ✗ (a "
                     "problem, with the command that fixes it) or ! (worth knowing). Exit 0 when runs can start "
                     "(pi starts; without a configured model runs can use the offline scripted model).")
    cmd.add_argument("--dask", nargs="?", const="", metavar="SCHEDULER",
                     help="also check a Dask cluster: workers, pi on each, shared storage, versions")
    cmd.add_argument("--json", action="store_true", help="the checks as a JSON list of {check, ok, detail, fix}")
    cmd.set_defaults(handler=run_doctor)


def run_doctor(args: argparse.Namespace) -> int:
    found = doctor.checks()
    if args.dask is not None:
        found += doctor.dask_checks(args.dask or None)
    if args.json:
        echo_json([c.as_dict() for c in found])
    else:
        for check in found:
            echo(check.text())
    return 1 if any(c.ok is False for c in found) else 0


# -- runs -----------------------------------------------------------------------------------------------
def _names(what: str, known: tuple[str, ...] = ()) -> Callable[[str], list[str]]:
    """An argparse type: one name or a comma list (``failed,aborted``), each one of ``known`` if given."""

    def parse(text: str) -> list[str]:
        names = [n.strip() for n in text.split(",") if n.strip()]
        if not names:
            raise argparse.ArgumentTypeError(f"a {what} is needed, got {text!r}")
        unknown = [n for n in names if known and n not in known]
        if unknown:
            raise argparse.ArgumentTypeError(f"unknown {what} {unknown[0]!r}: {what}es are {', '.join(known)}")
        return names

    return parse


def _since(text: str) -> str:
    try:
        return to_utc_iso(text, name="--since")
    except NbSubagentsError:
        raise argparse.ArgumentTypeError(f"{text!r} is not understood: give an ISO date or time like 2026-11-25 "
                                         "or '2026-11-25 14:00', or an age like 30m, 2h, 3d") from None


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"a whole number >= 1 is needed, got {text!r}")
    return int(text)


def add_runs(sub: Any) -> None:
    cmd = subcommand(sub, "runs", "this project's runs, newest first: counts and a table (or JSON, CSV)", """\
  nbsubagents runs                        # the newest 50 runs
  nbsubagents runs --status failed,aborted --since 2h
  nbsubagents runs --preset scout --model anthropic/claude-sonnet-4-5 --limit 10
  nbsubagents runs --harness claude-code,codex
  nbsubagents runs --since 2026-11-25 --json | jq '.[].run_id'
  nbsubagents runs --csv > runs.csv""")
    cmd.add_argument("--status", type=_names("status", STATUSES), action="extend", metavar="S",
                     help=f"only runs in this status (repeat it, or a comma list): {', '.join(STATUSES)}")
    cmd.add_argument("--preset", type=_names("preset"), action="extend", metavar="NAME",
                     help="only runs of this preset (repeat it, or a comma list)")
    cmd.add_argument("--model", type=_names("model"), action="extend", metavar="MODEL",
                     help="only runs on this model, as provider/id (repeat it, or a comma list)")
    cmd.add_argument("--harness", type=_names("harness"), action="extend", metavar="H",
                     help="only runs under this agent harness: pi, claude-code or codex (repeat it, or a comma list)")
    cmd.add_argument("--since", type=_since, metavar="WHEN",
                     help="only runs created since an ISO date or time (2026-11-25, '2026-11-25 14:00') "
                          "or an age (30m, 2h, 3d, 1w)")
    cmd.add_argument("--limit", type=_positive, metavar="N",
                     help=f"the newest N runs (default: {TABLE_LIMIT} in the table, all with --json or --csv)")
    out = cmd.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="a JSON array of runs (the registry's columns)")
    out.add_argument("--csv", action="store_true", help="CSV with a header row (the registry's columns)")
    cmd.set_defaults(handler=list_runs)


def _rows(args: argparse.Namespace, limit: int | None) -> list[dict[str, Any]]:
    """The project's runs matching the filters, newest first, masked; the registry made truthful first."""
    reconcile.reconcile(reattach=False)  # a run whose supervisor is gone is settled before it is listed
    db = registry.db_path()
    if not db.exists():
        return []
    sql, params = build_query(status=args.status, preset=args.preset, model=args.model, harness=args.harness,
                              since=args.since, limit=limit)
    rows = shown(registry.fetch(db, sql, params), args.status, limit)  # a run with an open question: waiting
    for row in rows:
        for name in ("data", "inputs"):  # JSON in the registry: a value in --json (JSON text again in --csv)
            if isinstance(row.get(name), str):
                row[name] = json.loads(row[name])
    masks = masker()
    return [masks.data(row) for row in rows]  # masked before anything cuts a cell short


def list_runs(args: argparse.Namespace) -> int:
    table = not (args.json or args.csv)
    limit = args.limit or (TABLE_LIMIT if table else None)
    rows = _rows(args, limit + 1 if limit else None)  # one more says whether there are more
    more = limit is not None and len(rows) > limit
    rows = rows[:limit]
    if args.json:
        echo_json([shown_row(row) for row in rows])  # runs()' names for the same columns (rows.SHOWN)
    elif args.csv:
        _write_csv(rows)
    elif not rows:
        echo(_no_runs(args))
    else:
        db = registry.db_path()
        echo(repr(registry.Status(registry.counts(db=db), rows, include_completed=True, max_rows=len(rows),
                                  waiting=registry.waiting_count(db))))
        if more:
            echo(f"… older runs not shown: --limit {max(2 * limit, 100)} shows more")
    return 0


def _no_runs(args: argparse.Namespace) -> str:
    root = project_root()
    total = registry.counts(root)["total"]
    if not total:
        return f"no runs yet in {root}"
    given = [f"--{key} {','.join(v) if isinstance(v, list) else v}"
             for key in ("status", "preset", "model", "harness", "since") if (v := getattr(args, key))]
    return f"no runs match {' '.join(given)} in {root} ({total} in all: `nbsubagents runs` lists them)"


def _write_csv(rows: list[dict[str, Any]]) -> None:
    writer = csv.DictWriter(sys.stdout, fieldnames=[shown_name(c) for c in SELECTED], lineterminator="\n")
    writer.writeheader()
    for row in rows:
        cells = {k: json.dumps(v) if isinstance(v, (dict, list)) else v for k, v in shown_row(row).items()}
        writer.writerow({k: terminal_safe(v) if isinstance(v, str) else v for k, v in cells.items()})


# -- status, show ---------------------------------------------------------------------------------------
def add_status(sub: Any) -> None:
    cmd = subcommand(sub, "status", "active runs (or every run with --all, or one run) and the counts", """\
  nbsubagents status                      # what is running now
  nbsubagents status --all
  nbsubagents status 20261126-054801      # one run: a run id or a unique prefix of one""")
    cmd.add_argument("run_id", nargs="?", help="a run id or a unique prefix of one")
    cmd.add_argument("--all", action="store_true", help="list completed, failed and aborted runs too")
    cmd.set_defaults(handler=show_status)


def show_status(args: argparse.Namespace) -> int:
    """The tables of ``nbsubagents.status()``; a terminal look does not take a kernel's announcements."""
    found = reconcile.status(args.run_id, include_completed=args.all, announce=False)
    if not found.total:
        echo(f"no runs yet in {project_root()}")
        return 0
    masks = masker()
    found.rows = [masks.data(row) for row in found.rows]  # masked before the table cuts a cell short
    echo(repr(found))
    return 0


def add_show(sub: Any) -> None:
    cmd = subcommand(sub, "show", "one run: its summary, status, output, error and where its files are", """\
  nbsubagents show 20261126-054801-a1b2c3
  nbsubagents show a1b2c3                 # the random tail of a run id is enough when unique
  nbsubagents show a1b2c3 --json | jq -r .output""")
    cmd.add_argument("run", help="a run id or a unique prefix of one")
    cmd.add_argument("--json", action="store_true", help="the same as one JSON object")
    cmd.set_defaults(handler=show_run)


def show_run(args: argparse.Namespace) -> int:
    reconcile.reconcile(reattach=False)  # a run whose supervisor is gone shows how it ended, not "running"
    facts = run_facts(get_run(args.run))
    if args.json:
        echo_json(facts)
        return 0
    echo(facts["summary"])
    labels = {"resumed_from": "continues", "questions": "asks"}
    for key in ("status", "preset", "harness", "model", "task", "output", "error", "resumed_from", "questions",
                "unread", "run_dir", "transcript", "events"):
        value = facts[key]
        if key == "questions":
            value = "\n".join(question_lines(facts["run_id"], value))
        elif key == "unread":
            value = "\n".join(value)
        if not value:
            continue
        first, *rest = str(value).rstrip().split("\n")
        echo(f"  {labels.get(key, key.replace('_', ' ')):<11} {first}")
        for line in rest:
            echo(f"  {'':<11} {line}")
    return 0


# -- report, cancel -------------------------------------------------------------------------------------
def add_report(sub: Any) -> None:
    cmd = subcommand(sub, "report", "write a report of some runs, or of every run (self-contained HTML, or "
                                    "Markdown) and print its path", """\
  nbsubagents report                      # every run of the project: .pi/subagents/reports/report-<time>.html
  nbsubagents report --since 2h
  nbsubagents report a1b2c3 d4e5f6 --format md --out issue.md
  xdg-open "$(nbsubagents report a1b2c3)\"""")
    cmd.add_argument("runs", nargs="*", metavar="RUN",
                     help="run ids or unique prefixes of them (default: every run of the project, as "
                          "%%subagent_report does)")
    cmd.add_argument("--since", type=_since, metavar="WHEN",
                     help="with no RUN: only runs created since an ISO date or time or an age (30m, 2h, 3d)")
    cmd.add_argument("--format", choices=FORMATS,
                     help="html (self-contained: no script, loads nothing) or md (Markdown for an issue); "
                          "default: from --out's suffix, else html")
    cmd.add_argument("--out", metavar="PATH",
                     help="where to write it (default: .pi/subagents/reports/report-<time>.<format>)")
    cmd.set_defaults(handler=write_report)


def write_report(args: argparse.Namespace) -> int:
    reconcile.reconcile(reattach=False)
    if args.runs and args.since:
        raise NbSubagentsError("give RUNs or --since, not both")
    runs: list[Any] = args.runs
    if not runs:
        db = registry.db_path()
        sql, params = build_query(status=None, preset=None, model=None, harness=None, since=args.since, limit=None)
        runs = [Run(row["run_dir"]) for row in (registry.fetch(db, sql, params) if db.exists() else [])]
        if not runs:
            raise NbSubagentsError(f"no runs to report{' since ' + args.since if args.since else ''} in "
                                   f"{project_root()}")
    echo(api.report(runs, args.out, format=args.format).resolve())
    return 0


def add_cancel(sub: Any) -> None:
    cmd = subcommand(sub, "cancel", "cancel runs (from any kernel or terminal)", """\
  nbsubagents cancel a1b2c3
  nbsubagents cancel a1b2c3 d4e5f6
  nbsubagents runs --status running --json | jq -r '.[].run_id' | xargs nbsubagents cancel""")
    cmd.add_argument("runs", nargs="+", metavar="RUN", help="run ids or unique prefixes of them")
    cmd.set_defaults(handler=cancel_runs)


def cancel_runs(args: argparse.Namespace) -> int:
    """Cancel each run and say so, or say why not; 1 when one could not be cancelled."""
    reconcile.reconcile(reattach=False)
    failed = 0
    for given in args.runs:
        why = _cancel(given)
        if why:
            failed += 1
            echo(f"{given}: not cancelled: {why}", file=sys.stderr)
    return 1 if failed else 0


def _cancel(given: str) -> str | None:
    """Cancel one run and print it; the reason it was not cancelled, or None."""
    try:
        run = get_run(given)
    except NbSubagentsError as exc:
        return for_shell(str(exc))
    if run.done:
        return f"run {run.id} had already ended ({run.status})"
    if not run.cancel():
        return f"run {run.id} ended before the cancel reached it ({reread(run).status})"
    run.wait(CANCEL_WAIT)
    if run.done:
        echo(f"{run.id}: cancelled ({run.status})")
    else:
        echo(f"{run.id}: cancelled; it is still ending (`nbsubagents status {run.id}` shows when it has)")
    return None


# -- demo -----------------------------------------------------------------------------------------------
def add_demo(sub: Any) -> None:
    cmd = subcommand(sub, "demo", "the offline tour on the scripted demo model (one run, three in parallel)", """\
  nbsubagents demo                        # copies the example project to .demo/project and runs there
  nbsubagents demo /tmp/tour
  nbsubagents demo --notebook             # needs nbsubagents[demo]""")
    cmd.add_argument("dir", nargs="?", help="where to copy the example project (default: .demo/project; "
                                            "with --notebook, where the executed notebook goes: .demo)")
    cmd.add_argument("--notebook", action="store_true",
                     help="execute the quickstart notebook headless instead (needs nbsubagents[demo])")
    cmd.set_defaults(handler=run_demo)


def run_demo(args: argparse.Namespace) -> int:
    """``nbsubagents demo``: the tour of ``nbsubagents.demo``; a missing pi or extra is a message, not a traceback."""
    find_pi()
    if args.notebook:
        try:
            import nbclient  # noqa: F401
            import nbformat  # noqa: F401
        except ImportError:
            raise NbSubagentsError("--notebook executes a notebook and needs nbclient and nbformat: "
                                   "pip install 'nbsubagents[demo]'") from None
        return demo.run_notebook(demo.QUICKSTART, args.dir or ".demo")
    return demo.main([args.dir] if args.dir else [])


# -- init -----------------------------------------------------------------------------------------------
def add_init(sub: Any) -> None:
    cmd = subcommand(sub, "init", "make a project: starter presets, commented settings, .gitignore lines", """\
  nbsubagents init                        # this folder: .pi/subagents/ with scout, editor, reviewer
  nbsubagents init --offline my-project   # runs there use the scripted model (no key, no network)""",
                     "Make DIR a project: .pi/subagents/ with three starter presets (scout, editor, reviewer), a "
                     "commented subagents section in .pi/settings.json, and the lines that keep runs, the registry "
                     "and reports out of git in .gitignore. Never overwrites a file; says what it made and skipped.")
    cmd.add_argument("dir", nargs="?", default=".", help="the project folder (default: this one)")
    cmd.add_argument("--offline", action="store_true",
                     help="every run of the project uses the scripted model demo/scripted (no key, no network)")
    cmd.set_defaults(handler=run_init)


def run_init(args: argparse.Namespace) -> int:
    """What ``nbsubagents.init()`` made and skipped; a folder that cannot be a project exits 2."""
    try:
        result = init(args.dir, offline=args.offline)
    except (NbSubagentsError, OSError) as exc:
        echo(f"nbsubagents init: {exc}", file=sys.stderr)
        return 2
    echo(repr(result))
    return 0


# -- the parser -----------------------------------------------------------------------------------------
# The subcommands in the order --help lists them. A new one: a function add_NAME(sub) that makes its parser with
# subcommand(...) and sets handler=, appended here.
COMMANDS: list[Callable[[Any], None]] = [add_init, add_run, add_runs, add_status, add_show, add_report, add_cancel,
                                         add_steer, add_followup, add_answer, add_approve,
                                         add_presets, add_doctor, add_demo]


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="nbsubagents", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Delegate tasks to sub-agents; run them, list, inspect, report, cancel and talk to their runs.",
        epilog=f"""\
examples:
  nbsubagents doctor                      # can runs start on this machine?
  nbsubagents run scout "list the modules under src/" > answer.md
  nbsubagents runs --status failed --since 1d
  nbsubagents show a1b2c3                 # one run's output, error and files
  nbsubagents cancel a1b2c3
  nbsubagents answer a1b2c3 use the staging database
  nbsubagents COMMAND --help              # each command's options and examples

{EXIT_CODES}""")
    top.add_argument("--version", action="version", version=f"nbsubagents {__version__}")
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in COMMANDS:
        add(sub)
    top.set_defaults(commands=sub.choices)
    return top


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv:  # a bare `nbsubagents` asks what it can do: the help, on stdout, exit 0
        parser().print_help()
        return 0
    top = parser()
    if argv[0] == "run":  # options may follow the task's words: `nbsubagents run scout "ls src" --json`
        args = top.get_default("commands")["run"].parse_intermixed_args(argv[1:], argparse.Namespace(command="run"))
    else:
        args = top.parse_args(argv)
    api.wire()  # a follow-up of an ended run starts its new run through the public start()
    try:
        code = args.handler(args)
        sys.stdout.flush()  # a reader that went away shows here, inside the try
    except BrokenPipeError:
        _quiet_stdout()
        return BROKEN_PIPE
    except KeyboardInterrupt:  # Ctrl-C: the shell's usual 128 + SIGINT, without a traceback
        return INTERRUPTED
    except NbSubagentsError as exc:
        echo(f"nbsubagents {args.command}: {for_shell(str(exc))}", file=sys.stderr)
        return 1
    return code


def _quiet_stdout() -> None:
    """After a broken pipe: stdout points at /dev/null, so the interpreter's last flush says nothing."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # a stdout without a file descriptor (captured): nothing to quiet
        pass


if __name__ == "__main__":
    sys.exit(main())
