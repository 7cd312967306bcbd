"""Issue 53 item 9: fallbacks counted right. The real pi against the scripted model, which answers each model with
the HTTP errors a case gives it (``fail for demo/ID: STATUS MESSAGE``): each model is tried once and keeps its
error, a budget counts turns across models, a client error is no reason to fall back whatever its words say, and
the offline setting says what it does with ``fallback_models``."""

from __future__ import annotations

import pytest
from faults import files_of, model, proj, record  # noqa: F401 (fixtures)

import nbsubagents
from nbsubagents import _config as config
from nbsubagents._child.harnesses.pi import write_agent_dir

pytestmark = pytest.mark.faults


@pytest.fixture
def two(proj, model, tmp_path):
    """The project, its pi knowing the scripted model under two names: demo/scripted and demo/backup."""
    write_agent_dir(tmp_path / "agent", model.url, models=("scripted", "backup"))
    return proj


def models_of(run):
    return [(t["model"], t["error"]) for t in run.result["modelsTried"]]


def test_429_on_every_model_tries_each_model_once_and_keeps_each_error(two):
    before = files_of(two)
    run = nbsubagents.run("scout", "fail for demo/scripted: 429 rate limited here\n"
                                   "fail for demo/backup: 429 rate limited there\nsay: hi", show=False,
                          fallback_models=["backup", "scripted"])  # the run's own model among its fallbacks
    assert run.status == "failed"
    tried = models_of(run)
    assert [m for m, _ in tried] == ["demo/scripted", "demo/backup"], tried
    assert "rate limited here" in tried[0][1] and "rate limited there" in tried[1][1], tried
    assert "rate limited there" in run.error
    assert [(e["from"], e["to"]) for e in run.events() if e["type"] == "model_fallback"] == [
        ("demo/scripted", "demo/backup")]
    assert record("429 on every model", two, [run], before=before) == []


def test_max_turns_counts_the_turns_of_every_model(two, model):
    def endless(body, index):
        if body.get("model") == "scripted":
            return {"error": {"status": 503, "message": "overloaded"}}
        return {"text": f"step {index}", "tool_calls": [{"name": "bash", "arguments": {"command": f"echo s{index}"}}]}

    model.script = endless
    before = files_of(two)
    run = nbsubagents.run("scout", "keep going", show=False, max_turns=2, fallback_models=["backup"], timeout=120)
    assert run.status == "failed" and run.result["stopReason"] == "budget:turns", run.error
    assert "Stopped at 2 turns (max_turns=2)" in run.error
    assert [m for m, _ in models_of(run)] == ["demo/scripted", "demo/backup"]
    # The failed turn is taken again by the backup model and counts once: the backup model runs two turns (each a
    # tool call), the third is stopped as it begins, as a run without a fallback is.
    assert len([e for e in run.events() if e["type"] == "turn_start"]) == 4
    assert run.result["turns"] == 3
    assert ["s0\n", "s1\n"] == [e["text"] for e in run.events() if e["type"] == "tool_result"][:2]
    assert record("max_turns across a fallback", two, [run], before=before) == []


def test_a_client_error_that_mentions_the_network_does_not_fall_back(two, model):
    before = files_of(two)
    run = nbsubagents.run("scout", "fail for demo/scripted: 400 invalid request: network_mode is not a field\n"
                                   "say: hi", show=False, fallback_models=["backup"])
    assert run.status == "failed" and "network_mode is not a field" in run.error
    assert [e for e in run.events() if e["type"] == "model_fallback"] == []
    assert models_of(run) == [("demo/scripted", models_of(run)[0][1])] and "400" in models_of(run)[0][1]
    assert {r["model"] for r in model.requests} == {"scripted"}
    assert record("400 saying network", two, [run], before=before) == []


def test_offline_says_it_does_not_use_fallback_models(two, tmp_path, monkeypatch):
    monkeypatch.setenv("NBSUBAGENTS_SCRIPTED_DIR", str(tmp_path / "scripted"))
    monkeypatch.setenv("NBSUBAGENTS_SCRIPTED_IDLE", "60")
    config.configure(offline=True)
    before = files_of(two)
    try:
        run = nbsubagents.run("scout", "say: hi", show=False, fallback_models=["backup"])
    finally:
        from nbsubagents._pi.offline import stop_scripted_model
        stop_scripted_model()
    assert run.status == "completed", run.error
    [notice] = [e["text"] for e in run.events() if e["type"] == "notice"]
    assert "fallback_models" in notice and "offline" in notice and "backup" in notice
    assert notice in run.record.notes
    assert record("offline with fallback_models", two, [run], before=before) == []
