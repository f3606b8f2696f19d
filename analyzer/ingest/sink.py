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
from collections.abc import Sequence
from dataclasses import dataclass, fields
from datetime import datetime

import pyarrow as pa

from analyzer.console import warn
from analyzer.engine.engine import Engine
from analyzer.ingest.base import LoadResult
from analyzer.model.pricing import COST_SQL, WEB_SEARCH_SQL, price_table

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
class FileFacts:
    """What the store keeps of a file beside its accounting (its ``sources`` row's other
    columns)."""

    path: str  # as the store names it
    format: str
    sha256: str
    bytes: int
    ingested_at: datetime
    encoding: str
    options: str  # JSON: the ingest options that shaped its rows
    file_stat: str


@dataclass(frozen=True)
class SourceRow:
    """A file's ``sources`` row: what it is, and its accounting."""

    source_id: int
    path: str
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
    options: str
    file_stat: str

    @classmethod
    def of(cls, source_id: int, result: LoadResult, facts: FileFacts) -> SourceRow:
        """The row of the file ``facts`` describe, loaded with ``result``."""
        return cls(
            source_id=source_id,
            skipped_kinds=json.dumps(result.skipped_kinds),
            **result.accounting(),
            **vars(facts),
        )


def sources_table(rows: list[SourceRow]) -> pa.Table:
    """``sources`` rows as an Arrow table of the store's column types."""
    # (each value read as it is: ``astuple`` deep-copies them, a few seconds of 100,000 files)
    return pa.table(
        {
            f.name: pa.array([getattr(r, f.name) for r in rows], SOURCE_TYPES[f.type])
            for f in fields(SourceRow)
        }
    )


# Stand-ins a log writes for calls that never reached a model (Claude Code's API errors).
UNPRICED_MODELS = {"<synthetic>"}

# What the settlement of a batch of calls reads of each (``settle_in_file.sql``,
# ``settle_calls.sql``: lf_call_batch); the calls kept are taken from the batch by row.
BATCH_KEYS = ["source_id", "pos", "native_id", "replay", "response_id", "n_records"]

GONE_COLUMNS: dict[str, pa.DataType] = {"source_id": pa.int64(), "call_id": pa.string()}


@dataclass(frozen=True)
class SettledCalls:
    """What settling a set of files' calls found, by source: the duplicate records (within
    the file and against the store), the calls the file has, and the replays left out
    (``gone``: source_id, call_id), whose messages are duplicates too."""

    dup: dict[int, int]
    calls: dict[int, int]
    gone: list[tuple[int, str]]


def gone_table(gone: Sequence[tuple[int, str]]) -> pa.Table:
    """Replays left out (source_id, call_id) as the messages' settlement takes them."""
    cols = list(zip(*gone, strict=True)) or [(), ()]
    return pa.table(
        {n: pa.array(c, t) for (n, t), c in zip(GONE_COLUMNS.items(), cols, strict=True)}
    )


def in_order(table: pa.Table, source_id: int) -> pa.Table:
    """A file's calls or messages (in its order) as the sink takes them: with their
    ``source_id`` and their place ``pos``, the order they are stored in."""
    table = with_source(table, source_id)
    return table.append_column("pos", pa.array(range(len(table)), pa.int64()))


def with_source(table: pa.Table, source_id: int) -> pa.Table:
    """``table`` with a ``source_id`` column of ``source_id``."""
    return table.append_column("source_id", pa.repeat(pa.scalar(source_id, pa.int64()), len(table)))


class Sink:
    """Writes staged rows to the store through the engine, settling their duplicates."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def calls(self, fmt: str, prefix: str, table: pa.Table) -> SettledCalls:
        """Insert the calls of ``table`` (``call_batch``: every call a file's log wrote, with
        ``source_id`` and ``pos``), of format ``fmt``, their ids made with ``prefix``: settled
        within each file (``settle_in_file.sql``), priced, then settled against the store."""
        with self.engine.step() as e:
            rows = pa.array(range(len(table)), pa.int64())
            e.register("lf_call_batch", table.select(BATCH_KEYS).append_column("lf_row", rows))
            kept = e.arrow("ingest/settle_in_file.sql", {"fmt": fmt}).column("lf_row")
            e.register("lf_call_kept", table.take(kept))
            keys = e.rows("ingest/price_keys.sql", {"unpriced": sorted(UNPRICED_MODELS)})
            unpriced: list[str] = []
            e.register("lf_price", price_table({(m, p, d, f) for m, p, d, f in keys}, unpriced))
            for said in unpriced:
                warn(said)
            found = e.rows(
                "ingest/settle_calls.sql",
                {"fmt": fmt, "prefix": prefix},
                cost=COST_SQL,
                web_search=WEB_SEARCH_SQL,
            )
            gone = e.rows(
                "SELECT source_id, $prefix || ':' || native_id FROM lf_call_gone ORDER BY ALL",
                {"prefix": prefix},
            )
        return SettledCalls(
            dup={int(sid): int(dup) for sid, dup, _ in found},
            calls={int(sid): int(n) for sid, _, n in found},
            gone=[(int(sid), str(cid)) for sid, cid in gone],
        )

    def messages(self, table: pa.Table, gone: Sequence[tuple[int, str]] = ()) -> dict[int, int]:
        """Insert the messages of ``table`` (with ``source_id``), but for those of the replays
        ``gone`` (``SettledCalls.gone``); returns each source's duplicate records."""
        with self.engine.step() as e:
            e.register("lf_msg_batch", table)
            e.register("lf_msg_gone", gone_table(gone))
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
