"""A scratch Python session for a run's child (the run option ``python_session``): the tool ``python``.

A tool server (``tool_servers``) holding one interpreter's state between calls: each call's code runs in the same
namespace (``exec``, as a REPL does), in the child's working folder, with the run's inputs loaded as variables
before the first call (as the run's record lists them, each by its kind: a DataFrame's Parquet as a pandas
DataFrame, an array's ``.npy`` as a NumPy array, JSON, text, a pickle where the call sent one, a copied path or a
figure as the path of its file; without a record, each file of the run folder's ``inputs/`` by its extension). A call
gives back what it printed (stdout and stderr, also of the processes it starts), the value of its last expression
(a DataFrame as its table), and each matplotlib figure it drew, saved as a PNG in the run folder's ``python/`` and
named in the result; an exception is an error result with its traceback, and the session goes on.

It is a process of the run, never the person's kernel: the harness starts it (it runs inside the run's sandbox,
as the harness does) and it ends with the harness (its stdin closes) or with the run. The interpreter is the
kernel's own (the libraries the notebook has), started as ``python -c`` with this package's folder on its path.
The protocol keeps file descriptors of its own: code that writes to fd 1 or reads fd 0 (a ``print``, a
subprocess, ``input()``) never reaches the MCP stream.

Standard library only (pandas, NumPy and matplotlib are used when the code or the inputs need them).
"""

from __future__ import annotations

import ast
import io
import json
import keyword
import os
import pickle
import re
import signal
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Any

from .record import load
from .tool_servers import Result, Tool, ToolServer, python_argv, serve

NAME = "python"          # the server's name (Claude Code shows its tool as mcp__python__python)
TOOL = "python"          # its one tool
FOLDER = "python"        # in the run folder: the figures it saves (writable in a sandbox)
INPUTS = "inputs"        # in the run folder: the run's inputs, one file each (a card beside each is its description)
OUTPUT_LIMIT = 20_000    # characters of one call's output the model gets (its head and tail)
TABLE_ROWS = 60          # rows of a DataFrame shown as a table

__all__ = ["NAME", "TOOL", "FOLDER", "server", "Session", "load_inputs", "main"]


def server(run_dir: str | os.PathLike[str], run_id: str | None = None) -> ToolServer:
    """The tool server of a run's Python session: the kernel's interpreter, this package from where the kernel has
    it, the run folder as its one argument; matplotlib without a display."""
    env = {"MPLBACKEND": "Agg", "PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    if run_id:
        env["PI_SUBAGENTS_RUN_ID"] = run_id  # procs.MARKER: found and ended with its run, whatever its parent passes
    return ToolServer(NAME, python_argv(__name__, str(run_dir)), env, tools=(TOOL,),
                      writes={FOLDER: "folder"})


def _clip(text: str, limit: int = OUTPUT_LIMIT) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - limit} characters left out ...]\n{text[-half:]}"


def _read_clipped(file: Any) -> str:
    """What a call wrote (``file``, at its end), its head and tail only when it is long: a call that prints
    gigabytes costs no more memory than one that prints a page."""
    size, room = file.tell(), OUTPUT_LIMIT * 4  # bytes: a character may take four
    file.seek(0)
    if size <= 2 * room:
        return file.read().decode(errors="replace")
    head = file.read(room).decode(errors="replace")
    file.seek(size - room)
    tail = file.read(room).decode(errors="replace")
    return f"{head}\n[... {size - 2 * room} bytes left out ...]\n{tail}"


def _kind(value: Any) -> str:
    shape = getattr(value, "shape", None)
    name = type(value).__name__
    if isinstance(shape, tuple):
        return f"{name} {'×'.join(str(n) for n in shape)}"
    if isinstance(value, (dict, list, str)):
        return f"{name} of {len(value)}"
    return name


def _cards(folder: Path) -> set[str]:
    """The files of ``inputs/`` that describe another (``df.md`` beside ``df.parquet``)."""
    stems: dict[str, list[Path]] = {}
    for entry in folder.iterdir():
        stems.setdefault(entry.name.split(".", 1)[0], []).append(entry)
    return {entry.name for entries in stems.values() if len(entries) > 1
            for entry in entries if entry.name.endswith(".md")}


_KINDS = {".parquet": "dataframe", ".npy": "array", ".json": "json", ".txt": "text", ".pkl": "pickle",
          ".png": "figure"}


def inputs_of(run_dir: Path) -> list[tuple[str, str, Path]]:
    """The run's inputs as (variable name, kind, file): as its record lists them (``inputs``: name, kind, file),
    else each file of its ``inputs/`` folder by its extension (a card beside its input is none)."""
    record = load(run_dir)
    entries = record.to_json().get("inputs") if record is not None else None
    found = [(str(e["name"]), str(e.get("kind")), Path(str(e["file"]))) for e in entries
             if isinstance(e, dict) and isinstance(e.get("name"), str) and e.get("file")] if isinstance(
                 entries, list) else []
    folder = run_dir / INPUTS
    if not found and folder.is_dir():
        cards = _cards(folder)
        found = [(path.name.split(".", 1)[0], "path" if path.is_symlink() else _KINDS.get(path.suffix, "path"), path)
                 for path in sorted(folder.iterdir()) if path.name not in cards and not path.name.startswith(".")]
    named = [(re.sub(r"\W", "_", name), kind, path) for name, kind, path in found]  # df-2.x: df_2_x
    return [(name, kind, path) for name, kind, path in named if name.isidentifier() and not keyword.iskeyword(name)]


def _load(kind: str, path: Path) -> Any:
    """One input's value: a DataFrame, an array, JSON, text, a pickle (only when the call sent one); a figure, a
    copied path or anything else: the path of its file."""
    try:  # the kernel's own libraries, when an input needs them (the run's inputs were written with them)
        if kind == "dataframe":
            import pandas  # noqa: PLC0415
            return pandas.read_parquet(path)
        if kind == "array":
            import numpy  # noqa: PLC0415
            return numpy.load(path, allow_pickle=False)
    except ImportError as exc:
        raise ValueError(f"{exc.name} is not installed in {sys.executable}") from None
    if kind == "json":
        return json.loads(path.read_text(encoding="utf-8"))
    if kind == "text":
        return path.read_text(encoding="utf-8")
    if kind == "pickle":  # the person's own value, pickled because the call said so
        with open(path, "rb") as file:
            return pickle.load(file)  # noqa: S301
    return Path(os.path.realpath(path))


def load_inputs(run_dir: Path) -> tuple[dict[str, Any], list[str]]:
    """The run's inputs as variables (name -> value) and a line for each: what it is, or why it was not loaded."""
    values: dict[str, Any] = {}
    lines: list[str] = []
    for name, kind, path in inputs_of(run_dir):
        if name in values:
            continue
        try:
            values[name] = _load(kind, path)
        except Exception as exc:  # noqa: BLE001 (one input that cannot be read is said, the others load)
            lines.append(f"{name}: not loaded from {path.name} ({type(exc).__name__}: {exc})")
            continue
        lines.append(f"{name}: {_kind(values[name])} (from {INPUTS}/{path.name})")
    return values, lines


def _shown(value: Any) -> str:
    """The last expression's value as the model reads it: a DataFrame as its table, anything else its repr."""
    module = type(value).__module__ or ""
    if module.startswith("pandas") and hasattr(value, "to_string"):
        rows = len(value)
        head = value.head(TABLE_ROWS) if rows > TABLE_ROWS else value
        text = head.to_string()
        return text + (f"\n[{TABLE_ROWS} of {rows} rows]" if rows > TABLE_ROWS else "")
    return repr(value)


class Session:
    """One interpreter's state: the namespace every call runs in, the run folder, the figures saved so far."""

    def __init__(self, run_dir: str | os.PathLike[str]) -> None:
        self.run_dir = Path(run_dir)
        self.namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": __builtins__}
        self.loaded: list[str] | None = None  # the inputs' lines, once loaded (said by the first call)
        self.calls = 0
        self.figures = 0

    def tool(self) -> Tool:
        names = [name for name, _, _ in inputs_of(self.run_dir)]
        given = f" The run's inputs are loaded as variables: {', '.join(names)}." if names else ""
        return Tool(TOOL, "Run Python code in a scratch session of your own (not the person's notebook). State is "
                    "kept between calls. The result has what the code printed, the value of its last expression "
                    "(a DataFrame as a table) and the PNG files of the matplotlib figures it drew." + given,
                    {"type": "object", "properties": {"code": {"type": "string", "description": "Python code"}},
                     "required": ["code"], "additionalProperties": False}, self.call)

    def call(self, args: dict[str, Any]) -> Result:
        code = args.get("code")
        if not isinstance(code, str):
            return Result(f"'code' must be text (Python code), got {type(code).__name__}", True)
        said = []
        if self.loaded is None:
            values, self.loaded = load_inputs(self.run_dir)
            self.namespace.update(values)
            said = ["Inputs loaded as variables: " + "; ".join(self.loaded)] if self.loaded else []
        self.calls += 1
        value, error, output = self._run(code)
        figures = self._figures(value)
        parts = [*said, output.rstrip("\n")] if output.strip() else said
        if error is not None:
            parts.append(error)
        elif value is not None and not (type(value).__module__ or "").startswith("matplotlib"):
            parts.append(f"Out[{self.calls}]: {_shown(value)}")
        parts += [f"Figure saved: {path}" for path in figures]
        text = _clip("\n".join(part for part in parts if part)) or "(no output)"
        details = {"call": self.calls, "figures": ", ".join(figures)} if figures else {"call": self.calls}
        return Result(text, error is not None, details)

    def _run(self, code: str) -> tuple[Any, str | None, str]:
        """Run ``code`` (its last expression evaluated for its value); its value, its error, what it wrote to fds
        1 and 2."""
        with tempfile.TemporaryFile() as sink:
            saved = [os.dup(1), os.dup(2)]
            sys.stdout.flush(), sys.stderr.flush()
            os.dup2(sink.fileno(), 1)
            os.dup2(sink.fileno(), 2)
            value = error = None
            signal.signal(signal.SIGINT, signal.default_int_handler)  # an aborted call: KeyboardInterrupt
            try:
                tree = ast.parse(code, "<python>", "exec")
                last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
                exec(compile(tree, "<python>", "exec"), self.namespace)  # noqa: S102 (the session's purpose)
                if last is not None:
                    value = eval(compile(ast.Expression(last.value), "<python>", "eval"), self.namespace)  # noqa: S307
                    if value is not None:
                        self.namespace["_"] = value
            except BaseException as exc:  # noqa: BLE001 (SystemExit and KeyboardInterrupt too: the session goes on)
                error = "".join(traceback.format_exception_only(type(exc), exc)).strip()  # first: what failed
                if not isinstance(exc, SyntaxError):  # then where, from the code's own frame on (not this module's)
                    error += "\n\n" + "".join(traceback.format_exception(type(exc), exc, exc.__traceback__.tb_next))
            finally:
                signal.signal(signal.SIGINT, signal.SIG_IGN)
                sys.stdout.flush(), sys.stderr.flush()
                os.dup2(saved[0], 1)
                os.dup2(saved[1], 2)
                for fd in saved:
                    os.close(fd)
            output = _read_clipped(sink)
        return value, error, output

    def _figures(self, value: Any) -> list[str]:
        """Each figure the call left open (pyplot's, and a Figure that is its value) saved as a PNG, then closed."""
        plt = sys.modules.get("matplotlib.pyplot")
        found = [plt.figure(n) for n in plt.get_fignums()] if plt is not None else []
        if type(value).__module__.startswith("matplotlib") and hasattr(value, "savefig") and value not in found:
            found.append(value)
        saved = []
        for figure in found:
            self.figures += 1
            folder = self.run_dir / FOLDER
            folder.mkdir(exist_ok=True)
            path = folder / f"figure-{self.figures}.png"
            try:
                figure.savefig(path, format="png")
                saved.append(str(path))
            except Exception as exc:  # noqa: BLE001 (a figure that cannot be saved is said, not fatal)
                saved.append(f"(figure {self.figures} not saved: {exc})")
            if plt is not None:
                plt.close(figure)
        return saved


def main(argv: list[str]) -> None:
    """``RUN_DIR``: serve the session's tool on the MCP stream, which keeps fds of its own (fd 0 reads nothing and
    fd 1 goes to stderr, so code that uses them cannot break the stream); the working folder is the child's."""
    if len(argv) != 1:
        sys.stderr.write("usage: python -m nbsubagents._child.pysession RUN_DIR\n")
        raise SystemExit(2)
    stream_in = io.TextIOWrapper(os.fdopen(os.dup(0), "rb"), encoding="utf-8")
    stream_out = io.TextIOWrapper(os.fdopen(os.dup(1), "wb"), encoding="utf-8", write_through=True)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    sys.stdin = open(os.devnull, encoding="utf-8")  # noqa: SIM115 (the session's input(): end of file)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # between calls an interrupt has nothing to stop
    sys.path.insert(0, os.getcwd())  # the child's folder, as a REPL has it
    session = Session(argv[0])
    serve([session.tool()], name=NAME, stdin=stream_in, stdout=stream_out)
