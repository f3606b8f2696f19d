"""Usage views: tokens, calls and dollars per day, week, month, session, project or model (the
tables a ccusage user knows), over the calls the store holds, every call once.

Tokens follow ccusage's columns: ``input`` is the fresh prompt (neither read from nor written to
the cache), ``cache write`` and ``cache read`` the cached parts, ``output`` the reply (reasoning
included; ``reasoning`` says how much of it). Dollars are kept apart by cost basis (billed,
reported by the agent's log, apportioned from a run's stated cost, estimated from list prices),
and calls with tokens but no price are counted as unpriced, never as free.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

from analyzer.store import Store
from analyzer.verdicts import Verdict, verdicts

VIEWS = ("daily", "weekly", "monthly", "session", "project", "model")
BASES = ("billed", "reported", "apportioned", "estimated")
TOKENS = ("input", "cache_write", "cache_read", "output", "reasoning", "total_tokens")

_LOCAL = "timezone($tz, timezone('UTC', ts))"  # a stored (naive UTC) time, in the zone shown
_KEYS = {
    "daily": f"strftime({_LOCAL}, '%Y-%m-%d')",
    "weekly": f"strftime(date_trunc('week', {_LOCAL}), '%Y-%m-%d')",  # ISO: from Monday
    "monthly": f"strftime({_LOCAL}, '%Y-%m')",
    "session": "coalesce(session_id, stream_key)",
    "project": "coalesce(project, app, '(none)')",
    "model": "coalesce(model, '(no model)') || CASE WHEN variant = 'fast' THEN ' (fast)' "
    "ELSE '' END",
}
_UNKNOWN_TIME = "(no time)"


@dataclass
class UsageRow:
    """One line of a usage view (or of its breakdown by model)."""

    key: str
    calls: int = 0
    input: int = 0
    cache_write: int = 0
    cache_read: int = 0
    output: int = 0
    reasoning: int = 0
    usd: dict[str, Decimal] = field(default_factory=dict)  # by cost basis
    unpriced_calls: int = 0
    first_ts: datetime | None = None
    last_ts: datetime | None = None
    models: list[str] = field(default_factory=list)
    project: str | None = None  # the session view's project
    run: Verdict | None = None  # the session view's: how the run ended, where its log says

    @property
    def total_tokens(self) -> int:
        return self.input + self.cache_write + self.cache_read + self.output

    @property
    def total_usd(self) -> Decimal:
        return sum(self.usd.values(), Decimal(0))

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"key": self.key, "calls": self.calls}
        out.update({t: getattr(self, t) for t in TOKENS})
        out["usd"] = float(self.total_usd)
        out.update({f"usd_{b}": float(self.usd.get(b, 0)) for b in BASES})
        out["unpriced_calls"] = self.unpriced_calls
        out["first"] = self.first_ts.isoformat() if self.first_ts else None
        out["last"] = self.last_ts.isoformat() if self.last_ts else None
        out["models"] = self.models
        if self.project is not None:
            out["project"] = self.project
        if self.run is not None:
            out["run"] = self.run.to_json()
        return out


@dataclass
class Usage:
    """A usage view: its rows, their totals, and (with a breakdown) each row's models."""

    view: str
    tz: str
    rows: list[UsageRow]
    total: UsageRow
    breakdown: dict[str, list[UsageRow]] = field(default_factory=dict)
    # A period view's calls without a time: the files they come from (their logs keep none).
    untimed_files: list[str] = field(default_factory=list)

    def bases(self) -> list[str]:
        """The cost bases present (in a fixed order)."""
        return [b for b in BASES if b in self.total.usd]

    def to_json(self) -> dict[str, Any]:
        def row(r: UsageRow) -> dict[str, Any]:
            out = r.to_json()
            if r.key in self.breakdown:
                out["breakdown"] = [b.to_json() for b in self.breakdown[r.key]]
            return out

        return {
            "view": self.view,
            "tz": self.tz,
            "rows": [row(r) for r in self.rows],
            "totals": self.total.to_json(),
        }


def _select(key: str, by_model: bool) -> str:
    model = _KEYS["model"]
    return f"""
        SELECT coalesce({key}, '{_UNKNOWN_TIME}') AS k,
               {model if by_model else "NULL"} AS m,
               count(*) AS calls,
               coalesce(sum(greatest(coalesce(input_tokens, 0) - coalesce(cached_input_tokens, 0)
                                     - coalesce(cache_write_tokens, 0), 0)), 0) AS input,
               coalesce(sum(cache_write_tokens), 0) AS cache_write,
               coalesce(sum(cached_input_tokens), 0) AS cache_read,
               coalesce(sum(output_tokens), 0) AS output,
               coalesce(sum(reasoning_tokens), 0) AS reasoning,
               sum(cost_usd) FILTER (WHERE cost_basis = 'billed') AS billed,
               sum(cost_usd) FILTER (WHERE cost_basis = 'reported') AS reported,
               sum(cost_usd) FILTER (WHERE cost_basis = 'apportioned') AS apportioned,
               sum(cost_usd) FILTER (WHERE cost_basis = 'estimated') AS estimated,
               count(*) FILTER (WHERE cost_usd IS NULL
                                AND (coalesce(input_tokens, 0) > 0
                                     OR coalesce(output_tokens, 0) > 0)) AS unpriced,
               min(ts) AS first_ts, max(ts) AS last_ts,
               list(DISTINCT {model} ORDER BY {model}) AS models,
               mode(coalesce(project, app)) AS project
        FROM live_calls
        GROUP BY ALL"""


def _row(r: tuple[Any, ...], key: str) -> UsageRow:
    (_, _, calls, inp, cw, cr, out, reasoning, billed, reported, apportioned, estimated, unpriced,
     first, last, models, project) = r  # fmt: skip
    usd = {
        b: Decimal(v)
        for b, v in zip(BASES, (billed, reported, apportioned, estimated), strict=True)
        if v is not None
    }
    return UsageRow(
        key=key, calls=int(calls), input=int(inp), cache_write=int(cw), cache_read=int(cr),
        output=int(out), reasoning=int(reasoning), usd=usd, unpriced_calls=int(unpriced),
        first_ts=first, last_ts=last, models=[str(m) for m in models or []],
        project=None if project is None else str(project),
    )  # fmt: skip


def _add(into: UsageRow, r: UsageRow) -> None:
    into.calls += r.calls
    into.input += r.input
    into.cache_write += r.cache_write
    into.cache_read += r.cache_read
    into.output += r.output
    into.reasoning += r.reasoning
    into.unpriced_calls += r.unpriced_calls
    for b, v in r.usd.items():
        into.usd[b] = into.usd.get(b, Decimal(0)) + v
    if r.first_ts is not None and (into.first_ts is None or r.first_ts < into.first_ts):
        into.first_ts = r.first_ts
    if r.last_ts is not None and (into.last_ts is None or r.last_ts > into.last_ts):
        into.last_ts = r.last_ts
    into.models = sorted(set(into.models) | set(r.models))


def usage(store: Store, view: str, tz: str = "UTC", breakdown: bool = False) -> Usage:
    """The ``view`` (one of :data:`VIEWS`), times bucketed in ``tz``; with ``breakdown``,
    each row's models too. Rows are in time order for a period, else most dollars first."""
    if view not in VIEWS:
        raise ValueError(f"unknown usage view {view!r}")
    key = _KEYS[view]
    params = {"tz": tz} if "$tz" in key else {}
    rows = [_row(r, str(r[0])) for r in store.con.execute(_select(key, False), params).fetchall()]
    untimed: list[str] = []
    if view in ("daily", "weekly", "monthly"):
        rows.sort(key=lambda r: (r.key == _UNKNOWN_TIME, r.key))
        if rows and rows[-1].key == _UNKNOWN_TIME:
            untimed = [
                str(p)
                for (p,) in store.con.execute(
                    """SELECT DISTINCT s.path FROM live_calls c JOIN sources s USING (source_id)
                       WHERE c.ts IS NULL ORDER BY 1"""
                ).fetchall()
            ]
    elif view == "session":
        runs = verdicts(store, [r.key for r in rows])
        for r in rows:
            r.run = runs.get(r.key)
        # In time order; sessions without times (a log with none) in their runs' order.
        rows.sort(key=lambda r: (r.last_ts is None, r.last_ts or datetime.min,
                                 (r.run.stream_key, r.run.seq or 0) if r.run else ("", 0),
                                 r.key))  # fmt: skip
    else:
        rows.sort(key=lambda r: (-r.total_usd, -r.total_tokens, r.key))
    if view != "session":
        for r in rows:
            r.project = None
    total = UsageRow(key="Total")
    for r in rows:
        _add(total, r)
    total.project = None
    parts: dict[str, list[UsageRow]] = {}
    if breakdown:
        for found in store.con.execute(_select(key, True), params).fetchall():
            part = _row(found, str(found[1]))
            part.project = None
            parts.setdefault(str(found[0]), []).append(part)
        for items in parts.values():
            items.sort(key=lambda r: (-r.total_usd, -r.total_tokens, r.key))
    return Usage(view, tz, rows, total, parts, untimed)
