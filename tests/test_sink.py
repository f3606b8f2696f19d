"""The sink's settlement of a file's calls within the file (``sql/ingest/settle_in_file.sql``):
golden cases, each a small batch of calls against a store, and what is kept and left out."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from analyzer.engine.store import Store, open_store
from analyzer.ingest.lowering import call_table
from analyzer.ingest.sink import Sink, in_order


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = open_store(str(tmp_path / "s.duckdb"))
    yield s
    s.close()


def call(native: str, rid: str | None = None, replay: bool = False, n: int = 1) -> dict[str, Any]:
    return {
        "native_id": native,
        "response_id": rid,
        "replay": replay,
        "n_records": n,
        "session_id": "s",
    }


def settle(store: Store, *files: list[dict[str, Any]]) -> Any:
    tables = [in_order(call_table(calls), sid) for sid, calls in enumerate(files, 1)]
    return Sink(store.engine).calls("claude_code", "cc", pa.concat_tables(tables))


def stored(store: Store) -> list[tuple[Any, ...]]:
    return store.engine.rows("SELECT call_id, response_id FROM calls ORDER BY rowid")


def test_the_first_of_a_call_written_twice_in_a_file_is_kept(store: Store) -> None:
    got = settle(store, [call("a", n=2), call("b"), call("a", n=3)])
    assert stored(store) == [("cc:a", None), ("cc:b", None)]
    assert got.dup == {1: 3} and got.calls == {1: 2} and got.gone == []


def test_a_replay_is_left_out_wherever_its_original_stands_in_the_file(store: Store) -> None:
    got = settle(
        store,
        [
            call("r1", "resp-1", replay=True, n=2),  # its original comes later
            call("o1", "resp-1"),
            call("r2", "resp-2", replay=True),  # the first replay of resp-2 is kept
            call("r3", "resp-2", replay=True, n=4),  # the second is not
            call("r4", "", replay=True),  # no response id: never a replay
        ],
    )
    assert stored(store) == [("cc:o1", "resp-1"), ("cc:r2", "resp-2"), ("cc:r4", "")]
    assert got.dup == {1: 6} and got.calls == {1: 3}
    assert got.gone == [(1, "cc:r1"), (1, "cc:r3")]


def test_a_replay_of_a_stored_response_is_left_out_but_not_the_replay_itself(
    store: Store,
) -> None:
    settle(store, [call("o1", "resp-1"), call("r9", "resp-9", replay=True)])
    # read again: r9 answers resp-9 itself (it is stored under its own native id) and is a
    # store duplicate; r5 replays o1's stored response and is left out of the file
    got = settle(store, [call("r9", "resp-9", replay=True), call("r5", "resp-1", replay=True)])
    assert stored(store) == [("cc:o1", "resp-1"), ("cc:r9", "resp-9")]
    assert got.dup == {1: 2} and got.calls == {1: 1} and got.gone == [(1, "cc:r5")]


def test_files_of_one_batch_are_settled_each_within_itself(store: Store) -> None:
    got = settle(store, [call("a"), call("a")], [call("b", "x"), call("c", "x", replay=True)])
    assert stored(store) == [("cc:a", None), ("cc:b", "x")]
    assert got.dup == {1: 1, 2: 1} and got.calls == {1: 1, 2: 1}
    assert got.gone == [(2, "cc:c")]
