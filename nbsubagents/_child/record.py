"""One record of a run: what ``meta.json`` holds, typed.

Preparation writes a ``RunRecord`` before the supervisor starts; the supervisor, the launchers, the registry and
the views read it, and nothing else reads ``meta.json``. On disk each field is a camelCase key (``run_id`` is
``runId``) and the record carries its ``schemaVersion``. A folder written by an older version is read through
``_migrate``; a key this version does not know is kept as written (``extra``); a value of the wrong type (the run
folder is the child's to write to as well) reads as absent, never as an error in the reader.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Mapping

from .artifacts import RunPaths, atomic_write_json, read_bytes
from .harnesses import DEFAULT

__all__ = ["SCHEMA_VERSION", "RunRecord", "load", "blank", "write", "replace", "camel"]

SCHEMA_VERSION = 2  # 2: every field written (1 left out a harness, runner, root, ... it did not use)


@dataclass(frozen=True)
class RunRecord:
    """A run's ``meta.json``: who asked what of which agent, where, with which limits."""

    run_id: str = ""
    name: str | None = None
    harness: str = DEFAULT
    mode: str | None = None  # foreground, background, parallel, ...
    task_index: int = 0
    group: str | None = None  # the runs of one call share it (reports link them)
    preset: str | None = None
    preset_source: str | None = None
    preset_scope: str | None = None
    preset_notes: list | None = None
    task: str = ""
    cwd: str | None = None
    root: str | None = None  # the project the run belongs to
    files: list = field(default_factory=list)
    requested_model: str | None = None
    requested_model_source: str | None = None  # call, preset, settings
    resolved_model: str | None = None
    model_thinking: str | None = None
    fallback_models: list = field(default_factory=list)
    notes: list | None = None  # what the run was asked and does not do, and why (the run shows each as a notice)
    offline: bool | None = None
    tools: list | None = None
    ignored_tools: list | None = None
    disallowed_tools: list | None = None
    permission_mode: str | None = None
    thinking: str | None = None
    system_prompt_path: str | None = None
    prompt_path: str | None = None
    session_path: str | None = None
    resumed_from: str | None = None
    argv: list = field(default_factory=list)
    env: dict = field(default_factory=dict)
    timeout: float | None = None
    extend_timeout_debounce: float = 30.0
    looping_tool_count: int = 5
    budget: dict | None = None
    isolation: dict | None = None
    output_schema: Any = None
    inputs: list | None = None  # the notebook's values given as files: name, kind, file, card, bytes, sha256, about
    output_type: str | None = None  # the class output_schema was made from ("module:QualName"): run.data's type
    outputs: dict | None = None  # name -> {"file", "format"}: the files the child must write (the run reads them)
    max_repairs: int | None = None  # how often a reply or output file that fails its check is asked again
    ask: bool = False
    approval: dict | None = None
    project_config: bool = False  # the child loaded the project's own agent config (hooks, extensions, ...)
    tool_servers: list = field(default_factory=list)  # nbsubagents' tools for the child (tool_servers.ToolServer's)
    question_timeout: float | None = None  # 0: nobody can answer where it was started
    launcher: dict | None = None
    sources: dict = field(default_factory=dict)  # option -> where its value came from (call, preset, a setting's)
    runner: str = "process"
    experiment: str | None = None
    params: dict | None = None
    tags: dict | None = None
    parent: str | None = None  # the run whose delegate tool started this one (issue 58); None: a notebook's call
    tree_root: str | None = None  # the first run of its tree (None: this run is its own root)
    depth: int = 0  # 0 for a run the notebook started, its parent's + 1 for a delegated one
    delegate: dict | None = None  # what it may delegate: presets, maxDepth, maxChildren, its tree's budget
    tool_call: str | None = None  # the id of its parent's delegate call that started it, when its harness said it
    created_at: str | None = None
    schema_version: int = SCHEMA_VERSION
    extra: dict = field(default_factory=dict)  # keys this version does not know, kept as written

    @classmethod
    def from_json(cls, data: Mapping[str, Any], run_dir: Path | None = None) -> RunRecord:
        """The record of a parsed ``meta.json`` (of any version; ``run_dir``: the folder it was read from)."""
        data = _migrate(dict(data), run_dir)
        values: dict[str, Any] = {}
        for f in _FIELDS:
            key = _KEYS[f.name]
            if key in data:
                value = data.pop(key)
                if _fits(value, f.type):
                    values[f.name] = value
        return cls(**values, extra=data)

    def to_json(self) -> dict[str, Any]:
        """The ``meta.json`` form: every field under its camelCase key, then the unknown keys as read."""
        return {**{_KEYS[f.name]: getattr(self, f.name) for f in _FIELDS}, **self.extra}

    @property
    def display_name(self) -> str:
        return self.name or self.preset or self.run_id


_FIELDS = tuple(f for f in fields(RunRecord) if f.name != "extra")
def camel(name: str) -> str:
    """A field's camelCase spelling on disk (``run_id`` is ``runId``; settings files spell theirs so too)."""
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


_KEYS = {f.name: camel(f.name) for f in _FIELDS}
_TYPES: dict[str, Any] = {"str": str, "int": int, "float": (int, float), "bool": bool, "list": list, "dict": dict}


def _fits(value: Any, annotation: str) -> bool:
    """Whether a value read from disk has the field's type (None fits an optional field)."""
    if annotation == "Any":
        return True
    if value is None:
        return "None" in annotation
    kind = _TYPES[annotation.split(" |")[0]]
    return isinstance(value, kind) and (kind is bool or not isinstance(value, bool))


def _migrate(data: dict[str, Any], run_dir: Path | None) -> dict[str, Any]:
    """A ``meta.json`` of an older version as this version writes it: version 1 left out what its run did not use
    (the harness of pi's runs, the runner of a process's, the project of the folder it is in)."""
    if not isinstance(data.get("schemaVersion"), int) or data["schemaVersion"] < 2:  # its harness and runner:
        if run_dir is not None and len(run_dir.parents) > 3:                        # the fields' defaults
            data.setdefault("root", str(RunPaths(run_dir).project))
        data["schemaVersion"] = SCHEMA_VERSION
    if run_dir is not None and not isinstance(data.get("runId"), str):
        data["runId"] = run_dir.name
    return data


def load(run_dir: Path) -> RunRecord | None:
    """The record in ``run_dir``; None when its ``meta.json`` is missing or unreadable."""
    try:
        data = json.loads(read_bytes(run_dir / "meta.json"))
    except (OSError, ValueError):
        return None
    return RunRecord.from_json(data, run_dir) if isinstance(data, dict) else None


def blank(run_dir: Path) -> RunRecord:
    """The record in ``run_dir``, or an empty one named after the folder when its ``meta.json`` is missing or
    unreadable (a reader that shows what there is)."""
    return load(run_dir) or RunRecord(run_id=run_dir.name)


def write(run_dir: Path, record: RunRecord, *, sync: bool = True) -> None:
    """``meta.json`` written atomically (``sync=False``: the supervisor makes it durable while the agent starts)."""
    atomic_write_json(run_dir / "meta.json", record.to_json(), sync=sync)
