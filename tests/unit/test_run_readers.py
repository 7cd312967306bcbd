"""The readers of a run's files (``child.artifacts``): a FIFO or device is never opened for a read that waits, a file
read whole has a bound, and a line over its bound is given cut, with the line after it read as usual."""

from __future__ import annotations

import json
import os

import pytest

from nbsubagents._child import artifacts
from nbsubagents._child.artifacts import EventTail, Lines, NotAFile, open_regular, read_events, read_json, read_text


def test_a_fifo_a_device_or_a_folder_is_refused_at_once_and_a_link_to_a_file_is_read(tmp_path):
    os.mkfifo(tmp_path / "result.json")
    (tmp_path / "real.json").write_text('{"status": "completed"}')
    (tmp_path / "meta.json").symlink_to(tmp_path / "real.json")
    (tmp_path / "zero.json").symlink_to("/dev/zero")
    with pytest.raises(NotAFile, match="result.json is a FIFO, not a regular file: not read"):
        open_regular(tmp_path / "result.json")
    assert read_json(tmp_path / "result.json") is None and read_json(tmp_path / "zero.json") is None
    assert read_json(tmp_path / "meta.json") == {"status": "completed"}  # through a link, as before
    assert list(read_events(tmp_path / "result.json")) == [] and list(read_events(tmp_path)) == []
    assert artifacts.unreadable(tmp_path) == ["result.json is a FIFO, not a regular file: not read",
                                              "zero.json is a device, not a regular file: not read"]


def test_a_file_over_the_bound_is_not_read_as_json_and_text_is_cut_with_a_marker(tmp_path):
    (tmp_path / "result.json").write_text(json.dumps({"finalText": "x" * 100}))
    (tmp_path / "transcript.log").write_text("a" * 100)
    with pytest.raises(OSError, match="result.json is over 50 bytes: not read"):
        artifacts.read_bytes(tmp_path / "result.json", limit=50)
    assert read_text(tmp_path / "transcript.log", limit=10) == "a" * 10 + "\n[cut] transcript.log is read up to 10 bytes"
    assert read_text(tmp_path / "transcript.log") == "a" * 100


def test_a_line_over_the_bound_is_given_cut_and_never_held_whole():
    lines = Lines(limit=10)
    got = lines.feed(b'{"a": 1}\n{"text": "' + b"y" * 5) + lines.feed(b"y" * 30) + lines.feed(b'"}\n{"b": 2}\n{"c"')
    assert got[0] == b'{"a": 1}' and got[2] == b'{"b": 2}'
    assert got[1] == {"type": "notice", "text": '{"text": "yyyyy… [cut] a line of 47 bytes in events.jsonl, over the '
                                                '10 bytes a line is read up to'}
    assert lines.held <= 10 and lines.feed(b": 3}\n") == [b'{"c": 3}']  # the torn end waited for the rest


def test_the_tail_of_a_growing_events_file_cuts_a_huge_line_and_reads_on(tmp_path, monkeypatch):
    monkeypatch.setattr(artifacts, "CHUNK", 64)  # the 5,000 bytes come in many reads
    path = tmp_path / "events.jsonl"
    path.write_bytes(b'{"type": "turn_start"}\n' + b"z" * 5000)
    tail = EventTail(path)
    tail._lines.limit = 1000
    assert [e["type"] for e in tail.read_new()] == ["turn_start"]
    with open(path, "ab") as fh:
        fh.write(b'\n{"type": "run_end"}\n')
    events = tail.read_new()
    assert [e["type"] for e in events] == ["notice", "run_end"]
    assert "[cut] a line of 4.88 KiB in events.jsonl" in events[0]["text"]


def test_the_supervisors_writers_never_wait_on_a_fifo_nor_write_through_a_link(tmp_path):
    """A child (unsandboxed, or a harness binary) may put a FIFO or a link where the supervisor appends or rewrites:
    the append fails at once (the Sink stops, the run goes on) and a rewrite replaces the link, never its target."""
    from nbsubagents._child.run_files import Sink, mask_file, touch

    outside = tmp_path / "bashrc"
    outside.write_text("mine: sk-secret\n")
    os.mkfifo(tmp_path / "stdout.log")
    (tmp_path / "events.jsonl").symlink_to(outside)
    (tmp_path / "stderr.log").symlink_to(outside)
    for name in ("stdout.log", "events.jsonl"):
        sink = Sink(tmp_path / name)
        sink.write(b"line\n")  # would block for ever on the FIFO, or append to bashrc through the link
        sink.close()
        assert sink.fh is None
    with pytest.raises(OSError):
        touch(tmp_path / "events.jsonl")
    mask_file(tmp_path / "stderr.log", lambda text: text.replace("sk-secret", "••••"))
    assert outside.read_text() == "mine: sk-secret\n"  # the target is as it was
    assert not (tmp_path / "stderr.log").is_symlink() and (tmp_path / "stderr.log").read_text() == "mine: ••••\n"
    assert os.listdir(tmp_path).count("stdout.log") == 1 and len(os.listdir(tmp_path)) == 4  # no temporary left
