"""The example notebooks, executed headless (nbclient, widget state kept) against the scripted model.

Each test runs one notebook from ``notebooks/`` in a temp folder with a real kernel of this Python and
asserts on what it showed: run statuses, the humanized lines inside the saved panels, status tables,
DataFrames. The notebooks in the repository carry no outputs. The exploring-runs notebook's HTML export is also
opened in Chromium with no kernel and no network (``exported_panels_read``: every run's panel there, visible and
readable; the screenshot goes to test-artifacts/ for a look).
"""

from __future__ import annotations

import base64
import html as html_lib
import json
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from helpers import processes_inside
from jupyterlab_harness import ARTIFACTS, launch_chromium, open_offline
from notebook_cells import NOTICE, VIEW, cell, html, text, value
from nbsubagents.demo import widget_text

pytestmark = [pytest.mark.notebook, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = REPO / "notebooks"
NAMES = ["quickstart.ipynb", "background-runs.ipynb", "exploring-runs.ipynb", "conversation.ipynb", "data.ipynb",
         "delegation.ipynb"]


@pytest.fixture
def kernel_env(tmp_path, monkeypatch):
    """The kernel inherits this: temp folders the notebook makes land in tmp_path; no forced display."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    for name in ("NBSUBAGENTS_DISPLAY", "NBSUBAGENTS_ROOT", "PI_CODING_AGENT_DIR", "NBSUBAGENTS_PI"):
        monkeypatch.delenv(name, raising=False)
    yield tmp_path
    assert processes_inside(tmp_path) == [], "the notebook left processes behind"


def execute(name: str, workdir: Path) -> nbformat.NotebookNode:
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    client = NotebookClient(nb, kernel_name="python3", timeout=300, startup_timeout=120, store_widget_state=True,
                            resources={"metadata": {"path": str(workdir)}})
    try:
        client.execute()
    finally:
        nbformat.write(nb, workdir / name)  # kept for a look when a test fails
    return ran_clean(nb)


def ran_clean(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """``nb`` once every code cell of it ran, none with an error or output on stderr."""
    errors = [(c.source, o) for c in nb.cells if c.cell_type == "code" for o in c.outputs
              if o.output_type == "error" or (o.output_type == "stream" and o.name == "stderr")]
    assert errors == []
    assert all(c.execution_count for c in nb.cells if c.cell_type == "code")
    return nb


def raw(c) -> str:
    """What a cell printed, completion notices included."""
    return "".join(o.text for o in c.outputs if o.output_type == "stream")


def drawn(c) -> list[str]:
    """The output types of what a cell drew (displays and its value; printed text left out)."""
    return [o.output_type for o in c.outputs if o.output_type != "stream"]


def statuses(table: str) -> list[str]:
    """The status cells of a styled runs table (``runs()``'s HTML), top to bottom."""
    return re.findall(r'<td class="nbsubagents-c-\w+ nbsubagents-status-(\w+)[ "]', table)


def column(table: str, n: int) -> list[str]:
    """The ``n``-th column (0-based) of every body row of a styled runs table."""
    body = table.split("<tbody>", 1)[1]
    return [re.findall(r"<td[^>]*>(.*?)</td>", row)[n] for row in re.findall(r"<tr>(.*?)</tr>", body)]


def bars(c) -> list[dict]:
    """The data of every status bar a cell shows (a record its display id keeps current)."""
    return [o.data for o in c.outputs if "data" in o and 'class="nbsubagents-statusbar"' in o.data.get("text/html", "")]


def panels(nb, c) -> list[str]:
    """The text of every panel a cell displayed, as the saved notebook holds it: a run or group panel's
    static record (which replaced its widget at the end), a status bar's widget as its model last was.

    A background run's panel is updated from the watcher's thread; nbclient records only the messages
    of the cell executing at that moment (ipykernel sends a thread's updates with it), and ``Run.wait()``
    returns only once the panel shows the end, so a notebook that waits for its runs saves their end.
    """
    found = []
    for o in c.outputs:
        if "data" not in o:
            continue
        if VIEW in o.data:
            found.append(widget_text(nb, o.data[VIEW]["model_id"]))
        elif 'class="nbsubagents-static' in o.data.get("text/html", ""):
            found.append(o.data["text/plain"])
    return found


# -- exported without a kernel -------------------------------------------------------------------------
def export(workdir: Path, name: str) -> dict[str, str]:
    """The executed notebook rendered by ``jupyter nbconvert --to markdown`` and ``--to html``."""
    out = {}
    for kind, suffix in (("markdown", ".md"), ("html", ".html")):
        proc = subprocess.run([sys.executable, "-m", "nbconvert", "--to", kind, str(workdir / name),
                               "--output-dir", str(workdir / "export")], capture_output=True, text=True,
                              timeout=120, stdin=subprocess.DEVNULL)
        assert proc.returncode == 0, proc.stderr[-2000:]
        out[kind] = (workdir / "export" / (Path(name).stem + suffix)).read_text(encoding="utf-8")
    return out


def record_of(page: str, run_id: str) -> str:
    """The last static record of one run in an exported page (from its opening tag to its run id line)."""
    start = page.rindex("<div", 0, page.rindex(f'data-run-id="{run_id}"'))
    end = page.find(f">{run_id}</div>", start)
    assert end != -1, f"the last record of {run_id} is not its final one (an 'as of' record?):\n{page[start:start + 3000]}"
    return page[start:end]


def check_exports(workdir: Path, name: str) -> dict[str, str]:
    """Every run of the notebook reads in both exports as it ended: status, numbers, final text, error; no
    widget repr is left and no panel says it is still going. A delegated run (issue 58) reads as its line in its
    parent's record."""
    pages = export(workdir, name)
    results = [json.loads(p.read_text()) for p in workdir.glob("**/.pi/subagents/runs/*/result.json")]
    assert results
    parents = {p.parent.name: json.loads(p.read_text()).get("parent")
               for p in workdir.glob("**/.pi/subagents/runs/*/meta.json")}
    for kind, page in pages.items():
        assert "VBox(children=" not in page and "HTML(value=" not in page, kind
        for result in results:
            if parents.get(result["runId"]):
                assert f'data-run-id="{result["runId"]}" data-status="{result["status"]}"' in page, (kind, result)
                continue
            record = record_of(page, result["runId"])
            status = result["status"]
            assert f'nbsubagents-status-{status}"' in record and f">{status}</span>" in record, (kind, record)
            usage = result.get("usage") or {}
            if usage.get("totalTokens"):
                assert f"{usage['totalTokens']:,} tokens" in record and f"${usage['cost']:.4f}" in record
            assert f"{result['toolCalls']} tool call" in record
            for line in (result.get("finalText") or "").splitlines()[:3]:
                assert html_lib.escape(line.strip(), quote=False) in record, (kind, line)
            if result.get("errorMessage"):
                assert html_lib.escape(result["errorMessage"].splitlines()[0], quote=False)[:60] in page
        assert "running</span>" not in page and "queued</span>" not in page, kind
    return pages


RED = "rgb(185, 28, 28)"  # style.color("failed") in the light theme
GREEN = "rgb(22, 101, 52)"  # style.color("completed") in the light theme


def exported_panels_read(page_file: Path) -> None:
    """The exploring-runs notebook's HTML export in Chromium, no kernel, no network: each final panel is there and
    readable (status colour, numbers, lines, final text, red error)."""
    from playwright.sync_api import expect, sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = launch_chromium(p)
        try:
            page, blocked, errors = open_offline(browser, page_file)

            panels = page.locator(".nbsubagents-static")
            expect(panels.first).to_be_visible()
            names = [panels.nth(i).locator(".nbsubagents-name").inner_text() for i in range(panels.count())]
            assert sorted(set(names)) == ["broken", "notes", "survey", "with-file"], names

            broken = panels.filter(has=page.locator(".nbsubagents-name", has_text="broken")).first
            broken.scroll_into_view_if_needed()
            expect(broken.locator(".nbsubagents-header")).to_contain_text("✗ broken failed")
            assert broken.locator(".nbsubagents-status").evaluate("e => getComputedStyle(e).backgroundColor") == RED
            expect(broken).to_contain_text("500 the provider is down")

            notes = panels.filter(has=page.locator(".nbsubagents-name", has_text="notes")).last
            header = notes.locator(".nbsubagents-header")
            expect(header).to_contain_text("✓ notes completed")
            assert re.search(r"demo/scripted · \d+ tool calls · [\d,]+ tokens · \$\d\.\d{4} · ctx [\d.]+% · [\d.]+s", header.inner_text())
            assert notes.locator(".nbsubagents-status").evaluate("e => getComputedStyle(e).backgroundColor") == GREEN
            expect(notes.locator(".nbsubagents-window")).to_contain_text("Writing NOTES.md (+1 line)")
            output = notes.locator(".nbsubagents-output")
            expect(output).to_be_visible()
            assert output.bounding_box()["height"] > 15
            size = float(header.evaluate("e => getComputedStyle(e).fontSize").removesuffix("px"))
            assert size >= 12
            # each line once: in the window, or behind the plain <details> of earlier lines (no script needed)
            for toggle in notes.locator("summary").all():
                toggle.click()
            assert notes.inner_text().count("Finished editing NOTES.md") == 1
            notes.scroll_into_view_if_needed()
            page.screenshot(path=str(ARTIFACTS / "exported-exploring-runs.png"))
            assert errors == [] or all("require" in e or "define" in e for e in errors), errors
        finally:
            browser.close()


# -- the notebooks as saved ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_saved_notebooks_have_no_outputs_and_start_with_the_offline_set_up(name):
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.outputs == [] and c.execution_count is None for c in code)
    assert "widgets" not in nb.metadata
    first = code[0].source
    for needed in ("copy_example_project(", "tempfile.mkdtemp(", "os.chdir(project)", "use_scripted_model()",
                   "%load_ext nbsubagents"):
        assert needed in first
    assert nb.metadata.kernelspec.name == "python3"
    assert sum(c.cell_type == "markdown" for c in nb.cells) >= len(code) // 2, "each step needs its prose"


# -- executed -----------------------------------------------------------------------------------------
def test_make_demo_runs_the_quickstart_presets_one_parallel_and_background_runs_and_shows_the_registry(kernel_env):
    """The README's main job, ``python -m nbsubagents.demo --notebook`` (what ``make demo`` runs): what it prints,
    then the notebook it executed, cell by cell, and its exports."""
    proc = subprocess.run([sys.executable, "-m", "nbsubagents.demo", "--notebook", str(NOTEBOOKS / "quickstart.ipynb")],
                          cwd=kernel_env, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    for line in ("✓ scout completed", "Reading README.md", "Sub-agents: 3 done", "Writing NOTES.md (+2 lines)",
                 "1 running · 5 completed", "runs: 0 running / 6 total",  # the bar's last reading
                 "0 running · 6 completed · 0 failed · 0 aborted · 6 total"):
        assert line in out, line
    executed = kernel_env / ".demo" / "quickstart.ipynb"
    assert f"Executed notebook: {executed}" in out
    nb = ran_clean(nbformat.read(executed, as_version=4))
    assert nb.metadata.widgets["application/vnd.jupyter.widget-state+json"]["state"]
    assert list((kernel_env / ".demo").glob("nbsubagents-quickstart-*/project/.pi/subagents/runs/*/result.json"))
    check_exports(kernel_env / ".demo", "quickstart.ipynb")

    assert re.search(r"Working in .*/nbsubagents-quickstart-\w+/project", text(cell(nb, "import os")))
    presets = text(cell(nb, "%subagent_presets"))
    assert re.search(r"scout\s+project\s+demo/scripted\s+read, ls, bash", presets)
    assert re.search(r"scribe\s+project\s+demo/scripted", presets)

    one = cell(nb, "%%subagent scout -o first")
    assert drawn(one) == ["display_data"]  # its live panel, once: the Run is the value without a second panel
    live = panels(nb, one)[0]
    for line in ("✓ scout completed", "Reading README.md", "Finished reading README.md", "Listing src",
                 'python3 -c "print(6 * 7)"', "Command finished — 42", '- run: python3 -c "print(6 * 7)": 42'):
        assert line in live, live
    assert "status: completed" in text(cell(nb, 'print("status:", first.status)'))
    assert text(cell(nb, "reader = nbsubagents.run(")).startswith("completed - - read src/inventory.py")

    group = cell(nb, "%%subagents --concurrency 2 -o group")
    assert drawn(group) == ["display_data"]
    shown = panels(nb, group)[0]
    assert shown.startswith("Sub-agents: 3 done")
    for line in ("✓ inventory completed", "✓ writer completed", "✓ editor completed", "Writing NOTES.md (+2 lines)",
                 "Editing README.md", "Run ids:"):
        assert line in shown, shown
    listing = text(cell(nb, "for run in group:"))
    assert re.search(r"inventory\s+completed", listing) and re.search(r"editor\s+completed", listing)
    assert "Pears are out of stock.\nReorder on Monday." in listing

    background = cell(nb, "%%subagent scout --bg -o job")
    assert drawn(background) == ["display_data"]  # its live panel (its later states: see below)
    # job.wait() sent the panel's final state again, so the saved notebook shows the end, said once
    bg_panel = panels(nb, background)[0]
    assert bg_panel.startswith("✓ scout completed") and bg_panel.count("Done. 1 step:") == 1, bg_panel
    assert re.search(r"1 running · 5 completed · 0 failed · 0 aborted · 6 total\n.*\n\S+\s+scout\s+running",
                     text(cell(nb, "%subagent_status")))
    bar = cell(nb, "nbsubagents.status_bar()")
    # a record kept current from the watcher's thread (no widget), saved as job.wait() left it: true when saved
    (shown,) = bars(bar)
    assert VIEW not in shown and "nbsubagents-statusbar-counts" in shown["text/html"]
    assert shown["text/plain"] == "runs: 0 running / 6 total · ✓ scout completed", shown
    assert text(cell(nb, "job.wait()")).startswith("completed - - read src/inventory.py")

    registry = text(cell(nb, "nbsubagents.status(include_completed=True)"))
    assert registry.startswith("0 running · 6 completed · 0 failed · 0 aborted · 6 total")
    for name in ("scout", "reader", "inventory", "writer", "editor"):
        assert re.search(rf"\n\S+\s+{name}\s+completed\s+demo/scripted", registry), name

    every = cell(nb, "every = nbsubagents.runs()")
    table = value(every, "text/html")
    assert re.match(r'<div class="nbsubagents-runs">(<style>[^<]*</style>)?<table class="dataframe">', table)
    assert statuses(table) == ["completed"] * 6
    names = column(table, 1)  # newest first: the background run, the parallel three (any order), then the first two
    assert names[0] == "scout" and sorted(names[1:4]) == ["editor", "inventory", "writer"], names
    assert names[4:] == ["reader", "scout"], names
    assert re.match(r"\s+run_id\s+name\s+preset\s+status", value(every))  # plain pandas as text
    scribes = value(cell(nb, "scribes = nbsubagents.runs("), "text/html")
    assert sorted(column(scribes, 0)) == ["editor", "writer"] and statuses(scribes) == ["completed"] * 2


def test_background_runs_notebook_starts_watches_calls_on_done_and_cancels(kernel_env):
    nb = execute("background-runs.ipynb", kernel_env)
    check_exports(kernel_env, "background-runs.ipynb")

    bar = cell(nb, "bar = nbsubagents.status_bar()")
    (shown,) = bars(bar)
    assert VIEW not in shown  # a record, never a widget view a reopened notebook could not draw
    assert re.search(r"^started \S+ - (queued|running)$", text(cell(nb, "import time")), re.M)
    assert value(cell(nb, "bar.text")) == "'runs: 1 running / 1 total'"  # moved when the run started
    assert re.search(r"1 running · 0 completed .* 1 total\n.*\n\S+\s+explorer\s+running",
                     text(cell(nb, "nbsubagents.status()")))
    wait = cell(nb, "job.wait()")
    waited = text(wait)
    assert "completed - - ls src: inventory.py" in waited
    assert "on_done saw: [('explorer', 'completed')]" in waited
    # the one completion notice goes to the cell that started the run (nbclient keeps no output of a cell that
    # is done), never into the cell that runs when it ends; the bar shows it
    assert not NOTICE.search(raw(wait)), raw(wait)
    assert "status bar: runs: 0 running / 1 total · ✓ explorer completed\n" in waited
    # the record itself followed to the end: the runs started later and the last notice (which of the last
    # two runs ends last varies)
    line = shown["text/plain"]
    assert re.fullmatch(r"runs: 0 running / 3 total · 1 aborted · (✓ notes completed|■ slowpoke aborted)", line), line
    assert panels(nb, cell(nb, "import time"))[0].startswith("✓ explorer completed")  # resent by job.wait()

    slow = cell(nb, 'slow = nbsubagents.start("scout", "run: sleep 120"')
    assert text(slow).strip() == "running"
    assert re.fullmatch(r"Cancelling run \S+\n", text(cell(nb, "%subagent_cancel {slow.run_id}")))
    ended = text(cell(nb, "slow.wait()"))
    assert re.search(r"^slowpoke aborted - .*cancel", ended, re.M) and "notes completed" in ended
    assert panels(nb, slow)[0].startswith("■ slowpoke aborted")
    # it was stopped mid-command: its record says which, and counts the call (issue 56: "0 tool calls")
    assert "· 1 tool call ·" in panels(nb, slow)[0] and "while running: sleep 120" in panels(nb, slow)[0]

    every = text(cell(nb, "%subagent_status --all"))
    assert every.startswith("0 running · 2 completed · 0 failed · 1 aborted · 3 total")
    details = text(cell(nb, "%subagent_status {slow.run_id[:-2]}"))
    assert re.search(r"^  status\s+aborted$", details, re.M) and re.search(r"^  mode\s+background$", details, re.M)
    assert re.match(r"True completed \.pi/subagents/runs/\S+", text(cell(nb, "again = nbsubagents.get_run(")))


@pytest.mark.browser
def test_exploring_runs_notebook_reads_back_output_transcript_events_and_files(kernel_env):
    nb = execute("exploring-runs.ipynb", kernel_env)
    check_exports(kernel_env, "exploring-runs.ipynb")
    exported_panels_read(kernel_env / "export" / "exploring-runs.html")  # the HTML export check_exports wrote

    group = panels(nb, cell(nb, "runs = nbsubagents.run_parallel("))[0]
    assert group.startswith("Sub-agents: 2 done, 1 failed")
    assert "✗ broken failed" in group and "500 the provider is down" in group

    notes = panels(nb, cell(nb, "notes = nbsubagents.run("))[0]
    for line in ("✓ notes completed", "Writing NOTES.md (+1 line)", "Editing NOTES.md", "Finished editing NOTES.md"):
        assert line in notes, notes

    registry = text(cell(nb, "nbsubagents.status(include_completed=True)"))
    assert registry.startswith("0 running · 3 completed · 1 failed · 0 aborted · 4 total")

    # runs(): styled, newest first; its filters narrow it in the registry
    table = value(cell(nb, "all_runs = nbsubagents.runs()"), "text/html")
    assert 'class="dataframe"' in table
    names = column(table, 1)
    assert names[0] == "notes" and sorted(names[1:]) == ["broken", "survey", "with-file"], names
    assert sorted(statuses(table)) == ["completed"] * 3 + ["failed"]
    failed = value(cell(nb, 'nbsubagents.runs(status="failed")'), "text/html")
    assert column(failed, 0) == ["broken"] and statuses(failed) == ["failed"]
    assert "500 the provider is down" in failed
    scouts = value(cell(nb, 'nbsubagents.runs(preset="scout", since="1h")'), "text/html")
    assert sorted(column(scouts, 0)) == ["survey", "with-file"] and statuses(scouts) == ["completed"] * 2
    assert column(value(cell(nb, 'nbsubagents.runs(text="pears")'), "text/html"), 0) == ["notes"]
    sums = value(cell(nb, "per_preset = all_runs.groupby("))
    scout = re.search(r"^\d+\s+scout\s+2\s+3\s+(\d+)\s+([\d.]+)$", sums, re.M)
    scribe = re.search(r"^\d+\s+scribe\s+2\s+2\s+(\d+)\s+([\d.]+)$", sums, re.M)
    assert scout and scribe, sums
    assert int(scout[1]) > 0 and float(scout[2]) > 0 and int(scribe[1]) > 0

    one = text(cell(nb, "ids = dict("))
    assert re.match(r"\S+ completed\nDone\. 3 steps:\n- read README\.md: # Inventory service", one)
    assert re.search(r"^  name\s+survey$", text(cell(nb, "%subagent_status {run.run_id}")), re.M)
    transcript = text(cell(nb, "print(run.transcript)"))
    for line in ("Preset:  scout", "Model:   demo/scripted", "Reading README.md", "Finished reading README.md",
                 "Listing src", "wc -l src/inventory.py"):
        assert line in transcript
    events = html(cell(nb, "events = run.events_frame()"))
    for kind in ("run_start", "tool_call", "tool_result", "assistant_text", "usage", "run_end"):
        assert f"<td>{kind}</td>" in events, kind
    for line in ("Reading README.md", "Finished reading README.md", "Listing src",
                 "Command finished — 7 src/inventory.py"):
        assert f"<td>{line}</td>" in events, line  # the formatter's words, as the panel showed them
    found = html(cell(nb, "run.artifacts"))
    assert "nbsubagents-artifacts" in found
    for name in ("events.jsonl", "meta.json", "prompt.md", "result.json", "transcript.log"):
        assert f"<td>{name}</td>" in found, name
    files = text(cell(nb, "import json"))
    assert "'tools': ['read', 'ls', 'bash']" in files and "'toolCalls': 3" in files

    assert text(cell(nb, "print(notes.files_changed)")).rstrip() == "['NOTES.md']\nPears are back on Monday."
    steps = html(cell(nb, "notes.events_frame()"))
    for line in ("Writing NOTES.md (+1 line)", "Finished writing NOTES.md", "Editing NOTES.md",
                 "Finished editing NOTES.md (+1 -1)"):
        assert f"<td>{line}</td>" in steps, line
    assert "Reading" not in steps and "<td>usage</td>" not in steps  # rows without words were dropped

    prompt = text(cell(nb, "with_file = nbsubagents.get_run("))
    assert prompt.startswith("=== src/inventory.py ===\n") and "STOCK = {" in prompt
    broken = text(cell(nb, "broken = nbsubagents.get_run("))
    assert broken.startswith("failed - 500 the provider is down") and "✗" in broken

    # browse(): a widget (text elsewhere) listing the four runs, open on the notes run
    browser = cell(nb, "browser = nbsubagents.browse()")
    (shown,) = [o.data for o in browser.outputs if "data" in o]  # its record, with the widget while it is open
    assert shown[VIEW] and 'class="nbsubagents-browse-static"' in shown["text/html"]
    listing = shown["text/plain"]
    assert listing.startswith("browse(): 4 runs\n✓ completed  notes ") and "✗ failed     broken " in listing, listing
    page = panels(nb, browser)[0]
    for line in ("✓ notes completed · preset scribe · demo/scripted · 2 tool calls", "files changed: NOTES.md",
                 "Finished editing NOTES.md (+1 -1)", "Task: write NOTES.md: Pears are out of stock."):
        assert line in page, page

    # runs_timeline(): one picture, the cell's value; the three parallel runs overlap in time
    picture = cell(nb, "try:\n    timeline = nbsubagents.runs_timeline()")
    assert raw(picture) == "" and drawn(picture) == ["execute_result"]  # nothing printed (no install hint)
    assert base64.b64decode(value(picture, "image/png")).startswith(b"\x89PNG")
    (project,) = kernel_env.glob("nbsubagents-exploring-*/project")
    with sqlite3.connect(project / ".pi" / "subagents" / "registry.sqlite") as db:
        spans = {name: (mode, start, end) for name, mode, start, end in
                 db.execute("SELECT name, mode, started_at, ended_at FROM runs")}
    together = [spans[name] for name in ("survey", "with-file", "broken")]
    assert {mode for mode, _, _ in together} == {"parallel"}
    assert max(start for _, start, _ in together) < min(end for _, _, end in together), spans
    assert spans["notes"][1] >= max(end for _, _, end in together), spans


def test_conversation_notebook_steers_follows_up_answers_approves_and_falls_back(kernel_env):
    nb = execute("conversation.ipynb", kernel_env)
    check_exports(kernel_env, "conversation.ipynb")

    steered = cell(nb, 'run = nbsubagents.start("scout", "sleep: 2')
    assert text(steered).startswith("Done. 1 step:\n- read src/inventory.py:")  # the steer, not the plan
    assert re.search(r"^  you \(steer, [\d:]+\): read src/inventory\.py$", panels(nb, steered)[0], re.M)
    followed = cell(nb, 'run = nbsubagents.start("scout", "sleep: 1')
    record = panels(nb, followed)[0]
    assert record.index("- ls src: inventory.py") < record.index("you (follow-up") < record.index("Reading README.md")
    assert text(followed).startswith("Done. 1 step:\n- read README.md:")  # the second answer, same run

    asked = cell(nb, 'run = nbsubagents.start("scout", "ask:')
    assert text(asked).strip() == "Which file should I read? ['README.md', 'src/inventory.py']"
    assert "answer (person): src/inventory.py" in panels(nb, asked)[0]
    assert text(cell(nb, "%subagent_answer")).startswith("Answered run ")
    assert "- ask: src/inventory.py" in text(cell(nb, "run.wait()"))  # the answer reached the child

    guarded = text(cell(nb, 'run = nbsubagents.start("scout", "run: rm -rf src'))
    assert guarded == "[('Allow bash?', False, 'person')]\n['inventory.py']\n"  # denied: src is still there
    fallback = cell(nb, 'run = nbsubagents.run("scout", "fail for')
    assert text(fallback).startswith("completed [{'model': 'demo/scripted', 'error': '429 rate limited'}, "
                                     "{'model': 'demo/backup', 'error': None}]")
    assert panels(nb, fallback)[0].startswith("✓ fallback completed · demo/backup ·")
    table = text(cell(nb, "nbsubagents.runs()"))
    assert re.search(r"fallback\s+completed\s+demo/backup", table)


def test_delegation_notebook_grows_a_tree_shows_it_under_its_lead_and_stops_a_runaway_one(kernel_env):
    nb = execute("delegation.ipynb", kernel_env)
    pages = check_exports(kernel_env, "delegation.ipynb")

    (panel,) = panels(nb, cell(nb, 'lead = nbsubagents.run("lead"'))
    assert panel.startswith("✓ lead completed") and "merged: the README" in panel, panel
    kids = re.findall(r"^  ✓ scout (\w{6}) · completed(.*) · \$\d\.\d{4}$", panel, re.M)
    assert len(kids) == 3 and "the shell works" in kids[2][1], panel  # its answers, oldest first
    tree = text(cell(nb, "print(lead.tree())")).splitlines()
    assert re.fullmatch(r"\S+ lead completed", tree[0]) and len(tree) == 4
    assert [line.split()[0][-6:] for line in tree[1:]] == [k for k, _ in kids]
    assert all(re.fullmatch(r"  \S+ scout completed", line) for line in tree[1:]), tree
    frame = html(cell(nb, 'nbsubagents.runs()[["run_id"'))
    lead_id = tree[0].split()[0]
    rows = sorted(zip(*(column(frame, n) for n in (1, 3, 4, 5))))  # name, parent, root, depth
    assert rows == [("lead", "", lead_id, "0")] + [("scout", lead_id, lead_id, "1")] * 3, rows

    (stopped,) = panels(nb, cell(nb, "steps = "))
    assert stopped.startswith("✗ lead failed") and stopped.count("failed (tree_budget:cost)") == 2, stopped
    reasons = value(cell(nb, '[(node["name"], node["depth"]'))
    assert len(re.findall(r"'failed',\s+'tree_budget:cost',\s+'The tree under run", reasons)) == 3, reasons
    assert reasons.count("max_cost=0.02)") == 3
    assert pages["html"].count('class="nbsubagents-child nbsubagents-child-d1"') >= 5  # the records, without a kernel
    (bar,) = bars(cell(nb, "nbsubagents.status_bar()"))
    assert bar["text/plain"].startswith("runs: 0 running / 2 total · 1 failed")  # each tree once


def test_data_notebook_hands_a_frame_in_and_gets_a_typed_summary_and_a_cleaned_frame_back(kernel_env):
    nb = execute("data.ipynb", kernel_env)
    pages = check_exports(kernel_env, "data.ipynb")

    first = cell(nb, "class Summary(BaseModel):")
    (panel,) = panels(nb, first)
    assert panel.startswith("✓ scout completed") and "inputs df" in panel, panel
    assert "Reading .pi/subagents/runs/" in panel and panel.count("Running python") == 2, panel
    assert value(cell(nb, "run.data")) == "Summary(rows=6, missing=2, kept=4)"
    clean = value(cell(nb, 'run.outputs["clean"]'))
    assert [line.split()[1] for line in clean.splitlines()[1:]] == ["Oslo", "Pune", "Kyiv", "Nara"], clean
    assert value(cell(nb, "[(i[")).startswith("[('df', 'dataframe', ")

    (repair,) = panels(nb, cell(nb, "%%subagent scout --with readings"))
    assert "inputs readings" in repair and "Try 1 did not pass its check" in repair, repair
    assert value(cell(nb, "summary")) == "Summary(rows=6, missing=2, kept=4)"  # -o bound the instance
    tries = value(cell(nb, "repaired = nbsubagents.runs()"))
    assert "(1,\n  \"The reply does not match output_schema: at $.rows: 'six' is not of type 'integer'\")" in tries
    assert tries.endswith("(2, None)]"), tries
    assert "inputs df" in pages["html"] and "inputs readings" in pages["markdown"]  # the records, without a kernel
