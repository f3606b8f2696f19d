"""The guard you tested, live: a policy fed the calls of a running agent one at a time.

``Guard.load("penguin_stale_context")`` (a preset, or a policy of a TOML file as the backtest
reads them) gives a guard; ``guard.feed(call)`` gives its ``Decision`` for each call as it
happens: continue, nudge or stop, with the reason in words and the guard's value. Its
decisions are the replay's (``analyzer.guards.replay``): for any history, the calls fed one by
one trip where the backtest says (``tests/test_guard_live.py`` holds it to that over generated
histories, every preset on the sample data and the real corpora).

What it keeps is what the replay derives from the order of the calls, per stream: positions,
the session and turn units (``sql/guards/events.sql``), the prompt's growth, the tool calls
before a call in its turn, and each primitive's value (its tracker, in its module of
``analyzer.guards.primitives``). A policy's expressions are SQL over one call, evaluated in
Python where they compile (``analyzer.guards.expr``: DuckDB's answers, tested so), else by
DuckDB as the replay evaluates them (an in-memory connection, made only then: a guard starts
without DuckDB or pyarrow, and pickles). One column looks
ahead: ``truncated``, which a bill knows of a call cut at its length only from the next call's
prompt. A guard whose policy reads it holds such a call until the next call of its stream (or
``finish``), as the replay judges it, and its decision comes then, naming the call it is about.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields
from datetime import UTC, datetime
from decimal import Decimal
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from analyzer.errors import ForensicsError
from analyzer.guards.blindness import named_columns
from analyzer.guards.columns import KEPT_RATIO, TRUNCATION_GAP_S, columns_of
from analyzer.guards.expr import Unsure, compile_expr
from analyzer.guards.policy import Policy, all_policies, load_policies
from analyzer.guards.primitives import EVENT_COLUMNS, PERIODS
from analyzer.guards.primitives.live import Periods, Seen, Step, Tracker, micros

if TYPE_CHECKING:
    import pyarrow as pa

    from analyzer.engine.engine import Engine

_TEN = Decimal("1e-10")
_REMEMBERED = 4096  # distinct evaluations a guard keeps
# The Python type each column's value is held as, for its expressions to be evaluated in
# Python (a value of another, such as a float token count, goes to DuckDB, which casts it).
_HELD: dict[str, type] = {
    "VARCHAR": str,
    "BIGINT": int,
    "INTEGER": int,
    "TIMESTAMP": datetime,
    "DECIMAL(18,10)": Decimal,
    "BOOLEAN": bool,
}


@cache
def arrow_schema() -> pa.Schema:
    """The replay's columns as an Arrow schema (a guard fed many calls at once whose policy
    DuckDB evaluates registers them as one table of it)."""
    import pyarrow as pa

    arrow = {
        "VARCHAR": pa.string(),
        "BIGINT": pa.int64(),
        "INTEGER": pa.int32(),
        "TIMESTAMP": pa.timestamp("us"),
        "DECIMAL(18,10)": pa.decimal128(18, 10),
        "BOOLEAN": pa.bool_(),
    }
    return pa.schema([(name, arrow[kind]) for name, kind in EVENT_COLUMNS.items()])


def __getattr__(name: str) -> Any:
    if name == "SCHEMA":  # (the schema as it was, a constant: made when asked for)
        return arrow_schema()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def guard_expressions(p: Policy) -> tuple[str, str, str, str, str]:
    """What a guard evaluates over each call, as SQL: whether it sees it (watch), whether it
    counts, whether it resets (never NULL), its weight (a DOUBLE, 0 where NULL) and its key."""
    count, reset, weight, key = (p.setting(s) for s in ("count", "reset", "weight", "key"))
    return (
        f"coalesce(({p.watch}), false)" if p.watch else "true",
        f"coalesce(({count}), false)" if count else "true",
        f"coalesce(({reset}), false)" if reset else "false",
        f"coalesce(CAST(({weight}) AS DOUBLE), 0)" if weight else "1",
        f"({key})" if key else "NULL",
    )


@dataclass(frozen=True)
class Call:
    """One model call as a guard sees it: the replay's event fields an agent knows of the call
    once its reply is in (docs/guards.md lists the columns). Only ``call_id`` is required; what is
    not known stays None, as in the replay. ``response_kind`` is one of ``text``,
    ``tool_call``, ``truncated_tool_call``, ``thinking_only``, ``empty`` (None: not known);
    ``tool_key`` names the tools it called and their arguments (equal calls, equal keys);
    ``refused``, ``error_key`` and ``result_key`` what the agent answered its tool calls;
    ``step_key``, ``step_errors`` and ``step_failed`` the call as a step (one that called
    tools: ``Call.step`` makes them from its actions and what they got back), from which the
    guard derives ``stale`` as the replay does. A call without a ``stream_key`` is of its
    session's stream."""

    call_id: str
    session_id: str | None = None
    turn_id: str | None = None
    stream_key: str | None = None
    ts: datetime | None = None
    model: str | None = None
    app: str | None = None
    api_key: str | None = None
    response_kind: str | None = None
    finish_reason: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    reasoning_tokens: int | None = None
    cost_usd: float | Decimal | None = None
    visible_chars: int | None = None
    content_chars: int | None = None
    reply_saved: bool | None = None
    http_status: int | None = None
    output_final: bool | None = None
    tool_key: str | None = None
    tool_call_count: int | None = None
    is_bill: bool = False
    refused: bool | None = None
    error_key: str | None = None
    result_key: str | None = None
    step_key: str | None = None
    step_errors: str | None = None
    step_failed: bool | None = None
    parent_session_id: str | None = None

    @staticmethod
    def step(acts: Iterable[tuple[str, str | None, bool]]) -> dict[str, Any]:
        """A step's fields (``step_key``, ``step_errors``, ``step_failed``) from its tool calls,
        each as (what the action means, what its result means or None where none came back,
        whether the result was an error), as sql/guards/steps.sql makes them from the messages:
        ``Call(call_id=..., **Call.step(acts))``. Equal actions and equal results must have
        equal strings (the ingest's meaning keys, or your own); ';' and '=' join them."""
        made = list(acts)
        if not made:
            return {"step_key": None, "step_errors": None, "step_failed": None}
        pairs = sorted({f"{act}={got if got is not None else '?'}" for act, got, _ in made})
        errors = sorted({got for _, got, err in made if err and got is not None})
        return {
            "step_key": ";".join(pairs),
            "step_errors": ";".join(errors) or None,
            "step_failed": all(err and got is not None for _, got, err in made),
        }

    @classmethod
    def from_openai(
        cls,
        reply: Any,
        *,
        session_id: str | None = None,
        turn_id: str | None = None,
        ts: datetime | None = None,
    ) -> Call:
        """A call from an OpenAI-style chat completion (its JSON as a dict, or an SDK object
        with ``model_dump``): the first choice's message, finish reason and usage. A reply
        with tool calls is a ``tool_call`` (its key: each tool's name and a hash of its
        arguments, sorted); with text, ``text``; with reasoning only, ``thinking_only``;
        else ``empty``."""
        doc = reply.model_dump() if hasattr(reply, "model_dump") else dict(reply)
        choice = (doc.get("choices") or [{}])[0]
        message = choice.get("message") or {}
        usage = doc.get("usage") or {}
        text = message.get("content") or ""
        tools = message.get("tool_calls") or []
        reasoning = message.get("reasoning_content") or message.get("reasoning")
        kind = "tool_call" if tools else "text" if text.strip() else "empty"
        if kind == "empty" and reasoning:
            kind = "thinking_only"
        details = usage.get("completion_tokens_details") or {}
        return cls(
            call_id=str(doc.get("id") or f"call-{id(reply)}"),
            session_id=session_id,
            turn_id=turn_id,
            ts=ts or (datetime.fromtimestamp(doc["created"], UTC) if doc.get("created") else None),
            model=doc.get("model"),
            response_kind=kind,
            finish_reason=choice.get("finish_reason"),
            input_tokens=usage.get("prompt_tokens"),
            output_tokens=usage.get("completion_tokens"),
            reasoning_tokens=details.get("reasoning_tokens"),
            visible_chars=len("".join(text.split())),
            content_chars=len(text),
            tool_key=";".join(sorted(_tool_key(t) for t in tools)) or None,
            tool_call_count=len(tools),
        )

    @classmethod
    def from_event(cls, row: dict[str, Any]) -> Call:
        """A call from one row of the replay's events (what the order derives is left out:
        the guard derives it again)."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in row.items() if k in names and v is not None})


def _tool_key(call: dict[str, Any]) -> str:
    """One tool call as ``name:hash`` of its arguments (their JSON with sorted keys, where
    they parse): the same call, the same key."""
    function = call.get("function") or {}
    args = function.get("arguments") or ""
    with contextlib.suppress(TypeError, ValueError):
        args = json.dumps(json.loads(args), sort_keys=True, separators=(",", ":"))
    digest = hashlib.sha256(str(args).encode()).hexdigest()[:16]
    return f"{function.get('name')}:{digest}"


@dataclass(frozen=True)
class Decision:
    """What the guard says of one call: ``continue``, ``nudge`` or ``stop``, why in words, and
    its value after the call (None where the policy's value did not move on it)."""

    action: str
    call_id: str
    policy: str
    reason: str = ""
    value: float | None = None
    threshold: float | None = None

    @property
    def stops(self) -> bool:
        return self.action == "stop"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class _Steps:
    """What the guard keeps of one session's steps to tell a stale one (steps.sql): how many
    times each step key came, and the errors its steps got."""

    times: dict[str, int] = field(default_factory=dict)
    errors: set[str] = field(default_factory=set)

    def stale(self, call: Call) -> bool | None:
        """Whether the step ``call`` is stale: its key comes for the 3rd time or later, or it
        failed and every error it got an earlier step got (None: no step)."""
        if call.step_key is None:
            return None
        times = self.times[call.step_key] = self.times.get(call.step_key, 0) + 1
        got = call.step_errors.split(";") if call.step_errors is not None else []
        again = bool(call.step_failed) and bool(got) and all(e in self.errors for e in got)
        self.errors.update(got)
        return times >= 3 or again


@dataclass
class _Stream:
    """What the guard keeps of one stream: where it is in its order and its units (events.sql),
    the call held for the next one's prompt, the primitive's value, the reach unit's stop."""

    tracker: Tracker
    pos: int = 0
    last: Call | None = None
    session: int = 0
    turn: int = 0
    tools_in_turn: int = 0
    held: dict[str, Any] | None = None
    reach_unit: int | None = None
    stop: Decision | None = None  # the stop of the current reach unit
    steps: dict[str | None, _Steps] = field(default_factory=dict)  # by session id
    period: int | None = None  # the period of its latest call (a policy living in one)


@dataclass
class _Row:
    """One call ready to be judged: the replay's row of it and its units."""

    stream: _Stream
    event: dict[str, Any]
    session: int
    turn: int


def _same(now: str | None, before: str | None, now_is_key: bool, before_is_key: bool) -> bool:
    """events.sql's continuity of a session (a turn): the same id, or no id beside the one
    that names the stream."""
    return now == before or (now is None and before_is_key) or (before is None and now_is_key)


def _truncated(e: dict[str, Any], next_in: int | None, next_gap: float | None) -> bool | None:
    """lf_truncated (truncated.sql, over lf_output_discarded of classify.sql)."""
    if e["response_kind"] == "truncated_tool_call":
        return True
    blind = _cut_unseen(e)
    if blind and (next_in is None or (next_gap is not None and next_gap > TRUNCATION_GAP_S)):
        return None
    if not blind or next_in is None or next_gap is None or next_gap > TRUNCATION_GAP_S:
        return False
    if e["input_tokens"] is None or e["output_tokens"] is None:
        return False
    return bool(next_in - e["input_tokens"] < e["output_tokens"] * KEPT_RATIO)


def _cut_unseen(e: dict[str, Any]) -> bool:
    """A call cut at its length whose reply the data does not hold (a bill's): whether it was
    a cut-off tool call is known only from the next call's prompt (lf_output_discarded)."""
    return (
        e["finish_reason"] == "length"
        and e["content_chars"] is None
        and e["tool_call_count"] is None
    )


def _waits(e: dict[str, Any]) -> bool:
    """Whether a call's ``truncated`` is known only from the next call."""
    return e["response_kind"] != "truncated_tool_call" and _cut_unseen(e)


def _cost(x: float | Decimal | None) -> Decimal | None:
    if x is None:
        return None
    return (x if isinstance(x, Decimal) else Decimal(repr(float(x)))).quantize(_TEN)


def _naive_utc(ts: datetime | None) -> datetime | None:
    if ts is None or ts.tzinfo is None:
        return ts
    return ts.astimezone(UTC).replace(tzinfo=None)


class Guard:
    """A policy live: ``feed`` it each call as it happens, act on the ``Decision``.

    A budget living in a period (a day, a 5-hour window, a month) keeps one value over every
    stream, fed in time order as the calls happen; ``baseline`` is what was spent in each
    period before this guard's calls (dollars by the period's key: ``2026-11-29``,
    ``2026-11-29T14:00``, ``2026-11``; ``analyzer.guards.spend``), added to its value;
    ``window`` the latest 5-hour window its calls continue (start, last call: naive UTC;
    ``spend.last_window``), so that its windows are the store's."""

    def __init__(
        self,
        policy: Policy,
        baseline: dict[str, Decimal] | None = None,
        window: tuple[datetime, datetime] | None = None,
    ) -> None:
        self.policy = policy
        # A period's value and stop, shared by every stream, and where each call falls.
        period = policy.scope in PERIODS
        self._periods = Periods(policy.scope, *(window or (None, None))) if period else None
        self._shared = _Stream(policy.primitive.tracker(policy)) if period else None
        self._baseline = {k: float(v) for k, v in (baseline or {}).items()}
        self.trips: list[Decision] = []  # every nudge and stop so far, in order
        self.calls = 0
        self._streams: dict[str, _Stream] = {}
        self._looks_ahead = "truncated" in columns_of([policy])
        self._select = ", ".join(guard_expressions(policy))
        self._named = sorted(named_columns(self._select))
        self._held = [(c, _HELD[EVENT_COLUMNS[c]]) for c in self._named]
        # What the expressions said of the values they read (SQL over one call is a function
        # of the columns it names): a call like one seen before is not evaluated again.
        self._said: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        cols = ", ".join(
            f"CAST(${i + 1} AS {EVENT_COLUMNS[c]}) AS {c}" for i, c in enumerate(self._named)
        )
        self._one_row = f"SELECT {self._select} FROM (SELECT {cols or '1 AS lf_row'}) lf_events"
        self._start()

    def _start(self) -> None:
        """What a guard makes of its policy and does not pickle: its expressions compiled in
        Python (None where one does not compile: DuckDB evaluates them all), and DuckDB's
        connection, made when first needed."""
        compiled = [compile_expr(e) for e in guard_expressions(self.policy)]
        self._compiled: list[Callable[[Mapping[str, Any]], Any]] | None = (
            None if any(f is None for f in compiled) else [f for f in compiled if f is not None]
        )
        self._engine: Engine | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k not in ("_compiled", "_engine")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._start()

    @classmethod
    def load(cls, name: str, policies: str | Path | None = None) -> Guard:
        """The guard of the preset ``name``, or of the policy ``name`` in the TOML file
        ``policies`` (the backtest's ``--policies`` format)."""
        found = load_policies(Path(policies)) if policies is not None else all_policies()
        for p in found:
            if p.name == name:
                return cls(p)
        where = f"in {policies}" if policies is not None else "among the presets"
        known = ", ".join(p.name for p in found)
        raise ForensicsError(f"no policy {name!r} {where} (there: {known})")

    # -- feeding ------------------------------------------------------------------------
    def feed(self, call: Call) -> Decision:
        """The guard's decision after ``call``: a stop or a nudge if it tripped (at this call,
        or at the call held for this one's prompt), else continue."""
        said = self._judge(self._ready(call))
        return self._worst(said, call.call_id)

    def feed_all(self, calls: Iterable[Call]) -> list[Decision]:
        """Feed many calls at once (a history read back): the same decisions as feeding them
        one by one, their expressions evaluated in one query. Returns the trips. A guard of a
        period (a spend cap over every stream) is fed them in time order, as they happened
        (calls at the same time, or with none, in the order given)."""
        if self._periods is not None:
            calls = sorted(calls, key=lambda c: (c.ts is None, _naive_utc(c.ts) or datetime.min))
        ready: list[_Row] = []
        for call in calls:
            ready.extend(self._ready(call))
        return [d for d in self._judge(ready) if d.action != "continue"]

    def finish(self) -> list[Decision]:
        """The end of the history: the calls still held for a next call are judged without
        one (as the replay judges a stream's last call). Returns the trips."""
        ready = []
        for stream in self._streams.values():
            if stream.held is not None:
                held, stream.held = stream.held, None
                held["truncated"] = _truncated(held, None, None)
                ready.append(_Row(stream, held, held.pop("_session"), held.pop("_turn")))
        return [d for d in self._judge(ready) if d.action != "continue"]

    def standing(self, stream_key: str) -> Decision | None:
        """The stop in force over the stream's latest call: the stop of the reach unit (turn,
        session or stream) that call is in, if the guard tripped there."""
        stream = self._streams.get(stream_key)
        if stream is None:
            return None
        if self._shared is not None:  # a period's stop, while the stream's call is in it
            in_force = stream.period is not None and stream.period == self._shared.reach_unit
            return self._shared.stop if in_force else None
        return stream.stop

    # -- the order ----------------------------------------------------------------------
    def _ready(self, call: Call) -> list[_Row]:
        """The rows this call makes ready: the one held for it (if any), then its own (unless
        it must wait for the next call)."""
        self.calls += 1
        key = call.stream_key if call.stream_key is not None else (call.session_id or "")
        stream = self._streams.get(key)
        if stream is None:
            stream = self._streams[key] = _Stream(self.policy.primitive.tracker(self.policy))
        e = self._event(call, key, stream)
        out = []
        if stream.held is not None:
            held, stream.held = stream.held, None
            gap = None
            if e["ts"] is not None and held["ts"] is not None:
                gap = (micros(e["ts"]) - micros(held["ts"])) / 1_000_000
            held["truncated"] = _truncated(held, e["input_tokens"], gap)
            out.append(_Row(stream, held, held.pop("_session"), held.pop("_turn")))
        if self._looks_ahead and _waits(e):
            stream.held = {**e, "_session": stream.session, "_turn": stream.turn}
        else:
            e["truncated"] = _truncated(e, None, None) if self._looks_ahead else None
            out.append(_Row(stream, e, stream.session, stream.turn))
        return out

    def _event(self, call: Call, key: str, s: _Stream) -> dict[str, Any]:
        """The replay's row of ``call`` (events.sql): its own fields, and what the order
        derives (position, units, prompt growth, tool calls before it in its turn)."""
        e: dict[str, Any] = {name: None for name in EVENT_COLUMNS}
        e.update({f.name: getattr(call, f.name) for f in fields(Call) if f.name in e})
        e["stream_key"], e["ts"], e["cost_usd"] = key, _naive_utc(call.ts), _cost(call.cost_usd)
        e["tool_call_count"] = call.tool_call_count  # (read by ``truncated``; no column)
        turn = call.turn_id if call.turn_id is not None else call.session_id
        prev = s.last
        if prev is None:
            s.session = s.turn = 1
        else:
            prev_turn = prev.turn_id if prev.turn_id is not None else prev.session_id
            session_is_key = (call.session_id == key, prev.session_id == key)
            if not _same(call.session_id, prev.session_id, *session_is_key):
                s.session += 1
            if not _same(turn, prev_turn, turn == key, prev_turn == key):
                s.turn += 1
                s.tools_in_turn = 0
        s.pos += 1
        e["pos"] = s.pos
        if prev is not None and prev.input_tokens is not None and call.input_tokens is not None:
            e["prompt_delta"] = call.input_tokens - prev.input_tokens
        kind = call.response_kind
        e["stalled"] = kind in ("thinking_only", "empty")
        e["tool_call"] = kind in ("tool_call", "truncated_tool_call") or call.tool_key is not None
        e["tools_before"] = s.tools_in_turn
        s.tools_in_turn += int(e["tool_call"])
        if call.step_key is not None:
            e["stale"] = s.steps.setdefault(call.session_id, _Steps()).stale(call)
        s.last = call
        return e

    # -- judging ------------------------------------------------------------------------
    def _evaluate(self, rows: list[_Row]) -> list[tuple[Any, ...]]:
        """The policy's expressions over each row (watch, count, reset, weight, key), as the
        replay evaluates them: in Python where they compile (``analyzer.guards.expr``, DuckDB's
        answers), else by DuckDB, in one query."""
        if self._compiled is None:
            return self._sql(rows)
        out: list[tuple[Any, ...]] = []
        for r in rows:
            e = r.event
            if all(e[c] is None or type(e[c]) is kind for c, kind in self._held):
                with contextlib.suppress(Unsure):
                    out.append(tuple(f(e) for f in self._compiled))
                    continue
            out.extend(self._sql([r]))  # a value Python does not mirror DuckDB on
        return out

    def _db(self) -> Engine:
        """DuckDB, for a policy whose expressions do not all compile in Python (imported then
        only: a live guard starts without it)."""
        if self._engine is None:
            import duckdb

            from analyzer.engine.engine import Engine
            from analyzer.engine.store import OFFLINE

            self._engine = Engine(duckdb.connect(config=OFFLINE))
        return self._engine

    def _sql(self, rows: list[_Row]) -> list[tuple[Any, ...]]:
        """The policy's expressions over each row, by DuckDB, in one query."""
        if not rows:
            return []
        if len(rows) == 1:  # one call: its named columns as parameters (no table to build)
            values = tuple(rows[0].event[c] for c in self._named)
            found = self._said.get(values)
            if found is None:
                found = tuple(self._db().one(self._one_row, list(values)) or ())
                if len(self._said) >= _REMEMBERED:
                    self._said.clear()
                self._said[values] = found
            return [found]
        import pyarrow as pa

        table = pa.Table.from_pylist([r.event for r in rows], schema=arrow_schema())
        table = table.append_column("lf_row", pa.array(range(len(rows)), pa.int64()))
        engine = self._db()
        engine.register("lf_events", table)  # (replacing the last: one per guard)
        try:
            return engine.rows(f"SELECT {self._select} FROM lf_events ORDER BY lf_row")
        finally:
            engine.unregister("lf_events")

    def _judge(self, rows: list[_Row]) -> list[Decision]:
        return [self._one(r, v) for r, v in zip(rows, self._evaluate(rows), strict=True)]

    def _one(self, row: _Row, said: tuple[Any, ...]) -> Decision:
        """Where this call leaves the guard (trips_first.sql, trips_stop.sql, trips_nudge.sql:
        the first crossing of the stop in each reach unit; a nudge where the value comes up
        to the nudge level from below, before the stop)."""
        p, s, e = self.policy, row.stream, row.event
        units: dict[str, int | None] = {"stream": 0, "session": row.session, "turn": row.turn}
        base = 0.0
        if self._periods is not None and self._shared is not None:
            # a period: every stream's calls in one value (a call with no time is in none)
            if e["ts"] is None:
                return Decision("continue", e["call_id"], p.name)
            units[p.scope], period_key = self._periods.place(e["ts"])
            row.stream.period, s = units[p.scope], self._shared
            base = self._baseline.get(period_key, 0.0)
        reach = units[p.reaches]
        if reach != s.reach_unit:
            s.reach_unit, s.stop = reach, None
        watch, count, reset, weight, key = said
        if not watch:
            return Decision("continue", e["call_id"], p.name)
        step = s.tracker.see(
            Seen(units[p.scope] or 0, e["pos"], e["ts"], count, reset, float(weight), key)
        )
        if step is not None and base:  # what was spent in the period before
            step = Step(step.value + base, step.before + base)
        if step is None or s.stop is not None:
            value = None if step is None else step.value
            return Decision("continue", e["call_id"], p.name, value=value)
        action, level = self._trip(step)
        if action == "continue":
            return Decision("continue", e["call_id"], p.name, value=step.value)
        why = _why(p, action, step.value, level)
        d = Decision(action, e["call_id"], p.name, why, step.value, level)
        if action == "stop":
            s.stop = d
        self.trips.append(d)
        return d

    def _trip(self, step: Step) -> tuple[str, float | None]:
        p = self.policy
        if _crosses(p, step.value, float(p.stop)):
            return "stop", float(p.stop)
        level = p.nudge_level
        if level is None or level >= p.stop or not _crosses(p, step.value, float(level)):
            return "continue", None
        below = step.before <= level if p.compare == ">" else step.before < level
        return ("nudge", float(level)) if below else ("continue", None)

    def _worst(self, said: list[Decision], call_id: str) -> Decision:
        for action in ("stop", "nudge"):
            for d in said:
                if d.action == action:
                    return d
        value = said[-1].value if said else None
        return Decision("continue", call_id, self.policy.name, value=value)


def _crosses(p: Policy, value: float, level: float) -> bool:
    return value > level if p.compare == ">" else value >= level


def _why(p: Policy, action: str, value: float, level: float | None) -> str:
    """The reason in words: what the value counts, where it stands, what a stop ends."""
    what = p.primitive.describe(p, value)
    sign = ">" if p.compare == ">" else ">="
    at, stop = p.primitive.level(p, level or 0.0), p.primitive.level(p, p.stop)
    if action == "stop":
        return f"{p.name}: {what}; stop at {sign} {at}: end the {p.reaches}"
    return f"{p.name}: {what}; nudge at {sign} {at} (stop at {stop})"
