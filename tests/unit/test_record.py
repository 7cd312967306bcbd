"""A run's record: meta.json typed, written with its schema version, older folders read through one migration."""

from __future__ import annotations

import json

from nbsubagents._child import record
from nbsubagents._child.record import RunRecord


def test_a_record_round_trips_through_meta_json_under_camel_case_keys(tmp_path):
    written = RunRecord(run_id="r1", preset="scout", requested_model="demo/scripted", timeout=90.0,
                        budget={"maxTurns": 5}, fallback_models=["demo/backup"], question_timeout=0.0)
    record.write(tmp_path, written)
    on_disk = json.loads((tmp_path / "meta.json").read_text())
    assert on_disk["schemaVersion"] == record.SCHEMA_VERSION == 2
    assert (on_disk["runId"], on_disk["requestedModel"], on_disk["fallbackModels"]) == ("r1", "demo/scripted",
                                                                                       ["demo/backup"])
    assert "run_id" not in on_disk and on_disk["questionTimeout"] == 0.0
    assert record.load(tmp_path) == written


def test_a_version_1_folder_reads_as_its_run_was(tmp_path):
    run_dir = tmp_path / "proj" / ".pi" / "subagents" / "runs" / "20260101-000000-aaaaaa"
    run_dir.mkdir(parents=True)
    (run_dir / "meta.json").write_text(json.dumps({"schemaVersion": 1, "preset": "scout", "task": "go"}))
    old = record.load(run_dir)
    assert (old.run_id, old.harness, old.runner, old.root) == ("20260101-000000-aaaaaa", "pi", "process",
                                                               str(tmp_path / "proj"))
    assert old.schema_version == 2 and (old.preset, old.task) == ("scout", "go")


def test_a_version_2_record_keeps_what_it_says(tmp_path):
    (tmp_path / "meta.json").write_text(json.dumps({"schemaVersion": 2, "runId": "r2", "harness": "codex",
                                                    "runner": "dask"}))
    assert (record.load(tmp_path).harness, record.load(tmp_path).runner) == ("codex", "dask")


def test_values_of_the_wrong_type_read_as_absent_and_unknown_keys_are_kept(tmp_path):
    (tmp_path / "meta.json").write_text(json.dumps({
        "schemaVersion": 2, "runId": 7, "timeout": "soon", "ask": "yes", "argv": "pi -p", "loopingToolCount": True,
        "budget": [1], "offline": None, "futureField": {"kept": True}}))
    got = record.load(tmp_path)
    assert got.run_id == tmp_path.name  # an id that is not text: the folder's name
    assert (got.timeout, got.ask, got.argv, got.looping_tool_count, got.budget) == (None, False, [], 5, None)
    assert got.extra == {"futureField": {"kept": True}}
    assert got.to_json()["futureField"] == {"kept": True}


def test_a_missing_or_unreadable_meta_json_is_no_record(tmp_path):
    assert record.load(tmp_path) is None
    (tmp_path / "meta.json").write_text("{not json")
    assert record.load(tmp_path) is None
    (tmp_path / "meta.json").write_text("[1, 2]")
    assert record.load(tmp_path) is None
