"""What every input format module shares: the file it is handed and what it reports back.

A format module (one per input format, in this package) provides:

* ``NAME`` - the format's id, stored in ``sources.format`` and ``calls.format``;
* ``TITLE`` - a human name, used in error messages that list what a file could be;
* ``sniff(head: Head) -> bool`` - does this content look like the format? (content, not name);
* ``load(ctx: LoadContext) -> LoadResult`` - lower the file into the canonical tables, inside
  the transaction the caller holds, and account for every record.
"""

from __future__ import annotations

import csv
import gzip
import io
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from analyzer.errors import InputError

HEAD_BYTES = 64 * 1024
GZIP_MAGIC = b"\x1f\x8b"


@dataclass(frozen=True)
class IngestOptions:
    tz: str = "UTC"  # zone of timestamps that carry none
    session_gap_s: int = 30 * 60  # a longer silence in a billing stream starts a new session
    strict: bool = False  # any reject fails the file
    format: str | None = None  # skip sniffing, use this format
    progress: bool = True  # show progress for big files (only on a terminal)


@dataclass(frozen=True)
class Head:
    """The first bytes of a file's content, decompressed, for sniffing."""

    data: bytes
    compression: str | None  # "gzip" or None
    encoding: str  # "utf-8", "utf-8-sig" (BOM), "utf-16"

    @property
    def text(self) -> str:
        return self.data.decode(self.encoding, errors="replace")

    def first_record(self, delimiter: str = ",") -> list[str] | None:
        """The first CSV record (the header of a CSV file), or None if there is none."""
        text = self.text
        if not text.strip():
            return None
        try:
            return next(csv.reader(io.StringIO(text), delimiter=delimiter))
        except (csv.Error, StopIteration):
            return None


@dataclass
class SourceFile:
    path: Path  # where to read it
    display: str  # how to name it to the user (relative to what they pointed at)
    size: int
    head: Head
    explicit: bool  # named on the command line, rather than found in a folder


@dataclass
class LoadResult:
    rows_read: int = 0
    rows_loaded: int = 0
    rows_rejected: int = 0
    rows_duplicate: int = 0
    rows_skipped: int = 0
    skipped_kinds: dict[str, int] = field(default_factory=dict)
    encoding: str | None = None


@dataclass
class LoadContext:
    con: duckdb.DuckDBPyConnection
    source: SourceFile
    source_id: int
    options: IngestOptions
    stage: Callable[[str], None] = lambda _step: None  # names the step under way (progress)


def read_head(path: Path, display: str) -> Head:
    """Read the start of ``path`` (decompressing gzip, found by its magic bytes)."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(HEAD_BYTES)
    except PermissionError as exc:
        raise InputError("permission denied", path=display) from exc
    except IsADirectoryError as exc:
        raise InputError("is a folder, not a file", path=display) from exc
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", path=display) from exc
    compression = None
    if raw.startswith(GZIP_MAGIC):
        compression = "gzip"
        try:
            with gzip.open(path, "rb") as gz:
                raw = gz.read(HEAD_BYTES)
        except (OSError, EOFError, zlib.error) as exc:
            raise InputError(f"damaged gzip data: {exc}", path=display) from exc
    if raw.startswith(b"\xef\xbb\xbf"):
        encoding = "utf-8-sig"
    elif raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        encoding = "utf-16"
    else:
        encoding = "utf-8"
    return Head(data=raw, compression=compression, encoding=encoding)
