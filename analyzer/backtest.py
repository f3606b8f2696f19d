"""The backtest: replay every stream through guard policies and score them against incidents.

Each policy is compiled to one set-based query that computes, for every call the guard sees,
the value of its primitive after that call (its *trace*: the counter, the run length, ...).
A threshold T trips at the first call of a unit whose value reaches T. A sweep never replays
the history once per value: the trace is computed once, and every threshold is read off the
calls where the value reaches a new high (the first call reaching T is always one of them).

Scoring rules (also in the README):

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

import csv
import hashlib
import math
import statistics
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import orjson

from analyzer import cache
from analyzer.errors import ForensicsError
from analyzer.guards import Policy
from analyzer.store import Store

# Columns of one replayed call, usable in a policy's predicates, keys and weights.
EVENT_COLUMNS = (
    "call_id", "stream_key", "session_id", "turn_id", "pos", "ts", "model", "app", "api_key",
    "response_kind", "finish_reason", "input_tokens", "output_tokens", "reasoning_tokens",
    "cost_usd", "visible_chars", "content_chars", "reply_saved", "http_status", "output_final",
    "stalled", "tool_call", "truncated", "tool_key", "prompt_delta",
)  # fmt: skip
UNIT = {"stream": "u_stream", "session": "u_session", "turn": "u_turn"}
GROUND_TRUTH_SEVERITIES = ("medium", "high")
# As in the truncated_tool_call_streak detector: an output the next prompt did not keep.
TRUNCATION_GAP_S = 300
KEPT_RATIO = 0.5


def prepare_events(store: Store) -> int:
    """The replay: every live call in stream order, with what a guard can key on."""
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
                   OR (finish_reason = 'length' AND content_chars IS NULL
                       AND tool_call_count IS NULL AND next_in IS NOT NULL
                       AND next_gap <= {TRUNCATION_GAP_S}
                       AND next_in - input_tokens < output_tokens * {KEPT_RATIO}), false)
                   AS truncated
        FROM j"""
    )
    return int(store.scalar("SELECT count(*) FROM lf_events"))  # type: ignore[arg-type]


def _b(expr: str | None, default: str) -> str:
    return f"coalesce(({expr}), false)" if expr else default


def trace_sql(p: Policy, before: bool = False) -> str:
    """SELECT unit, stream_key, pos, call_id, value - the guard's value after a call, for every
    call where it can reach a new threshold (``before``: also its value before that call). A
    unit is always within one stream (its calls are ordered by their position in the stream).

    A counter's value only rises at the calls that count, so only those are traced: each
    counts from the unit's last reset before it. The other primitives trace every call seen.
    """
    unit = UNIT[p.scope]
    watch = _b(p.watch, "true")
    base = f"""seen AS (
        SELECT {unit} AS unit, stream_key, pos, ts, call_id, e.*
               EXCLUDE (call_id, stream_key, pos, ts)
        FROM lf_events e WHERE {watch})"""
    if p.type in ("counter", "budget"):
        hit = _b(p.count, "true")
        rst = _b(p.reset, "false")
        # A reset zeroes the count and the call itself does not count.
        segment = (
            """max(CASE WHEN rst THEN pos END)
                      OVER (PARTITION BY unit ORDER BY pos ROWS UNBOUNDED PRECEDING)"""
            if p.reset
            else "NULL::BIGINT"
        )
        return f"""WITH {base},
        v AS (
            SELECT unit, stream_key, pos, call_id, {hit} AS hit, {rst} AS rst,
                   coalesce(CAST(({p.weight}) AS DOUBLE), 0) AS w
            FROM seen),
        g AS (
            SELECT *, {segment} AS seg
            FROM v WHERE hit OR rst),
        t AS (
            SELECT unit, stream_key, pos, call_id, w,
                   sum(w) OVER (PARTITION BY unit, seg ORDER BY pos
                                ROWS UNBOUNDED PRECEDING) AS value
            FROM g WHERE hit AND NOT rst)
        SELECT unit, stream_key, pos, call_id, value{", value - w AS before" if before else ""}
        FROM t"""
    body = _sequence_trace_sql(p, base)
    if not before:
        return body
    return f"""SELECT *, lag(value, 1, 0) OVER (PARTITION BY unit ORDER BY pos) AS before
               FROM ({body})"""


def _sequence_trace_sql(p: Policy, base: str) -> str:
    """The trace of a primitive that looks at every call seen (run length, period, window)."""
    # A run (or a repeating stretch) is counted from its first call: the latest call so far
    # that did not continue one. Both windows share one ordering.
    if p.type == "run_length":
        return f"""WITH {base},
        v AS (SELECT unit, stream_key, pos, call_id, ({p.key}) AS k FROM seen),
        m AS (
            SELECT *, row_number() OVER w AS idx,
                   coalesce(k = lag(k) OVER w, false) AS same
            FROM v WINDOW w AS (PARTITION BY unit ORDER BY pos))
        SELECT unit, stream_key, pos, call_id,
               CASE WHEN k IS NULL THEN 0
                    ELSE idx + 1 - max(CASE WHEN NOT same THEN idx END)
                                   OVER (PARTITION BY unit ORDER BY pos
                                         ROWS UNBOUNDED PRECEDING)
               END AS value
        FROM m"""
    if p.type == "period":
        return f"""WITH {base},
        v AS (SELECT unit, stream_key, pos, call_id, ({p.key}) AS k FROM seen),
        m AS (
            SELECT *, row_number() OVER w AS idx,
                   coalesce(k = lag(k, {p.period}) OVER w, false) AS hit
            FROM v WINDOW w AS (PARTITION BY unit ORDER BY pos))
        SELECT unit, stream_key, pos, call_id,
               CASE WHEN hit
                    THEN (idx - max(CASE WHEN NOT hit THEN idx END)
                                OVER (PARTITION BY unit ORDER BY pos
                                      ROWS UNBOUNDED PRECEDING)
                          + {p.period}) // {p.period}
                    ELSE 0 END AS value
        FROM m"""
    if p.type == "window":
        hit = _b(p.count, "true")
        if p.size is not None:
            frame = f"ORDER BY pos ROWS BETWEEN {int(p.size) - 1} PRECEDING AND CURRENT ROW"
            where = ""
        else:
            seconds = float(p.seconds or 0)
            frame = (
                f"ORDER BY ts RANGE BETWEEN INTERVAL ({seconds}) SECOND PRECEDING AND CURRENT ROW"
            )
            where = "WHERE ts IS NOT NULL"
        return f"""WITH {base},
        v AS (SELECT unit, stream_key, pos, ts, call_id, {hit} AS hit FROM seen {where})
        SELECT unit, stream_key, pos, call_id,
               sum(CASE WHEN hit THEN 1 ELSE 0 END)
                   OVER (PARTITION BY unit {frame}) AS value
        FROM v"""
    raise ForensicsError(f"{p.name}: unknown policy type {p.type}")


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


def prepare_truth(store: Store, labels: Path | None = None) -> int:
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
    return int(store.scalar("SELECT count(*) FROM lf_truth"))  # type: ignore[arg-type]


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


def unit_steps(p: Policy) -> bool:
    """Whether the policy's value only ever rises one at a time (so it first reaches a
    threshold T where it equals T rounded up)."""
    return p.type in ("run_length", "period", "window") or (
        p.type == "counter" and p.weight.strip() == "1"
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
            Trip(stream, session, call, None if ts is None else ts.isoformat() + "Z", action,
                 at.get((stream, pos)) if action == "stop" else None)
            for _v, action, stream, pos, session, call, ts in trips_of.get(i, [])
        ]  # fmt: skip
        latencies = [float(r[4]) for r in mine]
        results.append(
            Result(
                policy=p.name,
                params=p.params(),
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


def run_policy(
    store: Store,
    p: Policy,
    total: int,
    sweep: tuple[str, list[float]] | None = None,
    detail: set[int] | None = None,
) -> list[Result]:
    """One result for the policy, or one per swept value (with its trips listed if its index
    is in ``detail``; all by default)."""
    store.con.execute(
        """CREATE OR REPLACE TEMP TABLE lf_trips (variant INTEGER, unit BIGINT,
               stream_key VARCHAR, pos BIGINT, call_id VARCHAR, action VARCHAR)"""
    )
    if sweep is not None and sweep[0] == "stop":
        variants = [p.with_param("stop", v) for v in sweep[1]]
        _crossings(store, trace_sql(p, before=p.nudge is not None),
                   [float(v.stop) for v in variants], keep=p.nudge is not None,
                   steps=unit_steps(p))  # fmt: skip
        if p.nudge is not None:
            for i, v in enumerate(variants):
                if v.nudge is not None and v.nudge < v.stop:
                    _nudges(store, i, float(v.nudge))
        return _score(store, variants, total, detail)
    variants = [p] if sweep is None else [p.with_param(sweep[0], x) for x in sweep[1]]
    for i, v in enumerate(variants):
        trace = trace_sql(v, before=v.nudge is not None)
        _crossings(
            store, trace, [float(v.stop)], variant0=i, keep=v.nudge is not None, steps=unit_steps(v)
        )
        if v.nudge is not None:
            _nudges(store, i, float(v.nudge))
    return _score(store, variants, total, detail)


def parse_sweep(text: str) -> tuple[str, str, list[float]]:
    """``NAME.PARAM=LO..HI[:STEP]`` as (policy, param, values)."""
    import re

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
) -> list[Result]:
    """Replay the store through ``policies``; ``sweeps`` maps a policy to (param, values)."""
    sweeps = sweeps or {}
    prepare_events(store)
    total = prepare_truth(store, labels)
    results: list[Result] = []
    for p in policies:
        results.extend(run_policy(store, p, total, sweeps.get(p.name)))
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


@dataclass
class GuardRun:
    """The backtest as the report and ``audit --json`` show it: every policy at its own
    thresholds, and swept over its stop threshold (the sweep's results carry the totals; only
    the policy's own threshold lists its trips)."""

    results: list[Result]
    sweeps: dict[str, list[Result]]
    key: str | None = None  # what it was computed from (analyzer.cache), when known

    def to_json(self) -> dict[str, Any]:
        return {
            "results": [r.to_json() for r in self.results],
            "sweeps": {k: [r.to_json() for r in v] for k, v in self.sweeps.items()},
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> GuardRun:
        def result(d: dict[str, Any]) -> Result:
            return Result(
                **{
                    **d,
                    "trips": [Trip(**t) for t in d["trips"]],
                    "nudges": [Trip(**t) for t in d["nudges"]],
                }
            )

        return cls(
            [result(r) for r in data["results"]],
            {k: [result(r) for r in v] for k, v in data["sweeps"].items()},
        )


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
    if reuse:
        cache.put(store, "guards", k, orjson.dumps(run.to_json(), default=str).decode())
    return run


def _guard_run(store: Store, policies: list[Policy], labels: Path | None) -> GuardRun:
    prepare_events(store)
    total = prepare_truth(store, labels)
    results: list[Result] = []
    sweeps: dict[str, list[Result]] = {}
    for p in policies:
        values = default_sweep(p)
        own_index = {i for i, v in enumerate(values) if v == float(p.stop)}
        swept = run_policy(store, p, total, ("stop", values), detail=own_index)
        sweeps[p.name] = swept
        # The policy at its own threshold is one of the swept variants (the same replay).
        own = [
            replace(r, params=p.params())
            for v, r in zip(values, swept, strict=True)
            if v == float(p.stop)
        ]
        results.extend(own[:1] or run_policy(store, p, total))
    return GuardRun(results, sweeps)
