"""An OpenRouter export read by DuckDB's CSV reader into the tables its loader types and stores
from (analyzer.formats.bills.openrouter_csv): ``lf_or_typed``, a typed row per record read, in the
file's order; ``lf_or_rej``, what the reader refused (its own table); and ``lf_or_fix``, the
reasons of the lines the careful read stood in for. One pass reads and types
(``sql/ingest/bills/openrouter/typed.sql``).

The first read is DuckDB's alone, as fast as it goes (no Python per row). Two things make it
lose records: a quote that is never closed takes the lines after it into one refused record
(or into a value), and a record over the reader's line limit (2,000,000 bytes unless told) is
refused as "Value with unterminated quote found". Both show in what it refused: a refused
record that spans lines, an unquoted value, a line too long. Then the file is read again,
carefully: ``analyzer.ingest.csv_scan`` finds its records in Python, the first line of a
record with an unterminated quote is replaced by a marker the reader refuses (its reject says
``unterminated quote`` with the line as it was), and DuckDB reads that copy with a line limit
as large as its longest record.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from analyzer.engine.engine import Engine
from analyzer.ingest.base import LoadContext
from analyzer.ingest.csv_scan import UNTERMINATED, repaired, scan_file
from analyzer.ingest.reading import utf8_copy

LINE_MAX = 2_000_000  # DuckDB's reader's own limit on a record, in bytes
BUFFER_MIN = 32 * 2**20  # its buffer for that limit (16 times it)
ROOM = 1024  # bytes of a careful read's limit above the longest record
UNITS = "ingest/bills/openrouter"


def stage(
    engine: Engine,
    ctx: LoadContext,
    names: list[str],
    delim: str,
    typing: Mapping[str, str],
    params: Mapping[str, object],
) -> None:
    """Read the export, its header ``names`` split by ``delim``, into the tables (dropped
    first): ``typing`` and ``params`` are the slots and parameters of ``typed.sql`` that say
    how the rows are typed (analyzer.formats.bills.openrouter_csv)."""
    src = ctx.source
    shape = (delim, len(names))
    engine.run("DROP TABLE IF EXISTS lf_or_fix")
    engine.run("CREATE TEMP TABLE lf_or_fix (marker VARCHAR, reason VARCHAR, excerpt VARCHAR)")
    read = _Read(engine, len(names), delim, typing, params)
    # A file in another encoding, or with mixed line ends, is read from an uncompressed UTF-8
    # copy with the same lines.
    with utf8_copy(src, shape) as path:
        read(path, (src.head.compression if path == src.path else None) or "none")
    # A record the reader refused that took in the lines after it (its text spans lines), an
    # unquoted value (a stray quote, or a record over the line limit), a line over the limit.
    if not int(engine.scalar(f"{UNITS}/took_in_lines.sql")):
        return
    ctx.stage("reading again (a stray quote, or a long line)")
    with utf8_copy(src, shape, plain=True) as plain:
        flagged, longest = scan_file(plain, delim, len(names))
        if not flagged and longest + ROOM < LINE_MAX:
            return  # (a bad quote within one line: the reader lost nothing)
        with repaired(plain, flagged) as (path, originals):
            for marker, line in originals.items():
                engine.run(
                    "INSERT INTO lf_or_fix VALUES (?, ?, ?)", [marker, UNTERMINATED, line[:300]]
                )
            read(path, "none", longest)


class _Read:
    """One read of a file into ``lf_or_typed`` and ``lf_or_rej`` (``typed.sql``)."""

    def __init__(
        self,
        engine: Engine,
        n_columns: int,
        delim: str,
        typing: Mapping[str, str],
        params: Mapping[str, object],
    ) -> None:
        self.engine = engine
        self.slots = {
            **typing,
            "columns": "{" + ", ".join(f"'c{i}': 'VARCHAR'" for i in range(n_columns)) + "}",
            "delim": "'" + delim.replace("'", "''") + "'",
        }
        self.params = params

    def __call__(self, path: Path, compression: str, longest: int = 0) -> None:
        """Read the file at ``path`` with a line limit above ``longest`` bytes."""
        for table in ("lf_or_typed", "lf_or_rej", "lf_or_rej_scan"):
            self.engine.run(f"DROP TABLE IF EXISTS {table}")
        limit = ""
        if longest + ROOM >= LINE_MAX:
            line_max = longest + ROOM
            limit = f", max_line_size = {line_max}, buffer_size = {max(2 * line_max, BUFFER_MIN)}"
        # One pass over the file: typed values, and why each row cannot load. The table keeps
        # the file's record order, so a row's rowid says where it was.
        self.engine.run(
            f"{UNITS}/typed.sql",
            {"path": str(path), **self.params},
            compression=f"'{compression}'",
            limit=limit,
            **self.slots,
        )


def store_refused(engine: Engine, source_id: int) -> None:
    """The records the reader refused into ``rejects``: one per record, whatever number of
    faults it found in it, with the careful read's reason for a line it stood in for."""
    engine.run(f"{UNITS}/refused.sql", {"sid": source_id})
