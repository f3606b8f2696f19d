"""The rows a format emits are declared once (``analyzer.ingest.rows``): their columns are the
store's, and a MessageRow or a CallRow reaches the store as the dict of the same names did."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from analyzer.engine.store import open_store
from analyzer.ingest.arrow_rows import table_of
from analyzer.ingest.rows import CALL_COLUMNS, MESSAGE_COLUMNS, CallRow, MessageRow

# Columns the sink reads to settle and account, never stored as they are.
SETTLING = {"n_records", "parts", "replay"}


def test_the_declared_columns_are_the_stores(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "s.duckdb"))
    try:
        stored = {
            t: set(store.engine.columns("SELECT * FROM {{t}} LIMIT 0", t=t))
            for t in ("calls", "messages")
        }
    finally:
        store.close()
    assert set(CALL_COLUMNS) - SETTLING <= stored["calls"]
    assert set(MESSAGE_COLUMNS) - SETTLING <= stored["messages"]
    assert CALL_COLUMNS["http_status"] == pa.int32()  # a declared override of int's int64


def test_a_message_row_is_the_table_row_of_its_dict() -> None:
    row = MessageRow(session_id="s", idx=1, role="user", kind="prompt", text_chars=3)
    as_dict = {"session_id": "s", "idx": 1, "role": "user", "kind": "prompt", "text_chars": 3}
    as_dict["n_records"] = 0
    assert table_of([row.values()], MESSAGE_COLUMNS).equals(table_of([as_dict], MESSAGE_COLUMNS))


def test_a_call_row_counts_and_takes_columns() -> None:
    """``add`` adds to a counter (one never started is NULL until something is added);
    ``update`` sets named columns and refuses a name ``calls`` has not; what changes after the
    row is handed over is what is stored (``values`` is the row's own mapping)."""
    row = CallRow(native_id="n", session_id="s", stream_key="s", content_chars=0)
    handed = row.values()
    row.add(content_chars=5)
    row.add(content_chars=2, tool_call_count=1)
    row.update({"input_tokens": 10, "variant": "fast"})
    assert (row.content_chars, row.tool_call_count, row.input_tokens) == (7, 1, 10)
    assert row.reasoning_chars is None  # never started: stays NULL
    assert handed["content_chars"] == 7 and handed is row.values()
    with pytest.raises(KeyError):
        row.update({"tally": 1})
    as_dict = {"native_id": "n", "session_id": "s", "stream_key": "s", "content_chars": 7}
    as_dict |= {"tool_call_count": 1, "input_tokens": 10, "variant": "fast"}
    assert table_of([handed], CALL_COLUMNS).equals(table_of([as_dict], CALL_COLUMNS))
