"""The registry as data: runs() filters and dtypes, and inspecting one run (issue 6)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pandas as pd
import pytest

import nbsubagents
from nbsubagents import _registry as registry
from nbsubagents._registry import query


def _iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def synthetic(project, n: int = 40) -> None:
    """Rows as real runs leave them (a run directory each), spread over the last 40 hours."""
    now = datetime.now(timezone.utc)
    runs_dir = project / ".pi" / "subagents" / "runs"
    runs_dir.mkdir(parents=True, exist_ok=True)
    db = registry.db_path(project)
    for i in range(n):
        t = now - timedelta(hours=i)
        run_id = f"20260101-000000-{i:06x}"
        (runs_dir / run_id).mkdir()
        row = {name: None for name in registry.NAMES}
        row.update(run_id=run_id, name=f"job{i}", preset="scout" if i % 2 else "scribe",
                   status=["completed", "failed", "aborted", "completed"][i % 4], mode="single",
                   task=f"task number {i} " + "long words " * 20, cwd=str(project),
                   model="demo/scripted" if i % 3 else "demo/other", run_dir=str(runs_dir / run_id),
                   created_at=_iso(t), started_at=_iso(t), ended_at=_iso(t + timedelta(seconds=5)),
                   duration=5.0, tool_calls=i, total_tokens=100 * i, cost=0.001 * i,
                   final_text=f"output {i}" + (" NEEDLE" if i == 7 else ""),
                   error_message="boom" if i % 4 == 1 else None)
        registry.upsert(db, row, announced=True)


def test_runs_is_newest_first_with_proper_dtypes(project):
    synthetic(project)
    frame = nbsubagents.runs()
    assert len(frame) == 40
    assert list(frame["name"][:3]) == ["job0", "job1", "job2"]
    assert frame["started"].is_monotonic_decreasing
    assert isinstance(frame["status"].dtype, pd.CategoricalDtype)
    assert list(frame["status"].cat.categories) == ["queued", "running", "waiting", "completed", "failed", "aborted"]
    assert str(frame["started"].dtype).startswith("datetime64") and frame["started"].dt.tz is not None
    assert frame["tool_calls"].dtype == "Int64" and frame["cost"].dtype == "Float64"
    assert frame["task"].str.len().max() <= query.TASK_WIDTH and frame["task"][0].endswith("…")
    for column in ("run_id", "name", "preset", "status", "model", "task", "cwd", "started", "ended",
                   "duration_s", "tool_calls", "tokens", "cost", "error", "run_dir", "notebook", "kernel"):
        assert column in frame.columns


def test_runs_filters_combine(project):
    synthetic(project)
    assert set(nbsubagents.runs(status="failed")["status"]) == {"failed"}
    both = nbsubagents.runs(status=["completed", "aborted"], preset="scout")
    assert len(both) == 10 and set(both["preset"]) == {"scout"} and set(both["status"]) == {"completed"}
    assert set(nbsubagents.runs(model="demo/other")["model"]) == {"demo/other"}
    recent = nbsubagents.runs(since="5h")
    assert list(recent["name"]) == ["job0", "job1", "job2", "job3", "job4"]
    older = nbsubagents.runs(until=datetime.now(timezone.utc) - timedelta(hours=38, minutes=30))
    assert list(older["name"]) == ["job39"]
    assert list(nbsubagents.runs(text="needle")["name"]) == ["job7"]
    assert list(nbsubagents.runs(text="number 12 ")["name"]) == ["job12"]
    assert len(nbsubagents.runs(limit=3)) == 3
    assert nbsubagents.runs(text="100%_").empty  # LIKE wildcards are searched for literally


@pytest.mark.parametrize("kwargs, message", [
    ({"status": "done"}, "Unknown status 'done'"),
    ({"since": "yesterday-ish"}, "since='yesterday-ish' is not understood"),
    ({"limit": 0}, "limit must be a whole number >= 1"),
    ({"preset": 3}, "preset must be a name or a list of names"),
])
def test_bad_filters_are_clear_errors(project, kwargs, message):
    with pytest.raises(nbsubagents.NbSubagentsError, match=message):
        nbsubagents.runs(**kwargs)


def test_runs_table_is_styled_in_a_notebook_and_plain_as_text(project):
    synthetic(project, 4)
    frame = nbsubagents.runs()
    html = frame._repr_html_()
    assert 'class="nbsubagents-c-failed nbsubagents-status-failed nbsubagents-bold"' in html and "color:#b91c1c" in html
    text = repr(frame)
    assert "job0" in text and "<td" not in text
    assert type(frame[frame["status"] == "failed"]).__name__ == type(frame).__name__
    indexed = frame.set_index("name")._repr_html_()
    assert "<th>name</th>" in indexed and '<th class="nbsubagents-nowrap">job0</th>' in indexed  # ids never wrap
    assert "<th>0</th>" not in html  # the default 0..n-1 index is not shown


def test_real_runs_are_in_the_frame_and_can_be_inspected(project):
    runs = nbsubagents.run_parallel([
        {"preset": "scribe", "task": "write notes.md: hello\nedit notes.md: hello -> bye\nedit notes.md: NOPE -> x",
         "name": "writer"},
        {"preset": "scout", "task": "read README.md", "name": "reader"},
    ], show=False)
    frame = nbsubagents.runs()
    assert set(frame["name"]) == {"writer", "reader"}
    row = frame.set_index("name").loc["writer"]
    assert row["status"] == "completed" and row["tool_calls"] == 3 and row["tokens"] > 0

    writer = nbsubagents.get_run(runs[0].id[:-1])
    assert writer.id == runs[0].id
    assert writer.files_changed == ["notes.md"]
    events = writer.events_frame()
    assert list(events["seq"]) == list(range(1, len(events) + 1))
    texts = list(events["text"].dropna())
    assert "Writing notes.md (+1 line)" in texts and "Finished editing notes.md (+1 -1)" in texts
    assert any(t.startswith("Edit failed: notes.md") for t in texts)
    assert events.loc[events["type"] == "tool_result", "is_error"].tolist() == [False, False, True]
    names = {a.name for a in writer.artifacts}
    assert {"meta.json", "result.json", "events.jsonl", "transcript.log"} <= names
    assert all(a.size > 0 for a in writer.artifacts if a.name in ("meta.json", "result.json"))
    assert "result.json" in repr(writer.artifacts) and "<table" in writer.artifacts._repr_html_()
    assert nbsubagents.get_run(runs[1].id).files_changed == []


def test_ambiguous_prefix_lists_the_matches(project):
    synthetic(project, 3)
    with pytest.raises(nbsubagents.NbSubagentsError) as err:
        nbsubagents.get_run("20260101-000000-00000")
    assert "20260101-000000-000000" in str(err.value) and "20260101-000000-000002" in str(err.value)
