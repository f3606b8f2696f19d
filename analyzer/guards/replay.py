"""The replay: the history as a guard sees it, the ground truth, and where each guard trips.

Each policy's primitive gives one set-based query that computes, for every call the guard
sees, its value after that call (its *trace*, ``analyzer.guards.primitives``). A threshold T trips
where the value reaches T (or passes it, ``compare = ">"``). A sweep never replays the history
once per value: the trace is computed once, and every threshold is read off it.

What a stop ends is its *reach* (a turn, a session, a stream), separate from the *scope* the
guard's value lives in. A guard trips at most once per reach unit; where the reach is finer
than the scope (a session-long counter whose stop ends only the turn), the value carries over
into the next turn, as it does in the agents that keep such a counter. How trips are scored is
``analyzer.guards.scoring``.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from analyzer.detect.blindness import blind_sql, lives_in_turns, named_columns, per_session_note
from analyzer.detect.ground_truth import prepare_truth
from analyzer.detect.link import is_bill
from analyzer.engine.resources import package_sql
from analyzer.engine.store import Store
from analyzer.guards.policy import Policy
from analyzer.guards.primitives import EVENT_COLUMNS, UNIT
from analyzer.guards.scoring import Result, score

# As in the truncated_tool_call_streak detector (one rule: lf_output_discarded in classify.sql).
TRUNCATION_GAP_S = 300
KEPT_RATIO = 0.5
_ORDER = ("turn", "session", "stream")  # finest first


# The calls' own columns the replay carries (``EVENT_COLUMNS`` less those it derives), and
# those it always needs: what the scoring reads and what the order's columns are made of. A
# stream is its number (``u_stream``, in the order of the keys); its key is in ``lf_streams``,
# and in the replay only for a policy that names it. So are sessions and turns: their ids are
# numbered (``lf_names``, one list for both, so equal ids are equal numbers), the replay
# carries the session's number (``sid``), and the ids only for a policy that names them.
_STORED = (
    "call_id",
    "stream_key",
    "session_id",
    "turn_id",
    "ts",
    "model",
    "app",
    "api_key",
    "response_kind",
    "finish_reason",
    "input_tokens",
    "output_tokens",
    "reasoning_tokens",
    "cost_usd",
    "visible_chars",
    "content_chars",
    "reply_saved",
    "http_status",
    "output_final",
    "tool_key",
    "tool_call_count",
    "parent_session_id",
    "refused",
    "error_key",
    "result_key",
)
# What the agent answered a call, from its messages (``_outcomes``): carried only for a
# policy that reads it.
_ANSWERED = ("refused", "error_key", "result_key")
_ALWAYS = {
    "call_id",
    "ts",
    "cost_usd",
    "parent_session_id",
    "input_tokens",
    "response_kind",
    "tool_key",
}
# A derived column's inputs (the others are made of ``_ALWAYS`` or of the order alone).
_DERIVED = {
    "truncated": {"finish_reason", "content_chars", "tool_call_count", "output_tokens"},
}


def columns_of(policies: list[Policy] | None) -> frozenset[str]:
    """The columns of ``EVENT_COLUMNS`` the replay must carry for ``policies`` (every one when
    None): those their expressions name (outside quoted strings), those that say where they
    are blind (``analyzer.detect.blindness``), and those the scoring and the order need. A name
    found where it is no column (in a function name, say) only widens it."""
    if policies is None:
        return frozenset(EVENT_COLUMNS)
    text = " ".join(
        str(expr)
        for p in policies
        for expr in (p.watch, *(p.setting(s) for s in p.primitive.expressions), blind_sql(p))
        if expr
    )
    return frozenset(named_columns(text) | _ALWAYS)


def _prepare_events(store: Store, columns: frozenset[str] = frozenset(EVENT_COLUMNS)) -> int:
    """The replay (``lf_events``): every live call in stream order, with what a guard can key
    on (``EVENT_COLUMNS``; of the calls' own columns, those in ``columns``), the unit numbers of
    each scope, and what the scoring needs.

    Sorted once, in one statement: the calls are sorted in stream order (a stream is numbered
    in the order of its key, so the sort compares integers), and every column that depends on
    the order (positions, neighbours, unit numbers, running counts) is computed with windows
    over no partition and no order (``OVER ()``), which DuckDB streams in the order the sort
    emits the rows, as they are written: no sorted copy is kept beside ``lf_events``, and no
    second pass joins one to the other. Each policy's trace then streams over ``lf_events`` the
    same way, in its own order (``analyzer.guards.primitives``). The stream's key is not carried
    through the sort: its number is, and the key is read back from the list of keys by that
    number (``lf_keys``).

    The table lives in an in-memory database of its own (``lf_mem``, read and written even
    beside a read-only store), which compresses it when it is large for the memory limit
    (``Store.compress_if_large``); ``lf_events`` is a view of it. Compressed, a replay of ten
    million calls stays in memory, where otherwise every trace and scoring would read much of
    it back from disk."""
    con = store.con
    for scope in UNIT:
        con.execute(f"DROP TABLE IF EXISTS lf_unit_{scope}")
    needed = set(columns) | _ALWAYS
    for made, inputs in _DERIVED.items():
        if made in columns:
            needed |= inputs
    kept = [c for c in _STORED if c in needed]
    answered = [c for c in kept if c in _ANSWERED]
    select = ", ".join(
        "t.tool_key" if c == "tool_key" else f"x.{c}" if c in _ANSWERED else f"l.{c}"
        for c in kept
        if c != "stream_key"
    )
    # The streams numbered in the order of their keys: sorting by the number is sorting by
    # the key, comparing integers.
    con.execute(
        """CREATE OR REPLACE TEMP TABLE lf_streams AS
        SELECT stream_key, row_number() OVER (ORDER BY stream_key) AS sk
        FROM (SELECT DISTINCT stream_key FROM calls WHERE superseded_by IS NULL)"""
    )
    # The session and turn ids, numbered: what the order compares, and the scoring joins on.
    con.execute(
        """CREATE OR REPLACE TEMP TABLE lf_names AS
        SELECT name, row_number() OVER () AS id FROM (
            SELECT session_id AS name FROM calls WHERE superseded_by IS NULL
            UNION SELECT turn_id FROM calls WHERE superseded_by IS NULL)
        WHERE name IS NOT NULL"""
    )
    # A policy naming the stream's key reads it from the list of keys by the stream's number
    # (one row joined to every row: a cross product with one row keeps the other side's order).
    key = "list_extract(stream_keys, sk)"
    if "stream_key" in kept:
        con.execute(
            """CREATE OR REPLACE TEMP TABLE lf_keys AS
            SELECT list(stream_key ORDER BY sk) AS stream_keys FROM lf_streams"""
        )
    derived = {
        "pos": "pos",
        "prompt_delta": "prompt_delta",
        "stalled": "coalesce(response_kind IN ('thinking_only', 'empty'), false)",
        "tool_call": "tc",
        # A cut-off tool call: known in a log; in a bill inferred from the next call's prompt -
        # and unknown (NULL) where there is no next call to judge by.
        "truncated": f"""CASE WHEN response_kind = 'truncated_tool_call' THEN true
                    WHEN finish_reason = 'length' AND content_chars IS NULL
                         AND tool_call_count IS NULL
                         AND (next_in IS NULL OR next_gap > {TRUNCATION_GAP_S}) THEN NULL
                    ELSE coalesce(lf_output_discarded(finish_reason, content_chars,
                                                      tool_call_count, input_tokens,
                                                      output_tokens, next_in, next_gap,
                                                      {TRUNCATION_GAP_S}, {KEPT_RATIO}), false)
               END""",
        "tools_before": "tools_before",
        "is_bill": "is_bill",
        "stream_key": key,
    }
    cols = [
        c if derived.get(c, c) == c else f"{derived[c]} AS {c}"
        for c in EVENT_COLUMNS
        if c in kept
        or (c in derived and c not in ("truncated", "stream_key"))
        or (c == "truncated" and c in columns)
    ]
    # One statement: the calls sorted (``s``), then the order's own columns in layers, each
    # reading the one below in the sort's order (where a stream, a session and a turn begin,
    # the neighbours; then running counts; then positions and unit numbers within the
    # stream), written as they stream out of the sort: no sorted copy and no second pass.
    if answered:  # what the agent answered each call (sql/outcomes.sql)
        con.execute(package_sql("outcomes.sql"))
    con.execute("ATTACH IF NOT EXISTS ':memory:' AS lf_mem (COMPRESS, READ_WRITE)")
    con.execute(
        f"""CREATE OR REPLACE TABLE lf_mem.lf_events AS
        WITH tools AS (
            SELECT call_id,
                   string_agg(tool_name || ':' || coalesce(tool_args_hash, ''), ';'
                              ORDER BY tool_name, tool_args_hash) AS tool_key
            FROM messages WHERE kind = 'tool_call' AND call_id IS NOT NULL
            GROUP BY call_id
        ),
        s AS (
            SELECT s.sk, {select}, sn.id AS sid, tn.id AS tid,
                   {is_bill("l.format")} AS is_bill,
                   -- where a session (a turn) named as the stream's key meets one not named
                   coalesce(l.session_id = l.stream_key, false) AS session_is_key,
                   coalesce(coalesce(l.turn_id, l.session_id) = l.stream_key, false)
                       AS turn_is_key
            FROM calls l JOIN lf_streams s ON s.stream_key = l.stream_key
            LEFT JOIN tools t ON t.call_id = l.call_id
            {"LEFT JOIN lf_outcomes x ON x.call_id = l.call_id" if answered else ""}
            LEFT JOIN lf_names sn ON sn.name = l.session_id
            LEFT JOIN lf_names tn ON tn.name = l.turn_id
            WHERE l.superseded_by IS NULL
            ORDER BY s.sk, l.seq, l.ts, l.call_id),
        a AS (
            SELECT *, sk IS DISTINCT FROM lag(sk) OVER () AS new_stream,
                   coalesce(lead(sk) OVER () = sk, false) AS has_next,
                   lead(input_tokens) OVER () AS lead_in,
                   epoch(lead(ts) OVER ()) - epoch(ts) AS lead_gap,
                   input_tokens - lag(input_tokens) OVER () AS lag_delta,
                   NOT (sid IS NOT DISTINCT FROM lag(sid) OVER ()
                        OR (sid IS NULL AND lag(session_is_key) OVER ())
                        OR (lag(sid) OVER () IS NULL AND session_is_key))
                       AS session_change,
                   NOT (turn IS NOT DISTINCT FROM lag(turn) OVER ()
                        OR (turn IS NULL AND lag(turn_is_key) OVER ())
                        OR (lag(turn) OVER () IS NULL AND turn_is_key)) AS turn_change,
                   coalesce(response_kind IN ('tool_call', 'truncated_tool_call'), false)
                       OR tool_key IS NOT NULL AS tc,
                   coalesce(cost_usd, 0) AS usd
            FROM (SELECT *, coalesce(tid, sid) AS turn FROM s)),
        b AS (
            SELECT *, row_number() OVER () AS gi,
                   sum(new_stream::INTEGER) OVER r AS n_stream,
                   sum((new_stream OR session_change)::INTEGER) OVER r AS n_session,
                   sum((new_stream OR turn_change)::INTEGER) OVER r AS n_turn,
                   sum(tc::INTEGER) OVER r - tc::INTEGER AS tc_before,
                   sum(usd) OVER r AS usd_through
            FROM a WINDOW r AS (ROWS UNBOUNDED PRECEDING)),
        o AS (
            SELECT *,
                   gi - max(CASE WHEN new_stream THEN gi - 1 END) OVER r AS pos,
                   n_stream::BIGINT AS u_stream,
                   (n_stream * 16777216
                       + (n_session - max(CASE WHEN new_stream THEN n_session - 1 END) OVER r)
                   )::BIGINT AS u_session,
                   (n_stream * 16777216
                       + (n_turn - max(CASE WHEN new_stream THEN n_turn - 1 END) OVER r)
                   )::BIGINT AS u_turn,
                   (tc_before - max(CASE WHEN new_stream OR turn_change THEN tc_before END)
                       OVER r)::BIGINT AS tools_before,
                   CASE WHEN has_next THEN lead_in END AS next_in,
                   CASE WHEN has_next THEN lead_gap END AS next_gap,
                   CASE WHEN NOT new_stream THEN lag_delta END AS prompt_delta
            FROM b WINDOW r AS (ROWS UNBOUNDED PRECEDING))
        SELECT {", ".join(cols)}, u_stream, u_session, u_turn, sid, parent_session_id,
               usd_through
        FROM o {"CROSS JOIN lf_keys" if "stream_key" in kept else ""}"""
    )
    con.execute("DROP TABLE IF EXISTS lf_keys")
    store.compress_if_large("lf_mem")
    con.execute("CREATE OR REPLACE TEMP VIEW lf_events AS SELECT * FROM lf_mem.lf_events")
    return int(store.scalar("SELECT count(*) FROM lf_events"))


def _prepare_rest(store: Store, reach: str) -> None:
    """Each unit of ``reach`` (what a stop there ends): its last position, the dollars spent
    in its stream up to its end (``usd_through``, a running sum in the replay's order) and
    when it ends. What follows a call in its unit is then a difference, read only at the
    stops (``analyzer.guards.scoring``). Made once per replay."""
    unit = UNIT[reach]
    store.con.execute(
        f"""CREATE TEMP TABLE IF NOT EXISTS lf_unit_{reach} AS
            SELECT {unit} AS unit, max(pos) AS last_pos,
                   arg_max(usd_through, pos) AS end_usd, max(ts) AS unit_end_ts
            FROM lf_events GROUP BY {unit}"""
    )


def _finer(a: str, b: str) -> str:
    return a if _ORDER.index(a) <= _ORDER.index(b) else b


class Replay:
    """The history replayed once, ready for any policy: the events (every live call in stream
    order) and the ground truth are prepared on construction, in that order, so a policy is run
    only over a replay that has both."""

    def __init__(
        self, store: Store, labels: Path | None = None, policies: list[Policy] | None = None
    ) -> None:
        """``policies``: those to be run (the replay then carries only the columns they and the
        scoring read; a policy needing more widens it when run). None: every column."""
        self.store = store
        self.labels = labels
        self._prepare(columns_of(policies))

    def _prepare(self, columns: frozenset[str]) -> None:
        self.columns = columns
        self.calls = _prepare_events(self.store, columns)
        # The calls without a turn: a policy living in turns counts them per session.
        self.turnless = int(
            self.store.scalar(
                "SELECT count(*) FROM calls WHERE superseded_by IS NULL AND turn_id IS NULL"
            )
        )
        prepare_truth(self.store, self.labels)
        self.total = int(self.store.scalar("SELECT count(DISTINCT event_id) FROM lf_truth"))
        self._totals: dict[tuple[str, str], tuple[Any, ...]] = {}

    def close(self) -> None:
        """Drop the replay's tables (the events in ``lf_mem`` and the working tables beside
        them), so that what comes after (the report) has DuckDB's memory to itself."""
        con = self.store.con
        for kind in ("VIEW", "TABLE"):
            names = con.execute(
                f"""SELECT {kind.lower()}_name FROM duckdb_{kind.lower()}s()
                    WHERE temporary AND {kind.lower()}_name LIKE 'lf\\_%' ESCAPE '\\'"""
            ).fetchall()
            for (name,) in names:
                con.execute(f'DROP {kind} IF EXISTS temp.main."{name}"')
        con.execute("DETACH DATABASE IF EXISTS lf_mem")

    def run(
        self,
        p: Policy,
        sweep: tuple[str, list[float]] | None = None,
        detail: set[int] | None = None,
        stops: bool = True,
    ) -> list[Result]:
        """One result for the policy, or one per swept value (with its trips listed if its
        index is in ``detail``; all by default - without their stops if ``stops`` is false)."""
        if not columns_of([p]) <= self.columns:
            self._prepare(self.columns | columns_of([p]))
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
        results = score(self.store, variants, detail, stops, self._totals)
        if lives_in_turns(p) and self.turnless:
            note = per_session_note(p, self.turnless, self.calls)
            for r in results:
                r.per_session_calls, r.per_session = self.turnless, note
        return results

    def _trace(self, p: Policy, variant: int | None) -> None:
        """The guard's value after every call it sees (``lf_trace``; of one variant, or of all
        when ``variant`` is None), with the units its stop reaches and the group a trip is
        counted in (the finer of scope and reach). Narrow rows: a call is its stream and
        position."""
        carry = {
            "reach_unit": UNIT[p.reaches],
            "grp": UNIT[_finer(p.scope, p.reaches)],
            "blind": f"({blind_sql(p)})",
        }
        fresh = variant is None or variant == 0
        self.store.con.execute(
            ("CREATE OR REPLACE TEMP TABLE lf_trace AS " if fresh else "INSERT INTO lf_trace ")
            + f"""SELECT {"NULL::INTEGER" if variant is None else variant} AS variant,
                       unit, u_stream, pos, value, before, reach_unit, grp, blind
                FROM ({p.primitive.trace(p, carry, before=True)})"""
        )

    def _trips(self, variants: list[Policy], variant0: int) -> None:
        """Add to ``lf_trips`` each variant's stops (the first crossing of its threshold in
        each group, then the first in each reach unit) and nudges (the crossings of its nudge
        level before the stop of their reach unit). Every threshold is read in one pass over
        the trace."""
        con = self.store.con
        mine = f"(variant IS NULL OR variant = {variant0})"
        if variant0 == 0:
            con.execute(
                """CREATE OR REPLACE TEMP TABLE lf_trips (variant INTEGER, reach_unit BIGINT,
                       u_stream BIGINT, pos BIGINT, action VARCHAR)"""
            )
        p = variants[0]
        stops = [float(v.stop) for v in variants]
        picks = ", ".join(
            f"min(pos) FILTER (WHERE {p.crosses('value', t)}) AS p{i}" for i, t in enumerate(stops)
        )
        where = p.crosses("value", min(stops))
        latched = _finer(p.scope, p.reaches) != p.scope  # the value carries over its groups
        if p.primitive.unit_steps(p) and not latched:  # rising by one from 0: where it equals
            first = [math.floor(t) + 1 if p.compare == ">" else math.ceil(t) for t in stops]
            where = f"value IN ({', '.join(str(x) for x in sorted(set(first)))})"
        # A group lies in one reach unit, and both in one stream: a trip is the stream and
        # the least position.
        con.execute(
            f"""CREATE OR REPLACE TEMP TABLE lf_first AS
                SELECT grp, any_value(reach_unit) AS reach_unit,
                       any_value(u_stream) AS u_stream, {picks}
                FROM lf_trace WHERE {mine} AND {where} GROUP BY grp"""
        )
        con.execute(
            "INSERT INTO lf_trips "
            + " UNION ALL ".join(
                f"SELECT {variant0 + i}, reach_unit, any_value(u_stream), min(p{i}), 'stop' "
                f"FROM lf_first WHERE p{i} IS NOT NULL GROUP BY reach_unit"
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
                    SELECT $v, n.reach_unit, n.u_stream, n.pos, 'nudge'
                    FROM lf_trace n
                    LEFT JOIN lf_trips s
                      ON s.variant = $v AND s.action = 'stop' AND s.reach_unit = n.reach_unit
                    WHERE (n.variant IS NULL OR n.variant = $v)
                      AND {v.crosses("n.value", level)} AND {before}
                      AND (s.pos IS NULL OR n.pos < s.pos)""",
                {"v": variant0 + i},
            )
