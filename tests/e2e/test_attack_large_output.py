"""Issue 53, item 7: a large tool argument on the pinned pi 0.73.1.

pi 0.73.1 wrote the whole message so far into each streaming ``message_update``: a 50 KB file written by the model
left a 212 MB ``stdout.log``, and at 100 KB node's write queue passed 2 GiB and pi died (``ENOBUFS``). The real
pi (both pinned versions) writes a 100 KB file, streamed by the scripted model in 24-character deltas: the run
completes and its logs stay a small multiple of the content.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from faults import files_of, model, proj, record  # noqa: F401 (fixtures)
from helpers import REPO, SCRIBE

import nbsubagents
from nbsubagents import _config as config
from nbsubagents._child import verdict
from nbsubagents._child.events import Tally

pytestmark = pytest.mark.faults

PIS = {"pi-0.x": REPO / "node_modules" / ".bin" / "pi", "pi-1.x": REPO / "pi1" / "node_modules" / ".bin" / "pi"}
SIZE = 100_000


@pytest.fixture(params=sorted(PIS))
def pi(request, monkeypatch):
    monkeypatch.setenv("NBSUBAGENTS_PI", str(PIS[request.param]))
    config.reset()
    return request.param


def test_a_100_kb_file_written_by_the_model_completes_with_linear_logs(proj, pi):
    (proj / ".pi" / "subagents" / "scribe.md").write_text(SCRIBE)
    before = files_of(proj)
    content = "0123456789abcdef" * (SIZE // 16)
    run = nbsubagents.run("scribe", f"write big.txt: {content}", show=False, timeout=600)
    assert run.status == "completed", run.error
    assert (proj / "big.txt").read_text() == content + "\n"
    sizes = {name: (run.dir / name).stat().st_size for name in ("stdout.log", "events.jsonl", "transcript.log")}
    assert all(size < 10 * SIZE for size in sizes.values()), sizes  # the task and the call's arguments, a few times
    assert b'"type":"message_end"' in (run.dir / "stdout.log").read_bytes()  # pi's own record is still there
    (proj / "big.txt").unlink()  # what the task asked for; nothing else of the project may change
    assert record(f"100 KB write ({pi})", proj, [run], before=before) == []


def test_a_child_that_could_not_write_its_stream_says_why(tmp_path):
    stderr = tmp_path / "stderr.log"
    stderr.write_text("node:events:502\n      throw er;\nError: write ENOBUFS\n  errno: -105,\n  code: 'ENOBUFS',\n"
                      "\nNode.js v20.20.2\n")
    status, error = verdict.judge(Tally(), None, "pi", 1, Path(stderr))
    assert status == "failed" and error.startswith("pi exited with code 1: it could not write its output stream")
    assert "ENOBUFS" in error and "pi 1.x" in error and "smaller parts" in error
