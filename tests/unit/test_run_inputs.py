"""A run's inputs (issue 57, part 1): each kind written in its form, the refusals by name before anything is written,
the task's lines, the record's and the registry's entries, and the scripted model's ``read card NAME``."""

from __future__ import annotations

import io
import json
import pickle
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from nbsubagents import _registry as registry
from nbsubagents._lifecycle import inputs
from nbsubagents._lifecycle.inputs import InputError, pickled, stage, stage_all
from nbsubagents._pi.scripted import demo_plan

MB = 1_000_000


def written(tmp_path: Path, **values) -> dict[str, dict]:
    staged = stage_all(values, input_max_mb=10, inputs_max_mb=20)
    return {e["name"]: e for e in inputs.write(tmp_path / "inputs", staged)}


def test_a_dataframe_is_parquet_with_a_card_of_its_shape_dtypes_head_missing_values_and_describe(tmp_path):
    df = pd.DataFrame({"city": ["Oslo", None, "Lima"], "temp": [3.5, 19.0, None]})
    entry = written(tmp_path, df=df)["df"]
    assert entry["kind"] == "dataframe" and Path(entry["file"]).name == "df.parquet"
    assert pd.read_parquet(entry["file"]).equals(df)
    card = Path(entry["card"]).read_text()
    assert card.startswith("# Input `df`: DataFrame, 3 rows × 2 columns")
    assert "temp    float64" in card and "Oslo" in card  # dtypes, head
    assert "city    1\ntemp    1" in card  # missing values by column
    assert "## describe()" in card and "mean" in card
    assert entry["bytes"] == Path(entry["file"]).stat().st_size and len(entry["sha256"]) == 64
    assert not Path(entry["file"]).stat().st_mode & 0o222 and not Path(entry["card"]).stat().st_mode & 0o222


def test_an_array_text_json_and_figure_each_get_their_file(tmp_path):
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    fig = Figure()
    fig.subplots().plot([1, 2, 3])
    got = written(tmp_path, a=np.arange(12.0).reshape(3, 4), note="hello", params={"k": [1, 2]}, fig=fig, n=3)
    assert (np.load(got["a"]["file"]) == np.arange(12.0).reshape(3, 4)).all()
    card = Path(got["a"]["card"]).read_text()
    assert "shape (3, 4), dtype float64" in card and "- min 0.0, max 11.0, mean 5.5" in card
    with pytest.raises(InputError, match=r"Input 'objs': a NumPy array of Python objects .*pickled\(objs\)"):
        stage("objs", np.array([object()]), max_bytes=MB)
    assert Path(got["note"]["file"]).read_text() == "hello" and got["note"]["kind"] == "text"
    assert json.loads(Path(got["params"]["file"]).read_text()) == {"k": [1, 2]} and got["params"]["kind"] == "json"
    assert json.loads(Path(got["n"]["file"]).read_text()) == 3
    assert Path(got["fig"]["file"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and got["fig"]["kind"] == "figure"
    assert got["note"]["card"] is None


def test_a_path_is_a_read_only_copy_and_the_original_is_untouched(tmp_path):
    original = tmp_path / "data"
    original.write_text("a,b\n1,2\n")
    folder = tmp_path / "raw"
    (folder / "sub").mkdir(parents=True)
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "t.csv").write_text("t")
    (folder / "x.txt").write_text("x")
    (folder / "sub" / "y.txt").write_text("y")
    got = written(tmp_path / "run", data=original, raw=folder)
    copy = Path(got["data"]["file"])
    assert copy != original and copy.read_text() == "a,b\n1,2\n" and not copy.stat().st_mode & 0o222
    assert original.stat().st_mode & 0o200  # the person's file keeps its mode
    assert Path(got["data"]["file"]).name == "data"  # the input's name, the file's suffix (none here)
    assert Path(written(tmp_path / "run2", table=tmp_path / "x" / "t.csv")["table"]["file"]).name == "table.csv"
    assert (Path(got["raw"]["file"]) / "sub" / "y.txt").read_text() == "y"
    with pytest.raises(InputError, match=r"Inputs 'x' and 'x.md' would both write inputs/x.md: rename one"):
        stage_all({"x": pd.DataFrame({"a": [1]}), "x.md": original}, input_max_mb=1, inputs_max_mb=1)
    with pytest.raises(InputError, match=r"Input 'gone': .* does not exist"):
        stage("gone", tmp_path / "nowhere.csv", max_bytes=MB)


def test_pickle_only_when_the_call_asks_and_an_unpicklable_object_is_refused_by_name():
    class Thing:
        pass

    with pytest.raises(InputError, match=r"Input 'thing': a .*Thing has no file form: give a pandas DataFrame.*"
                                         r"nbsubagents.pickled\(thing\)"):
        stage("thing", Thing(), max_bytes=MB)
    staged = stage("numbers", pickled({1, 2}), max_bytes=MB)
    assert staged.kind == "pickle" and pickle.loads(dict(staged.blobs)["numbers.pkl"]) == {1, 2}
    with pytest.raises(InputError, match=r"Input 'fn': the function cannot be pickled"):
        stage("fn", pickled(lambda: 1), max_bytes=MB)
    with pytest.raises(InputError, match=r"Input 's':.*s.to_frame\(\)"):
        stage("s", pd.Series([1, 2]), max_bytes=MB)
    with pytest.raises(InputError, match=r"Input 'bad': the dict is not JSON-able"):
        stage("bad", {"x": float("nan")}, max_bytes=MB)
    with pytest.raises(InputError, match=r"Input name '\.\./x' is not usable"):
        stage("../x", "text", max_bytes=MB)


def test_inputs_over_the_limits_are_refused_by_name_before_anything_is_written(tmp_path):
    with pytest.raises(InputError, match=r"Input 'big' is 2,000 bytes, over the limit of 1,000 bytes per input.*input_max_mb"):
        stage_all({"small": "a", "big": "x" * 2000}, input_max_mb=0.001, inputs_max_mb=1)
    with pytest.raises(InputError, match=r"The inputs \(a 800 bytes, b 800 bytes\) hold 1,600 bytes together, over the limit of "
                                         r"1,000 bytes per run.*inputs_max_mb"):
        stage_all({"a": "x" * 800, "b": "x" * 800}, input_max_mb=0.001, inputs_max_mb=0.001)
    big = tmp_path / "big.bin"
    big.write_bytes(b"0" * 3000)
    with pytest.raises(InputError, match=r"Input 'blob' is"):  # a file's size is checked before it is read
        stage("blob", big, max_bytes=1000)
    with pytest.raises(InputError, match=r"inputs must be a dict of names to values"):
        stage_all(["df"], input_max_mb=1, inputs_max_mb=1)


def test_the_task_names_each_input_and_the_scripted_model_reads_its_card_or_file(tmp_path):
    entries = list(written(tmp_path, df=pd.DataFrame({"a": [1]}), note="hi").values())
    lines = inputs.task_lines(entries)
    card = tmp_path / "inputs" / "df.md"
    assert f"- df (dataframe: DataFrame, 1 rows × 1 columns): file {tmp_path / 'inputs' / 'df.parquet'}; card {card}" \
        in lines
    plan = demo_plan("read card df\nread input note\nread card nope" + lines)
    paths = [step["tool_calls"][0]["arguments"]["path"] for step in plan if "tool_calls" in step]
    assert paths == [str(card), str(tmp_path / "inputs" / "note.txt"), "(no card for an input named nope)"]


def test_an_experiments_inputs_are_stored_once_by_hash_and_load_back_the_same(tmp_path):
    staged = stage_all({"df": pd.DataFrame({"a": [1, 2]})}, input_max_mb=1, inputs_max_mb=1)
    refs = inputs.save(tmp_path / "store", staged)
    again = inputs.save(tmp_path / "store", staged)
    assert refs == again and refs["df"]["sha256"] == staged[0].sha256
    assert json.loads(json.dumps(refs)) == refs  # a plan holds them as JSON
    loaded = inputs.load(refs)["df"]
    assert loaded == staged[0]
    assert stage("frame", loaded, max_bytes=MB).file == "frame.parquet"  # given under another name


def test_the_magic_and_command_line_words_name_variables_or_paths():
    values = {"df": 1, "params": {"a": 1}}
    got = inputs.names_of([["df", "params"], ["data=/tmp/x.csv"]], values.__getitem__, "--with")
    assert got == {"df": 1, "params": {"a": 1}, "data": Path("/tmp/x.csv")}
    with pytest.raises(InputError, match="input 'df' is named twice"):
        inputs.names_of([["df"], ["df"]], values.__getitem__, "--with")


def test_a_registry_of_schema_9_gains_the_inputs_column_and_a_row_lists_its_inputs(tmp_path):
    db = registry.db_path(tmp_path)
    db.parent.mkdir(parents=True)
    with sqlite3.connect(db) as conn:  # what schema 9 made
        before = [(n, t) for n, t in registry.COLUMNS if n != "inputs"]
        conn.execute(f"CREATE TABLE runs ({', '.join(f'{n} {t}' for n, t in before)})")
        conn.execute("PRAGMA user_version = 9")
    registry.forget_loaded()
    run_dir = tmp_path / ".pi" / "subagents" / "runs" / "20260101-000000-abcdef"
    run_dir.mkdir(parents=True)
    entry = {"name": "df", "kind": "dataframe", "file": "/x/df.parquet", "card": "/x/df.md", "bytes": 12,
             "sha256": "ab" * 32, "about": "DataFrame"}
    (run_dir / "meta.json").write_text(json.dumps({"runId": run_dir.name, "task": "t", "inputs": [entry]}))
    registry.record(run_dir)
    (row,) = registry.fetch(db, "SELECT inputs FROM runs")
    assert json.loads(row["inputs"]) == [{"name": "df", "kind": "dataframe", "bytes": 12, "sha256": "ab" * 32}]


def test_import_nbsubagents_and_its_inputs_module_load_no_pandas_numpy_or_matplotlib():
    code = ("import sys, nbsubagents\nfrom nbsubagents._lifecycle import inputs\nnbsubagents.pickled\n"
            "inputs.stage('x', {'a': 1}, max_bytes=100)\n"
            "print([m for m in ('pandas', 'numpy', 'matplotlib') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_an_experiments_inputs_are_an_axis_or_a_tasks_own_and_name_their_cells(tmp_path):
    from nbsubagents._sweeps.grid import expand, runnable

    a, b = pd.DataFrame({"x": [1]}), pd.DataFrame({"x": [2]})
    cells = expand(["t"], "scout", run_options={"inputs": [{"df": a}, {"df": b}]}, inputs_at=tmp_path)
    labels = [c["params"]["input"] for c in cells]
    assert len(set(labels)) == 2 and all(label.startswith("df:") for label in labels)
    assert len({c["key"] for c in cells}) == 2  # two cells, not one cell twice
    assert json.loads(json.dumps(cells[0]["spec"]))["inputs"]["df"]["kind"] == "dataframe"  # a plan holds JSON
    staged = runnable(cells[0]["spec"])["inputs"]["df"]  # read back from where it was stored, as a run takes it
    assert pd.read_parquet(io.BytesIO(dict(staged.blobs)["df.parquet"])).equals(a)
    own = expand([{"task": "t", "id": "one", "inputs": {"df": a}}, {"task": "t", "id": "none"}], "scout",
                 inputs_at=tmp_path / "own")
    assert "input" in own[0]["params"] and "input" not in own[1]["params"] and "inputs" not in own[1]["spec"]
    with pytest.raises(Exception, match=r"Input 'lock'.*pickled"):
        expand(["t"], "scout", run_options={"inputs": {"lock": __import__("threading").Lock()}},
               inputs_at=tmp_path / "refused")
    assert not (tmp_path / "refused").exists()  # refused before anything was stored
    with pytest.raises(Exception, match=r"inputs=...\) is a dict of names to values"):
        expand(["t"], "scout", run_options={"inputs": ["df"]}, inputs_at=tmp_path)
