"""JupyterLab's nbsubagents extension, its server side (``nbsubagents.lab``): which project a notebook belongs to,
the status bar's running runs with their clocks, a run's current record; and its labextension, built from its source.

Run folders are made by hand here (meta.json, supervisor.json, waiting.json, result.json), as a supervisor writes
them; the browser test (tests/browser/test_labextension_browser.py) drives real runs through a real JupyterLab.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

from nbsubagents import _registry as registry
from nbsubagents._child import inbox, keys
from nbsubagents._child.artifacts import iso
from nbsubagents._config import NbSubagentsError
from nbsubagents.lab import readers
from nbsubagents._lifecycle.handle import Run
from nbsubagents._views.panel_state import PanelState

REPO = Path(__file__).resolve().parents[2]


def make_run(root: Path, run_id: str, *, name: str, started: float | None = None, waiting: bool = False,
             result: dict | None = None) -> Path:
    """A run folder as its supervisor leaves it: queued (no supervisor.json), running since ``started``, or ended."""
    run_dir = root / ".pi" / "subagents" / "runs" / run_id
    run_dir.mkdir(parents=True)
    meta = {"runId": run_id, "name": name, "preset": "scout", "mode": "background", "task": f"task of {name}\nmore",
            "cwd": str(root), "resolvedModel": "demo/scripted", "createdAt": iso(time.time() - 60),
            "launcher": {"pid": 1, "host": registry.HOST, "startTicks": 1}}
    (run_dir / "meta.json").write_text(json.dumps(meta))
    if started is not None:
        (run_dir / "supervisor.json").write_text(json.dumps({"pid": 1, "startTicks": 1, "startedAt": iso(started)}))
    if waiting:
        inbox.set_waiting(run_dir, [{"id": "q1", "title": "Go on?"}], keys.create(run_id))  # signed, as it does
    if result is not None:
        end(run_dir, **result)
    registry.record(run_dir)
    return run_dir


def end(run_dir: Path, status: str = "completed", final: str = "all done") -> None:
    (run_dir / "result.json").write_text(json.dumps({"runId": run_dir.name, "status": status, "finalText": final,
                                                     "durationSeconds": 4.2, "exitCode": 0}))


# -- the project of a notebook --------------------------------------------------------------------------------
def test_a_notebook_belongs_to_the_project_above_it_and_paths_stay_inside_the_root(tmp_path):
    project = tmp_path / "work" / "proj"
    (project / ".pi").mkdir(parents=True)
    (project / "notebooks" / "deep").mkdir(parents=True)
    (project / "notebooks" / "deep" / "a.ipynb").write_text("{}")
    assert readers.project_of(tmp_path, "work/proj/notebooks/deep/a.ipynb") == project
    assert readers.project_of(tmp_path, "work/proj/notebooks/deep/not-saved-yet.ipynb") == project
    assert readers.project_of(project, "") == project  # the server's root: its own project
    assert readers.project_of(tmp_path / "work", "other/b.ipynb") == tmp_path / "work"  # no project: the folder
    with pytest.raises(NbSubagentsError, match="outside the server's root"):
        readers.project_of(project, "../../etc/passwd")
    # a server rooted below the project reads nothing above its root: each folder is its own project
    assert readers.project_of(project / "notebooks", "deep/a.ipynb") == project / "notebooks" / "deep"
    assert readers.project_of(project / "notebooks", "") == project / "notebooks"


# -- the status bar's runs ------------------------------------------------------------------------------------
def test_the_status_bar_counts_the_active_runs_and_lists_who_waits_then_who_runs_with_their_clocks(root):
    make_run(root, "20261126-100000-aaaaaa", name="scout", started=time.time() - 12)
    make_run(root, "20261126-100001-bbbbbb", name="fixer", started=time.time() - 3, waiting=True)
    make_run(root, "20261126-100002-cccccc", name="later")
    make_run(root, "20261126-095959-dddddd", name="old", result={"status": "failed"})

    got = readers.running(root)
    assert (got["running"], got["queued"], got["waiting"]) == (1, 1, 1)
    assert got["summary"] == "nbsubagents: ◷ 1 waiting · ↻ 1 running · 1 queued"  # counts only: it never grows
    assert [r["label"] for r in got["runs"]] == ["fixer · demo/scripted", "scout · demo/scripted"]  # waiting first
    fixer, scout = (r["line"] for r in got["runs"])
    assert re.fullmatch(r"◷ fixer · demo/scripted · waiting for an answer · [34]\.\ds", fixer), fixer
    assert re.fullmatch(r"↻ scout · demo/scripted · running · 1[23]s", scout), scout
    assert got["runs"][1]["task"] == "task of scout"  # the queued run is only counted

    for run_dir in (root / ".pi" / "subagents" / "runs").iterdir():  # they end: the registry takes their results in
        if not (run_dir / "result.json").exists():
            end(run_dir)
    got = readers.running(root)
    assert got["summary"] == "nbsubagents: none running" and got["runs"] == []


def test_a_sweeps_runs_are_named_and_ordered_as_its_panel_and_clocked_from_their_own_start(root):
    """A sweep's runs as its panel names them (preset · model · task id), the longest running first, each clocked
    from its run_start event, not from when it was queued; the queued ones are one count, the sweep is named."""
    starts = {"t1": 40.0, "t2": 5.0, "t3": None}
    for i, (task_id, ago) in enumerate(starts.items()):
        run_dir = make_run(root, f"20261126-10000{i}-aaaaa{i}", name=f"{task_id} · scout · default · #1",
                           started=time.time() - 200 if ago is not None else None)  # launched long ago
        meta = json.loads((run_dir / "meta.json").read_text())
        meta.update(experiment="sweep-a", params={"task_id": task_id, "preset": "scout", "model": None, "repeat": 1})
        (run_dir / "meta.json").write_text(json.dumps(meta))
        if ago is not None:
            (run_dir / "events.jsonl").write_text(json.dumps({"type": "run_start", "ts": time.time() - ago}) + "\n")
        registry.record(run_dir)
    got = readers.running(root)
    assert [r["label"] for r in got["runs"]] == ["scout · demo/scripted · t1", "scout · demo/scripted · t2"]
    assert re.fullmatch(r"↻ scout · demo/scripted · t1 · running · 4[01]s", got["runs"][0]["line"])
    assert re.fullmatch(r"↻ scout · demo/scripted · t2 · running · [56]\.\ds", got["runs"][1]["line"])
    assert got["summary"] == "nbsubagents: ↻ 2 running · 1 queued"
    assert got["sweeps"] == [{"name": "sweep-a", "notebook": "", "running": 2, "queued": 1}]


def test_many_runs_keep_the_bars_line_short(root):
    for i in range(30):
        make_run(root, f"20261126-1000{i:02d}-aaaa{i:02d}", name=f"run-with-a-long-name-{i}",
                 started=time.time() - 30 if i < 4 else None)
    got = readers.running(root)
    assert got["summary"] == "nbsubagents: ↻ 4 running · 26 queued"
    assert len(got["runs"]) == 4


def test_the_projects_a_kernel_used_are_read_together_and_a_record_is_found_in_any(root, tmp_path):
    other = tmp_path / "elsewhere"
    (other / ".pi").mkdir(parents=True)
    make_run(other, "20261126-110000-eeeeee", name="far", started=time.time() - 5, result={"status": "completed"})
    make_run(root, "20261126-100000-aaaaaa", name="near", started=time.time() - 5)
    assert readers.project_at(other / ".pi") == other.resolve() or readers.project_at(other / ".pi") == other
    assert readers.project_at(tmp_path / "nowhere-at-all") is None
    got = readers.running(tmp_path / "no-registry", root)
    assert [r["label"] for r in got["runs"]] == ["near · demo/scripted"]
    answer = readers.current_record([root, other], ["20261126-110000-eeeeee"])
    assert answer["ended"] and answer["statuses"] == {"20261126-110000-eeeeee": "completed"}
    assert readers.current_record([root], ["20261126-110000-eeeeee"])["statuses"] == {
        "20261126-110000-eeeeee": "missing"}


def test_a_status_bar_record_is_read_again_as_of_now(root, tmp_path):
    assert readers.current_bar([tmp_path]) == {"found": False}
    run_dir = make_run(root, "20261126-100000-aaaaaa", name="scout", started=time.time() - 5)
    answer = readers.current_bar([tmp_path, root])
    assert answer["found"] and answer["running"] == 1
    assert answer["text"].startswith("runs: 1 running / 1 total")
    assert 'data-running="1"' in answer["html"]
    assert re.search(r"as of \d\d:\d\d:\d\d · read after the kernel that showed it had gone", answer["html"])
    end(run_dir)
    answer = readers.current_bar([root])
    assert answer["running"] == 0 and answer["text"].startswith("runs: 0 running / 1 total")


def test_a_folder_without_runs_shows_none_and_gets_no_registry(tmp_path):
    assert readers.running(tmp_path)["summary"] == "nbsubagents: none running"
    assert readers.current_record([tmp_path], ["20261126-100000-aaaaaa"])["statuses"] == {
        "20261126-100000-aaaaaa": "missing"}
    assert list(tmp_path.iterdir()) == []  # a read creates nothing


# -- a run's current record -----------------------------------------------------------------------------------
def test_a_record_is_given_once_the_run_ended_as_the_kernel_renders_it_and_says_as_of(root):
    run_dir = make_run(root, "20261126-100000-aaaaaa", name="scout", started=time.time() - 5)
    answer = readers.current_record([root], ["20261126-100000-aaaaaa"])
    assert answer == {"ended": False, "statuses": {"20261126-100000-aaaaaa": "running"}}

    end(run_dir, final="the answer, at last")
    answer = readers.current_record([root], ["20261126-100000-aaaaaa"])
    assert answer["ended"] and answer["statuses"] == {"20261126-100000-aaaaaa": "completed"}
    text, html = PanelState.of_run(Run(run_dir)).static_record()  # the kernel's own record of an ended run
    assert answer["text"].startswith(text + "\nAs of ")
    assert answer["html"].startswith(html[:-len("</div>")])
    assert 'data-run-id="20261126-100000-aaaaaa"' in answer["html"]
    assert "nbsubagents-status-completed" in answer["html"] and "the answer, at last" in answer["html"]
    assert re.search(r'class="nbsubagents-as-of[^"]*"[^>]*>as of \d\d:\d\d:\d\d · ', answer["html"])
    assert answer["html"].endswith("</div></div>")  # the stamp inside the record's box


def test_a_group_record_waits_for_every_run_and_names_unknown_ones_missing(root):
    a = make_run(root, "20261126-100000-aaaaaa", name="one", started=time.time() - 5)
    make_run(root, "20261126-100001-bbbbbb", name="two", result={"status": "failed", "final": ""})
    ids = ["20261126-100000-aaaaaa", "20261126-100001-bbbbbb"]
    answer = readers.current_record([root], ids, group=True)
    assert not answer["ended"] and "html" not in answer
    end(a)
    answer = readers.current_record([root], ids, group=True)
    assert answer["ended"] and answer["html"].startswith('<div class="nbsubagents-static-group')
    assert "1 done" in answer["html"] and "1 failed" in answer["html"]
    assert answer["text"].startswith("Sub-agents: 1 done, 1 failed")

    missing = readers.current_record([root], ["20261126-100000-aaaaab"])  # no such run, though a prefix matches none
    assert missing == {"ended": False, "statuses": {"20261126-100000-aaaaab": "missing"}}
    assert readers.current_record([root], ["20261126-100000"])["statuses"] == {"20261126-100000": "missing"}  # a prefix
    with pytest.raises(NbSubagentsError, match="no run id given"):
        readers.current_record([root], [])
    with pytest.raises(NbSubagentsError, match="give one, or group=1"):
        readers.current_record([root], ids)


# -- the extension's parts ------------------------------------------------------------------------------------
def test_import_nbsubagents_loads_no_jupyter_server_and_the_extension_registers_itself():
    code = ("import sys, nbsubagents, nbsubagents._api\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('jupyter_server', 'tornado')"
            " or m.startswith('nbsubagents.lab')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]"
    import nbsubagents.lab
    assert nbsubagents.lab._jupyter_server_extension_points() == [{"module": "nbsubagents.lab"}]
    config = json.loads((REPO / "labextension" / "jupyter_server_config.json").read_text())
    assert config == {"ServerApp": {"jpserver_extensions": {"nbsubagents.lab": True}}}


def test_the_built_labextension_is_built_from_its_source_and_shipped_by_the_wheel():
    """labextension/dist is committed: after a change to labextension/src (or its package.json, tsconfig.json),
    ``make labextension`` rebuilds it and writes the source's hash; until then this test fails."""
    ext = REPO / "labextension"
    source = b"".join(p.read_bytes() for p in [*sorted((ext / "src").glob("*.ts")), ext / "package.json",
                                               ext / "tsconfig.json"])
    assert (ext / "built-from.sha256").read_text().strip() == hashlib.sha256(source).hexdigest(), (
        "labextension/src changed since labextension/dist was built: run `make labextension` and commit dist/")
    built = json.loads((ext / "dist" / "package.json").read_text())
    assert built["name"] == "nbsubagents"
    assert (ext / "dist" / built["jupyterlab"]["_build"]["load"]).is_file()
    shared = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["hatch"]["build"]["targets"]["wheel"][
        "shared-data"]
    assert shared["labextension/dist"] == "share/jupyter/labextensions/nbsubagents"
    assert shared["labextension/jupyter_server_config.json"] == "etc/jupyter/jupyter_server_config.d/nbsubagents.json"
