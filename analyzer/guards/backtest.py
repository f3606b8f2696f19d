"""The backtest: replay every stream through guard policies and score them against incidents
(the replay and its scoring are ``analyzer.guards.replay``; the primitives
``analyzer.guards.primitives``).

Scoring rules (also in docs/guards.md):

* A stop ends its unit (the stream, session or turn of the policy's scope) after the call that
  tripped it: the unit's later calls are saved - their count and dollars.
* An incident is stopped when a stop falls, in a unit holding its calls, at or before its last
  call; latency is the number of its calls up to and including the trip; waste prevented is the
  cost of its wasted calls that come after the trip.
* A stop in a unit that holds no incident is a false trip; its saved dollars are legitimate work
  it would have killed.
* Nudges are reported apart: the history goes on after a nudge, so it is never assumed to work.
* The ground truth is the detectors' incidents of medium or high severity (``--labels`` can
  override it).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import asdict, dataclass, field, replace
from decimal import Decimal
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar

import orjson

from analyzer.engine import cache
from analyzer.engine.store import Store
from analyzer.errors import ForensicsError
from analyzer.guards.policy import Policy
from analyzer.guards.replay import Replay
from analyzer.guards.scoring import STOPPED_USD, USD_FIELDS, Result, Trip
from analyzer.model.records import JsonForm, json_record


def parse_sweep(text: str) -> tuple[str, str, list[float]]:
    """``NAME.PARAM=LO..HI[:STEP]`` as (policy, param, values).

    >>> parse_sweep("netclaw_cumulative_per_turn.stop=2..10:4")
    ('netclaw_cumulative_per_turn', 'stop', [2.0, 6.0, 10.0])
    """
    m = re.match(r"^([a-z][a-z0-9_]*)\.([a-z_]+)=([0-9.]+)\.\.([0-9.]+)(?::([0-9.]+))?$", text)
    if not m:
        raise ForensicsError(f"--sweep {text!r} is not NAME.PARAM=LO..HI[:STEP]")
    lo, hi = float(m.group(3)), float(m.group(4))
    step = float(m.group(5) or 1)
    if step <= 0 or hi < lo or (hi - lo) / step > 1000:
        raise ForensicsError(f"--sweep {text!r}: LO..HI with a positive STEP, at most 1000 values")
    values, x = [], lo
    while x <= hi + 1e-9:
        values.append(round(x, 10))
        x += step
    return m.group(1), m.group(2), values


def backtest(
    store: Store,
    policies: list[Policy],
    sweeps: dict[str, tuple[str, list[float]]] | None = None,
    labels: Path | None = None,
    stops: bool = True,
) -> list[Result]:
    """Replay the store through ``policies``; ``sweeps`` maps a policy to (param, values).
    Every result lists its nudges, and its stops too unless ``stops`` is false (a table of
    the figures needs none of them)."""
    sweeps = sweeps or {}
    results: list[Result] = []
    with Replay(store, labels, policies) as replay:
        for p in policies:
            results.extend(replay.run(p, sweeps.get(p.name), stops=stops))
    return results


def default_sweep(p: Policy) -> list[float]:
    """Thresholds around a policy's own, for the report's sweep chart."""
    stop = float(p.stop)
    if stop.is_integer():
        hi = max(int(stop) * 2, 6)
        step = max(1, -(-hi // 30))
        values = list(range(1, hi + 1, step))
        if int(stop) not in values:
            values = sorted({*values, int(stop)})
        return [float(v) for v in values]
    return [round(stop * k / 5, 4) for k in range(1, 11)]


@dataclass(frozen=True)
class Stop:
    """A guard that would have stopped an incident: how far into it (the guard's own events,
    seconds, and dollars of its waste spent first) and the waste it would have prevented."""

    policy: str
    description: str
    incident_id: str
    event_id: Any  # the event it is one of (incidents sharing wasted calls are one)
    latency_events: int
    latency_seconds: float
    latency_usd: Decimal
    waste_prevented_usd: Decimal

    def to_json(self) -> dict[str, Any]:
        return json_record(self)


@dataclass(frozen=True)
class Stopping:
    """The guards that would have stopped one incident (most waste prevented first, then the
    fewest of their events into it, then by name) and those that tripped on it too late to
    prevent anything (in the policies' order)."""

    stopped_by: list[Stop] = field(default_factory=list)
    tripped_only: list[str] = field(default_factory=list)


def stops_by_incident(results: list[Result]) -> dict[str, Stopping]:
    """Which guards would have stopped each incident, from the guard replay's ``results``:
    decided here once per replay (``GuardRun.by_incident``), and read as it is by the page,
    ``show`` and ``audit --json``."""
    stopped: dict[str, list[Stop]] = {}
    tripped: dict[str, list[str]] = {}
    for r in results:
        mine: dict[str, dict[str, Any]] = {}
        for s in r.stopped:
            mine.setdefault(s["incident_id"], s)
        for iid, s in mine.items():
            stopped.setdefault(iid, []).append(
                Stop(
                    r.policy,
                    r.description,
                    iid,
                    s["event_id"],
                    int(s["latency_events"]),
                    s["latency_seconds"],
                    s["latency_usd"],
                    s["waste_prevented_usd"],
                )
            )
        for t in r.trips:
            late = tripped.setdefault(t.incident_id, []) if t.incident_id else None
            if late is not None and t.incident_id not in mine and r.policy not in late:
                late.append(r.policy)

    def order(s: Stop) -> tuple[Decimal, int, str]:
        return (-s.waste_prevented_usd, s.latency_events, s.policy)

    return {
        iid: Stopping(sorted(stopped.get(iid, []), key=order), tripped.get(iid, []))
        for iid in {**stopped, **tripped}
    }


@dataclass
class GuardRun:
    """The backtest as the report and ``audit --json`` show it: every policy at its own
    thresholds, and swept over its stop threshold (the sweep's results carry the totals; only
    the policy's own threshold lists its trips)."""

    JSON_FORM: ClassVar[JsonForm] = JsonForm(omit=("key",))

    results: list[Result]
    sweeps: dict[str, list[Result]]
    key: str | None = None  # what it was computed from (analyzer.engine.cache), when known

    @cached_property
    def by_incident(self) -> dict[str, Stopping]:
        """The guards that would have stopped each incident (``stops_by_incident``), decided
        once for this replay."""
        return stops_by_incident(self.results)

    def stops(self, incident_id: str) -> Stopping:
        """The guards that would have stopped the incident ``incident_id`` (none: empty)."""
        return self.by_incident.get(incident_id) or Stopping()

    def trip_count(self) -> int:
        """The trips and nudges its results list (those of a policy's own threshold counted
        twice: in its result and in its sweep)."""
        every = [*self.results, *(r for v in self.sweeps.values() for r in v)]
        return sum(len(r.trips) + len(r.nudges) for r in every)

    def to_json(self) -> dict[str, Any]:
        """Its results and sweeps (what it was computed from is not part of it)."""
        return json_record(self)

    def variants(self) -> list[tuple[str, float, Result]]:
        """Every (policy, stop threshold) replayed, with its result: each policy's sweep and its
        own threshold where the sweep's grid missed it (what ``backtest --recommend`` weighs
        without ``--sweep``), the policies in their order, each by ascending threshold."""
        own = {r.policy: r for r in self.results}
        out: list[tuple[str, float, Result]] = []
        for name in dict.fromkeys([*self.sweeps, *own]):
            by_stop = {float(r.params["stop"]): r for r in self.sweeps.get(name, [])}
            if name in own:
                by_stop.setdefault(float(own[name].params["stop"]), own[name])
            out += [(name, stop, by_stop[stop]) for stop in sorted(by_stop)]
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> GuardRun:
        def result(d: dict[str, Any]) -> Result:
            return Result(
                **{
                    **d,
                    **{k: Decimal(str(d[k])) for k in USD_FIELDS},
                    "trips": [Trip(**t) for t in d["trips"]],
                    "nudges": [Trip(**t) for t in d["nudges"]],
                    "stopped": [
                        {**s, **{k: Decimal(str(s[k])) for k in STOPPED_USD}} for s in d["stopped"]
                    ],
                }
            )

        return cls(
            [result(r) for r in data["results"]],
            {k: [result(r) for r in v] for k, v in data["sweeps"].items()},
        )


# A replay listing more trips than this is not kept for reuse (``cache``): its JSON alone
# (about 300 bytes a trip) would take the process past its memory limit. It is replayed again.
CACHED_TRIPS_MAX = 100_000


def guard_run(
    store: Store, policies: list[Policy], labels: Path | None = None, reuse: bool = False
) -> GuardRun:
    """Every policy replayed at its own thresholds and swept over its stop threshold.

    With ``reuse``, the result kept from an earlier run over the same data, incidents, policies
    and labels is returned instead of replaying again (and a new result is kept)."""
    k = cache.key(
        store,
        "guards",
        [asdict(p) for p in policies],
        hashlib.sha256(labels.read_bytes()).hexdigest() if labels is not None else None,
    )
    if reuse:
        payload = cache.get(store, "guards", k)
        if payload is not None:
            return replace(GuardRun.from_json(orjson.loads(payload)), key=k)
    run = replace(_guard_run(store, policies, labels), key=k)
    if reuse and cache.keeps(store) and run.trip_count() <= CACHED_TRIPS_MAX:
        cache.put(store, "guards", k, orjson.dumps(run.to_json(), default=str).decode())
    return run


def _guard_run(store: Store, policies: list[Policy], labels: Path | None) -> GuardRun:
    results: list[Result] = []
    sweeps: dict[str, list[Result]] = {}
    # (closed at the end: the report comes next, and its queries get the memory back)
    with Replay(store, labels, policies) as replay:
        for p in policies:
            values = default_sweep(p)
            own_index = {i for i, v in enumerate(values) if v == float(p.stop)}
            swept = replay.run(p, ("stop", values), detail=own_index)
            sweeps[p.name] = swept
            # The policy at its own threshold is one of the swept variants (the same replay).
            own = [
                replace(r, params=p.params())
                for v, r in zip(values, swept, strict=True)
                if v == float(p.stop)
            ]
            results.extend(own[:1] or replay.run(p))
    return GuardRun(results, sweeps)
