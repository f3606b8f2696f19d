"""The one sink: every agent-log row reaches the store here, one file or a batch of them.

A format module parses and hands its rows to a ``Lowering`` (``analyzer.ingest.lowering``),
which turns them into Arrow tables of the declared columns, each row with its file's
``source_id``. The sink writes those tables and settles, in SQL (``analyzer/sql/ingest/``),
what is a duplicate of what the store holds: a call of the same native id (unless the file
holds more of it: then it replaces the stored one), a message of the same session and index,
a run of the same session, a replayed API response. It answers each file's duplicate
records, from which the file's accounting is completed
(``rows_read = rows_loaded + rows_rejected + rows_duplicate + rows_skipped``).

A batch of files is written file after file through the same statements, so a file meets
what the files before it stored exactly as if each had been loaded on its own.
"""

from __future__ import annotations

import json
from dataclasses import astuple, dataclass, fields
from datetime import datetime

import pyarrow as pa

from analyzer.engine.engine import Engine
from analyzer.ingest.base import LoadResult
from analyzer.model.pricing import COST_SQL, WEB_SEARCH_SQL, PriceKey, price_table

Reject = tuple[int | None, str, str | None]  # line, reason, excerpt

REJECT_COLUMNS: dict[str, pa.DataType] = {
    "source_id": pa.int64(),
    "line": pa.int64(),
    "reason": pa.string(),
    "excerpt": pa.string(),
}


# The Arrow type of each type a ``SourceRow`` field is annotated with (as text).
SOURCE_TYPES: dict[object, pa.DataType] = {
    "int": pa.int64(),
    "str": pa.string(),
    "datetime": pa.timestamp("us"),
}


@dataclass(frozen=True)
class SourceRow:
    """A file's ``sources`` row: what it is, and its accounting."""

    source_id: int
    path: str  # as the store names it
    format: str
    sha256: str
    bytes: int
    ingested_at: datetime
    rows_read: int
    rows_loaded: int
    rows_rejected: int
    rows_duplicate: int
    rows_skipped: int
    skipped_kinds: str  # JSON
    encoding: str
    options: str  # JSON
    file_stat: str

    @classmethod
    def of(cls, source_id: int, result: LoadResult, **file: str | int | datetime) -> SourceRow:
        """The row of a file loaded with ``result`` (``file``: the other columns)."""
        return cls(
            source_id=source_id,
            rows_read=result.rows_read,
            rows_loaded=result.rows_loaded,
            rows_rejected=result.rows_rejected,
            rows_duplicate=result.rows_duplicate,
            rows_skipped=result.rows_skipped,
            skipped_kinds=json.dumps(result.skipped_kinds),
            **file,  # type: ignore[arg-type]
        )


def sources_table(rows: list[SourceRow]) -> pa.Table:
    """``sources`` rows as an Arrow table of the store's column types."""
    cols = list(zip(*map(astuple, rows), strict=True))
    return pa.table(
        {
            f.name: pa.array(col, SOURCE_TYPES[f.type])
            for f, col in zip(fields(SourceRow), cols, strict=True)
        }
    )


Responses = dict[str, set[str]]  # response id -> native ids of the stored calls answering it


def replayed(responses: Responses, ids: list[str], natives: list[str]) -> set[str]:
    """Which of ``ids`` a call of ``responses`` answers, one not among ``natives``."""
    others = set(natives)
    return {rid for rid in ids if responses.get(rid, set()) - others}


def with_source(table: pa.Table, source_id: int) -> pa.Table:
    """``table`` with a ``source_id`` column of ``source_id``."""
    return table.append_column("source_id", pa.repeat(pa.scalar(source_id, pa.int64()), len(table)))


class Sink:
    """Writes staged rows to the store through the engine, settling their duplicates."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def calls(
        self, fmt: str, prefix: str, table: pa.Table, prices: set[PriceKey]
    ) -> dict[int, int]:
        """Insert the calls of ``table`` (with ``source_id``), of format ``fmt``, their ids
        made with ``prefix``, priced at ``prices``; returns each source's duplicate records."""
        with self.engine.step() as e:
            e.register("lf_call_batch", table)
            e.register("lf_price", price_table(prices))
            found = e.rows(
                "ingest/settle_calls.sql",
                {"fmt": fmt, "prefix": prefix},
                cost=COST_SQL,
                web_search=WEB_SEARCH_SQL,
            )
        return {int(sid): int(dup) for sid, dup in found}

    def messages(self, table: pa.Table) -> dict[int, int]:
        """Insert the messages of ``table`` (with ``source_id``); returns each source's
        duplicate records."""
        with self.engine.step() as e:
            e.register("lf_msg_batch", table)
            found = e.rows("ingest/settle_messages.sql")
        return {int(sid): int(dup) for sid, dup in found}

    def runs(self, fmt: str, source_id: int, table: pa.Table) -> int:
        """Insert a file's runs (``table``, of ``analyzer.ingest.runs.RUN_COLUMNS``), then
        divide each new run's stated cost over its calls where it says so; returns the
        records of the runs stored already (duplicates)."""
        with self.engine.step() as e:
            e.register("lf_run_batch", table)
            dup = e.scalar("ingest/settle_runs.sql", {"sid": source_id})
        self.engine.run("ingest/apportion.sql", {"sid": source_id, "fmt": fmt})
        return int(dup)

    def responses(self, fmt: str, ids: list[str]) -> Responses:
        """The native ids of the stored calls of ``fmt`` answering each of the response ids
        ``ids``."""
        found: Responses = {}
        if ids:
            for rid, native in self.engine.rows(
                "ingest/stored_responses.sql", {"fmt": fmt, "ids": ids}
            ):
                found.setdefault(str(rid), set()).add(str(native))
        return found

    def replayed(self, fmt: str, ids: list[str], natives: list[str]) -> set[str]:
        """Which of the response ids ``ids`` a stored call of ``fmt`` has (one not among
        ``natives``)."""
        return replayed(self.responses(fmt, ids), ids, natives)

    def drop_messages(self, source_id: int, call_ids: list[str]) -> None:
        """The messages of ``call_ids`` (replays) a source wrote in an earlier chunk."""
        self.engine.run("ingest/drop_messages.sql", {"sid": source_id, "ids": call_ids})

    def rejects(self, rows: list[tuple[int, int | None, str, str | None]]) -> None:
        """Insert rejects: (source_id, line, reason, excerpt)."""
        if not rows:
            return
        cols = list(zip(*rows, strict=True))
        table = pa.table(
            {
                name: pa.array(col, t)
                for (name, t), col in zip(REJECT_COLUMNS.items(), cols, strict=True)
            }
        )
        self.insert("rejects", table)

    def sources(self, rows: list[SourceRow]) -> None:
        """The files' ``sources`` rows (once their accounting is complete)."""
        self.insert("sources", sources_table(rows))

    def insert(self, name: str, table: pa.Table) -> None:
        """Rows settled already (rejects, ``sources`` rows) inserted into table ``name``."""
        with self.engine.step() as e:
            e.register("lf_rows", table)
            e.run("INSERT INTO {{table}} BY NAME SELECT * FROM lf_rows", table=name)
