"""A consistent public surface: one name for a run's id, the same ``project=`` on every function that reads a
project, real return annotations, Run's internals private, the right shape in a bad task's error, usage first in
``help(nbsubagents)``, and report names that never collide. Runs here are synthetic run directories."""

from __future__ import annotations

import inspect
import json
import warnings
from datetime import datetime
from pathlib import Path

import pytest

import nbsubagents
from nbsubagents import NbSubagentsError, _config as config
from nbsubagents._child.artifacts import now_iso
from nbsubagents._lifecycle.handle import Run
from nbsubagents._views import reports

RESULT = {"status": "completed", "exitCode": 0, "stopReason": "stop", "finalText": "done",
          "usage": {"input": 1, "output": 1, "totalTokens": 2, "cost": 0.0}, "turns": 1, "toolCalls": 0,
          "startedAt": "2026-01-01T10:00:00.000Z", "endedAt": "2026-01-01T10:00:03.000Z", "durationSeconds": 3.0}
PRESET = "---\nname: {name}\ndescription: Only in this project.\nmodel: demo/scripted\n---\nHelp.\n"


def make_project(base: Path, run_id: str, preset: str) -> Path:
    """A project with one preset and one ended run (its run directory, as a supervisor leaves it)."""
    run_dir = base / ".pi" / "subagents" / "runs" / run_id
    run_dir.mkdir(parents=True)
    (base / ".pi" / "subagents" / f"{preset}.md").write_text(PRESET.format(name=preset))
    meta = {"runId": run_id, "name": preset, "preset": preset, "mode": "single", "task": "ls src", "cwd": str(base),
            "resolvedModel": "demo/scripted", "createdAt": now_iso()}
    (run_dir / "meta.json").write_text(json.dumps(meta))
    (run_dir / "result.json").write_text(json.dumps({"runId": run_id, **RESULT}))
    return base


@pytest.fixture
def projects(tmp_path, monkeypatch):
    """Two projects, ``here`` (the current folder) and ``there``, each with a run and a preset of its own."""
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path / "agent"))
    monkeypatch.delenv("NBSUBAGENTS_ROOT", raising=False)
    here = make_project(tmp_path / "here", "run-here", "alpha")
    there = make_project(tmp_path / "there", "run-there", "beta")
    (there / "src").mkdir()
    monkeypatch.chdir(here)
    config.reset()
    yield here, there
    config.reset()


def test_every_function_that_reads_a_project_takes_project_and_reads_that_one(projects):
    here, there = projects
    inside = there / "src"  # a folder inside the project will do
    assert list(nbsubagents.runs()["run_id"]) == ["run-here"]
    assert list(nbsubagents.runs(project=inside)["run_id"]) == ["run-there"]
    assert [r["run_id"] for r in nbsubagents.status(include_completed=True, project=inside).rows] == ["run-there"]
    assert nbsubagents.get_run("run-th", project=inside).run_id == "run-there"
    with pytest.raises(NbSubagentsError):
        nbsubagents.get_run("run-there")  # not in this project
    assert nbsubagents.cancel("run-there", project=inside) is False  # found, and already ended
    for talk in (nbsubagents.steer, nbsubagents.answer):  # found, and already ended: nothing to say to it
        with pytest.raises(NbSubagentsError, match=r"Run run-there has ended \(completed\)"):
            talk("run-there", "hello", project=inside)
    assert [p.name for p in nbsubagents.presets(project=inside)] == ["beta"]
    assert [p.name for p in nbsubagents.presets()] == ["alpha"]
    assert list(nbsubagents.experiments(project=inside)["name"]) == []
    with pytest.raises(NbSubagentsError, match=f"No experiment 'sweep' in {there}"):
        nbsubagents.get_experiment("sweep", project=inside)
    page = nbsubagents.report(["run-there"], project=inside)
    assert page.parent == there / ".pi" / "subagents" / "reports" and "run-there" in page.read_text()
    assert nbsubagents.get_run("run-there", project=inside).report().parent == page.parent  # a run's own project
    figure = nbsubagents.runs_timeline(project=inside)
    assert "run-there" in {artist.get_gid() for artist in figure.axes[0].patches}
    assert "1 total" in repr(nbsubagents.status_bar(project=inside))
    assert nbsubagents.browse(project=inside, live=False).run_ids == ["run-there"]


def test_project_must_be_a_folder(projects):
    here, _there = projects
    with pytest.raises(NbSubagentsError, match=r"project='nowhere' is not a folder: give a folder inside the project"):
        nbsubagents.runs(project="nowhere")


def test_the_older_names_of_project_still_work_with_a_deprecation_warning(projects):
    _here, there = projects
    with pytest.warns(DeprecationWarning, match=r"presets\(cwd=\.\.\.\) is deprecated: use project="):
        assert [p.name for p in nbsubagents.presets(cwd=there)] == ["beta"]
    with pytest.warns(DeprecationWarning, match=r"experiments\(root=\.\.\.\)"):
        assert list(nbsubagents.experiments(root=there)["name"]) == []
    with pytest.raises(NbSubagentsError, match="give project=... alone"):
        nbsubagents.presets(there, cwd=there)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        nbsubagents.presets(there)  # the new name warns nothing


def test_a_run_has_one_id_name_run_id_and_id_is_its_alias(projects):
    here, _there = projects
    run = nbsubagents.get_run("run-here")
    assert run.run_id == run.id == "run-here"
    assert "run-here" in repr(run)
    assert list(nbsubagents.runs().columns)[0] == "run_id"


def test_run_exposes_no_launch_pump_or_refresh():
    public = {name for name in dir(Run) if not name.startswith("_")}
    assert not public & {"launch", "pump", "refresh"}
    assert {"run_id", "wait", "cancel", "apply", "discard", "report"} <= public
    assert {"steer", "follow_up", "answer", "approve", "questions", "wait_for_question"} <= public


PUBLIC_FUNCTIONS = [name for name in nbsubagents.__all__ if inspect.isfunction(getattr(nbsubagents, name))]


@pytest.mark.parametrize("name", PUBLIC_FUNCTIONS)
def test_public_functions_say_what_they_return(name):
    returns = inspect.signature(getattr(nbsubagents, name)).return_annotation
    assert returns not in (inspect.Signature.empty, "Any"), f"{name}() -> {returns}"


@pytest.mark.parametrize("task", ["ls src", None, 3])
def test_a_task_that_is_not_a_dict_shows_the_shape_of_one(task):
    with pytest.raises(NbSubagentsError) as err:
        nbsubagents.run_parallel([{"preset": "scout", "task": "ls"}, task])
    example = {"preset": "scout", "task": task if isinstance(task, str) else "ls ."}
    assert str(err.value) == f"Task 1: each task is a dict with preset and task, such as {example!r}; got {task!r}"


def test_help_starts_with_usage():
    lines = nbsubagents.__doc__.splitlines()
    assert lines[0].startswith("nbsubagents: delegate tasks")
    assert lines[2] == "Usage::"
    text = nbsubagents.__doc__
    for usage in ("nbsubagents.run(", "nbsubagents.start(", "nbsubagents.runs()", "%load_ext nbsubagents",
                  "%subagent scout"):
        assert usage in text
    assert text.index("nbsubagents.run(") < text.index("stays light")


class _OneSecond(datetime):
    @classmethod
    def now(cls, tz=None):
        return cls(2026, 1, 2, 3, 4, 5)


def test_two_reports_in_the_same_second_both_survive(projects, monkeypatch):
    here, _there = projects
    monkeypatch.setattr(reports, "datetime", _OneSecond)
    run = nbsubagents.get_run("run-here")
    first = nbsubagents.report(run, title="the first report")
    second = nbsubagents.report(run, title="the second report")
    third = run.report(format="md")
    folder = here / ".pi" / "subagents" / "reports"
    assert [first.name, second.name, third.name] == ["report-20260102-030405.html", "report-20260102-030405-2.html",
                                                     "report-20260102-030405.md"]
    assert "the first report" in first.read_text() and "the second report" in second.read_text()
    assert sorted(p.name for p in folder.iterdir()) == sorted([first.name, second.name, third.name])  # no leftovers
