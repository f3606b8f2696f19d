"""An OpenRouter export read by DuckDB's CSV reader into the tables its loader types and stores
from (analyzer.ingest.openrouter_csv): ``lf_or_typed``, a typed row per record read, in the
file's order; ``lf_or_rej``, what the reader refused (its own table); and ``lf_or_fix``, the
reasons of the lines the careful read stood in for.

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

from collections.abc import Callable
from pathlib import Path

import duckdb

from analyzer.ingest.base import LoadContext
from analyzer.ingest.csv_scan import UNTERMINATED, repaired, scan_file
from analyzer.ingest.reading import utf8_copy

TABLES = ("lf_or_typed", "lf_or_rej", "lf_or_rej_scan", "lf_or_fix")
LINE_MAX = 2_000_000  # DuckDB's reader's own limit on a record, in bytes
BUFFER_MIN = 32 * 2**20  # its buffer for that limit (16 times it)
ROOM = 1024  # bytes of a careful read's limit above the longest record

# A record the reader refused that took in the lines after it (its text spans lines), an
# unquoted value (a stray quote, or a record over the line limit), a line over the limit.
_TOOK_IN_LINES = """SELECT count(*) FROM lf_or_rej
    WHERE error_type IN ('UNQUOTED VALUE', 'LINE SIZE OVER MAXIMUM')
       OR strpos(csv_line, chr(10)) > 0"""


def stage(ctx: LoadContext, names: list[str], delim: str, typed: Callable[[str], str]) -> None:
    """Read the export, its header ``names`` split by ``delim``, into the tables (dropped
    first): ``typed(reader)`` is the SELECT of the typed rows over the SQL of a reader."""
    con, src = ctx.con, ctx.source
    shape = (delim, len(names))
    con.execute("DROP TABLE IF EXISTS lf_or_fix")
    con.execute("CREATE TEMP TABLE lf_or_fix (marker VARCHAR, reason VARCHAR, excerpt VARCHAR)")
    # A file in another encoding, or with mixed line ends, is read from an uncompressed UTF-8
    # copy with the same lines.
    with utf8_copy(src, shape) as path:
        compression = (src.head.compression if path == src.path else None) or "none"
        _read(con, path, compression, names, delim, typed)
    if not int(con.execute(_TOOK_IN_LINES).fetchall()[0][0]):
        return
    ctx.stage("reading again (a stray quote, or a long line)")
    with utf8_copy(src, shape, plain=True) as plain:
        flagged, longest = scan_file(plain, delim, len(names))
        if not flagged and longest + ROOM < LINE_MAX:
            return  # (a bad quote within one line: the reader lost nothing)
        with repaired(plain, flagged) as (path, originals):
            for marker, line in originals.items():
                con.execute(
                    "INSERT INTO lf_or_fix VALUES (?, ?, ?)", [marker, UNTERMINATED, line[:300]]
                )
            _read(con, path, "none", names, delim, typed, longest)


def _read(
    con: duckdb.DuckDBPyConnection,
    path: Path,
    compression: str,
    names: list[str],
    delim: str,
    typed: Callable[[str], str],
    longest: int = 0,
) -> None:
    """One read of the file at ``path`` into ``lf_or_typed`` and ``lf_or_rej``, with a line
    limit above ``longest`` bytes."""
    for table in ("lf_or_typed", "lf_or_rej", "lf_or_rej_scan"):
        con.execute(f"DROP TABLE IF EXISTS {table}")
    columns = "{" + ", ".join(f"'c{i}': 'VARCHAR'" for i in range(len(names))) + "}"
    limit = ""
    if longest + ROOM >= LINE_MAX:
        line_max = longest + ROOM
        limit = f", max_line_size = {line_max}, buffer_size = {max(2 * line_max, BUFFER_MIN)}"
    quoted_delim = "'" + delim.replace("'", "''") + "'"
    reader = f"""read_csv($path,
        columns = {columns}, header = true, auto_detect = false,
        delim = {quoted_delim}, quote = '"', escape = '"',
        compression = '{compression}', null_padding = false,
        store_rejects = true, rejects_table = 'lf_or_rej', rejects_scan = 'lf_or_rej_scan'
        {limit})"""
    # One pass over the file: typed values, and why each row cannot load. The table keeps the
    # file's record order, so a row's rowid says where it was.
    con.execute("CREATE TEMP TABLE lf_or_typed AS " + typed(reader), {"path": str(path)})


def store_refused(con: duckdb.DuckDBPyConnection, source_id: int) -> None:
    """The records the reader refused into ``rejects``: one per record, whatever number of
    faults it found in it, with the careful read's reason for a line it stood in for."""
    con.execute(
        """INSERT INTO rejects
           SELECT $sid, line, string_agg(reason, '; ' ORDER BY reason), any_value(excerpt)
           FROM (SELECT r.line,
                        coalesce(any_value(f.reason),
                            CASE WHEN r.error_type ILIKE 'invalid%'
                                      AND any_value(r.error_message) ILIKE '%unicode%'
                                 THEN 'bytes that are not valid UTF-8 in this row (a damaged '
                                      || 'file?)'
                                 ELSE lower(replace(r.error_type, '_', ' ')) || ': '
                                      || any_value(r.error_message) END) AS reason,
                        coalesce(any_value(f.excerpt),
                                 left(trim(any_value(r.csv_line), E'\r\n'), 300)) AS excerpt
                 FROM lf_or_rej r
                 LEFT JOIN lf_or_fix f ON f.marker = trim(r.csv_line, E'\r\n')
                 GROUP BY r.line, r.error_type)
           GROUP BY line""",
        {"sid": source_id},
    )
