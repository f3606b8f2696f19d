"""Saved conversations: OpenAI messages, Anthropic blocks, Penguin sessions."""

from __future__ import annotations

import copy
import hashlib
import json
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
import pytest

from analyzer.engine.store import Store
from analyzer.errors import InputError
from analyzer.ingest.base import IngestOptions
from analyzer.ingest.lowering import result_hash
from analyzer.pipeline import ingest_paths
from tests.helpers import shared_samples


def session_of(name: str, messages: list[dict[str, Any]]) -> str:
    """The session of a conversation that names none: its task or file name, and a digest of
    its messages up to and including the first model reply."""
    first = next((i for i, m in enumerate(messages) if m.get("role") == "assistant"), None)
    start = messages if first is None else messages[: first + 1]
    return f"{name}@{hashlib.sha256(orjson.dumps(start)).hexdigest()[:8]}"


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
            "role": "assistant",
            "content": None,
            "timestamp": "2025-12-09T10:00:01Z",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "ls", "arguments": '{"path": "."}'},
                }
            ],
            "usage": {
                "prompt_tokens": 1200,
                "completion_tokens": 40,
                "completion_tokens_details": {"reasoning_tokens": 20},
                "prompt_tokens_details": {"cached_tokens": 1024},
            },
            "finish_reason": "tool_calls",
        },
        {"role": "tool", "tool_call_id": "c1", "content": "a.py b.py"},
        {
            "role": "assistant",
            "content": "",
            "reasoning_content": "thinking " * 50,
            "timestamp": "2025-12-09T10:00:05Z",
            "finish_reason": "stop",
            "usage": {
                "prompt_tokens": 1260,
                "completion_tokens": 900,
                "completion_tokens_details": {"reasoning_tokens": 900},
            },
        },
        {
            "role": "assistant",
            "timestamp": "2025-12-09T10:00:09Z",
            "finish_reason": "stop",
            "content": [{"type": "text", "text": "There are "}, {"type": "text", "text": "two."}],
        },
    ],
}


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
        (
            1,
            "conv-1",
            "openai/gpt-5-mini",
            1200,
            1024,
            40,
            20,
            True,
            "tool_calls",
            "tool_call",
            1,
            0,
            0,
            "estimated",
        ),
        (
            2,
            "conv-1",
            "openai/gpt-5-mini",
            1260,
            None,
            900,
            900,
            True,
            "stop",
            "thinking_only",
            0,
            0,
            450,
            "estimated",
        ),
        (
            3,
            "conv-1",
            "openai/gpt-5-mini",
            None,
            None,
            None,
            None,
            None,
            "stop",
            "text",
            0,
            14,
            0,
            None,
        ),
    ]
    # One turn, started by the user; the tool result is stored with the tool's name hashed args.
    assert rows(store, "SELECT DISTINCT turn_id FROM calls") == [("conv-1:2",)]
    kinds = rows(store, "SELECT kind, count(*) FROM messages GROUP BY 1 ORDER BY 1")
    assert kinds == [
        ("prompt", 1),
        ("system", 1),
        ("text", 2),
        ("tool_call", 1),
        ("tool_result", 1),
    ]
    # The call and its result share the id that ties them; the result is hashed.
    assert rows(
        store,
        """SELECT kind, tool_use_id, tool_result_hash, is_error FROM messages
           WHERE kind IN ('tool_call', 'tool_result') ORDER BY idx""",
    ) == [("tool_call", "c1", None, None), ("tool_result", "c1", result_hash("a.py b.py"), None)]


def test_a_bare_list_of_anthropic_messages(store: Store, tmp_path: Path) -> None:
    doc = [
        {"role": "user", "content": [{"type": "text", "text": "go"}]},
        {
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "stop_reason": "max_tokens",
            "content": [
                {"type": "thinking", "thinking": "abc"},
                {"type": "tool_use", "id": "t", "name": "Write", "input": {"p": 1}},
            ],
            "usage": {
                "input_tokens": 10,
                "cache_creation_input_tokens": 100,
                "cache_read_input_tokens": 5000,
                "output_tokens": 8192,
            },
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "t",
                    "content": "invalid JSON",
                    "is_error": True,
                }
            ],
        },
    ]
    ingest(store, write(tmp_path / "anthropic-session.json", doc))
    assert rows(
        store,
        """SELECT session_id, input_tokens, cached_input_tokens, cache_write_tokens,
                  output_tokens, finish_reason, response_kind, reasoning_chars FROM calls""",
    ) == [
        (
            session_of("anthropic-session", doc),
            5110,
            5000,
            100,
            8192,
            "length",
            "truncated_tool_call",
            3,
        )
    ]
    assert rows(
        store,
        """SELECT kind, tool_use_id, tool_result_hash, is_error FROM messages
           WHERE kind IN ('tool_call', 'tool_result') ORDER BY idx""",
    ) == [
        ("tool_call", "t", None, None),
        ("tool_result", "t", result_hash("invalid JSON", True), True),
    ]


PENGUIN = {
    "id": "session_20251213_054944_abcd1234",
    "messages": [
        {
            "role": "user",
            "content": "fix the wallet",
            "category": "DIALOG",
            "timestamp": "2025-12-13T05:50:00.000",
        },
        {
            "role": "assistant",
            "content": "<execute>pytest</execute>",
            "category": "DIALOG",
            "timestamp": "2025-12-13T05:50:10.000",
            "metadata": {"request_id": "r1"},
        },
        {
            "role": "system",
            "content": "[Tool Result] ok",
            "category": "SYSTEM_OUTPUT",
            "timestamp": "2025-12-13T05:50:11.000",
        },
        # r2 and r3: whitespace replies, never saved
        {
            "role": "assistant",
            "content": "[Empty response from model]",
            "category": "SYSTEM",
            "timestamp": "2025-12-13T05:50:40.000",
            "metadata": {"was_empty": True},
        },
    ],
    "llm_request_lifecycles": [
        {
            "request_id": "r1",
            "model": "anthropic/claude-opus-4.5",
            "provider": "openrouter",
            "started_at": 1765605005.0,
            "ended_at": 1765605009.5,
            "finish_reason": "stop",
            "stream": True,
        },
        {
            "request_id": "r2",
            "model": "anthropic/claude-opus-4.5",
            "provider": "openrouter",
            "started_at": 1765605020.0,
            "ended_at": 1765605021.5,
            "finish_reason": "stop",
        },
        {
            "request_id": "r3",
            "model": "anthropic/claude-opus-4.5",
            "provider": "openrouter",
            "started_at": 1765605025.0,
            "ended_at": 1765605026.0,
            "finish_reason": "stop",
        },
        {
            "request_id": "r4",
            "model": "anthropic/claude-opus-4.5",
            "provider": "openrouter",
            "started_at": 1765605037.0,
            "ended_at": 1765605039.0,
            "finish_reason": "stop",
        },
    ],
    "tool_call_records": [{"x": 1}],
}


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
        # A CodeAct tag is Penguin's tool call.
        (
            f"{sid}:r1",
            1,
            _t("05:50:05"),
            True,
            "stop",
            "tool_call",
            25,
            4500.0,
            "penguin",
            f"{sid}:1",
        ),
        (f"{sid}:r2", 2, _t("05:50:20"), False, "stop", None, None, 1500.0, "penguin", f"{sid}:1"),
        (f"{sid}:r3", 3, _t("05:50:25"), False, "stop", None, None, 1000.0, "penguin", f"{sid}:1"),
        (f"{sid}:2", 4, _t("05:50:37"), True, "stop", "empty", 0, 2000.0, "penguin", f"{sid}:1"),
    ]
    assert rows(
        store,
        "SELECT kind, excerpt, tool_name FROM messages WHERE role = 'assistant' ORDER BY idx",
    ) == [
        ("text", "<execute>pytest</execute>", None),
        ("tool_call", "pytest", "execute"),  # the tag's body: what it ran
        ("placeholder", "[Empty response from model]", None),
    ]
    # Penguin's tool results carry no id: hashed, tied to no call.
    assert rows(
        store, "SELECT tool_use_id, tool_result_hash FROM messages WHERE kind = 'tool_result'"
    ) == [(None, result_hash("[Tool Result] ok"))]


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


# --- mini-swe-agent: what the agent kept under `extra` ------------------------------------------


def _mini_assistant(
    n: int, text: str, command: str, usage: dict[str, Any], cost: object, ts: float
) -> dict[str, Any]:
    """An assistant message as mini-swe-agent 2.x saves it (litellm's response under `extra`)."""
    tool_call = {
        "index": 0,
        "function": {"arguments": json.dumps({"command": command}), "name": "bash"},
        "id": f"call_00_{n}",
        "type": "function",
    }
    return {
        "content": text,
        "role": "assistant",
        "tool_calls": [tool_call],
        "function_call": None,
        "provider_specific_fields": None,
        "extra": {
            "actions": [{"command": command, "tool_call_id": f"call_00_{n}"}],
            "response": {
                "id": f"resp-{n}",
                "created": int(ts) - 2,
                "model": "deepseek-chat",
                "object": "chat.completion",
                "system_fingerprint": "fp_test",
                "choices": [
                    {
                        "finish_reason": "tool_calls",
                        "index": 0,
                        "message": {
                            "content": text,
                            "role": "assistant",
                            "tool_calls": [copy.deepcopy(tool_call)],
                            "function_call": None,
                        },
                        "provider_specific_fields": {},
                    }
                ],
                "usage": usage,
            },
            "cost": cost,
            "timestamp": ts,
        },
    }


def _deepseek_usage(hit: int, miss: int, out: int) -> dict[str, Any]:
    return {
        "completion_tokens": out,
        "prompt_tokens": hit + miss,
        "total_tokens": hit + miss + out,
        "completion_tokens_details": None,
        "prompt_tokens_details": {"cached_tokens": hit},
        "prompt_cache_hit_tokens": hit,
        "prompt_cache_miss_tokens": miss,
    }


def _mini_tool(n: int, output: str, returncode: int, ts: float) -> dict[str, Any]:
    return {
        "content": f"<returncode>{returncode}</returncode>\n<output>\n{output}</output>",
        "extra": {
            "raw_output": output,
            "returncode": returncode,
            "timestamp": ts,
            "exception_info": "",
        },
        "tool_call_id": f"call_00_{n}",
        "role": "tool",
    }


T_MINI = 1775715329.6782093  # 2026-04-09 06:15:29.678209 UTC


def mini_swe_agent_doc() -> dict[str, Any]:
    """A trajectory shaped like mini-swe-agent's (trajectory_format mini-swe-agent-1.1): three
    calls, two tool results (the second a failed command), and the final `exit` message."""
    costs = [0.00038626, 0.00041468, 0.0005757]
    return {
        "info": {
            "model_stats": {"instance_cost": sum(costs), "api_calls": 3},
            "config": {"agent": {"system_template": "You are a helpful assistant."}},
            "mini_version": "2.2.7",
            "exit_status": "Submitted",
            "submission": "diff --git a/x.py b/x.py",
        },
        "messages": [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "<pr_description>Fix L060</pr_description>"},
            _mini_assistant(
                1, "Let me look.", "ls", _deepseek_usage(320, 1220, 85), costs[0], T_MINI
            ),
            _mini_tool(1, "L060.py\n", 0, T_MINI + 0.12),
            _mini_assistant(
                2, "", "python repro.py", _deepseek_usage(1536, 131, 68), costs[1], T_MINI + 2.4
            ),
            _mini_tool(2, "Traceback ...\n", 1, T_MINI + 2.6),
            _mini_assistant(
                3,
                "Submitting.",
                "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT",
                _deepseek_usage(16256, 306, 83),
                costs[2],
                T_MINI + 5.0,
            ),
            {
                "role": "exit",
                "content": "diff --git a/x.py b/x.py",
                "extra": {"exit_status": "Submitted", "submission": "diff --git a/x.py b/x.py"},
            },
        ],
        "trajectory_format": "mini-swe-agent-1.1",
        "instance_id": "sqlfluff__sqlfluff-2419",
    }


def _utc(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, UTC).replace(tzinfo=None)


def test_mini_swe_agent_calls_read_from_extra(store: Store, tmp_path: Path) -> None:
    doc = mini_swe_agent_doc()
    [report] = ingest(store, write(tmp_path / "run__sqlfluff-2419.traj.json", doc))
    # 8 messages and ``info``, the run (its verdict and stated totals).
    assert (report.format, report.rows_read, report.rows_loaded) == ("conversation_json", 9, 9)
    assert rows(
        store,
        """SELECT session_id, agent, exit_status, outcome, is_error, reported_calls,
                  reported_cost_usd::DOUBLE, cost_apportioned FROM runs""",
    ) == [
        (
            session_of("sqlfluff__sqlfluff-2419", doc["messages"]),
            "mini-swe-agent",
            "Submitted",
            "completed",
            None,
            3,
            doc["info"]["model_stats"]["instance_cost"],
            False,
        ),
    ]
    got = rows(
        store,
        """SELECT seq, model, response_id, input_tokens, cached_input_tokens, output_tokens,
                  reasoning_tokens, output_final, finish_reason_raw, finish_reason,
                  response_kind, ts, cost_usd::DOUBLE, cost_basis,
                  cost_estimate_usd IS NOT NULL
           FROM calls ORDER BY seq""",
    )
    assert got == [
        (
            1,
            "deepseek-chat",
            "resp-1",
            1540,
            320,
            85,
            None,
            True,
            "tool_calls",
            "tool_calls",
            "tool_call",
            _utc(T_MINI),
            0.00038626,
            "reported",
            True,
        ),
        (
            2,
            "deepseek-chat",
            "resp-2",
            1667,
            1536,
            68,
            None,
            True,
            "tool_calls",
            "tool_calls",
            "tool_call",
            _utc(T_MINI + 2.4),
            0.00041468,
            "reported",
            True,
        ),
        (
            3,
            "deepseek-chat",
            "resp-3",
            16562,
            16256,
            83,
            None,
            True,
            "tool_calls",
            "tool_calls",
            "tool_call",
            _utc(T_MINI + 5.0),
            0.0005757,
            "reported",
            True,
        ),
    ]
    # The reported dollars add up to the trajectory's own instance_cost.
    [(total,)] = rows(store, "SELECT sum(cost_usd) FROM calls")
    assert abs(float(total) - doc["info"]["model_stats"]["instance_cost"]) < 1e-9
    # Tool results take their time from extra.timestamp; the task starts the one turn.
    assert rows(store, "SELECT ts FROM messages WHERE kind = 'tool_result' ORDER BY idx") == [
        (_utc(T_MINI + 0.12),),
        (_utc(T_MINI + 2.6),),
    ]
    session = session_of("sqlfluff__sqlfluff-2419", doc["messages"])
    assert rows(store, "SELECT DISTINCT turn_id FROM calls") == [(f"{session}:2",)]


def test_mini_swe_agent_tool_results_are_tied_to_their_calls(store: Store, tmp_path: Path) -> None:
    doc = mini_swe_agent_doc()
    ingest(store, write(tmp_path / "t.traj.json", doc))
    calls = rows(
        store,
        """SELECT tool_use_id, tool_name, call_id FROM messages WHERE kind = 'tool_call'
           ORDER BY idx""",
    )
    session = session_of("sqlfluff__sqlfluff-2419", doc["messages"])
    assert calls == [
        ("call_00_1", "bash", f"conv:{session}:1"),
        ("call_00_2", "bash", f"conv:{session}:2"),
        ("call_00_3", "bash", f"conv:{session}:3"),  # the submission: answered by `exit`, no tool
    ]
    results = rows(
        store,
        """SELECT tool_use_id, is_error, tool_result_hash FROM messages
           WHERE kind = 'tool_result' ORDER BY idx""",
    )
    first, second = doc["messages"][3], doc["messages"][5]
    assert results == [
        ("call_00_1", False, result_hash(first["content"], False)),
        ("call_00_2", True, result_hash(second["content"], True)),  # returncode 1
    ]
    # A tool_call row carries no result hash, a result no argument hash.
    assert rows(
        store,
        """SELECT count(*) FROM messages
           WHERE (kind = 'tool_call' AND tool_result_hash IS NOT NULL)
              OR (kind = 'tool_result' AND tool_args_hash IS NOT NULL)""",
    ) == [(0,)]


def test_a_poll_and_a_loop_hash_apart(store: Store, tmp_path: Path) -> None:
    """The same command three times: new output each time is a poll, the same output a loop;
    the same output once as an error is a different result."""
    msgs: list[dict[str, Any]] = [{"role": "user", "content": "wait for the build"}]
    outputs = [
        ("building 10%", 0),
        ("building 60%", 0),
        ("done", 0),
        ("done", 0),
        ("done", 0),
        ("done", 2),
    ]
    for n, (out, code) in enumerate(outputs, 1):
        usage = _deepseek_usage(0, 100 * n, 10)
        msgs.append(_mini_assistant(n, "", "tail build.log", usage, 0.0001, T_MINI + n))
        msgs.append(_mini_tool(n, out, code, T_MINI + n + 0.5))
    ingest(store, write(tmp_path / "poll.traj.json", {"messages": msgs}))
    got = rows(
        store,
        """SELECT c.tool_args_hash, r.tool_result_hash, r.is_error
           FROM messages c JOIN messages r
             ON r.kind = 'tool_result' AND r.session_id = c.session_id
            AND r.tool_use_id = c.tool_use_id
           WHERE c.kind = 'tool_call' ORDER BY c.idx""",
    )
    assert len(got) == 6 and len({args for args, _, _ in got}) == 1
    hashes = [h for _, h, _ in got]
    assert len(set(hashes[:3])) == 3  # polling: a new result each time
    assert hashes[2] == hashes[3] == hashes[4]  # a loop: the same result again
    assert hashes[5] not in hashes[:5] and got[5][2] is True  # same text, but an error


def test_the_message_s_own_fields_win_over_extra(store: Store, tmp_path: Path) -> None:
    own = _mini_assistant(1, "x", "ls", _deepseek_usage(100, 900, 50), 0.25, T_MINI)
    own.update(
        id="msg-own",
        model="openai/gpt-5-mini",
        finish_reason="stop",
        timestamp="2026-04-09T07:00:00Z",
        usage={
            "prompt_tokens": 2000,
            "completion_tokens": 70,
            "completion_tokens_details": {"reasoning_tokens": 30},
        },
    )
    # No top-level time, usage with a count missing: extra fills what the message lacks.
    partial = _mini_assistant(2, "y", "ls", _deepseek_usage(100, 900, 50), 0.5, T_MINI + 9)
    partial["usage"] = {"prompt_tokens": 1000, "completion_tokens": None}
    # No extra.timestamp: the provider's `created` is the time of last resort.
    bare = _mini_assistant(3, "z", "ls", _deepseek_usage(0, 10, 5), 0.1, T_MINI + 20)
    del bare["extra"]["timestamp"]
    ingest(store, write(tmp_path / "own.json", {"messages": [own, partial, bare]}))
    got = rows(
        store,
        """SELECT response_id, model, input_tokens, cached_input_tokens, output_tokens,
                  reasoning_tokens, finish_reason_raw, ts, cost_usd::DOUBLE
           FROM calls ORDER BY seq""",
    )
    assert got == [
        (
            "msg-own",
            "openai/gpt-5-mini",
            2000,
            100,
            70,
            30,
            "stop",
            datetime(2026, 4, 9, 7, 0, 0),
            0.25,
        ),
        ("resp-2", "deepseek-chat", 1000, 100, 50, None, "tool_calls", _utc(T_MINI + 9), 0.5),
        ("resp-3", "deepseek-chat", 10, 0, 5, None, "tool_calls", _utc(int(T_MINI + 20) - 2), 0.1),
    ]


def test_a_cost_is_read_only_as_a_plausible_number(store: Store, tmp_path: Path) -> None:
    """A stated cost is a number of dollars above 0: anything else states no cost, and the
    list-price estimate is the call's cost. (0 is what mini-swe-agent writes when it could not
    price a call, not a free call.)"""
    odd = ["0.01", -0.5, 0, 0.0, True, [0.01], {"usd": 0.01}, None, 1e300, 10**30]
    msgs = [
        _mini_assistant(n, "x", "ls", _deepseek_usage(0, 1000, 10), cost, T_MINI + n)
        for n, cost in enumerate([*odd, 3], 1)
    ]
    [report] = ingest(store, write(tmp_path / "costs.json", {"messages": msgs}))
    assert report.rows_loaded == len(odd) + 1
    got = rows(store, "SELECT cost_basis, count(*) FROM calls GROUP BY 1 ORDER BY 1")
    assert got == [("estimated", len(odd)), ("reported", 1)]
    assert rows(store, "SELECT cost_usd::DOUBLE FROM calls WHERE cost_basis = 'reported'") == [
        (3.0,)
    ]


def test_mini_swe_agent_text_based_observations(store: Store, tmp_path: Path) -> None:
    """mini-swe-agent without tool calling sends a command's output, and its complaint about a
    reply it could not parse, as user messages: tool results and agent text, not prompts."""
    first = _mini_assistant(
        1, "```mswea_bash_command\nls\n```", "ls", _deepseek_usage(0, 500, 20), 0.001, T_MINI
    )
    del first["tool_calls"]
    second = _mini_assistant(
        2, "no command here", "", _deepseek_usage(0, 600, 5), 0.001, T_MINI + 3
    )
    del second["tool_calls"]
    msgs = [
        {"role": "user", "content": "Fix the bug"},
        first,
        {
            "role": "user",
            "content": "<returncode>2</returncode>\n<output>\nno such file</output>",
            "extra": {"raw_output": "no such file", "returncode": 2, "timestamp": T_MINI + 1},
        },
        second,
        {
            "role": "user",
            "content": "Please always provide EXACTLY ONE action.",
            "extra": {"interrupt_type": "FormatError", "n_actions": 0},
        },
    ]
    ingest(store, write(tmp_path / "text.traj.json", {"messages": msgs}))
    got = rows(
        store,
        """SELECT kind, is_error, tool_use_id, tool_result_hash IS NOT NULL, ts
           FROM messages WHERE role = 'user' ORDER BY idx""",
    )
    assert got == [
        ("prompt", None, None, False, None),
        ("tool_result", True, None, True, _utc(T_MINI + 1)),
        ("format_error", True, None, True, None),  # the agent's refusal of the second reply
    ]
    assert rows(store, "SELECT DISTINCT turn_id FROM calls") == [(f"{session_of('text', msgs)}:1",)]


ODD_VALUES: list[object] = [None, -1.5, 10**20, "x", [1], {"a": 1}]


def _paths(obj: object, path: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    out = [path] if path else []
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _paths(v, (*path, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += _paths(v, (*path, i))
    return out


def _set(obj: Any, path: tuple[object, ...], value: object) -> None:
    for key in path[:-1]:
        obj = obj[key]
    obj[path[-1]] = value


def test_odd_values_anywhere_in_a_trajectory_never_crash(store: Store, tmp_path: Path) -> None:
    """Each value of a mini-swe-agent trajectory replaced by one of another type (a number
    where a string was, a list where an object was, ...): the file loads, and every message
    is accounted for. One document per odd value, holding one damaged copy of a task, a call
    and its result for every place a value can be."""
    block = mini_swe_agent_doc()["messages"][1:4]  # the task, a call and its result
    paths = _paths(block)
    for n, value in enumerate(ODD_VALUES):
        messages: list[object] = []
        for path in paths:
            damaged = copy.deepcopy(block)
            _set(damaged, path, value)
            messages += damaged
        doc = {"messages": messages, "trajectory_format": "mini-swe-agent-1.1"}
        [r] = ingest(store, write(tmp_path / f"odd-{n}.json", doc))
        assert r.rows_read == len(messages) == 3 * len(paths) > 150, (value, r)
        assert r.rows_read == (
            r.rows_loaded + r.rows_rejected + r.rows_duplicate + r.rows_skipped
        ), (value, r)


def test_the_real_mini_swe_agent_trajectories_match_the_truth(store: Store, tmp_path: Path) -> None:
    """The 4 real trajectories (../shared/samples/real-world): calls and tokens exactly as
    counted from the files, and the reported dollars equal to their own instance_cost."""
    real_world = shared_samples() / "real-world"
    folder = real_world / "conversation_json" / "SWE-agent__mini-swe-agent__pr816"
    truth = json.loads((real_world / "truth.json").read_text())["files"]
    want = {
        Path(path).name: figures
        for path, figures in truth.items()
        if path.startswith("conversation_json/SWE-agent__mini-swe-agent__pr816/")
    }
    assert len(want) == 4
    reports = ingest(store, folder)
    assert len(reports) == 4
    for r in reports:
        assert r.rows_rejected == 0 and r.rows_read == r.rows_loaded, r
    got = rows(
        store,
        """SELECT s.path, count(*), sum(c.input_tokens), sum(c.output_tokens),
                  sum(c.cost_usd) FILTER (WHERE c.cost_basis = 'reported'),
                  count(c.ts), count(c.model), count(c.finish_reason_raw),
                  count(c.response_id), count(c.cost_estimate_usd)
           FROM sources s JOIN calls c USING (source_id) GROUP BY 1""",
    )
    assert len(got) == 4
    for path, calls, prompt, output, usd, *filled in got:
        figures = want[Path(path).name]
        assert (calls, prompt, output) == (
            figures["calls"],
            figures["prompt_tokens"],
            figures["output_tokens"],
        ), path
        assert abs(float(usd) - figures["reported_usd"]) < 0.005, path
        assert filled == [calls] * 5, path
        # instance_cost is the sum of extra.cost: the same to far better than a cent.
        stated = json.loads((folder / Path(path).name).read_text())["info"]["model_stats"]
        assert abs(float(usd) - stated["instance_cost"]) < 1e-9, path
        assert calls == stated["api_calls"], path
    # Every tool result is tied to a tool call of its session; only each run's last call
    # (the submission, answered by the `exit` message) has no result.
    assert rows(
        store,
        """SELECT count(*) FROM messages r WHERE r.kind = 'tool_result'
           AND (r.tool_result_hash IS NULL OR NOT EXISTS (
                SELECT 1 FROM messages c WHERE c.kind = 'tool_call'
                AND c.session_id = r.session_id AND c.tool_use_id = r.tool_use_id))""",
    ) == [(0,)]
    assert rows(
        store,
        """SELECT count(*) FROM messages c WHERE c.kind = 'tool_call' AND NOT EXISTS (
               SELECT 1 FROM messages r WHERE r.kind = 'tool_result'
               AND r.session_id = c.session_id AND r.tool_use_id = c.tool_use_id)""",
    ) == [(4,)]


def test_mini_swe_agent_2_format_errors_are_refusals_of_their_call(
    store: Store, tmp_path: Path
) -> None:
    """mini-swe-agent 2.x refuses a reply with no tool call by a user message whose
    extra.interrupt_type is FormatError: a format_error tied to the refused call, so 4 in a row
    are a format-error loop."""
    doc = mini_swe_agent_doc()
    first = doc["messages"][:4]  # system, task, a call, its result
    refused = []
    for n in range(10, 14):
        reply = _mini_assistant(
            n, "I will now", "ls", _deepseek_usage(100, 900, 50), 0.001, T_MINI + n
        )
        reply.pop("tool_calls")
        refused += [
            reply,
            {
                "role": "user",
                "content": "No tool calls found in the response.",
                "extra": {"interrupt_type": "FormatError"},
            },
        ]
    doc["messages"] = first + refused
    ingest(store, write(tmp_path / "fmt.traj.json", doc))
    got = rows(
        store,
        """SELECT c.seq FROM messages m JOIN calls c ON c.call_id = m.call_id
           WHERE m.kind = 'format_error' ORDER BY 1""",
    )
    assert got == [(2,), (3,), (4,), (5,)]
    from analyzer.detect.detectors import bind_all, detect, discover

    found = detect(store, bind_all([d for d in discover() if d.name == "format_error_loop"], {}))
    assert [(i.n_calls, i.wasted_usd) for i in found] == [(4, Decimal("0.003"))]
