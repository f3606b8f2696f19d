"""CSV records found whatever the damage: where each record of a CSV file starts and ends, so
that a stray quote or a carriage return inside a value costs the record it is in, never the
records after it, and a value of any size is read.

A reader that trusts the quotes (Python's csv module, DuckDB's) takes everything after a quote
that is never closed into one value: the rest of the file, lost in one rejected record. Here
records are found line by line, with the quote rules both those readers apply (a quote opens a
value only at the start of a field; ``""`` inside a quoted value is one quote of it; a quote
inside an unquoted value is a character of it):

* A record that ends on the line it starts on is what it says, however bad (text after a
  closing quote is read as Python's csv module reads it; DuckDB's reader rejects that record).
* A quoted value that runs over several lines makes one record when its quote closes properly
  and the record has the header's number of fields (a prompt with line breaks). When the quote
  is not closed before the end of the file, or closes into a record of another number of
  fields or with text after the closing quote, it was a stray: the record is its first line
  alone, rejected as ``unterminated quote``, and the lines after it are read as records of
  their own.
* A carriage return alone (not before a line feed) inside a line ends a line where the pieces
  on its two sides are whole records of the header's fields, or would make a record of more
  fields together (a file edited in two editors, its records apart, a damaged one too); it is
  a character of a value where the pieces together make at most the header's fields (a name
  pasted from another program): that record stays whole (``cr_records``).

Used by the readers built on Python's csv module (``fields`` reads a record's values, of any
size) and, through ``repaired``, by the OpenRouter export's DuckDB reader when its first read
found a record that took in the lines after it (``scan_file``, ``repaired``).
"""

from __future__ import annotations

import csv
import io
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Protocol

UNTERMINATED = (
    'unterminated quote: the value opened by a " on this line is not closed '
    "(the lines after it are read on their own)"
)
_FIELD_LIMIT = 2**31 - 1  # the csv module's own limit is 131,072 characters
_STAND_INS = "\ue000\ue001\ue002\ue003"  # for a CR in an unquoted value, while csv reads it


@dataclass
class _State:
    """Where a record's scan is: inside a quoted value or not, and what it has seen."""

    quoted: bool = False
    delimiters: int = 0  # outside quoted values
    at_start: bool = True  # at the start of a field: a quote here opens a quoted value
    closed: bool = False  # just after a quote that closed a value
    junk: bool = False  # text after a closing quote that is not a delimiter
    cr: bool = False  # a carriage return outside any quoted value


def _scan(line: str, delim: str, st: _State) -> None:
    """One physical line of a record (without its line end), scanned on from ``st``."""
    for i, seg in enumerate(line.split('"')):
        if i:  # a quote before ``seg``
            if st.quoted:
                st.quoted, st.closed = False, True
            elif st.closed:  # "" inside a quoted value: one quote of it
                st.quoted, st.closed = True, False
            elif st.at_start:
                st.quoted, st.at_start = True, False
            # else: a quote inside an unquoted value, a character of it
        if not seg or st.quoted:
            continue
        if st.closed:
            st.junk = st.junk or not seg.startswith(delim)
            st.closed = False
        st.delimiters += seg.count(delim)
        st.at_start = seg.endswith(delim)
        st.cr = st.cr or "\r" in seg


def _fits(text: str, delim: str, width: int, exactly: bool = False) -> bool:
    """Is ``text``, on one line, a record of at most (``exactly``) ``width`` fields?"""
    st = _State()
    _scan(text, delim, st)
    fields = st.delimiters + 1
    return not st.quoted and not st.junk and (fields == width if exactly else fields <= width)


def cr_records(line: str, delim: str, width: int) -> list[str]:
    """The records a line with lone carriage returns in it holds, as the module says: each CR
    between two whole records, or between pieces that together have more than ``width``
    fields, ends one; any other is a character of a value, its two sides one record."""
    out: list[str] = []
    current, *rest = line.split("\r")
    for piece in rest:
        apart = not current.strip() or not piece.strip()  # a blank line on one side
        apart = apart or (_fits(current, delim, width, True) and _fits(piece, delim, width, True))
        if not apart and _fits(current + "\r" + piece, delim, width):
            current += "\r" + piece
        else:
            out.append(current)
            current = piece
    out.append(current)
    return out


def lone_crs(text: str, delim: str, width: int) -> str:
    """``text`` (whole lines, LF line ends) with each lone carriage return made a line end where
    it ends a record (``cr_records``), and kept as a character of its value where it does not:
    the record written again with that value quoted, so that a reader that takes any CR for a
    line end (DuckDB's) reads it whole. A record with a quote left open or text after a closing
    quote (a line of a quoted value over several lines, or damage) has its CRs made line ends,
    as before."""
    out = []
    for line in text.split("\n"):
        for record in cr_records(line, delim, width) if "\r" in line else [line]:
            if "\r" not in record:
                out.append(record)
            elif _fits(record, delim, 2**31):  # closed, of any number of fields
                buf = io.StringIO()  # the writer quotes a value with a CR in it
                writer = csv.writer(buf, delimiter=delim, lineterminator="\r\n")
                writer.writerow(fields(record, delim))
                out.append(buf.getvalue().removesuffix("\r\n"))
            else:
                out.append(record.replace("\r", "\n"))
    return "\n".join(out)


class Lines(Protocol):
    """A file's physical lines, by offset."""

    def line(self, at: int) -> tuple[str, int] | None:
        """The line at offset ``at`` without its line end, and the offset of the next; None at
        the end."""
        ...

    def span(self, start: int, end: int) -> str:
        """The text from ``start`` to ``end`` (whole lines), without its last line end."""
        ...


class TextLines:
    """The lines of a text in memory. A text without a line feed but with carriage returns
    (an old Mac file) has CR line ends."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.end = "\n" if "\n" in text or "\r" not in text else "\r"

    def line(self, at: int) -> tuple[str, int] | None:
        if at >= len(self.text):
            return None
        stop = self.text.find(self.end, at)
        after = len(self.text) if stop < 0 else stop + 1
        line = self.text[at : after if stop < 0 else stop]
        return (line[:-1] if self.end == "\n" and line.endswith("\r") else line), after

    def span(self, start: int, end: int) -> str:
        text = self.text[start:end]
        text = text[:-1] if text.endswith(self.end) else text
        return text[:-1] if self.end == "\n" and text.endswith("\r") else text


class FileLines:
    """The lines of a UTF-8 file of LF line ends, by byte offset, as Latin-1 text (one
    character per byte: the quotes, delimiters and line ends are where they are in the bytes)."""

    def __init__(self, fh: IO[bytes]) -> None:
        self.fh = fh
        self.pos = 0

    def line(self, at: int) -> tuple[str, int] | None:
        if at != self.pos:
            self.fh.seek(at)
        raw = self.fh.readline()
        self.pos = at + len(raw)
        if not raw:
            return None
        return raw.rstrip(b"\n").removesuffix(b"\r").decode("latin-1"), self.pos

    def span(self, start: int, end: int) -> str:
        self.fh.seek(start)
        self.pos = end
        return self.fh.read(end - start).rstrip(b"\n").removesuffix(b"\r").decode("latin-1")


@dataclass(frozen=True)
class Record:
    """One record: where it is, and its text (None for one that cannot be read)."""

    line: int  # the physical line it starts on (1 = the file's first)
    start: int  # offset of its first line
    end: int  # offset after its last line
    text: str | None  # None: an unterminated quote (``UNTERMINATED``); its first line follows
    first: str  # its first line


@dataclass
class Cursor:
    """Where reading is: the offset of the next record and its physical line (1 = the file's
    first)."""

    at: int
    line: int


def records(
    lines: Lines, delim: str, width: int, cur: Cursor, text: bool = True, stop: int | None = None
) -> Iterator[Record]:
    """The records of ``lines`` from ``cur`` (moved on past each), as the module says, up to
    the first that starts at or after offset ``stop``: ``width`` is the header's number of
    fields. ``text``: give each record's text (else only its first line)."""
    while (stop is None or cur.at < stop) and (got := lines.line(cur.at)) is not None:
        first, after_first = got
        if '"' not in first and "\r" not in first:  # most lines: a record of their own
            yield Record(cur.line, cur.at, after_first, first, first)
            cur.at, cur.line = after_first, cur.line + 1
            continue
        st = _State()
        _scan(first, delim, st)
        end, n = after_first, 1
        while st.quoted and (more := lines.line(end)) is not None:
            _scan(more[0], delim, st)  # (the line end before it is a character of the value)
            end = more[1]
            n += 1
        if st.quoted or (n > 1 and (st.junk or st.delimiters + 1 != width)):
            # A stray quote: its line alone is the record; the next lines are read again.
            yield Record(cur.line, cur.at, after_first, None, first)
            cur.at, cur.line = after_first, cur.line + 1
            continue
        if st.cr and n == 1:  # a lone CR: a line end, or a character of a value
            pieces = cr_records(first, delim, width)
            for k, piece in enumerate(pieces):
                yield Record(cur.line + k, cur.at, end, piece, piece)
            cur.at, cur.line = end, cur.line + len(pieces)
            continue
        body = (first if n == 1 else lines.span(cur.at, end)) if text else first
        yield Record(cur.line, cur.at, end, body, first)
        cur.at, cur.line = end, cur.line + n


def fields(text: str, delim: str) -> list[str]:
    """The values of one record's text, of any size (a carriage return in an unquoted value is
    a character of it; text after a closing quote is read as Python's csv module reads it)."""
    if '"' not in text:
        return text.split(delim)
    if len(text) > csv.field_size_limit():
        csv.field_size_limit(_FIELD_LIMIT)
    stand_in = next((c for c in _STAND_INS if c not in text), None) if "\r" in text else None
    try:
        if stand_in is None:
            return next(csv.reader(io.StringIO(text, newline=""), delimiter=delim), [])
        shown = io.StringIO(text.replace("\r", stand_in), newline="")
        return [v.replace(stand_in, "\r") for v in next(csv.reader(shown, delimiter=delim), [])]
    except csv.Error:  # a CR in an unquoted value of a text that holds every stand-in
        return text.split(delim)


def table(text: str, delim: str) -> tuple[list[str], Iterator[Record]]:
    """A CSV text's header (its first line) and the records after it (``records``)."""
    lines = TextLines(text)
    got = lines.line(0)
    if got is None:
        return [], iter(())
    header = fields(got[0], delim)
    return header, records(lines, delim, len(header), Cursor(got[1], 2))


MARKER = '"llm-forensics: unterminated quote {}"'


def scan_file(path: Path, delim: str, width: int) -> tuple[list[Record], int]:
    """The records of the CSV file at ``path`` (UTF-8, LF line ends, a header of ``width``
    fields) that have an unterminated quote, and the length in bytes of its longest record. A
    block of whole lines without a quote is taken at once (its lines are records of their
    own): only the lines around quotes are read one by one."""
    flagged: list[Record] = []
    with open(path, "rb") as fh:
        lines = FileLines(fh)
        head = lines.line(0)
        if head is None:
            return [], 0
        cur, longest = Cursor(head[1], 2), head[1]
        while True:
            fh.seek(cur.at)
            lines.pos = -1  # (moved)
            block = fh.read(_BLOCK)
            if not block:
                break
            cut = block.rfind(b"\n") + 1
            if cut and b'"' not in block[:cut]:
                longest = max(longest, max(map(len, block[:cut].split(b"\n"))) + 1)
                cur.at, cur.line = cur.at + cut, cur.line + block.count(b"\n", 0, cut)
                continue
            stop = cur.at + (cut or len(block))
            for r in records(lines, delim, width, cur, text=False, stop=stop):
                if r.text is None:
                    flagged.append(r)
                longest = max(longest, r.end - r.start)
    return flagged, longest


_BLOCK = 1 << 20


@contextmanager
def repaired(path: Path, flagged: list[Record]) -> Iterator[tuple[Path, dict[str, str]]]:
    """A copy of the CSV file at ``path`` with the first line of each of the ``flagged``
    records (``scan_file``) replaced by a marker, a record of one quoted value that a reader of
    more fields rejects, and the line each marker stands for (by the marker's text). The copy
    has the same records as the file once those lines are read on their own. (No record
    flagged: the file itself.)"""
    if not flagged:
        yield path, {}
        return
    originals: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="llm-forensics-") as tmp:
        copy = Path(tmp) / "repaired.csv"
        with open(path, "rb") as fh, open(copy, "wb") as out:
            pos = 0
            for k, r in enumerate(flagged, 1):
                _copy_bytes(fh, out, r.start - pos)
                marker = MARKER.format(k)
                out.write(marker.encode() + b"\n")
                originals[marker] = r.first.encode("latin-1").decode("utf-8", "replace")
                fh.seek(r.end)
                pos = r.end
            shutil.copyfileobj(fh, out, 1 << 20)
        yield copy, originals


def _copy_bytes(src: IO[bytes], dst: IO[bytes], n: int) -> None:
    while n > 0:
        chunk = src.read(min(n, 1 << 20))
        if not chunk:
            return
        dst.write(chunk)
        n -= len(chunk)
