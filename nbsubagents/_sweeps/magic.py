"""``%%subagent_experiment NAME``: a sweep in one cell, its YAML body naming tasks, presets, models, repeats
and shell-check scorers. Loaded by ``%load_ext nbsubagents`` next to the other magics."""

from __future__ import annotations

from typing import Any

import yaml
from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, magics_class, no_var_expand
from IPython.core.magic_arguments import argument, magic_arguments

from .._lifecycle.spec import options
from .._magic_args import parse, usage_errors, yaml_error
from .experiment import experiment

# The experiment's own keys; every run option TaskSpec gives a whole sweep follows (keys()).
OWN_KEYS = ("tasks", "presets", "models", "harnesses", "repeats", "concurrency", "scorers", "background", "executor",
            "replace", "scorer_timeout", "retries", "max_failures", "max_total_cost")
EXAMPLE = ("tasks:\n  - read README.md\n  - ls src\npresets: [scout, scribe]\nmodels: [demo/scripted]\nrepeats: 3\n"
           "scorers:\n  - test -f README.md\n  - {check: 'grep -q Demo README.md', name: has_title}")


def keys() -> tuple[str, ...]:
    """The keys a cell may have: the experiment's own, then the run options of every run (``TaskSpec``)."""
    return (*OWN_KEYS, *(opt.name for opt in options("sweep")))


def parse_body(text: str) -> dict[str, Any]:
    """The cell's YAML as experiment() arguments; what is wrong is said with an example of what is right."""

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise UsageError(f"{yaml_error(exc, 'subagent_experiment')}\nExample:\n{EXAMPLE}") from None
    if not isinstance(data, dict) or "tasks" not in data:
        raise UsageError(f"%%subagent_experiment: the cell must be a YAML mapping with at least 'tasks', got "
                         f"{type(data).__name__}. Example:\n{EXAMPLE}")
    known = keys()
    unknown = set(data) - set(known)
    if unknown:
        raise UsageError(f"%%subagent_experiment: unknown key(s) {', '.join(sorted(map(str, unknown)))}; the cell may "
                         f"have {', '.join(known)}")
    scorers = data.get("scorers") or []
    if not isinstance(scorers, list):
        raise UsageError("%%subagent_experiment: 'scorers' is a list of shell commands (or {check: ..., name: ...})")
    return data


@magics_class
class ExperimentMagics(Magics):
    """``%%subagent_experiment NAME``."""

    @no_var_expand
    @magic_arguments()
    @argument("name", metavar="NAME", help="the experiment's name (a name used before resumes it)")
    @argument("-o", "--out", metavar="VAR", help="also store the Experiment in this variable")
    @usage_errors
    @cell_magic
    def subagent_experiment(self, line: str, cell: str) -> Any:
        """Run a sweep whose YAML body names ``tasks``, ``presets``, ``models``, ``harnesses``, ``repeats``,
        ``concurrency`` and ``scorers`` (shell checks: a command, or ``{check: CMD, name: N, timeout: S}``), and
        optionally ``isolation: worktree``, the budgets (``max_turns``, ...), ``output_schema`` and the other run
        options for every run, ``executor: dask``, and the stop rules ``retries`` (extra attempts of a run the
        infrastructure cut short), ``max_failures`` and ``max_total_cost`` (USD, the whole sweep); the
        ``Experiment`` is the cell's value (its comparison table)."""
        args = parse(self.subagent_experiment, line)
        exp = experiment(args.name, **parse_body(cell))
        if args.out:
            self.shell.user_ns[args.out] = exp
        return exp
