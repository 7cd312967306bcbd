"""What the delegate tool server loads at its first call (``delegation_server``): the kernel's launch path and the
registry, kept out of its start-up so that it answers its harness at once."""

from __future__ import annotations

from typing import Any, Mapping

from .. import _registry as registry
from .._registry import tree as registry_tree
from . import delegation
from .handle import Run, launch
from .prepare import prepare
from .spec import TaskSpec

__all__ = ["start", "registry", "registry_tree", "delegation"]


def start(config: Mapping[str, Any], preset: str, task: str, call_id: str | None = None) -> Run:
    """A sub-run of the server's run, started as a notebook's call starts one (``prepare``, ``launch``), with its
    place in the tree. Its row is announced at once: its end is its parent's news (the tool's result), never a
    notebook's "finished while away" notice. ``call_id``: the delegate call's id, as its harness gave it (None: not
    given), kept in the sub-run's record: reports and traces nest the sub-run under that call."""
    spec = TaskSpec(preset=preset, task=task, cwd=config.get("cwd"))
    position = {**delegation.position_for_child(config), **({"toolCall": call_id} if call_id else {})}
    run = prepare(spec, mode="delegated", runner="process", launching=True, position=position)
    launch(run)
    registry.note(run, status="running", announced=True)
    return run
