"""Runs on a Dask cluster (``executor="dask"``): the ``DaskLauncher`` and its task (the cluster's check:
``dask_cluster``).

The notebook's side submits one task per run. The task, on a worker, starts the same supervisor as the process
launcher (``python -m nbsubagents._child.supervisor RUN_DIR``) as its child and waits for it, so everything else
stays as it is: the run directory, on storage the notebook and every worker see, is the source of truth; panels
follow ``events.jsonl`` and the registry (written only by the notebook's side) ingests ``result.json``.

- Capacity: a worker started with ``resources={"nbsubagents": N}`` is handed at most N runs at once; without that
  resource on any worker, a worker's threads bound it (each run holds one while it lasts).
- A run starts once: the task claims it (``worker.json``, written exclusively) before starting the supervisor, so
  a task that Dask resubmits after its worker died starts the run only if the earlier attempt had not.
- Liveness is the supervisor's ``heartbeat`` file (a pid means nothing on another machine) plus the future's
  state; a run whose worker died ends ``failed: interrupted (worker lost)``, never stays running. The supervisor
  itself ends its run that way when it outlives its worker (``child.supervisor``).
- Cancel: the ``cancel.json`` request file, which the supervisor polls, plus cancelling the future of a queued run.
  A queued run whose scheduler cannot be reached is settled cancelled at once (it can never start); a started
  one whose supervisor is gone is settled as lost (``aborted``: a cancel was asked).
- A queued run whose scheduler is gone (the kernel that owned a ``LocalCluster`` died, the scheduler stopped):
  its tasks went with it, so once no worker claimed the run, its scheduler is unreachable and the run folder has
  shown no sign of life for ``SCHEDULER_GRACE`` seconds (a network blip is not the end), the first reader that
  looks (a kernel, ``nbsubagents status``) settles it ``failed`` without having started. The sign of life is
  ``dask.json``'s time: written at submit, touched by every reader that finds the scheduler there. The grace is
  the run folder's, not a reader's: a short CLI call settles a run as a long-lived kernel does.
- The kernel may die: every future is ``fire_and_forget``, so queued runs still run and running ones finish.

``distributed`` is imported only here and only when used: ``import nbsubagents`` does not load Dask.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import threading
import time
import warnings
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from .. import _registry as registry
from .._child import keys
from .._child.artifacts import RunPaths, atomic_write_json, now_iso, read_json
from .._child.procs import alive, process_start_ticks
from .._child.record import RunRecord, load
from .._child.supervisor import HEARTBEAT_FILE
from .._config import NbSubagentsError, current
from . import settle
from .dask_cluster import HOST, RESOURCE, programs_of, require_cluster, run_workers
from .process import start_supervisor

if TYPE_CHECKING:
    from .handle import Run

__all__ = ["SCHEDULER_GRACE", "DaskLauncher", "scheduler_gone", "DaskProcess", "run_supervisor", "liveness",
           "client_for", "bind", "cancel"]

CLAIM = "worker.json"     # written by the task that starts the run (its worker, host, pid)
SUBMITTED = "dask.json"   # written at submit: scheduler address and task key
STALE = 60.0              # seconds without a heartbeat after which a remote supervisor counts as gone
CHECK_EVERY = 1.0         # seconds between liveness looks at a started run whose future says nothing
SCHEDULER_GRACE = 10.0    # seconds a queued run's scheduler may stay unreachable before the run is settled
PROBE_TIMEOUT = 1.0       # seconds a connection to a scheduler may take
WORKERS_FRESH = 1.0       # seconds the starts that follow reuse a client's list of workers (a call's runs share it)

_bound: dict[str, Any] = {}       # run id -> the client its call named (dask_client=)
_by_address: dict[str, Any] = {}  # scheduler address (the dask_scheduler setting) -> this process's client
_probed: dict[str, tuple[float, bool]] = {}  # scheduler address -> (when, reachable): one probe a second
_listed: weakref.WeakKeyDictionary[Any, tuple[float, dict[str, dict[str, Any]]]] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


# -- the task, on a worker ----------------------------------------------------------------------
def run_supervisor(run_dir: str, secret: bytes | None = None) -> dict[str, Any]:
    """Start the run's supervisor on this worker and wait for it; runs as a Dask task. ``secret``: the run's key
    (``child.keys``), carried in the task (the worker may be another machine), kept in this worker's key folder
    for the supervisor to read.

    Returns what happened: ``ran`` (with the supervisor's exit code), ``elsewhere`` (an earlier attempt had
    started it), ``cancelled`` (a cancel arrived while it was queued) or ``settled`` (it already had a result).
    """
    paths = RunPaths(Path(run_dir))
    record = load(paths.dir)
    if record is None:
        worker = _worker_address()  # several workers share a host: which one
        raise NbSubagentsError(f"Dask worker {worker + ' ' if worker else ''}on {HOST} cannot read {paths.meta}: "
                               "the run directory must be on "
                               "storage the notebook and every worker see (the project folder on a shared "
                               "filesystem, at the same path)")
    if paths.result.exists():
        return {"state": "settled"}
    if settle.cancel_requested(paths):
        settle.cancelled_before_start(paths, record)
        return {"state": "cancelled"}
    claim = {"host": HOST, "pid": os.getpid(), "startTicks": process_start_ticks(os.getpid()),
             "worker": _worker_address(), "claimedAt": now_iso()}
    if not atomic_write_json(paths.dir / CLAIM, claim, exclusive=True):
        return {"state": "elsewhere"}  # a resubmission of a run that had started: never twice
    if secret is not None:
        keys.create(paths.dir.name, secret)
    # The supervisor ends its run if its parent, this worker, dies.
    proc = start_supervisor(paths.dir, record.cwd, end_with_parent=True)
    return {"state": "ran", "exitCode": proc.wait(), "host": HOST}


def _worker_address() -> str | None:
    try:
        from distributed import get_worker
        return get_worker().address
    except (ImportError, ValueError):
        return None


# -- liveness from the run directory ------------------------------------------------------------
def liveness(paths: RunPaths, stale: float | None = None) -> str:
    """``ended`` (a result), ``queued`` (no worker took it yet), ``live`` or ``gone`` (its supervisor, or the
    worker that claimed it, stopped without a result: a dead pid on this host, else a stale heartbeat)."""
    stale = STALE if stale is None else stale
    if paths.result.exists():
        return "ended"
    sup = read_json(paths.supervisor)
    if sup and sup.get("host") == HOST and sup.get("pid") is not None:
        state = "live" if alive(sup.get("pid"), sup.get("startTicks")) else "gone"
        return "ended" if state == "gone" and paths.result.exists() else state  # it writes the result, then exits
    beat = _age(paths.dir / HEARTBEAT_FILE)
    if beat is not None:
        return "live" if beat < stale else ("ended" if paths.result.exists() else "gone")
    claim_age = _age(paths.dir / CLAIM)
    if claim_age is None:
        return "queued"
    claim = read_json(paths.dir / CLAIM) or {}
    if claim.get("host") == HOST and not alive(claim.get("pid"), claim.get("startTicks")):
        return "gone"  # its worker died before the supervisor got going
    return "live" if claim_age < stale else "gone"


def _reachable(address: str, submitter: dict[str, Any]) -> bool:
    """Whether the scheduler at ``address`` can be reached from here: a TCP connection (cached for a second);
    an in-process scheduler (``inproc://``) lives as long as the process that submitted the run."""
    now = time.monotonic()
    with _lock:
        seen = _probed.get(address)
    if seen is not None and now - seen[0] < 1.0:
        return seen[1]
    scheme, _, rest = address.rpartition("://")
    if scheme == "inproc":
        ok = alive(submitter.get("pid"), submitter.get("startTicks"))
    else:
        host, _, port = rest.rpartition(":")
        try:
            with socket.create_connection((host.strip("[]") or "127.0.0.1", int(port)), timeout=PROBE_TIMEOUT):
                ok = True
        except (OSError, ValueError):
            ok = False
    with _lock:
        _probed[address] = (time.monotonic(), ok)
    return ok


def scheduler_gone(paths: RunPaths, record: RunRecord, grace: float | None = None) -> str | None:
    """Why a run no worker has claimed can never start (its scheduler unreachable now and not seen for ``grace``
    seconds by any reader, as ``dask.json``'s time says; or it was never submitted and the process that queued it
    is gone), else None. ``grace=0``: unreachable now."""
    grace = SCHEDULER_GRACE if grace is None else grace
    if (paths.dir / CLAIM).exists() or paths.result.exists():
        return None
    stamp = paths.dir / SUBMITTED
    submitted = read_json(stamp) or {}
    address = submitted.get("scheduler")
    queuer = record.launcher or {}
    if not address:  # never submitted: only a dead process that queued it says it never will be
        if queuer and not alive(queuer.get("pid"), queuer.get("startTicks")) and \
                registry.age(record.created_at) > SCHEDULER_GRACE:
            return "the process that queued it exited before submitting it"
        return None
    if _reachable(address, queuer):
        _seen(stamp)
        return None
    quiet = _age(stamp)  # since the run was submitted or a reader last found its scheduler
    if quiet is not None and quiet < grace:
        return None
    return f"its Dask scheduler {address} cannot be reached (its tasks went with it)"


def _seen(stamp: Path) -> None:
    """The run's scheduler was there just now: ``dask.json``'s time says so to every reader (touched at most every
    quarter of the grace, so a run settles within 1.25 grace of its scheduler's end)."""
    age = _age(stamp)
    if age is not None and age >= SCHEDULER_GRACE / 4:
        try:
            os.utime(stamp)
        except OSError:
            pass  # a read-only folder: the grace counts from the submit, as it would with no reader


def _settle_unstartable(paths: RunPaths, record: RunRecord, why: str) -> None:
    settle.never_ran(paths, record, "failed", f"never started: {why}")


def _age(path: Path) -> float | None:
    try:
        return time.time() - path.stat().st_mtime
    except OSError:
        return None


# -- the handle of a submitted run --------------------------------------------------------------
class DaskProcess:
    """A run's Dask future seen through the ``Process`` subset the kernel's side uses."""

    def __init__(self, future: Any, paths: RunPaths, record: RunRecord) -> None:
        self.future = future
        self.paths = paths
        self.record = record
        self.returncode: int | None = None
        self._next_check = 0.0

    def poll(self) -> int | None:
        if self.returncode is not None:
            return self.returncode
        if self.paths.result.exists():
            self.returncode = 0
            return self.returncode
        status = self.future.status
        if status == "pending" and time.monotonic() < self._next_check:
            # Queued or running, as it was a moment ago: its end shows in result.json or its future, the rest (a
            # claim, a cancel asked from elsewhere, its scheduler, its heartbeat) every CHECK_EVERY s. The
            # foreground loop polls every run it submitted, so each look must cost little.
            return None
        claimed = (self.paths.dir / CLAIM).exists()
        if status == "finished":
            outcome = self.future.result()
            if outcome.get("state") == "ran":
                self.returncode = int(outcome.get("exitCode") or 0)
                return self.returncode
            if outcome.get("state") in ("settled", "cancelled"):
                self.returncode = 0
                return self.returncode
        elif not claimed:
            if status == "error":  # raised before it started: the worker cannot read the run directory, say
                settle.never_ran(self.paths, self.record, "failed", f"the Dask task failed: {_task_error(self.future)}")
                self.returncode = 1
            elif settle.cancel_requested(self.paths):
                # Queued: it never starts (the fire-and-forget hold on it goes too: force).
                self.future.cancel(force=True)
                settle.cancelled_before_start(self.paths, self.record)
                self.returncode = 0
            # else queued (pending; "lost" or "cancelled" here means this client lost sight of a task that the
            # scheduler still holds for the fire-and-forget client): wait for a worker to take it, unless the
            # scheduler is gone (looked at every CHECK_EVERY s)
            elif time.monotonic() >= self._next_check:
                self._next_check = time.monotonic() + CHECK_EVERY
                why = scheduler_gone(self.paths, self.record)
                if why is not None:
                    _settle_unstartable(self.paths, self.record, why)
                    self.returncode = 1
            return self.returncode
        # Started: its worker may have died (the task then fails, or waits to be resubmitted, or was resubmitted
        # and found the run claimed). The heartbeat says, looked at every CHECK_EVERY s.
        now = time.monotonic()
        if now < self._next_check:
            return None
        self._next_check = now + CHECK_EVERY
        state = liveness(self.paths)
        if state == "gone":
            settle.lost(self.paths, self.record, worker_lost=True)  # its worker died: said so, not "exit code -1"
        if state in ("ended", "gone"):
            self.returncode = 0 if state == "ended" else -1
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(f"dask task {self.future.key}", timeout or 0.0)
            time.sleep(0.05 if deadline is None else max(0.0, min(0.05, deadline - time.monotonic())))
        assert self.returncode is not None
        return self.returncode

    def look(self) -> int | None:
        """``poll()`` looking at everything now, not at the next CHECK_EVERY: a cancel was just asked here."""
        self._next_check = 0.0
        return self.poll()

    def send_signal(self, sig: int) -> None:
        """Any signal asks for a cancel: the request file, and the future of a queued run."""
        settle.request_cancel(self.paths)
        self.look()


def _task_error(future: Any) -> str:
    try:
        exc = future.exception(timeout=5)
    except Exception as err:  # noqa: BLE001 - whatever the scheduler says is the message
        exc = err
    return f"{type(exc).__name__}: {exc}"


def cancel(run: Run) -> bool:
    """Cancel a Dask run from any process: the request file (the supervisor polls it) and, for a run this
    process submitted that no worker has taken yet, its future. A queued run whose scheduler cannot be reached
    is settled cancelled (it can never start); a started one whose supervisor is gone is settled as lost
    (``aborted``). False when it had already ended."""
    if run.done:
        return False
    settle.request_cancel(run.paths)
    if isinstance(run.process, DaskProcess):
        run.process.look()
        if run.process.returncode is None and scheduler_gone(run.paths, run.record, grace=0) is not None:
            settle.cancelled_before_start(run.paths, run.record)
    elif not (run.dir / CLAIM).exists():
        _cancel_queued_elsewhere(run)
    elif liveness(run.paths) == "gone":
        settle.lost(run.paths, run.record)  # a cancel was asked: it ends aborted
    if run.done:  # read afresh: it was not done above, so nothing of it was kept
        registry.note(run)
    return True


def _cancel_queued_elsewhere(run: Run) -> None:
    """A queued run another process submitted (its kernel may be gone): cancel its task on the scheduler
    ``dask.json`` names and settle it now. Unreachable, the request file still stops it when a worker takes it."""
    submitted = read_json(run.dir / SUBMITTED) or {}
    if scheduler_gone(run.paths, run.record, grace=0) is not None:
        settle.cancelled_before_start(run.paths, run.record)  # it can never start: cancelled now
        return
    if not submitted.get("scheduler") or not submitted.get("key"):
        return
    try:
        distributed = _distributed()
        with distributed.Client(submitted["scheduler"], set_as_default=False, timeout=5) as client:
            client.cancel([distributed.Future(submitted["key"], client)], force=True)
    except (NbSubagentsError, OSError):
        return
    if not (run.dir / CLAIM).exists():
        settle.cancelled_before_start(run.paths, run.record)


# -- clients ------------------------------------------------------------------------------------
def _distributed() -> Any:
    try:
        import distributed
    except ImportError:
        raise NbSubagentsError("executor='dask' needs Dask's distributed: pip install 'nbsubagents[dask]'") from None
    return distributed


def bind(runs: Iterable[Run], client: Any) -> None:
    """The client a call named (``dask_client=``) launches its runs."""
    with _lock:
        for run in runs:
            _bound[run.run_id] = client


def client_for(run_id: str | None = None, client: Any = None) -> Any:
    """The call's client, else one for ``settings.dask_scheduler``, else ``distributed.get_client()``."""
    if client is not None:
        return client
    with _lock:
        if run_id is not None and run_id in _bound:
            return _bound[run_id]
    distributed = _distributed()
    address = current().dask_scheduler
    if address:
        with _lock:
            known = _by_address.get(address)
        if known is None or known.status not in ("running", "connecting"):
            try:
                known = distributed.Client(address, set_as_default=False, timeout=10)
            except OSError as exc:
                raise NbSubagentsError(f"Cannot reach the Dask scheduler {address}: "
                                       f"{exc}. Start the cluster or correct the address.") from None
            with _lock:
                _by_address[address] = known
        return known
    try:
        return distributed.get_client()
    except ValueError:
        raise NbSubagentsError("executor='dask' needs a Dask client: pass dask_client=, "
                               "configure(dask_scheduler='tcp://host:8786'), or create distributed.Client(...) "
                               "in this kernel first") from None


def _recent_workers(client: Any) -> dict[str, dict[str, Any]]:
    """``run_workers(client)``, asked again at most every WORKERS_FRESH s (each question took 14-20 ms here): a
    worker that joined since is checked by the first start after that (as one that joins between a check and
    the scheduler's choice of a worker always was)."""
    now = time.monotonic()
    with _lock:
        listed = _listed.get(client)
    if listed is not None and now - listed[0] < WORKERS_FRESH:
        return listed[1]
    found = run_workers(client)
    with _lock:
        _listed[client] = (now, found)
    return found


# -- the launcher -------------------------------------------------------------------------------
class DaskLauncher:
    """Each run's supervisor as a task on a Dask worker; see the module docstring."""

    name = "dask"
    remote = True             # its supervisor is on a worker: queued until supervisor.json shows it started
    log_before_start = False  # the worker opens the log

    def cancel(self, run: Run) -> bool:
        return cancel(run)  # the request file is the way to a supervisor on a worker

    def check(self, paths: RunPaths, record: RunRecord, row: dict[str, Any]) -> str:
        """A run on a Dask worker: its heartbeat (or its pid, on this host) says whether it is alive; one whose
        worker died ends ``failed: interrupted (worker lost)``. A queued one waits for a worker ("owned") while its
        scheduler is there, and ends ``failed`` once it has been unreachable for ``SCHEDULER_GRACE`` s."""
        state = liveness(paths)
        if state == "queued":
            why = scheduler_gone(paths, record)
            if why is None:
                return "owned"
            _settle_unstartable(paths, record, why)
            registry.record(paths.dir)
            return "ended"
        if state == "live":
            if row.get("supervisor_pid") is None or row.get("status") != "running":
                registry.record(paths.dir)
            return "live"
        if state == "gone":
            settle.lost(paths, record, worker_lost=True)
        registry.record(paths.dir)
        return "ended"

    def require(self) -> None:
        """Nothing here: the cluster is checked when a call picks it (``launch.executor_client``)."""

    def slots(self, runs: list[Run]) -> int | None:
        """The cluster's run slots: its workers' ``nbsubagents`` resource, else their threads (each run holds
        one); None when the cluster cannot be asked (the call's concurrency is all that is known)."""
        client = next((r.process.future.client for r in runs if isinstance(r.process, DaskProcess)), None)
        try:
            workers = _recent_workers(client or client_for(runs[0].run_id if runs else None))
        except Exception:  # noqa: BLE001 - no client, a scheduler gone: an estimate is no reason to fail
            return None
        held = sum(int((w.get("resources") or {}).get(RESOURCE, 0)) for w in workers.values())
        return held or sum(int(w.get("nthreads") or 0) for w in workers.values()) or None

    def wait_any(self, processes: list[Any], timeout: float) -> None:
        """Until the first of the runs' tasks ends (its supervisor exited, or it failed), or ``timeout``: every
        run's end is seen at once, where a wait on one handle saw the others' at the next look."""
        futures = [p.future for p in processes if isinstance(p, DaskProcess) and p.future.status == "pending"]
        if not futures:  # none to wait on (lost from this client's sight, or settled): the next look says
            time.sleep(timeout)
            return
        client = futures[0].client  # a call's runs share one client; ``distributed.wait`` waits on the default's
        with client.as_current():
            try:
                _distributed().wait([f for f in futures if f.client is client], timeout=timeout,
                                    return_when="FIRST_COMPLETED")
            except Exception:  # noqa: BLE001 - a timeout, or a task cancelled meanwhile: either way poll() judges
                pass

    def start(self, run: Run) -> DaskProcess:
        distributed = _distributed()
        client = client_for(run.run_id)
        workers = _recent_workers(client)  # they serve both checks
        try:
            require_cluster(client, Path(run.record.root or run.project), programs_of(run.record.argv),
                            workers)
        except NbSubagentsError as exc:
            settle.never_ran(run.paths, run.record, "failed", str(exc))
            return _Settled(run)
        takes = any((w.get("resources") or {}).get(RESOURCE) for w in workers.values())
        key = f"nbsubagents-run-{run.run_id}"
        atomic_write_json(run.dir / SUBMITTED, {"scheduler": client.scheduler.address, "key": key,
                                                "submittedAt": now_iso()})
        future = client.submit(run_supervisor, str(run.dir), keys.load(run.run_id), key=key, pure=False,
                               resources={RESOURCE: 1} if takes else None)
        distributed.fire_and_forget(future)  # queued runs still run, running ones finish, when this kernel dies
        _confirm(client, key)
        with _lock:
            _bound.pop(run.run_id, None)
        return DaskProcess(future, run.paths, run.record)


def _held(key: str, dask_scheduler: Any = None) -> bool:
    """On the scheduler: it has the task, held by the fire-and-forget client (so no client needs to stay)."""
    task = dask_scheduler.tasks.get(key)
    return task is not None and any(c.client_key == "fire-and-forget" for c in task.who_wants or ())


async def _held_within(key: str, timeout: float, dask_scheduler: Any = None) -> bool:
    """On the scheduler: ``_held``, waited for up to ``timeout`` s there. The submit and its fire-and-forget hold
    come on the client's batched stream, this question on a comm of its own: it may arrive first."""
    deadline = time.monotonic() + timeout
    while not _held(key, dask_scheduler):
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(0.001)
    return True


def _confirm(client: Any, key: str, timeout: float = 10.0) -> None:
    """Wait until the scheduler holds the task: a submit is sent in the background, and a kernel that dies right
    after ``start()`` returned must not take a run that it reported started with it. One question, answered
    the moment the task is there (a question every few ms cost ~50 ms a start here)."""
    try:
        if client.run_on_scheduler(_held_within, key, timeout):
            return
    except (OSError, AttributeError, ValueError, TypeError, RuntimeError):
        return  # a scheduler that runs no client code (distributed.scheduler.pickle off): best effort
    warnings.warn(f"nbsubagents: the Dask scheduler {client.scheduler.address} has not taken run task {key} "
                  f"after {timeout:g} s; the run is submitted, but it would not outlive this kernel yet",
                  RuntimeWarning, stacklevel=3)


class _Settled:
    """The handle of a run the launcher could not submit (already settled)."""

    returncode = 1

    def __init__(self, run: Run) -> None:
        self.paths = run.paths

    def poll(self) -> int:
        return 1

    def wait(self, timeout: float | None = None) -> int:
        return 1

    def send_signal(self, sig: int) -> None:
        pass
