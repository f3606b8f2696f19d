"""A growing log read again and again (issue 45, causes 5 and 9): a Claude Code transcript read
at any set of growth points - a line cut anywhere, the file read while it is written - stores
exactly what one read of the finished file stores, each later read reads on from where the last
stopped (not the whole file), and a line caught half-written leaves no reject once it is whole.
The transcripts are real ones (``../shared/samples/real-world``)."""

from __future__ import annotations

import json
from contextlib import suppress
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analyzer.api import Forensics
from analyzer.errors import NothingFound
from analyzer.ingest.base import IngestOptions

REAL = Path(__file__).resolve().parents[2] / "shared" / "samples" / "real-world" / "claude_code"
# Three real transcripts: sub-agents in their own files, calls of several lines, tool results.
TRANSCRIPTS = [
    REAL / "jnarowski__agentcmd" / "full-session-two.jsonl",
    REAL / "DRMacIver__claude-reliability" / "coverage-test-fix.jsonl",
    REAL / "marot__spotter" / "misc" / "subagent.jsonl",
]
# A long real session (2,385 lines).
BIG = (
    REAL
    / "marot__spotter"
    / "-home-marco-projects-spotter-worktrees-spotter-4te"
    / "ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl"
)
QUIET = IngestOptions(progress=False)

# What a store holds, compared column by column (which read stored a row is left out).
CALLS = "SELECT * EXCLUDE (source_id, machine) FROM calls ORDER BY call_id"
MESSAGES = "SELECT * EXCLUDE (source_id) FROM messages ORDER BY session_id, idx"
REJECTS = "SELECT line, reason FROM rejects ORDER BY line, reason"
TOTALS = (
    "SELECT sum(rows_loaded), sum(rows_rejected), "
    "bool_and(rows_read = rows_loaded + rows_rejected + rows_duplicate + rows_skipped) "
    "FROM sources"
)


def held(db: Path) -> dict[str, Any]:
    with Forensics.open(db, create=False) as lf:
        rows = lf.store.engine.rows
        return {q: rows(q) for q in (CALLS, MESSAGES, REJECTS, TOTALS)}


def read(db: Path, path: Path) -> None:
    with Forensics.open(db) as lf:
        lf.ingest([path], QUIET)


def sources(db: Path) -> list[tuple[Any, ...]]:
    with Forensics.open(db, create=False) as lf:
        return lf.store.engine.rows(
            "SELECT rows_read, rows_loaded, rows_duplicate, rows_skipped, rows_rejected "
            "FROM sources ORDER BY source_id"
        )


def grown(tmp: Path, data: bytes, cuts: list[int]) -> Path:
    """The store of ``data`` written into one file up to each of ``cuts`` in turn, its folder
    read after each (as a refresh reads the agents' folders), then written whole and read."""
    log = tmp / "projects" / "-home-dev-app" / "session.jsonl"
    log.parent.mkdir(parents=True, exist_ok=True)
    db = tmp / "grown.duckdb"
    with Forensics.open(db) as lf:
        for cut in [*sorted(set(cuts)), len(data)]:
            log.write_bytes(data[:cut])
            # (a log cut within its first line is not recognised yet: nothing is read)
            with suppress(NothingFound):
                lf.ingest([log.parent], QUIET)
    return db


def once(tmp: Path, data: bytes) -> Path:
    log = tmp / "once" / "projects" / "-home-dev-app" / "session.jsonl"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_bytes(data)
    db = tmp / "once.duckdb"
    read(db, log)
    return db


@pytest.mark.parametrize("transcript", TRANSCRIPTS, ids=lambda p: p.stem)
def test_a_transcript_read_as_it_grows_stores_what_one_read_of_it_stores(
    tmp_path: Path, transcript: Path
) -> None:
    data = transcript.read_bytes()
    ends = [i + 1 for i, b in enumerate(data) if b == 0x0A]
    # every fifth line end, and a cut inside every seventh line: lines caught half-written
    cuts = ends[::5] + [e - 9 for e in ends[3::7]]
    expected = held(once(tmp_path, data))
    assert held(grown(tmp_path, data, cuts)) == expected
    assert not expected[REJECTS]  # (so every cut-off line's reject went once it was whole)


def test_each_read_of_a_growing_transcript_reads_what_was_added(tmp_path: Path) -> None:
    """A 2.7 MB session read as it grew, 100 lines at a time (a line cut half-way each time):
    after the first, each read reads the lines added and the few before them that its newest
    calls began on, never the whole file again; the store is as one read leaves it."""
    data = BIG.read_bytes()
    ends = [i + 1 for i, b in enumerate(data) if b == 0x0A]
    cuts = [ends[i] - 40 for i in range(100, len(ends), 100)]
    db = grown(tmp_path, data, cuts)
    assert held(db) == held(once(tmp_path, data))
    reads = [r[0] for r in sources(db)]
    assert len(reads) == len(cuts) + 1
    assert max(reads[1:]) < 300, reads  # (read whole: up to 2,385 lines each)
    assert sum(reads) < 1.2 * len(ends), reads


# Slow (a minute): the cut tests above cover it in kind in the default run.
@pytest.mark.slow
@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    which=st.sampled_from(range(len(TRANSCRIPTS))),
    cuts=st.lists(st.floats(0.0, 1.0, exclude_max=True), min_size=1, max_size=6),
)
def test_any_growth_points_store_what_one_read_stores(
    tmp_path_factory: pytest.TempPathFactory, which: int, cuts: list[float]
) -> None:
    """The property: any file read at any set of growth points (anywhere in a line) stores
    exactly what one read of the finished file stores, rejects and accounting included."""
    data = TRANSCRIPTS[which].read_bytes()
    tmp = tmp_path_factory.mktemp("grow")
    points = [max(1, int(c * len(data))) for c in cuts]
    assert held(grown(tmp, data, points)) == held(once(tmp, data))


def test_a_line_caught_half_written_leaves_no_reject_once_whole(tmp_path: Path) -> None:
    """Cause 5: a refresh that catches the last line half-written rejects it as cut off; once
    the line is whole, the next read loads it and the reject is gone (the earlier read's
    accounting no longer counts the line)."""
    data = TRANSCRIPTS[0].read_bytes()
    ends = [i + 1 for i, b in enumerate(data) if b == 0x0A]
    log = tmp_path / "session.jsonl"
    db = tmp_path / "s.duckdb"
    log.write_bytes(data[: ends[20] - 30])  # line 21 half-written
    read(db, log)
    with Forensics.open(db, create=False) as lf:
        [(line, reason)] = lf.store.engine.rows(REJECTS)
    assert line == 21 and reason.startswith("cut-off last line")
    log.write_bytes(data[: ends[40]])
    read(db, log)
    with Forensics.open(db, create=False) as lf:
        assert lf.store.engine.rows(REJECTS) == []
        assert lf.store.engine.rows(TOTALS)[0][1:] == (0, True)


def test_a_line_adding_to_an_older_call_makes_the_file_read_whole(tmp_path: Path) -> None:
    """A line that adds to a call the last read let go of (hand-written files reuse ids) cannot
    be read on from where the last read stopped: the file is read whole, and the store is as
    one read of the finished file leaves it."""
    lines = TRANSCRIPTS[0].read_bytes().splitlines(keepends=True)
    first = next(i for i, raw in enumerate(lines) if json.loads(raw).get("type") == "assistant")
    again = json.loads(lines[first])
    again["message"]["content"] = [{"type": "text", "text": "one more block of the first call"}]
    data = b"".join(lines) + json.dumps(again).encode() + b"\n"
    size = len(b"".join(lines))
    db = grown(tmp_path, data, [size])
    assert held(db) == held(once(tmp_path, data))
    assert sources(db)[-1][0] == len(lines) + 1  # the last read read every line


def test_a_file_replaced_by_other_content_is_read_as_new(tmp_path: Path) -> None:
    """A transcript rewritten with other content (rotated, replaced): nothing of it is taken
    for what was read before; the calls read before stay (history is kept)."""
    a, b = (t.read_bytes() for t in TRANSCRIPTS[:2])
    log = tmp_path / "session.jsonl"
    db = tmp_path / "s.duckdb"
    for data in (a, b):
        log.write_bytes(data)
        read(db, log)
    both = tmp_path / "both"
    both.mkdir()
    (both / "a.jsonl").write_bytes(a)
    (both / "b.jsonl").write_bytes(b)
    apart = tmp_path / "apart.duckdb"
    read(apart, both)
    assert held(db)[CALLS] == held(apart)[CALLS]
