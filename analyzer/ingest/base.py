"""What every input format module is handed and what it reports back (what a format declares
about itself, its ``SPEC``, is in ``analyzer.ingest.spec``)."""

from __future__ import annotations

import codecs
import io
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

if TYPE_CHECKING:
    from analyzer.engine.engine import Engine
from analyzer.ingest.encodings import decode_errors


@dataclass(frozen=True)
class IngestOptions:
    tz: str = "UTC"  # zone of timestamps that carry none
    session_gap_s: int = 30 * 60  # a longer silence in a billing stream starts a new session
    strict: bool = False  # any reject fails the file
    format: str | None = None  # skip sniffing, use this format
    progress: bool = True  # show progress for big files (only on a terminal)
    full_paths: bool = False  # name files by absolute path (else relative to the path given)
    machine: str | None = None  # the machine whose files these are (None: this one)
    # False: a format that can (``FormatSpec.usage_first``) reads only what the usage views
    # show, and its content (messages, hashes, excerpts) is read when a command asks for it
    # (``analyzer.load.usage_first``); True: every file is read whole.
    content: bool = True


@dataclass(frozen=True)
class Head:
    """The first bytes of a file's content, decompressed, for sniffing."""

    data: bytes
    compression: str | None  # "gzip" or None
    encoding: str  # a Python codec: "utf-8", "utf-8-sig" (BOM), "utf-16*", "cp1252"

    @property
    def text(self) -> str:
        return self.data.decode(self.encoding, errors="replace")

    @property
    def utf8(self) -> bytes:
        """The head as UTF-8 bytes without a byte-order mark (what the sniffers read)."""
        if self.encoding == "utf-8":
            return self.data
        if self.encoding == "utf-8-sig":
            return self.data.removeprefix(codecs.BOM_UTF8)
        return self.data.decode(self.encoding, errors=decode_errors(self.encoding)).encode()

    def first_record(self, delimiter: str = ",") -> list[str] | None:
        """The first CSV record (the header of a CSV file), or None if there is none."""
        text = self.text
        if not text.strip():
            return None
        import csv  # (here: a reader that needs no CSV does not import it)

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
    mixed_line_ends: bool = False  # LF, CRLF and CR line ends mixed (see ``LineEnds``)


class Accounting(TypedDict):
    """What became of a file's records: ``rows_read = rows_loaded + rows_rejected +
    rows_duplicate + rows_skipped``."""

    rows_read: int
    rows_loaded: int
    rows_rejected: int
    rows_duplicate: int
    rows_skipped: int


# The kind of skipped record a usage-first read leaves for the read of the file's content
# (``IngestOptions.content``; analyzer.load.usage_first).
CONTENT_LATER = "content (read when asked)"


@dataclass
class LoadResult:
    rows_read: int = 0
    rows_loaded: int = 0
    rows_rejected: int = 0
    rows_duplicate: int = 0
    rows_skipped: int = 0
    skipped_kinds: dict[str, int] = field(default_factory=dict)
    calls: int | None = None  # calls the file holds (None: a format that does not count them)
    note: str | None = None  # why the file holds no calls, when its loader knows better
    # Where a later read of the file, grown, can start (a format that ``resumes``): None
    # when it cannot (see ``analyzer.ingest.resume``).
    checkpoint: Checkpoint | None = None

    def accounting(self) -> Accounting:
        """What became of the file's records, by the names its ``sources`` row and its report
        give them."""
        return {
            "rows_read": self.rows_read,
            "rows_loaded": self.rows_loaded,
            "rows_rejected": self.rows_rejected,
            "rows_duplicate": self.rows_duplicate,
            "rows_skipped": self.rows_skipped,
        }


@dataclass
class LoadContext:
    engine: Engine  # the load's engine (its connection is the store's, in its transaction)
    source: SourceFile
    source_id: int
    options: IngestOptions
    stage: Callable[[str], None] = lambda _step: None  # names the step under way (progress)
    # Loaded with other files in one transaction (``analyzer.load.batch``): the loader
    # writes nothing, and leaves its rows (a ``Lowering``) in ``staged`` for the batch.
    batched: bool = False
    staged: Any = None
    # Read on from where an earlier read of the file stopped (a format that ``resumes``):
    # only what comes after it is read, and accounted for.
    resume: Resume | None = None
    # Loaded on its own, its calls kept until the end of the file rather than written in
    # parts as it is read (a loader that writes parts raised ``Unchunkable``).
    whole: bool = False


@dataclass(frozen=True)
class Resume:
    """Where a read of a grown file starts: at byte ``offset``, after ``lines`` line ends (the
    whole lines the last read took), with what the format's reader saved there (``state``,
    JSON values)."""

    offset: int
    lines: int
    state: dict[str, Any]


@dataclass(frozen=True)
class Checkpoint:
    """Where a read ended, for the next one: the byte after the last line it took whole (a
    cut-off last line is left to the next read), the line ends before it, and the reader's
    state there."""

    offset: int
    lines: int
    state: dict[str, Any]


class CannotResume(Exception):
    """What a reader cannot go on with from its saved state (a line adding to a call its
    state no longer holds): the file is read whole instead."""


class Unbatchable(Exception):
    """A file too big to keep in memory for a batch: it is loaded on its own."""


class Unchunkable(Exception):
    """A file whose calls were being written in parts as it was read turned out to have parts
    that depend on one another (a line of a call written already): its transaction is rolled
    back and it is read again whole (``LoadContext.whole``)."""
