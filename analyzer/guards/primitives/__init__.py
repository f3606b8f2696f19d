"""The guard primitives, one module each: its settings and their validation, its trace (the
replay's value after every call, in SQL), its tracker (the same value kept live, call by call)
and its value in words (a trip's reason).

A guard sees the calls of a unit (a stream, a session or a turn) one at a time, and keeps one
value; a threshold on that value nudges or stops. A primitive says what the value is: its
*trace* is one set-based query giving the value after every call where it can reach a new
high (the replay reads every threshold off it, see ``analyzer.guards.backtest``); its
*tracker* keeps that value for a live guard (``analyzer.guards.guard``).

Adding a primitive is adding a module here (a ``Primitive`` with its settings, ``check``,
``trace``, ``tracker`` and ``describe``; its trace unit in ``sql/guards/``) and listing it in
``PRIMITIVES``; policies name it by ``type``. ``tests/test_primitives.py`` holds every
primitive to that, and the live-against-replay property (``tests/test_guard_live.py``) takes
a strategy for each from ``tests/guard_strategies.py``.
"""

from __future__ import annotations

from analyzer.guards.primitives.base import (
    EVENT_COLUMNS,
    PERIODS,
    UNIT,
    Primitive,
    Settings,
    seen_sql,
    unit_sql,
)
from analyzer.guards.primitives.counter import Budget, Counter
from analyzer.guards.primitives.period import Period
from analyzer.guards.primitives.run_length import RunLength
from analyzer.guards.primitives.window import Window

PRIMITIVES: dict[str, Primitive] = {
    prim.name: prim for prim in (Counter(), Budget(), RunLength(), Period(), Window())
}

__all__ = [
    "EVENT_COLUMNS",
    "PERIODS",
    "PRIMITIVES",
    "UNIT",
    "Primitive",
    "Settings",
    "seen_sql",
    "unit_sql",
]
