"""The shared progress formatter: exact wording, tied results, path shortening, recorded pi streams."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from nbsubagents._child.events import RESULT_TEXT_LIMIT, iter_stream
from nbsubagents._child.record import RunRecord
from nbsubagents._child.formatter import ProgressFormatter, ProgressLine, transcript_header, transcript_line

_IN_REPO = Path(__file__).resolve().parents[1] / "fixtures" / "pi-0.73.1"
FIXTURES = _IN_REPO if _IN_REPO.is_dir() else Path(__file__).resolve().parents[3] / "shared/fixtures/pi-0.73.1"


def fmt(**kw) -> ProgressFormatter:
    kw.setdefault("home", "/home/me")
    return ProgressFormatter(kw.pop("cwd", "/proj"), **kw)


def call(f: ProgressFormatter, name: str, args: dict | None = None, id: str = "c1") -> ProgressLine | None:
    return f.format({"type": "tool_call", "id": id, "name": name, "args": args if args is not None else {}})


def result(f: ProgressFormatter, name: str, text: str = "", *, error: bool = False, id: str = "c1",
           details: dict | None = None) -> ProgressLine | None:
    return f.format({"type": "tool_result", "id": id, "name": name, "isError": error, "text": text,
                     "details": details})


def texts(path: Path, **kw) -> list[str]:
    f = ProgressFormatter(**kw)
    with open(path, "rb") as fh:
        return [line.text for e in iter_stream(fh) if (line := f.format(e)) is not None]


# -- assistant text and thinking ------------------------------------------------------------------
def test_assistant_text_is_shown_whole_as_the_child_wrote_it():
    long = "I found the schema; next I'm checking validation.\n" + "x" * 300
    assert fmt().format({"type": "assistant_text", "text": f"  {long}\n"}) == ProgressLine("assistant", long)


@pytest.mark.parametrize("text", ["", "   ", "\n\t\n", None])
def test_blank_assistant_text_gives_no_line(text):
    assert fmt().format({"type": "assistant_text", "text": text}) is None


def test_assistant_text_is_not_replaced_by_the_tool_it_announces():
    f = fmt()
    lines = [f.format({"type": "assistant_text", "text": "I'm inspecting the auth flow now."}),
             call(f, "read", {"path": "/proj/src/auth.ts"})]
    assert lines == [ProgressLine("assistant", "I'm inspecting the auth flow now."),
                     ProgressLine("tool", "Reading src/auth.ts")]


def test_thinking_is_one_line_cut_to_the_width():
    line = fmt(width=40).format({"type": "thinking", "text": "The user wants\n\na listing; " + "y" * 80})
    assert line.kind == "thinking"
    assert line.text == "The user wants a listing; " + "y" * 13 + "…"
    assert len(line.text) == 40


def test_blank_thinking_gives_no_line():
    assert fmt().format({"type": "thinking", "text": " \n "}) is None


# -- tool calls -----------------------------------------------------------------------------------
@pytest.mark.parametrize("args, expected", [
    ({"path": "src/auth.ts"}, "Reading src/auth.ts"),
    ({"path": "src/auth.ts", "offset": 10, "limit": 50}, "Reading src/auth.ts (lines 10-59)"),
    ({"path": "src/auth.ts", "offset": 10}, "Reading src/auth.ts (from line 10)"),
    ({"path": "src/auth.ts", "limit": 1}, "Reading src/auth.ts (first 1 line)"),
    ({"path": "src/auth.ts", "limit": 20}, "Reading src/auth.ts (first 20 lines)"),
    ({}, "Running read"),
])
def test_read_call_wording(args, expected):
    assert call(fmt(), "read", args) == ProgressLine("tool", expected)


@pytest.mark.parametrize("args, expected", [
    ({"pattern": "auth"}, "Searching code for auth"),
    ({"pattern": "auth", "path": "/proj/src/"}, "Searching code for auth in src/"),
    ({"pattern": "auth", "path": "."}, "Searching code for auth"),
    ({"pattern": "auth", "glob": "*.ts"}, "Searching code for auth (*.ts)"),
    ({"pattern": "auth", "path": "src", "glob": "**/*.spec.ts"}, "Searching code for auth in src (**/*.spec.ts)"),
    ({"path": "src"}, "Running grep"),
])
def test_grep_call_wording(args, expected):
    assert call(fmt(), "grep", args) == ProgressLine("tool", expected)


@pytest.mark.parametrize("args, expected", [
    ({"pattern": "*.test.ts"}, "Scanning for *.test.ts"),
    ({"pattern": "*.test.ts", "path": "/proj/src"}, "Scanning for *.test.ts in src"),
    ({}, "Running find"),
])
def test_find_call_wording(args, expected):
    assert call(fmt(), "find", args) == ProgressLine("tool", expected)


@pytest.mark.parametrize("args, expected", [
    ({"path": "src/"}, "Listing src/"),
    ({"path": "/proj/lib"}, "Listing lib"),
    ({"path": "."}, "Listing files"),
    ({"path": "/proj"}, "Listing files"),
    ({}, "Listing files"),
])
def test_ls_call_wording(args, expected):
    assert call(fmt(), "ls", args) == ProgressLine("tool", expected)


@pytest.mark.parametrize("args, expected", [
    ({"path": "src/tool.ts", "edits": [{"oldText": "a", "newText": "b"}]}, "Editing src/tool.ts"),
    ({"path": "src/tool.ts", "edits": [{"oldText": "a", "newText": "b"}] * 2}, "Editing src/tool.ts (2 edits)"),
    ({"path": "src/tool.ts", "oldText": "a", "newText": "b"}, "Editing src/tool.ts"),
    ({"edits": []}, "Running edit"),
])
def test_edit_call_wording(args, expected):
    assert call(fmt(), "edit", args) == ProgressLine("tool", expected)


@pytest.mark.parametrize("content, expected", [
    ("# Title\n" * 12, "Writing README.md (+12 lines)"),
    ("one line, no newline", "Writing README.md (+1 line)"),
    ("a\nb", "Writing README.md (+2 lines)"),
    ("", "Writing README.md (empty)"),
    (None, "Writing README.md"),
])
def test_write_call_wording_counts_content_lines(content, expected):
    args = {"path": "/proj/README.md"} if content is None else {"path": "/proj/README.md", "content": content}
    assert call(fmt(), "write", args) == ProgressLine("tool", expected)


@pytest.mark.parametrize("command, expected", [
    ("npm test", "npm test"),
    ("cd /proj && npm test", "npm test"),
    ("cd /proj/ && npm test", "npm test"),
    ('cd "/proj" && npm test', "npm test"),
    ("cd ~/../../proj && npm test", "cd ~/../../proj && npm test"),
    ("cd /proj/web && npm test", "cd /proj/web && npm test"),
    ("cd /proj", "cd /proj"),
    ("python - <<'EOF'\nprint(1)\nEOF", "python - <<'EOF' …"),
    ("echo hi\n\n", "echo hi"),
])
def test_bash_call_shows_the_short_command(command, expected):
    assert call(fmt(), "bash", {"command": command}) == ProgressLine("tool", expected)


def test_bash_cd_into_cwd_via_home_is_removed():
    f = ProgressFormatter("/home/me/proj", home="/home/me")
    assert call(f, "bash", {"command": "cd ~/proj && make"}).text == "make"


def test_bash_command_is_cut_to_the_width():
    line = call(fmt(width=30), "bash", {"command": "grep -rn 'something long' src/ | sort | uniq -c"})
    assert line.text == "grep -rn 'something long' src…"
    assert len(line.text) == 30


def test_bash_without_command_is_generic():
    assert call(fmt(), "bash", {}).text == "Running bash"


def test_unknown_tool_call_is_generic():
    assert call(fmt(), "web_search", {"query": "pi agent"}) == ProgressLine("tool", "Running web_search")


def test_tool_call_with_args_not_a_dict_is_generic():
    assert fmt().format({"type": "tool_call", "id": "c1", "name": "read", "args": None}).text == "Running read"


# -- tool results -----------------------------------------------------------------------------------
def test_read_result_names_the_file():
    f = fmt()
    call(f, "read", {"path": "/proj/src/auth.ts", "offset": 3, "limit": 2})
    assert result(f, "read", "x\ny") == ProgressLine("done", "Finished reading src/auth.ts")


def test_read_failure_gives_pi_reason_with_cwd_paths_shortened():
    f = fmt()
    call(f, "read", {"path": "missing.txt"})
    line = result(f, "read", "ENOENT: no such file or directory, access '/proj/missing.txt'", error=True)
    assert line == ProgressLine(
        "failed", "Read failed: missing.txt — ENOENT: no such file or directory, access 'missing.txt'")


@pytest.mark.parametrize("text, expected", [
    ("src/a.ts:1: auth()\nsrc/b.ts:7: authorize()\nsrc/b.ts:9: x = auth", "Search finished (3 matches)"),
    ("src/a.ts:1: auth()", "Search finished (1 match)"),
    ("src/a.ts-1- before\nsrc/a.ts:2: auth\nsrc/a.ts-3- after", "Search finished (1 match)"),
    ("No matches found", "Search finished (no matches)"),
    ("a:1: x\nb:2: y\n\n[2 matches limit reached. Use limit=4 for more, or refine pattern]",
     "Search finished (at least 2 matches)"),
    ("a:1: x\n\n[Some lines truncated to 500 chars. Use read tool to see full lines]", "Search finished (1 match)"),
    ("something pi did not promise", "Search finished"),
])
def test_grep_result_counts_match_lines(text, expected):
    f = fmt()
    call(f, "grep", {"pattern": "auth"})
    assert result(f, "grep", text) == ProgressLine("done", expected)


def test_grep_result_count_from_shortened_text_is_a_lower_bound():
    rows = [f"src/f{i}.ts:{i}: auth" for i in range(400)]
    text = "\n".join(rows)[: RESULT_TEXT_LIMIT - 1] + "…"  # what events.py keeps of a long result
    complete = text[: text.rfind("\n")].count("\n") + 1
    f = fmt()
    call(f, "grep", {"pattern": "auth"})
    assert result(f, "grep", text).text == f"Search finished (at least {complete} matches)"


def test_grep_failure():
    f = fmt()
    call(f, "grep", {"pattern": "("})
    line = result(f, "grep", "regex parse error:\n    (\n    ^\nerror: unclosed group", error=True)
    assert line == ProgressLine("failed", "Search failed — regex parse error:")


@pytest.mark.parametrize("text, expected", [
    ("a.test.ts\nsrc/b.test.ts\nsrc/c.test.ts", "Scan finished (3 files)"),
    ("src/\nsrc/a.py", "Scan finished (1 file, 1 dir)"),
    ("No files found matching pattern", "Scan finished (no files)"),
    ("a\nb\n\n[2 results limit reached]", "Scan finished (at least 2 files)"),
])
def test_find_result_counts_files(text, expected):
    f = fmt()
    call(f, "find", {"pattern": "*.test.ts"})
    assert result(f, "find", text) == ProgressLine("done", expected)


@pytest.mark.parametrize("text, expected", [
    ("a.ts\nb.ts\nlib/", "Listing finished (2 files, 1 dir)"),
    ("lib/\ndocs/", "Listing finished (2 dirs)"),
    ("(empty directory)", "Listing finished (empty directory)"),
])
def test_ls_result_counts_files_and_dirs(text, expected):
    f = fmt()
    call(f, "ls", {"path": "src/"})
    assert result(f, "ls", text) == ProgressLine("done", expected)


def test_ls_failure_names_the_directory():
    f = fmt()
    call(f, "ls", {"path": "nope"})
    line = result(f, "ls", "Path not found: /proj/nope", error=True)
    assert line == ProgressLine("failed", "Listing failed: nope — Path not found: nope")


def test_edit_result_counts_diff_lines():
    f = fmt()
    call(f, "edit", {"path": "/proj/src/tool.ts", "edits": [{"oldText": "a", "newText": "b"}]})
    diff = " 1 keep\n-2 old\n-3 older\n+2 new\n 4 keep"
    assert result(f, "edit", "Successfully replaced 1 block(s).", details={"diff": diff}) == \
        ProgressLine("done", "Finished editing src/tool.ts (+1 -2)")


def test_edit_result_without_diff_has_no_counts():
    f = fmt()
    call(f, "edit", {"path": "src/tool.ts", "edits": []})
    assert result(f, "edit", "ok").text == "Finished editing src/tool.ts"


def test_edit_result_with_shortened_diff_does_not_guess_counts():
    f = fmt()
    call(f, "edit", {"path": "src/tool.ts", "edits": []})
    diff = ("+1 x\n" * 1000)[: RESULT_TEXT_LIMIT - 1] + "…"
    assert result(f, "edit", "ok", details={"diff": diff}).text == "Finished editing src/tool.ts"


def test_edit_failure_cuts_pi_reason_at_a_sentence_end():
    f = fmt()
    call(f, "edit", {"path": "src/tool.ts", "edits": []})
    reason = ("Could not find the exact text in src/tool.ts. The old text must match exactly including all "
              "whitespace and newlines.")
    assert result(f, "edit", reason, error=True) == \
        ProgressLine("failed", "Edit failed: src/tool.ts — Could not find the exact text in src/tool.ts…")


def test_short_failure_reason_is_kept_whole():
    f = fmt()
    call(f, "edit", {"path": "a.txt", "edits": []})
    assert result(f, "edit", "Found 2 occurrences. Be more specific.", error=True).text == \
        "Edit failed: a.txt — Found 2 occurrences. Be more specific."


def test_write_result_and_failure():
    f = fmt()
    call(f, "write", {"path": "README.md", "content": "x\n"}, id="w1")
    call(f, "write", {"path": "/etc/x", "content": "x\n"}, id="w2")
    assert result(f, "write", "Successfully wrote 2 bytes", id="w1") == \
        ProgressLine("done", "Finished writing README.md")
    assert result(f, "write", "EACCES: permission denied, open '/etc/x'", error=True, id="w2") == \
        ProgressLine("failed", "Write failed: /etc/x — EACCES: permission denied, open '/etc/x'")


def test_bash_result_shows_first_output_line():
    f = fmt()
    call(f, "bash", {"command": "pytest -q"})
    assert result(f, "bash", "\n....  [100%]\n4 passed in 0.1s\n") == \
        ProgressLine("done", "Command finished — ....  [100%]")


def test_bash_result_without_output():
    f = fmt()
    call(f, "bash", {"command": "true"})
    assert result(f, "bash", "(no output)").text == "Command finished (no output)"


def test_bash_failure_uses_pi_exit_status():
    f = fmt()
    call(f, "bash", {"command": "cd /proj && pytest -q"})
    line = result(f, "bash", "F.\n1 failed, 1 passed\n\nCommand exited with code 1", error=True)
    assert line == ProgressLine("failed", "Command failed: pytest -q — exited with code 1")


def test_bash_failure_without_status_uses_first_line():
    f = fmt()
    call(f, "bash", {"command": "echo hi"})
    assert result(f, "bash", "Tool bash not found", error=True).text == \
        "Command failed: echo hi — Tool bash not found"


def test_unknown_tool_results_are_generic():
    f = fmt()
    call(f, "web_search", {"query": "q"}, id="a")
    call(f, "web_search", {"query": "q"}, id="b")
    assert result(f, "web_search", "3 results", id="a") == ProgressLine("done", "web_search finished")
    assert result(f, "web_search", "rate limited\nretry later", error=True, id="b") == \
        ProgressLine("failed", "web_search failed — rate limited")


@pytest.mark.parametrize("error, text, expected", [
    (False, "hello", ProgressLine("done", "read finished")),
    (True, "ENOENT: gone", ProgressLine("failed", "read failed — ENOENT: gone")),
    (True, "", ProgressLine("failed", "read failed")),
])
def test_result_without_remembered_call_is_generic(error, text, expected):
    assert result(fmt(), "read", text, error=error, id="never-seen") == expected


def test_result_of_a_call_without_usable_args_stays_generic():
    f = fmt()
    call(f, "read", {})
    assert result(f, "read", "boom", error=True) == ProgressLine("failed", "read failed — boom")


def test_results_are_matched_to_their_calls_by_id_out_of_order():
    f = fmt()
    call(f, "read", {"path": "a.txt"}, id="1")
    call(f, "read", {"path": "b.txt"}, id="2")
    assert result(f, "read", "", id="2").text == "Finished reading b.txt"
    assert result(f, "read", "", id="1").text == "Finished reading a.txt"
    assert result(f, "read", "", id="1").text == "read finished"  # a call is forgotten once it has its result


def test_failure_line_respects_the_width():
    f = fmt(width=60)
    call(f, "read", {"path": "x"})
    line = result(f, "read", "E" * 200, error=True)
    assert line.text == "Read failed: x — " + "E" * 42 + "…"
    assert len(line.text) == 60


# -- paths ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("path, expected", [
    ("/proj/src/a.ts", "src/a.ts"),
    ("/proj", "."),
    ("/projector/a.ts", "/projector/a.ts"),
    ("/home/me/notes/x.md", "~/notes/x.md"),
    ("/home/meg/x.md", "/home/meg/x.md"),
    ("/etc/hosts", "/etc/hosts"),
    ("src/a.ts", "src/a.ts"),
    ("~/x", "~/x"),
])
def test_paths_are_shown_relative_to_cwd_else_with_home_tilde(path, expected):
    assert fmt().short_path(path) == expected


def test_cwd_inside_home_prefers_relative_then_tilde():
    f = ProgressFormatter("/home/me/proj", home="/home/me")
    assert call(f, "read", {"path": "/home/me/proj/src/a.ts"}).text == "Reading src/a.ts"
    assert call(f, "read", {"path": "/home/me/other/b.ts"}).text == "Reading ~/other/b.ts"


def test_cwd_is_learned_from_the_stream_when_not_given():
    f = ProgressFormatter(home="/home/me")
    assert f.format({"type": "session", "sessionId": "s", "cwd": "/work/app"}) is None
    assert call(f, "edit", {"path": "/work/app/main.py", "edits": []}).text == "Editing main.py"


def test_given_cwd_is_not_replaced_by_the_stream():
    f = fmt()
    f.format({"type": "run_start", "runId": "r", "cwd": "/elsewhere"})
    assert call(f, "read", {"path": "/proj/a.ts"}).text == "Reading a.ts"


# -- other events -----------------------------------------------------------------------------------
def test_error_line():
    assert fmt().format({"type": "error", "message": "500 scripted failure 500"}) == \
        ProgressLine("error", "Error: 500 scripted failure 500")


def test_retry_start_and_exhausted_retry():
    f = fmt()
    assert f.format({"type": "retry", "phase": "start", "attempt": 2, "maxAttempts": 3, "delayMs": 4000,
                     "errorMessage": "429 rate limited"}) == \
        ProgressLine("info", "Retrying after provider error (attempt 2 of 3) — 429 rate limited")
    assert f.format({"type": "retry", "phase": "start", "attempt": 1}) == \
        ProgressLine("info", "Retrying after provider error (attempt 1)")
    assert f.format({"type": "retry", "phase": "end", "success": True, "attempt": 2}) is None
    assert f.format({"type": "retry", "phase": "end", "success": False, "attempt": 3,
                     "finalError": "Retry cancelled"}) == ProgressLine("info", "Stopped retrying — Retry cancelled")


def test_stdout_text_is_an_info_line():
    f = fmt()
    assert f.format({"type": "stdout_text", "text": "Warning: no models configured\n"}) == \
        ProgressLine("info", "Warning: no models configured")
    assert f.format({"type": "stdout_text", "text": "  "}) is None


@pytest.mark.parametrize("event, expected", [
    ({"status": "completed", "exitCode": 0}, ProgressLine("done", "Completed")),
    ({"status": "failed", "exitCode": 0, "errorMessage": "500 scripted failure 500"},
     ProgressLine("failed", "Failed: 500 scripted failure 500")),
    ({"status": "failed", "exitCode": 2}, ProgressLine("failed", "Failed (exit code 2)")),
    ({"status": "aborted", "exitCode": None}, ProgressLine("error", "Aborted")),
    ({"status": "aborted", "errorMessage": "Cancelled by the user"},
     ProgressLine("error", "Aborted: Cancelled by the user")),
])
def test_run_end_lines(event, expected):
    assert fmt().format({"type": "run_end", **event}) == expected


def test_an_aborted_run_names_the_call_it_was_making_when_it_was_stopped():
    """Issue 56: an aborted run's end said nothing of the command it stopped."""
    f = fmt()
    f.format({"type": "tool_call", "id": "c1", "name": "read", "args": {"path": "a.txt"}})
    f.format({"type": "tool_result", "id": "c1", "name": "read", "text": "x"})  # done: not in flight
    f.format({"type": "tool_call", "id": "c2", "name": "bash", "args": {"command": "sleep 120"}})
    assert f.format({"type": "run_end", "status": "aborted", "errorMessage": "cancelled"}) == \
        ProgressLine("error", "Aborted: cancelled — while running: sleep 120")


@pytest.mark.parametrize("event", [
    {"type": "run_start", "runId": "r1", "cwd": "/proj"},
    {"type": "session", "sessionId": "s", "cwd": "/proj"},
    {"type": "turn_start", "turn": 1},
    {"type": "usage", "input": 1, "output": 2},
    {"type": "message_end", "stopReason": "stop"},
    {"type": "pi_event", "piType": "compaction_start", "data": {}},
    {"type": "something_new"},
    {},
])
def test_bookkeeping_events_give_no_line(event):
    assert fmt().format(event) is None


# -- transcript ----------------------------------------------------------------------------------
@pytest.fixture
def utc(monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


META = {"runId": "20260412-212511-ab12", "preset": "scout", "resolvedModel": "openai/gpt-5-mini",
        "cwd": "/proj", "task": "Find the auth flow\nand list its files.\nBe brief.\nThanks\nbye", "name": "scout"}


def test_transcript_header_is_generic_and_complete(utc):
    header = transcript_header(RunRecord.from_json(META), "2026-04-12T21:25:11.075Z")
    assert "Agent:" not in header
    assert header == (
        "Run:     20260412-212511-ab12\n"
        "Preset:  scout\n"
        "Model:   openai/gpt-5-mini\n"
        "Cwd:     /proj\n"
        "Started: 2026-04-12 21:25:11\n"
        "Task:    Find the auth flow\n"
        "         and list its files.\n"
        "         Be brief.\n"
        "         … (2 more lines)\n"
    )


def test_transcript_header_leaves_out_what_is_unknown(utc):
    header = transcript_header(RunRecord(run_id="r1", cwd="/proj", task="do it", created_at="1970-01-01T00:00:00Z"))
    assert header == "Run:     r1\nCwd:     /proj\nStarted: 1970-01-01 00:00:00\nTask:    do it\n"


def test_transcript_line_has_local_time_from_ts(utc):
    event = {"type": "tool_call", "ts": 1776029111.5}
    assert transcript_line(event, ProgressLine("tool", "Reading src/auth.ts")) == "[21:25:11] Reading src/auth.ts"


def test_transcript_line_uses_the_local_timezone(monkeypatch):
    monkeypatch.setenv("TZ", "IST-5:30")  # POSIX form: needs no tzdata
    time.tzset()
    try:
        assert transcript_line({"ts": 0}, ProgressLine("done", "Completed")) == "[05:30:00] Completed"
    finally:
        monkeypatch.undo()
        time.tzset()


def test_transcript_line_marks_failures_and_errors(utc):
    assert transcript_line({"ts": 0}, ProgressLine("failed", "Edit failed: a.txt — nope")) == \
        "[00:00:00] ✗ Edit failed: a.txt — nope"
    assert transcript_line({"ts": 0}, ProgressLine("error", "Error: boom")) == "[00:00:00] ✗ Error: boom"
    assert transcript_line({"ts": 0}, ProgressLine("thinking", "hmm")) == "[00:00:00] thinking: hmm"


def test_transcript_line_keeps_multiline_assistant_text_aligned(utc):
    assert transcript_line({"ts": 0}, ProgressLine("assistant", "Found it.\nNext: tests.")) == \
        "[00:00:00] Found it.\n           Next: tests."


def test_transcript_line_without_ts():
    assert transcript_line({}, ProgressLine("info", "hello")) == "[--:--:--] hello"


# -- recorded pi streams --------------------------------------------------------------------------
def test_fixture_write_edit():
    assert texts(FIXTURES / "run_write_edit.jsonl") == [
        "Writing new.txt (+2 lines)",
        "Finished writing new.txt",
        "Editing new.txt",
        "Finished editing new.txt (+1 -1)",
        "Editing new.txt",
        "Edit failed: new.txt — Could not find the exact text in new.txt…",
        "edited",
    ]


def test_fixture_tools_probe_parallel_calls_and_errors():
    assert texts(FIXTURES / "run_tools_probe_rg.jsonl") == [
        "Listing files",
        "Searching code for hello",
        "Scanning for *.py",
        "echo hi",
        "Command failed: echo hi — Tool bash not found",
        "Listing finished (2 files)",
        "Scan failed — error: Found argument '--no-require-git' which wasn't expected, or isn't valid in thi…",
        "Search finished (1 match)",
        "probed",
    ]


def test_fixture_parallel_reads_use_cwd_from_the_session_header():
    assert texts(FIXTURES / "run_session2_read.jsonl") == [
        "Reading a.txt",
        "Reading missing.txt",
        "Read failed: missing.txt — ENOENT: no such file or directory, access 'missing.txt'",
        "Finished reading a.txt",
        "a.txt contains hello; missing.txt does not exist.",
    ]


def test_fixture_thinking_then_bash():
    f = ProgressFormatter()
    with open(FIXTURES / "run_thinking.jsonl", "rb") as fh:
        lines = [line for e in iter_stream(fh) if (line := f.format(e)) is not None]
    assert lines == [
        ProgressLine("thinking", "The user wants a file listing; I will run ls."),
        ProgressLine("tool", "ls -la"),
        ProgressLine("done", "Command finished — total 16"),
        ProgressLine("assistant", "Done. The directory contains the files shown above."),
    ]


def test_fixture_provider_error():
    f = ProgressFormatter()
    with open(FIXTURES / "run_err500_noretry.jsonl", "rb") as fh:
        lines = [line for e in iter_stream(fh) if (line := f.format(e)) is not None]
    assert lines == [ProgressLine("error", "Error: 500 scripted failure 500")]


def test_fixture_lines_never_show_raw_event_names():
    for path in sorted(FIXTURES.glob("*.jsonl")):
        for text in texts(path):
            assert text and text not in ("tool_call", "tool_result") and not text.startswith("{"), (path.name, text)


# -- boundaries -----------------------------------------------------------------------------------
def test_module_imports_no_notebook_libraries():
    code = ("import sys, nbsubagents._child.formatter; "
            "print(sorted(m for m in ('IPython', 'ipywidgets', 'pandas') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[2])
    assert out.stdout.strip() == "[]"


def test_a_provider_error_is_said_once_not_again_at_the_end():
    f = fmt()
    assert f.format({"type": "error", "message": "500 upstream exploded"}) == \
        ProgressLine("error", "Error: 500 upstream exploded")
    assert f.format({"type": "run_end", "status": "failed", "errorMessage": "500 upstream exploded"}) == \
        ProgressLine("failed", "Failed")
    other = fmt()
    other.format({"type": "error", "message": "500 upstream exploded"})
    assert other.format({"type": "run_end", "status": "failed", "errorMessage": "Timed out after 3s"}) == \
        ProgressLine("failed", "Failed: Timed out after 3s")


@pytest.mark.parametrize("event, expected", [
    ({"type": "user_message", "kind": "steer", "text": "read b.py"}, ProgressLine("info", "you (steer): read b.py")),
    ({"type": "user_message", "kind": "follow_up", "text": "and c"}, ProgressLine("info", "you (follow-up): and c")),
    ({"type": "user_message", "kind": "steer", "text": "read b.py", "disposition": "queued"},
     ProgressLine("info", "you (steer, queued): read b.py")),
    ({"type": "user_message", "kind": "follow_up", "text": "and c", "disposition": "started"},
     ProgressLine("info", "you (follow-up, delivered): and c")),
    ({"type": "user_message", "kind": "steer", "text": "x", "disposition": "handled"},
     ProgressLine("info", "you (steer, taken by an extension): x")),
    ({"type": "question", "method": "select", "title": "Which?", "message": None, "options": ["a", "b"],
      "approval": False}, ProgressLine("info", "Asks: Which? — [a | b]")),
    ({"type": "question", "method": "confirm", "title": "Allow bash?", "message": "rm -rf build", "approval": True},
     ProgressLine("info", "Asks for approval: Allow bash? — rm -rf build")),
    ({"type": "answer", "value": "blue", "by": "person"}, ProgressLine("info", "Answered: blue (you)")),
    ({"type": "answer", "value": None, "by": "timeout"}, ProgressLine("info", "No answer (no reply in time)")),
    ({"type": "answer", "value": False, "by": "policy"},
     ProgressLine("info", "Denied (the policy: no reply in time)")),
    ({"type": "answer", "value": None, "by": "nobody"},  # a headless run's: nobody was asked
     ProgressLine("info", "No answer: nobody to ask here (set question_timeout or answer with `nbsubagents answer …`)")),
    ({"type": "answer", "value": False, "by": "nobody"}, ProgressLine(
        "info", "Denied by the policy: nobody to ask here (set question_timeout or answer with `nbsubagents approve …`)")),
    ({"type": "notice", "text": "saved"}, ProgressLine("info", "saved")),
    ({"type": "model_fallback", "from": "a/x", "to": "b/y", "error": "429 slow\nmore"},
     ProgressLine("error", "a/x failed — 429 slow; going on with b/y")),
    ({"type": "session_stats", "contextTokens": 5, "contextWindow": 10, "contextPercent": 50.0, "tokens": 5,
      "cost": 0}, None),
])
def test_the_conversation_in_words(event, expected):
    assert ProgressFormatter().format(event) == expected
