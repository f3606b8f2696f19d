"""Saved conversations: OpenAI messages, Anthropic blocks, Penguin sessions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from analyzer.errors import InputError
from analyzer.ingest import ingest_paths
from analyzer.ingest.base import IngestOptions
from analyzer.store import Store


def write(path: Path, doc: object) -> Path:
    path.write_text(json.dumps(doc, indent=1), encoding="utf-8")
    return path


def ingest(store: Store, *paths: Path, **opts: object) -> list:
    return ingest_paths(store, [str(p) for p in paths], IngestOptions(**opts))  # type: ignore[arg-type]


def rows(store: Store, sql: str) -> list[tuple]:
    return store.con.execute(sql).fetchall()


OPENAI = {
    "id": "conv-1",
    "model": "openai/gpt-5-mini",
    "messages": [
        {"role": "system", "content": "be useful"},
        {"role": "user", "content": "list the files", "timestamp": "2025-12-09T10:00:00Z"},
        {
            "role": "assistant", "content": None, "timestamp": "2025-12-09T10:00:01Z",
            "tool_calls": [{"id": "c1", "type": "function",
                            "function": {"name": "ls", "arguments": "{\"path\": \".\"}"}}],
            "usage": {"prompt_tokens": 1200, "completion_tokens": 40,
                      "completion_tokens_details": {"reasoning_tokens": 20},
                      "prompt_tokens_details": {"cached_tokens": 1024}},
            "finish_reason": "tool_calls",
        },
        {"role": "tool", "tool_call_id": "c1", "content": "a.py b.py"},
        {
            "role": "assistant", "content": "", "reasoning_content": "thinking " * 50,
            "timestamp": "2025-12-09T10:00:05Z", "finish_reason": "stop",
            "usage": {"prompt_tokens": 1260, "completion_tokens": 900,
                      "completion_tokens_details": {"reasoning_tokens": 900}},
        },
        {
            "role": "assistant", "timestamp": "2025-12-09T10:00:09Z", "finish_reason": "stop",
            "content": [{"type": "text", "text": "There are "}, {"type": "text", "text": "two."}],
        },
    ],
}  # fmt: skip


def test_openai_messages(store: Store, tmp_path: Path) -> None:
    [report] = ingest(store, write(tmp_path / "c.json", OPENAI))
    assert (report.format, report.rows_read, report.rows_loaded) == ("conversation_json", 6, 6)
    got = rows(
        store,
        """SELECT seq, session_id, model, input_tokens, cached_input_tokens, output_tokens,
                  reasoning_tokens, output_final, finish_reason, response_kind,
                  tool_call_count, content_chars, reasoning_chars, cost_basis
           FROM calls ORDER BY seq""",
    )
    assert got == [
        (1, "conv-1", "openai/gpt-5-mini", 1200, 1024, 40, 20, True, "tool_calls", "tool_call",
         1, 0, 0, "estimated"),
        (2, "conv-1", "openai/gpt-5-mini", 1260, None, 900, 900, True, "stop", "thinking_only",
         0, 0, 450, "estimated"),
        (3, "conv-1", "openai/gpt-5-mini", None, None, None, None, None, "stop", "text",
         0, 14, 0, None),
    ]  # fmt: skip
    # One turn, started by the user; the tool result is stored with the tool's name hashed args.
    assert rows(store, "SELECT DISTINCT turn_id FROM calls") == [("conv-1:2",)]
    kinds = rows(store, "SELECT kind, count(*) FROM messages GROUP BY 1 ORDER BY 1")
    assert kinds == [("prompt", 1), ("system", 1), ("text", 2), ("tool_call", 1),
                     ("tool_result", 1)]  # fmt: skip


def test_a_bare_list_of_anthropic_messages(store: Store, tmp_path: Path) -> None:
    doc = [
        {"role": "user", "content": [{"type": "text", "text": "go"}]},
        {
            "role": "assistant", "model": "claude-sonnet-4-5", "stop_reason": "max_tokens",
            "content": [{"type": "thinking", "thinking": "abc"},
                        {"type": "tool_use", "id": "t", "name": "Write", "input": {"p": 1}}],
            "usage": {"input_tokens": 10, "cache_creation_input_tokens": 100,
                      "cache_read_input_tokens": 5000, "output_tokens": 8192},
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t",
                                      "content": "invalid JSON", "is_error": True}]},
    ]  # fmt: skip
    ingest(store, write(tmp_path / "anthropic-session.json", doc))
    assert rows(
        store,
        """SELECT session_id, input_tokens, cached_input_tokens, cache_write_tokens,
                  output_tokens, finish_reason, response_kind, reasoning_chars FROM calls""",
    ) == [("anthropic-session", 5110, 5000, 100, 8192, "length", "truncated_tool_call", 3)]
    assert rows(store, "SELECT is_error FROM messages WHERE kind = 'tool_result'") == [(True,)]


PENGUIN = {
    "id": "session_20251213_054944_abcd1234",
    "messages": [
        {"role": "user", "content": "fix the wallet", "category": "DIALOG",
         "timestamp": "2025-12-13T05:50:00.000"},
        {"role": "assistant", "content": "<execute>pytest</execute>", "category": "DIALOG",
         "timestamp": "2025-12-13T05:50:10.000", "metadata": {"request_id": "r1"}},
        {"role": "system", "content": "[Tool Result] ok", "category": "SYSTEM_OUTPUT",
         "timestamp": "2025-12-13T05:50:11.000"},
        # r2 and r3: whitespace replies, never saved
        {"role": "assistant", "content": "[Empty response from model]", "category": "SYSTEM",
         "timestamp": "2025-12-13T05:50:40.000", "metadata": {"was_empty": True}},
    ],
    "llm_request_lifecycles": [
        {"request_id": "r1", "model": "anthropic/claude-opus-4.5", "provider": "openrouter",
         "started_at": 1765605005.0, "ended_at": 1765605009.5, "finish_reason": "stop",
         "stream": True},
        {"request_id": "r2", "model": "anthropic/claude-opus-4.5", "provider": "openrouter",
         "started_at": 1765605020.0, "ended_at": 1765605021.5, "finish_reason": "stop"},
        {"request_id": "r3", "model": "anthropic/claude-opus-4.5", "provider": "openrouter",
         "started_at": 1765605025.0, "ended_at": 1765605026.0, "finish_reason": "stop"},
        {"request_id": "r4", "model": "anthropic/claude-opus-4.5", "provider": "openrouter",
         "started_at": 1765605037.0, "ended_at": 1765605039.0, "finish_reason": "stop"},
    ],
    "tool_call_records": [{"x": 1}],
}  # fmt: skip


def test_penguin_session_saved_unsaved_and_placeholder(store: Store, tmp_path: Path) -> None:
    [report] = ingest(store, write(tmp_path / "s.json", PENGUIN))
    # 4 messages + 4 lifecycles + 1 tool call record
    assert (report.rows_read, report.rows_loaded, report.rows_skipped) == (9, 8, 1)
    got = rows(
        store,
        """SELECT native_id, seq, ts, reply_saved, finish_reason, response_kind, content_chars,
                  duration_ms, app, turn_id
           FROM calls ORDER BY seq""",
    )
    sid = PENGUIN["id"]
    assert got == [
        (f"{sid}:r1", 1, _t("05:50:05"), True, "stop", "text", 25, 4500.0, "penguin", f"{sid}:1"),
        (f"{sid}:r2", 2, _t("05:50:20"), False, "stop", None, None, 1500.0, "penguin", f"{sid}:1"),
        (f"{sid}:r3", 3, _t("05:50:25"), False, "stop", None, None, 1000.0, "penguin", f"{sid}:1"),
        (f"{sid}:2", 4, _t("05:50:37"), True, "stop", "empty", 0, 2000.0, "penguin", f"{sid}:1"),
    ]  # fmt: skip
    assert rows(
        store, "SELECT kind, excerpt FROM messages WHERE role = 'assistant' ORDER BY idx"
    ) == [
        ("text", "<execute>pytest</execute>"),
        ("placeholder", "[Empty response from model]"),
    ]
    assert rows(store, "SELECT count(*) FROM messages WHERE kind = 'tool_result'") == [(1,)]


def _t(hms: str) -> object:
    from datetime import datetime

    return datetime.fromisoformat(f"2025-12-13T{hms}")


def test_naive_times_follow_tz(store: Store, tmp_path: Path) -> None:
    doc = {"messages": [{"role": "assistant", "content": "hi", "timestamp": "2025-12-13T07:00:00"}]}
    ingest(store, write(tmp_path / "tz.json", doc), tz="Europe/Berlin")
    assert rows(store, "SELECT ts FROM calls") == [(_t("06:00:00"),)]


def test_malformed_documents(store: Store, tmp_path: Path) -> None:
    f = tmp_path / "broken.json"
    f.write_text('{"messages": [\n  {"role": "user", "content": "x"},\n  oops\n]}')
    with pytest.raises(InputError) as exc:
        ingest(store, f)
    assert exc.value.line == 3 and "not valid JSON" in str(exc.value)
    doc = {"messages": [{"content": "no role"}, {"role": "assistant", "content": "ok"}]}
    [report] = ingest(store, write(tmp_path / "partial.json", doc))
    assert (report.rows_read, report.rows_loaded, report.rows_rejected) == (2, 1, 1)
    assert rows(store, "SELECT line, reason FROM rejects") == [(1, "message without a role")]
