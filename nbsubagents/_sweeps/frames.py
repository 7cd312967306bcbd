"""An experiment's frame: one row per run, built a column at a time from registry columns (``views`` shows it).

The columns come as Python lists (registry rows, or a pandas whose texts are not pyarrow strings) or as pyarrow
arrays (``registry.query.arrow_columns``): then the plain columns (ids, status, model, times, metrics) go to
pandas at once, and so do the JSON objects of params, scores and tags when every run's have the same keys, each
holding one kind of scalar (``json_columns``: a sweep's usual shape). Python works only where it must: other
JSON, masking each distinct text, a run's failed steps, why a run does not count. Either way the frame is the
same, column for column. pandas and pyarrow are imported only when a frame is built.

A column of JSON objects, parsed (``parse``), is either a list of dicts or (``json_columns``) a dict of pyarrow
arrays, one per key; ``keys``, ``key_values`` and ``take_parsed`` read both alike.
"""

from __future__ import annotations

import functools
import itertools
import json
import os
from typing import TYPE_CHECKING, Any, Sequence

from .._child.artifacts import CHUNK, TERMINAL, Lines, open_regular, parsed
from .._child.harnesses import DEFAULT
from .._registry.query import arrow_times
from .._registry.rows import shown_name
from .._views.masking import masker
from .outcomes import excluded_reason

if TYPE_CHECKING:
    import pandas

# metrics.<name> from registry columns, by the names runs() gives them (registry.rows.SHOWN); the MLflow export's too
METRICS = {shown_name(column): column for column in ("duration", "total_tokens", "input_tokens", "output_tokens",
                                                     "cost", "tool_calls", "turns")}
# and, for runs with isolation="worktree", what their changes.patch holds (columns only when a run has them)
CHANGE_METRICS = {"files_changed": "files_changed", "lines_added": "lines_added", "lines_removed": "lines_removed"}
# the registry columns frame() reads, and the ones among them that are numbers (for arrow_columns)
READ = ["run_id", "experiment", "status", "stop_reason", "error_message", "run_dir", "model", "harness", "created_at",
        "params", "scores", "tags", *METRICS.values(), *CHANGE_METRICS.values()]
NUMBERS = {column: "float64" if column in ("duration", "cost") else "int64"
           for column in [*METRICS.values(), *CHANGE_METRICS.values()]}
_BASE = ["run_id", "experiment", "status", "stop_reason", "excluded", "error", "failed_steps", "model_resolved",
         "harness", "created_at", "run_dir"]
NAN = float("nan")  # what a list of records gives a run that lacks a column
_REGISTRY_TIME = r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$"  # a time as the registry writes it (query.to_utc_iso)
_JSON_SCALARS = ("int64", "double", "bool", "string")  # the pyarrow types json_columns keeps
_INT64_END = 2.0 ** 63  # pyarrow reads an integer beyond int64 as a float: json.loads as an int


def arrow_texts() -> bool:
    """Whether pandas makes a column of texts pyarrow strings (pandas 3's default): then an experiment's frame
    reads its columns as pyarrow arrays, which become such columns as they are."""
    import pandas as pd

    return getattr(pd.Series(["a"]).dtype, "storage", None) == "pyarrow"


def values(column: Any) -> list[Any]:
    """A column as a list of Python values (a list stays as it is)."""
    return column if isinstance(column, list) else column.to_pylist()


def take(columns: dict[str, Any], rows: Sequence[int]) -> dict[str, Any]:
    """The columns at ``rows`` only (lists or pyarrow arrays)."""
    return {name: [column[i] for i in rows] if isinstance(column, list) else column.take(rows)
            for name, column in columns.items()}


def frame(rows: list[dict[str, Any]]) -> pandas.DataFrame:
    """One row per run; every column holds scalars (so ``to_parquet`` and ``to_csv`` work as they are). The
    frame is what an experiment's numbers travel in, so its text (errors, params, tags) is masked. ``excluded``
    says why a run does not count (None when it does); such a run's metrics and scores are NaN. ``harness`` is the
    agent harness that ran it (``params.harness`` is the one its cell named, when the sweep names one).
    ``failed_steps`` counts a run's tool calls whose result was an error. ``rows``: registry rows (``READ``'s
    columns; one a row lacks is None)."""
    return frame_of_columns({key: [row.get(key) for row in rows] for key in READ})


def frame_of_columns(columns: dict[str, Any], params: list[dict[str, Any]] | None = None,
                     more: Sequence[str] = ()) -> pandas.DataFrame:
    """``frame()`` of registry rows given as columns (``READ``'s in the rows' order, each a list or, when
    ``arrow_texts()``, all of them pyarrow arrays of ``arrow_columns``; a missing one is None), so no object is
    made per row; ``params``: the ``params`` column already parsed, when it is; ``more``: columns of ``columns``
    that the frame ends with as they are (an experiment's ``attempt``, ``attempts``, ``retried``).

    Built a column at a time: the JSON of all rows is parsed in one call, each distinct text is masked once, and
    pandas types the columns as it would a list of records (a key a run lacks is NaN)."""
    import numpy as np
    import pandas as pd

    n = len(columns["run_id"])
    arrow = not isinstance(columns["run_id"], list)
    mask = masker()

    def column(key: str) -> Any:
        return columns[key] if key in columns else [None] * n

    def masked(texts: Any) -> Any:
        """The column with each text masked: each distinct text once, and the column as it is when masking changes
        none of them (the usual case)."""
        if not isinstance(texts, list):  # a pyarrow array: of texts, or a JSON key's numbers (json_columns)
            return _masked_texts(texts, mask) if "string" in str(texts.type) else texts
        try:
            distinct = set(texts)
        except TypeError:  # a list or an object among a param's values: these are not masked, only texts
            distinct = {value for value in texts if isinstance(value, str)}
        changed = {text: got for text in distinct if isinstance(text, str) and (got := mask.text(text)) != text}
        return [changed.get(value, value) if isinstance(value, str) else value for value in texts] if changed \
            else texts

    statuses, run_dirs = values(column("status")), values(column("run_dir"))
    # why a run does not count, worked out once per distinct (status, stop reason)
    ends = list(zip(statuses, values(column("stop_reason"))))
    why_not = {end: excluded_reason({"status": end[0], "stop_reason": end[1]}) for end in set(ends)}
    excluded = [why_not[end] for end in ends]
    counted = not any(excluded)  # no run excluded: numbers are kept as read
    if params is None:
        params = parse(column("params"))
    scores, tags = (parse(column(key)) for key in ("scores", "tags"))
    changed = {name: _present(column(key)) for name, key in CHANGE_METRICS.items()}
    out: dict[str, Any] = {
        "run_id": column("run_id"), "experiment": column("experiment"), "status": column("status"),
        "stop_reason": column("stop_reason"), "excluded": excluded, "error": masked(column("error_message")),
        "failed_steps": _all_failed_steps(run_dirs, statuses, excluded),
        "model_resolved": column("model"), "harness": _harness(column("harness")),
        "created_at": column("created_at"), "run_dir": column("run_dir")}
    # the columns in the order a list of records gives them: each new key where a run first has it (the first
    # run's keys when every run has the same ones, as in most sweeps)
    if n and all(map(_same_keys, (params, scores, tags))) and all(all(has) or not any(has) for has in changed.values()):
        kinds: Any = [(keys(params), [has[0] for has in changed.values()], keys(scores), keys(tags))]
    else:
        kinds = dict.fromkeys(zip(_row_keys(params, n), zip(*changed.values()) if changed else [()] * n,
                                  _row_keys(scores, n), _row_keys(tags, n)))
    order = dict.fromkeys(_BASE)
    for param_keys, has_changes, score_keys, tag_keys in kinds:
        order.update(dict.fromkeys(f"params.{key}" for key in param_keys))
        order.update(dict.fromkeys(f"metrics.{name}" for name in METRICS))
        order.update(dict.fromkeys(f"metrics.{name}" for name, has in zip(CHANGE_METRICS, has_changes) if has))
        order.update(dict.fromkeys(f"scores.{key}" for key in score_keys))
        order.update(dict.fromkeys(f"tags.{key}" for key in tag_keys))
    for name in order:
        if name in out:
            continue
        kind, _, key = name.partition(".")
        if kind in ("params", "tags"):
            out[name] = _for_pandas(masked(key_values(params if kind == "params" else tags, key)))
        elif kind == "scores" and isinstance(scores, list):
            out[name] = [s.get(key, NAN) for s in scores] if counted else \
                [NAN if key not in s else None if why else s[key] for s, why in zip(scores, excluded)]
        elif kind == "scores":  # every run has it
            got = key_values(scores, key)
            out[name] = _for_pandas(got) if counted else [None if why else value
                                                          for value, why in zip(got.to_pylist(), excluded)]
        elif arrow:  # a metric: NaN where a run has none or is excluded (floats then, as pandas makes them)
            got = column({**METRICS, **CHANGE_METRICS}[key]).to_numpy(zero_copy_only=False)
            out[name] = got if counted else np.where([bool(why) for why in excluded], NAN, got)
        elif key in METRICS:
            got = column(METRICS[key])
            out[name] = got if counted else [None if why else value for value, why in zip(got, excluded)]
        else:
            out[name] = [(None if why else value) if has else NAN
                         for value, has, why in zip(column(CHANGE_METRICS[key]), changed[key], excluded)]
    if arrow:  # each text column as pandas makes a list of its texts
        for name in ("run_id", "experiment", "status", "stop_reason", "error", "model_resolved", "harness", "run_dir"):
            out[name] = _texts(out[name])
        out["created_at"] = _times(out["created_at"])
    out.update((name, columns[name]) for name in more)
    order.update(dict.fromkeys(more))
    if not n:
        data = pd.DataFrame(columns=_BASE + [f"metrics.{m}" for m in METRICS]).set_index("run_id")
        for name in more:
            data[name] = columns[name]  # typed as pandas types an empty list set into an empty frame
    else:  # each list typed as from_records would
        index = pd.Index(out["run_id"], name="run_id")
        data = pd.DataFrame({name: out[name] for name in order if name != "run_id"}, index=index)
    for name in [*METRICS, *CHANGE_METRICS, "failed_steps"]:
        column_name = name if name == "failed_steps" else f"metrics.{name}"
        if column_name in data:
            data[column_name] = pd.to_numeric(data[column_name], errors="coerce")
    data["created_at"] = pd.to_datetime(data["created_at"], utc=True, errors="coerce")
    return data


def _same_keys(objects: Any) -> bool:
    """Whether every parsed object has the keys of the first (in any order)."""
    if isinstance(objects, dict):  # json_columns: by its making
        return True
    first = objects[0].keys()
    return all(obj.keys() == first for obj in objects)


def keys(objects: Any) -> list[str]:
    """The keys of the first parsed object, in its order (``json_columns``: every object's)."""
    return list(objects if isinstance(objects, dict) else objects[0])


def _row_keys(objects: Any, n: int) -> Any:
    """The keys of each of ``n`` parsed objects, as tuples."""
    return [tuple(objects)] * n if isinstance(objects, dict) else map(tuple, objects)


def _for_pandas(column: Any) -> Any:
    """A JSON key's column as pandas makes a list of its values: a list as it is; ``json_columns``' texts as
    ``_texts``, its numbers and booleans as numpy's."""
    if isinstance(column, list):
        return column
    return _texts(column) if "string" in str(column.type) else column.to_numpy(zero_copy_only=False)


def key_list(objects: Any, key: str) -> list[Any]:
    """Each parsed object's value of ``key`` as a Python value (None where one has none)."""
    if isinstance(objects, dict):
        return objects[key].to_pylist() if key in objects else [None] * len(next(iter(objects.values())))
    return [obj.get(key) for obj in objects]


def key_values(objects: Any, key: str) -> Any:
    """Each parsed object's value of ``key`` (NaN where one has none): a list, or ``json_columns``' array."""
    return objects[key] if isinstance(objects, dict) else [obj.get(key, NAN) for obj in objects]


def take_parsed(objects: Any, rows: Sequence[int]) -> Any:
    """The parsed objects at ``rows`` only (``parse``'s columns, or its list of objects)."""
    return take(objects, rows) if isinstance(objects, dict) else [objects[i] for i in rows]


def parse(texts: Any) -> Any:
    """A column of JSON object texts parsed: ``json_columns`` of a pyarrow array of them when it can, else each
    object (``objects``)."""
    return (not isinstance(texts, list) and json_columns(texts)) or objects(values(texts))


def json_columns(texts: Any) -> dict[str, Any] | None:
    """JSON object texts (a pyarrow array) as one pyarrow array per key, in the first object's order, read by
    pyarrow at once, when each object has the same keys and each key's values are all numbers (integers in
    int64: else floats), all booleans or all texts, none null: no object is made per run. None when they are not
    so (nested values, a null, a missing key, a date pyarrow would read as a time), or there is no key at all."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.json as pj

    if not len(texts) or texts.null_count:
        return None
    encoded = texts.dictionary_encode()  # each distinct text parsed once (a sweep's tags are often one text)
    distinct = encoded.dictionary
    lines = "\n".join(distinct.to_pylist()).encode()
    try:
        table = pj.read_json(pa.py_buffer(lines), read_options=pj.ReadOptions(use_threads=False,
                                                                               block_size=len(lines) + 1))
    except (TypeError, ValueError):  # pyarrow's ArrowInvalid among them: a key whose values change kind, say
        return None
    first = list(json.loads(distinct[0].as_py()))
    if table.num_rows != len(distinct) or not first or sorted(first) != sorted(table.column_names) or any(
            column.null_count or str(column.type) not in _JSON_SCALARS for column in table.columns):
        return None  # a text of several lines (or none), another shape, or a key some object lacks
    if any(str(column.type) == "double" and pc.any(pc.greater_equal(pc.abs(column), _INT64_END)).as_py()
           for column in table.columns):
        return None  # maybe an integer beyond int64
    columns = {key: table.column(key).combine_chunks() for key in first}
    if len(distinct) == len(texts):  # every text distinct: the dictionary is the texts, in their order
        return columns
    return {key: column.take(encoded.indices) for key, column in columns.items()}


def _masked_texts(texts: Any, mask: Any) -> Any:
    """``masked`` of a pyarrow array of texts: its distinct texts are its dictionary."""
    import pyarrow as pa

    encoded = texts.dictionary_encode()
    distinct = encoded.dictionary.to_pylist()
    got = [mask.text(text) for text in distinct]
    return texts if got == distinct else pa.array(got, type=texts.type).take(encoded.indices)


def _present(column: Any) -> list[bool]:
    """Whether each run has a value in the column."""
    return [value is not None for value in column] if isinstance(column, list) else column.is_valid().to_pylist()


def _harness(column: Any) -> Any:
    """The harness that ran each run: the default (pi) where the row names none (an older registry's)."""
    if isinstance(column, list):
        return [value or DEFAULT for value in column]
    import pyarrow.compute as pc

    return pc.if_else(pc.equal(column.fill_null(""), ""), DEFAULT, column)


def _times(column: Any) -> Any:
    """A pyarrow array of times, for ``pd.to_datetime(..., utc=True, errors="coerce")``: parsed by pyarrow at once
    when every one there is written as the registry writes them (pandas reads them all in the format of the first,
    so they must share it) and each is a date (not Feb 30); else as texts, for pandas."""
    import pyarrow.compute as pc

    if column.null_count < len(column) and pc.all(pc.match_substring_regex(column, _REGISTRY_TIME)).as_py():
        parsed = arrow_times(column)
        if parsed is not None:
            return parsed
    return _texts(column)


def _texts(column: Any) -> Any:
    """A pyarrow array of texts as the column pandas makes of a list of them: pyarrow strings (NaN for a missing
    one), and Python objects (None) when every one is missing."""
    import pandas as pd

    if column.null_count == len(column):
        return [None] * len(column)
    return pd.Series(["a"]).dtype.__from_arrow__(column)


def objects(texts: list[Any]) -> list[dict[str, Any]]:
    """Each JSON object text parsed (``{}`` for none), all in one ``json.loads``."""
    return json.loads("[" + ",".join(text or "{}" for text in texts) + "]")


_ENDED_STEPS: dict[str, int | None] = {}  # an ended run's count by its run directory: its events are complete
_UNSEEN = object()


def _all_failed_steps(run_dirs: list[Any], statuses: list[Any], excluded: list[Any]) -> list[int | None]:
    """``_failed_steps`` of each run (None for an excluded one), the ended runs' counts seen before looked up at
    once."""
    seen = map(_ENDED_STEPS.get, run_dirs, itertools.repeat(_UNSEEN))
    return [None if why else count if count is not _UNSEEN and status in TERMINAL else _failed_steps(run_dir, status)
            for run_dir, status, why, count in zip(run_dirs, statuses, excluded, seen)]


def _failed_steps(run_dir: str | None, status: str | None = None) -> int | None:
    """The tool results marked as errors in a run's events.jsonl (None when it has none to read); an events file
    read before and unchanged since is not read again, and an ended run's (its events are complete) is not even
    looked at again."""
    if status in TERMINAL and run_dir in _ENDED_STEPS:
        return _ENDED_STEPS[run_dir]
    path = os.path.join(run_dir or "", "events.jsonl")
    try:
        stat = os.stat(path)
    except OSError:
        count = None
    else:
        count = _count_failed_steps(path, stat.st_mtime_ns, stat.st_size)
    if status in TERMINAL and run_dir and len(_ENDED_STEPS) < 65536:
        _ENDED_STEPS[run_dir] = count
    return count


@functools.lru_cache(maxsize=65536)
def _count_failed_steps(path: str, mtime_ns: int, size: int) -> int | None:
    lines = Lines()
    try:
        with open_regular(path) as events:
            found = [line for chunk in iter(lambda: events.read(CHUNK), b"") for line in lines.feed(chunk)
                     if isinstance(line, bytes) and b"isError" in line]
    except OSError:
        return None
    return sum(e.get("type") == "tool_result" and bool(e.get("isError")) for e in parsed(found))
