"""OpenTelemetry exports of coding agents' events: Claude Code, Codex and Gemini CLI.

The file is read by ``otlp`` (the OTLP/JSON envelope a Collector's ``file`` exporter writes,
or flat JSON lines; see its docstring): each log record is one event. Facts from the agents'
own documentation and source - Claude Code's monitoring page (``code.claude.com/docs/en/
monitoring-usage``), Codex's ``docs/config.md`` and ``codex-rs/otel/src/events/
session_telemetry.rs`` (openai/codex a2a5acbd: ``sse_event_completed``, ``tool_result_with_tags``,
``tool_decision``, ``user_prompt``, ``record_api_request``),
Gemini CLI's ``docs/telemetry.md`` and ``packages/core/src/telemetry/`` - and from real
exports (``tests/fixtures/otel/README.md`` says which).

**Events.** An event's name is its ``event.name`` attribute; Claude Code writes it without its
prefix (``api_request``) and puts the full name in the body (``claude_code.api_request``):
either spelling is read.

* Calls (one model request each, ``n_records`` 1):
  ``claude_code.api_request`` (``model``, ``input_tokens`` - the uncached part -,
  ``cache_read_tokens``, ``cache_creation_tokens``, ``output_tokens``, ``cost_usd`` - stated:
  cost_basis ``reported``; absent or null from Claude Code 2.1.122, then priced from list
  prices as any call -, ``duration_ms``, ``ttft_ms``, ``speed`` ``fast``, ``request_id``);
  ``codex.sse_event`` of ``event.kind`` ``response.completed`` (``input_token_count`` - the
  whole prompt -, ``cached_token_count``, ``output_token_count`` - reasoning in it -,
  ``reasoning_token_count``); ``gemini_cli.api_response`` (``input_token_count``,
  ``cached_content_token_count``, ``output_token_count``, ``thoughts_token_count`` - billed as
  output -, ``tool_token_count`` - prompt -, ``status_code``, ``duration_ms``). A failed
  request (``claude_code.api_error``, ``gemini_cli.api_error``, a ``codex.api_request`` with an
  error status) is a call with its HTTP status and no tokens.
* Tool calls: ``claude_code.tool_result`` (``tool_name``, ``success``, ``error``,
  ``tool_parameters`` or ``tool_input`` when ``OTEL_LOG_TOOL_DETAILS`` is set, ``tool_use_id``),
  ``codex.tool_result`` (``tool_name``, ``call_id``, ``arguments``, ``output``, ``success``),
  ``gemini_cli.tool_call`` (``function_name``, ``function_args``, ``success``, ``error``,
  ``decision``): a ``tool_call`` message and its ``tool_result``, tied to the session's last
  call before it (the response that asked for the tool). What a tool returned is not in
  Claude Code's or Gemini CLI's events (only an error's text): the result's hash and meaning
  are left unknown (NULL) there, never guessed, so no loop is found on results nobody saw.
  A tool call refused (``tool_decision`` ``reject``, Codex ``denied``/``abort``) is a tool call
  with an error result naming the refusal; an accepted decision is skipped (its
  ``tool_result`` is the tool call).
* ``*.user_prompt``: the user's prompt (its text only when the agent was told to log it),
  starting a turn.
* Every other event (``assistant_response``, ``api_request`` of Gemini CLI and Codex - their
  tokens are on the response events -, ``conversation_starts``, ``mcp_server_connection``,
  ``hook_registered``...) is skipped by its name; a record of no known agent is skipped as
  ``other event``. Metrics are skipped by ``otlp`` (``metric``): the agents count the same
  requests in their metrics and their events, and only the events are read.
* Spans are handed to ``otel_spans`` (``Spans``: GenAI and OpenInference calls and tool runs).

**Sessions and order.** A session is ``session.id`` (Codex: ``conversation.id``); a turn,
``prompt.id`` (Gemini CLI: ``prompt_id``; Codex: from its ``user_prompt`` on). A session's events
are read in the order of their ``event.sequence`` (Claude Code numbers them), else of their
times, whatever order the batches were exported in. **Dimensions**: the resource's
attributes (``OTEL_RESOURCE_ATTRIBUTES``: team, cost centre...) and the event's ``user.*``
and ``organization.id`` are the call's ``labels``.

**Identity.** A call is its ``request_id`` where the event states one (Claude Code), else
``<session>:<prompt.id>:<event.sequence>``, else ``<session>:<the event's time>`` (Codex:
its ``response.id`` first); never a line number. The same event exported twice (in one file or
two) is one call, settled by the store; a Claude Code message is placed by its
``event.sequence`` (twice: a tool call at ``2n``, its result at ``2n+1``), so the same event
read from two files is one message. An event read twice in one file is skipped the second
time (``event exported twice``) - its call is handed over (the store settles it).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from analyzer.formats import otlp
from analyzer.formats.otel_spans import Spans
from analyzer.formats.otlp import Record
from analyzer.ingest.base import Head, LoadContext, LoadResult
from analyzer.ingest.conversation import Conversation
from analyzer.ingest.lowering import Lowering, brief
from analyzer.ingest.rows import CallRow
from analyzer.ingest.spec import FormatSpec
from analyzer.ingest.usage import token_counts
from analyzer.ingest.values import as_int, as_str, json_text, labels_text, parse_time, stated_cost

# prefix -> (app, provider)
AGENTS = {
    "claude_code": ("claude-code", "anthropic"),
    "codex": ("codex", "openai"),
    "gemini_cli": ("gemini-cli", "google"),
}
OTHER = "other event"
TWICE = "event exported twice"
_REFUSED = {"reject", "rejected", "denied", "abort", "deny"}
_ACCEPTED = {"accept", "accepted", "approved", "approved_for_session", "allow", "auto_accept"}


def sniff(head: Head) -> bool:
    """OpenTelemetry records at the start: an OTLP/JSON envelope (logs, spans or metrics) or
    flat records of a shape ``otlp`` knows."""
    return bool(otlp.signals(head))


# -- reading values ----------------------------------------------------------------------


def _count(value: object) -> int | None:
    """A count as OTLP carries it: a number, or digits in a string."""
    if isinstance(value, str) and value.isdigit():
        return as_int(int(value))
    return as_int(value)


def _number(value: object) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _flag(value: object) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    return None


def event_of(rec: Record) -> tuple[str | None, str | None]:
    """(agent prefix, event name without it) of a log record; (None, name) when no agent
    this reader knows wrote it."""
    name = rec.name or ""
    prefix, dot, bare = name.partition(".")
    if dot and prefix in AGENTS:
        return prefix, bare
    body = rec.body if isinstance(rec.body, str) else ""
    prefix, dot, bare = body.partition(".")
    if dot and prefix in AGENTS and (not name or bare == name):
        return prefix, bare
    if name and (
        (rec.scope or "").startswith("com.anthropic.claude_code")
        or rec.resource.get("service.name") == "claude-code"
    ):
        return "claude_code", name
    return None, name or None


def labels_of(rec: Record) -> dict[str, object]:
    """A call's dimensions: the resource's attributes, and the event's ``user.*`` and
    ``organization.id``."""
    out: dict[str, object] = dict(rec.resource)
    for key, value in rec.attrs.items():
        if key.startswith("user.") or key == "organization.id":
            out[key] = value
    return out


# -- one file ----------------------------------------------------------------------------


@dataclass(slots=True)
class _Event:
    """A log event kept until its session is read in order: only what is read of it."""

    agent: str
    name: str
    attrs: dict[str, Any]  # (the attributes this reader reads: ``_READ``)
    line: int
    labels: str | None  # (a call's: ``labels_of``, as text)
    ts: datetime | None
    session: str
    seq: int | None
    order: int  # its place in the file


# The attributes read of an event (the others - user.*, terminal.type... - are let go once the
# event's labels are taken: an export's sessions are held until the file is read).
_READ = frozenset(
    {
        "model",
        "input_tokens",
        "output_tokens",
        "cache_read_tokens",
        "cache_creation_tokens",
        "speed",
        "cost_usd",
        "duration_ms",
        "ttft_ms",
        "request_id",
        "status_code",
        "prompt.id",
        "prompt_id",
        "event.kind",
        "http.response.status_code",
        "error.message",
        "response.id",
        "input_token_count",
        "cached_token_count",
        "output_token_count",
        "reasoning_token_count",
        "cached_content_token_count",
        "thoughts_token_count",
        "tool_token_count",
        "function_name",
        "function_args",
        "tool_name",
        "tool_parameters",
        "tool_input",
        "arguments",
        "tool_use_id",
        "call_id",
        "success",
        "decision",
        "error",
        "output",
        "source",
        "prompt",
    }
)
_CALL_EVENTS = frozenset({"api_request", "api_response", "api_error", "sse_event"})


@dataclass
class _Session:
    talk: Conversation
    agent: str
    call: CallRow | None = None  # the last call read (a tool call after it is its)
    call_id: str | None = None
    turn: str | None = None
    events: list[_Event] = field(default_factory=list)


class _Reader:
    def __init__(self, ctx: LoadContext) -> None:
        self.low = Lowering(ctx, SPEC.name, SPEC.call_prefix)
        self.spans = Spans(self.low)  # the spans' calls and tool runs (otel_spans)
        self.tz = ctx.options.tz
        self.file_session = Path(ctx.source.path).stem
        self.sessions: dict[str, _Session] = {}
        self.seen: set[tuple[object, ...]] = set()
        self.order = 0
        self.interned: dict[str, str] = {}  # (one copy of each labels text)

    # -- gathering -------------------------------------------------------------------------

    def take(self, rec: Record) -> None:
        if rec.kind == otlp.SPAN:
            self.spans.add(rec)
            return
        agent, name = event_of(rec)
        if agent is None or name is None:
            self.low.skip(OTHER)
            return
        attrs = rec.attrs
        session = (
            as_str(attrs.get("session.id"))
            or as_str(attrs.get("conversation.id"))
            or as_str(rec.resource.get("session.id"))
        )
        ts = rec.time or parse_time(attrs.get("event.timestamp"), self.tz)
        self.order += 1
        labels = labels_text(labels_of(rec)) if name in _CALL_EVENTS else None
        event = _Event(
            agent,
            name,
            {k: v for k, v in attrs.items() if k in _READ},
            rec.line,
            self.interned.setdefault(labels, labels) if labels else None,
            ts,
            session or self.file_session,
            _count(attrs.get("event.sequence")),
            self.order,
        )
        s = self.sessions.get(event.session)
        if s is None:
            s = self.sessions[event.session] = _Session(Conversation(event.session), agent)
        s.events.append(event)

    # -- reading a session in order --------------------------------------------------------

    def finish(self) -> LoadResult:
        self.spans.finish()
        for s in self.sessions.values():
            # the agent's own order (``event.sequence``) where it numbers its events, else
            # their times; then their order in the file
            s.events.sort(
                key=lambda e: (-1 if e.seq is None else e.seq, e.ts or datetime.min, e.order)
            )
            for e in s.events:
                self.event(s, e)
        return self.low.finish()

    def twice(self, e: _Event) -> bool:
        """Has this event been read already in this file (an export repeated)?"""
        a = e.attrs
        ids = ("call_id", "tool_use_id", "tool_name", "function_name", "function_args")
        key = (e.session, e.agent, e.name, e.seq, e.ts, *(as_str(a.get(k)) for k in ids))
        if key in self.seen:
            return True
        self.seen.add(key)
        return False

    def event(self, s: _Session, e: _Event) -> None:
        name, a = e.name, e.attrs
        turn = as_str(a.get("prompt.id")) or as_str(a.get("prompt_id"))
        if turn:
            s.turn = turn
        s.talk.turn = s.turn
        if name in _CALL_EVENTS:
            self.request(s, e)
        elif self.twice(e):
            self.low.skip(TWICE)
        elif name in ("tool_result", "tool_call"):
            self.tool(s, e)
        elif name == "tool_decision":
            self.decision(s, e)
        elif name == "user_prompt":
            if e.agent == "codex" or not turn:
                s.turn = f"{e.session}:{e.ts.isoformat() if e.ts else e.order}"
                s.talk.turn = s.turn
            prompt = a.get("prompt")
            redacted = ("<REDACTED>", "[REDACTED]")  # (Claude Code's, Codex's)
            text = prompt if isinstance(prompt, str) and prompt not in redacted else None
            row = s.talk.message("user", "prompt", ts=e.ts, n_records=1, **self.place(e))
            self.low.add_message(Conversation.fill(row, text))
        else:
            self.low.skip(f"{e.agent}.{name}")

    # -- calls -----------------------------------------------------------------------------

    def request(self, s: _Session, e: _Event) -> None:
        a, agent, name = e.attrs, e.agent, e.name
        error = name == "api_error"
        if agent == "codex":
            if name == "sse_event":
                if as_str(a.get("event.kind")) != "response.completed":
                    self.low.skip(f"codex.sse_event ({as_str(a.get('event.kind')) or '?'})")
                    return
            else:  # api_request: its tokens are on the response's sse_event
                status = _count(a.get("http.response.status_code"))
                if not a.get("error.message") and (status is None or status < 400):
                    self.low.skip("codex.api_request")
                    return
                error = True
        elif agent == "gemini_cli" and name == "api_request":
            self.low.skip("gemini_cli.api_request")  # (its tokens are on api_response)
            return
        elif agent == "claude_code" and name not in ("api_request", "api_error"):
            self.low.skip(f"{agent}.{name}")
            return
        app, provider = AGENTS[agent]
        native = self.native_id(e)
        call = s.talk.call(
            native,
            line=e.line,
            ts=e.ts,
            model=as_str(a.get("model")),
            provider=provider,
            app=app,
            seq=e.seq,
            n_records=1,
            tool_call_count=0,
            duration_ms=_number(a.get("duration_ms")),
        )
        call.turn_id = s.turn
        call.labels = e.labels
        if error:
            call.http_status = _count(a.get("status_code")) or _count(
                a.get("http.response.status_code")
            )
        else:
            call.update(_tokens(agent, a))
            # (the events are written once the response ended: their counts are final)
            call.output_final = True if call.output_tokens is not None else None
            ttft = _number(a.get("ttft_ms"))
            call.ttft_ms = ttft
            status = _count(a.get("status_code"))
            call.http_status = status if status is not None and status < 1000 else None
            cost = stated_cost(a.get("cost_usd"))
            if cost is not None:
                call.cost_usd, call.cost_basis = cost, "reported"
            if agent == "codex":
                call.response_id = as_str(a.get("response.id"))
        self.low.add_call(call)
        s.call, s.call_id = call, self.low.call_id(native)

    def native_id(self, e: _Event) -> str:
        a = e.attrs
        request = as_str(a.get("request_id")) or as_str(a.get("response.id"))
        if request:
            return request if e.name != "api_error" else f"{request}:error"
        prompt = as_str(a.get("prompt.id")) or as_str(a.get("prompt_id"))
        if e.seq is not None:
            return f"{e.session}:{prompt or ''}:{e.seq}"
        at = e.ts.isoformat() if e.ts is not None else f"+{e.order}"
        return f"{e.session}:{at}" if e.name != "api_error" else f"{e.session}:{at}:error"

    # -- tools -----------------------------------------------------------------------------

    def place(self, e: _Event, second: bool = False) -> dict[str, Any]:
        """Where a Claude Code message goes: by its event's sequence (the same event read from
        two files is the same message); otherwise the session's next place."""
        if e.agent == "claude_code" and e.seq is not None:
            return {"at": 2 * e.seq + (1 if second else 0)}
        return {}

    def tool(self, s: _Session, e: _Event) -> None:
        a = e.attrs
        if e.agent == "gemini_cli":
            name = as_str(a.get("function_name"))
            args: object = json_text(a.get("function_args"))
        else:
            name = as_str(a.get("tool_name"))
            args = json_text(a.get("tool_parameters") or a.get("tool_input") or a.get("arguments"))
        use_id = as_str(a.get("tool_use_id")) or as_str(a.get("call_id"))
        use_id = use_id or f"{e.session}:{e.seq if e.seq is not None else e.order}"
        success = _flag(a.get("success"))
        decision = (as_str(a.get("decision")) or "").lower()
        if decision in _REFUSED:
            success = False
        is_error = None if success is None else not success
        error = as_str(a.get("error")) or as_str(a.get("error.message"))
        output = a.get("output") if e.agent == "codex" else None
        content: object = output if output is not None else error
        if is_error and content is None and decision in _REFUSED:
            content = f"tool call {decision}"
        self.tool_pair(s, e, name, args, use_id, content, is_error)

    def decision(self, s: _Session, e: _Event) -> None:
        a = e.attrs
        decision = (as_str(a.get("decision")) or "").lower()
        if decision not in _REFUSED:
            self.low.skip(f"{e.agent}.tool_decision")  # (its tool_result is the tool call)
            return
        name = as_str(a.get("tool_name"))
        use_id = as_str(a.get("tool_use_id")) or as_str(a.get("call_id"))
        use_id = use_id or f"{e.session}:{e.seq if e.seq is not None else e.order}"
        source = as_str(a.get("source"))
        text = f"tool call {decision}" + (f" ({source})" if source else "")
        args = json_text(a.get("tool_parameters") or a.get("tool_input") or a.get("arguments"))
        self.tool_pair(s, e, name, args, use_id, text, True)

    def tool_pair(
        self,
        s: _Session,
        e: _Event,
        name: str | None,
        args: object,
        use_id: str,
        content: object,
        is_error: bool | None,
    ) -> None:
        if s.call is not None:
            s.call.add(tool_call_count=1)
        said = s.talk.tool_call(
            name, args, use_id, ts=e.ts, call_id=s.call_id, records=1, **self.place(e)
        )
        if args is None:  # arguments left out of the event: never the same as another call's
            said.tool_args_hash, said.meaning_key = None, f"unknown arguments:{use_id}"
        self.low.add_message(said)
        row = s.talk.tool_result(
            content, is_error, ts=e.ts, use_id=use_id, name=name, **self.place(e, True)
        )
        if content is None:  # what came back is not in the event: unknown, not "nothing"
            row.tool_result_hash = row.meaning_key = None
            row.text_chars = row.visible_chars = None
        self.low.add_message(row)


def _tokens(agent: str, a: dict[str, Any]) -> dict[str, Any]:
    """An event's token counts as the store's columns."""
    if agent == "claude_code":
        usage: dict[str, Any] = {
            "input_tokens": _count(a.get("input_tokens")),
            "output_tokens": _count(a.get("output_tokens")),
            "cache_read_input_tokens": _count(a.get("cache_read_tokens")),
            "cache_creation_input_tokens": _count(a.get("cache_creation_tokens")),
            "speed": a.get("speed"),
        }
        out = token_counts(usage)
        out.pop("web_search_requests", None)
        return out
    if agent == "codex":
        return token_counts(
            {
                "input_tokens": _count(a.get("input_token_count")),
                "cached_input_tokens": _count(a.get("cached_token_count")),
                "output_tokens": _count(a.get("output_token_count")),
                "reasoning_output_tokens": _count(a.get("reasoning_token_count")),
            }
        )
    prompt, tool = _count(a.get("input_token_count")), _count(a.get("tool_token_count"))
    out_, thoughts = _count(a.get("output_token_count")), _count(a.get("thoughts_token_count"))
    both = None if out_ is None and thoughts is None else (out_ or 0) + (thoughts or 0)
    found = {
        "input_tokens": None if prompt is None else prompt + (tool or 0),
        "cached_input_tokens": _count(a.get("cached_content_token_count")),
        "output_tokens": both,
        "reasoning_tokens": thoughts,
    }
    return {k: v for k, v in found.items() if v is not None}


def _records(ctx: LoadContext, low: Lowering) -> Iterator[Record]:
    return otlp.records(ctx.source, low, ctx.options.tz)


def load(ctx: LoadContext) -> LoadResult:
    reader = _Reader(ctx)
    for rec in _records(ctx, reader.low):
        try:
            reader.take(rec)
        except (TypeError, ValueError) as exc:  # a value of an unexpected shape
            reader.low.reject(rec.line, f"an event that cannot be read: {exc}", brief(rec.attrs))
    return reader.finish()


# What this module is to the registry (analyzer.formats).
SPEC = FormatSpec(
    name="otel",
    title="OpenTelemetry events of Claude Code, Codex or Gemini CLI (OTLP/JSON, flat lines)",
    kind="log",
    sniff_order=46,  # before Gemini CLI's stream (48): no other format claims an OTLP envelope
    call_prefix="otel",
    sniff=sniff,
    load=load,
)
