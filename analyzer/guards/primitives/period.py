"""The period: how many times a cycle of ``period`` calls (A-B-A-B...) repeated. Trace:
``sql/guards/trace_period.sql``; live: ``PeriodTracker``."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, ClassVar

from analyzer.errors import ForensicsError
from analyzer.guards.primitives.base import Settings
from analyzer.guards.primitives.live import Seen, Step, Tracker
from analyzer.guards.primitives.run_length import RunLength


@dataclass(frozen=True)
class Period(RunLength):
    """How many times a cycle of ``period`` calls (A-B-A-B...) repeated, by ``key``."""

    name: ClassVar[str] = "period"
    defaults: ClassVar[dict[str, Any]] = {"key": None, "period": 2}
    always_listed: ClassVar[tuple[str, ...]] = ("period",)
    sweepable: ClassVar[tuple[str, ...]] = ("period",)

    def check(self, raw: dict[str, Any], where: str) -> None:
        super().check(raw, where)
        period = raw.get("period", 2)
        if not isinstance(period, int) or isinstance(period, bool) or period < 2:
            raise ForensicsError(f"{where}: 'period' is a whole number of calls, at least 2")

    def trace(self, p: Settings, carry: dict[str, str]) -> str:
        key, period = str(p.setting("key")), str(int(p.setting("period")))
        return self.traced(p, carry, "guards/trace_period.sql", key=key, period=period)

    def tracker(self, p: Settings) -> Tracker:
        return PeriodTracker(period=int(p.setting("period")))

    def describe(self, p: Settings, value: float) -> str:
        return f"a cycle of {p.setting('period')} calls repeated {value:g} times"


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
