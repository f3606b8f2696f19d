"""OpenTelemetry spans as calls and messages (``analyzer.formats.otel_spans``): real captures of
OpenTelemetry's own OpenAI instrumentation, OpenLLMetry and OpenInference, and agent traces
written to their field names (``tests/fixtures/otel_spans/README.md``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any, cast

import orjson
import pytest

from analyzer.detect.detectors import bind_all, detect, discover
from analyzer.engine.store import Store, open_store
from analyzer.formats import otlp
from analyzer.formats.otel_spans import Spans
from analyzer.ingest.base import IngestOptions, SourceFile
from analyzer.ingest.lowering import Lowering
from analyzer.ingest.reading import read_head
from analyzer.ingest.usage import token_counts
from analyzer.pipeline import ingest_paths
from tests.helpers import assert_accounted, q

FIX = Path(__file__).parent / "fixtures" / "otel_spans"
RAW = FIX / "genai-interlingua-raw.jsonl"
OPENLLMETRY = FIX / "genai-interlingua-openllmetry.jsonl"
OPENINFERENCE = FIX / "genai-interlingua-openinference.jsonl"
AGENT = FIX / "genai-agent.jsonl"
OI_AGENT = FIX / "openinference-agent.jsonl"


def read(path: Path) -> Lowering:
    """A file's spans through ``Spans``, into a Lowering that is never written (its rows and
    accounting are what is checked)."""
    low = Lowering(cast(Any, None), "otel", "otel")
    src = SourceFile(path, path.name, path.stat().st_size, read_head(path, path.name), True)
    spans = Spans(low)
    for rec in otlp.records(src, low):
        assert rec.kind == otlp.SPAN
        spans.add(rec)
    spans.finish()
    return low


def accounted(low: Lowering) -> int:
    calls = sum(c["n_records"] for c in low.calls)
    messages = sum(m["n_records"] for m in low.messages)
    return calls + messages + sum(low.skipped.values()) + len(low.rejects)


def provider_usage(path: Path) -> dict[str, Any]:
    """The provider's own ``usage`` object, from the OpenInference capture's ``output.value``
    (the response as the mock of OpenAI sent it): the count the spans' figures are held to."""
    doc = json.loads(path.read_text())
    span = doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    attrs = {a["key"]: a["value"] for a in span["attributes"]}
    return cast(dict[str, Any], orjson.loads(attrs["output.value"]["stringValue"])["usage"])


TOKENS = ("input_tokens", "cached_input_tokens", "output_tokens", "reasoning_tokens")


@pytest.mark.parametrize("path", [RAW, OPENLLMETRY, OPENINFERENCE], ids=lambda p: p.stem)
def test_real_captures_give_one_call_with_the_providers_counts(path: Path) -> None:
    low = read(path)
    assert low.records_read == accounted(low) and not low.rejects
    (call,) = low.calls
    expected = token_counts(provider_usage(OPENINFERENCE))
    # every column a span states equals the provider's count; the raw capture states no
    # cached or reasoning tokens (OpenTelemetry's instrumentation leaves them out)
    stated = {k: call.get(k) for k in TOKENS if call.get(k) is not None}
    assert stated == {k: expected[k] for k in stated}
    assert {"input_tokens", "output_tokens"} <= stated.keys()
    assert call["model"] == "gpt-4o-mini-2024-07-18" and call["provider"] == "openai"
    doc = json.loads(path.read_text())
    resource = {
        a["key"]: a["value"]["stringValue"]
        for a in doc["resourceSpans"][0]["resource"]["attributes"]
    }
    assert call["app"] == "capture" and json.loads(call["labels"]) == resource
    spans = [s for r in doc["resourceSpans"] for sc in r["scopeSpans"] for s in sc["spans"]]
    chat = next(
        s for s in spans if s["name"] in ("chat gpt-4o-mini", "openai.chat", "ChatCompletion")
    )
    assert call["native_id"] == f"{chat['traceId']}:{chat['spanId']}"
    assert call["session_id"] == chat["traceId"]  # no conversation id: the trace
    assert call["finish_reason_raw"] in ("tool_calls", "tool_call")
    # what was said: the user's question, and the tool call the reply names
    prompt, tool = low.messages
    assert (prompt["kind"], prompt["excerpt"]) == ("prompt", "Where is order A-1187?")
    assert (tool["kind"], tool["tool_name"], tool["tool_use_id"]) == (
        "tool_call",
        "lookup_order",
        "call_9RtYbK2mXqLp",
    )
    assert tool["call_id"] == f"otel:{call['native_id']}" and call["tool_call_count"] == 1


def test_the_same_call_hashes_alike_in_both_conventions() -> None:
    hashes = {read(p).messages[1]["tool_args_hash"] for p in (RAW, OPENLLMETRY, OPENINFERENCE)}
    assert len(hashes) == 1  # arguments as an object (GenAI) or JSON text (OpenInference)


def test_a_workflow_span_is_skipped_by_kind() -> None:
    low = read(OPENLLMETRY)
    assert low.records_read == 2 and dict(low.skipped) == {"span workflow": 1}


def test_agent_trace_calls_tools_and_accounting() -> None:
    low = read(AGENT)
    assert low.records_read == 27 == accounted(low)
    assert [r[1] for r in low.rejects] == [
        "a span without a traceId or spanId (no identity for it)",
        "a tool span that names no tool",
    ]
    assert all(r[0] == 9 for r in low.rejects)
    assert dict(low.skipped) == {"span invoke_agent": 2, "span": 1}
    sessions = {c["session_id"] for c in low.calls}
    assert sessions == {"conv-loop-1", "conv-ok-1"}
    loop = [c for c in low.calls if c["session_id"] == "conv-loop-1"]
    # six chat spans; the agent span's totals (99,999 tokens) are no call
    assert (
        len(loop) == 6
        and sum(c["input_tokens"] for c in loop) == sum(412 + 60 * i for i in range(5)) + 760
    )
    assert [c["seq"] for c in loop] == sorted(c["seq"] for c in loop)
    assert {c["agent_id"] for c in loop} == {"support_triage"}
    labels = json.loads(loop[0]["labels"])
    assert {k: labels[k] for k in ("cost_center", "service.name", "team.id", "user.email")} == {
        "cost_center": "cc-42",
        "service.name": "support-agent",
        "team.id": "payments",
        "user.email": "dev@example.com",
    }
    msgs = [m for m in low.messages if m["session_id"] == "conv-loop-1"]
    kinds = [m["kind"] for m in msgs]
    assert kinds == ["prompt"] + ["tool_call", "tool_result"] * 5 + ["text"]
    assert [m["idx"] for m in msgs] == sorted(m["idx"] for m in msgs)
    calls = [m for m in msgs if m["kind"] == "tool_call"]
    results = [m for m in msgs if m["kind"] == "tool_result"]
    assert len({m["tool_args_hash"] for m in calls}) == 1
    assert len({m["tool_result_hash"] for m in results}) == 1
    # each tool run is the message of the call that asked for it (its reply names the id)
    assert [m["call_id"] for m in calls] == [f"otel:{c['native_id']}" for c in loop[:5]]
    assert all(m["n_records"] == 1 for m in calls)


def test_spans_in_any_order_and_split_over_files_give_the_same_rows(tmp_path: Path) -> None:
    lines = AGENT.read_text().splitlines(keepends=True)
    whole = read(AGENT)
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_text("".join(reversed(lines[:4])))
    second.write_text("".join(lines[4:]))
    a, b = read(first), read(second)
    assert {c["native_id"] for c in a.calls + b.calls} == {c["native_id"] for c in whole.calls}
    placed = {(m["session_id"], m["idx"], m["kind"]) for m in whole.messages}
    # a tool span read without its call is placed where it is placed whole
    split = {(m["session_id"], m["idx"], m["kind"]) for m in a.messages + b.messages}
    assert {(s, i) for s, i, k in split if k in ("tool_call", "tool_result")} <= {
        (s, i) for s, i, _ in placed
    }


def test_openinference_agent_costs_errors_and_session() -> None:
    low = read(OI_AGENT)
    assert low.records_read == 10 == accounted(low)
    assert dict(low.skipped) == {"span agent": 1, "span chain": 1}
    assert len(low.calls) == 4
    assert {c["session_id"] for c in low.calls} == {"sess-oi-1"}
    assert [c["cost_usd"] for c in low.calls] == [0.0001908, 0.0001968, 0.0002028, 0.0002088]
    assert {c["cost_basis"] for c in low.calls} == {"reported"}
    assert [c["input_tokens"] for c in low.calls] == [1200, 1240, 1280, 1320]
    assert json.loads(low.calls[0]["labels"])["user.id"] == "u-7741"
    results = [m for m in low.messages if m["kind"] == "tool_result"]
    assert len(results) == 4 and all(m["is_error"] for m in results)
    assert {m["excerpt"] for m in results} == {"FileNotFoundError: config/settings.yaml"}
    prompts = [m for m in low.messages if m["kind"] == "prompt"]
    assert [p["excerpt"] for p in prompts] == ["Fix the settings."]  # tool turns resend history


def test_content_not_recorded_is_left_unknown(tmp_path: Path) -> None:
    """A chat span without content capture (the default) and a tool span without its
    arguments: the reply's measures and the arguments' hash stay NULL, not zero."""
    doc = json.loads(AGENT.read_text().splitlines()[0])
    spans = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
    for s in spans:
        s["attributes"] = [
            a
            for a in s["attributes"]
            if a["key"]
            not in (
                "gen_ai.input.messages",
                "gen_ai.output.messages",
                "gen_ai.tool.call.arguments",
                "gen_ai.tool.call.result",
            )
        ]
    path = tmp_path / "bare.jsonl"
    path.write_text(json.dumps(doc) + "\n")
    low = read(path)
    assert low.calls and all(c["content_chars"] is None for c in low.calls)
    assert all(c["tool_call_count"] is None for c in low.calls)
    tools = [m for m in low.messages if m["kind"] == "tool_call"]
    assert tools and all(m["tool_args_hash"] is None for m in tools)
    assert not [m for m in low.messages if m["kind"] in ("tool_result", "prompt")]


def kv(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    return {"key": key, "value": {"stringValue": value}}


def one_trace(tmp_path: Path, *spans: dict[str, Any]) -> Lowering:
    doc = {"resourceSpans": [{"resource": {}, "scopeSpans": [{"spans": list(spans)}]}]}
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(doc) + "\n")
    return read(path)


def span(sid: str, t: int, attrs: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {
        "traceId": "5b8efff798038103d269b633813fc60c",
        "spanId": sid,
        "name": more.pop("name", "span"),
        "startTimeUnixNano": str(1749823200000000000 + t),
        "endTimeUnixNano": str(1749823200000000000 + t + 1000),
        "attributes": [kv(k, v) for k, v in attrs.items()],
        **more,
    }


def test_older_names_and_pydantic_ai_tool_spans(tmp_path: Path) -> None:
    """The names before the GenAI conventions settled (OpenLLMetry before its migration:
    ``gen_ai.system``, ``llm.request.type``, ``gen_ai.usage.prompt_tokens``; the indexed
    ``gen_ai.completion.N.*``) and pydantic-ai's ``running tool`` span (its ``_tool_manager``:
    ``gen_ai.tool.name``, ``gen_ai.tool.call.id``, ``tool_arguments``, ``tool_response``)."""
    low = one_trace(
        tmp_path,
        span(
            "eee19b7ec3c1b174",
            0,
            {
                "gen_ai.system": "Anthropic",
                "llm.request.type": "chat",
                "gen_ai.request.model": "claude-sonnet-4-5",
                "gen_ai.usage.prompt_tokens": 10,
                "gen_ai.usage.cache_read_input_tokens": 3000,
                "gen_ai.usage.cache_creation_input_tokens": 200,
                "gen_ai.usage.completion_tokens": 40,
                "gen_ai.completion.0.role": "assistant",
                "gen_ai.completion.0.content": "Looking it up.",
                "gen_ai.completion.0.tool_calls.0.id": "toolu_01",
                "gen_ai.completion.0.tool_calls.0.name": "lookup_order",
                "gen_ai.completion.0.tool_calls.0.arguments": '{"order_id": "A-1"}',
            },
            name="anthropic.chat",
        ),
        span(
            "eee19b7ec3c1b175",
            5000,
            {
                "gen_ai.tool.name": "lookup_order",
                "gen_ai.tool.call.id": "toolu_01",
                "tool_arguments": '{"order_id":"A-1"}',
                "tool_response": "in transit",
                "logfire.msg": "running tool: lookup_order",
            },
            name="running tool",
        ),
    )
    (call,) = low.calls
    # Anthropic's fresh input (10) below its cache reads: the prompt is counted whole
    assert (call["input_tokens"], call["cached_input_tokens"], call["cache_write_tokens"]) == (
        3210,
        3000,
        200,
    )
    assert call["provider"] == "anthropic" and call["model"] == "claude-sonnet-4-5"
    assert (call["content_chars"], call["tool_call_count"]) == (14, 1)
    kinds = [(m["kind"], m.get("tool_use_id"), m["call_id"]) for m in low.messages]
    cid = f"otel:{call['native_id']}"
    assert kinds == [
        ("text", None, cid),
        ("tool_call", "toolu_01", cid),
        ("tool_result", "toolu_01", cid),
    ]
    assert low.messages[2]["excerpt"] == "in transit"


# -- through the store: the detectors find the loops, and only them --------------------------


@pytest.fixture(scope="module")
def audited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    """Both agent traces ingested (as the ``otel`` format), the detectors run."""
    store = open_store(tmp_path_factory.mktemp("spans") / "s.duckdb")
    try:
        ingest_paths(store, [str(AGENT), str(OI_AGENT)], IngestOptions(progress=False))
        detect(store, bind_all(discover(), {}))
        yield store
    finally:
        store.close()


def oi_costs() -> list[float]:
    """``llm.cost.total`` of each LLM span of the OpenInference trace, in start order, read
    from the file without the loader."""
    spans = []
    for line in OI_AGENT.read_text().splitlines():
        for r in json.loads(line)["resourceSpans"]:
            for sc in r["scopeSpans"]:
                spans += sc["spans"]
    costs = []
    for span in sorted(spans, key=lambda s: int(s["startTimeUnixNano"])):
        attrs = {a["key"]: a["value"] for a in span["attributes"]}
        if "llm.cost.total" in attrs:
            costs.append(attrs["llm.cost.total"]["doubleValue"])
    return costs


def test_the_files_are_read_and_accounted(audited: Store) -> None:
    assert_accounted(audited)
    assert q(audited, "SELECT DISTINCT format FROM sources") == [("otel",)]
    assert q(audited, "SELECT rows_read, rows_rejected, rows_skipped FROM sources ORDER BY 1") == [
        (10, 0, 2),
        (27, 2, 3),
    ]
    assert q(audited, "SELECT count(*) FROM rejects WHERE line = 9") == [(2,)]


def test_the_tool_loops_are_found_and_the_healthy_run_is_not(audited: Store) -> None:
    found = q(
        audited,
        "SELECT c.session_id, i.detector, i.wasted_usd FROM incidents i "
        "JOIN calls c ON c.call_id = i.first_call_id ORDER BY 1",
    )
    assert [(s, d) for s, d, _ in found] == [
        ("conv-loop-1", "repeated_tool_call"),
        ("sess-oi-1", "repeated_tool_call"),
    ]
    # the waste is the calls that repeated (after the first), at their own cost: the stated
    # cost of OpenInference's spans, list prices for the GenAI spans
    wasted = dict(
        q(
            audited,
            "SELECT c.session_id, sum(c.cost_usd) FROM incident_calls ic "
            "JOIN calls c USING (call_id) GROUP BY 1",
        )
    )
    assert {s: w for s, _, w in found} == wasted
    assert wasted["sess-oi-1"] == Decimal(str(round(sum(oi_costs()[1:]), 10)))
    assert q(
        audited,
        "SELECT count(*), min(cost_basis), max(cost_basis) FROM incident_calls ic "
        "JOIN calls c USING (call_id) WHERE c.session_id = 'conv-loop-1'",
    ) == [(4, "estimated", "estimated")]
    assert wasted["conv-loop-1"] > 0


def test_a_trace_split_over_files_or_exported_twice_is_stored_once(tmp_path: Path) -> None:
    """The Collector rotates its file mid-trace (the spans of one trace in two files, a child
    before its parent), and the same export is also kept whole in another folder: each call
    and each message is stored once, in the place it has read from the whole file."""
    lines = AGENT.read_text().splitlines(keepends=True)
    (tmp_path / "rotated").mkdir()
    (tmp_path / "rotated" / "a.jsonl").write_text("".join(reversed(lines[:4])))
    (tmp_path / "rotated" / "b.jsonl").write_text("".join(lines[4:]))
    (tmp_path / "copy").mkdir()
    (tmp_path / "copy" / "whole.jsonl").write_text("".join(lines))
    rows: dict[str, Any] = {}
    for name, paths in (
        ("whole", [AGENT]),
        ("rotated", [tmp_path / "rotated"]),
        ("both", [tmp_path / "rotated", tmp_path / "copy"]),
    ):
        with open_store(tmp_path / f"{name}.duckdb") as store:
            ingest_paths(store, [str(p) for p in paths], IngestOptions(progress=False))
            assert_accounted(store)
            rows[name] = (
                q(store, "SELECT call_id, input_tokens, cost_usd FROM calls ORDER BY 1"),
                q(
                    store,
                    "SELECT session_id, idx, kind, tool_use_id, call_id FROM messages "
                    "ORDER BY 1, 2",
                ),
            )
    assert len(rows["whole"][0]) == 12
    assert rows["rotated"] == rows["both"]
    assert rows["rotated"][0] == rows["whole"][0]
    # the same messages in the same places; a tool run whose asking call went to the other
    # file is tied to the latest call of its own file before it, or to none (a known limit)
    assert [m[:4] for m in rows["rotated"][1]] == [m[:4] for m in rows["whole"][1]]
    moved = [r for r, w in zip(rows["rotated"][1], rows["whole"][1], strict=True) if r != w]
    assert moved and all(m[2] in ("tool_call", "tool_result") for m in moved)
