"""The replay: the history as a guard sees it, and the scoring of its trips.

Each policy's primitive gives one set-based query that computes, for every call the guard sees,
the value after that call (its *trace*, ``analyzer.primitives``). A threshold T trips at the
first call of a unit whose value reaches T. A sweep never replays the history once per value:
the trace is computed once, and every threshold is read off the calls where the value reaches a
new high (the first call reaching T is always one of them). The scoring rules are in
``analyzer.backtest``'s docstring and the README.
"""

from __future__ import annotations

import csv
import math
import statistics
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from analyzer.errors import ForensicsError
from analyzer.formatting import iso
from analyzer.guards import Policy
from analyzer.primitives import UNIT
from analyzer.store import Store

GROUND_TRUTH_SEVERITIES = ("medium", "high")
# As in the truncated_tool_call_streak detector (one rule: lf_output_discarded in classify.sql).
TRUNCATION_GAP_S = 300
KEPT_RATIO = 0.5


def _prepare_events(store: Store) -> int:
    """The replay (``lf_events``): every live call in stream order, with what a guard can key
    on (``EVENT_COLUMNS``) and the unit numbers of each scope."""
    for scope in UNIT:
        store.con.execute(f"DROP TABLE IF EXISTS lf_rest_{scope}")
    store.con.execute(
        f"""CREATE OR REPLACE TEMP TABLE lf_events AS
        WITH tools AS (
            SELECT call_id,
                   string_agg(tool_name || ':' || coalesce(tool_args_hash, ''), ';'
                              ORDER BY tool_name, tool_args_hash) AS tool_key
            FROM messages WHERE kind = 'tool_call' AND call_id IS NOT NULL
            GROUP BY call_id
        ),
        -- Streams as whole numbers (fast to partition by).
        streams AS (
            SELECT stream_key, row_number() OVER (ORDER BY stream_key) AS sk
            FROM (SELECT DISTINCT stream_key FROM live_calls)
        ),
        -- The order and the neighbours, over narrow rows (the rest is joined back after).
        c AS (
            SELECT l.rowid AS rid, s.sk,
                   row_number() OVER w AS pos,
                   lead(l.input_tokens) OVER w AS next_in,
                   epoch(lead(l.ts) OVER w) - epoch(l.ts) AS next_gap,
                   l.input_tokens - lag(l.input_tokens) OVER w AS prompt_delta,
                   coalesce(l.session_id, l.stream_key) IS DISTINCT FROM
                       lag(coalesce(l.session_id, l.stream_key)) OVER w AS new_session,
                   coalesce(l.turn_id, l.session_id, l.stream_key) IS DISTINCT FROM
                       lag(coalesce(l.turn_id, l.session_id, l.stream_key)) OVER w AS new_turn
            FROM calls l JOIN streams s USING (stream_key)
            WHERE l.superseded_by IS NULL
            WINDOW w AS (PARTITION BY s.sk ORDER BY l.seq, l.ts, l.call_id)
        ),
        -- The session's and the turn's number within the stream (both are runs of calls in
        -- stream order), so every unit is a whole number too.
        n AS (
            SELECT *, sum(new_session::INTEGER) OVER s AS session_no,
                   sum(new_turn::INTEGER) OVER s AS turn_no
            FROM c
            WINDOW s AS (PARTITION BY sk ORDER BY pos ROWS UNBOUNDED PRECEDING)
        ),
        j AS (
            SELECT n.*, l.*, t.tool_key
            FROM n JOIN calls l ON l.rowid = n.rid LEFT JOIN tools t ON t.call_id = l.call_id
        )
        SELECT call_id, stream_key, session_id, turn_id, pos, ts, model, app, api_key,
               response_kind, finish_reason, input_tokens, output_tokens, reasoning_tokens,
               cost_usd, visible_chars, content_chars, reply_saved,
               http_status, output_final, tool_key, prompt_delta,
               sk AS u_stream,
               sk * 16777216 + session_no AS u_session,
               sk * 16777216 + turn_no AS u_turn,
               coalesce(response_kind IN ('thinking_only', 'empty'), false) AS stalled,
               coalesce(response_kind IN ('tool_call', 'truncated_tool_call'), false)
                   OR tool_key IS NOT NULL AS tool_call,
               coalesce(response_kind = 'truncated_tool_call'
                   OR lf_output_discarded(finish_reason, content_chars, tool_call_count,
                                          input_tokens, output_tokens, next_in, next_gap,
                                          {TRUNCATION_GAP_S}, {KEPT_RATIO}), false)
                   AS truncated
        FROM j"""
    )
    return int(store.scalar("SELECT count(*) FROM lf_events"))


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
    incidents_total: int
    incidents_stopped: int
    waste_prevented_usd: float
    calls_saved: int
    usd_saved: float
    false_trips: int
    usd_false_trips: float
    median_latency_calls: float | None
    trips: list[Trip] = field(default_factory=list)
    nudges: list[Trip] = field(default_factory=list)
    stopped: list[dict[str, Any]] = field(default_factory=list)  # incident, latency, prevented

    def to_json(self) -> dict[str, Any]:
        # Flat records: copying them is enough (``asdict`` recurses into every value, and a
        # guard that trips on half the calls of a large store has hundreds of thousands).
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["params"] = dict(self.params)
        out["trips"] = [dict(vars(t)) for t in self.trips]
        out["nudges"] = [dict(vars(t)) for t in self.nudges]
        out["stopped"] = [dict(s) for s in self.stopped]
        return out


def _prepare_truth(store: Store, labels: Path | None = None) -> int:
    """The incidents a guard should stop, with the calls their waste is made of."""
    con = store.con
    sev = ", ".join(f"'{s}'" for s in GROUND_TRUTH_SEVERITIES)
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE lf_truth AS
            SELECT incident_id FROM incidents WHERE severity IN ({sev})"""
    )
    con.execute(
        """CREATE OR REPLACE TEMP TABLE lf_truth_calls AS
           SELECT t.incident_id, e.* FROM lf_truth t
           JOIN incident_calls ic USING (incident_id) JOIN lf_events e USING (call_id)"""
    )
    if labels is not None:
        _apply_labels(store, labels)
    # An incident's extent in its stream (first to last call), for units and latency.
    con.execute(
        """CREATE OR REPLACE TEMP TABLE lf_truth_span AS
           SELECT t.incident_id, e.*
           FROM lf_truth t
           JOIN incidents i USING (incident_id)
           JOIN lf_events f ON f.call_id = i.first_call_id
           JOIN lf_events l ON l.call_id = i.last_call_id
           JOIN lf_events e ON e.stream_key = f.stream_key AND e.pos BETWEEN f.pos AND l.pos
           UNION
           SELECT incident_id, * EXCLUDE (incident_id) FROM lf_truth_calls"""
    )
    return int(store.scalar("SELECT count(*) FROM lf_truth"))


def _apply_labels(store: Store, path: Path) -> None:
    """``id,label`` rows: an incident or call id, ``runaway`` or ``legitimate``.

    A legitimate incident, or one holding a call labelled legitimate, is not ground truth; a
    runaway incident is (whatever its severity); runaway calls not already in an incident form
    one incident per stream, made of those calls.
    """
    rows: list[tuple[str, str]] = []
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            for n, rec in enumerate(csv.reader(fh), 1):
                if not rec or (n == 1 and rec[0].strip().lower() in ("id", "call_id")):
                    continue
                if len(rec) < 2 or rec[1].strip().lower() not in ("runaway", "legitimate"):
                    raise ForensicsError("expected id,runaway|legitimate", path=path, line=n)
                rows.append((rec[0].strip(), rec[1].strip().lower()))
    except OSError as exc:
        raise ForensicsError(f"cannot read: {exc.strerror or exc}", path=path) from exc
    con = store.con
    con.execute("CREATE OR REPLACE TEMP TABLE lf_labels (id VARCHAR, label VARCHAR)")
    con.executemany("INSERT INTO lf_labels VALUES (?, ?)", rows)
    con.execute(
        """INSERT INTO lf_truth SELECT id FROM lf_labels
           WHERE label = 'runaway' AND id IN (SELECT incident_id FROM incidents)
             AND id NOT IN (SELECT incident_id FROM lf_truth)"""
    )
    con.execute(
        """DELETE FROM lf_truth WHERE incident_id IN (
               SELECT id FROM lf_labels WHERE label = 'legitimate'
               UNION SELECT ic.incident_id FROM incident_calls ic
                     JOIN lf_labels l ON l.id = ic.call_id AND l.label = 'legitimate')"""
    )
    con.execute(
        """INSERT INTO lf_truth_calls
           SELECT 'label:' || e.stream_key, e.* FROM lf_events e
           JOIN lf_labels l ON l.id = e.call_id AND l.label = 'runaway'
           WHERE e.call_id NOT IN (SELECT call_id FROM incident_calls)"""
    )
    con.execute(
        """INSERT INTO lf_truth SELECT DISTINCT incident_id FROM lf_truth_calls
           WHERE incident_id LIKE 'label:%'"""
    )


def _crossings(
    store: Store,
    trace: str,
    thresholds: list[float],
    variant0: int = 0,
    keep: bool = False,
    steps: bool = False,
) -> None:
    """Add to lf_trips, for each threshold (variant ``variant0 + i``), the first call of each
    unit whose value reaches it. The trace is computed once for all thresholds, and every
    threshold is read off it in one pass (``keep`` leaves it in lf_trace, for nudges; with
    ``steps``, a value rising one at a time, only the calls where it equals a threshold
    rounded up are looked at)."""
    con = store.con
    source = f"({trace})"
    if keep:
        con.execute(f"CREATE OR REPLACE TEMP TABLE lf_trace AS {trace}")
        source = "lf_trace"
    picks = ", ".join(
        f"min(pos) FILTER (WHERE value >= {t!r}) AS p{i}, "
        f"arg_min(call_id, pos) FILTER (WHERE value >= {t!r}) AS c{i}"
        for i, t in enumerate(thresholds)
    )
    where = f"value >= {min(thresholds)!r}"
    if steps:
        where = f"value IN ({', '.join(str(math.ceil(t)) for t in sorted(set(thresholds)))})"
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE lf_first AS
            SELECT unit, any_value(stream_key) AS stream_key, {picks}
            FROM {source} WHERE {where} GROUP BY unit"""
    )
    con.execute(
        "INSERT INTO lf_trips "
        + " UNION ALL ".join(
            f"SELECT {variant0 + i}, unit, stream_key, p{i}, c{i}, 'stop' FROM lf_first "
            f"WHERE p{i} IS NOT NULL"
            for i in range(len(thresholds))
        )
    )


def _nudges(store: Store, variant: int, level: float) -> None:
    """Add the calls where the trace (lf_trace) rises to the nudge level, before the unit's
    stop."""
    store.con.execute(
        """INSERT INTO lf_trips
           SELECT $v, n.unit, n.stream_key, n.pos, n.call_id, 'nudge'
           FROM lf_trace n
           LEFT JOIN lf_trips s
             ON s.variant = $v AND s.action = 'stop' AND s.unit = n.unit
            AND s.stream_key = n.stream_key
           WHERE n.value >= $level AND n.before < $level AND (s.pos IS NULL OR n.pos < s.pos)""",
        {"v": variant, "level": level},
    )


def _rest(store: Store, scope: str) -> str:
    """A table of what follows each call in its unit of ``scope`` (the calls and dollars a
    stop there saves), made once per replay."""
    table = f"lf_rest_{scope}"
    unit = UNIT[scope]
    store.con.execute(
        f"""CREATE TEMP TABLE IF NOT EXISTS {table} AS
            SELECT {unit} AS unit, pos,
                   count(*) OVER u - row_number() OVER o AS rest_n,
                   coalesce(sum(cost_usd) OVER u, 0)
                       - coalesce(sum(cost_usd) OVER o, 0) AS rest_usd
            FROM lf_events
            WINDOW u AS (PARTITION BY {unit}),
                   o AS (PARTITION BY {unit} ORDER BY pos ROWS UNBOUNDED PRECEDING)"""
    )
    return table


def _score(
    store: Store, variants: list[Policy], total: int, detail: set[int] | None = None
) -> list[Result]:
    """Score every variant's trips (lf_trips) at once, set-based. The trips themselves are
    listed for the variants in ``detail`` (all by default)."""
    con = store.con
    unit = UNIT[variants[0].scope]
    rest = _rest(store, variants[0].scope)
    stops = "SELECT * FROM lf_trips WHERE action = 'stop'"
    # A unit is stopped at most once per variant, and unit numbers never repeat across streams.
    saved: dict[int, tuple[int, float]] = {}
    false: dict[int, tuple[int, float]] = {}
    for v, n, usd, n_false, usd_false in con.execute(
        f"""SELECT t.variant, sum(r.rest_n), sum(r.rest_usd),
                   count(*) FILTER (WHERE NOT holds_incident),
                   sum(r.rest_usd) FILTER (WHERE NOT holds_incident)
            FROM (SELECT *, unit IN (SELECT {unit} FROM lf_truth_span) AS holds_incident
                  FROM ({stops})) t
            JOIN {rest} r USING (unit, pos)
            GROUP BY t.variant"""
    ).fetchall():
        saved[v] = (int(n or 0), float(usd or 0))
        false[v] = (int(n_false or 0), float(usd_false or 0))
    # Per stream an incident touches (a parent and its sub-agents are several streams): the
    # first stop of a unit holding its calls there; then per incident, over its streams.
    stopped_rows = con.execute(
        f"""WITH hit AS (
                SELECT t.variant, s.incident_id, s.stream_key, min(t.pos) AS trip_pos
                FROM lf_truth_span s JOIN ({stops}) t
                  ON t.unit = s.{unit} AND t.stream_key = s.stream_key
                GROUP BY t.variant, s.incident_id, s.stream_key
            ),
            span AS (
                SELECT incident_id, stream_key, min(pos) AS first_pos, max(pos) AS last_pos
                FROM lf_truth_span GROUP BY incident_id, stream_key
            ),
            kept AS (
                SELECT h.*, greatest(h.trip_pos - sp.first_pos + 1, 0) AS latency
                FROM hit h JOIN span sp USING (incident_id, stream_key)
                WHERE h.trip_pos <= sp.last_pos
            ),
            per_stream AS (
                SELECT k.variant, k.incident_id, k.stream_key, k.trip_pos, k.latency,
                       coalesce(sum(c.cost_usd) FILTER (WHERE c.pos > k.trip_pos), 0)
                           AS prevented
                FROM kept k LEFT JOIN lf_truth_calls c USING (incident_id, stream_key)
                GROUP BY ALL
            )
            SELECT variant, incident_id,
                   arg_min(stream_key, (latency, stream_key)) AS stream,
                   arg_min(trip_pos, (latency, stream_key)) AS trip_pos,
                   min(latency) AS latency, sum(prevented) AS prevented
            FROM per_stream GROUP BY variant, incident_id ORDER BY variant, incident_id"""
    ).fetchall()
    listed_variants = range(len(variants)) if detail is None else sorted(detail)
    trips = con.execute(
        """SELECT t.variant, t.action, t.stream_key, t.pos, e.session_id, e.call_id, e.ts
           FROM lf_trips t JOIN lf_events e ON e.call_id = t.call_id
           WHERE t.variant IN (SELECT unnest($v))
           ORDER BY t.variant, t.action DESC, e.ts, t.stream_key, t.pos""",
        {"v": list(listed_variants)},
    ).fetchall()
    by_variant: dict[int, list[Any]] = {}
    for r in stopped_rows:
        by_variant.setdefault(r[0], []).append(r)
    trips_of: dict[int, list[Any]] = {}
    for r in trips:
        trips_of.setdefault(r[0], []).append(r)
    results = []
    for i, p in enumerate(variants):
        mine = by_variant.get(i, [])
        # A stop can end several incidents (the rest of its unit); it is named after the one it
        # falls in, else the first it prevents.
        at: dict[tuple[Any, Any], str] = {}
        for r in mine:
            if (r[2], r[3]) not in at or r[4] > 0:
                at[(r[2], r[3])] = r[1]
        listed = [
            Trip(stream, session, call, iso(ts), action,
                 at.get((stream, pos)) if action == "stop" else None)
            for _v, action, stream, pos, session, call, ts in trips_of.get(i, [])
        ]  # fmt: skip
        latencies = [float(r[4]) for r in mine]
        results.append(
            Result(
                policy=p.name,
                params=p.params(),
                description=p.description,
                incidents_total=total,
                incidents_stopped=len(mine),
                waste_prevented_usd=round(float(sum(r[5] for r in mine)), 10),
                calls_saved=saved.get(i, (0, 0.0))[0],
                usd_saved=round(saved.get(i, (0, 0.0))[1], 10),
                false_trips=false.get(i, (0, 0.0))[0],
                usd_false_trips=round(false.get(i, (0, 0.0))[1], 10),
                median_latency_calls=statistics.median(latencies) if latencies else None,
                trips=[t for t in listed if t.action == "stop"],
                nudges=[t for t in listed if t.action == "nudge"],
                stopped=[
                    {
                        "incident_id": r[1],
                        "latency_calls": int(r[4]),
                        "waste_prevented_usd": round(float(r[5]), 10),
                    }
                    for r in mine
                ],
            )
        )
    return results


class Replay:
    """The history replayed once, ready for any policy: the events (every live call in stream
    order) and the ground truth (the incidents to stop) are prepared on construction, in that
    order, so a policy is run only over a replay that has both."""

    def __init__(self, store: Store, labels: Path | None = None) -> None:
        self.store = store
        self.calls = _prepare_events(store)
        self.total = _prepare_truth(store, labels)  # the incidents a guard should stop

    def run(
        self,
        p: Policy,
        sweep: tuple[str, list[float]] | None = None,
        detail: set[int] | None = None,
    ) -> list[Result]:
        """One result for the policy, or one per swept value (with its trips listed if its
        index is in ``detail``; all by default)."""
        store, total = self.store, self.total
        store.con.execute(
            """CREATE OR REPLACE TEMP TABLE lf_trips (variant INTEGER, unit BIGINT,
                   stream_key VARCHAR, pos BIGINT, call_id VARCHAR, action VARCHAR)"""
        )
        prim = p.primitive
        if sweep is not None and sweep[0] == "stop":
            variants = [p.with_param("stop", v) for v in sweep[1]]
            _crossings(store, prim.trace(p, before=p.nudge is not None),
                       [float(v.stop) for v in variants], keep=p.nudge is not None,
                       steps=prim.unit_steps(p))  # fmt: skip
            if p.nudge is not None:
                for i, v in enumerate(variants):
                    if v.nudge is not None and v.nudge < v.stop:
                        _nudges(store, i, float(v.nudge))
            return _score(store, variants, total, detail)
        variants = [p] if sweep is None else [p.with_param(sweep[0], x) for x in sweep[1]]
        for i, v in enumerate(variants):
            trace = v.primitive.trace(v, before=v.nudge is not None)
            _crossings(
                store, trace, [float(v.stop)], variant0=i, keep=v.nudge is not None,
                steps=v.primitive.unit_steps(v),
            )  # fmt: skip
            if v.nudge is not None:
                _nudges(store, i, float(v.nudge))
        return _score(store, variants, total, detail)
