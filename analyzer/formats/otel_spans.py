"""OpenTelemetry spans of LLM calls and tool runs, as calls and messages: the private helper of
the ``otel`` format (its records decoded by ``otlp``).

Two conventions name what a span is; a span of neither is skipped by its kind.

* **The GenAI semantic conventions** (open-telemetry/semantic-conventions ``docs/gen-ai/``,
  ``gen-ai-spans.md``, ``gen-ai-agent-spans.md``; the names current since 1.37 and the older
  ones). ``gen_ai.operation.name`` ``chat``, ``text_completion`` or ``generate_content`` is a
  model call: ``gen_ai.request.model``/``gen_ai.response.model``, ``gen_ai.usage.input_tokens``
  (the whole prompt, cached part included, as the conventions ask) and ``output_tokens`` (the
  older ``prompt_tokens``/``completion_tokens``), ``gen_ai.usage.cache_read.input_tokens`` and
  ``cache_creation.input_tokens`` (OpenLLMetry's ``cache_read_input_tokens``...),
  ``gen_ai.usage.reasoning.output_tokens`` (OpenLLMetry: ``reasoning_tokens``),
  ``gen_ai.response.finish_reasons`` (a list: its first), ``gen_ai.response.id``,
  ``gen_ai.provider.name`` (older: ``gen_ai.system``). ``execute_tool`` is a tool run
  (``gen_ai.tool.name``, ``gen_ai.tool.call.id``; ``gen_ai.tool.call.arguments`` and
  ``result`` only where content capture was turned on; status ``ERROR`` and ``error.type``);
  ``invoke_agent``/``create_agent`` an agent's run, the parent of the others. Older
  OpenLLMetry spans without an operation name are read by ``llm.request.type`` (a call) and
  ``traceloop.span.kind`` ``tool``/``agent``, and pydantic-ai's older ``running tool`` spans by
their ``gen_ai.tool.name`` (``tool_arguments``, ``tool_response``).
* **OpenInference** (Arize-ai/openinference ``spec/semantic_conventions.md``, what Phoenix
  reads): ``openinference.span.kind`` ``LLM`` is a model call (``llm.model_name``,
  ``llm.provider`` or ``llm.system``, ``llm.token_count.prompt`` - the whole prompt -,
  ``completion``, ``prompt_details.cache_read``/``cache_write``,
  ``completion_details.reasoning``, ``llm.cost.total`` where the platform states a cost:
  ``cost_basis`` 'reported'), ``TOOL`` a tool run (``tool.name``, ``tool.id``, ``input.value``
  its arguments, ``output.value`` its result), ``AGENT`` an agent's run.

A prompt whose parts say it does not include its cached part (the cached and written tokens
above the prompt's count: an instrumentation that copied Anthropic's ``input_tokens``) is
counted whole (input + cache read + cache write).

**What was said**, where it was recorded (content capture is off by default in every
instrumentation): the prompt and the reply of a call from ``gen_ai.input.messages`` /
``gen_ai.output.messages`` (JSON of ``{role, parts}``), the older indexed
``gen_ai.prompt.N.*``/``gen_ai.completion.N.*`` attributes and ``gen_ai.content.prompt`` /
``gen_ai.content.completion`` span events, OpenInference's ``llm.input_messages.N.*`` /
``llm.output_messages.N.*``. A call's reply is measured (``content_chars``) and its tool calls
counted only from those; where they are absent the columns stay NULL, and the blindness report
says what a guard cannot see - nothing is guessed. A call's prompt is a message only when its
last input message is the user's (a new turn); the history each call resends is not repeated.

**Tool runs.** A tool span is a ``tool_call`` message of the call that asked for it (the call
whose reply names its call id; else the session's latest call started before it) and, where
its result or its error was recorded, a ``tool_result``. A tool call a reply names is a
``tool_call`` message (without a result) only where its trace has no tool span in the file (an
instrumentation of the model's client alone): where a trace's tool runs are spans, they say
them, and a run exported to another file is read from there, not said twice. Arguments not
recorded leave the message's ``tool_args_hash`` NULL.

**Identity and order.** A call is ``<trace id>:<span id>``. Its session (and stream) is the
span's ``gen_ai.conversation.id`` or ``session.id``, else its nearest ancestor's, else one
another span of its trace names, else the trace; its turn is its agent span (else its trace).
Spans come in any order (a child ends, and is exported, before its parent; a trace spans
files), so nothing is built until the file is read (:meth:`Spans.finish`), and a session's
calls and messages are placed by their spans' start times (``seq`` and the messages' ``idx``
are microseconds since the epoch, times 64 with room for a span's messages): the same span
read from two files gets the same place, and settles as a duplicate. The resource's attributes
and the span's ``user.*``, ``enduser.*`` and ``organization.id`` are the call's ``labels`` (as
for the ``otel`` events' calls); ``service.name`` is its ``app``.

**Records.** Each span is one record: a call's (``n_records``), a tool's ``tool_call``
message, or skipped by kind (an agent's span, a chain's, an HTTP client's...). A span without
a trace or span id, or a tool span naming no tool, is rejected; the same span twice in a file
is skipped (``repeated span``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from analyzer.formats.otlp import Record
from analyzer.ingest.conversation import Conversation, Message
from analyzer.ingest.lowering import Lowering, text_measure
from analyzer.ingest.rows import CallRow
from analyzer.ingest.values import as_int, as_str, json_text, labels_text, stated_cost

CALL, TOOL, AGENT, OTHER = "call", "tool", "agent", "other"
_CALL_OPS = frozenset({"chat", "text_completion", "generate_content", "completion"})
_AGENT_OPS = frozenset({"invoke_agent", "create_agent"})
_SESSION_KEYS = ("gen_ai.conversation.id", "session.id")
_IDENTITY = ("user.", "enduser.")
_PROVIDERS = {"gcp.gemini": "google", "gcp.vertex_ai": "google", "gcp.gen_ai": "google"}
_SLOTS = 64  # places for one span's messages (see the module's docstring)
_EPOCH = datetime(1970, 1, 1)
_MICRO = timedelta(microseconds=1)


@dataclass(slots=True)
class _Said:
    """What a call's span recorded of its exchange: the prompt's last message, the reply's text
    and its tool calls (id, name, arguments). ``None``: not recorded."""

    prompt_role: str | None = None
    prompt: str | None = None
    reply: str | None = None
    tool_calls: list[tuple[str | None, str | None, object]] | None = None


@dataclass(slots=True)
class _Node:
    """A span of the file, classified (``role``), with its session and turn once known."""

    rec: Record
    role: str
    session: str | None = None
    turn: str | None = None
    agent: str | None = None
    call_id: str | None = None  # (a call's id in the store)
    said: _Said = field(default_factory=_Said)


# -- reading attributes ------------------------------------------------------------------


def _s(attrs: Mapping[str, Any], *keys: str) -> str | None:
    for k in keys:
        v = as_str(attrs.get(k))
        if v:
            return v
    return None


def _n(attrs: Mapping[str, Any], *keys: str) -> int | None:
    for k in keys:
        v = as_int(attrs.get(k))
        if v is not None:
            return v
    return None


def _first(attrs: Mapping[str, Any], *keys: str) -> Any:
    """The first of ``keys`` the attributes hold (None: none)."""
    return next((attrs[k] for k in keys if attrs.get(k) is not None), None)


def _indexed(flat: Mapping[str, Any], prefix: str) -> list[dict[str, Any]]:
    """Flattened list attributes (``prefix.0.role``, ``prefix.1.content``...) as a list of
    dicts of what follows each index, in index order."""
    out: dict[int, dict[str, Any]] = defaultdict(dict)
    for key, value in flat.items():
        if key.startswith(prefix):
            idx, _, rest = key[len(prefix) :].partition(".")
            if idx.isdigit() and rest:
                out[int(idx)][rest] = value
    return [out[i] for i in sorted(out)]


def role_of(rec: Record) -> str:
    """What a span is: a model call, a tool run, an agent's run, or other."""
    a = rec.attrs
    op = _s(a, "gen_ai.operation.name")
    oi = (_s(a, "openinference.span.kind") or "").upper()
    if op in _CALL_OPS or oi == "LLM":
        return CALL
    if op == "execute_tool" or oi == "TOOL":
        return TOOL
    if op in _AGENT_OPS or oi == "AGENT":
        return AGENT
    if op or oi:
        return OTHER
    legacy = _s(a, "traceloop.span.kind")
    if legacy == "tool" or _s(a, "gen_ai.tool.name"):  # (pydantic-ai's "running tool")
        return TOOL
    if legacy == "agent":
        return AGENT
    if _s(a, "llm.request.type") in ("chat", "completion"):
        return CALL
    return OTHER


def _kind_word(rec: Record) -> str:
    """A skipped span's kind, for the accounting."""
    a = rec.attrs
    op = _s(a, "gen_ai.operation.name")
    oi = _s(a, "openinference.span.kind")
    if op:
        return f"span {op}"
    if oi:
        return f"span {oi.lower()}"
    legacy = _s(a, "traceloop.span.kind")
    return f"span {legacy}" if legacy else "span"


def _provider(a: Mapping[str, Any]) -> str | None:
    p = _s(a, "gen_ai.provider.name", "llm.provider", "gen_ai.system", "llm.system")
    if p is None:
        return None
    p = p.lower()
    return _PROVIDERS.get(p, p)


def _tokens(a: Mapping[str, Any]) -> dict[str, Any]:
    """The token columns a call's span states (GenAI names, older names, OpenInference)."""
    prompt = _n(
        a, "gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens", "llm.token_count.prompt"
    )
    read = _n(
        a,
        "gen_ai.usage.cache_read.input_tokens",
        "gen_ai.usage.cache_read_input_tokens",
        "llm.token_count.prompt_details.cache_read",
    )
    write = _n(
        a,
        "gen_ai.usage.cache_creation.input_tokens",
        "gen_ai.usage.cache_creation_input_tokens",
        "llm.token_count.prompt_details.cache_write",
    )
    if prompt is not None and (read or 0) + (write or 0) > prompt:
        prompt += (read or 0) + (write or 0)  # the fresh part only (Anthropic's input_tokens)
    out = {
        "input_tokens": prompt,
        "cached_input_tokens": read,
        "cache_write_tokens": write,
        "output_tokens": _n(
            a,
            "gen_ai.usage.output_tokens",
            "gen_ai.usage.completion_tokens",
            "llm.token_count.completion",
        ),
        "reasoning_tokens": _n(
            a,
            "gen_ai.usage.reasoning.output_tokens",
            "gen_ai.usage.reasoning_tokens",
            "llm.token_count.completion_details.reasoning",
        ),
    }
    return {k: v for k, v in out.items() if v is not None}


def _finish(a: Mapping[str, Any]) -> str | None:
    reasons = a.get("gen_ai.response.finish_reasons")
    if isinstance(reasons, list):
        return next((r for r in reasons if isinstance(r, str) and r), None)
    return _s(a, "gen_ai.response.finish_reasons", "llm.finish_reason")


def _labels(rec: Record) -> str | None:
    """The call's dimensions: its resource's attributes (as the ``otel`` events' calls have
    them) and the span's identity attributes."""
    dims: dict[str, object] = dict(rec.resource)
    for k, v in rec.attrs.items():
        if k.startswith(_IDENTITY) or k == "organization.id":
            dims[k] = v
    return labels_text(dims)


# -- what was said -----------------------------------------------------------------------


def _parts_text(parts: object) -> str | None:
    """The text of a GenAI message's ``parts`` (or a content string)."""
    if isinstance(parts, str):
        return parts
    if not isinstance(parts, list):
        return None
    texts: list[str] = [
        p["content"]
        for p in parts
        if isinstance(p, dict)
        and p.get("type", "text") == "text"
        and isinstance(p.get("content"), str)
    ]
    return "".join(texts) if texts else None


def _genai_messages(value: object) -> list[dict[str, Any]] | None:
    parsed = json_text(value)
    if isinstance(parsed, dict):  # one message, or {"messages": [...]}
        parsed = parsed.get("messages", [parsed])
    if not isinstance(parsed, list):
        return None
    return [m for m in parsed if isinstance(m, dict)]


def _oi_messages(a: Mapping[str, Any], prefix: str) -> list[dict[str, Any]] | None:
    """OpenInference's (or OpenLLMetry's older) flattened messages as GenAI-like messages:
    ``{role, text, tool_calls: [(id, name, arguments)]}``."""
    found = _indexed(a, prefix)
    if not found:
        return None
    out = []
    for m in found:
        msg = {k.removeprefix("message."): v for k, v in m.items()}
        text = msg.get("content")
        if not isinstance(text, str):
            contents = _indexed(msg, "contents.")
            pieces = [as_str(c.get("message_content.text")) for c in contents]
            text = "".join(p for p in pieces if p) if any(pieces) else None
        calls = [
            (
                _s(c, "tool_call.id", "id"),
                _s(c, "tool_call.function.name", "name"),
                c.get("tool_call.function.arguments", c.get("arguments")),
            )
            for c in _indexed(msg, "tool_calls.")
        ]
        out.append({"role": as_str(msg.get("role")), "text": text, "tool_calls": calls})
    return out


def _normal(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """GenAI ``{role, parts}`` messages as ``{role, text, tool_calls}``."""
    out = []
    for m in messages:
        parts = m.get("parts")
        if "parts" not in m and ("content" in m or "tool_calls" in m):  # older JSON shape
            parts = m.get("content")
        calls = [
            (as_str(p.get("id")), as_str(p.get("name")), p.get("arguments"))
            for p in (parts if isinstance(parts, list) else [])
            if isinstance(p, dict) and p.get("type") == "tool_call"
        ]
        out.append({"role": as_str(m.get("role")), "text": _parts_text(parts), "tool_calls": calls})
    return out


def _event_attr(rec: Record, event: str, key: str) -> object:
    for e in rec.events:
        if e.name == event and key in e.attrs:
            return e.attrs[key]
    return None


def _side(rec: Record, side: str, older: str) -> list[dict[str, Any]] | None:
    """One side of a call's span (``side`` input or output; ``older`` prompt or completion):
    the GenAI messages (the attribute, else the older span events), else OpenInference's and
    the older flattened attributes."""
    a = rec.attrs
    raw = a.get(f"gen_ai.{side}.messages") or _event_attr(
        rec, f"gen_ai.content.{older}", f"gen_ai.{older}"
    )
    parsed = _genai_messages(raw)
    found = _normal(parsed) if parsed is not None else None
    return found or _oi_messages(a, f"llm.{side}_messages.") or _oi_messages(a, f"gen_ai.{older}.")


def _said(rec: Record) -> _Said:
    """What a call's span recorded of its prompt and reply (see the module's docstring)."""
    said = _Said()
    ins = _side(rec, "input", "prompt")
    if ins:
        said.prompt_role, said.prompt = ins[-1]["role"], ins[-1]["text"]
    outs = _side(rec, "output", "completion")
    if outs:
        replies = [m for m in outs if m["role"] in ("assistant", "model", None)]
        texts = [m["text"] for m in replies if isinstance(m["text"], str)]
        said.reply = "".join(texts)
        said.tool_calls = [c for m in replies for c in m["tool_calls"]]
    return said


# -- the spans of a file -----------------------------------------------------------------


class Spans:
    """The spans of one file: collected as they come, built into calls and messages when the
    file has been read (see the module's docstring)."""

    def __init__(self, low: Lowering) -> None:
        self.low = low
        self.nodes: dict[tuple[str, str], _Node] = {}

    def add(self, record: Record) -> None:
        """One span record (any order)."""
        if record.trace_id is None or record.span_id is None:
            self.low.reject(
                record.line,
                "a span without a traceId or spanId (no identity for it)",
                record.name,
            )
            return
        key = (record.trace_id, record.span_id)
        if key in self.nodes:
            self.low.skip("repeated span")
            return
        role = role_of(record)
        if role == TOOL and _tool_name(record) is None:
            self.low.reject(record.line, "a tool span that names no tool", record.name)
            return
        if role in (AGENT, OTHER):
            self.low.skip(_kind_word(record))
        self.nodes[key] = _Node(record, role)

    def finish(self) -> None:
        """Build the calls and messages, a session at a time in its spans' start order, and
        hand them to the Lowering."""
        self._place()
        by_session: dict[str, list[_Node]] = defaultdict(list)
        tooled = {t for (t, _), n in self.nodes.items() if n.role == TOOL}
        for node in self.nodes.values():
            if node.role in (CALL, TOOL):
                assert node.session is not None
                by_session[node.session].append(node)
        for session in sorted(by_session):
            nodes = sorted(by_session[session], key=_order)
            _Session(self.low, session, tooled).build(nodes)

    def _place(self) -> None:
        """Each span's session, turn and agent, from itself or its ancestors in its trace."""
        by_trace: dict[str, list[_Node]] = defaultdict(list)
        for (trace, _), node in self.nodes.items():
            by_trace[trace].append(node)
        for trace, nodes in by_trace.items():
            named = sorted((n for n in nodes if _own_session(n.rec)), key=_order)
            fallback = _own_session(named[0].rec) if named else None
            for node in nodes:
                chain = self._ancestors(node)
                node.session = (
                    next((s for s in map(_own_session, (n.rec for n in chain)) if s), None)
                    or fallback
                    or trace
                )
                agent = next((n for n in chain if n.role == AGENT), None)
                node.turn = f"{trace}:{agent.rec.span_id}" if agent else trace
                names = (_s(n.rec.attrs, "gen_ai.agent.name", "agent.name") for n in chain)
                node.agent = next((name for name in names if name), None)

    def _ancestors(self, node: _Node) -> list[_Node]:
        """The span and its ancestors in the file, nearest first (a loop of parents ends)."""
        chain, seen = [node], {node.rec.span_id}
        trace = node.rec.trace_id
        parent = node.rec.parent_span_id
        while trace is not None and parent is not None and parent not in seen:
            up = self.nodes.get((trace, parent))
            if up is None:
                break
            chain.append(up)
            seen.add(parent)
            parent = up.rec.parent_span_id
        return chain


def _own_session(rec: Record) -> str | None:
    return _s(rec.attrs, *_SESSION_KEYS)


def _order(node: _Node) -> tuple[int, int, str]:
    """A session's order: by start (a span with no time last), a call before the tool runs
    that start with it."""
    at = _micros(node)
    return (
        at if at is not None else 1 << 62,
        0 if node.role == CALL else 1,
        node.rec.span_id or "",
    )


def _micros(node: _Node) -> int | None:
    """The span's start in microseconds since the epoch."""
    t = node.rec.time
    return None if t is None else (t - _EPOCH) // _MICRO


def _tool_name(rec: Record) -> str | None:
    a = rec.attrs
    name = _s(a, "gen_ai.tool.name", "tool.name", "traceloop.entity.name")
    if name is None and rec.name and rec.name.startswith("execute_tool "):
        name = rec.name.removeprefix("execute_tool ").strip() or None
    return name


class _Session:
    """One session's spans, in start order, as calls and messages."""

    def __init__(self, low: Lowering, session: str, tooled: set[str]) -> None:
        self.low = low
        self.talk = Conversation(session)
        self.last = 0  # the last place given
        self.asked: dict[str, str | None] = {}  # tool call id -> the call that asked for it
        self.run: set[str] = set()  # tool call ids a tool span ran
        self.tooled = tooled  # the traces whose tool runs are spans of their own

    def place(self, base: int | None, k: int) -> int:
        """The ``k``-th place of a span starting at ``base`` (after the last place given)."""
        at = max((base or 0) * _SLOTS + min(k, _SLOTS - 1), self.last + 1)
        self.last = at
        return at

    def build(self, nodes: list[_Node]) -> None:
        tools = [n for n in nodes if n.role == TOOL]
        for n in tools:
            use = _s(n.rec.attrs, "gen_ai.tool.call.id", "tool.id", "tool_call.id")
            if use:
                self.run.add(use)
        latest: _Node | None = None
        for node in nodes:
            if node.role == CALL:
                self.call(node)
                latest = node
            else:
                self.tool(node, latest)

    # -- a model call ----------------------------------------------------------------------

    def call(self, node: _Node) -> None:
        rec, a = node.rec, node.rec.attrs
        node.said = _said(rec)
        self.talk.turn = node.turn
        native = f"{rec.trace_id}:{rec.span_id}"
        node.call_id = self.low.call_id(native)
        call = self.talk.call(
            native,
            response_id=_s(a, "gen_ai.response.id"),
            line=rec.line,
            ts=rec.time,
            seq=_micros(node),
            agent_id=node.agent,
            model=_s(a, "gen_ai.response.model", "gen_ai.request.model", "llm.model_name"),
            provider=_provider(a),
            app=_s(rec.resource, "service.name"),
            finish_reason_raw=_finish(a) or ("error" if rec.status == "error" else None),
            http_status=as_int(a.get("http.response.status_code"), limit=1000),
            n_records=1,
        )
        call.update(_tokens(a))
        call.labels = _labels(rec)
        cost = stated_cost(a.get("llm.cost.total"))
        if cost is not None:
            call.cost_usd, call.cost_basis = cost, "reported"
        if rec.time and rec.end and rec.end >= rec.time:
            call.duration_ms = (rec.end - rec.time).total_seconds() * 1000
        messages = self.said(node, call)
        self.low.add_call(call)
        for m in messages:
            self.low.add_message(m)

    def said(self, node: _Node, call: CallRow) -> list[Message]:
        """A call's prompt (a new turn's), its reply's text and the tool calls it names that
        no tool span ran; the call's measures of its reply."""
        said, ts, base = node.said, node.rec.time, _micros(node)
        out: list[Message] = []
        if said.prompt_role == "user" and said.prompt is not None:
            row = self.talk.prompt(said.prompt, ts=ts, records=0)
            row.idx = self.place(base, len(out))
            out.append(row)
        if said.reply is not None:
            call.content_chars, call.visible_chars = text_measure(said.reply)
            if said.reply:
                row = self.talk.said(said.reply, ts=ts, call_id=node.call_id)
                row.idx = self.place(base, len(out))
                out.append(row)
        if said.tool_calls is not None:
            call.tool_call_count = len(said.tool_calls)
            for use, name, args in said.tool_calls:
                if use:
                    self.asked[use] = node.call_id
                if (use and use in self.run) or node.rec.trace_id in self.tooled:
                    continue  # its tool span says it (read from another file, perhaps)
                row = self.talk.tool_call(
                    name,
                    json_text(args),
                    use,
                    ts=ts,
                    call_id=node.call_id,
                    at=self.place(base, len(out)),
                )
                out.append(row)
        return out

    # -- a tool run ------------------------------------------------------------------------

    def tool(self, node: _Node, latest: _Node | None) -> None:
        rec, a = node.rec, node.rec.attrs
        self.talk.turn = node.turn
        use = _s(a, "gen_ai.tool.call.id", "tool.id", "tool_call.id")
        asked = self.asked.get(use) if use else None
        call_id = asked or (latest.call_id if latest else None)
        args = _first(a, "gen_ai.tool.call.arguments", "input.value", "tool_arguments")
        if args is None:
            args = a.get("traceloop.entity.input")
        base = _micros(node)
        row = self.talk.tool_call(
            _tool_name(rec),
            json_text(args),
            use or rec.span_id,
            ts=rec.time,
            call_id=call_id,
            records=1,
            at=self.place(base, 0),
        )
        if args is None:  # not recorded: no arguments to compare
            row.tool_args_hash = None
        self.low.add_message(row)
        result = _first(a, "gen_ai.tool.call.result", "output.value", "tool_response")
        if result is None:
            result = a.get("traceloop.entity.output")
        failed = rec.status == "error"
        if result is None and failed:
            result = rec.status_message or _s(a, "error.type", "exception.message") or "error"
        if result is None:
            return
        self.low.add_message(
            self.talk.tool_result(
                json_text(result),
                True if failed else None,
                ts=rec.end or rec.time,
                text=result,
                use_id=use or rec.span_id,
                name=_tool_name(rec),
                call_id=call_id,
                at=self.place(base, 1),
            )
        )
