"""A run's inputs: the notebook's values (``run(..., inputs={"df": df})``, ``%%subagent --with df``) written into
its folder in the form each kind calls for, so the child reads them as files.

``stage`` turns each value into its bytes in memory, checked before anything is written: a pandas DataFrame is
Parquet plus a Markdown card (shape, dtypes, head, missing values, describe), a NumPy array ``.npy`` plus its card,
a matplotlib Figure a PNG, text a ``.txt``, a JSON-able value (numbers, lists, dicts, ...) ``.json``, a
``pathlib.Path`` a read-only copy of the file (or folder) it names, and ``pickled(obj)`` a pickle (only when the
call asks). Anything else, an input over the ``input_max_mb`` setting or inputs over ``inputs_max_mb`` together,
is refused by name with what would work. ``write`` puts the staged inputs into ``<run>/inputs/`` (read-only), and
the record keeps each one's name, kind, files, bytes and SHA-256.

A path is copied, not linked: the copy is inside the run folder, which the child can read whatever sandbox it runs
in (an isolated run's too); the person's file cannot be changed through it; and the hash in the record names
what the child saw, also after the file changes. pandas, NumPy and matplotlib are imported by nobody here: a value
is one of theirs only when its module is already loaded (``sys.modules``), so ``import nbsubagents`` loads none.

An experiment stages its inputs once (``save``) beside its plan, content-addressed, and its cells name them by
hash (``reference``); ``load`` reads them back as staged inputs when the cells' runs are built.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import pickle
import re
import sys
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any, Callable, Iterable, Mapping

from .._config import NbSubagentsError

__all__ = ["Staged", "InputError", "pickled", "stage", "stage_all", "write", "task_lines", "names_of",
           "save", "reference", "load", "label"]

CARD_ROWS = 5
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}")
_WORKS = ("a pandas DataFrame, a NumPy array, text, a JSON-able value (numbers, lists, dicts), a matplotlib Figure "
          "or a pathlib.Path")


class InputError(NbSubagentsError):
    """An input that cannot be sent: its name, why, and what would work."""


class Pickled:
    """A value the call asked to send as a pickle (``nbsubagents.pickled(obj)``)."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def __repr__(self) -> str:
        return f"pickled({type(self.value).__name__})"


def pickled(value: Any) -> Pickled:
    """Send ``value`` as an input pickled (``inputs={"model": nbsubagents.pickled(model)}``): for what has no file
    form of its own. The child needs the same classes to load it, and loading a pickle runs code: use it only for
    values of your own."""
    return Pickled(value)


@dataclass(frozen=True)
class Staged:
    """One input as it will be written: its kind, its files (path under ``inputs/`` -> bytes), the file that holds
    it and its card (None: none), its size and SHA-256 (of its data, a folder's of its files' names and bytes) and
    a few words on it."""

    name: str
    kind: str
    file: str
    blobs: tuple[tuple[str, bytes], ...]
    card: str | None
    sha256: str
    size: int
    about: str

    def record(self, folder: Path) -> dict[str, Any]:
        """The run record's entry of this input, written in ``folder`` (the run's ``inputs/``)."""
        return {"name": self.name, "kind": self.kind, "file": str(folder / self.file),
                "card": str(folder / self.card) if self.card else None, "bytes": self.size, "sha256": self.sha256,
                "about": self.about}


# -- what each kind becomes ------------------------------------------------------------------------------------
def _loaded(module: str, attr: str) -> type | None:
    found = sys.modules.get(module)
    for part in attr.split("."):
        found = getattr(found, part, None) if found is not None else None
    return found if isinstance(found, type) else None


def _frame(name: str, df: Any) -> tuple[str, bytes, str, str]:
    buffer = io.BytesIO()
    try:
        df.to_parquet(buffer)
    except ImportError:
        raise InputError(f"Input {name!r}: writing a DataFrame as Parquet needs pyarrow: pip install pyarrow") from None
    except (ValueError, TypeError) as exc:  # column names that are no strings, objects Parquet cannot hold
        raise InputError(f"Input {name!r}: the DataFrame cannot be written as Parquet ({exc}); give its columns "
                         "string names and plain values (df.astype(str) for mixed objects), or send "
                         "nbsubagents.pickled(df)") from None
    rows, cols = df.shape
    about = f"DataFrame, {rows} rows × {cols} columns"
    with sys.modules["pandas"].option_context("display.max_columns", 50, "display.width", 200):
        missing = df.isna().sum()
        card = [f"# Input `{name}`: {about}", "", f"Load it with `pandas.read_parquet(\"{name}.parquet\")` "
                "(the file beside this card).", "", "## Columns and dtypes", "", _fenced(df.dtypes.to_string()), "",
                f"## First {min(rows, CARD_ROWS)} rows", "", _fenced(df.head(CARD_ROWS).to_string()), "",
                "## Missing values", "", _fenced(missing[missing > 0].to_string() if missing.any() else "none"), ""]
        if rows and cols:
            try:
                card += ["## describe()", "", _fenced(df.describe(include="all").to_string()), ""]
            except (ValueError, TypeError):
                pass
    return f"{name}.parquet", buffer.getvalue(), "\n".join(card), about


def _fenced(text: str) -> str:
    return f"```\n{text}\n```"


def _array(name: str, array: Any) -> tuple[str, bytes, str, str]:
    np = sys.modules["numpy"]
    buffer = io.BytesIO()
    try:
        np.save(buffer, array, allow_pickle=False)
    except ValueError:
        raise InputError(f"Input {name!r}: a NumPy array of Python objects has no .npy form without pickle; give "
                         f"an array of numbers or text, or send nbsubagents.pickled({name})") from None
    about = f"NumPy array, shape {tuple(array.shape)}, dtype {array.dtype}"
    card = [f"# Input `{name}`: {about}", "", f"Load it with `numpy.load(\"{name}.npy\")` (the file beside this "
            "card).", ""]
    if array.size and np.issubdtype(array.dtype, np.number):
        missing = int(np.isnan(array).sum()) if np.issubdtype(array.dtype, np.floating) else 0
        card += ["## Values", "", f"- min {np.nanmin(array)}, max {np.nanmax(array)}, mean "
                 f"{np.nanmean(array)}" if missing < array.size else "- every value is NaN",
                 f"- missing (NaN): {missing}", ""]
    with np.printoptions(threshold=50, edgeitems=3):
        card += ["## First values", "", _fenced(np.array2string(array[:CARD_ROWS] if array.ndim else array)), ""]
    return f"{name}.npy", buffer.getvalue(), "\n".join(card), about


def _figure(name: str, figure: Any) -> tuple[str, bytes, str, str]:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    width, height = figure.get_size_inches()
    return f"{name}.png", buffer.getvalue(), "", f"matplotlib figure, PNG, {width:g}×{height:g} inches"


def _json(name: str, value: Any) -> tuple[str, bytes, str, str] | None:
    try:
        text = json.dumps(value, indent=2, allow_nan=False)
    except (TypeError, ValueError):
        return None
    kind = {dict: "object", list: "list", tuple: "list"}.get(type(value), type(value).__name__)
    return f"{name}.json", (text + "\n").encode(), "", f"JSON {kind}"


def _path(name: str, path: Path, limit: int) -> tuple[str, tuple[tuple[str, bytes], ...], str, str]:
    """A read-only copy's files (a folder's, every regular file under it; its links are not followed)."""
    path = Path(path).expanduser()
    if path.is_symlink() or not path.exists():
        real = path.resolve() if path.is_symlink() else None
        if real is None or not real.exists():
            raise InputError(f"Input {name!r}: {str(path)!r} does not exist: give an existing file or folder")
        path = real
    if path.is_file():  # NAME plus the file's own suffix (data.csv): no two inputs' files share a name
        _fits(name, path.stat().st_size, limit)
        return name + path.suffix, ((name + path.suffix, path.read_bytes()),), "", f"copy of the file {path}"
    if not path.is_dir():
        raise InputError(f"Input {name!r}: {str(path)!r} is neither a file nor a folder: give a file or a folder")
    files: list[tuple[str, bytes]] = []
    total = 0
    for folder, dirs, names in os.walk(path):
        dirs.sort()
        for item in sorted(names):
            found = Path(folder) / item
            if found.is_file() and not found.is_symlink():
                total += found.stat().st_size
                _fits(name, total, limit)
                files.append((f"{name}/{found.relative_to(path).as_posix()}", found.read_bytes()))
    return name + "/", tuple(files), "", f"copy of the folder {path} ({len(files)} files)"


def _fits(name: str, size: int, limit: int) -> None:
    if size > limit:
        raise InputError(f"Input {name!r} is {_mb(size)}, over the limit of {_mb(limit)} per input: send a "
                         "smaller part (a sample, the columns needed), or raise configure(input_max_mb=...)")


def _mb(size: int) -> str:
    return f"{size:,} bytes" if size < 100_000 else f"{size / 1e6:.1f} MB"


def _check_name(name: Any) -> str:
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise InputError(f"Input name {name!r} is not usable as a file name: give a name of letters, digits, '_', "
                         "'.' or '-' (starting with a letter or '_'), such as 'df'")
    return name


def stage(name: Any, value: Any, *, max_bytes: int) -> Staged:
    """One input in the form its kind calls for, in memory; refused (``InputError``) by name with what would work."""
    name = _check_name(name)
    if isinstance(value, Staged):
        _fits(name, value.size, max_bytes)
        return value if value.name == name else _renamed(value, name)
    card = ""
    if isinstance(value, Pickled):
        try:
            data = pickle.dumps(value.value)
        except Exception as exc:  # pickle raises many kinds (TypeError, PicklingError, AttributeError, ...)
            raise InputError(f"Input {name!r}: the {type(value.value).__name__} cannot be pickled ({exc}); send "
                             f"what it holds as {_WORKS}") from None
        kind, file, blobs, about = "pickle", f"{name}.pkl", ((f"{name}.pkl", data),), \
            f"pickled {type(value.value).__module__}.{type(value.value).__qualname__}"
    elif isinstance(value, PurePath):
        kind = "path"
        file, blobs, card, about = _path(name, Path(value), max_bytes)
    else:
        kind, made = _kind(name, value)
        file, data, card, about = made
        blobs = ((file, data),)
    size = sum(len(data) for _, data in blobs)
    _fits(name, size, max_bytes)
    digest = hashlib.sha256()
    for rel, data in blobs:
        if kind == "path" and file.endswith("/"):
            digest.update(rel.encode() + b"\0" + hashlib.sha256(data).digest())
        else:
            digest.update(data)
    card_file = f"{name}.md" if card else None
    if card_file is not None:
        blobs = (*blobs, (card_file, card.encode()))
    return Staged(name, kind, file, tuple(blobs), card_file, digest.hexdigest(), size, about)


def _kind(name: str, value: Any) -> tuple[str, tuple[str, bytes, str, str]]:
    frame, array, figure = (_loaded("pandas", "DataFrame"), _loaded("numpy", "ndarray"),
                            _loaded("matplotlib.figure", "Figure"))
    if frame is not None and isinstance(value, frame):
        return "dataframe", _frame(name, value)
    if array is not None and isinstance(value, array):
        return "array", _array(name, value)
    if figure is not None and isinstance(value, figure):
        return "figure", _figure(name, value)
    if isinstance(value, str):
        return "text", (f"{name}.txt", value.encode("utf-8"), "", f"text, {len(value):,} characters")
    if isinstance(value, (dict, list, tuple, int, float, bool)) or value is None:
        found = _json(name, value)
        if found is not None:
            return "json", found
        raise InputError(f"Input {name!r}: the {type(value).__name__} is not JSON-able (it holds a value JSON has "
                         "no form for, or NaN): give plain numbers, text, lists and dicts, or send "
                         f"nbsubagents.pickled({name})")
    series = _loaded("pandas", "Series")
    hint = f"; a Series: {name}.to_frame()" if series is not None and isinstance(value, series) else ""
    raise InputError(f"Input {name!r}: a {type(value).__module__}.{type(value).__qualname__} has no file form: give "
                     f"{_WORKS}{hint}, or send nbsubagents.pickled({name}) to send it pickled")


def _renamed(staged: Staged, name: str) -> Staged:
    def moved(rel: str) -> str:
        return name + rel[len(staged.name):] if rel.startswith((staged.name + ".", staged.name + "/")) else rel
    return Staged(name, staged.kind, moved(staged.file), tuple((moved(r), d) for r, d in staged.blobs),
                  moved(staged.card) if staged.card else None, staged.sha256, staged.size, staged.about)


def stage_all(inputs: Any, *, input_max_mb: float, inputs_max_mb: float, where: str = "inputs") -> list[Staged]:
    """Every input of a call, in memory, checked: a mapping of names to values, each within ``input_max_mb`` and
    all within ``inputs_max_mb`` (megabytes); refused before anything is written."""
    if inputs is None:
        return []
    if not isinstance(inputs, Mapping):
        raise InputError(f"{where} must be a dict of names to values, such as {{'df': df}}; got "
                         f"{type(inputs).__name__}")
    staged = [stage(name, value, max_bytes=int(input_max_mb * 1e6)) for name, value in inputs.items()]
    owner: dict[str, str] = {}
    for item in staged:
        for rel, _ in item.blobs:
            if owner.setdefault(rel.split("/")[0], item.name) != item.name:
                raise InputError(f"Inputs {owner[rel.split('/')[0]]!r} and {item.name!r} would both write "
                                 f"inputs/{rel.split('/')[0]}: rename one of them")
    total = sum(s.size for s in staged)
    if total > inputs_max_mb * 1e6:
        sizes = ", ".join(f"{s.name} {_mb(s.size)}" for s in staged)
        raise InputError(f"The inputs ({sizes}) hold {_mb(total)} together, over the limit of "
                         f"{_mb(int(inputs_max_mb * 1e6))} per run: send fewer or smaller ones, or raise "
                         "configure(inputs_max_mb=...)")
    return staged


def write(folder: Path, staged: Iterable[Staged]) -> list[dict[str, Any]]:
    """The staged inputs written in ``folder`` (the run's ``inputs/``), read-only; their record entries."""
    entries = []
    for item in staged:
        for rel, data in item.blobs:
            path = folder / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            path.chmod(0o444)
        entries.append(item.record(folder))
    return entries


def task_lines(entries: list[dict[str, Any]]) -> str:
    """What the prompt says of the inputs: one line per input (name, kind, file, card)."""
    if not entries:
        return ""
    lines = ["", "", "Inputs (read-only files the notebook gave you; each card describes its input):"]
    for e in entries:
        card = f"; card {e['card']}" if e.get("card") else ""
        lines.append(f"- {e['name']} ({e['kind']}: {e['about']}): file {e['file']}{card}")
    return "\n".join(lines)


def label(staged: Iterable[Staged]) -> str:
    """A short name of a set of inputs (an experiment's ``input`` param): each name and the head of its hash."""
    return ", ".join(f"{s.name}:{s.sha256[:8]}" for s in staged)


# -- an experiment's inputs, stored once beside its plan -------------------------------------------------------
def save(folder: Path, staged: Iterable[Staged]) -> dict[str, dict[str, Any]]:
    """Each staged input's files in ``folder/<sha256>/`` (written once; the same data is the same folder), and the
    JSON references an experiment's plan keeps of them (``reference``)."""
    refs = {}
    for item in staged:
        target = folder / item.sha256
        if not (target / ".complete").exists():
            target.mkdir(parents=True, exist_ok=True)
            for rel, data in item.blobs:
                (target / rel).parent.mkdir(parents=True, exist_ok=True)
                (target / rel).write_bytes(data)
            (target / ".complete").write_text(json.dumps(reference(item, target)))
        refs[item.name] = reference(item, target)
    return refs


def reference(item: Staged, stored: Path) -> dict[str, Any]:
    return {"kind": item.kind, "sha256": item.sha256, "bytes": item.size, "about": item.about, "file": item.file,
            "card": item.card, "files": [rel for rel, _ in item.blobs], "stored": str(stored), "name": item.name}


def load(refs: Mapping[str, Any]) -> dict[str, Staged]:
    """The staged inputs an experiment's plan names (``save``'s references), read from where they were stored."""
    out = {}
    for name, ref in refs.items():
        stored = Path(ref["stored"])
        try:
            blobs = tuple((rel, (stored / rel).read_bytes()) for rel in ref["files"])
        except OSError as exc:
            raise InputError(f"Input {name!r} of this experiment was stored in {stored} and cannot be read there "
                             f"({exc.strerror or exc}): run the experiment again with its inputs "
                             "(replace=True)") from None
        out[name] = Staged(ref["name"], ref["kind"], ref["file"], blobs, ref.get("card"), ref["sha256"],
                           int(ref["bytes"]), ref.get("about") or ref["kind"])
    return out


def names_of(words: Iterable[Any], value_of: Callable[[str], Any], where: str) -> dict[str, Any]:
    """The inputs a magic line or the command line names (``--with df,params`` or ``--with data=PATH``): each
    ``NAME`` is ``value_of(NAME)``, each ``NAME=PATH`` the file or folder at PATH."""
    found: dict[str, Any] = {}
    for word in _flat(words):
        name, eq, path = word.partition("=")
        name = _check_name(name.strip())
        if name in found:
            raise InputError(f"{where}: input {name!r} is named twice")
        found[name] = Path(path.strip()) if eq else value_of(name)
    return found


def _flat(words: Iterable[Any]) -> list[str]:
    out: list[str] = []
    for word in words:
        if isinstance(word, (list, tuple)):
            out += _flat(word)
        else:
            out += [w for w in str(word).split(",") if w.strip()]
    return out
