"""Issue 55 item 7 on a real Dask ``LocalCluster`` (worker processes) of one run slot: a sweep's counts come from
its runs (a run the cluster holds back is queued, not running, however many were submitted) and its time left
divides the work by the cluster's slots, not by the concurrency asked. The real pi against the scripted model."""

from __future__ import annotations

import io
import time

import pytest

distributed = pytest.importorskip("distributed", reason="the dask extra: pip install -e '.[dask]'")

from helpers import PI, SCOUT, processes_inside, wait_for  # noqa: E402

import nbsubagents  # noqa: E402
from nbsubagents import _config as config  # noqa: E402
from nbsubagents._child.harnesses.pi import write_agent_dir  # noqa: E402
from nbsubagents._lifecycle import dask_cluster, watcher  # noqa: E402
from nbsubagents._pi.scripted import ScriptedModel  # noqa: E402
from nbsubagents._sweeps.progress import SweepState, SweepTextRenderer  # noqa: E402

pytestmark = pytest.mark.dask

NOW = 1_000_000.0


@pytest.fixture
def one_slot(tmp_path, monkeypatch):
    """A project, the scripted model and a LocalCluster of one worker process that takes one run at a time."""
    root = tmp_path / "project"
    (root / ".pi" / "subagents").mkdir(parents=True)
    (root / ".pi" / "subagents" / "scout.md").write_text(SCOUT)
    (root / "README.md").write_text("# Demo project\n")
    with ScriptedModel() as model:
        monkeypatch.setenv("PI_CODING_AGENT_DIR", str(write_agent_dir(tmp_path / "agent", model.url)))
        monkeypatch.setenv("PI_OFFLINE", "1")
        monkeypatch.setenv("NBSUBAGENTS_PI", str(PI))
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
        monkeypatch.delenv("NBSUBAGENTS_ROOT", raising=False)
        config.reset()
        with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                      resources={dask_cluster.RESOURCE: 1}, local_directory=str(tmp_path / "w"),
                                      dashboard_address=None) as lc, distributed.Client(lc) as client:
            monkeypatch.chdir(root)
            yield client
        config.reset()
    watcher.stop()
    deadline = time.monotonic() + 10
    while processes_inside(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processes_inside(tmp_path) == [], "the cluster's runs left processes behind"


def test_a_sweeps_counts_and_time_left_follow_the_clusters_slots_not_the_concurrency_asked(one_slot):
    client = one_slot
    done = nbsubagents.start("scout", "read README.md", executor="dask", dask_client=client, show=False)
    done.wait(120)
    assert done.status == "completed"
    took = done.result["durationSeconds"]
    held = nbsubagents.start("scout", "run: sleep 60", executor="dask", dask_client=client, show=False)
    behind = nbsubagents.start("scout", "read README.md", executor="dask", dask_client=client, show=False)
    try:
        wait_for(lambda: (held.dir / "supervisor.json").exists(), what="the slot taken")
        assert behind.process is not None and behind.status == "queued"  # submitted, held back by the cluster

        state = SweepState([done, held, behind], title="Experiment x", concurrency=40, clock=lambda: NOW)
        state.end(done)
        state.refresh()
        assert state.counts() == {"running": 1, "queued": 1, "completed": 1}  # as the runs say, not as launched
        assert state.slots == 1
        # one queued run's mean and what is left of the running one's (it started now): one slot does them in turn
        assert state.time_left() == pytest.approx(2 * took)

        out = io.StringIO()
        SweepTextRenderer(title="Experiment x", concurrency=40, stream=out).start([held, behind])
        assert out.getvalue().splitlines()[0] == "▶ Experiment x: 2 runs, at most 1 at once"
    finally:
        for run in (held, behind):
            run.cancel()
        for run in (held, behind):
            run.wait(60)
