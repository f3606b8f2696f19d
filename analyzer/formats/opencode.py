"""OpenCode's stored messages: ``~/.local/share/opencode/storage/message/<sessionID>/<id>.json``.

OpenCode (sst/opencode) keeps each message of a session in a file of its own, one JSON object
(``JSON.stringify(content, null, 2)``; an older migration wrote it on one line), under
``$XDG_DATA_HOME/opencode/storage`` (``~/.local/share`` when the variable is unset: its
``global`` module takes the data folder from ``xdg-basedir``; ``storage.ts`` keeps a key
``[a, b, c]`` at ``storage/a/b/c.json``). Learnt from OpenCode's source (``session/index.ts``
``updateMessage``/``updatePart``/``getUsage``, ``session/message-v2.ts``,
``session/processor.ts``) and from the fixtures of two other projects' OpenCode readers in
``../shared/samples/more-formats/opencode`` (no real message file with a licence was found).

* ``message/<sessionID>/<messageID>.json`` - ``{id: "msg_…", sessionID, role, time: {created,
  completed}, …}`` (times in epoch ms). A ``user`` message is one user message and starts a
  turn (its text is in its parts, not here). An ``assistant`` message is one call: ``parentID``
  (the user message it answers: its turn), ``modelID`` and ``providerID`` (a fixture nests
  them as ``model: {providerID, modelID}``, read too), ``path: {cwd, root}`` (the project is
  ``root``, else ``cwd``), ``cost`` (USD, OpenCode's own figure from the models.dev prices it
  knows: ``cost_basis = 'reported'``; without one the tokens are priced), ``tokens``,
  ``finish`` (the AI SDK's reason: ``tool-calls`` is read as ``tool_calls``,
  ``content-filter`` as ``content_filter``) and ``error`` (``{name, data}``: an error call,
  ``data.statusCode`` its HTTP status; ``MessageAbortedError`` a cancelled one).
* ``tokens: {input, output, reasoning, cache: {read, write}, [total]}`` is OpenCode's
  ``getUsage`` over the AI SDK usage. ``input`` is the fresh part of the prompt: every version
  with a cache split subtracts the cache from the SDK's ``inputTokens`` (before AI SDK 6 only
  where the SDK counted it in: cache reads for OpenAI and others, nothing for Anthropic whose
  ``input_tokens`` is fresh already; since AI SDK 6 always reads and writes). So the prompt is
  ``input + cache.read + cache.write``, cache reads and writes parts of it - sure for OpenCode
  since late 2025; **OpenCode of mid-2025 wrote the SDK's ``inputTokens`` unchanged**, cache
  reads included for non-Anthropic providers, which this counts twice (the file does not say
  which version wrote it). ``output``: OpenCode charges ``output + reasoning`` at the output
  price, and since AI SDK 6 writes ``output`` without the reasoning; before, the SDK's
  ``outputTokens`` (reasoning included for OpenAI, not for Google). The output here is
  ``output + reasoning``, except where ``total`` (the SDK's ``totalTokens``) shows the
  reasoning inside ``output`` already (``total - prompt`` between ``output`` and ``output +
  reasoning``: then it is ``total - prompt``). Without ``total``, an older file of an OpenAI
  reasoning model counts its reasoning twice, as OpenCode's own cost does. Fairly sure.
* **One file, one call** is exact for OpenCode that runs one model step per assistant message
  (its loop makes a new message per step). OpenCode that ran a turn's steps in one message
  added each step's cost to ``cost`` and kept the **last** step's ``tokens`` (``processor.ts``):
  such a message is read as one call with those tokens and the summed cost; its steps'
  ``step-finish`` parts are not read as calls. A message written again as it grows (its tokens
  at each step, ``time.completed`` at the end) is the same call: a completed copy replaces one
  read before completion, else it is a duplicate.
* ``part/<messageID>/<partID>.json`` - ``{id: "prt_…", sessionID, messageID, type, …}``. A
  ``tool`` part (``callID``, ``tool``, ``state: {status, input, output | error, time: {start,
  end}}``) is the call's tool call and, once ``completed`` or ``error``, its result (the
  ``output`` text, or the ``error`` as an error result). Text, reasoning, step and the other
  parts are skipped by kind (the part alone does not say whose message it is, so texts are not
  measured: the calls' content is unknown and their kind comes from their tokens and finish).
* ``session/<projectID>/<sessionID>.json`` (``{id: "ses_…", projectID, directory, title,
  [parentID], time}``) is skipped by kind: each file loads alone, so its title and parent (a
  sub-agent's session) are not joined to the calls.
* Order: OpenCode's ids are ascending (``msg_``/``prt_`` and 12 hex digits of the creation
  time in ms times 4096 plus a counter, then random letters): those digits order a session's
  calls (``seq``) and messages (``idx``) across files; an id without them falls back to its
  ``time``. The session is ``sessionID`` (else the folder ``ses_…`` the file lies in).

Not read: the SQLite database ``opencode.db`` of newer OpenCode (the same JSON in the ``data``
column of its ``message`` and ``part`` tables), the sessions' titles and parents, text parts,
and ``variant`` (a reasoning effort, not a price). Each file is one record (numbered 1).
"""

from __future__ import annotations

import math
import re
from functools import cache
from pathlib import Path
from typing import Any

from analyzer.ingest.base import Head, LoadContext, LoadResult
from analyzer.ingest.conversation import Conversation
from analyzer.ingest.lowering import Lowering, brief
from analyzer.ingest.reading import read_json_document
from analyzer.ingest.rows import CallRow
from analyzer.ingest.spec import FormatSpec
from analyzer.ingest.values import as_dict, as_int, as_status, as_str, parse_time

APP = "opencode"
_START = re.compile(rb"^\s*\{")
_SESSION_ID = re.compile(rb'"sessionID"\s*:\s*"')
_MESSAGE = (re.compile(rb'"id"\s*:\s*"msg_'), re.compile(rb'"role"\s*:\s*"(?:user|assistant)"'))
_PART = (
    re.compile(rb'"id"\s*:\s*"prt_'),
    re.compile(rb'"messageID"\s*:\s*"'),
    re.compile(rb'"type"\s*:\s*"'),
)
_SESSION = (
    re.compile(rb'"id"\s*:\s*"ses_'),
    re.compile(rb'"projectID"\s*:\s*"'),
    re.compile(rb'"directory"\s*:\s*"'),
)
_ID_CLOCK = re.compile(r"^(?:msg|prt)_([0-9a-f]{12})")
_FINISH = {"tool-calls": "tool_calls", "content-filter": "content_filter"}
_ABORTED = "MessageAbortedError"
_ID_BITS = 2**48  # OpenCode's ids keep the low 48 bits of (ms * 4096 + counter)


def sniff(head: Head) -> bool:
    data = head.utf8
    if not _START.match(data):
        return False
    if all(p.search(data) for p in _SESSION):
        return True
    if not _SESSION_ID.search(data):
        return False
    return all(p.search(data) for p in _MESSAGE) or all(p.search(data) for p in _PART)


@cache
def _known_providers() -> frozenset[str]:
    """The provider ids genai-prices prices by (OpenCode's own, such as ``opencode`` for its
    Zen gateway, are not among them: their models are then priced by name)."""
    from genai_prices import data

    return frozenset(p.id for p in data.providers)


def _ms(value: object) -> int | None:
    """A time in epoch milliseconds (a whole number, not past year 5000), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value) if math.isfinite(value) and 0 <= value < 10**14 else None


def _clock(oid: str | None, when: object) -> int | None:
    """The place of an id in its session's order: its 48-bit clock (``ms * 4096 + counter``),
    else its time's (epoch ms) in the same form."""
    m = _ID_CLOCK.match(oid or "")
    if m:
        return int(m.group(1), 16)
    ms = _ms(when)
    return (ms * 4096) % _ID_BITS if ms is not None else None


def _tokens(raw: object) -> dict[str, Any]:
    """OpenCode's ``tokens`` as the store's columns (see the module's docstring)."""
    t = as_dict(raw)
    fresh, out, reasoning = (as_int(t.get(k)) for k in ("input", "output", "reasoning"))
    c = as_dict(t.get("cache"))
    read, write = as_int(c.get("read")), as_int(c.get("write"))
    cols: dict[str, Any] = {}
    prompt = None
    if fresh is not None or read is not None or write is not None:
        prompt = (fresh or 0) + (read or 0) + (write or 0)
        cols.update(
            input_tokens=prompt, cached_input_tokens=read or 0, cache_write_tokens=write or 0
        )
    if out is not None or reasoning is not None:
        output = (out or 0) + (reasoning or 0)
        total = as_int(t.get("total"))
        rest = total - prompt if total is not None and prompt is not None else None
        if rest is not None and out is not None and out <= rest <= output:
            output = rest  # the reasoning is in ``output`` already
        cols["output_tokens"] = output
    if reasoning is not None:
        cols["reasoning_tokens"] = reasoning
    return cols


def _cost(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    cost = float(value)
    return cost if math.isfinite(cost) and 0 <= cost < 1e6 else None


class _Reader:
    def __init__(self, ctx: LoadContext) -> None:
        self.ctx = ctx
        self.low = Lowering(ctx, SPEC.name, SPEC.call_prefix)
        self.path = Path(ctx.source.path)

    def session_of(self, doc: dict[str, Any]) -> str | None:
        folder = self.path.parent.name
        return as_str(doc.get("sessionID")) or (folder if folder.startswith("ses_") else None)

    def record(self, doc: object) -> None:
        self.low.read()
        if not isinstance(doc, dict):
            self.low.reject(1, "not a JSON object", brief(doc))
            return
        role, kind = doc.get("role"), doc.get("type")
        if role in ("user", "assistant"):
            self.message(doc, role)
        elif isinstance(kind, str) and "messageID" in doc:
            self.part(doc, kind)
        elif "projectID" in doc and "directory" in doc:
            self.low.skip("session")
        elif isinstance(role, str):
            self.low.skip(f"role_{role}")
        else:
            self.low.reject(1, "neither a message (no role), a part nor a session", brief(doc))

    def message(self, doc: dict[str, Any], role: str) -> None:
        stem = self.path.stem
        mid = as_str(doc.get("id")) or (stem if stem.startswith("msg_") else None)
        session = self.session_of(doc)
        if mid is None or session is None:
            what = "an id" if mid is None else "a sessionID"
            article = "an" if role == "assistant" else "a"
            self.low.reject(1, f"{article} {role} message without {what}", brief(doc))
            return
        time = as_dict(doc.get("time"))
        tz = self.ctx.options.tz
        ts = parse_time(time.get("created"), tz)
        order = _clock(mid, time.get("created"))
        if role == "user":  # a turn's prompt (its text is in its parts: not measured here)
            talk = Conversation(session)
            talk.turn = f"{session}:{mid}"
            place = None if order is None else order * 2  # placed, not counted (see part)
            self.low.add_message(talk.message("user", "prompt", ts=ts, at=place, n_records=1))
            return
        parent = as_str(doc.get("parentID"))
        nested = as_dict(doc.get("model"))
        provider = as_str(doc.get("providerID")) or as_str(nested.get("providerID"))
        if provider is not None and provider.lower() not in _known_providers():
            provider = None
        path = as_dict(doc.get("path"))
        error = as_dict(doc.get("error"))
        finish = as_str(doc.get("finish"))
        finish = _FINISH.get(finish, finish) if finish else None
        if error and error.get("name") != _ABORTED:
            finish = "error"
        done = parse_time(time.get("completed"), tz)
        start, end = _ms(time.get("created")), _ms(time.get("completed"))
        cost = _cost(doc.get("cost"))
        self.low.add_call(
            CallRow(
                native_id=mid,
                line=1,
                ts=ts,
                session_id=session,
                stream_key=session,
                turn_id=f"{session}:{parent}" if parent else None,
                seq=order,
                model=as_str(doc.get("modelID")) or as_str(nested.get("modelID")),
                provider=provider,
                app=APP,
                project=as_str(path.get("root")) or as_str(path.get("cwd")),
                **_tokens(doc.get("tokens")),
                output_final=done is not None,
                cost_usd=cost,
                cost_basis="reported" if cost is not None else None,
                finish_reason_raw=finish,
                http_status=as_status(as_dict(error.get("data")).get("statusCode")),
                cancelled=True if error.get("name") == _ABORTED else None,
                duration_ms=float(end - start) if start and end and end >= start else None,
                n_records=1,
                parts=2 if done is not None else 1,
            )
        )

    def part(self, doc: dict[str, Any], kind: str) -> None:
        if kind != "tool":
            self.low.skip(f"part_{kind}")
            return
        session, message = self.session_of(doc), as_str(doc.get("messageID"))
        pid = as_str(doc.get("id"))
        state = as_dict(doc.get("state"))
        if session is None or message is None:
            self.low.reject(1, "a tool part without a sessionID or messageID", brief(doc))
            return
        tz = self.ctx.options.tz
        times = as_dict(state.get("time"))
        order = _clock(pid, times.get("start"))
        idx = None if order is None else order * 2
        ts = parse_time(times.get("start"), tz)
        use_id = as_str(doc.get("callID"))
        # The part's call and result, of no turn. OpenCode's messages are placed by their ids'
        # clocks (None: no clock), not counted: their rows' places are given here.
        talk = Conversation(session)
        call = talk.tool_call(
            as_str(doc.get("tool")),
            state.get("input"),
            use_id,
            ts=ts,
            call_id=self.low.call_id(message),
            records=1,
            at=idx,
        )
        self.low.add_message(call)
        status = state.get("status")
        if status not in ("completed", "error"):  # pending or running: no result yet
            return
        is_error = status == "error"
        result = state.get("error" if is_error else "output")
        text = result if isinstance(result, str) else brief(result, limit=10**9)
        done = talk.tool_result(
            result,
            is_error,
            ts=parse_time(times.get("end"), tz) or ts,
            text=text,
            use_id=use_id,
            at=None if idx is None else idx + 1,
        )
        self.low.add_message(done)


def load(ctx: LoadContext) -> LoadResult:
    reader = _Reader(ctx)
    reader.record(read_json_document(ctx.source))
    return reader.low.finish()


# What this module is to the registry (analyzer.formats).
SPEC = FormatSpec(
    name="opencode",
    title="OpenCode stored message, part or session (JSON)",
    kind="log",
    sniff_order=52,  # after Gemini CLI (50), before saved conversations (90) take the JSON
    call_prefix="opencode",
    sniff=sniff,
    load=load,
)
