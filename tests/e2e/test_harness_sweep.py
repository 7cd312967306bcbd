"""The harnesses axis of an experiment end to end: each cell's run is launched with its harness, which its
run directory, the registry and ``compare(by="harness")`` then say (the real pi on the scripted model)."""

from __future__ import annotations

import nbsubagents


def test_a_sweep_over_the_harnesses_axis_launches_each_run_with_its_harness(project):
    exp = nbsubagents.experiment("harnessed", tasks=["read README.md"], presets=["scout"], harnesses=["pi"],
                                 repeats=2, show=False)
    runs = exp.runs()
    assert [r.status for r in runs] == ["completed", "completed"]
    assert [(r.meta["harness"], r.params["harness"], r.params["repeat"]) for r in runs] == [("pi", "pi", 1),
                                                                                           ("pi", "pi", 2)]
    assert runs[0].name == "task-1 · pi · scout · default · #1"
    assert set(nbsubagents.runs(harness="pi")["run_id"]) == {r.id for r in runs}
    table = exp.compare(by="harness").table
    assert list(table.index) == ["pi"] and table.loc["pi", ("runs", "ran")] == 2
    assert table.loc["pi", ("success", "rate")] == 1.0
