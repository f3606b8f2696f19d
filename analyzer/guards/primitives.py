"""The guard primitives: each one's settings, their validation, and its trace, in one place.

A guard sees the calls of a unit (a stream, a session or a turn) one at a time, and keeps one
value; a threshold on that value nudges or stops. A primitive says what the value is: its
*trace* is one set-based query giving the value after every call where it can reach a new
high (the replay reads every threshold off it, see ``analyzer.guards.backtest``).

Adding a primitive is adding a class here (its settings, how to check them, its trace SQL) and
registering it in ``PRIMITIVES``; policies name it by ``type``.

Predicates, keys and weights are SQL expressions over one replayed call: the columns of
``EVENT_COLUMNS`` (one row of the replay, ``lf_events``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from analyzer.errors import ForensicsError

# One call of the replay: what a policy's expressions may use, with its type.
EVENT_COLUMNS: dict[str, str] = {
    "call_id": "VARCHAR",
    "stream_key": "VARCHAR",
    "session_id": "VARCHAR",
    "turn_id": "VARCHAR",
    "pos": "BIGINT",
    "ts": "TIMESTAMP",
    "model": "VARCHAR",
    "app": "VARCHAR",
    "api_key": "VARCHAR",
    "response_kind": "VARCHAR",
    "finish_reason": "VARCHAR",
    "input_tokens": "BIGINT",
    "output_tokens": "BIGINT",
    "reasoning_tokens": "BIGINT",
    "cost_usd": "DECIMAL(18,10)",
    "visible_chars": "BIGINT",
    "content_chars": "BIGINT",
    "reply_saved": "BOOLEAN",
    "http_status": "INTEGER",
    "output_final": "BOOLEAN",
    "tool_key": "VARCHAR",
    "prompt_delta": "BIGINT",
    "stalled": "BOOLEAN",
    "tool_call": "BOOLEAN",
    "truncated": "BOOLEAN",
    "tools_before": "BIGINT",
    "is_bill": "BOOLEAN",
    "refused": "BOOLEAN",
    "error_key": "VARCHAR",
    "result_key": "VARCHAR",
}
# The unit a policy's scope lives in: a whole number per stream, session or turn.
UNIT = {"stream": "u_stream", "session": "u_session", "turn": "u_turn"}


class Settings(Protocol):
    """What a primitive reads of a policy: its settings by name
    (``analyzer.guards.policy.Policy``)."""

    @property
    def name(self) -> str: ...

    @property
    def scope(self) -> str: ...

    @property
    def watch(self) -> str | None: ...

    def setting(self, name: str) -> Any: ...


def _b(expr: str | None, default: str) -> str:
    return f"coalesce(({expr}), false)" if expr else default


def seen_sql(p: Settings, carry: dict[str, str]) -> str:
    """The CTE ``seen``: the calls the guard sees at all (its ``watch``), in the replay's order
    (stream, then position), with its unit and the ``carry`` columns (name: SQL over a call)."""
    cols = "".join(f"{expr} AS {name}, " for name, expr in carry.items())
    return f"""seen AS (
        SELECT {UNIT[p.scope]} AS unit, u_stream, pos, {cols}e.* EXCLUDE (u_stream, pos)
        FROM lf_events e WHERE {_b(p.watch, "true")})"""


def _keep(carry: dict[str, str]) -> str:
    """The columns every trace returns before its value: the call, its unit, the carried."""
    return ", ".join(("unit", "u_stream", "pos", *carry))


# A running window over the replay in its own order: no partition and no sort (DuckDB
# streams it). A unit is a run of consecutive rows, so "since the unit began" is "since the
# latest row that began one".
RUNNING = "OVER (ROWS UNBOUNDED PRECEDING)"


def _fresh_before(keep: str, before: bool) -> str:
    """The final SELECT of a streamed trace over ``b``: the value before the call is the
    previous row's, within the unit."""
    if not before:
        return f"SELECT {keep}, value FROM b"
    return f"""SELECT {keep}, value,
               CASE WHEN fresh THEN 0 ELSE lag(value) OVER () END AS before
        FROM b"""


@dataclass(frozen=True)
class Primitive:
    """A primitive: its own settings (with defaults), what can be swept, and its trace."""

    name: ClassVar[str]
    # Its settings and their defaults, in the order a policy's parameters are listed.
    defaults: ClassVar[dict[str, Any]]
    # Settings listed even when empty (the others only when set).
    always_listed: ClassVar[tuple[str, ...]] = ()
    sweepable: ClassVar[tuple[str, ...]] = ()
    expressions: ClassVar[tuple[str, ...]] = ()  # settings that are SQL over one call

    def check(self, raw: dict[str, Any], where: str) -> None:
        """Raise a ForensicsError naming ``where`` if ``raw`` (a policy's TOML) is wrong."""

    def listed(self, p: Settings) -> dict[str, Any]:
        out = {}
        for name in self.defaults:
            value = p.setting(name)
            if value is not None or name in self.always_listed:
                out[name] = value
        return out

    def trace(self, p: Settings, carry: dict[str, str], before: bool) -> str:
        """SELECT unit, u_stream, pos, the ``carry`` columns, value (and ``before``: the value
        before the call) for the calls where the value can reach a new threshold."""
        raise NotImplementedError

    def unit_steps(self, p: Settings) -> bool:
        """Whether the value only ever rises one at a time (it first reaches a threshold T
        where it equals T rounded up)."""
        return False


def _with_before(body: str, before: bool) -> str:
    if not before:
        return body
    return f"""SELECT *, lag(value, 1, 0) OVER (PARTITION BY unit ORDER BY pos) AS before
               FROM ({body})"""


@dataclass(frozen=True)
class Counter(Primitive):
    """Adds ``weight`` for each call matching ``count``; a call matching ``reset`` sets it to 0
    (and does not count itself)."""

    name: ClassVar[str] = "counter"
    defaults: ClassVar[dict[str, Any]] = {"count": None, "reset": None, "weight": "1"}
    always_listed: ClassVar[tuple[str, ...]] = ("weight",)
    expressions: ClassVar[tuple[str, ...]] = ("count", "reset", "weight")

    def check(self, raw: dict[str, Any], where: str) -> None:
        if not raw.get("count"):
            raise ForensicsError(f"{where}: a {self.name} needs 'count' (what it counts)")

    def trace(self, p: Settings, carry: dict[str, str], before: bool) -> str:
        # A counter's value only rises at the calls that count, so only those are traced: each
        # counts from the unit's last reset before it.
        keep = _keep(carry)

        def hits(weight: str) -> str:
            return f"""WITH {seen_sql(p, carry)},
        v AS (
            SELECT {keep}, {_b(p.setting("count"), "true")} AS hit,
                   {_b(p.setting("reset"), "false")} AS rst{weight}
            FROM seen)"""

        if self.unit_steps(p):
            # Counting by one: a running count over the replay, less the count where the
            # unit or the last reset began - no sort.
            return f"""{hits("")},
        a AS (
            SELECT *, hit AND NOT rst AS adds,
                   unit IS DISTINCT FROM lag(unit) OVER () AS fresh,
                   sum((hit AND NOT rst)::INTEGER) {RUNNING} AS c
            FROM v WHERE hit OR rst),
        b AS (
            SELECT *, c - max(CASE WHEN fresh OR rst THEN c - adds::INTEGER END) {RUNNING} AS n
            FROM a)
        SELECT {keep}, n::DOUBLE AS value{", n::DOUBLE - 1 AS before" if before else ""}
        FROM b WHERE adds"""
        # Any other weight sums in the unit's own order (the sum of fractions as before).
        segment = (
            """max(CASE WHEN rst THEN pos END)
                      OVER (PARTITION BY unit ORDER BY pos ROWS UNBOUNDED PRECEDING)"""
            if p.setting("reset")
            else "NULL::BIGINT"
        )
        weight = f", coalesce(CAST(({p.setting('weight')}) AS DOUBLE), 0) AS w"
        return f"""{hits(weight)},
        g AS (
            SELECT *, {segment} AS seg
            FROM v WHERE hit OR rst),
        t AS (
            SELECT *, sum(w) OVER (PARTITION BY unit, seg ORDER BY pos
                                   ROWS UNBOUNDED PRECEDING) AS value
            FROM g WHERE hit AND NOT rst)
        SELECT {keep}, value{", value - w AS before" if before else ""}
        FROM t"""

    def unit_steps(self, p: Settings) -> bool:
        return str(p.setting("weight")).strip() == "1"


@dataclass(frozen=True)
class Budget(Counter):
    """A counter that never resets, weighted by cost unless told otherwise."""

    name: ClassVar[str] = "budget"
    defaults: ClassVar[dict[str, Any]] = {"count": "true", "reset": None, "weight": "cost_usd"}

    def check(self, raw: dict[str, Any], where: str) -> None:
        pass


@dataclass(frozen=True)
class RunLength(Primitive):
    """How many calls in a row had the same ``key`` (a NULL key is no run)."""

    name: ClassVar[str] = "run_length"
    defaults: ClassVar[dict[str, Any]] = {"key": None}
    expressions: ClassVar[tuple[str, ...]] = ("key",)

    def check(self, raw: dict[str, Any], where: str) -> None:
        if not raw.get("key"):
            raise ForensicsError(f"{where}: a {self.name} needs 'key' (what must repeat)")

    def trace(self, p: Settings, carry: dict[str, str], before: bool) -> str:
        # A run is counted from its first call: the latest call so far that began the unit or
        # did not continue a run (``idx`` numbers the seen calls in the replay's order).
        keep = _keep(carry)
        return f"""WITH {seen_sql(p, carry)},
        v AS (SELECT {keep}, ({p.setting("key")}) AS k FROM seen),
        a AS (
            SELECT *, row_number() OVER () AS idx,
                   unit IS DISTINCT FROM lag(unit) OVER () AS fresh,
                   coalesce(k = lag(k) OVER (), false) AS same
            FROM v),
        b AS (
            SELECT *, CASE WHEN k IS NULL THEN 0
                           ELSE idx + 1 - max(CASE WHEN fresh OR NOT same THEN idx END)
                                          {RUNNING}
                      END AS value
            FROM a)
        {_fresh_before(keep, before)}"""

    def unit_steps(self, p: Settings) -> bool:
        return True


@dataclass(frozen=True)
class Period(RunLength):
    """How many times a cycle of ``period`` calls (A-B-A-B...) repeated, by ``key``."""

    name: ClassVar[str] = "period"
    defaults: ClassVar[dict[str, Any]] = {"key": None, "period": 2}
    always_listed: ClassVar[tuple[str, ...]] = ("period",)
    sweepable: ClassVar[tuple[str, ...]] = ("period",)

    def check(self, raw: dict[str, Any], where: str) -> None:
        super().check(raw, where)
        period = raw.get("period", 2)
        if not isinstance(period, int) or isinstance(period, bool) or period < 2:
            raise ForensicsError(f"{where}: 'period' is a whole number of calls, at least 2")

    def trace(self, p: Settings, carry: dict[str, str], before: bool) -> str:
        # The call ``period`` back is in the same unit when its unit is this one (a unit is
        # a run of rows); the first call of a unit never repeats one.
        period = int(p.setting("period"))
        keep = _keep(carry)
        return f"""WITH {seen_sql(p, carry)},
        v AS (SELECT {keep}, ({p.setting("key")}) AS k FROM seen),
        a AS (
            SELECT *, row_number() OVER () AS idx,
                   unit IS DISTINCT FROM lag(unit) OVER () AS fresh,
                   coalesce(unit = lag(unit, {period}) OVER ()
                            AND k = lag(k, {period}) OVER (), false) AS hit
            FROM v),
        b AS (
            SELECT *, CASE WHEN hit
                           THEN (idx - max(CASE WHEN NOT hit THEN idx END) {RUNNING}
                                 + {period}) // {period}
                           ELSE 0 END AS value
            FROM a)
        {_fresh_before(keep, before)}"""


@dataclass(frozen=True)
class Window(Primitive):
    """How many of the last ``size`` calls (or the calls of the last ``seconds``) matched
    ``count``."""

    name: ClassVar[str] = "window"
    defaults: ClassVar[dict[str, Any]] = {"count": None, "size": None, "seconds": None}
    sweepable: ClassVar[tuple[str, ...]] = ("size", "seconds")
    expressions: ClassVar[tuple[str, ...]] = ("count",)

    def check(self, raw: dict[str, Any], where: str) -> None:
        if not raw.get("count"):
            raise ForensicsError(f"{where}: a window needs 'count'")
        if ("size" in raw) == ("seconds" in raw):
            raise ForensicsError(f"{where}: a window needs one of 'size' (calls) or 'seconds'")

    def trace(self, p: Settings, carry: dict[str, str], before: bool) -> str:
        keep = _keep(carry)
        size = p.setting("size")
        if size is not None:
            # The running count less the count ``size`` calls back (or where the unit began).
            n = int(size)
            return f"""WITH {seen_sql(p, carry)},
        v AS (SELECT {keep}, {_b(p.setting("count"), "true")} AS hit FROM seen),
        a AS (
            SELECT *, unit IS DISTINCT FROM lag(unit) OVER () AS fresh,
                   sum(hit::INTEGER) {RUNNING} AS c
            FROM v),
        b AS (
            SELECT *, c - coalesce(CASE WHEN lag(unit, {n}) OVER () = unit
                                        THEN lag(c, {n}) OVER () END,
                                   max(CASE WHEN fresh THEN c - hit::INTEGER END) {RUNNING})
                          AS value
            FROM a)
        {_fresh_before(keep, before)}"""
        seconds = float(p.setting("seconds") or 0)
        frame = f"ORDER BY ts RANGE BETWEEN INTERVAL ({seconds}) SECOND PRECEDING AND CURRENT ROW"
        return _with_before(
            f"""WITH {seen_sql(p, carry)},
        v AS (SELECT {keep}, ts, {_b(p.setting("count"), "true")} AS hit
              FROM seen WHERE ts IS NOT NULL)
        SELECT {keep},
               sum(CASE WHEN hit THEN 1 ELSE 0 END)
                   OVER (PARTITION BY unit {frame}) AS value
        FROM v""",
            before,
        )

    def unit_steps(self, p: Settings) -> bool:
        return True


PRIMITIVES: dict[str, Primitive] = {
    prim.name: prim for prim in (Counter(), Budget(), RunLength(), Period(), Window())
}
