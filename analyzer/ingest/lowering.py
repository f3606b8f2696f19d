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

import duckdb
import pyarrow as pa

from analyzer.ingest.arrow_rows import fits, table_of
from analyzer.ingest.base import LoadContext, LoadResult, Unbatchable
from analyzer.ingest.content import EXCERPT_CHARS as EXCERPT_CHARS  # re-exported, as below
from analyzer.ingest.content import args_excerpt as args_excerpt
from analyzer.ingest.content import args_hash as args_hash
from analyzer.ingest.content import brief as brief
from analyzer.ingest.content import excerpt as excerpt
from analyzer.ingest.content import result_hash as result_hash
from analyzer.ingest.content import text_measure as text_measure
from analyzer.ingest.runs import store_runs
from analyzer.model.pricing import COST_SQL, WEB_SEARCH_SQL, PriceKey, price_table

# Columns a log ingestor may fill for a call; everything else in `calls` stays NULL. The raw
# finish reason is normalised and the kind derived in SQL.
CALL_COLUMNS: dict[str, pa.DataType] = {
    "native_id": pa.string(),
    "response_id": pa.string(),
    "line": pa.int64(),
    "ts": pa.timestamp("us"),
    "stream_key": pa.string(),
    "session_id": pa.string(),
    "turn_id": pa.string(),
    "seq": pa.int64(),
    "agent_id": pa.string(),
    "parent_session_id": pa.string(),
    "model": pa.string(),
    "provider": pa.string(),
    "app": pa.string(),
    "project": pa.string(),
    "variant": pa.string(),  # 'fast': Anthropic's fast mode, priced at its own rate
    "input_tokens": pa.int64(),
    "cached_input_tokens": pa.int64(),
    "cache_write_tokens": pa.int64(),
    "cache_write_1h_tokens": pa.int64(),
    "output_tokens": pa.int64(),
    "reasoning_tokens": pa.int64(),
    "output_final": pa.bool_(),
    "cost_usd": pa.float64(),  # a cost the log states itself (with cost_basis 'reported')
    "cost_basis": pa.string(),
    "web_search_requests": pa.int64(),
    "finish_reason_raw": pa.string(),
    "content_chars": pa.int64(),
    "visible_chars": pa.int64(),
    "reasoning_chars": pa.int64(),
    "tool_call_count": pa.int64(),
    "http_status": pa.int32(),
    "received_done": pa.bool_(),
    "event_count": pa.int64(),
    "duration_ms": pa.float64(),
    "ttft_ms": pa.float64(),
    "streamed": pa.bool_(),
    "cancelled": pa.bool_(),
    "reply_saved": pa.bool_(),
    "n_records": pa.int64(),  # records this call accounts for (loaded or duplicate)
    "parts": pa.int64(),  # records that shaped it, incl. ones accounted for elsewhere
    # A replay: if a call of this format with the same response_id (one API response) is
    # stored already, or came earlier in this file, this one is a duplicate of it.
    "replay": pa.bool_(),
    # Where output_tokens is a placeholder: the output estimated from what the call wrote
    # (priced: cost_basis 'estimated_output'), and whether that is a lower bound.
    "output_estimate_tokens": pa.int64(),
    "output_estimate_floor": pa.bool_(),
}
MESSAGE_COLUMNS: dict[str, pa.DataType] = {
    "session_id": pa.string(),
    "idx": pa.int64(),
    "role": pa.string(),
    "kind": pa.string(),
    "ts": pa.timestamp("us"),
    "turn_id": pa.string(),
    "text_chars": pa.int64(),
    "visible_chars": pa.int64(),
    "tool_name": pa.string(),
    "tool_args_hash": pa.string(),
    "tool_use_id": pa.string(),
    "tool_result_hash": pa.string(),
    "is_error": pa.bool_(),
    "call_id": pa.string(),
    "excerpt": pa.string(),
    "n_records": pa.int64(),
}
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


_NOT_STORED = """WHERE NOT EXISTS (SELECT 1 FROM calls c
                          WHERE c.format = $fmt AND c.native_id = b.native_id)"""
StoredReplays = Callable[[list[str], list[str]], set[str]]


def insert_calls(con: duckdb.DuckDBPyConnection, prefix: str, fmt: str, sid: int | None) -> None:
    """Insert the calls of ``lf_call_batch`` priced by ``lf_price`` (both registered), those
    of this format stored already left out. ``sid`` is their source; None: the batch has a
    ``source_id`` column (many files at once, their duplicates settled before)."""
    # Logs carry tokens, and some a cost of their own ('reported'); every call with tokens is
    # also estimated from list prices (cost_estimate_usd), and the estimate is its cost when
    # the log states none.
    con.execute(
        f"""INSERT INTO calls BY NAME
        SELECT b.* EXCLUDE (n_records, parts, replay, cost_usd, cost_basis, fr, estimate,
                            logged {", source_id" if sid is None else ""}),
               b.parts AS record_count,
               $prefix || ':' || b.native_id AS call_id,
               {"b.source_id" if sid is None else "$sid"} AS source_id,
               $fmt AS format,
               coalesce(b.cost_usd, b.estimate)::DECIMAL(18, 10) AS cost_usd,
               CASE WHEN b.cost_usd IS NOT NULL THEN b.cost_basis
                    WHEN b.estimate IS NOT NULL AND b.output_estimate_tokens IS NOT NULL
                    THEN 'estimated_output'
                    WHEN b.estimate IS NOT NULL THEN 'estimated' END AS cost_basis,
               b.estimate::DECIMAL(18, 10) AS cost_estimate_usd,
               CASE WHEN b.cost_usd IS NULL AND b.output_estimate_tokens IS NOT NULL
                    THEN b.logged END::DECIMAL(18, 10) AS cost_logged_usd,
               CASE WHEN b.cost_usd IS NULL AND b.estimate IS NOT NULL
                         AND b.web_search_requests > 0
                    THEN {WEB_SEARCH_SQL} END::DECIMAL(18, 10) AS cost_extra_usd,
               b.fr AS finish_reason,
               lf_response_kind(b.fr, b.http_status, b.output_tokens, b.reasoning_tokens,
                                b.content_chars, b.visible_chars, b.reasoning_chars,
                                b.tool_call_count) AS response_kind
        FROM (SELECT b.*, lf_finish_reason(b.finish_reason_raw, b.cancelled) AS fr,
                     CASE WHEN p.model IS NOT NULL
                          THEN {COST_SQL} + {WEB_SEARCH_SQL} END AS logged,
                     -- a placeholder output count is priced at its estimate
                     logged + CASE WHEN b.output_estimate_tokens IS NOT NULL
                                   THEN (b.output_estimate_tokens
                                         - coalesce(b.output_tokens, 0)) * p.p_out
                                   ELSE 0 END AS estimate
              FROM lf_call_batch b
              LEFT JOIN lf_price p
                ON p.model = b.model
               AND (b.input_tokens IS NOT NULL OR b.output_tokens IS NOT NULL)
               AND p.provider IS NOT DISTINCT FROM b.provider
               AND p.day IS NOT DISTINCT FROM b.ts::DATE
               AND p.fast = (b.variant IS NOT DISTINCT FROM 'fast')
               AND coalesce(b.input_tokens, 0) > p.above
               AND (p.upto IS NULL OR coalesce(b.input_tokens, 0) <= p.upto)) b
        {"" if sid is None else _NOT_STORED}""",
        {"prefix": prefix, "fmt": fmt} | ({} if sid is None else {"sid": sid}),
    )


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

    def add_message(self, row: dict[str, Any]) -> None:
        self.messages.append(row)
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

    def _flush_rejects(self) -> None:
        if not self.rejects:
            return
        con = self.ctx.con
        con.executemany(
            "INSERT INTO rejects VALUES (?, ?, ?, ?)",
            [(self.ctx.source_id, line, reason, ex) for line, reason, ex in self.rejects],
        )
        self.result.rows_rejected += len(self.rejects)
        self.rejects = []

    def _flush_messages(self) -> None:
        if not self.messages:
            return
        con = self.ctx.con
        batch = table_of(self.messages, MESSAGE_COLUMNS)
        con.register("lf_msg_batch", batch)
        try:
            # A message of a session already stored (a log file that grew and is read again)
            # is a duplicate.
            dup = con.execute(
                """SELECT coalesce(sum(n_records), 0) FROM lf_msg_batch b
                   WHERE EXISTS (SELECT 1 FROM messages m
                                 WHERE m.session_id = b.session_id AND m.idx = b.idx)"""
            ).fetchall()[0][0]
            con.execute(
                """INSERT INTO messages BY NAME
                   SELECT $sid AS source_id, * EXCLUDE (n_records) FROM lf_msg_batch b
                   WHERE NOT EXISTS (SELECT 1 FROM messages m
                                     WHERE m.session_id = b.session_id AND m.idx = b.idx)""",
                {"sid": self.ctx.source_id},
            )
            total = sum(int(m.get("n_records") or 0) for m in self.messages)
        finally:
            con.unregister("lf_msg_batch")
        self.result.rows_duplicate += int(dup)
        self.result.rows_loaded += total - int(dup)
        self.messages = []

    def _stored_replays(self, ids: list[str], natives: list[str]) -> set[str]:
        """Which of the response ids ``ids`` a stored call of this format has (one not among
        ``natives``)."""
        return {
            rid
            for (rid,) in self.ctx.con.execute(
                """SELECT DISTINCT response_id FROM calls
                   WHERE format = $fmt AND response_id IN (SELECT unnest($ids))
                     AND native_id NOT IN (SELECT unnest($natives))""",
                {"fmt": self.fmt, "ids": ids, "natives": natives},
            ).fetchall()
        }

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
        con = self.ctx.con
        to_price = self.settle_calls()
        self.result.calls = (self.result.calls or 0) + len(self.calls)
        batch = table_of(self.calls, CALL_COLUMNS)
        con.register("lf_call_batch", batch)
        con.register("lf_price", price_table(to_price))
        try:
            # A call stored already is a duplicate - unless this file holds more of it (a log
            # read while a call was still being written, read again once it grew): then the
            # fuller version replaces the stored one, and only the records it adds count as
            # loaded. A replaced call is matched to its bill again afterwards.
            known = con.execute(
                """SELECT b.native_id, b.n_records, b.parts, c.record_count, c.call_id
                   FROM lf_call_batch b JOIN calls c
                     ON c.format = $fmt AND c.native_id = b.native_id""",
                {"fmt": self.fmt},
            ).fetchall()
            dup = 0
            grown: list[str] = []
            for _native, n_new, parts_new, parts_old, call_id in known:
                if parts_old is not None and parts_new > parts_old:
                    grown.append(call_id)
                    dup += min(n_new, parts_old)
                else:
                    dup += n_new
            if grown:
                con.execute(
                    "UPDATE calls SET superseded_by = NULL WHERE superseded_by IN ?", [grown]
                )
                con.execute("DELETE FROM calls WHERE call_id IN ?", [grown])
            insert_calls(con, self.call_prefix, self.fmt, self.ctx.source_id)
            total = sum(int(c.get("n_records") or 0) for c in self.calls)
        finally:
            con.unregister("lf_call_batch")
            con.unregister("lf_price")
        self.result.rows_duplicate += int(dup)
        self.result.rows_loaded += total - int(dup)
        self.calls = []

    def _flush_runs(self) -> None:
        """Store the runs (``analyzer.ingest.runs.store_runs``) and account for their records."""
        if not self.runs:
            return
        total = sum(int(r.get("n_records") or 0) for r in self.runs)
        dup = store_runs(self.ctx.con, self.ctx.source_id, self.fmt, self.runs)
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
            self.ctx.con.execute(
                "DELETE FROM messages WHERE source_id = ? AND call_id IN ?",
                [self.ctx.source_id, sorted(self._flushed_replay_ids)],
            )
        if not self.ctx.batched:
            self._flush_rejects()
        self.result.rows_read = self._read
        self.result.rows_skipped = sum(self.skipped.values())
        self.result.skipped_kinds = dict(sorted(self.skipped.items()))
        return self.result
