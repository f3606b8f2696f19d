"""The shared classification rules (analyzer/sql/classify.sql), table-driven."""

from __future__ import annotations

import pytest

from analyzer.engine.store import Store


@pytest.mark.parametrize(
    ("raw", "cancelled", "expected"),
    [
        ("stop", False, "stop"),
        (" END_TURN ", False, "stop"),
        ("stop_sequence", None, "stop"),
        ("STOP", None, "stop"),  # Gemini spelling
        ("length", False, "length"),
        ("max_tokens", False, "length"),
        ("MAX_TOKENS", False, "length"),
        ("max_output_tokens", False, "length"),
        ("model_context_window_exceeded", False, "length"),
        ("tool_calls", False, "tool_calls"),
        ("tool_use", False, "tool_calls"),
        ("function_call", False, "tool_calls"),
        ("content_filter", False, "content_filter"),
        ("SAFETY", False, "content_filter"),
        ("refusal", False, "content_filter"),
        ("error", False, "error"),
        ("cancelled", False, "cancelled"),
        ("aborted", False, "cancelled"),
        (None, True, "cancelled"),  # a cancelled stream has no finish reason
        ("", True, "cancelled"),
        ("stop", True, "stop"),  # a reason given wins over the flag
        (None, False, "unknown"),  # Claude Code's stop_reason null
        (None, None, "unknown"),
        ("pause_turn", False, "unknown"),
    ],
)
def test_finish_reason(
    store: Store, raw: str | None, cancelled: bool | None, expected: str
) -> None:
    got = store.scalar("SELECT lf_finish_reason(?::VARCHAR, ?::BOOLEAN)", [raw, cancelled])
    assert got == expected


# finish, http, output_tokens, reasoning_tokens, content_chars, visible_chars,
# reasoning_chars, tool_call_count -> kind
KIND_CASES = [
    # rule 1: errors
    (("unknown", 400, None, None, 0, 0, 0, 0), "error"),
    (("error", None, 0, None, None, None, None, None), "error"),
    (("stop", 200, 10, 0, 5, 5, 0, 0), "text"),
    # rule 2: a tool call cut off by the token limit
    (("length", 200, 8192, 0, 0, 0, 0, 1), "truncated_tool_call"),
    # rule 3: tool calls
    (("tool_calls", None, 40, None, None, None, None, None), "tool_call"),
    (("stop", 200, 40, 0, 0, 0, 0, 2), "tool_call"),
    # rules 4-7: content known (agent logs)
    (("stop", 200, 3, 0, 7, 7, 0, 0), "text"),
    (("length", 200, 8192, 0, 30000, 30000, 0, 0), "text"),  # a long answer, cut: still text
    (("stop", 200, 3, 0, 3, 0, 0, 0), "whitespace"),
    (("stop", 200, 900, 900, 0, 0, 4000, 0), "thinking_only"),
    (("stop", 200, 900, 900, 0, 0, 0, 0), "thinking_only"),  # reasoning known by tokens only
    (("unknown", 200, None, None, 0, 0, 0, 0), "empty"),
    (("unknown", 200, 0, 0, 0, None, None, None), "empty"),
    # rules 8-10: tokens only (billing rows)
    (("stop", None, 0, 0, None, None, None, None), "empty"),
    (("stop", None, 500, 500, None, None, None, None), "thinking_only"),
    (("stop", None, 500, 499, None, None, None, None), "text"),
    (("length", None, 8192, 0, None, None, None, None), "text"),  # unknowable: not a guess
    (("stop", None, 3, None, None, None, None, None), "text"),
    # rule 11: nothing known about the reply
    (("stop", None, None, None, None, None, None, None), None),
    (("unknown", None, None, None, None, None, None, None), None),
]


@pytest.mark.parametrize(("args", "expected"), KIND_CASES)
def test_response_kind(store: Store, args: tuple[object, ...], expected: str | None) -> None:
    got = store.scalar(
        """SELECT lf_response_kind(?::VARCHAR, ?::INTEGER, ?::BIGINT, ?::BIGINT, ?::BIGINT,
                                   ?::BIGINT, ?::BIGINT, ?::BIGINT)""",
        list(args),
    )
    assert got == expected
