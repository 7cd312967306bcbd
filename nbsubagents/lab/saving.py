"""What a notebook saved from JupyterLab keeps of nbsubagents' outputs: their static records, never a widget view.

Every widget view nbsubagents shows (a run's panel, a group of runs, a sweep, ``browse()``) is an output that carries
its static record beside the view (``_ui.kernel.NotebookRecord``), and the view gives way to the record when it ends
or its kernel shuts down cleanly. A notebook saved while a view was still open (``browse()`` left open, a run still
going, a kernel killed) would keep the view: reopened without its widget's model, JupyterLab shows "Error displaying
widget: model not found" and never the record beside it. So the server's pre-save hook (``records_not_views``) drops
the view of every such output from what is written; the page that saves keeps its live views, and the record the
file keeps is brought up to date by the labextension once its runs ended.
"""

from __future__ import annotations

from typing import Any

__all__ = ["VIEW_MIME", "records_not_views"]

VIEW_MIME = "application/vnd.jupyter.widget-view+json"


def _is_record(html: Any) -> bool:
    text = "".join(html) if isinstance(html, list) else html
    return isinstance(text, str) and 'class="nbsubagents-' in text


def records_not_views(model: dict[str, Any], **_kwargs: Any) -> None:
    """A Jupyter Server pre-save hook: the notebook in ``model`` loses the widget view of each output that carries
    an nbsubagents record (other widgets' views are left alone)."""
    content = model.get("content") if model.get("type") == "notebook" else None
    for cell in (content or {}).get("cells") or ():
        for output in cell.get("outputs") or ():
            data = output.get("data")
            if isinstance(data, dict) and VIEW_MIME in data and _is_record(data.get("text/html")):
                del data[VIEW_MIME]
