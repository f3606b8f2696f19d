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

from analyzer.engine.engine import fill, statements, unit_text
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
    "step_key": "VARCHAR",
    "step_errors": "VARCHAR",
    "step_failed": "BOOLEAN",
    "stale": "BOOLEAN",
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


def unit_sql(path: str, /, **names: str) -> str:
    """The one statement of the unit ``sql/<path>`` as text, its slots filled with ``names``
    (SQL the code chose: columns, a policy's expressions, a validated number), to be put
    into another unit's slot (``trace.sql`` takes a primitive's trace)."""
    (statement,) = statements(fill(unit_text(path), names))
    return statement


def seen_sql(p: Settings, carry: dict[str, str]) -> str:
    """The calls the guard sees at all (its ``watch``), in the replay's order (stream, then
    position), with its unit and the ``carry`` columns (name: SQL over a call): seen.sql."""
    cols = "".join(f"{expr} AS {name}, " for name, expr in carry.items())
    return unit_sql("guards/seen.sql", unit=UNIT[p.scope], carry=cols, watch=_b(p.watch, "true"))


def _keep(carry: dict[str, str]) -> str:
    """The columns every trace returns before its value: the call, its unit, the carried."""
    return ", ".join(("unit", "u_stream", "pos", *carry))


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

    def trace(self, p: Settings, carry: dict[str, str]) -> str:
        """SELECT unit, u_stream, pos, the ``carry`` columns, value and ``before`` (the value
        before the call) for the calls where the value can reach a new threshold: the primitive's
        unit ``sql/guards/trace_<name>.sql``, filled (``seen_sql`` gives what it reads)."""
        raise NotImplementedError

    def unit_steps(self, p: Settings) -> bool:
        """Whether the value only ever rises one at a time (it first reaches a threshold T
        where it equals T rounded up)."""
        return False


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

    def trace(self, p: Settings, carry: dict[str, str]) -> str:
        # A counter's value only rises at the calls that count, so only those are traced: each
        # counts from the unit's last reset before it. Counting by one, a running count over
        # the replay (no sort); any other weight sums in the unit's own order.
        names = {
            "seen": seen_sql(p, carry),
            "keep": _keep(carry),
            "count": _b(p.setting("count"), "true"),
            "reset": _b(p.setting("reset"), "false"),
        }
        if self.unit_steps(p):
            return unit_sql("guards/trace_counter.sql", **names)
        segment = "max(CASE WHEN rst THEN pos END) OVER r" if p.setting("reset") else None
        return unit_sql(
            "guards/trace_counter_weighted.sql",
            **names,
            weight=str(p.setting("weight")),
            segment=segment or "NULL::BIGINT",
        )

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

    def trace(self, p: Settings, carry: dict[str, str]) -> str:
        return unit_sql(
            "guards/trace_run_length.sql",
            seen=seen_sql(p, carry),
            keep=_keep(carry),
            key=str(p.setting("key")),
        )

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

    def trace(self, p: Settings, carry: dict[str, str]) -> str:
        return unit_sql(
            "guards/trace_period.sql",
            seen=seen_sql(p, carry),
            keep=_keep(carry),
            key=str(p.setting("key")),
            period=str(int(p.setting("period"))),
        )


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

    def trace(self, p: Settings, carry: dict[str, str]) -> str:
        names = {
            "seen": seen_sql(p, carry),
            "keep": _keep(carry),
            "count": _b(p.setting("count"), "true"),
        }
        size = p.setting("size")
        if size is not None:
            return unit_sql("guards/trace_window_size.sql", **names, size=str(int(size)))
        seconds = float(p.setting("seconds") or 0)
        return unit_sql("guards/trace_window_seconds.sql", **names, seconds=str(seconds))

    def unit_steps(self, p: Settings) -> bool:
        # A window of seconds can jump where the calls' clock runs backwards.
        return p.setting("size") is not None


PRIMITIVES: dict[str, Primitive] = {
    prim.name: prim for prim in (Counter(), Budget(), RunLength(), Period(), Window())
}
