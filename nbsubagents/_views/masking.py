"""The masker in force: ``child.secrets.Masker`` over this process's environment, pi's config files under the agent
dir and the ``secret_patterns`` setting; and ``MaskedRun``, a run whose every text is masked before anything
cuts it short."""

from __future__ import annotations

import os
from functools import cached_property
from typing import Any

from .._child.record import RunRecord
from .._child.secrets import MASK, Masker, secret_values
from .._config import agent_dir, current

__all__ = ["MASK", "masker", "MaskedRun", "mask_text"]

_cache: dict[Any, Masker] = {}


def _stamp(path: Any) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size)


def masker() -> Masker:
    """The masker for now (rebuilt when the environment, pi's config files or the setting changed)."""
    agent = agent_dir()
    patterns = tuple(current().secret_patterns or ())
    key = (tuple(sorted(os.environ.items())), str(agent), _stamp(agent / "models.json"),
           _stamp(agent / "auth.json"), patterns)
    found = _cache.get(key)
    if found is None:
        _cache.clear()
        found = _cache[key] = Masker(secret_values(agent=agent), patterns)
    return found


def mask_text(text: str) -> str:
    """``text`` masked by the masker in force."""
    return masker().text(text)


class MaskedRun:
    """A run as a report shows it: its task, name, output, error, events, record and result masked (so a truncation
    that follows cannot cut a secret to a form the masking no longer knows); everything else is the run's."""

    def __init__(self, run: Any, mask: Masker | None = None) -> None:
        self._run = run
        self._mask = mask or masker()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._run, name)

    @property
    def run_id(self) -> str:
        return self._run.run_id

    @property
    def name(self) -> str:
        return self._mask.text(self._run.name)

    @property
    def model(self) -> str | None:
        return self._mask.text(self._run.model) if self._run.model else self._run.model

    @property
    def preset(self) -> str | None:
        return self._mask.text(self._run.preset) if self._run.preset else self._run.preset

    @property
    def task(self) -> str:
        return self._mask.text(self._run.task)

    @property
    def output(self) -> str:
        return self._mask.text(self._run.output)

    @property
    def error(self) -> str | None:
        error = self._run.error
        return self._mask.text(error) if error else error

    @property
    def transcript(self) -> str:
        return self._mask.text(self._run.transcript)

    @cached_property
    def record(self) -> RunRecord:
        return RunRecord.from_json(self._mask.data(self._run.record.to_json()))

    @cached_property
    def result(self) -> dict[str, Any] | None:
        return self._mask.data(self._run.result)

    @property
    def files_changed(self) -> list[str]:
        return [self._mask.text(p) for p in self._run.files_changed]

    def events(self) -> list[dict[str, Any]]:
        return [self._mask.data(e) for e in self._run.events()]
