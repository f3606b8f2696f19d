"""The replay: the history as a guard sees it, the ground truth, and where each guard trips.

Each policy's primitive gives one set-based query that computes, for every call the guard
sees, its value after that call (its *trace*, ``analyzer.primitives``). A threshold T trips
where the value reaches T (or passes it, ``compare = ">"``). A sweep never replays the history
once per value: the trace is computed once, and every threshold is read off it.

What a stop ends is its *reach* (a turn, a session, a stream), separate from the *scope* the
guard's value lives in. A guard trips at most once per reach unit; where the reach is finer
than the scope (a session-long counter whose stop ends only the turn), the value carries over
into the next turn, as it does in the agents that keep such a counter. How trips are scored is
``analyzer.scoring``.
"""

from __future__ import annotations

import csv
import math
import re
from pathlib import Path

from analyzer.errors import ForensicsError
from analyzer.guards import Policy
from analyzer.link import is_bill
from analyzer.primitives import EVENT_COLUMNS, LOG_ONLY, UNIT
from analyzer.scoring import Result, score
from analyzer.store import Store

GROUND_TRUTH_SEVERITIES = ("medium", "high")
# As in the truncated_tool_call_streak detector (one rule: lf_output_discarded in classify.sql).
TRUNCATION_GAP_S = 300
KEPT_RATIO = 0.5
_ORDER = ("turn", "session", "stream")  # finest first


def _prepare_events(store: Store) -> int:
    """The replay (``lf_events``): every live call in stream order, with what a guard can key
    on (``EVENT_COLUMNS``), the unit numbers of each scope, and what the scoring needs."""
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
            SELECT n.*, l.*, t.tool_key,
                   coalesce(l.response_kind IN ('tool_call', 'truncated_tool_call'), false)
                       OR t.tool_key IS NOT NULL AS tc
            FROM n JOIN calls l ON l.rowid = n.rid LEFT JOIN tools t ON t.call_id = l.call_id
        )
        SELECT call_id, stream_key, session_id, turn_id, pos, ts, model, app, api_key,
               response_kind, finish_reason, input_tokens, output_tokens, reasoning_tokens,
               cost_usd, visible_chars, content_chars, reply_saved,
               http_status, output_final, tool_key, prompt_delta,
               coalesce(response_kind IN ('thinking_only', 'empty'), false) AS stalled,
               tc AS tool_call,
               -- A cut-off tool call: known in a log; in a bill inferred from the next call's
               -- prompt - and unknown (NULL) where there is no next call to judge by.
               CASE WHEN response_kind = 'truncated_tool_call' THEN true
                    WHEN finish_reason = 'length' AND content_chars IS NULL
                         AND tool_call_count IS NULL
                         AND (next_in IS NULL OR next_gap > {TRUNCATION_GAP_S}) THEN NULL
                    ELSE coalesce(lf_output_discarded(finish_reason, content_chars,
                                                      tool_call_count, input_tokens,
                                                      output_tokens, next_in, next_gap,
                                                      {TRUNCATION_GAP_S}, {KEPT_RATIO}), false)
               END AS truncated,
               coalesce(count(*) FILTER (WHERE tc) OVER (PARTITION BY sk, turn_no ORDER BY pos
                   ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS tools_before,
               {is_bill("format")} AS is_bill,
               sk AS u_stream,
               sk * 16777216 + session_no AS u_session,
               sk * 16777216 + turn_no AS u_turn,
               parent_session_id
        FROM j"""
    )
    return int(store.scalar("SELECT count(*) FROM lf_events"))


def _prepare_truth(store: Store, labels: Path | None = None) -> None:
    """The incidents a guard should stop (``lf_truth``: medium and high severity, or as
    labelled), the calls their waste is made of (``lf_truth_calls``), their extent per stream
    (``lf_truth_span``), and which incidents are one event (they share wasted calls: an empty
    stream found by two detectors counts once)."""
    con = store.con
    sev = ", ".join(f"'{s}'" for s in GROUND_TRUTH_SEVERITIES)
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE lf_truth AS
            SELECT incident_id, detector, incident_id AS event_id FROM incidents
            WHERE severity IN ({sev})"""
    )
    con.execute(
        """CREATE OR REPLACE TEMP TABLE lf_truth_calls AS
           SELECT t.incident_id, e.* FROM lf_truth t
           JOIN incident_calls ic USING (incident_id) JOIN lf_events e USING (call_id)"""
    )
    if labels is not None:
        _apply_labels(store, labels)
    for _ in range(20):  # events: incidents joined through shared calls, named by the least id
        changed = con.execute(
            """WITH pairs AS (
                   SELECT a.incident_id, min(tb.event_id) AS ev
                   FROM lf_truth_calls a JOIN lf_truth_calls b USING (call_id)
                   JOIN lf_truth tb ON tb.incident_id = b.incident_id GROUP BY a.incident_id)
               UPDATE lf_truth SET event_id = p.ev FROM pairs p
               WHERE lf_truth.incident_id = p.incident_id AND p.ev < lf_truth.event_id"""
        ).fetchall()
        if not changed or not changed[0][0]:
            break
    con.execute(
        """CREATE OR REPLACE TEMP TABLE lf_truth_span AS
           WITH ends AS (
               SELECT t.incident_id, f.stream_key, f.pos AS first_pos, l.pos AS last_pos,
                      f.ts AS first_ts
               FROM lf_truth t JOIN incidents i USING (incident_id)
               JOIN lf_events f ON f.call_id = i.first_call_id
               JOIN lf_events l ON l.call_id = i.last_call_id AND l.stream_key = f.stream_key)
           SELECT incident_id, stream_key, min(first_pos) AS first_pos,
                  max(last_pos) AS last_pos, min(first_ts) AS first_ts
           FROM (SELECT * FROM ends
                 UNION ALL
                 SELECT incident_id, stream_key, pos, pos, ts FROM lf_truth_calls)
           GROUP BY incident_id, stream_key"""
    )
    con.execute(
        """CREATE OR REPLACE TEMP TABLE lf_waste AS
           SELECT DISTINCT call_id FROM lf_truth_calls"""
    )
    con.execute(
        """CREATE OR REPLACE TEMP TABLE lf_children AS
           SELECT e.parent_session_id, e.stream_key, min(e.ts) AS first_ts, count(*) AS n,
                  coalesce(sum(e.cost_usd), 0) AS usd,
                  coalesce(sum(e.cost_usd) FILTER (WHERE w.call_id IS NOT NULL), 0) AS waste
           FROM lf_events e LEFT JOIN lf_waste w USING (call_id)
           WHERE e.parent_session_id IS NOT NULL GROUP BY ALL"""
    )


def _apply_labels(store: Store, path: Path) -> None:
    """``id,label`` rows: an incident or call id, ``runaway`` or ``legitimate``.

    A legitimate incident, or one holding a call labelled legitimate, is not ground truth; a
    runaway incident is (whatever its severity); runaway calls not already in an incident form
    one incident per stream, made of those calls (a target of every guard).
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
        """INSERT INTO lf_truth SELECT id, detector, id FROM lf_labels
           JOIN incidents ON incident_id = id
           WHERE label = 'runaway' AND id NOT IN (SELECT incident_id FROM lf_truth)"""
    )
    con.execute(
        """INSERT INTO lf_truth_calls
           SELECT t.incident_id, e.* FROM lf_truth t
           JOIN incident_calls ic USING (incident_id) JOIN lf_events e USING (call_id)
           WHERE t.incident_id NOT IN (SELECT incident_id FROM lf_truth_calls)"""
    )
    legit = """SELECT id FROM lf_labels WHERE label = 'legitimate'
               UNION SELECT ic.incident_id FROM incident_calls ic
                     JOIN lf_labels l ON l.id = ic.call_id AND l.label = 'legitimate'"""
    con.execute(f"DELETE FROM lf_truth WHERE incident_id IN ({legit})")
    con.execute(f"DELETE FROM lf_truth_calls WHERE incident_id IN ({legit})")
    con.execute(
        """INSERT INTO lf_truth_calls
           SELECT 'label:' || e.stream_key, e.* FROM lf_events e
           JOIN lf_labels l ON l.id = e.call_id AND l.label = 'runaway'
           WHERE e.call_id NOT IN (SELECT call_id FROM incident_calls)"""
    )
    con.execute(
        """INSERT INTO lf_truth SELECT DISTINCT incident_id, NULL, incident_id
           FROM lf_truth_calls WHERE incident_id LIKE 'label:%'"""
    )


def _prepare_rest(store: Store, reach: str) -> None:
    """What follows each call in its unit of ``reach`` (what a stop there ends): calls,
    dollars, dollars of incident waste, and when the unit ends. Made once per replay."""
    unit = UNIT[reach]
    store.con.execute(
        f"""CREATE TEMP TABLE IF NOT EXISTS lf_rest_{reach} AS
            SELECT {unit} AS unit, pos,
                   count(*) OVER u - row_number() OVER o AS rest_n,
                   coalesce(sum(cost_usd) OVER u, 0) - coalesce(sum(cost_usd) OVER o, 0)
                       AS rest_usd,
                   coalesce(sum(w) OVER u, 0) - coalesce(sum(w) OVER o, 0) AS rest_waste,
                   max(ts) OVER u AS unit_end_ts
            FROM (SELECT e.*, CASE WHEN x.call_id IS NOT NULL THEN e.cost_usd END AS w
                  FROM lf_events e LEFT JOIN lf_waste x USING (call_id))
            WINDOW u AS (PARTITION BY {unit}),
                   o AS (PARTITION BY {unit} ORDER BY pos ROWS UNBOUNDED PRECEDING)"""
    )


def blind_sql(p: Policy) -> str:
    """SQL over one event: whether the guard cannot see its signal there. A bill carries no
    turns (a turn is the whole session) and no tool, content or thinking signal: a policy that
    lives in turns, or keys only on such columns, is blind on billing rows."""
    signal = " ".join(
        str(p.setting(s) or "") for s in p.primitive.expressions if s in ("count", "key")
    )
    used = {c for c in EVENT_COLUMNS if re.search(rf"\b{c}\b", _unquoted(signal))}
    if "turn" in (p.scope, p.reaches) or (used and used <= LOG_ONLY):
        return "coalesce(is_bill, false)"
    return "false"


def _unquoted(sql: str) -> str:
    return re.sub(r"'(?:[^']|'')*'", "''", sql)


def _finer(a: str, b: str) -> str:
    return a if _ORDER.index(a) <= _ORDER.index(b) else b


class Replay:
    """The history replayed once, ready for any policy: the events (every live call in stream
    order) and the ground truth are prepared on construction, in that order, so a policy is run
    only over a replay that has both."""

    def __init__(self, store: Store, labels: Path | None = None) -> None:
        self.store = store
        self.calls = _prepare_events(store)
        _prepare_truth(store, labels)
        self.total = int(store.scalar("SELECT count(DISTINCT event_id) FROM lf_truth"))

    def run(
        self,
        p: Policy,
        sweep: tuple[str, list[float]] | None = None,
        detail: set[int] | None = None,
    ) -> list[Result]:
        """One result for the policy, or one per swept value (with its trips listed if its
        index is in ``detail``; all by default)."""
        if sweep is not None and sweep[0] == "stop":
            variants = [p.with_param("stop", v) for v in sweep[1]]
            self._trace(p, None)  # one trace, every threshold read off it
            self._trips(variants, 0)
        else:
            variants = [p] if sweep is None else [p.with_param(sweep[0], x) for x in sweep[1]]
            for i, v in enumerate(variants):
                self._trace(v, i)
                self._trips([v], i)
        _prepare_rest(self.store, p.reaches)
        return score(self.store, variants, blind_sql(p), detail)

    def _trace(self, p: Policy, variant: int | None) -> None:
        """The guard's value after every call it sees (``lf_trace``; of one variant, or of all
        when ``variant`` is None), with the units its stop reaches and the group a trip is
        counted in (the finer of scope and reach)."""
        grp = UNIT[_finer(p.scope, p.reaches)]
        fresh = variant is None or variant == 0
        self.store.con.execute(
            ("CREATE OR REPLACE TEMP TABLE lf_trace AS " if fresh else "INSERT INTO lf_trace ")
            + f"""SELECT {"NULL::INTEGER" if variant is None else variant} AS variant,
                       t.unit, t.stream_key, t.pos, t.call_id, t.value, t.before,
                       e.{UNIT[p.reaches]} AS reach_unit, e.{grp} AS grp,
                       ({blind_sql(p)}) AS blind
                FROM ({p.primitive.trace(p, before=True)}) t
                JOIN lf_events e ON e.call_id = t.call_id"""
        )

    def _trips(self, variants: list[Policy], variant0: int) -> None:
        """Add to ``lf_trips`` each variant's stops (the first crossing of its threshold in
        each group, then the first in each reach unit) and nudges (the crossings of its nudge
        level before the stop of their reach unit)."""
        con = self.store.con
        mine = f"(variant IS NULL OR variant = {variant0})"
        if variant0 == 0:
            con.execute(
                """CREATE OR REPLACE TEMP TABLE lf_trips (variant INTEGER, reach_unit BIGINT,
                       stream_key VARCHAR, pos BIGINT, call_id VARCHAR, action VARCHAR)"""
            )
        p = variants[0]
        stops = [float(v.stop) for v in variants]
        picks = ", ".join(
            f"min(pos) FILTER (WHERE {p.crosses('value', t)}) AS p{i}, "
            f"arg_min(call_id, pos) FILTER (WHERE {p.crosses('value', t)}) AS c{i}"
            for i, t in enumerate(stops)
        )
        where = p.crosses("value", min(stops))
        latched = _finer(p.scope, p.reaches) != p.scope  # the value carries over its groups
        if p.primitive.unit_steps(p) and not latched:  # rising by one from 0: where it equals
            first = [math.floor(t) + 1 if p.compare == ">" else math.ceil(t) for t in stops]
            where = f"value IN ({', '.join(str(x) for x in sorted(set(first)))})"
        con.execute(
            f"""CREATE OR REPLACE TEMP TABLE lf_first AS
                SELECT grp, any_value(reach_unit) AS reach_unit,
                       any_value(stream_key) AS stream_key, {picks}
                FROM lf_trace WHERE {mine} AND {where} GROUP BY grp"""
        )
        con.execute(
            "INSERT INTO lf_trips "
            + " UNION ALL ".join(
                f"SELECT {variant0 + i}, reach_unit, any_value(stream_key), min(p{i}), "
                f"arg_min(c{i}, p{i}), 'stop' FROM lf_first WHERE p{i} IS NOT NULL "
                "GROUP BY reach_unit"
                for i in range(len(stops))
            )
        )
        for i, v in enumerate(variants):
            level = v.nudge_level
            if level is None or level >= v.stop:
                continue
            before = f"n.before <= {level!r}" if v.compare == ">" else f"n.before < {level!r}"
            con.execute(
                f"""INSERT INTO lf_trips
                    SELECT $v, n.reach_unit, n.stream_key, n.pos, n.call_id, 'nudge'
                    FROM lf_trace n
                    LEFT JOIN lf_trips s
                      ON s.variant = $v AND s.action = 'stop' AND s.reach_unit = n.reach_unit
                    WHERE (n.variant IS NULL OR n.variant = $v)
                      AND {v.crosses("n.value", level)} AND {before}
                      AND (s.pos IS NULL OR n.pos < s.pos)""",
                {"v": variant0 + i},
            )
