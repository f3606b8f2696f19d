"""Reading a file's bytes: its head for sniffing, gzip (and what a damaged one still holds),
its lines in UTF-8, and a UTF-8 copy with one kind of line end for DuckDB's reader.

What one file may cost is bounded, whatever it holds (a decompression bomb included): one line
is read whole up to :data:`MAX_LINE_BYTES` (a longer one is rejected, read past in pieces), a
compressed file unpacks to at most :func:`expansion_limit` of its size (what comes after is one
reject, as for damaged data), and blank lines are not records (skipped a run at a time).
"""

from __future__ import annotations

import codecs
import functools
import re
import zlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, TYPE_CHECKING

import orjson

from analyzer.errors import InputError
from analyzer.ingest.encodings import decode_errors, guess_encoding, is_utf8

if TYPE_CHECKING:  # (the live hook reads with this module's line reading alone)
    from analyzer.ingest.base import Head, SourceFile

HEAD_BYTES = 64 * 1024
GZIP_MAGIC = b"\x1f\x8b"
MB = 2**20
# The longest line read whole (a log's record): a longer one is rejected, never held in memory.
# Real lines reach tens of MB (a tool result holding a file or an image); no API takes a
# request of this size.
MAX_LINE_BYTES = 128 * MB
FIRST_LINE_MAX = MAX_LINE_BYTES  # how far sniffing reads to see a first line whole
# A compressed file may unpack to this many times its size, or to MIN_EXPANSION_BYTES if that
# is more. gzip reaches about 1,000:1 only on runs of one byte (a bomb); real logs unpack 5-20
# times, and a log of a loop repeating a 30 KB tool result word for word about 120 times.
EXPANSION_RATIO = 200
MIN_EXPANSION_BYTES = 64 * MB
STEP = 1 * MB  # the most one step of decompression may unpack


def expansion_limit(compressed: int) -> int:
    """The most a compressed file of ``compressed`` bytes may unpack to."""
    return max(MIN_EXPANSION_BYTES, EXPANSION_RATIO * compressed)


def over_expansion(compressed: int) -> str:
    """What is said of a compressed file of ``compressed`` bytes that unpacks to more than
    :func:`expansion_limit`."""
    return (
        f"decompresses to more than {expansion_limit(compressed) // MB:,} MB (a compressed file "
        f"may unpack to {EXPANSION_RATIO} times its size, or {MIN_EXPANSION_BYTES // MB} MB)"
    )


def read_head(path: Path, display: str) -> Head:
    """Read the start of ``path`` (decompressing gzip, found by its magic bytes)."""
    from analyzer.ingest.base import Head

    try:
        with open(path, "rb") as fh:
            raw = fh.read(HEAD_BYTES)
    except PermissionError as exc:
        raise InputError("permission denied", path=display) from exc
    except IsADirectoryError as exc:
        raise InputError("is a folder, not a file", path=display) from exc
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", path=display) from exc
    head = plain_head(raw)
    if head is not None:
        return head
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
    if _long_first_line(raw):
        # One JSON object longer than the head (a 50 MB tool result on the first line): the
        # sniffers need to see it whole.
        raw = _first_line(path, compression) or raw
    return Head(data=raw, compression=compression, encoding=guess_encoding(raw))


def plain_head(start: bytes) -> Head | None:
    """The head ``read_head`` reads of a file that starts with ``start`` (its first bytes, at
    least ``HEAD_BYTES`` of them, or all of it), when those bytes are all it needs: None for a
    compressed file, or one whose first line is longer than the head."""
    from analyzer.ingest.base import Head

    raw = start[:HEAD_BYTES]
    if raw.startswith(GZIP_MAGIC) or _long_first_line(raw):
        return None
    return Head(data=raw, compression=None, encoding=guess_encoding(raw))


def _long_first_line(raw: bytes) -> bool:
    return (
        len(raw) == HEAD_BYTES and b"\n" not in raw and raw.lstrip(b"\xef\xbb\xbf \t\r")[:1] == b"{"
    )


def _gunzip(fh: IO[bytes], limit: int | None = None) -> Iterator[bytes]:
    """Decompress gzip data (several members, as ``cat a.gz b.gz`` makes, included) for as
    long as it can be, up to ``limit`` bytes: stops quietly where the data is cut off or
    corrupt. Each piece is at most ``STEP`` bytes, however well the data compresses."""
    dec = zlib.decompressobj(wbits=31)
    out = 0
    member_ended = False
    # Small steps: zlib drops the output of a step that hits damage.
    while chunk := fh.read(16 * 1024):
        if member_ended:
            if not chunk.startswith(GZIP_MAGIC):
                return  # padding after the last member
            dec, member_ended = zlib.decompressobj(wbits=31), False
        while True:
            try:
                data = dec.decompress(chunk, STEP)
            except zlib.error:
                return
            if data:
                if limit is not None and out + len(data) >= limit:
                    yield data[: limit - out]
                    return
                yield data
                out += len(data)
            if dec.eof:
                chunk = dec.unused_data
                if not chunk:
                    member_ended = True  # the next member, if any, starts in the next read
                    break
                if not chunk.startswith(GZIP_MAGIC):
                    return  # padding after the last member
                dec = zlib.decompressobj(wbits=31)
                continue
            chunk = dec.unconsumed_tail
            if not chunk and len(data) < STEP:
                break  # (a full step may leave output inside zlib: another step takes it)


@contextmanager
def salvage_gzip(src: SourceFile) -> Iterator[tuple[SourceFile, int]]:
    """The whole lines that decompress from a damaged gzip file, or from one that unpacks to
    more than :func:`expansion_limit`, up to the damage or the limit, as a temporary
    uncompressed copy, and how many there are (the cut-off line after them is left out)."""
    import tempfile  # (lazily, as below: the live reader of a transcript needs neither)

    with tempfile.TemporaryDirectory(prefix="llm-forensics-") as tmp:
        copy = Path(tmp) / "salvaged"
        lines = written = whole = 0
        with open(src.path, "rb") as fh, open(copy, "wb") as out:
            # Written as it unpacks (a line of any length costs no memory), then cut back to
            # the end of the last whole line.
            for data in _gunzip(fh, expansion_limit(src.size)):
                out.write(data)
                last = data.rfind(b"\n")
                if last >= 0:
                    lines += data.count(b"\n")
                    whole = written + last + 1
                written += len(data)
            out.truncate(whole)
        head = replace(src.head, compression=None)
        yield replace(src, path=copy, head=head, size=whole), lines


def _first_line(path: Path, compression: str | None) -> bytes | None:
    """The file's first line (decompressed), if it ends within ``FIRST_LINE_MAX`` bytes."""
    import gzip  # (here and below, where a file is read whole: the live hook reads none)

    opener = gzip.open if compression == "gzip" else open
    try:
        with opener(path, "rb") as fh:
            line = fh.readline(FIRST_LINE_MAX)
    except (OSError, EOFError, zlib.error):
        return None
    return line if len(line) < FIRST_LINE_MAX or line.endswith(b"\n") else None


def open_binary(src: SourceFile) -> IO[bytes]:
    """The file's content (decompressed), as bytes in the file's own encoding."""
    if src.head.compression == "gzip":
        import gzip

        return gzip.open(src.path, "rb")  # type: ignore[return-value]
    return open(src.path, "rb")


MAX_DOCUMENT_BYTES = 512 * 2**20  # a JSON document is read whole: refused above this


def read_json_document(src: SourceFile) -> object:
    """A file that is one JSON document, parsed whole (decompressed, in its encoding): a
    document over :data:`MAX_DOCUMENT_BYTES`, damaged gzip data or invalid JSON is an error
    naming the file (and the line, for invalid JSON)."""
    import gzip

    limit = MAX_DOCUMENT_BYTES
    if src.size > limit:
        raise InputError(
            f"a JSON document of {src.size / 2**20:.0f} MB is too large to read at once "
            f"(limit {limit // 2**20} MB)",
            src.display,
        )
    try:
        with open_binary(src) as fh:
            raw = fh.read(limit + 1)  # a compressed file may unpack to far more
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise InputError(
            f"damaged gzip data ({exc}): a cut-off JSON document cannot be read", src.display
        ) from exc
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", src.display) from exc
    if len(raw) > limit:
        raise InputError(
            f"a JSON document of over {limit // 2**20} MB uncompressed is too large to read "
            "at once",
            src.display,
        )
    if is_utf8(src.head.encoding):
        raw = raw.removeprefix(b"\xef\xbb\xbf")
    else:
        raw = raw.decode(src.head.encoding, errors=decode_errors(src.head.encoding)).encode()
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        line = raw[: exc.pos].count(b"\n") + 1 if exc.pos is not None else None
        raise InputError(f"not valid JSON: {exc.msg}", src.display, line) from exc


def read_text(src: SourceFile, what: str) -> str:
    """A file read whole as text (decompressed, decoded from its encoding, without a byte-order
    mark; a byte that does not decode is replaced), for formats whose records are parsed from
    the whole (``what`` names the kind of file in the message when it is too large)."""
    import gzip

    limit = MAX_DOCUMENT_BYTES
    if src.size > limit:
        raise InputError(
            f"{what} of {src.size / 2**20:.0f} MB is over the limit of {limit // 2**20} MB",
            src.display,
        )
    try:
        with open_binary(src) as fh:
            raw = fh.read(limit + 1)
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise InputError(f"damaged gzip data ({exc})", src.display) from exc
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", src.display) from exc
    if len(raw) > limit:
        raise InputError(
            f"{what} of over {limit // 2**20} MB uncompressed is over the limit", src.display
        )
    if is_utf8(src.head.encoding):
        return raw.removeprefix(b"\xef\xbb\xbf").decode("utf-8", errors="replace")
    return raw.decode(src.head.encoding, errors=decode_errors(src.head.encoding))


READ_BYTES = 1 * MB  # read at a time by ``text_lines``
_BOM = codecs.BOM_UTF8
_KEPT = 4096  # of a line too long to read whole, the start kept (to show in its reject)


# Blank lines from where a line starts, through the line end of the last of them (a run of
# millions is skipped in one step); bytes.strip's whitespace.
@functools.cache
def _blank_lines() -> re.Pattern[bytes]:
    return re.compile(rb"[ \t\n\r\x0b\x0c]*\n")


@dataclass
class LineEnds:
    """Where ``text_lines`` is in its input, so that a later read can start at a line
    (``analyzer.ingest.resume``): the input's bytes up to and including the last line end it
    passed and the line ends passed (blank lines included), and where the line it gave last
    starts (the same two, before it). Offsets count from ``offset`` as it is given (the
    position in the file where the input starts)."""

    offset: int = 0
    lines: int = 0
    line_offset: int = 0
    line_lines: int = 0
    unended: bool = False  # (set by the reader: a last line without a line end was a record)

    def passed(self, offset: int, lines: int) -> None:
        """A line given ends at ``offset``, the ``lines``-th line end."""
        self.line_offset, self.line_lines = self.offset, self.lines
        self.offset, self.lines = offset, lines


def text_lines(
    fh: IO[bytes], encoding: str, start: int = 0, ends: LineEnds | None = None
) -> Iterator[tuple[int, bytes, int]]:
    """(line number, line, its length in bytes) for each line of ``fh`` that is not blank
    (lines end at ``\n``, which they keep; a blank line holds only whitespace, and is not a
    record), in UTF-8 bytes without a byte-order mark. A line longer than
    :data:`MAX_LINE_BYTES` is never held whole: it is given as its first bytes, with its full
    length, and the reader rejects it. A UTF-8 file is passed through untouched (a bad byte
    stays bad, for the reader to reject its record).

    ``start``: the line ends before where ``fh`` is (a read that resumes after the whole
    lines an earlier read took: ``fh`` is at the start of a line, and no byte-order mark is
    looked for there). ``ends`` is kept up to date with the input taken, counted from its
    ``offset``: UTF-8 bytes, which are the file's own where it is UTF-8 (after a byte-order
    mark)."""
    lineno = start
    parts: list[bytes] = []  # the line under way, while it may still be read whole
    size = 0  # its length so far (0: at the start of a line)
    blank = True  # nothing but whitespace in it so far
    ends = ends if ends is not None else LineEnds()
    taken = ends.offset  # the input's bytes before the chunk under way
    blank_lines = _blank_lines()
    chunks = _utf8_chunks(fh, encoding)
    for chunk in chunks if start else _without_bom(chunks):
        pos, end = 0, len(chunk)
        while pos < end:
            if not size:
                skip = blank_lines.match(chunk, pos)
                if skip is not None:
                    lineno += chunk.count(b"\n", pos, skip.end())
                    pos = skip.end()
                    ends.offset, ends.lines = taken + pos, lineno
                    continue
            nl = chunk.find(b"\n", pos)
            stop = end if nl < 0 else nl + 1
            piece = chunk[pos:stop]
            pos = stop
            if not size and nl >= 0 and len(piece) <= MAX_LINE_BYTES:
                # a whole line in this chunk (not blank: see above), within the limit
                lineno += 1
                ends.passed(taken + pos, lineno)
                yield lineno, piece, len(piece)
                continue
            size += len(piece)
            blank = blank and not piece.strip()
            if size <= MAX_LINE_BYTES:
                parts.append(piece)
            else:  # too long: only its start is kept
                if size - len(piece) <= MAX_LINE_BYTES:  # (just gone over)
                    parts = [_start(parts, _KEPT)]
                if len(parts[0]) < _KEPT:
                    parts[0] += piece[: _KEPT - len(parts[0])]
            if nl >= 0:
                lineno += 1
                ends.passed(taken + pos, lineno)
                if not blank:
                    yield lineno, b"".join(parts) if size <= MAX_LINE_BYTES else parts[0], size
                parts, size, blank = [], 0, True
        taken += end
    if size:  # a last line without a line end
        ends.line_offset, ends.line_lines = ends.offset, ends.lines
        lineno += 1
        if not blank:
            yield lineno, b"".join(parts) if size <= MAX_LINE_BYTES else parts[0], size


def _start(pieces: list[bytes], n: int) -> bytes:
    """The first ``n`` bytes of ``pieces`` joined (without joining them all)."""
    out = bytearray()
    for piece in pieces:
        out += piece[: n - len(out)]
        if len(out) >= n:
            break
    return bytes(out)


def _without_bom(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """``chunks`` without a UTF-8 byte-order mark at the start."""
    it = iter(chunks)
    start = b""
    for chunk in it:
        start += chunk
        if len(start) >= len(_BOM):
            break
    if start := start.removeprefix(_BOM):
        yield start
    yield from it


def _utf8_chunks(fh: IO[bytes], encoding: str) -> Iterable[bytes]:
    """The content of ``fh`` as UTF-8 bytes, about :data:`READ_BYTES` at a time."""
    if is_utf8(encoding):
        yield from iter(lambda: fh.read(READ_BYTES), b"")
        return
    dec = codecs.getincrementaldecoder(encoding)(decode_errors(encoding))
    while raw := fh.read(READ_BYTES):
        if text := dec.decode(raw):
            yield text.encode()
    if text := dec.decode(b"", final=True):
        yield text.encode()


def _lf_line_ends(chunks: Iterator[str], shape: tuple[str, int] | None) -> Iterator[str]:
    """The text with every CRLF and lone CR made LF (a CR at the end of a chunk waits to see
    whether an LF follows it). With the ``shape`` of a CSV file (delimiter, number of fields), a
    lone CR inside a record stays in its value (``csv_scan.lone_crs``, handed whole lines; the
    CRs of a line over ``_CR_LINE_MAX`` characters are all made LF)."""
    from analyzer.ingest.csv_scan import lone_crs

    pending_cr = False
    carry: list[str] = []  # the start of a line a later chunk ends
    carried = 0
    long_line = False  # in a line over _CR_LINE_MAX, the start of which is written already
    for chunk in chunks:
        if pending_cr:
            chunk = "\r" + chunk
        pending_cr = chunk.endswith("\r")
        if pending_cr:
            chunk = chunk[:-1]
        chunk = chunk.replace("\r\n", "\n")
        if shape is None:
            yield chunk.replace("\r", "\n")
            continue
        first, cut = chunk.find("\n") + 1, chunk.rfind("\n") + 1
        if not first:  # the line goes on in the next chunk
            if long_line or carried + len(chunk) > _CR_LINE_MAX:
                yield ("".join(carry) + chunk).replace("\r", "\n")
                carry, carried, long_line = [], 0, True
            else:
                carry.append(chunk)
                carried += len(chunk)
            continue
        if long_line:
            yield chunk[:first].replace("\r", "\n")
            chunk, cut, long_line = chunk[first:], cut - first, False
        whole = "".join(carry) + chunk[:cut]
        yield lone_crs(whole, *shape) if "\r" in whole else whole
        carry, carried = [chunk[cut:]], len(chunk) - cut
    rest = "".join(carry)
    if shape is None or long_line or "\r" not in rest:
        yield rest.replace("\r", "\n")
    else:
        yield lone_crs(rest, *shape)
    if pending_cr:
        yield "\n"


_CR_LINE_MAX = 64 * 2**20


@contextmanager
def utf8_copy(
    src: SourceFile, shape: tuple[str, int] | None = None, plain: bool = False
) -> Iterator[Path]:
    """A path to the file's content in UTF-8 with one kind of line end: the file itself when it
    is UTF-8 and does not mix line ends (compressed or not) and no ``plain`` copy is asked for,
    else a temporary uncompressed UTF-8 copy (removed afterwards) with every line end made LF.
    The copy has the same lines, so line numbers still point into the original (a lone CR
    counts as a line end, as in Python's universal newlines; in a CSV file of that ``shape``,
    delimiter and number of fields, one inside a record stays in its value: ``_lf_line_ends``).
    """
    if is_utf8(src.head.encoding) and not src.mixed_line_ends and not plain:
        yield src.path
        return
    # UTF-8 bytes are passed through as they are (a bad byte stays bad, for the reader to
    # reject its record): surrogateescape keeps them.
    encoding = "utf-8" if is_utf8(src.head.encoding) else src.head.encoding
    errors = "surrogateescape" if encoding == "utf-8" else decode_errors(encoding)
    import tempfile

    with tempfile.TemporaryDirectory(prefix="llm-forensics-") as tmp:
        copy = Path(tmp) / "utf8.txt"
        with open_binary(src) as fh, open(copy, "wb") as out:
            reader = codecs.getreader(encoding)(fh, errors)
            for text in _lf_line_ends(iter(lambda: reader.read(1 << 20), ""), shape):
                out.write(text.encode("utf-8", errors="surrogateescape"))
        yield copy
