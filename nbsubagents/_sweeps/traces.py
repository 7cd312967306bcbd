"""A run as a trace: one agent span, a model span per turn (its tokens), a tool span per tool call.

``spans(run_dir)`` reads a run's ``events.jsonl`` into a tree of :class:`Span` (times from the events' own
timestamps; text masked and cut short). Two writers place that tree: ``to_mlflow(exp, client, experiment_id)``
logs each ended run of a sweep as an MLflow 3 trace (scores as feedback, linked to the run's MLflow run,
tagged with the experiment and cell; a run traced before is skipped), and ``to_otel_json(exp, path)`` writes
the same spans as OpenTelemetry JSON (OTLP) with the GenAI semantic conventions. mlflow is imported only by the
MLflow writer.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._child import record
from .._child.artifacts import TERMINAL, read_events
from .._child.secrets import Masker
from .._child.text import clip
from .._config import NbSubagentsError
from .._registry import tree as registry_tree
from .._views import delegated
from .._views.masking import masker
from .._views.reports import write_atomic
from .grid import cell_key

if TYPE_CHECKING:
    from .experiment import Experiment

__all__ = ["Span", "spans", "to_mlflow", "to_otel_json"]

TEXT_LIMIT = 2000  # characters of a tool's arguments or result, a reply or a task kept in a span
AGENT, MODEL, TOOL = "AGENT", "CHAT_MODEL", "TOOL"  # MLflow's span types


@dataclass
class Span:
    """One span of a run's trace: times in Unix seconds, inputs/outputs/attributes JSON-ready and masked."""

    name: str
    kind: str
    start: float
    end: float | None = None
    inputs: dict[str, Any] = field(default_factory=dict)
    outputs: dict[str, Any] = field(default_factory=dict)
    attributes: dict[str, Any] = field(default_factory=dict)
    error: bool = False
    children: list[Span] = field(default_factory=list)

    def walk(self) -> list[Span]:
        return [self, *(s for child in self.children for s in child.walk())]


def _events(run_dir: Path) -> list[dict[str, Any]]:
    return [e for e in read_events(run_dir / "events.jsonl") if isinstance(e.get("ts"), (int, float))]


def _masked(value: Any, masks: Masker) -> Any:
    """Every string in ``value`` masked and cut short (dicts and lists walked)."""
    if isinstance(value, str):
        return clip(masks.text(value, pieces=True), TEXT_LIMIT)  # pieces: a key the model wrote in parts
    if isinstance(value, dict):
        return {str(k): _masked(v, masks) for k, v in value.items()}
    if isinstance(value, list):
        return [_masked(v, masks) for v in value]
    return value


def spans(run_dir: str | Path, masks: Masker | None = None, *, nest: bool = True,
          seen: frozenset[str] = frozenset()) -> Span | None:
    """The trace of one run from its ``events.jsonl``: the agent span (task, preset, model, result) with a
    model span per turn (token usage, reply) and a tool span per tool call (arguments, result, error), each
    timed by its events. None when the run has no events. A span its run never closed ends with the run.
    ``nest``: each run it delegated (issue 58) is an agent span of its own under the delegate call's tool span that
    started it, with its own runs under its calls: the trace of a tree is the whole tree."""
    masks = masks or masker()
    root = _own_spans(Path(run_dir), masks)
    if root is not None and nest:
        _nest(Path(run_dir), root, masks, seen)
    return root


def _nest(run_dir: Path, root: Span, masks: Masker, seen: frozenset[str]) -> None:
    """The spans of the runs ``run_dir``'s run delegated, each under the tool span of the call that started it
    (``views.delegated``; a run whose call is not known: under the run's own span)."""
    run_id = str(root.attributes.get("run_id") or run_dir.name)
    seen = seen | {run_id}
    db = run_dir.parent.parent / "registry.sqlite"  # <project>/.pi/subagents/runs/<id>: its project's registry
    if not db.is_file():
        return
    rows = {row["run_id"]: row for row in registry_tree.children(run_id, db=db) if row["run_id"] not in seen}
    if not rows:
        return
    kids = {k: record.blank(Path(row["run_dir"])) for k, row in rows.items()}
    by_call = delegated.calls_of(_events(run_dir), [(k, r.preset, r.task, r.tool_call) for k, r in kids.items()])
    tools = {span.attributes.get("tool_call_id"): span for span in root.children if span.kind == TOOL}
    for call, run_ids in by_call.items():
        for kid in run_ids:
            span = spans(Path(rows[kid]["run_dir"]), masks, seen=seen)
            if span is not None:
                tools.get(call, root).children.append(span)


def _own_spans(run_dir: Path, masks: Masker) -> Span | None:
    events = _events(run_dir)
    if not events:
        return None
    first = events[0]
    start = first if first.get("type") == "run_start" else {}
    root = Span(f"{start.get('preset') or 'agent'}", AGENT, first["ts"],
                inputs=_masked({"task": start.get("task") or ""}, masks),
                attributes=_masked({"preset": start.get("preset"), "model": start.get("model"),
                                    "run_id": start.get("runId")}, masks))
    turn: Span | None = None
    tools: dict[Any, Span] = {}
    for event in events:
        kind, ts = event.get("type"), event["ts"]
        if kind == "turn_start":
            turn = Span(f"turn {event.get('turn')}", MODEL, ts, inputs={"turn": event.get("turn")})
            root.children.append(turn)
        elif kind in ("assistant_text", "thinking") and turn is not None:
            key = "text" if kind == "assistant_text" else "thinking"
            turn.outputs[key] = _masked(event.get("text") or "", masks)
            if kind == "assistant_text":
                root.outputs["result"] = turn.outputs["text"]
        elif kind == "usage" and turn is not None:
            turn.attributes["usage"] = {"input_tokens": event.get("input") or 0,
                                        "output_tokens": event.get("output") or 0,
                                        "cache_read_tokens": event.get("cacheRead") or 0,
                                        "cache_write_tokens": event.get("cacheWrite") or 0,
                                        "total_tokens": event.get("totalTokens") or 0}
            turn.attributes["cost_usd"] = event.get("cost") or 0
        elif kind == "message_end" and turn is not None:
            turn.end = ts
            turn.attributes["model"] = "/".join(str(p) for p in (event.get("provider"), event.get("model")) if p)
            turn.outputs["stop_reason"] = event.get("stopReason")
            turn.error = event.get("stopReason") == "error"
            if event.get("errorMessage"):
                turn.outputs["error"] = _masked(event["errorMessage"], masks)
        elif kind == "tool_call":
            tool = Span(str(event.get("name") or "tool"), TOOL, ts, inputs=_masked(event.get("args") or {}, masks),
                        attributes={"tool_call_id": event.get("id")})
            tools[event.get("id")] = tool
            root.children.append(tool)
        elif kind == "tool_result" and event.get("id") in tools:
            tool = tools.pop(event.get("id"))
            tool.end, tool.error = ts, bool(event.get("isError"))
            tool.outputs = _masked({"result": event.get("text") or ""}, masks)
        elif kind == "run_end":
            root.end = ts
            root.outputs.update(status=event.get("status"), stop_reason=event.get("stopReason"))
            root.error = event.get("status") != "completed"
            if event.get("errorMessage"):
                root.outputs["error"] = _masked(event["errorMessage"], masks)
    root.end = root.end if root.end is not None else events[-1]["ts"]
    for span in root.walk():
        if span.end is None:  # cut short: it ends with the run
            span.end, span.error = root.end, True
    return root


def _ended(exp: Experiment) -> list[dict[str, Any]]:
    return [row for row in exp.current_rows() if row.get("status") in TERMINAL]


def _tags(exp: Experiment, row: dict[str, Any], masks: Masker) -> dict[str, str]:
    return {"nbsubagents.run_id": row["run_id"], "nbsubagents.experiment": exp.name,
            "nbsubagents.cell": masks.text(cell_key(json.loads(row.get("params") or "{}"))),
            "nbsubagents.status": str(row.get("status")), "nbsubagents.preset": str(row.get("preset")),
            "nbsubagents.model": masks.text(str(row.get("model")))}


# -- MLflow ---------------------------------------------------------------------------------------------------
def to_mlflow(exp: Experiment, client: Any, experiment_id: str) -> int:
    """Log each ended run of ``exp`` not traced before as a trace in MLflow experiment ``experiment_id`` (through
    ``client``'s tracking URI), linked to the MLflow run that carries its ``nbsubagents.run_id`` tag; scores
    become feedback. Returns how many traces were logged."""
    import mlflow
    from mlflow.entities import AssessmentSource
    from mlflow.tracking._tracking_service.utils import _use_tracking_uri

    # traces and feedback go through MLflow's global tracing client: pointed at the client's store, then back to
    # whatever was set before (or nothing); each trace is stored when it ends, not by MLflow's background queue,
    # whose flush (needed before feedback can refer to the trace) waits up to a second a run
    with _synchronous_traces(), _use_tracking_uri(client.tracking_uri):
        done = {t.info.tags.get("nbsubagents.run_id") for t in _traces(mlflow, experiment_id)}
        linked = {r.data.tags.get("nbsubagents.run_id"): r.info.run_id
                  for r in client.search_runs([experiment_id], max_results=50000)}
        masks = masker()
        source = AssessmentSource(source_type="CODE", source_id="nbsubagents")
        logged = 0
        for row in _ended(exp):
            root = None if row["run_id"] in done else spans(row["run_dir"], masks)
            if root is None:
                continue
            trace_id = _log_trace(client, root, masks.text(row.get("name") or root.name), experiment_id,
                                  _tags(exp, row, masks), linked.get(row["run_id"]))
            for name, value in json.loads(row.get("scores") or "{}").items():
                if isinstance(value, (bool, int, float, str)):
                    mlflow.log_feedback(trace_id=trace_id, name=name, value=value, source=source)
            logged += 1
        return logged


@contextlib.contextmanager
def _synchronous_traces():
    """MLflow's trace exporter, made while inside (``_use_tracking_uri`` makes a new one), stores each trace as it
    ends; the variable is as before afterwards."""
    name, before = "MLFLOW_ENABLE_ASYNC_TRACE_LOGGING", os.environ.get("MLFLOW_ENABLE_ASYNC_TRACE_LOGGING")
    os.environ[name] = "false"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


def _traces(mlflow: Any, experiment_id: str) -> list[Any]:
    try:
        return mlflow.search_traces(locations=[experiment_id], return_type="list", include_spans=False)
    except TypeError:  # an older MLflow 3 names them experiment_ids
        return mlflow.search_traces(experiment_ids=[experiment_id], return_type="list", include_spans=False)


def _ns(seconds: float) -> int:
    return int(round(seconds * 1e9))


def _mlflow_attributes(span: Span) -> dict[str, Any]:
    attributes = {k: v for k, v in span.attributes.items() if k != "usage"}
    usage = span.attributes.get("usage")
    if usage:  # MLflow sums this attribute into the trace's token usage
        attributes["mlflow.chat.tokenUsage"] = {k: usage[k] for k in ("input_tokens", "output_tokens",
                                                                      "total_tokens")}
        attributes["usage"] = usage
    return attributes


def _log_trace(client: Any, root: Span, name: str, experiment_id: str, tags: dict[str, str],
               run_id: str | None) -> str:
    """One trace named ``name`` (the run's name), its spans timed as the run's events were."""
    started = client.start_trace(name, span_type=root.kind, inputs=root.inputs, tags=tags,
                                 attributes=_mlflow_attributes(root), experiment_id=experiment_id,
                                 start_time_ns=_ns(root.start), run_id=run_id)
    trace_id = started.trace_id

    def log(parent: Span, parent_id: str) -> None:  # each span under its own parent: a sub-run's under its call
        for child in parent.children:
            span = client.start_span(child.name, trace_id=trace_id, parent_id=parent_id, span_type=child.kind,
                                     inputs=child.inputs, attributes=_mlflow_attributes(child),
                                     start_time_ns=_ns(child.start))
            log(child, span.span_id)
            client.end_span(trace_id, span.span_id, outputs=child.outputs, status="ERROR" if child.error else "OK",
                            end_time_ns=_ns(child.end or parent.end or child.start))

    log(root, started.span_id)
    client.end_trace(trace_id, outputs=root.outputs, status="ERROR" if root.error else "OK",
                     end_time_ns=_ns(root.end or root.start))
    return trace_id


# -- OpenTelemetry JSON ---------------------------------------------------------------------------------------
_OPERATIONS = {AGENT: "invoke_agent", MODEL: "chat", TOOL: "execute_tool"}


def _hex_id(*parts: Any, length: int) -> str:
    return hashlib.sha256("\0".join(map(str, parts)).encode()).hexdigest()[:length]


def _value(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    return {"stringValue": value if isinstance(value, str) else json.dumps(value, default=str)}


def _otel_attributes(span: Span) -> dict[str, Any]:
    """The GenAI semantic conventions' attributes of one span (``gen_ai.*``)."""
    out: dict[str, Any] = {"gen_ai.operation.name": _OPERATIONS[span.kind]}
    if span.kind == AGENT:
        out.update({"gen_ai.agent.name": span.name, "gen_ai.request.model": span.attributes.get("model"),
                    "gen_ai.input.messages": span.inputs.get("task"),
                    "gen_ai.output.messages": span.outputs.get("result")})
    elif span.kind == MODEL:
        usage = span.attributes.get("usage") or {}
        out.update({"gen_ai.response.model": span.attributes.get("model"),
                    "gen_ai.usage.input_tokens": usage.get("input_tokens"),
                    "gen_ai.usage.output_tokens": usage.get("output_tokens"),
                    "gen_ai.response.finish_reasons": [span.outputs.get("stop_reason")],
                    "gen_ai.output.messages": span.outputs.get("text")})
    else:
        out.update({"gen_ai.tool.name": span.name, "gen_ai.tool.call.id": span.attributes.get("tool_call_id"),
                    "gen_ai.tool.call.arguments": span.inputs, "gen_ai.tool.call.result": span.outputs.get("result")})
    return {k: v for k, v in out.items() if v is not None}


def otel_spans(root: Span, run_id: str, tags: dict[str, str]) -> list[dict[str, Any]]:
    """The OTLP JSON spans of one run's trace (ids derived from the run id: the same run, the same ids)."""
    trace_id = _hex_id(run_id, length=32)
    out = []
    order = root.walk()
    number = {id(span): n for n, span in enumerate(order)}
    parent_of = {id(kid): number[id(span)] for span in order for kid in span.children}
    for n, span in enumerate(order):
        attributes = _otel_attributes(span) | (tags if span is root else {})
        item = {"traceId": trace_id, "spanId": _hex_id(run_id, n, length=16),
                "name": f"{_OPERATIONS[span.kind]} {span.name}", "kind": 1,
                "startTimeUnixNano": str(_ns(span.start)), "endTimeUnixNano": str(_ns(span.end or span.start)),
                "attributes": [{"key": k, "value": _value(v)} for k, v in attributes.items()],
                "status": {"code": 2 if span.error else 1}}
        if span is not root:
            item["parentSpanId"] = _hex_id(run_id, parent_of[id(span)], length=16)
        out.append(item)
    return out


def to_otel_json(exp: Experiment, path: str | Path) -> Path:
    """Write the traces of ``exp``'s ended runs to ``path`` as OpenTelemetry JSON (an OTLP
    ``ExportTraceServiceRequest``: what an OTLP/HTTP collector takes), with the GenAI semantic conventions'
    attributes; secrets masked. Returns the path."""
    masks = masker()
    found = []
    for row in _ended(exp):
        root = spans(row["run_dir"], masks)
        if root is not None:
            found += otel_spans(root, row["run_id"], _tags(exp, row, masks))
    if not found:
        raise NbSubagentsError(f"experiment {exp.name!r} has no ended run to write as a trace yet")
    document = {"resourceSpans": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "nbsubagents"}}]},
        "scopeSpans": [{"scope": {"name": "nbsubagents._sweeps.traces"}, "spans": found}]}]}
    target = Path(path).expanduser()
    write_atomic(target, json.dumps(document, indent=1) + "\n")
    return target
