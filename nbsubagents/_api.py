"""The public functions: thin wrappers over ``runs`` that pick a renderer and validate the call."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Never

from . import _registry as registry
from ._config import NbSubagentsError, find_project, project_arg, current
from ._lifecycle import batch, handle, reconcile, watcher
from ._lifecycle.drive import drive
from ._lifecycle.handle import Run
from ._lifecycle.spec import call_options, spec_from_call, task_list
from ._preset_files import Preset, write
from ._registry import query
from ._ui import browser, statusbar
from ._views import timeline
from ._ui.attach import lent, register_display
from ._lifecycle.edge import lend
from ._ui.display import renderer_for
from ._views import reports
from ._views.presets import PresetList, list_presets
from ._views.tables import RunsFrame

if TYPE_CHECKING:
    import pandas
    from matplotlib.figure import Figure

    from ._registry import Status



def run(preset: str, task: str, *, model: str | None = None, cwd: str | None = None, name: str | None = None,
        timeout: float | None = None, files: list[Any] | None = None, resume: str | None = None,
        isolation: str | None = None, keep_worktree: bool | None = None, max_turns: int | None = None,
        max_tool_calls: int | None = None, max_tokens: int | None = None, max_cost: float | None = None,
        ask: bool | None = None, approval: Any = None, fallback_models: list[str] | None = None,
        output_schema: Any = None, outputs: dict[str, Any] | None = None, max_repairs: int | None = None,
        harness: str | None = None, project_config: bool | None = None, inputs: Any = None,
        python_session: bool | None = None, delegate: Any = None, max_depth: int | None = None,
        max_children: int | None = None, show: bool = True, executor: str | None = None, dask_client: Any = None,
        **unknown: Never) -> Run:
    """Run one sub-agent in the foreground and return its finished ``Run``.

    Bad input (unknown preset or model, empty task, missing cwd, an unknown keyword) raises before anything
    starts. Interrupting the cell aborts the run and returns it with status ``aborted``; in a script Ctrl-C (or
    SIGTERM) aborts it and then stops the script (``KeyboardInterrupt``; SIGTERM: status 143).

    Parameters
    ----------
    preset : str
        The preset's name (``nbsubagents.presets()`` lists them).
    task : str
        What the sub-agent is asked to do.
    model : str, optional
        The model as ``provider/id`` (or a name pi resolves), instead of the preset's.
    cwd : str, optional
        The folder the sub-agent works in (default: the current one); its project holds the run.
    name : str, optional
        A name for the run (default: the preset's).
    timeout : float, optional
        Seconds before the run is stopped (default: the preset's, the settings', 600); extended while it works.
    files : list, optional
        Files whose contents go before the task: paths, or dicts with ``path`` and ``start``/``end``, ``head`` or
        ``tail``.
    resume : str, optional
        An earlier run (its id or a unique prefix) to continue, with its history.
    isolation : {"worktree", "none"}, optional
        ``"worktree"`` runs it in a fresh git worktree (or copy) and captures its changes as a patch
        (``run.diff``, ``run.apply()``, ``run.discard()``).
    keep_worktree : bool, optional
        Keep that worktree after the run.
    max_turns, max_tool_calls, max_tokens, max_cost : optional
        Budgets: the run stops once it reaches one.
    ask : bool, optional
        The sub-agent may ask the notebook questions (its tool ``ask``); default: the preset's.
    approval : list or dict or False, optional
        Tool calls that wait for the notebook's approval: tools such as ``["bash", "edit"]``, or ``{"tools": [...],
        "allow": [bash patterns], "inside": [folders], "otherwise": "deny"}``; ``False``: none.
    fallback_models : list of str, optional
        Models to go on with when the model fails for provider reasons (HTTP 429/5xx, quota, authentication).
    output_schema : dict or pydantic model, dataclass or TypedDict class, optional
        A JSON Schema the reply must meet: a typed result in ``run.data`` (an instance of the class given).
    outputs : dict, optional
        Files the sub-agent must write, read back as objects in ``run.outputs``: ``{"clean": pandas.DataFrame}``
        (Parquet), ``"csv"``, ``"json"`` or ``"png"`` as what a name holds.
    max_repairs : int, optional
        How often a reply or output file that fails its check is asked again in the same session (default 2).
    harness : str, optional
        The agent harness: ``"pi"``, ``"claude-code"``, ``"codex"`` or one a package adds (default: the
        preset's, else pi).
    project_config : bool, optional
        The agent loads the configuration the project it works in has for it: Claude Code's ``.claude/settings.json``
        hooks, pi's ``.pi/extensions`` and ``.pi/settings.json``, MCP servers (default: the preset's ``projectConfig``,
        else ``False``: a repository's code never runs unasked, whatever the preset's tools).
    inputs : dict, optional
        The notebook's values the sub-agent gets as read-only files in its run folder, by name (``{"df": df,
        "params": params}``): a pandas DataFrame as Parquet with a Markdown card (shape, dtypes, head, missing
        values, describe), a NumPy array as ``.npy`` with its card, text as ``.txt``, JSON-able values as JSON, a
        matplotlib Figure as PNG, a ``pathlib.Path`` as a read-only copy, ``nbsubagents.pickled(x)`` as a pickle.
        The task gets one line per input (name, kind, file, card). Anything else, or an input over the
        ``input_max_mb`` setting, is refused by name before the run.
    python_session : bool, optional
        The sub-agent gets a scratch Python session of its own (its tool ``python``): state kept between calls,
        started in its folder with the run's inputs loaded, never this kernel (default: the preset's
        ``pythonSession``, else ``False``).
    delegate : list of str or bool, optional
        The sub-agent may start sub-agents from these presets (``True``: any) with its tool ``delegate``; its
        budgets then cover it and every run under it (docs: delegation). Default: the preset's ``delegate``.
    max_depth, max_children : int, optional
        How deep the tree under it may grow (default 2) and how many sub-agents it may start in all (default 8).
    show : bool, default True
        Progress as a live panel in a notebook, plain lines on stderr elsewhere; ``False`` (or
        ``NBSUBAGENTS_DISPLAY=none``) shows nothing.
    executor : {"local", "dask"}, optional
        ``"dask"`` runs it on a worker of a Dask cluster (``dask_client``, else the ``dask_scheduler`` setting, else
        ``distributed.get_client()``); the project folder must be on storage every worker sees.
    dask_client : distributed.Client, optional
        The cluster's client for ``executor="dask"``.

    Returns
    -------
    Run
        The ended run: ``status``, ``output``, ``data``, ``usage``, its files.
    """
    spec = spec_from_call(preset, task, {**call_options(locals()), **unknown}, "run()",
                          ("show", "executor", "dask_client"))
    the_run = batch.prepare_one(spec, mode="single", executor=executor, dask_client=dask_client)
    (the_run,) = drive([the_run], concurrency=1, renderer=renderer_for(show))
    return the_run


def run_parallel(tasks: Iterable[Any], *, concurrency: int | None = None, show: bool = True,
                 executor: str | None = None, dask_client: Any = None) -> list[Run]:
    """Run several sub-agents, at most ``concurrency`` at once; returns their finished runs in order.

    A task whose preset or model is unknown fails alone; the others run.

    Parameters
    ----------
    tasks : iterable of dict
        Each a dict (or object) with ``preset`` and ``task`` and optionally any run option of ``run``
        (``model``, ``cwd``, ``name``, ``timeout``, ``isolation``, ``keep_worktree``, the budget fields,
        ``output_schema``, ...).
    concurrency : int, optional
        How many run at once (default: the ``concurrency`` setting, 4).
    show : bool
        False shows no progress.
    executor : str, optional
        ``"dask"`` runs them on a Dask cluster (see ``run``): its workers' resources then bound how many run at
        once, and ``concurrency``, when given, caps it further.
    dask_client : distributed.Client, optional
        The cluster's client (default: one for the ``dask_scheduler`` setting, else the current one).
    """
    items, now = task_list(tasks), current()
    dask = (now.executor if executor is None else executor) == "dask"
    limit = (max(len(items), 1) if dask else now.concurrency) if concurrency is None else concurrency
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise NbSubagentsError(f"concurrency must be a whole number of at least 1, got {concurrency!r}")
    if not items:
        raise NbSubagentsError("run_parallel needs at least one task: a list of {'preset': ..., 'task': ...}")
    if len(items) > now.max_tasks:
        raise NbSubagentsError(f"Too many tasks: {len(items)} given, at most {now.max_tasks} per call "
                               f"(nbsubagents.configure(max_tasks=...) raises the limit)")
    built = batch.build(items, mode="parallel", executor=executor, dask_client=dask_client)
    return drive(built, concurrency=limit, renderer=renderer_for(show))


def presets(project: str | Path | None = None, *, cwd: str | Path | None = None) -> PresetList:
    """The presets a run can name in ``project`` (a folder inside it; default: the current folder): project over
    global over Claude Code's folders, by name, shown as a table; ``.problems`` lists the files that could not be
    loaded, each with its error, and ``.duplicates`` the names several files claim (the file kept, those shadowed);
    the table shows them and each preset's notes under it. (``cwd=`` is the older name of ``project=``.)"""
    if project is None and cwd is None:
        return list_presets(None)  # from the current folder, as a run finds its preset
    return list_presets(project_arg(project, "presets", cwd=cwd))


def start(preset: str, task: str, *, model: str | None = None, cwd: str | None = None, name: str | None = None,
          timeout: float | None = None, files: list[Any] | None = None, resume: str | None = None,
          isolation: str | None = None, keep_worktree: bool | None = None, max_turns: int | None = None,
          max_tool_calls: int | None = None, max_tokens: int | None = None, max_cost: float | None = None,
          ask: bool | None = None, approval: Any = None, fallback_models: list[str] | None = None,
          output_schema: Any = None, outputs: dict[str, Any] | None = None, max_repairs: int | None = None,
          harness: str | None = None, project_config: bool | None = None, inputs: Any = None,
          python_session: bool | None = None, delegate: Any = None, max_depth: int | None = None,
          max_children: int | None = None, on_done: Callable[[Run], Any] | None = None, show: bool = True,
          executor: str | None = None, dask_client: Any = None, **unknown: Never) -> Run:
    """Start one sub-agent in the background and return its ``Run`` at once.

    The run's supervisor is detached (its own session), so the run goes on when the kernel is
    interrupted, restarted or killed; this process's watcher follows it, records its end in the
    registry, announces it once and then calls ``on_done(run)``. ``run.counts`` holds the registry's
    counts right after the start. Background runs always use the process runner, or a Dask worker with
    ``executor="dask"`` (the run goes on when this kernel dies).

    Parameters
    ----------
    preset, task, model, cwd, name, timeout, files, resume, isolation, keep_worktree, max_turns, max_tool_calls, \
max_tokens, max_cost, ask, approval, fallback_models, output_schema, outputs, max_repairs, harness, project_config, \
inputs, python_session, delegate, max_depth, max_children, executor, dask_client
        As for ``run``.
    on_done : callable, optional
        Called with the run once it has ended and been recorded.
    show : bool, default True
        ``False`` shows no panel or progress and prints no completion notice for it.

    Returns
    -------
    Run
        The running run (``run.wait()`` waits for its end).
    """
    if on_done is not None and not callable(on_done):
        raise NbSubagentsError(f"on_done must be a function taking the finished run, got {on_done!r}")
    spec = spec_from_call(preset, task, {**call_options(locals()), **unknown}, "start()",
                          ("on_done", "show", "executor", "dask_client"))
    the_run = batch.prepare_one(spec, mode="background", executor=executor, dask_client=dask_client)
    renderer = renderer_for(show) if show else None
    if renderer is not None:
        renderer.start([the_run])  # in the launching cell; events and the end come from the watcher
    handle.launch(the_run)
    watcher.watch(the_run, renderer=renderer, on_done=on_done, quiet=not show)
    the_run.counts = registry.counts(the_run.project)
    return the_run


def wire() -> None:
    """The one place the bands above lend the kernel's side of a run what it needs (``lifecycle.edge``): the
    notebook edge's notice stream, cell context, sweep panel and person check, and ``start`` for a follow-up of an
    ended run; then IPython's display of a ``Run``, where IPython runs. The faces call it before they act: the
    package at the first use of a public name, ``%load_ext nbsubagents``, the command line (a repeat changes
    nothing); importing a module lends nothing."""
    lend(**lent(), start=start)
    register_display()


def status(run_id: str | None = None, *, include_completed: bool = False, project: str | Path | None = None
           ) -> Status:
    """Counts (running, completed, failed, aborted, total) and rows of the project's runs.

    Settles runs whose supervisor is gone and announces runs that finished while no kernel watched.

    Parameters
    ----------
    run_id : str, optional
        One run (its id or a unique prefix), shown with its final result fields.
    include_completed : bool
        Every run, not only the active ones.
    project : str or Path, optional
        A folder inside the project (default: the current folder).

    Returns
    -------
    Status
        The counts and rows; a table in a notebook, text elsewhere.
    """
    return reconcile.status(run_id, include_completed=include_completed, root=find_project(project))


def get_run(run_id: str, *, project: str | Path | None = None) -> Run:
    """The ``Run`` of a run id, from any kernel and any mode.

    Parameters
    ----------
    run_id : str
        The run's id or a unique prefix of it.
    project : str or Path, optional
        A folder inside the project (default: the current folder).
    """
    return handle.get_run(run_id, find_project(project))


def cancel(run_id: str, *, project: str | Path | None = None) -> bool:
    """Cancel a run by its run id or a prefix from any kernel; False when it had already ended."""
    return get_run(run_id, project=project).cancel()


def steer(run_id: str, text: str, *, project: str | Path | None = None) -> None:
    """Tell a running run ``text`` (its id or a unique prefix; any kernel's, any machine's): the child reads it
    after its current tool call. See ``Run.steer``."""
    get_run(run_id, project=project).steer(text)


def follow_up(run_id: str, text: str, *, project: str | Path | None = None) -> Run:
    """Give a run ``text`` after its current turn and return it; a run that has ended is continued instead by a
    new background run that resumes its session (linked: ``resumed_from``), which is returned. See
    ``Run.follow_up``."""
    return get_run(run_id, project=project).follow_up(text)


def answer(run_id: str, value: Any, *, question: str | None = None, project: str | Path | None = None
           ) -> dict[str, Any]:
    """Answer the oldest open question of a run (see ``Run.answer``).

    Parameters
    ----------
    run_id : str
        The run's id or a unique prefix of it (any kernel's, any machine's).
    value : str, int, bool or None
        Text, one of the question's options (or its number from 1), or for a yes/no question True/"allow"/"yes"
        and False/"deny"/"no"; None is no answer.
    question : str, optional
        The id of the question to answer, instead of the oldest open one.
    project : str or Path, optional
        A folder inside the project (default: the current folder).

    Returns
    -------
    dict
        The question, with its ``answer``.
    """
    return get_run(run_id, project=project).answer(value, question=question)


def runs(*, status: Any = None, preset: Any = None, model: Any = None, harness: Any = None, since: Any = None,
         until: Any = None, text: str | None = None, limit: int | None = None, expand_data: bool = False,
         project: str | Path | None = None) -> pandas.DataFrame:
    """Every run of the project as a pandas DataFrame (one row per ``run_id``), newest first, filtered in the
    registry. Its ``stop_reason`` says why a run ended and ``changes`` is ``+N −M`` for an isolated run.

    Parameters
    ----------
    status, preset, model, harness : str or list of str, optional
        Keep runs with this value (or one of these); ``harness`` is ``"pi"``, ``"claude-code"``, ``"codex"`` or
        one a package adds.
    since, until : datetime, str, optional
        A datetime, an ISO time or an age such as ``"30m"``, ``"2h"``, ``"7d"``.
    text : str, optional
        Searches the tasks and the outputs.
    limit : int, optional
        The newest ``limit`` runs.
    expand_data : bool
        Adds typed results (``output_schema``) as ``data.*`` columns.
    project : str or Path, optional
        A folder inside the project (default: the current folder).
    """
    root = find_project(project)
    reconcile.first_use(root)  # once per process and project: what it finds on disk and what finished while away
    return RunsFrame(query.runs(status=status, preset=preset, model=model, harness=harness, since=since, until=until,
                                text=text, limit=limit, root=root, expand_data=expand_data))


def status_bar(*, project: str | Path | None = None, root: str | Path | None = None) -> statusbar.StatusBar:
    """A compact live line of the project's runs, ``runs: 2 running / 5 total`` (``· 1 failed``, ``· 1 aborted``,
    then the last completion notice): a widget in a notebook, text elsewhere; every bar shown stays current.
    ``project``: a folder inside the project (default: the current folder; ``root=`` is its older name)."""
    return statusbar.status_bar(project_arg(project, "status_bar", root=root))


def browse(*, status: Any = None, preset: str | None = None, model: str | None = None, since: Any = None,
           text: str | None = None, limit: int = 500, live: bool = True, project: str | Path | None = None
           ) -> browser.Browser:
    """An ipywidgets explorer of the project's runs: filters (status, preset, model, time range, text),
    the runs, and the selected run's header, output, transcript, events and files. It refreshes while
    runs are active. Returns a ``Browser`` (``set_filters``, ``select``, ``refresh``, ``close``).
    ``project``: a folder inside the project (default: the current folder)."""
    return browser.browse(status=status, preset=preset, model=model, since=since, text=text, limit=limit, live=live,
                          root=find_project(project))


def runs_timeline(*, status: Any = None, preset: Any = None, model: Any = None, since: Any = None,
                  until: Any = None, text: str | None = None, limit: int | None = 200, theme: str = "auto",
                  project: str | Path | None = None) -> Figure:
    """A matplotlib Figure of runs over time: one bar per run from start to end, coloured by status.

    Filters as ``runs()``; the newest ``limit`` runs are drawn. ``theme`` is ``"auto"`` (JupyterLab's chosen
    theme), ``"light"`` or ``"dark"``. ``project``: a folder inside the project (default: the current folder).
    Needs matplotlib (``pip install 'nbsubagents[timeline]'``).
    """
    return timeline.runs_timeline(status=status, preset=preset, model=model, since=since, until=until, text=text,
                                  limit=limit, theme=theme, root=find_project(project))


def report(runs_or_frame: Any, path: str | Path | None = None, *, format: str | None = None,
           title: str | None = None, project: str | Path | None = None) -> Path:
    """Write a report of these runs (secrets masked) and return its path.

    Parameters
    ----------
    runs_or_frame : Run, list of Run or str, or DataFrame
        A ``Run``, a list of runs (or run ids), or a ``runs()`` DataFrame.
    path : str or Path, optional
        Where to write; by default a new ``report-<time>.html`` in the project's ``.pi/subagents/reports/``
        (``-2``, ``-3``... when that name is taken: no report is overwritten).
    format : str, optional
        ``"html"`` (self-contained, no script, no network) or ``"md"`` (Markdown for an issue); by default from
        the path's suffix (``.md``/``.markdown`` is Markdown), else HTML.
    title : str, optional
        The report's title.
    project : str or Path, optional
        A folder inside the project whose run ids are given and where the report goes (default: the current
        folder).
    """
    root = find_project(project)
    return reports.report(_as_runs(runs_or_frame, root), path, format=format, title=title, root=root)


def _as_runs(runs_or_frame: Any, root: Path) -> list[Run]:
    if isinstance(runs_or_frame, Run):
        return [runs_or_frame]
    if hasattr(runs_or_frame, "columns") and hasattr(runs_or_frame, "iterrows"):  # a runs() DataFrame
        frame = runs_or_frame
        if "run_dir" in frame.columns:
            return [Run(str(d)) for d in frame["run_dir"]]
        if "run_id" in frame.columns:
            return [handle.get_run(str(i), root) for i in frame["run_id"]]
        raise NbSubagentsError("report() needs runs: a Run, a list of Runs, or a runs() DataFrame with a "
                               "run_id or run_dir column")
    if isinstance(runs_or_frame, (str, bytes)) or not isinstance(runs_or_frame, Iterable):
        raise NbSubagentsError(f"report() needs runs: a Run, a list of Runs, or a runs() DataFrame, "
                               f"got {type(runs_or_frame).__name__}")
    runs = []
    for item in runs_or_frame:
        if isinstance(item, Run):
            runs.append(item)
        elif isinstance(item, str):
            runs.append(handle.get_run(item, root))
        else:
            raise NbSubagentsError(f"report() got {item!r} among the runs: give Runs or run ids")
    return runs


# -- presets made and changed from code (preset_files.write) ------------------------------------------------------
def new_preset(name: str, *, description: str, model: str | None = None, tools: Any = None, prompt: str = "",
               scope: str = "project", project: str | Path | None = None, **fields: Any) -> Preset:
    """Write a new preset and return it; an existing preset of that name in ``scope`` is refused (change it with
    ``edit_preset``, or ``delete_preset`` it first).

    ``tools`` is a list or ``"read, grep"``; ``prompt`` is the body (the system prompt the child gets). ``fields``
    are any other preset fields in either spelling: ``max_tool_calls=20`` or ``maxToolCalls=20``, ``thinking="low"``,
    ``exclude_tools=["bash"]``... ``scope`` is ``"project"`` (``.pi/subagents/`` of the project around ``project``,
    default the current folder; made if missing) or ``"global"`` (pi's agent dir's ``subagents/``). The file is
    checked by the parser that reads presets before it is moved into place: a bad field is an error naming it, and
    nothing is written.
    """
    return write.new_preset(name, description=description, model=model, tools=tools, prompt=prompt, scope=scope,
                            project=project, **fields)


def edit_preset(name: str, *, project: str | Path | None = None, **fields: Any) -> Preset:
    """Change fields of the preset a run from ``project`` would pick (project or global); return it.

    A field set to None is removed (``model=None``); ``prompt=`` replaces the body; either spelling of a field
    works. The file's other fields stay as they are. Checked before it is written, as ``new_preset``.
    """
    return write.edit_preset(name, project=project, **fields)


def copy_preset(name: str, new_name: str, *, scope: str = "project", project: str | Path | None = None) -> Preset:
    """Copy a visible preset into a new pi preset ``new_name`` in ``scope``; return the copy.

    The source may be a Claude Code agent file (``.claude/agents/``): the copy is a pi preset with its tools in
    pi's names (``Read, Glob`` -> ``read, find``) and every field in pi's spelling.
    """
    return write.copy_preset(name, new_name, scope=scope, project=project)


def delete_preset(name: str, *, scope: str = "project", project: str | Path | None = None) -> Path:
    """Delete preset ``name``'s file in ``scope`` (``"project"`` or ``"global"``) and return its path."""
    return write.delete_preset(name, scope=scope, project=project)


def rebuild_registry(project: str | Path | None = None) -> int:
    """Rebuild the project's registry of runs from its run folders, which are the record of each run.

    Parameters
    ----------
    project : str or Path, optional
        The project whose registry to rebuild (default: the one of the current directory).

    Returns
    -------
    int
        How many runs the registry holds now.
    """
    return registry.rebuild(project_arg(project, "rebuild_registry"))
