"""Issue 53 item 8: secrets, wherever they travel. A pi run and a Codex run (the real pinned programs against the
scripted model) whose environment alone has a key: the child prints it whole, in two pieces, in base64 (of
``NAME=value``) and in hex; then the exporting process, which lacks the key, exports the runs to MLflow. No form of
the key is in any artifact, span or registry column, nor in a file the supervisor wrote; neither child sees the keys
its provider does not need (the key is the pi run's provider's: ``DEMO_API_KEY`` for the offline ``demo`` models)."""

from __future__ import annotations

import base64
import json
import sqlite3
from pathlib import Path

import pytest
from faults import files_of, model, proj, record  # noqa: F401 (fixtures)

import nbsubagents

pytestmark = pytest.mark.faults

TOKEN = "Zq7vK2mXw9RtB4nLp8sYc3HdF6gJ1uEa"       # no known key shape: only the run's environment says it is one
ANTHROPIC = "Vb5nQ1wEr7TyU3iOp9AsDf2GhJ4kLz6X"
CODER = "---\nname: coder\ndescription: Codex.\nharness: codex\nmodel: openai/gpt-5.5\n---\nWork.\n"
TASK = "\n".join([
    "run: echo ${DEMO_API_KEY:0:12}",  # the key in two pieces, one call each
    "run: echo ${DEMO_API_KEY:12}",
    "run: python3 -c \"import os, base64; t = os.environ.get('DEMO_API_KEY', ''); "
    "print(t, base64.b64encode(('DEMO_API_KEY=' + t).encode()).decode(), t.encode().hex())\"",
    "run: env | cut -d= -f1 | sort | tr '\\n' ' '",
])


def forms(secret: str) -> list[str]:
    """The forms of ``secret`` that must not travel: itself, its pieces, its hex, its base64 at each alignment."""
    raw = secret.encode()
    encoded = [base64.b64encode(b"x" * shift + raw).decode()[4:-4] for shift in range(3)]
    return [secret, secret[:12], secret[12:], raw.hex(), *encoded]


def leaks(text: str) -> list[str]:
    return [form for secret in (TOKEN, ANTHROPIC) for form in forms(secret) if form in text]


def test_a_key_only_the_run_had_reaches_no_export_and_a_codex_child_sees_only_its_own(proj, model, tmp_path,
                                                                                      monkeypatch):
    mlflow = pytest.importorskip("mlflow")
    (proj / ".pi" / "subagents" / "coder.md").write_text(CODER)
    monkeypatch.setenv("OPENAI_BASE_URL", model.url)  # Codex's endpoint: the scripted model
    monkeypatch.setenv("OPENAI_API_KEY", "dummy-key")
    monkeypatch.setenv("DEMO_API_KEY", TOKEN)
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_" + "k" * 36)
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC)
    before = files_of(proj)
    exp = nbsubagents.experiment("leak", tasks=[TASK], presets=["scout", "coder"], show=False)
    runs = [nbsubagents.get_run(row["run_id"]) for row in exp.current_rows()]
    assert sorted(r.status for r in runs) == ["completed", "completed"], [r.error for r in runs]
    pi_run, codex_run = sorted(runs, key=lambda r: r.record.harness != "pi")

    # each child saw its provider's key only; pi's saw the key (it printed it) and wrote no form of it
    names = [e["text"] for e in codex_run.events() if e["type"] == "tool_result"][-1].split()
    assert "OPENAI_API_KEY" in names and not {"GITHUB_TOKEN", "ANTHROPIC_API_KEY", "DEMO_API_KEY"} & set(names)
    pi_env = [e["text"] for e in pi_run.events() if e["type"] == "tool_result"][-1].split()
    assert "DEMO_API_KEY" in pi_env and not {"GITHUB_TOKEN", "ANTHROPIC_API_KEY", "OPENAI_API_KEY"} & set(pi_env)
    for run in runs:
        for name in ("events.jsonl", "stdout.log", "stderr.log", "transcript.log", "result.json"):
            assert leaks((run.dir / name).read_text(errors="replace")) == [], (run.record.harness, name)

    monkeypatch.delenv("DEMO_API_KEY")  # the exporting process does not know the keys
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    experiment_id = exp.to_mlflow(uri, artifact_location=(tmp_path / "mlartifacts").as_uri())
    artifacts = [p for p in (tmp_path / "mlartifacts").rglob("*") if p.is_file()]
    assert {p.name for p in artifacts} >= {"events.jsonl", "result.json", "meta.json", "stdout.log"}
    assert not [p for p in artifacts if "codex-home" in p.parts or p.suffix in (".sqlite", ".db")]
    for path in artifacts:
        assert leaks(path.read_text(errors="replace")) == [], path
    mlflow.set_tracking_uri(uri)
    traces = mlflow.search_traces(locations=[experiment_id], return_type="list")
    assert len(traces) == 2
    for trace in traces:
        assert leaks(trace.to_json()) == []
    client = mlflow.MlflowClient(uri)
    for found in client.search_runs([experiment_id]):
        assert leaks(json.dumps([found.data.params, found.data.tags])) == []
    assert len(nbsubagents.runs(project=proj)) == 2  # the registry is up to date: every column of its file, read
    with sqlite3.connect(proj / ".pi" / "subagents" / "registry.sqlite") as db:
        rows = db.execute("SELECT * FROM runs").fetchall()
    assert len(rows) == 2 and leaks(json.dumps(rows, default=str)) == []
    assert all("Done." in json.dumps(row) for row in rows)  # the replies are there, masked
    before.update({name: data for name, data in files_of(proj).items()  # the experiment's own record, nbsubagents'
                   if name.startswith(".pi/subagents/experiments")})
    assert record("a key only the run had", proj, runs, before=before) == []


def test_export_leaves_out_what_the_child_wrote_itself(tmp_path):
    from nbsubagents._child.secrets import Masker
    from nbsubagents._sweeps.export import _masked_copy

    run = tmp_path / "run"
    (run / "codex-home").mkdir(parents=True)
    (run / "codex-home" / "notes.md").write_text("kept by the child")
    (run / "thread_history_1.sqlite").write_bytes(b"SQLite format 3\x00\xff" + TOKEN.encode())
    (run / "left-by-child.txt").write_text(TOKEN)
    (run / "events.jsonl").write_text('{"type": "run_start"}\n')
    (run / "result.json").write_bytes(b"\xff\xfe not text")
    out = Path(_masked_copy(run, tmp_path / "copy", Masker()))
    assert sorted(p.name for p in out.rglob("*")) == ["events.jsonl"]
