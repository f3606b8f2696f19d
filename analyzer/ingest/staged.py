"""A file read for a batch, as Arrow tables: built where the file was read (in this process or
in a worker, ``analyzer.ingest.workers``) and cheap to send between processes.

What needs no store is done where the file is read: its calls made one per native id (the
in-file duplicates counted), each call filled in and its price key noted, and its calls and
messages turned into Arrow tables. The batch (``analyzer.ingest.batch``) settles the rest
against the store as before, on a few fields of each row (``Staged.calls`` and
``Staged.messages`` hold only those, and each row's place ``_i`` in its table); the rows it
keeps are then taken from the tables. Either way, in a worker or not, the same code builds the
same tables, so where a file was read changes nothing in the store.
"""

from __future__ import annotations

import pickle
from collections import Counter
from typing import Any

import pyarrow as pa

from analyzer.ingest.base import LoadResult
from analyzer.ingest.lowering import (
    CALL_COLUMNS,
    MESSAGE_COLUMNS,
    Lowering,
    StoredReplays,
    fill_call,
    table_of,
)
from analyzer.pricing import PriceKey


class Staged(Lowering):
    """A file's rows staged for a batch (see the module's docstring). It writes nothing: it
    has no load context."""

    def __init__(
        self,
        fmt: str,
        call_prefix: str,
        call_table: pa.Table,
        message_table: pa.Table,
        price_keys: list[PriceKey | None],
        rejects: list[tuple[int | None, str, str | None]],
        result: LoadResult,
    ) -> None:
        self.fmt = fmt
        self.call_prefix = call_prefix
        self.call_table = call_table
        self.message_table = message_table
        self.price_keys = price_keys
        self.rejects = rejects
        self.result = result
        self.skipped = Counter()
        self._read = 0
        self._flushed_replay_ids = set()
        c = call_table
        self.calls = [
            {"native_id": n, "response_id": r, "n_records": k, "parts": p, "replay": b, "_i": i}
            for i, (n, r, k, p, b) in enumerate(
                zip(
                    *(
                        c.column(name).to_pylist()
                        for name in ("native_id", "response_id", "n_records", "parts", "replay")
                    ),
                    strict=True,
                )
            )
        ]
        m = message_table
        self.messages = [
            {"session_id": s, "idx": x, "n_records": k, "call_id": cid, "_i": i}
            for i, (s, x, k, cid) in enumerate(
                zip(
                    *(
                        m.column(name).to_pylist()
                        for name in ("session_id", "idx", "n_records", "call_id")
                    ),
                    strict=True,
                )
            )
        ]

    def settle_calls(self, stored_replays: StoredReplays | None = None) -> set[PriceKey]:
        """Replays dropped (the rest was done when the file was staged); the prices the calls
        left need."""
        self._drop_replays(stored_replays)
        keys = self.price_keys
        return {key for r in self.calls if (key := keys[r["_i"]]) is not None}

    def kept_calls(self, rows: list[dict[str, Any]], source_id: int) -> pa.Table | None:
        return _kept(self.call_table, rows, source_id)

    def kept_messages(self, rows: list[dict[str, Any]], source_id: int) -> pa.Table | None:
        return _kept(self.message_table, rows, source_id)


def _kept(table: pa.Table, rows: list[dict[str, Any]], source_id: int) -> pa.Table | None:
    """The rows of ``table`` that ``rows`` name (in their order), with their source."""
    if not rows:
        return None
    index = [r["_i"] for r in rows]
    if len(index) != table.num_rows or index != list(range(table.num_rows)):
        table = table.take(pa.array(index, pa.int64()))
    return table.append_column("source_id", pa.array([source_id] * len(index), pa.int64()))


def stage(low: Lowering) -> Staged:
    """A file's ``Lowering`` (read with ``batched``) staged for its batch."""
    low.dedupe_calls()
    keys = [fill_call(row) for row in low.calls]
    return Staged(
        low.fmt,
        low.call_prefix,
        table_of(low.calls, CALL_COLUMNS),
        table_of(low.messages, MESSAGE_COLUMNS),
        keys,
        low.rejects,
        low.result,
    )


def _ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue())


def _table(data: bytes) -> pa.Table:
    return pa.ipc.open_stream(pa.py_buffer(data)).read_all()


def to_wire(st: Staged) -> bytes:
    """The staged file as bytes (its tables in Arrow's IPC format)."""
    return pickle.dumps(
        (
            st.fmt,
            st.call_prefix,
            _ipc(st.call_table),
            _ipc(st.message_table),
            st.price_keys,
            st.rejects,
            st.result,
        ),
        protocol=pickle.HIGHEST_PROTOCOL,
    )


def from_wire(data: bytes) -> Staged:
    fmt, prefix, calls, messages, keys, rejects, result = pickle.loads(data)
    return Staged(fmt, prefix, _table(calls), _table(messages), keys, rejects, result)
