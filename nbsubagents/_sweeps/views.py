"""Views of an experiment's runs: the frame (built in ``frames``), the per-cell comparison (the cost/score plot is
``plots``, the MLflow export ``export``).

Column names follow MLflow's ``search_runs``: ``params.*``, ``metrics.*``, ``tags.*`` (and ``scores.*``).
pandas is imported here.

A run the infrastructure ended (``outcomes.excluded_reason``: never started, provider failed, ...) keeps its row,
with the reason in ``excluded`` and no numbers: its scores and metrics are missing (NaN), so no mean, rate or
plot counts it. ``compare()`` counts such runs per cell and computes every rate and mean over the runs that ran,
with the intervals of ``sweeps.stats``; its display shows them under each cell's success rate.
"""

from __future__ import annotations

import math
from html import escape as _html_escape
import textwrap
import warnings
from collections import Counter
from typing import TYPE_CHECKING, Any, NamedTuple, Sequence

from .._config import NbSubagentsError
from .._child.text import ELLIPSIS
from .. import _templates
from .._templates import Html
from . import stats
from .outcomes import excluded_reason

if TYPE_CHECKING:
    import pandas


# what compare()'s display shows of the metrics (its table keeps them all), and the ones where less is better
TEXT_WIDTH = 100  # a comparison's text (``print(exp.compare())``) fits a terminal this wide
SHOWN_METRICS = ("metrics.duration_s", "metrics.cost", "metrics.tokens")
LOWER_IS_BETTER = {f"metrics.{m}" for m in ("duration_s", "tokens", "input_tokens", "output_tokens", "cost",
                                              "tool_calls", "turns")}


def by_columns(data: pandas.DataFrame, by: str | Sequence[str]) -> list[str]:
    names = [by] if isinstance(by, str) else list(by)
    if not names:
        raise NbSubagentsError("compare(by=...) needs at least one column, such as ('preset', 'model')")
    cols = []
    for name in names:
        col = name if name in data.columns else f"params.{name}"
        if col not in data.columns:
            options = sorted(c.removeprefix("params.") for c in data.columns if c.startswith("params."))
            raise NbSubagentsError(f"compare(by=...): no column {name!r}; the params are {', '.join(options)}")
        cols.append(col)
    return cols


def _planned_key(col: str) -> str | None:
    """The key of a planned cell's params that a compare() column is: ``params.X`` is X; ``harness`` (the harness a
    run ran under) is the cell's ``harness``, which a sweep without a harness axis has not (None for the others)."""
    if col.startswith("params."):
        return col.removeprefix("params.")
    return "harness" if col == "harness" else None


def value_columns(data: pandas.DataFrame) -> list[str]:
    return [c for c in data.columns if c.startswith("metrics.")] + [c for c in data.columns if c.startswith("scores.")]


def is_boolean(series: pandas.Series) -> bool:
    if series.dtype != object:
        return series.dtype == bool and len(series) > 0
    present = [v for v in series if not _missing(v)]
    return bool(present) and all(isinstance(v, bool) or type(v).__name__ in ("bool", "bool_") for v in present)


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def excluded_reasons(data: pandas.DataFrame) -> pandas.Series:
    """Why each run is excluded (None when it counts): the frame's column, else worked out from its row."""
    if "excluded" in data.columns:
        return data["excluded"]
    return data.apply(lambda row: excluded_reason(row.to_dict()), axis=1)


# -- compare ----------------------------------------------------------------------------------------------------

class Line(NamedTuple):
    """A line of a comparison's cell: its text and css class ("": the value itself; muted, better, worse, excluded);
    ``tip``: what the HTML shows on hover over it and the text forms after it (in parentheses unless it is an
    interval, in brackets already); ``hover``: a line the HTML shows only on hover over its cell (the text forms
    show it); ``attach``: a line the text forms put after the one before it (an interval after its value), not
    after a " · "."""
    text: str
    css: str = ""
    tip: str = ""
    hover: bool = False
    attach: bool = False

    def plain(self) -> str:
        if not self.tip:
            return self.text
        return f"{self.text} {self.tip}" if self.tip.startswith("[") else f"{self.text} ({self.tip})"


def _parts(lines: list[Line]) -> list[str]:
    """A cell's lines as the parts of one line of text, an attached line with the one before it."""
    out: list[str] = []
    for line in lines:
        if line.attach and out:
            out[-1] += " " + line.plain()
        elif line.text:
            out.append(line.plain())
    return out


def _joined(lines: list[Line]) -> str:
    """A cell's lines on one line of text, " · " between its parts."""
    return " · ".join(_parts(lines))


def _wrapped(parts: list[str], width: int, first: str, indent: int) -> list[str]:
    """``parts`` joined by " · " after ``first``, in lines no wider than ``width``: a line breaks between parts
    (the next one ``indent`` spaces in), and within a part only when that part alone is wider than a line."""
    out, line = [], first
    for part in parts:
        if line.strip() and len(line) + 3 + len(part) > width:
            out.append(line)
            line = " " * indent
        line += (" · " if line.strip() and line != first else "") + part
    out.append(line)
    return [piece for text in out for piece in textwrap.wrap(text, width, subsequent_indent=" " * indent,
                                                             drop_whitespace=False) or [text]]


class Comparison:
    """Per-cell statistics of an experiment. ``table`` is a DataFrame with (value, stat) columns and every number:
    ``runs`` (planned, ran, succeeded, failed, excluded, why, failed_steps), ``success`` (rate, lo, hi, pass@k,
    pass^k), and for each metric and score its mean (or rate), std, n, lo, hi, pass@k/pass^k (boolean scores),
    and against a baseline Δ, Δ lo, Δ hi. Its display shows the scores first and fits a notebook: a value on its
    first line, its interval on the next, the runs a rate leaves out under the success rate, Δ's interval and
    pass@k on hover (the text forms show every line)."""

    def __init__(self, table: pandas.DataFrame, *, by: list[str], baseline: Any = None, title: str = "",
                 ci: float = 0.95, ks: Sequence[int] = (), boolean: Sequence[str] = ()) -> None:
        self.table, self.by, self.baseline, self.title = table, by, baseline, title
        self.ci, self.ks, self.boolean = ci, list(ks), set(boolean)

    # one formatter: rows of cells, each a list of Lines; three renderers (text, HTML, Markdown's display_rows)
    def _shown(self) -> list[str]:
        values = [c for c in self.table.columns.get_level_values(0).unique() if c not in ("runs", "success")]
        metrics = [c for c in SHOWN_METRICS if c in values]
        if "metrics.cost" in metrics and not (self.table["metrics.cost", "mean"].fillna(0) != 0).any():
            metrics.remove("metrics.cost")  # no run had a cost (a model without prices): its tokens instead
        elif "metrics.tokens" in metrics:
            metrics.remove("metrics.tokens")
        return ["success"] + [c for c in values if c.startswith("scores.")] + metrics

    def _caption(self, html: bool = False) -> str:
        cells = ", ".join(b.removeprefix("params.") for b in self.by)
        text = (f"{self.title + ': ' if self.title else ''}per cell ({cells}): rates and means over the runs that "
                f"ran, [{self.ci:.0%} interval] (Wilson for rates, Student t for means); excluded runs (ended by "
                "the infrastructure) counted apart")
        if self.ks:
            text += (f"; pass@k: at least one of k runs passes, pass^k: all k pass (k = {', '.join(map(str, self.ks))}"
                     f"{', on hover' if html else ''})")
        if self.baseline is not None:
            text += (f"; Δ = cell − baseline {self.baseline!r} (Newcombe for rates, Welch for means"
                     f"{'; its interval on hover' if html else ''}), ✱ when its interval excludes 0")
        return text

    def _rows(self) -> tuple[list[str], list[list[list[Line]]]]:
        """The display's header and its cells, each a list of Lines: what every renderer places."""
        shown = self._shown()
        scales = {col: _scale(self.table[(col, "mean")]) for col in shown if (col, "mean") in self.table}
        header = [b.removeprefix("params.") for b in self.by] + ["success", "failed a step"]
        header += [c.removeprefix("scores.").removeprefix("metrics.")
                   + (f" (×10{_superscript(scales[c])})" if scales.get(c) else "") for c in shown[1:]]
        rows = []
        for key, row in self.table.iterrows():
            cells = [[Line(cell_label(v))] for v in (key if isinstance(key, tuple) else (key,))]
            runs = row["runs"]
            ran, steps = int(runs["ran"]), runs["failed_steps"]
            is_baseline = key == self._baseline_key()
            success = self._value_cell("success", row["success"], ran, 0, is_baseline)
            at = 2 if len(success) > 1 and success[1].attach else 1  # after the rate and its interval
            cells.append(success[:at] + self._left_out(runs) + success[at:])
            cells.append([Line("–" if ran == 0 or _missing(steps) else f"{int(steps)} of {ran}")])
            for col in shown[1:]:
                cells.append(self._value_cell(col, row[col], ran, scales.get(col, 0), is_baseline))
            rows.append(cells)
        return header, rows

    @staticmethod
    def _left_out(runs: Any) -> list[Line]:
        """The runs a cell's rates leave out, under its success rate: excluded (why on hover) and not launched."""
        ran, planned, excluded = int(runs["ran"]), int(runs["planned"]), int(runs["excluded"])
        waiting = planned - ran - excluded
        reasons = [part for part in str(runs["why"] or "").split(", ") if part and not part.endswith(" not launched")]
        if len(reasons) == 1:  # one reason: its count is the line's
            reasons = [reasons[0].removeprefix(f"{excluded} ")]
        out = [Line(f"{excluded} excluded", "excluded", ", ".join(reasons))] * bool(excluded)
        return out + [Line(f"{waiting} not launched", "excluded")] * (waiting > 0)

    def _baseline_key(self) -> Any:
        if self.baseline is None:
            return None
        key = tuple(self.baseline) if isinstance(self.baseline, (list, tuple)) else (self.baseline,)
        return key if len(self.by) > 1 else key[0]

    def _value_cell(self, col: str, values: Any, ran: int, scale: int, is_baseline: bool) -> list[Line]:
        """A value's lines: the rate (``of`` the runs it counts) or mean, its interval, Δ, then pass@k (hover)."""
        rate = col == "success" or col in self.boolean
        n = ran if col == "success" or _missing(values["n"]) else int(values["n"])
        if rate:
            head = f"{_pct(values['rate'])} of {n}" if n else "–"
            interval = f"[{_pct(values['lo'], '')}, {_pct(values['hi'], '')}]" if n else ""
        else:
            mean, lo, hi = (values[s] / 10 ** scale for s in ("mean", "lo", "hi"))
            digits = _decimals(mean, lo, hi)
            head = _num(mean, digits) + (f" (n={n})" if n != ran and n else "")
            interval = f"[{_num(lo, digits)}, {_num(hi, digits)}]" if not _missing(lo) and lo != hi else ""
        lines = [Line(head), Line(interval, "muted", attach=True)]
        if self.baseline is not None and "Δ" in values:
            lines.append(Line("baseline", "muted") if is_baseline else self._delta(col, values, rate, scale))
        if rate:
            lines += [Line(f"pass{sign}{k} {_pct(values[f'pass{sign}{k}'])}", hover=True) for k in self.ks
                      for sign in "@^" if not _missing(values.get(f"pass@{k}"))]
        return [line for line in lines if line.text]

    def _delta(self, col: str, values: Any, rate: bool, scale: int) -> Line:
        """Δ to the baseline with its interval: ✱ and the better/worse colour when the interval excludes 0."""
        d, lo, hi = (values[s] * (100 if rate else 10 ** -scale) for s in ("Δ", "Δ lo", "Δ hi"))
        if _missing(d):
            return Line("")
        digits = 0 if rate else _decimals(d, lo, hi)
        text = f"Δ {_signed(d, digits)}{' pp' if rate else ''}"
        interval = f"[{_signed(lo, digits)}, {_signed(hi, digits)}]" if not _missing(lo) and lo != hi else ""
        if _missing(lo) or lo <= 0 <= hi:
            return Line(text, "muted", interval)
        better = (d < 0) if col in LOWER_IS_BETTER else (d > 0)
        return Line(text + " ✱", "better" if better else "worse", interval)

    def display_rows(self) -> tuple[list[str], list[list[str]]]:
        """The display's header and rows as plain text (a cell's lines joined by " · "): what the text repr and
        a Markdown report show."""
        header, rows = self._rows()
        return header, [[_joined(cell) for cell in row] for row in rows]

    def __repr__(self) -> str:
        return self.text()

    def text(self, width: int = TEXT_WIDTH) -> str:
        """The comparison as text no wider than ``width``: the caption wrapped, then the table with each cell's
        lines one under the other when it fits, else a block per cell (its name, then a line per value, wrapped
        under the value's start)."""
        header, rows = self._rows()
        cells = [[[line.plain() for line in cell] or [""] for cell in row] for row in rows]
        out = textwrap.wrap(self._caption(), width)
        table = [[[name] for name in header], *cells]
        widths = [max(len(line) for row in table for line in row[i]) for i in range(len(header))]
        if sum(widths) + 2 * (len(widths) - 1) <= width:
            for n, row in enumerate(table):
                if n > 1:
                    out.append("")  # a row of several lines each: a blank line between cells
                out += ["  ".join((cell[k] if k < len(cell) else "").ljust(w) for cell, w in zip(row, widths)).rstrip()
                        for k in range(max(len(cell) for cell in row))]
            return "\n".join(out)
        keys, names = len(self.by), header[len(self.by):]
        label = max(len(name) for name in names)
        for row in rows:
            out += ["", _fit(" · ".join(cell[0].text for cell in row[:keys]), width)]
            for name, cell in zip(names, row[keys:]):
                out += _wrapped(_parts(cell), width, f"  {name.ljust(label)}  ", label + 4)
        return "\n".join(out)

    def _repr_html_(self) -> str:
        return self.html()

    def html(self, *, sheet: bool = True) -> str:
        """The table as HTML; ``sheet=False`` leaves the stylesheet out (for a page that carries it already)."""
        header, rows = self._rows()
        keys = len(self.by)
        shown = [[(Html(_html_escape(cell[0].text).replace("/", "/<wbr>")) if i < keys else cell[0].text,
                   sorted((line for line in cell[1:] if not line.hover), key=lambda line: line.css != "excluded"),
                   " · ".join(line.plain() for line in cell if line.hover))
                  for i, cell in enumerate(row)] for row in rows]
        left_out = [(" · ".join(cell[0].text for cell in row[:keys]), line.plain()) for row in rows
                    for line in row[keys] if line.css == "excluded"]
        return _templates.part("bits.html", "comparison", caption=self._caption(html=True), header=header,
                               rows=shown, by=keys, left_out=left_out, sheet=sheet)


def _fit(line: str, width: int) -> str:
    return line if len(line) <= width else line[: width - 1].rstrip() + ELLIPSIS


def cell_label(value: Any) -> str:
    return "default" if _missing(value) else str(value)


def _decimals(*values: Any, digits: int = 3) -> int:
    """Decimals that give the largest of ``values`` ``digits`` significant digits (at most 10)."""
    largest = max((abs(v) for v in values if not _missing(v)), default=0.0)
    if largest == 0:
        return 0
    return min(10, max(0, digits - 1 - math.floor(math.log10(largest))))


def _num(value: Any, decimals: int) -> str:
    return "–" if _missing(value) else f"{value:.{decimals}f}".replace("-", "−")


def _signed(value: Any, decimals: int) -> str:
    if _missing(value):
        return "–"
    text = f"{abs(value):.{decimals}f}"
    return ("+" if value > 0 else "−" if value < 0 and text.strip("0.,") else "±") + text


def _scale(means: Any) -> int:
    """The power of ten (a multiple of 3) a column's numbers are shown in: 0 unless they are all below 0.01 or
    reach a million, so a cost reads 19.4 (×10⁻⁶) rather than 0.0000194."""
    largest = max((abs(float(v)) for v in means if not _missing(v)), default=0.0)
    if largest == 0 or 0.01 <= largest < 1e6:
        return 0
    return 3 * math.floor(math.log10(largest) / 3)


def _superscript(power: int) -> str:
    return str(power).translate(str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹"))


def _pct(value: Any, sign: str = "%") -> str:
    return "–" if _missing(value) else f"{value * 100:.0f}{sign}"


def compare(data: pandas.DataFrame, *, by: str | Sequence[str] = ("preset", "model"), baseline: Any = None,
            title: str = "", ci: float = 0.95, k: int | Sequence[int] | None = None,
            planned: Sequence[dict[str, Any]] | None = None) -> Comparison:
    """Group runs by ``by``. Per cell: how many runs were planned, ran, succeeded, failed and were excluded (and
    why); the success rate with its Wilson interval; each metric's and score's mean with its Student t interval
    (a boolean score: its rate with a Wilson interval, and pass@k/pass^k); against ``baseline`` (one cell) the
    difference with its interval (Newcombe for rates, Welch for means). Rates and means are over the runs that
    ran. ``ci``: the intervals' confidence; ``k``: pass@k's k (default: the fewest runs any cell ran, when 2 or
    more). ``planned``: the params of every planned run (an experiment's plan), for runs not launched yet."""
    import numpy as np
    import pandas as pd

    if isinstance(ci, bool) or not isinstance(ci, (int, float)) or not 0 < ci < 1:
        raise NbSubagentsError(f"compare(ci=...) is a confidence level between 0 and 1, such as 0.95; got {ci!r}")
    cols = by_columns(data, by)
    values = value_columns(data)
    boolean = [c for c in values if c.startswith("scores.") and is_boolean(data[c])]
    excluded = excluded_reasons(data)
    reasons_all, counted = excluded.to_numpy(), excluded.isna().to_numpy()  # why each run is out; the runs that ran
    work = data[cols].copy()
    work["_at"] = range(len(work))  # each run's position: a cell's numbers are slices of whole columns
    groups = [(cell, part["_at"].to_numpy()) for cell, part in work.groupby(cols, dropna=False, sort=True)]
    ran_counts = [int(counted[rows].sum()) for _, rows in groups]
    ks = _ks(k, [n for n in ran_counts if n > 0])
    named = [_planned_key(c) for c in cols]  # what a planned cell calls each column (None: it has no such key)
    wanted = Counter(_norm(tuple(p.get(key) for key in named)) for p in planned or ()
                     ) if planned is not None and None not in named else None
    numeric = {col: _floats(data[col]) for col in values}  # NaN where a run has no value
    completed = (data["status"] == "completed").to_numpy()
    steps_all = _floats(data["failed_steps"]) if "failed_steps" in data else None

    numbers: dict[Any, dict[tuple[str, str], Any]] = {}
    samples: dict[Any, dict[str, Any]] = {}
    for (cell, rows), ran in zip(groups, ran_counts):
        key = cell if len(cols) > 1 else (cell[0] if isinstance(cell, tuple) else cell)
        at = rows[counted[rows]]  # the runs that ran
        why = Counter(reasons_all[rows[~counted[rows]]])
        launched = len(rows)
        plan_n = max(launched, wanted[_norm(cell if isinstance(cell, tuple) else (cell,))]) if wanted else launched
        reasons = [f"{n} {reason}" for reason, n in why.most_common()]
        if plan_n > launched:
            reasons.append(f"{plan_n - launched} not launched")
        succeeded = int(completed[at].sum())
        steps = steps_all[at] if steps_all is not None else np.array([])
        row: dict[tuple[str, str], Any] = {
            ("runs", "planned"): plan_n, ("runs", "ran"): ran, ("runs", "succeeded"): succeeded,
            ("runs", "failed"): ran - succeeded, ("runs", "excluded"): launched - ran,
            ("runs", "why"): ", ".join(reasons),
            ("runs", "failed_steps"): int((steps > 0).sum()) if (~np.isnan(steps)).any() else float("nan")}
        row.update(_rate("success", succeeded, ran, ks, ci))
        sample: dict[str, Any] = {"success": _Sample.of_rate(succeeded, ran)}
        for col in values:
            got = numeric[col][at]
            got = got[~np.isnan(got)]
            sample[col] = _Sample.of(got)
            if col in boolean:
                row.update(_rate(col, int(got.sum()), len(got), ks, ci))
                row[(col, "std")] = float("nan")
                row[(col, "n")] = len(got)
            else:
                mean, lo, hi = stats.t_interval(sample[col].mean, sample[col].std, len(got), ci)
                row.update({(col, "mean"): mean, (col, "std"): sample[col].std, (col, "n"): len(got),
                            (col, "lo"): lo, (col, "hi"): hi})
        numbers[key], samples[key] = row, sample
    keys = list(numbers)  # in the groups' order; a cell key may hold NaN (no model axis), so rows go by position
    index = pd.MultiIndex.from_tuples(keys) if len(cols) > 1 else pd.Index(keys)
    table = pd.DataFrame([numbers[k] for k in keys], index=index) if keys else pd.DataFrame()
    if table.empty:
        table = pd.DataFrame(columns=pd.MultiIndex.from_tuples([("runs", "planned"), ("runs", "ran")]))
    table.columns = pd.MultiIndex.from_tuples(table.columns)
    table.index.names = cols if len(cols) > 1 else [cols[0]]

    if baseline is not None:
        key = tuple(baseline) if isinstance(baseline, (list, tuple)) else (baseline,)
        if len(key) != len(cols):
            raise NbSubagentsError(f"baseline must name one cell: {len(cols)} value(s) for {', '.join(cols)}, "
                                   f"got {baseline!r}")
        found = [k for k in keys if _norm(k if len(cols) > 1 else (k,)) == _norm(key)]  # None and NaN alike
        if not found:
            cells = ", ".join(repr(i) for i in table.index)
            raise NbSubagentsError(f"baseline {baseline!r} is not a cell of this comparison; the cells are {cells}")
        base = samples[found[0]]
        for col in ["success", *values]:
            diffs = {}
            for cell, sample in samples.items():
                a, b = sample[col], base[col]
                if col == "success" or col in boolean:
                    d, lo, hi = stats.newcombe(int(a.total), a.n, int(b.total), b.n, ci)
                else:
                    d, lo, hi = stats.welch_of(a.mean, a.var, a.n, b.mean, b.var, b.n, ci)
                diffs[cell] = (d, lo, hi)
            for i, stat in enumerate(("Δ", "Δ lo", "Δ hi")):
                table[(col, stat)] = [diffs[c][i] for c in keys]
    order = ["runs", "success", *[c for c in values if c.startswith("scores.")],
             *[c for c in values if c.startswith("metrics.")]]
    table = table[sorted(table.columns, key=lambda c: order.index(c[0]))]
    return Comparison(table, by=cols, baseline=baseline, title=title, ci=ci, ks=ks, boolean=boolean)


def _rate(col: str, passed: int, n: int, ks: list[int], ci: float) -> dict[tuple[str, str], float]:
    lo, hi = stats.wilson(passed, n, ci)
    out = {(col, "rate"): passed / n if n else float("nan"), (col, "lo"): lo, (col, "hi"): hi}
    for k in ks:
        out[(col, f"pass@{k}")] = stats.pass_at_k(n, passed, k)
        out[(col, f"pass^{k}")] = stats.pass_hat_k(n, passed, k)
    return out


class _Sample(NamedTuple):
    """What a cell's numbers need of one value's sample: its size, its sum (a rate's passes), mean and variance."""
    n: int
    total: float
    mean: float
    var: float

    @property
    def std(self) -> float:
        return math.sqrt(self.var) if self.n > 1 else float("nan")

    @classmethod
    def of(cls, values: Any) -> _Sample:
        """``values``: a float array without NaN. The mean is ``math.fsum``'s (as ``statistics.fmean``)."""
        n = len(values)
        mean = math.fsum(values.tolist()) / n if n else float("nan")  # Python's floats: fsum takes them at once
        var = float(((values - mean) ** 2).sum() / (n - 1)) if n > 1 else float("nan")
        return cls(n, float(values.sum()), mean, var)

    @classmethod
    def of_rate(cls, passed: int, n: int) -> _Sample:
        return cls(n, float(passed), float("nan"), float("nan"))


def _floats(series: pandas.Series) -> Any:
    """A frame column as a float array: each value as ``float()`` gives it, NaN where a run has none. A value that
    is no number (text in a hand-edited ``scores.json``) counts as none, with a warning naming the first."""
    import numpy as np

    if isinstance(series.dtype, np.dtype) and series.dtype.kind in "biuf":  # numpy's numbers: NaN is their none
        return series.to_numpy(dtype=float)
    if series.dtype != object:
        try:
            return series.to_numpy(dtype=float, na_value=float("nan"))
        except (TypeError, ValueError):  # a column of texts
            pass
    numbers, odd = [], None
    for run_id, value in series.items():
        try:
            numbers.append(float("nan") if _missing(value) else float(value))
        except (TypeError, ValueError):
            numbers.append(float("nan"))
            odd = odd or (run_id, value)
    if odd is not None:
        warnings.warn(f"{series.name} of run {odd[0]} is {odd[1]!r}, not a number: compare() counts such a value "
                      "as missing (a score is a number or true/false)", RuntimeWarning, stacklevel=3)
    return np.array(numbers, dtype=float)


def _ks(k: int | Sequence[int] | None, ran: list[int]) -> list[int]:
    if k is None:
        return [min(ran)] if ran and min(ran) >= 2 else []
    chosen = [k] if isinstance(k, int) else list(k)
    if not chosen or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in chosen):
        raise NbSubagentsError(f"compare(k=...) is a whole number of at least 1 (or a list of them), got {k!r}")
    return sorted(set(chosen))


def _norm(key: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(None if _missing(v) else v for v in key)
