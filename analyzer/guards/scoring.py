"""Scoring a guard's trips against the ground truth: what it prevented, what it cost.

Read the replay's tables (``analyzer.guards.replay``): the trips of every variant
(``lf_trips``), the guard's trace (``lf_trace``), the events and the truth. The rules (also in
docs/guards.md):

* A stop ends its *reach* unit (the turn, session or stream the policy says) after the tripping
  call, and the sub-agent runs of that session the unit would still have started: their calls
  are *saved*. Waste after the trip but outside what the stop ends is not prevented.
* An incident of the guard's target class is *stopped* when a stop kills some of its wasted
  calls (so the trip came before its last call and prevented waste); incidents that share
  wasted calls are one event and count once; `info` pointers are not targets.
* *Harm*: a stop that prevents no incident waste and falls on no wasted call is a *false
  trip*, and everything it kills was legitimate work; a true stop also kills the productive
  calls of its unit that were not waste (*work killed*); and a guard that fails on its
  tripping call (``on_trip = "fail"``) loses that call's output when it was productive.
  ``net = prevented - harm``.
* A guard is *blind* where the data lacks its signal (``blindness.blind_sql``): its trips
  there are not scored, and blind units are left out of the false-trip rate. Where it lives in
  turns and the calls have none (a bill), it counted per session: said beside its figures.
* Latency is counted in the guard's own events (the calls it counted or saw, from the
  incident's start to the trip), and in seconds and dollars of waste spent before the stop.
* Nudges are listed apart: the history goes on after a nudge, so it is never assumed to work.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from analyzer.engine.store import Store
from analyzer.guards.blindness import blind_sql
from analyzer.guards.policy import Policy
from analyzer.guards.primitives import PERIODS, UNIT
from analyzer.model.formatting import iso
from analyzer.model.records import json_record


@dataclass
class Trip:
    stream_key: str
    session_id: str | None
    call_id: str
    ts: str | None
    action: str
    incident_id: str | None


# A result's dollars (``Decimal``, exact: a stored replay's JSON gives them back as text).
USD_FIELDS = (
    "waste_prevented_usd",
    "usd_saved",
    "usd_false_trips",
    "waste_total_usd",
    "waste_missed_usd",
    "usd_work_killed",
    "usd_lost_output",
    "harm_usd",
    "net_usd",
)
STOPPED_USD = ("latency_usd", "waste_prevented_usd")  # the dollars of each of its ``stopped``


@dataclass
class Result:
    policy: str
    params: dict[str, Any]
    description: str
    incidents_total: int  # target events the guard was judged on (not blind)
    incidents_stopped: int
    waste_prevented_usd: Decimal
    calls_saved: int
    usd_saved: Decimal
    false_trips: int
    usd_false_trips: Decimal  # what the false trips killed, their own lost outputs included
    median_latency_events: float | None
    targets: list[str] | None = None
    incidents_missed: int = 0
    waste_total_usd: Decimal = Decimal(0)
    waste_missed_usd: Decimal = Decimal(0)
    # productive calls killed by true stops (and lost outputs)
    usd_work_killed: Decimal = Decimal(0)
    usd_lost_output: Decimal = Decimal(0)  # tripping calls' own productive output lost ("fail")
    harm_usd: Decimal = Decimal(0)
    net_usd: Decimal = Decimal(0)
    headroom: float | None = None  # the highest value reached on healthy units
    blind_calls: int = 0  # calls where the data lacks the guard's signal (blindness.py)
    calls_total: int = 0
    # Calls without a turn that a policy living in turns counted per session, and what that
    # means for its figures (None when there are none): every view says it from here.
    per_session_calls: int = 0
    per_session: str | None = None
    trips_blind: int = 0
    healthy_units: int = 0  # units of its reach, seen, holding no incident
    false_trip_rate: float | None = None
    trips: list[Trip] = field(default_factory=list)
    nudges: list[Trip] = field(default_factory=list)
    stopped: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """Every field, in order: its trips and nudges as records, its stops copied."""
        return json_record(self)


_TEN = Decimal("1e-10")


def _f(x: Any) -> float:
    return round(float(x or 0), 10)


def _usd(x: Any) -> Decimal:
    """Dollars as the store keeps them: exact, to 10 places."""
    return (x if isinstance(x, Decimal) else Decimal(str(x or 0))).quantize(_TEN)


@dataclass(frozen=True)
class _Guard:
    """What the scoring units are given for one policy's variants (they differ in thresholds
    only, never in their signal): its reach and the reach's unit column, where it is blind,
    whether a trip fails its call, and which incidents it targets."""

    reach: str
    unit: str
    blind: str
    fail: str
    target: str
    params: dict[str, Any]

    @classmethod
    def of(cls, p: Policy) -> _Guard:
        return cls(
            reach=p.reaches,
            unit=UNIT[p.reaches],
            blind=blind_sql(p),
            fail="true" if p.on_trip == "fail" else "false",
            target=(
                "(t.detector IS NULL OR list_contains($targets, t.detector))"
                if p.targets
                else "true"
            ),
            params={"targets": list(p.targets or [])},
        )


@dataclass
class _Figures:
    """Every variant's figures, as the scoring units give them (by variant number)."""

    saved: dict[int, tuple[Any, ...]]  # calls and dollars saved, false trips, harm (saved.sql)
    blind_trips: dict[int, int]
    stopped: dict[int, list[tuple[Any, ...]]]  # the incidents stopped (stopped.sql)
    prevented: dict[int, Any]
    events: int  # target events judged on
    waste_total: Any
    headroom: dict[int, Any]
    totals: tuple[Any, ...]  # blind calls, calls, healthy units (totals.sql)
    trips: dict[int, list[tuple[Any, ...]]]  # the trips listed (trips.sql)


def _by_variant(rows: list[tuple[Any, ...]]) -> dict[int, list[tuple[Any, ...]]]:
    out: dict[int, list[tuple[Any, ...]]] = {}
    for r in rows:
        out.setdefault(r[0], []).append(r)
    return out


def _settle_stops(store: Store, g: _Guard, p: Policy) -> None:
    """``lf_stops`` and ``lf_stop_children`` (score_stops.sql), the moot stops deleted. A stop
    in a period ends the rest of the period, every stream's calls in it (its sub-agent runs'
    calls among them, and none after it): it ends no child run of its own."""
    period = g.reach in PERIODS
    in_reach = "c.first_ts <= s.unit_end_ts" if g.reach == "turn" else "true"
    store.engine.run(
        "guards/score_stops.sql",
        unit=g.unit,
        reach=g.reach,
        blind=blind_sql(p, "e."),
        in_reach="false" if period else in_reach,
        **_places(g.reach),
    )


def _places(reach: str) -> dict[str, str]:
    """How score_stops.sql reads a call's place in its reach unit: in a stream's order, or in
    a period's, time order across streams (``tpos``, ``tusd``: periods.sql)."""
    if reach in PERIODS:
        join = "JOIN lf_events se ON se.u_stream = t.u_stream AND se.pos = t.pos"
        return {
            "pos": "tpos",
            "at": "e.tpos",
            "through": "tusd",
            "rw_join": join,
            "rw_at": "se.tpos",
        }
    return {"pos": "pos", "at": "t.pos", "through": "usd_through", "rw_join": "", "rw_at": "t.pos"}


def _figures(
    store: Store,
    g: _Guard,
    p: Policy,
    listed: list[int],
    actions: list[str],
    memo: dict[tuple[str, str], tuple[Any, ...]] | None,
) -> _Figures:
    """Read every variant's figures off the stops (``lf_killed`` made on the way)."""
    engine = store.engine
    saved = {r[0]: r[1:] for r in engine.rows("guards/score_saved.sql", fail=g.fail)}
    blind_trips = dict(
        engine.rows("SELECT variant, count(*) FROM lf_stops WHERE blind GROUP BY variant")
    )
    engine.run(
        "guards/score_killed.sql",
        g.params,
        unit=g.unit,
        target=g.target,
        pos="tpos" if g.reach in PERIODS else "pos",
    )
    stopped = engine.rows("guards/score_stopped.sql")
    prevented = dict(engine.rows("guards/score_prevented.sql"))
    events, waste_total = engine.rows(
        "guards/score_judged.sql", g.params, target=g.target, blind=blind_sql(p, "tc.")
    )[0]
    headroom = dict(engine.rows("guards/score_headroom.sql", unit=g.unit))
    totals = (memo or {}).get((g.blind, g.unit))
    if totals is None:
        totals = engine.rows("guards/score_totals.sql", blind=g.blind, unit=g.unit)[0]
        if memo is not None:
            memo[(g.blind, g.unit)] = totals
    trips = engine.rows(
        "guards/score_trips.sql", {"v": listed, "a": actions}, blind=blind_sql(p, "e.")
    )
    return _Figures(
        saved,
        blind_trips,
        _by_variant(stopped),
        prevented,
        int(events),
        waste_total,
        headroom,
        totals,
        _by_variant(trips),
    )


def score(
    store: Store,
    variants: list[Policy],
    detail: set[int] | None = None,
    stops: bool = True,
    memo: dict[tuple[str, str], tuple[Any, ...]] | None = None,
) -> list[Result]:
    """Score every variant's trips at once, set-based. The trips themselves are listed for
    the variants in ``detail`` (all by default): their nudges, and unless ``stops`` is false
    their stops (a table of figures needs none of them; there may be one per unit).

    ``memo``: the replay's totals of calls and healthy units by blindness and unit, kept
    between policies (they depend on the replay alone, not on a guard's trips).

    In steps over the replay's tables (``analyzer.guards.replay``): the stops settled
    (``lf_stops``, ``lf_stop_children``; score_stops.sql), then the figures read off them
    (``lf_killed`` on the way; score_*.sql), then one ``Result`` per variant."""
    p = variants[0]
    g = _Guard.of(p)
    _settle_stops(store, g, p)
    listed = list(range(len(variants)) if detail is None else sorted(detail))
    actions = ["stop", "nudge"] if stops else ["nudge"]
    f = _figures(store, g, p, listed, actions, memo)
    return [_result(v, i, f) for i, v in enumerate(variants)]


def _result(v: Policy, i: int, f: _Figures) -> Result:
    """Variant ``i``'s result, from every variant's figures."""
    blind_calls, calls_total, healthy_units = f.totals
    mine = f.stopped.get(i, [])
    saved_n, saved_usd, n_false, usd_false, killed, lost = f.saved.get(i, (0, 0, 0, 0, 0, 0))
    prevented_i = _usd(f.prevented.get(i))
    harm = _usd(usd_false) + _usd(killed)
    listed_trips = [
        Trip(stream, session, call, iso(ts), action, inc)
        for _v, action, stream, _pos, session, call, ts, inc in f.trips.get(i, [])
    ]
    stopped_events = {r[2] for r in mine}
    latencies = [float(r[5]) for r in mine]
    return Result(
        policy=v.name,
        params=v.params(),
        description=v.description,
        targets=list(v.targets) if v.targets else None,
        incidents_total=f.events,
        incidents_stopped=len(stopped_events),
        incidents_missed=f.events - len(stopped_events),
        waste_total_usd=_usd(f.waste_total),
        waste_prevented_usd=prevented_i,
        waste_missed_usd=_usd(f.waste_total) - prevented_i,
        calls_saved=int(saved_n or 0),
        usd_saved=_usd(saved_usd),
        false_trips=int(n_false or 0),
        usd_false_trips=_usd(usd_false),
        usd_work_killed=_usd(killed),
        usd_lost_output=_usd(lost),
        harm_usd=harm,
        net_usd=prevented_i - harm,
        headroom=_headroom(f.headroom, i),
        blind_calls=int(blind_calls),
        calls_total=int(calls_total),
        trips_blind=int(f.blind_trips.get(i, 0)),
        healthy_units=int(healthy_units),
        false_trip_rate=(int(n_false or 0) / healthy_units) if healthy_units else None,
        median_latency_events=statistics.median(latencies) if latencies else None,
        trips=[t for t in listed_trips if t.action == "stop"],
        nudges=[t for t in listed_trips if t.action == "nudge"],
        stopped=[
            {
                "incident_id": r[1],
                "event_id": r[2],
                "latency_events": int(r[5]),
                "latency_seconds": _f(r[6]),
                "latency_usd": _usd(r[7]),
                "waste_prevented_usd": _usd(r[4]),
            }
            for r in mine
        ],
    )


def _headroom(by_variant: dict[int, Any], i: int) -> float | None:
    value = by_variant.get(i, by_variant.get(-1))
    return None if value is None else float(value)
