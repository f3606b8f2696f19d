"""Claude Code sessions converted to ``{"messages", "meta"}`` (``meta.source:
"claude-jsonl-merged"``): the two real ones in ../shared/samples/real-loops-3 (kalom60/w2t86 @
8f7bc3eb, ``sessions/bugfix-1.json`` and ``sessions/bugfix-4.json``; no licence stated, so read
in place, never copied) against their truth.json, and hand-made documents for what those do not
hold (odd entries and messages, another source)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

import analyzer.formats as registry
from analyzer.detect.detectors import bind_all, detect, discover
from analyzer.engine.store import Store, open_store
from analyzer.errors import InputError
from analyzer.formats.claude_merged import sniff
from analyzer.ingest.base import IngestOptions
from analyzer.ingest.reading import read_head
from analyzer.pipeline import ingest_paths
from tests.helpers import assert_accounted, q, shared_samples

FOLDER = "converted_session_json/kalom60__w2t86"
LOOP, HEALTHY = f"{FOLDER}/sessions__bugfix-4.json", f"{FOLDER}/sessions__bugfix-1.json"
MODEL = "claude-sonnet-4-6"


def real(rel: str) -> Path:
    return shared_samples() / "real-loops-3" / rel


def truth(rel: str) -> dict[str, Any]:
    files: dict[str, Any] = json.loads(real("truth.json").read_text(encoding="utf-8"))["files"]
    return files[rel]


def ingest(store: Store, *paths: Path) -> list[Any]:
    return ingest_paths(store, [str(p) for p in paths], IngestOptions(progress=False))


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, tuple[Store, Any]]]:
    """Each real file read into a store of its own, the detectors run over it."""
    opened: dict[str, tuple[Store, Any]] = {}
    try:
        for rel in (LOOP, HEALTHY):
            store = open_store(tmp_path_factory.mktemp("merged") / "s.duckdb")
            [report] = ingest(store, real(rel))
            detect(store, bind_all(discover(), {}))
            opened[rel] = (store, report)
        yield opened
    finally:
        for store, _ in opened.values():
            store.close()


# -- what the file itself says, counted here without the loader ------------------------------


def counted_calls(rel: str) -> list[tuple[str, int, int, int]]:
    """The calls of ``meta.token_counts`` by the corpus's own rule (truth.py: an entry whose
    ``total_token_usage`` differs from the entry's before it), as (time, fresh input, cache
    reads, output)."""
    doc = json.loads(real(rel).read_text(encoding="utf-8"))
    out, previous = [], None
    for entry in doc["meta"]["token_counts"]:
        info = entry.get("info") or {}
        if info.get("total_token_usage") != previous:
            last = info.get("last_token_usage") or {}
            out.append(
                (
                    entry["_timestamp"],
                    last.get("input_tokens") or 0,
                    last.get("cached_input_tokens") or 0,
                    last.get("output_tokens") or 0,
                )
            )
            previous = info.get("total_token_usage")
    return out


def list_price(model: str, when: str, fresh: int, cached: int, output: int) -> Decimal:
    """A call at the list price the project uses (genai-prices), asked directly: the whole
    prompt (fresh input and cache reads), its cache reads, the output."""
    from genai_prices import Usage, calc_price

    price = calc_price(
        Usage(input_tokens=fresh + cached, cache_read_tokens=cached, output_tokens=output),
        model_ref=model,
        provider_id="anthropic",
        genai_request_timestamp=datetime.fromisoformat(when.replace("Z", "+00:00")),
    )
    return Decimal(price.total_price)


def main_tool_ids(rel: str) -> list[str]:
    """The main thread's tool calls in order (truth.py's numbering of ``spans_tool_calls``)."""
    doc = json.loads(real(rel).read_text(encoding="utf-8"))
    return [
        b["tool_call_id"]
        for m in doc["messages"]
        if m.get("role") == "assistant"
        for b in m.get("content") or []
        if isinstance(b, dict) and b.get("type") == "tool_call"
    ]


# -- the real files ---------------------------------------------------------------------------


@pytest.mark.parametrize("rel", [LOOP, HEALTHY])
def test_sniffed_as_a_converted_session_first(rel: str) -> None:
    head = read_head(real(rel), rel)
    assert [f.name for f in registry.FORMATS if f.sniff(head)] == [
        "claude_merged",
        "conversation_json",
    ]


@pytest.mark.parametrize("rel", [LOOP, HEALTHY])
def test_the_calls_and_tokens_the_counts_say(stores: dict[str, Any], rel: str) -> None:
    store, report = stores[rel]
    t = truth(rel)
    assert (report.format, report.status, report.calls) == (
        "claude_merged",
        "loaded",
        t["calls_from_meta"],
    )
    [(calls, prompt, output, cached, writes)] = q(
        store,
        "SELECT count(*), sum(input_tokens), sum(output_tokens), sum(cached_input_tokens), "
        "count(cache_write_tokens) FROM calls",
    )
    assert (calls, prompt, output) == (
        t["calls_from_meta"],
        t["prompt_tokens_from_meta"],
        t["output_tokens_from_meta"],
    )
    assert cached == sum(c[2] for c in counted_calls(rel))
    assert writes == 0  # the file has no cache-write figure: unknown, never 0
    # Every entry and every message is a record: a call, a repeat skipped, or a message.
    doc = json.loads(real(rel).read_text(encoding="utf-8"))
    entries, messages = len(doc["meta"]["token_counts"]), len(doc["messages"])
    assert (report.rows_read, report.rows_rejected, report.rows_duplicate) == (
        entries + messages,
        0,
        0,
    )
    assert report.rows_skipped == entries - t["calls_from_meta"]
    assert report.rows_loaded == t["calls_from_meta"] + messages
    assert_accounted(store)


@pytest.mark.parametrize("rel", [LOOP, HEALTHY])
def test_priced_at_the_list_price(stores: dict[str, Any], rel: str) -> None:
    """Each call at its model's list price, computed here from the file's own entries;
    Claude Code's own replies (``<synthetic>``, zero usage) at $0 as it states."""
    store, _ = stores[rel]
    counted = counted_calls(rel)
    got = q(store, "SELECT ts, model, cost_usd, cost_basis, http_status FROM calls ORDER BY seq")
    assert [g[0] for g in got] == [
        datetime.fromisoformat(c[0].replace("Z", "+00:00")).replace(tzinfo=None) for c in counted
    ]
    expected = Decimal(0)
    for (when, fresh, cached, output), (_, model, usd, basis, status) in zip(
        counted, got, strict=True
    ):
        if fresh == cached == output == 0:
            assert (model, usd, basis, status) == ("<synthetic>", 0, "reported", 529)
            continue
        assert (model, basis, status) == (MODEL, "estimated", None)
        one = list_price(MODEL, when, fresh, cached, output)
        assert abs(usd - one) < Decimal("1e-9")
        expected += one
    total = sum((g[2] for g in got), Decimal(0))
    assert total > 0
    assert abs(total - expected) < Decimal("1e-9") * len(got)


def test_the_models_the_file_names(stores: dict[str, Any]) -> None:
    assert q(stores[LOOP][0], "SELECT model, count(*) FROM calls GROUP BY 1") == [(MODEL, 251)]
    assert q(stores[HEALTHY][0], "SELECT model, count(*) FROM calls GROUP BY 1 ORDER BY 1") == [
        ("<synthetic>", 1),
        (MODEL, 2),
    ]


def test_messages_tied_to_their_calls(stores: dict[str, Any]) -> None:
    """The main thread's replies are their calls' (text and tool calls with their arguments),
    each tool result tied to its call by id; the sub-agents are sessions of their own with
    their messages and no calls (the file has none of their usage)."""
    store, _ = stores[LOOP]
    session = "4a99d5a6-9ca9-40a8-a4c3-c75c54f71b55"
    main = q(
        store,
        "SELECT kind, count(*), count(call_id) FROM messages WHERE session_id = ? "
        "GROUP BY 1 ORDER BY 1",
        [session],
    )
    assert main == [
        ("prompt", 6, 0),
        ("system", 1, 0),  # the compaction summary Claude Code sends as a user message
        ("text", 80, 80),
        ("tool_call", 278, 278),
        ("tool_result", 278, 0),
    ]
    assert q(
        store,
        "SELECT count(*) FROM messages WHERE kind = 'tool_result' AND tool_use_id "
        "NOT IN (SELECT tool_use_id FROM messages WHERE kind = 'tool_call')",
    ) == [(0,)]
    agents = q(
        store,
        "SELECT session_id, count(*), count(call_id) FROM messages WHERE session_id <> ? "
        "GROUP BY 1 ORDER BY 1",
        [session],
    )
    assert agents == [
        (f"{session}:agent-a162031e76d314997", 29, 0),
        (f"{session}:agent-a6d2a623c61cb9bca", 70, 0),
    ]
    assert q(store, "SELECT count(DISTINCT session_id) FROM calls") == [(1,)]
    # the calls' own measures come from their messages
    assert q(store, "SELECT sum(tool_call_count), count(content_chars) FROM calls") == [(278, 251)]
    [(excerpt,)] = q(
        store,
        "SELECT excerpt FROM messages WHERE kind = 'tool_call' AND tool_use_id = ?",
        [main_tool_ids(LOOP)[116]],
    )
    assert "go get github.com/joho/godotenv@latest" in excerpt


def test_the_labelled_loop_is_found(stores: dict[str, Any]) -> None:
    """``go get ...godotenv@latest`` run 8 times (main-thread tool calls 117-124), the same
    empty result the last 7: an incident over those 7 calls, their waste priced."""
    store, _ = stores[LOOP]
    [(first, length)] = truth(LOOP)["label"]["spans_tool_calls"]
    ids = main_tool_ids(LOOP)[first - 1 : first - 1 + length]
    calls = [
        q(store, "SELECT call_id FROM messages WHERE tool_use_id = ? AND kind = 'tool_call'", [i])[
            0
        ][0]
        for i in ids
    ]
    found = q(
        store,
        "SELECT detector, severity, first_call_id, last_call_id, wasted_usd FROM incidents "
        "WHERE severity IN ('medium', 'high')",
    )
    assert [(d, f, last) for d, _s, f, last, _w in found] == [
        ("repeated_tool_call", calls[1], calls[-1])
    ]
    assert found[0][4] > 0
    wasted = q(store, "SELECT count(*) FROM incident_calls")
    assert wasted == [(6,)]


def test_the_healthy_session_is_quiet(stores: dict[str, Any]) -> None:
    store, _ = stores[HEALTHY]
    assert q(store, "SELECT count(*) FROM incidents WHERE wasted_usd > 0") == [(0,)]


# -- hand-made documents ------------------------------------------------------------------------


def entry(ts: str, fresh: int, cached: int, output: int) -> dict[str, Any]:
    usage = {
        "input_tokens": fresh,
        "cached_input_tokens": cached,
        "output_tokens": output,
        "total_tokens": fresh + output,
    }
    return {
        "type": "token_count",
        "info": {"total_token_usage": usage, "last_token_usage": dict(usage)},
        "rate_limits": {"primary": None},
        "_timestamp": ts,
    }


def said(role: str, ts: str, *blocks: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"role": role, "content": list(blocks), "_metadata": {"timestamp": ts}, **more}


def doc(messages: list[Any], entries: list[Any], **meta: Any) -> dict[str, Any]:
    return {
        "messages": messages,
        "meta": {
            "session_id": "s-1",
            "session_meta": {"session_id": "s-1", "version": "2.1.97"},
            "turn_contexts": [{"model": MODEL}, {"model": "<synthetic>"}],
            "source": "claude-jsonl-merged",
            "token_counts": entries,
            **meta,
        },
    }


def write(path: Path, value: object) -> Path:
    path.write_text(json.dumps(value, indent=2), encoding="utf-8")
    return path


TEXT = {"type": "text", "text": "run it"}
BASH = {
    "type": "tool_call",
    "tool_call_id": "toolu_01",
    "name": "Bash",
    "arguments": '{"command": "ls"}',
}


def test_odd_entries_and_messages_are_rejected_with_their_place(
    store: Store, tmp_path: Path
) -> None:
    messages = [
        said("user", "2026-04-09T10:00:00Z", TEXT),
        said("assistant", "2026-04-09T10:00:02Z", BASH),
        said(
            "tool",
            "2026-04-09T10:00:03Z",
            {"type": "tool_output", "text": "a b"},
            tool_call_id="toolu_01",
        ),
        "not a message",
        {"content": [TEXT]},
        said("user", "2026-04-09T10:00:04Z"),  # nothing in it: skipped
        said("assistant", "2026-04-09T10:00:05Z", {"type": "text", "text": "done"}),
    ]
    entries = [
        entry("2026-04-09T10:00:01Z", 3, 1000, 50),  # a line the converter kept no message of
        entry("2026-04-09T10:00:02Z", 3, 1000, 50),  # the same call: a repeat
        {"type": "token_count", "rate_limits": {}, "_timestamp": "2026-04-09T10:00:02Z"},
        ["not", "an", "entry"],
        {"type": "token_count", "info": {"total_token_usage": None}},
        entry("2026-04-09T10:00:05Z", 1, 1100, 7),
    ]
    [r] = ingest(store, write(tmp_path / "s.json", doc(messages, entries)))
    assert (r.format, r.calls) == ("claude_merged", 2)
    assert (r.rows_read, r.rows_loaded, r.rows_rejected, r.rows_skipped) == (13, 6, 5, 2)
    assert q(store, "SELECT line, reason FROM rejects ORDER BY line") == [
        (3, "token_counts[2] has no info"),
        (4, "token_counts[3] is not an object"),
        (5, "token_counts[4] has no info.last_token_usage"),
        (10, "messages[3] is not an object"),
        (11, "messages[4] names no role"),
    ]
    assert q(
        store,
        "SELECT ts, input_tokens, cached_input_tokens, output_tokens, model, "
        "tool_call_count, content_chars FROM calls ORDER BY seq",
    ) == [
        (datetime(2026, 4, 9, 10, 0, 1), 1003, 1000, 50, MODEL, 1, 0),
        (datetime(2026, 4, 9, 10, 0, 5), 1101, 1100, 7, MODEL, 0, 4),
    ]
    assert q(
        store, "SELECT kind, c.seq FROM messages m LEFT JOIN calls c USING (call_id) ORDER BY idx"
    ) == [("prompt", None), ("tool_call", 1), ("tool_result", None), ("text", 2)]
    assert_accounted(store)


def test_a_reply_of_claude_code_itself(store: Store, tmp_path: Path) -> None:
    """Zero usage in a session whose models include ``<synthetic>``: the CLI's own reply, $0;
    and several real models: the file does not say which call used which."""
    messages = [
        said("user", "2026-04-09T10:00:00Z", TEXT),
        said("assistant", "2026-04-09T10:00:01Z", {"type": "text", "text": "API Error: 500 x"}),
        said("assistant", "2026-04-09T10:00:09Z", {"type": "text", "text": "hello"}),
    ]
    entries = [entry("2026-04-09T10:00:01Z", 0, 0, 0), entry("2026-04-09T10:00:09Z", 3, 10, 5)]
    ingest(store, write(tmp_path / "a.json", doc(messages, entries)))
    two = doc(messages, entries, session_id="s-2")
    two["meta"]["turn_contexts"] = [{"model": MODEL}, {"model": "claude-opus-4-6"}]
    ingest(store, write(tmp_path / "b.json", two))
    assert q(
        store,
        "SELECT session_id, model, cost_usd, cost_basis, http_status, finish_reason "
        "FROM calls ORDER BY session_id, seq",
    ) == [
        ("s-1", "<synthetic>", 0, "reported", 500, "error"),
        ("s-1", MODEL, Decimal("0.0000870000"), "estimated", None, "unknown"),
        ("s-2", None, None, None, None, "unknown"),
        ("s-2", None, None, None, None, "unknown"),
    ]


def test_a_message_names_its_model(store: Store, tmp_path: Path) -> None:
    messages = [said("assistant", "2026-04-09T10:00:01Z", TEXT, model="claude-opus-4-6")]
    value = doc(messages, [entry("2026-04-09T10:00:01Z", 3, 10, 5)], turn_contexts=[])
    ingest(store, write(tmp_path / "m.json", value))
    assert q(store, "SELECT model, cost_basis FROM calls") == [("claude-opus-4-6", "estimated")]


def test_another_source_is_refused(store: Store, tmp_path: Path) -> None:
    value = doc([said("assistant", "2026-04-09T10:00:01Z", BASH)], [], source="codex-merged")
    with pytest.raises(InputError, match="conversation_json"):
        ingest(store, write(tmp_path / "o.json", value))


def test_sniffing(tmp_path: Path) -> None:
    """The converter's messages with a Claude tool call, or the source named in the head; a
    plain saved conversation is not claimed."""
    ours = write(tmp_path / "a.json", doc([said("assistant", "t", BASH)], []))
    small = write(tmp_path / "b.json", doc([said("user", "t", TEXT)], []))
    plain = write(
        tmp_path / "c.json",
        {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]},
    )
    no_meta = write(tmp_path / "d.json", {"messages": [said("user", "t", TEXT)]})
    assert [sniff(read_head(p, p.name)) for p in (ours, small, plain, no_meta)] == [
        True,
        True,
        False,
        False,
    ]
