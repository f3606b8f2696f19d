"""Classic Cline / Roo Code task logs: ``<globalStorage>/<extension>/tasks/<id>/ui_messages.json``.

What the VS Code extensions show in their chat, saved as one JSON array of ``ClineMessage``
(cline/cline ``src/shared/ExtensionMessage.ts``; Roo Code and Kilo Code keep Cline's shape):
``{ts (epoch ms), type: "say"|"ask", say|ask, text, images?, partial?, reasoning?,
conversationHistoryIndex?, modelInfo?: {modelId, providerId, mode}}``. No real task file could
be copied (those found are unlicensed; ``../shared/samples/more-formats/README.md``, section
6): the fixtures follow that README and the extensions' source.

* **One call per ``say: "api_req_started"``**, at its ``ts``. Its ``text`` is JSON text of
  ``ClineApiReqInfo`` ``{request, tokensIn, tokensOut, cacheWrites, cacheReads, cost,
  cancelReason, streamingFailedMessage, retryStatus}``, which the task loop writes before the
  request and fills in from the stream's usage (``updateApiReqMsg``); Roo/Kilo write
  ``{apiProtocol}`` first. A request that never got usage has no tokens (unpriced, unless a
  cost is given). ``cancelReason`` ``user_cancelled`` makes the call cancelled;
  ``streaming_failed``, ``retries_exhausted`` or a ``streamingFailedMessage`` an error; an
  ``ask: "api_req_failed"`` after it (the request failed before streaming) an error too.
* **Tokens.** Cline writes the sum of its provider's usage chunks. Its Anthropic and
  OpenRouter handlers (``src/core/api/providers``) pass the fresh part only (OpenRouter's
  ``prompt_tokens - cached_tokens``), so the prompt is ``tokensIn + cacheWrites +
  cacheReads`` (a real Anthropic file shows ``tokensIn: 0, cacheWrites: 11145``). Its
  OpenAI-compatible handler (provider ``openai``) passes ``prompt_tokens`` whole, with
  ``cacheReads`` a part of it and ``cacheWrites`` = DeepSeek's ``prompt_cache_miss_tokens``
  (also part of it, not a cache write): for that provider the prompt is ``tokensIn`` and no
  cache write is read. Other providers were not all checked: they are read as disjoint (an
  inclusive one would be over-counted by its cache reads). Roo Code (a record with
  ``apiProtocol``) writes ``calculateApiCost*().totalInputTokens``: the whole prompt for both
  protocols (``input + cacheWrites + cacheReads`` for Anthropic, ``prompt_tokens`` for OpenAI;
  Roo's ``src/shared/cost.ts``); older Roo wrote Anthropic's fresh part, so a ``tokensIn``
  below ``cacheReads + cacheWrites`` is read as the fresh part (an older Roo request with more
  fresh than cached tokens is then under-counted: no version is recorded). ``tokensOut`` is
  the output; ``reasoningTokens`` is read when present (part of the output).
* ``cost`` is the extension's figure in USD for the request (the provider's reported cost,
  else its own list-price reckoning): ``cost_basis = 'reported'``. A cost of 0 is read as none.
* Model: ``modelId`` / ``providerId`` of the request's info when present, else the
  ``modelInfo`` of the request's message or of the messages that follow it, else the last
  model seen; else none (Roo writes no model: its calls are priced only by their cost).
  Provider ``cline`` and ``openrouter`` (OpenRouter's model ids) and the providers whose ids
  are not genai-prices' are stored as no provider.
* Turns: ``say: "task"`` (Cline), the first message when it is ``say: "text"`` (older Cline,
  Roo: the task), ``user_feedback`` and ``user_feedback_diff`` start a turn.
* Content of the request before them: ``say: "text"`` (the model's text, a message),
  ``reasoning`` (its thinking, measured on the call). Tool calls (messages): ``say``/``ask``
  ``tool`` (JSON text ``{tool, path, ...}``: the name is ``tool``, the arguments the rest,
  without Roo's ``toolCallId``, which is the call's id when given), ``ask: "command"``
  (``execute_command``, the command), ``ask: "use_mcp_server"`` (``mcp:<server>/<tool>``),
  ``say: "completion_result"`` (``attempt_completion``), ``ask: "followup"``
  (``ask_followup_question``), ``ask: "plan_mode_respond"``. Results: ``command_output``
  (paired with the last command) and ``mcp_server_response`` (with the last MCP call); the
  results of file tools are not in this file (they are in ``api_conversation_history.json``,
  not read). Every other kind (``api_req_finished``, ``checkpoint_created``, ``resume_task``,
  ``deleted_api_reqs``, ``subagent_usage``, Roo's ``condense_context``...) is skipped by kind:
  the costs in the last three (deleted requests, sub-agents, condensing) are not read.
* Session: the task folder's name (the task id), else the file's name. Project: none.

A reject's line is the message's number in the array (the first 1): the file is one line.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson

from analyzer.errors import InputError
from analyzer.ingest.base import Head, LoadContext, LoadResult
from analyzer.ingest.conversation import Conversation
from analyzer.ingest.lowering import Lowering, brief
from analyzer.ingest.reading import read_json_document
from analyzer.ingest.rows import CallRow
from analyzer.ingest.spec import FormatSpec
from analyzer.ingest.values import as_dict, as_int, as_str, as_text, parse_time, stated_cost

# The VS Code extensions (publisher.name, as VS Code lowercases it for globalStorage).
EXTENSIONS = {
    "saoudrizwan.claude-dev": "cline",
    "rooveterinaryinc.roo-cline": "roo-code",
    "kilocode.kilo-code": "kilo-code",
}
# Cline's provider ids that are genai-prices' ids (others are stored as no provider).
_PROVIDERS = {
    "anthropic": "anthropic",
    "openai-native": "openai",
    "gemini": "google",
    "deepseek": "deepseek",
}
_INCLUSIVE = {"openai"}  # Cline providers whose tokensIn is the whole prompt (see above)
_TURN_KINDS = {"task", "user_feedback", "user_feedback_diff"}
_ERROR_REASONS = {"streaming_failed", "retries_exhausted"}
_TOOL_ASKS = {"followup": "ask_followup_question", "plan_mode_respond": "plan_mode_respond"}
_START = re.compile(rb'^\s*\[\s*\{\s*"(?:ts|type|say|ask)"\s*:')
_FIRST = (re.compile(rb'"ts"\s*:\s*\d'), re.compile(rb'"type"\s*:\s*"(?:say|ask)"'))


def sniff(head: Head) -> bool:
    """A JSON array whose first element has a numeric ``ts`` and ``type`` say or ask."""
    data = head.utf8
    if not _START.match(data):
        return False
    first = data[: data.find(b"}") + 1] if b"}" in data else data
    return all(p.search(first) for p in _FIRST)


def _tokens(info: dict[str, Any], provider: str | None) -> dict[str, Any]:
    """``ClineApiReqInfo``'s counts as the store's token columns (see the docstring)."""
    tin, out = as_int(info.get("tokensIn")), as_int(info.get("tokensOut"))
    reads, writes = as_int(info.get("cacheReads")) or 0, as_int(info.get("cacheWrites")) or 0
    if tin is None and out is None:
        return {}
    cols: dict[str, Any] = {
        "output_tokens": out,
        "reasoning_tokens": as_int(info.get("reasoningTokens")),
    }
    if tin is None:
        return {k: v for k, v in cols.items() if v is not None}
    if "apiProtocol" in info:  # Roo / Kilo: the whole prompt, unless below its cache counts
        whole = tin >= reads + writes
    elif provider in _INCLUSIVE:
        whole, writes = tin >= reads, 0
    else:
        whole = False
    cols["input_tokens"] = tin if whole else tin + reads + writes
    cols["cached_input_tokens"], cols["cache_write_tokens"] = reads, writes
    return {k: v for k, v in cols.items() if v is not None}


def _json_object(text: object) -> dict[str, Any] | None:
    if not isinstance(text, str):
        return None
    try:
        obj = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    return obj if isinstance(obj, dict) else None


class _Reader:
    def __init__(self, ctx: LoadContext) -> None:
        self.ctx = ctx
        self.low = Lowering(ctx, SPEC.name, SPEC.call_prefix)
        path = Path(ctx.source.path)
        # the task's messages (the session: the task folder's name, else the file's)
        self.talk = Conversation(path.parent.name if path.name == "ui_messages.json" else path.stem)
        self.app = next((a for e, a in EXTENSIONS.items() if e in path.parts), None)
        self.call: CallRow | None = None  # the request being read (added when done)
        # ... its provider id (where its own model is given) and its ``ClineApiReqInfo``
        self.provider: str | None = None
        self.info: dict[str, Any] = {}
        self.model: tuple[str | None, str | None] = (None, None)  # the last seen
        self.command: str | None = None  # the tool_use_id of the last command / MCP call
        self.mcp: str | None = None
        self.seq = 0

    def see_model(self, m: dict[str, Any]) -> None:
        info = as_dict(m.get("modelInfo"))
        model, provider = as_str(info.get("modelId")), as_str(info.get("providerId"))
        if model:
            self.model = (model, provider)
            if self.call is not None and self.call.model is None:
                self.call.model, self.provider = model, provider

    def flush(self) -> None:
        call, self.call = self.call, None
        if call is None:
            return
        provider = self.provider
        if call.model is None:
            call.model, provider = self.model
        call.provider = _PROVIDERS.get(provider or "")
        call.update(_tokens(self.info, provider))
        if call.output_tokens is not None:
            call.output_final = True
        self.low.add_call(call)

    def message(self, n: int, m: dict[str, Any]) -> None:
        mtype = m.get("type")
        kind = m.get(mtype) if mtype in ("say", "ask") else None
        if mtype not in ("say", "ask"):
            self.low.reject(n, "a message whose type is neither say nor ask", brief(m))
            return
        if not isinstance(kind, str):
            self.low.reject(n, f"a {mtype} message without its kind", brief(m))
            return
        ts = parse_time(m.get("ts"), self.ctx.options.tz)
        if mtype == "say" and kind == "api_req_started":
            self.request(n, ts, m)
            return
        self.see_model(m)
        text = m.get("text")
        if kind in _TURN_KINDS or (n == 1 and mtype == "say" and kind == "text"):
            self.prompt(m, ts, text)
        elif mtype == "say" and kind == "text":
            self.content(ts, text)
        elif mtype == "say" and kind == "reasoning" and self.call is not None:
            self.call.add(reasoning_chars=len(as_text(text)), n_records=1)
        elif mtype == "ask" and kind == "api_req_failed" and self.call is not None:
            if not self.call.cancelled:
                self.call.finish_reason_raw = "error"
            self.call.add(n_records=1)
        elif kind == "tool":
            args = _json_object(text)
            if args is None:
                self.low.skip("tool_without_json")
                return
            tid = as_str(args.pop("toolCallId", None))
            self.tool(ts, as_str(args.get("tool")), args, tid)
        elif mtype == "ask" and kind == "command":
            self.command = self.tool(ts, "execute_command", text)
        elif mtype == "ask" and kind == "use_mcp_server":
            args = _json_object(text) or {}
            server, tool = as_str(args.get("serverName")), as_str(args.get("toolName"))
            self.mcp = self.tool(ts, f"mcp:{server}/{tool}" if server or tool else "mcp", text)
        elif (mtype == "say" and kind == "completion_result") or (
            mtype == "ask" and kind in _TOOL_ASKS
        ):
            self.tool(ts, _TOOL_ASKS.get(kind, "attempt_completion"), text)
        elif kind == "command_output":
            self.result(ts, "execute_command", self.command, text)
        elif mtype == "say" and kind == "mcp_server_response":
            self.result(ts, None, self.mcp, text)
        else:
            self.low.skip(f"{mtype}_{kind}"[:60])

    def request(self, n: int, ts: Any, m: dict[str, Any]) -> None:
        info = _json_object(m.get("text"))
        if info is None:
            self.low.reject(n, "an api_req_started whose text is not a JSON object", brief(m))
            return
        self.flush()
        raw_ts = m.get("ts")
        ok = isinstance(raw_ts, int) and not isinstance(raw_ts, bool)
        native = f"{self.talk.session}:{raw_ts if ok else f'#{n}'}"
        self.seq += 1
        reason = as_str(info.get("cancelReason"))
        failed = reason in _ERROR_REASONS or bool(as_str(info.get("streamingFailedMessage")))
        self.call = self.talk.call(
            native,
            line=n,
            ts=ts,
            seq=self.seq,
            model=as_str(info.get("modelId")),
            app=self.app or ("roo-code" if "apiProtocol" in info else "cline"),
            content_chars=0,
            visible_chars=0,
            reasoning_chars=0,
            tool_call_count=0,
            cancelled=True if reason == "user_cancelled" else None,
            finish_reason_raw="error" if failed else None,
            n_records=1,
        )
        self.provider, self.info = as_str(info.get("providerId")), info
        cost = stated_cost(info.get("cost"))
        if cost is not None:
            self.call.cost_usd, self.call.cost_basis = cost, "reported"
        self.see_model(m)

    def call_ref(self) -> str | None:
        """The id of the call being built (None before the turn's first call)."""
        return self.low.call_id(str(self.call.native_id)) if self.call else None

    def prompt(self, m: dict[str, Any], ts: Any, text: object) -> None:
        self.flush()
        raw_ts = m.get("ts")
        turn = raw_ts if isinstance(raw_ts, int) else self.talk.idx + 1
        self.talk.turn = f"{self.talk.session}:{turn}"
        self.low.add_message(self.talk.prompt(text, ts=ts))

    def content(self, ts: Any, text: object) -> None:
        row = self.talk.said(text, ts=ts, call_id=self.call_ref(), records=1)
        if self.call is not None:
            self.call.add(content_chars=row.text_chars or 0, visible_chars=row.visible_chars or 0)
        self.low.add_message(row)

    def tool(self, ts: Any, name: str | None, args: object, tid: str | None = None) -> str:
        """A tool call's message; returns its id (else one of the place it is written at)."""
        tid = tid or f"{self.talk.session}#{self.talk.idx + 1}"
        if self.call is not None:
            self.call.add(tool_call_count=1)
        self.low.add_message(
            self.talk.tool_call(name, args, tid, ts=ts, call_id=self.call_ref(), records=1)
        )
        return tid

    def result(self, ts: Any, name: str | None, tid: str | None, text: object) -> None:
        self.low.add_message(
            self.talk.tool_result(
                as_text(text), None, ts=ts, text=text, use_id=tid, name=name, records=1
            )
        )


def load(ctx: LoadContext) -> LoadResult:
    doc = read_json_document(ctx.source)
    if not isinstance(doc, list):
        raise InputError("a JSON document that is not a list of task messages", ctx.source.display)
    reader = _Reader(ctx)
    for n, m in enumerate(doc, 1):
        reader.low.read()
        if isinstance(m, dict):
            reader.message(n, m)
        else:
            reader.low.reject(n, "a message that is not an object", brief(m))
    reader.flush()
    return reader.low.finish()


# What this module is to the registry (analyzer.formats).
SPEC = FormatSpec(
    name="cline_task",
    title="Cline / Roo Code task messages (ui_messages.json)",
    kind="log",
    sniff_order=55,  # after Cline's SDK sessions (54), before saved conversations (90)
    call_prefix="clinetask",
    sniff=sniff,
    load=load,
    # Files of its layout that hold no call (named as such, never counted as input not read).
    own_files=("task_metadata.json",),
)
