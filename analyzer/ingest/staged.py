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
from array import array
from collections import Counter
from typing import Any

import pyarrow as pa

from analyzer.ingest.arrow_rows import table_of
from analyzer.ingest.base import LoadResult
from analyzer.ingest.lowering import (
    CALL_COLUMNS,
    MESSAGE_COLUMNS,
    Lowering,
    StoredReplays,
    fill_call,
)
from analyzer.model.pricing import PriceKey


class Staged(Lowering):
    """A file's rows staged for a batch (see the module's docstring). It writes nothing: it
    has no load context."""

    def __init__(
        self,
        fmt: str,
        call_prefix: str,
        call_table: pa.Table,
        message_table: pa.Table,
        prices: tuple[list[PriceKey], array[int]],
        rejects: list[tuple[int | None, str, str | None]],
        result: LoadResult,
    ) -> None:
        self.fmt = fmt
        self.call_prefix = call_prefix
        self.call_table = call_table
        self.message_table = message_table
        self.prices, self.price_of = prices  # the distinct keys; each call's (-1: none)
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
        self._messages: list[dict[str, Any]] | None = None  # made when first asked for
        self.messages_filtered = False  # not all of the table's messages are the file's

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The file's messages by the fields the batch settles them by (and ``_i``)."""
        if self._messages is None:
            m = self.message_table
            self._messages = [
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
        return self._messages

    @messages.setter
    def messages(self, rows: list[dict[str, Any]]) -> None:
        self._messages = rows
        self.messages_filtered = True

    def message_count(self) -> int:
        return len(self.messages) if self.messages_filtered else self.message_table.num_rows

    def message_sessions(self) -> set[object]:
        """The session ids of the file's messages (None among them if one has none)."""
        import pyarrow.compute as pc  # (imported when needed: it takes a while)

        if self.messages_filtered:
            return {m.get("session_id") for m in self.messages}
        return set(pc.unique(self.message_table.column("session_id")).to_pylist())

    def keyed_sessions(self) -> set[str]:
        """The sessions of the messages with a key (a session id and an index)."""
        import pyarrow.compute as pc  # (imported when needed: it takes a while)

        if self.messages_filtered:
            return {
                sid
                for m in self.messages
                if isinstance(sid := m.get("session_id"), str) and isinstance(m.get("idx"), int)
            }
        m = self.message_table.filter(pc.is_valid(self.message_table.column("idx")))
        return {s for s in pc.unique(m.column("session_id")).to_pylist() if s is not None}

    def message_records(self) -> int:
        """The records the file's messages account for."""
        import pyarrow.compute as pc  # (imported when needed: it takes a while)

        if self.messages_filtered:
            return sum(int(m.get("n_records") or 0) for m in self.messages)
        return int(pc.sum(self.message_table.column("n_records")).as_py() or 0)

    def settle_calls(self, stored_replays: StoredReplays | None = None) -> set[PriceKey]:
        """Replays dropped (the rest was done when the file was staged); the prices the calls
        left need."""
        self._drop_replays(stored_replays)
        keys, of = self.prices, self.price_of
        return {keys[k] for r in self.calls if (k := of[r["_i"]]) >= 0}

    def kept_calls(self, rows: list[dict[str, Any]], source_id: int) -> pa.Table | None:
        return _kept(self.call_table, rows, source_id)

    def kept_messages(self, rows: list[dict[str, Any]] | None, source_id: int) -> pa.Table | None:
        """The messages ``rows`` names, or (None) all the file's messages."""
        if rows is None:
            if self.messages_filtered:
                rows = self.messages
            elif self.message_table.num_rows:
                return _with_source(self.message_table, source_id)
            else:
                return None
        return _kept(self.message_table, rows, source_id)


def _kept(table: pa.Table, rows: list[dict[str, Any]], source_id: int) -> pa.Table | None:
    """The rows of ``table`` that ``rows`` name (in their order), with their source."""
    if not rows:
        return None
    if len(rows) != table.num_rows:  # (``rows`` are some of the table's, in its order)
        table = table.take(pa.array([r["_i"] for r in rows], pa.int64()))
    return _with_source(table, source_id)


def _with_source(table: pa.Table, source_id: int) -> pa.Table:
    return table.append_column("source_id", pa.repeat(pa.scalar(source_id, pa.int64()), len(table)))


def stage(low: Lowering) -> Staged:
    """A file's ``Lowering`` (read with ``batched``) staged for its batch."""
    low.dedupe_calls()
    low.result.calls = len(low.calls)
    prices: dict[PriceKey, int] = {}
    of = array(
        "i",
        [-1 if k is None else prices.setdefault(k, len(prices)) for k in map(fill_call, low.calls)],
    )
    keys = (list(prices), of)
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
            (st.prices, st.price_of),
            st.rejects,
            st.result,
        ),
        protocol=pickle.HIGHEST_PROTOCOL,
    )


def from_wire(data: bytes) -> Staged:
    fmt, prefix, calls, messages, keys, rejects, result = pickle.loads(data)
    return Staged(fmt, prefix, _table(calls), _table(messages), keys, rejects, result)
