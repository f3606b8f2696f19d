"""Rows (dicts a format module builds) as Arrow tables of the store's column types: the one
conversion every loader's rows go through on their way into DuckDB, which never fails a file for
a value of the wrong type."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pyarrow as pa

_INT_RANGE = {pa.int64(): (-(2**63), 2**63), pa.int32(): (-(2**31), 2**31)}


def fits(value: object, t: pa.DataType) -> object:
    """``value`` if it is of column type ``t`` (and in its range), else None."""
    if t == pa.string():
        return value if isinstance(value, str) else None
    if t == pa.bool_():
        return value if isinstance(value, bool) else None
    if t in _INT_RANGE:
        lo, hi = _INT_RANGE[t]
        ok = isinstance(value, int) and not isinstance(value, bool) and lo <= value < hi
        return value if ok else None
    if t == pa.float64():
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        return float(value) if abs(value) < 1e300 else None
    if pa.types.is_timestamp(t):
        return value if isinstance(value, datetime) else None
    return value


def _column(values: list[object], t: pa.DataType) -> pa.Array:
    """An Arrow column of type ``t``. The loaders read every log value as what it should be;
    should one slip through as another type or out of range, that value is stored as NULL
    rather than failing the file."""
    try:
        return pa.array(values, type=t)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError, ValueError):
        return pa.array([fits(v, t) for v in values], type=t)


# Each set of columns' row type and empty table, made once (a history of thousands of small
# files asks for both of each file): by the columns' ``id``, the columns kept beside them.
_SHAPES: dict[int, tuple[dict[str, pa.DataType], pa.StructType, pa.Table]] = {}


def _shape(columns: dict[str, pa.DataType]) -> tuple[pa.StructType, pa.Table]:
    known = _SHAPES.get(id(columns))
    if known is None or known[0] is not columns or len(known[1]) != len(columns):
        struct = pa.struct(list(columns.items()))
        empty = pa.Table.from_struct_array(pa.array([], type=struct))
        known = _SHAPES[id(columns)] = (columns, struct, empty)
    return known[1], known[2]


def table_of(rows: list[dict[str, Any]], columns: dict[str, pa.DataType]) -> pa.Table:
    """The rows as an Arrow table of ``columns`` (a value of another type is NULL)."""
    struct, empty = _shape(columns)
    if not rows:
        return empty
    try:  # all at once, in Arrow's own code; a value of another type fails it
        return pa.Table.from_struct_array(pa.array(rows, type=struct))
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError, ValueError):
        pass
    return pa.table({name: _column([r.get(name) for r in rows], t) for name, t in columns.items()})
