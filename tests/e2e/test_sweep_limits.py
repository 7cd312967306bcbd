"""A sweep's stop rules end to end (the real pi on the scripted model): retries that keep what finished,
``max_failures`` and ``max_total_cost`` stopping new runs, resuming with other limits, the cost estimate."""

from __future__ import annotations

import json

import nbsubagents

from test_magics import shell  # noqa: F401 (a fixture)

def by_task(frame):
    """The frame by task id (its run ids a column), in task order."""
    return frame.reset_index().set_index("params.task_id").sort_index()


FLAKY = ["fail once: 503 overloaded\nsay: first", "say: second", "fail once: 503 overloaded\nsay: third"]


def test_retries_start_again_only_the_runs_the_provider_cut_short_and_record_each_attempt(project):
    exp = nbsubagents.experiment("flaky", tasks=FLAKY, presets="scout", retries=1, concurrency=2, show=False)
    frame = exp.frame()
    assert len(frame) == 3 and set(frame["status"]) == {"completed"}
    by_task = frame.set_index("params.task_id")
    assert by_task["attempt"].to_dict() == {"task-1": 2, "task-2": 1, "task-3": 2}
    assert (by_task["attempts"] == by_task["attempt"]).all()
    every = exp.frame(all_runs=True)
    assert len(every) == 5
    first = every[every["attempt"] == 1].reset_index().set_index("params.task_id")
    assert first.loc["task-1", "status"] == "failed" and first.loc["task-1", "stop_reason"] == "provider_error"
    assert first.loc["task-1", "retried"] == "the model provider failed"
    assert first.loc["task-2", "status"] == "completed"  # ran once: nothing to retry
    plan = json.loads(exp.plan_path.read_text())
    attempts = {c["params"]["task_id"]: c.get("attempts") for c in plan["cells"]}
    assert attempts["task-2"] is None
    for task in ("task-1", "task-3"):
        assert [(a["runId"], a["retried"]) for a in attempts[task]] == [(first.loc[task, "run_id"],
                                                                         "the model provider failed")]
    assert plan["retries"] == 1


def test_a_failed_run_is_retried_by_a_later_resume_with_retries_and_the_others_are_kept(project):
    tasks = FLAKY[:2]
    exp = nbsubagents.experiment("later", tasks=tasks, presets="scout", concurrency=1, show=False)
    before = by_task(exp.frame())
    assert before.loc["task-1", "stop_reason"] == "provider_error"  # no retries: the failure is the cell's end
    again = nbsubagents.get_experiment("later").resume(retries=1, show=False)
    assert json.loads(again.plan_path.read_text())["retries"] == 1  # kept for the next resume (and a driver)
    after = by_task(again.frame())
    assert set(after["status"]) == {"completed"}
    assert after.loc["task-2", "run_id"] == before.loc["task-2", "run_id"]  # kept, not run again
    assert after.loc["task-1", "attempt"] == 2


BROKEN = ["fail: 500 down", "fail: 500 down", "fail: 500 down", "fail: 500 down"]


def test_max_failures_stops_a_broken_sweep_and_a_second_call_runs_the_stopped_runs(project):
    exp = nbsubagents.experiment("broken", tasks=BROKEN, presets="scout", concurrency=1, max_failures=2,
                                 show=False)
    frame = by_task(exp.frame())
    assert list(frame["stop_reason"]) == ["provider_error", "provider_error", "not_started", "not_started"]
    assert set(frame["error"][2:]) == {"max_failures reached (2 of 2 allowed runs failed in this call)"}
    ran = frame["run_id"][:2].tolist()
    again = by_task(nbsubagents.experiment("broken", tasks=BROKEN, presets="scout", concurrency=1, max_failures=2,
                                           show=False).frame())
    assert again["run_id"][:2].tolist() == ran  # ended runs are kept
    assert list(again["stop_reason"]) == ["provider_error"] * 4  # the stopped ones ran
    assert list(again["attempt"]) == [1, 1, 2, 2]


SAYS = ["say: one", "say: one", "say: one"]


def test_max_total_cost_stops_new_runs_and_a_higher_cap_runs_the_rest_after_an_estimate(project, capsys):
    exp = nbsubagents.experiment("capped", tasks=SAYS, presets="scout", concurrency=1, max_total_cost=1e-9,
                                 show=False)
    frame = by_task(exp.frame())
    assert list(frame["status"]) == ["completed", "failed", "failed"]
    cost = frame.loc["task-1", "metrics.cost"]
    assert cost > 0
    assert list(frame["stop_reason"][1:]) == ["not_started"] * 2
    assert frame.loc["task-2", "error"] == f"max_total_cost reached (${cost:.4g} of $1e-09)"
    assert "of max_total_cost $1e-09 spent" in repr(exp)
    assert json.loads(exp.plan_path.read_text())["maxTotalCost"] == 1e-9
    same = nbsubagents.experiment("capped", tasks=SAYS, presets="scout", concurrency=1, max_total_cost=1e-9,
                                  show=False)
    assert by_task(same.frame())["run_id"].tolist() == frame["run_id"].tolist()  # the cap still holds: nothing new
    capsys.readouterr()
    more = nbsubagents.experiment("capped", tasks=SAYS, presets="scout", concurrency=1, max_total_cost=1.0)
    err = capsys.readouterr().err
    line = next(ln for ln in err.splitlines() if ln.startswith("Sweep:"))
    assert line == (f"Sweep: estimated cost of 2 runs: ~${2 * cost:.4g} (from 1 earlier run of the same preset, "
                    f"model and task) · max_total_cost $1.00, ${cost:.4g} spent so far")
    after = by_task(more.frame())
    assert set(after["status"]) == {"completed"}
    assert after.loc["task-1", "run_id"] == frame.loc["task-1", "run_id"]


MAGIC_BODY = r"""
tasks: ["fail once: 503 busy\nsay: hi", "say: two"]
presets: scout
concurrency: 1
retries: 1
max_failures: 0.9
max_total_cost: 1.0
"""


def test_the_magic_gives_a_sweep_its_stop_rules(shell, project):
    exp = shell.run_cell_magic("subagent_experiment", "magic-limits", MAGIC_BODY)
    frame = by_task(exp.frame())
    assert set(frame["status"]) == {"completed"} and list(frame["attempt"]) == [2, 1]  # task-1 was retried
    plan = json.loads(exp.plan_path.read_text())
    assert (plan["retries"], plan["maxFailures"], plan["maxTotalCost"]) == (1, 0.9, 1.0)
    assert "of max_total_cost $1.00 spent" in repr(exp)
