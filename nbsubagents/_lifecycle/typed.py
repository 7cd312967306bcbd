"""Typed objects back: an ``output_schema`` given as a class, and the ``outputs`` files a child must write.

The kernel's side of both. ``schema_of`` turns what a caller gives as ``output_schema`` into the JSON Schema the child
is asked for and the supervisor checks (``child/output_schema``), and names the class (``module:QualName``) so the
run's ``data`` comes back as an instance of it (``instance``: validated here, with pydantic); a reader that cannot
import the class (another kernel where it was defined in a notebook) gets the JSON value. ``plan_outputs`` turns
``outputs`` into the files of the run's ``outputs/`` folder the child is told to write (``instruction``), which the
supervisor checks before the run may complete (``child/repairs``) and ``read_outputs`` reads back as objects: a
DataFrame from Parquet or CSV, the JSON value, a PNG image. A file is read only as the regular file it is (never
through a link: the child writes that folder).
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import stat
import re
import sys
from pathlib import Path
from typing import Any, Mapping
from typing import is_typeddict as _typing_typeddict

from .._child import output_schema
from .._child.repairs import OUTPUTS_DIR, OUTPUTS_ENV
from .._config import NbSubagentsError

__all__ = ["schema_of", "class_path", "load_class", "instance", "plan_outputs", "instruction", "read_outputs",
           "FORMATS"]

FORMATS = {"parquet": "a table as Parquet", "csv": "a table as CSV with a header line",
           "json": "one JSON value", "png": "a PNG image"}
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,63}\Z")


def is_typeddict(value: Any) -> bool:
    """A TypedDict of ``typing`` or of ``typing_extensions`` (which pydantic asks for before Python 3.12)."""
    try:
        from typing_extensions import is_typeddict as extended  # noqa: PLC0415 (pydantic's dependency, optional)
    except ImportError:
        return _typing_typeddict(value)
    return extended(value)


def _is_pydantic_model(value: Any) -> bool:
    return isinstance(value, type) and hasattr(value, "model_json_schema") and hasattr(value, "model_validate")


def _is_class_schema(value: Any) -> bool:
    return _is_pydantic_model(value) or (isinstance(value, type) and (dataclasses.is_dataclass(value)
                                                                      or is_typeddict(value)))


def schema_of(value: Any) -> tuple[dict[str, Any], str | None]:
    """The JSON Schema of an ``output_schema`` and the import path of its class (None for a schema dict): a
    pydantic model (its ``model_json_schema``), a dataclass or TypedDict (pydantic's ``TypeAdapter``, which must then
    be installed), or a JSON Schema dict; anything else is refused by ``child.output_schema.normalize``."""
    if not _is_class_schema(value):
        return output_schema.normalize(value), None
    if not _is_pydantic_model(value):
        adapter = _adapter(value)
        schema = adapter.json_schema()
        problem = output_schema.ref_problem(schema)
        if problem:
            raise NbSubagentsError(f"output_schema is not a usable JSON Schema: {problem}")
    else:
        schema = output_schema.normalize(value)
    return schema, class_path(value)


def _adapter(cls: type) -> Any:
    try:
        from pydantic import TypeAdapter  # noqa: PLC0415 (optional: a dataclass or TypedDict needs it)
    except ImportError:
        kind = "dataclass" if dataclasses.is_dataclass(cls) else "TypedDict"
        raise NbSubagentsError(f"output_schema {cls.__name__} is a {kind}: its JSON Schema is made with pydantic, "
                               "which is not installed. Install it (pip install pydantic), or pass a JSON Schema "
                               "dict such as {'type': 'object', 'properties': {...}}") from None
    try:
        return TypeAdapter(cls)
    except Exception as exc:  # noqa: BLE001 (pydantic's PydanticUserError: a class it cannot take, with its words)
        raise NbSubagentsError(f"output_schema {cls.__name__}: pydantic cannot make its JSON Schema: {exc}") from None


def class_path(cls: type) -> str:
    """Where a class is found again: ``module:QualName``."""
    return f"{cls.__module__}:{cls.__qualname__}"


def load_class(path: str | None) -> type | None:
    """The class at ``module:QualName`` when its module is already imported in this process (a notebook's own
    classes live in ``__main__``); None otherwise. No module is imported for it: the record is read from a folder
    the child could write to, and importing a module runs it."""
    if not path or ":" not in path:
        return None
    module_name, _, qualname = path.partition(":")
    module = sys.modules.get(module_name)
    if module is None or "<locals>" in qualname:
        return None
    try:
        found: Any = module
        for part in qualname.split("."):
            found = getattr(found, part)
    except Exception:  # noqa: BLE001 (not importable here: the reader gets the JSON value)
        return None
    return found if _is_class_schema(found) else None


def instance(data: Any, cls: type) -> Any:
    """``data`` (the JSON value the child ended with) as an instance of ``cls``, validated with pydantic: a
    ValidationError names what does not fit."""
    if _is_pydantic_model(cls):
        return cls.model_validate(data)
    return _adapter(cls).validate_python(data)


# -- outputs -----------------------------------------------------------------------------------------------------
def _format(name: str, kind: Any) -> str:
    if isinstance(kind, str) and kind.lower().lstrip(".") in FORMATS:
        return kind.lower().lstrip(".")
    if isinstance(kind, type):
        if kind.__name__ == "DataFrame" and kind.__module__.split(".")[0] in ("pandas", "polars"):
            return "parquet"
        if kind in (dict, list):
            return "json"
    raise NbSubagentsError(f"outputs[{name!r}] must say what the file holds: pandas.DataFrame (Parquet), dict or "
                           f"list (JSON), or one of {', '.join(map(repr, FORMATS))}; got {kind!r}")


def plan_outputs(outputs: Mapping[str, Any] | None) -> dict[str, dict[str, str]] | None:
    """The record's ``outputs``: name -> ``{"file": "outputs/NAME.EXT", "format": ..., "type": ...}``."""
    if outputs is None:
        return None
    if not isinstance(outputs, Mapping) or not outputs:
        raise NbSubagentsError(f"outputs must be a mapping of names to what each file holds, such as "
                               f"{{'clean': pandas.DataFrame}}; got {outputs!r}")
    plan = {}
    for name, kind in outputs.items():
        if not isinstance(name, str) or not _NAME.match(name):
            raise NbSubagentsError(f"outputs: {name!r} is no usable name: a name of letters, digits, '_' and '-' "
                                   "(it names the file, outputs/NAME.EXT)")
        fmt = _format(name, kind)
        plan[name] = {"file": f"{OUTPUTS_DIR}/{name}.{fmt}", "format": fmt,
                      "type": kind.__name__ if isinstance(kind, type) else fmt}
    return plan


def instruction(plan: Mapping[str, Mapping[str, str]], run_dir: Path) -> str:
    """What the child is told: the files to write, where, in which format."""
    lines = [f"- {run_dir / spec['file']}: {FORMATS[spec['format']]} ({name})" for name, spec in plan.items()]
    return ("\n\nWrite these files before you finish (they are read back as the result; the folder is also in the "
            f"environment variable {OUTPUTS_ENV}):\n" + "\n".join(lines) + "\n")


def _read_regular(path: Path) -> bytes:
    """A file's bytes, never through a link (neither the file nor its folder), only a regular file: the child writes
    that folder."""
    folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        fd = os.open(path.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=folder)
    finally:
        os.close(folder)
    with os.fdopen(fd, "rb") as file:
        if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
            raise OSError(f"{path} is not a regular file")
        return file.read()


def read_outputs(run_dir: Path, plan: Mapping[str, Mapping[str, str]] | None) -> dict[str, Any]:
    """Each output file of a run as an object; a file that cannot be read is an NbSubagentsError naming it."""
    found: dict[str, Any] = {}
    for name, spec in (plan or {}).items():
        path = run_dir / spec["file"]
        fmt = spec.get("format")
        try:
            data = _read_regular(path)
            if fmt == "parquet":
                import pandas  # noqa: PLC0415 (import nbsubagents loads no pandas)

                found[name] = pandas.read_parquet(io.BytesIO(data))
            elif fmt == "csv":
                import pandas  # noqa: PLC0415 (import nbsubagents loads no pandas)

                found[name] = pandas.read_csv(io.BytesIO(data))
            elif fmt == "json":
                found[name] = json.loads(data)
            else:
                found[name] = _image(data)
        except Exception as exc:  # noqa: BLE001 (what failed, named)
            raise NbSubagentsError(f"The output {name!r} ({spec['file']}) could not be read as {fmt}: "
                                   f"{type(exc).__name__}: {exc}") from None
    return found


def _image(data: bytes) -> Any:
    """A PNG as IPython's Image (shown in a notebook), or its bytes without IPython."""
    try:
        from IPython.display import Image  # noqa: PLC0415 (import nbsubagents loads no IPython)
    except ImportError:
        return data
    return Image(data=data, format="png")
