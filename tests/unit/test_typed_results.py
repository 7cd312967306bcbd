"""Typed objects back (issue 57): output_schema classes to JSON Schema and back to instances, the outputs files planned,
checked by the supervisor and read by the kernel, how a harness that ends with its task is started again, and the
scripted model's repair lines."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import TypedDict as PlainTypedDict

import pandas as pd
import pandas.testing
import pydantic
import pytest
from typing_extensions import TypedDict

from nbsubagents._child import repairs
from nbsubagents._child.errors import NbSubagentsError
from nbsubagents._child.harnesses import claude_code, codex
from nbsubagents._child.record import RunRecord, write
from nbsubagents._lifecycle import typed
from nbsubagents._lifecycle.handle import Run
from nbsubagents._pi.scripted import demo_step

PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 16


class Summary(pydantic.BaseModel):
    rows: int
    columns: list[str]


@dataclass
class Shape:
    rows: int
    cols: int


class Counts(TypedDict):
    files: int


def test_a_pydantic_model_gives_its_json_schema_and_its_import_path():
    schema, path = typed.schema_of(Summary)
    assert schema["required"] == ["rows", "columns"] and schema["properties"]["columns"]["type"] == "array"
    assert path == f"{__name__}:Summary" and typed.load_class(path) is Summary
    assert typed.instance({"rows": 1, "columns": ["a"]}, Summary) == Summary(rows=1, columns=["a"])


@pytest.mark.parametrize("cls, data, expected", [
    (Shape, {"rows": 2, "cols": 3}, Shape(2, 3)),
    (Counts, {"files": 4}, {"files": 4}),
])
def test_a_dataclass_and_a_typeddict_go_through_pydantics_type_adapter(cls, data, expected):
    schema, path = typed.schema_of(cls)
    assert set(schema["required"]) == set(data) and all(p["type"] == "integer" for p in schema["properties"].values())
    assert path == f"{__name__}:{cls.__name__}"
    assert typed.instance(data, cls) == expected
    with pytest.raises(pydantic.ValidationError):
        typed.instance({key: "many" for key in data}, cls)


def test_a_class_pydantic_cannot_take_is_refused_in_its_words():
    class Old(PlainTypedDict):
        files: int

    if sys.version_info >= (3, 12):
        assert typed.schema_of(Old)[0]["required"] == ["files"]
    else:
        with pytest.raises(NbSubagentsError, match="Old: pydantic cannot make its JSON Schema: .*typing_extensions"):
            typed.schema_of(Old)


def test_a_dataclass_without_pydantic_says_to_install_it_or_pass_a_json_schema(monkeypatch):
    monkeypatch.setitem(sys.modules, "pydantic", None)  # its import fails
    with pytest.raises(NbSubagentsError, match=r"Shape is a dataclass.*pip install pydantic.*JSON Schema dict"):
        typed.schema_of(Shape)


def test_a_schema_dict_has_no_class_and_anything_else_is_refused():
    assert typed.schema_of({"type": "object"}) == ({"type": "object"}, None)
    with pytest.raises(NbSubagentsError, match="output_schema must be a JSON Schema dict"):
        typed.schema_of(int)


@pytest.mark.parametrize("path", ["no_such_module_here:Summary", "antigravity:X", f"{__name__}:Missing",
                                  f"{__name__}:test_a_schema_dict_has_no_class_and_anything_else_is_refused", None])
def test_a_class_not_at_hand_is_none_and_no_module_is_imported_for_it(path):
    assert typed.load_class(path) is None
    assert "antigravity" not in sys.modules  # a record's module name never runs that module


def _finished_run(tmp_path, data, output_type, outputs=None):
    run_dir = tmp_path / "20260101-000000-abcdef"
    run_dir.mkdir()
    write(run_dir, RunRecord(run_id=run_dir.name, output_schema={"type": "object"}, output_type=output_type,
                             outputs=outputs))
    (run_dir / "result.json").write_text(json.dumps({"status": "completed", "data": data}))
    return Run(run_dir)


def test_a_later_reader_gets_an_instance_when_the_class_is_at_hand_else_the_json_value(tmp_path):
    run = _finished_run(tmp_path, {"rows": 2, "columns": []}, f"{__name__}:Summary")
    assert run.data == Summary(rows=2, columns=[])
    (tmp_path / "b").mkdir()
    elsewhere = _finished_run(tmp_path / "b", {"rows": 2, "columns": []}, "a_notebook_module:Summary")
    assert elsewhere.data == {"rows": 2, "columns": []}


def test_data_that_does_not_fit_the_class_says_so_and_where_the_json_is(tmp_path):
    run = _finished_run(tmp_path, {"rows": "many", "columns": []}, f"{__name__}:Summary")
    with pytest.raises(NbSubagentsError, match=r"(?s)does not fit Summary.*rows.*run.result\['data'\]"):
        run.data  # noqa: B018


def test_outputs_are_planned_by_what_each_holds():
    plan = typed.plan_outputs({"clean": pd.DataFrame, "raw": "CSV", "stats": dict, "fig": "png"})
    assert plan == {"clean": {"file": "outputs/clean.parquet", "format": "parquet", "type": "DataFrame"},
                    "raw": {"file": "outputs/raw.csv", "format": "csv", "type": "csv"},
                    "stats": {"file": "outputs/stats.json", "format": "json", "type": "dict"},
                    "fig": {"file": "outputs/fig.png", "format": "png", "type": "png"}}
    told = typed.instruction(plan, typed.Path("/runs/r1"))
    assert "/runs/r1/outputs/clean.parquet: a table as Parquet (clean)" in told and "NBSUBAGENTS_OUTPUTS" in told


@pytest.mark.parametrize("outputs, expected", [
    ({"../up": "json"}, "no usable name"),
    ({"a": object}, r"outputs\['a'\] must say what the file holds"),
    ({"a": "xlsx"}, r"one of 'parquet', 'csv', 'json', 'png'"),
    ({}, "must be a mapping of names"),
    (["clean"], "must be a mapping of names"),
])
def test_bad_outputs_are_refused_naming_what_would_work(outputs, expected):
    with pytest.raises(NbSubagentsError, match=expected):
        typed.plan_outputs(outputs)


def _outputs(tmp_path, files):
    folder = tmp_path / "outputs"
    folder.mkdir()
    for name, data in files.items():
        (folder / name).write_bytes(data)
    return tmp_path


def _parquet(frame: pd.DataFrame, folder) -> bytes:
    frame.to_parquet(folder / "frame.parquet")
    return (folder / "frame.parquet").read_bytes()


def test_the_supervisor_checks_each_output_file_and_the_kernel_reads_it_as_an_object(tmp_path):
    frame = pd.DataFrame({"a": [1, 2], "b": ["x", "y"]})
    plan = typed.plan_outputs({"clean": pd.DataFrame, "raw": "csv", "stats": dict, "fig": "png"})
    run_dir = _outputs(tmp_path, {"clean.parquet": _parquet(frame, tmp_path), "raw.csv": b"a,b\n1,x\n", "stats.json": b'{"n": 1}',
                                  "fig.png": PNG})
    assert repairs.check_outputs(run_dir, plan) is None
    found = typed.read_outputs(run_dir, plan)
    pandas.testing.assert_frame_equal(found["clean"], frame)
    pandas.testing.assert_frame_equal(found["raw"], pd.DataFrame({"a": [1], "b": ["x"]}))
    assert found["stats"] == {"n": 1} and found["fig"].data == PNG


@pytest.mark.parametrize("name, data, expected", [
    (None, None, "was not written"),
    ("stats.json", b"", "is empty"),
    ("stats.json", b"{not json", "is not valid JSON"),
    ("clean.parquet", b"a,b\n1,2\n", "is not a Parquet file"),
    ("fig.png", b"GIF89a....", "is not a PNG image"),
    ("raw.csv", b"\xff\xfe\x00", "cannot be read"),
])
def test_an_output_file_that_is_missing_or_not_its_format_is_a_failed_check(tmp_path, name, data, expected):
    kinds = {"stats.json": "json", "clean.parquet": "parquet", "fig.png": "png", "raw.csv": "csv"}
    fmt = kinds.get(name, "json")
    plan = typed.plan_outputs({(name or "stats.json").split(".")[0]: fmt})
    run_dir = _outputs(tmp_path, {name: data} if name else {})
    error = repairs.check_outputs(run_dir, plan)
    assert error is not None and expected in error and str(run_dir / "outputs") in error  # where to write it


def test_an_output_that_is_a_link_is_neither_checked_nor_read(tmp_path):
    secret = tmp_path / "secret.json"
    secret.write_text('{"key": "value"}')
    run_dir = _outputs(tmp_path, {})
    (run_dir / "outputs" / "stats.json").symlink_to(secret)
    plan = typed.plan_outputs({"stats": "json"})
    assert "is not a regular file" in repairs.check_outputs(run_dir, plan)
    with pytest.raises(NbSubagentsError, match=r"The output 'stats' \(outputs/stats.json\) could not be read"):
        typed.read_outputs(run_dir, plan)


def test_an_outputs_folder_that_is_a_link_is_neither_checked_nor_read(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "stats.json").write_text('{"key": "value"}')
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "outputs").symlink_to(elsewhere)
    plan = typed.plan_outputs({"stats": "json"})
    assert "which is a link" in repairs.check_outputs(tmp_path / "run", plan)
    with pytest.raises(NbSubagentsError, match=r"The output 'stats' \(outputs/stats.json\) could not be read"):
        typed.read_outputs(tmp_path / "run", plan)


def test_claude_code_is_resumed_on_its_session_to_repair():
    argv = ["claude", "-p", "--output-format", "stream-json", "--verbose"]
    assert claude_code.repair_argv(argv, "s1") == [*argv, "--resume", "s1"]
    assert claude_code.repair_argv([*argv, "--resume", "old"], "s2") == [*argv, "--resume", "s2"]


def test_codex_is_resumed_on_its_thread_to_repair():
    argv = ["codex", "exec", "--json", "-m", "gpt", "-"]
    assert codex.repair_argv(argv, "t1") == ["codex", "exec", "resume", "--json", "-m", "gpt", "t1", "-"]
    resumed = ["codex", "exec", "resume", "--json", "old", "-"]
    assert codex.repair_argv(resumed, "t2") == ["codex", "exec", "resume", "--json", "t2", "-"]
    assert codex.repair_argv(["codex", "login"], "t3") is None


def _chat(*messages):
    return {"messages": [{"role": role, "content": text} for role, text in messages]}


@pytest.mark.parametrize("task, second, third", [
    ('say: A\nrepair: say: B', "B", "B"),
    ('say: A\nrepair 1: say: B\nrepair 2: say: C', "B", "C"),
    ('say: A', "A", "A"),  # no repair lines: the task again
])
def test_the_scripted_model_answers_a_repair_with_the_tasks_repair_lines(task, second, third):
    repair = f"{repairs.REPAIR_PREFIX} (try 1 of at most 3): wrong"
    assert demo_step(_chat(("user", task)), 0)["text"] == "A"
    assert demo_step(_chat(("user", task), ("assistant", "A"), ("user", repair)), 0)["text"] == second
    again = _chat(("user", task), ("assistant", "A"), ("user", repair), ("assistant", second), ("user", repair))
    assert demo_step(again, 0)["text"] == third
