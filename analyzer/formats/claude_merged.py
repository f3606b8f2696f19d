"""Claude Code sessions exported by a third-party converter as one JSON document,
``{"messages": [...], "meta": {...}}`` with ``meta.source: "claude-jsonl-merged"``.

What the file is, from the two real ones the tests read (``../shared/samples/real-loops-3/
converted_session_json/kalom60__w2t86``: ``sessions/bugfix-1.json``, Claude Code 2.1.94, and
``sessions/bugfix-4.json``, 2.1.97, both claude-sonnet-4-6; a "Prompt2Repo" platform's script,
whose source is not public):

* ``meta`` names the native transcript (``session_file``, ``session_id``), the CLI's version
  and working folder (``session_meta``), the models (``turn_contexts[].model``:
  ``["claude-sonnet-4-6"]`` in bugfix-4, ``["claude-sonnet-4-6", "<synthetic>"]`` in bugfix-1;
  no message names one), and ``token_counts``: Codex-shaped ``token_count`` entries in time
  order (they look like one per assistant line of the native transcript, which the repository
  does not hold), each with a time (``_timestamp``) and ``info.last_token_usage``:
  ``input_tokens`` (Anthropic's fresh input, not the whole prompt: 0 to 153 in all 415
  entries, beside cache reads of up to 165,510), ``cached_input_tokens`` (the cache reads),
  ``output_tokens`` and ``total_tokens`` (input + output). ``total_token_usage`` equals
  ``last_token_usage`` in every entry (not a running total); ``rate_limits`` are all null.
* **No cache-write figure**: ``cache_creation_input_tokens`` is not carried over, so what each
  call wrote to the cache is unknown and left unknown (``cache_write_tokens`` NULL, never
  guessed). The cache reads grow from call to call by far more than the fresh input (11,192 to
  16,382 between bugfix-4's first two calls), so writes were made: the prompt the file gives
  (input + cache reads) and the dollars priced from it are lower bounds.
* ``messages``: the main thread (``user``, ``assistant``, ``tool``) and the sub-agents' messages
  merged in by time, with the role ``assistant-subagent-<agentId>`` and ``_metadata.source:
  "subagent"``, ``_metadata.original_role`` (``user``, ``assistant``, ``tool``). Every message
  is a list of blocks and has its own time (``_metadata.timestamp``): ``text``; ``tool_call``
  (``tool_call_id``, ``name``, ``arguments`` as JSON text; repeated as OpenAI-style
  ``tool_calls`` beside it); ``tool_output`` in a ``tool`` message that names its
  ``tool_call_id`` (its ``text`` a string, or a list of blocks: an Agent's result, ToolSearch's
  ``tool_reference``). Not in the file: message and request ids, stop reasons, ``is_error``, the
  ``isApiErrorMessage`` / ``isCompactSummary`` flags, thinking, and any usage of a sub-agent's
  calls (no entry is at a sub-agent message's time).

How they line up: every main-thread assistant message's ``_metadata.timestamp`` is the
``_timestamp`` of an entry (358 of 358, 4 of 4). In bugfix-4, 52 entries have no message at
their time; each is the first of a run of identical entries whose later ones have one. In
bugfix-1 two entries share one time and one message.

**Calls.** The file has no id for an API call, so the lines of one call are told by their
figures: an entry whose ``total_token_usage`` (else its ``last_token_usage``) equals the entry's
before it repeats that call (skipped, ``token_count_repeat``); every other entry is a call
(truth.py's rule for these files: 251 calls of 410 entries, and 3 of 5). Its tokens are its
entry's ``last_token_usage`` (``input_tokens`` + ``cached_input_tokens`` as the prompt, the
latter as cache reads; ``output_tokens``), its time the entry's ``_timestamp``, and it is priced
at the model's list price as any logged call (``estimated``). Where that rule and the session
part ways, the file cannot say: bugfix-1's first reply (2.1.94; before 2.1.97 Claude Code writes
a placeholder output count on a response's lines but its last,
``analyzer.ingest.output_estimate``) has three entries with one prompt (3 + 11,192) and outputs
6, 6, 245 - two calls by the rule, though one API response would look the same; and its two
``API Error: 529`` replies (06:15:58 and 06:21:32, a prompt between them) have the same zero
figures and are one call by the rule. Output counts are final from 2.1.97 on (Claude Code writes
the final usage on every line: ``analyzer.ingest.output_estimate``); before, a count is kept as
given and marked not final (``output_final`` false; with no thinking kept, what a reply wrote
cannot be measured to estimate it).

**Model.** The one model of ``turn_contexts`` other than ``<synthetic>`` (none when it names
several: the file does not say which call used which), or the model a message names. A call
whose figures are all 0, in a session whose ``turn_contexts`` name ``<synthetic>``, is Claude
Code's own reply (its synthetic replies carry zero usage: the five of the native transcript
``real-loops-3/claude_code/Eyob-smax__CampusOps-task-44``): model ``<synthetic>``, $0
``reported``, as ``claude_code`` prices them; an ``API Error: NNN`` in its text gives its
status.

**Messages.** Each main-thread assistant message is tied to the call of the entry at its time
(else the latest call begun before it: none in the real files): its text and tool calls (with
their arguments) are that call's. A ``user`` message's text is a prompt and starts a turn,
except Claude Code's compaction summary ("This session is being continued from a previous
conversation...", bugfix-4's message 323: a ``system`` message); a ``tool`` message's outputs
are tool results tied by ``tool_call_id``. A sub-agent's messages are its own session
``<session>:agent-<agentId>`` (as ``claude_code`` names a sub-agent's), with no calls: the file
has none of their usage.

**Identity.** The session is ``meta.session_id`` (Claude Code's own), else
``session_meta.session_id``, else the file's name with a digest of its start; a call is
``<session>:<its first entry's _timestamp>`` (``#n`` added for a second call begun at the same
time; its place among the calls when it has no time), so a later export of the same session
repeats its earlier calls' ids.

**Records.** The entries of ``meta.token_counts`` and the messages: an entry is a call or a
repeat, a message is its messages' first; an entry without ``info`` or ``last_token_usage``, or
that is no object, and a message that is no object or names no role are rejected with their
place; a message with nothing in it is skipped. A document whose ``meta.source`` is not
``claude-jsonl-merged`` is refused (``--format conversation_json`` reads it as messages).

Sniffing sees the first 64 KB, and ``meta`` is written last: a head that names the source, or
that shows the converter's messages (``_metadata`` with a ``timestamp``) with a Claude tool call
(``"type": "tool_call"``, a ``toolu_`` id) or a sub-agent role. A file whose first 64 KB show
neither is read as a saved conversation.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from analyzer.errors import InputError
from analyzer.formats.claude_code import APP, SYNTHETIC
from analyzer.ingest.base import Head, LoadContext, LoadResult
from analyzer.ingest.content import digest, run_start
from analyzer.ingest.conversation import Conversation, Message
from analyzer.ingest.lowering import Lowering, brief
from analyzer.ingest.output_estimate import OutputTally
from analyzer.ingest.reading import read_json_document
from analyzer.ingest.rows import CallRow
from analyzer.ingest.spec import FormatSpec
from analyzer.ingest.values import as_dict, as_int, as_list, as_str, as_text, parse_time

SOURCE = "claude-jsonl-merged"
SUBAGENT = "assistant-subagent-"
_OPEN = re.compile(rb'^\s*\{\s*"messages"\s*:\s*\[')
_NAMED = re.compile(rb'"source"\s*:\s*"claude-jsonl-merged"')
_STAMPED = re.compile(rb'"_metadata"\s*:\s*\{[^{}]*"timestamp"\s*:')
_CLAUDE_CALL = re.compile(rb'"type"\s*:\s*"tool_call"\s*,\s*"tool_call_id"\s*:\s*"toolu_')
_SUBAGENT_ROLE = re.compile(rb'"role"\s*:\s*"assistant-subagent-')
_API_ERROR = re.compile(r"API Error:?\s*(\d{3})")
# Claude Code's compaction summary, sent as a user message (its ``isCompactSummary`` line).
COMPACT_SUMMARY = "This session is being continued from a previous conversation"
_UNSET = object()  # (the total before the first entry: none is equal to it)


def sniff(head: Head) -> bool:
    data = head.utf8
    if not _OPEN.match(data):
        return False
    if _NAMED.search(data):
        return True
    claude = _CLAUDE_CALL.search(data) or _SUBAGENT_ROLE.search(data)
    return bool(_STAMPED.search(data)) and bool(claude)


@dataclass
class _Call:
    """A call read from its entry, opened (its row made, in the turn under way) when the
    messages reach its time."""

    line: int  # its entry's place in meta.token_counts (1-based)
    stamp: str | None  # its entry's ``_timestamp`` as written
    ts: datetime | None
    fresh: int | None
    cached: int | None
    output: int | None
    native: str = ""
    row: CallRow | None = None
    model: str | None = None  # a model one of its messages names
    texts: list[str] = field(default_factory=list)

    @property
    def zero(self) -> bool:
        return not (self.fresh or self.cached or self.output)


def _result_text(text: object) -> str:
    """A ``tool_output`` block's text: a string, or the text of its blocks."""
    if isinstance(text, str):
        return text
    return "".join(as_text(as_dict(b).get("text")) for b in as_list(text))


def _session(meta: dict[str, Any], messages: list[object], path: Path) -> str:
    own = as_str(meta.get("session_id")) or as_str(
        as_dict(meta.get("session_meta")).get("session_id")
    )
    if own:
        return own
    return f"{path.stem}@{digest(run_start(messages, _is_reply))}"


def _is_reply(m: object) -> bool:
    return isinstance(m, dict) and m.get("role") == "assistant"


def _project(meta: dict[str, Any]) -> str | None:
    """The project as ``claude_code`` names it: the folder under ``projects/`` the native
    transcript was in (``meta.session_file``), else the working folder."""
    parts = Path(as_text(meta.get("session_file"))).parts
    if "projects" in parts[:-1]:
        i = len(parts) - 1 - parts[::-1].index("projects")
        if i + 1 < len(parts) - 1:
            return parts[i + 1]
    return as_str(meta.get("cwd")) or as_str(as_dict(meta.get("session_meta")).get("cwd"))


class _Reader:
    def __init__(self, ctx: LoadContext, doc: dict[str, Any]) -> None:
        self.ctx = ctx
        self.tz = ctx.options.tz
        self.low = Lowering(ctx, SPEC.name, SPEC.call_prefix)
        self.meta = as_dict(doc.get("meta"))
        self.messages = as_list(doc.get("messages"))
        self.main = Conversation(_session(self.meta, self.messages, Path(ctx.source.path)))
        self.agents: dict[str, Conversation] = {}
        self.project = _project(self.meta)
        models = [as_str(as_dict(t).get("model")) for t in as_list(self.meta.get("turn_contexts"))]
        named = list(dict.fromkeys(m for m in models if m))
        self.synthetic_named = SYNTHETIC in named
        real = [m for m in named if m != SYNTHETIC]
        self.model = real[0] if len(real) == 1 else None
        tally = OutputTally()
        tally.see_version(as_dict(self.meta.get("session_meta")).get("version"))
        self.final = tally.final_version
        self.calls: list[_Call] = []
        self.at: dict[str, int] = {}  # an entry's _timestamp -> the call it belongs to
        self.waiting: deque[int] = deque()  # the calls not opened yet, in order
        self.seq = 0

    def run(self) -> LoadResult:
        self.entries(as_list(self.meta.get("token_counts")))
        for i, m in enumerate(self.messages):
            self.low.read()
            if not isinstance(m, dict) or not isinstance(m.get("role"), str):
                what = "is not an object" if not isinstance(m, dict) else "names no role"
                self.low.reject(self.low.records_read, f"messages[{i}] {what}", brief(m))
                continue
            self.message(m)
        self.open_until(len(self.calls) - 1)
        for call in self.calls:
            self.settle(call)
        return self.low.finish()

    # -- the calls ---------------------------------------------------------------------------

    def entries(self, entries: list[object]) -> None:
        """``meta.token_counts``: each entry a call, or a repeat of the call before it."""
        previous: object = _UNSET
        used: set[str] = set()
        for i, entry in enumerate(entries):
            self.low.read()
            info = entry.get("info") if isinstance(entry, dict) else None
            usage = info.get("last_token_usage") if isinstance(info, dict) else None
            if not isinstance(entry, dict) or not isinstance(info, dict):
                what = "is not an object" if not isinstance(entry, dict) else "has no info"
                self.low.reject(self.low.records_read, f"token_counts[{i}] {what}", brief(entry))
                continue
            if not isinstance(usage, dict):
                reason = f"token_counts[{i}] has no info.last_token_usage"
                self.low.reject(self.low.records_read, reason, brief(entry))
                continue
            stamp = as_str(entry.get("_timestamp"))
            total = info.get("total_token_usage")
            if total is None:  # (none in the real files)
                total = usage
            if self.calls and total == previous:
                self.low.skip("token_count_repeat")
            else:
                call = _Call(
                    line=i + 1,
                    stamp=stamp,
                    ts=parse_time(stamp, self.tz),
                    fresh=as_int(usage.get("input_tokens")),
                    cached=as_int(usage.get("cached_input_tokens")),
                    output=as_int(usage.get("output_tokens")),
                )
                call.native = self.native(call, len(self.calls), used)
                self.waiting.append(len(self.calls))
                self.calls.append(call)
            previous = total
            if stamp is not None:
                self.at.setdefault(stamp, len(self.calls) - 1)

    def native(self, call: _Call, place: int, used: set[str]) -> str:
        """The call's id: its session and its time (``#n`` for another call begun then)."""
        base = f"{self.main.session}:{call.stamp}" if call.stamp else None
        native = base or f"{self.main.session}:call-{place + 1}"
        n = 1
        while native in used:
            n += 1
            native = f"{base}#{n}" if base else f"{native}+"
        used.add(native)
        return native

    def open_until(self, index: int) -> None:
        """Open the waiting calls up to and including ``index``: their rows are made now, in
        the turn under way."""
        while self.waiting and self.waiting[0] <= index:
            call = self.calls[self.waiting.popleft()]
            self.seq += 1
            fresh, cached = call.fresh, call.cached
            prompt = None if fresh is None and cached is None else (fresh or 0) + (cached or 0)
            call.row = self.main.call(
                call.native,
                line=call.line,
                ts=call.ts,
                seq=self.seq,
                provider="anthropic",
                app=APP,
                project=self.project,
                input_tokens=prompt,
                cached_input_tokens=cached,
                output_tokens=call.output,
                output_final=self.final,
                n_records=1,
                reply_saved=True,
            )

    def open_before(self, ts: datetime | None, inclusive: bool) -> None:
        """Open the waiting calls begun before ``ts`` (or at it, ``inclusive``)."""
        last = -1
        for index in self.waiting:
            begun = self.calls[index].ts
            if ts is None or begun is None or begun > ts or (begun == ts and not inclusive):
                break
            last = index
        self.open_until(last)

    def settle(self, call: _Call) -> None:
        """The call's model (a synthetic reply priced at $0, as ``claude_code`` does), and its
        row handed over."""
        row = call.row
        assert row is not None
        model = call.model or self.model
        if call.model == SYNTHETIC or (call.model is None and call.zero and self.synthetic_named):
            model = SYNTHETIC
            row.output_final, row.cost_usd, row.cost_basis = True, 0.0, "reported"
            found = [s for s in map(_API_ERROR.search, call.texts) if s is not None]
            if found:
                row.finish_reason_raw, row.http_status = "error", int(found[0].group(1))
        row.model = model
        self.low.add_call(row)

    def call_of(self, stamp: str | None, ts: datetime | None) -> _Call | None:
        """The call an assistant message of the main thread belongs to: the entry at its time,
        else the latest call begun before it."""
        index = self.at.get(stamp) if stamp is not None else None
        if index is not None:
            self.open_until(index)
            return self.calls[index]
        self.open_before(ts, inclusive=True)
        opened = [c for c in self.calls if c.row is not None]
        return opened[-1] if opened else None

    # -- the messages ------------------------------------------------------------------------

    def message(self, m: dict[str, Any]) -> None:
        role: str = m["role"]
        meta = as_dict(m.get("_metadata"))
        stamp = as_str(meta.get("timestamp"))
        ts = parse_time(stamp, self.tz)
        blocks = [b for b in as_list(m.get("content")) if isinstance(b, dict)]
        if isinstance(m.get("content"), str):
            blocks = [{"type": "text", "text": m["content"]}]
        if role.startswith(SUBAGENT):
            rows = self.subagent(role.removeprefix(SUBAGENT), m, meta, blocks, ts)
        elif role == "assistant":
            rows = self.assistant(m, meta, blocks, stamp, ts)
        else:
            self.open_before(ts, inclusive=False)
            rows = self.other(self.main, role, m, blocks, ts)
        if not rows:
            self.low.skip("message_without_content")
            return
        rows[0].n_records = 1
        for row in rows:
            self.low.add_message(row)

    def assistant(
        self,
        m: dict[str, Any],
        meta: dict[str, Any],
        blocks: list[dict[str, Any]],
        stamp: str | None,
        ts: datetime | None,
    ) -> list[Message]:
        """A reply of the main thread: its text and tool calls, tied to its call."""
        call = self.call_of(stamp, ts)
        named = as_str(m.get("model")) or as_str(meta.get("model"))
        if call is not None and named:
            call.model = named
        row = call.row if call is not None else None
        call_id = self.low.call_id(call.native) if call is not None else None
        rows = self.said(self.main, blocks, ts, call_id, m)
        if row is not None and rows:  # (a call with no message keeps its content unknown)
            row.add(content_chars=0, visible_chars=0, tool_call_count=0)
        for r in rows:
            if row is not None and r.kind == "text":
                row.add(content_chars=r.text_chars or 0, visible_chars=r.visible_chars or 0)
            elif row is not None:
                row.add(tool_call_count=1)
        if call is not None:
            call.texts += [as_text(b.get("text")) for b in blocks if b.get("type") == "text"]
        return rows

    def said(
        self,
        talk: Conversation,
        blocks: list[dict[str, Any]],
        ts: datetime | None,
        call_id: str | None,
        m: dict[str, Any],
    ) -> list[Message]:
        """What a reply said: its text blocks and its tool calls (the ``tool_call`` blocks,
        else the OpenAI-style ``tool_calls`` beside them)."""
        rows: list[Message] = []
        calls = [b for b in blocks if b.get("type") == "tool_call"]
        for b in blocks:
            if b.get("type") == "text":
                rows.append(talk.said(b.get("text"), ts=ts, call_id=call_id))
        for b in calls:
            name, use_id = as_str(b.get("name")), as_str(b.get("tool_call_id"))
            rows.append(talk.tool_call(name, b.get("arguments"), use_id, ts=ts, call_id=call_id))
        if not calls:
            for tc in as_list(m.get("tool_calls")):
                fn = as_dict(as_dict(tc).get("function"))
                name, use_id = as_str(fn.get("name")), as_str(as_dict(tc).get("id"))
                args = fn.get("arguments")
                rows.append(talk.tool_call(name, args, use_id, ts=ts, call_id=call_id))
        return rows

    def other(
        self,
        talk: Conversation,
        role: str,
        m: dict[str, Any],
        blocks: list[dict[str, Any]],
        ts: datetime | None,
    ) -> list[Message]:
        """A user's message (a prompt, or the compaction summary) or a tool's results."""
        rows: list[Message] = []
        use_id = as_str(m.get("tool_call_id"))
        for b in blocks:
            kind = b.get("type")
            if kind == "tool_output":
                text = _result_text(b.get("text"))
                rows.append(talk.tool_result(text, None, ts=ts, use_id=use_id, role="tool"))
            elif kind == "text" and role == "user":
                text = as_text(b.get("text"))
                summary = text.startswith(COMPACT_SUMMARY)
                if not summary and not rows:
                    talk.turn = f"{talk.session}:{talk.idx + 1}"
                rows.append(talk.prompt(text, ts=ts, agent=summary, records=0))
            elif kind == "text":
                rows.append(talk.text(role, "system", b.get("text"), ts=ts))
        return rows

    def subagent(
        self,
        agent: str,
        m: dict[str, Any],
        meta: dict[str, Any],
        blocks: list[dict[str, Any]],
        ts: datetime | None,
    ) -> list[Message]:
        """A sub-agent's message, in its own session (its calls are not in the file)."""
        talk = self.agents.get(agent)
        if talk is None:
            talk = self.agents[agent] = Conversation(f"{self.main.session}:agent-{agent}")
        role = as_str(meta.get("original_role")) or "assistant"
        if role == "assistant":
            return self.said(talk, blocks, ts, None, m)
        return self.other(talk, role, m, blocks, ts)


def load(ctx: LoadContext) -> LoadResult:
    doc = read_json_document(ctx.source)
    if not isinstance(doc, dict):
        raise InputError("a converted session that is not a JSON object", ctx.source.display)
    source = as_dict(doc.get("meta")).get("source")
    if source != SOURCE:
        said = "no meta.source" if source is None else f"meta.source {brief(source, 60)}"
        raise InputError(
            f"a converted session with {said}, not {SOURCE!r} (read it with --format "
            "conversation_json)",
            ctx.source.display,
        )
    return _Reader(ctx, doc).run()


# What this module is to the registry (analyzer.formats).
SPEC = FormatSpec(
    name="claude_merged",
    title="Claude Code session converted to JSON (claude-jsonl-merged)",
    kind="log",
    sniff_order=88,
    call_prefix="ccm",
    sniff=sniff,
    load=load,
)
