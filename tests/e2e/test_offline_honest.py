"""The offline setting is honest (issue 55 item 5): a model given on the call is checked against the names pi
knows, as online (a misspelt one is the same did-you-mean error), a run whose call named another model says which
model answered instead (its record, its notice, its panel header and summary), and an offline run costs 0 wherever
its cost shows (events, result, panel, registry, report, CLI), Claude Code's too: nobody paid for it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import nbsubagents
from nbsubagents import _config as config
from nbsubagents._pi.models import ModelError
from nbsubagents._views.panel_state import PanelState


@pytest.fixture
def offline(project, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "not-a-key")  # pi lists its Anthropic models: names it knows
    config.configure(offline=True)
    return project


def test_a_misspelt_model_on_the_call_is_refused_offline_with_the_closest_names(offline):
    with pytest.raises(ModelError) as raised:
        nbsubagents.run("scout", "ls src", model="claude-sonet-4-5", show=False)
    said = str(raised.value)
    assert said.startswith('Unknown model "claude-sonet-4-5" (from the call\'s model=)'), said
    assert "the closest: anthropic/claude-sonnet-4-5," in said
    assert nbsubagents.runs(project=offline).empty  # refused before anything was written


def test_without_a_provider_only_the_scripted_models_names_are_known_offline(project, monkeypatch):
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(project / "no-agent"))  # pi has no provider here
    config.configure(offline=True)
    with pytest.raises(ModelError, match="only the scripted model's names are known") as raised:
        nbsubagents.run("scout", "ls src", model="claude-sonet-4-5", show=False)
    assert "demo/scripted" in str(raised.value)
    assert nbsubagents.run("scout", "ls src", model="demo/scripted", show=False).status == "completed"


def test_an_offline_run_says_which_model_answered_in_place_of_the_one_the_call_named(offline, capsys):
    run = nbsubagents.run("scout", "ls src", model="anthropic/claude-sonnet-4-5")
    assert run.status == "completed", run.error
    assert (run.record.requested_model, run.model) == ("anthropic/claude-sonnet-4-5", "demo/scripted")
    note = ('model "anthropic/claude-sonnet-4-5" (from the call\'s model=) not used: the offline setting sends every '
            "run to the scripted model demo/scripted (not an AI), which answers instead")
    assert run.record.notes == [note]
    assert [e["text"] for e in run.events() if e["type"] == "notice"] == [note]
    assert "offline model in place of anthropic/claude-sonnet-4-5" in capsys.readouterr().err  # the summary line
    panel = PanelState(run)
    for event in run.events():
        panel.add(event, None)
    fields = dict(panel.header_fields("completed"))
    assert fields["model"] == "demo/scripted" and fields["extra"] == "offline model in place of anthropic/claude-sonnet-4-5"


@pytest.mark.parametrize("harness", ["pi", "claude-code"])
def test_an_offline_run_costs_nothing_wherever_its_cost_shows(offline, harness):
    run = nbsubagents.run("scout", "read README.md", harness=harness, show=False)
    assert run.status == "completed", run.error
    assert run.result["usage"]["totalTokens"] > 0 and run.result["usage"]["cost"] == 0
    costs = [e["cost"] for e in run.events() if "cost" in e]
    assert costs and set(costs) == {0}  # usage and session_stats alike
    panel = PanelState(run)
    for event in run.events():
        panel.add(event, None)
    assert dict(panel.header_fields("completed"))["cost"] == "$0.0000"
    assert nbsubagents.runs(project=offline)["cost"].tolist() == [0]
    cli = subprocess.run([sys.executable, "-m", "nbsubagents", "runs", "--json"], capture_output=True, text=True,
                         cwd=offline, env=dict(os.environ), timeout=120)
    assert [row["cost"] for row in json.loads(cli.stdout)] == [0], cli.stderr
    markdown = Path(nbsubagents.report([run], format="md")).read_text()
    assert "· $0.0000 ·" in markdown and "**Cost:** $0.0000" in markdown


def test_an_offline_runs_max_cost_is_never_reached_and_the_run_says_so(offline):
    run = nbsubagents.run("scout", "read README.md", max_cost=0.0001, show=False)  # online this run costs more
    assert run.status == "completed", run.error
    assert run.record.notes == ["max_cost is never reached offline: the scripted model costs nothing (an offline "
                                "run's cost is 0)"]
