"""A sweep with a model that does not exist, on the real pi and the scripted model: its cell is not run, not the
winner (issue 24: honest denominators; checks that mean what they say)."""

from __future__ import annotations

import json
import math

import nbsubagents


def test_a_bad_models_cell_shows_as_not_run_and_a_shell_check_tests_what_it_says(project):
    shell_check = nbsubagents.check("echo start && test -f no-such-file", name="has_file")
    exp = nbsubagents.experiment("bad-model", tasks=["read README.md\nread no-such-file.md"], presets="scout",
                                 models=["demo/scripted", "demo/nope"], repeats=2, concurrency=4,
                                 scorers=[shell_check, nbsubagents.check("test -f README.md", name="readme")],
                                 show=False)
    frame = exp.frame()
    good, bad = (frame[frame["params.model"] == m] for m in ("demo/scripted", "demo/nope"))
    assert set(good["status"]) == {"completed"} and good["excluded"].isna().all()
    assert (good["scores.has_file"] == False).all() and (good["scores.readme"] == True).all()  # noqa: E712
    assert "exit code 1" in (exp.runs()[0].dir / "checks" / "has_file.log").read_text()  # run by bash: && held
    assert set(bad["stop_reason"]) == {"not_started"} and set(bad["excluded"]) == {"never started"}
    assert bad["scores.has_file"].isna().all() and bad["scores.readme"].isna().all()  # not True, not False
    assert bad["metrics.duration_s"].isna().all() and bad["metrics.cost"].isna().all()
    for run in exp.runs():
        if run.params["model"] == "demo/nope":  # no scorer ran for it; its record says why
            stored = json.loads((run.dir / "scores.json").read_text())
            assert stored["scores"] == {} and stored["excluded"] == "never started"
            assert not (run.dir / "checks").exists()

    table = exp.compare(by="model", baseline="demo/scripted").table
    nope = table.loc["demo/nope"]
    assert (nope["runs", "planned"], nope["runs", "ran"], nope["runs", "excluded"], nope["runs", "why"]) == \
        (2, 0, 2, "2 never started")
    assert math.isnan(nope["scores.readme", "rate"]) and math.isnan(nope["metrics.duration_s", "mean"])
    scripted = table.loc["demo/scripted"]
    assert scripted["scores.readme", "rate"] == 1.0 and scripted["success", "rate"] == 1.0
    assert (good["failed_steps"] == 1).all() and scripted["runs", "failed_steps"] == 2  # completed, a step failed
    shown = exp.compare(by="model")._repr_html_()
    assert "<td>–<div class='nbsub-cmp-excluded' title=\"never started\">2 excluded</div>" in shown  # no rate
    assert ">100% of 2<" in shown and "Not in any rate or mean: demo/nope: 2 excluded (never started)." in shown
    assert "<th>failed a step</th>" in shown and "<td>2 of 2</td>" in shown
