"""Launching, watching, waiting for and cancelling runs; the ``Run`` handle.

The kernel's side of a run is thin on purpose: it writes ``meta.json``, starts the supervisor and
then only reads the run directory. So a run started here and one found later on disk (another
kernel, after a restart) are the same kind of object.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from ..child import artifacts
from ..child.artifacts import RunPaths, TERMINAL, atomic_write_json, now_iso, read_json
from ..config import NbSubagentsError, project_root, settings
from ..pi import find_pi
from ..child.formatter import ProgressFormatter
if TYPE_CHECKING:
    from ..ui.renderers import Renderer
    from .launch import Process
from . import settle
from .launch import launcher_for
from .spec import TaskSpec, as_spec, check_cwd, check_isolation, check_task, check_timeout

SUPERVISOR_START_TIMEOUT = 10.0  # seconds cancel() waits for a starting supervisor's SIGTERM handler


class Run:
    """One sub-agent run, backed by its run directory."""

    def __init__(self, run_dir: str | Path, meta: dict[str, Any] | None = None) -> None:
        self.paths = RunPaths(Path(run_dir))
        self.meta: dict[str, Any] = meta if meta is not None else (read_json(self.paths.meta) or {})
        self.process: Process | None = None  # the supervisor this process started (lifecycle.launch)
        self._result: dict[str, Any] | None = None
        self._tail = artifacts.EventTail(self.paths.events)
        self._formatter = ProgressFormatter(self.meta.get("cwd"))
        self.counts: dict[str, int] | None = None  # the registry's counts when nbsubagents.start() returned

    # -- identity -----------------------------------------------------------------------------
    @property
    def id(self) -> str:
        return self.meta.get("runId") or self.paths.dir.name

    @property
    def dir(self) -> Path:
        return self.paths.dir

    @property
    def name(self) -> str:
        return self.meta.get("name") or self.meta.get("preset") or self.id

    @property
    def preset(self) -> str | None:
        return self.meta.get("preset")

    @property
    def model(self) -> str | None:
        return self.meta.get("resolvedModel")

    @property
    def task(self) -> str:
        return self.meta.get("task", "")

    # -- state --------------------------------------------------------------------------------
    @property
    def result(self) -> dict[str, Any] | None:
        """The parsed result.json once the run is terminal, else None."""
        if self._result is None:
            self._result = read_json(self.paths.result) or settle.unwritten(self.paths)
        return self._result

    @property
    def status(self) -> str:
        result = self.result
        if result is not None:
            return result.get("status", "failed")
        remote = launcher_for(self.meta.get("runner")).remote
        if (self.process is None or remote) and not self.paths.supervisor.exists():
            return "queued"  # not started yet (on a Dask cluster: no worker took it yet)
        return "running"

    @property
    def done(self) -> bool:
        return self.status in TERMINAL

    @property
    def output(self) -> str:
        """The child's final assistant text ('' until the run ends)."""
        return (self.result or {}).get("finalText") or ""

    @property
    def error(self) -> str | None:
        return (self.result or {}).get("errorMessage")

    def events(self) -> list[dict[str, Any]]:
        return list(artifacts.read_events(self.paths.events))

    @property
    def transcript(self) -> str:
        try:
            return self.paths.transcript.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    def events_frame(self) -> Any:
        """One row per normalized event with the formatter's words for it (a pandas DataFrame)."""
        from .inspection import events_frame
        return events_frame(self.events(), self.meta.get("cwd"))

    @property
    def artifacts(self) -> Any:
        """The run directory's files with their sizes."""
        from .inspection import artifacts
        return artifacts(self.paths.dir)

    @property
    def scores(self) -> dict[str, Any]:
        """What the experiment's scorers said of this run (``scores.json``; {} before scoring)."""
        return (read_json(self.paths.dir / "scores.json") or {}).get("scores") or {}

    @property
    def params(self) -> dict[str, Any]:
        """Its cell of an experiment (preset, model, task id, repeat and extra columns); {} outside one."""
        return dict(self.meta.get("params") or {})

    @property
    def files_changed(self) -> list[str]:
        """Paths the run changed: from its ``changes.json`` for an isolated run (relative to the repository or
        folder), else the paths the child wrote or edited successfully, as its events show them."""
        changes = read_json(self.paths.dir / "changes.json")
        if changes is not None:
            return [f["path"] for f in changes.get("fileChanges", [])]
        from .inspection import files_changed
        return files_changed(artifacts.read_events(self.paths.events), self.meta.get("cwd"))

    # -- typed results and isolation ----------------------------------------------------------
    @property
    def data(self) -> Any:
        """The JSON value the child ended with, validated against ``output_schema`` (None without one)."""
        return (self.result or {}).get("data")

    @property
    def changes(self) -> dict[str, Any] | None:
        """An isolated run's ``changes.json``: files, added, removed and one entry per file."""
        return read_json(self.paths.dir / "changes.json")

    @property
    def diff(self) -> str:
        """An isolated run's patch (``changes.patch``, a binary-safe ``git diff``); '' without one."""
        try:
            return (self.paths.dir / "changes.patch").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    def apply(self, check: bool = True) -> list[str]:
        """Apply this isolated run's changes to its original folder; returns the files changed.

        With ``check`` nothing is written unless the whole patch applies; a conflict raises
        NbSubagentsError naming the file. A patch is applied once; ``discard()`` drops it instead.
        """
        from ..child.isolation import apply
        if not self.done:
            raise NbSubagentsError(f"Run {self.id} is still running: wait for it before applying its changes")
        return apply(self.paths.dir, check=check)

    def discard(self) -> None:
        """Drop this isolated run's changes: a kept worktree is removed and ``apply()`` refuses afterwards."""
        from ..child.isolation import discard
        if not self.done:
            raise NbSubagentsError(f"Run {self.id} is still running: cancel or wait for it before discarding")
        discard(self.paths.dir)

    # -- control ------------------------------------------------------------------------------
    def wait(self, timeout: float | None = None) -> Run:
        """Block until the run is terminal (or ``timeout`` seconds pass); returns self.

        A run this kernel follows in the background is waited for until its panel shows the end and its
        ``on_done`` returned: the waiting cell then carries the panel's last updates, which ipykernel sends
        with the executing cell, into a notebook saved by nbclient or nbconvert.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        interval = settings.poll_interval  # resolved once: each read of a setting stats the settings files
        while not self.done:
            if deadline is not None and time.monotonic() >= deadline:
                break
            if self.process is not None:
                try:
                    self.process.wait(interval)
                except subprocess.TimeoutExpired:
                    pass
                if self.process.poll() is not None and self.result is None:
                    settle.lost(self.paths, self.meta, exit_code=self.process.returncode)
            else:
                time.sleep(interval)
        if self.done:
            from . import watcher

            left = watcher.SETTLE_TIMEOUT
            if deadline is not None:
                left = max(0.0, min(left, deadline - time.monotonic()))
            watcher.settle(self.id, left)
        return self

    def cancel(self) -> bool:
        """Ask the supervisor to abort the child (SIGTERM, SIGKILL after 5 s); False if already done."""
        if self.done:
            return False
        cancelled = launcher_for(self.meta.get("runner")).cancel(self)
        if cancelled is not None:  # a supervisor its launcher reaches its own way (on a Dask worker)
            return cancelled
        if self.process is not None:
            settle.request_cancel(self.paths)  # first: a supervisor that dies without a result ends "aborted"
            if self.process.poll() is None:
                # Until supervisor.json exists the supervisor has no SIGTERM handler yet: a signal then would
                # kill it instead of letting it record the abort. The wait is bounded: a supervisor that does
                # not get there in time is ended all the same, and settled as cancelled.
                deadline = time.monotonic() + SUPERVISOR_START_TIMEOUT
                while (self.process.poll() is None and not self.paths.supervisor.exists()
                       and time.monotonic() < deadline):
                    time.sleep(0.01)
                if self.process.poll() is None:
                    self.process.send_signal(signal.SIGTERM)
            return True
        info = read_json(self.paths.supervisor)
        if info is None and (self.paths.dir / "supervisor.log").exists():
            info = self._await_supervisor()  # launched by another process and still starting
        if info and _same_process(info.get("pid"), info.get("startTicks")):
            settle.request_cancel(self.paths)
            os.kill(int(info["pid"]), signal.SIGTERM)
            return True
        if self.status == "queued":
            settle.cancelled_before_start(self.paths, self.meta)
            _note(self)
            return True
        return False

    # -- internals ----------------------------------------------------------------------------
    def _await_supervisor(self, timeout: float = 10.0) -> dict[str, Any] | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not self.done:
            info = read_json(self.paths.supervisor)
            if info:
                return info
            time.sleep(0.05)
        return None

    def launch(self) -> None:
        """Start the run's supervisor through its launcher (``meta["runner"]``: process or tmux)."""
        _note(self, status="running")  # before the start: an interrupt right after it finds the handle set
        self.process = launcher_for(self.meta.get("runner")).start(self)

    def refresh(self) -> Run:
        """Read ``result.json`` again on the next look (it may have appeared since)."""
        self._result = None
        return self

    def pump(self, renderer: Renderer) -> None:
        """Feed the run's new events, with the formatter's words for each, to ``renderer``."""
        for event in self._tail.read_new():
            renderer.event(self, event, self._formatter.format(event))

    # -- representations ----------------------------------------------------------------------
    def __repr__(self) -> str:
        from ..ui.renderers import summary_line
        if not self.done:
            return f"<Run {self.id} {self.name} {self.status}>"
        text = summary_line(self)
        out = self.output.strip()
        if out:
            text += "\n" + "\n".join("  " + ln for ln in out.splitlines()[:20])
        return text

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        """Its panel in a notebook with widgets, the summary above elsewhere (``nbsubagents.ui.display``)."""
        from ..ui.display import run_mimebundle
        return run_mimebundle(self)

    @property
    def _ipython_display_(self) -> Any:
        """A running run in a notebook with widgets displays a panel that follows it to its end (under its
        display id, ``nbsubagents.ui.display.live_display``); otherwise None, and IPython uses the bundle above.
        A value set on the instance (the magics' "already shown") takes precedence."""
        own = self.__dict__.get("_ipython_display_")
        if own is not None:
            return own
        from ..ui.display import live_display
        return live_display(self)

    @_ipython_display_.setter
    def _ipython_display_(self, value: Any) -> None:
        self.__dict__["_ipython_display_"] = value

    def report(self, path: str | Path | None = None, *, format: str | None = None) -> Path:
        """Write this run's report (self-contained HTML, or Markdown for ``.md``); see ``nbsubagents.report``."""
        from ..ui.reports import report
        return report([self], path, format=format)


def get_run(id_or_prefix: str, root: str | Path | None = None) -> Run:
    """The ``Run`` of an id or unique prefix: this process's own handle when it watches the run."""
    from .. import registry
    from . import watcher

    row = registry.resolve(id_or_prefix, root)
    return watcher.get(row["run_id"]) or Run(row["run_dir"])


def _note(run: Run, **kwargs: Any) -> None:
    """Keep the run's registry row current; a registry problem never fails a run."""
    from .. import registry
    registry.note(run, **kwargs)


def _same_process(pid: Any, start_ticks: Any) -> bool:
    from ..child.procs import alive
    return alive(pid, start_ticks)  # the same process (pids are reused) and not a zombie


# -- preparing runs -----------------------------------------------------------------------------
class RunDirError(NbSubagentsError):
    """The run directory cannot be created or written: a problem of the call, not of one task."""


def _resume_source(root: Path, run_id: str) -> tuple[Run, str | None]:
    """The earlier run, and its transcript when it left no session file to continue."""
    earlier = get_run(run_id, root)
    if not earlier.done:
        raise NbSubagentsError(f"Run {earlier.id} is still running: wait for it (or cancel it) before resuming it")
    session = earlier.paths.session
    if session.is_file() and session.stat().st_size > 0:
        return earlier, None
    return earlier, earlier.transcript


def _make_run_dir(root: Path) -> Path:
    """A new, empty run directory under ``root``; the documented error when the folder is not writable."""
    run_dir = artifacts.runs_dir(root) / artifacts.new_run_id()
    try:
        run_dir.mkdir(parents=True)
    except OSError as exc:
        raise RunDirError(f"Cannot create the run directory {run_dir}: {exc.strerror or exc}. "
                          "Make the project's .pi/subagents/runs writable or configure(root=...).") from None
    return run_dir


def _write_error(run_dir: Path, exc: OSError) -> RunDirError:
    """A run directory that could not be written completely is removed: nothing half-written stays."""
    import shutil

    shutil.rmtree(run_dir, ignore_errors=True)
    return RunDirError(f"Cannot write the run directory {run_dir}: {exc.strerror or exc}. "
                       "Free some space or make the project's .pi/subagents/runs writable.")


def prepare(spec: TaskSpec, *, mode: str, task_index: int = 0, note: bool = True, runner: str | None = None) -> Run:
    """Validate one task, then write its run directory; raises NbSubagentsError on bad input.

    Everything is checked before the first write. The run's project is the one its ``cwd`` belongs
    to: presets, settings and the registry come from there. ``note=False`` leaves the registry row
    to the caller (``build_runs`` writes rows once every task of a call is written). ``runner="dask"`` sends
    the run to a Dask worker (``lifecycle.dask_launcher``).
    """
    import shutil

    from .. import config
    from .. import preset_files as preset_mod
    from .context import compose_prompt
    from ..pi import build_argv, choose_model, pi_command

    task = check_task(spec.task)
    cwd = check_cwd(spec.cwd)
    current = config.current(cwd)
    preset = preset_mod.get(spec.preset, cwd)
    timeout = check_timeout(spec.timeout if spec.timeout is not None else preset.timeout, current.timeout)
    pi = find_pi(cwd)
    choice = choose_model(spec.model, preset.name, preset.model, pi)
    root = project_root(cwd)
    earlier, previously = _resume_source(root, spec.resume) if spec.resume else (None, None)
    prompt = compose_prompt(task, files=spec.files, cwd=cwd, previously=previously)
    budget, isolation, schema = _limits(spec, preset, current, cwd, earlier)
    if schema is not None:
        from ..child.output_schema import instruction
        prompt += instruction(schema)
    run_dir = _make_run_dir(root)
    run_id = run_dir.name
    paths = RunPaths(run_dir)
    try:
        argv, ignored_tools = build_argv(pi_command(pi), preset, choice.argv_model, session=paths.session,
                                         system_prompt=paths.system_prompt if preset.prompt else None)
        if preset.prompt:
            paths.system_prompt.write_text(preset.prompt + "\n", encoding="utf-8")
        paths.prompt.write_text(prompt, encoding="utf-8")
        if earlier is not None and previously is None:
            shutil.copyfile(earlier.paths.session, paths.session)  # pi appends; the earlier run keeps its own
            if earlier.meta.get("isolation") and isolation is None:  # its worktree is gone: continue in cwd
                from ..child.isolation import point_session
                point_session(paths.session, cwd)
        meta = {
            "schemaVersion": artifacts.SCHEMA_VERSION, "runId": run_id, "name": spec.name or preset.name,
            "mode": mode, "taskIndex": task_index, "preset": preset.name, "presetSource": str(preset.path),
            "presetScope": preset.scope, "task": task, "cwd": str(cwd), "root": str(root),
            "requestedModel": choice.requested, "requestedModelSource": choice.source,
            "resolvedModel": choice.resolved, "modelThinking": choice.thinking,
            "tools": list(preset.tools) if preset.tools is not None else None, "ignoredTools": ignored_tools or None,
            "disallowedTools": list(preset.disallowed_tools) if preset.disallowed_tools is not None else None,
            "permissionMode": preset.permission_mode, "presetNotes": list(preset.notes) or None,
            "thinking": preset.thinking,
            "systemPromptPath": str(paths.system_prompt) if preset.prompt else None,
            "promptPath": str(paths.prompt), "files": [str(f) if isinstance(f, Path) else f for f in spec.files or []],
            "resumedFrom": earlier.id if earlier is not None else None,
            "sessionPath": str(paths.session), "argv": argv, "env": {"PI_SUBAGENTS_CHILD": "1"},
            "timeout": timeout, "extendTimeoutDebounce": current.extend_timeout_debounce,
            "loopingToolCount": current.looping_tool_count, "createdAt": now_iso(),
            "budget": budget, "isolation": isolation, "outputSchema": schema,
            "launcher": _launcher(),
            "runner": runner or ("process" if mode == "background" else current.runner),
            **_experiment_fields(spec),
        }
        atomic_write_json(paths.meta, meta)
    except OSError as exc:
        raise _write_error(run_dir, exc) from None
    except BaseException:
        shutil.rmtree(run_dir, ignore_errors=True)
        raise
    run = Run(run_dir, meta)
    if note:
        _note(run)
    return run


def _experiment_fields(spec: TaskSpec) -> dict[str, Any]:
    """meta.json's ``experiment``, ``params`` and ``tags`` (only for runs of an experiment)."""
    if spec.experiment is None:
        return {}
    return {"experiment": spec.experiment, "params": dict(spec.params or {}), "tags": dict(spec.tags or {})}


def _limits(spec: TaskSpec, preset: Any, current: Any, cwd: Path, earlier: Run | None) -> tuple[Any, Any, Any]:
    """The run's budget (call or task > preset > settings), isolation plan and output schema, all checked."""
    from ..child import budgets

    chosen = {}
    for key in budgets.FIELDS:
        value = getattr(spec, key)
        chosen[key] = value if value is not None else (preset.budget or {}).get(key, getattr(current, key))
    budget = budgets.to_meta(budgets.check(chosen))
    mode = spec.isolation if spec.isolation is not None else (preset.isolation or current.isolation)
    check_isolation(mode, spec.keep_worktree)
    plan = None
    if mode == "worktree":
        from ..child.isolation import plan as make_plan
        base = None
        if earlier is not None and (earlier.paths.dir / "changes.patch").exists():
            base = str(earlier.paths.dir / "changes.patch")
        plan = make_plan(cwd, keep=bool(spec.keep_worktree), max_copy_mb=current.isolation_max_copy_mb,
                         base_patch=base)
    schema = None
    if spec.output_schema is not None:
        from ..child.output_schema import normalize
        schema = normalize(spec.output_schema)
    return budget, plan, schema


def _launcher() -> dict[str, Any]:
    from ..registry import launcher_identity
    return launcher_identity()


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
    meta = {"schemaVersion": artifacts.SCHEMA_VERSION, "runId": run_dir.name, "name": spec.name or spec.preset,
            "mode": mode, "taskIndex": task_index, "preset": spec.preset,
            "task": spec.task if isinstance(spec.task, str) else repr(spec.task),
            "cwd": str(spec.cwd or Path.cwd()), "root": str(root), "requestedModel": spec.model,
            "resolvedModel": None, "createdAt": now_iso(), "launcher": _launcher(), **_experiment_fields(spec)}
    run = Run(run_dir, meta)
    try:
        atomic_write_json(RunPaths(run_dir).meta, meta)
        settle.never_ran(run.paths, meta, "failed", str(error))
    except OSError as exc:
        raise _write_error(run_dir, exc) from None
    if note:
        _note(run, announced=True)
    return run


# -- driving foreground runs ----------------------------------------------------------------------
def drive(runs: list[Run], *, concurrency: int, renderer: Renderer | None = None) -> list[Run]:
    """Run queued runs, at most ``concurrency`` at once, feeding the renderer until all are terminal.

    A KeyboardInterrupt (a kernel interrupt) cancels every active run and marks queued ones
    aborted, then waits for the supervisors to record it: no child outlives the cell.
    """
    if renderer is None:
        from ..ui.renderers import NullRenderer
        renderer = NullRenderer()
    renderer.start(runs)
    interval = settings.poll_interval  # resolved once: each read of a setting stats the settings files
    queued = [r for r in runs if r.status == "queued"]
    active: list[Run] = []
    for r in runs:
        if r.done:
            renderer.end(r)
    try:
        while queued or active:
            while queued and len(active) < concurrency:
                run = queued.pop(0)
                if run.done:  # cancelled (from its panel) while it waited: never launch it
                    _note(run, announced=True)
                    renderer.end(run)
                    continue
                run.launch()
                active.append(run)
            active = _poll_active(active, renderer, interval)
    except KeyboardInterrupt:
        for run in queued:
            settle.cancelled_before_start(run.paths, run.meta, "the cell was interrupted")
            _note(run, announced=True)
            renderer.end(run)
        for run in active:
            run.cancel()
        while active:
            try:
                active = _poll_active(active, renderer, interval)
            except KeyboardInterrupt:
                continue  # a second interrupt must not leave children behind
    finally:
        renderer.close()
    return runs


def _poll_active(active: list[Run], renderer: Renderer, interval: float) -> list[Run]:
    still = []
    for run in active:
        run.pump(renderer)
        proc = run.process
        if proc is not None and proc.poll() is not None:
            run.pump(renderer)
            if run.result is None:
                settle.lost(run.paths, run.meta, exit_code=proc.returncode)
            _note(run, announced=True)  # seen in its cell: no notice later
            renderer.end(run)
        else:
            still.append(run)
    if still:
        first = still[0].process
        try:
            if first is not None:
                first.wait(interval)
        except subprocess.TimeoutExpired:
            pass
    return still


def build_runs(items: Iterable[Any], *, mode: str, runner: str | None = None) -> list[Run]:
    """Each task becomes a run; one task's bad preset or model fails that task alone.

    Every task's shape is checked before anything is written, and registry rows are written only
    once every run directory of the call is: when the call raises, nothing of it is left behind.
    The runs of one call share a ``group`` id in their meta.json (reports link them).
    """
    import shutil
    import uuid

    group = uuid.uuid4().hex[:12]
    specs = [as_spec(item, index) for index, item in enumerate(items)]
    runs: list[Run] = []
    try:
        for index, spec in enumerate(specs):
            try:
                run = prepare(spec, mode=mode, task_index=index, note=False, runner=runner)
            except RunDirError:
                raise
            except NbSubagentsError as exc:
                run = failed_run(spec, exc, mode=mode, task_index=index, note=False)
            runs.append(run)
            run.meta["group"] = group  # before launch: the supervisor reads meta.json when it starts
            atomic_write_json(run.paths.meta, run.meta)
    except BaseException:
        for run in runs:
            shutil.rmtree(run.dir, ignore_errors=True)
        raise
    for run in runs:
        _note(run, announced=run.done)
    return runs
