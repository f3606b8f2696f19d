"""What ingest tells of each file (``FileReport``): loaded, passed over and why, or read to no
call and why."""

from __future__ import annotations

from dataclasses import dataclass

from analyzer.ingest.base import Head, LoadResult
from analyzer.model.records import json_record


@dataclass
class FileReport:
    """What happened to one file. ``status``: loaded, unchanged, unrecognised (no reader knows
    it), unreadable (a link to nothing, a FIFO), failed (a file found in a folder that could
    not be loaded: nothing of it is stored, ``reason`` says why, and the rest was read) or
    read_with (a part of another file's log, read with it: ``reason`` names it)."""

    path: str
    format: str | None
    status: str
    source_id: int | None = None
    bytes: int = 0
    rows_read: int = 0
    rows_loaded: int = 0
    rows_rejected: int = 0
    rows_duplicate: int = 0
    rows_skipped: int = 0
    calls: int | None = None  # calls the file holds (log formats)
    reason: str | None = None  # why it was not read (failed, unrecognised), or holds no calls
    data: bool = False  # unrecognised, but its content is data (JSON or CSV), not prose or code
    expected: bool = False  # holds no call, as its format's files of this kind never do
    later: int = 0  # records a usage-first read left for the read of its content

    def to_dict(self) -> dict[str, object]:
        return json_record(self)

    @property
    def not_read(self) -> bool:
        """Input that was not read: a file that failed, data no reader recognises, or a log
        every record of which was rejected. (Prose and code beside the logs are not input.)"""
        if self.status == "failed" or (self.status == "unrecognised" and self.data):
            return True
        return self.status == "loaded" and 0 < self.rows_read == self.rows_rejected


def looks_like_data(head: Head) -> str | None:
    """What kind of data an unrecognised file holds ("JSON", "CSV"), or None for anything else
    (prose, code, binary): data no reader recognises is input that was not read. A binary file
    is never data here, whatever its first byte: a DuckDB store's header opens with a checksum,
    which is now and then a ``{``."""
    text = head.utf8.lstrip()
    if b"\x00" in text:
        return None
    if text[:1] in (b"{", b"["):
        return "JSON"
    lines = text.split(b"\n", 2)
    if (
        len(lines) >= 2
        and lines[0].count(b",") >= 2
        and lines[0].count(b",") == lines[1].count(b",")
    ):
        return "CSV"
    return None


def binary_kind(head: Head) -> str | None:
    """What a binary file no reader reads is, where its magic bytes say (a store of ours or
    another DuckDB database, SQLite), or None."""
    data = head.data
    if data[8:12] == b"DUCK":
        return "a DuckDB database, not an agent log or bill"
    if data.startswith(b"SQLite format 3\x00"):
        return "an SQLite database, not an agent log or bill"
    return None


def no_calls_reason(result: LoadResult) -> str:
    """Why a log file holds no calls, in a few words."""
    if result.note:
        return result.note
    if not result.rows_read:
        return "no records in it"
    if result.rows_rejected == result.rows_read:
        return f"all {result.rows_read:,} records rejected (`llm-forensics rejects` lists them)"
    if result.skipped_kinds and result.rows_skipped == result.rows_read:
        kinds = ", ".join(result.skipped_kinds)
        return f"only records that hold no call ({kinds})"
    if result.rows_duplicate and not result.rows_loaded:
        return "every record was stored already"
    return "no model reply in it"
