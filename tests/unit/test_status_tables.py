"""The ``%subagent_status`` and ``runs()`` tables in a notebook: each status with its glyph in its colour, run ids and
times that never wrap at their hyphens."""

from __future__ import annotations

import re

from nbsubagents import _style as style
from nbsubagents._registry import Status
from nbsubagents._templates import stylesheet

COUNTS = {"running": 1, "queued": 0, "completed": 1, "failed": 1, "aborted": 0, "total": 3}


def row(run_id: str, status: str) -> dict:
    return {"run_id": run_id, "name": "scout", "status": status, "model": "demo/scripted",
            "created_at": "2026-01-01T10:00:00Z", "task": "read README.md", "final_text": "done",
            "error_message": "boom" if status == "failed" else None, "duration": 3.0}


def test_each_status_row_has_its_glyph_and_colour_and_ids_do_not_wrap():
    table = Status(COUNTS, [row("20260101-100000-aaaaaa", "completed"), row("20260101-100001-bbbbbb", "failed"),
                            row("20260101-100002-cccccc", "running")], include_completed=True)._repr_html_()
    for status in ("completed", "failed", "running"):
        cell = re.search(rf'<td class="nbsubagents-c-{status} [^"]*nbsubagents-nowrap[^"]*" '
                         rf'style="color:{style.color(status)}">([^<]*)</td>', table)
        assert cell and cell.group(1) == f"{style.glyph(status)} {status}", status
    assert re.search(r"<td class='[^']*nbsubagents-nowrap'>20260101-100001-bbbbbb</td>", table)
    assert stylesheet("colours") in table  # dark themes get their colours
    assert table.count("<tr>") == 4


def test_the_runs_frame_keeps_run_ids_and_times_on_one_line():
    import pandas as pd

    from nbsubagents._views.tables import styled_html

    frame = pd.DataFrame({"run_id": ["20260101-100000-aaaaaa"], "status": ["completed"],
                          "started_at": [pd.Timestamp("2026-01-01T10:00:00Z")]})
    table = styled_html(frame)
    assert '<td class="nbsubagents-nowrap">20260101-100000-aaaaaa</td>' in table
    assert re.search(r'<td class="nbsubagents-nowrap">2026-01-01 \d\d:00:00</td>', table)
    indexed = styled_html(frame.set_index("run_id"))
    assert '<th class="nbsubagents-nowrap">20260101-100000-aaaaaa</th>' in indexed
