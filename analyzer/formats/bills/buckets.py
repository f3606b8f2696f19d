"""Bills without calls: what the provider usage and cost reports (Anthropic's, OpenAI's) say per
time bucket, lowered to ``bill_buckets``. A format module parses its records and hands each to
``Buckets.add``; this keeps the accounting, the duplicates and the list-price estimate.

* One input record (a CSV row, a result of a bucket in a JSON page) is one ``bill_buckets`` row,
  or a reject with its line and reason, or skipped (an empty bucket says nothing), or a
  duplicate: the same bucket (same time, same grouping values: what tells two records of the
  report apart, all but its figures) already stored, or earlier in the file. The first copy
  wins, as for calls: export days that have ended (a day still under way changes).
* Tokens count as in ``calls``: ``input_tokens`` is the whole prompt, cache reads and writes
  included, whatever the report's own split.
* A usage row's tokens are priced at list prices (``cost_estimate_usd``), by its model and the
  day the bucket starts: the base price tier, or the long-context tier when the report says
  the prompts were over 200k tokens (Anthropic's ``context_window``). Batch requests are billed
  at half the list price by both providers; another service tier (priority, flex) has prices of
  its own that are not known here, and is left unpriced.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

import orjson
import pyarrow as pa

from analyzer.console import warn
from analyzer.errors import InputError
from analyzer.ingest.base import LoadContext, LoadResult
from analyzer.ingest.csv_scan import UNTERMINATED, fields, table
from analyzer.model.pricing import COST_SQL, WEB_SEARCH_SQL, PriceKey, price_table, tier_prices

MAX_TOKENS = 10**15  # a day of a large organisation is far below; more is not a count
MAX_USD = Decimal(10**9)
USD_PLACES = Decimal("1e-10")  # dollars are stored to 10 decimal places (DECIMAL(18, 10))
HALF_PRICE_TIERS = {"batch"}
LIST_PRICE_TIERS = {"", "standard", "default", "auto", "on_demand", "message"}

_COLUMNS: dict[str, pa.DataType] = {
    "line": pa.int64(),
    "bucket_key": pa.string(),
    "measure": pa.string(),
    "bucket_start": pa.timestamp("us"),
    "bucket_end": pa.timestamp("us"),
    "model": pa.string(),
    "price_model": pa.string(),
    "workspace": pa.string(),
    "project": pa.string(),
    "api_key": pa.string(),
    "user_id": pa.string(),
    "service_tier": pa.string(),
    "context_window": pa.string(),
    "item": pa.string(),
    "requests": pa.int64(),
    "input_tokens": pa.int64(),
    "cached_input_tokens": pa.int64(),
    "cache_write_tokens": pa.int64(),
    "cache_write_1h_tokens": pa.int64(),
    "output_tokens": pa.int64(),
    "web_search_requests": pa.int64(),
    "cost_usd": pa.decimal128(18, 10),
    "price_size": pa.int64(),
    "price_factor": pa.float64(),
}


def count(value: object, name: str) -> int | None:
    """A token or request count as a report writes it: a number, or its text (``"59200.0"`` in
    OpenAI's CSV); None when empty. Anything else is a ``ValueError`` naming the field."""
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise ValueError(f"{name} is not a count: {value!r}")
    try:
        d = Decimal(str(value).strip())
    except ArithmeticError:
        raise ValueError(f"{name} is not a count: {str(value)[:40]!r}") from None
    if not d.is_finite() or d < 0 or d != d.to_integral_value() or d >= MAX_TOKENS:
        raise ValueError(f"{name} is not a count: {str(value)[:40]!r}")
    return int(d)


def dollars(value: object, name: str, cents: bool = False) -> Decimal | None:
    """A dollar figure (``cents``: in cents, as Anthropic's cost report writes ``amount``)."""
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise ValueError(f"{name} is not an amount: {value!r}")
    try:
        d = Decimal(str(value).strip())
    except ArithmeticError:
        raise ValueError(f"{name} is not an amount: {str(value)[:40]!r}") from None
    if not d.is_finite() or abs(d) >= MAX_USD * (100 if cents else 1):
        raise ValueError(f"{name} is not an amount: {str(value)[:40]!r}")
    return (d / 100 if cents else d).quantize(USD_PLACES)  # what the store keeps


def long_context(window: str | None) -> bool:
    """Does a ``context_window`` value (``0-200k``, ``200k-1M``, ``≤ 200k``, ``> 200k``) say the
    prompts were over 200k tokens?"""
    w = (window or "").replace(" ", "").lower()
    return w.startswith(">") or w.startswith("200k-") or w.endswith("1m")


@dataclass
class Bucket:
    """One record of a report, typed."""

    measure: str  # "usage" or "cost"
    start: datetime
    end: datetime
    key_parts: tuple[object, ...]  # every grouping value of the record (not its figures)
    model: str | None = None
    workspace: str | None = None
    project: str | None = None
    api_key: str | None = None
    user_id: str | None = None
    service_tier: str | None = None
    context_window: str | None = None
    item: str | None = None
    requests: int | None = None
    input_tokens: int | None = None
    cached_input_tokens: int | None = None
    cache_write_tokens: int | None = None
    cache_write_1h_tokens: int | None = None
    output_tokens: int | None = None
    web_search_requests: int | None = None
    cost_usd: Decimal | None = None


class Buckets:
    """The records of one file on their way to ``bill_buckets``, with their accounting."""

    def __init__(self, ctx: LoadContext, fmt: str, provider: str) -> None:
        self.ctx = ctx
        self.engine = ctx.engine
        self.fmt = fmt
        self.provider = provider
        self.result = LoadResult()
        self.rows: list[dict[str, Any]] = []
        self.rejects: list[tuple[int | None, str, str]] = []
        self.seen: set[str] = set()
        self._keys: dict[str, str] = {}

    def reject(self, line: int | None, reason: str, excerpt: str) -> None:
        self.result.rows_read += 1
        self.result.rows_rejected += 1
        self.rejects.append((line, reason, excerpt[:300]))

    def skip(self, kind: str) -> None:
        self.result.rows_read += 1
        self.result.rows_skipped += 1
        self.result.skipped_kinds[kind] = self.result.skipped_kinds.get(kind, 0) + 1

    def add(self, line: int, b: Bucket) -> None:
        self.result.rows_read += 1
        if b.end <= b.start:
            self.result.rows_read -= 1
            self.reject(line, "the bucket ends before it starts", repr(b.key_parts))
            return
        ident = repr(
            (self.provider, b.measure, b.start.isoformat(), b.end.isoformat(), b.key_parts)
        )
        key = hashlib.sha256(ident.encode()).hexdigest()[:32]
        if key in self.seen:
            self.result.rows_duplicate += 1
            return
        self.seen.add(key)
        tier = (b.service_tier or "").strip().lower()
        factor = 0.5 if tier in HALF_PRICE_TIERS else 1.0 if tier in LIST_PRICE_TIERS else None
        day = b.start.date()
        price_model = None
        if b.model and factor is not None and b.measure == "usage":
            for name in (b.model, self._model_key(b.model)):
                if tier_prices(name, self.provider, day) is not None:
                    price_model = name
                    break
        self.rows.append(
            {
                "line": line,
                "bucket_key": key,
                "measure": b.measure,
                "bucket_start": b.start,
                "bucket_end": b.end,
                "model": b.model,
                "price_model": price_model,
                "workspace": b.workspace,
                "project": b.project,
                "api_key": b.api_key,
                "user_id": b.user_id,
                "service_tier": b.service_tier,
                "context_window": b.context_window,
                "item": b.item,
                "requests": b.requests,
                "input_tokens": b.input_tokens,
                "cached_input_tokens": b.cached_input_tokens,
                "cache_write_tokens": b.cache_write_tokens,
                "cache_write_1h_tokens": b.cache_write_1h_tokens,
                "output_tokens": b.output_tokens,
                "web_search_requests": b.web_search_requests,
                "cost_usd": b.cost_usd,
                "price_size": 200_001 if long_context(b.context_window) else 0,
                "price_factor": factor,
            }
        )

    def _model_key(self, model: str) -> str:
        """``lf_model_key`` (the one rule, in SQL), to find a price by a report's display name."""
        if model not in self._keys:
            self._keys[model] = str(self.engine.scalar("SELECT lf_model_key(?)", [model]))
        return self._keys[model]

    def finish(self) -> LoadResult:
        for line, reason, excerpt in self.rejects:
            self.engine.run(
                "INSERT INTO rejects VALUES (?, ?, ?, ?)",
                [self.ctx.source_id, line, reason, excerpt],
            )
        if not self.rows:
            return self.result
        to_price: set[PriceKey] = {
            (r["price_model"], self.provider, r["bucket_start"].date(), False)
            for r in self.rows
            if r["price_model"]
        }
        batch = pa.Table.from_pylist(self.rows, schema=pa.schema(list(_COLUMNS.items())))
        with self.engine.step():  # the two Arrow tables are read only here
            self.engine.register("lf_bucket_batch", batch)
            unpriced: list[str] = []
            self.engine.register("lf_price", price_table(to_price, unpriced))
            for said in unpriced:
                warn(said)
            inserted = self.engine.scalar(
                "ingest/bills/buckets/store.sql",
                {"sid": self.ctx.source_id, "fmt": self.fmt, "provider": self.provider},
                cost=COST_SQL,
                web_search=WEB_SEARCH_SQL,
            )
        loaded = int(inserted or 0)
        self.result.rows_loaded += loaded
        self.result.rows_duplicate += len(self.rows) - loaded
        return self.result


# The shapes a CSV report can have: what each is, and the columns it cannot be read without.
Shapes = Sequence[tuple[str, Collection[str]]]


def check_header(header: list[str], shapes: Shapes, display: str) -> None:
    """A CSV report's header has every column of one of its ``shapes``, or the report cannot be
    read (a format forced on another file): one error that says what is missing."""
    names = set(header)
    if any(names >= set(need) for _, need in shapes):
        return
    lacks = "; ".join(
        f"{what} needs {', '.join(sorted(set(need) - names))}" for what, need in shapes
    )
    shown = ", ".join(header[:8]) + (", ..." if len(header) > 8 else "")
    raise InputError(
        f"missing required columns ({lacks}); the header has {shown or 'no column'}", display, 1
    )


def csv_records(
    text: str, shapes: Shapes = (), display: str = ""
) -> Iterator[tuple[int, dict[str, str] | str | None, str]]:
    """The records of a CSV report after its header: (line, the record by column name - or why
    it cannot be read, or None for the header written again -, an excerpt). Blank lines are no
    records; a tab-separated copy (a report pasted from a spreadsheet) is read as well. Records
    are found as ``analyzer.ingest.csv_scan`` finds them: an unclosed quote costs its own line.
    A header without the columns of one of ``shapes`` is an error naming ``display``."""
    nl = text.find("\n")
    first = text[:nl] if nl >= 0 else text
    delimiter = "\t" if first.count("\t") > first.count(",") else ","
    names, found = table(text, delimiter)
    header = [h.strip() for h in names]
    if shapes:
        check_header(header, shapes, display)
    for rec in found:
        if rec.text is None:
            yield rec.line, UNTERMINATED, rec.first[:300]
            continue
        record = fields(rec.text, delimiter)
        if not any(cell.strip() for cell in record):
            continue
        excerpt = delimiter.join(record)[:300]
        if [c.strip() for c in record] == header:
            yield rec.line, None, excerpt
        elif len(record) != len(header):
            yield rec.line, f"{len(record)} fields where the header has {len(header)}", excerpt
        else:
            yield rec.line, dict(zip(header, (c.strip() for c in record), strict=True)), excerpt


def json_pages(text: str, display: str) -> list[object]:
    """The pages of a report saved as JSON: one page (``{data: [...], has_more, next_page}``),
    a list of pages, or JSON Lines of pages (what a script that fetches every page writes)."""
    stripped = text.strip()
    try:
        doc = orjson.loads(stripped)
    except orjson.JSONDecodeError as exc:
        if stripped[:1] == "{" and "\n" in stripped and _parses(stripped.split("\n", 1)[0]):
            pages: list[object] = []
            for n, text_line in enumerate(text.splitlines(), 1):
                if text_line.strip():
                    try:
                        pages.append(orjson.loads(text_line))
                    except orjson.JSONDecodeError as bad:
                        raise InputError(f"not valid JSON: {bad.msg}", display, n) from bad
            return pages
        at = text[: exc.pos].count("\n") + 1 if exc.pos is not None else None
        raise InputError(f"not valid JSON: {exc.msg}", display, at) from exc
    return doc if isinstance(doc, list) else [doc]


def _parses(text: str) -> bool:
    try:
        orjson.loads(text)
    except orjson.JSONDecodeError:
        return False
    return True


def brief(value: object) -> str:
    """A record as an excerpt for ``rejects``."""
    try:
        return orjson.dumps(value)[:300].decode(errors="replace")
    except TypeError:
        return repr(value)[:300]


# What a format makes of one record: its bucket, or the kind it is skipped as.
Reading = Bucket | str


def read_pages(
    text: str,
    display: str,
    out: Buckets,
    times: Callable[[dict[str, Any]], tuple[datetime, datetime]],
    time_keys: str,
    result: Callable[[datetime, datetime, dict[str, Any]], Reading],
) -> None:
    """The records of a report saved as JSON pages (``json_pages``) into ``out``: each result of
    each bucket is one record, numbered by its place in the document (1 = the first), and so is
    an empty bucket (skipped, ``empty_bucket``) and a page or bucket that cannot be read
    (rejected). ``times`` reads a bucket's start and end (a ``ValueError`` when it cannot; the
    reason names ``time_keys``); ``result`` reads one result (a ``ValueError`` is its reject)."""
    n = 0
    for page in json_pages(text, display):
        buckets = page.get("data") if isinstance(page, dict) else None
        if not isinstance(buckets, list):
            n += 1
            out.reject(n, "not a page of the report (no data list)", brief(page))
            continue
        for bucket in buckets:
            b = bucket if isinstance(bucket, dict) else {}
            results = b.get("results")
            try:
                start, end = times(b)
            except ValueError:
                results = None
            if not isinstance(results, list):
                n += 1
                out.reject(n, f"a bucket without {time_keys} and results", brief(bucket))
                continue
            if not results:
                n += 1
                out.skip("empty_bucket")
            for r in results:
                n += 1
                if not isinstance(r, dict) or not r:
                    out.reject(n, "a result that is not an object", brief(r))
                    continue
                try:
                    found = result(start, end, r)
                except ValueError as exc:
                    out.reject(n, str(exc), brief(r))
                    continue
                if isinstance(found, str):
                    out.skip(found)
                else:
                    out.add(n, found)


def read_csv(
    text: str, out: Buckets, row: Callable[[dict[str, str]], Reading], shapes: Shapes
) -> None:
    """The records of a CSV report (``csv_records``, its header one of ``shapes``) into ``out``:
    ``row`` reads one (a ``ValueError`` is its reject); the header written again is skipped."""
    for line, record, excerpt in csv_records(text, shapes, out.ctx.source.display):
        if record is None:
            out.skip("repeated_header")
        elif isinstance(record, str):
            out.reject(line, record, excerpt)
        else:
            try:
                found = row(record)
            except ValueError as exc:
                out.reject(line, str(exc), excerpt)
                continue
            if isinstance(found, str):
                out.skip(found)
            else:
                out.add(line, found)
