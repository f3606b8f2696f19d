"""Scoring a guard's trips against the ground truth: what it prevented, what it cost.

Read the replay's tables (``analyzer.guards.replay``): the trips of every variant
(``lf_trips``), the guard's trace (``lf_trace``), the events and the truth. The rules (also in the
README):

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
from dataclasses import dataclass, field, fields
from typing import Any

from analyzer.detect.blindness import blind_sql
from analyzer.engine.store import Store
from analyzer.guards.policy import Policy
from analyzer.guards.primitives import UNIT
from analyzer.model.formatting import iso


@dataclass
class Trip:
    stream_key: str
    session_id: str | None
    call_id: str
    ts: str | None
    action: str
    incident_id: str | None


@dataclass
class Result:
    policy: str
    params: dict[str, Any]
    description: str
    incidents_total: int  # target events the guard was judged on (not blind)
    incidents_stopped: int
    waste_prevented_usd: float
    calls_saved: int
    usd_saved: float
    false_trips: int
    usd_false_trips: float  # what the false trips killed, their own lost outputs included
    median_latency_events: float | None
    targets: list[str] | None = None
    incidents_missed: int = 0
    waste_total_usd: float = 0.0
    waste_missed_usd: float = 0.0
    usd_work_killed: float = 0.0  # productive calls killed by true stops (and lost outputs)
    usd_lost_output: float = 0.0  # tripping calls' own productive output lost ("fail")
    harm_usd: float = 0.0
    net_usd: float = 0.0
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
        # Flat records: copying them is enough (``asdict`` recurses into every value, and a
        # guard that trips on half the calls of a large store has hundreds of thousands).
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["params"] = dict(self.params)
        out["trips"] = [dict(vars(t)) for t in self.trips]
        out["nudges"] = [dict(vars(t)) for t in self.nudges]
        out["stopped"] = [dict(s) for s in self.stopped]
        return out


def _f(x: Any) -> float:
    return round(float(x or 0), 10)


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
    between policies (they depend on the replay alone, not on a guard's trips)."""
    con = store.con
    p = variants[0]
    reach, unit = p.reaches, UNIT[p.reaches]
    blind = blind_sql(p)  # the variants differ in thresholds only, never in their signal
    fail = "true" if p.on_trip == "fail" else "false"
    params: dict[str, Any] = {"targets": list(p.targets or [])}
    target = "(t.detector IS NULL OR list_contains($targets, t.detector))" if p.targets else "true"
    # What follows each stop in its reach unit: calls and dollars (the unit's end less the
    # stop's running sum, ``replay._prepare_rest``), and dollars of incident waste.
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE lf_stops AS
            WITH tw AS (SELECT DISTINCT call_id, cost_usd, {unit} AS unit, pos
                        FROM lf_truth_calls),
            rw AS (
                SELECT t.variant, t.u_stream, t.pos, sum(tw.cost_usd) AS usd
                FROM lf_trips t JOIN tw ON tw.unit = t.reach_unit AND tw.pos > t.pos
                WHERE t.action = 'stop' GROUP BY ALL)
            SELECT t.variant, t.reach_unit, t.u_stream, t.pos, e.call_id, e.ts,
                   e.sid, coalesce(e.cost_usd, 0) AS trip_cost,
                   w.call_id IS NOT NULL AS trip_is_waste, r.last_pos - t.pos AS rest_n,
                   r.end_usd - e.usd_through AS rest_usd, coalesce(rw.usd, 0) AS rest_waste,
                   r.unit_end_ts, ({blind_sql(p, "e.")}) AS blind
            FROM lf_trips t JOIN lf_events e ON e.u_stream = t.u_stream AND e.pos = t.pos
            JOIN lf_unit_{reach} r ON r.unit = t.reach_unit
            LEFT JOIN lf_waste w ON w.call_id = e.call_id
            LEFT JOIN rw ON rw.variant = t.variant AND rw.u_stream = t.u_stream
                        AND rw.pos = t.pos
            WHERE t.action = 'stop'"""
    )
    # The sub-agent runs a stop ends: of the tripping call's session, started after the trip
    # (and, for a stop that ends a turn, before the turn's last call).
    in_reach = "c.first_ts <= s.unit_end_ts" if reach == "turn" else "true"
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE lf_stop_children AS
            SELECT s.variant, s.call_id AS stop_call, c.u_stream AS child, c.n, c.usd,
                   c.waste
            FROM lf_stops s JOIN lf_children c
              ON c.parent_sid = s.sid AND c.first_ts > s.ts AND {in_reach}
            WHERE NOT s.blind"""
    )
    # A stop inside a sub-agent run that an earlier stop never let start is moot.
    con.execute(
        """DELETE FROM lf_trips t USING lf_stop_children c
           WHERE t.variant = c.variant AND t.u_stream = c.child"""
    )
    con.execute(
        """DELETE FROM lf_stops s USING lf_stop_children c
           WHERE s.variant = c.variant AND s.u_stream = c.child"""
    )
    per_variant = {
        r[0]: r[1:]
        for r in con.execute(
            f"""WITH k AS (
                    SELECT variant, stop_call, sum(n) AS n, sum(usd) AS usd, sum(waste) AS waste
                    FROM lf_stop_children GROUP BY ALL),
                s AS (
                    SELECT s.*, coalesce(k.n, 0) AS kn, coalesce(k.usd, 0) AS kusd,
                           coalesce(k.waste, 0) AS kwaste,
                           coalesce(s.rest_waste, 0) + coalesce(k.waste, 0) = 0
                               AND NOT s.trip_is_waste AS false_trip,
                           CASE WHEN {fail} AND NOT s.trip_is_waste THEN s.trip_cost ELSE 0 END
                               AS lost
                    FROM lf_stops s
                    LEFT JOIN k ON k.variant = s.variant AND k.stop_call = s.call_id
                    WHERE NOT s.blind)
                SELECT variant, sum(rest_n + kn), sum(rest_usd + kusd),
                       count(*) FILTER (WHERE false_trip),
                       sum(rest_usd + kusd + lost) FILTER (WHERE false_trip),
                       sum(rest_usd - coalesce(rest_waste, 0) + kusd - kwaste + lost)
                           FILTER (WHERE NOT false_trip),
                       sum(lost)
                FROM s GROUP BY variant"""
        ).fetchall()
    }
    blind_trips = dict(
        con.execute(
            "SELECT variant, count(*) FROM lf_stops WHERE blind GROUP BY variant"
        ).fetchall()
    )
    # The target incidents' wasted calls each variant's stops killed (earliest stop per call).
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE lf_killed AS
            WITH k AS (
                SELECT s.variant, tc.incident_id, tc.call_id, tc.cost_usd, s.call_id AS stop,
                       s.u_stream AS stop_stream, s.pos AS trip_pos, s.ts AS trip_ts
                FROM lf_stops s JOIN lf_truth_calls tc
                  ON tc.{unit} = s.reach_unit AND tc.pos > s.pos
                WHERE NOT s.blind
                UNION ALL
                SELECT s.variant, tc.incident_id, tc.call_id, tc.cost_usd, s.call_id,
                       s.u_stream, s.pos, s.ts
                FROM lf_stop_children c
                JOIN lf_stops s ON s.variant = c.variant AND s.call_id = c.stop_call
                JOIN lf_truth_calls tc ON tc.u_stream = c.child)
            SELECT k.variant, k.incident_id, t.event_id, k.call_id,
                   any_value(k.cost_usd) AS cost_usd,
                   arg_min(k.stop, (k.trip_ts, k.trip_pos)) AS stop,
                   arg_min(k.stop_stream, (k.trip_ts, k.trip_pos)) AS stop_stream,
                   arg_min(k.trip_pos, (k.trip_ts, k.trip_pos)) AS trip_pos,
                   min(k.trip_ts) AS trip_ts
            FROM k JOIN lf_truth t ON t.incident_id = k.incident_id
            WHERE {target}
            GROUP BY k.variant, k.incident_id, t.event_id, k.call_id""",
        params if p.targets else {},
    )
    stopped_rows = con.execute(
        """WITH first AS (
               SELECT variant, incident_id, any_value(event_id) AS event_id,
                      arg_min(stop, (trip_ts, trip_pos)) AS stop,
                      arg_min(stop_stream, (trip_ts, trip_pos)) AS stream,
                      arg_min(trip_pos, (trip_ts, trip_pos)) AS trip_pos,
                      min(trip_ts) AS trip_ts, sum(cost_usd) AS prevented
               FROM lf_killed GROUP BY variant, incident_id),
           starts AS (
               SELECT incident_id, min(first_ts) AS start_ts FROM lf_truth_span GROUP BY ALL),
           events AS (  -- the guard's own events in an incident, up to its trip
               SELECT f.variant, f.incident_id, count(tr.pos) AS n
               FROM first f
               JOIN lf_truth_span sp ON sp.incident_id = f.incident_id
                                    AND sp.u_stream = f.stream
               JOIN lf_trace tr ON (tr.variant IS NULL OR tr.variant = f.variant)
                               AND tr.u_stream = sp.u_stream
                               AND tr.pos BETWEEN sp.first_pos AND f.trip_pos
               GROUP BY ALL),
           spent AS (  -- the incident's waste spent up to the stop
               SELECT f.variant, f.incident_id, sum(tc.cost_usd) AS usd
               FROM first f JOIN lf_truth_calls tc ON tc.incident_id = f.incident_id
               WHERE (tc.u_stream = f.stream AND tc.pos <= f.trip_pos)
                  OR (tc.u_stream <> f.stream AND tc.ts <= f.trip_ts)
               GROUP BY ALL)
           SELECT f.variant, f.incident_id, f.event_id, f.stop, f.prevented,
                  coalesce(ev.n, 0) AS latency_events,
                  greatest(epoch(f.trip_ts) - epoch(st.start_ts), 0) AS seconds,
                  coalesce(sp.usd, 0) AS spent
           FROM first f
           LEFT JOIN starts st ON st.incident_id = f.incident_id
           LEFT JOIN events ev ON ev.variant = f.variant AND ev.incident_id = f.incident_id
           LEFT JOIN spent sp ON sp.variant = f.variant AND sp.incident_id = f.incident_id
           WHERE f.prevented > 0
           ORDER BY f.variant, f.incident_id"""
    ).fetchall()
    prevented = dict(
        con.execute(
            """SELECT variant, sum(cost_usd) FROM (
                   SELECT DISTINCT variant, call_id, cost_usd FROM lf_killed)
               GROUP BY variant"""
        ).fetchall()
    )
    judged_sql = f"""FROM lf_truth t JOIN lf_truth_calls tc USING (incident_id)
                     WHERE {target} AND NOT ({blind_sql(p, "tc.")})"""
    events, waste_total = con.execute(
        f"""SELECT count(DISTINCT t.event_id),
                   (SELECT coalesce(sum(cost_usd), 0) FROM (
                        SELECT DISTINCT tc.call_id, tc.cost_usd {judged_sql}))
            {judged_sql}""",
        params if p.targets else {},
    ).fetchall()[0]
    healthy = f"reach_unit NOT IN (SELECT DISTINCT {unit} FROM lf_truth_calls)"
    headroom = dict(
        con.execute(
            f"""SELECT coalesce(variant, -1), max(value) FROM lf_trace
                WHERE NOT blind AND {healthy} GROUP BY 1"""
        ).fetchall()
    )
    totals = (memo or {}).get((blind, unit))
    if totals is None:
        totals = con.execute(
            f"""SELECT count(*) FILTER (WHERE ({blind})), count(*),
                       count(DISTINCT {unit}) FILTER (WHERE NOT ({blind}) AND {unit} NOT IN
                           (SELECT DISTINCT {unit} FROM lf_truth_calls))
                FROM lf_events"""
        ).fetchall()[0]
        if memo is not None:
            memo[(blind, unit)] = totals
    blind_calls, calls_total, healthy_units = totals
    listed = list(range(len(variants)) if detail is None else sorted(detail))
    actions = ["stop", "nudge"] if stops else ["nudge"]
    trips = con.execute(
        f"""WITH named AS (
               SELECT variant, stop, arg_max(incident_id, cost) AS incident_id
               FROM (SELECT variant, stop, incident_id, sum(cost_usd) AS cost
                     FROM lf_killed GROUP BY ALL)
               GROUP BY ALL)
           SELECT t.variant, t.action, k.stream_key, t.pos, sn.name, e.call_id, e.ts,
                  CASE WHEN t.action = 'stop' THEN coalesce(n.incident_id, (
                      SELECT min(sp.incident_id) FROM lf_truth_span sp
                      WHERE sp.u_stream = t.u_stream
                        AND t.pos BETWEEN sp.first_pos AND sp.last_pos)) END
           FROM lf_trips t JOIN lf_events e ON e.u_stream = t.u_stream AND e.pos = t.pos
           JOIN lf_streams k ON k.sk = t.u_stream
           LEFT JOIN lf_names sn ON sn.id = e.sid
           LEFT JOIN named n ON n.variant = t.variant AND n.stop = e.call_id
           WHERE t.variant IN (SELECT unnest($v)) AND t.action IN (SELECT unnest($a))
             AND NOT ({blind_sql(p, "e.")})
           ORDER BY t.variant, t.action DESC, e.ts, t.u_stream, t.pos""",
        {"v": listed, "a": actions},
    ).fetchall()
    stopped_of: dict[int, list[tuple[Any, ...]]] = {}
    for r in stopped_rows:
        stopped_of.setdefault(r[0], []).append(r)
    trips_of: dict[int, list[tuple[Any, ...]]] = {}
    for r in trips:
        trips_of.setdefault(r[0], []).append(r)
    results = []
    for i, v in enumerate(variants):
        mine = stopped_of.get(i, [])
        saved_n, saved_usd, n_false, usd_false, killed, lost = per_variant.get(
            i, (0, 0, 0, 0, 0, 0)
        )
        prevented_i = _f(prevented.get(i))
        harm = _f(usd_false) + _f(killed)
        listed_trips = [
            Trip(stream, session, call, iso(ts), action, inc)
            for _v, action, stream, _pos, session, call, ts, inc in trips_of.get(i, [])
        ]
        stopped_events = {r[2] for r in mine}
        latencies = [float(r[5]) for r in mine]
        results.append(
            Result(
                policy=v.name,
                params=v.params(),
                description=v.description,
                targets=list(v.targets) if v.targets else None,
                incidents_total=int(events),
                incidents_stopped=len(stopped_events),
                incidents_missed=int(events) - len(stopped_events),
                waste_total_usd=_f(waste_total),
                waste_prevented_usd=prevented_i,
                waste_missed_usd=_f(float(waste_total or 0) - prevented_i),
                calls_saved=int(saved_n or 0),
                usd_saved=_f(saved_usd),
                false_trips=int(n_false or 0),
                usd_false_trips=_f(usd_false),
                usd_work_killed=_f(killed),
                usd_lost_output=_f(lost),
                harm_usd=_f(harm),
                net_usd=_f(prevented_i - harm),
                headroom=_headroom(headroom, i),
                blind_calls=int(blind_calls),
                calls_total=int(calls_total),
                trips_blind=int(blind_trips.get(i, 0)),
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
                        "latency_usd": _f(r[7]),
                        "waste_prevented_usd": _f(r[4]),
                    }
                    for r in mine
                ],
            )
        )
    return results


def _headroom(by_variant: dict[int, Any], i: int) -> float | None:
    value = by_variant.get(i, by_variant.get(-1))
    return None if value is None else float(value)
