"""The harnesses axis of an experiment end to end: each cell's run is launched with its harness, which its
run directory, the registry and ``compare(by="harness")`` then say; a sweep across pi, Claude Code and Codex (the
pinned binaries of harnesses/) on the scripted model gives one comparable table (issue 28's "done when")."""

from __future__ import annotations

from collections import Counter

import nbsubagents
from nbsubagents import _config as config

READER = """---
name: reader
description: Reads files, under any harness.
tools: read, grep, find, ls
---
Read what the task names and say what it holds.
"""


def test_a_sweep_over_the_harnesses_axis_launches_each_run_with_its_harness(project):
    exp = nbsubagents.experiment("harnessed", tasks=["read README.md"], presets=["scout"], harnesses=["pi"],
                                 repeats=2, show=False)
    runs = exp.runs()
    assert [r.status for r in runs] == ["completed", "completed"]
    assert [(r.record.harness, r.params["harness"], r.params["repeat"]) for r in runs] == [("pi", "pi", 1),
                                                                                           ("pi", "pi", 2)]
    assert runs[0].name == "task-1 · pi · scout · default · #1"
    assert set(nbsubagents.runs(harness="pi")["run_id"]) == {r.id for r in runs}
    table = exp.compare(by="harness").table
    assert list(table.index) == ["pi"] and table.loc["pi", ("runs", "ran")] == 2
    assert table.loc["pi", ("success", "rate")] == 1.0


def test_a_sweep_across_pi_claude_code_and_codex_gives_one_comparable_table(project):
    config.configure(offline=True)  # every harness on the scripted model (its Anthropic and Responses dialects too)
    (project / ".pi" / "subagents" / "reader.md").write_text(READER)
    exp = nbsubagents.experiment("three", tasks=["read README.md"], presets=["reader"],
                                 harnesses=["pi", "claude-code", "codex"], repeats=2, concurrency=3, show=False)
    runs = exp.runs()
    assert [r.status for r in runs] == ["completed"] * 6, [r.error for r in runs]
    assert Counter(r.record.harness for r in runs) == {"pi": 2, "claude-code": 2, "codex": 2}
    table = exp.compare(by="harness").table
    assert list(table.index) == ["claude-code", "codex", "pi"]
    assert table[("runs", "ran")].tolist() == [2, 2, 2] and table[("success", "rate")].tolist() == [1.0] * 3
    assert (table[("metrics.tokens", "mean")] > 0).all() and (table[("metrics.tool_calls", "mean")] == 1).all()
