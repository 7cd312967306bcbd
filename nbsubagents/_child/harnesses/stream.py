"""The conversation with a harness that takes nothing after its task: the task went in on stdin (``prompt.md``),
its stdout is read.

``Stream`` is the session (``harnesses.Session``) of such a harness, as ``child/rpc.py``'s ``RpcSession`` is pi's;
most of its methods have nothing to do here: such a child takes no steer, follow-up or answer while it runs (its
harness's ``REFUSES`` says so, and the call is refused before the run is written). What the harness said at its
end (``Adapter.final``) decides the run's end where it differs from pi's: its own error end fails the run with its
message, and its native total cost wins over the sum of its events.
"""

from __future__ import annotations

from typing import TYPE_CHECKING


if TYPE_CHECKING:
    from ..record import RunRecord
    from typing import IO, Any, Callable, Mapping

    from ..events import Event


class Stream:
    def __init__(self, adapter: Any) -> None:
        self.adapter = adapter
        self.open: dict[str, Any] = {}   # no question is ever open
        self.refused: str | None = None

    def attach(self, pipe: IO[bytes] | None, task: str, cwd: str | None = None) -> None:
        pass  # the task is the child's stdin, a file

    def adapt(self, obj: Any) -> list[Event]:
        return self.adapter.adapt(obj)

    def tick(self, stopping: bool = False) -> list[Event]:
        return []

    def finished(self) -> bool:
        return bool(self.adapter.conversation_over)

    follows_up = False  # nothing reaches it after its task: a repair starts it again (its harness's repair_argv)

    def follow_up(self, text: str) -> bool:
        return False

    def abort(self) -> None:
        pass  # stopped by signals alone

    def close(self, now: bool = False) -> None:
        pass

    def end(self) -> None:
        pass

    def record(self) -> dict[str, Any]:
        """result.json's fields of the harness: its session id (what a resumed run continues) and its end."""
        out: dict[str, Any] = {}
        if self.adapter.session_id:
            out["sessionId"] = self.adapter.session_id
        final = self.adapter.final
        if isinstance(final, dict):
            out["harnessEnd"] = {k: v for k, v in final.items() if k != "structured"}
        return out

    def error_end(self) -> tuple[str, str] | None:
        """The harness's own error end (Claude's ``is_error``, Codex's ``turn.failed``): its message and the
        result's stop word."""
        final = self.adapter.final
        if isinstance(final, dict) and final.get("isError"):
            message = str(final.get("message") or f"the harness ended with an error ({final.get('subtype')})")
            return message, str(final.get("stopWord") or "harness_error")
        return None

    def totals(self) -> dict[str, Any]:
        """Native totals of the harness's end record (``cost``), which win over the events' sums."""
        final = self.adapter.final
        if not isinstance(final, dict):
            return {}
        return {key: final[key] for key in ("cost",) if isinstance(final.get(key), (int, float))}

    def structured(self) -> Any:
        """The harness's native structured output (Claude's ``structured_output``), or None."""
        final = self.adapter.final
        return final.get("structured") if isinstance(final, dict) else None


# What a harness driven through ``Stream`` shares: it is started as its program, leaves no tool out (what it
# cannot honour its ``build`` refuses), finds its sessions by id wherever it runs, continues its own, and takes a
# model's name as written.
def command(program: str) -> list[str]:
    return [program]


def left_out(run: Any) -> list[str]:
    return []


def relocate(run_dir: str, cwd: str) -> None:
    pass


def models(program: str) -> tuple[str, ...]:
    return ()  # it takes a model's name as written (LISTS_MODELS is False)


def models_key(program: str) -> str:
    return program


def continues_by_id(name: str) -> Callable[[str, RunRecord, Mapping[str, Any] | None], str | None]:
    """A harness's ``continues``: the session id an earlier run of harness ``name`` left (what its resume
    continues); None for another harness's run."""
    def continues(run_dir: str, record: RunRecord, result: Mapping[str, Any] | None) -> str | None:
        session = (result or {}).get("sessionId")
        ran_here = record.harness == name
        return session if ran_here and isinstance(session, str) and session else None
    return continues
