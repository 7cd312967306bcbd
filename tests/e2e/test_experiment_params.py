"""The parameterised experiment notebook run by papermill with other parameters, on the scripted model."""

from __future__ import annotations

import nbformat
import pytest

from notebook_cells import html
from test_notebooks import NOTEBOOKS, kernel_env  # noqa: F401  (kernel_env is a fixture)

pytestmark = [pytest.mark.notebook, pytest.mark.slow]


def test_papermill_runs_the_experiment_notebook_with_other_parameters_keeping_its_table_and_report(kernel_env):  # noqa: F811
    import papermill

    out = kernel_env / "mini.ipynb"
    papermill.execute_notebook(str(NOTEBOOKS / "experiment-params.ipynb"), str(out), kernel_name="python3",
                               parameters={"name": "mini-only", "presets": ["scout"], "models": ["demo/mini"],
                                           "repeats": 1},
                               cwd=str(kernel_env), progress_bar=False)
    nb = nbformat.read(out, as_version=4)
    (injected,) = [c for c in nb.cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert 'name = "mini-only"' in injected.source
    table = html(next(c for c in nb.cells if c.source.startswith("exp.compare(")))
    names = table.replace("<wbr>", "")  # a model name may wrap after its slash
    assert "demo/mini" in names and "demo/scripted" not in names and "<th>answer_words</th>" in table
    shown = html(next(c for c in nb.cells if c.source.startswith("exp.report(")))
    assert "Report of experiment mini-only" in shown and "<th>answer_words</th>" in shown
    (report,) = kernel_env.glob("nbsubagents-params-*/project/.pi/subagents/reports/experiment-mini-only.html")
    page = report.read_text()
    assert "demo/mini (2 runs)" in page and page.count("<details><summary>Transcript") == 2
