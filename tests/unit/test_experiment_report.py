"""The experiment report's Markdown table renders whatever columns a comparison has."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd

from nbsubagents._sweeps.report import _table_md


def test_any_comparison_table_becomes_a_markdown_table_with_its_cells_escaped():
    index = pd.MultiIndex.from_tuples([("scout", "demo/a|b"), ("scribe", "demo/c")], names=["params.preset", None])
    columns = pd.MultiIndex.from_tuples([("runs", "n"), ("scores.ok", "mean"), ("scores.ok", "95% CI")])
    table = pd.DataFrame([[3, 0.6666666, "[0.21, 0.94]"], [2, float("nan"), "–"]], index=index, columns=columns)
    lines = _table_md(SimpleNamespace(table=table))
    assert lines[0] == "| params.preset |  | runs n | scores.ok mean | scores.ok 95% CI |"
    assert lines[1] == "|---|---|---|---|---|"
    assert lines[2] == "| scout | demo/a\\|b | 3 | 0.6667 | \\[0.21, 0.94\\] |"
    assert lines[3] == "| scribe | demo/c | 2 | – | – |"


def test_a_comparison_without_a_table_is_shown_as_its_text():
    assert _table_md(SimpleNamespace(table=None)) == ["```text\nnamespace(table=None)\n```"]
