"""Issue 55 item 6: one vocabulary for a run's columns. The same runs read through every face (``runs()``,
``nbsubagents runs --json``, ``--csv``, an experiment's frame, the MLflow export) have the same names for the same
quantities, and the same values under them. Run directories are made by hand, as the supervisor leaves them."""

from __future__ import annotations

import csv
import io
import json
import math
import re
import sqlite3
from pathlib import Path

import pandas as pd
import pytest

import nbsubagents
from nbsubagents import _cli as cli, _registry as registry
from nbsubagents._sweeps.grid import expand
from nbsubagents._sweeps.plan import save_plan


def make_run(root: Path, run_id: str, *, status: str, params: dict, tokens: int, cost: float, took: float,
             error: str | None = None) -> None:
    run_dir = root / ".pi" / "subagents" / "runs" / run_id
    run_dir.mkdir(parents=True)
    created = f"2026-01-01T10:00:{run_id[-2:]}.000Z"
    (run_dir / "meta.json").write_text(json.dumps({
        "runId": run_id, "name": "scout", "preset": "scout", "mode": "background", "task": "read README.md",
        "cwd": str(root), "resolvedModel": "demo/scripted", "createdAt": created, "harness": "pi",
        "launcher": {"pid": 1, "host": "elsewhere", "startTicks": 1}, "experiment": "words", "params": params,
        "tags": {}}))
    (run_dir / "result.json").write_text(json.dumps({
        "runId": run_id, "status": status, "exitCode": 0 if status == "completed" else 1, "stopReason": "stop",
        "errorMessage": error, "finalText": "done", "usage": {"totalTokens": tokens, "cost": cost, "input": tokens - 5,
                                                             "output": 5},
        "turns": 2, "toolCalls": 3, "startedAt": created, "endedAt": "2026-01-01T10:01:00.000Z",
        "durationSeconds": took}))
    registry.record(run_dir)


# The quantities every face carries, by the one name each has.
SHARED = ("run_id", "status", "model", "started", "ended", "duration_s", "tool_calls", "tokens", "cost", "error")


def test_runs_json_csv_the_frame_and_mlflow_name_a_runs_columns_alike(root, capsys):
    cells = expand(["read README.md"], presets=["scout"], repeats=2)
    save_plan(root, "words", cells, [], 1)
    make_run(root, "20260101-100000-cccc01", status="completed", params=cells[0]["params"], tokens=120, cost=0.25,
             took=4.5)
    make_run(root, "20260101-100000-cccc02", status="failed", params=cells[1]["params"], tokens=80, cost=0.5,
             took=2.0, error="it broke")

    frame = nbsubagents.runs().set_index("run_id", drop=False)
    assert cli.main(["runs", "--json"]) == 0
    listed = {row["run_id"]: row for row in json.loads(capsys.readouterr().out)}
    assert cli.main(["runs", "--csv"]) == 0
    table = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    header = set(table[0])
    rows = {row["run_id"]: row for row in table}

    # every column of runs() is a key of --json and a column of --csv (but the table's own "+N −M" text)
    assert set(frame.columns) - {"changes"} <= set(next(iter(listed.values()))) == header
    assert not {"started_at", "ended_at", "created_at", "duration", "total_tokens", "error_message"} & header
    for run_id, row in listed.items():
        for name in SHARED:
            got, shown = row[name], frame.loc[run_id, name]
            if isinstance(shown, pd.Timestamp):
                assert pd.Timestamp(got) == shown, name
                assert pd.Timestamp(rows[run_id][name]) == shown, name
            elif shown is pd.NA or shown is None:
                assert got is None and rows[run_id][name] == "", name
            else:
                assert got == shown and str(got) == rows[run_id][name], name

    # an experiment's metrics are named as runs() names them, with the same values
    exp = nbsubagents.get_experiment("words")
    metrics = exp.frame()
    for name in ("duration_s", "tokens", "cost", "tool_calls"):
        assert metrics.loc["20260101-100000-cccc01", f"metrics.{name}"] == frame.loc["20260101-100000-cccc01", name]
    assert metrics.loc["20260101-100000-cccc02", "error"] == frame.loc["20260101-100000-cccc02", "error"]

    # the report's comparison names them so too
    page = exp.report(root / "report.html").path.read_text()
    assert re.search(r"<th>duration_s\b", page) and re.search(r"<th>cost\b", page)  # (tokens: when no cost)
    assert ("metrics.tokens", "mean") in exp.compare().table
    assert "cost_usd" not in page

    # and so are the MLflow export's metrics
    pytest.importorskip("mlflow")
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{root / 'mlflow.db'}"
    exp.to_mlflow(uri, artifact_location=(root / "mlartifacts").as_uri())
    client = MlflowClient(tracking_uri=uri)
    found = {r.data.tags["nbsubagents.run_id"]: r.data.metrics
             for r in client.search_runs([client.get_experiment_by_name("words").experiment_id])}
    for run_id, logged in found.items():
        for name in ("duration_s", "tokens", "cost", "tool_calls"):
            assert math.isclose(logged[name], float(frame.loc[run_id, name])), name
    assert not {"cost_usd", "total_tokens", "duration"} & set(found["20260101-100000-cccc01"])


def test_runs_name_a_run_s_inputs_and_json_lists_them_whole(root, capsys):
    make_run(root, "20260101-100000-cccc03", status="completed", params={}, tokens=1, cost=0.0, took=1.0)
    make_run(root, "20260101-100000-cccc04", status="completed", params={}, tokens=1, cost=0.0, took=1.0)
    given = [{"name": "df", "kind": "dataframe", "bytes": 2142, "sha256": "ab" * 32},
             {"name": "params", "kind": "json", "bytes": 14, "sha256": "cd" * 32}]
    with sqlite3.connect(registry.db_path()) as db:
        db.execute("UPDATE runs SET inputs = ? WHERE run_id = ?", (json.dumps(given), "20260101-100000-cccc03"))

    frame = nbsubagents.runs().set_index("run_id")
    assert frame.loc["20260101-100000-cccc03", "inputs"] == "df, params"
    assert frame.loc["20260101-100000-cccc04", "inputs"] is pd.NA
    assert cli.main(["runs", "--json"]) == 0
    listed = {row["run_id"]: row for row in json.loads(capsys.readouterr().out)}
    assert listed["20260101-100000-cccc03"]["inputs"] == given and listed["20260101-100000-cccc04"]["inputs"] is None
