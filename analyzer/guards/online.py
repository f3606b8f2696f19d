"""The primitives live: each one's value kept call by call, as the replay's traces compute it
over the whole history (``analyzer.guards.primitives``, ``sql/guards/trace_*.sql``).

A live guard (``analyzer.guards.guard.Guard``) keeps one ``Tracker`` per stream. It is given
each call the guard sees (its ``watch``), already evaluated (what the policy's expressions
say of it: ``Seen``), with the unit its scope lives in, and answers with the trace row the
replay would have (``Step``: the value after the call and before it) or None where the replay
traces nothing (a counter traces only the calls that count).

Each tracker says in its docstring which trace it follows; the rules are theirs, line by line,
so that a guard fed the calls one at a time trips where the backtest says.
"""

from __future__ import annotations

import bisect
from collections import deque
from dataclasses import dataclass, field
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


@dataclass
class CounterTracker:
    """trace_counter.sql and trace_counter_weighted.sql: in each unit, a call that resets sets
    the value to 0 (and does not count itself); a call that counts adds its weight (1 for a
    counter by one) and is traced."""

    by_one: bool
    unit: int | None = None
    value: float = 0.0

    def see(self, call: Seen) -> Step | None:
        if call.unit != self.unit:
            self.unit, self.value = call.unit, 0.0
        if call.reset:
            self.value = 0.0
            return None
        if not call.count:
            return None
        weight = 1.0 if self.by_one else call.weight
        self.value += weight
        return Step(self.value, self.value - weight)


@dataclass
class RunLengthTracker:
    """trace_run_length.sql: how many calls in a row had the same key; a NULL key is no run
    (its value is 0, and the next call starts afresh)."""

    unit: int | None = None
    key: Any = None
    run: int = 0
    value: float = 0.0

    def see(self, call: Seen) -> Step | None:
        fresh = call.unit != self.unit
        same = not fresh and call.key is not None and self.key is not None and call.key == self.key
        self.run = self.run + 1 if same else 1
        before = 0.0 if fresh else self.value
        self.unit, self.key = call.unit, call.key
        self.value = 0.0 if call.key is None else float(self.run)
        return Step(self.value, before)


@dataclass
class PeriodTracker:
    """trace_period.sql: a call repeats the cycle when the call ``period`` seen calls back is
    of its unit and had its key; its value is how many whole cycles the repeats since the last
    call that did not repeat make."""

    period: int
    back: deque[tuple[int, Any]] = field(default_factory=deque)
    idx: int = 0
    last_miss: int = 0
    unit: int | None = None
    value: float = 0.0

    def see(self, call: Seen) -> Step | None:
        self.idx += 1
        fresh = call.unit != self.unit
        hit = False
        if len(self.back) == self.period:
            unit, key = self.back[0]
            hit = unit == call.unit and key is not None and call.key is not None
            hit = hit and key == call.key
        self.back.append((call.unit, call.key))
        if len(self.back) > self.period:
            self.back.popleft()
        before = 0.0 if fresh else self.value
        if not hit:
            self.last_miss = self.idx
        self.unit = call.unit
        self.value = float((self.idx - self.last_miss + self.period) // self.period) if hit else 0.0
        return Step(self.value, before)


@dataclass
class WindowSizeTracker:
    """trace_window_size.sql: how many of the unit's last ``size`` seen calls counted."""

    size: int
    hits: deque[bool] = field(default_factory=deque)
    unit: int | None = None
    value: float = 0.0

    def see(self, call: Seen) -> Step | None:
        fresh = call.unit != self.unit
        if fresh:
            self.hits.clear()
        self.hits.append(call.count)
        if len(self.hits) > self.size:
            self.hits.popleft()
        before = 0.0 if fresh else self.value
        self.unit = call.unit
        self.value = float(sum(self.hits))
        return Step(self.value, before)


@dataclass
class WindowSecondsTracker:
    """trace_window_seconds.sql: how many of the unit's calls so far with a time in the last
    ``seconds`` before this call's (its own included) counted; a call without a time is not
    traced, and its value before is the unit's previous traced call's. The calls of the same
    instant seen before it count; those after it cannot be seen by a live guard, and the
    replay leaves them out too."""

    seconds: float
    hit_times: list[int] = field(default_factory=list)  # of the calls that counted, in µs, sorted
    unit: int | None = None
    value: float = 0.0

    def see(self, call: Seen) -> Step | None:
        if call.unit != self.unit:
            self.unit, self.value, self.hit_times = call.unit, 0.0, []
        if call.ts is None:
            return None
        now = micros(call.ts)
        if call.count:
            bisect.insort(self.hit_times, now)
        earliest = now - round(self.seconds * 1_000_000)
        before = self.value
        later = bisect.bisect_right(self.hit_times, now)
        self.value = float(later - bisect.bisect_left(self.hit_times, earliest))
        return Step(self.value, before)


_EPOCH = datetime(1970, 1, 1)


def micros(ts: datetime) -> int:
    """A naive UTC time as whole microseconds since 1970 (exact, as DuckDB keeps it)."""
    return (ts - _EPOCH) // timedelta(microseconds=1)
