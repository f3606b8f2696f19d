"""Claude Code transcripts: golden cases on small files written here."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

from analyzer.engine.store import Store
from analyzer.ingest.base import IngestOptions
from analyzer.ingest.lowering import args_hash
from analyzer.pipeline import ingest_paths

SESSION = "11111111-2222-3333-4444-555555555555"


def line(kind: str, n: int, **extra: Any) -> dict[str, Any]:
    out = {
        "parentUuid": None,
        "isSidechain": False,
        "userType": "external",
        "cwd": "/w",
        "sessionId": SESSION,
        "version": "2.1.38",
        "type": kind,
        "uuid": f"u{n}",
        "timestamp": f"2026-02-10T22:15:{n:02d}.000Z",
    }
    out.update(extra)
    return out


def assistant(
    n: int,
    msg_id: str,
    request: str,
    block: dict[str, Any],
    out: int,
    stop: str | None = None,
    model: str = "claude-haiku-4-5-20251001",
    **extra: Any,
) -> dict[str, Any]:
    usage = {
        "input_tokens": 3,
        "cache_creation_input_tokens": 1906,
        "cache_read_input_tokens": 10136,
        "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 1906},
        "output_tokens": out,
    }
    message = {
        "model": model,
        "id": msg_id,
        "type": "message",
        "role": "assistant",
        "content": [block],
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": usage,
    }
    return line("assistant", n, message=message, requestId=request, **extra)


def user(n: int, content: object, **extra: Any) -> dict[str, Any]:
    return line("user", n, message={"role": "user", "content": content}, **extra)


def write(path: Path, lines: list[dict[str, Any] | str], end: str = "\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines)
    path.write_text(text + end, encoding="utf-8")
    return path


def ingest(store: Store, *paths: Path) -> list:
    return ingest_paths(store, [str(p) for p in paths], IngestOptions())


def rows(store: Store, sql: str) -> list[tuple]:
    return store.con.execute(sql).fetchall()


SESSION_LINES: list[dict[str, Any] | str] = [
    user(1, "Explore the project"),  # a turn
    assistant(2, "msg_A", "req_A", {"type": "text", "text": "I'll look around."}, 1),
    assistant(
        3,
        "msg_A",
        "req_A",
        {
            "type": "tool_use",
            "id": "t1",
            "name": "Read",
            "input": {"file_path": "/w/a.py", "limit": 10},
        },
        4,
    ),
    assistant(
        4,
        "msg_A",
        "req_A",
        {
            "type": "tool_use",
            "id": "t2",
            "name": "Read",
            "input": {"limit": 10, "file_path": "/w/a.py"},
        },
        2,
    ),
    line("progress", 5, data={"type": "hook_progress"}),
    user(
        6,
        [
            {"type": "tool_result", "tool_use_id": "t1", "content": "print(1)"},
            {"type": "tool_result", "tool_use_id": "t2", "content": "boom", "is_error": True},
        ],
    ),
    user(7, "<system-reminder>be brief</system-reminder>", isMeta=True),  # not a turn
    assistant(
        8, "msg_B", "req_B", {"type": "thinking", "thinking": "hmm " * 25, "signature": "s"}, 3
    ),
    assistant(9, "msg_B", "req_B", {"type": "text", "text": "  \n"}, 3, stop="end_turn"),
    line("file-history-snapshot", 10, messageId="x", snapshot={}),
    user(11, [{"type": "text", "text": "now fix it"}]),  # a second turn
    assistant(12, "msg_C", "", {"type": "text", "text": "Done."}, 2),  # empty requestId
]


def test_lines_are_grouped_into_calls(store: Store, tmp_path: Path) -> None:
    f = write(tmp_path / "p" / f"{SESSION}.jsonl", SESSION_LINES)
    [report] = ingest(store, f)
    assert (report.format, report.rows_read, report.rows_rejected) == ("claude_code", 12, 0)
    assert report.rows_skipped == 2 and report.rows_loaded == 10
    assert rows(store, "SELECT skipped_kinds FROM sources") == [
        ('{"file-history-snapshot": 1, "progress": 1}',)
    ]
    calls = rows(
        store,
        """SELECT native_id, seq, input_tokens, cached_input_tokens, cache_write_tokens,
                  cache_write_1h_tokens, output_tokens, output_final, finish_reason,
                  response_kind, content_chars, visible_chars, reasoning_chars, tool_call_count,
                  provider, app, cost_basis, cost_usd > 0
           FROM calls ORDER BY seq""",
    )
    whole_prompt = 3 + 1906 + 10136
    assert calls == [
        (
            "msg_A:req_A",
            1,
            whole_prompt,
            10136,
            1906,
            1906,
            4,
            False,
            "unknown",
            "tool_call",
            17,
            15,
            0,
            2,
            "anthropic",
            "claude-code",
            "estimated_output",
            True,
        ),
        # a line says how msg_B stopped: its count is final, priced as logged
        (
            "msg_B:req_B",
            2,
            whole_prompt,
            10136,
            1906,
            1906,
            3,
            True,
            "stop",
            "whitespace",
            3,
            0,
            100,
            0,
            "anthropic",
            "claude-code",
            "estimated",
            True,
        ),
        (
            "msg_C",
            3,
            whole_prompt,
            10136,
            1906,
            1906,
            2,
            False,
            "unknown",
            "text",
            5,
            5,
            0,
            0,
            "anthropic",
            "claude-code",
            "estimated_output",
            True,
        ),
    ]


def test_turns_tool_calls_and_results(store: Store, tmp_path: Path) -> None:
    ingest(store, write(tmp_path / f"{SESSION}.jsonl", SESSION_LINES))
    turns = [r[0] for r in rows(store, "SELECT turn_id FROM calls ORDER BY seq")]
    assert turns == [f"{SESSION}:u1", f"{SESSION}:u1", f"{SESSION}:u11"]
    tools = rows(
        store,
        """SELECT tool_name, tool_args_hash, call_id FROM messages
           WHERE kind = 'tool_call' ORDER BY idx""",
    )
    expected_hash = args_hash({"file_path": "/w/a.py", "limit": 10})
    assert tools == [("Read", expected_hash, "cc:msg_A:req_A")] * 2  # key order does not matter
    results = rows(
        store, "SELECT is_error, excerpt FROM messages WHERE kind = 'tool_result' ORDER BY idx"
    )
    assert results == [(False, "print(1)"), (True, "boom")]
    kinds = rows(store, "SELECT kind, count(*) FROM messages GROUP BY 1 ORDER BY 1")
    assert kinds == [
        ("prompt", 2),
        ("system", 1),
        ("text", 3),
        ("tool_call", 2),
        ("tool_result", 2),
    ]


def test_sub_agent_is_its_own_session_linked_to_the_parent(store: Store, tmp_path: Path) -> None:
    side = dict(isSidechain=True, agentId="afc096d")
    f = write(
        tmp_path / SESSION / "subagents" / "agent-afc096d.jsonl",
        [
            user(1, "Warmup", **side),
            assistant(
                2, "msg_S", "req_S", {"type": "text", "text": "ok"}, 152, stop="end_turn", **side
            ),
        ],
    )
    ingest(store, f)
    assert rows(store, "SELECT session_id, agent_id, parent_session_id, stream_key FROM calls") == [
        (f"{SESSION}:agent-afc096d", "afc096d", SESSION, f"{SESSION}:agent-afc096d")
    ]


def test_broken_and_cut_off_lines_are_rejected_and_the_rest_loads(
    store: Store, tmp_path: Path
) -> None:
    lines = [
        *SESSION_LINES[:3],
        "{this is not json",
        *SESSION_LINES[3:6],
        json.dumps(SESSION_LINES[7])[:70],
    ]
    f = write(tmp_path / f"{SESSION}.jsonl", lines, end="")  # the last line has no newline
    [report] = ingest(store, f)
    assert report.rows_read == 8 and report.rows_rejected == 2
    rejected = rows(store, "SELECT line, reason FROM rejects ORDER BY line")
    assert rejected[0][0] == 4 and rejected[0][1].startswith("not valid JSON")
    assert rejected[1] == (8, "cut-off last line (is the log still being written?)")
    assert rows(store, "SELECT count(*) FROM calls") == [(1,)]
    assert (
        report.rows_loaded + report.rows_rejected + report.rows_duplicate + report.rows_skipped
        == report.rows_read
    )


def test_a_grown_transcript_adds_only_the_new_calls(store: Store, tmp_path: Path) -> None:
    first = write(tmp_path / "a" / f"{SESSION}.jsonl", SESSION_LINES[:6])
    grown = write(tmp_path / "b" / f"{SESSION}.jsonl", SESSION_LINES)
    a, b = ingest(store, first, grown)
    assert a.rows_loaded == 5 and a.rows_skipped == 1
    # msg_A's three lines and the first user lines were stored already.
    assert b.rows_duplicate == 5 and b.rows_loaded == 5
    assert rows(store, "SELECT count(*), count(DISTINCT native_id) FROM calls") == [(3, 3)]
    assert rows(store, "SELECT count(*) FROM messages") == [(10,)]


def test_api_error_lines_are_error_calls_priced_at_nothing(store: Store, tmp_path: Path) -> None:
    """The CLI's own reply (model <synthetic>): no model was called, so $0, and counted."""
    err = assistant(
        2,
        "msg_E",
        "req_E",
        {"type": "text", "text": "API Error: 529 Overloaded"},
        0,
        model="<synthetic>",
        isApiErrorMessage=True,
    )
    ingest(store, write(tmp_path / f"{SESSION}.jsonl", [user(1, "hi"), err]))
    assert rows(store, "SELECT http_status, response_kind, cost_usd, cost_basis FROM calls") == [
        (529, "error", Decimal(0), "reported")
    ]


# -- money: what a side-by-side run against ccusage 20 showed on real shapes ----------------


def real_usage(fresh: int, read: int, write_5m: int, out: int, **extra: Any) -> dict[str, Any]:
    """``message.usage`` as Claude Code 2.1 writes it (the real spotter sessions)."""
    usage: dict[str, Any] = {
        "input_tokens": fresh,
        "cache_creation_input_tokens": write_5m,
        "cache_read_input_tokens": read,
        "output_tokens": out,
        "server_tool_use": {"web_search_requests": 0, "web_fetch_requests": 0},
        "service_tier": "standard",
        "cache_creation": {"ephemeral_1h_input_tokens": 0, "ephemeral_5m_input_tokens": write_5m},
        "inference_geo": "",
        "iterations": [],
        "speed": "standard",
    }
    usage.update(extra)
    return usage


def priced(
    n: int, msg_id: str, request: str, usage: dict[str, Any], model: str, **extra: Any
) -> dict[str, Any]:
    message = {
        "model": model,
        "id": msg_id,
        "type": "message",
        "role": "assistant",
        "content": [{"type": "text", "text": "ok"}],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": usage,
    }
    return line("assistant", n, message=message, requestId=request, **extra)


def costs(store: Store) -> list[tuple]:
    return rows(
        store,
        """SELECT native_id, cost_basis, round(cost_usd, 8)::DOUBLE,
                  round(cost_estimate_usd, 8)::DOUBLE, round(cost_extra_usd, 8)::DOUBLE
           FROM calls ORDER BY seq""",
    )


def test_btw_replay_of_a_parent_message_is_billed_once(store: Store, tmp_path: Path) -> None:
    """A /btw side question replays a parent message into a sidechain: the same message.id,
    a new requestId (ccusage issue 913, PR 1155). One message.id is one API response."""
    usage = real_usage(3, 17842, 8165, 209)
    parent = priced(2, "msg_01P", "req_011", usage, "claude-opus-4-6")
    replay = priced(5, "msg_01P", "req_0BTW", usage, "claude-opus-4-6", isSidechain=True)
    answer = priced(
        6, "msg_01Q", "req_0BTW2", real_usage(3, 26007, 0, 40), "claude-opus-4-6", isSidechain=True
    )
    f = write(
        tmp_path / f"{SESSION}.jsonl", [user(1, "go"), parent, user(4, "/btw why?"), replay, answer]
    )
    [r] = ingest(store, f)
    assert [c[0] for c in costs(store)] == ["msg_01P:req_011", "msg_01Q:req_0BTW2"]
    assert (r.rows_read, r.rows_loaded, r.rows_duplicate) == (5, 4, 1)


def test_btw_replay_in_another_file_is_billed_once(store: Store, tmp_path: Path) -> None:
    usage = real_usage(3, 17842, 8165, 209)
    parent = write(
        tmp_path / f"{SESSION}.jsonl", [priced(2, "msg_01P", "req_011", usage, "claude-opus-4-6")]
    )
    side = dict(isSidechain=True, agentId="a1b2c3d")
    replay = write(
        tmp_path / SESSION / "subagents" / "agent-a1b2c3d.jsonl",
        [
            priced(2, "msg_01P", "req_0BTW", usage, "claude-opus-4-6", **side),
            {
                **line("assistant", 3, **side),
                "message": {
                    "model": "claude-opus-4-6",
                    "id": "msg_01P",
                    "type": "message",
                    "role": "assistant",
                    "usage": usage,
                    "stop_reason": None,
                    "content": [
                        {
                            "type": "tool_use",
                            "id": "toolu_1",
                            "name": "Read",
                            "input": {"file_path": "/w/a.py"},
                        }
                    ],
                },
                "requestId": "req_0BTW",
            },
        ],
    )
    _, b = ingest(store, parent, replay)
    assert rows(store, "SELECT native_id, session_id FROM calls") == [("msg_01P:req_011", SESSION)]
    assert (b.rows_read, b.rows_loaded, b.rows_duplicate) == (2, 0, 2)
    # The replayed blocks are not kept as the sidechain's own tool calls.
    assert rows(store, "SELECT count(*) FROM messages WHERE kind = 'tool_call'") == [(0,)]


def test_the_same_message_id_outside_a_sidechain_is_not_a_replay(
    store: Store, tmp_path: Path
) -> None:
    """Hand-written fixtures reuse ids across requests; outside sidechains (message.id,
    requestId) is the call, as ccusage and the real-world truth count it."""
    usage = real_usage(3, 100, 0, 5)
    f = write(
        tmp_path / f"{SESSION}.jsonl",
        [
            priced(1, "msg_004", "req_002", usage, "claude-sonnet-4"),
            priced(2, "msg_004", "req_004", usage, "claude-sonnet-4"),
        ],
    )
    ingest(store, f)
    assert rows(store, "SELECT count(*) FROM calls") == [(2,)]


def test_fast_mode_is_priced_at_its_rate(store: Store, tmp_path: Path) -> None:
    """usage.speed "fast" on Opus 4.6: 6x standard rates on every token kind (Anthropic's
    fast-mode docs; caching multipliers stack on top)."""
    standard = real_usage(10, 100_000, 0, 1_000)
    fast = real_usage(10, 100_000, 0, 1_000, speed="fast")
    f = write(
        tmp_path / f"{SESSION}.jsonl",
        [
            priced(1, "msg_S", "r1", standard, "claude-opus-4-6"),
            priced(2, "msg_F", "r2", fast, "claude-opus-4-6"),
        ],
    )
    ingest(store, f)
    # $5/M input, $0.50/M cache read, $25/M output: 10*5e-6 + 100,000*5e-7 + 1,000*2.5e-5
    assert costs(store) == [
        ("msg_S:r1", "estimated_output", 0.07505, 0.07505, None),
        ("msg_F:r2", "estimated_output", 0.4503, 0.4503, None),
    ]
    assert rows(store, "SELECT variant FROM calls ORDER BY seq") == [(None,), ("fast",)]


def test_fast_mode_of_a_model_without_a_known_fast_price_is_unpriced_and_named(
    tmp_path: Path,
) -> None:
    from click.testing import CliRunner

    from analyzer.cli.main import cli

    f = write(
        tmp_path / f"{SESSION}.jsonl",
        [
            priced(
                1,
                "msg_F",
                "r1",
                real_usage(10, 0, 0, 50, speed="fast"),
                "claude-sonnet-4-5-20250929",
            )
        ],
    )
    result = CliRunner().invoke(cli, ["audit", str(f), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["unpriced_models"] == {"claude-sonnet-4-5-20250929 (fast mode)": 1}
    assert data["calls_by_cost_basis"] == {"unpriced": 1}
    said = "no price known for model 'claude-sonnet-4-5-20250929 (fast mode)'"
    assert result.stderr.count(said) == 1


def test_web_searches_are_priced_per_request(store: Store, tmp_path: Path) -> None:
    usage = real_usage(500, 0, 0, 200)
    usage["server_tool_use"] = {"web_search_requests": 3, "web_fetch_requests": 0}
    ingest(
        store,
        write(
            tmp_path / f"{SESSION}.jsonl",
            [priced(1, "msg_W", "r1", usage, "claude-sonnet-4-5-20250929")],
        ),
    )
    # tokens: 500 * $3/M + 200 * $15/M = $0.0045; searches: 3 * $10/1,000 = $0.03
    assert costs(store) == [("msg_W:r1", "estimated_output", 0.0345, 0.0345, 0.03)]
    assert rows(store, "SELECT web_search_requests FROM calls") == [(3,)]


def test_cost_usd_on_the_line_is_kept_as_reported(store: Store, tmp_path: Path) -> None:
    """Claude Code 1.0 wrote the agent's own figure as ``costUSD`` on each line: it is the
    call's cost (basis 'reported'), with the list-price estimate kept beside it."""
    usage = real_usage(500, 0, 0, 200)
    lines = [
        priced(1, "msg_R", "r1", usage, "claude-sonnet-4-5-20250929", costUSD=0.0051),
        priced(2, "msg_R", "r1", usage, "claude-sonnet-4-5-20250929", costUSD=0.0051),
    ]
    ingest(store, write(tmp_path / f"{SESSION}.jsonl", lines))
    assert costs(store) == [("msg_R:r1", "reported", 0.0051, 0.0045, None)]


def test_long_context_prices_the_whole_call_at_the_higher_rate(
    store: Store, tmp_path: Path
) -> None:
    """Anthropic's rule: past 200k prompt tokens every token of the call is at the long-context
    rate (Sonnet 4.5: $6/M input, $22.50/M output). ccusage 20 splits each category at 200k
    (200k * $3 + 50k * $6 = $0.90 for the input) and under-charges."""
    ingest(
        store,
        write(
            tmp_path / f"{SESSION}.jsonl",
            [
                priced(
                    1, "msg_L", "r1", real_usage(250_000, 0, 0, 1_000), "claude-sonnet-4-5-20250929"
                )
            ],
        ),
    )
    # 250,000 * 6e-6 + 1,000 * 2.25e-5 = 1.5 + 0.0225
    assert costs(store) == [("msg_L:r1", "estimated_output", 1.5225, 1.5225, None)]


def test_tool_results_are_tied_to_their_calls_and_hashed(store: Store, tmp_path: Path) -> None:
    ingest(store, write(tmp_path / f"{SESSION}.jsonl", SESSION_LINES))
    got = rows(
        store,
        """SELECT c.tool_use_id, r.is_error, r.tool_result_hash
           FROM messages c JOIN messages r USING (session_id, tool_use_id)
           WHERE c.kind = 'tool_call' AND r.kind = 'tool_result' ORDER BY c.idx""",
    )
    from analyzer.ingest.lowering import result_hash

    assert got == [
        ("t1", False, result_hash("print(1)", False)),
        ("t2", True, result_hash("boom", True)),
    ]
