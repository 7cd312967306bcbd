"""A registry query read straight into Arrow columns, when the ``arrow`` extra is installed.

``sqlite3`` makes a Python object of every value a query returns (about 130 ns each here: most of the time of a
``runs()`` over many rows), and pyarrow then reads them all again. ADBC's SQLite driver (``adbc-driver-sqlite``,
from Apache Arrow) steps the query in C and writes each value into Arrow buffers, so no value becomes a Python
object. ``columns`` gives ``None`` when the driver is not installed, or when a column holds a value of another type
than the one asked (a number SQLite kept as text, in a registry edited by hand): the caller then takes
``sqlite3``'s way, which coerces such values as it always did.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Mapping

# The driver decides each column's type from the first batch of rows it reads: one batch of every row lets it see
# every value (a column whose first thousand rows are NULL, as errors are, would else be taken for a number).
_ONE_BATCH = {"adbc.sqlite.query.batch_rows": str(1 << 30)}


def columns(db: Path, sql: str, args: Iterable[Any], types: Mapping[str, str]) -> dict[str, Any] | None:
    """The query's columns by name as pyarrow arrays: ``types[name]`` (``"int64"``, ``"float64"``) or text
    (``large_string``, pandas' string storage). None without the driver or when a value has another type."""
    try:
        import pyarrow as pa
        from adbc_driver_sqlite import dbapi
    except ImportError:
        return None
    try:
        with dbapi.connect(Path(db).as_uri() + "?mode=ro", autocommit=True) as conn, conn.cursor() as cursor:
            cursor.adbc_statement.set_options(**_ONE_BATCH)
            cursor.execute(sql, tuple(args))
            table = cursor.fetch_arrow_table()
    except dbapi.Error:
        return None  # sqlite3's way says what is wrong, as it would without the driver
    out = {}
    for name, column in zip(table.column_names, table.columns):
        want = pa.type_for_alias(types.get(name, "large_string"))
        values = column.combine_chunks()
        if values.null_count == len(values):  # no value to tell the type by: the driver took it for a number
            out[name] = pa.nulls(len(values), want)
        elif values.type == want or _widens(values.type, want):
            out[name] = values.cast(want)
        else:
            return None
    return out


def _widens(got: Any, want: Any) -> bool:
    """Whether ``got`` casts to ``want`` without changing a value: text to large text, whole numbers to reals."""
    import pyarrow as pa

    return (pa.types.is_string(got) and pa.types.is_large_string(want)) or \
        (pa.types.is_integer(got) and pa.types.is_floating(want))
