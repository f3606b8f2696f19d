"""Reading JSON Lines one line at a time (plain or gzip), for the agent-log formats."""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import orjson

from analyzer.errors import DamagedGzipError
from analyzer.ingest.base import Head, SourceFile, open_binary, utf8_lines
from analyzer.ingest.records import Lowering


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

    Every line is counted as read; blank lines are skipped; a line that is not a JSON object is
    rejected with its number (a cut-off last line, as in a log still being written, says so).
    Damaged gzip data is an error for the whole file.
    """
    lineno = 0
    try:
        with open_binary(src) as fh:
            for lineno, raw in enumerate(utf8_lines(fh, src.head.encoding), 1):
                low.read()
                if lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):
                    raw = raw[3:]
                if not raw.strip():
                    low.skip("blank")
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


def _is_utf8(raw: bytes) -> bool:
    try:
        raw.decode()
    except UnicodeDecodeError:
        return False
    return True


def parse_time(value: object, naive_tz: str = "UTC") -> datetime | None:
    """An ISO-8601 string or epoch seconds (or milliseconds) as a naive UTC datetime.

    A string without a zone is read in ``naive_tz``.
    """
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        seconds = value / 1000 if value > 1e11 else value
        try:
            return datetime.fromtimestamp(seconds, UTC).replace(tzinfo=None)
        except (OverflowError, OSError, ValueError):
            return None
    if not isinstance(value, str) or not value:
        return None
    try:
        dt = datetime.fromisoformat(value)
    except ValueError:
        return None
    if dt.tzinfo is None:
        if naive_tz.upper() == "UTC":
            return dt
        from zoneinfo import ZoneInfo

        try:
            dt = dt.replace(tzinfo=ZoneInfo(naive_tz))
        except Exception:  # an unknown zone was refused at the command line already
            return dt
    try:
        return dt.astimezone(UTC).replace(tzinfo=None)
    except (OverflowError, ValueError):  # at the edge of the calendar (year 1 or 9999)
        return None


# Logs are untrusted: any value may be of another JSON type than the format says (a number
# where a string was, a list where an object was). These read a value as what it should be, or
# give None (or an empty container), never raise.
MAX_COUNT = 10**12  # a token or character count beyond this is a broken value, not a count


def as_int(value: object, limit: int = MAX_COUNT) -> int | None:
    """A count from a log: a non-negative whole number below ``limit``, else None."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, float):
        if not value.is_integer():
            return None
        value = int(value)
    if isinstance(value, int):
        return value if 0 <= value < limit else None
    return None


def as_status(value: object) -> int | None:
    """An HTTP status (a whole number below 1000), else None."""
    return as_int(value, limit=1000)


def as_str(value: object) -> str | None:
    """A name or id: a string as it is, a number as its digits; anything else is None."""
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return None


def as_text(value: object) -> str:
    """Text to measure: a string, else empty."""
    return value if isinstance(value, str) else ""


def as_dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def as_list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def kind_of(obj: dict[str, Any], key: str = "type") -> str | None:
    """A record's kind (its ``type``), only if it is a string."""
    value = obj.get(key)
    return value if isinstance(value, str) else None
