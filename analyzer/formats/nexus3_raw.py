"""NEXUS3 raw API logs: ``.nexus3/logs/<session>/raw.jsonl`` (written with ``--raw-log``).

Lines are ``request``, ``response``, ``stream_chunk`` and ``stream_complete`` objects with a
Unix ``timestamp``. One call per ``request``; the lines after it,
up to the next request, are its outcome:

* ``stream_complete`` summarises a stream: ``http_status, event_count, content_length,
  tool_call_count, received_done, finish_reason, duration_ms`` - and no tokens. Tokens come from
  a ``usage`` object in a chunk or a response body, when the provider sent one.
* A ``response`` with an HTTP error status (the 400 that follows when an empty assistant message
  was saved) is a call with ``http_status`` set: kind ``error``.
* A 200 with zero events, no content, no tool calls and no ``[DONE]`` is kind ``empty``.

Each request carries the whole conversation: the messages new since the previous request are
stored (so an empty assistant message the client saved shows up, with the call it came from).
A tool message's ``tool_call_id`` ties it to the assistant's tool call, and its content is
hashed (the same call with the same result again is a loop; with a new result it is not).

**Identity.** The session is the log's folder: NEXUS3's own session id (the time it began, its
mode and six random hex digits: one per process); ``subagent_<x>`` folders are sub-agents of the
folder above. A call is ``<session>:<digest of its request line>`` (the request's time to the
microsecond and the whole payload it sent; ``#2``... for the same line written again), never its
line number: a ``raw.jsonl`` truncated and written again, rotated or replaced keeps its new
requests as new calls, and a growing log keeps the ids it gave. Messages are numbered by their
place in the conversation the requests carry, so a log continued in a new file (whose first
request carries the whole history again) adds only the new ones. (A different conversation
written over a session's log, which NEXUS3 does not do, has its calls stored, but its messages
at places the old log had are taken for the old ones.)
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from analyzer.ingest.base import Head, LoadContext, LoadResult
from analyzer.ingest.content import digest
from analyzer.ingest.conversation import Conversation
from analyzer.ingest.jsonl import head_objects, json_lines
from analyzer.ingest.lowering import Lowering, brief, text_measure
from analyzer.ingest.rows import CallRow
from analyzer.ingest.spec import FormatSpec
from analyzer.ingest.usage import token_counts
from analyzer.ingest.values import (
    as_dict,
    as_int,
    as_list,
    as_status,
    as_str,
    as_text,
    kind_of,
    parse_time,
)

APP = "nexus3"
_TYPES = {"request", "response", "stream_chunk", "stream_complete"}


def sniff(head: Head) -> bool:
    objs = head_objects(head)
    return bool(objs) and all(
        kind_of(o) in _TYPES and isinstance(o.get("timestamp"), int | float) for o in objs[:3]
    )


def _content_text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(as_text(p.get("text")) for p in content if isinstance(p, dict))
    return ""


def _usage_into(call: CallRow, usage: object) -> None:
    """The tokens a chunk's or a response's usage states (OpenAI's or Anthropic's shape)."""
    counts = token_counts(usage)
    call.update(counts)
    if "output_tokens" in counts:
        call.output_final = True


class _Reader:
    def __init__(self, ctx: LoadContext) -> None:
        self.ctx = ctx
        self.low = Lowering(ctx, SPEC.name, SPEC.call_prefix)
        folder = Path(ctx.source.path).resolve().parent
        self.agent: str | None = None
        self.parent: str | None = None
        session = folder.name
        if folder.name.startswith("subagent_"):
            self.agent = folder.name.removeprefix("subagent_")
            self.parent = folder.parent.name
            session = f"{self.parent}:{folder.name}"
        self.talk = Conversation(session)  # the session's messages
        self.call: CallRow | None = None
        self.seen_messages = 0
        self.text: list[str] = []
        self.prev_call_id: str | None = None
        self.seq = 0
        self.natives: dict[str, int] = {}  # call ids given, with how many times

    def native_id(self, request: dict[str, Any]) -> str:
        """A request's call id: its session and a digest of the request line (its time to the
        microsecond and the payload it sent), numbered among the file's equal lines - never
        its line number, which a log rewritten, rotated or replaced gives to another
        request."""
        key = f"{self.talk.session}:{digest(request, 16)}"
        n = self.natives[key] = self.natives.get(key, 0) + 1
        return key if n == 1 else f"{key}#{n}"

    def close_call(self) -> None:
        call = self.call
        if call is None:
            return
        if call.content_chars is None and self.text:
            text = "".join(self.text)
            call.content_chars, call.visible_chars = text_measure(text)
        elif self.text:
            call.visible_chars = text_measure("".join(self.text))[1]
        self.low.add_call(call)
        self.prev_call_id = self.low.call_id(str(call.native_id))
        self.call = None
        self.text = []

    def request(self, lineno: int, ts: datetime | None, obj: dict[str, Any]) -> None:
        self.close_call()
        payload = as_dict(obj.get("payload"))
        messages = as_list(payload.get("messages"))
        new = messages[self.seen_messages :] if len(messages) >= self.seen_messages else messages
        self.seen_messages = len(messages)
        for m in new:
            self.message(m, ts)
        self.seq += 1
        self.call = self.talk.call(
            self.native_id(obj),
            line=lineno,
            ts=ts,
            seq=self.seq,
            agent_id=self.agent,
            parent_session_id=self.parent,
            model=as_str(payload.get("model")),
            app=APP,
            streamed=bool(payload.get("stream")),
            n_records=1,
        )

    def message(self, m: object, ts: datetime | None) -> None:
        if not isinstance(m, dict):
            return
        role = as_str(m.get("role")) or ""
        content = m.get("content")
        text = _content_text(content)
        chars, visible = text_measure(text)
        tool_calls = as_list(m.get("tool_calls"))
        if role == "user" and isinstance(content, str | list) and visible:
            self.talk.turn = f"{self.talk.session}:{self.talk.idx + 1}"  # named after its place
        kind = {"user": "prompt", "assistant": "text", "tool": "tool_result"}.get(role, role)
        if kind == "tool_result":  # (its content hashed, its text measured)
            use_id = as_str(m.get("tool_call_id"))
            self.low.add_message(
                self.talk.tool_result(content, None, ts=ts, text=text, use_id=use_id, role=role)
            )
        elif role != "assistant" or not tool_calls or chars:
            call_id = self.prev_call_id if role == "assistant" else None
            self.low.add_message(self.talk.text(role, kind, text, ts=ts, call_id=call_id))
        for tc in tool_calls:
            fn = as_dict(tc.get("function") if isinstance(tc, dict) else None)
            row = self.talk.tool_call(
                as_str(fn.get("name")),
                fn.get("arguments"),
                as_str(tc.get("id")) if isinstance(tc, dict) else None,
                ts=ts,
                call_id=self.prev_call_id,
                role=role,  # the role of the message that carries it (the assistant's, seen)
            )
            self.low.add_message(row)

    def chunk(self, chunk: object) -> None:
        call = self.call
        assert call is not None
        if isinstance(chunk, str):
            data = chunk.strip().removeprefix("data:").strip()
            if data == "[DONE]":
                call.received_done = True
                return
            try:
                chunk = orjson.loads(data)
            except orjson.JSONDecodeError:
                return
        if not isinstance(chunk, dict):
            return
        call.add(event_count=1)
        _usage_into(call, chunk.get("usage"))
        for choice in as_list(chunk.get("choices")):
            if not isinstance(choice, dict):
                continue
            delta = as_dict(choice.get("delta"))
            if isinstance(delta.get("content"), str):
                self.text.append(delta["content"])
            reasoning = delta.get("reasoning_content") or delta.get("reasoning")
            if isinstance(reasoning, str):
                call.add(reasoning_chars=len(reasoning))
            if choice.get("finish_reason"):
                call.finish_reason_raw = as_str(choice["finish_reason"])
        if chunk.get("type") == "message_delta":  # Anthropic streams
            delta = chunk.get("delta") or {}
            if isinstance(delta, dict) and delta.get("stop_reason"):
                call.finish_reason_raw = as_str(delta["stop_reason"])

    def line(self, lineno: int, obj: dict[str, Any]) -> None:
        kind = kind_of(obj)
        ts = parse_time(obj.get("timestamp"))
        if kind == "request":
            self.request(lineno, ts, obj)
            return
        call = self.call
        if call is None:
            self.low.reject(lineno, f"{kind} line before any request", brief(obj))
            return
        call.add(n_records=1)
        if kind == "stream_chunk":
            self.chunk(obj.get("chunk"))
        elif kind == "stream_complete":
            status = as_status(obj.get("http_status"))
            call.http_status = status
            call.event_count = as_int(obj.get("event_count"))
            call.content_chars = as_int(obj.get("content_length"))
            call.tool_call_count = as_int(obj.get("tool_call_count"))
            call.received_done = bool(obj.get("received_done"))
            if obj.get("finish_reason"):
                call.finish_reason_raw = as_str(obj["finish_reason"])
            duration = obj.get("duration_ms")
            if isinstance(duration, int | float) and not isinstance(duration, bool):
                call.duration_ms = float(duration)
            if not self.text and call.content_chars == 0:
                call.visible_chars = 0
        elif kind == "response":
            self.response(call, obj)
        else:
            call.add(n_records=-1)
            self.low.skip(str(kind or "untyped"))

    def response(self, call: CallRow, obj: dict[str, Any]) -> None:
        status = as_status(obj.get("status"))
        call.http_status = status
        body = obj.get("body")
        if isinstance(body, str):
            try:
                body = orjson.loads(body)
            except orjson.JSONDecodeError:
                body = {"error": body}
        if status is not None and status >= 400:
            call.finish_reason_raw = "error"
            call.content_chars = 0
            call.visible_chars = 0
            return
        if not isinstance(body, dict):
            return
        if body.get("id"):
            call.response_id = as_str(body["id"])
        _usage_into(call, body.get("usage"))
        for choice in as_list(body.get("choices")):
            msg = choice.get("message") if isinstance(choice, dict) else None
            if not isinstance(msg, dict):
                continue
            text = _content_text(msg.get("content"))
            call.content_chars, call.visible_chars = text_measure(text)
            tools = msg.get("tool_calls")
            call.tool_call_count = len(tools) if isinstance(tools, list) else 0
            reasoning = msg.get("reasoning_content") or msg.get("reasoning")
            call.reasoning_chars = len(reasoning) if isinstance(reasoning, str) else 0
            if choice.get("finish_reason"):
                call.finish_reason_raw = as_str(choice["finish_reason"])


def load(ctx: LoadContext) -> LoadResult:
    reader = _Reader(ctx)
    for lineno, obj in json_lines(ctx.source, reader.low):
        reader.line(lineno, obj)
    reader.close_call()
    return reader.low.finish()


# What this module is to the registry (analyzer.formats).
SPEC = FormatSpec(
    name="nexus3_raw",
    title="NEXUS3 raw API log (raw.jsonl)",
    kind="log",
    sniff_order=40,
    call_prefix="nexus3",
    sniff=sniff,
    load=load,
)
