"""compare()'s display does not mislead (issue 56, item 5): a cell where 4 of 12 runs met provider errors reads
"100% of 8" with "4 excluded" right under it (why on hover, and under the table), in the notebook's HTML, in the
text a terminal prints (at most 100 columns) and in a Markdown report's rows; the display is a value per line, its
interval on the next, pass@k and Δ's interval on hover, so it fits a notebook column (the width itself is measured
in tests/browser/test_compare_browser.py)."""

from __future__ import annotations

import json
import re

from test_sweep_stats import row

from nbsubagents._sweeps import frames, views

MODELS = ("demo/scripted", "anthropic/claude-sonnet-4-5-20250929")


def sweep() -> list[dict]:
    """Two presets × two models × 12 runs; in (reviewer, demo/scripted) the provider failed 4 runs."""
    rows, i = [], 0
    for preset in ("reviewer", "reviewer-strict"):
        for model in MODELS:
            for k in range(12):
                i += 1
                run = {**row(i, preset, k % 3 != 0, 3 + k), "params": json.dumps({"preset": preset, "model": model})}
                if (preset, model) == ("reviewer", "demo/scripted") and k < 4:
                    run.update(status="failed", stop_reason="provider_error")
                rows.append(run)
    return rows


def test_a_rate_says_how_many_runs_it_counts_and_how_many_it_leaves_out():
    comparison = views.compare(frames.frame(sweep()), by=("preset", "model"), baseline=("reviewer-strict", MODELS[0]))
    assert comparison.table.loc[("reviewer", MODELS[0]), ("runs", "excluded")] == 4

    html = comparison.html(sheet=False)
    cell = html[html.index("<th>reviewer</th><th>demo/<wbr>scripted</th>"):]
    success = cell[cell.index("<td"):cell.index("</td>")]
    assert ">100% of 8<div class='nbsub-cmp-excluded' title=\"the model provider failed\">4 excluded</div>" \
        "<div class='nbsub-cmp-muted'>[68, 100]</div>" in success  # the rate, then what it leaves out, then its interval
    assert "Not in any rate or mean: reviewer · demo/scripted: 4 excluded (the model provider failed)." in html
    assert html.count("nbsub-cmp-excluded") == 1  # the other cells lost no run
    assert "pass@8" not in html.replace('title="pass@8', "")  # pass@k only on hover: a cell's lines stay few
    assert re.findall(r">Δ [^<]*<", html) and not re.search(r">Δ [^<]*\[", html)  # Δ's interval: on hover

    text = str(comparison)
    assert max(len(line) for line in text.splitlines()) <= 100, text
    assert "100% of 8 [68, 100] · 4 excluded (the model provider failed)" in text  # on one line, as printed
    header, rows = comparison.display_rows()
    assert header[:4] == ["preset", "model", "success", "failed a step"] and "tokens" not in header
    assert rows[1][2].startswith("100% of 8 [68, 100] · 4 excluded (the model provider failed) · Δ ")
    assert rows[0][2].startswith("100% of 12 [76, 100] · Δ ")
