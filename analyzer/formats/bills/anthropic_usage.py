"""Anthropic's usage and cost reports: a bill per time bucket, not per call.

Read as a bucketed bill (``KIND = "bucket_bill"``): each record says what an organisation used
or paid in one bucket of time, for one model, key, workspace...; it never becomes a call and
never feeds a detector. The spend views show it, and ``usage reconcile`` compares it with the
logged calls of the same bucket (analyzer.detect.reconcile). Four shapes, found by content:

* **Console usage export** (``claude_api_tokens_<YYYY_MM>.csv``, real file in the tests):
  ``usage_date_utc, model_version, api_key, workspace, usage_type, context_window,
  usage_input_tokens_no_cache, usage_input_tokens_cache_write_5m,
  usage_input_tokens_cache_write_1h, usage_input_tokens_cache_read, usage_output_tokens,
  web_search_count``: a row per day, model, key... ``model_version`` is the API id, ``api_key``
  the key's name. A day is a UTC day (the column's name says so).
* **Console cost export** (``claude_api_cost_<from>_to_<to>.csv``, real file in the tests):
  ``usage_date_utc, model, workspace, api_key, usage_type, context_window, token_type,
  cost_usd, cost_type``: a row per day, model, key and kind of token, in dollars rounded to the
  cent (so a row of $0.00 is common, and a day's sum can be a few cents off the exact
  figure). ``model`` is a display name ("Claude Opus 4.5"), compared with the logs' ids by
  ``lf_model_key`` ("claude-opus-4-5").
* **Admin API usage report** (``GET /v1/organizations/usage_report/messages``, saved as JSON:
  one page, a list of pages, or JSON Lines of pages): ``{data: [{starting_at, ending_at,
  results: [...]}], has_more, next_page}``; a result has ``uncached_input_tokens``,
  ``cache_read_input_tokens``, ``cache_creation.{ephemeral_5m_input_tokens,
  ephemeral_1h_input_tokens}``, ``output_tokens``, ``server_tool_use.web_search_requests`` and
  the grouping keys (``model``, ``api_key_id``, ``workspace_id``, ``service_tier``,
  ``context_window``, ``inference_geo``...; null unless the report was grouped by them).
* **Admin API cost report** (``GET /v1/organizations/cost_report``, same envelope): a result
  has ``amount`` - a decimal string **in cents** ("123.45" is $1.2345, as Anthropic's API
  reference says: "lowest currency units") - ``currency``, ``cost_type``, ``token_type``,
  ``model``, ``description``, ``workspace_id``... An amount not in USD is rejected.

Taken from Anthropic's API reference and the two real Console exports; the Admin API shapes
were not seen in a real saved file (none was found public), only in the reference: unsure where
a real page differs. An empty bucket (``results: []``) is read and skipped (``empty_bucket``).
Not read: the Claude Code analytics report (``usage_report/claude_code``), a different shape.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from analyzer.formats.bills.buckets import Bucket, Buckets, count, dollars, read_csv, read_pages
from analyzer.ingest.base import Head, LoadContext, LoadResult
from analyzer.ingest.reading import read_text
from analyzer.ingest.spec import FormatSpec
from analyzer.ingest.values import as_dict, as_str, parse_time

PROVIDER = "anthropic"

TOKENS_FIGURES = {
    "usage_input_tokens_no_cache",
    "usage_input_tokens_cache_write_5m",
    "usage_input_tokens_cache_write_1h",
    "usage_input_tokens_cache_read",
    "usage_output_tokens",
    "web_search_count",
}
COST_FIGURES = {"cost_usd", "list_price_usd"}
USAGE_FIGURES = {
    "uncached_input_tokens",
    "cache_read_input_tokens",
    "cache_creation",
    "output_tokens",
    "server_tool_use",
}
_CSV_TOKENS = {"usage_date_utc", "model_version", "usage_input_tokens_no_cache"}
_CSV_COST = {"usage_date_utc", "token_type", "cost_usd"}


def sniff(head: Head) -> bool:
    data = head.utf8.lstrip()
    if data[:1] in (b"[", b"{"):
        return all(k in data for k in (b'"starting_at"', b'"ending_at"', b'"results"'))
    first = head.first_record(",")
    if not first:
        return False
    names = {c.strip().strip('"') for c in first}
    return names >= _CSV_TOKENS or names >= _CSV_COST


def _day(value: str) -> tuple[datetime, datetime]:
    try:
        start = datetime.strptime(value.strip(), "%Y-%m-%d")
    except ValueError:
        raise ValueError(f"usage_date_utc is not a date: {value[:40]!r}") from None
    return start, start + timedelta(days=1)


def _parts(row: dict[str, Any], figures: set[str]) -> tuple[object, ...]:
    return tuple(sorted((k, str(v)) for k, v in row.items() if k not in figures))


def _tokens_row(row: dict[str, str]) -> Bucket:
    start, end = _day(row["usage_date_utc"])
    fresh = count(row.get("usage_input_tokens_no_cache"), "usage_input_tokens_no_cache")
    w5 = count(row.get("usage_input_tokens_cache_write_5m"), "usage_input_tokens_cache_write_5m")
    w1 = count(row.get("usage_input_tokens_cache_write_1h"), "usage_input_tokens_cache_write_1h")
    read = count(row.get("usage_input_tokens_cache_read"), "usage_input_tokens_cache_read")
    given = [v for v in (fresh, w5, w1, read) if v is not None]
    speed = (row.get("speed") or "").strip().lower()
    return Bucket(
        measure="usage",
        start=start,
        end=end,
        key_parts=_parts(row, TOKENS_FIGURES),
        model=row.get("model_version") or None,
        workspace=row.get("workspace") or None,
        api_key=row.get("api_key") or None,
        service_tier="fast" if speed == "fast" else row.get("usage_type") or None,
        context_window=row.get("context_window") or None,
        input_tokens=sum(given) if given else None,
        cached_input_tokens=read,
        cache_write_tokens=(w5 or 0) + (w1 or 0) if w5 is not None or w1 is not None else None,
        cache_write_1h_tokens=w1,
        output_tokens=count(row.get("usage_output_tokens"), "usage_output_tokens"),
        web_search_requests=count(row.get("web_search_count"), "web_search_count"),
    )


def _cost_row(row: dict[str, str]) -> Bucket:
    start, end = _day(row["usage_date_utc"])
    usd = dollars(row.get("cost_usd"), "cost_usd")
    if usd is None:
        raise ValueError("no cost_usd")
    kind = row.get("cost_type") or ""
    token_type = row.get("token_type") or ""
    return Bucket(
        measure="cost",
        start=start,
        end=end,
        key_parts=_parts(row, COST_FIGURES),
        model=row.get("model") or None,
        workspace=row.get("workspace") or None,
        api_key=row.get("api_key") or None,
        service_tier=row.get("usage_type") or None,
        context_window=row.get("context_window") or None,
        item=token_type if kind in ("", "token", "tokens", token_type) else f"{kind} {token_type}",
        cost_usd=usd,
    )


def _api_result(start: datetime, end: datetime, r: dict[str, Any]) -> Bucket:
    common: dict[str, Any] = {
        "start": start,
        "end": end,
        "model": as_str(r.get("model")),
        "workspace": as_str(r.get("workspace_id")),
        "api_key": as_str(r.get("api_key_id")),
        "service_tier": as_str(r.get("service_tier")),
        "context_window": as_str(r.get("context_window")),
    }
    if "amount" in r:
        currency = (as_str(r.get("currency")) or "USD").upper()
        if currency != "USD":
            raise ValueError(f"an amount in {currency[:10]}: only USD is read")
        usd = dollars(r.get("amount"), "amount", cents=True)
        if usd is None:
            raise ValueError("no amount")
        item = " ".join(x for x in (as_str(r.get("cost_type")), as_str(r.get("token_type"))) if x)
        parts = _parts(r, {"amount"})
        return Bucket(
            measure="cost",
            key_parts=parts,
            item=item or as_str(r.get("description")),
            cost_usd=usd,
            **common,
        )
    if not USAGE_FIGURES & r.keys():
        raise ValueError("neither tokens nor an amount")
    created = as_dict(r.get("cache_creation"))
    fresh = count(r.get("uncached_input_tokens"), "uncached_input_tokens")
    read = count(r.get("cache_read_input_tokens"), "cache_read_input_tokens")
    w5 = count(created.get("ephemeral_5m_input_tokens"), "ephemeral_5m_input_tokens")
    w1 = count(created.get("ephemeral_1h_input_tokens"), "ephemeral_1h_input_tokens")
    given = [v for v in (fresh, read, w5, w1) if v is not None]
    if as_str(r.get("speed")) == "fast":
        common["service_tier"] = "fast"
    return Bucket(
        measure="usage",
        key_parts=_parts(r, USAGE_FIGURES),
        input_tokens=sum(given) if given else None,
        cached_input_tokens=read,
        cache_write_tokens=(w5 or 0) + (w1 or 0) if w5 is not None or w1 is not None else None,
        cache_write_1h_tokens=w1,
        output_tokens=count(r.get("output_tokens"), "output_tokens"),
        web_search_requests=count(
            as_dict(r.get("server_tool_use")).get("web_search_requests"), "web_search_requests"
        ),
        **common,
    )


def _times(bucket: dict[str, Any]) -> tuple[datetime, datetime]:
    start, end = parse_time(bucket.get("starting_at")), parse_time(bucket.get("ending_at"))
    if start is None or end is None:
        raise ValueError("no bucket times")
    return start, end


def load(ctx: LoadContext) -> LoadResult:
    out = Buckets(ctx, SPEC.name, PROVIDER)
    ctx.stage("reading")
    text = read_text(ctx.source, "a usage report")
    if text.lstrip()[:1] in ("[", "{"):
        read_pages(text, ctx.source.display, out, _times, "starting_at, ending_at", _api_result)
    else:
        header = {c.strip().strip('"') for c in (ctx.source.head.first_record(",") or [])}
        row = _tokens_row if header >= _CSV_TOKENS else _cost_row
        read_csv(text, out, row, [("a usage export", _CSV_TOKENS), ("a cost export", _CSV_COST)])
    return out.finish()


# What this module is to the registry (analyzer.formats).
SPEC = FormatSpec(
    name="anthropic_usage",
    title="Anthropic usage or cost report (Console CSV export, or the Admin API's JSON)",
    kind="bucket_bill",
    sniff_order=16,  # with the other bills, before the agent logs
    call_prefix="anthropic-bill:",  # never used: a bucketed bill makes no calls
    sniff=sniff,
    load=load,
)
