"""compare()'s statistics against hand-computed numbers on a fixed frame, and checks that mean what they say.

The expected numbers are worked out by hand in the comments (z = 1.959964 for 95%, t from a t table)."""

from __future__ import annotations

import json
import math
import re
import statistics

import pytest

from nbsubagents import _style as style
from nbsubagents._config import NbSubagentsError
from nbsubagents._sweeps import frames, plots, stats, views
from nbsubagents._sweeps.scorers import check, shell_syntax


def test_t_quantiles_match_the_t_table():
    # two-sided 95%: df 1 → 12.7062, 2 → 4.3027, 4 → 2.7764, 10 → 2.2281, 30 → 2.0423; 90%, df 3 → 2.3534
    for df, t in ((1, 12.706205), (2, 4.302653), (4, 2.776445), (10, 2.228139), (30, 2.042272)):
        assert stats.t_quantile(0.95, df) == pytest.approx(t, abs=1e-6)
    assert stats.t_quantile(0.90, 3) == pytest.approx(2.353363, abs=1e-6)
    assert stats.t_quantile(0.99, 5) == pytest.approx(4.032143, abs=1e-6)


def test_wilson_newcombe_t_welch_and_pass_at_k_by_hand():
    # Wilson 2/3: centre (2/3 + z²/6)/(1 + z²/3) = 1.306910/2.280486 = 0.573084;
    # half z/(1 + z²/3)·√(p(1−p)/3 + z²/36) = 0.859452·0.425183 = 0.365425 → (0.207659, 0.938508)
    assert stats.wilson(2, 3) == pytest.approx((0.207659, 0.938508), abs=1e-6)
    # 3/3: centre = half = 1/(1 + z²/3)·(1 + z²/6)/2 ... → (0.438503, 1)
    assert stats.wilson(3, 3) == pytest.approx((0.438503, 1.0), abs=1e-6)
    assert stats.wilson(0, 3) == pytest.approx((0.0, 0.561497), abs=1e-6)
    # Newcombe 3/3 − 2/3: d = 1/3; L = d − √((1 − 0.438503)² + (0.938508 − 2/3)²) = 1/3 − 0.623840 = −0.290507;
    # U = d + √(0² + (2/3 − 0.207659)²) = 1/3 + 0.459008 = 0.792341
    assert stats.newcombe(3, 3, 2, 3) == pytest.approx((1 / 3, -0.290507, 0.792341), abs=1e-6)
    # [1, 2, 3]: mean 2, s 1, t(0.975, 2) = 4.302653: 2 ± 4.302653/√3 = 2 ± 2.484138
    assert stats.mean_interval([1, 2, 3]) == pytest.approx((2.0, -0.484138, 4.484138), abs=1e-6)
    # Welch [4, 5, 6] − [1, 2, 3]: d 3, se √(1/3 + 1/3) = 0.816497, df (2/3)²/(2·(1/3)²/2) = 4,
    # t(0.975, 4) = 2.776445: 3 ± 2.266958
    assert stats.welch([4, 5, 6], [1, 2, 3]) == pytest.approx((3.0, 0.733042, 5.266958), abs=1e-6)
    # n 5, c 2, k 2: pass@2 = 1 − C(3,2)/C(5,2) = 1 − 3/10 = 0.7; pass^2 = C(2,2)/C(5,2) = 0.1
    assert stats.pass_at_k(5, 2, 2) == pytest.approx(0.7) and stats.pass_hat_k(5, 2, 2) == pytest.approx(0.1)
    assert stats.pass_at_k(3, 2, 1) == pytest.approx(2 / 3) == stats.pass_hat_k(3, 2, 1)  # k = 1: the rate
    assert math.isnan(stats.pass_at_k(2, 1, 3)) and math.isnan(stats.mean_interval([4.0])[1])


def row(i: int, preset: str, ok: bool, seconds: float, *, stop: str = "end", status: str = "completed") -> dict:
    return {"run_id": f"r{i}", "status": status, "stop_reason": stop, "run_dir": "/nowhere", "duration": seconds,
            "cost": 0.001, "total_tokens": 100, "params": json.dumps({"preset": preset, "model": "demo/scripted"}),
            "scores": json.dumps({"ok": ok, "words": seconds * 3})}


FIXED = [row(1, "a", True, 1), row(2, "a", True, 2), row(3, "a", False, 3),
         row(4, "b", True, 4), row(5, "b", True, 5), row(6, "b", True, 6),
         row(7, "b", True, 0, stop="not_started", status="aborted")]  # never started: scored True, 0 s before


def test_an_excluded_run_keeps_its_row_and_reason_but_no_numbers():
    frame = frames.frame(FIXED)
    assert frame.loc["r7", "excluded"] == "never started" and frame["excluded"].isna().sum() == 6
    assert math.isnan(frame.loc["r7", "metrics.duration_s"]) and math.isnan(frame.loc["r7", "metrics.cost"])
    assert frame.loc["r7", "scores.ok"] is None and frame.loc["r6", "scores.ok"] is True


def test_compare_matches_hand_computed_intervals_and_pass_at_k_on_a_fixed_frame():
    comparison = views.compare(frames.frame(FIXED), by="preset", baseline="a", k=2)
    table = comparison.table
    a, b = table.loc["a"], table.loc["b"]
    assert (b["runs", "planned"], b["runs", "ran"], b["runs", "succeeded"], b["runs", "failed"],
            b["runs", "excluded"], b["runs", "why"]) == (4, 3, 3, 0, 1, "1 never started")
    assert b["success", "rate"] == 1.0  # over the 3 that ran
    assert (a["scores.ok", "rate"], a["scores.ok", "lo"], a["scores.ok", "hi"]) == pytest.approx(
        (2 / 3, 0.207659, 0.938508), abs=1e-6)
    assert b["scores.ok", "rate"] == 1.0 and b["scores.ok", "lo"] == pytest.approx(0.438503, abs=1e-6)
    # a: n 3, c 2 → pass@2 = 1 − C(1,2)/C(3,2) = 1, pass^2 = C(2,2)/C(3,2) = 1/3; b: 3 of 3 → 1 and 1
    assert (a["scores.ok", "pass@2"], a["scores.ok", "pass^2"]) == pytest.approx((1.0, 1 / 3))
    assert (b["scores.ok", "pass@2"], b["scores.ok", "pass^2"]) == (1.0, 1.0)
    assert (b["scores.ok", "Δ"], b["scores.ok", "Δ lo"], b["scores.ok", "Δ hi"]) == pytest.approx(
        (1 / 3, -0.290507, 0.792341), abs=1e-6)
    assert (a["metrics.duration_s", "mean"], a["metrics.duration_s", "lo"], a["metrics.duration_s", "hi"]) == \
        pytest.approx((2.0, -0.484138, 4.484138), abs=1e-6)
    assert b["metrics.duration_s", "n"] == 3  # the never-started run's 0 s is not a duration
    assert (b["metrics.duration_s", "Δ"], b["metrics.duration_s", "Δ lo"], b["metrics.duration_s", "Δ hi"]) == \
        pytest.approx((3.0, 0.733042, 5.266958), abs=1e-6)
    # 90% intervals: t(0.95, 2) = 2.919986 → 2 ± 2.919986/√3 = 2 ± 1.685854
    narrower = views.compare(frames.frame(FIXED), by="preset", ci=0.90).table.loc["a"]
    assert narrower["metrics.duration_s", "lo"] == pytest.approx(0.314146, abs=1e-6)


def test_a_text_score_from_a_hand_edited_scores_json_counts_as_missing_with_a_warning_naming_it():
    """Scorers give numbers and bools; a text someone typed into scores.json must not break compare(): the value
    counts as missing (the other runs' numbers stand) and a warning names the run, the score and the value."""
    rows = [dict(r) for r in FIXED]
    rows[1]["scores"] = json.dumps({"ok": True, "words": "six-ish"})  # r2 of preset a: 2 s, its words 6 before
    rows[4]["scores"] = json.dumps({"ok": True, "words": "15"})  # a number written as text still counts
    with pytest.warns(RuntimeWarning, match=r"scores\.words of run r2 is 'six-ish', not a number"):
        table = views.compare(frames.frame(rows), by="preset").table
    a, b = table.loc["a"], table.loc["b"]
    assert a["scores.words", "n"] == 2 and a["scores.words", "mean"] == pytest.approx((3 + 9) / 2)
    assert b["scores.words", "mean"] == pytest.approx((12 + 15 + 18) / 3)
    assert a["scores.ok", "rate"] == pytest.approx(2 / 3)  # the run's other score is untouched


def test_a_cell_without_a_model_axis_keeps_its_numbers():
    """A sweep whose presets pick their own models has no model in its params: the cell (a, NaN) is still a row
    of numbers, and a baseline with a missing value still finds its cell."""
    rows = [{**r, "params": json.dumps({"preset": json.loads(r["params"])["preset"], "model": None})} for r in FIXED]
    table = views.compare(frames.frame(rows), by=("preset", "model"), baseline=("a", None)).table
    assert list(table["runs", "ran"]) == [3, 3] and list(table["runs", "planned"]) == [3, 4]
    assert table["scores.ok", "rate"].tolist() == pytest.approx([2 / 3, 1.0])
    assert table["scores.ok", "Δ"].tolist() == pytest.approx([0.0, 1 / 3])
    assert "100% of 3 [44, 100] · 1 excluded (never started)" in repr(views.compare(frames.frame(rows),
                                                                                     by=("preset", "model")))


def test_the_display_shows_scores_first_n_once_and_marks_an_interval_that_excludes_zero():
    comparison = views.compare(frames.frame(FIXED), by="preset", baseline="a")
    shown = comparison._repr_html_()
    header = shown[shown.index("<thead>"):shown.index("</thead>")]
    assert header.index("ok") < header.index("words") < header.index("duration_s")  # scores before metrics
    b_success = ("<td title=\"pass@3 100% · pass^3 100%\">100% of 3<div class='nbsub-cmp-excluded' "
                 "title=\"never started\">1 excluded</div><div class='nbsub-cmp-muted'>[44, 100]</div>")
    assert header.count(">n<") == 0 and b_success in shown  # b's rate, right under it what it leaves out, then
    # its interval
    assert "Not in any rate or mean: b: 1 excluded (never started)." in shown
    # duration: b took longer, its interval excludes 0: marked, in the "worse" colour (less time is better); the
    # interval of a Δ on hover
    assert "<div class='nbsub-cmp-worse' title=\"[+0.73, +5.27]\">Δ +3.00 ✱</div>" in shown
    assert "<div class='nbsub-cmp-better' title=\"[+2.2, +15.8]\">Δ +9.0 ✱</div>" in shown  # a score: more is better
    assert "<div class='nbsub-cmp-muted' title=\"[−29, +79]\">Δ +33 pp</div>" in shown  # one success more: no finding
    assert 'title="pass@3 100% · pass^3 0%">67% of 3' in shown  # k: the fewest runs a cell ran, on hover
    assert "cost (×10⁻³)" in header and ">1.00<" in shown and "e-0" not in shown  # 3 digits, one scale
    assert ".nbsub-cmp-worse{color:var(--nbsubagents-failed)}" in shown  # the palette's variable: it switches
    assert "@media (prefers-color-scheme: dark)" in shown and '[data-jp-theme-light="false"]{' in shown
    assert "100% of 3 [44, 100] · 1 excluded (never started) · Δ ±0 pp [−56, +56]" in repr(comparison)
    with pytest.raises(NbSubagentsError, match="ci=.*between 0 and 1"):
        views.compare(frames.frame(FIXED), by="preset", ci=95)
    with pytest.raises(NbSubagentsError, match="k=.*whole number"):
        views.compare(frames.frame(FIXED), by="preset", k=0)


def test_a_plot_shows_every_run_that_ran_with_counts_and_a_marker_per_model():
    pytest.importorskip("matplotlib")
    fig = plots.plot(frames.frame(FIXED), x="duration_s", y="ok", by="preset", theme="dark")
    ax = fig.axes[0]
    assert sorted(c.get_gid() for c in ax.collections) == ["a", "b"]
    assert sum(len(c.get_offsets()) for c in ax.collections) == 6  # the never-started run is not a point
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["a (n=3, 2 true)", "b (n=3, 3 true)"] and "1 excluded run not shown" in ax.get_title(loc="left")
    xs = sorted(x for c in ax.collections for x, _ in c.get_offsets())
    assert len(set(xs)) == 6 and all(abs(x - round(x)) <= 0.02 * 5 for x in xs)  # equal values spread, a little
    assert ax.get_legend().get_bbox_to_anchor().x0 > ax.get_window_extent().x1 - 1  # outside the axes
    assert fig.get_facecolor()[3] == 1.0 and ax.xaxis.label.get_color() == style.TEXT[1]  # opaque, in the dark ink


def test_a_check_with_shell_syntax_runs_in_a_shell_or_is_refused():
    for command, syntax in (("echo start && test -f no-such-file", "&&"), ("false || true", "||"),
                            ("true; false", ";"), ("ls | grep x", "|"), ("echo $(pwd)", "$("), ("echo `pwd`", "`"),
                            ("ls > out", ">"), ("ls *.py", "*"), ("FOO=1 pytest", "FOO="), ("cat ~/x", "~"),
                            ('grep "$HOME" f', "$")):
        assert shell_syntax(command) == syntax, command
        assert check(command).argv == ["bash", "-c", command]
        with pytest.raises(NbSubagentsError, match=f"shell=False.*{re.escape(syntax)}.*shell syntax.*Leave out"):
            check(command, shell=False)
    for command in ("pytest -q", "grep -q 'a && b' README.md", "grep '$HOME' f", r"echo a\;b", "test -f x.py"):
        assert shell_syntax(command) is None and check(command).argv[0] != "bash", command
    assert check(["echo", "a && b"]).argv == ["echo", "a && b"]  # a list is run as it is
    with pytest.raises(NbSubagentsError, match="No closing quotation; close the quote"):
        check("grep -q 'unclosed README.md")


def test_frame_columns_come_in_the_order_runs_first_have_them_and_a_missing_value_is_nan():
    """frame() builds its columns at once; they are what a list of records gives: a key first seen on a later run
    comes after the columns before it, a run that lacks it has NaN, a present None stays None."""
    rows = [row(1, "a", True, 1), {**row(2, "b", False, 2), "files_changed": 3, "lines_added": 4, "lines_removed": 0,
                                   "params": json.dumps({"preset": "b", "model": "m", "extra": "x"}),
                                   "scores": json.dumps({"ok": None, "new": 2}), "tags": json.dumps({"who": "me"})}]
    frame = frames.frame(rows)
    names = list(frame.columns)
    assert names[:names.index("params.preset")] == frames._BASE[1:]  # run_id is the index
    assert names[names.index("params.preset"):] == [
        "params.preset", "params.model", *[f"metrics.{m}" for m in frames.METRICS], "scores.ok", "scores.words",
        "params.extra", "metrics.files_changed", "metrics.lines_added", "metrics.lines_removed", "scores.new",
        "tags.who"]
    assert math.isnan(frame.loc["r1", "params.extra"]) and frame.loc["r2", "params.extra"] == "x"
    assert frame.loc["r2", "scores.ok"] is None and math.isnan(frame.loc["r2", "scores.words"])
    assert math.isnan(frame.loc["r1", "metrics.files_changed"]) and frame.loc["r2", "metrics.lines_added"] == 4
    assert frame["scores.ok"].dtype == object and frame["metrics.cost"].dtype == float


def test_runs_with_the_same_keys_in_another_order_give_the_first_runs_column_order():
    other_order = {"params": json.dumps({"model": "m", "preset": "b"}), "scores": json.dumps({"words": 1, "ok": True}),
                   "tags": json.dumps({"y": 1, "x": 2})}
    rows = [{**row(1, "a", True, 1), "tags": json.dumps({"x": 0, "y": 0})}, {**row(2, "b", False, 2), **other_order},
            {**row(3, "b", False, 2), **other_order}]
    names = list(frames.frame(rows).columns)
    assert names[names.index("params.preset"):] == [
        "params.preset", "params.model", *[f"metrics.{m}" for m in frames.METRICS], "scores.ok", "scores.words",
        "tags.x", "tags.y"]
    assert list(frames.frame(rows[1:2]).columns)[-2:] == ["tags.y", "tags.x"]


def test_compare_over_many_runs_gives_the_statistics_modules_numbers():
    """A cell's numbers come from whole columns at once; they are those of ``sweeps.stats`` on the cell's values."""
    import random

    rng = random.Random(1)
    rows = [row(i, "ab"[i % 2], rng.random() < 0.6, rng.random() * 9) for i in range(400)]
    frame = frames.frame(rows)
    table = views.compare(frame, by="preset", baseline="a", k=3).table
    values = {p: frame.loc[frame["params.preset"] == p, "metrics.duration_s"].tolist() for p in "ab"}
    oks = {p: [float(v) for v in frame.loc[frame["params.preset"] == p, "scores.ok"]] for p in "ab"}
    for p in "ab":
        mean, lo, hi = stats.mean_interval(values[p])
        got = table.loc[p, "metrics.duration_s"]
        assert (got["mean"], got["lo"], got["hi"]) == pytest.approx((mean, lo, hi), rel=1e-12)
        assert got["std"] == pytest.approx(statistics.stdev(values[p]), rel=1e-12) and got["n"] == 200
        ok = table.loc[p, "scores.ok"]
        assert (ok["lo"], ok["hi"]) == stats.wilson(int(sum(oks[p])), 200)
        assert ok["pass^3"] == stats.pass_hat_k(200, int(sum(oks[p])), 3)
    assert tuple(table.loc["b", "metrics.duration_s"][["Δ", "Δ lo", "Δ hi"]]) == pytest.approx(
        stats.welch(values["b"], values["a"]), rel=1e-12)
    assert tuple(table.loc["b", "scores.ok"][["Δ", "Δ lo", "Δ hi"]]) == pytest.approx(
        stats.newcombe(int(sum(oks["b"])), 200, int(sum(oks["a"])), 200), rel=1e-12)
