"""Sphinx configuration: MyST pages, notebook pages executed at build time on the scripted model, and an API
reference from the docstrings. ``make docs`` builds it with warnings as errors."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# This checkout's nbsubagents, for autodoc here and for the kernels that execute the notebook pages (they inherit
# the environment), whatever else is installed.
sys.path.insert(0, str(ROOT))
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
# The pages' temporary projects and their scripted model server live in one folder of this build, removed at its
# end (with the server stopped), so a build leaves no process and no folder behind.
BUILD_TMP = Path(tempfile.mkdtemp(prefix="nbsubagents-docs-"))
os.environ["TMPDIR"] = str(BUILD_TMP)
os.environ["NBSUBAGENTS_SCRIPTED_DIR"] = str(BUILD_TMP)
for name in ("NBSUBAGENTS_DISPLAY", "NBSUBAGENTS_ROOT", "NBSUBAGENTS_PI"):  # the pages show what a notebook shows
    os.environ.pop(name, None)

import nbsubagents  # noqa: E402
from nbsubagents import _templates, demo  # noqa: E402

project = "nbsubagents"
author = "nbsubagents developers"
copyright = "2026, nbsubagents developers"
version = release = nbsubagents.__version__

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
]
exclude_patterns = ["_build", "**.ipynb_checkpoints"]
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

# Notebook pages run on every build, against the scripted model; a failing cell fails the build.
nb_execution_mode = "force"
nb_execution_timeout = 300
nb_execution_raise_on_error = True
nb_execution_show_tb = True
# A panel's output carries its static HTML record next to the widget view: show the record, so a page shows the
# rendered panel without any widget state or JavaScript.
nb_mime_priority_overrides = [
    (builder, "text/html", 0) for builder in ("html", "dirhtml", "singlehtml")
] + [(builder, "application/vnd.jupyter.widget-view+json", None) for builder in ("html", "dirhtml", "singlehtml")]

autodoc_default_options = {"members": True, "undoc-members": False}
autodoc_typehints = "description"
autodoc_member_order = "bysource"
napoleon_google_docstring = True
napoleon_numpy_docstring = True  # run(), start(): numpy-style Parameters sections

html_theme = "pydata_sphinx_theme"
html_title = "nbsubagents"
html_theme_options = {"navigation_with_keys": False, "show_toc_level": 2}

# The records and tables on the pages paint their own background and colours, dark under the reader's dark scheme;
# the theme's toggle can make a page dark (or light) whatever that scheme: this stylesheet, from the palette, switches
# them with the toggle, and drops the light box the theme's dark mode puts under an HTML output (made for outputs
# that assume a white page) where the output is one of ours.
STATIC = BUILD_TMP / "_static"
STATIC.mkdir()
(STATIC / "nbsubagents-docs.css").write_text(
    _templates.site_theme_rules('html[data-theme="dark"]', 'html[data-theme="light"]')
    + 'html[data-theme="dark"] .bd-content div.cell_output .text_html:has([class*="nbsubagents-"],.nbsub-cmp)'
    "{background:none !important;padding:0 !important}")
html_static_path = [str(STATIC)]
html_css_files = ["nbsubagents-docs.css"]


def _public_names(app, docname: str, source: list[str]) -> None:
    """The API page's autosummary and autodoc entries, one per name of ``nbsubagents.__all__``."""
    if docname != "api":
        return
    names = list(nbsubagents.__all__)
    # names only: each signature is in its entry below, and a column of signatures made the table wider than the page
    lines = [".. autosummary::", "   :nosignatures:", "", *(f"   {name}" for name in names), ""]
    for name in names:
        value = getattr(nbsubagents, name)
        kind = ("exception" if isinstance(value, type) and issubclass(value, BaseException)
                else "class" if isinstance(value, type) else "function")
        lines.append(f".. auto{kind}:: {name}")
    source[0] = source[0].replace("PUBLIC-NAMES", "\n".join(lines))


def _clean_up(app, exception) -> None:
    demo.stop_scripted_model()
    shutil.rmtree(BUILD_TMP, ignore_errors=True)


def setup(app):
    app.connect("source-read", _public_names)
    app.connect("build-finished", _clean_up)
