"""Claude Code transcripts: ``~/.claude/projects/<slug>/<session>.jsonl`` and sub-agent files.

Facts from real transcripts (the public ones the tests read), all of which shape this loader:

* One API call is written as several ``assistant`` lines, one per content block, sharing
  ``message.id`` and ``requestId``: lines are grouped into a call by that pair (by
  ``message.id`` alone when ``requestId`` is empty).
* ``output_tokens`` on those lines is a streaming snapshot: the maximum is kept. Before
  2.1.97 it is often never finalised (every real file of 2.0.14-2.1.39 the tests read): a call
  is final only when a line says how it stopped (``stop_reason``, 2.1.87 and later on most
  calls' last line) or its version writes final counts on every line (2.1.97+). Otherwise
  ``output_final`` is false (a 3-token placeholder is not a loop signal) and the output is
  estimated from what the call wrote (``analyzer.ingest.output_estimate``), which prices it.
* The whole prompt is ``input_tokens + cache_creation_input_tokens + cache_read_input_tokens``;
  the 1-hour share of cache writes is ``usage.cache_creation.ephemeral_1h_input_tokens``.
* ``stop_reason`` is null before 2.1.87, so the finish reason there is ``unknown``.
* A ``user`` line with plain text (not a tool result, not ``isMeta``, not a compaction summary)
  starts a turn.
* ``isSidechain``/``agentId`` mark a sub-agent; its lines carry the parent's ``sessionId``. The
  sub-agent gets its own session ``<parent>:agent-<id>``, linked by ``parent_session_id``.
* One ``message.id`` is one API response, billed once. A ``/btw`` side question replays a
  parent message into a sidechain with the same ``message.id`` and a new ``requestId``
  (ccusage issue 913, fixed in its PR 1155): a sidechain call whose ``message.id`` another call
  already has (earlier in the file, or stored from another file) is a replay, counted as a
  duplicate. Outside sidechains the pair is the call (hand-written fixtures reuse ids).
* Money: ``usage.speed: "fast"`` is fast mode (stored as ``variant = 'fast'``, priced at its
  rate); ``usage.server_tool_use.web_search_requests`` are priced per request; a ``costUSD`` on
  the line (Claude Code 1.0 wrote one) is the agent's own figure, kept as ``reported`` with the
  list-price estimate beside it.
* A ``tool_use`` block's ``id`` ties it to the ``tool_result`` (``tool_use_id``) in a later
  ``user`` line; the result's content is hashed, so polling (same call, new result) can be told
  from a loop (same call, same result).

Records: ``assistant`` lines build calls, ``user`` lines build messages; ``progress``,
``file-history-snapshot``, ``queue-operation``, ``summary`` and ``system`` lines hold nothing
the store keeps and are counted as skipped, by kind.

Usage first (``IngestOptions.content`` false, ``analyzer.load.usage_first``): only the lines
that can be ``assistant`` lines are parsed (``jsonl.Only``), and they build the same calls by
the same code, every usage rule included (the output estimate measures what the call wrote as a
full read does); no message is written and no content is hashed, calls have no turn (a turn
starts at a user line), and the other lines are counted as skipped (``CONTENT_LATER``) until
the file is read whole.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from analyzer.formats.claude_usage import project_folder as _project_folder
from analyzer.ingest.content import EXCERPT_CHARS, args_hash, args_text, brief, text_measure
from analyzer.ingest.conversation import Conversation
from analyzer.ingest.output_estimate import OutputTally, settle
from analyzer.ingest.reading import LineEnds
from analyzer.ingest.rows import CallRow
from analyzer.ingest.spec import FormatSpec
from analyzer.ingest.usage import token_counts
from analyzer.ingest.values import as_str, as_text, kind_of, parse_time

if TYPE_CHECKING:
    from analyzer.ingest.base import Checkpoint, Head, LoadContext, LoadResult
    from analyzer.ingest.jsonl import Only
    from analyzer.ingest.lowering import Lowering
    from analyzer.ingest.resume import Closed

# (The reading of a whole file - ``base``, ``jsonl``, ``lowering``, ``resume`` - is imported
# where it is used: the live hook reads a transcript's new lines through ``_Reader.line`` alone,
# and its start is short.)

APP = "claude-code"
# The model a reply has that the CLI wrote itself, without calling a model.
SYNTHETIC = "<synthetic>"
_LINE_TYPES = {
    "user",
    "assistant",
    "system",
    "summary",
    "progress",
    "file-history-snapshot",
    "queue-operation",
    "turn_end",
}


@functools.cache
def _api_error() -> re.Pattern[str]:
    return re.compile(r"API Error:?\s*(\d{3})")


@functools.cache
def _usage_lines() -> Only:
    """The lines a usage-first read parses (the others are counted as ``CONTENT_LATER``)."""
    from analyzer.ingest.base import CONTENT_LATER
    from analyzer.ingest.jsonl import Only

    return Only(b"assistant", CONTENT_LATER)


def sniff(head: Head) -> bool:
    from analyzer.ingest.jsonl import head_objects

    for obj in head_objects(head):
        kind = kind_of(obj)
        if kind in _LINE_TYPES and ("sessionId" in obj or "parentUuid" in obj):
            return True
        if kind == "summary" and "leafUuid" in obj:
            return True
        if kind == "file-history-snapshot" and "snapshot" in obj:
            return True
    return False


class _Session(Conversation):
    """Per (session, agent) state while reading a file: the session's messages (its turn and
    the place of its last message), where it came from, and the number of its calls."""

    session: str  # (a session here always has its id)

    def __init__(self, session_id: str, parent: str | None, agent: str | None) -> None:
        super().__init__(session_id)
        self.parent = parent
        self.agent = agent
        self.seq = 0

    def saved(self) -> list[Any]:
        """The session as JSON values (see ``restored``)."""
        return [self.session, self.parent, self.agent, self.turn, self.idx, self.seq]

    @classmethod
    def restored(cls, saved: list[Any]) -> _Session:
        session_id, parent, agent, turn, idx, seq = saved
        s = cls(str(session_id), parent, agent)
        s.turn, s.idx, s.seq = turn, int(idx), int(seq)
        return s


def _result_text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            as_text(b.get("text"))
            for b in content
            if isinstance(b, dict) and b.get("type") == "text"
        )
    return ""


# A file's calls while it is read, by (message id, request id): the row and what its lines wrote
# (its output, estimated where the count is a placeholder: see ``settle_call``).
OpenCalls = dict[tuple[str, str], tuple[CallRow, OutputTally]]

# A long transcript (a file loaded on its own) is written in parts as it is read: once this many
# calls are open, the oldest PART_CALLS of them are written (a call's lines are written together,
# so the oldest calls have all their lines), and memory follows the calls kept, not the file.
OPEN_CALLS = 20_000
PART_CALLS = 10_000


class _Parts:
    """The calls of a long transcript written so far, in parts (``write``), and what makes the
    parts independent of one another as the sink settles each: no call of a later part has the
    id of one written (a line of a call written already: its call would be split) and no
    original comes after a replay of its response written already (the file's replay would be
    left out, as ``settle_in_file.sql`` judges a file). Otherwise ``Unchunkable``: the file is
    read again whole, so what is stored is always what reading it whole stores."""

    def __init__(self, low: Lowering) -> None:
        self.low = low
        self.ids: set[str] = set()  # the native ids written
        self.replayed: set[str] = set()  # the response ids of replays written

    def check(self, calls: list[CallRow]) -> None:
        for call in calls:
            if call.native_id in self.ids or (
                not call.replay and call.response_id in self.replayed
            ):
                from analyzer.ingest.base import Unchunkable

                raise Unchunkable

    def write(self, book: CallBook) -> None:
        """The oldest ``PART_CALLS`` open calls settled and written, and let go."""
        keys = list(itertools.islice(book.calls, PART_CALLS))
        part = [settle_call(*book.calls.pop(key)) for key in keys]
        for key in keys:
            book.usages.pop(key, None)
        self.check(part)
        for call in part:
            self.low.add_call(call)
            self.ids.add(str(call.native_id))
            if call.replay and call.response_id:
                self.replayed.add(call.response_id)
        self.low.write_calls()


def _closed() -> Closed:
    """No call closed yet (``CallBook.closed`` of a read from a file's start)."""
    from analyzer.ingest.resume import Closed

    return Closed()


@dataclass
class CallBook:
    """A file's calls while it is read (``OpenCalls``) and the usage each call's counts last
    took in; ``closed``: the calls an earlier read of the file let go of, which no line may add
    to now; ``starting``: told before a line starts a call."""

    calls: OpenCalls = field(default_factory=dict)
    usages: dict[tuple[str, str], object] = field(default_factory=dict)
    closed: Closed = field(default_factory=_closed)
    starting: Callable[[], None] = lambda: None
    parts: _Parts | None = None  # the calls written in parts so far (a long file)


def load(ctx: LoadContext) -> LoadResult:
    if not ctx.options.content:  # usage first: DuckDB's reader, where it agrees (its module)
        from analyzer.formats import claude_usage

        done = claude_usage.load(ctx, SPEC.name, SPEC.call_prefix)
        if done is not None:
            return done
    return read(ctx)


def read(ctx: LoadContext) -> LoadResult:
    """The file read line by line in Python (whole, or usage first: see the module)."""
    from analyzer.ingest.jsonl import json_lines

    r = _Reader(ctx)
    only = None if r.content else _usage_lines()
    for lineno, obj in json_lines(ctx.source, r.low, ctx.resume, r.ends, only):
        r.line(lineno, obj)
    rest = [settle_call(call, tally) for call, tally in r.book.calls.values()]
    if r.parts is not None:
        r.parts.check(rest)
    for call in rest:
        r.low.add_call(call)
    # (a usage-first read leaves no resume point: its file is read whole with its content)
    r.low.result.checkpoint = r.checkpoint() if r.content else None
    return r.low.finish()


# A later read of a file that grew starts at the first line of the newest call, so that a call
# whose lines may go on is read whole then. The lines of one API response come together: in
# every real transcript the tests read, no line adds to a call once a later call has begun (if
# one does, the file is read whole).
CALLS_READ_AGAIN = 1


class _Reader:
    """A transcript's lines read into calls and messages. ``checkpoint`` says where a later
    read of the file, grown, can go on (``analyzer.ingest.resume``): at the first line of the
    newest calls, with the sessions' counters as they were there."""

    def __init__(self, ctx: LoadContext) -> None:
        from analyzer.ingest.lowering import Lowering

        self.low = Lowering(ctx, SPEC.name, SPEC.call_prefix)
        self.tz = ctx.options.tz
        self.content = ctx.options.content  # (else: usage first, see the module)
        self.sessions: dict[tuple[str, str | None], _Session] = {}
        self.parts = None if ctx.batched or ctx.whole else _Parts(self.low)
        self.book = CallBook(starting=self.starting, parts=self.parts)
        self.ends = LineEnds()
        # Where the newest calls start: (offset, line ends before, the sessions there).
        self.starts: deque[tuple[int, int, list[list[Any]]]] = deque(maxlen=CALLS_READ_AGAIN)
        path = Path(ctx.source.path)
        self.file_session = path.stem
        self.folder = _project_folder(path)
        self.parent_name = path.parent.name or None
        if ctx.resume is not None:
            self.restore(ctx.resume.state)

    def session_of(self, obj: dict[str, Any]) -> _Session:
        sid = obj.get("sessionId")
        if sid.__class__ is not str or not sid:
            sid = as_str(sid) or self.file_session
        agent = as_str(obj.get("agentId")) if obj.get("isSidechain") else None
        s = self.sessions.get((sid, agent))
        if s is None:
            if agent:
                s = self.sessions[sid, agent] = _Session(f"{sid}:agent-{agent}", sid, agent)
            else:
                s = self.sessions[sid, agent] = _Session(sid, None, None)
        return s

    def line(self, lineno: int, obj: dict[str, Any]) -> None:
        low = self.low
        kind = obj.get("type")  # (only a string is one of these; see ``kind_of`` below)
        if kind == "assistant":
            s = self.session_of(obj)
            call = _assistant(low, obj, lineno, s, self.book, self.tz, self.content)
            if call is not None and not call.project:
                call.project = self.folder or as_str(obj.get("cwd")) or self.parent_name
            if self.parts is not None and len(self.book.calls) >= OPEN_CALLS:
                self.parts.write(self.book)
        elif not self.content:
            from analyzer.ingest.base import CONTENT_LATER  # (the live reader reads content)

            low.skip(CONTENT_LATER)
        elif kind == "user":
            _user(low, obj, self.session_of(obj), self.tz)
        elif kind == "system" and obj.get("subtype") == "compact_boundary":
            s = self.session_of(obj)
            ts = parse_time(obj.get("timestamp"))
            low.add_message(s.message("system", "compaction", ts=ts, n_records=1))
        else:
            low.skip(str(kind_of(obj) or "untyped"))

    def saved_sessions(self) -> list[list[Any]]:
        return [[k[0], k[1], *s.saved()] for k, s in self.sessions.items()]

    def starting(self) -> None:
        """The line read now starts a call: where it starts, and the sessions before it (a
        session the line itself starts is there with nothing counted, as a new one is)."""
        self.starts.append((self.ends.line_offset, self.ends.line_lines, self.saved_sessions()))

    def checkpoint(self) -> Checkpoint | None:
        """Where a later read goes on (``jsonl.checkpoint``): at the first line of the newest
        ``CALLS_READ_AGAIN`` calls, with the sessions as they were there and the calls before
        it closed; else (no call read) after the last whole line."""
        from analyzer.ingest.jsonl import checkpoint

        calls = list(self.book.calls.values())
        at: tuple[int, int] | None = None
        sessions = self.saved_sessions()
        if self.starts:
            offset, lines, sessions = self.starts[0]
            at = (offset, lines)
            calls = calls[: len(calls) - len(self.starts)]
        closed = self.book.closed
        for native in self.parts.ids if self.parts is not None else ():  # (written in parts)
            closed.add(native)
        for call, _tally in calls:
            closed.add(str(call.native_id))
        state = {"sessions": sessions, "closed": closed.saved()}
        return checkpoint(self.low.ctx.source, at, self.ends, state)

    def restore(self, state: dict[str, Any]) -> None:
        """Go on from a checkpoint's ``state``."""
        from analyzer.ingest.resume import Closed

        for sid, agent, *saved in state["sessions"]:
            self.sessions[sid, agent] = _Session.restored(saved)
        self.book.closed = Closed.restored(state["closed"])


def settle_call(call: CallRow, tally: OutputTally) -> CallRow:
    """The call, its output marked final or estimated from what its lines showed."""
    settle(call, tally)
    return call


def _assistant(
    low: Lowering,
    obj: dict[str, Any],
    lineno: int,
    s: _Session,
    book: CallBook,
    tz: str,
    content: bool = True,
) -> CallRow | None:
    msg = obj.get("message")
    msg_id = as_str(msg.get("id")) if isinstance(msg, dict) else None
    if not isinstance(msg, dict) or not msg_id:
        low.reject(lineno, "assistant line without message.id", brief(obj))
        return None
    request = as_str(obj.get("requestId")) or ""
    key = (msg_id, request)
    calls, usages = book.calls, book.usages
    if key not in calls:
        native = f"{msg_id}:{request}" if request else msg_id
        if book.parts is not None and native in book.parts.ids:
            from analyzer.ingest.base import Unchunkable

            raise Unchunkable  # a line of a call written in an earlier part of this read
        if native in book.closed:  # (maybe) a line of a call an earlier read let go of
            from analyzer.ingest.base import CannotResume

            raise CannotResume(f"line {lineno} may add to call {native}")
        book.starting()
        calls[key] = _new_call(obj, msg, msg_id, request, lineno, s, tz), OutputTally()
    call, tally = calls[key]
    tally.see_version(obj.get("version"))
    call.add(n_records=1)
    cost = obj.get("costUSD")
    if isinstance(cost, int | float) and not isinstance(cost, bool) and 0 <= cost < 1e6:
        call.cost_usd = max(call.cost_usd or 0.0, float(cost))
        call.cost_basis = "reported"
    _take_usage(call, msg.get("usage"), key, usages)
    if msg.get("stop_reason"):
        call.finish_reason_raw = as_str(msg["stop_reason"])
        tally.stopped = True
    if obj.get("isApiErrorMessage"):
        call.finish_reason_raw = "error"
        text = _result_text(msg.get("content"))
        m = _api_error().search(text)
        call.http_status = int(m.group(1)) if m else None
    blocks = msg.get("content")
    if isinstance(blocks, list):
        _said(low, call, blocks, s, tally, content)
    elif isinstance(blocks, str):
        _said(low, call, ({"type": "text", "text": blocks},), s, tally, content)
    return call


def _new_call(
    obj: dict[str, Any],
    msg: dict[str, Any],
    msg_id: str,
    request: str,
    lineno: int,
    s: _Session,
    tz: str,
) -> CallRow:
    """The call an assistant line starts (the lines after it of the same message and request
    add to it)."""
    s.seq += 1
    synthetic = msg.get("model") == SYNTHETIC
    return s.call(
        f"{msg_id}:{request}" if request else msg_id,
        response_id=msg_id,
        line=lineno,
        ts=parse_time(obj.get("timestamp"), tz),
        seq=s.seq,
        agent_id=s.agent,
        parent_session_id=s.parent,
        model=as_str(msg.get("model")),
        provider="anthropic",
        app=APP,
        # a reply the CLI wrote itself (a usage limit, no credit, an auth error): no model was
        # called, so it cost nothing and its zero counts are final; a call all the same, counted
        output_final=synthetic,
        cost_usd=0.0 if synthetic else None,
        cost_basis="reported" if synthetic else None,
        content_chars=0,
        visible_chars=0,
        reasoning_chars=0,
        tool_call_count=0,
        n_records=0,
        replay=obj.get("isSidechain") is True and bool(request),
    )


def _take_usage(
    call: CallRow,
    usage: object,
    key: tuple[str, str],
    usages: dict[tuple[str, str], object],
) -> None:
    """A line's usage object into its call. output_tokens is a streaming snapshot: the largest
    of the call's lines is kept. (Taking in counts the call holds already changes nothing: the
    lines of a call mostly repeat its usage object, and an equal one is not read again.)"""
    try:
        same = usage == usages.get(key)
    except RecursionError:  # objects nested deeper than Python compares: read it again
        same = False
    if not same:
        usages[key] = usage
        call.update(
            {
                column: value if column == "variant" else max(getattr(call, column) or 0, value)
                for column, value in token_counts(usage).items()
            }
        )


def _said(
    low: Lowering,
    call: CallRow,
    blocks: list[Any] | tuple[dict[str, Any], ...],
    s: _Session,
    tally: OutputTally,
    content: bool = True,
) -> None:
    """The content blocks of an assistant line: its text and tool calls as messages, its
    thinking measured. Without ``content`` (a usage-first read), only what the call's measures
    and its output estimate count: the same figures, no message."""
    ts = call.ts
    call_id = low.call_id(str(call.native_id)) if content else None
    for block in blocks:
        if not isinstance(block, dict):
            continue
        btype = block.get("type")
        if btype == "text":
            if content:
                row = s.said(block.get("text"), ts=ts, call_id=call_id)
                low.add_message(row)
                # (measured once: the message's measures are the call's)
                chars, visible = row.text_chars or 0, row.visible_chars or 0
            else:
                chars, visible = text_measure(block.get("text"))
            call.add(content_chars=chars, visible_chars=visible)
            tally.text_chars += chars
        elif btype in ("thinking", "redacted_thinking"):
            call.add(
                reasoning_chars=len(as_text(block.get("thinking")) or as_text(block.get("data")))
            )
            tally.add_thinking(block)
        elif btype in ("tool_use", "server_tool_use"):
            call.add(tool_call_count=1)
            args = block.get("input")
            args_said = args_text(args)  # (once: measured, and its start kept as the excerpt)
            tally.add_args(block.get("name"), args_said)
            if not content:
                continue
            # (not ``s.tool_call``: these rows have never had a meaning_key, which it adds)
            low.add_message(
                s.message(
                    "assistant",
                    "tool_call",
                    ts=ts,
                    tool_name=as_str(block.get("name")),
                    tool_args_hash=args_hash(args),
                    excerpt=None if args_said is None else args_said[:EXCERPT_CHARS],
                    tool_use_id=as_str(block.get("id")),
                    call_id=call_id,
                )
            )


def _user(low: Lowering, obj: dict[str, Any], s: _Session, tz: str) -> None:
    msg = obj.get("message")
    content = msg.get("content") if isinstance(msg, dict) else None
    ts = parse_time(obj.get("timestamp"), tz)
    meta = bool(obj.get("isMeta")) or bool(obj.get("isCompactSummary"))
    results: list[dict[str, Any]] = []
    texts: list[dict[str, Any]] = []
    if isinstance(content, list):  # its blocks (objects), sorted out in one pass
        for b in content:
            if isinstance(b, dict):
                btype = b.get("type")
                if btype == "tool_result":
                    results.append(b)
                elif btype == "text":
                    texts.append(b)
    elif isinstance(content, str):
        texts.append({"type": "text", "text": content})
    records = 1  # the line's first message accounts for it

    if texts and not results and not meta:
        s.turn = f"{s.session}:{as_str(obj.get('uuid')) or s.idx + 1}"
    for b in texts:
        low.add_message(s.prompt(b.get("text"), ts=ts, agent=meta, records=records))
        records = 0
    for b in results:
        result = b.get("content")
        low.add_message(
            s.tool_result(
                result,
                bool(b.get("is_error")),
                ts=ts,
                text=_result_text(result),
                use_id=as_str(b.get("tool_use_id")),
                role="user",
                records=records,
            )
        )
        records = 0
    if records:  # nothing kept from this line (an image, an empty message)
        low.skip("user_without_text")


# What this module is to the registry (analyzer.formats).
SPEC = FormatSpec(
    name="claude_code",
    title="Claude Code transcript (JSONL)",
    kind="log",
    sniff_order=20,
    call_prefix="cc",
    sniff=sniff,
    load=load,
    batch=True,  # small files are loaded many at a time (analyzer.load.batch)
    resumes=True,  # a transcript that grew is read on from where it was read to
    usage_first=True,  # its calls can be read without their content (see the module)
)
