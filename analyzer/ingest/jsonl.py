"""Reading JSON Lines one line at a time (plain or gzip), for the agent-log formats."""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Iterator
from typing import Any

import orjson

from analyzer.console import warn
from analyzer.errors import DamagedGzipError
from analyzer.ingest.base import Head, SourceFile
from analyzer.ingest.lowering import Lowering
from analyzer.ingest.reading import MAX_LINE_BYTES, MB, open_binary, text_lines


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


def json_lines(src: SourceFile, low: Lowering) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each line that holds a JSON object.

    Every line that is not blank is a record, counted as read; blank lines (whitespace only,
    however long) are not records, though they count in line numbers. A line that is not a
    JSON object, or longer than :data:`MAX_LINE_BYTES`, is rejected with its number (a
    cut-off last line, as in a log still being written, says so). Damaged gzip data is an
    error for the whole file.
    """
    records = 0
    try:
        with open_binary(src) as fh:
            for lineno, raw, size in text_lines(fh, src.head.encoding):
                records += 1
                if size > MAX_LINE_BYTES:
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
                if not isinstance(obj, dict):
                    low.reject(lineno, "a JSON line that is not an object", raw)
                    continue
                yield lineno, obj
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise DamagedGzipError(f"damaged gzip data ({exc})", src.display) from exc
    finally:
        low.read(records)  # every record counted as read (once, not a call per line)


def too_long(size: int) -> str:
    """The reason a line of ``size`` bytes is rejected."""
    return f"a line of {size:,} bytes, over the limit of {MAX_LINE_BYTES // MB} MB for one line"


def _is_utf8(raw: bytes) -> bool:
    try:
        raw.decode()
    except UnicodeDecodeError:
        return False
    return True
