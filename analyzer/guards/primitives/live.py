"""The primitives live: what a tracker is given and answers. Each primitive keeps its value
call by call, as the replay's trace computes it over the whole history (its module's tracker
beside its trace, ``sql/guards/trace_*.sql``).

A live guard (``analyzer.guards.guard.Guard``) keeps one ``Tracker`` per stream. It is given
each call the guard sees (its ``watch``), already evaluated (what the policy's expressions
say of it: ``Seen``), with the unit its scope lives in, and answers with the trace row the
replay would have (``Step``: the value after the call and before it) or None where the replay
traces nothing (a counter traces only the calls that count).

Each tracker says in its docstring which trace it follows; the rules are theirs, line by line,
so that a guard fed the calls one at a time trips where the backtest says.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol


@dataclass(frozen=True)
class Seen:
    """One call the guard sees: its unit (of the policy's scope, within the stream), its
    position, its time, and what the policy's expressions said of it (``count`` and
    ``reset`` never None; ``weight`` a number; ``key`` as SQL gave it)."""

    unit: int
    pos: int
    ts: datetime | None
    count: bool
    reset: bool
    weight: float
    key: Any


@dataclass(frozen=True)
class Step:
    """The guard's value after a call and before it (the trace's ``value`` and ``before``)."""

    value: float
    before: float


class Tracker(Protocol):
    def see(self, call: Seen) -> Step | None: ...


_EPOCH = datetime(1970, 1, 1)


def micros(ts: datetime) -> int:
    """A naive UTC time as whole microseconds since 1970 (exact, as DuckDB keeps it)."""
    return (ts - _EPOCH) // timedelta(microseconds=1)


# The periods a budget may live in (``PERIODS``), in UTC as the usage views count days by
# default: each call's period as a whole number (the replay's unit, sql/guards/periods.sql)
# and as the key the spend ledger files it under (``analyzer.guards.spend``).
_HOUR = timedelta(hours=1)
WINDOW = timedelta(hours=5)


@dataclass
class Periods:
    """Where each call falls in a period of ``scope`` (day, window or month), fed in time
    order: its unit and its key. A window is ccusage's 5-hour block (views/blocks.sql): it
    starts at the hour of its first call and holds the calls up to 5 hours after that; a later
    call, or one more than 5 hours after the call before it, starts the next."""

    scope: str
    start: datetime | None = None  # the current window's start (its first call's hour)
    last: datetime | None = None  # the latest call's time

    def place(self, ts: datetime) -> tuple[int, str]:
        """The period of a call at ``ts`` (naive UTC): its unit and its key."""
        if self.scope == "day":
            return (ts.date() - _EPOCH.date()).days, ts.strftime("%Y-%m-%d")
        if self.scope == "month":
            return ts.year * 12 + ts.month - 1, ts.strftime("%Y-%m")
        hour = ts.replace(minute=0, second=0, microsecond=0)
        if self.start is not None and ts < self.start:  # before a seeded window: its own hour
            return (hour - _EPOCH) // _HOUR, window_key(hour)
        if (
            self.start is None
            or self.last is None
            or ts > self.start + WINDOW
            or ts - self.last > WINDOW
        ):
            self.start = hour
        self.last = ts
        return (self.start - _EPOCH) // _HOUR, window_key(self.start)


def window_key(start: datetime) -> str:
    """A window's key: its start's hour (UTC), ``2026-11-29T14:00``."""
    return start.strftime("%Y-%m-%dT%H:00")
