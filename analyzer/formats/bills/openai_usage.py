"""OpenAI's organisation usage and costs: a bill per time bucket, not per call.

Read as a bucketed bill (``KIND = "bucket_bill"``), like Anthropic's reports
(analyzer.formats.bills.anthropic_usage): never calls, shown in the spend views and reconciled with
the logged calls of each bucket (``usage reconcile``). Four shapes, found by content:

* **Usage API, completions** (``GET /v1/organization/usage/completions``, saved as JSON: one
  page, a list of pages, or JSON Lines of pages): ``{object: "page", data: [{object:
  "bucket", start_time, end_time, results: [...]}], has_more, next_page}``, times in Unix
  seconds (the first bucket may start at the unaligned time asked for). A result
  (``organization.usage.completions.result``) has ``input_tokens`` - the whole prompt, cached
  part included - ``input_cached_tokens``, ``output_tokens``, ``num_model_requests``, audio
  counts, and the grouping keys ``model``, ``project_id``, ``user_id``, ``api_key_id``,
  ``batch``, ``service_tier`` (null unless grouped by them). The other usage endpoints'
  results (embeddings, images, audio, moderations, vector stores...) are skipped by kind: they
  are not chat calls a log could explain.
* **Costs API** (``GET /v1/organization/costs``, same envelope): a result
  (``organization.costs.result``) has ``amount: {value, currency}`` - ``value`` in dollars, a
  number or its text - ``line_item`` and ``project_id``. Grouped by line item, ``line_item``
  names the model and the kind of token: ``"gpt-4o-mini-2024-07-18, cached input"``,
  ``"gpt-5.5-2026-04-23, output"``, sometimes after a tier (``"priority | gpt-5.6-sol,
  output, long context"``) or with a modality word (``"gpt-audio-mini-2025-12-15 audio,
  input"``); a line item without a comma (``"web search tool calls"``) names no model. These
  line items are from other projects' code that quotes the real API, not from a saved page.
* **Dashboard cost export** (CSV): ``start_time, end_time, start_time_iso, end_time_iso,
  amount_value, amount_currency, line_item, project_id, organization_id,
  organization_name``; a day without spend is a row with the values blank (skipped,
  ``empty_bucket``).
* **Dashboard completions usage export** (CSV): ``start_time, end_time, start_time_iso,
  end_time_iso, project_id, num_model_requests, user_id, api_key_id, model, batch,
  service_tier, input_tokens, output_tokens, input_cached_tokens, input_uncached_tokens``, the
  text/audio/image splits...; counts written as decimals (``59200.0``), ``batch`` as
  ``TRUE``/``FALSE``.

The two dashboard exports follow a real pair (pasted into a public note, so seen as TSV: the
tests' fixtures are written from it); the JSON pages follow OpenAI's API reference and the
OpenAI cookbook's recorded output. An amount not in USD is rejected.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from analyzer.formats.bills.buckets import (
    Bucket,
    Buckets,
    Reading,
    count,
    dollars,
    read_csv,
    read_pages,
)
from analyzer.ingest.base import Head, LoadContext, LoadResult
from analyzer.ingest.reading import read_text
from analyzer.ingest.spec import FormatSpec
from analyzer.ingest.values import as_dict, as_str, parse_time

PROVIDER = "openai"

USAGE_FIGURES = {
    "input_tokens",
    "output_tokens",
    "input_cached_tokens",
    "input_uncached_tokens",
    "num_model_requests",
    "input_text_tokens",
    "output_text_tokens",
    "input_cached_text_tokens",
    "input_audio_tokens",
    "input_cached_audio_tokens",
    "output_audio_tokens",
    "input_image_tokens",
    "input_cached_image_tokens",
    "output_image_tokens",
}
COST_FIGURES = {"amount", "amount_value", "quantity"}
TIMES = ("start_time", "end_time", "start_time_iso", "end_time_iso")
_CSV_COST = {"start_time", "end_time", "amount_value"}
_CSV_USAGE = {"start_time", "end_time", "num_model_requests", "input_tokens"}
_LINE_ITEM = re.compile(r"^(?:(?P<tier>[\w-]+)\s*\|\s*)?(?P<model>[^,]+?),\s*(?P<kind>.+)$")


def sniff(head: Head) -> bool:
    data = head.utf8.lstrip()
    if data[:1] in (b"[", b"{"):
        if b'"organization.costs.result"' in data or b'"organization.usage.' in data:
            return True
        return all(k in data for k in (b'"start_time"', b'"end_time"', b'"results"'))
    for delimiter in (",", "\t"):
        names = {c.strip().strip('"') for c in head.first_record(delimiter) or []}
        if names >= _CSV_COST or names >= _CSV_USAGE:
            return True
    return False


def _times(row: dict[str, Any]) -> tuple[datetime, datetime]:
    found = []
    for key in ("start_time", "end_time"):
        value: object = row.get(f"{key}_iso") or row.get(key)
        if isinstance(value, str) and value.strip().isdigit():
            value = int(value.strip())
        t = parse_time(value)
        if t is None:
            raise ValueError(f"{key} is not a time: {str(row.get(key))[:40]!r}")
        found.append(t)
    return found[0], found[1]


def _parts(row: dict[str, Any], figures: set[str]) -> tuple[object, ...]:
    skip = figures | set(TIMES) | {"object"}
    return tuple(sorted((k, str(v)) for k, v in row.items() if k not in skip))


def _tier(row: dict[str, Any]) -> str | None:
    batch = row.get("batch")
    if batch is True or (isinstance(batch, str) and batch.strip().lower() == "true"):
        return "batch"
    return as_str(row.get("service_tier")) or None


def _usage(start: datetime, end: datetime, row: dict[str, Any]) -> Bucket:
    return Bucket(
        measure="usage",
        start=start,
        end=end,
        key_parts=_parts(row, USAGE_FIGURES),
        model=as_str(row.get("model")) or None,
        project=as_str(row.get("project_id")) or None,
        api_key=as_str(row.get("api_key_id")) or None,
        user_id=as_str(row.get("user_id")) or None,
        service_tier=_tier(row),
        requests=count(row.get("num_model_requests"), "num_model_requests"),
        input_tokens=count(row.get("input_tokens"), "input_tokens"),
        cached_input_tokens=count(row.get("input_cached_tokens"), "input_cached_tokens"),
        output_tokens=count(row.get("output_tokens"), "output_tokens"),
    )


def _cost(
    start: datetime, end: datetime, row: dict[str, Any], value: object, cur: object
) -> Bucket:
    currency = (as_str(cur) or "usd").upper()
    if currency != "USD":
        raise ValueError(f"an amount in {currency[:10]}: only USD is read")
    usd = dollars(value, "amount")
    if usd is None:
        raise ValueError("no amount")
    item = as_str(row.get("line_item")) or None
    model = tier = None
    m = _LINE_ITEM.match(item or "")
    if m:
        model, tier = m["model"].split()[0], m["tier"]
    return Bucket(
        measure="cost",
        start=start,
        end=end,
        key_parts=_parts(row, COST_FIGURES),
        model=model,
        project=as_str(row.get("project_id")) or None,
        workspace=as_str(row.get("organization_name")) or as_str(row.get("organization_id")),
        service_tier=tier,
        item=item,
        cost_usd=usd,
    )


def _result(start: datetime, end: datetime, r: dict[str, Any]) -> Reading:
    kind = as_str(r.get("object")) or ""
    if "amount" in r:
        amount = as_dict(r.get("amount"))
        return _cost(start, end, r, amount.get("value"), amount.get("currency"))
    if kind.startswith("organization.usage.") and ".completions." not in kind:
        return kind.removeprefix("organization.usage.").split(".")[0]
    if "input_tokens" in r or "output_tokens" in r:
        return _usage(start, end, r)
    raise ValueError("neither tokens nor an amount")


def _row(row: dict[str, str]) -> Reading:
    start, end = _times(row)
    if "amount_value" in row:
        if not row["amount_value"]:
            return "empty_bucket"
        return _cost(start, end, row, row["amount_value"], row.get("amount_currency"))
    if not row.get("num_model_requests") and not row.get("input_tokens"):
        return "empty_bucket"
    return _usage(start, end, row)


def load(ctx: LoadContext) -> LoadResult:
    out = Buckets(ctx, SPEC.name, PROVIDER)
    ctx.stage("reading")
    text = read_text(ctx.source, "a usage or costs report")
    if text.lstrip()[:1] in ("[", "{"):
        read_pages(text, ctx.source.display, out, _times, "start_time, end_time", _result)
    else:
        read_csv(text, out, _row, [("a cost export", _CSV_COST), ("a usage export", _CSV_USAGE)])
    return out.finish()


# What this module is to the registry (analyzer.formats).
SPEC = FormatSpec(
    name="openai_usage",
    title="OpenAI usage or costs (the organisation Usage/Costs API's JSON, or the dashboard's CSV)",
    kind="bucket_bill",
    sniff_order=17,  # with the other bills, before the agent logs
    call_prefix="openai-bill:",  # never used: a bucketed bill makes no calls
    sniff=sniff,
    load=load,
)
