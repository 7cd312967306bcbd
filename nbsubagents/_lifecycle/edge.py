"""What the bands above lend the kernel's side of a run: one object, lent in one place.

Nothing in ``lifecycle/`` or ``sweeps/`` knows a notebook, the watcher's instance or the public API; what they
need of them is a field of ``edge``, with a script's plain defaults until the faces lend the rest (``api.wire``;
the watcher lends itself as the follower when it first watches a run):

- ``text_stream()``: where a notice is printed, None for nowhere (stderr by default; in a notebook the cell's
  output, and None under ``NBSUBAGENTS_DISPLAY=none``);
- ``cell_parent()``: the cell running now, whose output a run launched now belongs to (None by default);
- ``in_cell(parent)``: a context in which what this thread prints goes to that cell (nothing by default);
- ``sweep_panel(title, concurrency)``: a sweep's live panel (a ``Renderer``), None for its text lines (the
  default; a notebook with widgets lends its panel);
- ``show(obj)``: shows a small display object before a sweep (its text where notices go by default; in a
  notebook its HTML in the cell's output);
- ``person_at_frontend()``: whether a person can answer a run's questions where it is prepared (a notebook's
  cell; nobody in a script, papermill or a Dask worker, the default);
- ``in_kernel()``: whether this process is a Jupyter kernel, where an interrupt ends the cell's runs and the cell
  goes on (``lifecycle.interrupts``; elsewhere it stops the caller too; False by default);
- ``follower``: what follows runs in this process (the watcher): ``get_run`` returns its handle of a run it
  follows, ``Run.wait`` waits for it to finish with a run that ended, and ``runs()`` are the runs it follows
  (named when an interrupt stops the process); by default nothing is followed;
- ``start(preset, task, resume=..., **options)``: how a follow-up of an ended run starts its new run (the public
  ``start``); None until the public API is loaded.
"""

from __future__ import annotations

import sys
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Callable, Protocol

from .._child.text import write_line

if TYPE_CHECKING:
    from .handle import Run

__all__ = ["Edge", "Follower", "NoFollower", "edge", "lend", "print_repr"]


class Follower(Protocol):
    def get(self, run_id: str) -> Run | None: ...
    def settle(self, run_id: str, timeout: float) -> bool: ...
    def runs(self) -> list[Run]: ...


class NoFollower:
    def get(self, run_id: str) -> Run | None:
        return None

    def settle(self, run_id: str, timeout: float) -> bool:
        return True

    def runs(self) -> list[Run]:
        return []


def print_repr(obj: Any) -> None:
    """A display object's text where notices go, nothing where they go nowhere."""
    stream = edge.text_stream()
    if stream is not None:
        write_line(stream, repr(obj))


@dataclass
class Edge:
    text_stream: Callable[[], Any] = lambda: sys.stderr
    cell_parent: Callable[[], Any] = lambda: None
    in_cell: Callable[[Any], AbstractContextManager[Any]] = lambda parent: nullcontext()
    sweep_panel: Callable[[str, int], Any] = lambda title, concurrency: None
    show: Callable[[Any], None] = print_repr
    person_at_frontend: Callable[[], bool] = lambda: False
    in_kernel: Callable[[], bool] = lambda: False
    follower: Follower = NoFollower()  # noqa: RUF009 (one stateless default, shared on purpose)
    start: Callable[..., Run] | None = None


edge = Edge()


def lend(**given: Any) -> None:
    """Set the fields given by name (``nbsubagents._api.wire``; the watcher, as the follower)."""
    unknown = set(given) - {f.name for f in fields(Edge)}
    if unknown:
        raise TypeError(f"no such field of the edge: {', '.join(sorted(unknown))}")
    for name, value in given.items():
        setattr(edge, name, value)
