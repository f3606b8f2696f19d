"""Gemini CLI saved chats: ``~/.gemini/tmp/<project>/chats/session-*.json`` or ``.jsonl``.

Three layouts, all in the real sessions the tests read (``../shared/samples/more-formats/
gemini-cli``), and in Gemini CLI's own ``chatRecordingService.ts`` / ``chatRecordingTypes.ts``
(google-gemini/gemini-cli, ``packages/core/src/services``):

* **One JSON object** (2025, and 2026 with ``kind`` and ``toolCalls``): ``{sessionId,
  projectHash, startTime, lastUpdated, [kind], messages: [...]}``. ``content`` is a string, or
  a list of parts ``{text}``.
* **JSON Lines** (2026): a header line ``{sessionId, projectHash, startTime, lastUpdated,
  kind}``, message lines, ``{"$set": {...}}`` metadata updates and ``{"$rewindTo": id}``.
  Gemini CLI appends a message again each time it changes it (its tokens arrive, its tool
  calls are added or finish): **the same ``id`` is written several times**, and its own reader
  keeps the last. Here the copies of a message are one call (or one user message): the last
  copy wins and every line is one of its records, so tokens are never counted twice. A
  message's copies follow each other (only the last message is ever rewritten): a copy written
  again after another message is a duplicate (a ``gemini`` one, through ``Lowering``) or
  skipped (``message_written_again``). Resuming a 2025 chat copies it into a new ``.jsonl``
  (the same session and ids): its calls there are duplicates of the ``.json``'s. A ``$set``
  may carry the whole ``messages`` list again (history masking, a compression summary): those
  messages were written on their own lines, so it is skipped like every ``$set``. Messages
  after a ``$rewindTo`` left the conversation but were still sent and billed: they are kept.

Each ``gemini`` message is one model response, one call. ``tokens`` is the response's
``usageMetadata`` as Gemini CLI's ``recordMessageTokens`` copies it: ``input`` =
``promptTokenCount`` (the whole prompt; ``cached`` = ``cachedContentTokenCount`` is part of it,
and ``cached <= input`` in every real message), ``output`` = ``candidatesTokenCount``,
``thoughts`` = ``thoughtsTokenCount``, ``tool`` = ``toolUsePromptTokenCount``, ``total`` =
``totalTokenCount`` = input + output + thoughts + tool (true of every real message). Mapped as
genai-prices' own extractor for the Gemini API maps ``usageMetadata``: input tokens = ``input +
tool``, cache reads = ``cached``, output = ``output + thoughts`` (thinking is billed as output),
reasoning = ``thoughts``. (``tool`` is 0 in every real message: that it counts as prompt is
genai-prices' reading, not seen here.) No cost is written: list prices give the estimate.

* ``model`` is the message's; the provider is ``google`` (Gemini CLI may reach the model
  through Vertex AI: its list prices are the same). The time of a call is its message's
  ``timestamp``, taken when the response was recorded (its ``thoughts`` carry earlier times).
* ``thoughts`` (``{subject, description}`` summaries) measure the call's reasoning; ``content``
  its text; ``toolCalls`` (``id``, ``name``, ``args``, ``result``, ``status``) its tool calls.
  A tool call's ``result`` is Gemini's ``functionResponse`` parts: what the tool returned
  (``response``, without the call's own id) is hashed, so a poll is told from a loop;
  ``status`` ``error`` or ``cancelled`` makes it an error, ``success`` not. The 2025 layout
  kept no tool calls: its calls are all text, or thinking only.
* A ``user`` message starts a turn, except Gemini CLI's own "Please continue." (it sends
  ``System: Please continue.`` after an invalid stream, and ``Please continue.`` when its
  next-speaker check says the model should go on): that is the agent's, not the user's.
* ``info``, ``error`` and ``warning`` messages are Gemini CLI's notes to the user ("Request
  cancelled."): skipped by kind. (An ``error`` message may stand for a failed request, but the
  log does not tie it to one: unsure, and none is in the real files.)
* Session: ``sessionId`` (else the file's name). Project: the folder under ``.gemini/tmp``
  (newer Gemini CLI names it after the project folder, older ones by the hash), else
  ``projectHash`` (a SHA-256 of the project's path). A ``kind: "subagent"`` chat (kept in
  ``chats/<parent session>/``) is an agent of that parent - from Gemini CLI's source only: no
  real sub-agent chat was seen.

A reject's line is the file's line (JSON Lines) or the message's number (one JSON object).
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from analyzer.errors import InputError
from analyzer.ingest.base import Head, LoadContext, LoadResult
from analyzer.ingest.conversation import Conversation
from analyzer.ingest.jsonl import head_objects, json_lines
from analyzer.ingest.lowering import Lowering, brief, text_measure
from analyzer.ingest.reading import read_json_document
from analyzer.ingest.rows import CallRow
from analyzer.ingest.spec import FormatSpec
from analyzer.ingest.usage import token_counts
from analyzer.ingest.values import as_dict, as_int, as_list, as_str, as_text, kind_of, parse_time

APP = "gemini-cli"
PROVIDER = "google"
# The prompts Gemini CLI sends on its own to make the model go on (client.ts).
_AGENT_PROMPTS = {"Please continue.", "System: Please continue."}
_TOOL_ERROR = {"success": False, "error": True, "cancelled": True}
_DOC_START = re.compile(rb"^\s*\{")
_DOC_KEYS = (re.compile(rb'"sessionId"\s*:'), re.compile(rb'"projectHash"\s*:'))
_DOC_BODY = re.compile(rb'"messages"\s*:|"type"\s*:\s*"gemini"')


def _is_header(obj: dict[str, Any]) -> bool:
    return isinstance(obj.get("sessionId"), str) and isinstance(obj.get("projectHash"), str)


def sniff(head: Head) -> bool:
    data = head.utf8
    # One JSON object (or the header line of JSON Lines, and a message after it).
    if _DOC_START.match(data) and all(k.search(data) for k in _DOC_KEYS) and _DOC_BODY.search(data):
        return True
    # JSON Lines: its header line, or (the header lost) a reply of the model.
    return any(
        _is_header(obj) or (kind_of(obj) == "gemini" and isinstance(obj.get("id"), str))
        for obj in head_objects(head)
    )


def _is_document(head: Head) -> bool:
    """One JSON object (indented, as Gemini CLI writes it, or on one line), not JSON Lines."""
    first = head.utf8.lstrip(b"\xef\xbb\xbf \t\r\n").split(b"\n", 1)[0].strip()
    if first == b"{":
        return True
    try:
        obj = orjson.loads(first)
    except orjson.JSONDecodeError:
        return False
    return isinstance(obj, dict) and "messages" in obj


def _text(content: object) -> str:
    """The text of a ``PartListUnion``: a string, a part, or a list of them."""
    if isinstance(content, str):
        return content
    parts = [content] if isinstance(content, dict) else as_list(content)
    return "".join(p if isinstance(p, str) else as_text(as_dict(p).get("text")) for p in parts)


def _tokens(raw: object) -> dict[str, Any]:
    """Gemini CLI's ``tokens`` as the store's columns (see the module's docstring)."""
    t = as_dict(raw)
    inp, tool = as_int(t.get("input")), as_int(t.get("tool"))
    out, thoughts = as_int(t.get("output")), as_int(t.get("thoughts"))
    prompt = None if inp is None and tool is None else (inp or 0) + (tool or 0)
    cached = as_int(t.get("cached"))
    if cached is not None and prompt is not None:
        cached = min(cached, prompt)  # part of the prompt (a larger count is a broken value)
    usage = {
        "input_tokens": prompt,
        "cached_input_tokens": cached,
        "output_tokens": None if out is None and thoughts is None else (out or 0) + (thoughts or 0),
        "reasoning_output_tokens": thoughts,
    }
    return token_counts({k: v for k, v in usage.items() if v is not None})


def _result(result: object) -> tuple[object, str]:
    """What a tool returned (its ``functionResponse.response``, without the call's id and
    name, which differ from call to call) and its text."""
    if isinstance(result, str):
        return result, result
    payload: list[object] = []
    texts: list[str] = []
    for part in as_list(result) if not isinstance(result, dict) else [result]:
        fr = part.get("functionResponse") if isinstance(part, dict) else None
        if isinstance(fr, dict):
            response = fr.get("response")
            payload.append(response)
            r = as_dict(response)
            value = r.get("output", r.get("error", response))
            texts.append(value if isinstance(value, str) else brief(value, limit=10**9))
        else:
            payload.append(part)
            texts.append(_text(part))
    return payload, "".join(texts)


def _project_folder(path: Path) -> str | None:
    """The folder under ``.gemini/tmp`` a chat lies in, or None outside that layout."""
    parts = path.absolute().parts
    for i in range(len(parts) - 3, 0, -1):
        if parts[i] == "tmp" and parts[i - 1] == ".gemini":
            return parts[i + 1]
    return None


class _Reader:
    def __init__(self, ctx: LoadContext) -> None:
        self.ctx = ctx
        self.low = Lowering(ctx, SPEC.name, SPEC.call_prefix)
        self.path = Path(ctx.source.path)
        self.talk = Conversation(self.path.stem)  # the session's messages
        self.folder = _project_folder(self.path)
        self.project = self.folder
        self.agent: str | None = None
        self.parent: str | None = None
        self.seq = 0
        # The message being read: [id, its last copy, its first line, copies, written before]
        self.pending: list[Any] | None = None
        self.done: set[str] = set()  # the ids of messages already lowered
        self.replies: set[str] = set()  # ... of which gemini replies (calls)

    def header(self, obj: dict[str, Any]) -> None:
        self.talk.session = as_str(obj.get("sessionId")) or self.talk.session
        self.project = self.folder or as_str(obj.get("projectHash")) or self.project
        if obj.get("kind") == "subagent":
            self.agent = self.talk.session
            chats = self.path.parent.parent.name == "chats"
            self.parent = self.path.parent.name if chats else None

    def record(self, lineno: int, obj: dict[str, Any]) -> None:
        """One line of JSON Lines, told apart as Gemini CLI's own reader does."""
        if isinstance(obj.get("$rewindTo"), str):
            self.low.skip("rewind")
        elif isinstance(obj.get("id"), str):
            self.message(lineno, obj)
        elif isinstance(obj.get("$set"), dict):
            self.low.skip("metadata_update")
        elif _is_header(obj):
            self.header(obj)
            self.low.skip("session_header")
        else:
            self.low.reject(lineno, "neither a message (no id) nor a session record", brief(obj))

    def message(self, line: int, obj: dict[str, Any]) -> None:
        mid = obj["id"]
        if self.pending is not None and self.pending[0] == mid:  # a new copy: the last wins
            self.pending[1] = obj
            self.pending[3] += 1
            return
        self.flush()
        self.pending = [mid, obj, line, 1, mid in self.done]

    def flush(self) -> None:
        if self.pending is None:
            return
        mid, obj, line, copies, again = self.pending
        self.pending = None
        self.done.add(mid)
        kind = kind_of(obj)
        if again and kind == "gemini" and mid in self.replies:  # Lowering: a duplicate call
            native = f"{self.talk.session}:{mid}"
            self.low.add_call(
                CallRow(
                    native_id=native,
                    session_id=self.talk.session,
                    stream_key=self.talk.session,  # (Lowering's default: the session)
                    n_records=copies,
                )
            )
        elif again:
            self.low.skip("message_written_again", copies)
        elif kind == "gemini":
            self.replies.add(mid)
            self.gemini(mid, obj, line, copies)
        elif kind == "user":
            self.user(mid, obj, copies)
        else:
            self.low.skip(kind or "untyped", copies)

    def user(self, mid: str, obj: dict[str, Any], copies: int) -> None:
        text = _text(obj.get("content"))
        agent = text.strip() in _AGENT_PROMPTS
        if not agent:
            self.talk.turn = f"{self.talk.session}:{mid}"
        ts = parse_time(obj.get("timestamp"), self.ctx.options.tz)
        self.low.add_message(self.talk.prompt(text, ts=ts, agent=agent, records=copies))

    def gemini(self, mid: str, obj: dict[str, Any], line: int, copies: int) -> None:
        tz = self.ctx.options.tz
        ts = parse_time(obj.get("timestamp"), tz)
        native = f"{self.talk.session}:{mid}"
        call_id = self.low.call_id(native)
        text = _text(obj.get("content"))
        chars, visible = text_measure(text)
        thoughts = [t for t in as_list(obj.get("thoughts")) if isinstance(t, dict)]
        tools = [t for t in as_list(obj.get("toolCalls")) if isinstance(t, dict)]
        tokens = obj.get("tokens")
        self.seq += 1
        call = self.talk.call(
            native,
            response_id=mid,
            line=line,
            ts=ts,
            seq=self.seq,
            agent_id=self.agent,
            parent_session_id=self.parent,
            model=as_str(obj.get("model")),
            provider=PROVIDER,
            app=APP,
            project=self.project,
            **_tokens(tokens),
            output_final=True if isinstance(tokens, dict) else None,
            content_chars=chars,
            visible_chars=visible,
            reasoning_chars=sum(
                len(as_text(t.get("subject"))) + len(as_text(t.get("description")))
                for t in thoughts
            ),
            tool_call_count=len(tools),
            n_records=copies,
        )
        self.low.add_call(call)
        # Text first, then the tool calls, then their results: a later copy of the message only
        # adds to the end of what an earlier one gave (a log read again once it grew).
        if chars:
            self.low.add_message(self.talk.said(text, ts=ts, call_id=call_id))
        self.tool_messages(tools, ts, call_id)

    def tool_messages(self, tools: list[dict[str, Any]], ts: datetime | None, call_id: str) -> None:
        """A message's tool calls, then the results of those that finished."""
        for tc in tools:
            self.low.add_message(
                self.talk.tool_call(
                    as_str(tc.get("name")),
                    tc.get("args"),
                    as_str(tc.get("id")),
                    ts=ts,
                    call_id=call_id,
                )
            )
        for tc in tools:
            if tc.get("result") is None:  # not finished when the message was last written
                continue
            payload, rtext = _result(tc["result"])
            status = tc.get("status")
            self.low.add_message(
                self.talk.tool_result(
                    payload,
                    _TOOL_ERROR.get(status) if isinstance(status, str) else None,
                    ts=parse_time(tc.get("timestamp"), self.ctx.options.tz) or ts,
                    text=rtext,
                    use_id=as_str(tc.get("id")),
                )
            )

    def finish(self) -> LoadResult:
        self.flush()
        return self.low.finish()


def _read_document(ctx: LoadContext) -> object:
    """The whole JSON document (as ``conversation_json`` reads one)."""
    return read_json_document(ctx.source)


def load(ctx: LoadContext) -> LoadResult:
    reader = _Reader(ctx)
    if not _is_document(ctx.source.head):
        for lineno, obj in json_lines(ctx.source, reader.low):
            reader.record(lineno, obj)
        return reader.finish()
    doc = _read_document(ctx)
    messages = doc.get("messages") if isinstance(doc, dict) else None
    if not isinstance(doc, dict) or not isinstance(messages, list):
        raise InputError("a JSON document without a list of messages", ctx.source.display)
    reader.header(doc)
    for n, m in enumerate(messages, 1):
        reader.low.read()
        if not isinstance(m, dict):
            reader.low.reject(n, "a message that is not an object", brief(m))
        elif not isinstance(m.get("id"), str):
            reader.low.reject(n, "a message without an id", brief(m))
        else:
            reader.message(n, m)
    return reader.finish()


# What this module is to the registry (analyzer.formats).
SPEC = FormatSpec(
    name="gemini_cli",
    title="Gemini CLI saved chat (JSON or JSONL)",
    kind="log",
    sniff_order=50,  # after the other agent logs, before saved conversations (90) take the JSON
    call_prefix="gemini",
    sniff=sniff,
    load=load,
    # Files of its layout that hold no call: the prompt log (named, never counted as not read).
    own_files=("logs.json",),
)
