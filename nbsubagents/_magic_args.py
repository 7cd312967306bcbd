"""What every magic of the package shares: the run options' flags, parsing with the usage in the error, and
the one conversion of the package's errors into IPython's ``UsageError``.

``%subagent``'s run-option flags come from ``TaskSpec``'s field metadata (``lifecycle.spec.options("magic")``),
applied as one decorator the way IPython's ``script_args`` shares the ``%%script`` magics' arguments. Used by
``magics`` and ``sweeps.magic``; imports IPython (``import nbsubagents`` does not import this module).
"""

from __future__ import annotations

import functools
import keyword
import re
from typing import Any, Callable, TypeVar

from IPython.core.error import UsageError
from IPython.core.magic_arguments import argument, parse_argstring

from ._config import NbSubagentsError
from ._lifecycle.spec import Option, options

__all__ = ["run_option_arguments", "run_option_values", "usage_errors", "usage", "parse", "check_var",
           "yaml_error", "run_flags"]

F = TypeVar("F", bound=Callable[..., Any])


def usage_errors(magic: F) -> F:
    """A magic whose ``NbSubagentsError`` (bad input the library refused) is a ``UsageError``: IPython shows
    the message, not a traceback. The one place that conversion is written."""
    @functools.wraps(magic)
    def checked(*args: Any, **kwargs: Any) -> Any:
        try:
            return magic(*args, **kwargs)
        except NbSubagentsError as exc:
            raise UsageError(str(exc)) from None
    return checked  # type: ignore[return-value]


def _argument(opt: Option) -> Any:
    how: dict[str, Any] = {"dest": opt.name, "metavar": opt.metavar, "help": opt.help}
    if opt.repeat:
        how["action"] = "append"
    if opt.parse is not str:
        how["type"] = opt.parse
    return argument(opt.spelling, **how)


def run_option_arguments(magic: F) -> F:
    """Add a flag for each run option a magic line takes (``TaskSpec``'s ``magic`` options, in usage order)."""
    for arg in reversed([_argument(opt) for opt in options("magic")]):  # IPython reads them back last-first
        magic = arg(magic)
    return magic


def run_option_values(args: Any) -> dict[str, Any]:
    """The run options of parsed magic arguments, as ``run()``/``start()`` keywords."""
    return {opt.name: getattr(args, opt.name) for opt in options("magic")}


def run_flags() -> tuple[str, ...]:
    """The flags of the run options (for completion); each takes a value."""
    return tuple(opt.spelling for opt in options("magic"))


def usage(magic: Callable[..., Any]) -> str:
    """The magic's one-paragraph usage, as argparse words it (without the RST prefix IPython adds)."""
    text = magic.parser.format_usage()  # type: ignore[attr-defined]
    return re.sub(r"^(usage:\s*)?::\s*", "", text.strip()).strip()


def parse(magic: Callable[..., Any], line: str) -> Any:
    """``parse_argstring`` whose UsageError also shows the usage."""
    try:
        return parse_argstring(magic, line)
    except (UsageError, ValueError) as exc:  # ValueError: an unclosed quote
        raise UsageError(f"{exc}\nUsage: {usage(magic)}") from None


def check_var(name: str | None) -> str | None:
    if name is not None and (not name.isidentifier() or keyword.iskeyword(name)):
        raise UsageError(f"-o needs a Python variable name to store the result in, got {name!r}")
    return name


def yaml_error(exc: Exception, magic: str) -> str:
    mark = getattr(exc, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    problem = getattr(exc, "problem", None) or str(exc)
    return f"%%{magic}: the cell is not valid YAML{where}: {problem}"
