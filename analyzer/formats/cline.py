"""Cline SDK / CLI sessions: ``~/.cline/data/sessions/<id>/<id>.messages.json``.

The layout is in the real session the tests read (``../shared/samples/more-formats/cline-roo``,
Cline's own fixture ``sdk/packages/core/fixtures/session/session.messages.json``) and in Cline's
source (cline/cline, ``sdk/packages``): one JSON object ``{version, updated_at, agent,
sessionId, messages: [...], system_prompt}``; each message is ``MessageWithMetadata``
(``shared/src/llms/messages.ts``): ``{id, role: "user"|"assistant", content: string | blocks,
ts (epoch ms), modelInfo: {id, provider, family}, metrics: {inputTokens, outputTokens,
cacheReadTokens, cacheWriteTokens, cost}}``. Blocks are Anthropic-shaped: ``text``,
``thinking``, ``redacted_thinking``, ``tool_use {id, name, input}``, ``tool_result
{tool_use_id, name, content, is_error?}``, ``file {path, content}``, ``image``.

* **One call per assistant message.** ``metrics`` is what the agent runtime
  (``agents/src/agent-runtime.ts``, ``usageDelta``) wrote: the growth of the run's usage over
  that model turn, so per call. The usage comes from ``normalizeUsage`` (``llms/src/providers/
  ai-sdk.ts``): ``inputTokens`` is the AI SDK's ``inputTokens.total``, the whole prompt, of
  which ``cacheReadTokens`` and ``cacheWriteTokens`` are parts (its own price fallback bills
  ``input - cacheRead - cacheWrite`` at the input price); ``cacheRead <= input`` in every real
  message. So input tokens = ``inputTokens``, cache reads = ``cacheReadTokens``, cache writes =
  ``cacheWriteTokens``, output = ``outputTokens``, reasoning = ``reasoningTokenCount`` (when
  written: part of the output, as the AI SDK counts it - from source only). An older SDK
  handler (``handlers/anthropic-base.ts``) passed Anthropic's ``input_tokens``, the fresh part
  only: where cache reads and writes exceed ``inputTokens`` that reading is the only one
  possible, and the prompt is read as their sum (unsure which versions wrote it; none real).
* ``cost`` is Cline's own figure in USD for the turn (the gateway's reported cost, else its
  list price): ``cost_basis = 'reported'``. A turn costing 0 has no ``cost``.
* ``modelInfo.id`` is the model; ``modelInfo.provider`` the provider, except ``cline`` (Cline's
  own gateway, which sells models under OpenRouter's ids): stored as no provider, so the list
  price is OpenRouter's for that id.
* A user message with text starts a turn (its ``file`` blocks are the files it attached),
  except a text starting ``[SYSTEM]``, which the runtime sends on its own (its XML tool-call
  reminder): that is the agent's. ``tool_result`` blocks are tool results (paired with the
  ``tool_use`` blocks of the assistant by id); ``is_error`` absent means no error.
* Session: ``sessionId`` (else the file's name). No project: the working directory is in the
  session manifest beside it (``<id>.json``; ``session.json`` in the fixture). ``agent``
  (``lead``) and the fork and team fields of the manifest are not read.
* **The manifest** (``{version, session_id, source, pid, started_at, ended_at, exit_code,
  status, model, cwd, ..., messages_path}``, ``SessionManifest`` in ``core/src/session``) says
  how the run ended: it is read as the session's run (``runs``: ``status`` as exit status -
  ``completed``, ``failed``, ``cancelled``, ``running`` -, ``exit_code`` not 0 as an error, the
  time from ``started_at`` to ``ended_at``, the model); it holds no call.

A reject's line is the message's number in ``messages`` (the first 1).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from analyzer.errors import InputError
from analyzer.ingest.base import Head, LoadContext, LoadResult
from analyzer.ingest.conversation import Conversation
from analyzer.ingest.lowering import Lowering, brief, text_measure
from analyzer.ingest.reading import read_json_document
from analyzer.ingest.runs import outcome
from analyzer.ingest.spec import FormatSpec
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

APP = "cline"
_GATEWAYS = {"cline"}  # providers that are Cline's own gateway (OpenRouter's model ids)
_DOC_START = re.compile(rb"^\s*\{")
_DOC_KEYS = tuple(
    re.compile(rb'"%s"\s*:' % k) for k in (b"version", b"updated_at", b"sessionId", b"messages")
)
# A session's manifest (``<id>.json`` beside ``<id>.messages.json``): how the run ended.
_MANIFEST_KEYS = tuple(
    re.compile(rb'"%s"\s*:' % k)
    for k in (b"version", b"session_id", b"started_at", b"status", b"messages_path")
)


def sniff(head: Head) -> bool:
    """One JSON object whose head holds the keys a session messages file (or the session's
    manifest) starts with."""
    data = head.utf8
    if not _DOC_START.match(data):
        return False
    return all(k.search(data) for k in _DOC_KEYS) or all(k.search(data) for k in _MANIFEST_KEYS)


def _tokens(raw: object) -> dict[str, Any]:
    """``metrics`` as the store's token columns (see the module's docstring): Cline's own
    shape, not a provider's usage object, so not ``usage.token_counts``."""
    m = as_dict(raw)
    inp, out = as_int(m.get("inputTokens")), as_int(m.get("outputTokens"))
    read, write = as_int(m.get("cacheReadTokens")), as_int(m.get("cacheWriteTokens"))
    if inp is not None and (read or 0) + (write or 0) > inp:  # Anthropic's fresh part only
        inp += (read or 0) + (write or 0)
    cols = {
        "input_tokens": inp,
        "cached_input_tokens": read if inp is not None else None,
        "cache_write_tokens": write if inp is not None else None,
        "output_tokens": out,
        "reasoning_tokens": as_int(m.get("reasoningTokenCount")),
    }
    return {k: v for k, v in cols.items() if v is not None}


def _blocks(content: object) -> list[dict[str, Any]]:
    """A message's content as blocks (a string is one text block)."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in as_list(content) if isinstance(b, dict)]


def _result_text(content: object) -> str:
    """What a tool returned as text: a string, else the text of its blocks, else JSON."""
    if isinstance(content, str):
        return content
    texts = [as_text(b.get("text")) for b in as_list(content) if isinstance(b, dict)]
    return "".join(texts) or brief(content, limit=10**9)


class _Reader:
    def __init__(self, ctx: LoadContext) -> None:
        name = Path(ctx.source.path).name
        self.talk = Conversation(name.split(".", 1)[0] or name)  # the session's messages
        self.ctx = ctx
        self.low = Lowering(ctx, SPEC.name, SPEC.call_prefix)
        self.seq = 0

    def message(self, n: int, m: dict[str, Any]) -> None:
        role = m.get("role")
        mid = as_str(m.get("id")) or f"#{n}"
        ts = parse_time(m.get("ts"), self.ctx.options.tz)
        if role == "assistant":
            self.assistant(n, mid, ts, m)
        elif role == "user":
            self.user(mid, ts, m)
        else:
            self.low.reject(n, "a message whose role is neither user nor assistant", brief(m))

    def user(self, mid: str, ts: Any, m: dict[str, Any]) -> None:
        blocks = _blocks(m.get("content"))
        text = "".join(as_text(b.get("text")) for b in blocks if kind_of(b) == "text")
        results = [b for b in blocks if kind_of(b) == "tool_result"]
        records = 1
        if text or (not results and any(kind_of(b) in ("file", "image") for b in blocks)):
            agent = text.lstrip().startswith("[SYSTEM]")
            if not agent:
                self.talk.turn = f"{self.talk.session}:{mid}"
            self.low.add_message(self.talk.prompt(text, ts=ts, agent=agent, records=records))
            records = 0
        for b in results:
            content = b.get("content")
            flag = b.get("is_error", False)
            self.low.add_message(
                self.talk.tool_result(
                    content,
                    flag if isinstance(flag, bool) else None,
                    ts=ts,
                    text=_result_text(content),
                    use_id=as_str(b.get("tool_use_id")),
                    name=as_str(b.get("name")),
                    records=records,
                )
            )
            records = 0
        if records:  # nothing the store keeps (no text, no result)
            self.low.skip("empty_user_message")

    def assistant(self, n: int, mid: str, ts: Any, m: dict[str, Any]) -> None:
        blocks = _blocks(m.get("content"))
        text = "".join(as_text(b.get("text")) for b in blocks if kind_of(b) == "text")
        thinking = sum(len(as_text(b.get("thinking"))) for b in blocks if kind_of(b) == "thinking")
        tools = [b for b in blocks if kind_of(b) == "tool_use"]
        chars, visible = text_measure(text)
        info = as_dict(m.get("modelInfo"))
        provider = as_str(info.get("provider"))
        metrics = as_dict(m.get("metrics"))
        native = f"{self.talk.session}:{mid}"
        call_id = self.low.call_id(native)
        self.seq += 1
        call = self.talk.call(
            native,
            response_id=None,
            line=n,
            ts=ts,
            seq=self.seq,
            model=as_str(info.get("id")),
            provider=None if provider in _GATEWAYS else provider,
            app=APP,
            **_tokens(metrics),
            output_final=True if metrics else None,
            content_chars=chars,
            visible_chars=visible,
            reasoning_chars=thinking,
            tool_call_count=len(tools),
            n_records=1,
        )
        cost = stated_cost(metrics.get("cost"))
        if cost is not None:
            call.cost_usd, call.cost_basis = cost, "reported"
        self.low.add_call(call)
        if chars:
            self.low.add_message(self.talk.said(text, ts=ts, call_id=call_id))
        for b in tools:
            self.low.add_message(
                self.talk.tool_call(
                    as_str(b.get("name")),
                    b.get("input"),
                    as_str(b.get("id")),
                    ts=ts,
                    call_id=call_id,
                )
            )


def _load_session(ctx: LoadContext, doc: dict[str, Any]) -> LoadResult:
    reader = _Reader(ctx)
    reader.talk.session = as_str(doc.get("sessionId")) or reader.talk.session
    for n, m in enumerate(doc["messages"], 1):
        reader.low.read()
        if isinstance(m, dict):
            reader.message(n, m)
        else:
            reader.low.reject(n, "a message that is not an object", brief(m))
    return reader.low.finish()


def _load_manifest(ctx: LoadContext, doc: dict[str, Any]) -> LoadResult:
    """The session manifest: how the run ended (one record, the run), no call."""
    low = Lowering(ctx, SPEC.name, SPEC.call_prefix)
    low.read()
    session = as_str(doc.get("session_id")) or Path(ctx.source.path).name.split(".", 1)[0]
    status = as_str(doc.get("status"))
    code = as_int(doc.get("exit_code"))
    started, ended = parse_time(doc.get("started_at")), parse_time(doc.get("ended_at"))
    low.add_run(
        {
            "session_id": session,
            "line": 1,
            "agent": "cline",
            "model": as_str(doc.get("model")),
            "exit_status": status,
            "outcome": outcome(status, None if code is None else code != 0),
            "is_error": None if code is None else code != 0,
            "duration_ms": (ended - started).total_seconds() * 1000
            if started is not None and ended is not None
            else None,
            "n_records": 1,
        }
    )
    low.result.note = "a session manifest: the run's verdict, its calls are in .messages.json"
    return low.finish()


def load(ctx: LoadContext) -> LoadResult:
    doc = read_json_document(ctx.source)
    if isinstance(doc, dict) and isinstance(doc.get("messages"), list):
        return _load_session(ctx, doc)
    if isinstance(doc, dict) and "session_id" in doc and "messages" not in doc:
        return _load_manifest(ctx, doc)
    raise InputError("a JSON document without a list of messages", ctx.source.display)


# What this module is to the registry (analyzer.formats).
SPEC = FormatSpec(
    name="cline",
    title="Cline SDK/CLI session messages (JSON)",
    kind="log",
    sniff_order=54,  # after Gemini CLI (50), before saved conversations (90) take the JSON
    call_prefix="cline",
    sniff=sniff,
    load=load,
    # Files of its layout that hold no call (named as such, never counted as input not read).
    own_files=("sessions.index.json",),
)
