"""OpenTelemetry records in a file, decoded: the private reader of the ``otel`` format (and of
its spans, ``otel_spans``).

Two shapes of file, both JSON Lines:

* **The OTLP/JSON envelope**, one export request a line, as an OpenTelemetry Collector's
  ``file`` exporter writes it (and an OTLP/HTTP JSON body as sent): ``resourceLogs[]`` ->
  ``scopeLogs[]`` -> ``logRecords[]``, ``resourceSpans[]`` -> ``scopeSpans[]`` -> ``spans[]``,
  ``resourceMetrics[]`` -> ``scopeMetrics[]`` -> ``metrics[]``. Attributes are lists of
  ``{"key", "value": AnyValue}`` (``stringValue``, ``intValue`` - a string, as protobuf's JSON
  writes 64-bit integers -, ``doubleValue``, ``boolValue``, ``arrayValue.values``,
  ``kvlistValue.values``, ``bytesValue``); times are nanoseconds since the epoch as strings
  (``timeUnixNano``, ``observedTimeUnixNano``, ``startTimeUnixNano``, ``endTimeUnixNano``);
  trace and span ids are hex; a span's ``status.code`` and ``kind`` are numbers or their enum
  names (``STATUS_CODE_ERROR``, ``SPAN_KIND_CLIENT``). Facts from the specification
  (opentelemetry-proto ``logs.proto``, ``trace.proto``, ``common.proto`` and its
  ``docs/specification.md`` on the JSON encoding) and the Collector's ``file`` exporter.
* **Flat JSON lines**, one record a line, its attributes an object (or a key/value list):
  one OTLP record taken out of its envelope (``timeUnixNano``... as above); a row of the
  Collector's ClickHouse exporter's tables exported as JSON lines (``otel_logs``:
  ``Timestamp``, ``ServiceName``, ``Body``, ``ResourceAttributes``, ``ScopeName``,
  ``LogAttributes``, ``TraceId``, ``SpanId``, ``SeverityText``; ``otel_traces``:
  ``SpanName``, ``SpanKind``, ``SpanAttributes``, ``Duration`` in nanoseconds,
  ``StatusCode``, ``ParentSpanId``, ``Events.Timestamp``/``Events.Name``/``Events.Attributes``);
  and what the OpenTelemetry Python SDK's console exporters write (``LogRecord.to_json``:
  ``body``, ``attributes``, ``timestamp``, ``observed_timestamp``, ``trace_id`` as ``0x``
  hex, ``resource.attributes``; ``ReadableSpan.to_json``: ``name``, ``context.trace_id``,
  ``kind`` ``SpanKind.CLIENT``, ``parent_id``, ``start_time``, ``end_time``,
  ``status.status_code``, ``events``), when written one object a line; and what the
  JavaScript SDK's records are as ``JSON.stringify`` writes them (``hrTime`` as
  ``[seconds, nanoseconds]``, the resource's ``_rawAttributes``, ``spanContext``: the file
  exporters of Gemini CLI and VS Code's Copilot Chat), one object a line.

**Accounting.** A record is one log record, one span or one metric: an envelope line holding
twelve log records counts twelve records read (the line itself is not one more), each loaded,
skipped or rejected by itself, so a malformed record is rejected with its line and reason and
its siblings are read. Metrics are never read as calls: Claude Code, Codex and Gemini CLI
count the same requests in their metrics as in their events, so adding both would count them
twice; each metric is skipped (:data:`METRIC`). A line whose envelope holds no record is one
record, skipped (:data:`EMPTY`). A line that is neither an envelope nor a record of a known
flat shape is rejected.

:func:`records` yields :class:`Record` s; the caller accounts for each (a call's
``n_records``, ``Lowering.skip`` or ``Lowering.reject``). :func:`signals` tells, from a file's
head, which signals it holds.
"""

from __future__ import annotations

import gzip
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import orjson

from analyzer.errors import DamagedGzipError
from analyzer.ingest.base import Head, SourceFile
from analyzer.ingest.jsonl import head_objects, json_lines
from analyzer.ingest.lowering import brief
from analyzer.ingest.reading import MAX_LINE_BYTES, open_binary, text_lines
from analyzer.ingest.values import parse_time

if TYPE_CHECKING:
    from analyzer.ingest.lowering import Lowering

LOG, SPAN = "log", "span"
METRIC = "metric"  # skipped: counted by the events already (see the module's docstring)
EMPTY = "empty export"  # an envelope line with no record in it

_ENVELOPES = {"resourceLogs": LOG, "resourceSpans": SPAN, "resourceMetrics": METRIC}
# (resource list, scope list, record list) of each envelope
_NESTING = {
    "resourceLogs": ("scopeLogs", "logRecords"),
    "resourceSpans": ("scopeSpans", "spans"),
    "resourceMetrics": ("scopeMetrics", "metrics"),
}
_SPAN_KINDS = {
    0: None,
    1: "internal",
    2: "server",
    3: "client",
    4: "producer",
    5: "consumer",
}
_STATUS = {0: "unset", 1: "ok", 2: "error"}
# The envelope's first key, at the start of a line (a line may be longer than a file's head).
_ENVELOPE_START = re.compile(rb'(?m)^\s*\{\s*"(resourceLogs|resourceSpans|resourceMetrics)"\s*:')
_FRACTION = re.compile(r"(\.\d{6})\d+")


@dataclass(slots=True)
class SpanEvent:
    """An event of a span (``events[]``): its name, time and attributes."""

    name: str | None
    time: datetime | None
    attrs: dict[str, Any]


@dataclass(slots=True)
class Record:
    """One log record or span, decoded.

    ``name``: a log record's ``event.name`` attribute, else its body when the body is a
    string; a span's name. ``time``: a log record's time, else its observed time; a span's
    start. ``end``: a span's end (None for a log record). ``status``: a span's ``"unset"``,
    ``"ok"`` or ``"error"``; a log record's severity text. ``attrs`` and ``resource`` are the
    attributes decoded to plain values (a string, int, float, bool, list, dict or None).
    ``shape``: ``"otlp"`` (the envelope), ``"record"`` (one OTLP record a line),
    ``"clickhouse"``, ``"sdk"`` (the Python SDK's console JSON) or ``"js"`` (the JavaScript
    SDK's records as ``JSON.stringify`` writes them)."""

    kind: str  # LOG or SPAN
    line: int
    name: str | None
    attrs: dict[str, Any]
    resource: dict[str, Any]
    scope: str | None
    time: datetime | None
    end: datetime | None = None
    trace_id: str | None = None
    span_id: str | None = None
    parent_span_id: str | None = None
    status: str | None = None
    status_message: str | None = None
    span_kind: str | None = None
    body: Any = None
    events: list[SpanEvent] = field(default_factory=list)
    shape: str = "otlp"


class Malformed(ValueError):
    """A record that cannot be read (the reason is the message)."""


# -- values ------------------------------------------------------------------------------


def any_value(value: object) -> Any:
    """An OTLP ``AnyValue`` as a plain value (None for an empty or unknown one)."""
    if not isinstance(value, dict):
        return None
    if "stringValue" in value:
        s = value["stringValue"]
        return s if isinstance(s, str) else None
    if "intValue" in value:
        return _int(value["intValue"])
    if "doubleValue" in value:
        d = value["doubleValue"]
        if isinstance(d, int | float) and not isinstance(d, bool):
            return float(d)
        if isinstance(d, str):  # "NaN", "Infinity" and numbers as strings are allowed
            try:
                return float(d)
            except ValueError:
                return None
        return None
    if "boolValue" in value:
        b = value["boolValue"]
        return b if isinstance(b, bool) else None
    if "arrayValue" in value:
        arr = value["arrayValue"]
        values = arr.get("values") if isinstance(arr, dict) else None
        return [any_value(v) for v in values] if isinstance(values, list) else []
    if "kvlistValue" in value:
        kv = value["kvlistValue"]
        return key_values(kv.get("values") if isinstance(kv, dict) else None)
    if "bytesValue" in value:
        b = value["bytesValue"]
        return b if isinstance(b, str) else None  # base64, kept as written
    return None


def _int(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            return None
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def key_values(values: object) -> dict[str, Any]:
    """A list of ``{"key", "value": AnyValue}`` as a dict (an entry without a string key is
    left out). Raises :class:`Malformed` when ``values`` is neither absent nor a list."""
    if values is None:
        return {}
    if not isinstance(values, list):
        raise Malformed("attributes that are not a list of key/value pairs")
    out: dict[str, Any] = {}
    for kv in values:
        if isinstance(kv, dict) and isinstance(kv.get("key"), str):
            out[kv["key"]] = any_value(kv.get("value"))
    return out


def attributes(value: object) -> dict[str, Any]:
    """Attributes as an OTLP key/value list or as an object (flat shapes): a dict."""
    if isinstance(value, dict):
        return value
    return key_values(value)


def nanos(value: object) -> datetime | None:
    """Nanoseconds since the epoch (a string or a number; 0 or absent: unknown) as a naive
    UTC datetime, to the microsecond."""
    n = _int(value)
    if not n or n < 0:
        return None
    try:
        return datetime(1970, 1, 1) + timedelta(microseconds=n // 1000)
    except OverflowError:
        return None


def when(value: object, tz: str = "UTC") -> datetime | None:
    """A time in a flat record: nanoseconds (as OTLP writes them, a number or a string of
    digits), milli/microseconds or seconds as a number, or ISO text with any number of
    fractional digits (ClickHouse writes nine)."""
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    if isinstance(value, int | float) and not isinstance(value, bool):
        if value > 1e17:
            return nanos(int(value))
        if value > 1e14:  # microseconds
            try:
                return datetime.fromtimestamp(value / 1e6, UTC).replace(tzinfo=None)
            except (OverflowError, OSError, ValueError):
                return None
        return parse_time(value, tz)
    if isinstance(value, str):
        text = _FRACTION.sub(r"\1", value.strip().replace(" ", "T", 1))
        return parse_time(text, tz)
    return None


def hex_id(value: object) -> str | None:
    """A trace or span id as lower-case hex (the SDK's ``0x`` dropped); empty or all zeros:
    none."""
    if not isinstance(value, str):
        return None
    text = value.lower().removeprefix("0x")
    return text if text.strip("0") else None


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _span_kind(value: object) -> str | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return _SPAN_KINDS.get(value)
    if isinstance(value, str):  # SPAN_KIND_CLIENT, SpanKind.CLIENT, Client
        word = value.rsplit(".", 1)[-1].lower().removeprefix("span_kind_")
        return None if word in ("", "unspecified") else word
    return None


def _status(value: object) -> str | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return _STATUS.get(value)
    if isinstance(value, str):  # STATUS_CODE_ERROR, StatusCode.ERROR, Error, ERROR
        word = value.rsplit(".", 1)[-1].lower().removeprefix("status_code_")
        return word or None
    return None


_ANY_KEYS = frozenset(
    {
        "stringValue",
        "intValue",
        "doubleValue",
        "boolValue",
        "arrayValue",
        "kvlistValue",
        "bytesValue",
    }
)


def body_value(value: object) -> Any:
    """A record's body: an ``AnyValue`` decoded, or (flat shapes) the value as written."""
    if isinstance(value, dict) and (not value or _ANY_KEYS.intersection(value)):
        return any_value(value)
    return value


def _log_name(attrs: dict[str, Any], body: Any) -> str | None:
    name = attrs.get("event.name")
    if isinstance(name, str) and name:
        return name
    return body if isinstance(body, str) and body else None


# -- the envelope ------------------------------------------------------------------------


def _log_record(
    obj: object, line: int, resource: dict[str, Any], scope: str | None, tz: str
) -> Record:
    if not isinstance(obj, dict):
        raise Malformed("a log record that is not an object")
    attrs = attributes(obj.get("attributes"))
    body = body_value(obj.get("body"))
    name = _str(obj.get("eventName")) or _log_name(attrs, body)
    return Record(
        kind=LOG,
        line=line,
        name=name,
        attrs=attrs,
        resource=resource,
        scope=scope,
        time=nanos(obj.get("timeUnixNano")) or nanos(obj.get("observedTimeUnixNano")),
        trace_id=hex_id(obj.get("traceId")),
        span_id=hex_id(obj.get("spanId")),
        status=_str(obj.get("severityText")),
        body=body,
    )


def _span(obj: object, line: int, resource: dict[str, Any], scope: str | None, tz: str) -> Record:
    if not isinstance(obj, dict):
        raise Malformed("a span that is not an object")
    status = obj.get("status")
    status = status if isinstance(status, dict) else {}
    events: list[SpanEvent] = []
    raw_events = obj.get("events")
    for e in raw_events if isinstance(raw_events, list) else []:
        if isinstance(e, dict):
            events.append(
                SpanEvent(
                    _str(e.get("name")),
                    nanos(e.get("timeUnixNano")),
                    attributes(e.get("attributes")),
                )
            )
    return Record(
        kind=SPAN,
        line=line,
        name=_str(obj.get("name")),
        attrs=attributes(obj.get("attributes")),
        resource=resource,
        scope=scope,
        time=nanos(obj.get("startTimeUnixNano")),
        end=nanos(obj.get("endTimeUnixNano")),
        trace_id=hex_id(obj.get("traceId")),
        span_id=hex_id(obj.get("spanId")),
        parent_span_id=hex_id(obj.get("parentSpanId")),
        status=_status(status.get("code")) or "unset",
        status_message=_str(status.get("message")),
        span_kind=_span_kind(obj.get("kind")),
        events=events,
    )


def _list(obj: dict[str, Any], key: str) -> list[Any]:
    value = obj.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise Malformed(f"{key} is not a list")
    return value


def _envelope(line: int, obj: dict[str, Any], low: Lowering, tz: str) -> Iterator[Record]:
    """The records of an envelope line, each accounted for (read; metrics skipped; a
    malformed one rejected)."""
    entries: list[tuple[str, dict[str, Any], str | None, object]] = []
    for top, signal in _ENVELOPES.items():
        scopes_key, records_key = _NESTING[top]
        try:
            resources = _list(obj, top)
        except Malformed as exc:
            low.reject(line, str(exc), brief(obj))
            return
        for res in resources:
            if not isinstance(res, dict):
                entries.append(
                    (signal, {}, None, Malformed(f"an entry of {top} that is not an object"))
                )
                continue
            try:
                r = res.get("resource")
                resource = key_values(r.get("attributes")) if isinstance(r, dict) else {}
                scopes = _list(res, scopes_key)
            except Malformed as exc:
                entries.append((signal, {}, None, exc))
                continue
            for sc in scopes:
                if not isinstance(sc, dict):
                    entries.append(
                        (
                            signal,
                            resource,
                            None,
                            Malformed(f"an entry of {scopes_key} that is not an object"),
                        )
                    )
                    continue
                s = sc.get("scope")
                scope = _str(s.get("name")) if isinstance(s, dict) else None
                try:
                    items = _list(sc, records_key)
                except Malformed as exc:
                    entries.append((signal, resource, scope, exc))
                    continue
                entries.extend((signal, resource, scope, item) for item in items)
    if not entries:
        low.skip(EMPTY)
        return
    low.read(len(entries) - 1)  # (the line was counted as one record already)
    for signal, resource, scope, item in entries:
        if isinstance(item, Malformed):
            low.reject(line, str(item))
            continue
        if signal == METRIC:
            low.skip(METRIC)
            continue
        try:
            if signal == LOG:
                yield _log_record(item, line, resource, scope, tz)
            else:
                yield _span(item, line, resource, scope, tz)
        except Malformed as exc:
            low.reject(line, str(exc), brief(item))


# -- flat records ------------------------------------------------------------------------


def flat_shape(obj: dict[str, Any]) -> str | None:
    """Which flat shape a line's object is (``record``, ``clickhouse``, ``sdk``, ``js``), or
    None."""
    otlp_time = any(k in obj for k in ("timeUnixNano", "observedTimeUnixNano", "startTimeUnixNano"))
    if otlp_time and "attributes" in obj and any(k in obj for k in ("body", "name", "eventName")):
        return "record"
    if ("LogAttributes" in obj or "SpanAttributes" in obj) and "Timestamp" in obj:
        return "clickhouse"
    if (_pair(obj.get("hrTime")) or _pair(obj.get("startTime"))) and isinstance(
        obj.get("attributes"), dict
    ):
        return "js"
    res = obj.get("resource")
    sdk_resource = isinstance(res, dict) and isinstance(res.get("attributes"), dict)
    if (
        sdk_resource
        and isinstance(obj.get("attributes"), dict)
        and ("body" in obj or "context" in obj)
    ):
        return "sdk"
    return None


def _clickhouse(line: int, obj: dict[str, Any], tz: str) -> Record:
    resource = attributes(obj.get("ResourceAttributes"))
    service = _str(obj.get("ServiceName"))
    if service and "service.name" not in resource:
        resource = {**resource, "service.name": service}
    scope = _str(obj.get("ScopeName"))
    time = when(obj.get("Timestamp"), tz)
    if "SpanAttributes" in obj:
        attrs = attributes(obj.get("SpanAttributes"))
        duration = _int(obj.get("Duration"))
        names, stamps = obj.get("Events.Name"), obj.get("Events.Timestamp")
        events_attrs = obj.get("Events.Attributes")
        events = []
        if isinstance(names, list):
            stamps = stamps if isinstance(stamps, list) else []
            events_attrs = events_attrs if isinstance(events_attrs, list) else []
            for i, n in enumerate(names):
                ea = events_attrs[i] if i < len(events_attrs) else None
                ts = stamps[i] if i < len(stamps) else None
                events.append(SpanEvent(_str(n), when(ts, tz), ea if isinstance(ea, dict) else {}))
        end = time + timedelta(microseconds=duration // 1000) if time and duration else None
        return Record(
            kind=SPAN,
            line=line,
            name=_str(obj.get("SpanName")),
            attrs=attrs,
            resource=resource,
            scope=scope,
            time=time,
            end=end,
            trace_id=hex_id(obj.get("TraceId")),
            span_id=hex_id(obj.get("SpanId")),
            parent_span_id=hex_id(obj.get("ParentSpanId")),
            status=_status(obj.get("StatusCode")) or "unset",
            status_message=_str(obj.get("StatusMessage")),
            span_kind=_span_kind(obj.get("SpanKind")),
            events=events,
            shape="clickhouse",
        )
    attrs = attributes(obj.get("LogAttributes"))
    body = obj.get("Body")
    return Record(
        kind=LOG,
        line=line,
        name=_str(obj.get("EventName")) or _log_name(attrs, body),
        attrs=attrs,
        resource=resource,
        scope=scope,
        time=time,
        trace_id=hex_id(obj.get("TraceId")),
        span_id=hex_id(obj.get("SpanId")),
        status=_str(obj.get("SeverityText")),
        body=body,
        shape="clickhouse",
    )


def _sdk(line: int, obj: dict[str, Any], tz: str) -> Record:
    res = obj.get("resource")
    resource = attributes(res.get("attributes")) if isinstance(res, dict) else {}
    attrs = attributes(obj.get("attributes"))
    if "context" in obj:  # a span
        ctx = obj.get("context")
        ctx = ctx if isinstance(ctx, dict) else {}
        status = obj.get("status")
        status = status if isinstance(status, dict) else {}
        raw_events = obj.get("events")
        events = [
            SpanEvent(
                _str(e.get("name")), when(e.get("timestamp"), tz), attributes(e.get("attributes"))
            )
            for e in (raw_events if isinstance(raw_events, list) else [])
            if isinstance(e, dict)
        ]
        return Record(
            kind=SPAN,
            line=line,
            name=_str(obj.get("name")),
            attrs=attrs,
            resource=resource,
            scope=None,
            time=when(obj.get("start_time"), tz),
            end=when(obj.get("end_time"), tz),
            trace_id=hex_id(ctx.get("trace_id")),
            span_id=hex_id(ctx.get("span_id")),
            parent_span_id=hex_id(obj.get("parent_id")),
            status=_status(status.get("status_code")) or "unset",
            status_message=_str(status.get("description")),
            span_kind=_span_kind(obj.get("kind")),
            events=events,
            shape="sdk",
        )
    body = obj.get("body")
    return Record(
        kind=LOG,
        line=line,
        name=_str(obj.get("event_name")) or _log_name(attrs, body),
        attrs=attrs,
        resource=resource,
        scope=None,
        time=when(obj.get("timestamp"), tz) or when(obj.get("observed_timestamp"), tz),
        trace_id=hex_id(obj.get("trace_id")),
        span_id=hex_id(obj.get("span_id")),
        status=_str(obj.get("severity_text")),
        body=body,
        shape="sdk",
    )


def _pair(value: object) -> datetime | None:
    """The JavaScript SDK's ``HrTime``: ``[seconds, nanoseconds]``."""
    if not (isinstance(value, list) and len(value) == 2):
        return None
    seconds, ns = _int(value[0]), _int(value[1])
    if seconds is None or ns is None or seconds <= 0 or ns < 0:
        return None
    return nanos(seconds * 1_000_000_000 + ns)


def _js(line: int, obj: dict[str, Any]) -> Record:
    """A record of the OpenTelemetry JavaScript SDK as ``JSON.stringify`` writes it (Gemini
    CLI's and VS Code Copilot Chat's file exporters): ``hrTime`` pairs, the resource's
    ``_rawAttributes`` as ``[key, value]`` pairs, ``spanContext``, ``instrumentationScope``,
    ``body`` (``_body`` in newer SDKs); a span has ``startTime``, ``endTime``, ``kind``,
    ``status.code`` and ``events``."""
    res = obj.get("resource")
    res = res if isinstance(res, dict) else {}
    given = res.get("attributes")
    resource: dict[str, Any] = given if isinstance(given, dict) else {}
    raw = res.get("_rawAttributes")
    if not resource and isinstance(raw, list):
        resource = {
            p[0]: p[1] for p in raw if isinstance(p, list) and len(p) == 2 and isinstance(p[0], str)
        }
    scope = obj.get("instrumentationScope")
    scope_name = _str(scope.get("name")) if isinstance(scope, dict) else None
    ctx = obj.get("spanContext") or obj.get("_spanContext")
    ctx = ctx if isinstance(ctx, dict) else {}
    attrs = attributes(obj.get("attributes"))
    if _pair(obj.get("startTime")) and "hrTime" not in obj:  # a span
        status = obj.get("status")
        status = status if isinstance(status, dict) else {}
        raw_events = obj.get("events")
        events = [
            SpanEvent(_str(e.get("name")), _pair(e.get("time")), attributes(e.get("attributes")))
            for e in (raw_events if isinstance(raw_events, list) else [])
            if isinstance(e, dict)
        ]
        js_kind = obj.get("kind")  # (the JavaScript SDK counts its kinds from 0: INTERNAL)
        parent = obj.get("parentSpanContext")
        parent_id = parent.get("spanId") if isinstance(parent, dict) else obj.get("parentSpanId")
        return Record(
            kind=SPAN,
            line=line,
            name=_str(obj.get("name")),
            attrs=attrs,
            resource=resource,
            scope=scope_name,
            time=_pair(obj.get("startTime")),
            end=_pair(obj.get("endTime")),
            trace_id=hex_id(ctx.get("traceId")),
            span_id=hex_id(ctx.get("spanId")),
            parent_span_id=hex_id(parent_id),
            status=_status(status.get("code")) or "unset",
            status_message=_str(status.get("message")),
            span_kind=_span_kind(js_kind + 1 if isinstance(js_kind, int) else None),
            events=events,
            shape="js",
        )
    body = obj.get("body", obj.get("_body"))
    return Record(
        kind=LOG,
        line=line,
        name=_log_name(attrs, body),
        attrs=attrs,
        resource=resource,
        scope=scope_name,
        time=_pair(obj.get("hrTime")) or _pair(obj.get("hrTimeObserved")),
        trace_id=hex_id(ctx.get("traceId")),
        span_id=hex_id(ctx.get("spanId")),
        status=_str(obj.get("severityText")),
        body=body,
        shape="js",
    )


def _flat(line: int, obj: dict[str, Any], shape: str, tz: str) -> Record:
    if shape == "clickhouse":
        return _clickhouse(line, obj, tz)
    if shape == "js":
        return _js(line, obj)
    if shape == "sdk":
        return _sdk(line, obj, tz)
    res = obj.get("resource")
    if isinstance(res, dict) and "attributes" in res:
        res = res["attributes"]
    resource = attributes(res)
    scope = obj.get("scope")
    scope_name = _str(scope.get("name")) if isinstance(scope, dict) else _str(scope)
    read = _span if "startTimeUnixNano" in obj else _log_record
    rec = read(obj, line, resource, scope_name, tz)
    rec.shape = "record"
    return rec


# -- the file ----------------------------------------------------------------------------


def records(src: SourceFile, low: Lowering, tz: str = "UTC") -> Iterator[Record]:
    """The log records and spans of a file, in its order (within a line, resources, scopes and
    records in the order written). Every record is counted as read; metrics, empty envelopes
    and malformed records are skipped or rejected here, and the caller accounts for each
    record yielded. A file of objects pretty-printed over several lines (:func:`pretty`) is
    read an object at a time, each numbered by its first line."""
    objects = _pretty_objects(src, low) if pretty(src.head) else json_lines(src, low)
    for line, obj in objects:
        if any(k in obj for k in _ENVELOPES):
            yield from _envelope(line, obj, low, tz)
            continue
        if "scopeMetrics" in obj:  # the JavaScript SDK's ResourceMetrics, stringified
            _js_metrics(line, obj, low)
            continue
        shape = flat_shape(obj)
        if shape is None:
            low.reject(
                line, "not an OpenTelemetry record (no envelope, no known flat shape)", brief(obj)
            )
            continue
        try:
            yield _flat(line, obj, shape, tz)
        except Malformed as exc:
            low.reject(line, str(exc), brief(obj))


def _js_metrics(line: int, obj: dict[str, Any], low: Lowering) -> None:
    """Each metric of a stringified ResourceMetrics skipped (the line counted once already)."""
    scopes = obj.get("scopeMetrics")
    n = 0
    for sc in scopes if isinstance(scopes, list) else []:
        metrics = sc.get("metrics") if isinstance(sc, dict) else None
        n += len(metrics) if isinstance(metrics, list) else 0
    if n == 0:
        low.skip(EMPTY)
        return
    low.read(n - 1)
    low.skip(METRIC, n)


def pretty(head: Head) -> bool:
    """Objects pretty-printed over several lines, one after another, as
    ``JSON.stringify(x, null, 2)`` writes them (Gemini CLI's ``telemetry.outfile``): the file
    starts with a line that is ``{`` alone."""
    first = head.utf8.lstrip().split(b"\n", 1)[0]
    return first.strip() == b"{"


def _pretty_objects(src: SourceFile, low: Lowering) -> Iterator[tuple[int, dict[str, Any]]]:
    """(first line, object) for each object of a pretty-printed file: an object runs from a
    line ``{`` to a line ``}`` at its start. An object that does not parse, or that is longer
    than the longest line read, is rejected with its first line; text between objects is
    rejected line by line."""
    records = 0
    start: int | None = None
    parts: list[bytes] = []
    size = 0
    try:
        with open_binary(src) as fh:
            for lineno, raw, length in text_lines(fh, src.head.encoding):
                if start is None:
                    if raw.strip() == b"{":
                        start, parts, size = lineno, [raw], length
                    else:
                        records += 1
                        low.reject(lineno, "a line outside any object", raw)
                    continue
                size += length
                if size <= MAX_LINE_BYTES:
                    parts.append(raw)
                if not (raw[:1] == b"}" and raw.strip() == b"}"):
                    continue
                records += 1
                first, text = start, b"".join(parts)
                start, parts = None, []
                if size > MAX_LINE_BYTES:
                    low.reject(first, f"an object of {size:,} bytes, over the limit", text[:300])
                    continue
                try:
                    obj = orjson.loads(text)
                except orjson.JSONDecodeError as exc:
                    low.reject(first, f"not valid JSON: {exc}", text)
                    continue
                if isinstance(obj, dict):
                    yield first, obj
                else:
                    low.reject(first, "a JSON value that is not an object", text)
            if start is not None:
                records += 1
                low.reject(start, "cut-off last object (is the file still being written?)")
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise DamagedGzipError(f"damaged gzip data ({exc})", src.display) from exc
    finally:
        low.read(records)


def _first_pretty(head: Head) -> dict[str, Any] | None:
    """The first object of a pretty-printed head, if the head holds it whole."""
    lines = head.utf8.splitlines(keepends=True)
    for i, raw in enumerate(lines):
        if raw[:1] == b"}" and raw.strip() == b"}":
            try:
                obj = orjson.loads(b"".join(lines[: i + 1]))
            except orjson.JSONDecodeError:
                return None
            return obj if isinstance(obj, dict) else None
    return None


def signals(head: Head) -> frozenset[str]:
    """The signals a file's head holds (``log``, ``span``, ``metric``): an envelope's first
    key at the start of a line (an envelope line is often longer than the head), or flat
    records of a known shape on the first lines. Empty: not OpenTelemetry."""
    data = head.utf8
    found = {_ENVELOPES[m.decode()] for m in _ENVELOPE_START.findall(data[:65536])}
    objects = head_objects(head)
    if pretty(head):
        first = _first_pretty(head)
        objects = [first] if first is not None else []
        if first is not None and "scopeMetrics" in first and "resource" in first:
            found.add(METRIC)
    for obj in objects:
        shape = flat_shape(obj)
        if shape is None:
            continue
        if shape == "clickhouse":
            found.add(SPAN if "SpanAttributes" in obj else LOG)
        elif shape == "sdk":
            found.add(SPAN if "context" in obj else LOG)
        elif shape == "js":
            found.add(LOG if "hrTime" in obj else SPAN)
        else:
            found.add(SPAN if "startTimeUnixNano" in obj else LOG)
    return frozenset(found)
