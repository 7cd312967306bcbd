"""Issue 28's records: the registry's ``harness`` column (and its migration), ``runs()``/CLI/show/status, the
``harnesses`` axis of an experiment, ``compare(by="harness")``, the report, and doctor's check per harness. Run
directories are made by hand (their ``meta["harness"]`` is what the records read); no harness runs here."""

from __future__ import annotations

import json
import re
import sqlite3
import stat
from pathlib import Path
from types import SimpleNamespace

import pytest

import nbsubagents
from nbsubagents import _cli as cli, _doctor as doctor, _registry as registry
from nbsubagents._child import harnesses
from nbsubagents._config import NbSubagentsError
from nbsubagents._sweeps.experiment import Experiment
from nbsubagents._sweeps.grid import cell_key, expand
from nbsubagents._sweeps.plan import differences, save_plan

HARNESSES = ["pi", "claude-code", "codex"]


def make_run(root: Path, run_id: str, *, harness: str | None, status: str = "completed", cost: float = 0.01,
             preset: str = "scout", experiment: str | None = None, params: dict | None = None,
             scores: dict | None = None) -> Path:
    """A terminal run directory as the supervisor leaves it (``harness`` None: a run dir of an older version)."""
    run_dir = root / ".pi" / "subagents" / "runs" / run_id
    run_dir.mkdir(parents=True)
    meta = {"runId": run_id, "name": preset, "preset": preset, "mode": "background", "task": "read README.md",
            "cwd": str(root), "resolvedModel": "demo/scripted", "createdAt": f"2026-01-01T10:00:{run_id[-2:]}.000Z",
            "launcher": {"pid": 1, "host": "elsewhere", "startTicks": 1}}
    if harness is not None:
        meta["harness"] = harness
    if experiment is not None:
        meta.update(experiment=experiment, params=params or {}, tags={})
    (run_dir / "meta.json").write_text(json.dumps(meta))
    (run_dir / "result.json").write_text(json.dumps({
        "runId": run_id, "status": status, "exitCode": 0 if status == "completed" else 1, "stopReason": "stop",
        "errorMessage": None if status == "completed" else "it broke", "finalText": "done",
        "usage": {"totalTokens": 15, "cost": cost}, "turns": 1, "toolCalls": 1,
        "startedAt": meta["createdAt"], "endedAt": meta["createdAt"], "durationSeconds": 3.0}))
    if scores is not None:
        (run_dir / "scores.json").write_text(json.dumps({"scores": scores}))
    registry.record(run_dir)
    return run_dir


# -- the registry ------------------------------------------------------------------------------------------------
def test_a_registry_of_the_previous_schema_gains_the_harness_column_and_its_rows_are_pi(tmp_path):
    db = registry.db_path(tmp_path)
    db.parent.mkdir(parents=True)
    before = [(n, t) for n, t in registry.COLUMNS if n != "harness"]
    with sqlite3.connect(db) as conn:  # what schema 4 made
        conn.execute(f"CREATE TABLE runs ({', '.join(f'{n} {t}' for n, t in before)})")
        conn.execute("INSERT INTO runs (run_id, status, run_dir) VALUES ('20260101-000000-abcdef', 'completed', 'x')")
        conn.execute("PRAGMA user_version = 4")
    registry.forget_loaded()
    assert registry.fetch(db, "SELECT run_id, harness FROM runs") == [
        {"run_id": "20260101-000000-abcdef", "harness": "pi"}]  # every run of an older version ran under pi
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == registry.SCHEMA_VERSION


def test_a_row_takes_its_harness_from_meta_and_pi_when_meta_has_none(root):
    codex = make_run(root, "20260101-100000-aaaa01", harness="codex")
    older = make_run(root, "20260101-100000-aaaa02", harness=None)
    assert registry.row_from_dir(codex)["harness"] == "codex"
    assert registry.row_from_dir(older)["harness"] == "pi"
    registry.rebuild(root)  # rebuilt from the run directories: the same
    assert {r["run_id"][-2:]: r["harness"] for r in registry.fetch(registry.db_path(root),
                                                                    "SELECT run_id, harness FROM runs")} == \
        {"01": "codex", "02": "pi"}


def test_runs_cli_show_and_status_name_the_harness_and_filter_by_it(root, capsys):
    for i, harness in enumerate(["pi", "claude-code", "codex", None], 1):
        make_run(root, f"20260101-10000{i}-bbbb0{i}", harness=harness)
    frame = nbsubagents.runs()
    assert dict(zip(frame["run_id"].str[-2:], frame["harness"])) == {"01": "pi", "02": "claude-code", "03": "codex",
                                                                      "04": "pi"}
    assert list(nbsubagents.runs(harness="codex")["run_id"]) == ["20260101-100003-bbbb03"]
    assert sorted(nbsubagents.runs(harness=["pi", "claude-code"])["run_id"].str[-2:]) == ["01", "02", "04"]
    with pytest.raises(NbSubagentsError, match="harness must be a name or a list of names"):
        nbsubagents.runs(harness=3)

    assert cli.main(["runs", "--harness", "claude-code,codex", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert {r["run_id"][-2:]: r["harness"] for r in listed} == {"02": "claude-code", "03": "codex"}
    assert cli.main(["runs", "--csv"]) == 0
    assert "harness" in capsys.readouterr().out.splitlines()[0].split(",")
    assert cli.main(["runs", "--harness", "gemini"]) == 0
    assert "no runs match --harness gemini" in capsys.readouterr().out
    assert cli.main(["runs"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[1].split()[:5] == ["RUN", "ID", "NAME", "HARNESS", "STATUS"]
    assert [line.split()[2] for line in table[2:]] == ["pi", "codex", "claude-code", "pi"]
    assert cli.main(["runs", "--harness", "pi"]) == 0  # runs of pi alone: the table as it always was
    assert "HARNESS" not in capsys.readouterr().out

    assert cli.main(["show", "bbbb02"]) == 0
    assert "  harness     claude-code\n" in capsys.readouterr().out
    assert cli.main(["show", "bbbb04", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["harness"] == "pi"
    details = repr(nbsubagents.status("bbbb03"))
    assert "  harness      codex\n" in details


# -- the experiment's grid ---------------------------------------------------------------------------------------
def test_the_harnesses_axis_multiplies_the_grid_and_each_cell_names_its_harness():
    cells = expand(["read README.md", "ls src"], presets=["scout", "scribe"], repeats=2, harnesses=HARNESSES)
    assert len(cells) == 2 * 3 * 2 * 2 == len({c["key"] for c in cells})
    for cell in cells:
        assert cell["spec"]["harness"] == cell["params"]["harness"]  # the run option each run is launched with
        assert cell["key"] == cell_key(cell["params"]) and json.loads(cell["key"])[-1] == cell["params"]["harness"]
    assert {(c["params"]["harness"], c["params"]["preset"], c["params"]["repeat"]) for c in cells
            if c["params"]["task_id"] == "task-1"} == {(h, p, r) for h in HARNESSES for p in ("scout", "scribe")
                                                       for r in (1, 2)}
    assert cells[0]["params"] == {"task_id": "task-1", "harness": "pi", "preset": "scout", "model": None,
                                  "repeat": 1}
    assert cells[0]["spec"]["name"] == "task-1 · pi · scout · default · #1"


def test_a_sweep_without_harnesses_keeps_its_cells_keys_and_a_task_may_name_its_own():
    plain = expand(["read README.md"], presets=["scout"])
    assert "harness" not in plain[0]["params"] and "harness" not in plain[0]["spec"]
    assert plain[0]["key"] == json.dumps(["task-1", "scout", None, 1])  # as earlier versions stored it
    own = expand([{"task": "ls", "harness": "codex"}, "pwd"], presets=["scout"])
    assert [c["params"].get("harness") for c in own] == ["codex", None]
    assert own[0]["spec"]["harness"] == "codex" and "harness" not in own[1]["spec"]


def test_an_unknown_harness_or_a_harness_option_for_every_run_is_refused_before_anything_runs():
    with pytest.raises(NbSubagentsError, match="harnesses: unknown harness 'gemini'; the harnesses are pi, "
                                               "claude-code, codex"):
        expand(["ls"], presets=["scout"], harnesses=["pi", "gemini"])
    with pytest.raises(NbSubagentsError, match="Task 'task-1': 'harness': unknown harness 'claude'"):
        expand([{"task": "ls", "harness": "claude"}], presets=["scout"])
    with pytest.raises(NbSubagentsError, match="harnesses lists a name twice"):
        expand(["ls"], presets=["scout"], harnesses=["pi", "pi"])
    with pytest.raises(NbSubagentsError, match="harness"):  # the axis is the sweep's way to choose
        expand(["ls"], presets=["scout"], run_options={"harness": "codex"})


def test_a_changed_harnesses_axis_is_named_as_what_changed():
    old = expand(["ls"], presets=["scout"], harnesses=["pi", "codex"])
    new = expand(["ls"], presets=["scout"], harnesses=["pi", "claude-code"])
    assert differences({"cells": old}, new, []) == ["harnesses"]


def test_the_cost_estimate_of_a_cell_is_from_earlier_runs_of_its_harness(root):
    from nbsubagents._sweeps.spend import Limits, estimate

    make_run(root, "20260101-100000-ffff01", harness="codex", cost=0.01)
    make_run(root, "20260101-100000-ffff02", harness=None, cost=0.03)  # pi
    spec = {"preset": "scout", "model": None, "task": "read README.md"}
    assert estimate(root, [{**spec, "harness": "codex"}], Limits(), 0.0).total == pytest.approx(0.01)
    assert estimate(root, [{**spec, "harness": "pi"}], Limits(), 0.0).total == pytest.approx(0.03)
    assert estimate(root, [spec], Limits(), 0.0).total == pytest.approx(0.02)  # no harness named: any
    assert estimate(root, [{**spec, "harness": "claude-code"}], Limits(), 0.0).known == 0


# -- compare(by="harness") and the report ------------------------------------------------------------------------
def sweep(root: Path, *, skip: int | None = None) -> Experiment:
    """An experiment of 3 harnesses × 2 repeats whose runs are made by hand: codex fails one of its two, and its
    cheaper; cell ``skip`` (an index) has no run yet."""
    cells = expand(["read README.md"], presets=["scout"], repeats=2, harnesses=HARNESSES)
    save_plan(root, "three", cells, [], 2)
    costs = {"pi": 0.02, "claude-code": 0.04, "codex": 0.01}
    for i, cell in enumerate(cells):
        if i == skip:
            continue
        harness, repeat = cell["params"]["harness"], cell["params"]["repeat"]
        failed = harness == "codex" and repeat == 2
        make_run(root, f"20260101-1000{i:02d}-cccc{i:02d}", harness=harness, experiment="three",
                 params=cell["params"], status="failed" if failed else "completed", cost=costs[harness],
                 scores={"ok": not failed})
    return nbsubagents.get_experiment("three")


def test_compare_by_harness_has_one_row_per_harness_with_its_runs_rates_and_costs(root):
    exp = sweep(root)
    frame = exp.frame()
    assert list(frame["harness"]) == list(frame["params.harness"]) == ["pi", "pi", "claude-code", "claude-code",
                                                                       "codex", "codex"]
    table = exp.compare(by="harness").table
    assert list(table.index) == sorted(HARNESSES)
    assert table[("runs", "planned")].to_dict() == dict.fromkeys(HARNESSES, 2)
    assert table[("success", "rate")].to_dict() == {"claude-code": 1.0, "codex": 0.5, "pi": 1.0}
    assert table[("metrics.cost", "mean")].to_dict() == pytest.approx({"claude-code": 0.04, "codex": 0.01,
                                                                           "pi": 0.02})
    assert table[("scores.ok", "rate")]["codex"] == 0.5
    assert exp.axes() == ("harness", "preset", "model")  # compare() and plot() group by the harness unless told
    assert list(exp.compare().table.index.get_level_values(0)) == sorted(HARNESSES)
    shown = repr(exp.compare(by="harness"))
    assert "per cell (harness)" in shown and "\nharness      success " in shown
    assert all(re.search(f"\n{name} +(100|50)% of 2 ", shown) for name in HARNESSES)


def test_a_cell_not_launched_counts_as_planned_under_its_harness(root):
    exp = sweep(root, skip=5)  # codex's second repeat
    runs = exp.compare(by="harness").table["runs"]
    assert (runs.loc["codex", "planned"], runs.loc["codex", "ran"]) == (2, 1)
    assert runs.loc["codex", "why"] == "1 not launched"


def test_a_sweep_without_the_axis_compares_by_the_harness_each_run_ran_under(root):
    cells = expand(["read README.md"], presets=["scout"], repeats=2)
    save_plan(root, "plain", cells, [], 2)
    for i, (cell, harness) in enumerate(zip(cells, ["claude-code", None])):  # a preset chose it; an older run
        make_run(root, f"20260101-1100{i:02d}-dddd{i:02d}", harness=harness, experiment="plain",
                 params=cell["params"])
    exp = nbsubagents.get_experiment("plain")
    assert exp.axes() == ("preset", "model")
    runs = exp.compare(by="harness").table["runs"]
    assert runs["ran"].to_dict() == {"claude-code": 1, "pi": 1}


def test_the_report_names_the_harness_of_each_cell_and_run(root):
    exp = sweep(root)
    text = exp.report(format="md").path.read_text()
    assert "- **Harnesses:** pi, claude-code, codex" in text
    assert "- **Harnesses used:** claude-code (2 runs), codex (2 runs), pi (2 runs)" in text
    header = next(line for line in text.splitlines() if line.startswith("| harness |"))
    assert header.startswith("| harness | preset | model | success |")
    assert sum(line.startswith(f"| {h} | scout |") for line in text.splitlines() for h in HARNESSES) == 3
    assert text.count(", harness codex, ") == 2 and text.count(", harness claude-code, ") == 2
    page = exp.report().path.read_text()
    assert "<th>Harnesses</th><td>pi, claude-code, codex</td>" in page and "<th>Harness</th>" in page


def test_mlflow_params_and_tags_say_which_harness_ran_each_run(root):
    cells = expand(["read README.md"], presets=["scout"])
    save_plan(root, "one", cells, [], 1)
    make_run(root, "20260101-120000-eeee00", harness="codex", experiment="one", params=cells[0]["params"])
    exp = nbsubagents.get_experiment("one")
    exp.to_mlflow(f"sqlite:///{root / 'mlflow.db'}", artifact_location=(root / "mlartifacts").as_uri())
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{root / 'mlflow.db'}")
    [found] = client.search_runs([client.get_experiment_by_name("one").experiment_id])
    assert found.data.params["harness"] == "codex" and found.data.tags["nbsubagents.harness"] == "codex"


# -- doctor ------------------------------------------------------------------------------------------------------
def fake_harness(name: str, program: str, said: str | None) -> SimpleNamespace:
    return SimpleNamespace(NAME=name, PROGRAM=program, PACKAGE=f"@fake/{name}", REFUSES={},
                           version=lambda path: said)


def test_doctor_checks_each_harness_other_than_pi_found_with_its_version_or_how_to_install_it(tmp_path,
                                                                                              monkeypatch):
    fakes = {"fake-found": fake_harness("fake-found", "h8fakefound", "9.9.9 (Fake Code)"),
             "fake-missing": fake_harness("fake-missing", "h8fakemissing", None),
             "fake-broken": fake_harness("fake-broken", "h8fakebroken", None)}
    real = harnesses.get
    monkeypatch.setattr(harnesses, "get", lambda name: fakes.get(name) or real(name))
    monkeypatch.setattr(harnesses, "names", lambda: ["pi", *fakes])
    bin_dir = tmp_path / "harnesses" / "node_modules" / ".bin"
    bin_dir.mkdir(parents=True)
    for program in ("h8fakefound", "h8fakebroken"):
        (bin_dir / program).write_text("#!/bin/sh\n")
        (bin_dir / program).chmod(stat.S_IRWXU)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NBSUBAGENTS_PI", str(tmp_path / "no-pi"))  # pi's checks end at once

    checks = doctor.checks()
    assert [c.check for c in checks if c.check in fakes] == list(fakes)  # one each; pi's own checks are its
    found = {c.check: c for c in checks}
    ok, missing, broken = found["fake-found"], found["fake-missing"], found["fake-broken"]
    assert (ok.ok, ok.detail) == (True, f"9.9.9 (Fake Code) ({bin_dir / 'h8fakefound'})")
    assert missing.ok is None and missing.fix == "npm install @fake/fake-missing"
    assert missing.detail.startswith("not found (runs with harness='fake-missing' need it): ")
    assert "NBSUBAGENTS_H8FAKEMISSING" in missing.detail
    assert broken.ok is False and "`h8fakebroken --version` failed" in broken.detail  # doctor exits 1


def test_the_experiment_magic_takes_harnesses():
    from nbsubagents._sweeps.magic import parse_body

    assert parse_body("tasks: [ls]\npresets: [scout]\nharnesses: [pi, codex]")["harnesses"] == ["pi", "codex"]
