"""Langfuse's export of observations: the blob-storage export (``observations_v2/``, the
legacy ``observations/``, with ``traces/`` and ``scores/`` beside them) and the UI's batch
export, as JSON Lines, a JSON array or CSV.

Learnt from Langfuse's own code and reference (langfuse/langfuse, MIT outside ``ee/``: the
export's columns ``LEGACY_OBSERVATION_EXPORT_FIELDS`` in
``packages/shared/src/domain/observation-field-groups.ts``, the writers in
``packages/shared/src/server/utils/transforms/``, the UI export's ``convertObservation`` in
``packages/shared/src/server/repositories/observations_converters.ts``; the field reference
``blob-storage-export-fields.mdx`` of langfuse/langfuse-docs). No real export was found in a
public repository; the fixtures follow those.

* One record is one observation. The blob export writes snake_case keys (``trace_id``,
  ``start_time`` as ``YYYY-MM-DD HH:MM:SS.ffffff`` in UTC, ``provided_model_name``,
  ``usage_details``, ``cost_details``, ``total_cost``, ``parent_observation_id``,
  ``status_message``, and in the enriched export the trace's ``user_id``, ``session_id``,
  ``trace_name``, ``tags``, ``release``); the UI export camelCase (``traceId``, ``startTime``
  as ISO 8601, ``model``, ``usageDetails``, ``costDetails``, ``totalCost``, ``userId``,
  ``traceTags``); the public API's older rows ``calculatedTotalCost`` and ``usage``. All are
  read. In CSV every value is text: objects and arrays are JSON text, null is empty.
* ``GENERATION`` is a call: its id is the observation's id (the same observation exported
  twice, in one file or two, is one call); its session the trace's ``session_id`` where the
  export carries it, else the trace. Tokens: Langfuse's own rule (``reduceUsageOrCostDetails``)
  - every ``usage_details`` key naming ``input`` is part of the prompt, every key naming
  ``output`` part of the output (the SDKs subtract the cached and reasoning parts from
  ``input`` and ``output`` and keep them under their own keys); a key naming ``cache`` and
  ``read``/``cached`` is the cached prompt, ``cache`` and ``creation``/``write`` the prompt
  written to the cache, ``reasoning`` the reasoning output. ``total_cost`` (else
  ``cost_details.total``) is the platform's own price of the call (``cost_basis
  'reported'``). ``level`` ``ERROR`` is an error call (its ``status_message`` kept as its
  reply). ``start_time`` to ``end_time`` is its duration, to ``completion_start_time`` its time
  to the first token.
* What a generation said: its input's last message, when the user's, is a prompt (a new
  turn); the ``tool`` messages that close its input are the results of the tool calls before
  it; its output's text is what the model said, and the tool calls in its output (or in the
  ``tool_calls`` column) are its tool calls. Where a session has ``TOOL`` observations (the
  SDK's ``as_type="tool"``, an agent framework's tool spans), those are its tool calls and
  results instead (named by the observation's ``name``, its ``input`` the arguments, its
  ``output`` the result, ``level`` ``ERROR`` an error), each tied to the generation before it.
* Messages are placed by time (the observation's start in microseconds, a digit of its id,
  and its place within the observation): the windows of a scheduled export each hold part of
  a session, and a message exported twice is one message.
* ``SPAN``, ``EVENT``, ``AGENT``, ``CHAIN``, ``RETRIEVER``, ``EVALUATOR``, ``EMBEDDING`` and
  ``GUARDRAIL`` observations, and the rows of the ``traces/`` and ``scores/`` files, hold no call
  and are skipped by kind. A record without an id, a trace, a known type or a start time is
  rejected with its line (a JSON array's records are numbered by their place).
* Labels: the trace's ``user_id`` (``user.id``), ``environment``, ``release`` and ``tags``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson

from analyzer.ingest.base import Head, LoadContext, LoadResult
from analyzer.ingest.content import digest
from analyzer.ingest.conversation import Conversation
from analyzer.ingest.csv_scan import UNTERMINATED, fields, table
from analyzer.ingest.jsonl import head_objects, json_lines
from analyzer.ingest.lowering import Lowering, brief, text_measure
from analyzer.ingest.reading import read_json_document, read_text
from analyzer.ingest.rows import CallRow
from analyzer.ingest.spec import FormatSpec
from analyzer.ingest.values import (
    as_dict,
    as_int,
    as_list,
    as_str,
    as_text,
    json_text,
    labels_text,
    parse_time,
    stated_cost,
)

APP = "langfuse"
TYPES = frozenset(
    {
        "GENERATION",
        "SPAN",
        "EVENT",
        "AGENT",
        "TOOL",
        "CHAIN",
        "RETRIEVER",
        "EVALUATOR",
        "EMBEDDING",
        "GUARDRAIL",
    }
)
# The UI export's and the public API's camelCase names of the blob export's columns.
_ALIASES = {
    "traceId": "trace_id",
    "projectId": "project_id",
    "parentObservationId": "parent_observation_id",
    "startTime": "start_time",
    "endTime": "end_time",
    "completionStartTime": "completion_start_time",
    "statusMessage": "status_message",
    "providedModelName": "provided_model_name",
    "model": "provided_model_name",
    "usageDetails": "usage_details",
    "costDetails": "cost_details",
    "totalCost": "total_cost",
    "calculatedTotalCost": "total_cost",
    "userId": "user_id",
    "sessionId": "session_id",
    "traceName": "trace_name",
    "traceTags": "tags",
    "toolCalls": "tool_calls",
    "dataType": "data_type",
}
_OBSERVATION = ("id", "trace_id", "type", "start_time")
_JSON_COLUMNS = ("usage_details", "cost_details", "usage", "metadata", "tags", "tool_calls")


def _normal(obj: dict[str, Any]) -> dict[str, Any]:
    """A record with the blob export's snake_case names (the first of two names wins)."""
    out: dict[str, Any] = {}
    for key, value in obj.items():
        name = _ALIASES.get(key, key)
        if name not in out or out[name] in (None, ""):
            out[name] = value
    return out


def _shape(obj: dict[str, Any]) -> str | None:
    """What a record is: an ``observation``, a ``trace`` or a ``score`` row, or None."""
    keys = obj.keys()
    if all(k in keys for k in _OBSERVATION):
        return "observation"
    if "id" in keys and "timestamp" in keys and "project_id" in keys:
        if "data_type" in keys and "source" in keys:
            return "score"
        if "bookmarked" in keys or "public" in keys:
            return "trace"
    return None


def sniff(head: Head) -> bool:
    data = head.utf8.lstrip()
    if data[:1] == b"[":
        return (b'"trace_id"' in data or b'"traceId"' in data) and any(
            f'"type":"{t}"'.encode() in data.replace(b'": "', b'":"') for t in TYPES
        )
    if data[:1] == b"{":
        objs = head_objects(head)
        return bool(objs) and all(_shape(_normal(o)) is not None for o in objs[:3])
    first = head.first_record(",")
    if not first:
        return False
    names = {_ALIASES.get(c.strip(), c.strip()) for c in first}
    return _shape(dict.fromkeys(names)) is not None


# -- reading the records ---------------------------------------------------------------------


def _records(ctx: LoadContext, low: Lowering) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line, record) for each record of the file, whatever its shape; what cannot be a
    record is rejected (and every record counted as read)."""
    data = ctx.source.head.utf8.lstrip()
    if data[:1] == b"[":
        doc = read_json_document(ctx.source)
        items = doc if isinstance(doc, list) else [doc]
        low.read(len(items))
        for n, item in enumerate(items, 1):  # numbered by its place in the array
            if isinstance(item, dict):
                yield n, item
            else:
                low.reject(n, "a record that is not a JSON object", brief(item))
        return
    if data[:1] == b"{":
        yield from json_lines(ctx.source, low)
        return
    yield from _csv_records(ctx, low)


def _csv_records(ctx: LoadContext, low: Lowering) -> Iterator[tuple[int, dict[str, Any]]]:
    names, found = table(read_text(ctx.source, "an observations export"), ",")
    header = [h.strip() for h in names]
    for rec in found:
        if rec.text is None:
            low.read()
            low.reject(rec.line, UNTERMINATED, rec.first)
            continue
        record = fields(rec.text, ",")
        if not any(cell.strip() for cell in record):
            continue
        low.read()
        if [c.strip() for c in record] == header:
            low.skip("repeated_header")
            continue
        if len(record) != len(header):
            reason = f"{len(record)} fields where the header has {len(header)}"
            low.reject(rec.line, reason, ",".join(record))
            continue
        yield rec.line, {k: (v if v != "" else None) for k, v in zip(header, record, strict=True)}


@dataclass
class _Observation:
    """One observation kept for building: its record (snake_case, JSON columns parsed)."""

    line: int
    id: str
    kind: str
    session: str
    start: datetime
    rec: dict[str, Any] = field(repr=False)

    def base(self, k: int = 0) -> int:
        """The place of its ``k``-th message: its start in microseconds, a digit of its id,
        and ``k`` (stable across the files of an export, so a message exported twice is one)."""
        micros = int((self.start - datetime(1970, 1, 1)).total_seconds() * 1_000_000)
        return (max(micros, 0) * 16 + int(digest(self.id, 2), 16) % 16) * 16 + min(k, 15)


def _observation(line: int, obj: dict[str, Any], low: Lowering) -> _Observation | None:
    """The observation a record is, or None: rejected (with its reason) or skipped by kind."""
    rec = _normal(obj)
    shape = _shape(rec)
    if shape in ("trace", "score"):
        low.skip(str(shape))
        return None
    if shape is None:
        missing = [k for k in _OBSERVATION if k not in rec]
        low.reject(line, f"not a Langfuse observation (no {', '.join(missing)})", brief(obj))
        return None
    kind = as_str(rec.get("type")) or ""
    oid, trace = as_str(rec.get("id")), as_str(rec.get("trace_id"))
    start = _time(rec.get("start_time"))
    reason = (
        "an observation without an id"
        if not oid
        else "an observation without a trace"
        if not trace
        else f"an observation type Langfuse does not write ({kind!r})"
        if kind not in TYPES
        else "an observation without a start time"
        if start is None
        else None
    )
    if reason is not None or oid is None or trace is None or start is None:
        low.reject(line, reason or "", brief(obj))
        return None
    if kind not in ("GENERATION", "TOOL"):
        low.skip(kind.lower())
        return None
    for name in _JSON_COLUMNS:
        rec[name] = json_text(rec.get(name))
    session = as_str(rec.get("session_id")) or trace
    return _Observation(line, oid, kind, session, start, rec)


# -- what an observation says ----------------------------------------------------------------


def _text(content: object) -> str:
    """The text of a message's content (a string, or a list of parts with ``text``)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(as_text(as_dict(p).get("text")) for p in content)
    return ""


def _messages(value: object) -> list[dict[str, Any]]:
    """The chat messages of a generation's input (a list, or an object with ``messages``)."""
    value = json_text(value)
    if isinstance(value, dict):
        value = value.get("messages")
    return [m for m in as_list(value) if isinstance(m, dict)]


def _reply(value: object) -> tuple[str, list[dict[str, Any]]]:
    """A generation's output as (text, tool calls): a string, a message, a list of messages or
    choices, or an object with ``content`` / ``tool_calls``."""
    value = json_text(value)
    if isinstance(value, str):
        return value, []
    items = value if isinstance(value, list) else [value]
    text: list[str] = []
    calls: list[dict[str, Any]] = []
    for item in items:
        item = as_dict(item)
        item = as_dict(item.get("message")) or item  # a choice
        text.append(_text(item.get("content")))
        calls += [as_dict(tc) for tc in as_list(item.get("tool_calls"))]
    return "".join(text), calls


def _tool_call(tc: dict[str, Any]) -> tuple[str | None, object, str | None]:
    """(name, arguments, id) of an OpenAI-style tool call (or a flat one)."""
    fn = as_dict(tc.get("function")) or tc
    return as_str(fn.get("name")), fn.get("arguments", fn.get("input")), as_str(tc.get("id"))


def _usage(call: CallRow, rec: dict[str, Any]) -> None:
    """The tokens of ``usage_details`` (Langfuse's keys), else of the older ``usage``."""
    details = as_dict(rec.get("usage_details")) or as_dict(rec.get("usage"))
    counts: dict[str, int] = {}
    for key, value in details.items():
        n = as_int(_number(value))
        if n is not None:
            counts[str(key).lower()] = n
    if not counts:
        return
    prompt = [v for k, v in counts.items() if "input" in k or k == "prompt_tokens"]
    output = [v for k, v in counts.items() if "output" in k or k == "completion_tokens"]
    cached = [v for k, v in counts.items() if "cache" in k and ("read" in k or "cached" in k)]
    written = [v for k, v in counts.items() if "cache" in k and ("creat" in k or "writ" in k)]
    reasoning = [v for k, v in counts.items() if "reasoning" in k]
    call.input_tokens = sum(prompt) if prompt else None
    call.output_tokens = sum(output) if output else None
    call.cached_input_tokens = sum(cached) if cached else None
    call.cache_write_tokens = sum(written) if written else None
    call.reasoning_tokens = sum(reasoning) if reasoning else None
    call.output_final = call.output_tokens is not None


def _number(value: object) -> object:
    """A count or a price as the export writes it: a number, or its digits as text (CSV, and
    ClickHouse's 64-bit integers in JSON)."""
    if isinstance(value, str):
        try:
            return float(value) if any(c in value for c in ".eE") else int(value)
        except ValueError:
            return None
    return value


def _labels(rec: dict[str, Any]) -> str | None:
    tags = [t for t in as_list(json_text(rec.get("tags"))) if isinstance(t, str) and t]
    return labels_text(
        {
            "user.id": as_str(rec.get("user_id")),
            "environment": as_str(rec.get("environment")),
            "release": as_str(rec.get("release")),
            "tags": ",".join(sorted(tags)) or None,
        }
    )


def _time(value: object) -> datetime | None:
    """A time as an export writes it, always UTC: ``2024-05-29 13:46:19.963000`` (the blob
    export), ISO 8601 (the UI's JSON), or ISO 8601 in JSON quotes (the UI's CSV writes a date
    as ``JSON.stringify`` does, quotes and all)."""
    if isinstance(value, str) and value[:1] == '"':
        value = value.strip('"')
    return parse_time(value, "UTC")


def _ms(start: datetime, end: object) -> float | None:
    at = _time(end)
    return (at - start).total_seconds() * 1000 if at is not None and at >= start else None


# -- building a session ----------------------------------------------------------------------


class _Session:
    """One session's observations, in time order, lowered to calls and messages."""

    def __init__(self, low: Lowering, session: str, tools: bool) -> None:
        self.low = low
        self.talk = Conversation(session)
        self.tools = tools  # tool calls and results come from TOOL observations
        self.last_call: str | None = None
        self.last_row: CallRow | None = None  # the call a TOOL observation is counted to
        self.seq = 0

    def generation(self, ob: _Observation, first: bool) -> None:
        rec, talk, low = ob.rec, self.talk, self.low
        call_id = low.call_id(ob.id)
        inputs = _messages(rec.get("input"))
        k = self._input(ob, inputs) if first else 0
        text, calls = _reply(rec.get("output"))
        if not calls:
            calls = [as_dict(json_text(tc)) for tc in as_list(rec.get("tool_calls"))]
        error = (as_str(rec.get("level")) or "").upper() == "ERROR"
        self.seq += 1
        call = talk.call(
            ob.id,
            line=ob.line,
            ts=ob.start,
            seq=self.seq,
            model=as_str(rec.get("provided_model_name")) or None,
            app=APP,
            n_records=1,
            tool_call_count=len(calls),
            duration_ms=_ms(ob.start, rec.get("end_time")),
            ttft_ms=_ms(ob.start, rec.get("completion_start_time")),
            finish_reason_raw="error" if error else None,
        )
        call.labels = _labels(rec)
        _usage(call, rec)
        cost = stated_cost(_number(rec.get("total_cost")))
        cost = cost or stated_cost(_number(as_dict(rec.get("cost_details")).get("total")))
        if cost is not None:
            call.cost_usd, call.cost_basis = cost, "reported"
        shown = text or (as_str(rec.get("status_message")) if error else None) or ""
        call.content_chars, call.visible_chars = text_measure(shown)
        low.add_call(call)
        self.last_call = call_id
        self.last_row = call if self.tools and not calls else None
        if not first:  # the same observation again: its call is a duplicate, said once
            return
        if shown:
            said = talk.message("assistant", "text", ts=ob.start, at=ob.base(k), call_id=call_id)
            low.add_message(talk.fill(said, shown))
            k += 1
        if not self.tools:
            for tc in calls:
                name, args, use_id = _tool_call(tc)
                at = ob.base(k)
                low.add_message(
                    talk.tool_call(name, args, use_id, ts=ob.start, call_id=call_id, at=at)
                )
                k += 1

    def _input(self, ob: _Observation, inputs: list[dict[str, Any]]) -> int:
        """The results that close a generation's input and its new prompt, placed first among
        its messages: the next place free."""
        talk, low, k = self.talk, self.low, 0
        tail: list[dict[str, Any]] = []
        for m in reversed(inputs):
            if m.get("role") != "tool":
                break
            tail.insert(0, m)
        if not self.tools:
            for m in tail:
                row = talk.tool_result(
                    m.get("content"),
                    None,
                    ts=ob.start,
                    text=_text(m.get("content")),
                    use_id=as_str(m.get("tool_call_id")),
                    name=as_str(m.get("name")),
                    call_id=self.last_call,
                    at=ob.base(k),
                )
                low.add_message(row)
                k += 1
        last = inputs[-1] if inputs and not tail else None
        if last is not None and last.get("role") == "user" and _text(last.get("content")):
            at = ob.base(k)
            talk.turn = f"{talk.session}:{at}"
            row = talk.message("user", "prompt", ts=ob.start, at=at, n_records=0)
            low.add_message(talk.fill(row, _text(last.get("content"))))
            k += 1
        return k

    def tool(self, ob: _Observation) -> None:
        """A TOOL observation: a tool call (its record) and what it returned."""
        rec, talk, low = ob.rec, self.talk, self.low
        if self.last_row is not None:  # its generation named no tool call: this is one
            self.last_row.add(tool_call_count=1)
        name = as_str(rec.get("name"))
        args = json_text(rec.get("input"))
        error = (as_str(rec.get("level")) or "").upper() == "ERROR"
        row = talk.tool_call(
            name, args, ob.id, ts=ob.start, call_id=self.last_call, records=1, at=ob.base(0)
        )
        low.add_message(row)
        output = rec.get("output")
        if output is None and error:
            output = as_str(rec.get("status_message"))
        shown = output if isinstance(output, str) else orjson.dumps(output).decode()
        result = talk.tool_result(
            json_text(output),
            error,
            ts=ob.start,
            text=shown,
            use_id=ob.id,
            name=name,
            call_id=self.last_call,
            at=ob.base(1),
        )
        low.add_message(result)


def load(ctx: LoadContext) -> LoadResult:
    low = Lowering(ctx, SPEC.name, SPEC.call_prefix)
    kept: list[_Observation] = []
    for line, obj in _records(ctx, low):
        ob = _observation(line, obj, low)
        if ob is not None:
            kept.append(ob)
    # In time order within each session (an export is in no order: the blob export's newest
    # first); the same observation exported twice is read once.
    kept.sort(key=lambda o: (o.session, o.start, o.kind != "GENERATION", o.id, o.line))
    with_tools = {o.session for o in kept if o.kind == "TOOL"}
    sessions: dict[str, _Session] = {}
    seen: set[str] = set()
    for ob in kept:
        s = sessions.get(ob.session)
        if s is None:
            s = sessions[ob.session] = _Session(low, ob.session, ob.session in with_tools)
        first = ob.id not in seen
        seen.add(ob.id)
        if ob.kind == "GENERATION":
            s.generation(ob, first)  # (a call again: the sink counts it a duplicate)
        elif first:
            s.tool(ob)
        else:  # a tool's record again: nothing new
            low.result.rows_duplicate += 1
    return low.finish()


# What this module is to the registry (analyzer.formats).
SPEC = FormatSpec(
    name="langfuse",
    title="Langfuse observations export (blob storage or UI: JSON Lines, JSON or CSV)",
    kind="log",
    sniff_order=58,  # after the agents' own logs, before saved conversations (90)
    call_prefix="langfuse",
    sniff=sniff,
    load=load,
)
