"""Reading JSON Lines one line at a time (plain or gzip), for the agent-log formats."""

from __future__ import annotations

import codecs
import gzip
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from analyzer.errors import DamagedGzipError
from analyzer.ingest.base import Checkpoint, Head, Resume, SourceFile
from analyzer.ingest.reading import MAX_LINE_BYTES, MB, LineEnds, open_binary, text_lines

if TYPE_CHECKING:
    from analyzer.ingest.lowering import Lowering


def head_objects(head: Head, limit: int = 8) -> list[dict[str, Any]]:
    """The JSON objects on the first lines of a file (for sniffing); a line cut off by the end
    of the head, or anything that is not an object, is left out."""
    out: list[dict[str, Any]] = []
    for raw in head.utf8.split(b"\n")[:limit]:
        raw = raw.strip()
        if not raw:
            continue
        try:
            obj = orjson.loads(raw)
        except orjson.JSONDecodeError:
            continue
        if isinstance(obj, dict):
            out.append(obj)
    return out


@dataclass(frozen=True)
class Only:
    """The lines a reader wants parsed: those that hold ``marker``, a word of small letters, or
    an escape that could spell one of them (``\\u0061`` to ``\\u007a``). Any other line is
    counted as read and skipped as ``kind``, unparsed (a usage-first read, which wants the lines
    of one type: ``"assistant"``)."""

    marker: bytes
    kind: str

    def wanted(self, raw: bytes) -> bool:
        return self.marker in raw or b"\\u006" in raw or b"\\u007" in raw


def json_lines(
    src: SourceFile,
    low: Lowering,
    start: Resume | None = None,
    ends: LineEnds | None = None,
    only: Only | None = None,
) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each line that holds a JSON object.

    Every line that is not blank is a record, counted as read; blank lines (whitespace only,
    however long) are not records, though they count in line numbers. A line that is not a
    JSON object, or longer than :data:`MAX_LINE_BYTES`, is rejected with its number (a
    cut-off last line, as in a log still being written, says so). Damaged gzip data is an
    error for the whole file.

    ``start``: read on from where an earlier read stopped (only what follows is read and
    counted). ``ends`` says where the lines read start and end, in the file's bytes where it
    is UTF-8 and not compressed (see :func:`checkpoint`). ``only``: the lines to parse (the
    others are skipped, unread: :class:`Only`).
    """
    records = 0
    ends = ends if ends is not None else LineEnds()
    bom = len(codecs.BOM_UTF8) if src.head.encoding == "utf-8-sig" else 0
    ends.offset = start.offset if start is not None else bom  # (offsets count from there)
    ends.lines = start.lines if start is not None else 0
    try:
        with open_binary(src) as fh:
            if start is not None:
                fh.seek(start.offset)
            for lineno, raw, size in text_lines(fh, src.head.encoding, ends.lines, ends):
                records += 1
                if only is not None and not only.wanted(raw):
                    low.skip(only.kind)
                    continue
                if size > MAX_LINE_BYTES:
                    from analyzer.console import warn  # (lazily: rare, and click is slow)

                    warn(f"{src.display}:{lineno}: {too_long(size)} (rejected; the rest is read)")
                    low.reject(lineno, too_long(size), raw)
                    continue
                try:
                    obj = orjson.loads(raw)
                except orjson.JSONDecodeError as exc:
                    if "UTF-8" in str(exc) and not _is_utf8(raw):
                        low.reject(lineno, "bytes that are not valid UTF-8 in this line", raw)
                    elif not raw.endswith(b"\n"):
                        low.reject(
                            lineno, "cut-off last line (is the log still being written?)", raw
                        )
                    else:
                        low.reject(lineno, f"not valid JSON: {exc}", raw)
                    continue
                if not raw.endswith(b"\n"):
                    ends.unended = True  # a last line read, though no line end closes it
                if not isinstance(obj, dict):
                    low.reject(lineno, "a JSON line that is not an object", raw)
                    continue
                yield lineno, obj
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise DamagedGzipError(f"damaged gzip data ({exc})", src.display) from exc
    finally:
        low.read(records)  # every record counted as read (once, not a call per line)


def resumable(src: SourceFile) -> bool:
    """Whether the offsets :func:`json_lines` gives are the file's own bytes (a file that is
    not compressed, in UTF-8): only then can a later read start at one of them."""
    return src.head.compression is None and src.head.encoding in ("utf-8", "utf-8-sig")


def checkpoint(
    src: SourceFile, at: tuple[int, int] | None, ends: LineEnds, state: dict[str, Any]
) -> Checkpoint | None:
    """Where the next read of the file can start, once :func:`json_lines` has read it: at
    ``at`` (an offset and the line ends before it: the start of a line the reader wants read
    again), else after its last whole line (a cut-off last line, rejected now, is read again
    then), with the reader's ``state`` there. None where the offsets are not the file's
    (:func:`resumable`) or a last line without a line end was taken as a record (where it
    ends is not known)."""
    if ends.unended or not resumable(src):
        return None
    offset, lines = at if at is not None else (ends.offset, ends.lines)
    return Checkpoint(offset, lines, state)


def too_long(size: int) -> str:
    """The reason a line of ``size`` bytes is rejected."""
    return f"a line of {size:,} bytes, over the limit of {MAX_LINE_BYTES // MB} MB for one line"


def _is_utf8(raw: bytes) -> bool:
    try:
        raw.decode()
    except UnicodeDecodeError:
        return False
    return True
