"""A sweep of the real pi on the scripted model, exported as MLflow traces and OpenTelemetry JSON, and reported."""

from __future__ import annotations

import json
import os
import re

import pytest

import nbsubagents
from nbsubagents._sweeps.traces import to_otel_json

TASKS = ["read README.md", "ls src"]


def words(run) -> float:
    return float(len(run.output.split()))


def test_each_run_becomes_one_mlflow_trace_with_its_turns_tool_calls_and_scores(project, tmp_path, monkeypatch):
    mlflow = pytest.importorskip("mlflow")
    exp = nbsubagents.experiment("traced", tasks=TASKS, presets=["scout", "scribe"], scorers=[words], show=False)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"  # a real local MLflow store (SQLite backend)
    monkeypatch.setenv("MLFLOW_ENABLE_ASYNC_TRACE_LOGGING", "true")  # the user's own setting
    experiment_id = exp.to_mlflow(uri, artifact_location=(tmp_path / "mlartifacts").as_uri())
    assert os.environ["MLFLOW_ENABLE_ASYNC_TRACE_LOGGING"] == "true"  # the export stored traces as they ended
    assert exp.to_mlflow(uri) == experiment_id  # a second export adds no run and no trace
    client = mlflow.MlflowClient(uri)
    mlflow_runs = {r.data.tags["nbsubagents.run_id"]: r.info.run_id for r in client.search_runs([experiment_id])}
    mlflow.set_tracking_uri(uri)
    traces = mlflow.search_traces(locations=[experiment_id], return_type="list")
    rows = {r["run_id"]: r for r in exp.current_rows()}
    assert sorted(t.info.tags["nbsubagents.run_id"] for t in traces) == sorted(rows) and len(rows) == 4
    for trace in traces:
        row = rows[trace.info.tags["nbsubagents.run_id"]]
        assert trace.info.tags["nbsubagents.experiment"] == "traced"
        assert json.loads(trace.info.tags["nbsubagents.cell"])[1] == row["preset"]
        assert trace.info.trace_metadata["mlflow.sourceRun"] == mlflow_runs[row["run_id"]]
        by_type: dict[str, list] = {}
        for span in trace.data.spans:
            by_type.setdefault(span.span_type, []).append(span)
        (root,) = by_type["AGENT"]
        assert root.inputs == {"task": row["task"]} and root.attributes["preset"] == row["preset"]
        assert root.name == trace.info.tags["mlflow.traceName"] == row["name"]
        assert root.outputs["result"] == row["final_text"]
        assert len(by_type["TOOL"]) == row["tool_calls"] > 0
        assert len(by_type["CHAT_MODEL"]) == row["turns"]
        usage = json.loads(trace.info.trace_metadata["mlflow.trace.tokenUsage"])
        assert usage["input_tokens"] == row["input_tokens"] and usage["output_tokens"] == row["output_tokens"]
        for span in by_type["TOOL"] + by_type["CHAT_MODEL"]:
            assert root.start_time_ns <= span.start_time_ns <= span.end_time_ns <= root.end_time_ns
        assert all(s.inputs and s.outputs["result"] for s in by_type["TOOL"])
        (feedback,) = [a for a in trace.info.assessments if a.name == "words"]
        assert feedback.value == json.loads(row["scores"])["words"]

    otel = json.loads(to_otel_json(exp, tmp_path / "traces.json").read_text())
    spans = otel["resourceSpans"][0]["scopeSpans"][0]["spans"]
    tools = [s for s in spans if s["name"].startswith("execute_tool ")]
    assert len({s["traceId"] for s in spans}) == 4 and len(tools) == sum(r["tool_calls"] for r in rows.values())


def test_the_report_is_one_self_contained_file_with_the_sweep_table_runs_and_versions(project, monkeypatch):
    monkeypatch.setenv("DEMO_API_KEY", "s3cr3t-0123456789-abcdef")
    exp = nbsubagents.experiment("reported", tasks=["read README.md", "ls src s3cr3t-0123456789-abcdef"],
                                 presets=["scout"], scorers=[words], show=False)
    made = exp.report()
    assert made.path == project / ".pi/subagents/reports/experiment-reported.html"
    page = made.path.read_text()
    assert "s3cr3t-0123456789-abcdef" not in page and "s3cr3t" not in page
    assert "<h2>Comparison</h2>" in page and "<th>words</th>" in page  # the scorer's column, as compare() shows it
    assert not re.search(r"""(src|href)=["'](https?:|//)""", page) and "<script" not in page.lower()
    assert page.count("<details><summary>Transcript") == 2  # each run's transcript, folded
    assert f"nbsubagents</th><td>{nbsubagents.__version__}" in page and "demo/scripted (2 runs)" in page
    assert 'src="data:image/png;base64,' in page  # the plot, inline
    assert "Report of experiment reported" in made._repr_html_() and "<th>words</th>" in made._repr_html_()

    md = exp.report(project / "report.md", format="md").path.read_text()
    assert md.startswith("# Experiment reported") and "s3cr3t" not in md
    table = [line for line in md.splitlines() if line.startswith("|")]
    assert "| words |" in table[0] and "100% of 2 " in table[2] and table[1].startswith("|---|")
    assert md.count("<details><summary>Transcript") == 2
