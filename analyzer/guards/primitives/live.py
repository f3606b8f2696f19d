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
