"""Time: the window a command looks at (``--since`` / ``--until``) and the zone it shows times
in (``--tz``). Stored times are naive UTC; a user writes times in their own zone."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from analyzer.errors import ForensicsError

_RELATIVE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(m|min|h|hr|d|day|days|w|wk|weeks?)\s*$", re.I)
_UNITS = {
    "m": 60,
    "min": 60,
    "h": 3600,
    "hr": 3600,
    "d": 86400,
    "day": 86400,
    "days": 86400,
    "w": 604800,
    "wk": 604800,
    "week": 604800,
    "weeks": 604800,
}


def zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ForensicsError(
            f"unknown time zone {name!r} (use an IANA name such as UTC or Europe/Berlin)"
        ) from exc


def to_utc(local: datetime, tz: str) -> datetime:
    """A naive time read in ``tz`` (or an aware one), as naive UTC."""
    if local.tzinfo is None:
        local = local.replace(tzinfo=zone(tz))
    return local.astimezone(UTC).replace(tzinfo=None)


def local(ts: datetime, tz: str) -> datetime:
    """A stored (naive UTC) time in ``tz``, naive."""
    return ts.replace(tzinfo=UTC).astimezone(zone(tz)).replace(tzinfo=None)


def parse_when(
    text: str, tz: str = "UTC", now: datetime | None = None, end: bool = False
) -> datetime:
    """A ``--since`` / ``--until`` value as naive UTC: relative (``7d``, ``24h``, ``2w``: that
    long before now), a date (its midnight in ``tz``; for an ``end``, the next midnight, so the
    whole day is in), or a date-time (in ``tz`` unless it names its zone).

    >>> now = datetime(2025, 12, 20, 12, 0)
    >>> parse_when("7d", now=now), parse_when("2025-12-13"), parse_when("2025-12-13", end=True)
    (datetime.datetime(2025, 12, 13, 12, 0), datetime.datetime(2025, 12, 13, 0, 0), \
datetime.datetime(2025, 12, 14, 0, 0))
    >>> parse_when("2025-12-13 08:00", tz="Europe/Berlin")
    datetime.datetime(2025, 12, 13, 7, 0)
    """
    m = _RELATIVE.match(text)
    if m:
        seconds = float(m.group(1)) * _UNITS[m.group(2).lower()]
        return (now or datetime.now(UTC).replace(tzinfo=None)) - timedelta(seconds=seconds)
    text = text.strip()
    try:
        day = date.fromisoformat(text)
    except ValueError:
        pass
    else:
        midnight = datetime(day.year, day.month, day.day)
        return to_utc(midnight + timedelta(days=1) if end else midnight, tz)
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ForensicsError(
            f"{text!r} is not a time: a date (2025-12-13), a date-time (2025-12-13 06:00) or "
            "a span back from now (7d, 24h, 30m, 2w)"
        ) from None
    return to_utc(when, tz)


@dataclass(frozen=True)
class Window:
    """The calls a command looks at: from ``since`` (included) to ``until`` (excluded)."""

    since: datetime | None = None
    until: datetime | None = None

    def __bool__(self) -> bool:
        return self.since is not None or self.until is not None

    def predicate(self, column: str = "ts") -> str:
        """The SQL condition on ``column`` that the window's times meet (``true``: all)."""
        parts = []
        if self.since is not None:
            parts.append(f"{column} >= TIMESTAMP '{self.since.isoformat(sep=' ')}'")
        if self.until is not None:
            parts.append(f"{column} < TIMESTAMP '{self.until.isoformat(sep=' ')}'")
        return " AND ".join(parts) or "true"

    def key(self) -> str:
        return f"{self.since}|{self.until}"

    def describe(self, tz: str = "UTC") -> str:
        def show(ts: datetime) -> str:
            return f"{local(ts, tz):%Y-%m-%d %H:%M}"

        if self.since and self.until:
            return f"from {show(self.since)} to {show(self.until)} {tz}"
        if self.since:
            return f"since {show(self.since)} {tz}"
        if self.until:
            return f"until {show(self.until)} {tz}"
        return "all time"
