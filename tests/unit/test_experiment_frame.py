"""An experiment's frame built a column at a time (registry columns -> current runs -> frame): which runs it
keeps, in which order, what each row says of its tries, and that it is the frame of the same rows given as
records. Run directories are made by hand (no pi runs here)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pandas as pd

from nbsubagents import _registry as registry
from nbsubagents._registry.store import fetch_columns
from nbsubagents._sweeps import attempts, frames
from nbsubagents._sweeps.experiment import Experiment
from nbsubagents._sweeps.grid import cell_key, cell_values
from nbsubagents._sweeps.plan import plan_path

SECRET = "sk-abcdefghijklmnopqrstuvwx123456"


def make_run(root: Path, n: int, params: dict, *, stop: str = "stop", status: str = "completed",
             created: str | None = "2026-01-01T10:00:00.000Z", error: str | None = None,
             scores: dict | None = None, changes: dict | None = None, experiment: str = "exp") -> str:
    """An ended run of ``experiment`` (``created`` None: its meta.json has no createdAt)."""
    run_id = f"20260101-100000-{n:06x}"
    run_dir = root / ".pi" / "subagents" / "runs" / run_id
    run_dir.mkdir(parents=True)
    meta = {"runId": run_id, "preset": params.get("preset"), "resolvedModel": "demo/scripted",
            "experiment": experiment, "params": params, "tags": {"who": "me", "key": SECRET}}
    if created is not None:
        meta["createdAt"] = created
    (run_dir / "meta.json").write_text(json.dumps(meta))
    result = {"status": status, "stopReason": stop, "errorMessage": error, "durationSeconds": float(n),
              "toolCalls": n, "turns": 1, "usage": {"totalTokens": 10 * n, "cost": 0.01 * n}}
    if changes:
        result["changes"] = changes
    (run_dir / "result.json").write_text(json.dumps(result))
    if scores is not None:
        (run_dir / "scores.json").write_text(json.dumps({"scores": scores}))
    return run_id


def cell(task: str, repeat: int = 0, **more) -> dict:
    return {"task_id": task, "preset": "scout", "model": "demo/scripted", "repeat": repeat, **more}


def write_plan(root: Path, cells: list[dict], *, attempts: dict[str, list[dict]] | None = None,
               replaced: list[str] = ()) -> None:
    path = plan_path(root, "exp")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({
        "cells": [{"key": cell_key(p), "params": p, "attempts": (attempts or {}).get(cell_key(p), [])} for p in cells],
        "replaced": [{"runs": list(replaced)}] if replaced else []}))


def test_the_cells_of_runs_are_what_cell_key_names():
    params = [cell("a"), cell("b", 2, harness="codex"), cell("a", harness=None), {"task_id": "c"}, {},
              cell("d", 1, extra=[1, 2]), cell("a", repeat=True)]
    assert attempts.cells_of(params) == [tuple(cell_values(p)) for p in params]
    assert attempts.cells_of(params) == [tuple(json.loads(cell_key(p))) for p in params]
    assert attempts.cells_of([cell("a"), cell("b")]) == [("a", "scout", "demo/scripted", 0),
                                                         ("b", "scout", "demo/scripted", 0)]
    assert attempts.cells_of([]) == []


def test_fetch_columns_gives_a_querys_rows_as_columns(root):
    for n in (1, 2, 3):
        make_run(root, n, cell("a", n))
    registry.rebuild(root)
    db = registry.db_path(root)
    sql = "SELECT run_id, status, cost FROM runs ORDER BY run_id"
    rows = registry.fetch(db, sql)
    assert fetch_columns(db, sql) == {name: [row[name] for row in rows] for name in ("run_id", "status", "cost")}
    assert fetch_columns(db, sql)["cost"] == [0.01, 0.02, 0.03]
    assert fetch_columns(db, "SELECT run_id, cost FROM runs WHERE run_id = ''") == {"run_id": [], "cost": []}


def build(root: Path) -> dict[str, str]:
    """An experiment with a retried cell, a superseded try, a replaced plan's run, a run of no planned cell, runs
    the infrastructure ended, a run without createdAt, change metrics and scores on some runs only."""
    ids = {
        "retried": make_run(root, 1, cell("a"), status="failed", stop="provider_error", error=f"said {SECRET}"),
        "retry": make_run(root, 2, cell("a"), scores={"ok": True, "q": 0.5},
                          changes={"files": 2, "added": 10, "removed": 1}),
        "never": make_run(root, 3, cell("b"), status="aborted", stop="not_started", error="Not started: a cap"),
        "undated": make_run(root, 4, cell("c", weights=[1, 2]), created=None, scores={"ok": False}),
        "late": make_run(root, 5, cell("d"), created="2026-01-01T09:00:00.000Z", scores={"ok": True, "n": 3}),
        "old plan": make_run(root, 6, cell("a", 5)),
        "unplanned": make_run(root, 7, cell("z")),
        "other": make_run(root, 8, cell("a"), experiment="other"),
    }
    write_plan(root, [cell("a"), cell("b"), cell("c", weights=[1, 2]), cell("d")],
               attempts={cell_key(cell("a")): [{"runId": ids["retried"], "retried": "the model provider failed"}]},
               replaced=[ids["old plan"]])
    registry.rebuild(root)
    return ids


def test_the_frame_holds_each_planned_cells_latest_run_in_the_order_they_were_made(root, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    ids = build(root)
    exp = Experiment("exp", root)
    frame = exp.frame()
    # no createdAt first, then by createdAt and run id; the superseded try, the replaced plan's and the unplanned
    # run are out
    assert list(frame.index) == [ids["undated"], ids["late"], ids["retry"], ids["never"]]
    assert frame["attempt"].tolist() == [1, 1, 2, 1] and frame["attempts"].tolist() == [1, 1, 2, 1]
    assert frame["retried"].isna().all()
    assert frame.loc[ids["never"], "excluded"] == "never started"
    assert frame["excluded"].isna().sum() == 3
    assert frame.loc[ids["retry"], "metrics.files_changed"] == 2
    assert pd.isna(frame.loc[ids["late"], "metrics.files_changed"])
    assert frame.loc[ids["undated"], "params.weights"] == [1, 2]  # a list param kept as it is
    assert SECRET not in frame.to_csv() and frame["tags.who"].tolist() == ["me"] * 4
    assert frame["scores.ok"].tolist()[:2] == [False, True] and frame.loc[ids["late"], "scores.n"] == 3

    # the rows without their created_at: by run id
    assert [row["run_id"] for row in exp.current_rows(columns=("preset",))] == sorted(frame.index)

    every = exp.frame(all_runs=True)
    assert list(every.index) == [ids["undated"], ids["late"], ids["retried"], ids["retry"], ids["never"],
                                 ids["unplanned"]]
    assert every.loc[ids["retried"], "retried"] == "the model provider failed"
    assert every.loc[ids["retried"], "excluded"] == "the model provider failed"
    assert SECRET not in every.to_csv()
    assert every["attempt"].tolist() == [1, 1, 1, 2, 1, 1] and every["attempts"].tolist() == [1, 1, 2, 2, 1, 1]

    table = exp.compare(by="task_id").table
    assert table[("runs", "planned")].tolist() == [1, 1, 1, 1]
    assert table[("runs", "ran")].tolist() == [1, 0, 1, 1]


def test_the_frame_of_the_columns_is_the_frame_of_the_same_rows(root, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    build(root)
    exp = Experiment("exp", root)
    for all_runs in (False, True):
        rows = exp.current_rows(all_runs=all_runs, columns=frames.READ)
        expected = frames.frame(rows)
        for column in ("attempt", "attempts", "retried"):
            expected[column] = [row[column] for row in rows]
        pd.testing.assert_frame_equal(exp.frame(all_runs=all_runs), expected, check_exact=True)
    assert [row["run_id"] for row in exp.current_rows()] == list(exp.frame().index)
    assert set(exp.current_rows()[0]) >= {*registry.NAMES, "attempt", "attempts", "retried"}


def test_an_experiment_without_runs_has_an_empty_frame(root):
    exp = Experiment("exp", root)
    assert exp.current_rows() == [] and exp.rows() == []
    frame = exp.frame()
    assert frame.empty and {"status", "excluded", "metrics.cost", "attempt", "attempts"} <= set(frame.columns)


def test_an_experiments_runs_are_read_in_the_order_of_an_index_a_registry_of_the_previous_schema_gains(root):
    build(root)
    db = registry.db_path(root)
    with sqlite3.connect(db) as conn:  # what schema 5 made
        conn.execute("DROP INDEX runs_experiment_created")
        conn.execute("PRAGMA user_version = 5")
    registry.forget_loaded()
    exp = Experiment("exp", root)
    _, sql, args = exp._query(frames.READ)  # opens the registry: brought to this schema
    with sqlite3.connect(db) as conn:
        steps = " ".join(row[-1] for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}", args))
        assert conn.execute("PRAGMA user_version").fetchone()[0] == registry.SCHEMA_VERSION
    assert "runs_experiment_created" in steps and "TEMP B-TREE" not in steps  # no sort of all the rows per read


def test_runs_without_a_created_at_and_with_an_empty_one_are_ordered_by_run_id_together(root):
    empty, none, empty_too = (make_run(root, n, cell(task), created=created)
                              for n, task, created in ((1, "a", ""), (2, "b", None), (3, "c", "")))
    write_plan(root, [cell("a"), cell("b"), cell("c")])
    registry.rebuild(root)
    exp = Experiment("exp", root)
    assert [row["run_id"] for row in exp.rows()] == [none, empty, empty_too]  # SQL: every NULL first
    assert list(exp.frame().index) == [empty, none, empty_too]
    assert list(exp.frame(all_runs=True).index) == [none, empty, empty_too]


def frame_read(exp: Experiment, *, arrow: bool) -> pd.DataFrame:
    """The experiment's frame with its columns read as pyarrow arrays (``arrow``) or as lists."""
    plan = exp.plan
    got, params = attempts.current(exp._columns(frames.READ, plan, arrow=arrow), plan, False)
    return frames.frame_of_columns(got, params)


def test_the_frame_read_through_pyarrow_is_the_frame_read_as_lists_on_awkward_rows(root, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    awkward = 'it\'s, "quoted"\nsecond line, \u00e9 \U0001f600 \\ NULL'
    ids = [make_run(root, 1, cell("a", note=awkward), status="failed", stop="error", error=f"{awkward} {SECRET}"),
           make_run(root, 2, cell("b", note="plain"), scores={"ok": True, "q": 0.25}),
           make_run(root, 3, cell("c"), status="aborted", stop="not_started", error="Not started: a cap",
                    scores={"ok": False}),
           make_run(root, 4, cell("d", note=""), created="", changes={"files": 1, "added": 2, "removed": 0})]
    write_plan(root, [cell("a", note=awkward), cell("b", note="plain"), cell("c"), cell("d", note="")])
    registry.rebuild(root)
    with sqlite3.connect(registry.db_path(root)) as conn:  # texts only SQL can write: an empty harness, a comma
        conn.execute("UPDATE runs SET harness = '', model = ? WHERE run_id = ?", ("x,'y'\n\"z\"", ids[0]))
        conn.execute("UPDATE runs SET harness = NULL, stop_reason = ? WHERE run_id = ?", ("a, 'b'", ids[1]))
    exp = Experiment("exp", root)
    assert not isinstance(exp._columns(frames.READ, exp.plan, arrow=True)["run_id"], list)  # pyarrow read them
    frame = frame_read(exp, arrow=True)
    pd.testing.assert_frame_equal(frame, frame_read(exp, arrow=False), check_exact=True)
    assert frame.loc[ids[0], "model_resolved"] == "x,'y'\n\"z\"" and frame.loc[ids[0], "params.note"] == awkward
    assert frame.loc[ids[0], "error"].startswith(awkward) and SECRET not in frame.to_csv()
    assert frame["harness"].tolist() == ["pi"] * 4 and frame.loc[ids[1], "stop_reason"] == "a, 'b'"
    assert frame.loc[ids[2], "excluded"] == "never started" and pd.isna(frame.loc[ids[2], "metrics.cost"])
    assert pd.isna(frame.loc[ids[3], "created_at"]) and frame.loc[ids[3], "metrics.files_changed"] == 1
    assert frame.loc[ids[:2], "metrics.tokens"].tolist() == [10.0, 20.0] and pd.isna(frame.loc[ids[0], "scores.ok"])

    with sqlite3.connect(registry.db_path(root)) as conn:  # no run with an error: a column of None, as from lists
        conn.execute("UPDATE runs SET error_message = NULL")
    frame = frame_read(exp, arrow=True)
    pd.testing.assert_frame_equal(frame, frame_read(exp, arrow=False), check_exact=True)
    assert frame["error"].dtype == object and frame["error"].tolist() == [None] * 4

    for created in ("2026-01-01T11:00:00Z", "2026-01-01 11:00:00.000+00:00"):  # a time in another format
        with sqlite3.connect(registry.db_path(root)) as conn:
            conn.execute("UPDATE runs SET created_at = ? WHERE run_id = ?", (created, ids[2]))
            conn.execute("UPDATE runs SET created_at = NULL WHERE run_id = ?", (ids[3],))  # not "": pyarrow reads it
        # pandas reads the times in the format of the first it can: the others are NaT
        pd.testing.assert_frame_equal(frame_read(exp, arrow=True), frame_read(exp, arrow=False), check_exact=True)

    with sqlite3.connect(registry.db_path(root)) as conn:  # a number stored as text: the lists are read instead
        conn.execute("UPDATE runs SET total_tokens = '12 tokens', cost = 'n/a' WHERE run_id = ?", (ids[1],))
    assert isinstance(exp._columns(frames.READ, exp.plan, arrow=True)["run_id"], list)
    odd = frame_read(exp, arrow=True)
    pd.testing.assert_frame_equal(odd, frame_read(exp, arrow=False), check_exact=True)
    assert pd.isna(odd.loc[ids[1], "metrics.tokens"]) and pd.isna(odd.loc[ids[1], "metrics.cost"])


def test_the_frame_is_the_same_when_pandas_keeps_texts_as_python_strings(root, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    build(root)
    exp = Experiment("exp", root)
    frame = exp.frame(all_runs=True)
    with pd.option_context("mode.string_storage", "python"):
        assert not frames.arrow_texts()
        python = exp.frame(all_runs=True)
        assert python["status"].dtype == pd.Series(["a"]).dtype  # what pandas makes of texts then
    assert [str(dtype) for dtype in python.dtypes] == [str(dtype) for dtype in frame.dtypes]
    pd.testing.assert_frame_equal(python, frame, check_dtype=False, check_index_type=False,  # the same texts
                                  check_column_type=False, check_exact=True)


def test_json_objects_of_one_shape_are_read_by_pyarrow_into_the_frame_read_as_lists(root, monkeypatch):
    """A sweep's usual params, scores and tags (the same keys in every run, a scalar of one kind each) become
    columns at once; any other shape is parsed per run: either way the frame is the one read as lists."""
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    for n in range(1, 7):  # n=3: excluded (never started), so its scores are None, not NaN
        make_run(root, n, cell(f"t{n % 2}", n, weight=n if n % 2 else n + 0.5, note=f"{SECRET} #{n}", on=n > 2),
                 status="aborted" if n == 3 else "completed", stop="not_started" if n == 3 else "stop",
                 scores={"ok": n % 2 == 0, "q": n / 7, "label": "a'b,\"c\"\n\u00e9"})
    registry.rebuild(root)
    exp = Experiment("exp", root)
    got = exp._columns(frames.READ, exp.plan, arrow=True)
    params, scores, tags = (frames.json_columns(got[key]) for key in ("params", "scores", "tags"))
    assert list(params) == ["task_id", "preset", "model", "repeat", "weight", "note", "on"]
    assert [str(params[k].type) for k in ("repeat", "weight", "note", "on")] == ["int64", "double", "string", "bool"]
    assert list(scores) == ["ok", "q", "label"] and list(tags) == ["who", "key"]
    frame = frame_read(exp, arrow=True)
    pd.testing.assert_frame_equal(frame, frame_read(exp, arrow=False), check_exact=True)
    assert SECRET not in frame.to_csv() and frame["params.weight"].tolist() == [1.0, 2.5, 3.0, 4.5, 5.0, 6.5]
    assert frame["scores.ok"].tolist() == [False, True, None, True, False, True]

    # a shape pyarrow would read otherwise than json.loads: parsed per run, and still the same frame
    for odd in ({"big": 2**70}, {"day": "2026-01-01"}, {"nested": {"a": 1}}, {"none": None}, {"mixed": "x"}):
        with sqlite3.connect(registry.db_path(root)) as conn:
            one = conn.execute("SELECT run_id, params FROM runs ORDER BY run_id LIMIT 1").fetchone()
            if "mixed" in odd:
                odd = {**json.loads(one[1]), "repeat": "x"}  # a key whose values change kind
            else:
                odd = {**json.loads(one[1]), **odd}
            conn.execute("UPDATE runs SET params = ? WHERE run_id = ?", (json.dumps(odd), one[0]))
        got = exp._columns(frames.READ, exp.plan, arrow=True)
        assert frames.json_columns(got["params"]) is None, odd
        pd.testing.assert_frame_equal(frame_read(exp, arrow=True), frame_read(exp, arrow=False), check_exact=True)
    assert frames.json_columns(pa_texts(['{"a": 1}', '{\n"a": 2}\n']))["a"].to_pylist() == [1, 2]  # lines within
    assert frames.json_columns(pa_texts(['{"a": 1}', '{"a": 2}\n{"a": 3}'])) is None  # a text of two objects
    assert frames.json_columns(pa_texts(['{}', '{}'])) is None and frames.json_columns(pa_texts([])) is None


def pa_texts(texts: list[str]):
    import pyarrow as pa

    return pa.array(texts, type=pa.large_string())
