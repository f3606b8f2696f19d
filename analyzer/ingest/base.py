"""What every input format module shares: the file it is handed and what it reports back.

A format module (one per input format, in this package) provides:

* ``NAME`` - the format's id, stored in ``sources.format`` and ``calls.format``;
* ``TITLE`` - a human name, used in error messages that list what a file could be;
* ``sniff(head: Head) -> bool`` - does this content look like the format? (content, not name);
* ``load(ctx: LoadContext) -> LoadResult`` - lower the file into the canonical tables, inside
  the transaction the caller holds, and account for every record.
"""

from __future__ import annotations

import codecs
import csv
import gzip
import io
import re
import tempfile
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO

import duckdb

from analyzer.errors import InputError

HEAD_BYTES = 64 * 1024
FIRST_LINE_MAX = 256 * 1024 * 1024  # how far sniffing reads to see a first line whole
GZIP_MAGIC = b"\x1f\x8b"


@dataclass(frozen=True)
class IngestOptions:
    tz: str = "UTC"  # zone of timestamps that carry none
    session_gap_s: int = 30 * 60  # a longer silence in a billing stream starts a new session
    strict: bool = False  # any reject fails the file
    format: str | None = None  # skip sniffing, use this format
    progress: bool = True  # show progress for big files (only on a terminal)
    full_paths: bool = False  # name files by absolute path (else relative to the path given)


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


@dataclass
class LoadResult:
    rows_read: int = 0
    rows_loaded: int = 0
    rows_rejected: int = 0
    rows_duplicate: int = 0
    rows_skipped: int = 0
    skipped_kinds: dict[str, int] = field(default_factory=dict)


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
            with open(path, "rb") as fh:
                raw = b"".join(_gunzip(fh, HEAD_BYTES))[:HEAD_BYTES]
        except OSError as exc:
            raise InputError(f"cannot read: {exc.strerror or exc}", path=display) from exc
        if not raw:
            raise InputError("damaged gzip data (nothing decompresses)", path=display)
    if len(raw) == HEAD_BYTES and b"\n" not in raw and raw.lstrip(b"\xef\xbb\xbf \t\r")[:1] == b"{":
        # One JSON object longer than the head (a 50 MB tool result on the first line): the
        # sniffers need to see it whole.
        raw = _first_line(path, compression) or raw
    return Head(data=raw, compression=compression, encoding=guess_encoding(raw))


def _gunzip(fh: IO[bytes], limit: int | None = None) -> Iterator[bytes]:
    """Decompress gzip data (several members, as ``cat a.gz b.gz`` makes, included) for as
    long as it can be: stops quietly where the data is cut off or corrupt."""
    dec = zlib.decompressobj(wbits=31)
    out = 0
    # Small steps: zlib drops the output of a step that hits damage.
    while chunk := fh.read(16 * 1024):
        while chunk:
            try:
                data = dec.decompress(chunk)
            except zlib.error:
                return
            if data:
                yield data
                out += len(data)
                if limit is not None and out >= limit:
                    return
            if not dec.eof:
                break
            chunk = dec.unused_data
            if not chunk.startswith(GZIP_MAGIC):
                return  # padding after the last member
            dec = zlib.decompressobj(wbits=31)


@contextmanager
def salvage_gzip(src: SourceFile) -> Iterator[tuple[SourceFile, int]]:
    """The whole lines that decompress from a damaged gzip file, as a temporary uncompressed
    copy, and how many there are (the cut-off line after them is left out)."""
    with tempfile.TemporaryDirectory(prefix="llm-forensics-") as tmp:
        copy = Path(tmp) / "salvaged"
        lines = 0
        pending = b""
        with open(src.path, "rb") as fh, open(copy, "wb") as out:
            for data in _gunzip(fh):
                data = pending + data
                cut = data.rfind(b"\n") + 1
                out.write(data[:cut])
                lines += data.count(b"\n", 0, cut)
                pending = data[cut:]
        head = replace(src.head, compression=None)
        yield replace(src, path=copy, head=head, size=copy.stat().st_size), lines


def _first_line(path: Path, compression: str | None) -> bytes | None:
    """The file's first line (decompressed), if it ends within ``FIRST_LINE_MAX`` bytes."""
    opener = gzip.open if compression == "gzip" else open
    try:
        with opener(path, "rb") as fh:
            line = fh.readline(FIRST_LINE_MAX)
    except (OSError, EOFError, zlib.error):
        return None
    return line if len(line) < FIRST_LINE_MAX or line.endswith(b"\n") else None


# --- Text encodings ------------------------------------------------------------------------
# Logs and exports are UTF-8, but files re-saved by a spreadsheet on Windows arrive as
# Windows-1252 or UTF-16. Whatever is not UTF-8 is read as what it is (and the user is told),
# through a UTF-8 copy or stream, so the loaders only ever see UTF-8.

ENCODING_NAMES = {
    "utf-8": "UTF-8",
    "utf-8-sig": "UTF-8 (with a byte-order mark)",
    "utf-16": "UTF-16",
    "utf-16-le": "UTF-16 little-endian (no byte-order mark)",
    "utf-16-be": "UTF-16 big-endian (no byte-order mark)",
    "cp1252": "Windows-1252 (cp1252)",
}
_UTF8_FAMILY = ("utf-8", "utf-8-sig")
_NON_ASCII = re.compile("[\x80-\ud7ff\ue000-\U0010ffff]")  # decoded, not an escaped byte
_ESCAPED = re.compile("[\udc80-\udcff]")  # a byte that is not UTF-8 (surrogateescape)


def _c1_passthrough(err: UnicodeError) -> tuple[str, int]:
    """Windows-1252 leaves five bytes undefined; Windows maps them to the C1 code points of the
    same value, and so do we (Latin-1's reading), so no byte is ever lost."""
    assert isinstance(err, UnicodeDecodeError)
    return "".join(chr(b) for b in err.object[err.start : err.end]), err.end


codecs.register_error("lf-c1", _c1_passthrough)


def decode_errors(encoding: str) -> str:
    """The error handler for reading ``encoding``: Windows-1252 reads every byte; a cut UTF-16
    code unit (a truncated file) becomes U+FFFD."""
    return "lf-c1" if encoding == "cp1252" else "replace"


def is_utf8(encoding: str) -> bool:
    return encoding in _UTF8_FAMILY


class Utf8Tally:
    """Counts, over a byte stream fed in chunks, the characters that decode as UTF-8 beyond
    ASCII and the bytes that do not. Bytes that never decode, with nothing that does, are
    another encoding; a few bad bytes among good ones are damage (those records are rejected).
    """

    def __init__(self) -> None:
        self._dec = codecs.getincrementaldecoder("utf-8")(errors="surrogateescape")
        self.good = 0
        self.bad = 0

    def feed(self, chunk: bytes, final: bool = False) -> None:
        text = self._dec.decode(chunk, final)
        if text.isascii():
            return
        self.bad += len(_ESCAPED.findall(text))
        self.good += len(_NON_ASCII.findall(text))

    def verdict(self) -> str:
        return "cp1252" if self.bad and not self.good else "utf-8"


class LineEnds:
    """Learns, over a byte stream fed in chunks, which line ends it has: CRLF, a lone LF, a
    lone CR.

    A file edited in two editors, or two exports pasted together, mixes them; DuckDB's CSV
    reader refuses such a file outright (it fixes one line end for the whole file), so it is
    read through a copy with every line end made LF (``utf8_copy``). Most files have no CR at
    all: a chunk without one costs a single scan."""

    def __init__(self) -> None:
        self.crlf = False
        self.lone_lf = False
        self.lone_cr = False
        self._ends_in_cr = False

    def feed(self, chunk: bytes, final: bool = False) -> None:
        if self._ends_in_cr and (chunk or final):  # a CR ended the last chunk: an LF next?
            if chunk[:1] == b"\n":
                self.crlf = True
                chunk = chunk[1:]
            else:
                self.lone_cr = True
            self._ends_in_cr = False
        if not chunk:
            return
        if b"\r" not in chunk:
            self.lone_lf = self.lone_lf or b"\n" in chunk
            return
        self._ends_in_cr = chunk.endswith(b"\r")
        if self._ends_in_cr:
            chunk = chunk[:-1]
        crlf, cr, lf = chunk.count(b"\r\n"), chunk.count(b"\r"), chunk.count(b"\n")
        self.crlf = self.crlf or crlf > 0
        self.lone_cr = self.lone_cr or cr > crlf
        self.lone_lf = self.lone_lf or lf > crlf

    @property
    def mixed(self) -> bool:
        """More than one kind of line end (a file of CR line ends only is not mixed)."""
        return self.crlf + self.lone_lf + self.lone_cr > 1


def guess_encoding(raw: bytes) -> str:
    """The encoding of a file from its first bytes: a byte-order mark, UTF-16's zero bytes, or
    bytes that are not UTF-8 (read as Windows-1252, what spreadsheets on Windows write)."""
    if raw.startswith(codecs.BOM_UTF8):
        return "utf-8-sig"
    if raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return "utf-16"
    sample = raw[:4096]
    half = len(sample) // 2
    if half >= 4:
        even, odd = sample[0::2].count(0), sample[1::2].count(0)
        if odd > 0.4 * half and even < 0.05 * half:
            return "utf-16-le"
        if even > 0.4 * half and odd < 0.05 * half:
            return "utf-16-be"
    tally = Utf8Tally()
    tally.feed(raw)  # not final: the head may end inside a character
    return tally.verdict()


def open_binary(src: SourceFile) -> IO[bytes]:
    """The file's content (decompressed), as bytes in the file's own encoding."""
    if src.head.compression == "gzip":
        return gzip.open(src.path, "rb")  # type: ignore[return-value]
    return open(src.path, "rb")


def utf8_lines(fh: IO[bytes], encoding: str) -> Iterator[bytes]:
    """The lines of ``fh`` (ending at ``\n``, which they keep) as UTF-8 bytes. A UTF-8 file is
    passed through untouched (a bad byte stays bad, for the reader to reject its record)."""
    if is_utf8(encoding):
        yield from fh
        return
    text = io.TextIOWrapper(fh, encoding=encoding, errors=decode_errors(encoding), newline="\n")
    for line in text:
        yield line.encode()


def _lf_line_ends(chunks: Iterator[str]) -> Iterator[str]:
    """The text with every CRLF and lone CR made LF (a CR at the end of a chunk waits to see
    whether an LF follows it)."""
    pending_cr = False
    for chunk in chunks:
        if pending_cr:
            chunk = "\r" + chunk
        pending_cr = chunk.endswith("\r")
        if pending_cr:
            chunk = chunk[:-1]
        yield chunk.replace("\r\n", "\n").replace("\r", "\n")
    if pending_cr:
        yield "\n"


@contextmanager
def utf8_copy(src: SourceFile) -> Iterator[Path]:
    """A path to the file's content in UTF-8 with one kind of line end: the file itself when it
    is UTF-8 and does not mix line ends, else a temporary uncompressed UTF-8 copy (removed
    afterwards) with every line end made LF. The copy has the same lines, so line numbers still
    point into the original (a lone CR counts as a line end, as in Python's universal newlines).
    """
    if is_utf8(src.head.encoding) and not src.mixed_line_ends:
        yield src.path
        return
    # UTF-8 bytes are passed through as they are (a bad byte stays bad, for the reader to
    # reject its record): surrogateescape keeps them.
    encoding = "utf-8" if is_utf8(src.head.encoding) else src.head.encoding
    errors = "surrogateescape" if encoding == "utf-8" else decode_errors(encoding)
    with tempfile.TemporaryDirectory(prefix="llm-forensics-") as tmp:
        copy = Path(tmp) / "utf8.txt"
        with open_binary(src) as fh, open(copy, "wb") as out:
            reader = codecs.getreader(encoding)(fh, errors=errors)
            for text in _lf_line_ends(iter(lambda: reader.read(1 << 20), "")):
                out.write(text.encode("utf-8", errors="surrogateescape"))
        yield copy
