"""A tree's report and its MLflow trace (issue 58): the real pi leads and delegates to two scouts through the
scripted model's ``delegate: scout | TASK`` lines; each sub-run shows under the delegate call that started it."""

from __future__ import annotations

import re

import pytest

import nbsubagents

from helpers import REPO
from test_delegation_trees import LEAD

TASK = "delegate: scout | read README.md\ndelegate: scout | ls src\nsay: merged"


PI_LEAD = LEAD.format(model="demo/scripted", more="")


def lead_run(project, lead=PI_LEAD):
    (project / ".pi" / "subagents" / "lead.md").write_text(lead)
    lead = nbsubagents.run("lead", TASK, show=False, timeout=300)
    assert lead.status == "completed", lead.error
    kids = lead.children
    assert [k.status for k in kids] == ["completed", "completed"]
    calls = [e["id"] for e in lead.events() if e["type"] == "tool_call"]
    assert [k.record.tool_call for k in kids] == calls  # the harness named each call to the delegate server
    return lead, kids


def test_a_trees_report_nests_each_scout_under_the_delegate_call_that_started_it(project, tmp_path):
    lead, kids = lead_run(project)
    page = lead.report(tmp_path / "tree.html").read_text()
    lead_section = page.split(f'<h2 id="run-{lead.run_id}">')[1].split("<h2 ")[0]
    transcript = lead_section.split("<summary>Transcript")[1]
    cards = [transcript.index(f'<div class="subrun"><a href="#run-{k.run_id}">') for k in kids]
    calls = [m.start() for m in re.finditer(r">Running delegate<", transcript)]
    assert calls and cards[0] < cards[1]
    assert any(c < cards[0] for c in calls) and any(cards[0] < c < cards[1] for c in calls)  # each under its call
    for kid in kids:
        assert f'<h2 id="run-{kid.run_id}">' in page  # its own section, where the card links
        assert f'<th>Delegated by</th><td><a href="#run-{lead.run_id}">' in page.split(f'<h2 id="run-{kid.run_id}">')[1]
        card = transcript.split(f'<a href="#run-{kid.run_id}">')[1].split('<div class="subrun">')[0]
        assert kid.task.splitlines()[0] in card and "completed" in card and "scout" in card
    assert "Demo project" in transcript.split(f'<a href="#run-{kids[0].run_id}">')[1]  # the first scout's answer
    runs = [lead, *kids]
    cost = sum(r.result["usage"]["cost"] for r in runs)
    tokens = sum(r.result["usage"]["totalTokens"] for r in runs)
    assert f"3 runs · {tokens:,} tokens · ${cost:.4f}" in page  # the summary counts the whole tree
    assert f"<th>Its tree</th><td>3 runs · {tokens:,} tokens" in lead_section

    md = lead.report(tmp_path / "tree.md").read_text()
    for n, kid in enumerate(kids):
        assert f'<a id="run-{kid.run_id}"></a>' in md
        assert f"↳ sub-run {kid.run_id} (scout)" in md
        assert re.search(rf"^- \[scout\]\(#run-{kid.run_id}\) .*completed", md, re.M)
    lines = md.splitlines()
    at = [next(i for i, line in enumerate(lines) if f"↳ sub-run {k.run_id}" in line) for k in kids]
    assert at[0] < at[1] and any("delegate" in line for line in lines[at[0] + 1:at[1]])


def test_a_trees_mlflow_trace_has_each_scouts_spans_under_the_delegate_call(project, tmp_path):
    mlflow = pytest.importorskip("mlflow")
    (project / ".pi" / "subagents" / "lead.md").write_text(PI_LEAD)
    exp = nbsubagents.experiment("tree", tasks=[TASK], presets=["lead"], show=False)
    (row,) = exp.current_rows()
    assert row["status"] == "completed"
    lead = nbsubagents.get_run(row["run_id"])
    kids = lead.children
    assert len(kids) == 2
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    experiment_id = exp.to_mlflow(uri, artifact_location=(tmp_path / "mlartifacts").as_uri())
    mlflow.set_tracking_uri(uri)
    (trace,) = mlflow.search_traces(locations=[experiment_id], return_type="list")
    by_id = {s.span_id: s for s in trace.data.spans}
    agents = {s.attributes.get("run_id"): s for s in trace.data.spans if s.span_type == "AGENT"}
    assert set(agents) == {lead.run_id, *(k.run_id for k in kids)}  # one trace: the whole tree
    assert agents[lead.run_id].parent_id is None
    calls = []
    for kid in kids:
        call = by_id[agents[kid.run_id].parent_id]
        assert call.span_type == "TOOL" and call.name == "delegate" and call.parent_id == agents[lead.run_id].span_id
        assert call.inputs["task"] == kid.task
        calls.append(call.span_id)
        own = [s for s in trace.data.spans if s.parent_id == agents[kid.run_id].span_id]
        assert len([s for s in own if s.span_type == "TOOL"]) == kid.result["toolCalls"] > 0
        assert len([s for s in own if s.span_type == "CHAT_MODEL"]) == kid.result["turns"]
    assert len(set(calls)) == 2


def test_a_claude_code_leads_report_nests_each_scout_under_its_call(project, scripted, tmp_path, monkeypatch):
    """Claude Code keeps a tool result's text only (no run id in it for a foreground call): the id it gives the
    delegate server for each call is in the scout's record."""
    claude = REPO / "harnesses" / "node_modules" / ".bin" / "claude"
    assert claude.is_file(), "Claude Code is installed by `make setup-test` (harnesses/package.json)"
    monkeypatch.setenv("NBSUBAGENTS_CLAUDE", str(claude))
    monkeypatch.setenv("ANTHROPIC_BASE_URL", scripted.url.removesuffix("/v1"))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "scripted-dummy-key")
    monkeypatch.setenv("HOME", str(project.parent / "home"))
    lead, kids = lead_run(project, LEAD.format(model="claude-sonnet-4-5", more="harness: claude-code\n"))
    assert all(kid.run_id not in (e.get("text") or "") for kid in kids for e in lead.events())  # no run id to go by
    md = lead.report(tmp_path / "tree.md").read_text()
    lines = md.split(f'<a id="run-{lead.run_id}">')[1].split('<a id="run-')[0].splitlines()
    at = [next(n for n, line in enumerate(lines) if f"↳ sub-run {k.run_id} (scout)" in line) for k in kids]
    calls = [n for n, line in enumerate(lines) if line.startswith("Running delegate")]
    assert len(calls) == 2 and calls[0] < at[0] < calls[1] < at[1]
