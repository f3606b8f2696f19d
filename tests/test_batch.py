"""Small agent logs are loaded many at a time (``analyzer.load.batch``): the store must hold
exactly what loading them one file at a time holds, and each file stays whole or absent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import analyzer.load.batch as batch
import analyzer.load.flow as flow
from analyzer.engine.store import Store, open_store
from analyzer.errors import StrictRejectError
from analyzer.ingest.base import IngestOptions
from analyzer.load.discovery import discover
from tests.test_claude_code import SESSION, SESSION_LINES, assistant, line, user, write

SIDE = {"isSidechain": True, "agentId": "a1b2c3d"}


def history(root: Path) -> list[Path]:
    """Files that share calls and messages: a transcript and its grown copy, a replay in a
    sidechain, the same content twice, a reject, and files of their own."""
    files = [
        write(root / "a" / f"{SESSION}.jsonl", SESSION_LINES[:6]),
        write(root / "b" / f"{SESSION}.jsonl", SESSION_LINES),
        write(
            root / "b" / SESSION / "subagents" / "agent-a1b2c3d.jsonl",
            [assistant(20, "msg_A", "req_BTW", {"type": "text", "text": "again"}, 5, **SIDE)],
        ),
        write(root / "c" / "copy.jsonl", SESSION_LINES),
        write(root / "d" / "broken.jsonl", [user(1, "hi", sessionId="s2"), "{not json"]),
    ]
    for n in range(5):
        sid = f"s-{n}"
        files.append(
            write(
                root / "e" / f"{sid}.jsonl",
                [
                    user(1, f"task {n}", sessionId=sid),
                    assistant(
                        2, f"m{n}", f"r{n}", {"type": "text", "text": "ok"}, 3, sessionId=sid
                    ),
                    assistant(3, "msg_B", "req_B", {"type": "text", "text": "x"}, 9, sessionId=sid),
                    line("progress", 4, sessionId=sid),
                ],
            )
        )
    return files


def load(db: Path, files: list[Path], **options: Any) -> list[tuple[Any, ...]]:
    store = open_store(str(db))
    try:
        found = discover([str(f) for f in files])
        reports = flow.load_files(store, found.files, IngestOptions(progress=False, **options))
        return [
            (
                r.path,
                r.status,
                r.source_id,
                r.rows_read,
                r.rows_loaded,
                r.rows_rejected,
                r.rows_duplicate,
                r.rows_skipped,
            )
            for r in reports
        ]
    finally:
        store.close()


def tables(db: Path) -> dict[str, list[tuple[Any, ...]]]:
    store = open_store(str(db))
    try:
        return {
            t: sorted(store.con.execute(f"SELECT * EXCLUDE ({skip}) FROM {t}").fetchall(), key=repr)
            for t, skip in (
                ("calls", "cost_usd"),
                ("messages", "ts"),
                ("rejects", "excerpt"),
                ("sources", "ingested_at"),
            )
        }
    finally:
        store.close()


def test_a_batch_stores_what_one_file_at_a_time_stores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = history(tmp_path / "in")
    first, rest = files[:2], files[2:]
    batched, single = tmp_path / "batched.duckdb", tmp_path / "single.duckdb"
    # In two runs (the second one meets what the first stored), and the last file twice.
    got = load(batched, first) + load(batched, rest + files[-1:])
    monkeypatch.setattr(flow, "BATCH_FILE_BYTES", -1)  # every file on its own
    want = load(single, first) + load(single, rest + files[-1:])
    assert got == want
    assert got[-1][1:3] == ("unchanged", got[-2][2])
    assert tables(batched) == tables(single)


def test_a_failing_file_of_a_batch_stores_nothing_and_the_files_before_it_are_kept(
    tmp_path: Path,
) -> None:
    good = write(tmp_path / "1.jsonl", [user(1, "hi", sessionId="g1")])
    bad = write(tmp_path / "2.jsonl", [user(1, "hi", sessionId="g2"), "{not json"])
    after = write(tmp_path / "3.jsonl", [user(1, "hi", sessionId="g3")])
    db = tmp_path / "s.duckdb"
    with pytest.raises(StrictRejectError) as err:
        load(db, [good, bad, after], strict=True)
    assert err.value.path == str(bad) and err.value.line == 2
    store: Store = open_store(str(db))
    try:
        assert store.con.execute("SELECT path FROM sources").fetchall() == [(good.name,)]
        assert store.con.execute("SELECT DISTINCT session_id FROM messages").fetchall() == [("g1",)]
        assert store.con.execute("SELECT count(*) FROM rejects").fetchall() == [(0,)]
    finally:
        store.close()


def test_batches_committed_while_the_next_files_are_read_store_what_one_file_at_a_time_stores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A batch of two files: each full batch is committed while the next files are read, and
    # the next batch meets what it stored (the grown copy, the replay, the same content twice).
    files = history(tmp_path / "in")
    monkeypatch.setattr(batch, "BATCH_FILES", 2)
    background: list[batch._Commit] = []
    run = batch._Commit.run

    def counted(self: batch._Commit) -> None:
        background.append(self)
        run(self)

    monkeypatch.setattr(batch._Commit, "run", counted)
    got = load(tmp_path / "batched.duckdb", files + files[-1:])
    assert len(background) >= 3 and not any(c.error for c in background)
    monkeypatch.setattr(flow, "BATCH_FILE_BYTES", -1)  # every file on its own
    want = load(tmp_path / "single.duckdb", files + files[-1:])
    assert got == want
    assert tables(tmp_path / "batched.duckdb") == tables(tmp_path / "single.duckdb")


def test_a_failing_file_after_batches_committed_in_the_background_keeps_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    good = [write(tmp_path / f"{n}.jsonl", [user(1, "hi", sessionId=f"g{n}")]) for n in (1, 2)]
    bad = write(tmp_path / "3.jsonl", [user(1, "hi", sessionId="g3"), "{not json"])
    after = write(tmp_path / "4.jsonl", [user(1, "hi", sessionId="g4")])
    monkeypatch.setattr(batch, "BATCH_FILES", 1)
    db = tmp_path / "s.duckdb"
    with pytest.raises(StrictRejectError) as err:
        load(db, [*good, bad, after], strict=True)
    assert err.value.path == str(bad) and err.value.line == 2
    store: Store = open_store(str(db))
    try:
        assert store.con.execute("SELECT path FROM sources ORDER BY 1").fetchall() == [
            ("1.jsonl",),
            ("2.jsonl",),
        ]
        assert store.con.execute("SELECT count(*) FROM rejects").fetchall() == [(0,)]
    finally:
        store.close()


def test_a_replay_whose_messages_were_written_already_is_taken_out_of_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file big enough to write its messages in chunks (``MESSAGE_BATCH``) whose replay comes
    after them (ingest/drop_messages.sql): the store holds what it holds when they are written
    at the end."""
    import analyzer.ingest.lowering as lowering

    replay = assistant(20, "msg_A", "req_BTW", {"type": "text", "text": "again"}, 5, **SIDE)
    f = write(tmp_path / "in" / f"{SESSION}.jsonl", [*SESSION_LINES, replay])
    monkeypatch.setattr(flow, "BATCH_FILE_BYTES", -1)  # on its own: written as it is read
    whole = load(tmp_path / "whole.duckdb", [f])
    monkeypatch.setattr(lowering, "MESSAGE_BATCH", 1)
    assert load(tmp_path / "chunked.duckdb", [f]) == whole
    assert whole[0][6] > 0  # the replay's records are duplicates
    assert tables(tmp_path / "chunked.duckdb") == tables(tmp_path / "whole.duckdb")


def _pending(name: str, natives: list[str], sessions: set[object]) -> Any:
    from types import SimpleNamespace

    from analyzer.ingest.arrow_rows import table_of
    from analyzer.ingest.base import LoadResult
    from analyzer.ingest.rows import CALL_COLUMNS, MESSAGE_COLUMNS
    from analyzer.load.staged import Staged

    calls = [{"native_id": n, "response_id": f"r-{n}"} for n in natives]
    messages = [{"session_id": s, "idx": 0} for s in sessions]
    low = Staged(
        "claude_code",
        "cc",
        table_of(calls, CALL_COLUMNS),
        table_of(messages, MESSAGE_COLUMNS),
        [],
        LoadResult(),
    )
    return SimpleNamespace(name=name, fmt="claude_code", low=low)


def test_a_batch_is_written_in_rounds_of_files_that_share_nothing() -> None:
    """Files sharing a call or a session come in later rounds than the earlier files they share
    it with, in file order; the others in the first round (one set-based write)."""
    files = [
        _pending("a", ["n1"], {"s1"}),
        _pending("b", ["n2"], {"s2"}),
        _pending("grown a", ["n1", "n3"], {"s1"}),
        _pending("c", [], {"s3", None}),
        _pending("shares a session with b", [], {"s2"}),
        _pending("a third time", ["n1"], set()),
    ]
    got = [[f.name for f in r] for r in batch.rounds(files)]
    assert got == [
        ["a", "b", "c"],
        ["grown a", "shares a session with b"],
        ["a third time"],
    ]
