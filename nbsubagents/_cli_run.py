"""``nbsubagents run PRESET TASK``: one run from the shell, part of the console script (``cli``).

Its run-option flags are made from the one table of run options (``lifecycle.spec.options("call")``): a new
option there is a new flag here. Progress goes to stderr, the answer (or ``--json``) to stdout, and the exit
status says how the run ended (``RUN_CODES``).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from . import _api as api
from ._cli_shell import EXIT_CODES, echo, echo_json, subcommand
from ._cli_talk import run_facts
from ._config import NbSubagentsError
from ._lifecycle import inputs
from ._lifecycle.spec import Option, options, yes_no

__all__ = ["add_run", "run_preset", "RUN_CODES", "exit_code"]

FAILED, ABORTED, TIMED_OUT = 3, 4, 124  # 124: what timeout(1) returns when the time ran out

RUN_CODES = f"""\
{EXIT_CODES}

how the run ended, in the exit code of run:
  0    it completed (with --bg: it started)
  1    it could not start: an unknown preset or model, a bad option value, an empty task
  {FAILED}    it failed: an error, a budget reached, a reply that missed --output-schema
  {ABORTED}    it was aborted: cancelled (`nbsubagents cancel RUN`, its panel)
  {TIMED_OUT}  it timed out (--timeout), as timeout(1) says
  130  Ctrl-C: the run was aborted first
  143  SIGTERM: the run was aborted first"""

_WORDS = {int: "a whole number", float: "a number", yes_no: "yes or no (also true/false, on/off)"}


def _parser_of(opt: Option) -> Any:
    """The argparse type of one option's flag: its table's ``parse``; JSON for a structured value."""

    def parse(text: str) -> Any:
        if opt.structured and text.lstrip()[:1] in ("[", "{"):
            try:
                return _Json(json.loads(text))
            except json.JSONDecodeError as exc:
                raise argparse.ArgumentTypeError(f"{text!r} starts as JSON but is not: {exc}") from None
        try:
            return opt.parse(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{_WORDS.get(opt.parse, opt.metavar)} is needed, got {text!r}") from None

    parse.__name__ = opt.name  # argparse names the type in some messages
    return parse


class _Json:
    """A structured value given as JSON on the command line (the whole value of its option)."""

    def __init__(self, value: Any) -> None:
        self.value = value


def _value(opt: Option, given: Any) -> Any:
    """The option's value for ``run()``/``start()``: a repeated flag's list, or the JSON value given once."""
    if not isinstance(given, list):
        return given.value if isinstance(given, _Json) else given
    if any(isinstance(item, _Json) for item in given):
        if len(given) > 1:
            raise NbSubagentsError(f"{opt.spelling} takes one JSON value or repeated plain values, not both: give "
                                   f"the whole list as JSON once, e.g. {opt.spelling} '[...]'")
        return given[0].value
    return given


def add_run(sub: Any) -> None:
    cmd = subcommand(sub, "run", "run a preset on a task: progress on stderr, the answer on stdout", """\
  nbsubagents run scout "list the modules under src/ and what each does"
  nbsubagents run scout --task-file task.md --model anthropic/claude-sonnet-4-5 > answer.md
  git diff | nbsubagents run reviewer -            # the task from stdin
  nbsubagents run editor "fix the failing test" --isolation worktree --max-cost 0.50
  nbsubagents run scout "find the config" --json | jq -r .output
  nbsubagents run scout "audit the dependencies" --bg   # prints the run id at once
  nbsubagents run scout "triage" --approval '{"tools": ["bash"], "allow": ["git status*"]}'
  nbsubagents run scout "summarise the data" --with df=data.parquet --with notes=notes.md""",
                     "Run PRESET on a task in the foreground, as nbsubagents.run() does: progress lines on stderr, "
                     "the run's answer on stdout (or, with --json, the run as JSON), the exit status from how it "
                     "ended. The run options are run()'s: a repeatable flag collects a list; an option that takes "
                     "a list or a mapping (--file, --approval, --fallback-model, --output-schema) also takes it "
                     "whole as JSON (a value starting with [ or {). Ctrl-C aborts the run, then exits 130.",
                     codes=RUN_CODES)
    cmd.add_argument("preset", metavar="PRESET", help="the preset to run (`nbsubagents presets` lists them)")
    cmd.add_argument("task", nargs="*", metavar="TASK",
                     help="what the sub-agent should do (several words are joined by spaces); - reads it from stdin")
    cmd.add_argument("--task-file", metavar="FILE", help="read the task from FILE (- for stdin) instead")
    for opt in options("call"):
        how: dict[str, Any] = {"dest": opt.name, "metavar": opt.metavar, "type": _parser_of(opt),
                               "help": opt.help + ("; or the whole value as JSON" if opt.structured else "")}
        if opt.repeat:
            how["action"] = "append"
        cmd.add_argument(opt.spelling, **how)
    cmd.add_argument("--executor", choices=("local", "dask"),
                     help="dask: on a worker of the Dask cluster of the dask_scheduler setting (default: settings)")
    cmd.add_argument("--bg", action="store_true",
                     help="start it in the background, print its run id and return (it goes on after this command)")
    cmd.add_argument("--json", action="store_true",
                     help="the ended run as a JSON object on stdout (the keys of `nbsubagents show --json`)")
    cmd.set_defaults(handler=run_preset, usage_error=cmd.error)


def _task(args: argparse.Namespace) -> str:
    words, source = args.task, args.task_file
    if words and source is not None:
        args.usage_error("give the task as words or with --task-file, not both")
    if source is None and words == ["-"]:
        source = "-"
    if source is None:
        if not words:
            args.usage_error("no task: give it as words (nbsubagents run PRESET what to do), - to read it from "
                             "stdin, or --task-file FILE")
        return " ".join(words)
    if source == "-":
        return sys.stdin.read()
    try:
        with open(source, encoding="utf-8") as fh:
            return fh.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise NbSubagentsError(f"--task-file {source}: cannot read it ({exc}): give a readable UTF-8 text file, "
                               "or - for stdin") from None


def _no_variables(name: str) -> Any:
    raise NbSubagentsError(f"--with {name}: the command line has no variables; give a file or folder as "
                           f"{name}=PATH, or values as JSON: --with '{{\"{name}\": ...}}'")


def exit_code(run: Any) -> int:
    """How a run ended, as the exit status of ``nbsubagents run`` (``RUN_CODES``)."""
    if run.status == "completed":
        return 0
    if run.status == "aborted":
        return ABORTED
    return TIMED_OUT if (run.result or {}).get("stopReason") == "timeout" else FAILED


def run_preset(args: argparse.Namespace) -> int:
    task = _task(args)
    values = {opt.name: _value(opt, given) for opt in options("call")
              if (given := getattr(args, opt.name)) is not None}
    if isinstance(values.get("inputs"), list):  # --with NAME=PATH (repeatable); JSON: {"NAME": value, ...}
        values["inputs"] = inputs.names_of(values["inputs"], _no_variables, "--with")
    if args.bg:
        run = api.start(args.preset, task, show=False, executor=args.executor, **values)
        echo(run.id)
        return 0
    run = api.run(args.preset, task, executor=args.executor, **values)
    facts = run_facts(run)
    if args.json:
        echo_json(facts)
    elif facts["output"]:
        echo(facts["output"].rstrip("\n"))  # how it ended, and its error, are the progress's last lines
    return exit_code(run)
