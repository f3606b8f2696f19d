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
* A tier (e.g. prompts over 200k tokens) applies its prices to all tokens of the call, as
  Anthropic bills long context: once the prompt passes 200k, every token of the call is at the
  long-context rate (ccusage 20 splits each category at 200k instead, and under-charges).
* Fast mode (Anthropic's ``usage.speed: "fast"``, stored as ``variant = 'fast'``) multiplies
  every token price of the model, cache reads and writes included ("fast mode pricing stacks
  with other pricing modifiers", platform.claude.com fast-mode docs): 6x on Opus 4.6 and 4.7,
  2x on Opus 4.8 and Opus 5. A fast call of another model is left unpriced and named, never
  priced at the standard rate.
* Server-side web searches (``server_tool_use.web_search_requests``) cost $10 per 1,000
  (Anthropic's pricing page), on top of the tokens: part of the call's estimate.

A model the library does not know gets no cost (NULL, "unpriced"), never a guess: the price
table says which it could not price, and the caller names each once in a warning.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal
from functools import lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

# Probe sizes: small enough to stay under any tier, large enough for exact per-token prices.
_PROBE = 1_000_000

# USD per server-side web search request (Anthropic: $10 per 1,000 searches, any model).
WEB_SEARCH_USD = Decimal("0.01")

# Fast mode's multiplier on every token price, by model (Anthropic's fast-mode docs: "priced at
# 6x standard Opus rates" for Opus 4.6; 4.7 the same; Opus 4.8 and Opus 5 at 2x, as OpenRouter's
# claude-opus-5-fast at $10/$50 against $5/$25). A model not listed here has no known fast price.
_FAST = [
    (re.compile(r"claude-opus-4-[67](?:-\d{8})?$"), Decimal(6)),
    (re.compile(r"claude-opus-(?:4-8|5)(?:-\d{8})?$"), Decimal(2)),
]


def fast_multiplier(model: str) -> Decimal | None:
    """How many times the standard rate a fast-mode call of ``model`` costs; None if unknown."""
    name = model.lower().removeprefix("anthropic/").replace(".", "-")
    for pattern, factor in _FAST:
        if pattern.search(name):
            return factor
    return None


@dataclass(frozen=True)
class TierPrice:
    above: int  # applies when input_tokens > above (-1 for the base tier)
    upto: int | None  # ... and input_tokens <= upto
    input: Decimal  # USD per token
    cache_read: Decimal
    cache_write_5m: Decimal
    cache_write_1h: Decimal
    output: Decimal


def warm() -> None:
    """Import the price data (``genai_prices``, about a third of a second) in a thread of its
    own, while a load reads its files: the first calls written are priced without waiting for
    it (an import the thread has under way is waited for, not done twice)."""
    import sys
    import threading

    if "genai_prices" not in sys.modules:
        threading.Thread(target=_import_prices, name="llm-forensics-prices", daemon=True).start()


def _import_prices() -> None:
    import genai_prices  # noqa: F401


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


def _model_price(model: str, provider: str | None, when: datetime | None) -> Any:
    """The price data's entry for ``model`` at ``when`` (its ``ModelPrice``: what every price
    of the model then follows from)."""
    from genai_prices import Usage, calc_price

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = calc_price(
            Usage(input_tokens=1),
            model_ref=model,
            provider_id=_provider_id(model, provider),
            genai_request_timestamp=when,
        )
    return result.model_price


def _tier_starts(model_price: Any) -> list[int]:
    from genai_prices.types import TieredPrices

    starts: set[int] = set()
    for value in vars(model_price).values():
        if isinstance(value, TieredPrices):
            starts.update(t.start for t in value.tiers)
    return sorted(starts)


# The tiers of a model for each entry of the price data it was priced by (the entry kept, so
# that its id names it): a model's prices change on a few dates, and the days between them are
# priced alike without being worked out again (a history of 300 days asks for 300).
_BY_ENTRY: dict[tuple[str, str | None, int], tuple[Any, tuple[TierPrice, ...]]] = {}


def _candidates(model: str, provider: str | None) -> list[tuple[str, str | None]]:
    """The names to look ``model`` up by, in order: as logged (with its provider, then
    without, as a gateway's provider name such as "Google AI Studio" is none the price data
    knows), then without each routing prefix in turn, the prefix taken as the provider
    (``google/gemini-3-pro-preview`` is Google's ``gemini-3-pro-preview``;
    ``openrouter/anthropic/claude-sonnet-4`` is Anthropic's ``claude-sonnet-4``)."""
    found: list[tuple[str, str | None]] = [(model, provider)]
    if provider is not None:
        found.append((model, None))
    rest = model
    while "/" in rest:
        prefix, rest = rest.split("/", 1)
        if not rest:
            break
        found += [(rest, prefix.lower()), (rest, None)]
    return list(dict.fromkeys(found))


@lru_cache(maxsize=4096)
def tier_prices(model: str, provider: str | None, day: date | None) -> tuple[TierPrice, ...] | None:
    """Per-token prices of ``model`` on ``day`` for each of its tiers; None if unknown. A name
    the price data does not know as logged is looked up as its model (``_candidates``)."""
    when = datetime(day.year, day.month, day.day, 12, tzinfo=UTC) if day else None
    for name, by in _candidates(model, provider):
        try:
            entry = _model_price(name, by, when)
        except Exception:  # genai-prices raises LookupError and friends for unknown models
            continue
        known = _BY_ENTRY.get((name, by, id(entry)))
        if known is not None and known[0] is entry:
            return known[1]
        tiers = _tiers(name, by, when, _tier_starts(entry))
        _BY_ENTRY[name, by, id(entry)] = (entry, tiers)
        return tiers
    return None


def _tiers(
    model: str, provider: str | None, when: datetime | None, starts: list[int]
) -> tuple[TierPrice, ...]:
    """Per-token prices of each tier of a model the price data knows."""
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


def price_schema() -> pa.Schema:
    """The price table's columns (``price_table``)."""
    import pyarrow as pa

    return pa.schema(
        [
            ("model", pa.string()),
            ("provider", pa.string()),
            ("day", pa.date32()),
            ("fast", pa.bool_()),
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

# What a call's web searches add (a batch row `b` with a web_search_requests column).
WEB_SEARCH_SQL = f"(coalesce(b.web_search_requests, 0) * {WEB_SEARCH_USD})"

PriceKey = tuple[str, str | None, date | None, bool]  # model, provider, day, fast mode


def unpriced_warning(model: str) -> str:
    """The one stderr line that names a model whose calls carry no cost (said once a run)."""
    return f"no price known for model {model!r}: its calls are left unpriced"


def price_table(keys: set[PriceKey], unpriced: list[str] | None = None) -> pa.Table:
    """Prices for each (model, provider, day, fast). A model with no known price has no row,
    and is added to ``unpriced`` (as ``unpriced_warning`` names it) for the caller to say."""
    import pyarrow as pa

    return pa.Table.from_pylist(price_rows(keys, unpriced), schema=price_schema())


def price_rows(keys: set[PriceKey], unpriced: list[str] | None = None) -> list[dict[str, Any]]:
    """The rows of ``price_table``: per-token prices (floats, as the table holds them) for
    each (model, provider, day, fast) and tier; a model with no known price has none."""
    rows: list[dict[str, Any]] = []
    for model, provider, day, fast in sorted(
        keys, key=lambda k: (k[0], k[1] or "", k[2] or date.min, k[3])
    ):
        tiers = tier_prices(model, provider, day)
        factor = fast_multiplier(model) if fast else Decimal(1)
        if tiers is None or factor is None:
            if unpriced is not None:
                named = f"{model} (fast mode)" if fast and tiers else model
                unpriced.append(unpriced_warning(named))
            continue
        for t in tiers:
            rows.append(
                {
                    "model": model,
                    "provider": provider,
                    "day": day,
                    "fast": fast,
                    "above": t.above,
                    "upto": t.upto,
                    "p_in": float(t.input * factor),
                    "p_read": float(t.cache_read * factor),
                    "p_5m": float(t.cache_write_5m * factor),
                    "p_1h": float(t.cache_write_1h * factor),
                    "p_out": float(t.output * factor),
                }
            )
    return rows
