"""The ``%subagent`` magics: ``%load_ext nbsubagents``, then delegate from cells.

Each magic parses its line with ``IPython.core.magic_arguments`` (so ``%subagent?`` shows the usage
and a wrong flag is a ``UsageError``, never ``SystemExit``) and then calls the public function a
user would call: ``run``, ``run_parallel``, ``start``, ``status``, ``presets``, ``cancel``, ``report``,
``steer``, ``follow_up``, ``answer``.

Task text reaches the child as written: the task magics are ``@no_var_expand``, so ``{``, ``}`` and
``$`` are not interpolated; ``--expand`` opts in to IPython's ``$name`` / ``{expression}`` expansion
with the notebook's variables. ``%subagent_status`` and ``%subagent_cancel`` take a run id and keep
IPython's usual expansion, so ``%subagent_cancel {job.run_id}`` works.

This module imports IPython; ``import nbsubagents`` does not import it (the extension hooks in
``nbsubagents/__init__.py`` load it on ``%load_ext``).
"""

from __future__ import annotations

import re
import shlex
from typing import Any, Callable

import yaml
from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_cell_magic, line_magic, magics_class, no_var_expand
from IPython.core.magic_arguments import argument, magic_arguments
from IPython.utils.text import DollarFormatter

from nbsubagents import _api as api
from nbsubagents._child.text import terminal_safe
from nbsubagents._lifecycle import converse, inputs
from nbsubagents._lifecycle.spec import check_shape
from nbsubagents._preset_files import write as preset_write
from nbsubagents._magic_args import (
    check_var,
    parse,
    run_option_arguments,
    run_option_values,
    usage,
    usage_errors,
    yaml_error,
)
from nbsubagents._magic_completion import register_completer, suggest, unregister_completer
from nbsubagents._sweeps.magic import ExperimentMagics
from nbsubagents._ui import attach
from nbsubagents._ui.display import widgets_available

__all__ = ["RunList", "SubagentMagics", "load_ipython_extension", "parse_task_list", "suggest",
           "unload_ipython_extension"]

_EXECUTOR_HELP = "where the runs go: local, or dask (the default Dask client, else settings' dask_scheduler)"
_MAGIC_NAMES = {"line": ("subagent", "subagent_status", "subagent_presets", "subagent_cancel", "subagent_report",
                         "subagent_preset", "subagent_steer", "subagent_followup", "subagent_answer",
                         "subagent_approve"),
                "cell": ("subagent", "subagents", "subagent_experiment", "subagent_preset")}
# A word of a magic line: runs of plain characters and quoted strings (quotes may hold spaces).
_WORD = re.compile(r"""\s*((?:[^\s"']+|"[^"]*"|'[^']*')+)""")


# -- helpers --------------------------------------------------------------------------------------
def _split_line(magic: Callable[..., Any], line: str) -> tuple[str, str]:
    """Split ``%subagent`` arguments into the options-and-preset part and the raw task text.

    Options may come before and right after the preset; the first other word starts the task, which
    is kept exactly as typed (no shell-style quote handling). ``--`` ends the options.
    """
    parser = magic.parser  # type: ignore[attr-defined]
    takes_value = {flag for flag, action in parser._option_string_actions.items() if action.nargs != 0}
    pos, have_preset, expect_value = 0, False, False
    while True:
        match = _WORD.match(line, pos)
        if match is None:
            return line, ""
        word = match.group(1)
        if expect_value:
            expect_value = False
        elif word == "--":
            if have_preset:
                return line[:match.start(1)], line[match.end():].strip()
            nxt = _WORD.match(line, match.end())
            if nxt is None:
                return line[:match.start(1)], ""
            return line[:match.start(1)] + nxt.group(1), line[nxt.end():].strip()
        elif word.startswith("-") and len(word) > 1:
            expect_value = "=" not in word and word in takes_value
        elif not have_preset:
            have_preset = True
        else:
            return line[:match.start(1)], line[match.start(1):].strip()
        pos = match.end()


_EXAMPLE = ("- preset: scout\n  task: read README.md\n- preset: scribe\n  task: 'write NOTES.md: hello'\n"
            "  name: writer")  # a task with ': ' in it needs quotes (or a | block) in YAML


@usage_errors
def parse_task_list(text: str) -> list[dict[str, Any]]:
    """The tasks of a ``%%subagents`` cell: a YAML list of ``{preset, task, model?, cwd?, name?, timeout?,
    files?, resume?}`` (``nbsubagents._lifecycle.spec``'s keys).

    Raises ``UsageError`` naming the item (its number and line) and what is wrong with it.
    """

    try:
        node = yaml.compose(text)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise UsageError(f"{yaml_error(exc, 'subagents')}\nExpected a list of tasks, e.g.:\n{_EXAMPLE}") from None
    if data is None:
        raise UsageError(f"%%subagents needs tasks in the cell body: a YAML list such as\n{_EXAMPLE}")
    if not isinstance(data, list):
        raise UsageError(f"%%subagents: the cell must be a YAML list of tasks (one '- preset: ...' item each), "
                         f"got a {type(data).__name__}. For example:\n{_EXAMPLE}")
    lines = [item.start_mark.line + 1 for item in getattr(node, "value", [])]
    tasks = []
    for index, item in enumerate(data):
        where = f"item {index + 1}" + (f" (line {lines[index]})" if index < len(lines) else "")
        if not isinstance(item, dict):
            raise UsageError(f"%%subagents: {where} must be a mapping with 'preset' and 'task', got {item!r}")
        for key in ("preset", "task"):
            if key not in item:
                raise UsageError(f"%%subagents: {where} has no '{key}': every item needs 'preset' and 'task'")
            if not isinstance(item[key], str) or not item[key].strip():
                raise UsageError(f"%%subagents: {where}: '{key}' must be non-empty text, got {item[key]!r}")
        check_shape(item, f"%%subagents: {where}")  # the one task schema of run/run_parallel/start
        tasks.append(dict(item))
    return tasks


# -- the cell's value -------------------------------------------------------------------------------
class RunList(list):
    """The runs of a ``%%subagents`` cell (a plain list otherwise)."""


def _panel_shown() -> bool:
    return widgets_available()


def _shown_value(value: Any) -> Any:
    """The magic's value, marked so this cell does not draw it twice.

    In a notebook with widgets the run's live panel is already in the cell's output; drawing the
    returned ``Run`` again would add a second panel (a still "running" copy for ``--bg``). So until the
    cell ends the value displays as nothing, while IPython still keeps it as the cell's value (``_``,
    ``Out[n]``): the ui's display formatters consult ``attach.mark_shown``'s set, which ``_forget_shown``
    (after every cell) empties. Nothing is stored on the value.
    """
    if _panel_shown():
        attach.mark_shown(value)
    return value


def _forget_shown(*_: Any) -> None:
    attach.forget_shown()


# -- the magics -----------------------------------------------------------------------------------
@magics_class
class SubagentMagics(Magics):
    """``%subagent``, ``%%subagent``, ``%%subagents``, ``%subagent_status``, ``%subagent_presets``,
    ``%subagent_cancel``, ``%subagent_report``, ``%subagent_preset``/``%%subagent_preset``, and the talking ones:
    ``%subagent_steer``, ``%subagent_followup``, ``%subagent_answer``, ``%subagent_approve``."""

    def _expand(self, text: str) -> str:
        """``--expand``: ``$name`` and ``{expression}`` from the notebook's variables (IPython's rules)."""

        formatter = DollarFormatter()
        try:  # line by line, as IPython expands a magic's line (its patterns stop at a newline)
            return "\n".join(formatter.vformat(part, args=[], kwargs=self.shell.user_ns)
                             for part in text.split("\n"))
        except Exception as exc:  # a missing name, a bad expression: say which, run nothing
            raise UsageError(f"--expand could not fill in the task: {type(exc).__name__}: {exc}. "
                             "Without --expand the task is sent exactly as written.") from None

    def _variable(self, name: str) -> Any:
        """``--with NAME``: the notebook's variable NAME (never an expression: nothing is evaluated)."""
        if name not in self.shell.user_ns:
            raise UsageError(f"--with {name}: the notebook has no variable {name!r}; define it first, or give a file "
                             f"as {name}=PATH")
        return self.shell.user_ns[name]

    def _store(self, var: str | None, value: Any) -> Any:
        if var:
            self.shell.user_ns[var] = value
        return _shown_value(value)

    @no_var_expand
    @magic_arguments()
    @argument("preset", nargs="?", metavar="PRESET", help="the preset to run (api.presets() lists them)")
    @argument("task", nargs="*", metavar="TASK",
              help="%%subagent only: the task (in a %%%%subagent cell it is the cell body)")
    @run_option_arguments
    @argument("--executor", choices=("local", "dask"), help=_EXECUTOR_HELP + "; default: settings")
    @argument("--bg", action="store_true", help="start in the background (api.start) and return at once")
    @argument("--expand", action="store_true",
              help="fill in $name and {expression} from the notebook's variables (off: the task is sent as written)")
    @argument("--schema", metavar="NAME", help="output_schema: the notebook's variable NAME, a pydantic model, "
                                               "dataclass or TypedDict class or a JSON Schema dict")
    @argument("-o", "--out", metavar="VAR", help="also store in this variable the run's typed value once it "
                                                 "completes (run.value: its output_schema instance, its outputs) "
                                                 "or, without output_schema and outputs (or with --bg), the Run")
    @usage_errors
    @line_cell_magic
    def subagent(self, line: str, cell: str | None = None) -> Any:
        """Run one sub-agent: ``%subagent PRESET TASK...`` or ``%%subagent PRESET`` with the task as the body.

        The run's live panel (or its text progress) shows while it runs; the finished ``Run`` is the
        cell's value (with ``--bg``, the started ``Run`` at once), drawn once: its panel is already
        there. Options go before the task; ``--`` ends them.
        """
        if cell is None:
            options, task = _split_line(self.subagent, line)
        else:
            options, task = line, cell
        args = parse(self.subagent, options)
        if args.task:
            raise UsageError(f"%%subagent takes its task from the cell body; the line has only PRESET and "
                             f"options (got {' '.join(args.task)!r})\nUsage: {usage(self.subagent)}")
        if not args.preset:
            names = ", ".join(p.name for p in api.presets()) or "none found"
            raise UsageError(f"Name a preset first (available: {names})\nUsage: {usage(self.subagent)}")
        check_var(args.out)
        if args.expand:
            task = self._expand(task)
        launch = api.start if args.bg else api.run
        options = run_option_values(args)
        if options.get("inputs") is not None:  # --with df,params: the notebook's variables of these names
            options["inputs"] = inputs.names_of(options["inputs"], self._variable, "--with")
        if args.schema is not None:
            if args.schema not in self.shell.user_ns:
                raise UsageError(f"--schema {args.schema}: the notebook has no variable of that name; define the "
                                 "class (or JSON Schema dict) first")
            options["output_schema"] = self.shell.user_ns[args.schema]
        result = launch(args.preset, task, executor=args.executor, **options)
        if args.out and not args.bg and (result.record.output_schema is not None or result.record.outputs):
            self._store(args.out, result.value if result.status == "completed" else None)
            return _shown_value(result)
        return self._store(args.out, result)

    @no_var_expand
    @magic_arguments()
    @argument("--concurrency", type=int, metavar="N", help="how many run at once (default: settings, 4)")
    @argument("--executor", choices=("local", "dask"), help=_EXECUTOR_HELP + "; default: settings")
    @argument("--expand", action="store_true",
              help="fill in $name and {expression} in the body from the notebook's variables")
    @argument("-o", "--out", metavar="VAR", help="also store the list of Runs in this variable")
    @usage_errors
    @cell_magic
    def subagents(self, line: str, cell: str) -> Any:
        """Run several sub-agents in parallel; the cell body is a YAML list of tasks::

            - preset: scout
              task: read README.md
            - preset: scribe
              task: 'write NOTES.md: hello'   # quoted: it holds ': '
              name: writer       # optional, as are model, cwd, timeout, files and resume

        One group panel shows them all; the list of finished ``Run``s is the cell's value.
        """
        args = parse(self.subagents, line)
        check_var(args.out)
        tasks = parse_task_list(self._expand(cell) if args.expand else cell)
        runs = api.run_parallel(tasks, concurrency=args.concurrency, executor=args.executor)
        return self._store(args.out, RunList(runs))

    @magic_arguments()
    @argument("run_id", nargs="?", metavar="RUN_ID", help="one run (its id or a unique prefix) with its result")
    @argument("--all", action="store_true", help="every run of this project, not only the active ones")
    @usage_errors
    @line_magic
    def subagent_status(self, line: str) -> Any:
        """Counts and a table of this project's runs (active ones unless --all), or one run's details."""
        args = parse(self.subagent_status, line)
        return api.status(args.run_id, include_completed=args.all)

    @magic_arguments()
    @usage_errors
    @line_magic
    def subagent_presets(self, line: str) -> Any:
        """The presets a run can name here (project presets override global ones)."""
        parse(self.subagent_presets, line)
        return api.presets()

    @magic_arguments()
    @argument("run_id", metavar="RUN_ID", help="the run to cancel: its id or a unique prefix")
    @usage_errors
    @line_magic
    def subagent_cancel(self, line: str) -> None:
        """Cancel a run (any kernel's) by id or prefix; says whether it had already ended."""
        args = parse(self.subagent_cancel, line)
        cancelled = api.cancel(args.run_id)
        print(f"Cancelling run {args.run_id}" if cancelled else f"Run {args.run_id} had already ended")

    def _run_and_text(self, magic: Callable[..., Any], line: str, *, question: bool = False
                      ) -> tuple[str, str | None, str]:
        """A talking magic's line: the run (IPython's ``{expression}`` and ``$name`` expanded in it alone, so
        ``{job.run_id}`` works), with ``question``: an optional ``--question ID``, then the text as typed."""
        match = _WORD.match(line)
        if match is None:
            raise UsageError(f"Name a run first: its id or a unique prefix\nUsage: {usage(magic)}")
        run_id = self.shell.var_expand(match.group(1).strip("'\""))
        rest, chosen = line[match.end():], None
        flag = _WORD.match(rest)
        if question and flag is not None and flag.group(1) == "--question":
            value = _WORD.match(rest, flag.end())
            if value is None:
                raise UsageError(f"--question needs the question's id\nUsage: {usage(magic)}")
            chosen, rest = value.group(1), rest[value.end():]
        return run_id, chosen, rest.strip()

    @no_var_expand
    @magic_arguments()
    @argument("run_id", metavar="RUN_ID", help="the run: its id or a unique prefix ({job.run_id} works)")
    @argument("text", nargs="*", metavar="TEXT", help="what to tell it, as typed (not expanded)")
    @usage_errors
    @line_magic
    def subagent_steer(self, line: str) -> None:
        """Tell a running run something: the child reads it after its current tool call."""
        run_id, _, text = self._run_and_text(self.subagent_steer, line)
        api.steer(run_id, text)
        print(f"Steered run {run_id}: the child reads it after its current tool call")

    @no_var_expand
    @magic_arguments()
    @argument("run_id", metavar="RUN_ID", help="the run: its id or a unique prefix ({job.run_id} works)")
    @argument("text", nargs="*", metavar="TEXT", help="the next message, as typed (not expanded)")
    @usage_errors
    @line_magic
    def subagent_followup(self, line: str) -> Any:
        """Follow up on a run after its current turn; a run that has ended is continued by a new run (the
        cell's value, with its panel) that resumes its session."""
        run_id, _, text = self._run_and_text(self.subagent_followup, line)
        run = api.get_run(run_id)
        continued = run.follow_up(text)
        if continued is run:
            print(f"Followed up run {run.run_id}: the child reads it after its current turn")
            return None
        return _shown_value(continued)

    @no_var_expand
    @magic_arguments()
    @argument("run_id", metavar="RUN_ID", help="the run: its id or a unique prefix ({job.run_id} works)")
    @argument("--question", metavar="ID", help="which open question (its id or a prefix); default: the oldest")
    @argument("text", nargs="*", metavar="TEXT",
              help="the answer, as typed: text, an option (or its number from 1), or allow/yes/deny/no")
    @usage_errors
    @line_magic
    def subagent_answer(self, line: str) -> None:
        """Answer the question a run waits on (``run.questions`` lists them)."""
        run_id, chosen, text = self._run_and_text(self.subagent_answer, line, question=True)
        asked = api.answer(run_id, text, question=chosen)
        print(terminal_safe(f"Answered run {run_id}: {converse.describe(asked)}: {asked['answer']}"))

    @magic_arguments()
    @argument("run_id", metavar="RUN_ID", help="the run: its id or a unique prefix")
    @argument("decision", choices=("allow", "deny"), help="allow or deny")
    @argument("--question", metavar="ID", help="which open approval (its id or a prefix); default: the oldest")
    @usage_errors
    @line_magic
    def subagent_approve(self, line: str) -> None:
        """Allow or deny what a run asks approval for."""
        args = parse(self.subagent_approve, line)
        asked = api.get_run(args.run_id).approve(args.decision == "allow", question=args.question)
        print(terminal_safe(f"{'Allowed' if asked['answer'] else 'Denied'} for run {args.run_id}: "
                            f"{converse.describe(asked)}"))

    @magic_arguments()
    @argument("run_ids", nargs="*", metavar="RUN_ID",
              help="runs to report (ids or unique prefixes); default: every run of this project (narrowed by --since)")
    @argument("--since", metavar="AGE", help='only runs started since then, e.g. "2h" or an ISO time')
    @argument("--md", action="store_true", help="Markdown (for an issue) instead of self-contained HTML")
    @argument("-o", "--out", metavar="PATH", help="where to write it (default: .pi/subagents/reports/)")
    @usage_errors
    @line_magic
    def subagent_report(self, line: str) -> None:
        """Write a report of runs you can send (``api.report``): one self-contained HTML file, or
        Markdown with --md, secrets masked; prints where it went."""
        args = parse(self.subagent_report, line)
        if args.run_ids:
            if args.since:
                raise UsageError("give RUN_IDs or --since, not both")
            target: Any = [api.get_run(run_id) for run_id in args.run_ids]
        else:
            target = api.runs(since=args.since)
            if len(target) == 0:
                raise UsageError("No runs to report" + (f" since {args.since}" if args.since else " in this project"))
        path = api.report(target, args.out, format="md" if args.md else None)
        count = len(target)
        print(f"Report of {count} run{'' if count == 1 else 's'}: {path}")

    @no_var_expand
    @magic_arguments()
    @argument("words", nargs="*", metavar="ARGS",
              help="the line: list | show NAME | set NAME FIELD=VALUE... | copy NAME NEW | delete NAME; "
                   "the cell: NAME")
    @argument("--global", dest="global_scope", action="store_true",
              help="in pi's agent dir (subagents/) instead of the project's .pi/subagents/")
    @argument("--replace", action="store_true", help="%%%%subagent_preset: replace a preset of that name")
    @usage_errors
    @line_cell_magic
    def subagent_preset(self, line: str, cell: str | None = None) -> Any:
        """Make and change presets from a cell.

        ``%%subagent_preset NAME [--global] [--replace]``: the cell is the whole preset file (YAML frontmatter
        between ``---`` lines, then the prompt), checked by the parser that reads presets, then written.

        ``%subagent_preset list``, ``show NAME``, ``set NAME FIELD=VALUE...`` (``FIELD=`` removes a field;
        ``prompt=...`` replaces the body), ``copy NAME NEW [--global]``, ``delete NAME [--global]``: as
        ``nbsubagents presets`` in a shell.
        """
        try:  # shell-style words: set NAME "description=Reads and reports" keeps its words together
            args = self.subagent_preset.parser.parse_args(shlex.split(line))
        except (UsageError, ValueError) as exc:  # ValueError: an unclosed quote
            raise UsageError(f"{exc}\nUsage: {usage(self.subagent_preset)}") from None
        scope = "global" if args.global_scope else "project"
        words = args.words
        if cell is not None:
            if len(words) != 1:
                raise UsageError(f"%%subagent_preset takes one NAME on its line, got {' '.join(words) or 'none'}"
                                 f"\nUsage: {usage(self.subagent_preset)}")
            made = preset_write.write_text(words[0], cell, scope=scope, replace=args.replace)
            print(f"Wrote {made.scope} preset {made.name}: {made.path}")
            return None
        action, rest = (words[0], words[1:]) if words else ("list", [])
        count = {"list": 0, "show": 1, "copy": 2, "delete": 1, "set": None}.get(action, -1)  # set: NAME and fields
        fits = len(rest) >= 2 if count is None else len(rest) == count
        if args.replace or not fits:
            raise UsageError("%subagent_preset list | show NAME | set NAME FIELD=VALUE... | copy NAME NEW "
                             "[--global] | delete NAME [--global]; a new preset: %%subagent_preset NAME with the "
                             f"file in the cell (got: {line.strip() or 'nothing'})")
        if action == "list":
            return api.presets()
        if action == "show":
            path, where = preset_write.visible_file(rest[0])
            print(f"# {where} preset {rest[0]}: {path}\n{path.read_text(encoding='utf-8-sig')}", end="")
        elif action == "set":
            changed = preset_write.edit_fields(rest[0], preset_write.parse_assignments(rest[1:]))
            print(f"Changed {changed.scope} preset {changed.name}: {changed.path}")
        elif action == "copy":
            made = api.copy_preset(rest[0], rest[1], scope=scope)
            print(f"Copied {rest[0]} to {made.scope} preset {made.name}: {made.path}")
        else:
            print(f"Deleted {scope} preset {rest[0]}: {api.delete_preset(rest[0], scope=scope)}")
        return None


# -- the extension ----------------------------------------------------------------------------------
def load_ipython_extension(shell: Any) -> None:
    """Register the magics and the completer (again on ``%reload_ext``: nothing is registered twice)."""
    shell.register_magics(SubagentMagics)
    shell.register_magics(ExperimentMagics)
    register_completer(shell)
    _unregister_event(shell)
    shell.events.register("post_run_cell", _forget_shown)
    shell.display_formatter.ipython_display_formatter.for_type(RunList, attach.skip_if_shown)
    api.wire()  # what the kernel's side of a run is lent (the edge), and Run's display
    attach.register_display(shell)  # in this shell


def _unregister_event(shell: Any) -> None:
    try:
        shell.events.unregister("post_run_cell", _forget_shown)
    except ValueError:
        pass


def unload_ipython_extension(shell: Any) -> None:
    """Remove the magics and the completer; runs already started are not touched."""
    for kind, names in _MAGIC_NAMES.items():
        table = shell.magics_manager.magics[kind]
        for name in names:
            table.pop(name, None)
    unregister_completer(shell)
    _unregister_event(shell)
