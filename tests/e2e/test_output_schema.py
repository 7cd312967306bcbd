"""Typed results: the child is asked for JSON matching a schema; the supervisor extracts and validates it."""

from __future__ import annotations

import json

import pytest

import nbsubagents
from nbsubagents._child import output_schema
from nbsubagents._config import NbSubagentsError

SCHEMA = {"type": "object", "properties": {"files": {"type": "integer"}, "ok": {"type": "boolean"},
                                           "summary": {"type": "object", "properties": {"lang": {"type": "string"}}}},
          "required": ["files", "ok"]}


def replying(text):
    def script(body, index):
        return {"text": text}
    return script


def test_a_matching_reply_becomes_run_data_and_result_json_data(project, scripted):
    scripted.script = replying('Counted.\n```json\n{"files": 2, "ok": true, "summary": {"lang": "py"}}\n```')
    run = nbsubagents.run("scout", "count the files", show=False, output_schema=SCHEMA)

    assert run.status == "completed"
    assert run.data == {"files": 2, "ok": True, "summary": {"lang": "py"}}
    assert json.loads((run.dir / "result.json").read_text())["data"] == run.data
    sent = scripted.requests[0]["messages"][-1]["content"]
    sent = sent if isinstance(sent, str) else " ".join(p.get("text", "") for p in sent)
    assert "matches this JSON Schema" in sent and '"required"' in sent  # the child was told the schema
    frame = nbsubagents.runs(expand_data=True)
    assert frame.loc[0, "data.files"] == 2 and frame.loc[0, "data.summary.lang"] == "py"
    assert "data.files" not in nbsubagents.runs().columns


def test_a_non_matching_reply_fails_with_the_validation_error_and_keeps_the_text(project, scripted):
    scripted.script = replying('Here: {"files": "two", "ok": true}')
    run = nbsubagents.run("scout", "count", show=False, output_schema=SCHEMA)

    assert run.status == "failed"
    assert run.result["stopReason"] == "schema"
    assert "does not match output_schema" in run.error and "$.files" in run.error and "'integer'" in run.error
    assert run.output == 'Here: {"files": "two", "ok": true}' and run.data is None


def test_a_reply_without_json_fails_saying_so(project, scripted):
    scripted.script = replying("I counted two files.")
    run = nbsubagents.run("scout", "count", show=False, output_schema=SCHEMA)
    assert run.status == "failed" and "has no JSON value" in run.error


@pytest.mark.parametrize("schema, expected", [
    ({"type": "objekt"}, "output_schema is not a valid JSON Schema"),
    ("{'type': 'object'}", "output_schema must be a JSON Schema dict"),
    ({"type": "object", "default": {1, 2}}, "output_schema must be JSON"),
])
def test_bad_schemas_are_refused_before_anything_starts(project, schema, expected):
    with pytest.raises(NbSubagentsError, match=expected):
        nbsubagents.run("scout", "x", show=False, output_schema=schema)


def test_pydantic_models_are_accepted_when_installed(project, scripted):
    pydantic = pytest.importorskip("pydantic")

    class Count(pydantic.BaseModel):
        files: int

    scripted.script = replying('{"files": 4}')
    run = nbsubagents.run("scout", "count", show=False, output_schema=Count)
    assert run.data == Count(files=4) and run.result["data"] == {"files": 4}  # an instance; the record keeps JSON


@pytest.mark.parametrize("use_jsonschema", [True, False])
def test_validation_with_and_without_jsonschema(monkeypatch, use_jsonschema):
    if not use_jsonschema:
        import sys
        monkeypatch.setitem(sys.modules, "jsonschema", None)  # import fails: the built-in subset is used
    assert output_schema.check_reply('```json\n{"files": 1, "ok": false}\n```', SCHEMA) == (
        {"files": 1, "ok": False}, None)
    data, error = output_schema.check_reply('{"ok": true}', SCHEMA)
    assert data is None and "'files' is a required property" in error
    data, error = output_schema.check_reply('{"files": 1, "ok": true, "summary": {"lang": 3}}', SCHEMA)
    assert "$.summary.lang" in error
    assert output_schema.check_reply("[1, 2]", {"type": "array", "items": {"type": "integer"}}) == ([1, 2], None)
