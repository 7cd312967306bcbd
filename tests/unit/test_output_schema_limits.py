"""Output schemas and replies that could break a run (issue 22): refs that cannot be resolved are refused before
the run, nesting is bounded, and the check of a reply survives what would make it recurse."""

from __future__ import annotations

import pytest

from nbsubagents._child import output_schema
from nbsubagents._child.errors import NbSubagentsError

ITEM = {"type": "object", "properties": {"name": {"type": "string"}}}


@pytest.mark.parametrize("schema", [
    {"$defs": {"Item": ITEM}, "type": "array", "items": {"$ref": "#/$defs/Item"}},  # pydantic's shape
    {"definitions": {"Item": ITEM}, "properties": {"a": {"$ref": "#/definitions/Item"}}},  # draft 7
    {"properties": {"a": {"$ref": "#"}}},  # the schema itself (recursion)
    {"properties": {"a/b": ITEM, "c": {"$ref": "#/properties/a~1b"}}},  # JSON Pointer escapes
    {"$defs": {"A": {"$anchor": "item", **ITEM}}, "properties": {"a": {"$ref": "#item"}}},
    {"$id": "https://example.com/root.json", "$defs": {"A": {"$id": "item.json", **ITEM}},
     "properties": {"a": {"$ref": "item.json"}, "b": {"$ref": "https://example.com/root.json#/$defs/A"}}},
    {"properties": {"s": {"$ref": "https://json-schema.org/draft/2020-12/schema"}}},  # a meta-schema
    {"properties": {"$ref": ITEM}, "const": {"$ref": "not a ref: data"}},  # a property named $ref; data
])
def test_refs_that_resolve_are_accepted(schema):
    assert output_schema.ref_problem(schema) is None
    assert output_schema.normalize(schema) is schema


@pytest.mark.parametrize("schema, ref, where", [
    ({"properties": {"a": {"$ref": "#/$defs/Missing"}}, "$defs": {"Item": ITEM}}, "#/$defs/Missing",
     "$.properties.a"),
    ({"prefixItems": [{"$ref": "#/prefixItems/5"}]}, "#/prefixItems/5", "$.prefixItems[0]"),
    ({"properties": {"a": {"$ref": "#nowhere"}}}, "#nowhere", "$.properties.a"),
    ({"properties": {"a": {"$ref": "https://example.com/item.json"}}}, "https://example.com/item.json",
     "$.properties.a"),
    ({"properties": {"a": {"$ref": "other.json#/x"}}}, "other.json#/x", "$.properties.a"),
])
def test_a_ref_that_cannot_be_resolved_is_refused_by_name(schema, ref, where):
    with pytest.raises(NbSubagentsError, match="output_schema is not a usable JSON Schema") as err:
        output_schema.normalize(schema)
    assert f"the $ref {ref!r} at {where} cannot be resolved" in str(err.value)
    assert "#/$defs/<Name>" in str(err.value)  # what would be right


def test_a_schema_nested_too_deeply_is_refused():
    schema: dict = {"type": "object"}
    for _ in range(150):
        schema = {"type": "object", "properties": {"x": schema}}
    with pytest.raises(NbSubagentsError, match="nested more than 100 levels deep"):
        output_schema.normalize(schema)


def test_a_schema_that_contains_itself_is_refused_without_hanging():
    schema: dict = {"type": "object", "properties": {}}
    schema["properties"]["self"] = schema
    with pytest.raises(NbSubagentsError):
        output_schema.normalize(schema)


@pytest.mark.parametrize("reply", [
    "```json\n" + "[" * 5000 + "]" * 5000 + "\n```",  # too deep for json itself
    "The list: " + "[" * 5000 + "]" * 5000,
    "```json\n" + '{"a": ' * 500 + "1" + "}" * 500 + "\n```",  # readable, but deeper than allowed
])
def test_a_reply_nested_too_deeply_is_refused_not_raised(reply):
    data, error = output_schema.check_reply(reply, {"type": ["array", "object"]})
    assert data is None and "nested" in error and "100 levels" in error, error


def test_a_reply_at_the_depth_limit_is_checked():
    data, error = output_schema.check_reply("[" * 100 + "]" * 100, {"type": "array"})
    assert error is None and output_schema.depth(data) == 100
