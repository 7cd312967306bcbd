"""One task, before it becomes a run: ``TaskSpec``, the ONE declaration of the run options, and their checks.

Each field of ``TaskSpec`` carries an ``Option`` in its metadata (help text, how a magic line spells and
parses it, which faces take it, the shape check of a value given in a mapping). Every face derives its
options from it, at the time it is used:

- the shape check of a task given as a mapping (``run_parallel``'s items, the ``%%subagents`` YAML keys):
  ``check_shape``, ``task_keys()``;
- ``run()``/``start()``'s keyword options and their signature: ``options("call")``, ``spec_from_call``;
- ``%subagent``'s flags: ``options("magic")`` (``nbsubagents._magic_args.run_option_arguments``);
- ``nbsubagents run``'s flags: ``options("call")`` (``nbsubagents._cli_run``);
- ``experiment()``'s options for every run and ``%%subagent_experiment``'s keys: ``options("sweep")``, and
  the per-task columns of an experiment's task table: ``options("column")``.

So a new run option is one field here (plus what it does, in ``prepare``). The shape is checked here (types,
known keys); what needs the project (the preset exists, the cwd is a directory, the run to resume) is
``prepare``'s.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from .._child import harnesses
from .. import _config as config
from .._child.errors import positive_seconds
from .._config import NbSubagentsError
from .._preset_files.parse import approval_policy, model_list
from .._preset_files.shared_fields import delegate_presets

__all__ = ["TaskSpec", "Option", "option", "options", "task_keys", "TASK_KEYS", "as_spec", "spec_from_call",
           "UnknownOption", "unknown_names", "call_options", "check_shape", "check_task", "check_cwd",
           "check_isolation", "resolve"]

FACES = ("call", "magic", "sweep", "column")


@dataclass(frozen=True)
class Option:
    """What the faces need to know of one run option (a ``TaskSpec`` field's metadata, ``option(...)``).

    ``help`` documents it everywhere (``%subagent?``, ``help(run)``); ``check(value, where, key)`` is its shape
    check in a task mapping (None: ``prepare`` checks it); ``parse`` turns a magic line's (or the command line's)
    word into the value, ``metavar`` names that word and ``flag`` spells it (default ``--the-name``; ``repeat``:
    the flag may come again and collects a list; ``structured``: the value may be a list or a mapping, which the
    command line takes as JSON). ``call``: ``run()``/``start()`` (and ``nbsubagents run``) take it; ``magic``:
    ``%subagent`` takes it; ``sweep``: ``experiment()``/``%%subagent_experiment`` give it to every run;
    ``column``: an experiment's task may set it for its own runs. ``usage_order`` places the flag in a magic's
    usage (default: the field's place). ``preset`` and ``setting`` are the layers below the call that may give it:
    the preset's field (``budget.max_turns``: a key of its budget) and the settings key (``resolve`` applies the
    precedence).
    """

    help: str
    check: Callable[[Any, str, str], None] | None = None
    parse: Callable[[str], Any] = str
    metavar: str = "X"
    flag: str | None = None
    repeat: bool = False
    call: bool = True
    magic: bool = True
    sweep: bool = True
    column: bool = False
    usage_order: float | None = None
    structured: bool = False
    preset: str | None = None
    setting: str | None = None
    name: str = ""

    @property
    def spelling(self) -> str:
        """The magic line's flag: ``--max-turns`` for ``max_turns`` unless ``flag`` says otherwise."""
        return self.flag or "--" + self.name.replace("_", "-")

    def takes(self, face: str) -> bool:
        if face not in FACES:
            raise ValueError(f"face must be one of {', '.join(FACES)}, got {face!r}")
        return bool(getattr(self, face))


def option(help: str, *, default: Any = None, **how: Any) -> Any:
    """A ``TaskSpec`` field that is a run option: ``dataclasses.field`` with its ``Option`` as metadata."""
    return field(default=default, metadata={"option": Option(help, **how)})


# -- the shape checks of a value given in a task mapping ------------------------------------------------------
def _text(value: Any, where: str, key: str) -> None:
    if value is not None and not isinstance(value, str):
        raise NbSubagentsError(f"{where}: '{key}' must be text, got {value!r}")


def _harness(value: Any, where: str, key: str) -> None:
    if value is not None and (not isinstance(value, str) or not harnesses.known(value)):
        raise NbSubagentsError(f"{where}: '{key}' must be one of {', '.join(harnesses.names())}, got {value!r}")


def _path(value: Any, where: str, key: str) -> None:
    if value is not None and not isinstance(value, (str, Path)):
        raise NbSubagentsError(f"{where}: '{key}' must be text, got {value!r}")


def _seconds(value: Any, where: str, key: str) -> None:
    if value is not None:
        positive_seconds(value, f"{where}: '{key}'")


def _paths(value: Any, where: str, key: str) -> None:
    if value is not None and (isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple))):
        raise NbSubagentsError(f"{where}: '{key}' must be a list of paths, got {value!r}")


def _inputs(value: Any, where: str, key: str) -> None:
    if value is not None and not isinstance(value, Mapping):
        raise NbSubagentsError(f"{where}: '{key}' must be a dict of names to values, such as {{'df': df}}; got "
                               f"{type(value).__name__}")


def input_words(text: str) -> list[str]:
    """A magic line's (or the command line's) ``--with`` value: names (``df,params``) or ``NAME=PATH``."""
    words = [w.strip() for w in text.split(",") if w.strip()]
    if not words:
        raise ValueError(text)
    return words


def _flag(value: Any, where: str, key: str) -> None:
    if value is not None and not isinstance(value, bool):
        raise NbSubagentsError(f"{where}: '{key}' must be True or False, got {value!r}")


def _approval(value: Any, where: str, key: str) -> None:
    approval_policy(value, f"{where}: '{key}'")


def _models(value: Any, where: str, key: str) -> None:
    model_list(value, f"{where}: '{key}'")


def _outputs(value: Any, where: str, key: str) -> None:
    if value is not None and not isinstance(value, Mapping):
        raise NbSubagentsError(f"{where}: '{key}' must be a mapping of names to what each file holds, such as "
                               f"{{'clean': pandas.DataFrame}}, got {value!r}")


def _delegate(value: Any, where: str, key: str) -> None:
    delegate_presets(value, f"{where}: '{key}'")


def _delegate_word(word: str) -> Any:
    """A magic line's ``--delegate``: yes/no, or a preset name (the flag may come again)."""
    try:
        return yes_no(word)
    except ValueError:
        return word


def _whole(value: Any, where: str, key: str) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        raise NbSubagentsError(f"{where}: '{key}' must be a whole number of at least 0, got {value!r}")


def yes_no(word: str) -> bool:
    """A magic line's yes/no (also true/false, on/off)."""
    found = {"yes": True, "true": True, "on": True, "no": False, "false": False, "off": False}.get(word.lower())
    if found is None:
        raise ValueError(word)
    return found


_INTERNAL = dict(call=False, magic=False, sweep=False)  # set by experiment(), not by a caller


@dataclass
class TaskSpec:
    """One task of a call, before it becomes a run; each optional field is a run option (``option(...)``)."""

    preset: str = field(metadata={"option": Option("the preset to run (nbsubagents.presets() lists them)",
                                                   metavar="PRESET", **_INTERNAL)})
    task: str = field(metadata={"option": Option("what the sub-agent should do", metavar="TASK", **_INTERNAL)})
    model: str | None = option("the model as provider/id, instead of the preset's", check=_text, metavar="M",
                               sweep=False, preset="model")  # an experiment's grid sets it
    cwd: str | None = option("the directory the sub-agent works in (default: the current one)", check=_path,
                             metavar="DIR", column=True)
    name: str | None = option("a name for the run (default: the preset's)", check=_text, metavar="N",
                              sweep=False, usage_order=5.5)  # an experiment names each cell's run
    timeout: float | None = option("seconds before the run is stopped (default: preset, settings, 600)",
                                   check=_seconds, parse=float, metavar="S", column=True, preset="timeout",
                                   setting="timeout")
    files: list[Any] | None = option("put this file's contents before the task (repeatable)", check=_paths,
                                     metavar="PATH", flag="--file", repeat=True, column=True, structured=True)
    resume: str | None = option("continue an earlier run (its id or a unique prefix)", check=_text,
                                metavar="RUN_ID", sweep=False)
    isolation: str | None = option("work in a fresh git worktree (or copy); see run.apply()", metavar="worktree",
                                   preset="isolation", setting="isolation")
    keep_worktree: bool | None = option("keep the worktree after the run (isolation='worktree')", parse=yes_no,
                                        metavar="yes|no", magic=False)
    max_turns: int | None = option("budget: stop after N turns", parse=int, metavar="N",
                                   preset="budget.max_turns", setting="max_turns")
    max_tool_calls: int | None = option("budget: stop after N tool calls", parse=int, metavar="N",
                                        preset="budget.max_tool_calls", setting="max_tool_calls")
    max_tokens: int | None = option("budget: stop once N tokens are spent", parse=int, metavar="N",
                                    preset="budget.max_tokens", setting="max_tokens")
    max_cost: float | None = option("budget: stop once the cost reaches X", parse=float, metavar="X",
                                    preset="budget.max_cost", setting="max_cost")
    ask: bool | None = option("the sub-agent may ask the notebook questions (its tool `ask`); default: the "
                              "preset's ask", check=_flag, parse=yes_no, metavar="yes|no", preset="ask")
    approval: Any = option("tool calls that need the notebook's approval: tools such as ['bash', 'edit'], or "
                           "{'tools': [...], 'allow': [bash patterns], 'inside': [folders], 'otherwise': 'deny'}; "
                           "False: none (default: the preset's approval)", check=_approval, metavar="TOOL",
                           repeat=True, structured=True, preset="approval")
    fallback_models: list[str] | None = option("models to go on with when the model fails for provider reasons "
                                               "(HTTP 429/5xx, quota, authentication); default: the preset's "
                                               "fallbackModels", check=_models, metavar="M", flag="--fallback-model",
                                               repeat=True, structured=True, preset="fallback_models")
    output_schema: Any = option("a JSON Schema dict, or a pydantic model, dataclass or TypedDict class: a typed "
                                "result in run.data (an instance of the class)", metavar="SCHEMA", magic=False,
                                structured=True)
    outputs: dict[str, Any] | None = option("files the sub-agent must write, read back as objects in run.outputs: "
                                            "{'clean': pandas.DataFrame (Parquet), 'raw': 'csv', 'stats': 'json', "
                                            "'fig': 'png'}", check=_outputs, metavar="FILES", magic=False,
                                            sweep=False, structured=True)
    max_repairs: int | None = option("how often a reply or output file that fails its check is asked again, in the "
                                     "same session, before the run fails (default: 2)", check=_whole, parse=int,
                                     metavar="N")
    harness: str | None = option("the agent harness: pi, claude-code or codex (default: the preset's, else pi)",
                                 check=_harness, metavar="H", sweep=False, preset="harness")  # a grid sets it
    project_config: bool | None = option("the agent loads the configuration the project it works in has for it (hooks, "
                                         "extensions, MCP servers, settings: code that runs); default: the preset's "
                                         "projectConfig, else no", check=_flag, parse=yes_no, metavar="yes|no",
                                         preset="project_config")
    inputs: Any = option(
        "values the sub-agent gets as files in its run folder, by name: {'df': df, 'params': {...}} (a DataFrame as "
        "Parquet with a card, a NumPy array, text, JSON-able values, a Figure, a pathlib.Path copied read-only, "
        "nbsubagents.pickled(x)); a magic names the notebook's variables (--with df,params), the command line "
        "files (--with data=PATH)", check=_inputs, parse=input_words, metavar="NAME", flag="--with", repeat=True,
        column=True, structured=True)
    python_session: bool | None = option("the sub-agent gets a scratch Python session of its own (its tool `python`: "
                                         "state kept between calls, the run's inputs loaded, never this kernel); "
                                         "default: the preset's pythonSession, else no", check=_flag, parse=yes_no,
                                         metavar="yes|no", preset="python_session")
    delegate: Any = option("the sub-agent may start sub-agents of its own with its tool `delegate`: a list of the "
                           "presets it may start, or True for every preset (default: the preset's delegate); its "
                           "budgets then cover it and every run under it", check=_delegate, parse=_delegate_word,
                           metavar="PRESET", repeat=True, structured=True, preset="delegate", sweep=False)
    max_depth: int | None = option("delegation: how deep a tree of sub-agents may grow under this run (default 2: "
                                   "its children and theirs)", check=_whole, parse=int, metavar="N", sweep=False)
    max_children: int | None = option("delegation: how many sub-agents the whole tree under this run may start "
                                      "(default 8)", check=_whole, parse=int, metavar="N", sweep=False)
    experiment: str | None = option("the experiment this run belongs to (nbsubagents.experiment)", **_INTERNAL)
    params: dict[str, Any] | None = option("its cell of the experiment: preset, model, task id, repeat, ...",
                                           **_INTERNAL)
    tags: dict[str, Any] | None = option("tags of an experiment's runs", call=False, magic=False)


# -- what the faces derive from it ---------------------------------------------------------------------------
def _declared(spec_class: type | None = None) -> list[Option]:
    out = []
    for f in fields(spec_class or TaskSpec):
        found = f.metadata.get("option") or Option("")
        out.append(Option(**{**found.__dict__, "name": f.name}))
    return out


def task_keys() -> tuple[str, ...]:
    """Every key a task mapping may have: the fields of ``TaskSpec``, in their order."""
    return tuple(o.name for o in _declared())


def options(face: str) -> list[Option]:
    """The run options one face takes: ``"call"`` (``run``/``start`` keywords), ``"magic"`` (``%subagent``
    flags, in usage order), ``"sweep"`` (``experiment()`` options for every run) or ``"column"`` (an experiment
    task's own)."""
    found = [(o.usage_order if o.usage_order is not None else i, o) for i, o in enumerate(_declared())
             if o.takes(face)]
    if face == "magic":
        found.sort(key=lambda pair: pair[0])
    return [o for _, o in found]


TASK_KEYS = task_keys()  # as declared at import (check_shape reads task_keys() when it runs)


class UnknownOption(NbSubagentsError, TypeError):
    """A name no run option (or no key of the face) has; a TypeError too, as Python's for a wrong keyword."""


def unknown_names(given: Iterable[str], known: Iterable[str], where: str, what: str = "option") -> None:
    """Refuse names not in ``known``: the error names each, a close known one ("did you mean"), and all known."""
    known = list(known)
    unknown = [str(name) for name in given if name not in known]
    if not unknown:
        return
    hints = []
    for name in unknown:
        close = difflib.get_close_matches(name, known, n=1)
        hints.append(f"{name} (did you mean {close[0]}?)" if close else name)
    raise UnknownOption(f"{where}: unknown {what}(s) {', '.join(hints)}; known ones are {', '.join(known)}")


def spec_from_call(preset: Any, task: Any, given: Mapping[str, Any], where: str,
                   also: Iterable[str] = ()) -> TaskSpec:
    """The ``TaskSpec`` of a ``run()``/``start()`` call: its keyword options checked against ``options("call")``
    (``also``: the call's own keywords, named in the error); types are ``prepare``'s to check, as for every
    task."""
    unknown_names(given, [*(o.name for o in options("call")), *also], where, "keyword argument")
    values = dict(given)
    if values.get("cwd") is not None:
        values["cwd"] = str(values["cwd"])
    return TaskSpec(preset=preset, task=task, **values)


def call_options(values: Mapping[str, Any], face: str = "call") -> dict[str, Any]:
    """The run options given to a call of ``face`` (``run()``/``start()``, ``experiment()``'s ``"sweep"``), from its
    ``locals()``, by the option table's names."""
    return {o.name: values[o.name] for o in options(face) if values.get(o.name) is not None}  # a field its
    # signature does not name yet arrives in its **unknown, and is taken there (the signature test says to add it)


def check_shape(item: Mapping[str, Any], where: str) -> None:
    """The keys and value types of one task given as a mapping; ``where`` names it in the error
    ("Task 2", "%%subagents: item 2 (line 4)")."""
    declared = _declared()
    keys = [o.name for o in declared]
    unknown = [str(k) for k in item if k not in keys]
    if unknown:
        raise NbSubagentsError(f"{where}: unknown key(s) {', '.join(unknown)}; a task may have "
                               f"{', '.join(keys)}")
    preset = item.get("preset")
    if not isinstance(preset, str) or not preset.strip():
        raise NbSubagentsError(f"{where}: 'preset' must be a preset name, got {preset!r}")
    for opt in declared:
        if opt.check is not None:
            opt.check(item.get(opt.name), where, opt.name)


def task_list(tasks: Any) -> list[Any]:
    """``run_parallel``'s ``tasks`` as a list. One task given alone (a dict, a ``TaskSpec``, a string) is refused
    with the list it should have been: a dict is iterable, and its keys are no tasks."""
    if isinstance(tasks, (Mapping, str)) or (hasattr(tasks, "preset") and not hasattr(tasks, "__iter__")):
        if isinstance(tasks, Mapping):
            one, kind = dict(tasks), "dict"
        elif isinstance(tasks, str):
            one, kind = {"preset": "scout", "task": tasks if tasks.strip() else "ls ."}, "string"
        else:
            one, kind = {"preset": getattr(tasks, "preset", "scout"), "task": getattr(tasks, "task", "ls .")}, "task"
        shown = repr(one) if len(repr(one)) <= 120 else repr(one)[:117] + "..."
        raise NbSubagentsError(f"run_parallel takes a list of tasks, got one {kind}: pass [{shown}] (a list, even "
                               "of one), or run(preset, task) for a single run")
    return list(tasks)


def as_spec(item: Any, index: int) -> TaskSpec:
    """A ``TaskSpec`` from a TaskSpec, a mapping or an object with the same attributes."""
    if isinstance(item, TaskSpec):
        return item
    if not isinstance(item, Mapping) and not hasattr(item, "preset"):  # a bare task string, say
        example = {"preset": "scout", "task": item if isinstance(item, str) and item.strip() else "ls ."}
        raise NbSubagentsError(f"Task {index}: each task is a dict with preset and task, such as {example!r}; "
                               f"got {item!r}")
    if isinstance(item, Mapping):
        check_shape(item, f"Task {index}")
        get = item.get
    else:
        def get(key: str, default: Any = None) -> Any:
            return getattr(item, key, default)
        preset = get("preset")
        if not isinstance(preset, str) or not preset:
            raise NbSubagentsError(f"Task {index}: 'preset' must be a preset name, got {preset!r}")
    values = {key: get(key) for key in task_keys()}
    if values["cwd"] is not None:
        values["cwd"] = str(values["cwd"])
    return TaskSpec(**values)


def check_task(task: Any) -> str:
    if not isinstance(task, str):
        raise NbSubagentsError(f"The task must be a string (what the sub-agent should do), got {type(task).__name__}")
    if not task.strip():
        raise NbSubagentsError("The task is empty: say what the sub-agent should do")
    return task


def check_cwd(cwd: str | Path | None) -> Path:
    path = Path(cwd).expanduser() if cwd is not None else Path.cwd()
    if cwd is not None and ".." in Path(cwd).parts:
        raise NbSubagentsError(f"cwd {str(cwd)!r} contains '..': give the directory without parent references")
    if not path.exists():
        raise NbSubagentsError(f"cwd {str(path)!r} does not exist: give an existing directory")
    if not path.is_dir():
        raise NbSubagentsError(f"cwd {str(path)!r} is not a directory: give a directory")
    return path.resolve()


def check_isolation(mode: Any, keep_worktree: Any = None) -> None:
    """``isolation`` is "worktree" or "none" (or unset), ``keep_worktree`` True or False (or unset)."""
    if mode not in (None, "none", "worktree"):
        raise NbSubagentsError(f"isolation must be 'worktree' or 'none', got {mode!r}")
    if keep_worktree is not None and not isinstance(keep_worktree, bool):
        raise NbSubagentsError(f"keep_worktree must be True or False, got {keep_worktree!r}")


# -- where each option's value comes from ------------------------------------------------------------------------
def _preset_value(preset: Any, path: str) -> Any:
    """The preset's value of a layer (``budget.max_turns``: a key of its budget); None, False and empty: unset."""
    head, _, key = path.partition(".")
    value = getattr(preset, head, None)
    if key:
        value = (value or {}).get(key)
    return value if value not in (None, False, (), [], {}) else None


def resolve(spec: TaskSpec | None, preset: Any, settings: config.Settings) -> dict[str, tuple[Any, str]]:
    """Each option with layers below the call: its value and where it came from, the call over the preset over the
    settings: ``"call"``, ``'preset "scout"'``, or the setting's source (a settings file, ``configure()``, a
    variable, ``"default"``) as ``settings`` say. ``spec`` None: what a call that names none would get; ``preset``
    None: no preset."""
    layered = [o for o in _declared() if o.preset or o.setting]
    found: dict[str, tuple[Any, str]] = {}
    for o in layered:
        value = getattr(spec, o.name) if spec is not None else None
        if value is not None:
            found[o.name] = (value, "call")
        elif o.preset and preset is not None and (value := _preset_value(preset, o.preset)) is not None:
            found[o.name] = (value, f'preset "{preset.name}"')
        elif o.setting:
            found[o.name] = settings.source(o.setting)
        else:
            found[o.name] = (None, "default")
    return found
