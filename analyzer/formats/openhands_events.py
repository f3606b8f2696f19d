"""OpenHands' events and metrics lowered to calls, messages and a run: the part the shapes of
``openhands`` share (that module's docstring states the facts and where they come from).

One ``Session`` per OpenHands run: it is given the run's token usages first (one per model call,
each with the ``response_id`` of the response it counts), then its events in order - V0 events
(``action`` / ``observation``, an evaluation's ``history``) or V1 events (``kind``: the agent
SDK's ``MessageEvent``, ``ActionEvent``...) - and writes a message for each event that says
something, ties the events of one response to its call, and finally writes the calls.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson

from analyzer.ingest.conversation import Conversation
from analyzer.ingest.lowering import Lowering, excerpt, text_measure
from analyzer.ingest.rows import CallRow
from analyzer.ingest.runs import outcome
from analyzer.ingest.values import (
    as_dict,
    as_int,
    as_list,
    as_str,
    as_text,
    kind_of,
    parse_time,
    stated_cost,
)

APP = "openhands"
STUCK = re.compile(r"AgentStuckInLoopError|stuck in a loop", re.I)
# Keys the agent SDK adds to every tool's arguments: the model's own risk label and summary of
# the action, not the action (the same command is labelled differently from call to call).
_LABELS = frozenset({"security_risk", "summary"})
_V1_RESULTS = frozenset({"ObservationEvent", "UserRejectObservation", "AgentErrorEvent"})
# V0 actions that are neither a tool the model called nor a message.
_V0_NOT_TOOLS = frozenset({"recall", "change_agent_state", "null", "condensation_request"})


def content_text(content: object) -> str:
    """The text of a message's content: a string, or its ``{type: text, text}`` parts."""
    if isinstance(content, str):
        return content
    return "".join(as_text(as_dict(p).get("text")) for p in as_list(content))


def reasoning_chars(obj: dict[str, Any]) -> int:
    """Characters of reasoning an event or LLM message keeps (``reasoning_content`` and the
    ``thinking`` of Anthropic thinking blocks)."""
    blocks = sum(
        len(as_text(as_dict(b).get("thinking"))) for b in as_list(obj.get("thinking_blocks"))
    )
    return len(as_text(obj.get("reasoning_content"))) + blocks


def arguments(raw: object) -> object:
    """A tool call's arguments (a JSON string is parsed) without the SDK's labels."""
    value = raw
    if isinstance(raw, str):
        try:
            value = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return raw
    if isinstance(value, dict):
        return {k: v for k, v in value.items() if k not in _LABELS}
    return value


@dataclass
class Usage:
    """One entry of ``metrics.token_usages``: one model call."""

    rid: str | None  # the response it counts
    model: str | None
    tokens: dict[str, int | None]
    cost: float | None  # its own cost, where the log states one per call
    order: int  # its place in the run's lists


def tokens_of(usage: dict[str, Any]) -> dict[str, int | None]:
    """A ``TokenUsage`` as the store's token columns: ``prompt_tokens`` is litellm's whole
    prompt (cache reads and writes included); ACP agents report cache reads beside it, which
    the SDK itself recognises by ``cache_read_tokens > prompt_tokens`` (``MetricsSnapshot``)."""
    prompt = as_int(usage.get("prompt_tokens"))
    read = as_int(usage.get("cache_read_tokens"))
    if prompt is not None and read is not None and read > prompt:
        prompt += read
    return {
        "input_tokens": prompt,
        "cached_input_tokens": read,
        "cache_write_tokens": as_int(usage.get("cache_write_tokens")),
        "output_tokens": as_int(usage.get("completion_tokens")),
        "reasoning_tokens": as_int(usage.get("reasoning_tokens")),
    }


def usages_of(metrics: dict[str, Any], start: int = 0) -> list[Usage]:
    """The calls a ``Metrics`` object lists. ``costs`` entries carry no response id and are
    written only for calls litellm could price: they are the calls' own costs only when there
    is one (above 0) for every call."""
    listed = [as_dict(t) for t in as_list(metrics.get("token_usages"))]
    costs = [stated_cost(as_dict(c).get("cost")) for c in as_list(metrics.get("costs"))]
    paired = len(costs) == len(listed) and all(c is not None for c in costs)
    return [
        Usage(
            as_str(t.get("response_id")) or None,
            as_str(t.get("model")) or None,
            tokens_of(t),
            costs[i] if paired else None,
            start + i,
        )
        for i, t in enumerate(listed)
    ]


@dataclass
class Reply:
    """What the events say of one model response."""

    pos: int  # the position of its first event
    line: int | None  # the record its first event is in
    ts: datetime | None
    turn: str | None
    filled: bool = False
    model: str | None = None
    text: str = ""
    reasoning: int = 0
    tools: int = 0
    finish: str | None = None


class Session:
    """The rows of one OpenHands run (see the module's docstring)."""

    def __init__(self, low: Lowering, session: str, tz: str, usages: list[Usage]) -> None:
        self.low, self.tz, self.usages = low, tz, usages
        self.talk = Conversation(session)  # the run's messages
        self.natives: dict[str, str] = {}
        for u in usages:
            if u.rid is not None:
                self.natives.setdefault(u.rid, f"{session}:{u.rid}")
        self.replies: dict[str, Reply] = {}
        self.tools: dict[str, str] = {}  # V0: an action event's id -> its tool_use_id
        self.tids: set[str] = set()
        self.pos = 0  # the events met
        self.first: datetime | None = None
        self.last: datetime | None = None
        self.errors: list[str] = []  # V1 ConversationErrorEvents, "code: detail"
        self.limit: str | None = None  # V1 ConversationIterationLimitEvent
        self.stuck: str | None = None  # the stuck detector's words, where an event has them
        self.final: str | None = None  # the finish action's message

    # -- rows ------------------------------------------------------------------------------

    def said(
        self,
        records: int,
        role: str,
        kind: str,
        ts: datetime | None,
        text: str,
        *,
        call_id: str | None = None,
        is_error: bool | None = None,
    ) -> None:
        """A message of text (``records``: the input records it accounts for; ``is_error``:
        it tells of an error)."""
        self.low.add_message(
            self.talk.text(
                role, kind, text, ts=ts, records=records, call_id=call_id, is_error=is_error
            )
        )

    def prompt(self, ev: dict[str, Any], ts: datetime | None, records: int, text: str) -> None:
        """The user's message: it starts a turn."""
        self.talk.turn = f"{self.talk.session}:{as_str(ev.get('id')) or self.pos}"
        self.low.add_message(self.talk.prompt(text, ts=ts, records=records))

    def tool_call(
        self,
        records: int,
        ts: datetime | None,
        name: str | None,
        args: object,
        tid: str | None,
        call_id: str | None,
    ) -> None:
        self.low.add_message(
            self.talk.tool_call(name, args, tid, ts=ts, call_id=call_id, records=records)
        )
        if name == "finish" and isinstance(args, dict):
            self.final = as_str(args.get("message")) or as_str(args.get("final_thought"))

    def result(
        self,
        records: int,
        ts: datetime | None,
        name: str | None,
        tid: str | None,
        text: str,
        is_error: bool,
    ) -> None:
        self.low.add_message(
            self.talk.tool_result(text, is_error, ts=ts, use_id=tid, name=name, records=records)
        )

    def when(self, ev: dict[str, Any]) -> datetime | None:
        ts = parse_time(ev.get("timestamp"), self.tz)
        if ts is not None:
            self.first = ts if self.first is None else min(self.first, ts)
            self.last = ts if self.last is None else max(self.last, ts)
        return ts

    def reply(
        self, rid: str | None, ts: datetime | None, line: int | None
    ) -> tuple[str | None, Reply | None]:
        """The call id (None: no token usage counts that response) and the reply of a
        response id."""
        if not rid:
            return None, None
        reply = self.replies.get(rid)
        if reply is None:
            reply = self.replies[rid] = Reply(self.pos, line, ts, self.talk.turn)
        native = self.natives.get(rid)
        return (None if native is None else self.low.call_id(native)), reply

    def note_stuck(self, text: str) -> None:
        if STUCK.search(text):
            self.stuck = text

    # -- events ----------------------------------------------------------------------------

    def event(self, ev: dict[str, Any], records: int, line: int | None) -> str | None:
        """One event; returns the kind it holds nothing of (None: it was written)."""
        self.pos += 1
        ts = self.when(ev)
        kind = kind_of(ev, "kind")
        if kind is not None:
            return self.v1(ev, kind, ts, records, line)
        if isinstance(ev.get("action"), str):
            return self.v0_action(ev, ev["action"], ts, records, line)
        if isinstance(ev.get("observation"), str):
            return self.v0_observation(ev, ev["observation"], ts, records)
        return "untyped"

    def v1(
        self, ev: dict[str, Any], kind: str, ts: datetime | None, records: int, line: int | None
    ) -> str | None:
        if kind == "ActionEvent":
            self.v1_action(ev, ts, records, line)
        elif kind in _V1_RESULTS:
            self.v1_result(ev, kind, ts, records)
        elif kind == "MessageEvent":
            self.v1_message(ev, ts, records, line)
        elif kind == "SystemPromptEvent":
            text = as_text(as_dict(ev.get("system_prompt")).get("text"))
            self.said(records, "system", "system", ts, text)
        elif kind in ("Condensation", "CondensationSummaryEvent"):
            call_id, reply = self.reply(as_str(ev.get("llm_response_id")), ts, line)
            summary = as_text(ev.get("summary"))
            if reply is not None:
                reply.text += summary
            self.said(records, "system", "compaction", ts, summary, call_id=call_id)
        elif kind == "ConversationErrorEvent":
            text = ": ".join(s for s in (as_str(ev.get("code")), as_str(ev.get("detail"))) if s)
            self.errors.append(text or kind)
            self.note_stuck(text)
            self.said(records, "system", "system", ts, text, is_error=True)
        elif kind == "ConversationIterationLimitEvent":
            most = as_int(ev.get("max_iterations")) or as_int(ev.get("max_iteration_per_run"))
            self.limit = f"iteration limit: {as_text(ev.get('detail')) or most}"
            self.said(records, "system", "system", ts, self.limit)
        elif kind in ("PauseEvent", "InterruptEvent"):
            self.said(records, "user", "system", ts, as_text(ev.get("reason")) or kind)
        else:
            return kind
        return None

    def v1_message(
        self, ev: dict[str, Any], ts: datetime | None, records: int, line: int | None
    ) -> None:
        msg = as_dict(ev.get("llm_message"))
        text = content_text(msg.get("content"))
        source = as_str(ev.get("source"))
        if source == "user":
            self.prompt(ev, ts, records, text)
        elif source == "agent":
            call_id, reply = self.reply(as_str(ev.get("llm_response_id")), ts, line)
            if reply is not None:
                reply.text += text
                reply.reasoning += reasoning_chars(msg)
            self.said(records, "assistant", "text", ts, text, call_id=call_id)
        else:  # the agent's own words to the model ("Your last response did not include...")
            self.said(records, "user", "system", ts, text)

    def v1_action(
        self, ev: dict[str, Any], ts: datetime | None, records: int, line: int | None
    ) -> None:
        call_id, reply = self.reply(as_str(ev.get("llm_response_id")), ts, line)
        thought = content_text(ev.get("thought"))
        call = as_dict(ev.get("tool_call"))
        if reply is not None:
            reply.text += thought
            reply.reasoning += reasoning_chars(ev)
            reply.tools += 1
        if thought.strip():  # (only the first action of a response carries its text)
            self.said(0, "assistant", "text", ts, thought, call_id=call_id)
        name = as_str(ev.get("tool_name")) or as_str(call.get("name"))
        tid = as_str(ev.get("tool_call_id")) or as_str(call.get("id"))
        args = arguments(call["arguments"] if "arguments" in call else ev.get("action"))
        self.tool_call(records, ts, name, args, tid, call_id)

    def v1_result(self, ev: dict[str, Any], kind: str, ts: datetime | None, records: int) -> None:
        if kind == "ObservationEvent":
            obs = as_dict(ev.get("observation"))
            text = content_text(obs.get("content"))
            code = obs.get("exit_code")
            failed = isinstance(code, int) and not isinstance(code, bool) and code != 0
            is_error = obs.get("is_error") is True or failed
        elif kind == "UserRejectObservation":
            text, is_error = f"Action rejected: {as_text(ev.get('rejection_reason'))}", True
        else:  # AgentErrorEvent: the tool call could not be run
            text, is_error = as_text(ev.get("error")), True
        self.result(
            records, ts, as_str(ev.get("tool_name")), as_str(ev.get("tool_call_id")), text, is_error
        )

    def v0_action(
        self, ev: dict[str, Any], action: str, ts: datetime | None, records: int, line: int | None
    ) -> str | None:
        source = as_str(ev.get("source"))
        args = as_dict(ev.get("args"))
        if action == "message" and source == "user":
            self.prompt(ev, ts, records, as_text(args.get("content")))
        elif action == "system":
            self.said(records, "system", "system", ts, as_text(args.get("content")))
        elif action == "condensation":
            self.said(records, "system", "compaction", ts, as_text(args.get("summary")))
        elif action in _V0_NOT_TOOLS or source != "agent":
            return action
        elif action == "message":  # the model's text reply
            call_id, _raw = self.v0_reply(ev, ts, line, tool=False)
            self.said(
                records, "assistant", "text", ts, as_text(args.get("content")), call_id=call_id
            )
        else:  # a tool the model called: run, read, edit, think, finish...
            meta = as_dict(ev.get("tool_call_metadata"))
            call_id, raw = self.v0_reply(ev, ts, line, tool=True)
            evid = as_str(ev.get("id"))
            tid = as_str(meta.get("tool_call_id")) or f"event-{evid}"
            if tid in self.tids:  # an id a proxy numbered again: this event's own
                tid = f"{tid}@event-{evid}"
            self.tids.add(tid)
            if evid is not None:
                self.tools[evid] = tid
            if raw is None:
                raw = {k: v for k, v in args.items() if k != "thought"}
            name = as_str(meta.get("function_name")) or action
            self.tool_call(records, ts, name, arguments(raw), tid, call_id)
        return None

    def v0_reply(
        self, ev: dict[str, Any], ts: datetime | None, line: int | None, tool: bool
    ) -> tuple[str | None, object]:
        """The call a V0 action came from (its ``tool_call_metadata.model_response``) and the
        arguments the model gave its tool call; the response's text is written with the first
        action of the response."""
        meta = as_dict(ev.get("tool_call_metadata"))
        response = as_dict(meta.get("model_response"))
        call_id, reply = self.reply(as_str(response.get("id")), ts, line)
        choices = as_list(response.get("choices"))
        choice = as_dict(choices[0]) if choices else {}
        message = as_dict(choice.get("message"))
        raw: object = None
        for tc in map(as_dict, as_list(message.get("tool_calls"))):
            if tc.get("id") is not None and tc.get("id") == meta.get("tool_call_id"):
                raw = as_dict(tc.get("function")).get("arguments")
        if reply is not None and not reply.filled:
            reply.filled = True
            reply.model = as_str(response.get("model"))
            reply.text = content_text(message.get("content"))
            reply.reasoning = reasoning_chars(message)
            reply.finish = as_str(choice.get("finish_reason"))
            if tool and reply.text.strip():
                self.said(0, "assistant", "text", ts, reply.text, call_id=call_id)
        if reply is not None and tool:
            reply.tools += 1
        return call_id, raw

    def v0_observation(
        self, ev: dict[str, Any], observation: str, ts: datetime | None, records: int
    ) -> str | None:
        text = as_text(ev.get("content"))
        cause = as_str(ev.get("cause"))
        tid = self.tools.get(cause) if cause is not None else None
        if observation == "agent_state_changed":
            self.note_stuck(as_text(as_dict(ev.get("extras")).get("reason")))
            return observation
        if tid is not None:
            code = as_dict(as_dict(ev.get("extras")).get("metadata")).get("exit_code")
            failed = isinstance(code, int) and not isinstance(code, bool) and code != 0
            is_error = observation == "error" or ev.get("success") is False or failed
            self.result(records, ts, observation, tid, text, is_error)
        elif observation == "error" and STUCK.search(text):
            self.note_stuck(text)
            self.said(records, "user", "system", ts, text, is_error=True)
        elif observation == "error":  # the agent refused a reply (an invalid tool call) and said so
            self.low.add_message(self.talk.refusal(text, ts=ts, call_id=None, records=records))
        else:
            return observation
        return None

    # -- calls -----------------------------------------------------------------------------

    def calls(self, line: int | None) -> bool:
        """Write one call per token usage, in the order their responses were met (a call no
        event names after the one listed before it); returns whether one states its cost."""
        keys: list[tuple[float, int]] = []
        last = 0.0
        for u in self.usages:
            reply = self.replies.get(u.rid) if u.rid is not None else None
            last = float(reply.pos) if reply is not None else last
            keys.append((last, u.order))
        ordered = [u for _, u in sorted(zip(keys, self.usages, strict=True), key=lambda p: p[0])]
        used: set[str] = set()
        turn: str | None = None
        for seq, u in enumerate(ordered, 1):
            native = self.natives.get(u.rid) if u.rid is not None else None
            reply = self.replies.get(u.rid) if u.rid is not None else None
            if native is None or native in used:  # no id, or a second usage of one response
                native, reply = f"{self.talk.session}:#{u.order}", None
            used.add(native)
            turn = reply.turn if reply is not None else turn
            self.low.add_call(self.call_row(u, native, seq, reply, turn, line))
        return any(u.cost is not None for u in self.usages)

    def call_row(
        self,
        u: Usage,
        native: str,
        seq: int,
        reply: Reply | None,
        turn: str | None,
        line: int | None,
    ) -> CallRow:
        row = CallRow(
            native_id=native,
            response_id=u.rid,
            session_id=self.talk.session,
            stream_key=self.talk.session,
            turn_id=turn,
            seq=seq,
            app=APP,
            model=(reply.model if reply is not None else None) or u.model,
            output_final=True if u.tokens.get("output_tokens") is not None else None,
            n_records=0,
        )
        row.update(u.tokens)
        if reply is not None:
            row.line, row.ts = reply.line, reply.ts
            row.content_chars, row.visible_chars = text_measure(reply.text)
            row.reasoning_chars, row.tool_call_count = reply.reasoning, reply.tools
            row.finish_reason_raw = reply.finish
        if line is not None:
            row.line = line
        if u.cost is not None:
            row.cost_usd, row.cost_basis = u.cost, "reported"
        return row


def run_row(
    s: Session, exit_status: str | None, is_error: bool, metrics: list[dict[str, Any]], **row: Any
) -> dict[str, Any]:
    """The run of a session: its verdict and what its metrics state (``accumulated_cost``: 0
    is none; when no call states its own cost the stated total is divided over the calls)."""
    costs = [c for c in (stated_cost(m.get("accumulated_cost")) for m in metrics) if c]
    cost = sum(costs) if costs else None
    acc = [as_dict(m.get("accumulated_token_usage")) for m in metrics]
    prompt = [v for v in (as_int(a.get("prompt_tokens")) for a in acc) if v is not None]
    output = [v for v in (as_int(a.get("completion_tokens")) for a in acc) if v is not None]
    budgets = [c for c in (stated_cost(m.get("max_budget_per_task")) for m in metrics) if c]
    span = (s.last - s.first).total_seconds() * 1000 if s.first and s.last else None
    stated = any(u.cost is not None for u in s.usages)
    return {
        "session_id": s.talk.session,
        "stream_key": s.talk.session,
        "seq": 1,
        "agent": APP,
        "exit_status": exit_status,
        "outcome": outcome(exit_status, is_error),
        "is_error": is_error,
        "result_excerpt": excerpt(s.final or exit_status),
        "reported_calls": sum(len(as_list(m.get("token_usages"))) for m in metrics),
        "reported_input_tokens": sum(prompt) if prompt else None,
        "reported_output_tokens": sum(output) if output else None,
        "reported_cost_usd": cost,
        "cost_apportioned": cost is not None and not stated,
        "duration_ms": span,
        "cost_limit_usd": min(budgets) if budgets else None,
        **row,
    }
