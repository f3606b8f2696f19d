"""Text encodings and line ends: what a file's bytes are, learnt from its head or from all of it.

Logs and exports are UTF-8, but files re-saved by a spreadsheet on Windows arrive as
Windows-1252 or UTF-16. Whatever is not UTF-8 is read as what it is (and the user is told),
through a UTF-8 copy or stream (``analyzer.ingest.reading``), so the loaders only ever see UTF-8.
"""

from __future__ import annotations

import codecs
import functools
import re

ENCODING_NAMES = {
    "utf-8": "UTF-8",
    "utf-8-sig": "UTF-8 (with a byte-order mark)",
    "utf-16": "UTF-16",
    "utf-16-le": "UTF-16 little-endian (no byte-order mark)",
    "utf-16-be": "UTF-16 big-endian (no byte-order mark)",
    "cp1252": "Windows-1252 (cp1252)",
}
_UTF8_FAMILY = ("utf-8", "utf-8-sig")


@functools.cache
def _patterns() -> tuple[re.Pattern[str], re.Pattern[str]]:
    """A character decoded beyond ASCII (not an escaped byte), and a byte that is not UTF-8
    (surrogateescape): compiled when first needed (the wide class takes milliseconds, which
    the fast hook would pay at every start)."""
    return re.compile("[\x80-\ud7ff\ue000-\U0010ffff]"), re.compile("[\udc80-\udcff]")


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
    """Learns, over a byte stream fed in chunks, whether a character decodes as UTF-8 beyond
    ASCII (``good``) and whether a byte does not (``bad``). Bytes that never decode, with
    nothing that does, are another encoding; a few bad bytes among good ones are damage (those
    records are rejected). Once a good character is seen the verdict is UTF-8, whatever
    follows: the rest is not decoded."""

    def __init__(self) -> None:
        self._dec = codecs.getincrementaldecoder("utf-8")(errors="surrogateescape")
        self.good = False
        self.bad = False

    def feed(self, chunk: bytes, final: bool = False) -> None:
        if self.good:
            return
        text = self._dec.decode(chunk, final)
        if text.isascii():
            return
        non_ascii, escaped = _patterns()
        self.good = non_ascii.search(text) is not None
        self.bad = self.bad or escaped.search(text) is not None

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
