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

from analyzer.detect.ground_truth import prepare_truth
from analyzer.detect.link import is_bill
from analyzer.engine.store import Store
from analyzer.guards.blindness import blind_sql, lives_in_turns, per_session_note
from analyzer.guards.columns import ALWAYS, KEPT_RATIO, PERIOD_MARK, TRUNCATION_GAP_S, columns_of
from analyzer.guards.policy import Policy
from analyzer.guards.primitives import EVENT_COLUMNS, PERIODS, UNIT, unit_sql
from analyzer.guards.scoring import Result, score

_ORDER = ("turn", "session", "stream")  # finest first


# The calls' own columns the replay carries (``EVENT_COLUMNS`` less those it derives), and
# those it always needs (``ALWAYS``: what the scoring reads, what the order's columns are made
# of). A stream is its number (``u_stream``, in the order of the keys); its key is in
# ``lf_streams``, and in the replay only for a policy that names it. So are sessions and
# turns: their ids are numbered (``lf_names``, one list for both, so equal ids are equal
# numbers), the replay carries the session's number (``sid``), and the ids only for a policy
# that names them.
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
    "step_key",
    "step_errors",
    "step_failed",
    "stale",
)
# What the agent answered a call, from its messages (``_outcomes``): carried only for a
# policy that reads it.
_ANSWERED = ("refused", "error_key", "result_key")
# The call as a step of the no_progress detector, and whether it is stale (steps.sql, in the
# replay's order): carried only for a policy that reads them.
_STEPS = ("step_key", "step_errors", "step_failed", "stale")
# What a live guard is fed beside its policy's columns (``Replay.events``): the ids the order
# derives a call's stream, session and turn from (events.sql), so that a live guard fed the
# events sees the units the replay sees (without them every call is of one stream and one
# turn, and a stop once in force never ends).
LIVE = frozenset({"stream_key", "session_id", "turn_id"})
# A derived column's inputs (the others are made of ``ALWAYS`` or of the order alone).
_DERIVED = {
    "truncated": {"finish_reason", "content_chars", "tool_call_count", "output_tokens"},
    # a live guard fed the events derives ``stale`` again from what makes it (guard.py)
    "stale": {"step_key", "step_errors", "step_failed"},
}


# What lf_truncated (truncated.sql) judges a call by, before the gap and the ratio.
_TRUNCATION_INPUTS = (
    "response_kind",
    "finish_reason",
    "content_chars",
    "tool_call_count",
    "input_tokens",
    "output_tokens",
    "next_in",
    "next_gap",
)
# The columns the replay derives from the order or from the calls' own (EVENT_COLUMNS not
# stored in ``calls``): each as SQL over one row of the sorted calls (``o`` in events.sql).
_DERIVED_SQL = {
    "pos": "pos",
    "prompt_delta": "prompt_delta",
    "stalled": "coalesce(response_kind IN ('thinking_only', 'empty'), false)",
    "tool_call": "tc",
    # A cut-off tool call: known in a log; in a bill inferred from the next call's prompt
    # (the macro of truncated.sql).
    "truncated": f"lf_truncated({', '.join(_TRUNCATION_INPUTS)}, {TRUNCATION_GAP_S}, {KEPT_RATIO})",
    "tools_before": "tools_before",
    "is_bill": "is_bill",
    # A policy naming the stream's key reads it from the list of keys by the stream's number.
    "stream_key": "list_extract(stream_keys, sk)",
}
# Where a policy names the stream's key, lf_keys (one row) is joined to every row: a join
# promises no order, so the order the traces stream in (stream, then position) is stated.
_KEYED = "CROSS JOIN lf_keys ORDER BY u_stream, pos"


def _kept(columns: frozenset[str]) -> list[str]:
    """The calls' own columns the replay carries for ``columns``: those named, those the
    derived ones are made of, and those it always needs, in ``_STORED``'s order."""
    needed = set(columns) | ALWAYS
    for made, inputs in _DERIVED.items():
        if made in columns:
            needed |= inputs
    return [c for c in _STORED if c in needed]


def _calls_select(kept: list[str]) -> str:
    """The carried columns as events.sql's sort selects them (``l``: the calls; ``t``: the
    tools they called; ``x``: what the agent answered; ``y``: the call as a step; the stream's
    key by its number)."""
    return ", ".join(
        "t.tool_key"
        if c == "tool_key"
        else f"x.{c}"
        if c in _ANSWERED
        else f"y.{c}"
        if c in _STEPS
        else f"l.{c}"
        for c in kept
        if c != "stream_key"
    )


def _event_columns(kept: list[str], columns: frozenset[str]) -> str:
    """The replay's columns in ``EVENT_COLUMNS``'s order: those carried, and those derived
    (a cut-off call and the stream's key only where ``columns`` name them)."""
    cols = [
        c if _DERIVED_SQL.get(c, c) == c else f"{_DERIVED_SQL[c]} AS {c}"
        for c in EVENT_COLUMNS
        if c in kept
        or (c in _DERIVED_SQL and c not in ("truncated", "stream_key"))
        or (c == "truncated" and c in columns)
    ]
    return ", ".join(cols)


def _prepare_events(store: Store, columns: frozenset[str] = frozenset(EVENT_COLUMNS)) -> int:
    """The replay (``lf_events``): every live call in stream order, with what a guard can key
    on (``EVENT_COLUMNS``; of the calls' own columns, those in ``columns``), the unit numbers of
    each scope, and what the scoring needs.

    Sorted once, in one statement (events.sql): the calls are sorted in stream order (a stream
    is numbered in the order of its key, numbers.sql, so the sort compares integers), and every
    column that depends on the order (positions, neighbours, unit numbers, running counts) is
    computed with windows over no partition and no order (``OVER ()``), which DuckDB streams in
    the order the sort emits the rows, as they are written: no sorted copy is kept beside
    ``lf_events``, and no second pass joins one to the other. Each policy's trace then streams
    over ``lf_events`` the same way, in its own order (``analyzer.guards.primitives``). The
    stream's key is not carried through the sort: its number is, and the key is read back from
    the list of keys by that number (``lf_keys``, stream_keys.sql; after that join the order is
    stated again, ``_KEYED``).

    The table lives in an in-memory database of its own (``lf_mem``, read and written even
    beside a read-only store), which compresses it when it is large for the memory limit
    (``Store.compress_if_large``); ``lf_events`` is a view of it. Compressed, a replay of ten
    million calls stays in memory, where otherwise every trace and scoring would read much of
    it back from disk."""
    engine = store.engine
    for scope in UNIT:
        engine.run(f"DROP TABLE IF EXISTS lf_unit_{scope}")
    kept = _kept(columns)
    answered = [c for c in kept if c in _ANSWERED]
    steps = [c for c in kept if c in _STEPS]
    keyed = "stream_key" in kept
    engine.run("guards/numbers.sql")
    if keyed:
        engine.run("guards/stream_keys.sql")
    if answered:  # what the agent answered each call
        engine.run("outcomes.sql")
    if steps:  # each call as a step, and whether it is stale
        engine.run("guards/steps.sql")
    if "truncated" in columns:
        engine.run("guards/truncated.sql")
    engine.run("ATTACH IF NOT EXISTS ':memory:' AS lf_mem (COMPRESS, READ_WRITE)")
    engine.run(
        "guards/events.sql",
        calls=_calls_select(kept),
        is_bill=is_bill("l.format"),
        outcomes=" ".join(
            join
            for join, needed in (
                ("LEFT JOIN lf_outcomes x ON x.call_id = l.call_id", answered),
                ("LEFT JOIN lf_steps y ON y.call_id = l.call_id", steps),
            )
            if needed
        ),
        columns=_event_columns(kept, columns),
        keyed=_KEYED if keyed else "",
    )
    engine.run("DROP TABLE IF EXISTS lf_keys")
    if PERIOD_MARK in columns:  # the calls' days, windows and months, and their time order
        starts = unit_sql("guards/window_starts.sql", calls="lf_mem.lf_events")
        engine.run("guards/periods.sql", starts=starts)
    store.compress_if_large("lf_mem")
    engine.run("CREATE OR REPLACE TEMP VIEW lf_events AS SELECT * FROM lf_mem.lf_events")
    return int(engine.scalar("SELECT count(*) FROM lf_events"))


def _prepare_rest(store: Store, reach: str) -> None:
    """Each unit of ``reach`` (what a stop there ends): its last position, the dollars spent
    in its stream up to its end and when it ends (``lf_unit_<reach>``, unit_ends.sql; for a
    period, its last place in time order and the dollars spent in every stream up to it).
    Made once per replay."""
    period = reach in PERIODS
    store.engine.run(
        "guards/unit_ends.sql",
        reach=reach,
        unit=UNIT[reach],
        pos="tpos" if period else "pos",
        through="tusd" if period else "usd_through",
    )


# A nudge comes before its period's stop in time order (the stop's place in it).
_EARLIER_PERIOD = (
    "n.ord < (SELECT e.tpos FROM lf_events e WHERE e.u_stream = s.u_stream AND e.pos = s.pos)"
)


def _finer(a: str, b: str) -> str:
    """The finer of two scopes (a period's reach is its scope: ``parse_policy``)."""
    if a == b or a in PERIODS or b in PERIODS:
        return a
    return a if _ORDER.index(a) <= _ORDER.index(b) else b


class Replay:
    """The history replayed once, ready for any policy: the events (every live call in stream
    order) and the ground truth are prepared on construction, in that order, so a policy is run
    only over a replay that has both.

    Its temporary tables live in two steps of the store's engine (``Engine.begin``, ``step``),
    each dropping what it created when it ends:

    * the replay's own step, from construction to ``close``: ``_prepare_events`` makes
      ``lf_streams`` and ``lf_names`` (numbers.sql; read by the events, the ground truth and the
      scoring's trip list), ``lf_keys`` (stream_keys.sql, read by the events, dropped at once),
      ``lf_outcomes`` (outcomes.sql) and ``lf_steps`` (steps.sql), read by the events,
      ``lf_mem.lf_events`` (events.sql; in its own in-memory database, detached by ``close``)
      and its view ``lf_events`` (read by everything after); ``prepare_truth`` makes
      ``lf_truth``, ``lf_truth_calls``, ``lf_truth_span``, ``lf_waste`` and ``lf_children``
      (read by the scoring); ``run`` makes ``lf_unit_<reach>`` once per reach (unit_ends.sql,
      read by the scoring);
    * one step per ``run``: ``_trace`` makes ``lf_trace`` (trace.sql over the primitive's trace;
      read by ``_trips`` and the scoring), ``_trips`` makes ``lf_first`` (trips_first.sql) and
      ``lf_trips`` (trips_table.sql, trips_stop.sql, trips_nudge.sql; read and pruned by the
      scoring), and ``score`` makes ``lf_stops``, ``lf_stop_children`` and ``lf_killed``
      (``analyzer.guards.scoring``)."""

    def __init__(
        self,
        store: Store,
        labels: Path | None = None,
        policies: list[Policy] | None = None,
        *,
        live: bool = False,
    ) -> None:
        """``policies``: those to be run (the replay then carries only the columns they and the
        scoring read; a policy needing more widens it when run). None: every column. ``live``:
        the replay is made for ``events`` (to feed live guards): it carries the ids of
        ``LIVE`` from the start (``events`` widens a replay without them)."""
        self.store = store
        self.labels = labels
        self._step = store.engine.begin()  # ended by ``close`` (left open, the tables stay)
        try:
            self._prepare(columns_of(policies) | (LIVE if live else frozenset()))
        except BaseException:
            self.close()
            raise

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

    def __enter__(self) -> Replay:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Drop the replay's tables (the events in ``lf_mem`` and the working tables beside
        them: its step ends), so that what comes after (the report) has DuckDB's memory to
        itself."""
        self._step.end()
        self.store.engine.run("DETACH DATABASE IF EXISTS lf_mem")

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
        _prepare_rest(self.store, p.reaches)
        with self.store.engine.step():
            if sweep is not None and sweep[0] == "stop":
                variants = [p.with_param("stop", v) for v in sweep[1]]
                self._trace(p, None)  # one trace, every threshold read off it
                self._trips(variants, 0)
            else:
                variants = [p] if sweep is None else [p.with_param(sweep[0], x) for x in sweep[1]]
                for i, v in enumerate(variants):
                    self._trace(v, i)
                    self._trips([v], i)
            results = score(self.store, variants, detail, stops, self._totals)
        if lives_in_turns(p) and self.turnless:
            note = per_session_note(p, self.turnless, self.calls)
            for r in results:
                r.per_session_calls, r.per_session = self.turnless, note
        return results

    def trips(self, p: Policy) -> list[tuple[str, str]]:
        """Where ``p`` trips over the history, before any scoring: each stop and nudge as
        (call, action), in the replay's order (what a live guard fed the same calls says,
        ``analyzer.guards.guard``). The scoring then leaves out the trips where the guard is
        blind and those in sub-agent runs an earlier stop would never have let start."""
        if not columns_of([p]) <= self.columns:
            self._prepare(self.columns | columns_of([p]))
        with self.store.engine.step():
            self._trace(p, 0)
            self._trips([p], 0)
            found = self.store.engine.rows("guards/trip_calls.sql")
        return [(str(call), str(action)) for call, action in found]

    def events(self) -> list[dict[str, Any]]:
        """The replayed calls, in the replay's order, as rows of ``EVENT_COLUMNS`` (those it
        carries, and always the ids of ``LIVE``: what a live guard fed them needs to see the
        replay's streams, sessions and turns)."""
        if not LIVE.issubset(self.columns):
            self._prepare(self.columns | LIVE)
        return self.store.engine.records("guards/event_rows.sql")

    def _trace(self, p: Policy, variant: int | None) -> None:
        """The guard's value after every call it sees (``lf_trace``, trace.sql; of one variant,
        or of all when ``variant`` is None), with the units its stop reaches and the group a
        trip is counted in (the finer of scope and reach). Narrow rows: a call is its stream
        and position."""
        carry = {
            "reach_unit": UNIT[p.reaches],
            "grp": UNIT[_finer(p.scope, p.reaches)],
            "blind": f"({blind_sql(p)})",
        }
        period = p.scope in PERIODS
        if period:  # a period's calls of every stream, in time order
            carry["ord"] = "tpos"
        fresh = variant is None or variant == 0
        self.store.engine.run(
            "guards/trace.sql",
            into="CREATE OR REPLACE TEMP TABLE lf_trace AS" if fresh else "INSERT INTO lf_trace",
            variant="NULL::INTEGER" if variant is None else str(variant),
            trace=p.primitive.trace(p, carry),
            ord=", ord" if period else "",
        )

    def _trips(self, variants: list[Policy], variant0: int) -> None:
        """Add to ``lf_trips`` each variant's stops (the first crossing of its threshold in
        each group, ``lf_first``, then the first in each reach unit) and nudges (the crossings
        of its nudge level before the stop of their reach unit). Every threshold is read in one
        pass over the trace."""
        engine = self.store.engine
        if variant0 == 0:
            engine.run("guards/trips_table.sql")
        p = variants[0]
        stops = [float(v.stop) for v in variants]
        # A period's group holds calls of every stream: its first crossing is in time order.
        period = p.scope in PERIODS
        o = "ord" if period else "pos"
        picks = ", ".join(
            f"min({o}) FILTER (WHERE {p.crosses('value', t)}) AS p{i}" for i, t in enumerate(stops)
        )
        where = p.crosses("value", min(stops))
        latched = _finer(p.scope, p.reaches) != p.scope  # the value carries over its groups
        if p.primitive.unit_steps(p) and not latched:  # rising by one from 0: where it equals
            first = [math.floor(t) + 1 if p.compare == ">" else math.ceil(t) for t in stops]
            where = f"value IN ({', '.join(str(x) for x in sorted(set(first)))})"
        engine.run(
            "guards/trips_first.sql",
            picks=picks,
            mine=f"(variant IS NULL OR variant = {variant0})",
            crossing=where,
        )
        stop_sql = "guards/trips_stop_period.sql" if period else "guards/trips_stop.sql"
        each = (
            unit_sql(stop_sql, variant=str(variant0 + i), first=f"p{i}") for i in range(len(stops))
        )
        engine.run("INSERT INTO lf_trips {{stops}}", stops=" UNION ALL ".join(each))
        nudges = {  # each variant that nudges: where a row of the trace is its nudge
            variant0 + i: f"((n.variant IS NULL OR n.variant = {variant0 + i})"
            f" AND {v.crosses('n.value', v.nudge_level)}"
            f" AND n.before {'<=' if v.compare == '>' else '<'} {v.nudge_level!r})"
            for i, v in enumerate(variants)
            if v.nudge_level is not None and v.nudge_level < v.stop
        }
        if nudges:  # (every variant's in one pass over the trace)
            cases = (f"CASE WHEN {where} THEN {k} END" for k, where in nudges.items())
            engine.run(
                "guards/trips_nudge.sql",
                which=f"[{', '.join(cases)}]",
                any=" OR ".join(nudges.values()),
                earlier=_EARLIER_PERIOD if period else "n.pos < s.pos",
            )
