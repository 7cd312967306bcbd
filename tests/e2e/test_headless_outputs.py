"""Issue 55 items 7 and 8 in a headless notebook: the parameterised experiment notebook run by papermill with
``NBSUBAGENTS_DISPLAY=text`` and saved in another folder than its kernel's, on the scripted model. The sweep's
progress is on stderr (stdout holds what the code prints) and the report the saved notebook shows travels with
it: embedded, with no link to a file that is not beside the notebook."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

from notebook_cells import html
from test_notebooks import NOTEBOOKS, kernel_env  # noqa: F401  (kernel_env is a fixture)

pytestmark = [pytest.mark.notebook, pytest.mark.slow]


def streams(cell, name: str) -> str:
    return "".join(o.text for o in cell.outputs if o.output_type == "stream" and o.name == name)


def test_a_papermill_sweeps_progress_is_on_stderr_and_its_saved_report_needs_no_file_elsewhere(
        kernel_env, monkeypatch):  # noqa: F811
    import papermill

    monkeypatch.setenv("NBSUBAGENTS_DISPLAY", "text")
    out = kernel_env / "elsewhere" / "mini.ipynb"  # saved away from the folder the kernel works in
    out.parent.mkdir()
    papermill.execute_notebook(str(NOTEBOOKS / "experiment-params.ipynb"), str(out), kernel_name="python3",
                               parameters={"name": "mini-only", "presets": ["scout"], "models": ["demo/mini"],
                                           "repeats": 1},
                               cwd=str(kernel_env), progress_bar=False)
    nb = nbformat.read(out, as_version=4)

    sweep = next(c for c in nb.cells if "nbsubagents.experiment(" in c.source)
    assert "▶ Experiment mini-only: 2 runs, at most 4 at once" in streams(sweep, "stderr")
    assert "Experiment mini-only · 2/2 · 2 done" in streams(sweep, "stderr")
    assert "Experiment mini-only" not in streams(sweep, "stdout")

    shown = html(next(c for c in nb.cells if c.source.startswith("exp.report(")))
    for href in re.findall(r'href="([^"]*)"', shown):  # a link must lead somewhere from the saved notebook
        assert href.startswith(("http:", "https:", "#")) or (out.parent / href).is_file(), href
    assert "Report of experiment mini-only" in shown and "The whole report, embedded in this notebook" in shown
    assert "demo/mini (2 runs)" in shown and shown.count("<details><summary>Transcript") == 2  # the report itself
    (report,) = kernel_env.glob("nbsubagents-params-*/project/.pi/subagents/reports/experiment-mini-only.html")
    assert Path(report).is_file()
