"""LiteLLM proxy spend logs (``LiteLLM_SpendLogs``): the bill of traffic sent through a
self-hosted LiteLLM gateway, one row per request.

Read as a bill, per call (``KIND = "bill"``): every row is what the proxy charged for one
request (``spend``, USD, ``cost_basis = 'billed'``), so the detectors and the guard replay work
on it as on an OpenRouter export. Three shapes of the same rows are read, found by content:

* the table exported as CSV (the columns of ``schema.prisma``'s ``LiteLLM_SpendLogs``:
  ``request_id``, ``call_type``, ``api_key``, ``spend``, ``total_tokens``, ``prompt_tokens``,
  ``completion_tokens``, ``startTime``, ``endTime``, ``completionStartTime``, ``model``,
  ``model_group``, ``custom_llm_provider``, ``user``, ``metadata``, ``team_id``,
  ``end_user``, ``session_id``, ``status``, ...; JSON columns written as JSON text);
* the ``/spend/logs`` API's JSON: an array of rows (``metadata`` an object), an object with
  such an array under ``data`` (the paginated ``/spend/logs/v2``), or one row;
* JSON Lines, a row per line (the logging callbacks' payload).

What is read, and how sure its meaning is:

* ``request_id`` - the call's id (``native_id``); a request already stored is a duplicate.
* ``startTime`` - the call's time (ISO 8601; without a zone it is read in ``--input-tz``);
  ``endTime`` - start to end is ``duration_ms`` (``request_duration_ms`` when given);
  ``completionStartTime`` - the first token, for ``ttft_ms`` (LiteLLM sets it to ``endTime``
  for a call that did not stream, so it is only read when it comes before ``endTime``).
* ``prompt_tokens`` (the whole prompt) and ``completion_tokens``. The table has no cache
  columns; a ``cached_input_tokens`` / ``cache_write_tokens`` key on a row (seen in other
  projects' exports, not in LiteLLM's schema) is read where present.
* ``spend`` - USD the proxy computed from its price table for the request: the gateway's
  bill. A row without ``spend`` is left unpriced (never estimated as billed).
* ``model_group`` (the public model name clients asked for) else ``model``;
  ``custom_llm_provider`` the provider.
* Who sent it: the key's alias (``metadata.user_api_key_alias``, else ``api_key_alias``), else
  the start of the hashed key (``api_key`` is LiteLLM's hash of the virtual key, not the key);
  the app is the team (``metadata.user_api_key_team_alias``, else ``team_id``); the user is
  ``end_user``, else ``user``. These four make the stream, as for OpenRouter. A project is the
  team, else the app.
* ``session_id`` (column, or ``metadata.session_id``) groups calls into a session when given;
  otherwise sessions are inferred from silences (``--session-gap``), as for any bill.
* ``status`` ``failure`` (or an ``error`` / ``error_code`` key) is an error call; a finish reason
  is taken from the stored ``response`` (``choices[0].finish_reason``) when it is there.
* ``call_type`` - only chat and text completions (``completion``, ``acompletion``,
  ``text_completion``, ``anthropic_messages``, ``responses``, ``generate_content`` and their
  async forms) are calls here. Embeddings, image, audio, moderation and rerank requests are
  skipped by kind (counted, with their dollars said on stderr): a stream of fixed-size
  embedding requests is not a runaway prompt loop, and the detectors would read it as one.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Any

import orjson
import pyarrow as pa

from analyzer.console import warn
from analyzer.engine.engine import Engine
from analyzer.errors import InputError
from analyzer.formats.bills.sessions import (
    interleaved_streams_sql,
    renumber_streams,
    with_sessions_sql,
)
from analyzer.ingest.base import Head, LoadContext, LoadResult
from analyzer.ingest.csv_scan import UNTERMINATED, fields, table
from analyzer.ingest.reading import read_text
from analyzer.ingest.spec import FormatSpec
from analyzer.ingest.values import as_dict, as_int, as_str, parse_time
from analyzer.model.formatting import cost

UNITS = "ingest/bills/litellm"

MAX_COST_USD = 1_000_000
CHAT_CALLS = {
    "completion",
    "text_completion",
    "anthropic_messages",
    "responses",
    "generate_content",
    "chat_completion",
    "messages",
}
OTHER_CALLS = {
    "embedding",
    "image_generation",
    "image_edit",
    "transcription",
    "speech",
    "moderation",
    "rerank",
    "search",
    "ocr",
    "file_content",
    "create_file",
    "create_batch",
}
_KEYS = (b'"request_id"', b'"startTime"')
_CSV_NEEDS = {"request_id", "startTime"}
_CSV_ANY = {"spend", "call_type", "prompt_tokens", "completion_tokens"}


def sniff(head: Head) -> bool:
    data = head.utf8.lstrip()
    if data[:1] in (b"[", b"{"):
        return all(k in data for k in _KEYS) and (
            b'"spend"' in data or b'"call_type"' in data or b'"prompt_tokens"' in data
        )
    first = head.first_record(",")
    if not first:
        return False
    names = {c.strip().strip('"') for c in first}
    return names >= _CSV_NEEDS and bool(_CSV_ANY & names)


def _json_field(value: object) -> Any:
    """A JSON column as the table export writes it (JSON text), or as the API returns it."""
    if isinstance(value, str) and value[:1] in ("{", "["):
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            return None
    return value


def _number(row: dict[str, Any], key: str) -> Decimal | None:
    """A dollar or token figure as written (a number, or its text in a CSV); None when empty."""
    value = row.get(key)
    if value is None or value == "" or isinstance(value, bool):
        return None
    try:
        d = Decimal(str(value).strip())
    except InvalidOperation:
        d = Decimal("NaN")
    if not d.is_finite():
        raise ValueError(f"{key} is not a number: {str(value)[:40]!r}")
    return d


def _count(row: dict[str, Any], key: str) -> int | None:
    d = _number(row, key)
    if d is None:
        return None
    if d < 0 or d != d.to_integral_value() or d >= 10**12:
        raise ValueError(f"{key} is not a token count: {row.get(key)!r}")
    return int(d)


def _call_kind(call_type: str | None) -> str:
    """``call_type`` without LiteLLM's ``a`` prefix of async calls (``acompletion``), when
    the rest is a kind of request; a completion when it is not said."""
    t = re.sub(r"[^a-z_]", "", (call_type or "").strip().lower())
    if not t:
        return "completion"  # not said: a completion is what a spend log is mostly made of
    if t.startswith("a") and (t[1:] in CHAT_CALLS or t[1:] in OTHER_CALLS):
        return t[1:]
    return t


class _Rows:
    """The rows of one file, typed, with what could not be read."""

    def __init__(self, ctx: LoadContext) -> None:
        self.ctx = ctx
        self.good: list[dict[str, Any]] = []
        self.rejects: list[tuple[int, str, str]] = []
        self.skipped: dict[str, int] = {}
        self.skipped_usd = Decimal(0)
        self.read = 0

    def add(self, line: int, raw: object, excerpt: str) -> None:
        self.read += 1
        if not isinstance(raw, dict):
            self.rejects.append((line, "a row that is not an object", excerpt))
            return
        try:
            row = self._typed(raw)
        except ValueError as exc:
            self.rejects.append((line, str(exc), excerpt))
            return
        if row is None:
            return
        row["line"] = line
        self.good.append(row)

    def _typed(self, raw: dict[str, Any]) -> dict[str, Any] | None:
        rid = as_str(raw.get("request_id")) or None
        if not rid:
            raise ValueError("no request_id")
        kind = _call_kind(as_str(raw.get("call_type")))
        spend = _number(raw, "spend")
        if spend is not None and not (0 <= spend < MAX_COST_USD):
            raise ValueError(f"spend is not a cost: {raw.get('spend')!r}")
        if kind not in CHAT_CALLS:
            self.skipped[kind] = self.skipped.get(kind, 0) + 1
            self.skipped_usd += spend or 0
            return None
        tz = self.ctx.options.tz
        start = parse_time(raw.get("startTime"), tz)
        if start is None:
            raise ValueError(f"startTime is not a time: {str(raw.get('startTime'))[:40]!r}")
        end = parse_time(raw.get("endTime"), tz)
        first = parse_time(raw.get("completionStartTime"), tz)
        meta = as_dict(_json_field(raw.get("metadata")))
        prompt = _count(raw, "prompt_tokens")
        output = _count(raw, "completion_tokens")
        cached = _count(raw, "cached_input_tokens")
        written = _count(raw, "cache_write_tokens")
        duration = as_int(raw.get("request_duration_ms"))
        if duration is None and end is not None and end >= start:
            duration = int((end - start).total_seconds() * 1000)
        ttft = None
        if first is not None and end is not None and start <= first < end:
            ttft = (first - start).total_seconds() * 1000
        status = (as_str(raw.get("status")) or "").lower()
        failed = status in ("failure", "failed", "error") or bool(raw.get("error_code"))
        response = as_dict(_json_field(raw.get("response")))
        choices = response.get("choices")
        finish = None
        if isinstance(choices, list) and choices and isinstance(choices[0], dict):
            finish = as_str(choices[0].get("finish_reason"))
        alias = as_str(meta.get("user_api_key_alias")) or as_str(raw.get("api_key_alias"))
        hashed = as_str(raw.get("api_key")) or ""
        key = alias or (f"key {hashed[-8:]}" if hashed else "")
        team = as_str(meta.get("user_api_key_team_alias")) or as_str(raw.get("team_id"))
        user = as_str(raw.get("end_user")) or as_str(raw.get("user")) or ""
        model = (as_str(raw.get("model_group")) or as_str(raw.get("model")) or "").strip()
        if not model:
            raise ValueError("no model")
        return {
            "native_id": rid,
            "ts": start,
            "model": model,
            "provider": as_str(raw.get("custom_llm_provider")) or as_str(raw.get("provider")),
            "app": team,
            "api_key": key or None,
            "user_id": user or None,
            "stream_key": f"{key}|{team or ''}|{user}|{model}",
            "given_session": as_str(raw.get("session_id")) or as_str(meta.get("session_id")),
            "input_tokens": prompt,
            "cached_input_tokens": cached,
            "cache_write_tokens": written,
            "output_tokens": output,
            # (to the 10 decimal places the store keeps: 1e-400 is no reason to refuse a file)
            "cost_usd": spend.quantize(Decimal("1e-10")) if spend is not None else None,
            "finish_raw": "error" if failed else finish,
            "http_status": as_int(raw.get("error_code"), limit=1000) if failed else None,
            "duration_ms": float(duration) if duration is not None else None,
            "ttft_ms": ttft,
            "streamed": raw.get("stream") if isinstance(raw.get("stream"), bool) else None,
        }


_SCHEMA = pa.schema(
    [
        ("native_id", pa.string()),
        ("line", pa.int64()),
        ("ts", pa.timestamp("us")),
        ("model", pa.string()),
        ("provider", pa.string()),
        ("app", pa.string()),
        ("api_key", pa.string()),
        ("user_id", pa.string()),
        ("stream_key", pa.string()),
        ("given_session", pa.string()),
        ("input_tokens", pa.int64()),
        ("cached_input_tokens", pa.int64()),
        ("cache_write_tokens", pa.int64()),
        ("output_tokens", pa.int64()),
        ("cost_usd", pa.decimal128(18, 10)),
        ("finish_raw", pa.string()),
        ("http_status", pa.int32()),
        ("duration_ms", pa.float64()),
        ("ttft_ms", pa.float64()),
        ("streamed", pa.bool_()),
    ]
)


def _read(ctx: LoadContext, rows: _Rows) -> None:
    text = read_text(ctx.source, "a spend log")
    stripped = text.lstrip()
    if stripped[:1] == "[" or (stripped[:1] == "{" and "\n{" not in stripped.rstrip()):
        try:
            doc = orjson.loads(text)
        except orjson.JSONDecodeError as exc:
            line = text[: exc.pos].count("\n") + 1 if exc.pos is not None else None
            raise InputError(f"not valid JSON: {exc.msg}", ctx.source.display, line) from exc
        if isinstance(doc, dict) and isinstance(doc.get("data"), list):
            doc = doc["data"]
        items = doc if isinstance(doc, list) else [doc]
        # A row of a JSON document is numbered by its place in it (1 = the first row).
        for n, item in enumerate(items, 1):
            rows.add(n, item, orjson.dumps(item)[:300].decode(errors="replace"))
        return
    if stripped[:1] == "{":  # JSON Lines
        for n, text_line in enumerate(text.splitlines(), 1):
            if not text_line.strip():
                continue
            try:
                item = orjson.loads(text_line)
            except orjson.JSONDecodeError as exc:
                rows.read += 1
                rows.rejects.append((n, f"not valid JSON: {exc.msg}", text_line[:300]))
                continue
            rows.add(n, item, text_line[:300])
        return
    # Records found as analyzer.ingest.csv_scan finds them (a prompt of any size; an unclosed
    # quote costs its own line), each numbered by the line it starts on.
    names, found = table(text, ",")
    header = [h.strip() for h in names]
    missing = [c for c in sorted(_CSV_NEEDS) if c not in header]
    if missing:  # another file, read as a spend log by --format
        shown = ", ".join(header[:8]) + (", ..." if len(header) > 8 else "")
        raise InputError(
            f"missing required columns {', '.join(missing)} (a {SPEC.title} needs "
            f"{', '.join(sorted(_CSV_NEEDS))}); the header has {shown or 'no column'}",
            ctx.source.display,
            1,
        )
    for rec in found:
        n = rec.line
        if rec.text is None:
            rows.read += 1
            rows.rejects.append((n, UNTERMINATED, rec.first[:300]))
            continue
        record = fields(rec.text, ",")
        if not any(cell.strip() for cell in record):
            continue
        if [c.strip() for c in record] == header:
            rows.read += 1
            rows.skipped["repeated_header"] = rows.skipped.get("repeated_header", 0) + 1
            continue
        excerpt = ",".join(record)[:300]
        if len(record) != len(header):
            rows.read += 1
            rows.rejects.append(
                (n, f"{len(record)} fields where the header has {len(header)}", excerpt)
            )
            continue
        rows.add(n, dict(zip(header, record, strict=True)), excerpt)


def _store(ctx: LoadContext, engine: Engine, good: list[dict[str, Any]]) -> int:
    """The requests not stored yet into ``calls``, numbered in their streams: how many."""
    params = {"fmt": SPEC.name}
    table = pa.Table.from_pylist(good, schema=_SCHEMA)
    engine.register("lf_ll_rows", table)
    try:
        engine.run(f"{UNITS}/new.sql", params)
    finally:
        engine.unregister("lf_ll_rows")
    streams = interleaved_streams_sql("lf_ll_new")
    engine.run("CREATE OR REPLACE TEMP TABLE lf_ll_inter AS {{streams}}", params, streams=streams)
    ctx.stage("storing")
    inserted = engine.scalar(
        f"{UNITS}/store.sql",
        {
            **params,
            "prefix": SPEC.call_prefix,
            "sid": ctx.source_id,
            "gap": ctx.options.session_gap_s,
        },
        numbered=with_sessions_sql("lf_ll_new"),
    )
    if int(engine.scalar("SELECT count(*) FROM lf_ll_inter")):
        renumber_streams(engine, SPEC.name, "lf_ll_inter", ctx.options.session_gap_s)
    return int(inserted or 0)


def load(ctx: LoadContext) -> LoadResult:
    rows = _Rows(ctx)
    ctx.stage("reading")
    _read(ctx, rows)
    result = LoadResult(rows_read=rows.read, rows_rejected=len(rows.rejects))
    result.rows_skipped = sum(rows.skipped.values())
    result.skipped_kinds = dict(rows.skipped)
    if rows.skipped_usd or any(k != "repeated_header" for k in rows.skipped):
        kinds = ", ".join(f"{n:,} {k}" for k, n in sorted(rows.skipped.items()))
        warn(
            f"{ctx.source.display}: skipped requests that are not chat completions ({kinds}; "
            f"{cost(rows.skipped_usd)} of spend not counted)"
        )
    engine = ctx.engine
    for line, reason, excerpt in rows.rejects:
        engine.run(
            "INSERT INTO rejects VALUES (?, ?, ?, ?)", [ctx.source_id, line, reason, excerpt]
        )
    with engine.step():  # lf_ll_new and lf_ll_inter live as long as the load
        result.rows_loaded = _store(ctx, engine, rows.good)
    result.rows_duplicate = len(rows.good) - result.rows_loaded
    return result


# What this module is to the registry (analyzer.formats).
SPEC = FormatSpec(
    name="litellm_spend",
    title="LiteLLM proxy spend log (LiteLLM_SpendLogs as CSV, JSON or JSON Lines)",
    kind="bill",
    sniff_order=15,  # after the OpenRouter export (its own CSV header), before the agent logs
    call_prefix="litellm:",
    sniff=sniff,
    load=load,
)
