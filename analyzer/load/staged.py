"""A file read for a batch, as Arrow tables: built where the file was read (in this process or
in a worker, ``analyzer.load.workers``) and cheap to send between processes.

The file's calls (every one its log wrote, in its order) and messages are turned into Arrow
tables where the file is read; the batch (``analyzer.load.batch``) hands them to the sink,
which settles their duplicates in SQL exactly as for a file loaded on its own. Either way, in a
worker or not, the same code builds the same tables, so where a file was read changes nothing
in the store.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass

import pyarrow as pa

from analyzer.ingest.arrow_rows import table_of
from analyzer.ingest.base import LoadResult
from analyzer.ingest.lowering import MESSAGE_COLUMNS, Lowering
from analyzer.ingest.sink import Reject


@dataclass
class Staged:
    """A file's rows staged for a batch (see the module's docstring); it writes nothing."""

    fmt: str
    call_prefix: str
    call_table: pa.Table
    message_table: pa.Table
    rejects: list[Reject]
    result: LoadResult

    def call_records(self) -> int:
        """The records the file's calls account for (duplicates within the file included)."""
        return _records(self.call_table)

    def message_records(self) -> int:
        """The records the file's messages account for."""
        return _records(self.message_table)

    def keys(self) -> set[tuple[str, ...]]:
        """What the store compares the file's rows by: its calls' native and response ids
        (of its format) and its messages' sessions."""
        calls = self.call_table
        found: set[tuple[str, ...]] = {
            (kind, self.fmt, value)
            for kind in ("native_id", "response_id")
            for value in calls.column(kind).to_pylist()
            if isinstance(value, str)
        }
        sessions = self.message_table.column("session_id").to_pylist()
        return found | {("s", value) for value in sessions if isinstance(value, str)}


def _records(table: pa.Table) -> int:
    return sum(int(n or 0) for n in table.column("n_records").to_pylist())


def stage(low: Lowering) -> Staged:
    """A file's ``Lowering`` (read with ``batched``) staged for its batch."""
    low.result.calls = 0  # (its calls are counted when they are settled)
    return Staged(
        low.fmt,
        low.call_prefix,
        low.calls_table(),
        table_of(low.messages, MESSAGE_COLUMNS),
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
            st.rejects,
            st.result,
        ),
        protocol=pickle.HIGHEST_PROTOCOL,
    )


def from_wire(data: bytes) -> Staged:
    fmt, prefix, calls, messages, rejects, result = pickle.loads(data)
    return Staged(fmt, prefix, _table(calls), _table(messages), rejects, result)
