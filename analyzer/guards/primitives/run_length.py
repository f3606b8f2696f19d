"""The run length: how many calls in a row had the same key. Trace:
``sql/guards/trace_run_length.sql``; live: ``RunLengthTracker``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from analyzer.guards.primitives.base import Primitive, Settings
from analyzer.guards.primitives.live import Seen, Step, Tracker


@dataclass(frozen=True)
class RunLength(Primitive):
    """How many calls in a row had the same ``key`` (a NULL key is no run)."""

    name: ClassVar[str] = "run_length"
    defaults: ClassVar[dict[str, Any]] = {"key": None}
    expressions: ClassVar[tuple[str, ...]] = ("key",)

    required: ClassVar[dict[str, str]] = {"key": "what must repeat"}

    def trace(self, p: Settings, carry: dict[str, str]) -> str:
        return self.traced(p, carry, "guards/trace_run_length.sql", key=str(p.setting("key")))

    def unit_steps(self, p: Settings) -> bool:
        return True

    def tracker(self, p: Settings) -> Tracker:
        return RunLengthTracker()

    def describe(self, p: Settings, value: float) -> str:
        return f"{value:g} calls in a row with the same {p.setting('key')}"


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
