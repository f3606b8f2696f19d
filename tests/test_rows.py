"""The rows a format emits are declared once (``analyzer.ingest.rows``): their columns are the
store's, and a MessageRow reaches the store as the dict of the same names did."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from analyzer.engine.store import open_store
from analyzer.ingest.arrow_rows import table_of
from analyzer.ingest.rows import CALL_COLUMNS, MESSAGE_COLUMNS, MessageRow

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
