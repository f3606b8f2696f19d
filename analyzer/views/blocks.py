"""ccusage's 5-hour billing blocks (``blocks``, ``usage blocks``) over the calls the store
holds, every call once.

A block starts at its first call's time floored to the hour (UTC) and lasts 5 hours; a call
after its end, or more than 5 hours after the call before it, starts the next one; between two
blocks more than 5 hours apart a gap block (``isGap``) runs from 5 hours after the last call to
the next call. The blocks are computed in SQL (``sql/views/blocks.sql``: a recursive CTE, one
step per block); what depends on "now" is computed here: whether a block is active (now before
its end and within 5 hours of its last call), and the active block's burn rate, its projection
to the block's end and its place against a token limit - the same formulas as ccusage 20.

"Now" is the clock's, or ``$LLM_FORENSICS_NOW`` (an ISO time, UTC unless it names a zone), so a
test or a replay of a past afternoon sees the block that was active then.

The JSON is ccusage's ``blocks --json`` (``{"blocks": [...]}``, its field names), with ours added
to each block (``calls``, ``reasoningTokens``, ``costUSDAtLoggedOutput``, ``unpricedCalls``,
``placeholderCalls``, ``costBasis``). Dollars are the store's (as in the usage views): a call
whose log has only a streaming placeholder for its output is priced at the output estimated
from what it wrote; ccusage prices the placeholder, as ``costUSDAtLoggedOutput`` does.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from analyzer.console import severity
from analyzer.engine.store import Store
from analyzer.errors import ForensicsError
from analyzer.model.clock import now
from analyzer.model.formatting import cut, money, printable, wrap
from analyzer.model.timewindow import local
from analyzer.views.table import Column, Table
from analyzer.views.text_table import TextColumn, TextTable, lay_out
from analyzer.views.view import How, View

LENGTH = timedelta(hours=5)  # a block's length (Anthropic's 5-hour usage window)
RECENT = timedelta(days=3)  # --recent: the blocks started in the last 3 days (and the active)
_STORED = Decimal("1e-10")  # dollars to the digits the store keeps (DECIMAL(18, 10))
WARNING = 0.8  # a projection above this share of the token limit is a warning (as ccusage)


def _round(x: float) -> int:
    """JavaScript's ``Math.round`` (a half goes up), as ccusage rounds."""
    return math.floor(x + 0.5)


def iso(ts: datetime | None) -> str | None:
    """A stored (naive UTC) time as ccusage writes it: milliseconds and a ``Z``."""
    return None if ts is None else ts.isoformat(timespec="milliseconds") + "Z"


@dataclass(frozen=True)
class BurnRate:
    """The active block's pace from its first call to its last (ccusage's ``burnRate``)."""

    tokens_per_minute: float  # every token (the four counts)
    tokens_per_minute_for_indicator: float  # input and output only
    cost_per_hour: Decimal

    def to_json(self) -> dict[str, Any]:
        return {
            "costPerHour": self.cost_per_hour,
            "tokensPerMinute": self.tokens_per_minute,
            "tokensPerMinuteForIndicator": self.tokens_per_minute_for_indicator,
        }


@dataclass(frozen=True)
class Projection:
    """The active block at its end if the burn rate holds (ccusage's ``projection``)."""

    total_tokens: int
    total_cost: Decimal  # to the cent, as ccusage rounds it
    remaining_minutes: int

    def to_json(self) -> dict[str, Any]:
        return {
            "remainingMinutes": self.remaining_minutes,
            "totalCost": self.total_cost,
            "totalTokens": self.total_tokens,
        }


@dataclass(frozen=True)
class LimitStatus:
    """The projection against ``--token-limit`` (ccusage's ``tokenLimitStatus``)."""

    limit: int
    projected: int

    @property
    def percent(self) -> float:
        return round(self.projected / self.limit * 100, 2)

    @property
    def status(self) -> str:
        if self.projected > self.limit:
            return "exceeds"
        return "warning" if self.projected > self.limit * WARNING else "ok"

    def to_json(self) -> dict[str, Any]:
        return {
            "limit": self.limit,
            "percentUsed": self.percent,
            "projectedUsage": self.projected,
            "status": self.status,
        }


@dataclass
class Block:
    """A 5-hour block (or the gap between two)."""

    start: datetime
    end: datetime
    first: datetime | None = None  # its first call
    last: datetime | None = None  # its last call (ccusage's actualEndTime)
    gap: bool = False
    active: bool = False
    calls: int = 0
    input: int = 0  # fresh prompt (cache reads and writes apart)
    cache_write: int = 0
    cache_read: int = 0
    output: int = 0  # reasoning included
    reasoning: int = 0
    usd: Decimal = Decimal(0)  # the store's dollars (placeholder output at its estimate)
    usd_at_logged: Decimal = Decimal(0)  # placeholder calls at their logged output
    unpriced_calls: int = 0
    placeholder_calls: int = 0
    models: list[str] = field(default_factory=list)
    burn: BurnRate | None = None
    projection: Projection | None = None
    limit: LimitStatus | None = None

    @property
    def id(self) -> str:
        return f"gap-{iso(self.start)}" if self.gap else str(iso(self.start))

    @property
    def total_tokens(self) -> int:
        return self.input + self.cache_write + self.cache_read + self.output

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "startTime": iso(self.start),
            "endTime": iso(self.end),
            "actualEndTime": iso(self.last),
            "isActive": self.active,
            "isGap": self.gap,
            "entries": self.calls,
            "tokenCounts": {
                "inputTokens": self.input,
                "outputTokens": self.output,
                "cacheCreationInputTokens": self.cache_write,
                "cacheReadInputTokens": self.cache_read,
            },
            "totalTokens": self.total_tokens,
            "costUSD": self.usd,
            "models": self.models,
            "burnRate": self.burn.to_json() if self.burn else None,
            "projection": self.projection.to_json() if self.projection else None,
        }
        if self.limit is not None:
            out["tokenLimitStatus"] = self.limit.to_json()
        out.update(
            {  # ours
                "calls": self.calls,
                "reasoningTokens": self.reasoning,
                "costUSDAtLoggedOutput": self.usd_at_logged,
                "unpricedCalls": self.unpriced_calls,
                "placeholderCalls": self.placeholder_calls,
            }
        )
        return out


@dataclass
class Blocks:
    """The blocks shown, what "now" was, and the token limit they were held to."""

    blocks: list[Block]
    now: datetime
    token_limit: int | None = None
    any_calls: bool = True  # the store (in the window) holds calls with a time
    active_only: bool = False

    @property
    def active(self) -> Block | None:
        return next((b for b in self.blocks if b.active), None)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"blocks": [b.to_json() for b in self.blocks]}
        if self.active_only and self.any_calls and not self.blocks:  # (as ccusage says)
            out["message"] = "No active block"
        out["now"] = iso(self.now)
        out["tokenLimit"] = self.token_limit
        out["costBasis"] = (
            "costUSD: the store's dollars (a streaming-placeholder output priced at its "
            "estimate); costUSDAtLoggedOutput: at the logged output, as ccusage prices it"
        )
        return out


def _block(r: tuple[Any, ...]) -> Block:
    (start, first, last, calls, inp, cw, cr, out, reasoning, usd, logged, unpriced, ph, models) = r
    return Block(
        start=start,
        end=start + LENGTH,
        first=first,
        last=last,
        calls=int(calls),
        input=int(inp),
        cache_write=int(cw),
        cache_read=int(cr),
        output=int(out),
        reasoning=int(reasoning),
        usd=Decimal(usd),
        usd_at_logged=Decimal(logged),
        unpriced_calls=int(unpriced),
        placeholder_calls=int(ph),
        models=[str(m) for m in models or []],
    )


def _with_gaps(found: list[Block]) -> list[Block]:
    """``found`` with a gap block between two blocks more than 5 hours apart, all by their
    start, as ccusage orders them (a gap starts 5 hours after a block's last call, so it may
    start after the next block's hour: it is then listed after that block)."""
    out: list[Block] = []
    for before, b in zip([None, *found], found, strict=False):
        if before and before.last and b.first and b.first - before.last > LENGTH:
            out.append(Block(start=before.last + LENGTH, end=b.first, gap=True))
        out.append(b)
    return sorted(out, key=lambda b: b.start)


def burn_rate(b: Block) -> BurnRate | None:
    """Tokens a minute and dollars an hour from the block's first call to its last (none
    when they are at the same time)."""
    if b.gap or b.first is None or b.last is None:
        return None
    minutes = (b.last - b.first).total_seconds() / 60
    if minutes <= 0:
        return None
    return BurnRate(
        tokens_per_minute=b.total_tokens / minutes,
        tokens_per_minute_for_indicator=(b.input + b.output) / minutes,
        cost_per_hour=(b.usd / Decimal(repr(minutes)) * 60).quantize(_STORED),
    )


def projection(b: Block, at: datetime) -> Projection | None:
    """The active block at its end, its burn rate going on from ``at``."""
    if not b.active or b.burn is None:
        return None
    remaining = max(0.0, (b.end - at).total_seconds() / 60)
    tokens = b.total_tokens + b.burn.tokens_per_minute * remaining
    cost = b.usd + b.burn.cost_per_hour / 60 * Decimal(repr(remaining))
    return Projection(_round(tokens), cost.quantize(Decimal("0.01")), _round(remaining))


def blocks(
    store: Store,
    at: datetime | None = None,
    token_limit: str | None = None,
    recent: bool = False,
    active_only: bool = False,
) -> Blocks:
    """The store's blocks as seen at ``at`` (default: :func:`now`). ``token_limit``: a number
    of tokens, or ``max`` (the most tokens a past block used); ``recent``: only the blocks
    started in the last 3 days, and the active one; ``active_only``: only the active one."""
    at = now() if at is None else at
    found = [_block(r) for r in store.engine.rows("views/blocks.sql")]
    for b in found:
        assert b.last is not None
        b.active = at - b.last < LENGTH and at < b.end
        b.burn = burn_rate(b) if b.active else None
        b.projection = projection(b, at)
    limit = parse_limit(token_limit, found)
    for b in found:
        if b.projection is not None and limit is not None:
            b.limit = LimitStatus(limit, b.projection.total_tokens)
    shown = _with_gaps(found)
    if recent:
        shown = [b for b in shown if b.start >= at - RECENT or b.active]
    if active_only:
        shown = [b for b in shown if b.active]
    return Blocks(shown, at, limit, bool(found), active_only)


def parse_limit(text: str | None, found: list[Block]) -> int | None:
    """``--token-limit``: a number of tokens, or ``max``: the most a past (not active) block
    used (none if none used any)."""
    if text is None or text == "":
        return None
    if text == "max":
        most = max((b.total_tokens for b in found if not b.active), default=0)
        return most or None
    try:
        limit = int(text)
    except ValueError:
        raise ForensicsError(f"--token-limit: {text!r} is not a number of tokens or max") from None
    if limit <= 0:
        raise ForensicsError(f"--token-limit: {text!r} is not above 0")
    return limit


# -- shown ----------------------------------------------------------------------------------


def _span(d: timedelta) -> str:
    """A length of time as ``4h 05m`` (``3d 2h`` from a day on).

    >>> _span(timedelta(minutes=245)), _span(timedelta(hours=74, minutes=20))
    ('4h 05m', '3d 2h')
    """
    minutes = _round(d.total_seconds() / 60)
    if minutes >= 24 * 60:
        return f"{minutes // (24 * 60):,}d {minutes % (24 * 60) // 60}h"
    return f"{minutes // 60}h {minutes % 60:02d}m"


def _duration(b: Block, at: datetime) -> str:
    """A block's length to its last call, or the active block's minutes left."""
    if b.active:
        return f"active, {_round((b.end - at).total_seconds() / 60)}m left"
    return _span((b.last or b.start) - b.start)


def _in_time(b: Block) -> tuple[datetime, bool]:
    """Where a block is shown on a terminal: by its first call, a gap just before the call
    that ends it (under the block before it)."""
    return (b.end, False) if b.gap else (b.first or b.start, True)


_DATED = re.compile(r"-20\d{6}$")  # a model's release date (claude-sonnet-4-5-20250929)


def _models(b: Block) -> str:
    """The block's models, short (as ccusage shows them: no ``claude-``, no date)."""
    return ", ".join(_DATED.sub("", m.removeprefix("claude-")) for m in b.models) or "-"


class BlocksView(View):
    """The blocks on a terminal (a row each; a gap as one dimmed line; the active block's burn
    rate and projection below it), as ccusage's JSON, and as a table (CSV)."""

    name = "blocks"

    def __init__(self, shown: Blocks, before: list[str] | None = None) -> None:
        self.shown = shown
        self.before = before or []

    def json(self) -> dict[str, Any]:
        return self.shown.to_json()

    def text(self, how: How) -> str:
        s = self.shown
        if not s.blocks:
            said = "No active block." if s.any_calls and s.active_only else "No usage data found."
            return "".join(f"{line}\n" for line in self.before) + said + "\n"
        limit = s.token_limit
        cols = [
            TextColumn("length", 17, lambda b: _duration(b, s.now)),
            TextColumn("models", 31, lambda b: cut(printable(_models(b)), 31), 3),
            TextColumn("calls", 7, lambda b: f"{b.calls:,}", 5),
            TextColumn("tokens", 12, lambda b: f"{b.total_tokens:,}"),
        ]
        if limit:
            cols.append(TextColumn("% limit", 8, lambda b: f"{b.total_tokens / limit:.1%}", 4))
        cols.append(TextColumn("$", 10, lambda b: money(b.usd)))
        rows: list[tuple[str, Block]] = []
        below: dict[int, str] = {}
        for b in sorted(s.blocks, key=_in_time):
            if b.gap:
                if rows:
                    span = f"{self._when(b.start, how)} - {self._when(b.end, how)}"
                    gap = f"  {span}  (no calls: {_span(b.end - b.start)} gap)"
                    below[len(rows) - 1] = severity(gap, "info")
                continue
            rows.append((self._when(b.start, how), b))
        table = TextTable(f"start ({how.tz})", cols, rows, below=below)
        laid = lay_out(table, how.width)
        lines = laid.lines
        notes = [self._active(s.active, how)] if s.active is not None else []
        if laid.left_out:
            notes.append(
                f"left out to fit {how.width} columns: {', '.join(laid.left_out)} "
                "(--json or --csv has every column)"
            )
        placeholders = sum(b.placeholder_calls for b in s.blocks)
        if placeholders:
            logged = sum((b.usd_at_logged for b in s.blocks), Decimal(0))
            usd = sum((b.usd for b in s.blocks), Decimal(0))
            notes.append(
                f"$: {placeholders:,} calls log only a streaming placeholder for their output, "
                f"priced at an estimate of it: {money(usd)} against {money(logged)} at the "
                "logged counts (ccusage's figure)"
            )
        if s.active is not None and s.active.limit is not None:
            st = s.active.limit
            if st.status != "ok":
                notes.append(
                    f"warning: the active block is projected to use {st.projected:,} tokens, "
                    f"{st.percent:.1f}% of the token limit of {st.limit:,}"
                )
        for n in notes:
            lines += wrap(n, how.width)
        return "".join(f"{line}\n" for line in self.before) + "\n".join(lines) + "\n"

    @staticmethod
    def _when(ts: datetime, how: How) -> str:
        return f"{local(ts, how.tz):%Y-%m-%d %H:%M}"

    @staticmethod
    def _active(b: Block, how: How) -> str:
        """The active block's burn rate and projection, in words."""
        if b.burn is None or b.projection is None:
            return "active block: no burn rate yet (one call, or all at one time)"
        p = b.projection
        limit = f" ({b.limit.percent:.1f}% of the token limit)" if b.limit is not None else ""
        return (
            f"active block: burn rate {b.burn.tokens_per_minute:,.0f} tokens/min, "
            f"{money(b.burn.cost_per_hour)}/hour; projected by {local(b.end, how.tz):%H:%M} "
            f"if it holds: {p.total_tokens:,} tokens{limit}, {money(p.total_cost)}"
        )

    def table(self) -> Table:
        return blocks_table(self.shown)


BLOCK_COLUMNS = [
    Column("id"),
    Column("start_time", "time", "UTC"),
    Column("end_time", "time", "UTC"),
    Column("actual_end_time", "time", "UTC"),
    Column("is_active"),
    Column("is_gap"),
    Column("entries", "int", "calls"),
    Column("input_tokens", "int", "tokens"),
    Column("output_tokens", "int", "tokens"),
    Column("cache_creation_input_tokens", "int", "tokens"),
    Column("cache_read_input_tokens", "int", "tokens"),
    Column("total_tokens", "int", "tokens"),
    Column("cost_usd", "usd", "USD"),
    Column("models", "list"),
    Column("burn_rate_tokens_per_minute"),
    Column("burn_rate_tokens_per_minute_for_indicator"),
    Column("burn_rate_cost_per_hour", "usd", "USD"),
    Column("projection_total_tokens", "int", "tokens"),
    Column("projection_total_cost", "usd", "USD"),
    Column("projection_remaining_minutes", "int", "minutes"),
    Column("token_limit", "int", "tokens"),
    Column("token_limit_percent_used"),
    Column("token_limit_projected_usage", "int", "tokens"),
    Column("token_limit_status"),
    Column("calls", "int", "calls"),
    Column("reasoning_tokens", "int", "tokens"),
    Column("cost_usd_at_logged_output", "usd", "USD"),
    Column("unpriced_calls", "int", "calls"),
    Column("placeholder_calls", "int", "calls"),
]


def blocks_table(s: Blocks) -> Table:
    """One flat row per block (gaps too): every field of the JSON (what ``--csv`` writes)."""
    rows: list[Sequence[Any]] = []
    for b in s.blocks:
        burn, p, st = b.burn, b.projection, b.limit
        rows.append(
            [
                b.id,
                b.start,
                b.end,
                b.last,
                str(b.active).lower(),
                str(b.gap).lower(),
                b.calls,
                b.input,
                b.output,
                b.cache_write,
                b.cache_read,
                b.total_tokens,
                b.usd,
                b.models,
                None if burn is None else repr(burn.tokens_per_minute),
                None if burn is None else repr(burn.tokens_per_minute_for_indicator),
                None if burn is None else burn.cost_per_hour,
                None if p is None else p.total_tokens,
                None if p is None else p.total_cost,
                None if p is None else p.remaining_minutes,
                None if st is None else st.limit,
                None if st is None else repr(st.percent),
                None if st is None else st.projected,
                None if st is None else st.status,
                b.calls,
                b.reasoning,
                b.usd_at_logged,
                b.unpriced_calls,
                b.placeholder_calls,
            ]
        )
    return Table(list(BLOCK_COLUMNS), rows)
