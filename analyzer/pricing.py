"""Estimated cost for calls whose log carries tokens but no dollars.

Prices come from ``genai-prices`` (pydantic's maintained, offline price data; chosen over
LiteLLM's model_prices JSON because it models 5-minute and 1-hour cache writes, price tiers
and price history, and ships as a small library). Its ``calc_price`` takes about 0.3 ms a call,
too slow for a history of a million calls, and a price is linear in each kind of token within a
price tier: so each model's per-token prices are read off the library once (per model, provider
and day, as prices change over time), for every tier, and costs are computed in SQL.

How tokens are billed (the same as the providers and genai-prices):

* ``input_tokens`` is the whole prompt; the part read from the cache (``cached_input_tokens``)
  is billed at the cache-read price, the part written to it (``cache_write_tokens``) at the
  cache-write price - the 1-hour share (``cache_write_1h_tokens``) at the 1-hour price - and
  only the rest at the input price. Cached input is never counted twice.
* ``output_tokens`` includes reasoning tokens, billed as output.
* A tier (e.g. prompts over 200k tokens) applies its prices to all tokens of the call.

A model the library does not know gets no cost (NULL, "unpriced"), named once in a warning:
never a guess.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal
from functools import lru_cache

import pyarrow as pa

from analyzer.console import warn

# Probe sizes: small enough to stay under any tier, large enough for exact per-token prices.
_PROBE = 1_000_000


@dataclass(frozen=True)
class TierPrice:
    above: int  # applies when input_tokens > above (-1 for the base tier)
    upto: int | None  # ... and input_tokens <= upto
    input: Decimal  # USD per token
    cache_read: Decimal
    cache_write_5m: Decimal
    cache_write_1h: Decimal
    output: Decimal


def _provider_id(model: str, provider: str | None) -> str | None:
    if provider:
        return provider.lower()
    if "/" in model:
        return "openrouter"
    return None


def _calc(model: str, provider: str | None, when: datetime | None, **usage: int) -> Decimal:
    from genai_prices import Usage, calc_price

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = calc_price(
            Usage(**usage),
            model_ref=model,
            provider_id=_provider_id(model, provider),
            genai_request_timestamp=when,
        )
    return Decimal(result.total_price)


def _tier_starts(model: str, provider: str | None, when: datetime | None) -> list[int]:
    from genai_prices import Usage, calc_price
    from genai_prices.types import TieredPrices

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = calc_price(
            Usage(input_tokens=1), model_ref=model, provider_id=_provider_id(model, provider),
            genai_request_timestamp=when,
        )  # fmt: skip
    starts: set[int] = set()
    for value in vars(result.model_price).values():
        if isinstance(value, TieredPrices):
            starts.update(t.start for t in value.tiers)
    return sorted(starts)


@lru_cache(maxsize=4096)
def tier_prices(model: str, provider: str | None, day: date | None) -> tuple[TierPrice, ...] | None:
    """Per-token prices of ``model`` on ``day`` for each of its tiers; None if unknown."""
    when = datetime(day.year, day.month, day.day, 12, tzinfo=UTC) if day else None
    try:
        starts = _tier_starts(model, provider, when)
    except Exception:  # genai-prices raises LookupError and friends for unknown models
        return None
    bounds = [-1, *starts]
    tiers = []
    for i, above in enumerate(bounds):
        upto = bounds[i + 1] if i + 1 < len(bounds) else None
        # Probe with a total prompt inside this tier: one token above its start.
        n = _PROBE if above < 0 else above + 1
        if upto is not None and n > upto:
            n = upto

        def per_token(extra: dict[str, int], count: int, base: int = n) -> Decimal:
            total = _calc(model, provider, when, input_tokens=base, **extra)
            return total / count

        p_in = _calc(model, provider, when, input_tokens=n) / n
        p_read = per_token({"cache_read_tokens": n}, n)
        p_5m = per_token({"cache_write_tokens": n, "cache_write_5m_tokens": n}, n)
        p_1h = per_token({"cache_write_tokens": n, "cache_write_1h_tokens": n}, n)
        with_out = _calc(model, provider, when, input_tokens=n, output_tokens=_PROBE)
        p_out = (with_out - p_in * n) / _PROBE
        if above < 0:  # a call with no prompt at all still pays the base output price
            p_out = _calc(model, provider, when, output_tokens=_PROBE) / _PROBE
        tiers.append(TierPrice(above, upto, p_in, p_read, p_5m, p_1h, p_out))
    return tuple(tiers)


PRICE_SCHEMA = pa.schema(
    [
        ("model", pa.string()),
        ("provider", pa.string()),
        ("day", pa.date32()),
        ("above", pa.int64()),
        ("upto", pa.int64()),
        ("p_in", pa.float64()),
        ("p_read", pa.float64()),
        ("p_5m", pa.float64()),
        ("p_1h", pa.float64()),
        ("p_out", pa.float64()),
    ]
)

# Cost of a call from its tokens and a price row `p` (per-token prices).
COST_SQL = """(
    greatest(coalesce(b.input_tokens, 0) - coalesce(b.cached_input_tokens, 0)
             - coalesce(b.cache_write_tokens, 0), 0) * p.p_in
    + coalesce(b.cached_input_tokens, 0) * p.p_read
    + greatest(coalesce(b.cache_write_tokens, 0) - coalesce(b.cache_write_1h_tokens, 0), 0) * p.p_5m
    + coalesce(b.cache_write_1h_tokens, 0) * p.p_1h
    + coalesce(b.output_tokens, 0) * p.p_out
)"""


def price_table(keys: set[tuple[str, str | None, date | None]]) -> pa.Table:
    """Prices for each (model, provider, day); models with no known price are named once."""
    rows: list[dict[str, object]] = []
    for model, provider, day in sorted(keys, key=lambda k: (k[0], k[1] or "", k[2] or date.min)):
        tiers = tier_prices(model, provider, day)
        if tiers is None:
            warn(f"no price known for model {model!r}: its calls are left unpriced")
            continue
        for t in tiers:
            rows.append(
                {
                    "model": model,
                    "provider": provider,
                    "day": day,
                    "above": t.above,
                    "upto": t.upto,
                    "p_in": float(t.input),
                    "p_read": float(t.cache_read),
                    "p_5m": float(t.cache_write_5m),
                    "p_1h": float(t.cache_write_1h),
                    "p_out": float(t.output),
                }
            )
    return pa.Table.from_pylist(rows, schema=PRICE_SCHEMA)
