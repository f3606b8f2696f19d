"""The Codex CLI rollout ingestor on small hand-written rollouts and on a real one."""

from __future__ import annotations

import hashlib
import json
from decimal import Decimal
from pathlib import Path

import pytest

from analyzer.engine.store import Store
from analyzer.ingest.base import IngestOptions
from analyzer.load.flow import FileReport
from analyzer.pipeline import ingest_paths
from tests.helpers import shared_samples

SID = "0199aaaa-bbbb-7ccc-8ddd-eeeeeeeeeeee"
OLD_SID = "0188aaaa-bbbb-7ccc-8ddd-ffffffffffff"
REAL_NAME = (
    "jnarowski__agentcmd__rollout-2025-09-25T15-12-14-019982b8-3422-79e0-8b3b-05abaf4f3c3e.jsonl"
)
ARGS = '{"command": ["ls"], "workdir": "/w"}'
ARGS_REORDERED = '{"workdir": "/w", "command": ["ls"]}'
FAILED = json.dumps({"output": "boom", "metadata": {"exit_code": 1}})
PASSED = json.dumps({"output": "ok", "metadata": {"exit_code": 0}})


def rec(sec: int, kind: str, payload: dict[str, object]) -> str:
    ts = f"2025-10-01T10:00:{sec:02d}.000Z"
    return json.dumps({"timestamp": ts, "type": kind, "payload": payload})


def usage(inp: int, cached: int, out: int, reasoning: int) -> dict[str, int]:
    return {
        "input_tokens": inp,
        "cached_input_tokens": cached,
        "output_tokens": out,
        "reasoning_output_tokens": reasoning,
        "total_tokens": inp + out,
    }


def tokens(last: dict[str, int] | None, total: dict[str, int] | None) -> dict[str, object]:
    info: dict[str, object] = {"model_context_window": 272000}
    if last is not None:
        info["last_token_usage"] = last
    if total is not None:
        info["total_token_usage"] = total
    return {"type": "token_count", "info": info}


def ctx(model: str) -> dict[str, object]:
    return {"cwd": "/w", "approval_policy": "on-request", "model": model}


def user(text: str) -> dict[str, object]:
    return {"type": "user_message", "message": text}


def call(args: str) -> dict[str, object]:
    return {"type": "function_call", "name": "shell", "arguments": args, "call_id": "c"}


def result(output: str) -> dict[str, object]:
    return {"type": "function_call_output", "call_id": "c", "output": output}


def say(text: str) -> dict[str, object]:
    return {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text}],
    }


def think(text: str) -> dict[str, object]:
    return {
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": text}],
        "encrypted_content": "gAAAA",
    }


def write(path: Path, lines: list[str], tail: str | None = None) -> Path:
    """Each line ends with a newline; ``tail`` is appended without one (a cut-off last line)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines) + (tail or ""))
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


# Line numbers are those of the file; what each line becomes is noted on it.
MAIN = [
    rec(0, "session_meta", {"id": SID, "cwd": "/w", "originator": "codex_cli_rs"}),  # 1 skip
    rec(1, "event_msg", user("Fix the bug")),  # 2 user message idx 1, turn SID:2
    rec(2, "turn_context", ctx("gpt-5")),  # 3 skip
    rec(3, "response_item", think("Looking")),  # 4 skip, 7 reasoning chars to call 1
    rec(4, "response_item", call(ARGS)),  # 5 tool call idx 2, to call 1 (written before it)
    rec(5, "event_msg", tokens(usage(1000, 800, 200, 150), usage(1000, 800, 200, 150))),  # 6
    rec(6, "response_item", result(FAILED)),  # 7 tool result idx 3, is_error
    rec(7, "event_msg", tokens(usage(1000, 800, 200, 150), usage(1000, 800, 200, 150))),  # 8
    rec(8, "turn_context", ctx("gpt-5")),  # 9 skip
    rec(9, "response_item", call(ARGS_REORDERED)),  # 10 tool call idx 4, to call 2
    rec(10, "event_msg", tokens(usage(1200, 1000, 50, 0), usage(2200, 1800, 250, 150))),  # 11
    rec(11, "response_item", result(PASSED)),  # 12 tool result idx 5
    rec(12, "event_msg", {"type": "token_count", "info": None, "rate_limits": {}}),  # 13 skip
    '{"timestamp": "2025-10-01T10:00:13.000Z", "type": oops}',  # 14 rejected
    rec(14, "event_msg", user("Now explain")),  # 15 user message idx 6, turn SID:15
    rec(15, "turn_context", ctx("acme-sekrit-1")),  # 16 skip; an unpriced model from here on
    rec(16, "event_msg", tokens(usage(1300, 1200, 40, 10), usage(3500, 3000, 290, 160))),  # 17
    rec(17, "response_item", say("It works now.")),  # 18 text idx 7, to call 3 (after it)
    rec(18, "turn_context", ctx("acme-sekrit-1")),  # 19 skip
    rec(19, "response_item", think("Hmm")),  # 20 skip, 3 reasoning chars to call 4
    rec(20, "event_msg", tokens(usage(1400, 1300, 30, 30), usage(4900, 4300, 320, 190))),  # 21
]
CUT = '{"timestamp": "2025-10-01T10:00:21.000Z", "type": "event_msg", "payl'  # 22 rejected


@pytest.fixture
def main_file(store: Store, tmp_path: Path) -> FileReport:
    f = write(tmp_path / f"rollout-2025-10-01T10-00-00-{SID}.jsonl", MAIN, tail=CUT)
    [report] = ingest(store, f)
    return report


def test_accounting_of_every_line(store: Store, main_file: FileReport) -> None:
    r = main_file
    assert (r.status, r.format) == ("loaded", "codex")
    # 4 calls + 7 messages loaded; lines 14 and 22 rejected; 9 lines hold nothing to keep.
    assert (r.rows_read, r.rows_loaded, r.rows_rejected, r.rows_duplicate, r.rows_skipped) == (
        22,
        11,
        2,
        0,
        9,
    )
    assert json.loads(q(store, "SELECT skipped_kinds FROM sources")[0][0]) == {
        "session_meta": 1,
        "turn_context": 4,
        "reasoning_item": 2,
        "token_count_repeat": 1,
        "rate_limits": 1,
    }
    assert q(store, "SELECT count(*) FROM calls")[0][0] == 4
    assert q(store, "SELECT count(*) FROM messages")[0][0] == 7
    assert_accounted(store)


def test_malformed_and_cut_off_lines_are_rejected_by_number(
    store: Store, main_file: FileReport
) -> None:
    rejects = q(store, "SELECT line, reason, excerpt FROM rejects ORDER BY line")
    assert [r[0] for r in rejects] == [14, 22]
    assert rejects[0][1].startswith("not valid JSON")
    assert "oops" in rejects[0][2]
    assert "cut-off last line" in rejects[1][1]
    assert rejects[1][2] == CUT
    # The lines after the bad one still loaded.
    assert q(store, "SELECT max(line) FROM calls") == [(21,)]


def test_per_call_tokens_and_models(store: Store, main_file: FileReport) -> None:
    rows = q(
        store,
        """SELECT call_id, seq, line, model, provider, app, input_tokens, cached_input_tokens,
                  output_tokens, reasoning_tokens, output_final, stream_key, session_id
           FROM calls ORDER BY seq""",
    )
    assert rows == [
        (f"codex:{SID}:1", 1, 6, "gpt-5", "openai", "codex", 1000, 800, 200, 150, True, SID, SID),
        (f"codex:{SID}:2", 2, 11, "gpt-5", "openai", "codex", 1200, 1000, 50, 0, True, SID, SID),
        (
            f"codex:{SID}:3",
            3,
            17,
            "acme-sekrit-1",
            "openai",
            "codex",
            1300,
            1200,
            40,
            10,
            True,
            SID,
            SID,
        ),
        (
            f"codex:{SID}:4",
            4,
            21,
            "acme-sekrit-1",
            "openai",
            "codex",
            1400,
            1300,
            30,
            30,
            True,
            SID,
            SID,
        ),
    ]
    assert q(store, "SELECT ts FROM calls WHERE seq = 1")[0][0].isoformat() == (
        "2025-10-01T10:00:05"
    )


def test_items_go_to_the_call_of_their_step_and_decide_its_kind(
    store: Store, main_file: FileReport
) -> None:
    rows = q(
        store,
        """SELECT seq, turn_id, tool_call_count, content_chars, visible_chars, reasoning_chars,
                  finish_reason, response_kind
           FROM calls ORDER BY seq""",
    )
    assert rows == [
        (1, f"{SID}:2", 1, 0, 0, 7, "unknown", "tool_call"),
        (2, f"{SID}:2", 1, 0, 0, 0, "unknown", "tool_call"),
        (3, f"{SID}:15", 0, 13, 11, 0, "unknown", "text"),
        (4, f"{SID}:15", 0, 0, 0, 3, "unknown", "thinking_only"),
    ]


def test_messages_tool_calls_and_results(store: Store, main_file: FileReport) -> None:
    rows = q(
        store,
        """SELECT idx, role, kind, turn_id, tool_name, is_error, call_id, text_chars, excerpt
           FROM messages ORDER BY idx""",
    )
    assert rows == [
        (1, "user", "prompt", f"{SID}:2", None, None, None, 11, "Fix the bug"),
        (2, "assistant", "tool_call", f"{SID}:2", "shell", None, f"codex:{SID}:1", None, ARGS),
        (3, "tool", "tool_result", f"{SID}:2", None, True, None, len(FAILED), FAILED),
        (
            4,
            "assistant",
            "tool_call",
            f"{SID}:2",
            "shell",
            None,
            f"codex:{SID}:2",
            None,
            ARGS_REORDERED,
        ),
        (5, "tool", "tool_result", f"{SID}:2", None, False, None, len(PASSED), PASSED),
        (6, "user", "prompt", f"{SID}:15", None, None, None, 11, "Now explain"),
        (7, "assistant", "text", f"{SID}:15", None, None, f"codex:{SID}:3", 13, "It works now."),
    ]
    # The same arguments in another key order hash alike: sha256 of sorted-key compact JSON.
    expected = hashlib.sha256(b'{"command":["ls"],"workdir":"/w"}').hexdigest()
    hashes = q(store, "SELECT tool_args_hash FROM messages WHERE kind = 'tool_call' ORDER BY idx")
    assert hashes == [(expected,), (expected,)]


def test_cost_is_estimated_for_known_models_only(store: Store, main_file: FileReport) -> None:
    rows = q(store, "SELECT seq, cost_usd, cost_basis FROM calls ORDER BY seq")
    # gpt-5: $1.25/M fresh input, $0.125/M cached input, $10/M output (reasoning included).
    # Call 1: 200 * 1.25e-6 + 800 * 0.125e-6 + 200 * 10e-6 = 0.00025 + 0.0001 + 0.002
    # Call 2: 200 * 1.25e-6 + 1000 * 0.125e-6 + 50 * 10e-6 = 0.00025 + 0.000125 + 0.0005
    assert rows == [
        (1, Decimal("0.00235"), "estimated"),
        (2, Decimal("0.000875"), "estimated"),
        (3, None, None),
        (4, None, None),
    ]


def test_older_file_with_totals_only(store: Store, tmp_path: Path) -> None:
    lines = [
        rec(0, "turn_context", ctx("gpt-5")),  # 1 skip
        rec(1, "event_msg", tokens(None, usage(1000, 0, 100, 0))),  # 2 call 1
        rec(2, "event_msg", tokens(None, usage(1000, 0, 100, 0))),  # 3 repeat: skip
        rec(3, "turn_context", ctx("gpt-5")),  # 4 skip
        rec(4, "event_msg", tokens(None, usage(2500, 900, 160, 20))),  # 5 call 2: the difference
        rec(5, "event_msg", {"type": "token_count", "info": None}),  # 6 skip
        rec(6, "event_msg", {"type": "token_count", "info": {"model_context_window": 1}}),  # 7
    ]
    f = write(tmp_path / f"rollout-2025-09-01T00-00-00-{OLD_SID}.jsonl", lines)
    [r] = ingest(store, f)
    assert (r.rows_read, r.rows_loaded, r.rows_rejected, r.rows_duplicate, r.rows_skipped) == (
        7,
        2,
        1,
        0,
        4,
    )
    rows = q(
        store,
        """SELECT call_id, line, input_tokens, cached_input_tokens, output_tokens,
                  reasoning_tokens, session_id FROM calls ORDER BY seq""",
    )
    assert rows == [
        (f"codex:{OLD_SID}:1", 2, 1000, 0, 100, 0, OLD_SID),
        (f"codex:{OLD_SID}:2", 5, 1500, 900, 60, 20, OLD_SID),
    ]
    assert q(store, "SELECT line, reason FROM rejects") == [(7, "token_count without token usage")]
    assert_accounted(store)


def test_grown_copy_adds_only_the_new_calls(store: Store, tmp_path: Path) -> None:
    base = [
        rec(0, "session_meta", {"id": SID}),  # skip
        rec(1, "event_msg", user("Go")),  # message
        rec(2, "turn_context", ctx("gpt-5")),  # skip
        rec(3, "response_item", call(ARGS)),  # message
        rec(4, "event_msg", tokens(usage(100, 0, 10, 0), usage(100, 0, 10, 0))),  # call 1
        rec(5, "response_item", result(PASSED)),  # message
        rec(6, "turn_context", ctx("gpt-5")),  # skip
        rec(7, "response_item", say("Done.")),  # message
        rec(8, "event_msg", tokens(usage(200, 100, 5, 0), usage(300, 100, 15, 0))),  # call 2
    ]
    more = [
        rec(9, "event_msg", user("Again")),  # message
        rec(10, "turn_context", ctx("gpt-5")),  # skip
        rec(11, "response_item", call(ARGS)),  # message
        rec(12, "event_msg", tokens(usage(300, 200, 7, 0), usage(600, 300, 22, 0))),  # call 3
        rec(13, "response_item", result(FAILED)),  # message
    ]
    name = f"rollout-2025-10-01T10-00-00-{SID}.jsonl"
    first = write(tmp_path / "monday" / name, base)
    grown = write(tmp_path / "tuesday" / name, base + more)
    [r1] = ingest(store, first)
    assert (r1.rows_read, r1.rows_loaded, r1.rows_duplicate, r1.rows_skipped) == (9, 6, 0, 3)
    [r2] = ingest(store, grown)
    assert r2.status == "loaded"
    # Old: 2 calls + 4 messages are duplicates; new: 1 call + 3 messages.
    assert (r2.rows_read, r2.rows_loaded, r2.rows_rejected, r2.rows_duplicate, r2.rows_skipped) == (
        14,
        4,
        0,
        6,
        4,
    )
    assert q(store, "SELECT seq, source_id, input_tokens FROM calls ORDER BY seq") == [
        (1, r1.source_id, 100),
        (2, r1.source_id, 200),
        (3, r2.source_id, 300),
    ]
    assert q(store, "SELECT count(*), count(DISTINCT idx) FROM messages") == [(7, 7)]
    assert q(store, "SELECT call_id FROM messages WHERE idx = 6") == [(f"codex:{SID}:3",)]
    assert_accounted(store)


def test_real_rollout(store: Store) -> None:
    real = shared_samples() / REAL_NAME
    [r] = ingest(store, real)
    assert (r.status, r.format, r.rows_rejected) == ("loaded", "codex", 0)
    assert q(store, "SELECT count(*), sum(tool_call_count), min(model), max(model) FROM calls") == [
        (35, 34, "gpt-5-codex", "gpt-5-codex")
    ]
    assert q(store, "SELECT count(*) FROM messages WHERE kind = 'tool_call'") == [(34,)]
    assert q(
        store, "SELECT response_kind, count(*) FROM calls GROUP BY ALL ORDER BY response_kind"
    ) == [("text", 1), ("tool_call", 34)]
    # Line 7 is the first token_count: its last_token_usage.
    assert q(
        store,
        """SELECT line, input_tokens, cached_input_tokens, output_tokens, reasoning_tokens,
                  session_id FROM calls WHERE seq = 1""",
    ) == [(7, 2899, 2560, 100, 64, "019982b8-3422-79e0-8b3b-05abaf4f3c3e")]
    assert q(store, "SELECT count(*) FROM rejects") == [(0,)]
    assert_accounted(store)


def test_grown_copy_completes_a_cut_off_call(store: Store, tmp_path: Path) -> None:
    """A live rollout read right after a token_count line (Codex writes the step's items after
    it, as in the real sample): once the rest is written, the call is a tool call."""
    base = [
        rec(0, "session_meta", {"id": SID}),
        rec(1, "event_msg", user("Go")),
        rec(2, "turn_context", ctx("gpt-5")),
        rec(3, "event_msg", tokens(usage(100, 0, 10, 0), usage(100, 0, 10, 0))),  # call 1
    ]
    more = [rec(4, "response_item", call(ARGS)), rec(5, "response_item", result(PASSED))]
    name = f"rollout-2025-10-01T10-00-00-{SID}.jsonl"
    ingest(store, write(tmp_path / "live" / name, base))
    [r2] = ingest(store, write(tmp_path / "later" / name, base + more))
    assert (r2.rows_read, r2.rows_loaded, r2.rows_duplicate, r2.rows_skipped) == (6, 2, 2, 2)
    # The tool call message is stored and names call 1 as the call that made it ...
    assert q(store, "SELECT idx, call_id FROM messages WHERE kind = 'tool_call'") == [
        (2, f"codex:{SID}:1")
    ]
    # ... so call 1 must count it and be a tool call, not an 'empty' response.
    assert q(store, "SELECT seq, tool_call_count, response_kind FROM calls") == [
        (1, 1, "tool_call")
    ]


def test_web_search_items_are_tool_calls(store: Store, tmp_path: Path) -> None:
    """Codex Desktop 0.104 writes a search the model ran as a ``web_search_call`` item (with
    no name; the first of a rollout without an ``action``)."""
    lines = [
        rec(0, "session_meta", {"id": SID}),
        rec(1, "turn_context", ctx("gpt-5.3-codex")),
        rec(2, "event_msg", user("look it up")),
        rec(3, "response_item", {"type": "web_search_call", "status": "completed"}),
        rec(
            4,
            "response_item",
            {
                "type": "web_search_call",
                "status": "completed",
                "action": {"type": "search", "query": "duckdb asof join"},
            },
        ),
        rec(5, "event_msg", tokens(usage(1000, 0, 50, 10), usage(1000, 0, 50, 10))),
    ]
    [r] = ingest(store, write(tmp_path / f"rollout-{SID}.jsonl", lines))
    assert r.rows_skipped == 2  # session_meta, turn_context
    tools = q(
        store,
        "SELECT tool_name, tool_args_hash IS NOT NULL FROM messages "
        "WHERE kind = 'tool_call' ORDER BY idx",
    )
    assert tools == [("web_search", True)] * 2
    assert q(store, "SELECT tool_call_count, response_kind FROM calls") == [(2, "tool_call")]
    assert_accounted(store)


@pytest.mark.parametrize(
    ("outputs", "incidents"),
    [
        (["Process running...", "Process running... 40%", "done"], 0),  # polling
        (["Process running...", "Process running...", "Process running..."], 1),  # a loop
    ],
)
def test_polls_are_tied_to_their_outputs(
    store: Store, tmp_path: Path, outputs: list[str], incidents: int
) -> None:
    """write_stdin polling a running command: the same arguments, a new output each time.
    Each output is tied to its call by call_id and hashed, so the detector can tell polling
    from the same call getting the same output back."""
    from analyzer.detect.detectors import detect, select

    poll = '{"session_id": 7, "chars": "", "yield_time_ms": 5000}'
    lines = [rec(0, "session_meta", {"id": SID}), rec(1, "turn_context", ctx("gpt-5.3-codex"))]
    for i, out in enumerate(outputs):
        lines += [
            rec(
                2 + 3 * i,
                "response_item",
                {
                    "type": "function_call",
                    "name": "write_stdin",
                    "arguments": poll,
                    "call_id": f"call_{i}",
                },
            ),
            rec(3 + 3 * i, "event_msg", tokens(usage(100 + i, 0, 5, 0), None)),
            rec(
                4 + 3 * i,
                "response_item",
                {"type": "function_call_output", "call_id": f"call_{i}", "output": out},
            ),
        ]
    ingest(store, write(tmp_path / f"rollout-{SID}.jsonl", lines))
    got = q(
        store,
        """SELECT c.tool_use_id, r.tool_result_hash FROM messages c
           JOIN messages r ON r.tool_use_id = c.tool_use_id AND r.kind = 'tool_result'
           WHERE c.kind = 'tool_call' ORDER BY c.idx""",
    )
    assert [g[0] for g in got] == ["call_0", "call_1", "call_2"]
    assert len({g[1] for g in got}) == len(set(outputs))
    found = detect(store, select(only=["repeated_tool_call"]))
    assert len(found) == incidents
