"""Reading a notebook's cells as the saved file holds them (nbformat nodes): the one cell a source starts with,
what it printed or returned as text, its HTML, its value. Shared by the notebook tests (nbclient, papermill) and the
browser test that saves notebooks from JupyterLab."""

from __future__ import annotations

import re

VIEW = "application/vnd.jupyter.widget-view+json"


def cell(nb, start: str):
    """The one code cell whose source starts with ``start``."""
    found = [c for c in nb.cells if c.cell_type == "code" and c.source.startswith(start)]
    assert len(found) == 1, f"{len(found)} cells start with {start!r}"
    return found[0]


NOTICE = re.compile(r"^(?:[✓✗■] background run |◷ run ).*\n", re.M)  # ends; questions waiting


def text(c) -> str:
    """Everything a cell printed or returned as plain text, without the watcher's completion notices (a
    notice printed in the cell that started its run, while that cell still runs, belongs to no other)."""
    parts = []
    for o in c.outputs:
        if o.output_type == "stream":
            parts.append(o.text)
        elif "data" in o and VIEW not in o.data and 'class="nbsubagents-static' not in o.data.get("text/html", ""):
            parts.append(o.data.get("text/plain", ""))  # panels (a widget, a static record) left out
        elif o.output_type == "execute_result":
            parts.append(o.data.get("text/plain", ""))
    return NOTICE.sub("", "".join(parts))


def html(c) -> str:
    return "".join(o.data.get("text/html", "") for o in c.outputs if "data" in o)


def value(c, mime: str = "text/plain") -> str:
    """One MIME type of the cell's value (its execute_result)."""
    (result,) = [o for o in c.outputs if o.output_type == "execute_result"]
    return result.data.get(mime, "")
