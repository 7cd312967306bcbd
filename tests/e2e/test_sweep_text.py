"""A sweep watched outside a notebook: the real pi on the scripted model, one compact line per run on stderr (with
its scores, or its reason), the counts at the end, and nothing on stdout."""

from __future__ import annotations

import re

import nbsubagents


def words(run) -> int:
    return len(run.output.split())


def test_a_sweep_outside_a_notebook_prints_a_line_per_run_to_stderr_and_nothing_to_stdout(project, capsys,
                                                                                         monkeypatch):
    monkeypatch.delenv("NBSUBAGENTS_DISPLAY", raising=False)
    exp = nbsubagents.experiment("watched", tasks=["read README.md", "fail: 500 upstream exploded", "ls src"],
                                 presets="scout", concurrency=2, scorers=[words])
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.splitlines()
    assert lines[0] == "▶ Experiment watched: 3 runs, at most 2 at once"
    ended = {m.group(1): line for line in lines if (m := re.match(r"[✓✗■] scout · demo/scripted · (task-\d)", line))}
    assert set(ended) == {"task-1", "task-2", "task-3"}
    assert re.search(r"^✓ .*\d\.\ds\s+\$\d\.\d{4}\s+words=\d+$", ended["task-1"])
    assert ended["task-2"].startswith("✗") and "upstream exploded" in ended["task-2"]
    failed = next(r for r in exp.runs() if r.status == "failed")
    assert "Experiment watched · 3/3 · 2 done, 1 failed" in lines
    at = lines.index("Experiment watched · 3/3 · 2 done, 1 failed")  # then the failures by reason, then the cells
    assert lines[at + 1].startswith("✗ 1 × ") and "upstream exploded" in lines[at + 1]
    assert lines[at + 1].endswith(" in cell task_id=task-2 (1)") and lines[at + 2] == f"    runs: {failed.run_id}"
    assert lines[at + 3] == "cells (3):" and lines[at + 5].split()[:6] == ["task_id=task-2", "1/1", "ended", "✓",
                                                                          "0", "✗"]
