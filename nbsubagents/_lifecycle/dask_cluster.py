"""What a Dask cluster needs to run sub-agents, and the check that it has it (``nbsubagents doctor --dask``, and
the Dask launcher before a project's first run on a set of workers).

A worker must see the project folder at the same path (a probe file written here is read there), have pi at the
same path, and run the same nbsubagents and distributed. Its Dask timers are noted when they differ from
``CLUSTER_CONFIG``: the settings for a cluster whose tasks only wait on their supervisors.

``distributed`` is not imported here: the client passed in brings it, and ``_probe`` runs on a worker.
"""

from __future__ import annotations

import importlib.metadata as md
import os
import platform
import threading
import uuid
from pathlib import Path
from typing import Any

from .._config import NbSubagentsError

__all__ = ["RESOURCE", "HOST", "CLUSTER_CONFIG", "check_cluster", "require_cluster", "programs_of", "versions",
           "run_workers", "unlike_cluster_config", "dask_variable"]

RESOURCE = "nbsubagents"  # the worker resource one run takes
HOST = os.uname().nodename

# Dask's settings for a cluster whose tasks only wait on their supervisors (the Dask guide sets them, `doctor --dask`
# notes a worker without them): timers every Dask process runs by default, which buy nothing for such a task. On a
# machine the runs keep busy what they take is taken from pi: a LocalCluster of 2 workers idled at 6.75 % of a core
# with the profiler off, 1.15 % with all three.
CLUSTER_CONFIG: dict[str, Any] = {
    "distributed.worker.profile.enabled": False,        # samples every running task's stack 100 times a second
    "distributed.admin.tick.interval": "1s",             # the event loop's watchdog, every 20 ms
    "distributed.worker.memory.monitor-interval": "1s",  # memory limits checked every 100 ms
}

_checked: set[tuple[int, str, frozenset[str]]] = set()  # (client, project, workers) already checked
_lock = threading.Lock()


def _probe(probe: str, token: str, programs: list[str]) -> dict[str, Any]:
    """On a worker: what it sees of the project and of pi, its versions, and its settings of CLUSTER_CONFIG."""
    from dask import config  # noqa: PLC0415 (on a worker: Dask is there)

    try:
        sees = Path(probe).read_text(encoding="utf-8") == token
    except OSError:
        sees = False
    missing = [p for i, p in enumerate(programs) if not os.path.isfile(p) or (i == 0 and not os.access(p, os.X_OK))]
    timers = {key: config.get(key, None) for key in CLUSTER_CONFIG}
    return {"host": HOST, "sees": sees, "missing": missing, "timers": timers, **versions()}


def unlike_cluster_config(seen: dict[str, Any]) -> list[str]:
    """The keys of CLUSTER_CONFIG a worker's settings ``seen`` differ from (durations compared as durations)."""
    from dask.utils import parse_timedelta  # noqa: PLC0415 (a client is there: so is Dask)

    def same(want: Any, have: Any) -> bool:
        if isinstance(want, str):
            try:
                return have is not None and parse_timedelta(have) == parse_timedelta(want)
            except (TypeError, ValueError):
                return False
        return bool(have) == want
    return [key for key, want in CLUSTER_CONFIG.items() if not same(want, seen.get(key))]


def dask_variable(key: str) -> str:
    """The environment variable that sets Dask's config ``key`` (a worker's environment on Slurm or Kubernetes)."""
    return "DASK_" + key.upper().replace(".", "__").replace("-", "_")


def versions() -> dict[str, str | None]:
    """Python's version and the installed nbsubagents' and distributed's, here (or on a worker)."""
    found: dict[str, str | None] = {"python": platform.python_version()}
    for dist in ("nbsubagents", "distributed"):
        try:
            found[dist] = md.version(dist)
        except md.PackageNotFoundError:
            found[dist] = None
    return found


def run_workers(client: Any) -> dict[str, dict[str, Any]]:
    """The workers runs go to: those with the ``nbsubagents`` resource when any has it, else all.

    Asked of the scheduler, not read from ``client.scheduler_info()``: that returns the client's copy, which its
    own refresh every few seconds replaces with one that lists no worker (counts only), and a refresh ending
    just before the copy is read made a cluster of live workers look empty ("none connected")."""
    try:
        info = client.sync(client.scheduler.identity, n_workers=-1).get("workers", {})
    except TypeError:  # distributed before 2025 lists every worker without being asked
        info = client.sync(client.scheduler.identity).get("workers", {})
    with_resource = {a: w for a, w in info.items() if (w.get("resources") or {}).get(RESOURCE)}
    return with_resource or info


def check_cluster(client: Any, root: Path, programs: list[str]) -> list[tuple[bool | None, str, str]]:
    """One line per finding, (ok, what, detail) as ``nbsubagents doctor`` prints them: workers, the project
    folder seen from each (a probe file written here and read there), pi on each, versions, Dask's timers."""
    lines: list[tuple[bool | None, str, str]] = []
    workers = run_workers(client)
    if not workers:
        return [(False, "dask workers", f"none connected to {client.scheduler.address}: start some workers")]
    slots = sum(int((w.get("resources") or {}).get(RESOURCE, 0)) for w in workers.values())
    lines.append((True, "dask workers", f"{len(workers)} at {client.scheduler.address}" +
                  (f", {slots} run slots (resource {RESOURCE!r})" if slots else
                   f"; none declares resources={{{RESOURCE!r}: N}}: each worker's threads bound its runs")))
    folder = root / ".pi" / "subagents"
    folder.mkdir(parents=True, exist_ok=True)
    probe = folder / f".dask-probe-{uuid.uuid4().hex[:12]}"
    token = uuid.uuid4().hex
    probe.write_text(token, encoding="utf-8")
    try:
        found = client.run(_probe, str(probe), token, programs, workers=list(workers))
    finally:
        probe.unlink(missing_ok=True)
    mine = versions()
    for address, seen in sorted(found.items()):
        where = f"{address} ({seen['host']})"
        if not seen["sees"]:
            lines.append((False, "shared storage", f"{where} cannot see {root}: the project folder must be on a "
                                                   "filesystem every worker mounts at the same path"))
        if seen["missing"]:
            lines.append((False, "pi on worker", f"{where} has no {', '.join(seen['missing'])}: install pi there "
                                                 "at the same path (or in the shared project's node_modules)"))
        differ = [k for k in mine if seen.get(k) != mine[k]]
        if differ:  # another Python is worth a note; another nbsubagents or distributed is a problem
            lines.append((None if differ == ["python"] else False, "versions",
                          f"{where}: " + "; ".join(f"{k} {seen.get(k)} here {mine[k]}" for k in differ)))
    unlike = {address: keys for address, seen in sorted(found.items())
              if (keys := unlike_cluster_config(seen.get("timers") or {}))}
    if unlike:  # a note, not a problem: what a cluster of sub-agent runs spends on Dask's timers for nothing
        address, keys = next(iter(unlike.items()))  # one worker's values show what the others' likely are
        has = found[address].get("timers") or {}
        every = [key for key in CLUSTER_CONFIG if any(key in differ for differ in unlike.values())]
        lines.append((None, "dask timers", f"{len(unlike)} of {len(found)} workers run timers that take CPU from pi "
                      "for tasks that only wait on their supervisors ("
                      + ", ".join(f"{key}={has.get(key)}" for key in keys) + f" at {address}); "
                      "set in the workers' environment: "
                      + " ".join(f"{dask_variable(key)}={CLUSTER_CONFIG[key]}" for key in every)))
    if all(ok is not False for ok, what, _ in lines[1:]):
        lines.append((True, "each worker", f"sees {root} and runs pi; nbsubagents {mine['nbsubagents']}, "
                                           f"distributed {mine['distributed']}"))
    return lines


def require_cluster(client: Any, root: Path, programs: list[str], workers: dict[str, Any] | None = None) -> None:
    """``check_cluster`` before the first submit of a project to a set of workers; its problems as an error.
    ``workers``: the caller's ``run_workers(client)``, if it has just asked."""
    key = (id(client), str(root), frozenset(run_workers(client) if workers is None else workers))
    with _lock:
        if key in _checked:
            return
    problems = [f"{what}: {detail}" for ok, what, detail in check_cluster(client, root, programs) if ok is False]
    if problems:
        raise NbSubagentsError("The Dask cluster cannot run these sub-agents:\n  " + "\n  ".join(problems))
    with _lock:
        _checked.add(key)


def programs_of(argv: list[str] | None) -> list[str]:
    """The files of a run's command that must exist on a worker: pi (or node and pi's script)."""
    return [a for a in (argv or [])[:2] if os.path.isabs(a)]
