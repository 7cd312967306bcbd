"""Typed results: an output schema, the instruction that asks the child for it, and the check of the reply.

``normalize`` turns what a caller gives (a JSON Schema dict, or a pydantic model class when pydantic is
installed) into a JSON Schema dict for meta.json; ``instruction`` is the text appended to the task;
``extract`` finds the JSON object at the end of the child's final reply and ``validate`` checks it.
Validation uses the ``jsonschema`` package when it is installed (every keyword of the schema's draft)
and otherwise a small built-in subset (type, properties, required, additionalProperties, items, enum,
const, minimum/maximum, minLength/maxLength, minItems/maxItems). A schema whose ``$ref`` cannot be resolved
from the schema itself (or a standard meta-schema) is refused by ``normalize``, before any run. The supervisor
never checks a reply itself: ``reply_check`` does, in a process of its own that the run's timeout and cancel
can end (a reply nested thousands deep, or a ``pattern`` that backtracks catastrophically, must not take the
supervisor with it), and a JSON value nested deeper than ``MAX_DEPTH`` is refused.
"""

from __future__ import annotations

import json
import re
from urllib.parse import unquote, urldefrag, urljoin

from .errors import NbSubagentsError

from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from typing import Any

MAX_DEPTH = 100  # levels of nesting a reply's JSON value (or a schema) may have


def normalize(schema: Any) -> dict[str, Any]:
    """A JSON Schema dict from a dict or a pydantic model class; NbSubagentsError on anything else."""

    if isinstance(schema, type) and hasattr(schema, "model_json_schema"):
        schema = schema.model_json_schema()  # pydantic v2 model class
        problem = ref_problem(schema)
        if problem:
            raise NbSubagentsError(f"output_schema is not a usable JSON Schema: {problem}")
        return schema
    if isinstance(schema, dict):
        if depth(schema) > MAX_DEPTH:
            raise NbSubagentsError(f"output_schema is nested more than {MAX_DEPTH} levels deep: "
                                   "flatten it with $defs and $ref")
        try:
            json.dumps(schema)
        except (TypeError, ValueError) as exc:
            raise NbSubagentsError(f"output_schema must be JSON (a JSON Schema dict): {exc}") from None
        problem = schema_problem(schema)
        if problem:
            raise NbSubagentsError(f"output_schema is not a valid JSON Schema: {problem}")
        problem = ref_problem(schema)
        if problem:
            raise NbSubagentsError(f"output_schema is not a usable JSON Schema: {problem}")
        return schema
    raise NbSubagentsError("output_schema must be a JSON Schema dict such as {'type': 'object', 'properties': "
                           f"{{...}}}} or a pydantic model class, got {type(schema).__name__}")


def schema_problem(schema: dict[str, Any]) -> str | None:
    """Why ``schema`` is not a JSON Schema (None when it is), checked against its draft's meta-schema."""
    try:
        import jsonschema
    except ImportError:
        kind = schema.get("type")
        types = kind if isinstance(kind, list) else [kind]
        bad = [t for t in types if t is not None and t not in _TYPES]
        return f"unknown type {bad[0]!r}; one of {', '.join(_TYPES)}" if bad else None
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as exc:
        return exc.message
    return None


def depth(value: Any) -> int:
    """How many levels of arrays and objects ``value`` nests (0 for a scalar), counted without recursion and
    only up to ``MAX_DEPTH + 1`` (a structure that contains itself has no depth)."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        item, level = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        deepest = max(deepest, level)
        if deepest > MAX_DEPTH:
            return deepest
        stack.extend((child, level + 1) for child in children)
    return deepest


_DATA_KEYWORDS = ("enum", "const", "examples", "default")  # their values are data: a "$ref" there is no ref
_META_SCHEMAS = ("http://json-schema.org/", "https://json-schema.org/")


def ref_problem(schema: dict[str, Any]) -> str | None:
    """Why a ``$ref`` (or ``$dynamicRef``) of ``schema`` cannot be resolved (None when all can): each must point
    into the schema itself (``#``, ``#/$defs/Name``, an ``$anchor``, a subschema's ``$id``) or to a standard
    meta-schema. Validation would otherwise fail on the first reply that reaches it, after the whole run."""
    ids: dict[str, Any] = {"": schema}
    anchors: set[str] = set()
    refs: list[tuple[str, str, str, str]] = []  # (keyword, ref, resolved, where)
    stack: list[tuple[Any, str, str]] = [(schema, "", "$")]
    while stack:
        node, base, where = stack.pop()
        if isinstance(node, list):
            stack.extend((item, base, f"{where}[{i}]") for i, item in enumerate(node))
            continue
        if not isinstance(node, dict):
            continue
        if isinstance(node.get("$id"), str):
            full = urljoin(base, node["$id"])
            document, fragment = urldefrag(full)
            if fragment:  # draft 6/7: "$id": "#name" names a location
                anchors.add(fragment)
            else:
                base = full
                ids[document] = node
        for key in ("$anchor", "$dynamicAnchor"):
            if isinstance(node.get(key), str):
                anchors.add(node[key])
        for key in ("$ref", "$dynamicRef"):
            if isinstance(node.get(key), str):
                ref = node[key]  # a fragment alone stays in the current document (urljoin drops a urn: base)
                refs.append((key, ref, base + ref if ref.startswith("#") else urljoin(base, ref), where))
        stack.extend((value, base, f"{where}.{key}") for key, value in node.items() if key not in _DATA_KEYWORDS)
    for keyword, ref, resolved, where in refs:
        document, fragment = urldefrag(resolved)
        if document not in ids:
            if document.startswith(_META_SCHEMAS):
                continue
            return (f"the {keyword} {ref!r} at {where} cannot be resolved: it names no part of this schema. "
                    "Put the schema it refers to under $defs and use '#/$defs/<Name>'")
        if not fragment or (not fragment.startswith("/") and fragment in anchors):
            continue
        if not fragment.startswith("/") or _pointer(ids[document], fragment) is _MISSING:
            return (f"the {keyword} {ref!r} at {where} cannot be resolved: " +
                    (f"this schema has nothing at '#{fragment}'" if fragment.startswith("/")
                     else f"this schema has no $anchor {fragment!r}") +
                    ". Refer to a part of the schema, such as '#/$defs/<Name>' or '#/properties/<name>'")
    return None


_MISSING = object()


def _pointer(document: Any, pointer: str) -> Any:
    """The part of ``document`` a JSON Pointer (``/a/0/b``, percent-encoded as in a URI fragment) names."""
    node = document
    for token in unquote(pointer).split("/")[1:]:
        token = token.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            return _MISSING
    return node


def instruction(schema: dict[str, Any]) -> str:
    """What the child is told: end the reply with one JSON object matching the schema."""
    return ("\n\nWhen you are done, end your final reply with a single JSON value that matches this JSON Schema, "
            "in a ```json fenced block, and nothing after it:\n```json\n"
            + json.dumps(schema, indent=2, ensure_ascii=False) + "\n```\n")


_FENCE = re.compile(r"```(?:json)?\s*\n(.*?)\n?```", re.S)


def extract(text: str) -> tuple[bool, Any]:
    """``(True, value)`` for the last JSON value of a reply: its last fenced block, else the text from its
    last ``{``/``[`` that parses to the end; ``(False, reason)`` when there is none."""
    blocks = _FENCE.findall(text or "")
    for block in reversed(blocks):
        try:
            return True, json.loads(block)
        except ValueError:
            continue
        except RecursionError:
            return False, _TOO_DEEP
    stripped = (text or "").rstrip()
    decoder = json.JSONDecoder()
    for i in range(len(stripped) - 1, -1, -1):
        if stripped[i] in "{[":
            try:
                value, end = decoder.raw_decode(stripped, i)
            except ValueError:
                continue
            except RecursionError:
                return False, _TOO_DEEP
            if not stripped[end:].strip():
                return True, value
    return False, "the reply has no JSON value (a ```json block or a JSON object at its end)"


_TOO_DEEP = f"the reply's JSON value is nested too deeply to be read (at most {MAX_DEPTH} levels are allowed)"


def validate(value: Any, schema: dict[str, Any]) -> str | None:
    """None when ``value`` matches ``schema``, else the validation error (where and what)."""
    try:
        import jsonschema
    except ImportError:
        return _validate(value, schema, "$")
    validator = jsonschema.validators.validator_for(schema)(schema)
    error = jsonschema.exceptions.best_match(validator.iter_errors(value))
    if error is None:
        return None
    where = "$" + "".join(f"[{p!r}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
    return f"at {where}: {error.message}"


_TYPES = {"object": dict, "array": list, "string": str, "integer": int, "number": (int, float),
          "boolean": bool, "null": type(None)}


def _is(value: Any, kind: str) -> bool:
    if kind in ("integer", "number") and isinstance(value, bool):
        return False
    if kind == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, _TYPES.get(kind, object))


def _validate(value: Any, schema: Any, where: str) -> str | None:
    """The built-in subset (without jsonschema installed)."""
    if not isinstance(schema, dict):
        return None
    kind = schema.get("type")
    if kind is not None:
        kinds = kind if isinstance(kind, list) else [kind]
        if not any(_is(value, k) for k in kinds):
            return f"at {where}: {json.dumps(value)[:80]} is not of type {' or '.join(map(repr, kinds))}"
    if "enum" in schema and value not in schema["enum"]:
        return f"at {where}: {json.dumps(value)[:80]} is not one of {schema['enum']!r}"
    if "const" in schema and value != schema["const"]:
        return f"at {where}: {json.dumps(value)[:80]} was expected to be {schema['const']!r}"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            return f"at {where}: {value} is less than the minimum of {schema['minimum']}"
        if "maximum" in schema and value > schema["maximum"]:
            return f"at {where}: {value} is greater than the maximum of {schema['maximum']}"
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            return f"at {where}: {value!r} is shorter than {schema['minLength']}"
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            return f"at {where}: {value!r} is longer than {schema['maxLength']}"
    if isinstance(value, dict):
        for key in schema.get("required", []):
            if key not in value:
                return f"at {where}: {key!r} is a required property"
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            if key in props:
                found = _validate(item, props[key], f"{where}.{key}")
            elif extra is False:
                found = f"at {where}: additional property {key!r} is not allowed"
            else:
                found = _validate(item, extra, f"{where}.{key}") if isinstance(extra, dict) else None
            if found:
                return found
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            return f"at {where}: {len(value)} items, fewer than minItems {schema['minItems']}"
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            return f"at {where}: {len(value)} items, more than maxItems {schema['maxItems']}"
        for i, item in enumerate(value):
            found = _validate(item, schema.get("items"), f"{where}[{i}]")
            if found:
                return found
    return None


def check_reply(text: str, schema: dict[str, Any]) -> tuple[Any, str | None]:
    """``(data, None)`` for a reply that ends with a matching JSON value, else ``(None, error message)``."""
    ok, value = extract(text)
    if not ok:
        return None, f"The reply does not match output_schema: {value}"
    if depth(value) > MAX_DEPTH:
        return None, (f"The reply does not match output_schema: its JSON value is nested more than {MAX_DEPTH} "
                      "levels deep")
    try:
        error = validate(value, schema)
    except RecursionError:
        error = "the schema refers to itself more deeply than can be checked"
    if error:
        return None, f"The reply does not match output_schema: {error}"
    return value, None
