"""The OpenTelemetry record reader (``analyzer.formats.otlp``): AnyValue decoding, the OTLP/JSON
envelope of logs, spans and metrics, the flat shapes, and the accounting of records (not lines).

The envelope lines follow the OTLP/JSON encoding (opentelemetry-proto ``docs/specification.md``)
as the real Claude Code exports in ``tests/fixtures/otel/`` write it (see its README)."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any, cast

from analyzer.formats import otlp
from analyzer.ingest.base import SourceFile
from analyzer.ingest.lowering import Lowering
from analyzer.ingest.reading import read_head


def kv(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        v: dict[str, Any] = {"boolValue": value}
    elif isinstance(value, int):
        v = {"intValue": str(value)}
    elif isinstance(value, float):
        v = {"doubleValue": value}
    else:
        v = {"stringValue": value}
    return {"key": key, "value": v}


def log_record(name: str, nanos: int, **attrs: Any) -> dict[str, Any]:
    return {
        "timeUnixNano": str(nanos),
        "observedTimeUnixNano": str(nanos + 1000),
        "body": {"stringValue": name},
        "attributes": [kv("event.name", name.split(".", 1)[-1])]
        + [kv(k.replace("__", "."), v) for k, v in attrs.items()],
        "traceId": "",
        "spanId": "",
    }


def envelope(*records: Any, resource: dict[str, Any] | None = None) -> dict[str, Any]:
    res = [kv(k, v) for k, v in (resource or {"service.name": "claude-code"}).items()]
    return {
        "resourceLogs": [
            {
                "resource": {"attributes": res},
                "scopeLogs": [
                    {
                        "scope": {"name": "com.anthropic.claude_code.events"},
                        "logRecords": list(records),
                    }
                ],
            }
        ]
    }


def read(path: Path) -> tuple[list[otlp.Record], Lowering]:
    low = Lowering(cast(Any, None), "otel", "otel")  # (only its accounting is used here)
    src = SourceFile(path, path.name, path.stat().st_size, read_head(path, path.name), True)
    return list(otlp.records(src, low)), low


def write(path: Path, *objs: Any) -> Path:
    path.write_text("".join(json.dumps(o) + "\n" for o in objs), encoding="utf-8")
    return path


def closes(low: Lowering, yielded: int) -> None:
    """Every record read is yielded, skipped or rejected."""
    assert low.records_read == yielded + sum(low.skipped.values()) + len(low.rejects)


def test_any_value_decodes_every_type() -> None:
    assert otlp.any_value({"stringValue": "x"}) == "x"
    assert otlp.any_value({"intValue": "9007199254740993"}) == 9007199254740993
    assert otlp.any_value({"intValue": 7}) == 7
    assert otlp.any_value({"doubleValue": 0.25}) == 0.25
    assert otlp.any_value({"doubleValue": 3}) == 3.0
    assert otlp.any_value({"boolValue": False}) is False
    assert otlp.any_value(
        {"arrayValue": {"values": [{"stringValue": "a"}, {"intValue": "2"}]}}
    ) == [
        "a",
        2,
    ]
    assert otlp.any_value(
        {"kvlistValue": {"values": [{"key": "k", "value": {"boolValue": True}}]}}
    ) == {"k": True}
    assert otlp.any_value({"bytesValue": "AAE="}) == "AAE="
    assert otlp.any_value({}) is None
    assert otlp.any_value({"intValue": "twelve"}) is None
    assert otlp.any_value("plain") is None


def test_times_and_ids() -> None:
    assert otlp.nanos("1751800000123456789") == datetime(2025, 7, 6, 11, 6, 40, 123456)
    assert otlp.nanos("0") is None and otlp.nanos(None) is None
    assert otlp.when("2025-07-06 11:06:40.123456789") == datetime(2025, 7, 6, 11, 6, 40, 123456)
    assert otlp.when("2025-07-06T11:06:40.5Z") == datetime(2025, 7, 6, 11, 6, 40, 500000)
    assert otlp.when(1751800000123456789) == datetime(2025, 7, 6, 11, 6, 40, 123456)
    assert otlp.hex_id("0xABCDEF0123456789") == "abcdef0123456789"
    assert otlp.hex_id("") is None and otlp.hex_id("00000000") is None


def test_envelope_logs_count_records_not_lines(tmp_path: Path) -> None:
    t = 1_751_800_000_000_000_000
    path = write(
        tmp_path / "logs.jsonl",
        envelope(
            log_record("claude_code.api_request", t, model="claude-sonnet-4", input_tokens=10),
            log_record("claude_code.tool_result", t + 10**9, tool_name="Bash", success="true"),
            resource={"service.name": "claude-code", "team.id": "core"},
        ),
        envelope(log_record("claude_code.user_prompt", t + 2 * 10**9, prompt_length=12)),
    )
    recs, low = read(path)
    assert [r.name for r in recs] == ["api_request", "tool_result", "user_prompt"]
    assert [r.line for r in recs] == [1, 1, 2]
    first = recs[0]
    assert first.kind == otlp.LOG and first.body == "claude_code.api_request"
    assert first.attrs["input_tokens"] == 10 and first.attrs["model"] == "claude-sonnet-4"
    assert first.resource == {"service.name": "claude-code", "team.id": "core"}
    assert first.scope == "com.anthropic.claude_code.events"
    assert first.time == otlp.nanos(str(t))
    assert first.trace_id is None and first.span_id is None
    assert low.records_read == 3 and not low.rejects and not low.skipped
    closes(low, len(recs))


def test_a_malformed_record_is_rejected_alone(tmp_path: Path) -> None:
    t = 1_751_800_000_000_000_000
    path = write(
        tmp_path / "logs.jsonl",
        envelope(log_record("claude_code.api_request", t), "not a record", {"attributes": 5}),
        {"resourceLogs": "nothing"},
        {"resourceLogs": []},
        {"something": "else"},
    )
    recs, low = read(path)
    assert len(recs) == 1
    reasons = [(line, reason) for line, reason, _ in low.rejects]
    assert reasons == [
        (1, "a log record that is not an object"),
        (1, "attributes that are not a list of key/value pairs"),
        (2, "resourceLogs is not a list"),
        (4, "not an OpenTelemetry record (no envelope, no known flat shape)"),
    ]
    assert low.skipped == {otlp.EMPTY: 1}
    assert low.records_read == 3 + 1 + 1 + 1
    closes(low, len(recs))


def test_metrics_are_skipped_each(tmp_path: Path) -> None:
    metric = {"name": "claude_code.token.usage", "sum": {"dataPoints": []}}
    path = write(
        tmp_path / "metrics.jsonl",
        {"resourceMetrics": [{"scopeMetrics": [{"metrics": [metric, metric, metric]}]}]},
    )
    recs, low = read(path)
    assert recs == [] and low.skipped == {otlp.METRIC: 3} and low.records_read == 3
    assert otlp.signals(read_head(path, "m")) == {otlp.METRIC}


def test_envelope_spans(tmp_path: Path) -> None:
    span = {
        "traceId": "5B8EFFF798038103D269B633813FC60C",
        "spanId": "EEE19B7EC3C1B174",
        "parentSpanId": "EEE19B7EC3C1B173",
        "name": "chat gpt-4o",
        "kind": 3,
        "startTimeUnixNano": "1544712660000000000",
        "endTimeUnixNano": "1544712661000000000",
        "attributes": [kv("gen_ai.usage.input_tokens", 12)],
        "events": [{"timeUnixNano": "1544712660300000000", "name": "ebook", "attributes": []}],
        "status": {"code": "STATUS_CODE_ERROR", "message": "boom"},
    }
    path = write(
        tmp_path / "spans.jsonl",
        {
            "resourceSpans": [
                {"resource": {}, "scopeSpans": [{"scope": {"name": "s"}, "spans": [span]}]}
            ]
        },
    )
    (rec,), low = read(path)
    assert rec.kind == otlp.SPAN and rec.name == "chat gpt-4o" and rec.span_kind == "client"
    assert rec.trace_id == "5b8efff798038103d269b633813fc60c"
    assert rec.parent_span_id == "eee19b7ec3c1b173"
    assert rec.status == "error" and rec.status_message == "boom"
    assert rec.end is not None and rec.time is not None
    assert (rec.end - rec.time).total_seconds() == 1
    assert rec.events[0].name == "ebook" and rec.attrs == {"gen_ai.usage.input_tokens": 12}
    assert otlp.signals(read_head(path, "s")) == {otlp.SPAN}
    closes(low, 1)


def test_flat_shapes(tmp_path: Path) -> None:
    one = log_record("claude_code.api_request", 1_751_800_000_000_000_000, input_tokens=3)
    clickhouse = {
        "Timestamp": "2025-07-06 11:06:40.123456789",
        "TraceId": "",
        "SpanId": "",
        "SeverityText": "",
        "ServiceName": "claude-code",
        "Body": "claude_code.api_request",
        "ResourceAttributes": {"service.name": "claude-code", "team": "a"},
        "ScopeName": "com.anthropic.claude_code.events",
        "LogAttributes": {"event.name": "api_request", "input_tokens": "3"},
    }
    sdk = {
        "body": "claude_code.api_request",
        "severity_number": None,
        "attributes": {"event.name": "api_request", "input_tokens": 3},
        "timestamp": "2025-07-06T11:06:40.123456Z",
        "trace_id": "0x00000000000000000000000000000000",
        "resource": {"attributes": {"service.name": "x"}, "schema_url": ""},
    }
    path = write(tmp_path / "flat.jsonl", one, clickhouse, sdk)
    recs, low = read(path)
    assert [r.shape for r in recs] == ["record", "clickhouse", "sdk"]
    assert [r.name for r in recs] == ["api_request"] * 3
    assert [r.time for r in recs] == [datetime(2025, 7, 6, 11, 6, 40)] + [
        datetime(2025, 7, 6, 11, 6, 40, 123456)
    ] * 2
    assert recs[1].resource["team"] == "a" and recs[1].attrs["input_tokens"] == "3"
    assert recs[2].trace_id is None and recs[2].resource == {"service.name": "x"}
    assert otlp.signals(read_head(path, "f")) == {otlp.LOG}
    closes(low, 3)


def test_signals_of_a_long_envelope_line(tmp_path: Path) -> None:
    """An envelope line longer than the head is still told by its first key."""
    t = 1_751_800_000_000_000_000
    big = envelope(
        *[log_record("claude_code.api_request", t + i, pad="x" * 500) for i in range(300)]
    )
    path = write(tmp_path / "big.jsonl", big)
    assert path.stat().st_size > 64 * 1024
    assert otlp.signals(read_head(path, "b")) == {otlp.LOG}
    plain = write(tmp_path / "plain.jsonl", {"type": "user", "message": {}})
    assert otlp.signals(read_head(plain, "p")) == frozenset()


def test_the_javascript_sdks_records(tmp_path: Path) -> None:
    """Records as the JavaScript SDK's ``JSON.stringify`` writes them (the file exporters of
    Gemini CLI and VS Code's Copilot Chat), one object a line: ``hrTime`` pairs, the
    resource's ``_rawAttributes``, ``spanContext``; a span with ``startTime``/``endTime`` and
    the SDK's own kinds (``2``: CLIENT)."""
    log = {
        "hrTime": [1783728123, 456000000],
        "hrTimeObserved": [1783728123, 457000000],
        "spanContext": {
            "traceId": "0123456789abcdef0123456789abcdef",
            "spanId": "0123456789abcdef",
        },
        "instrumentationScope": {"name": "gemini-cli", "version": "v0.8.0"},
        "resource": {"_rawAttributes": [["service.name", "gemini-cli"], ["session.id", "g-1"]]},
        "body": "API response from gemini-2.5-pro. Status: 200.",
        "attributes": {"event.name": "gemini_cli.api_response", "input_token_count": 20},
    }
    span = {
        "name": "chat gemini-2.5-pro",
        "kind": 2,
        "spanContext": {
            "traceId": "0123456789abcdef0123456789abcdef",
            "spanId": "1111111111111111",
        },
        "parentSpanContext": {"spanId": "0123456789abcdef"},
        "startTime": [1783728122, 0],
        "endTime": [1783728123, 500000000],
        "status": {"code": 2, "message": "quota"},
        "attributes": {"gen_ai.usage.input_tokens": 20},
        "events": [{"name": "retry", "time": [1783728122, 500000000], "attributes": {}}],
        "resource": {"_rawAttributes": [["service.name", "gemini-cli"]]},
    }
    path = write(tmp_path / "js.jsonl", log, span)
    (first, second), low = read(path)
    assert (first.shape, first.kind, first.name) == ("js", otlp.LOG, "gemini_cli.api_response")
    assert first.time == datetime(2026, 7, 11, 0, 2, 3, 456000)
    assert first.resource == {"service.name": "gemini-cli", "session.id": "g-1"}
    assert first.scope == "gemini-cli" and first.span_id == "0123456789abcdef"
    assert (second.kind, second.span_kind, second.status) == (otlp.SPAN, "client", "error")
    assert second.parent_span_id == "0123456789abcdef" and second.events[0].name == "retry"
    assert second.end is not None and second.time is not None
    assert (second.end - second.time).total_seconds() == 1.5
    assert otlp.signals(read_head(path, "j")) == {otlp.LOG, otlp.SPAN}
    closes(low, 2)
