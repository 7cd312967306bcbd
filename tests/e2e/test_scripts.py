"""nbsubagents in plain Python scripts behaves like a Unix tool: progress and notices on stderr, stdout left
to the script, a closed pipe ends output quietly, ``show=False`` / ``NBSUBAGENTS_DISPLAY=none`` silence it.

Each test runs a real script (real pi, scripted model) with its stdout piped into a real consumer process.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent("""
    import json, sys
    import nbsubagents

    SHOW = sys.argv[1] == "show"
    one = nbsubagents.run("scout", "read README.md\\nls src", show=SHOW)
    many = nbsubagents.run_parallel([
        {"preset": "scout", "task": "read src/app.py", "name": "reader"},
        {"preset": "scout", "task": "run: echo parallel", "name": "runner"},
    ], concurrency=2, show=SHOW)
    job = nbsubagents.start("scout", "sleep: 1\\nrun: echo background", name="bg", show=SHOW)
    job.wait()
    runs = [one, *many, job]
    print(json.dumps({"runs": [{"name": r.name, "status": r.status, "output": r.output} for r in runs]}))
""")

CONSUMER = "import json, sys; data = json.load(sys.stdin); print(sorted(r['status'] for r in data['runs']))"


@pytest.fixture
def script(project, monkeypatch):
    path = project / "delegate.py"
    path.write_text(SCRIPT)
    monkeypatch.delenv("NBSUBAGENTS_DISPLAY", raising=False)
    return path


def pipe(script_argv: list[str], consumer_argv: list[str], *, stderr_to_consumer: bool = False,
         env: dict[str, str] | None = None) -> tuple[int, str, int, bytes]:
    """Run ``script | consumer`` (or ``script 2>| consumer``): script's rc and stderr (or stdout), consumer's."""
    consumer = subprocess.Popen(consumer_argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    kwargs = {"stderr": consumer.stdin, "stdout": subprocess.PIPE} if stderr_to_consumer else \
        {"stdout": consumer.stdin, "stderr": subprocess.PIPE}
    producer = subprocess.Popen(script_argv, stdin=subprocess.DEVNULL, env=env or dict(os.environ), **kwargs)
    consumer.stdin.close()  # only the producer holds the pipe now: the consumer's exit closes it
    kept = producer.stdout if stderr_to_consumer else producer.stderr
    other = kept.read().decode()
    producer.wait(240)
    consumed = consumer.stdout.read()
    consumer.wait(30)
    return producer.returncode, other, consumer.returncode, consumed


def test_a_script_piped_into_a_json_consumer_keeps_stdout_for_its_json_and_progress_on_stderr(script):
    rc, stderr, consumer_rc, consumed = pipe([sys.executable, str(script), "show"], [sys.executable, "-c", CONSUMER])
    assert rc == 0 and consumer_rc == 0, stderr
    assert consumed.decode().strip() == "['completed', 'completed', 'completed', 'completed']"
    # the progress a person watches, all on stderr: each run's start, its lines, its summary, the notice
    for line in ("▶ scout (demo/scripted): read README.md", "Reading README.md", "[reader] Reading src/app.py",
                 "[runner] echo parallel", "▶ bg (demo/scripted): sleep: 1", "✓ bg completed",
                 "✓ background run bg "):
        assert line in stderr, stderr
    assert "Traceback" not in stderr


def test_a_script_piped_into_head_ends_quietly(script):
    rc, stderr, head_rc, first = pipe([sys.executable, str(script), "show"], ["head", "-1"])
    assert rc == 0 and head_rc == 0, stderr
    assert first.decode().startswith('{"runs": [{"name": "scout", "status": "completed"')
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr


def test_a_closed_progress_stream_ends_the_progress_not_the_script(script):
    """stderr into ``head -1``: the first progress line gets through, then the pipe closes; the runs and the
    script's JSON on stdout are untouched."""
    rc, stdout, head_rc, first = pipe([sys.executable, str(script), "show"], ["head", "-1"], stderr_to_consumer=True)
    assert rc == 0 and head_rc == 0
    assert first.decode().startswith("▶ scout (demo/scripted)")
    assert stdout.count('"status": "completed"') == 4, stdout


@pytest.mark.parametrize("how", ["show=False", "NBSUBAGENTS_DISPLAY=none"])
def test_show_false_and_display_none_silence_everything(script, how):
    env = dict(os.environ)
    if how == "NBSUBAGENTS_DISPLAY=none":
        env["NBSUBAGENTS_DISPLAY"] = "none"
    proc = subprocess.run([sys.executable, str(script), "show" if how != "show=False" else "quiet"],
                          capture_output=True, text=True, timeout=240, env=env, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert proc.stdout.count('"status": "completed"') == 4 and proc.stdout.count("\n") == 1


# -- the text view ------------------------------------------------------------------------------------
def test_text_view_prints_every_line_of_a_short_run_and_folds_a_flood_on_its_own_line(tmp_path):
    import io
    import json

    from nbsubagents._child.formatter import ProgressLine
    from nbsubagents._ui.renderers import TextRenderer
    from nbsubagents._lifecycle.handle import Run

    run_dir = tmp_path / "r1"
    run_dir.mkdir()
    (run_dir / "meta.json").write_text(json.dumps({"runId": "r1", "name": "scout", "resolvedModel": "m", "task": "t"}))
    (run_dir / "result.json").write_text(json.dumps({"status": "completed", "toolCalls": 3, "durationSeconds": 1.0}))
    run = Run(run_dir)

    out = io.StringIO()
    short = TextRenderer(out)
    short.start([run])
    for i in range(40):  # all at once, as a burst of events read in one go
        short.event(run, {"type": "tool_call"}, ProgressLine("tool", f"Reading f{i}.py"))
    short.end(run)
    lines = out.getvalue().splitlines()
    assert lines[1:41] == [f"Reading f{i}.py" for i in range(40)] and "folded" not in out.getvalue()

    out = io.StringIO()
    flood = TextRenderer(out, rate=20, burst=10)
    flood.start([run])
    for i in range(100):
        flood.event(run, {"type": "tool_call"}, ProgressLine("tool", f"Reading f{i}.py"))
    flood.event(run, {"type": "assistant_text"}, ProgressLine("assistant", "Found it"))
    for i in range(100, 105):
        flood.event(run, {"type": "tool_call"}, ProgressLine("tool", f"Reading f{i}.py"))
    flood.end(run)
    lines = out.getvalue().splitlines()
    assert lines[1:11] == [f"Reading f{i}.py" for i in range(10)]
    # the fold is said where the lines were left out, before the next printed line, and before the summary
    assert lines[11] == "… 90 lines folded (run.transcript has every line)" and lines[12] == "Found it"
    assert lines[13] == "… 5 lines folded (run.transcript has every line)"
    assert lines[14].startswith("✓ scout completed in 1.0s")
    assert len(lines) == 15
