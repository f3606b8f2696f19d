"""Small agent logs read in worker processes (``analyzer.load.workers``): the store holds
exactly what reading them in this process stores, in the same order, and errors still name the
file and line."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

import analyzer.load.flow as flow
import analyzer.load.workers as workers
from analyzer.engine.store import Store, open_store
from analyzer.errors import ForensicsError, StrictRejectError
from analyzer.ingest.base import IngestOptions
from tests.test_batch import history, load
from tests.test_claude_code import user, write


def ordered(db: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every table, in the order its rows were written (only the time of the load left out)."""
    store = open_store(str(db))
    try:
        return {
            t: store.con.execute(f"SELECT * {skip} FROM {t} ORDER BY rowid").fetchall()
            for t, skip in (
                ("calls", ""),
                ("messages", ""),
                ("rejects", ""),
                ("sources", "EXCLUDE (ingested_at)"),
            )
        }
    finally:
        store.close()


def test_workers_store_what_this_process_stores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = history(tmp_path / "in")
    first, rest = files[:2], files[2:]
    monkeypatch.setenv(workers.ENV, "0")
    want = load(tmp_path / "here.duckdb", first) + load(tmp_path / "here.duckdb", rest)
    asked: list[int] = []
    ask = workers.Workers.ask

    def counted(self: workers.Workers, number: int, job: workers.Job) -> None:
        asked.append(number)
        ask(self, number, job)

    monkeypatch.setattr(workers.Workers, "ask", counted)
    monkeypatch.setenv(workers.ENV, "2")
    got = load(tmp_path / "workers.duckdb", first) + load(tmp_path / "workers.duckdb", rest)
    assert asked  # the workers did read files
    assert got == want
    assert ordered(tmp_path / "workers.duckdb") == ordered(tmp_path / "here.duckdb")


def test_no_workers_for_little_input_or_without_cores_to_spare(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(workers.ENV, raising=False)
    assert workers.count(100_000, spare=2.0) == 0
    assert workers.count(workers.MIN_BYTES, spare=2.0) == 2
    assert workers.count(0, spare=2.0) == 0
    # A machine busy with other work: one core to spare, then none.
    assert workers.count(workers.MIN_BYTES, spare=0.8) == 1
    assert workers.count(workers.MIN_BYTES, spare=0.2) == 0
    assert 0 <= workers.spare_cores(0.01) <= (os.cpu_count() or 1) + 0.01
    monkeypatch.setenv(workers.ENV, "0")
    assert workers.count(10 * workers.MIN_BYTES) == 0


def test_a_reject_read_by_a_worker_names_file_and_line_under_strict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    good = write(tmp_path / "1.jsonl", [user(1, "hi", sessionId="g1")])
    bad = write(tmp_path / "2.jsonl", [user(1, "hi", sessionId="g2"), "{not json"])
    after = write(tmp_path / "3.jsonl", [user(1, "hi", sessionId="g3")])
    monkeypatch.setenv(workers.ENV, "1")
    db = tmp_path / "s.duckdb"
    with pytest.raises(StrictRejectError) as err:
        load(db, [good, bad, after], strict=True)
    assert err.value.path == str(bad) and err.value.line == 2
    store: Store = open_store(str(db))
    try:
        assert store.con.execute("SELECT path FROM sources").fetchall() == [(good.name,)]
    finally:
        store.close()


def test_an_error_raised_in_a_worker_is_raised_by_the_writer_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(tmp_path / "1.jsonl", [user(1, "hi", sessionId="g1")])
    st = path.stat()
    job = workers.Job(str(path), "shown/1.jsonl", False, st.st_size, st.st_mtime_ns, True)

    def broken(*_args: object) -> None:
        raise StrictRejectError("a bad line", path="shown/1.jsonl", line=7)

    import analyzer.load.prepare as prepare

    monkeypatch.setattr(prepare, "read_staged", broken)
    found = workers.prepare(job, IngestOptions(progress=False))
    assert found is not None and found.error is not None
    with pytest.raises(StrictRejectError) as err:
        found.raise_error()
    assert str(err.value) == "shown/1.jsonl:7: a bad line"


def test_a_file_changed_after_a_worker_read_it_is_read_again(tmp_path: Path) -> None:
    path = write(tmp_path / "1.jsonl", [user(1, "hi", sessionId="g1")])
    st = path.stat()
    job = workers.Job(str(path), str(path), False, st.st_size, st.st_mtime_ns + 1, True)
    assert workers.prepare(job, IngestOptions(progress=False)) is None


def test_a_worker_that_dies_leaves_the_file_to_the_writer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = [write(tmp_path / f"{n}.jsonl", [user(1, "hi", sessionId=f"k{n}")]) for n in range(4)]
    take = workers.Workers.take

    def killed_first(self: workers.Workers, number: int) -> workers.Prepared | None:
        for w in self.workers:
            if w.proc.poll() is None:
                os.kill(w.proc.pid, 9)
                w.proc.wait()
        return take(self, number)

    monkeypatch.setattr(workers.Workers, "take", killed_first)
    monkeypatch.setenv(workers.ENV, "1")
    got = load(tmp_path / "s.duckdb", files)
    assert [r[1] for r in got] == ["loaded"] * 4
    monkeypatch.setattr(flow, "BATCH_FILE_BYTES", -1)
    monkeypatch.setenv(workers.ENV, "0")
    assert load(tmp_path / "single.duckdb", files) == got


def test_no_worker_to_be_had_reads_the_files_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = [write(tmp_path / f"{n}.jsonl", [user(1, "hi", sessionId=f"n{n}")]) for n in range(3)]
    monkeypatch.setattr(workers.sys, "executable", str(tmp_path / "no-python-here"))
    monkeypatch.setenv(workers.ENV, "2")
    got = load(tmp_path / "s.duckdb", files)
    assert [r[1] for r in got] == ["loaded"] * 3


def test_a_worker_count_that_is_not_a_number_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(workers.ENV, "two")
    with pytest.raises(ForensicsError, match=r"LLM_FORENSICS_INGEST_WORKERS = 'two' is not"):
        workers.count(100 << 20, spare=2)
    monkeypatch.setenv(workers.ENV, "3")
    assert workers.count(100 << 20, spare=0) == 3  # asked for: started whatever the load
    assert workers.count(0, spare=2) == 0  # nothing small to read
