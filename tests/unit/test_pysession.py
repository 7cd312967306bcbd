"""The Python session's tool server (python_session): a real process, spoken to over its pipes as a harness does."""

import json
import os
import subprocess

import numpy as np
import pandas as pd

from nbsubagents._child import pysession


def session(run_dir, codes, cwd):
    """The server the kernel would give a run in ``run_dir``, asked to run each code in turn; its replies by id."""
    server = pysession.server(run_dir, "run-x")
    messages = [{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18"}},
                {"jsonrpc": "2.0", "id": "list", "method": "tools/list"}]
    messages += [{"jsonrpc": "2.0", "id": i, "method": "tools/call",
                  "params": {"name": "python", "arguments": {"code": code}}} for i, code in enumerate(codes, 1)]
    lines = "".join(json.dumps(m) + "\n" for m in messages)
    done = subprocess.run(list(server.argv), input=lines, capture_output=True, text=True, timeout=120, cwd=cwd,
                          env={**os.environ, **server.env})
    assert done.returncode == 0, done.stderr
    return {r["id"]: r["result"] for r in map(json.loads, done.stdout.splitlines())}


def text(reply):
    return reply["content"][0]["text"]


def test_the_session_keeps_state_loads_the_inputs_and_keeps_its_stream_clean(tmp_path):
    run_dir, work = tmp_path / "run", tmp_path / "work"
    (run_dir / "inputs").mkdir(parents=True)
    work.mkdir()
    pd.DataFrame({"a": [1, 2, 3]}).to_parquet(run_dir / "inputs" / "df.parquet")
    (run_dir / "inputs" / "df.md").write_text("# df: a card\n")  # a card beside its input is no variable
    np.save(run_dir / "inputs" / "x.npy", np.arange(4))
    (run_dir / "inputs" / "params.json").write_text('{"k": 2}')
    (run_dir / "inputs" / "data").symlink_to(work)
    replies = session(run_dir, [
        "n = int(x.sum()) * params['k']\nprint('n is', n)",
        "import os, subprocess\nos.system('echo from-a-shell')\nsubprocess.run(['echo', 'from-a-child'])\n"
        "print(input.__name__, os.getcwd())\nn += 1",
        "n, type(data).__name__, str(data) == os.getcwd()",
        "df.assign(b=df.a * n)",
    ], cwd=work)
    tool = replies["list"]["tools"][0]
    assert tool["name"] == "python" and "data, df, params, x" in tool["description"]
    first = text(replies[1])
    assert "Inputs loaded as variables:" in first and "df: DataFrame 3×1 (from inputs/df.parquet)" in first
    assert "x: ndarray 4" in first and "params: dict of 1" in first and "n is 12" in first
    assert "from-a-shell" in text(replies[2]) and "from-a-child" in text(replies[2])  # fd 1 of a child: captured
    assert f"input {work}" in text(replies[2])  # the child's folder is the session's
    assert text(replies[3]) == "Out[3]: (13, 'PosixPath', True)"  # state across three calls
    assert "b" in text(replies[4]) and "39" in text(replies[4])  # 3 * 13: the table of a DataFrame
    assert not any(r["isError"] for r in replies.values() if "isError" in r)


def test_errors_are_error_results_and_the_session_goes_on_figures_are_saved(tmp_path):
    replies = session(tmp_path, [
        "y = 1\n1 / 0",
        "def broken(:",
        "raise SystemExit(3)",
        "input()",
        "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.figure()\nplt.bar([1], [2])\ny + 1",
        "plt.get_fignums()",
        "import sys\nfor i in range(200_000): sys.stdout.write(f'line {i}\\n')",
    ], cwd=tmp_path)
    assert replies[1]["isError"] and "ZeroDivisionError: division by zero" in text(replies[1])
    assert 'File "<python>", line 2' in text(replies[1]) and "pysession" not in text(replies[1])
    assert replies[2]["isError"] and "SyntaxError" in text(replies[2])
    assert replies[3]["isError"] and "SystemExit: 3" in text(replies[3])  # the session is not ended by its code
    assert replies[4]["isError"] and "EOFError" in text(replies[4])  # no stdin: the MCP stream is not its input
    figures = [tmp_path / "python" / "figure-1.png", tmp_path / "python" / "figure-2.png"]
    assert not replies[5]["isError"] and "Out[5]: 2" in text(replies[5])
    for figure in figures:
        assert f"Figure saved: {figure}" in text(replies[5])
        assert figure.read_bytes().startswith(b"\x89PNG")
    assert replies[5]["_meta"]["nbsubagents/details"]["figures"] == ", ".join(map(str, figures))
    assert text(replies[6]) == "Out[6]: []"  # saved figures are closed
    long = text(replies[7])  # 2.6 MB printed: its head and tail
    assert long.startswith("line 0\n") and long.endswith("line 199999") and "left out" in long
    assert len(long) < 2 * pysession.OUTPUT_LIMIT


def test_the_server_is_the_kernel_s_interpreter_marked_as_its_run_s():
    server = pysession.server("/runs/r1", "r1")
    assert server.name == "python" and server.tools == ("python",) and server.writes == {"python": "folder"}
    assert server.argv[-1] == "/runs/r1" and server.env["PI_SUBAGENTS_RUN_ID"] == "r1"
    assert server.env["MPLBACKEND"] == "Agg"
    assert type(server).from_json(json.loads(json.dumps(server.as_json()))) == server


def test_the_inputs_are_those_the_run_s_record_lists_by_their_kind(tmp_path):
    run_dir = tmp_path / "run"
    (run_dir / "inputs" / "raw").mkdir(parents=True)
    pd.DataFrame({"v": [1.5, None]}).to_parquet(run_dir / "inputs" / "my-df.parquet")
    (run_dir / "inputs" / "notes.txt").write_text("hello")
    (run_dir / "inputs" / "stray.json").write_text("[1]")  # not in the record: not an input
    entries = [{"name": "my-df", "kind": "dataframe", "file": str(run_dir / "inputs" / "my-df.parquet")},
               {"name": "notes", "kind": "text", "file": str(run_dir / "inputs" / "notes.txt")},
               {"name": "raw", "kind": "path", "file": str(run_dir / "inputs" / "raw")},
               {"name": "class", "kind": "text", "file": str(run_dir / "inputs" / "notes.txt")}]  # no variable name
    (run_dir / "meta.json").write_text(json.dumps({"runId": "run", "inputs": entries}))
    replies = session(run_dir, ["my_df.v.isna().sum(), notes, raw.is_dir(), 'stray' in dir()"], cwd=tmp_path)
    assert "Out[1]: (np.int64(1), 'hello', True, False)" in text(replies[1])
    assert "my_df: DataFrame 2×1" in text(replies[1]) and "class" not in text(replies[1])
    assert replies["list"]["tools"][0]["description"].endswith("loaded as variables: my_df, notes, raw.")
