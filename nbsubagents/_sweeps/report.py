"""An experiment's report: one file to send, HTML (self-contained) or Markdown (GitHub renders it).

``report(exp, path=None, format="html")`` writes the sweep's failures grouped by reason (as its record leads with
them: ``progress``, ``digest``), the sweep's definition, the comparison table (whatever columns
``exp.compare()`` gives: a cell per harness too when the sweep names harnesses), the cost/score plot (HTML only,
an inline PNG, when matplotlib is installed), the list of runs (the ones that did not complete first, the completed
ones folded), every run's summary with its transcript folded, and the versions of nbsubagents and pi with the
harnesses and models used. Secrets are
masked; the escaping, the per-run sections and the atomic write are the runs report's (``views.reports``). It
returns an :class:`ExperimentReport`, whose notebook display (the counts, the table and the report itself) stays
in a saved notebook without a kernel.

What a saved notebook carries must hold wherever it goes: an HTML report up to ``EMBED_LIMIT`` characters is
embedded in the display (folded), since a papermill or nbconvert kernel cannot know where its notebook will be
saved (a link relative to its folder points nowhere from another) and JupyterLab drops ``file:`` and ``data:``
links from a notebook it does not trust (one made elsewhere). The link to the file is written only where the
notebook's own path is known (a Jupyter server's kernel: ``JPY_SESSION_NAME``), relative to the notebook's folder.
"""

from __future__ import annotations

import base64
import io
import os
import platform
import re
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._child import VERSION
from .._child.harnesses import name_of
from .._child.text import strip_controls
from .._config import NbSubagentsError
from .._lifecycle.handle import Run
from .._pi.locate import find_pi, pi_package
from .._templates import Html, part
from .._views import reports
from .._views.masking import MaskedRun, masker
from .digest import GROUP_CELLS, REASON_CAP, group_text
from .outcomes import excluded_reason
from .progress import GROUP_RUNS, SweepState

if TYPE_CHECKING:
    from .experiment import Experiment

__all__ = ["ExperimentReport", "report"]

_PLOT = "<!--nbsubagents:plot-->"  # the plot goes here once the text is masked (so masking never sees its bytes)
EMBED_LIMIT = 2_000_000  # characters of an HTML report a notebook's display carries in itself


class ExperimentReport:
    """A written report: ``path``, ``format``; shown in a notebook as the counts and the table, with the report
    embedded (``embedded``: its page's stylesheet and body, None when too large or Markdown) and a link to its file
    where the notebook's folder is known."""

    def __init__(self, path: Path, format: str, name: str, summary: str, table_html: str,
                 embedded: str | None = None) -> None:
        self.path, self.format, self.name, self.summary, self._table = path, format, name, summary, table_html
        self.embedded = embedded

    def __fspath__(self) -> str:
        return str(self.path)

    def __repr__(self) -> str:
        return f"<ExperimentReport {self.name}: {self.path} ({self.summary})>"

    def _repr_html_(self) -> str:
        return part("bits.html", "report", name=self.name, href=notebook_href(self.path), path=str(self.path),
                    summary=self.summary, table=Html(self._table), embedded=Html(self.embedded or ""))


def notebook_href(path: Path) -> str | None:
    """``path`` relative to the folder of the notebook this kernel serves (a Jupyter server names it in
    ``JPY_SESSION_NAME``; the kernel starts in that folder), None where that is not known (papermill, nbconvert,
    a script): a saved notebook's link must lead to the file from where the notebook is."""
    notebook = os.environ.get("JPY_SESSION_NAME")
    if not notebook:
        return None
    folder = Path(notebook).parent if os.path.isabs(notebook) else Path.cwd()
    try:
        return Path(os.path.relpath(path, folder)).as_posix()
    except ValueError:  # another drive
        return None


def embedded_page(page: str) -> str | None:
    """An HTML report's stylesheet and body, to embed in a notebook's display (in the notebook page's colours, not
    the file's light page); None beyond ``EMBED_LIMIT``."""
    if len(page) > EMBED_LIMIT:
        return None
    styles = "".join(re.findall(r"<style\b.*?</style>", page[: page.find("<body")], re.S))
    body = re.search(r"<body\b[^>]*>(.*)</body>", page, re.S)
    return None if body is None else f'{styles}<div class="nbsubagents-report">{body.group(1)}</div>'


# -- what the report says ---------------------------------------------------------------------------------
def _definition(exp: Experiment) -> list[tuple[str, str]]:
    """The sweep as (label, text): its tasks, harnesses, presets, models, repeats, scorers, concurrency."""
    plan = exp.plan
    cells = plan.get("cells") or []
    tasks = {c["params"].get("task_id"): c["spec"].get("task") for c in cells}

    def axis(key: str) -> str:
        return ", ".join(dict.fromkeys(str(c["params"].get(key) or "default") for c in cells)) or "—"

    scorers = [s.get("name") or s.get("check") or s.get("python") for s in plan.get("scorers") or []]
    named = any("harness" in c["params"] for c in cells)
    harnesses = axis("harness") if named else "each preset's own (pi unless its preset names another)"
    return [("Tasks", "; ".join(f"{k}: {v}" for k, v in tasks.items()) or "—"), ("Harnesses", harnesses),
            ("Presets", axis("preset")),
            ("Models", axis("model")), ("Repeats", str(max((c["params"].get("repeat") or 1 for c in cells),
                                                           default=0))),
            ("Scorers", ", ".join(str(s) for s in scorers) or "none"), ("Runs planned", str(len(cells))),
            ("Concurrency", str(plan.get("concurrency") or "—")), ("Created", str(plan.get("createdAt") or "—"))]


def _versions(rows: list[dict[str, Any]]) -> list[tuple[str, str]]:
    try:
        package = pi_package(find_pi())
        pi = f"{package.name}@{package.version}" if package else "unknown version"
    except NbSubagentsError:
        pi = "not found"
    models = Counter(str(r.get("model") or r.get("requested_model") or "default") for r in rows)
    harnesses = Counter(name_of(r) for r in rows)
    return [("nbsubagents", VERSION), ("pi", pi), ("Python", platform.python_version()),
            ("Harnesses used", _counted(harnesses)), ("Models used", _counted(models))]


def _counted(counts: Counter[str]) -> str:
    return ", ".join(f"{name} ({n} run{'' if n == 1 else 's'})" for name, n in sorted(counts.items()))


def _summary(rows: list[dict[str, Any]], planned: int) -> str:
    statuses = Counter(str(r.get("status")) for r in rows)
    excluded = sum(1 for r in rows if excluded_reason(r))
    parts = [f"{planned} planned"] + [f"{n} {s}" for s, n in sorted(statuses.items())]
    if excluded:
        parts.append(f"{excluded} excluded from scores (infrastructure)")
    return " · ".join(parts)


def _comparison(exp: Experiment) -> Any:
    try:
        return exp.compare() if exp.current_rows() else None
    except NbSubagentsError:
        return None


def _plot_png(exp: Experiment) -> str | None:
    """The cost/score plot as base64 PNG, or None without matplotlib or without data to plot. It is drawn in the
    light theme, the report page's own (whatever JupyterLab's theme), on its opaque background."""
    try:
        figure = exp.plot(theme="light")
    except (ImportError, NbSubagentsError, KeyError, ValueError):
        return None
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _label(value: Any) -> str:
    """A column or index name: a tuple's parts joined ("metrics.tokens mean"), None as nothing."""
    parts = value if isinstance(value, tuple) else (value,)
    return " ".join(str(v) for v in parts if v is not None and str(v))


def _number(value: Any) -> str:
    if isinstance(value, float):
        return "–" if value != value else f"{value:.4g}"
    return "–" if value is None else str(value)


def _table_md(comparison: Any) -> list[str]:
    """Any comparison table as a Markdown table: its index columns, then each column, cells escaped (a comparison
    without a ``table`` DataFrame: its text, as it is)."""
    if hasattr(comparison, "display_rows"):  # a sweep's comparison: the columns its display shows
        head, rows = comparison.display_rows()
        return ["| " + " | ".join(reports.md_cell(h) for h in head) + " |", "|" + "---|" * len(head),
                *("| " + " | ".join(reports.md_cell(v) for v in row) + " |" for row in rows)]
    table = getattr(comparison, "table", None)
    if not hasattr(table, "iterrows"):
        return [reports.block(repr(comparison))]
    names = [_label(n) for n in (table.index.names or [])] or [""]
    head = names + [_label(c) for c in table.columns]
    out = ["| " + " | ".join(reports.md_cell(h) for h in head) + " |", "|" + "---|" * len(head)]
    for index, row in table.iterrows():
        keys = list(index) if isinstance(index, tuple) else [index]
        out.append("| " + " | ".join(reports.md_cell(v) for v in [*map(str, keys), *map(_number, row.tolist())]) + " |")
    return out


def _ended(exp: Experiment, runs: list[Any]) -> SweepState:
    """The runs as a sweep's record sees them once they ended (``progress.SweepState``)."""
    state = SweepState(runs, title=f"Experiment {exp.name}")
    for run in runs:
        if run.status in ("completed", "failed", "aborted"):
            state.end(run)
    return state


def _document_html(exp: Experiment, runs: list[Any], comparison: Any, summary: str,
                   rows: list[dict[str, Any]]) -> str:
    groups, listed = reports.call_groups(runs), {r.run_id for r in runs}
    failures = part("sweep.html", "groups", groups=_ended(exp, runs).failure_groups(), cap=REASON_CAP,
                    named=GROUP_CELLS, per=GROUP_RUNS, fold=True)
    return reports.page(f"Experiment {exp.name}", part(
        "report.html", "experiment", name=exp.name, summary=summary, failures=Html(failures),
        definition=_definition(exp), comparison=Html(comparison.html(sheet=False)) if comparison is not None else "",
        plot=Html(_PLOT), versions=_versions(rows), runs=[r for r in runs if r.status != "completed"],
        completed=[r for r in runs if r.status == "completed"],
        sections=Html("".join(reports.run_html(r, groups, listed, folded=True) for r in runs))))


def _document_md(exp: Experiment, runs: list[Any], comparison: Any, summary: str,
                 rows: list[dict[str, Any]]) -> str:
    out = [f"# Experiment {reports.md_line(exp.name)}", "", f"{reports.md_line(summary)} · secrets masked", ""]
    failed = _ended(exp, runs).failure_groups()
    if failed:
        out += ["## Failures by reason", "", *(f"- {reports.md_line(group_text(g))}" for g in failed[:REASON_CAP]), ""]
    out += ["## The sweep", ""]
    out += [f"- **{k}:** {reports.md_line(v)}" for k, v in _definition(exp)]
    out += ["", "## Comparison", ""]
    out += _table_md(comparison) if comparison is not None else ["no ended run to compare"]
    out += ["", "## Versions", ""] + [f"- **{k}:** {reports.md_line(v)}" for k, v in _versions(rows)]
    out += ["", "## Runs"]
    groups, listed = reports.call_groups(runs), {r.run_id for r in runs}
    for run in runs:
        out += reports.run_md(run, groups, listed)
    return "\n".join(out) + "\n"


def report(exp: Experiment, path: str | Path | None = None, *, format: str = "html") -> ExperimentReport:
    """Write the experiment's report and return it (``.path``). ``path``: default
    ``<project>/.pi/subagents/reports/experiment-<name>.<format>`` (rewritten each time); ``format``: ``"html"``
    (one self-contained file: inline CSS and plot, no script, loads nothing) or ``"md"`` (Markdown, no plot)."""
    format = {"markdown": "md", "htm": "html"}.get(format, format)
    if format not in reports.FORMATS:
        raise NbSubagentsError(f'report format must be "html" or "md", got {format!r}')
    rows = exp.current_rows()
    masks = masker()
    runs = [MaskedRun(Run(r["run_dir"]), masks) for r in rows]
    comparison = _comparison(exp)
    summary = _summary(rows, len(exp.plan.get("cells") or []))
    write = _document_md if format == "md" else _document_html
    text = strip_controls(masks.text(write(exp, runs, comparison, summary, rows)))
    if format == "html":
        png = _plot_png(exp)
        text = text.replace(_PLOT, f'<h2>Cost and scores</h2><img alt="one point per run" '
                                   f'src="data:image/png;base64,{png}">' if png else "")
    target = (Path(path).expanduser() if path is not None
              else exp.root / ".pi" / "subagents" / "reports" / f"experiment-{exp.name}.{format}")
    reports.write_atomic(target, text)
    table = comparison.html(sheet=False) if comparison is not None else ""
    return ExperimentReport(target, format, exp.name, summary, strip_controls(masks.text(table)),
                            embedded_page(text) if format == "html" else None)

