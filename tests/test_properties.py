"""Property tests: damaged copies of valid inputs never crash the ingest, and every record is
accounted for.

Each example starts from a valid file (an OpenRouter export, a Claude Code transcript, a
NEXUS3 raw log, a Codex rollout, a saved conversation), applies 1-4 random mutations at the
byte level (flipped, replaced, deleted or inserted bytes - invalid UTF-8 and NUL included -,
truncation, repeated or swapped lines, a header copied into the middle, a number replaced by
``n/a``/``-5``/``NaN``/``1e30``/nothing, CRLF line endings, a value of another JSON type,
re-encoding, gzip) and loads
the result into a fresh store. The allowed outcomes:

* ``loaded``, with ``rows_read = rows_loaded + rows_rejected + rows_duplicate + rows_skipped``,
  the store holding exactly what the report says (see ``_check_loaded``), and every reject
  carrying a reason and a line number within the file;
* ``unrecognised`` or ``unchanged``, with nothing stored;
* a :class:`ForensicsError` whose message is one line naming the file, with nothing stored.

Anything else - another exception type, a message over several lines, a broken count - fails.
The runs are deterministic (``derandomize``, no example database) and bounded in size. The
damaged inputs the properties found mishandled are kept, cut down, as plain cases at the end.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import os
import re
import tempfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, Phase, currently_in_test_context, event, given, note, settings
from hypothesis import strategies as st

from analyzer.engine.store import Store, open_store
from analyzer.errors import ForensicsError, LoaderBug
from analyzer.ingest.base import IngestOptions
from analyzer.load.flow import FileReport, ingest_file
from analyzer.pipeline import ingest_paths
from tests.helpers import HEADER, SAMPLE_DATA, csv_text, or_row

# the property search over damaged inputs: CI runs it; the default run has the broken-input corpus
# (test_corpus) and each format's damaged-file tests
pytestmark = pytest.mark.slow

# --- Valid inputs to start from -------------------------------------------------------------

CSV_NAME = "openrouter_activity.csv"
CSV_SEEDS = [
    csv_text([or_row(i) for i in range(6)]).encode(),
    # Columns in another order, optional values blank, a negative cache cost (a discount).
    csv_text(
        [
            or_row(i, cost_cache="-0.0004", tokens_reasoning="", generation_time_ms="")
            for i in range(4)
        ],
        columns=list(reversed(HEADER)),
    ).encode(),
]

CC_DIR = SAMPLE_DATA / "claude-code" / "projects" / "-home-dev-koda"
CC_MAIN = CC_DIR / "5f0c2a9e-8d41-4b7a-9c3e-1a2b3c4d5e6f.jsonl"
CC_AGENT = CC_DIR / "5f0c2a9e-8d41-4b7a-9c3e-1a2b3c4d5e6f" / "subagents" / "agent-a842ebe.jsonl"
CC_SESSION = "9d2e41aa-0000-4000-8000-00000000cafe"


def _cc_line(n: int, kind: str, **extra: Any) -> dict[str, Any]:
    return {
        "parentUuid": None if n == 1 else f"u{n - 1}",
        "isSidechain": False,
        "sessionId": CC_SESSION,
        "type": kind,
        "uuid": f"u{n}",
        "timestamp": f"2025-12-18T14:03:{n:02d}.000Z",
        **extra,
    }


def _cc_assistant(n: int, block: dict[str, Any], out: int) -> dict[str, Any]:
    usage = {
        "input_tokens": 4,
        "cache_creation_input_tokens": 600,
        "cache_read_input_tokens": 18430,
        "output_tokens": out,
        "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 600},
    }
    message = {
        "model": "claude-sonnet-4-5-20250929",
        "id": "msg_01",
        "role": "assistant",
        "content": [block],
        "stop_reason": None,
        "usage": usage,
    }
    return _cc_line(n, "assistant", message=message, requestId="req_01")


# Hand-written: thinking, an API error, a compaction, a tool result with an error, a meta line.
CC_SMALL = b"".join(
    orjson.dumps(obj) + b"\n"
    for obj in [
        _cc_line(1, "user", message={"role": "user", "content": "fix the build"}),
        _cc_assistant(2, {"type": "thinking", "thinking": "Looking at it."}, 3),
        _cc_assistant(
            3, {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "make"}}, 40
        ),
        _cc_line(
            4,
            "user",
            message={
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t1",
                        "content": "error",
                        "is_error": True,
                    },
                ],
            },
        ),
        _cc_line(5, "system", subtype="compact_boundary", content="Conversation compacted"),
        _cc_line(6, "user", isMeta=True, message={"role": "user", "content": "<meta>"}),
        _cc_line(
            7,
            "assistant",
            isApiErrorMessage=True,
            requestId="",
            message={
                "model": "<synthetic>",
                "id": "msg_02",
                "role": "assistant",
                "content": [{"type": "text", "text": "API Error: 529 overloaded"}],
                "usage": {"input_tokens": 0, "output_tokens": 0},
            },
        ),
        {"type": "summary", "summary": "Build fix", "leafUuid": "u7"},
    ]
)
CC_SEEDS = {
    CC_MAIN.name: CC_MAIN.read_bytes(),
    CC_AGENT.name: CC_AGENT.read_bytes(),
    f"{CC_SESSION}.jsonl": CC_SMALL,
}

NEXUS3_LOG = SAMPLE_DATA / "nexus3" / "logs" / "2025-12-11_091502_a7c3" / "raw.jsonl"
NEXUS3_SEED = NEXUS3_LOG.read_bytes()
# A main session's folder, or a sub-agent's inside it.
NEXUS3_FOLDERS = ["2025-12-11_091502_a7c3", "2025-12-11_091502_a7c3/subagent_b1"]

CODEX_SID = "0199aaaa-bbbb-7ccc-8ddd-eeeeeeeeeeee"
CODEX_NAME = f"rollout-2025-10-01T10-00-00-{CODEX_SID}.jsonl"


def _cx(sec: int, kind: str, payload: object) -> dict[str, Any]:
    return {"timestamp": f"2025-10-01T10:00:{sec:02d}.000Z", "type": kind, "payload": payload}


def _cx_usage(inp: int, cached: int, out: int, reasoning: int) -> dict[str, int]:
    return {
        "input_tokens": inp,
        "cached_input_tokens": cached,
        "output_tokens": out,
        "reasoning_output_tokens": reasoning,
        "total_tokens": inp + out,
    }


def _cx_tokens(last: dict[str, int] | None, total: dict[str, int]) -> dict[str, Any]:
    info: dict[str, Any] = {"model_context_window": 272000, "total_token_usage": total}
    if last is not None:
        info["last_token_usage"] = last
    return {"type": "token_count", "info": info}


CODEX_SEED = b"".join(
    orjson.dumps(obj) + b"\n"
    for obj in [
        _cx(0, "session_meta", {"id": CODEX_SID, "cwd": "/w", "originator": "codex_cli_rs"}),
        _cx(1, "event_msg", {"type": "user_message", "message": "Fix the bug"}),
        _cx(2, "turn_context", {"cwd": "/w", "model": "gpt-5"}),
        _cx(
            3,
            "response_item",
            {"type": "reasoning", "summary": [{"type": "summary_text", "text": "Looking"}]},
        ),
        _cx(
            4,
            "response_item",
            {
                "type": "function_call",
                "name": "shell",
                "call_id": "c",
                "arguments": '{"command": ["ls"]}',
            },
        ),
        _cx(
            5,
            "event_msg",
            _cx_tokens(_cx_usage(1000, 800, 200, 150), _cx_usage(1000, 800, 200, 150)),
        ),
        _cx(
            6,
            "response_item",
            {
                "type": "function_call_output",
                "call_id": "c",
                "output": '{"output": "boom", "metadata": {"exit_code": 1}}',
            },
        ),
        _cx(7, "event_msg", _cx_tokens(None, _cx_usage(1000, 800, 200, 150))),
        _cx(8, "turn_context", {"cwd": "/w", "model": "gpt-5"}),
        _cx(9, "event_msg", _cx_tokens(None, _cx_usage(2200, 1800, 250, 150))),
        _cx(
            10,
            "response_item",
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Done."}],
            },
        ),
        _cx(11, "event_msg", {"type": "token_count", "info": None, "rate_limits": {}}),
    ]
)

# Saved conversations: a Penguin session (messages and request lifecycles), and a short
# Anthropic one with content blocks, as an OpenAI-style list.
PENGUIN_NAME = "session_2025-12-15_wallet.json"
PENGUIN_SEED = (SAMPLE_DATA / "penguin" / "conversations" / PENGUIN_NAME).read_bytes()
ANTHROPIC_SEED = orjson.dumps(
    [
        {"role": "user", "content": "Fix the test", "timestamp": "2025-12-01T10:00:00Z"},
        {
            "role": "assistant",
            "id": "msg_1",
            "model": "claude-sonnet-4-5",
            "timestamp": "2025-12-01T10:00:05Z",
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 900, "cache_read_input_tokens": 100, "output_tokens": 40},
            "content": [
                {"type": "thinking", "thinking": "Run it first."},
                {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"cmd": "pytest"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "t1",
                    "content": "1 failed",
                    "is_error": True,
                }
            ],
        },
        {
            "role": "assistant",
            "id": "msg_2",
            "content": [{"type": "text", "text": "Fixed."}],
            "usage": {"prompt_tokens": 1200, "completion_tokens": 5},
            "finish_reason": "stop",
        },
    ],
    option=orjson.OPT_INDENT_2,
)
CONVERSATION_SEEDS = {PENGUIN_NAME: PENGUIN_SEED, "conversation.json": ANTHROPIC_SEED}

# LiteLLM spend logs: the first rows of the table's CSV export (JSON columns as text), the
# /spend/logs API's JSON and its JSON Lines form (tests/fixtures/litellm).
_LITELLM = Path(__file__).parent / "fixtures" / "litellm"
LITELLM_SEEDS = {
    "LiteLLM_SpendLogs.csv": b"".join(
        (_LITELLM / "LiteLLM_SpendLogs.csv").read_bytes().splitlines(keepends=True)[:8]
    ),
    "spend_logs_api.json": (_LITELLM / "spend_logs_api.json").read_bytes(),
    "spend_logs.jsonl": b"".join(
        (_LITELLM / "spend_logs.jsonl").read_bytes().splitlines(keepends=True)[:3]
    ),
}

# Langfuse's observations export: the blob export's JSON Lines (its first lines), the UI's CSV
# and its JSON array (tests/fixtures/langfuse).
_LANGFUSE = Path(__file__).parent / "fixtures" / "langfuse"
LANGFUSE_SEEDS = {
    "observations.jsonl": b"".join(
        (_LANGFUSE / "observations_v2_2026-03-05T14-00-00.jsonl")
        .read_bytes()
        .splitlines(keepends=True)[:5]
    ),
    "observations.csv": b"".join(
        (_LANGFUSE / "observations_ui_export.csv").read_bytes().splitlines(keepends=True)[:6]
    ),
    "observations.json": (_LANGFUSE / "observations_ui_export.json").read_bytes(),
}

# Gemini CLI saved chats in their three layouts: one JSON object (2025, and 2026 with tool
# calls) and JSON Lines with a message written twice (tests/fixtures/gemini).
# Forked and sub-agent rollouts, whose copy of the parent's history is skipped.
CODEX_FORK_SEEDS = {
    p.name: p.read_bytes()
    for p in sorted((Path(__file__).parent / "fixtures" / "codex_forks").glob("*.jsonl"))
}
_GEMINI = Path(__file__).parent / "fixtures" / "gemini"
GEMINI_SEEDS = {p.name: p.read_bytes() for p in sorted(_GEMINI.glob("session-*.json*"))}

# OpenTelemetry spans (the otel format's GenAI and OpenInference spans): a real capture, and the
# hand-written agent traces (their first lines: nothing rejected unmutated).
_SPANS = Path(__file__).parent / "fixtures" / "otel_spans"
SPAN_SEEDS = {
    "openllmetry.jsonl": (_SPANS / "genai-interlingua-openllmetry.jsonl").read_bytes(),
    "genai-agent.jsonl": b"".join(
        (_SPANS / "genai-agent.jsonl").read_bytes().splitlines(keepends=True)[:8]
    ),
    "openinference-agent.jsonl": (_SPANS / "openinference-agent.jsonl").read_bytes(),
}


# Claude Code's stream-json: a run that works and ends, a run refused with a synthetic reply,
# and a run cut off before its result line.
def _cs(kind: str, **extra: Any) -> bytes:
    return orjson.dumps({"type": kind, **extra}) + b"\n"


def _cs_call(sid: str, mid: str, block: dict[str, Any], out: int) -> bytes:
    usage = {"input_tokens": 3, "cache_read_input_tokens": 900, "output_tokens": out}
    msg = {
        "id": mid,
        "model": "claude-sonnet-4-5",
        "role": "assistant",
        "content": [block],
        "stop_reason": None,
        "usage": usage,
    }
    return _cs("assistant", session_id=sid, parent_tool_use_id=None, message=msg)


CLAUDE_STREAM_SEED = b"".join(
    [
        _cs("system", subtype="init", session_id="r1", model="claude-sonnet-4-5", cwd="/w"),
        _cs_call(
            "r1",
            "m1",
            {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}},
            2,
        ),
        _cs(
            "user",
            session_id="r1",
            parent_tool_use_id=None,
            message={
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a.py"}],
            },
        ),
        _cs_call("r1", "m2", {"type": "text", "text": "Done."}, 4),
        _cs(
            "result",
            subtype="success",
            is_error=False,
            num_turns=2,
            session_id="r1",
            result="Done.",
            total_cost_usd=0.0123,
            duration_ms=900,
        ),
        _cs("system", subtype="init", session_id="r2", model="claude-sonnet-4-5", cwd="/w"),
        _cs(
            "assistant",
            session_id="r2",
            parent_tool_use_id=None,
            message={
                "id": "s1",
                "model": "<synthetic>",
                "role": "assistant",
                "content": [{"type": "text", "text": "Credit balance is too low"}],
            },
        ),
        _cs(
            "result",
            subtype="success",
            is_error=True,
            num_turns=1,
            session_id="r2",
            result="Credit balance is too low",
            total_cost_usd=0,
        ),
        _cs("system", subtype="init", session_id="r3", model="claude-sonnet-4-5", cwd="/w"),
        _cs_call("r3", "m3", {"type": "text", "text": "Looking."}, 1),
    ]
)

# A mini-swe-agent 1.x trajectory: an observation, a refused reply, a failed command, the end.
MINI_SEED = orjson.dumps(
    {
        "info": {
            "exit_status": "LimitsExceeded",
            "submission": "",
            "model_stats": {"instance_cost": 0.05, "api_calls": 3},
            "mini_version": "1.17.3",
            "config": {
                "agent": {"step_limit": 3, "cost_limit": 1.0},
                "model": {"model_name": "gpt-5-mini"},
            },
        },
        "messages": [
            {"role": "system", "content": "Answer with one bash block."},
            {"role": "user", "content": "Fix the bug."},
            {
                "role": "assistant",
                "content": "```bash\nls\n```",
                "extra": {
                    "response": {
                        "id": "r1",
                        "model": "gpt-5-mini",
                        "created": 1767698210,
                        "usage": {"prompt_tokens": 900, "completion_tokens": 40},
                    }
                },
            },
            {"role": "user", "content": "<returncode>0</returncode>\n<output>\na.py\n</output>"},
            {"role": "assistant", "content": "```bash\nls\n```\n```bash\npwd\n```"},
            {
                "role": "user",
                "content": "Please always provide EXACTLY ONE action in triple "
                "backticks, found 2 actions.",
            },
            {"role": "assistant", "content": "```bash\npython a.py\n```"},
            {"role": "user", "content": "<returncode>1</returncode>\n<output>\nboom\n</output>"},
            {"role": "user", "content": ""},
        ],
        "trajectory_format": "mini-swe-agent-1",
        "instance_id": "x__y-1",
    },
    option=orjson.OPT_INDENT_2,
)

# A Claude Code session converted to {"messages", "meta"} (meta.source "claude-jsonl-merged"):
# a prompt, a reply's tool call and its result, a sub-agent's messages, a repeated entry.
_CM_USAGE = {"input_tokens": 3, "cached_input_tokens": 900, "output_tokens": 40}
CLAUDE_MERGED_SEED = orjson.dumps(
    {
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": "Fix the bug."}],
                "_metadata": {"timestamp": "2026-04-09T10:00:00Z"},
            },
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_call",
                        "tool_call_id": "toolu_01",
                        "name": "Bash",
                        "arguments": '{"command": "ls"}',
                    }
                ],
                "_metadata": {"timestamp": "2026-04-09T10:00:02Z"},
            },
            {
                "role": "tool",
                "tool_call_id": "toolu_01",
                "content": [{"type": "tool_output", "text": "a.py"}],
                "_metadata": {"timestamp": "2026-04-09T10:00:03Z"},
            },
            {
                "role": "assistant-subagent-a1",
                "content": [{"type": "text", "text": "Looking."}],
                "_metadata": {"timestamp": "2026-04-09T10:00:04Z", "original_role": "assistant"},
            },
            {
                "role": "assistant",
                "content": [{"type": "text", "text": "Done."}],
                "_metadata": {"timestamp": "2026-04-09T10:00:06Z"},
            },
        ],
        "meta": {
            "session_id": "s-1",
            "session_meta": {"session_id": "s-1", "version": "2.1.97"},
            "turn_contexts": [{"model": "claude-sonnet-4-6"}],
            "source": "claude-jsonl-merged",
            "token_counts": [
                {
                    "type": "token_count",
                    "info": {"total_token_usage": u, "last_token_usage": u},
                    "_timestamp": ts,
                }
                for u, ts in (
                    (_CM_USAGE, "2026-04-09T10:00:01Z"),
                    (_CM_USAGE, "2026-04-09T10:00:02Z"),
                    ({**_CM_USAGE, "cached_input_tokens": 950}, "2026-04-09T10:00:06Z"),
                )
            ],
        },
    },
    option=orjson.OPT_INDENT_2,
)

# --- Mutations --------------------------------------------------------------------------------

# Bills per time bucket: Anthropic's Console exports and Admin API pages, OpenAI's API pages
# and dashboard exports (tests/fixtures/anthropic_usage, tests/fixtures/openai_usage).
_FIXTURES = Path(__file__).parent / "fixtures"
BUCKET_SEEDS = {
    p.name: p.read_bytes()
    for folder in ("anthropic_usage", "openai_usage")
    for p in sorted((_FIXTURES / folder).glob("*.*"))
}

SPECIAL_BYTES = [0xFF, 0xC3, 0x00, 0x80, 0xFE, 0x0A, 0x0D, 0x22, 0x2C, 0x3B, 0x09, 0x7B, 0x5C]
SPECIAL_INSERTS = [
    b"\xff",
    b"\xc3",
    b"\x00",
    b"\xef\xbb\xbf",
    b"\r",
    b"\n",
    b'"',
    b",",
    b"\xe2\x82",
    b"\x1f\x8b",
    b'"\n"',
    b"\n\n",
    b"\xed\xa0\x80",
]
CSV_NUMBER = re.compile(rb"(?<=[,;\t\n])-?\d+(?:\.\d+)?(?=[,;\t\r\n])")
JSON_NUMBER = re.compile(rb'(?<=":)\s*-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?')
CSV_BAD_NUMBERS = [
    b"n/a",
    b"-5",
    b"NaN",
    b"1e30",
    b"",
    b"inf",
    b"-inf",
    b"1.5",
    b" 7 ",
    b"0x10",
    b"-0",
    b"99999999999999999999",
    b'"1,5"',
    b"1e-400",
]
JSON_BAD_NUMBERS = [
    b'"n/a"',
    b"n/a",
    b"-5",
    b"NaN",
    b"1e30",
    b"-1e30",
    b"",
    b"1.5",
    b"null",
    b"true",
    b'"12"',
    b"[]",
    b"{}",
    b"18446744073709551615",
    b"9223372036854775808",
    b"99999999999999999999999",
    b"1e400",
    b"-0",
]
# What a value anywhere in a JSON line may be replaced with (a value of another type).
JSON_VALUES: list[object] = [
    None,
    True,
    0,
    -5,
    1.5,
    1e30,
    2**63,
    "",
    "x",
    "n/a",
    [],
    {},
    [1],
    {"a": 1},
]
ENCODINGS = ["utf-16", "utf-16-le", "utf-16-be", "cp1252", "utf-8-sig"]

Draw = Callable[[st.SearchStrategy[Any]], Any]


def _pos(draw: Draw, raw: bytes, end: bool = False) -> int:
    return draw(st.integers(0, len(raw) if end else max(len(raw) - 1, 0)))


def m_flip(draw: Draw, raw: bytes) -> bytes:
    if not raw:
        return raw
    i = _pos(draw, raw)
    return raw[:i] + bytes([raw[i] ^ draw(st.integers(1, 255))]) + raw[i + 1 :]


def m_replace(draw: Draw, raw: bytes) -> bytes:
    if not raw:
        return raw
    i = _pos(draw, raw)
    new = draw(st.sampled_from(SPECIAL_BYTES) | st.integers(0, 255))
    return raw[:i] + bytes([new]) + raw[i + 1 :]


def m_delete(draw: Draw, raw: bytes) -> bytes:
    i = _pos(draw, raw)
    return raw[:i] + raw[i + draw(st.integers(1, 64)) :]


def m_insert(draw: Draw, raw: bytes) -> bytes:
    i = _pos(draw, raw, end=True)
    new = draw(st.sampled_from(SPECIAL_INSERTS) | st.binary(min_size=1, max_size=16))
    return raw[:i] + new + raw[i:]


def m_truncate(draw: Draw, raw: bytes) -> bytes:
    return raw[: _pos(draw, raw, end=True)]


def m_duplicate_line(draw: Draw, raw: bytes) -> bytes:
    lines = raw.split(b"\n")
    i = draw(st.integers(0, len(lines) - 1))
    lines.insert(i, lines[i])
    return b"\n".join(lines)


def m_swap_lines(draw: Draw, raw: bytes) -> bytes:
    lines = raw.split(b"\n")
    i, j = draw(st.integers(0, len(lines) - 1)), draw(st.integers(0, len(lines) - 1))
    lines[i], lines[j] = lines[j], lines[i]
    return b"\n".join(lines)


def m_first_line_again(draw: Draw, raw: bytes) -> bytes:
    """The first line (a CSV's header) copied into the middle of the file."""
    lines = raw.split(b"\n")
    lines.insert(draw(st.integers(1, len(lines))), lines[0])
    return b"\n".join(lines)


def m_crlf(draw: Draw, raw: bytes) -> bytes:
    """CRLF line endings: throughout, or on one line only (a file edited in two editors)."""
    if draw(st.booleans(), label="CRLF on every line"):
        return re.sub(rb"\r?\n", b"\r\n", raw)
    lines = raw.split(b"\n")
    i = draw(st.integers(0, max(len(lines) - 2, 0)))
    lines[i] = lines[i].removesuffix(b"\r") + b"\r"
    return b"\n".join(lines)


def _replace_match(
    draw: Draw, raw: bytes, pattern: re.Pattern[bytes], values: list[bytes]
) -> bytes:
    matches = list(pattern.finditer(raw))
    if not matches:
        return raw
    m = matches[draw(st.integers(0, len(matches) - 1))]
    return raw[: m.start()] + draw(st.sampled_from(values)) + raw[m.end() :]


def m_unclosed_quote(draw: Draw, raw: bytes) -> bytes:
    """A quote at the start of a field of a line (not the first), closed by nothing or only by
    a later value's quote."""
    lines = raw.split(b"\n")
    i = draw(st.integers(min(1, len(lines) - 1), len(lines) - 1))
    starts = [0, *(m.end() for m in re.finditer(rb"[,;\t]", lines[i]))]
    j = draw(st.sampled_from(starts))
    lines[i] = lines[i][:j] + b'"' + lines[i][j:]
    return b"\n".join(lines)


def m_csv_number(draw: Draw, raw: bytes) -> bytes:
    return _replace_match(draw, raw, CSV_NUMBER, CSV_BAD_NUMBERS)


def m_json_number(draw: Draw, raw: bytes) -> bytes:
    return _replace_match(draw, raw, JSON_NUMBER, JSON_BAD_NUMBERS)


def _json_paths(obj: object, path: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    out = [path]
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _json_paths(v, (*path, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += _json_paths(v, (*path, i))
    return out


def _retype(draw: Draw, obj: object) -> object:
    """``obj`` with one value anywhere in it (itself included) replaced by a value of another
    type: a number where an object was, an object where a string was, ..."""
    paths = _json_paths(obj)
    path = paths[draw(st.integers(0, len(paths) - 1))]
    value = draw(st.sampled_from(JSON_VALUES))
    if not path:
        return value
    parent = obj
    for key in path[:-1]:
        parent = parent[key]  # type: ignore[index]
    parent[path[-1]] = value  # type: ignore[index]
    return obj


def m_json_retype(draw: Draw, raw: bytes) -> bytes:
    """One value anywhere in one JSON line retyped (``_retype``)."""
    lines = raw.split(b"\n")
    i = draw(st.integers(0, len(lines) - 1))
    try:
        obj = orjson.loads(lines[i])
    except orjson.JSONDecodeError:
        return raw
    lines[i] = orjson.dumps(_retype(draw, obj))
    return b"\n".join(lines)


def m_json_doc_retype(draw: Draw, raw: bytes) -> bytes:
    """One value anywhere in a whole JSON document retyped (written back indented or not)."""
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return raw
    obj = _retype(draw, obj)
    indent = draw(st.booleans(), label="indented")
    return orjson.dumps(obj, option=orjson.OPT_INDENT_2 if indent else 0)


def m_reencode(draw: Draw, raw: bytes) -> bytes:
    encoding = draw(st.sampled_from(ENCODINGS))
    return raw.decode("utf-8", "replace").encode(encoding, "replace")


def m_gzip(draw: Draw, raw: bytes) -> bytes:
    return gzip.compress(raw, mtime=0)


BYTE_MUTATIONS = [
    m_flip,
    m_replace,
    m_delete,
    m_insert,
    m_truncate,
    m_duplicate_line,
    m_swap_lines,
    m_first_line_again,
    m_crlf,
    m_reencode,
    m_gzip,
]
CSV_MUTATIONS = [*BYTE_MUTATIONS, m_csv_number, m_csv_number, m_unclosed_quote]
JSONL_MUTATIONS = [*BYTE_MUTATIONS, m_json_number, m_json_retype, m_json_retype]
JSON_DOC_MUTATIONS = [*BYTE_MUTATIONS, m_json_number, m_json_doc_retype, m_json_doc_retype]


def mutate(
    data: st.DataObject, raw: bytes, mutations: list[Callable[[Draw, bytes], bytes]]
) -> bytes:
    for _ in range(data.draw(st.integers(1, 4), label="how many mutations")):
        mutation = data.draw(st.sampled_from(mutations), label="mutation")
        raw = mutation(data.draw, raw)
    note(f"mutated input ({len(raw)} bytes): {raw!r}")
    return raw


# --- Running one example and judging the outcome --------------------------------------------


def _plain(raw: bytes) -> bytes | None:
    """The file's content as the loaders see it (decompressed), or None if it is not readable."""
    if raw.startswith(b"\x1f\x8b"):
        try:
            return gzip.decompress(raw)
        except (OSError, EOFError, zlib.error):
            return None
    return raw


def _rows(store: Store, sql: str, params: list[object] | None = None) -> list[tuple]:
    return store.con.execute(sql, params or []).fetchall()


def _count(store: Store, sql: str, params: list[object] | None = None) -> int:
    return int(_rows(store, sql, params)[0][0] or 0)


def _assert_store_empty(store: Store) -> None:
    """Nothing of a file that did not load is left behind (one transaction per file)."""
    for table in ("sources", "calls", "messages", "runs", "rejects", "bill_buckets"):
        assert _count(store, f"SELECT count(*) FROM {table}") == 0, f"{table} is not empty"


# The formats that number a JSON document's records (the first record 1) rather than its lines.
NUMBERED_FORMATS = {
    "litellm_spend",
    "gemini_cli",
    "opencode",
    "cline",
    "cline_task",
    "aider",
    "anthropic_usage",
    "openai_usage",
    "mini_swe_agent",
    "swe_agent",
    "openhands",
    "claude_merged",
    "langfuse",
}


def _check_loaded(store: Store, r: FileReport, raw: bytes) -> None:
    sid = r.source_id
    assert sid is not None
    assert min(r.rows_read, r.rows_loaded, r.rows_rejected, r.rows_duplicate, r.rows_skipped) >= 0
    assert r.rows_read == r.rows_loaded + r.rows_rejected + r.rows_duplicate + r.rows_skipped, r

    # The store's own record of the file says the same.
    [stored] = _rows(
        store,
        "SELECT rows_read, rows_loaded, rows_rejected, rows_duplicate, rows_skipped "
        "FROM sources WHERE source_id = ?",
        [sid],
    )
    assert stored == (r.rows_read, r.rows_loaded, r.rows_rejected, r.rows_duplicate, r.rows_skipped)
    # A fresh store: everything in it came from this file.
    for table in ("calls", "messages", "rejects"):
        assert _count(store, f"SELECT count(*) FROM {table} WHERE source_id <> ?", [sid]) == 0

    # One reject row per rejected record, each with a reason and a line within the file.
    rejects = _rows(store, "SELECT line, reason FROM rejects WHERE source_id = ?", [sid])
    assert len(rejects) == r.rows_rejected, (rejects, r)
    plain = _plain(raw)
    # Records can end at LF or, in a CSV, at a lone CR: the file has at most this many lines.
    max_line = None if plain is None else plain.count(b"\n") + plain.count(b"\r") + 1
    if r.format == "conversation_json":
        max_line = r.rows_read  # a saved conversation's records are numbered, not its lines
    if r.format in NUMBERED_FORMATS and max_line is not None:
        max_line = max(max_line, r.rows_read)  # a JSON document's rows are numbered
    for line, reason in rejects:
        assert reason is not None and reason.strip(), (line, reason)
        assert line is not None and line >= 1, (line, reason)
        if max_line is not None:
            assert line <= max_line, (line, reason, max_line)
    # (an OTLP envelope line holds many records, each counted: otel's lines stay lines)
    if max_line is not None and r.format != "otel":
        assert r.rows_read <= max_line, (r, max_line)

    # What "loaded" counts, per format (a fresh store holds no earlier copy, so for the log
    # formats nothing is a duplicate and every loaded record is in this file's rows):
    calls = _count(store, "SELECT count(*) FROM calls WHERE source_id = ?", [sid])
    # A call is stored once, whatever the file repeats.
    assert calls == _count(
        store, "SELECT count(DISTINCT call_id) FROM calls WHERE source_id = ?", [sid]
    )
    records = _count(store, "SELECT sum(record_count) FROM calls WHERE source_id = ?", [sid])
    messages = _count(store, "SELECT count(*) FROM messages WHERE source_id = ?", [sid])
    if r.format in ("openrouter_csv", "litellm_spend"):
        # One call per loaded row.
        assert calls == r.rows_loaded, (calls, r)
    elif r.format == "nexus3_raw":
        # A call is its request line and the lines after it (its record_count); the messages
        # a request carries are part of the request line and count for nothing themselves.
        assert r.rows_duplicate == 0, r
        assert records == r.rows_loaded, (records, r)
    elif r.format == "codex":
        # Every loaded line is one call (a token_count event) or one message.
        assert r.rows_duplicate == 0, r
        assert calls + messages == r.rows_loaded, (calls, messages, r)
    elif r.format == "claude_code":
        # Assistant lines are the records of their call (record_count; their text and tool
        # messages count for nothing). A compaction line is one message. A user line becomes
        # one or more messages (its texts and tool results), which the store does not tie to
        # their line: its loaded user lines number at least the distinct (session, time, turn)
        # of the user messages and at most the user messages.
        assert r.rows_duplicate == 0, r
        compactions = _count(
            store,
            "SELECT count(*) FROM messages WHERE source_id = ? AND kind = 'compaction'",
            [sid],
        )
        user_msgs, user_lines_min = _rows(
            store,
            "SELECT count(*), count(DISTINCT (session_id, ts, turn_id)) FROM messages "
            "WHERE source_id = ? AND role = 'user'",
            [sid],
        )[0]
        fixed = records + compactions
        assert fixed + user_lines_min <= r.rows_loaded <= fixed + user_msgs, (
            records,
            compactions,
            user_lines_min,
            user_msgs,
            r,
        )
    elif r.format == "gemini_cli":
        # A message's copies (the same id written again) are the records of its call
        # (record_count; its text, tool and result messages count for nothing) or of its one
        # user message; everything else is skipped, or a duplicate.
        user_msgs = _count(
            store, "SELECT count(*) FROM messages WHERE source_id = ? AND role = 'user'", [sid]
        )
        assert calls <= records and records + user_msgs <= r.rows_loaded, (records, user_msgs, r)
    elif r.format == "cline":
        # Every message is one record: an assistant message is its call (record_count 1; its
        # text and tool-call messages count for nothing); a user message is its prompt and/or
        # tool results (the first of them carries the record), or is skipped when empty. (Not
        # rows_duplicate == 0: a retyped id can make two messages share one id.)
        side = _count(
            store,
            "SELECT count(*) FROM messages WHERE source_id = ? AND role IN ('user', 'tool')",
            [sid],
        )
        assert records == calls, (records, calls, r)
        assert calls <= r.rows_loaded <= calls + side, (calls, side, r)
    elif r.format == "cline_task":
        # Every loaded message is one message row, or one of its call's records (its
        # api_req_started, plus the reasoning and api_req_failed folded into it).
        assert records + messages == r.rows_loaded, (records, messages, r)
    elif r.format == "opencode":
        # One file, one record: a message file is one call or one user prompt; a tool part's
        # record is its tool call (its result counts for nothing); the rest is skipped.
        assert r.rows_read == 1 and r.rows_duplicate == 0, r
        firsts = _count(
            store,
            "SELECT count(*) FROM messages WHERE source_id = ? AND kind IN ('prompt', 'tool_call')",
            [sid],
        )
        assert calls <= 1 and r.rows_loaded == calls + firsts, (calls, firsts, r)
    elif r.format == "aider":
        # One call per loaded line (a message_send event); every other event is skipped.
        assert r.rows_duplicate == 0 and messages == 0, (messages, r)
        assert calls == records == r.rows_loaded, (calls, records, r)
    elif r.format == "mini_swe_agent":
        # A reply is its call (record_count 1; its text and action count for nothing); every
        # other message is one message row (the system prompt, the task, an observation, a
        # refusal, the run's ending); ``info`` is the run.
        said = _count(
            store,
            "SELECT count(*) FROM messages WHERE source_id = ? AND role IN ('user', 'system')",
            [sid],
        )
        runs = _count(store, "SELECT count(*) FROM runs WHERE source_id = ?", [sid])
        assert r.rows_duplicate == 0 and runs == 1, (runs, r)
        assert records + said + runs == r.rows_loaded, (records, said, r)
    elif r.format == "claude_merged":
        # An entry that starts a call is its record (record_count 1; a repeat is skipped); a
        # loaded message is its first message row (its other blocks count for nothing).
        assert r.rows_duplicate == 0 and records == calls, (records, calls, r)
        assert calls <= r.rows_loaded <= calls + messages, (calls, messages, r)
    elif r.format == "openhands":
        # An instance line (or a conversation's state) is the record of its run; its calls and
        # messages count for nothing (an event file is one record more).
        runs = _count(store, "SELECT count(*) FROM runs WHERE source_id = ?", [sid])
        assert runs <= r.rows_loaded, (runs, r)
    elif r.format == "claude_stream_json":
        # As a transcript, and each synthetic reply is one record; init and result lines are
        # their run's.
        synthetic = _count(
            store, "SELECT count(*) FROM messages WHERE source_id = ? AND kind = 'synthetic'", [sid]
        )
        assert records + synthetic <= r.rows_loaded, (records, synthetic, r)
    elif r.format == "langfuse":
        # A generation is its call (record_count 1; its prompt, reply and tool calls count for
        # nothing); a tool observation is its tool call (its result counts for nothing).
        assert records == calls and calls <= r.rows_loaded, (records, calls, r)
    elif r.format in ("anthropic_usage", "openai_usage"):
        # A bill per bucket makes no calls: each loaded record is one bill_buckets row.
        buckets = _count(store, "SELECT count(*) FROM bill_buckets WHERE source_id = ?", [sid])
        assert calls == 0 and messages == 0 and buckets == r.rows_loaded, (buckets, r)
    else:  # another format's sniffer took the damaged file: at least no more calls than rows
        assert calls <= r.rows_loaded, (calls, r)


def _note(message: str, event_name: str | None = None) -> None:
    """Hypothesis' note (and event), inside a property; nothing in a plain test."""
    if currently_in_test_context():
        note(message)
        if event_name:
            event(event_name)


def check_ingest(
    raw: bytes, folder: str, name: str, via_paths: bool, explicit: bool, options: IngestOptions
) -> None:
    """Load ``raw`` as ``folder/name`` into a fresh store and judge the outcome: through
    ``ingest_paths`` (which also links calls to bills) or ``ingest_file``; named explicitly or
    found in its folder."""
    with tempfile.TemporaryDirectory(prefix="lf-prop-") as tmp:
        path = Path(tmp) / folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(raw)
        with open_store(":memory:") as store:
            try:
                if via_paths:
                    reports = ingest_paths(store, [str(path if explicit else path.parent)], options)
                    assert len(reports) == 1, reports
                    report = reports[0]
                else:
                    report = ingest_file(store, path, name, explicit, options)
            except ForensicsError as exc:
                # A loader's own failure is reported cleanly to users, but here it is a bug.
                assert not isinstance(exc, LoaderBug), f"{exc!r} from {exc.__cause__!r}"
                message = str(exc)
                _note(f"ForensicsError: {message!r}", "raised ForensicsError")
                assert "\n" not in message and "\r" not in message, message
                assert name in message, message
                _assert_store_empty(store)
                return
            _note(f"report: {report}", f"status {report.status}")
            if report.status == "loaded":
                _check_loaded(store, report, raw)
            else:
                assert report.status in ("unrecognised", "unchanged"), report
                _assert_store_empty(store)


def check_drawn(data: st.DataObject, raw: bytes, folder: str, name: str) -> None:
    """``check_ingest`` with the way in and the options drawn."""
    check_ingest(
        raw,
        folder,
        name,
        via_paths=data.draw(st.booleans(), label="through ingest_paths (and correlate)"),
        explicit=data.draw(st.booleans(), label="named explicitly (not found in a folder)"),
        options=IngestOptions(
            tz=data.draw(st.sampled_from(["UTC", "America/New_York"]), label="tz"),
            # Rarely strict: a strict load of a damaged file mostly stops at its first reject.
            strict=data.draw(st.sampled_from([False, False, False, True]), label="strict"),
            progress=False,
        ),
    )


# --- The properties -----------------------------------------------------------------------------

# Deterministic and bounded. No shrinking: an example costs a store and a load (~0.3 s), and
# shrinking one failure took minutes; a failure is reported as found, each mutation drawn (and
# the resulting bytes) listed with it.
# A deeper search, by hand: ``LF_PROPERTY_EXAMPLES=1500 pytest tests/test_properties.py
# --hypothesis-seed=N`` (random draws from seed N, instead of the fixed ones CI runs).
SEARCH_EXAMPLES = os.environ.get("LF_PROPERTY_EXAMPLES")
PROPERTY_SETTINGS = settings(
    max_examples=int(SEARCH_EXAMPLES or 40),
    deadline=None,
    derandomize=SEARCH_EXAMPLES is None,
    database=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@PROPERTY_SETTINGS
@given(data=st.data())
def test_damaged_openrouter_csv(data: st.DataObject) -> None:
    seed = data.draw(st.sampled_from(range(len(CSV_SEEDS))), label="seed")
    check_drawn(data, mutate(data, CSV_SEEDS[seed], CSV_MUTATIONS), "exports", CSV_NAME)


@PROPERTY_SETTINGS
@given(data=st.data())
def test_damaged_claude_code_transcript(data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(sorted(CC_SEEDS)), label="seed")
    check_drawn(data, mutate(data, CC_SEEDS[name], JSONL_MUTATIONS), "-home-dev-koda", name)


@PROPERTY_SETTINGS
@given(data=st.data())
def test_damaged_nexus3_raw_log(data: st.DataObject) -> None:
    folder = data.draw(st.sampled_from(NEXUS3_FOLDERS), label="folder")
    check_drawn(data, mutate(data, NEXUS3_SEED, JSONL_MUTATIONS), folder, "raw.jsonl")


@PROPERTY_SETTINGS
@given(data=st.data())
def test_damaged_codex_rollout(data: st.DataObject) -> None:
    check_drawn(data, mutate(data, CODEX_SEED, JSONL_MUTATIONS), "sessions", CODEX_NAME)


@PROPERTY_SETTINGS
@given(data=st.data())
def test_damaged_codex_fork(data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(sorted(CODEX_FORK_SEEDS)), label="seed")
    check_drawn(data, mutate(data, CODEX_FORK_SEEDS[name], JSONL_MUTATIONS), "sessions", name)


@PROPERTY_SETTINGS
@given(data=st.data())
def test_damaged_saved_conversation(data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(sorted(CONVERSATION_SEEDS)), label="seed")
    raw = mutate(data, CONVERSATION_SEEDS[name], JSON_DOC_MUTATIONS)
    check_drawn(data, raw, "conversations", name)


@PROPERTY_SETTINGS
@given(data=st.data())
def test_damaged_litellm_spend_log(data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(sorted(LITELLM_SEEDS)), label="seed")
    mutations = {".csv": CSV_MUTATIONS, ".json": JSON_DOC_MUTATIONS, ".jsonl": JSONL_MUTATIONS}
    raw = mutate(data, LITELLM_SEEDS[name], mutations[Path(name).suffix])
    check_drawn(data, raw, "spend", name)


@PROPERTY_SETTINGS
@given(data=st.data())
def test_damaged_gemini_cli_log(data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(sorted(GEMINI_SEEDS)), label="seed")
    mutations = JSONL_MUTATIONS if name.endswith(".jsonl") else JSON_DOC_MUTATIONS
    check_drawn(data, mutate(data, GEMINI_SEEDS[name], mutations), "chats", name)


@PROPERTY_SETTINGS
@given(data=st.data())
def test_damaged_langfuse_export(data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(sorted(LANGFUSE_SEEDS)), label="seed")
    mutations = {".csv": CSV_MUTATIONS, ".json": JSON_DOC_MUTATIONS, ".jsonl": JSONL_MUTATIONS}
    raw = mutate(data, LANGFUSE_SEEDS[name], mutations[Path(name).suffix])
    check_drawn(data, raw, "exports", name)


@PROPERTY_SETTINGS
@given(data=st.data())
def test_damaged_otel_spans(data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(sorted(SPAN_SEEDS)), label="seed")
    check_drawn(data, mutate(data, SPAN_SEEDS[name], JSONL_MUTATIONS), "traces", name)


@PROPERTY_SETTINGS
@given(data=st.data())
def test_damaged_bucket_bill(data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(sorted(BUCKET_SEEDS)), label="seed")
    mutations = CSV_MUTATIONS if name.endswith(".csv") else JSON_DOC_MUTATIONS
    check_drawn(data, mutate(data, BUCKET_SEEDS[name], mutations), "bills", name)


CSV_SEEDS_ALL = {
    **{f"{k}-{CSV_NAME}": ("exports", CSV_NAME, raw) for k, raw in enumerate(CSV_SEEDS)},
    "LiteLLM_SpendLogs.csv": (
        "spend",
        "LiteLLM_SpendLogs.csv",
        LITELLM_SEEDS["LiteLLM_SpendLogs.csv"],
    ),
    **{name: ("bills", name, raw) for name, raw in BUCKET_SEEDS.items() if name.endswith(".csv")},
}


@PROPERTY_SETTINGS
@given(data=st.data())
def test_an_unclosed_quote_loses_no_record(data: st.DataObject) -> None:
    """A quote opened at the start of a field of one record of a CSV file (OpenRouter's, a
    LiteLLM spend log, the usage exports), closed by nothing or by a later value's quote: every
    line is still one record read (none is taken into the value), the others load as they did,
    and the one with the quote, if rejected, is rejected with its own line."""
    key = data.draw(st.sampled_from(sorted(CSV_SEEDS_ALL)), label="seed")
    folder, name, raw = CSV_SEEDS_ALL[key]
    lines = raw.split(b"\n")
    records = [n for n, line in enumerate(lines[1:], 2) if line.strip()]
    n = data.draw(st.sampled_from(records), label="line")
    starts = [0, *(m.end() for m in re.finditer(rb"[,;\t]", lines[n - 1]))]
    j = data.draw(st.sampled_from(starts), label="field start")
    lines[n - 1] = lines[n - 1][:j] + b'"' + lines[n - 1][j:]
    damaged = b"\n".join(lines)
    note(f"line {n}: {lines[n - 1]!r}")
    with tempfile.TemporaryDirectory(prefix="lf-prop-") as tmp, open_store(":memory:") as s:
        path = Path(tmp) / folder / name
        path.parent.mkdir(parents=True)
        path.write_bytes(damaged)
        r = ingest_file(s, path, name, True, IngestOptions(progress=False))
        assert r.status == "loaded", r
        _check_loaded(s, r, damaged)
        assert r.rows_read == len(records), r
        assert r.rows_loaded + r.rows_duplicate + r.rows_skipped >= len(records) - 1, r
        rejected = _rows(s, "SELECT line FROM rejects WHERE source_id = ?", [r.source_id])
        assert rejected in ([], [(n,)]), rejected


def test_the_seeds_load_cleanly() -> None:
    """Unmutated, every seed loads with nothing rejected (so the mutations are what fails)."""
    seeds = [("exports", CSV_NAME, s) for s in CSV_SEEDS]
    seeds += [("-home-dev-koda", name, s) for name, s in CC_SEEDS.items()]
    seeds += [(NEXUS3_FOLDERS[0], "raw.jsonl", NEXUS3_SEED), ("sessions", CODEX_NAME, CODEX_SEED)]
    seeds += [("conversations", name, s) for name, s in CONVERSATION_SEEDS.items()]
    seeds += [("spend", name, s) for name, s in LITELLM_SEEDS.items()]
    seeds += [("chats", name, s) for name, s in GEMINI_SEEDS.items()]
    seeds += [("traces", name, s) for name, s in SPAN_SEEDS.items()]
    seeds += [("bills", name, s) for name, s in BUCKET_SEEDS.items()]
    seeds += [("sessions", "bugfix-1.json", CLAUDE_MERGED_SEED)]
    for folder, name, raw in seeds:
        with tempfile.TemporaryDirectory(prefix="lf-prop-") as tmp, open_store(":memory:") as s:
            path = Path(tmp) / folder / name
            path.parent.mkdir(parents=True)
            path.write_bytes(raw)
            report = ingest_file(s, path, name, True, IngestOptions(progress=False))
            assert report.status == "loaded" and report.rows_loaded > 0, report
            assert report.rows_rejected == 0, report
            _check_loaded(s, report, raw)


# Damaged inputs the properties have found mishandled (each was a crash or a broken count before
# its fix), cut down to a few bytes, so they are checked on every run whatever the random
# search reaches.
CSV_HEAD = b"generation_id,created_at,tokens_prompt,tokens_completion,model_permaslug"
NEXUS3_REQUEST = b'{"type":"request","timestamp":1,"payload":{}}\n'
CODEX_META = b'{"type":"session_meta","payload":{"id":"s"}}\n'
FOUND = {
    # A header ending in CRLF, a record in LF: DuckDB's CSV reader fails outright.
    "csv-mixed-line-endings": (
        "exports",
        "a.csv",
        CSV_HEAD + b"\r\ng1,2025-12-13 06:00:00,1,2,m\n",
    ),
    # A record with two faults (too few fields and a byte that is not UTF-8, in a file that
    # is otherwise UTF-8): one reject, not two.
    "csv-two-faults-in-one-record": (
        "exports",
        "a.csv",
        CSV_HEAD + b"\ng1,2025-12-13 06:00:00,1\xf02,m\ng2,2025-12-13 06:00:00,1,2,m\xc3\xa9\n",
    ),
    # A "type" that is not a string: the sniffers look it up in a set.
    "jsonl-type-is-a-list": ("logs", "s.jsonl", b'{"type":[]}\n'),
    # A token count beyond 64 bits (1e30 is a whole number to as_int).
    "claude-code-tokens-1e30": (
        "-home-dev-koda",
        "s.jsonl",
        b'{"type":"assistant","sessionId":"s","message":{"id":"m","usage":{"output_tokens":1e30}}}\n',
    ),
    "nexus3-tokens-1e30": (
        "2025-12-11_091502_a7c3",
        "raw.jsonl",
        NEXUS3_REQUEST + b'{"type":"response","timestamp":2,"status":200,'
        b'"body":{"usage":{"prompt_tokens":1e30}}}\n',
    ),
    # A model (or tool name) that is not a string.
    "claude-code-model-is-a-number": (
        "-home-dev-koda",
        "s.jsonl",
        b'{"type":"assistant","sessionId":"s","message":{"id":"m","model":5}}\n',
    ),
    "nexus3-model-is-a-number": (
        "2025-12-11_091502_a7c3",
        "raw.jsonl",
        b'{"type":"request","timestamp":1,"payload":{"model":5}}\n',
    ),
    "codex-tool-name-is-a-number": (
        "sessions",
        "rollout.jsonl",
        CODEX_META + b'{"type":"response_item",'
        b'"payload":{"type":"function_call","name":5,"arguments":"{}"}}\n',
    ),
    # A list or object where a number sits (``x.get(...) or []`` iterates it, ``.get``s it).
    "nexus3-choices-is-a-number": (
        "2025-12-11_091502_a7c3",
        "raw.jsonl",
        NEXUS3_REQUEST + b'{"type":"stream_chunk","timestamp":2,"chunk":{"choices":5}}\n',
    ),
    "nexus3-usage-details-is-a-number": (
        "2025-12-11_091502_a7c3",
        "raw.jsonl",
        NEXUS3_REQUEST + b'{"type":"response","timestamp":2,"status":200,'
        b'"body":{"usage":{"prompt_tokens":1,"completion_tokens_details":5}}}\n',
    ),
    # Nested just under orjson's limit: str() of it recursed too deep for a reject's excerpt.
    "claude-code-nested-999-deep": (
        "-home-dev-koda",
        "s.jsonl",
        b'{"type":"assistant","sessionId":"s","message":' + b"[" * 999 + b"]" * 999 + b"}\n",
    ),
    # The same message saved twice: one call, the second copy a duplicate.
    "conversation-message-saved-twice": (
        "conversations",
        "c.json",
        b'[{"role":"assistant","id":"a1","content":"x"},{"role":"assistant","id":"a1","content":"x"}]',
    ),
    # A reply without its request id took another reply's lifecycle by time, and that reply
    # then took it again by id.
    "penguin-lifecycle-given-twice": (
        "conversations",
        "s.json",
        b'{"id":"s","messages":['
        b'{"role":"assistant","content":"a","timestamp":"2025-12-15T10:00:09"},'
        b'{"role":"assistant","content":"b","timestamp":"2025-12-15T10:00:20",'
        b'"metadata":{"request_id":"r1"}}],'
        b'"llm_request_lifecycles":[{"request_id":"r1","started_at":1765792800,'
        b'"ended_at":1765792805}]}',
    ),
    # A cost finer than the store's 10 decimal places: Arrow would not round it (a LoaderBug).
    "bucket-amount-1e-400": (
        "bills",
        "cost_export.csv",
        b"start_time,end_time,start_time_iso,end_time_iso,amount_value,amount_currency,"
        b"line_item,project_id,organization_id,organization_name\n"
        b"1759622400,1759708800,,,1e-400,usd,,,org-1,Personal\n",
    ),
    "codex-content-is-a-number": (
        "sessions",
        "rollout.jsonl",
        CODEX_META
        + b'{"type":"response_item","payload":{"type":"message","role":"assistant","content":5}}\n',
    ),
}


@pytest.mark.parametrize("case", list(FOUND))
def test_damaged_inputs_found_by_the_properties(case: str) -> None:
    folder, name, raw = FOUND[case]
    check_ingest(raw, folder, name, False, True, IngestOptions(progress=False))


@PROPERTY_SETTINGS
@given(data=st.data())
def test_damaged_claude_stream_json(data: st.DataObject) -> None:
    raw = mutate(data, CLAUDE_STREAM_SEED, JSONL_MUTATIONS)
    check_drawn(data, raw, "agent", "claude_output.jsonl")


@PROPERTY_SETTINGS
@given(data=st.data())
def test_damaged_mini_swe_agent_trajectory(data: st.DataObject) -> None:
    raw = mutate(data, MINI_SEED, JSON_DOC_MUTATIONS)
    check_drawn(data, raw, "x__y-1", "x__y-1.traj.json")


@PROPERTY_SETTINGS
@given(data=st.data())
def test_damaged_converted_claude_session(data: st.DataObject) -> None:
    raw = mutate(data, CLAUDE_MERGED_SEED, JSON_DOC_MUTATIONS)
    check_drawn(data, raw, "sessions", "bugfix-1.json")


def _helper_seeds() -> dict[str, tuple[str, bytes]]:
    """Seeds built by the formats' own tests: a SWE-agent 1.x trajectory, a Gemini CLI
    stream, an OpenHands evaluation line and conversation state (name -> (folder, bytes))."""
    from tests.test_gemini_stream import STREAM
    from tests.test_openhands import FINISHED
    from tests.test_swe_agent import v1_doc

    base, events = FINISHED
    line = {
        "instance_id": "shop__shop-1",
        "instruction": "Why do the tests fail?",
        "metadata": {"llm": {"model": "m"}, "max_iterations": 100},
        "history": events,
        "metrics": base["stats"]["usage_to_metrics"]["agent"],
        "error": "Agent got stuck in a loop",
    }
    return {
        "x__y-1.traj": ("trajectories", orjson.dumps(v1_doc(), option=orjson.OPT_INDENT_2)),
        "out.jsonl": ("gemini", "".join(x + "\n" for x in STREAM).encode()),
        "output.jsonl": ("eval", orjson.dumps(line) + b"\n"),
        "base_state.json": ("conversation", orjson.dumps(base, option=orjson.OPT_INDENT_2)),
    }


@PROPERTY_SETTINGS
@given(data=st.data())
def test_damaged_swe_agent_gemini_stream_and_openhands(data: st.DataObject) -> None:
    seeds = _helper_seeds()
    name = data.draw(st.sampled_from(sorted(seeds)), label="seed")
    folder, raw = seeds[name]
    lines = name.endswith(".jsonl")
    raw = mutate(data, raw, JSONL_MUTATIONS if lines else JSON_DOC_MUTATIONS)
    check_drawn(data, raw, folder, name)


def _aider_chat_seed() -> bytes:
    """An Aider chat history as ``tests/test_aider_chat.py`` builds them: a prompt, an edit
    applied, four replies refused for their edit format, the reflection limit."""
    from tests.test_aider_chat import HEADER, _refused, _reply

    lines = [
        *HEADER,
        "#### fix calc.py  ",
        *_reply(
            "calc.py\n```\nx = 2\n```",
            "2.8k sent, 345 received. Cost: $0.01 message, $0.01 session.",
            "Applied edit to calc.py",
            "Commit 1a2b3c4 fix",
        ),
        *_refused(4),
        "> Only 3 reflections allowed, stopping.  ",
    ]
    return ("\n".join(lines) + "\n").encode()


@PROPERTY_SETTINGS
@given(data=st.data())
def test_damaged_aider_chat_history(data: st.DataObject) -> None:
    raw = mutate(data, _aider_chat_seed(), BYTE_MUTATIONS)
    check_drawn(data, raw, "proj", ".aider.chat.history.md")


@functools.cache
def _shared_batch() -> dict[str, bytes]:
    """A batch of a shared history (``llm-forensics share``) of the sample's Claude Code and
    NEXUS3 logs: its files by name."""
    from click.testing import CliRunner

    from analyzer.cli.main import cli

    with tempfile.TemporaryDirectory(prefix="lf-prop-share-") as tmp:
        db, folder = Path(tmp) / "a.duckdb", Path(tmp) / "team"
        logs = [str(SAMPLE_DATA / "claude-code"), str(SAMPLE_DATA / "nexus3")]
        for args in (["ingest", "-q", "--db", str(db), *logs], ["share", "--db", str(db), "-q"]):
            args += [str(folder)] if args[0] == "share" else []
            done = CliRunner().invoke(cli, [*args, "--machine", "alpha"])
            assert done.exit_code == 0, done.output
        (batch,) = (folder / "alpha").iterdir()
        return {p.name: p.read_bytes() for p in batch.iterdir()}


def _otel_seeds() -> dict[str, bytes]:
    """OpenTelemetry exports: the Claude Code fixture (envelopes, metrics, a batch twice) and
    Codex's events as ClickHouse rows, as ``tests/test_otel.py`` builds them."""
    from tests.test_otel import SESSION_FILE, clickhouse_row

    rows = [
        clickhouse_row(
            "2025-10-07 09:00:04.000000000",
            "codex_cli_rs",
            {
                "conversation.id": "c-1",
                "event.name": "codex.sse_event",
                "event.kind": "response.completed",
                "input_token_count": "12000",
                "output_token_count": "300",
            },
        ),
        clickhouse_row(
            "2025-10-07 09:00:05.000000000",
            "codex_cli_rs",
            {
                "conversation.id": "c-1",
                "event.name": "codex.tool_result",
                "tool_name": "shell",
                "call_id": "call_1",
                "arguments": '{"command":["ls"]}',
                "success": "false",
                "output": "ls: cannot access",
            },
        ),
    ]
    return {
        "claude_code_session.jsonl": SESSION_FILE.read_bytes(),
        "codex_rows.jsonl": b"".join(orjson.dumps(r) + b"\n" for r in rows),
    }


@PROPERTY_SETTINGS
@given(data=st.data())
def test_damaged_shared_batch(data: st.DataObject) -> None:
    """A batch with its manifest or one of its Parquet files damaged (with the manifest's
    SHA-256 of it fixed to match, or not): it loads with its accounting closed and each call
    once, or fails in one line naming a file of the batch with nothing of it stored."""
    files = dict(_shared_batch())
    name = data.draw(st.sampled_from(sorted(files)), label="file")
    if name == "manifest.json":
        files[name] = mutate(data, files[name], JSON_DOC_MUTATIONS)
    else:
        files[name] = mutate(data, files[name], BYTE_MUTATIONS)
        if data.draw(st.booleans(), label="the manifest's digest made to match"):
            manifest = orjson.loads(files["manifest.json"])
            table = manifest["tables"][name.removesuffix(".parquet")]
            table["sha256"] = hashlib.sha256(files[name]).hexdigest()
            files["manifest.json"] = orjson.dumps(manifest, option=orjson.OPT_INDENT_2)
    with tempfile.TemporaryDirectory(prefix="lf-prop-") as tmp:
        batch = Path(tmp) / "team" / "alpha" / "20251218T000000Z-batch"
        batch.mkdir(parents=True)
        for file, raw in files.items():
            (batch / file).write_bytes(raw)
        path = batch / "manifest.json"
        with open_store(":memory:") as store:
            try:
                report = ingest_file(store, path, str(path), True, IngestOptions(progress=False))
            except ForensicsError as exc:
                assert not isinstance(exc, LoaderBug), f"{exc!r} from {exc.__cause__!r}"
                message = str(exc)
                _note(f"ForensicsError: {message!r}", "raised ForensicsError")
                assert "\n" not in message and str(batch) in message, message
                _assert_store_empty(store)
                return
            _note(f"report: {report}", f"status {report.status}")
            if report.status != "loaded":
                _assert_store_empty(store)
                return
            r = report
            assert (
                r.rows_read == r.rows_loaded + r.rows_rejected + r.rows_duplicate + r.rows_skipped
            )
            calls = _count(store, "SELECT count(*) FROM calls")
            assert calls == _count(store, "SELECT count(DISTINCT call_id) FROM calls")


@PROPERTY_SETTINGS
@given(data=st.data())
def test_damaged_opentelemetry_export(data: st.DataObject) -> None:
    seeds = _otel_seeds()
    name = data.draw(st.sampled_from(sorted(seeds)), label="seed")
    check_drawn(data, mutate(data, seeds[name], JSONL_MUTATIONS), "otel", name)
