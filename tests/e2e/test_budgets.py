"""Budgets: each limit stops a real pi run (scripted model, endless tool calls) at the limit, with its reason."""

from __future__ import annotations

import json

import pytest

import nbsubagents
from nbsubagents import _config as config
from nbsubagents._child import budgets
from nbsubagents._config import NbSubagentsError
from nbsubagents._child.events import Tally

from helpers import processes_inside, wait_for


def endless(body, index):
    """A model that never stops calling tools (different commands, so the loop guard stays quiet), answering in
    about half a second as a real model would: an instant one can outrun a starved supervisor on a loaded machine
    and get one more call in before the stop lands (the README says so)."""
    return {"text": f"step {index}", "tool_calls": [{"name": "bash", "arguments": {"command": f"echo step-{index}"}}],
            "delay": 0.1}


@pytest.mark.pi_matrix
@pytest.mark.parametrize("field, value, reason, message", [
    ("max_tool_calls", 3, "budget:tool_calls", "Stopped at 3 tool calls (max_tool_calls=3)"),
    ("max_turns", 2, "budget:turns", "Stopped at 2 turns (max_turns=2)"),
    ("max_tokens", 3000, "budget:tokens", "tokens (max_tokens=3000)"),
    ("max_cost", 0.002, "budget:cost", "cost (max_cost=0.002)"),
])
@pytest.mark.serial
def test_each_budget_stops_an_endless_run_at_its_limit(project, scripted, tmp_path, field, value, reason, message):
    scripted.script = endless
    run = nbsubagents.run("scout", "keep going", show=False, timeout=120, **{field: value})

    assert run.status == "failed"
    assert run.result["stopReason"] == reason
    assert message in run.error
    result = run.result
    spent = {"max_tool_calls": result["toolCalls"], "max_turns": result["turns"],
             "max_tokens": result["usage"]["totalTokens"], "max_cost": result["usage"]["cost"]}[field]
    if field in ("max_tool_calls", "max_turns"):
        assert spent == value + 1  # the one past the limit was started and stopped
    else:
        assert spent >= value
    # the partial output is kept: every tool call made so far is in the events and the transcript
    calls = [e for e in run.events() if e["type"] == "tool_call"]
    assert len(calls) == result["toolCalls"] and "step-0" in run.transcript
    assert run.events()[-1]["type"] == "run_end" and run.events()[-1]["stopReason"] == reason
    assert processes_inside(tmp_path) == []
    row = nbsubagents.runs()
    assert row.loc[0, "stop_reason"] == reason


@pytest.mark.serial
def test_budget_precedence_call_over_preset_over_settings(project, scripted):
    (project / ".pi" / "subagents" / "capped.md").write_text(
        "---\nname: capped\ndescription: c\nmodel: demo/scripted\ntools: bash\nmaxToolCalls: 2\n---\n")
    scripted.script = endless
    config.configure(max_tool_calls=5, max_turns=50)
    by_preset = nbsubagents.run("capped", "go", show=False)
    assert by_preset.result["stopReason"] == "budget:tool_calls" and by_preset.result["toolCalls"] == 3
    assert json.loads((by_preset.dir / "meta.json").read_text())["budget"] == {"maxTurns": 50, "maxToolCalls": 2}
    by_call = nbsubagents.run("capped", "go", show=False, max_tool_calls=1)
    assert by_call.result["toolCalls"] == 2
    by_settings = nbsubagents.run("scout", "go", show=False)
    assert by_settings.result["toolCalls"] == 6


def test_a_run_within_its_budget_completes(project):
    run = nbsubagents.run("scout", "read README.md", show=False, max_tool_calls=1, max_turns=2)
    assert run.status == "completed" and run.result["stopReason"] == "stop"


@pytest.mark.parametrize("kwargs, expected", [
    ({"max_turns": 0}, "max_turns must be a whole number of at least 1, got 0"),
    ({"max_tool_calls": 2.5}, "max_tool_calls must be a whole number of at least 1, got 2.5"),
    ({"max_tokens": True}, "max_tokens must be a whole number of at least 1, got True"),
    ({"max_cost": float("nan")}, "max_cost must be a positive amount"),
    ({"max_cost": -1}, "max_cost must be a positive amount"),
])
def test_bad_budgets_are_refused_before_anything_is_written(project, kwargs, expected):
    with pytest.raises(NbSubagentsError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        nbsubagents.run("scout", "read README.md", show=False, **kwargs)
    assert not list((project / ".pi" / "subagents" / "runs").glob("*")) if (
        project / ".pi" / "subagents" / "runs").exists() else True


def test_bad_budget_in_settings_and_preset_name_where(project):
    with pytest.raises(NbSubagentsError, match=r"configure\(max_turns=...\) must be a whole number"):
        config.configure(max_turns=-3)
    (project / ".pi" / "subagents" / "bad.md").write_text("---\nname: bad\nmodel: demo/scripted\nmaxCost: free\n---\n")
    with pytest.raises(NbSubagentsError, match=r"bad.md: 'maxCost' must be a positive amount"):
        nbsubagents.run("bad", "x", show=False)


def test_budget_messages_and_spend_description():
    tally = Tally()
    budget = budgets.Budget({"maxToolCalls": 2, "maxCost": 0.5})
    for _ in range(2):
        tally.add({"type": "tool_call"})
    assert budget.exceeded(tally) is None
    tally.add({"type": "tool_call"})
    assert budget.exceeded(tally) == ("budget:tool_calls", "Stopped at 2 tool calls (max_tool_calls=2)")
    assert budgets.describe({"maxToolCalls": 2, "maxTokens": 50000}, {"max_tool_calls": 1, "max_tokens": 12000}) \
        == "tools 1/2 · tokens 12.0k/50.0k"


def test_stop_reason_and_changes_survive_a_registry_rebuild_and_an_old_registry_gains_the_columns(project, scripted):
    import sqlite3

    from nbsubagents import _registry as registry

    scripted.script = endless
    run = nbsubagents.run("scout", "go", show=False, max_turns=1)
    db = registry.db_path(project)
    for suffix in ("", "-wal", "-shm"):
        (db.parent / (db.name + suffix)).unlink(missing_ok=True)
    registry.rebuild(project)
    assert nbsubagents.runs().loc[0, "stop_reason"] == "budget:turns"

    # a registry written before these columns existed (schema 1) gains them at its next use
    for suffix in ("", "-wal", "-shm"):
        (db.parent / (db.name + suffix)).unlink(missing_ok=True)
    old = [c for c in registry.COLUMNS if c[0] not in ("files_changed", "lines_added", "lines_removed", "data")]
    with sqlite3.connect(db) as conn:
        conn.execute(f"CREATE TABLE runs ({', '.join(f'{n} {t}' for n, t in old)})")
        conn.execute("PRAGMA user_version = 1")
    registry.forget_loaded()  # this process set the deleted database up: it looks again
    frame = nbsubagents.runs()
    assert frame.loc[0, "run_id"] == run.id and frame.loc[0, "stop_reason"] == "budget:turns"
    with sqlite3.connect(db) as conn:
        names = {row[1] for row in conn.execute("PRAGMA table_info(runs)")}
    assert {"files_changed", "lines_added", "lines_removed", "data"} <= names


def test_every_guard_names_its_stop_reason_in_result_json_and_runs(project):
    config.configure(extend_timeout_debounce=0.5, looping_tool_count=3)
    timed_out = nbsubagents.run("scout", "run: sleep 30", timeout=1, show=False)
    looped = nbsubagents.run("scout", "run: echo same\nrun: echo same\nrun: echo same", show=False)
    provider = nbsubagents.run("scout", "fail: 500 boom", show=False)
    started = nbsubagents.start("scout", "run: sleep 30", show=False)
    wait_for(lambda: any(e["type"] == "tool_call" for e in started.events()), what="the tool call")
    started.cancel()
    started.wait(60)
    reasons = {r.id: r.result["stopReason"] for r in (timed_out, looped, provider, started)}
    assert reasons == {timed_out.id: "timeout", looped.id: "loop", provider.id: "provider_error",
                       started.id: "cancelled"}
    assert provider.result["piStopReason"] == "error"
    frame = nbsubagents.runs().set_index("run_id")
    assert {k: frame.loc[k, "stop_reason"] for k in reasons} == reasons
