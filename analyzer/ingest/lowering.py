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
from collections.abc import Callable
from datetime import datetime
from typing import Any

import pyarrow as pa

from analyzer.engine.engine import Engine
from analyzer.ingest.arrow_rows import fits, table_of
from analyzer.ingest.base import LoadContext, LoadResult, Unbatchable
from analyzer.ingest.content import EXCERPT_CHARS as EXCERPT_CHARS  # re-exported, as below
from analyzer.ingest.content import args_excerpt as args_excerpt
from analyzer.ingest.content import args_hash as args_hash
from analyzer.ingest.content import brief as brief
from analyzer.ingest.content import excerpt as excerpt
from analyzer.ingest.content import result_hash as result_hash
from analyzer.ingest.content import text_measure as text_measure
from analyzer.ingest.rows import CALL_COLUMNS as CALL_COLUMNS  # re-exported: declared there
from analyzer.ingest.rows import MESSAGE_COLUMNS as MESSAGE_COLUMNS
from analyzer.ingest.rows import MessageRow
from analyzer.ingest.runs import RUN_COLUMNS
from analyzer.ingest.sink import Sink, with_source
from analyzer.model.pricing import PriceKey

MESSAGE_BATCH = 50_000
# Stand-ins a log writes for calls that never reached a model (Claude Code's API errors).
UNPRICED_MODELS = {"<synthetic>"}


def fill_call(row: dict[str, Any]) -> PriceKey | None:
    """A call's row filled in to be stored; returns the price it needs (None: unpriced)."""
    row.setdefault("stream_key", row.get("session_id"))
    row["parts"] = max(row.get("parts") or 0, row.get("n_records") or 0)
    # Priced by name: only a string names a model (see ``_column``).
    model = row.get("model")
    row["model"] = model = model if model.__class__ is str else fits(model, pa.string())
    provider = row.get("provider")
    row["provider"] = provider if provider.__class__ is str else fits(provider, pa.string())
    if (
        model
        and model not in UNPRICED_MODELS
        and (row.get("input_tokens") is not None or row.get("output_tokens") is not None)
    ):
        # Every logged call with tokens gets its list-price estimate, also when the log
        # states a cost itself (kept beside it).
        ts = row.get("ts")
        fast = row.get("variant") == "fast"
        provider = row["provider"] if isinstance(row["provider"], str) else None
        day = ts.date() if isinstance(ts, datetime) else None
        return (str(model), provider, day, fast)
    return None


StoredReplays = Callable[[list[str], list[str]], set[str]]


class Lowering:
    """Collects a file's calls and messages and writes them to the store."""

    def __init__(self, ctx: LoadContext, fmt: str, call_prefix: str) -> None:
        self.ctx = ctx
        self.fmt = fmt
        self.call_prefix = call_prefix
        self.calls: list[dict[str, Any]] = []
        self.messages: list[dict[str, Any]] = []
        self.runs: list[dict[str, Any]] = []
        self.rejects: list[tuple[int | None, str, str | None]] = []
        self.result = LoadResult()
        self.skipped: Counter[str] = Counter()
        self._read = 0
        self._flushed_replay_ids: set[str] = set()

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

    def add_call(self, row: dict[str, Any]) -> None:
        self.calls.append(row)

    def add_message(self, row: MessageRow | dict[str, Any]) -> None:
        self.messages.append(row.values() if isinstance(row, MessageRow) else row)
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
        return Sink(Engine(self.ctx.con))

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
        sid = self.ctx.source_id
        table = with_source(table_of(self.messages, MESSAGE_COLUMNS), sid)
        dup = self.sink.messages(table).get(sid, 0)
        total = sum(int(m.get("n_records") or 0) for m in self.messages)
        self.result.rows_duplicate += dup
        self.result.rows_loaded += total - dup
        self.messages = []

    def _stored_replays(self, ids: list[str], natives: list[str]) -> set[str]:
        """Which of the response ids ``ids`` a stored call of this format has (one not among
        ``natives``)."""
        return self.sink.replayed(self.fmt, ids, natives)

    def _drop_replays(self, stored_replays: StoredReplays | None = None) -> None:
        """A replay (a call flagged ``replay`` whose response_id another call of this format
        has, earlier in this file or in the store) is the same API response written again:
        its records are duplicates, and the messages it carried are not kept twice."""
        replays = [r for r in self.calls if r.get("replay") and r.get("response_id")]
        if not replays:
            return
        # The original wins wherever it was written in the file; among replays, the first.
        seen = {
            r["response_id"] for r in self.calls if not r.get("replay") and r.get("response_id")
        }
        dropped: list[dict[str, Any]] = []
        for row in replays:
            if row["response_id"] in seen:
                dropped.append(row)
            else:
                seen.add(row["response_id"])
        stored = (stored_replays or self._stored_replays)(
            sorted({r["response_id"] for r in replays}), [r["native_id"] for r in replays]
        )
        gone = {id(r) for r in dropped}
        dropped += [r for r in replays if r["response_id"] in stored and id(r) not in gone]
        if not dropped:
            return
        gone = {id(r) for r in dropped}
        self.calls = [r for r in self.calls if id(r) not in gone]
        ids = {self.call_id(r["native_id"]) for r in dropped}
        kept = [m for m in self.messages if m.get("call_id") not in ids]
        records = sum(int(r.get("n_records") or 0) for r in dropped) + sum(
            int(m.get("n_records") or 0) for m in self.messages if m.get("call_id") in ids
        )
        self.messages = kept
        self.result.rows_duplicate += records
        self._flushed_replay_ids |= ids

    def dedupe_calls(self) -> None:
        """The same call twice in one file (a conversation that saved a message twice): the
        first is the call, the records of the others are duplicates."""
        unique: dict[object, dict[str, Any]] = {}
        in_file_dup = 0
        for row in self.calls:
            if row.get("native_id") in unique:
                in_file_dup += int(row.get("n_records") or 0)
            else:
                unique[row.get("native_id")] = row
        self.calls = list(unique.values())
        self.result.rows_duplicate += in_file_dup

    def settle_calls(self, stored_replays: StoredReplays | None = None) -> set[PriceKey]:
        """The file's calls made ready to store, without the store's duplicates (checked when
        they are inserted): one per native id, replays dropped, each filled in; returns the
        prices they need."""
        self.dedupe_calls()
        self._drop_replays(stored_replays)
        return {key for key in map(fill_call, self.calls) if key is not None}

    def _flush_calls(self) -> None:
        if not self.calls:
            return
        sid = self.ctx.source_id
        to_price = self.settle_calls()
        self.result.calls = (self.result.calls or 0) + len(self.calls)
        table = with_source(table_of(self.calls, CALL_COLUMNS), sid)
        dup = self.sink.calls(self.fmt, self.call_prefix, table, to_price).get(sid, 0)
        total = sum(int(c.get("n_records") or 0) for c in self.calls)
        self.result.rows_duplicate += dup
        self.result.rows_loaded += total - dup
        self.calls = []

    def _flush_runs(self) -> None:
        """Store the runs (``Sink.runs``) and account for their records."""
        if not self.runs:
            return
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
        if self._flushed_replay_ids:  # a replay's messages written in an earlier batch
            self.sink.drop_messages(self.ctx.source_id, sorted(self._flushed_replay_ids))
        if not self.ctx.batched:
            self._flush_rejects()
        self.result.rows_read = self._read
        self.result.rows_skipped = sum(self.skipped.values())
        self.result.skipped_kinds = dict(sorted(self.skipped.items()))
        return self.result
