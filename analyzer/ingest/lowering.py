"""Lowering agent logs to the canonical tables, a batch at a time.

Log formats are read in Python (one record at a time, never a whole file) and handed here as
rows. Each row says how many input records built it (``n_records``), so when a call turns out
to be stored already its records are counted as duplicates, and for every file
``rows_read = rows_loaded + rows_rejected + rows_duplicate + rows_skipped`` holds.

Rows are inserted through Arrow; the finish reason and the response kind are computed on the way
in by the shared SQL rules (``analyzer/sql/classify.sql``), so every format is classified alike.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from analyzer.ingest.base import LoadContext, LoadResult, Unbatchable
from analyzer.ingest.content import EXCERPT_CHARS as EXCERPT_CHARS  # re-exported, as below
from analyzer.ingest.content import ToolResultSaid as ToolResultSaid
from analyzer.ingest.content import args_excerpt as args_excerpt
from analyzer.ingest.content import args_hash as args_hash
from analyzer.ingest.content import brief as brief
from analyzer.ingest.content import excerpt as excerpt
from analyzer.ingest.content import refusal_said as refusal_said
from analyzer.ingest.content import result_hash as result_hash
from analyzer.ingest.content import text_measure as text_measure
from analyzer.ingest.content import tool_result_said as tool_result_said
from analyzer.ingest.rows import CallRow, MessageRow

if TYPE_CHECKING:  # (the writing side is imported when it writes: see ``__getattr__``)
    import pyarrow as pa

    from analyzer.ingest.sink import Sink

MESSAGE_BATCH = 50_000


def fill_call(row: dict[str, Any]) -> None:
    """A call's row filled in to be stored: its stream (its session's, unless it names one)
    and the records that shaped it (at least those it accounts for)."""
    if row.get("stream_key") is None:
        row["stream_key"] = row.get("session_id")
    row["parts"] = max(row.get("parts") or 0, row.get("n_records") or 0)


def __getattr__(name: str) -> Any:
    """``CALL_COLUMNS`` and ``MESSAGE_COLUMNS``, re-exported from ``rows`` (declared there),
    made when first asked for (with pyarrow)."""
    if name in ("CALL_COLUMNS", "MESSAGE_COLUMNS"):
        from analyzer.ingest import rows

        return getattr(rows, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def call_table(calls: list[dict[str, Any]]) -> pa.Table:
    """A file's calls, in its order, as an Arrow table of the declared columns."""
    from analyzer.ingest.arrow_rows import table_of
    from analyzer.ingest.rows import CALL_COLUMNS

    for row in calls:
        fill_call(row)
    return table_of(calls, CALL_COLUMNS)


class Lowering:
    """Collects a file's calls and messages and writes them to the store."""

    def __init__(self, ctx: LoadContext, fmt: str, call_prefix: str) -> None:
        self.ctx = ctx
        self.fmt = fmt
        self.call_prefix = call_prefix
        self.calls: list[dict[str, Any]] = []
        self.call_tables: list[pa.Table] = []  # calls built as Arrow tables, after ``calls``
        self.messages: list[dict[str, Any]] = []
        self.runs: list[dict[str, Any]] = []
        self.rejects: list[tuple[int | None, str, str | None]] = []
        self.result = LoadResult()
        self.skipped: Counter[str] = Counter()
        self._read = 0
        self.gone: list[tuple[int, str]] = []  # replays left out (source_id, call_id)
        self.messages_written = False  # (some messages were written before the calls)

    # -- what the format module reports ----------------------------------------------------

    @property
    def records_read(self) -> int:
        """The records read so far (the number of the last one)."""
        return self._read

    def read(self, n: int = 1) -> None:
        """``n`` input records were read."""
        self._read += n

    def skip(self, kind: str, n: int = 1) -> None:
        """A record of a kind that holds nothing the store keeps."""
        self.skipped[kind] += n

    def reject(self, line: int | None, reason: str, raw: bytes | str | None = None) -> None:
        # (300 characters take at most 1,203 bytes: a line of any length is not decoded whole)
        text = raw[:1203].decode("utf-8", "replace") if isinstance(raw, bytes) else raw
        self.rejects.append((line, reason, text[:300] if text else None))
        if len(self.rejects) >= MESSAGE_BATCH:
            if self.ctx.batched:
                raise Unbatchable
            self._flush_rejects()

    def call_id(self, native_id: str) -> str:
        return f"{self.call_prefix}:{native_id}"

    def add_call(self, row: CallRow) -> None:
        self.calls.append(row.values())

    def add_call_table(self, table: pa.Table) -> None:
        """Calls built as an Arrow table of the declared columns (``CALL_COLUMNS``), in the
        file's order, filled in as ``fill_call`` fills a row (after the calls added as rows)."""
        self.call_tables.append(table)

    def calls_table(self) -> pa.Table:
        """The calls added, as rows and as tables, in their order: one Arrow table."""
        if not self.call_tables:
            return call_table(self.calls)
        tables = [call_table(self.calls)] if self.calls else []
        tables += self.call_tables
        if len(tables) == 1:
            return tables[0]
        import pyarrow as pa

        return pa.concat_tables(tables)

    def write_calls(self) -> None:
        """Write the calls added so far (a part of a long file: the loader knows none of them
        takes another line). Only for a file loaded on its own."""
        assert not self.ctx.batched and not self.ctx.whole
        self._flush_calls()

    def add_message(self, row: MessageRow) -> None:
        self.messages.append(row.values())
        if len(self.messages) >= MESSAGE_BATCH:
            if self.ctx.batched:
                raise Unbatchable
            self._flush_messages()

    def add_run(self, row: dict[str, Any]) -> None:
        """What the log says of a whole run (``runs``): its verdict, stated totals and limits.
        With ``cost_apportioned`` its stated cost is divided over the session's calls that
        have no cost of their own stated (see ``apportion``). Formats that write runs are not
        batched."""
        if self.ctx.batched:
            raise Unbatchable
        row.setdefault("stream_key", row.get("session_id"))
        row.setdefault("n_records", 0)
        self.runs.append(row)

    # -- writing ----------------------------------------------------------------------------

    @property
    def sink(self) -> Sink:
        """Where the file's rows are written (the load's connection)."""
        from analyzer.ingest.sink import Sink

        return Sink(self.ctx.engine)

    def _flush_rejects(self) -> None:
        if not self.rejects:
            return
        sid = self.ctx.source_id
        self.sink.rejects([(sid, line, reason, ex) for line, reason, ex in self.rejects])
        self.result.rows_rejected += len(self.rejects)
        self.rejects = []

    def _flush_messages(self) -> None:
        if not self.messages:
            return
        from analyzer.ingest.arrow_rows import table_of
        from analyzer.ingest.rows import MESSAGE_COLUMNS
        from analyzer.ingest.sink import in_order

        sid = self.ctx.source_id
        table = in_order(table_of(self.messages, MESSAGE_COLUMNS), sid)
        dup = self.sink.messages(table, self.gone).get(sid, 0)
        self.messages_written = True
        total = sum(int(m.get("n_records") or 0) for m in self.messages)
        self.result.rows_duplicate += dup
        self.result.rows_loaded += total - dup
        self.messages = []

    def _flush_calls(self) -> None:
        """Store the file's calls (``Sink.calls`` settles their duplicates) and account for
        their records; the replays left out are kept in ``gone`` for the messages."""
        if not self.calls and not self.call_tables:
            return
        from analyzer.ingest.sink import in_order

        sid = self.ctx.source_id
        calls = self.calls_table()
        total = sum(int(n or 0) for n in calls.column("n_records").to_pylist())
        table = in_order(calls, sid)
        settled = self.sink.calls(self.fmt, self.call_prefix, table)
        dup = settled.dup.get(sid, 0)
        self.result.calls = (self.result.calls or 0) + settled.calls.get(sid, 0)
        self.result.rows_duplicate += dup
        self.result.rows_loaded += total - dup
        if self.messages_written and settled.gone:  # a replay's messages written already
            self.sink.drop_messages(sid, [cid for _, cid in settled.gone])
        self.gone += settled.gone
        self.calls, self.call_tables = [], []

    def _flush_runs(self) -> None:
        """Store the runs (``Sink.runs``) and account for their records."""
        if not self.runs:
            return
        from analyzer.ingest.arrow_rows import table_of
        from analyzer.ingest.runs import RUN_COLUMNS

        total = sum(int(r.get("n_records") or 0) for r in self.runs)
        sid = self.ctx.source_id
        dup = self.sink.runs(self.fmt, sid, table_of(self.runs, RUN_COLUMNS))
        self.result.rows_duplicate += dup
        self.result.rows_loaded += total - dup
        self.runs = []

    def finish(self) -> LoadResult:
        """Write what is left and return the file's accounting. Loaded with other files in
        one batch (``ctx.batched``), nothing is written: the rows are kept for the batch, which
        settles their duplicates against the store and completes the accounting."""
        if self.ctx.batched:
            self.ctx.staged = self
        else:
            self.result.calls = self.result.calls or 0
            self._flush_calls()
            self._flush_messages()
            self._flush_runs()
        if not self.ctx.batched:
            self._flush_rejects()
        self.result.rows_read = self._read
        self.result.rows_skipped = sum(self.skipped.values())
        self.result.skipped_kinds = dict(sorted(self.skipped.items()))
        return self.result
