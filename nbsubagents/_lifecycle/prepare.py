"""Preparing runs: a task checked, then written as a run directory (``meta.json``, the prompt) ready to launch.

``prepare`` makes one run (raising on bad input before anything is written), ``failed_run`` records a task
that could not start as a failed run, and ``build_runs`` does both for the tasks of one call, all or nothing.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import uuid
from pathlib import Path
from typing import Any, Iterable

from .. import _config as config, _registry as registry
from .. import _preset_files as preset_mod
from .._child import artifacts, budgets, harnesses, keys, output_schema, pysession
from .._child import isolation as isolating
from .._child.artifacts import RunPaths, atomic_write_json, now_iso
from .._child.repairs import OUTPUTS_DIR
from .._child.errors import positive_seconds
from .._child.record import RunRecord, replace, write
from .._child.tool_servers import ToolServer
from .._config import NbSubagentsError, project_root
from .._child.harnesses import Harness, Request
from .._pi import choose_model, offline
from .._pi.locate import find_program
from .._pi.models import ModelChoice, ModelError, available_models, resolve_name
from .._preset_files.parse import approval_policy, model_list
from . import delegation, inputs as inputs_mod, settle, typed
from .context import compose_prompt
from .edge import edge
from .handle import Run, get_run, launched_status
from .spec import TaskSpec, as_spec, check_cwd, check_isolation, check_task, resolve

Chosen = dict[str, tuple[Any, str]]  # option -> (value, where it came from): spec.resolve's answer

__all__ = ["RunDirError", "prepare", "failed_run", "build_runs", "question_timeout"]


class RunDirError(NbSubagentsError):
    """The run directory cannot be created or written: a problem of the call, not of one task."""


def question_timeout(settings: config.Settings) -> float:
    """meta.json's ``questionTimeout``: the ``question_timeout`` setting when it is set anywhere (a settings file,
    ``configure()``), else its default where a person can answer (a notebook's cell) and 0 elsewhere (a script,
    papermill or nbconvert, a Dask worker): a headless run never waits for an answer."""
    value, source = settings.source("question_timeout")
    return float(value) if source != "default" or edge.person_at_frontend() else 0.0


def _conversation(chosen: Chosen, program: str, harness: Harness, offline_run: bool) -> dict[str, Any]:
    """The record's ``ask``, ``approval`` and ``fallback_models`` as ``resolve`` chose them; a call's value checked
    (a preset's was, as it was read). Offline, fallback models are not used: a ``notes`` entry says so."""
    (ask, ask_from), (approval, approval_from), (names, names_from) = (
        chosen["ask"], chosen["approval"], chosen["fallback_models"])
    if ask_from == "call" and not isinstance(ask, bool):
        raise NbSubagentsError(f"The call's ask must be True or False, got {ask!r}")
    if approval_from == "call":
        approval = approval_policy(approval, "The call's approval")
    if names_from == "call":
        names = model_list(names, "The call's fallback_models")
    source = "the call's fallback_models" if names_from == "call" else f"{names_from} fallbackModels"
    if offline_run and names:  # every run goes to the scripted model: said in the run, not dropped in silence
        note = (f"{source} ({', '.join(names)}) not used: the offline setting sends every run to the scripted "
                f"model, which has no other model to fall back on")
        return {"ask": bool(ask), "approval": approval, "fallback_models": [], "notes": [note]}
    fallbacks, notes = _resolve_models(names, source, program, harness) if names else ([], [])
    return {"ask": bool(ask), "approval": approval, "fallback_models": fallbacks, **({"notes": notes} if notes else {})}


def _nobody_to_ask(conversation: dict[str, Any]) -> str | None:
    """What a run that may ask (``ask``) or needs approval says before it starts where nobody can answer it
    (``questionTimeout`` 0); None for a run that never asks."""
    asks = [*(["its questions get no answer"] if conversation["ask"] else []),
            *(["its approvals get the policy's " + str(conversation["approval"].get("otherwise") or "deny")]
              if conversation["approval"] is not None else [])]
    if not asks:
        return None
    return (f"nobody to ask here (question_timeout is 0 where no person is at a notebook: a script, a headless "
            f"notebook, a Dask worker): {' and '.join(asks)} at once. Set question_timeout (configure() or the "
            "settings file) to answer with run.answer() / run.approve() or `nbsubagents answer` / `approve`")


def _project_config(chosen: Chosen) -> bool:
    """Whether the child loads its project's own agent config, as ``resolve`` chose it (default: no)."""
    value, source = chosen["project_config"]
    if source == "call" and not isinstance(value, bool):
        raise NbSubagentsError(f"The call's project_config must be True or False, got {value!r}")
    return bool(value)


def _resolve_models(names: Iterable[str], source: str, program: str,
                    harness: Harness) -> tuple[list[str], list[str]]:
    """Each fallback model as ``provider/id``, resolved the way ``model`` is (a dated Anthropic id pi does not list:
    its nearest, with a note); an unknown one is an error now. Also the notes."""
    available = available_models(program, harness)
    resolved: list[str] = []
    notes: list[str] = []
    for name in names:
        found, note = resolve_name(name, available, source, "fallback model")
        notes += [note] if note else []
        if found[1] is not None:
            raise ModelError(f'Fallback model "{name}" (from {source}) has a :{found[1]} suffix; a fallback model '
                             f"is given as provider/id, such as {found[0]} (the run keeps its thinking level)")
        if found[0] not in resolved:
            resolved.append(found[0])
    return resolved, notes


def _resume_source(root: Path, run_id: str, harness: Harness) -> tuple[Run, str | None]:
    """The earlier run, and the session ``harness`` continues natively (the earlier run's own, when it ran the same
    harness); without one, the earlier transcript is retold in the prompt."""
    earlier = get_run(run_id, root)
    if not earlier.done:
        raise NbSubagentsError(f"Run {earlier.run_id} is still running: wait for it (or cancel it) before resuming it")
    return earlier, harness.continues(str(earlier.dir), earlier.record, earlier.result)


def _make_run_dir(root: Path) -> Path:
    """A new, empty run directory under ``root``; the documented error when the folder is not writable."""
    run_dir = artifacts.runs_dir(root) / artifacts.new_run_id()
    try:
        run_dir.mkdir(parents=True)
    except OSError as exc:
        raise RunDirError(f"Cannot create the run directory {run_dir}: {exc.strerror or exc}. "
                          "Make the project's .pi/subagents/runs writable or configure(root=...).") from None
    return run_dir


def _new_key(run_id: str) -> None:
    """The run's key (``child.keys``): what the person posts to the run is signed with it."""
    try:
        keys.create(run_id)
    except OSError as exc:
        raise NbSubagentsError(f"Cannot keep the key of run {run_id} in {keys.folder()}: {exc.strerror or exc}. "
                               "Make that folder writable, or set XDG_STATE_HOME to a private folder.") from None


def _remove(run_dir: Path) -> None:
    """A run that will never start: its folder and its key go."""
    shutil.rmtree(run_dir, ignore_errors=True)
    keys.forget(run_dir.name)


def _write_error(run_dir: Path, exc: OSError) -> RunDirError:
    """A run directory that could not be written completely is removed: nothing half-written stays."""
    _remove(run_dir)
    return RunDirError(f"Cannot write the run directory {run_dir}: {exc.strerror or exc}. "
                       "Free some space or make the project's .pi/subagents/runs writable.")


def prepare(spec: TaskSpec, *, mode: str, task_index: int = 0, note: bool = True, runner: str | None = None,
            launching: bool = False, settings: config.Settings | None = None,
            position: dict[str, Any] | None = None) -> Run:
    """Validate one task, then write its run directory; raises NbSubagentsError on bad input.

    Everything is checked before the first write. The run's project is the one its ``cwd`` belongs
    to: presets, settings and the registry come from there. ``note=False`` leaves the registry row
    to the caller (``build_runs`` writes rows once every task of a call is written). ``runner="dask"`` sends
    the run to a Dask worker (``lifecycle.dask_launcher``). ``launching``: the caller launches the run at once
    (``run()``, ``start()``), so its row is written as running, and the launch need not write it again.
    ``settings``: the call's, read once for the task's folder (None: read now). ``position``: the run's place in a
    delegation tree, given by the delegating run's server (``delegation.position_for_child``; None: a root).
    """
    task = check_task(spec.task)
    cwd = check_cwd(spec.cwd)
    current = settings or config.current(cwd)
    preset = preset_mod.get(spec.preset, cwd)
    chosen = resolve(spec, preset, current)
    timeout = positive_seconds(chosen["timeout"][0], "timeout")  # resolve: the setting's when nothing else
    harness = harnesses.get(chosen["harness"][0] or harnesses.DEFAULT)
    refuse_unhonoured(harness, spec, preset, chosen)
    program = find_program(harness, cwd, current)
    if current.offline:  # the project's offline setting: the scripted model, whatever the call or preset asks
        choice, env = offline.choice(spec.model, preset.model, program, harness), offline.child_env(harness)
    elif harness.LISTS_MODELS:
        choice, env = choose_model(spec.model, preset.name, preset.model, program, harness), {}
    else:  # the harness resolves its own model names (Claude Code's aliases such as sonnet); none: its default
        requested = spec.model or preset.model
        choice = ModelChoice(requested=requested, source="call" if spec.model else "preset" if requested else None,
                             resolved=requested or "", thinking=None)
        env = {}
    root = project_root(cwd)
    earlier, session = _resume_source(root, spec.resume, harness) if spec.resume else (None, None)
    previously = earlier.transcript if earlier is not None and session is None else None
    prompt = compose_prompt(task, files=spec.files, cwd=cwd, previously=previously)
    budget, isolation, schema = _limits(spec, chosen, current, cwd, earlier)
    schema, output_type = schema if schema is not None else (None, None)
    outputs, max_repairs = typed.plan_outputs(spec.outputs), _max_repairs(spec.max_repairs)
    if max_repairs is not None and schema is None and not outputs:
        raise NbSubagentsError("max_repairs is how often a reply or output file that failed its check is asked "
                               "again: give output_schema or outputs with it")
    conversation = _conversation(chosen, program, harness, bool(current.offline))
    waits = question_timeout(current)
    free = ("max_cost is never reached offline: the scripted model costs nothing (an offline run's cost is 0)"
            if current.offline and (budget or {}).get("maxCost") else None)
    said = [*conversation.get("notes", []), choice.note, _nobody_to_ask(conversation) if waits == 0 else None, free]
    if any(said):  # a model resolved to its nearest, nobody to ask here: said in the run, as the notes above are
        conversation["notes"] = [note for note in said if note]
    project_config = _project_config(chosen)
    if conversation["approval"] is not None:
        env = {**env, "NBSUBAGENTS_APPROVAL": json.dumps(conversation["approval"])}
    if conversation["ask"] and waits == 0:  # the child's ask tool tells its model nobody was asked (pi_extensions)
        env = {**env, "NBSUBAGENTS_NOBODY_TO_ASK": "1"}
    if schema is not None:
        prompt += output_schema.instruction(schema)
    staged = staged_inputs(spec, current)  # in memory, checked: refused here, before the run's folder exists
    run_dir = _make_run_dir(root)
    run_id = run_dir.name
    paths = RunPaths(run_dir)
    if outputs:
        prompt += typed.instruction(outputs, run_dir)
    try:
        _new_key(run_id)
        # its place in a delegation tree; its delegate server: delegation.tool_server(run_id, run_dir, str(cwd), tree)
        tree = delegation.tree_fields(run_id, chosen["delegate"][0], spec.max_depth, spec.max_children, budget,
                                      position, isolated=isolation is not None)
        servers = tool_servers(chosen, paths) + tuple(filter(None, [delegation.tool_server(run_id, run_dir, str(cwd),
                                                                                            tree)]))
        if outputs:
            (run_dir / OUTPUTS_DIR).mkdir()
        request = _request(harness, program, choice, spec, preset, budget, schema, conversation, earlier, session,
                           cwd, paths, env, project_config, servers)
        try:
            argv, harness_env = harness.build(request)
        except ValueError as exc:  # what the harness cannot do with this preset (its tools, a permission mode, ...)
            raise NbSubagentsError(f'Preset "{preset.name}": {exc}') from None
        env, ignored_tools = {**env, **harness_env}, harness.left_out(request)
        if preset.prompt:
            paths.system_prompt.write_text(preset.prompt + "\n", encoding="utf-8")
        given = inputs_mod.write(paths.dir / "inputs", staged) or None
        paths.prompt.write_text(prompt + inputs_mod.task_lines(given or []), encoding="utf-8")
        record = RunRecord(
            run_id=run_id, name=spec.name or preset.name, harness=harness.NAME, mode=mode, task_index=task_index,
            preset=preset.name, preset_source=str(preset.path), preset_scope=preset.scope, task=task,
            cwd=str(cwd), root=str(root), requested_model=choice.requested, requested_model_source=choice.source,
            resolved_model=choice.resolved or None, model_thinking=choice.thinking, offline=current.offline or None,
            tools=list(preset.tools) if preset.tools is not None else None, ignored_tools=ignored_tools or None,
            disallowed_tools=list(preset.disallowed_tools) if preset.disallowed_tools is not None else None,
            permission_mode=preset.permission_mode, preset_notes=preset_mod.notes(preset, harness.NAME) or None,
            thinking=preset.thinking, system_prompt_path=str(paths.system_prompt) if preset.prompt else None,
            prompt_path=str(paths.prompt), files=[str(f) if isinstance(f, Path) else f for f in spec.files or []],
            resumed_from=earlier.run_id if earlier is not None else None, session_path=str(paths.session),
            argv=argv, env={"PI_SUBAGENTS_CHILD": "1", **env}, timeout=timeout,
            extend_timeout_debounce=current.extend_timeout_debounce, looping_tool_count=current.looping_tool_count,
            created_at=now_iso(), budget=budget, isolation=isolation, output_schema=schema, inputs=given,
            output_type=output_type, outputs=outputs, max_repairs=max_repairs, **conversation,
            question_timeout=waits, launcher=_launcher(), project_config=project_config,
            tool_servers=[server.as_json() for server in servers],
            sources={name: source for name, (_, source) in chosen.items()},
            runner=runner or ("process" if mode == "background" else current.runner), **_experiment_fields(spec),
            **tree)
        write(run_dir, record, sync=False)  # the supervisor syncs it while pi starts (not before)
    except OSError as exc:
        raise _write_error(run_dir, exc) from None
    except BaseException:
        _remove(run_dir)
        raise
    run = Run(run_dir, record)
    run.output_class = spec.output_schema if output_type else None  # run.data's class, without importing it again
    if note:
        registry.note(run, status=launched_status(run) if launching else None)
        run.noted_running = launching
    return run


def staged_inputs(spec: TaskSpec, settings: config.Settings, where: str = "inputs") -> list[inputs_mod.Staged]:
    """The task's inputs in the form each kind calls for, in memory, within the settings' size limits; an input
    that cannot be sent is refused by name (``inputs.InputError``) before anything is written."""
    return inputs_mod.stage_all(spec.inputs, input_max_mb=settings.input_max_mb,
                                inputs_max_mb=settings.inputs_max_mb, where=where)


def refuse_unhonoured(harness: Harness, spec: TaskSpec, preset: Any, chosen: Chosen | None = None) -> None:
    """A run option (of the call or the preset) this harness cannot honour is an error naming both, before
    anything is written: never a silent ignore."""
    refuses = harness.REFUSES
    named = f'preset "{preset.name}"'
    chosen = chosen or resolve(spec, preset, config.current())
    set_by = {"call": "the call", named: named}
    asked = {  # option -> where it was set (None: not set)
        **{name: set_by.get(source) if value else None for name, (value, source) in chosen.items()},
        "thinking": named if preset.thinking is not None or harness.LISTS_MODELS and ":" in (
            spec.model or preset.model or "") else None,  # a name it takes as written may hold a ':' (Bedrock's)
        "excludeTools": named if preset.exclude_tools is not None else None,
        "noTools": named if preset.no_tools else None,
        "skills": named if preset.skills else None,
        "noSkills": named if preset.no_skills else None,
        "noContextFiles": named if preset.no_context_files else None,
        "noExtensions": named if preset.no_extensions else None,
        "extensions": named if preset.extension_files else None,
        "extraArgs": named if preset.extra_args else None,
        "output_schema": "the call" if spec.output_schema is not None else None,
        "resume": "the call" if spec.resume else None,
    }
    for option, where in asked.items():
        if where is not None and option in refuses:
            raise NbSubagentsError(f"The {harness.NAME} harness cannot honour {option} (set by {where}): "
                                   f"{refuses[option]}. Remove it, or run this task with "
                                   f"harness={harnesses.DEFAULT!r}.")


def _request(harness: Harness, program: str, choice: ModelChoice, spec: TaskSpec, preset: Any,
             budget: dict[str, Any] | None, schema: Any, conversation: dict[str, Any], earlier: Run | None,
             session: str | None, cwd: Path, paths: RunPaths, env: dict[str, str], project_config: bool,
             servers: tuple[ToolServer, ...] = ()) -> Request:
    """What ``harness`` is asked to start; the output schema is written beside meta.json first."""
    schema_path = None
    if schema is not None:
        schema_path = paths.dir / "output-schema.json"
        atomic_write_json(schema_path, schema)
    model = choice.argv_model if harness.LISTS_MODELS else choice.requested
    return Request(
        program=program, run_dir=str(paths.dir), cwd=str(cwd), model=model or None,
        model_source=choice.source if model else None,
        system_prompt_path=str(paths.system_prompt) if preset.prompt else None,
        max_turns=(budget or {}).get("maxTurns"), max_cost=(budget or {}).get("maxCost"),
        output_schema_path=str(schema_path) if schema_path else None, ask=bool(conversation["ask"]),
        approval=conversation["approval"] is not None, resume_session=session,
        resumed_run_dir=str(earlier.dir) if session and earlier is not None else None, env=dict(env),
        project_config=project_config, tool_servers=servers, **preset_fields(preset))


def tool_servers(chosen: Chosen, paths: RunPaths) -> tuple[ToolServer, ...]:
    """The tools nbsubagents gives this run's child, each an MCP server over stdio that the harness starts
    (``_child.tool_servers``), as the run's options (``resolve``'s ``chosen``) ask: the Python session
    (``python_session``). A new one is a line here; the harness and the record need nothing more."""
    python, source = chosen["python_session"]
    if source == "call" and not isinstance(python, bool):
        raise NbSubagentsError(f"The call's python_session must be True or False, got {python!r}")
    return (pysession.server(paths.dir, paths.dir.name),) if python else ()


def preset_fields(preset: Any) -> dict[str, Any]:
    """A harness request's fields that come from the preset as written."""
    def listed(names: Iterable[str] | None) -> tuple[str, ...] | None:
        return tuple(names) if names is not None else None

    return dict(
        system_prompt=preset.prompt, tools=listed(preset.tools), disallowed_tools=listed(preset.disallowed_tools),
        exclude_tools=listed(preset.exclude_tools), no_tools=bool(preset.no_tools),
        all_tools=bool(getattr(preset, "all_tools", False)),
        permission_mode=preset.permission_mode, thinking=preset.thinking, skills=tuple(preset.skills or ()),
        no_skills=bool(preset.no_skills), no_context_files=bool(preset.no_context_files),
        no_extensions=bool(preset.no_extensions), extension_files=tuple(str(p) for p in preset.extension_files),
        extra_args=tuple(preset.extra_args), preset_file=str(preset.path), preset_scope=preset.scope,
        preset_extra=dict(preset.extra))


def _experiment_fields(spec: TaskSpec) -> dict[str, Any]:
    """The record's ``experiment``, ``params`` and ``tags`` (only for runs of an experiment)."""
    if spec.experiment is None:
        return {}
    return {"experiment": spec.experiment, "params": dict(spec.params or {}), "tags": dict(spec.tags or {})}


def _limits(spec: TaskSpec, chosen: Chosen, current: Any, cwd: Path, earlier: Run | None) -> tuple[Any, Any, Any]:
    """The run's budget and isolation plan (as ``resolve`` chose them) and output schema, all checked."""
    budget = budgets.to_meta(budgets.check({key: chosen[key][0] for key in budgets.FIELDS}))
    mode = chosen["isolation"][0]
    check_isolation(mode, spec.keep_worktree)
    plan = None
    if mode == "worktree":
        base = None
        if earlier is not None and (earlier.paths.dir / "changes.patch").exists():
            base = str(earlier.paths.dir / "changes.patch")
        plan = isolating.plan(cwd, keep=bool(spec.keep_worktree), max_copy_mb=current.isolation_max_copy_mb,
                              base_patch=base, hide=_jupyter_runtime())
    schema = typed.schema_of(spec.output_schema) if spec.output_schema is not None else None
    return budget, plan, schema


def _max_repairs(value: Any) -> int | None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        raise NbSubagentsError(f"max_repairs must be a whole number of 0 or more (how often a failed check is asked "
                               f"again), got {value!r}")
    return value


def _jupyter_runtime() -> list[str]:
    """Jupyter's runtime folder as this kernel's jupyter_core names it (its kernel connection files): an isolated
    run's sandbox hides it. The supervisor cannot ask (it imports the standard library only)."""
    try:
        from jupyter_core.paths import jupyter_runtime_dir  # noqa: PLC0415 (optional: a kernel has it)
    except ImportError:
        return []
    return [jupyter_runtime_dir()]


def _launcher() -> dict[str, Any]:
    return registry.launcher_identity()


def _spec_root(spec: TaskSpec) -> Path:
    """The project of a task whose own checks failed: its cwd's when that is a directory, else the current one."""
    try:
        return project_root(check_cwd(spec.cwd))
    except NbSubagentsError:
        return project_root()


def failed_run(spec: TaskSpec, error: Exception, *, mode: str, task_index: int, note: bool = True) -> Run:
    """A task that could not start still becomes a run, so it is found and explained later."""
    root = _spec_root(spec)
    run_dir = _make_run_dir(root)
    record = RunRecord(run_id=run_dir.name, name=spec.name or spec.preset, mode=mode,
                       task_index=task_index, preset=spec.preset,
                       task=spec.task if isinstance(spec.task, str) else repr(spec.task),
                       cwd=str(spec.cwd or Path.cwd()), root=str(root), requested_model=spec.model,
                       created_at=now_iso(), launcher=_launcher(), **_experiment_fields(spec))
    run = Run(run_dir, record)
    try:
        write(run_dir, record)
        settle.never_ran(run.paths, record, "failed", str(error))
    except OSError as exc:
        raise _write_error(run_dir, exc) from None
    if note:
        registry.note(run, announced=True)
    return run


def _with_staged_inputs(spec: TaskSpec, index: int) -> TaskSpec:
    """A task whose inputs are staged (checked, in memory): one input that cannot be sent refuses the whole call
    before any run of it is written, naming the task and the input."""
    if not spec.inputs:
        return spec
    try:
        settings = config.current(check_cwd(spec.cwd))
    except NbSubagentsError:  # its cwd's own error comes with its run
        settings = config.current()
    try:
        staged = staged_inputs(spec, settings)
    except inputs_mod.InputError as exc:
        raise inputs_mod.InputError(f"Task {index}: {exc}") from None
    return dataclasses.replace(spec, inputs={s.name: s for s in staged})


def build_runs(items: Iterable[Any], *, mode: str, runner: str | None = None) -> list[Run]:
    """Each task becomes a run; one task's bad preset or model fails that task alone.

    Every task's shape is checked before anything is written, and registry rows are written only
    once every run directory of the call is: when the call raises, nothing of it is left behind.
    The runs of one call share a ``group`` id in their records (reports link them). The settings are read once
    per folder the tasks run in.
    """
    group = uuid.uuid4().hex[:12]
    specs = [_with_staged_inputs(as_spec(item, index), index) for index, item in enumerate(items)]
    runs: list[Run] = []
    in_force: dict[Path, config.Settings] = {}
    try:
        for index, spec in enumerate(specs):
            try:
                cwd = check_cwd(spec.cwd)
                settings = in_force.get(cwd) or in_force.setdefault(cwd, config.current(cwd))
                run = prepare(spec, mode=mode, task_index=index, note=False, runner=runner, settings=settings)
            except RunDirError:
                raise
            except NbSubagentsError as exc:
                run = failed_run(spec, exc, mode=mode, task_index=index, note=False)
            runs.append(run)
            run.record = replace(run.record, group=group)  # before launch: the supervisor reads it when it starts
            write(run.dir, run.record)
    except BaseException:
        for run in runs:
            _remove(run.dir)
        raise
    for run in runs:
        registry.note(run, announced=run.done)
    return runs
