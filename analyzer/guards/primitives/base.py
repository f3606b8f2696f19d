"""What every guard primitive is made of: the replayed call's columns (``EVENT_COLUMNS``), the
settings a primitive reads of a policy, the SQL every trace starts from, and ``Primitive``, the
base each primitive's module fills in (``analyzer.guards.primitives``).

Predicates, keys and weights are SQL expressions over one replayed call: the columns of
``EVENT_COLUMNS`` (one row of the replay, ``lf_events``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from analyzer.errors import ForensicsError
from analyzer.guards.primitives.live import Tracker

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
# The unit a policy's scope lives in: a whole number per stream, session or turn (within a
# stream), or per period of time across every stream (sql/guards/periods.sql).
UNIT = {
    "stream": "u_stream",
    "session": "u_session",
    "turn": "u_turn",
    "day": "u_day",
    "window": "u_window",
    "month": "u_month",
}
# The scopes that are periods of time (a day, ccusage's 5-hour window, a month, in UTC): they
# span every stream, and a guard's value in them runs in time order (``tpos``), not a
# stream's.
PERIODS = ("day", "window", "month")


class Settings(Protocol):
    """What a primitive reads of a policy: its settings by name
    (``analyzer.guards.policy.Policy``)."""

    @property
    def name(self) -> str: ...

    @property
    def scope(self) -> str: ...

    @property
    def watch(self) -> str | None: ...

    @property
    def stop(self) -> float: ...

    def setting(self, name: str) -> Any: ...


def as_bool(expr: str | None, default: str) -> str:
    """A policy's predicate as SQL that is never NULL (``default`` when it has none)."""
    return f"coalesce(({expr}), false)" if expr else default


def unit_sql(path: str, /, **names: str) -> str:
    """The one statement of the unit ``sql/<path>`` as text, its slots filled with ``names``
    (SQL the code chose: columns, a policy's expressions, a validated number), to be put
    into another unit's slot (``trace.sql`` takes a primitive's trace)."""
    from analyzer.engine.engine import fill, statements, unit_text  # (the replay's; not live)

    (statement,) = statements(fill(unit_text(path), names))
    return statement


def seen_sql(p: Settings, carry: dict[str, str]) -> str:
    """The calls the guard sees at all (its ``watch``), in the replay's order (stream, then
    position), with its unit and the ``carry`` columns (name: SQL over a call): seen.sql."""
    cols = "".join(f"{expr} AS {name}, " for name, expr in carry.items())
    watch = as_bool(p.watch, "true")
    if p.scope in PERIODS:  # a call with no time is in no period
        watch = f"e.ts IS NOT NULL AND {watch}"
    return unit_sql("guards/seen.sql", unit=UNIT[p.scope], carry=cols, watch=watch)


def keep(carry: dict[str, str]) -> str:
    """The columns every trace returns before its value: the call, its unit, the carried."""
    return ", ".join(("unit", "u_stream", "pos", *carry))


@dataclass(frozen=True)
class Primitive:
    """A primitive: its own settings (with defaults), what can be swept, how to check them, its
    trace (the replay), its tracker (the same value live) and its value in words. One module
    each (``analyzer.guards.primitives.<name>``), registered in ``PRIMITIVES``."""

    name: ClassVar[str]
    # Its settings and their defaults, in the order a policy's parameters are listed.
    defaults: ClassVar[dict[str, Any]]
    # Settings listed even when empty (the others only when set).
    always_listed: ClassVar[tuple[str, ...]] = ()
    sweepable: ClassVar[tuple[str, ...]] = ()
    expressions: ClassVar[tuple[str, ...]] = ()  # settings that are SQL over one call
    # Settings a policy must give, and what each is (for the error that says it is missing).
    required: ClassVar[dict[str, str]] = {}

    def check(self, raw: dict[str, Any], where: str) -> None:
        """Raise a ForensicsError naming ``where`` if ``raw`` (a policy's TOML) is wrong: by
        default, if it lacks one of the ``required`` settings."""
        for name, what in self.required.items():
            if not raw.get(name):
                raise ForensicsError(f"{where}: a {self.name} needs '{name}' ({what})")

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

    def traced(self, p: Settings, carry: dict[str, str], unit: str, **names: str) -> str:
        """The trace unit ``sql/<unit>`` filled: what it reads (``seen_sql``), the columns it
        keeps, and the primitive's own ``names``. (The unit is named whole, as a literal, so
        the cache keys the replay by it.)"""
        return unit_sql(unit, seen=seen_sql(p, carry), keep=keep(carry), **names)

    def tracker(self, p: Settings) -> Tracker:
        """The value kept call by call by a live guard, as the trace computes it (a class of
        the primitive's module, ``Tracker``)."""
        raise NotImplementedError

    def describe(self, p: Settings, value: float) -> str:
        """The value in words, for a trip's reason ("3 calls in a row with the same tool_key")."""
        raise NotImplementedError

    def level(self, p: Settings, level: float) -> str:
        """A threshold in words, as the value reads (``describe``): a number by default."""
        return f"{level:g}"

    def unit_steps(self, p: Settings) -> bool:
        """Whether the value only ever rises one at a time (it first reaches a threshold T
        where it equals T rounded up)."""
        return False
