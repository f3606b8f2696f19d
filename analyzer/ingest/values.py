"""Reading a value of a log as what it should be.

Logs are untrusted: any value may be of another JSON type than the format says (a number where
a string was, a list where an object was, a 1e30 token count). These read a value as what it
should be, or give None (or an empty container); they never raise. Every format reads its
records through them, JSON Lines or whole documents alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import orjson

_TIMES: dict[str, dict[str, datetime | None]] = {}  # naive_tz -> text -> parse_time(text)
_TIMES_MAX = 4096  # a cache emptied when it holds this many (a log repeats recent times)


def parse_time(value: object, naive_tz: str = "UTC") -> datetime | None:
    """An ISO-8601 string or epoch seconds (or milliseconds) as a naive UTC datetime.

    A string without a zone is read in ``naive_tz``. (A string read before is answered from a
    small cache: the lines of one call, and its tool results, repeat its time.)
    """
    if value.__class__ is str:
        cache = _TIMES.get(naive_tz)
        if cache is None:
            cache = _TIMES[naive_tz] = {}
        else:
            try:
                return cache[value]
            except KeyError:
                pass
        if len(cache) >= _TIMES_MAX:
            cache.clear()
        found = cache[value] = _parse_time(value, naive_tz)
        return found
    return _parse_time(value, naive_tz)


def _parse_time(value: object, naive_tz: str) -> datetime | None:
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
    if dt.tzinfo is UTC:  # "Z" or "+00:00", most logs: already UTC
        return dt.replace(tzinfo=None)
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


MAX_COUNT = 10**12  # a token or character count beyond this is a broken value, not a count


def as_int(value: object, limit: int = MAX_COUNT) -> int | None:
    """A count from a log: a non-negative whole number below ``limit``, else None."""
    if value.__class__ is int:  # the usual case, first
        return value if 0 <= value < limit else None
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, float):
        if not value.is_integer():
            return None
        value = int(value)
    if isinstance(value, int):
        return value if 0 <= value < limit else None
    return None


MAX_COST = 1e6  # a stated cost of a million dollars or more for one call or run is broken


def stated_cost(value: object) -> float | None:
    """A cost in USD a log states: a finite number above 0 and below ``MAX_COST``, else None.
    0 is not a price: it is what agents write when they could not price a call.

    >>> stated_cost(0.25), stated_cost(0), stated_cost(True), stated_cost(float("nan"))
    (0.25, None, None, None)
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if 0 < value < MAX_COST else None  # NaN and infinity fail both tests


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


LABEL_MAX_CHARS = 256  # a label's value longer than this is cut (labels are dimensions, not text)
LABELS_MAX = 64  # labels kept per call, the first by key


def labels_text(labels: Mapping[str, object]) -> str | None:
    """A call's labels (``calls.labels``) as JSON text: string keys to string values, keys
    sorted; a number is its digits, a boolean ``true``/``false``, a list or object its compact
    JSON; a value that is None or empty is left out; a value is cut at
    :data:`LABEL_MAX_CHARS`, and only the first :data:`LABELS_MAX` keys are kept. None when
    nothing is left.

    >>> labels_text({"team.id": "platform", "user.id": 7, "empty": "", "x": None})
    '{"team.id":"platform","user.id":"7"}'
    >>> labels_text({}) is None
    True
    """
    kept: dict[str, str] = {}
    for key in sorted(k for k in labels if isinstance(k, str) and k)[:LABELS_MAX]:
        value = _label_value(labels[key])
        if value:
            kept[key] = value[:LABEL_MAX_CHARS]
    return orjson.dumps(kept).decode() if kept else None


def _label_value(value: object) -> str | None:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | dict):
        try:
            return orjson.dumps(value).decode()
        except TypeError:
            return None
    return as_str(value)


def json_text(value: object) -> Any:
    """A value that may be JSON written as text (a CSV cell, a ClickHouse string column, an
    attribute holding a tool's arguments), parsed where it is a JSON object or array; any other
    value, and text that is not JSON, as it is.

    >>> json_text('{"a": 1}'), json_text("[x"), json_text(3)
    ({'a': 1}, '[x', 3)
    """
    if isinstance(value, str) and value[:1] in ("{", "["):
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            return value
    return value
