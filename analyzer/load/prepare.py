"""What is done to a file before it is stored, the same in this process and in a worker
(``analyzer.load.workers``): its format sniffed, its bytes hashed and checked, and a loader
run, its failures turned into what the user is told."""

from __future__ import annotations

import hashlib
import zlib
from dataclasses import dataclass, replace
from pathlib import Path

import duckdb

import analyzer.formats as registry  # the formats this load sniffs for
from analyzer.engine.store import interrupted
from analyzer.errors import DamagedGzipError, ForensicsError, InputError, LoaderBug
from analyzer.ingest.base import (
    CannotResume,
    Head,
    IngestOptions,
    LoadContext,
    LoadResult,
    Resume,
    SourceFile,
    Unbatchable,
    Unchunkable,
)
from analyzer.ingest.encodings import LineEnds, Utf8Tally
from analyzer.ingest.reading import HEAD_BYTES, plain_head
from analyzer.ingest.resume import PrefixDigests
from analyzer.load.checks import sha256_of
from analyzer.load.staged import Staged, stage

# The encodings whose files are judged on all their bytes: UTF-8 or not (a head without a
# byte-order mark can be wrong), and whether they mix line ends.
_TALLIED = ("utf-8", "cp1252")
_ENDS_KNOWN = ("utf-8", "utf-8-sig", "cp1252")


def fingerprint(
    path: Path, head: Head, at: PrefixDigests | None = None
) -> tuple[str, str | None, Head, bool]:
    """The file's SHA-256, what is wrong with its compressed data (None: sound), its head with
    the encoding judged on all of it, and whether it mixes line ends: all in one pass (with
    ``at``, the digests of its first bytes too: a file that is not compressed)."""
    # In the same pass as the hash: whether a file without a byte-order mark is UTF-8 (judged
    # on all of it), whether it mixes line ends, and whether compressed data is sound.
    tally = Utf8Tally() if head.encoding in _TALLIED else None
    ends = LineEnds() if head.encoding in _ENDS_KNOWN else None
    gz = head.compression == "gzip"
    digest, damage = sha256_of(
        path, [t for t in (tally, ends) if t is not None], gz=gz, at=None if gz else at
    )
    if tally is not None and tally.verdict() != head.encoding:
        head = replace(head, encoding=tally.verdict())
    return digest, damage, head, ends is not None and ends.mixed


@dataclass(frozen=True)
class Printed:
    """A file's fingerprint worked out from its bytes in hand (a reader that read them
    already: no second read of the file), for whatever head the file is then sniffed with:
    its size and modification time when it was read, its SHA-256, the UTF-8 verdict on all of
    it and whether it mixes line ends (``Printing`` learns it)."""

    stat: tuple[int, int]
    digest: str
    verdict: str
    mixed: bool

    @classmethod
    def of(cls, data: bytes, stat: tuple[int, int]) -> Printed | None:
        printing = Printing(stat)
        printing.feed(data)
        return printing.printed()

    def fingerprint(self, head: Head) -> tuple[str, str | None, Head, bool]:
        """What ``fingerprint`` says of the file sniffed with ``head`` (one not compressed)."""
        mixed = head.encoding in _ENDS_KNOWN and self.mixed
        if head.encoding in _TALLIED and self.verdict != head.encoding:
            head = replace(head, encoding=self.verdict)
        return self.digest, None, head, mixed


class Printing:
    """A file's ``Printed`` learnt from its bytes, fed in order as they are read (and its
    first ``HEAD_BYTES``, ``start``)."""

    def __init__(self, stat: tuple[int, int]) -> None:
        self.stat, self.size = stat, 0
        self.sha, self.tally, self.ends = hashlib.sha256(), Utf8Tally(), LineEnds()
        self.start = b""

    def feed(self, chunk: bytes) -> None:
        if len(self.start) < HEAD_BYTES:
            self.start += chunk[: HEAD_BYTES - len(self.start)]
        self.sha.update(chunk)
        self.tally.feed(chunk)
        self.ends.feed(chunk)
        self.size += len(chunk)

    def printed(self) -> Printed | None:
        """The fingerprint, once every byte was fed (None: not as many as the file had)."""
        if self.size != self.stat[0]:
            return None
        self.tally.feed(b"", final=True)
        self.ends.feed(b"", final=True)
        return Printed(self.stat, self.sha.hexdigest(), self.tally.verdict(), self.ends.mixed)


@dataclass(frozen=True)
class ReadAhead:
    """What the load learnt of a file from the bytes a reader read ahead, as it would reading
    the file: its fingerprint, and the format sniffed from its head (``sniffed`` False: the
    head is one ``read_head`` reads from the file itself, compressed or with a first line
    longer than the head; ``fmt`` None: no format knows it). The head itself is not kept (a
    small file's head is all of it: every file read ahead would be held)."""

    printed: Printed
    sniffed: bool
    fmt: str | None

    @classmethod
    def of(
        cls, printing: Printing, path: Path, display: str, explicit: bool, options: IngestOptions
    ) -> ReadAhead | None:
        """What ``printing`` learnt, once fed every byte, of the file at ``path`` (named
        ``display``), the format sniffed as ``options`` say."""
        printed = printing.printed()
        if printed is None:
            return None
        head = plain_head(printing.start)
        if head is None:
            return cls(printed, False, None)
        fmt = sniff(SourceFile(path, display, printed.stat[0], head, explicit), options)
        return cls(printed, True, fmt.name if fmt is not None else None)


def read_staged(
    fmt: registry.Format,
    src: SourceFile,
    options: IngestOptions,
    engine: object = None,
    resume: Resume | None = None,
) -> Staged | None:
    """The file read into memory for a batch (nothing written), or None when it is too big
    to keep there. ``resume``: read on from where an earlier read stopped."""
    ctx = LoadContext(engine, src, 0, options, batched=True, resume=resume)  # type: ignore[arg-type]
    try:
        run_loader(fmt, ctx)
    except Unbatchable:
        return None
    assert ctx.staged is not None, f"{fmt.name} declares batch but does not stage its rows"
    return stage(ctx.staged)


def sniff(src: SourceFile, options: IngestOptions) -> registry.Format | None:
    if options.format:
        return registry.format_by_name(options.format)
    for fmt in registry.FORMATS:
        if fmt.sniff(src.head):
            return fmt
    return None


def io_problem(text: str, src: SourceFile) -> InputError:
    first = text.splitlines()[0] if text else "read error"
    path = str(src.path)
    first = first.removeprefix("IO Error: ").replace(f": {path}", "").replace(path, "file")
    if src.head.compression and ("gzip" in first.lower() or "compressed" in first.lower()):
        return DamagedGzipError(f"damaged gzip data ({first})", path=src.display)
    return InputError(f"cannot read: {first}", path=src.display)


def run_loader(fmt: registry.Format, ctx: LoadContext) -> LoadResult:
    """The format's loader, its failures turned into what the user is told."""
    try:
        return fmt.load(ctx)
    except (ForensicsError, Unbatchable, Unchunkable, CannotResume):
        raise
    except Exception as exc:
        # Ctrl-C inside a query of DuckDB's, or a statement failing on the transaction it
        # aborted: an interrupt, never the file's fault nor a loader's.
        if interrupted(exc):
            raise KeyboardInterrupt from None
        problem = _problem(exc, ctx.source)
        if problem is None:
            raise
        raise problem from exc


def _problem(exc: Exception, src: SourceFile) -> ForensicsError | None:
    """What a loader's failure tells the user (None: raised as it is)."""
    display = src.display
    if isinstance(exc, duckdb.IOException):  # the file went bad under DuckDB's own reader
        return io_problem(str(exc), src)
    if isinstance(exc, OSError | EOFError | zlib.error):
        return io_problem(str(exc), src)
    if isinstance(exc, duckdb.InvalidInputException):  # DuckDB's CSV reader gave up
        first = str(exc).splitlines()[0].removeprefix("Invalid Input Error: ")
        return InputError(f"cannot read: {first}", path=display)
    if isinstance(exc, MemoryError | duckdb.OutOfMemoryException):
        return None  # the machine's limit, not the file's fault nor a loader's
    # Never a traceback for a file: the user learns which file, and that the fault is ours
    # (--traceback shows where).
    first = str(exc).splitlines()[0] if str(exc) else ""
    return LoaderBug(
        f"could not be loaded: unexpected {type(exc).__name__}: {first} "
        "(a bug in llm-forensics; nothing from this file was stored)",
        path=display,
    )
