"""The counter and the budget: a value that adds up what counts, reset by what resets (a
budget never resets, and adds cost by default). Trace: ``sql/guards/trace_counter.sql`` (by
one) and ``trace_counter_weighted.sql``; live: ``CounterTracker``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from analyzer.errors import ForensicsError
from analyzer.guards.primitives.base import PERIODS, Primitive, Settings, as_bool
from analyzer.guards.primitives.live import Seen, Step, Tracker


@dataclass(frozen=True)
class Counter(Primitive):
    """Adds ``weight`` for each call matching ``count``; a call matching ``reset`` sets it to 0
    (and does not count itself)."""

    name: ClassVar[str] = "counter"
    defaults: ClassVar[dict[str, Any]] = {"count": None, "reset": None, "weight": "1"}
    always_listed: ClassVar[tuple[str, ...]] = ("weight",)
    expressions: ClassVar[tuple[str, ...]] = ("count", "reset", "weight")

    required: ClassVar[dict[str, str]] = {"count": "what it counts"}

    def trace(self, p: Settings, carry: dict[str, str]) -> str:
        # A counter's value only rises at the calls that count, so only those are traced: each
        # counts from the unit's last reset before it. Counting by one, a running count over
        # the replay (no sort); any other weight sums in the unit's own order.
        names = {
            "count": as_bool(p.setting("count"), "true"),
            "reset": as_bool(p.setting("reset"), "false"),
        }
        # In a period (a day, a window, a month: every stream's calls), it sums in time order
        # (``ord``, which the replay carries for a period).
        period = p.scope in PERIODS
        if self.unit_steps(p) and not period:
            return self.traced(p, carry, "guards/trace_counter.sql", **names)
        segment = "max(CASE WHEN rst THEN pos END) OVER r" if p.setting("reset") else None
        return self.traced(
            p,
            carry,
            "guards/trace_counter_weighted.sql",
            **names,
            weight=str(p.setting("weight")),
            segment=segment or "NULL::BIGINT",
            order="ord" if period else "pos",
        )

    def unit_steps(self, p: Settings) -> bool:
        return str(p.setting("weight")).strip() == "1"

    def tracker(self, p: Settings) -> Tracker:
        return CounterTracker(by_one=self.unit_steps(p))

    def describe(self, p: Settings, value: float) -> str:
        if not self.unit_steps(p):
            return f"{value:g} counted by {p.setting('weight')} ({p.setting('count')})"
        return f"{value:g} calls counted ({p.setting('count')})"


@dataclass(frozen=True)
class Budget(Counter):
    """A counter that never resets, weighted by cost unless told otherwise."""

    name: ClassVar[str] = "budget"
    defaults: ClassVar[dict[str, Any]] = {"count": "true", "reset": None, "weight": "cost_usd"}

    required: ClassVar[dict[str, str]] = {}

    def check(self, raw: dict[str, Any], where: str) -> None:
        super().check(raw, where)
        scope = raw.get("scope")
        if scope in PERIODS and raw.get("reset"):
            raise ForensicsError(f"{where}: a budget over a {scope} never resets ('reset')")

    def level(self, p: Settings, level: float) -> str:
        if str(p.setting("weight")) == "cost_usd":
            return f"${level:,.2f}"
        return super().level(p, level)

    def describe(self, p: Settings, value: float) -> str:
        if str(p.setting("weight")) == "cost_usd":
            return f"${value:,.2f} spent{_IN[p.scope]} (cap ${p.stop:,.2f})"
        return f"{value:g} spent{_IN[p.scope]} ({p.setting('weight')})"


# Where a budget's value was spent, in words (its scope).
_IN = {
    "stream": " in this stream",
    "session": " in this session",
    "turn": " in this turn",
    "day": " today",
    "window": " in this 5-hour window",
    "month": " this month",
}


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
