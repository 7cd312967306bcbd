"""Experiments end to end: sweeps of the real pi on the scripted model, scores, comparison, resume, MLflow export."""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

import nbsubagents
from nbsubagents import _registry as registry
from nbsubagents._config import NbSubagentsError
from nbsubagents._child.harnesses.pi import write_agent_dir

from helpers import wait_for
from test_isolation import assert_no_workspace_left, git, make_repo, worktrees  # noqa: F401 (a fixture)
from test_magics import shell  # noqa: F401 (a fixture)

TASKS = ["read README.md", "ls src"]


@pytest.fixture
def two_models(project, scripted):
    """The scripted model under two names, so a sweep has a model axis."""
    write_agent_dir(os.environ["PI_CODING_AGENT_DIR"], scripted.url, models=("scripted", "mini"))
    return ["demo/scripted", "demo/mini"]


def run_dirs(project: Path) -> list[Path]:
    return sorted(p for p in (project / ".pi" / "subagents" / "runs").iterdir() if p.is_dir())


def words(run) -> float:
    return float(len(run.output.split()))


def test_cross_product_records_params_tags_scores_in_run_dirs_and_registry_and_compares(project, two_models):
    """One 16-run sweep: what each run records, the registry rebuilt from the run directories, then compare()
    against a hand computation over that rebuilt registry."""
    exp = nbsubagents.experiment("grid", tasks=TASKS, presets=["scout", "scribe"], models=two_models, repeats=2,
                                 concurrency=4, scorers=[nbsubagents.check("test -f README.md"), words],
                                 tags={"owner": "tests"}, show=False)
    runs = exp.runs()
    assert len(runs) == 2 * 2 * 2 * 2 == len(run_dirs(project))
    assert {r.status for r in runs} == {"completed"}
    cells = {(r.params["task_id"], r.params["preset"], r.params["model"], r.params["repeat"]) for r in runs}
    assert cells == {(t, p, m, k) for t in ("task-1", "task-2") for p in ("scout", "scribe") for m in two_models
                     for k in (1, 2)}
    assert {r.model for r in runs} == set(two_models)  # the model axis reached pi
    one = runs[0]
    meta = json.loads((one.dir / "meta.json").read_text())
    assert meta["experiment"] == "grid" and meta["tags"] == {"owner": "tests"}
    scores = json.loads((one.dir / "scores.json").read_text())["scores"]
    assert scores["check_test_f_README_md"] is True and scores["words"] == words(one) > 0
    assert "exit code 0" in (one.dir / "checks" / "check_test_f_README_md.log").read_text()
    assert "scores check_test_f_README_md=True" in nbsubagents._child.summary.summary_line(one)  # the panel's end
    before = {r["run_id"]: (r["params"], r["tags"], r["scores"]) for r in exp.rows()}
    registry.db_path().unlink()
    assert registry.rebuild() == 16
    after = {r["run_id"]: (r["params"], r["tags"], r["scores"]) for r in exp.rows()}
    assert after == before and all(json.loads(s)["words"] > 0 for _, _, s in after.values())

    frame = exp.frame()
    table = exp.compare(by=("preset", "model"), baseline=("scout", "demo/scripted")).table
    assert len(table) == 4
    for (preset, model), row in table.iterrows():
        part = frame[(frame["params.preset"] == preset) & (frame["params.model"] == model)]
        base = frame[(frame["params.preset"] == "scout") & (frame["params.model"] == "demo/scripted")]
        assert row[("runs", "ran")] == row[("runs", "planned")] == len(part) == 4
        assert row[("success", "rate")] == sum(part["status"] == "completed") / 4
        for col in ("metrics.tokens", "metrics.duration_s", "scores.words"):
            values = [float(v) for v in part[col]]
            assert row[(col, "mean")] == pytest.approx(statistics.mean(values))
            assert row[(col, "std")] == pytest.approx(statistics.stdev(values))
            assert row[(col, "n")] == 4
            assert row[(col, "Δ")] == pytest.approx(statistics.mean(values) - statistics.mean(map(float, base[col])))
    html = exp.compare(by="preset")._repr_html_()
    assert "<table" in html and ">words<" in html and "grid: per cell (preset)" in html
    with pytest.raises(NbSubagentsError, match="not a cell"):
        exp.compare(by="preset", baseline="nobody")
    with pytest.raises(NbSubagentsError, match="no column 'colour'"):
        exp.compare(by="colour")
    fig = exp.plot()  # y: the first score
    assert sorted(c.get_gid() for c in fig.axes[0].collections) == sorted(
        f"{p} · {m}" for p in ("scout", "scribe") for m in two_models)
    assert fig.axes[0].get_ylabel() == "scores.check_test_f_README_md"
    assert exp.plot(y="words").axes[0].get_ylabel() == "scores.words"


def test_a_dataframe_of_tasks_keeps_its_other_columns_as_params(project):
    import pandas as pd

    tasks = pd.DataFrame({"id": ["readme", "listing"], "task": TASKS, "difficulty": [1, 3], "area": ["docs", "src"]})
    exp = nbsubagents.experiment("frame", tasks=tasks, presets="scout", show=False)
    frame = exp.frame()
    assert len(frame) == 2 and set(frame["status"]) == {"completed"}
    by_id = frame.set_index("params.task_id")
    assert by_id.loc["listing", "params.difficulty"] == 3 and by_id.loc["readme", "params.area"] == "docs"
    assert (by_id["metrics.tokens"] > 0).all() and (by_id["metrics.tool_calls"] == 1).all()
    listed = nbsubagents.experiments()
    assert listed.set_index("name").loc["frame", "completed"] == 2
    assert nbsubagents.get_experiment("frame").counts()["completed"] == 2


def test_refused_inputs_say_what_is_wrong_and_write_nothing(project):
    cases = [
        (dict(name="bad name!", tasks=TASKS, presets="scout"), "experiment name"),
        (dict(name="x", tasks=TASKS, presets="scout", repeats=0), "repeats must be"),
        (dict(name="x", tasks=TASKS, presets="scout", workers=2), "unknown option(s) workers"),
        (dict(name="x", tasks=[{"id": "a", "task": "ls"}, {"id": "a", "task": "ls"}], presets="scout"), "used twice"),
        (dict(name="x", tasks=TASKS), "has no preset"),
        (dict(name="x", tasks=[], presets="scout"), "at least one task"),
        (dict(name="x", tasks=[{"task": "ls", "repeat": 2}], presets="scout"), "name the grid"),
        (dict(name="x", tasks=TASKS, presets="scout", scorers=[42]), "A scorer must be"),
        (dict(name="x", tasks=TASKS, presets="scout", concurrency=0), "concurrency must be"),
    ]
    for kwargs, message in cases:
        with pytest.raises(NbSubagentsError, match=message.replace("(", r"\(").replace(")", r"\)")):
            nbsubagents.experiment(kwargs.pop("name"), show=False, **kwargs)
    with pytest.raises(NbSubagentsError, match="check\\(\\) needs a command"):
        nbsubagents.check("  ")
    with pytest.raises(NbSubagentsError, match="No experiment 'nope'"):
        nbsubagents.get_experiment("nope")
    assert not (project / ".pi" / "subagents" / "runs").exists()
    assert not (project / ".pi" / "subagents" / "experiments").exists()


def test_rescore_scores_ended_runs_again_without_running_them(project, scripted):
    exp = nbsubagents.experiment("rescore", tasks=TASKS, presets="scout", show=False)
    requests = len(scripted.requests)
    results = {r.id: (r.dir / "result.json").stat().st_mtime_ns for r in exp.runs()}

    def mentions_readme(run):
        return {"readme": "README" in run.output, "chars": len(run.output)}

    exp.rescore(mentions_readme, nbsubagents.check("grep -q Demo README.md", name="title"))
    frame = exp.frame().set_index("params.task_id")
    assert frame.loc["task-1", "scores.readme"] == True and frame.loc["task-2", "scores.readme"] == False  # noqa: E712
    assert (frame["scores.title"] == True).all() and (frame["scores.chars"] > 0).all()  # noqa: E712
    exp.rescore(nbsubagents.check("grep -q Absent README.md", name="title"))  # a score is replaced, others stay
    frame = exp.frame()
    assert (frame["scores.title"] == False).all() and "scores.readme" in frame  # noqa: E712
    assert len(scripted.requests) == requests  # nothing ran again
    assert {r.id: (r.dir / "result.json").stat().st_mtime_ns for r in exp.runs()} == results

    def broken(run):
        raise ValueError("no luck")

    exp.rescore(broken)
    stored = json.loads((exp.runs()[0].dir / "scores.json").read_text())
    assert stored["errors"] == {"broken": "ValueError: no luck"} and "readme" in stored["scores"]


LAUNCHER = """
import nbsubagents
nbsubagents.experiment("resume", tasks=["sleep: 0.2\\nsay: one", "sleep: 0.2\\nsay: two", "sleep: 0.2\\nsay: three",
                       "sleep: 0.2\\nsay: four"], presets="scout", concurrency=1, show=False)
"""


def test_resume_after_the_launching_process_is_killed(project):
    launcher = subprocess.Popen([sys.executable, "-c", LAUNCHER], cwd=project)
    try:
        def ended():
            return [d for d in (project / ".pi" / "subagents" / "runs").glob("*/result.json")]
        wait_for(lambda: len(ended()) >= 1 and len(list((project / ".pi/subagents/runs").iterdir())) >= 2,
                 what="the first run to end")
    finally:
        launcher.send_signal(signal.SIGKILL)
        launcher.wait()
    first = {p.parent.name for p in (project / ".pi" / "subagents" / "runs").glob("*/result.json")}
    assert first and len(first) < 4
    exp = nbsubagents.get_experiment("resume").resume(show=False)
    frame = exp.frame()
    assert len(frame) == 4 and set(frame["status"]) == {"completed"}
    kept = [rid for rid in first if json.loads((project / ".pi/subagents/runs" / rid / "result.json").read_text())
            ["status"] == "completed"]
    assert kept and set(kept) <= set(frame.index)  # ended runs are kept, not run again
    assert sorted(frame["params.task_id"]) == ["task-1", "task-2", "task-3", "task-4"]
    again = nbsubagents.experiment("resume", tasks=["sleep: 0.2\nsay: one", "sleep: 0.2\nsay: two",
                                                    "sleep: 0.2\nsay: three", "sleep: 0.2\nsay: four"],
                                   presets="scout", concurrency=1, show=False)
    assert list(again.frame().index) == list(frame.index)  # nothing left to run


CANCEL_LAUNCHER = """
import nbsubagents
nbsubagents.experiment("final", tasks=["sleep: 3\\nsay: one", "say: two", "say: three", "say: four"],
                       presets="scout", concurrency=1, show=False)
"""


def test_a_queued_run_a_person_cancelled_stays_cancelled_when_the_sweep_resumes(project):
    """Issue 55, item 10: the launcher of a sweep is killed with runs queued, one of which a person cancelled
    (from another process); resuming, with retries too, runs the others and keeps the cancel. ``rerun_cancelled``
    is the way to run it again on purpose."""
    runs_dir = project / ".pi" / "subagents" / "runs"
    launcher = subprocess.Popen([sys.executable, "-c", CANCEL_LAUNCHER], cwd=project)
    try:
        wait_for(lambda: len(list(runs_dir.glob("*/meta.json"))) == 4
                 and len(list(runs_dir.glob("*/supervisor.json"))) == 1, what="one run started, three queued")
        queued = sorted(d.parent.name for d in runs_dir.glob("*/meta.json") if not (d.parent / "supervisor.json")
                        .exists())
        cancelled = queued[1]
        assert nbsubagents.cancel(cancelled) is True
    finally:
        launcher.send_signal(signal.SIGKILL)
        launcher.wait()
    row = nbsubagents.runs().set_index("run_id").loc[cancelled]
    assert (row["status"], row["stop_reason"]) == ("aborted", "cancelled")
    exp = nbsubagents.get_experiment("final").resume(retries=2, show=False)
    frame = exp.frame()
    assert len(frame) == 4
    assert cancelled in frame.index, "the cancelled cell was run again"
    assert frame.loc[cancelled, "status"] == "aborted"  # kept: the same run, not started again
    assert set(frame.drop(index=cancelled)["status"]) == {"completed"}
    left = [r for r in nbsubagents.runs()["run_id"] if r in queued and r != cancelled]
    assert left and all(nbsubagents.runs().set_index("run_id").loc[r, "stop_reason"] == "not_started" for r in left)

    again = nbsubagents.get_experiment("final").resume(rerun_cancelled=True, show=False).frame()
    assert cancelled not in again.index and set(again["status"]) == {"completed"}
    cell = again[again["params.task_id"] == frame.loc[cancelled, "params.task_id"]]
    assert cell["attempt"].tolist() == [2]
    assert set(again.drop(index=cell.index).index) == set(frame.drop(index=cancelled).index)  # the rest kept


def test_background_sweep_runs_in_a_detached_process_with_its_checks(project):
    exp = nbsubagents.experiment("bg", tasks=TASKS, presets="scout", background=True,
                                 scorers=[nbsubagents.check("test -f src/app.py", name="has_app")])
    assert exp.running
    exp.wait(120)
    frame = exp.frame()
    assert len(frame) == 2 and set(frame["status"]) == {"completed"}
    assert (frame["scores.has_app"] == True).all()  # noqa: E712
    with pytest.raises(NbSubagentsError, match="only use check"):
        nbsubagents.experiment("bg2", tasks=TASKS, presets="scout", background=True, scorers=[words])


def test_mlflow_round_trip_and_parquet(project, tmp_path):
    mlflow = pytest.importorskip("mlflow")
    exp = nbsubagents.experiment("export", tasks=TASKS, presets=["scout", "scribe"], scorers=[words], show=False)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"  # a real local MLflow store (SQLite backend)
    experiment_id = exp.to_mlflow(uri, artifact_location=(tmp_path / "mlartifacts").as_uri())
    assert exp.to_mlflow(uri) == experiment_id  # a second export adds nothing
    mlflow.set_tracking_uri(uri)
    found = mlflow.search_runs(experiment_names=["export"])
    assert len(found) == 4
    ours = exp.frame()
    for _, row in found.iterrows():
        run_id = row["tags.nbsubagents.run_id"]
        assert row["params.preset"] == ours.loc[run_id, "params.preset"]
        assert row["metrics.tokens"] == ours.loc[run_id, "metrics.tokens"]
        assert row["metrics.score.words"] == ours.loc[run_id, "scores.words"]
        assert row["status"] == "FINISHED"
        names = {a.path for a in mlflow.MlflowClient(uri).list_artifacts(row["run_id"])}
        assert {"meta.json", "result.json", "scores.json", "events.jsonl"} <= names
    path = tmp_path / "export.parquet"
    exp.to_frame().to_parquet(path)
    import pandas as pd
    back = pd.read_parquet(path)
    assert list(back.index) == list(ours.index) and back["scores.words"].tolist() == ours["scores.words"].tolist()


def test_import_loads_no_pandas_mlflow_or_matplotlib():
    code = ("import sys, nbsubagents; nbsubagents.check; nbsubagents.experiment; "
            "print(sorted(m for m in ('pandas', 'mlflow', 'matplotlib', 'IPython') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_magic_refuses_a_bad_body_with_an_example(project):
    from IPython.core.error import UsageError

    from nbsubagents._sweeps.magic import parse_body

    with pytest.raises(UsageError, match=r"not valid YAML at line 1.*\nExample:\ntasks:"):
        parse_body("tasks: [unclosed")
    with pytest.raises(UsageError, match="unknown key\\(s\\) preset; the cell may have tasks, presets"):
        parse_body("tasks: [ls]\npreset: scout")
    with pytest.raises(UsageError, match="at least 'tasks'"):
        parse_body("- ls")
    assert parse_body("tasks: [ls]\npresets: [scout]\nscorers: ['test -f x']")["scorers"] == ["test -f x"]


def test_a_registry_of_the_previous_schema_gets_the_experiment_columns_in_place(tmp_path):
    import sqlite3

    db = registry.db_path(tmp_path)
    db.parent.mkdir(parents=True)
    old = [(n, t) for n, t in registry.COLUMNS if n not in ("experiment", "params", "tags", "scores")]
    with sqlite3.connect(db) as conn:
        conn.execute(f"CREATE TABLE runs ({', '.join(f'{n} {t}' for n, t in old)})")
        conn.execute("INSERT INTO runs (run_id, status, run_dir) VALUES ('20260101-000000-abcdef', 'completed', 'x')")
        conn.execute("PRAGMA user_version = 1")
    rows = registry.fetch(db, "SELECT run_id, experiment, scores FROM runs")
    assert rows == [{"run_id": "20260101-000000-abcdef", "experiment": None, "scores": None}]
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == registry.SCHEMA_VERSION >= 9
        assert "runs_experiment_created" in {r[1] for r in conn.execute("PRAGMA index_list(runs)")}



# -- isolated sweeps (issue 15 with issue 14's isolation and budgets) ----------------------------------------------
ANSWERS = [{"id": "alpha", "task": "write answer.txt: alpha\nsleep: 1\nsay: wrote alpha"},
           {"id": "beta", "task": "write answer.txt: beta\nsleep: 1\nsay: wrote beta"}]


def started_and_ended(run) -> tuple[float, float]:
    from datetime import datetime
    return tuple(datetime.fromisoformat(run.result[k].replace("Z", "+00:00")).timestamp()
                 for k in ("startedAt", "endedAt"))


def test_an_isolated_sweep_gives_each_run_its_worktree_and_checks_score_each_runs_own_changes(project, worktrees,
                                                                                          capsys):
    make_repo(project)

    def diff_says_alpha(run):
        return "+alpha" in run.diff

    exp = nbsubagents.experiment(
        "iso", tasks=ANSWERS, presets="scribe", repeats=2, concurrency=4, isolation="worktree", max_turns=5,
        scorers=[nbsubagents.check("grep -qx alpha answer.txt", name="says_alpha"), diff_says_alpha])
    shown = capsys.readouterr().err  # outside a notebook the sweep's lines go to stderr
    for cell in ("scribe · demo/scripted · alpha · #1", "scribe · demo/scripted · alpha · #2",
                 "scribe · demo/scripted · beta · #2"):
        line = next((ln for ln in shown.splitlines() if ln.startswith(f"✓ {cell} ")), None)
        assert line is not None, shown
        assert "says_alpha=" in line and "1 file +1" in line  # each cell's end shows its scores and change
    runs = exp.runs()
    assert len(runs) == 4 and {r.status for r in runs} == {"completed"}, [r.error for r in runs]
    spans = [started_and_ended(r) for r in runs]
    assert max(s for s, _ in spans) < min(e for _, e in spans)  # all four ran at once, each in its own worktree
    for run in runs:
        alpha = run.params["task_id"] == "alpha"
        assert run.record.isolation["mode"] == "worktree" and run.record.budget == {"maxTurns": 5}
        assert run.files_changed == ["answer.txt"] and ("+alpha" in run.diff) == alpha
        assert run.scores == {"says_alpha": alpha, "diff_says_alpha": alpha}  # the check read the run's own file
        log = (run.dir / "checks" / "says_alpha.log").read_text()
        assert "a scratch workspace of the run's starting state with its changes.patch applied" in log
    assert not (project / "answer.txt").exists()  # the project is untouched until a run is applied
    frame = exp.frame()
    assert (frame["metrics.files_changed"] == 1).all() and (frame["metrics.lines_added"] == 1).all()
    assert "metrics.files_changed" not in nbsubagents.experiment("plain", tasks=["ls src"], presets="scout",
                                                                 show=False).frame()
    assert_no_workspace_left(project, worktrees)  # neither the runs' worktrees nor the checks' scratch ones

    exp.rescore(nbsubagents.check("grep -qx beta answer.txt", name="says_beta"))  # long after the worktrees went
    assert {r.params["task_id"]: r.scores["says_beta"] for r in exp.runs()} == {"alpha": False, "beta": True}
    assert_no_workspace_left(project, worktrees)
    beta = next(r for r in runs if r.params["task_id"] == "beta")
    beta.apply()
    exp.rescore(nbsubagents.check("grep -qx alpha answer.txt", name="says_alpha"))  # still each run's own file
    assert {r.params["task_id"]: r.scores["says_alpha"] for r in exp.runs()} == {"alpha": True, "beta": False}
    assert (project / "answer.txt").read_text() == "beta\n"

    with pytest.raises(NbSubagentsError, match="isolation must be 'worktree' or 'none', got 'docker'"):
        nbsubagents.experiment("bad-iso", tasks=ANSWERS, presets="scribe", isolation="docker", show=False)
    with pytest.raises(NbSubagentsError, match="max_tool_calls must be a whole number of at least 1, got 0"):
        nbsubagents.experiment("bad-budget", tasks=ANSWERS, presets="scribe", max_tool_calls=0, show=False)
    (project / "fresh").mkdir()
    git(project / "fresh", "init", "-q")
    with pytest.raises(NbSubagentsError, match="has no commit yet"):
        nbsubagents.experiment("no-commit", tasks=ANSWERS, presets="scribe", isolation="worktree",
                               cwd=project / "fresh", show=False)
    assert not any(p.name.startswith(("bad-", "no-commit")) for p in (project / ".pi/subagents/experiments").iterdir())


def test_the_magic_runs_an_isolated_budgeted_sweep_from_its_yaml(shell, project, worktrees):
    make_repo(project)
    shell.run_cell("%%subagent_experiment iso-magic -o exp\n"
                   "tasks:\n"
                   "  - {id: alpha, task: 'write answer.txt: alpha'}\n"
                   "  - {id: beta, task: 'write answer.txt: beta'}\n"
                   "presets: [scribe]\n"
                   "concurrency: 2\n"
                   "isolation: worktree\n"
                   "max_tool_calls: 3\n"
                   "scorers:\n"
                   "  - {check: 'grep -qx alpha answer.txt', name: says_alpha}\n", store_history=True)
    exp = shell.user_ns["exp"]
    runs = exp.runs()
    assert {r.status for r in runs} == {"completed"} and len(runs) == 2
    assert {r.params["task_id"]: r.scores["says_alpha"] for r in runs} == {"alpha": True, "beta": False}
    assert all(r.record.budget == {"maxToolCalls": 3} and r.record.isolation for r in runs)
    assert not (project / "answer.txt").exists()
    assert_no_workspace_left(project, worktrees)


def test_the_detached_sweep_driver_loads_no_notebook_side(project):
    """The driver of a background sweep (``python -m nbsubagents._sweeps.experiment ROOT NAME N``) runs its
    experiment without IPython, ipywidgets or anything of ``ui/``: sweeps sit below the notebook edge."""
    exp = nbsubagents.experiment("driven", tasks=TASKS, presets="scout", background=True)
    exp.wait(120)
    assert set(exp.frame()["status"]) == {"completed"}
    code = ("import runpy, sys\nsys.argv = ['driver', *sys.argv[1:]]\n"
            "try:\n    runpy.run_module('nbsubagents._sweeps.experiment', run_name='__main__', alter_sys=True)\n"
            "except SystemExit as end:\n    print('exit', end.code)\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('IPython', 'ipywidgets', 'ipykernel')"
            " or m.startswith('nbsubagents._ui')))\n")
    out = subprocess.run([sys.executable, "-c", code, str(project), "driven", "2"], capture_output=True, text=True,
                         timeout=120, cwd=project, stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == ["exit 0", "[]"], out.stdout
