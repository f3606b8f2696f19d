"""The NEXUS3 raw.jsonl ingestor on small hand-written logs and on the sample data's log."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import orjson

from analyzer.engine.store import Store
from analyzer.ingest.base import IngestOptions
from analyzer.ingest.lowering import result_hash
from analyzer.load.flow import FileReport
from analyzer.pipeline import ingest_paths
from tests.helpers import SAMPLE_DATA

SESSION = "2025-12-11_100000_beef"
T0 = 1765447200.0  # 2025-12-11 10:00:00 UTC
SAMPLE_LOG = SAMPLE_DATA / "nexus3" / "logs" / "2025-12-11_091502_a7c3" / "raw.jsonl"
LS_ARGS = '{"path": "."}'

SYSTEM = {"role": "system", "content": "You are NEXUS3."}
ASK = {"role": "user", "content": "List the files."}
TOOL_TURN = {
    "role": "assistant",
    "content": "Listing files.",
    "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "ls", "arguments": LS_ARGS}}
    ],
}
TOOL_RESULT = {"role": "tool", "tool_call_id": "call_1", "content": "a.py\nb.py"}
EMPTY_TURN = {"role": "assistant", "content": ""}  # what the client saved from the empty stream
RETRY = {"role": "user", "content": "Try again."}


TOOL_DELTA = {
    "index": 0,
    "id": "call_1",
    "type": "function",
    "function": {"name": "ls", "arguments": LS_ARGS},
}
USAGE_1 = {
    "prompt_tokens": 1200,
    "completion_tokens": 40,
    "total_tokens": 1240,
    "prompt_tokens_details": {"cached_tokens": 1000},
    "completion_tokens_details": {"reasoning_tokens": 8},
}
ERROR_400 = {
    "error": {
        "message": "assistant messages must have content",
        "type": "invalid_request_error",
        "code": 400,
    }
}
ANSWER = {
    "id": "chatcmpl-9",
    "choices": [
        {
            "index": 0,
            "finish_reason": "stop",
            "message": {"role": "assistant", "content": "Done: a.py, b.py"},
        }
    ],
    "usage": {"prompt_tokens": 1300, "completion_tokens": 9},
}


def request(t: float, messages: list[dict[str, object]], stream: bool = True) -> str:
    payload = {"model": "devstral-small", "messages": messages, "stream": stream}
    endpoint = "https://gw.example/v1/chat/completions"
    return json.dumps(
        {"type": "request", "timestamp": T0 + t, "endpoint": endpoint, "payload": payload}
    )


def chunk(t: float, body: object) -> str:
    return json.dumps({"type": "stream_chunk", "timestamp": T0 + t, "chunk": body})


def delta(content: object = None, finish: str | None = None, **extra: object) -> dict[str, object]:
    d: dict[str, object] = dict(extra)
    if content is not None:
        d["content"] = content
    return {"choices": [{"index": 0, "delta": d, "finish_reason": finish}]}


def complete(
    t: float,
    status: int,
    events: int,
    length: int,
    tools: int,
    done: bool,
    finish: str | None,
    ms: float,
) -> str:
    summary = {
        "http_status": status,
        "event_count": events,
        "content_length": length,
        "tool_call_count": tools,
        "received_done": done,
        "finish_reason": finish,
        "duration_ms": ms,
    }
    return json.dumps({"type": "stream_complete", "timestamp": T0 + t, **summary})


def response(t: float, status: int, body: object) -> str:
    return json.dumps({"type": "response", "timestamp": T0 + t, "status": status, "body": body})


# Line numbers are those of the file.
LOG = [
    # Call 1 (line 1), streamed: text, one tool call, usage in the last chunk, then [DONE].
    request(0, [SYSTEM, ASK]),  # 1: messages idx 1 (system), 2 (user: turn SESSION:2)
    chunk(0.2, delta("Listing ", role="assistant")),  # 2
    chunk(0.3, delta("files.")),  # 3
    chunk(0.4, delta(tool_calls=[TOOL_DELTA])),  # 4
    chunk(0.5, delta(finish="tool_calls")),  # 5
    chunk(0.6, {"choices": [], "usage": USAGE_1}),  # 6
    chunk(1.5, "data: [DONE]"),  # 7
    complete(1.5, 200, 5, 14, 1, True, "tool_calls", 1500),  # 8
    # Call 2 (line 9): the empty stream. New messages: idx 3 (text), 4 (tool call), 5 (result).
    request(5, [SYSTEM, ASK, TOOL_TURN, TOOL_RESULT]),  # 9
    complete(35, 200, 0, 0, 0, False, None, 30000),  # 10
    # Call 3 (line 11): the saved empty assistant message (idx 6) is refused with a 400.
    request(40, [SYSTEM, ASK, TOOL_TURN, TOOL_RESULT, EMPTY_TURN]),  # 11
    response(40.2, 400, ERROR_400),  # 12
    # Call 4 (line 13), not streamed: a user retry (idx 7, turn SESSION:7), a plain 200 answer.
    request(60, [SYSTEM, ASK, TOOL_TURN, TOOL_RESULT, EMPTY_TURN, RETRY], stream=False),  # 13
    response(61, 200, ANSWER),  # 14
]


def call_id(lines: list[str], line: int, session: str = SESSION) -> str:
    """A request's call id: its session and a digest of its line (as read: its keys in the
    file's order), never its line number."""
    request = orjson.dumps(json.loads(lines[line - 1]))
    return f"nexus3:{session}:{hashlib.sha256(request).hexdigest()[:16]}"


def write(path: Path, lines: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines))
    return path


def ingest(store: Store, *paths: Path) -> list[FileReport]:
    return ingest_paths(store, [str(p) for p in paths], IngestOptions())


def q(store: Store, sql: str, params: list[object] | None = None) -> list[tuple]:
    return store.con.execute(sql, params or []).fetchall()


def assert_accounted(store: Store) -> None:
    for read, loaded, rejected, dup, skipped in q(
        store,
        "SELECT rows_read, rows_loaded, rows_rejected, rows_duplicate, rows_skipped FROM sources",
    ):
        assert read == loaded + rejected + dup + skipped
    # Every line of a call (its request and its outcome) is a loaded row.
    for sid, loaded in q(store, "SELECT source_id, rows_loaded FROM sources"):
        got = q(store, "SELECT count(*) FROM rejects WHERE source_id = ?", [sid])[0][0]
        assert got == q(store, "SELECT rows_rejected FROM sources WHERE source_id = ?", [sid])[0][0]
        assert loaded >= q(store, "SELECT count(*) FROM calls WHERE source_id = ?", [sid])[0][0]


def load_log(store: Store, tmp_path: Path) -> FileReport:
    [report] = ingest(store, write(tmp_path / "logs" / SESSION / "raw.jsonl", LOG))
    return report


def test_accounting_every_line_belongs_to_a_call(store: Store, tmp_path: Path) -> None:
    r = load_log(store, tmp_path)
    assert (r.status, r.format) == ("loaded", "nexus3_raw")
    # Lines per call: 8 + 2 + 2 + 2; messages are read from requests and add no rows.
    assert (r.rows_read, r.rows_loaded, r.rows_rejected, r.rows_duplicate, r.rows_skipped) == (
        14,
        14,
        0,
        0,
        0,
    )
    assert q(store, "SELECT count(*) FROM calls") == [(4,)]
    assert q(store, "SELECT count(*) FROM messages") == [(7,)]
    assert_accounted(store)


def test_calls_in_order_with_their_outcome(store: Store, tmp_path: Path) -> None:
    load_log(store, tmp_path)
    rows = q(
        store,
        """SELECT call_id, seq, line, turn_id, streamed, http_status, event_count,
                  received_done, duration_ms, finish_reason_raw, finish_reason, response_kind
           FROM calls ORDER BY seq""",
    )
    assert rows == [
        (
            call_id(LOG, 1),
            1,
            1,
            f"{SESSION}:2",
            True,
            200,
            5,
            True,
            1500.0,
            "tool_calls",
            "tool_calls",
            "tool_call",
        ),
        (
            call_id(LOG, 9),
            2,
            9,
            f"{SESSION}:2",
            True,
            200,
            0,
            False,
            30000.0,
            None,
            "unknown",
            "empty",
        ),
        (
            call_id(LOG, 11),
            3,
            11,
            f"{SESSION}:2",
            True,
            400,
            None,
            None,
            None,
            "error",
            "error",
            "error",
        ),
        (
            call_id(LOG, 13),
            4,
            13,
            f"{SESSION}:7",
            False,
            200,
            None,
            None,
            None,
            "stop",
            "stop",
            "text",
        ),
    ]
    assert [str(t) for (t,) in q(store, "SELECT ts FROM calls ORDER BY seq")] == [
        "2025-12-11 10:00:00",
        "2025-12-11 10:00:05",
        "2025-12-11 10:00:40",
        "2025-12-11 10:01:00",
    ]


def test_tokens_and_content(store: Store, tmp_path: Path) -> None:
    load_log(store, tmp_path)
    rows = q(
        store,
        """SELECT seq, model, app, input_tokens, cached_input_tokens, output_tokens,
                  reasoning_tokens, output_final, content_chars, visible_chars,
                  tool_call_count, response_id
           FROM calls ORDER BY seq""",
    )
    assert rows == [
        # "Listing files." has 14 characters, 13 of them not blank.
        (1, "devstral-small", "nexus3", 1200, 1000, 40, 8, True, 14, 13, 1, None),
        # The empty stream and the 400 carry no usage at all.
        (2, "devstral-small", "nexus3", None, None, None, None, None, 0, 0, 0, None),
        (3, "devstral-small", "nexus3", None, None, None, None, None, 0, 0, None, None),
        # "Done: a.py, b.py": 16 characters, 14 not blank.
        (4, "devstral-small", "nexus3", 1300, None, 9, None, True, 16, 14, 0, "chatcmpl-9"),
    ]
    # A call with no tokens gets no cost.
    assert q(store, "SELECT seq, cost_usd, cost_basis FROM calls WHERE seq IN (2, 3)") == [
        (2, None, None),
        (3, None, None),
    ]


def test_new_messages_of_each_request_are_stored(store: Store, tmp_path: Path) -> None:
    load_log(store, tmp_path)
    rows = q(
        store,
        """SELECT idx, role, kind, turn_id, text_chars, tool_name, call_id, excerpt
           FROM messages ORDER BY idx""",
    )
    c1, c2 = call_id(LOG, 1), call_id(LOG, 9)
    t1, t2 = f"{SESSION}:2", f"{SESSION}:7"
    assert rows == [
        (1, "system", "system", None, 15, None, None, "You are NEXUS3."),
        (2, "user", "prompt", t1, 15, None, None, "List the files."),
        (3, "assistant", "text", t1, 14, None, c1, "Listing files."),
        (4, "assistant", "tool_call", t1, None, "ls", c1, '{"path": "."}'),
        (5, "tool", "tool_result", t1, 9, None, None, "a.py\nb.py"),
        # The empty assistant message saved from the empty stream, tied to that call.
        (6, "assistant", "text", t1, 0, None, c2, ""),
        (7, "user", "prompt", t2, 10, None, None, "Try again."),
    ]
    expected = hashlib.sha256(b'{"path":"."}').hexdigest()
    assert q(store, "SELECT tool_args_hash FROM messages WHERE idx = 4") == [(expected,)]
    # The tool message's tool_call_id ties the result to its call; what it returned is hashed.
    assert q(
        store,
        "SELECT idx, tool_use_id, tool_result_hash FROM messages WHERE tool_use_id IS NOT NULL",
    ) == [(4, "call_1", None), (5, "call_1", result_hash("a.py\nb.py"))]


def test_line_before_any_request_is_rejected(store: Store, tmp_path: Path) -> None:
    lines = [
        chunk(0, delta("orphan")),  # 1: rejected
        request(1, [ASK], stream=False),  # 2
        response(2, 200, {"choices": [{"message": {"content": "hi"}, "finish_reason": "stop"}]}),
        json.dumps({"type": "mystery", "timestamp": T0 + 3}),  # 4: skipped, not the call's
    ]
    [r] = ingest(store, write(tmp_path / "logs" / SESSION / "raw.jsonl", lines))
    assert (r.rows_read, r.rows_loaded, r.rows_rejected, r.rows_duplicate, r.rows_skipped) == (
        4,
        2,
        1,
        0,
        1,
    )
    [(line, reason)] = q(store, "SELECT line, reason FROM rejects")
    assert line == 1 and reason == "stream_chunk line before any request"
    assert q(store, "SELECT seq, line, content_chars, response_kind FROM calls") == [
        (1, 2, 2, "text")
    ]
    assert_accounted(store)


def test_stream_without_summary_is_read_from_its_chunks(store: Store, tmp_path: Path) -> None:
    lines = [
        request(0, [ASK]),  # 1
        chunk(0.1, delta("Hello ")),  # 2
        chunk(0.2, delta("there", finish="stop")),  # 3
        chunk(0.3, {"choices": [], "usage": {"prompt_tokens": 20, "completion_tokens": 3}}),  # 4
        chunk(0.4, "data: [DONE]"),  # 5: no stream_complete follows
    ]
    [r] = ingest(store, write(tmp_path / "logs" / SESSION / "raw.jsonl", lines))
    assert (r.rows_read, r.rows_loaded, r.rows_rejected, r.rows_skipped) == (5, 5, 0, 0)
    assert q(
        store,
        """SELECT http_status, received_done, event_count, content_chars, visible_chars,
                  input_tokens, output_tokens, finish_reason, response_kind FROM calls""",
    ) == [(None, True, 3, 11, 10, 20, 3, "stop", "text")]


def test_grown_log_completes_a_call_still_in_flight(store: Store, tmp_path: Path) -> None:
    """A log read while call 2 (the empty stream) was in flight, then again once it ended."""
    ingest(store, write(tmp_path / "live" / "logs" / SESSION / "raw.jsonl", LOG[:9]))
    [r2] = ingest(store, write(tmp_path / "later" / "logs" / SESSION / "raw.jsonl", LOG))
    assert (r2.rows_read, r2.rows_loaded + r2.rows_duplicate) == (14, 14)
    assert q(store, "SELECT seq, http_status, response_kind FROM calls ORDER BY seq") == [
        (1, 200, "tool_call"),
        (2, 200, "empty"),
        (3, 400, "error"),
        (4, 200, "text"),
    ]


def test_subagent_folder(store: Store, tmp_path: Path) -> None:
    load_log(store, tmp_path)
    sub = [
        request(100, [{"role": "user", "content": "Check a.py"}], stream=False),
        response(
            101,
            200,
            {
                "choices": [{"message": {"content": "fine"}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 50, "completion_tokens": 2},
            },
        ),
    ]
    [r] = ingest(store, write(tmp_path / "logs" / SESSION / "subagent_x1" / "raw.jsonl", sub))
    assert (r.rows_read, r.rows_loaded, r.rows_rejected) == (2, 2, 0)
    rows = q(
        store,
        """SELECT session_id, stream_key, agent_id, parent_session_id, seq, count(*)
           FROM calls GROUP BY ALL ORDER BY session_id, seq""",
    )
    assert rows == [
        (SESSION, SESSION, None, None, 1, 1),
        (SESSION, SESSION, None, None, 2, 1),
        (SESSION, SESSION, None, None, 3, 1),
        (SESSION, SESSION, None, None, 4, 1),
        (f"{SESSION}:subagent_x1", f"{SESSION}:subagent_x1", "x1", SESSION, 1, 1),
    ]
    assert q(
        store, "SELECT call_id, input_tokens, output_tokens FROM calls WHERE agent_id = 'x1'"
    ) == [(call_id(sub, 1, f"{SESSION}:subagent_x1"), 50, 2)]
    assert_accounted(store)


def test_sample_data_log(store: Store) -> None:
    [r] = ingest(store, SAMPLE_LOG)
    assert (r.status, r.format, r.rows_read, r.rows_rejected) == ("loaded", "nexus3_raw", 22, 0)
    kinds = q(store, "SELECT seq, http_status, response_kind FROM calls ORDER BY seq")
    # A tool call, a text answer, the empty stream, then a 400 for every retry.
    assert kinds[:4] == [
        (1, 200, "tool_call"),
        (2, 200, "text"),
        (3, 200, "empty"),
        (4, 400, "error"),
    ]
    assert {k for _, _, k in kinds[3:]} == {"error"}
    assert q(store, "SELECT input_tokens, output_tokens FROM calls WHERE seq = 1") == [(2210, 31)]
    assert q(
        store, "SELECT count(*) FROM messages WHERE role = 'assistant' AND text_chars = 0"
    ) == [(1,)]
    assert_accounted(store)
