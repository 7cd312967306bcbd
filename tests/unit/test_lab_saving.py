"""Issue 56, item 7: a notebook saved from JupyterLab keeps nbsubagents' records, never a widget view that a reopened
notebook would show as "Error displaying widget: model not found"."""

from __future__ import annotations

import copy

from nbsubagents.lab.saving import VIEW_MIME, records_not_views

VIEW = {"version_major": 2, "version_minor": 0, "model_id": "abc"}


def notebook(*outputs: dict) -> dict:
    return {"type": "notebook", "content": {"cells": [
        {"cell_type": "markdown", "source": "x"},
        {"cell_type": "code", "source": "nbsubagents.browse()", "outputs": list(outputs)}]}}


def test_the_save_keeps_the_record_of_an_open_view_and_drops_the_view():
    browse = {"output_type": "display_data", "metadata": {}, "data": {
        "text/plain": "browse: 3 runs", "text/html": ['<div class="nbsubagents-browse-static">', "...</div>"],
        VIEW_MIME: VIEW}}
    panel = {"output_type": "display_data", "metadata": {}, "data": {
        "text/plain": "↻ scout running", "text/html": '<div class="nbsubagents-static nbsubagents-panel">…</div>',
        VIEW_MIME: VIEW}}
    other = {"output_type": "display_data", "metadata": {}, "data": {"text/plain": "IntSlider()", VIEW_MIME: VIEW}}
    model = notebook(browse, panel, other)
    records_not_views(model=model, path="x.ipynb", contents_manager=None)
    outputs = model["content"]["cells"][1]["outputs"]
    assert [sorted(o["data"]) for o in outputs] == [["text/html", "text/plain"], ["text/html", "text/plain"],
                                                    [VIEW_MIME, "text/plain"]]  # another library's widget: its own


def test_other_files_and_outputs_without_views_are_left_as_they_are():
    text = {"output_type": "stream", "name": "stdout", "text": "hi"}
    model = notebook(text)
    before = copy.deepcopy(model)
    records_not_views(model=model, path="x.ipynb")
    assert model == before
    plain = {"type": "file", "content": "x"}
    records_not_views(model=plain, path="x.txt")
    assert plain == {"type": "file", "content": "x"}
