"""A view's table: its columns (name, type, unit) and its rows, computed once, and the one CSV
writer and the one Parquet schema every table of the tool is written with.

A cell holds the value as computed (a ``Decimal`` of dollars, a naive UTC ``datetime``, a
list); its column's type says how each format writes it: dollars in CSV with all their digits
and no trailing zeros, in Parquet as ``decimal128(18, 10)``; a time in CSV as ISO with a
``Z``, in Parquet as a UTC timestamp; a list in CSV joined by ``;``; nothing as an empty cell.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

from analyzer.model.formatting import CsvOut

# A column's type: how its values are written (``text``: as they are).
TYPES = ("text", "int", "usd", "time", "list")


@dataclass(frozen=True)
class Column:
    """A column of a view: its name (the CSV heading, the Parquet field), the type of its
    values (one of :data:`TYPES`) and their unit (``USD``, ``tokens``, ``UTC``; for a
    reader)."""

    name: str
    type: str = "text"
    unit: str = ""

    def __post_init__(self) -> None:
        if self.type not in TYPES:
            raise ValueError(f"column {self.name}: unknown type {self.type!r}")


@dataclass
class Table:
    """A view's columns and rows (each row a value per column, in the columns' order), and
    the notes a reader needs beside them."""

    columns: list[Column]
    rows: list[Sequence[Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    heading_if_empty: bool = True  # false: a table of no rows is written as nothing in CSV

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    def records(self) -> list[dict[str, Any]]:
        """The rows as dicts by column name, values as computed."""
        return [dict(zip(self.names, row, strict=True)) for row in self.rows]


def usd_text(d: Decimal) -> str:
    """Dollars as a CSV cell: all their digits to the tenth decimal, no trailing zeros.

    >>> usd_text(Decimal("6.1600000000")), usd_text(Decimal(0)), usd_text(Decimal("0.5"))
    ('6.16', '0', '0.5')
    """
    return f"{d:.10f}".rstrip("0").rstrip(".") if d else "0"


def time_text(ts: datetime | None) -> str:
    """A stored (naive UTC) time as a CSV cell: ISO with a ``Z``; nothing for none."""
    return "" if ts is None else ts.isoformat() + "Z"


def cell(column: Column, value: Any) -> Any:
    """A value as its column is written in CSV (``formatting.csv_cell`` then makes the text
    safe for a spreadsheet)."""
    if value is None:
        return ""
    if column.type == "usd":
        return usd_text(Decimal(value))
    if column.type == "time":
        return time_text(value)
    if column.type == "list":
        return ";".join(value)
    return value


def csv_text(table: Table) -> str:
    """The table as CSV: a heading row, then a row each."""
    buf = io.StringIO()
    w = CsvOut(buf)
    if not table.rows and not table.heading_if_empty:
        return ""
    w.writerow(table.names)
    for row in table.rows:
        w.writerow([cell(c, v) for c, v in zip(table.columns, row, strict=True)])
    return buf.getvalue()


def arrow_table(table: Table) -> Any:
    """The table as an Arrow table, its schema from the columns' types (a ``text`` column
    is a string, an ``int`` an int64, ``usd`` a decimal128(18, 10), ``time`` a UTC timestamp,
    ``list`` a list of strings)."""
    import pyarrow as pa

    types = {
        "text": pa.string(),
        "int": pa.int64(),
        "usd": pa.decimal128(18, 10),
        "time": pa.timestamp("us", tz="UTC"),
        "list": pa.list_(pa.string()),
    }
    schema = pa.schema([(c.name, types[c.type]) for c in table.columns])
    return pa.Table.from_pylist(table.records(), schema=schema)
