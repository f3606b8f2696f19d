"""The contract every guard primitive keeps (``analyzer.guards.primitives``, one module each):
a trace unit the replay runs, a tracker that keeps the same value live, its value in words for
a trip's reason, and its policies in the live-against-replay property (tests/guard_strategies.py),
so that no primitive reaches a live guard without all four."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

from analyzer.errors import ForensicsError
from analyzer.guards.guard import Call, Guard
from analyzer.guards.policy import parse_policy
from analyzer.guards.primitives import PRIMITIVES, Primitive
from analyzer.guards.primitives.live import Seen, Step
from analyzer.guards.replay import Replay
from tests.guard_strategies import SMALLEST, STRATEGIES
from tests.test_guards import make_store

FORMS = [(name, raw) for name in sorted(PRIMITIVES) for raw in SMALLEST.get(name, [])]


def test_every_primitive_has_its_policies_in_the_property_and_a_smallest_policy() -> None:
    assert set(STRATEGIES) == set(PRIMITIVES)
    assert set(SMALLEST) == set(PRIMITIVES)
    assert all(STRATEGIES[name] and SMALLEST[name] for name in PRIMITIVES)


def test_every_primitive_is_its_own_module() -> None:
    for name, prim in PRIMITIVES.items():
        assert isinstance(prim, Primitive) and prim.name == name
        module = type(prim).__module__
        assert module.startswith("analyzer.guards.primitives."), module
        for method in ("trace", "tracker", "describe"):  # none left to the base's default
            assert getattr(type(prim), method) is not getattr(Primitive, method), (name, method)


@pytest.mark.parametrize(("name", "raw"), FORMS, ids=[f"{n}:{sorted(r)}" for n, r in FORMS])
def test_each_primitive_traces_tracks_and_says_its_value(name: str, raw: dict[str, Any]) -> None:
    p = parse_policy("smallest", {**raw, "stop": 2}, "test")
    assert p.primitive is PRIMITIVES[name]
    # the trace: one query from its unit, every slot filled (the replay runs it: below)
    sql = p.primitive.trace(p, {})
    assert "SELECT" in sql and "{{" not in sql
    # the tracker: a value after each call it sees, starting from nothing
    tracker = p.primitive.tracker(p)
    seen = Seen(1, 1, datetime(2026, 1, 1), True, False, 1.0, "k")
    step = tracker.see(seen)
    assert step is None or (isinstance(step, Step) and step.before == 0.0 and step.value >= 0)
    # the words
    said = p.primitive.describe(p, 3.0)
    assert said and "3" in said


@pytest.mark.parametrize(("name", "raw"), FORMS, ids=[f"{n}:{sorted(r)}" for n, r in FORMS])
def test_each_primitive_trips_live_where_the_replay_does_and_says_why(
    name: str, raw: dict[str, Any]
) -> None:
    """Eight calls of the same tool, a second apart, $1 and 100 output tokens each (a history
    every primitive's smallest policy trips on at 2): the live guard's trips are the replay's,
    and its reason is the primitive's words."""
    p = parse_policy("smallest", {**raw, "stop": 2}, "test")
    calls = [
        {
            "response_kind": "tool_call",
            "tool": "read",
            "cost_usd": 1.0,
            "output_tokens": 100,
            "t": i,
        }
        for i in range(8)
    ]
    with make_store(calls) as store, Replay(store, None, None) as replay:
        events, want = replay.events(), replay.trips(p)
    guard = Guard(p)
    for e in events:
        guard.feed(Call.from_event(e))
    guard.finish()
    assert sorted((d.call_id, d.action) for d in guard.trips) == sorted(want)
    assert want, f"{name}: the history trips nothing"
    stop = next(d for d in guard.trips if d.action == "stop")
    assert stop.reason.startswith(f"smallest: {p.primitive.describe(p, stop.value)}; stop at")


def test_a_policy_of_no_primitive_never_reaches_a_guard() -> None:
    with pytest.raises(ForensicsError, match="type must be one of"):
        parse_policy("odd", {"type": "bucket", "count": "true", "stop": 1}, "test")
