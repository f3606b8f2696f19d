"""The window: how many of the last ``size`` calls, or of the calls of the last ``seconds``,
matched. Trace: ``sql/guards/trace_window_size.sql`` and ``trace_window_seconds.sql``; live:
``WindowSizeTracker`` and ``WindowSecondsTracker``."""

from __future__ import annotations

import bisect
from collections import deque
from dataclasses import dataclass, field
from typing import Any, ClassVar

from analyzer.errors import ForensicsError
from analyzer.guards.primitives.base import Primitive, Settings, as_bool
from analyzer.guards.primitives.live import Seen, Step, Tracker, micros


@dataclass(frozen=True)
class Window(Primitive):
    """How many of the last ``size`` calls (or the calls of the last ``seconds``) matched
    ``count``."""

    name: ClassVar[str] = "window"
    defaults: ClassVar[dict[str, Any]] = {"count": None, "size": None, "seconds": None}
    sweepable: ClassVar[tuple[str, ...]] = ("size", "seconds")
    expressions: ClassVar[tuple[str, ...]] = ("count",)

    required: ClassVar[dict[str, str]] = {"count": "what it counts"}

    def check(self, raw: dict[str, Any], where: str) -> None:
        super().check(raw, where)
        if ("size" in raw) == ("seconds" in raw):
            raise ForensicsError(f"{where}: a window needs one of 'size' (calls) or 'seconds'")

    def trace(self, p: Settings, carry: dict[str, str]) -> str:
        count = as_bool(p.setting("count"), "true")
        size = p.setting("size")
        if size is not None:
            return self.traced(
                p, carry, "guards/trace_window_size.sql", count=count, size=str(int(size))
            )
        seconds = str(float(p.setting("seconds") or 0))
        return self.traced(
            p, carry, "guards/trace_window_seconds.sql", count=count, seconds=seconds
        )

    def unit_steps(self, p: Settings) -> bool:
        # A window of seconds can jump where the calls' clock runs backwards.
        return p.setting("size") is not None

    def tracker(self, p: Settings) -> Tracker:
        if p.setting("size") is not None:
            return WindowSizeTracker(size=int(p.setting("size")))
        return WindowSecondsTracker(seconds=float(p.setting("seconds") or 0))

    def describe(self, p: Settings, value: float) -> str:
        return f"{value:g} calls matched {p.setting('count')} in its window"


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
