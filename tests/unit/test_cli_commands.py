"""The console script on synthetic run directories: ``main()`` called in-process (stdout captured), and the
console entry in a subprocess where the process itself matters (``--version``, a closed pipe)."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import live_run_dir

import nbsubagents
from nbsubagents._lifecycle.edge import edge
from nbsubagents import _api as api, _cli as cli, _registry as registry
from nbsubagents._child import inbox
from nbsubagents._child.artifacts import STATUSES
from nbsubagents._lifecycle import batch
from nbsubagents._lifecycle.spec import spec_from_call
from nbsubagents._child.secrets import MASK

SECRET = "sk-cli-test-0123456789abcdef"


def make_run(root: Path, run_id: str, status: str = "completed", *, preset: str = "scout",
             model: str = "demo/scripted", created: str = "2026-01-01T10:00:00.000Z", output: str = "All done.",
             error: str | None = None) -> Path:
    """A run directory as the supervisor leaves it (a terminal one with its result.json), in the registry."""
    run_dir = root / ".pi" / "subagents" / "runs" / run_id
    run_dir.mkdir(parents=True)
    meta = {"runId": run_id, "name": preset, "preset": preset, "mode": "background", "task": "read README.md",
            "cwd": str(root), "resolvedModel": model, "createdAt": created,
            "launcher": {"pid": 1, "host": "elsewhere", "startTicks": 1}}
    (run_dir / "meta.json").write_text(json.dumps(meta))
    (run_dir / "result.json").write_text(json.dumps({
        "runId": run_id, "status": status, "exitCode": 0 if status == "completed" else 1, "stopReason": "stop",
        "errorMessage": error, "finalText": output, "usage": {"totalTokens": 15, "cost": 0.01}, "turns": 1,
        "toolCalls": 1, "startedAt": created, "endedAt": created, "durationSeconds": 3.0}))
    registry.record(run_dir)
    return run_dir


def cli_main(capsys, *args: str) -> tuple[int, str, str]:
    code = cli.main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def usage_error(capsys, *args: str) -> str:
    with pytest.raises(SystemExit) as exc:
        cli.main(list(args))
    assert exc.value.code == 2
    return capsys.readouterr().err


# -- the console entry ----------------------------------------------------------------------------------
def test_version_and_python_dash_m_nbsubagents_work_like_the_console_script(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "nbsubagents", "--version"], capture_output=True, text=True,
                          timeout=60, cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout == f"nbsubagents {nbsubagents.__version__}\n", proc.stderr
    runs = subprocess.run([sys.executable, "-m", "nbsubagents", "runs"], capture_output=True, text=True,
                          timeout=60, cwd=tmp_path)
    assert runs.returncode == 0 and runs.stdout == f"no runs yet in {tmp_path.resolve()}\n", runs.stderr


def test_runs_into_a_pipe_whose_reader_went_away_ends_quietly(root):
    """``nbsubagents runs | head -3``: head exits after three lines; here the reader is gone before the first."""
    for i in range(5):
        make_run(root, f"20260101-10000{i}-aaaaa{i}")
    read, write = os.pipe()
    os.close(read)
    try:
        proc = subprocess.run([sys.executable, "-m", "nbsubagents", "runs"], stdout=write, stderr=subprocess.PIPE,
                              text=True, timeout=60, cwd=root)
    finally:
        os.close(write)
    assert proc.stderr == ""
    assert proc.returncode == cli.BROKEN_PIPE == 141


# -- runs -----------------------------------------------------------------------------------------------
def test_runs_of_an_empty_project_says_no_runs_yet_in_it(root, capsys):
    assert cli_main(capsys, "runs") == (0, f"no runs yet in {root}\n", "")
    assert cli_main(capsys, "status") == (0, f"no runs yet in {root}\n", "")


def test_runs_are_listed_newest_first_and_filtered_in_the_registry(root, capsys):
    make_run(root, "20260101-100000-aaaaa1", created="2026-01-01T10:00:00.000Z")
    make_run(root, "20260101-110000-aaaaa2", "failed", preset="scribe", created="2026-01-01T11:00:00.000Z",
             error="boom")
    make_run(root, "20260101-120000-aaaaa3", "aborted", model="demo/other", created="2026-01-01T12:00:00.000Z")

    def ids(*args: str) -> list[str]:
        code, out, err = cli_main(capsys, "runs", "--json", *args)
        assert code == 0, err
        return [row["run_id"][-1] for row in json.loads(out)]

    assert ids() == ["3", "2", "1"]
    assert ids("--status", "failed,aborted") == ids("--status", "failed", "--status", "aborted") == ["3", "2"]
    assert ids("--preset", "scribe") == ["2"]
    assert ids("--model", "demo/other") == ["3"]
    assert ids("--since", "2026-01-01T10:30:00Z") == ["3", "2"]
    assert ids("--since", "2h") == []
    assert ids("--limit", "2") == ["3", "2"]
    code, out, _ = cli_main(capsys, "runs")
    assert out.splitlines()[0] == "0 running · 1 completed · 1 failed · 1 aborted · 3 total"
    assert [ln.split()[0] for ln in out.splitlines()[2:]] == [f"20260101-1{h}0000-aaaaa{i}" for h, i in
                                                           (("2", 3), ("1", 2), ("0", 1))]
    code, out, _ = cli_main(capsys, "runs", "--status", "running")
    assert out == f"no runs match --status running in {root} (3 in all: `nbsubagents runs` lists them)\n"


def test_runs_table_shows_the_newest_fifty_and_says_how_to_see_more(root, capsys):
    for i in range(cli.TABLE_LIMIT + 1):
        make_run(root, f"20260101-1000{i:02d}-aaa{i:03d}", created=f"2026-01-01T10:00:{i:02d}.000Z")
    code, out, _ = cli_main(capsys, "runs")
    lines = out.splitlines()
    assert len(lines) == 2 + cli.TABLE_LIMIT + 1 and "aaa050" in lines[2] and "aaa000" not in out
    assert lines[-1] == "… older runs not shown: --limit 100 shows more"
    assert "status.rows" not in out  # a Python attribute means nothing in a shell


def test_runs_refuses_an_unknown_status_or_time_naming_what_is_known(root, capsys):
    err = usage_error(capsys, "runs", "--status", "done")
    assert f"unknown status 'done': statuses are {', '.join(STATUSES)}" in err
    assert "'yesterday' is not understood: give an ISO date or time like 2026-11-25" in usage_error(
        capsys, "runs", "--since", "yesterday")
    assert "a whole number >= 1 is needed, got '0'" in usage_error(capsys, "runs", "--limit", "0")


def test_runs_json_and_csv_are_masked_like_the_table(root, capsys, monkeypatch):
    monkeypatch.setenv("MY_SERVICE_API_KEY", SECRET)
    make_run(root, "20260101-100000-aaaaa1", output=f"the key is {SECRET}\x1b[2J \x9b\x7f é")
    code, out, _ = cli_main(capsys, "runs", "--json")
    rows = json.loads(out)  # valid JSON: the control characters are JSON's escapes, not the terminal's
    assert rows[0]["final_text"] == f"the key is {MASK}\x1b[2J \x9b\x7f é" and rows[0]["status"] == "completed"
    assert rows[0]["run_dir"] == str(root / ".pi" / "subagents" / "runs" / "20260101-100000-aaaaa1")
    assert not [c for c in out if ord(c) < 0x20 and c != "\n" or ord(c) >= 0x7f]
    code, out, _ = cli_main(capsys, "runs", "--csv")
    got = list(csv.DictReader(io.StringIO(out)))
    assert got[0]["run_id"] == "20260101-100000-aaaaa1"
    assert got[0]["final_text"] == f"the key is {MASK}\\x1b[2J \\x9b\\x7f é"  # escaped, as the table shows it
    code, out, _ = cli_main(capsys, "runs")
    assert SECRET not in out and MASK in out


# -- status, show ---------------------------------------------------------------------------------------
def test_an_unknown_run_gets_a_shell_hint_not_a_python_call(root, capsys):
    make_run(root, "20260101-100000-aaaaa1")
    for command in ("status", "show", "report", "cancel"):
        code, out, err = cli_main(capsys, command, "nope")
        assert code == 1 and out == "", command
        assert 'No run "nope" in ' in err and "`nbsubagents runs` lists them" in err, err
        assert "nbsubagents.status(" not in err, err


def test_show_prints_a_runs_summary_output_error_and_files(root, capsys, monkeypatch):
    monkeypatch.setenv("MY_SERVICE_API_KEY", SECRET)
    run_dir = make_run(root, "20260101-100000-aaaaa1", "failed", output=f"line one\nline two {SECRET}",
                       error="pi exited with code 1")
    code, out, err = cli_main(capsys, "show", "aaaaa1")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("✗ scout failed in 3.0s · 1 tool call · 15 tokens") and "aaaaa1" in lines[0]
    assert "  output      line one" in lines and f"              line two {MASK}" in lines
    assert "  error       pi exited with code 1" in lines
    assert f"  run dir     {run_dir}" in lines and f"  transcript  {run_dir / 'transcript.log'}" in lines
    assert f"  events      {run_dir / 'events.jsonl'}" in lines
    code, out, _ = cli_main(capsys, "show", "20260101", "--json")
    shown = json.loads(out)
    assert shown["status"] == "failed" and shown["output"] == f"line one\nline two {MASK}"
    assert shown["events"] == str(run_dir / "events.jsonl") and shown["error"] == "pi exited with code 1"


# -- report, cancel -------------------------------------------------------------------------------------
def test_report_writes_the_runs_report_and_prints_its_path(root, capsys):
    make_run(root, "20260101-100000-aaaaa1", output="first answer")
    make_run(root, "20260101-110000-aaaaa2", output="second answer")
    code, out, err = cli_main(capsys, "report", "aaaaa1", "aaaaa2", "--format", "md", "--out", "r.md")
    assert code == 0, err
    assert out == f"{root / 'r.md'}\n"
    text = (root / "r.md").read_text()
    assert "first answer" in text and "second answer" in text and "<html" not in text
    code, out, _ = cli_main(capsys, "report", "aaaaa1")
    path = Path(out.strip())
    assert path.parent == root / ".pi" / "subagents" / "reports" and path.suffix == ".html"
    assert "first answer" in path.read_text()


def test_cancel_says_for_each_run_why_it_was_not_cancelled_and_exits_1(root, capsys):
    make_run(root, "20260101-100000-aaaaa1")
    code, out, err = cli_main(capsys, "cancel", "aaaaa1", "nope")
    assert code == 1 and out == ""
    assert "aaaaa1: not cancelled: run 20260101-100000-aaaaa1 had already ended (completed)" in err
    assert 'nope: not cancelled: No run "nope"' in err


# -- steer, followup, answer, approve ------------------------------------------------------------------
ASK = {"id": "q-1111", "method": "input", "title": "Which database?", "timeoutAt": None, "approval": False}
PICK = {"id": "q-2222", "method": "select", "title": "Which file?", "options": ["README.md", "NOTES.md"]}
ALLOW = {"id": "q-3333", "method": "confirm", "title": "Allow bash?", "message": "rm -rf build", "approval": True}


def make_live_run(root: Path, run_id: str, questions: list | None = None) -> Path:
    return live_run_dir(root, run_id, questions=questions, meta={"createdAt": "2026-01-01T09:00:00.000Z"})


def test_steer_and_followup_post_to_a_running_run_and_say_so(root, capsys):
    run_dir = make_live_run(root, "20260101-090000-bbbbb1")
    assert cli_main(capsys, "steer", "bbbbb1", "read", "OTHER.md", "instead") == (
        0, "20260101-090000-bbbbb1: steered (the child reads it after its current tool call)\n", "")
    assert cli_main(capsys, "followup", "bbbbb1", "then stop; say why") == (
        0, "20260101-090000-bbbbb1: followed up (the child reads it after its current turn)\n", "")
    assert [(m["kind"], m["text"]) for m in inbox.take(run_dir)] == [
        ("steer", "read OTHER.md instead"), ("follow_up", "then stop; say why")]


def test_answer_and_approve_go_to_the_open_questions_and_show_lists_them(root, capsys):
    run_dir = make_live_run(root, "20260101-090000-bbbbb2", [ASK, PICK, ALLOW])
    code, out, err = cli_main(capsys, "show", "bbbbb2")
    assert code == 0, err
    lines = out.splitlines()
    assert "  status      waiting" in lines
    rid = "20260101-090000-bbbbb2"
    assert lines[lines.index("  asks        Which database?"):][:6] == [
        "  asks        Which database?", f"                answer: nbsubagents answer {rid} TEXT --question q-1111",
        "              Which file? [1 README.md | 2 NOTES.md]",
        f"                answer: nbsubagents answer {rid} CHOICE --question q-2222",
        "              Allow bash?: rm -rf build",
        f"                answer: nbsubagents approve {rid} allow|deny --question q-3333"]
    code, out, _ = cli_main(capsys, "show", "bbbbb2", "--json")
    assert [q["id"] for q in json.loads(out)["questions"]] == ["q-1111", "q-2222", "q-3333"]
    assert cli_main(capsys, "answer", "bbbbb2", "the", "staging", "one") == (
        0, f"{rid}: answered Which database?: the staging one\n", "")
    assert cli_main(capsys, "answer", "bbbbb2", "2", "--question", "q-2") == (
        0, f"{rid}: answered Which file? [1 README.md | 2 NOTES.md]: NOTES.md\n", "")
    assert cli_main(capsys, "approve", "bbbbb2", "deny") == (0, f"{rid}: denied: Allow bash?: rm -rf build\n", "")
    assert [(m["requestId"], m["value"]) for m in inbox.take(run_dir)] == [
        ("q-1111", "the staging one"), ("q-2222", "NOTES.md"), ("q-3333", False)]
    assert "argument decision: invalid choice: 'maybe' (choose from 'allow', 'deny')" in usage_error(
        capsys, "approve", "bbbbb2", "maybe")


def test_talking_to_a_run_that_cannot_take_it_exits_1_saying_what_would_be_right(root, capsys):
    make_run(root, "20260101-100000-aaaaa1")
    make_live_run(root, "20260101-090000-bbbbb3", [PICK])
    rid = "20260101-090000-bbbbb3"
    assert cli_main(capsys, "steer", "aaaaa1", "look again") == (
        1, "", "nbsubagents steer: Run 20260101-100000-aaaaa1 has ended (completed): a steer reaches only a running "
               "run; `nbsubagents followup RUN TEXT` continues its session as a new run\n")
    assert cli_main(capsys, "answer", "bbbbb3", "CHANGES.md") == (
        1, "", f"nbsubagents answer: Question q-2222 of run {rid} (Which file? [1 README.md | 2 NOTES.md]) takes one "
               "of its options, by its text or its number from 1; got 'CHANGES.md'\n")
    assert cli_main(capsys, "approve", "bbbbb3", "allow") == (
        1, "", f"nbsubagents approve: Run {rid} is not waiting for an approval: it asks Which file? [1 README.md | "
               "2 NOTES.md] (answer that with `nbsubagents answer RUN TEXT`)\n")
    assert cli_main(capsys, "answer", "bbbbb3", "1", "--question", "nope") == (
        1, "", f"nbsubagents answer: Run {rid} has no open question 'nope': its open ones are q-2222 (Which file? "
               "[1 README.md | 2 NOTES.md])\n")
    inbox.set_waiting(root / ".pi" / "subagents" / "runs" / rid, [])
    assert cli_main(capsys, "answer", "bbbbb3", "yes") == (
        1, "", f"nbsubagents answer: Run {rid} is not waiting for an answer: no question is open (`nbsubagents show "
               "RUN` lists the open ones)\n")
    code, _, err = cli_main(capsys, "steer", "nope", "hello")
    assert code == 1 and 'nbsubagents steer: No run "nope"' in err and "`nbsubagents runs` lists them" in err


def test_followup_of_an_ended_run_continues_it_as_a_new_linked_run(project, capsys, monkeypatch):
    """The starter prepares the new run without launching pi (``api.start``, which the command line lends the
    runs as it starts, launches what it prepares)."""
    make_run(project, "20260101-100000-aaaaa1")
    shows = []

    def prepare_only(preset, task, show=True, **options):
        shows.append(show)
        return batch.prepare_one(spec_from_call(preset, task, options, "start()"), mode="background")

    monkeypatch.setattr(api, "start", prepare_only)
    monkeypatch.setattr(edge, "start", None)  # until the command line lends it
    code, out, err = cli_main(capsys, "followup", "aaaaa1", "and", "the", "tests?")
    assert code == 0, err
    assert shows == [False]  # no progress from a command that returns at once
    new = out.split("continued as run ")[1].split()[0]
    assert out == (f"20260101-100000-aaaaa1 had ended (completed): continued as run {new} in the background "
                   f"(`nbsubagents show {new}`)\n")
    code, out, _ = cli_main(capsys, "show", new, "--json")
    assert json.loads(out)["resumed_from"] == "20260101-100000-aaaaa1" and json.loads(out)["task"] == "and the tests?"
    code, out, _ = cli_main(capsys, "runs", "--json")
    assert {r["run_id"]: r["resumed_from"] for r in json.loads(out)} == {new: "20260101-100000-aaaaa1",
                                                                         "20260101-100000-aaaaa1": None}


def test_runs_and_status_show_a_run_with_an_open_question_as_waiting(root, capsys):
    make_run(root, "20260101-100000-aaaaa1")
    make_live_run(root, "20260101-090000-bbbbb4", [ASK])
    make_live_run(root, "20260101-090000-bbbbb5")

    def ids(*args: str) -> dict[str, str]:
        code, out, err = cli_main(capsys, "runs", "--json", *args)
        assert code == 0, err
        return {row["run_id"][-6:]: row["status"] for row in json.loads(out)}

    assert ids() == {"aaaaa1": "completed", "bbbbb4": "waiting", "bbbbb5": "running"}
    assert ids("--status", "waiting") == {"bbbbb4": "waiting"}
    assert ids("--status", "running") == {"bbbbb5": "running"}
    assert ids("--status", "waiting,completed", "--limit", "1") == {"aaaaa1": "completed"}
    code, out, _ = cli_main(capsys, "runs", "--status", "completed")
    assert out.splitlines()[0] == "2 running (1 waiting) · 1 completed · 0 failed · 0 aborted · 3 total"
    code, out, _ = cli_main(capsys, "status")
    assert out.splitlines()[0] == "2 running (1 waiting) · 1 completed · 0 failed · 0 aborted · 3 total"
    assert [ln.split()[2] for ln in out.splitlines()[2:]] == ["waiting", "running"]
    code, out, _ = cli_main(capsys, "status", "bbbbb4")
    assert "  status       waiting" in out.splitlines() and "  asks         Which database?" in out.splitlines()


# -- help -----------------------------------------------------------------------------------------------
def test_help_of_the_parser_and_of_every_command_shows_examples_and_exit_codes(capsys):
    commands = [None, *cli.parser()._subparsers._group_actions[0].choices]
    assert {"run", "runs", "status", "show", "report", "cancel", "steer", "followup", "answer", "approve", "doctor",
            "demo"} <= set(commands[1:])
    for command in commands:
        with pytest.raises(SystemExit) as exc:
            cli.main([command, "--help"] if command else ["--help"])
        out = capsys.readouterr().out
        assert exc.value.code == 0
        assert "\nexamples:\n  nbsubagents " in out, command
        assert "exit codes:\n  0    ok\n  1    a problem" in out and "  2    a usage error" in out, command


def test_a_python_call_a_message_suggests_is_given_in_its_shell_form():
    assert cli.for_shell('No run "x" in /p: nbsubagents.status(include_completed=True) lists the runs') == \
        'No run "x" in /p: `nbsubagents runs` lists them'
