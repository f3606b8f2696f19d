"""The conversation builder (``analyzer/ingest/conversation.py``): every format's messages are
numbered, measured and excerpted by it, so what it does is what every format stores."""

from __future__ import annotations

import pytest

from analyzer.ingest.content import EXCERPT_CHARS, args_hash
from analyzer.ingest.conversation import Conversation


def test_messages_are_numbered_in_the_order_they_are_built() -> None:
    talk = Conversation("s")
    talk.turn = "s:1"
    rows = [
        talk.prompt("do it", ts=None),
        talk.said("ok", ts=None, call_id="c:1"),
        talk.tool_call("bash", {"cmd": "ls"}, "t1", ts=None, call_id="c:1"),
        talk.tool_result("a b", False, ts=None, use_id="t1"),
    ]
    assert [r.idx for r in rows] == [1, 2, 3, 4]
    assert [(r.role, r.kind) for r in rows] == [
        ("user", "prompt"),
        ("assistant", "text"),
        ("assistant", "tool_call"),
        ("tool", "tool_result"),
    ]
    assert {r.session_id for r in rows} == {"s"} and {r.turn_id for r in rows} == {"s:1"}
    assert [r.n_records for r in rows] == [1, 0, 0, 0]  # a prompt is its record; others 0
    assert rows[2].tool_args_hash == args_hash('{"cmd": "ls"}')  # the same call, as text too


def test_a_place_the_log_gives_is_kept_and_nothing_is_counted() -> None:
    talk = Conversation("s")
    placed = talk.tool_call("x", None, None, ts=None, at=40)
    unplaced = talk.message("user", "prompt", ts=None, at=None)
    assert (placed.idx, unplaced.idx, talk.idx) == (40, None, 0)
    assert talk.said("next", ts=None, call_id=None).idx == 1
    with pytest.raises(TypeError):
        talk.message("user", "prompt", ts=None, at="7")


def test_a_result_is_hashed_on_its_content_and_measured_on_what_was_shown() -> None:
    talk = Conversation("s")
    content = {"output": "x" * 500}
    row = talk.tool_result(content, None, ts=None, text="  shown text ", shown="err: shown")
    assert (row.text_chars, row.visible_chars, row.excerpt) == (13, 9, "err: shown")
    plain = talk.tool_result(content, None, ts=None)
    assert plain.tool_result_hash == row.tool_result_hash  # the content decides the hash
    assert plain.text_chars == 0  # content that is no text measures 0


def test_an_error_said_in_the_output_is_an_error_whatever_the_flag() -> None:
    row = Conversation("s").tool_result("bash: foo: command not found", False, ts=None)
    assert row.is_error is True


def test_text_known_later_fills_the_message_placed_earlier() -> None:
    talk = Conversation("s")
    row = talk.said(None, ts=None, call_id="c")
    talk.tool_call("x", {}, None, ts=None)
    Conversation.fill(row, "y" * (EXCERPT_CHARS + 5))
    assert (row.idx, row.text_chars, len(row.excerpt or "")) == (1, EXCERPT_CHARS + 5, 200)


def test_a_refusal_is_an_error_tied_to_the_refused_call() -> None:
    row = Conversation("s").refusal("no tool call found", ts=None, call_id="c:9")
    assert (row.kind, row.role, row.is_error, row.call_id, row.n_records) == (
        "format_error",
        "user",
        True,
        "c:9",
        1,
    )
