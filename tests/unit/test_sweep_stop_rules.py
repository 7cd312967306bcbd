"""A sweep's stop rules without running pi: the limits' checks, the scripted model's ``fail once:``, the magic's
keys and the estimate's words."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from nbsubagents._config import NbSubagentsError
from nbsubagents._pi.scripted import ScriptedModel
from nbsubagents._sweeps.spend import CostEstimate, Limits, stopped_reason


def ask(model: ScriptedModel, task: str, system: str = "you are a scout") -> tuple[int, str]:
    body = {"model": "scripted", "messages": [{"role": "system", "content": system}, {"role": "user", "content": task}]}
    request = urllib.request.Request(f"{model.url}/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.load(response)["choices"][0]["message"]["content"]
    except urllib.error.HTTPError as exc:
        return exc.code, json.load(exc)["error"]["message"]


def test_fail_once_fails_the_first_request_of_each_conversation_and_answers_the_next():
    task = "fail once: 503 overloaded\nsay: hello"
    with ScriptedModel() as model:
        assert ask(model, task) == (503, "overloaded")
        assert ask(model, task) == (200, "hello")  # the same task again: a retried run succeeds
        assert ask(model, task) == (200, "hello")
        assert ask(model, task, system="you are a scribe") == (503, "overloaded")  # another preset's conversation
        assert ask(model, "fail once: 502\nsay: other")[0] == 502
    with ScriptedModel() as fresh:  # the memory is the server's
        assert ask(fresh, task)[0] == 503


@pytest.mark.parametrize(("given", "words"), [
    ({"retries": -1}, "retries must be a whole number of at least 0"),
    ({"retries": 1.5}, "retries must be a whole number"),
    ({"max_failures": 0}, "max_failures must be a whole number of at least 1 .* or a fraction between 0 and 1"),
    ({"max_failures": 2.5}, "max_failures must be"),
    ({"max_failures": True}, "max_failures must be"),
    ({"max_total_cost": 0}, "max_total_cost must be a positive amount in USD .*max_cost is each run's budget"),
    ({"max_total_cost": "5"}, "max_total_cost must be"),
])
def test_limits_refuse_what_they_cannot_mean(given, words):
    with pytest.raises(NbSubagentsError, match=words):
        Limits.checked(**given)


def test_max_failures_is_a_count_or_a_fraction_of_the_planned_runs():
    assert Limits.checked(max_failures=3).failures_allowed(100) == 3
    assert Limits.checked(max_failures=0.25).failures_allowed(10) == 3  # rounded up
    assert Limits.checked(max_failures=0.01).failures_allowed(10) == 1
    assert Limits.checked().failures_allowed(10) is None
    limits = Limits.checked(retries=2, max_failures=0.5, max_total_cost=3)
    assert Limits.from_plan(limits.record()) == limits


def test_only_the_stop_rules_own_words_mark_a_run_a_resume_starts_again():
    assert stopped_reason({"stop_reason": "not_started", "error_message": "max_total_cost reached ($1 of $1)"})
    assert stopped_reason({"stop_reason": "not_started", "error_message": "Unknown model 'x'"}) is None
    assert stopped_reason({"stop_reason": "provider_error", "error_message": "max_failures reached"}) is None


def test_the_estimate_says_what_it_is_based_on():
    assert CostEstimate(3, 0.0, 0, 0, None, 0.0).text == "Sweep: 3 runs to start, no cost history yet"
    text = CostEstimate(3, 0.02, 2, 5, 0.5, 0.1).text
    assert text == ("Sweep: estimated cost of 3 runs: ~$0.02 for the 2 with history (from 5 earlier runs of the "
                    "same preset, model and task; 1 without history) · max_total_cost $0.5, $0.1 spent so far")
    assert "max_total_cost $0.5" in CostEstimate(3, 0.02, 2, 5, 0.5, 0.1)._repr_html_()


def test_the_magic_takes_the_stop_rules():
    from nbsubagents._sweeps.magic import keys, parse_body

    assert {"retries", "max_failures", "max_total_cost"} <= set(keys())
    body = parse_body("tasks: [ls]\npresets: scout\nretries: 2\nmax_failures: 0.5\nmax_total_cost: 1.5")
    assert (body["retries"], body["max_failures"], body["max_total_cost"]) == (2, 0.5, 1.5)
