"""A Claude Code transcript read as the replay's calls, incrementally, without the store.

The Claude Code hook (``analyzer.api.claude_hook``) judges the session on every tool call. The
replay gives a guard its calls from the store (``Replay.events``): the transcript ingested,
settled in SQL, then sorted. ``LiveTranscript`` gives the same calls (``Call`` of
``analyzer.guards.guard``, field by field) from the transcript alone, in pure Python, and reads
on from where it stopped when the transcript grew: the lines are read by the ingest's own code
(``analyzer.formats.claude_code``: its reader, sessions, turns, calls, messages, meaning keys,
output estimates and token rules), and what the store then does in SQL is mirrored here, one
function per rule, each naming the statement it mirrors:

* the settlement of a file's calls (``_settle_replays``: settle_in_file.sql; the cost:
  ``_cost``, settle_calls.sql with the prices of ``analyzer.model.pricing``, priced once per
  model, provider, day and fast mode and kept in the state; ``_finish_reason`` and
  ``_response_kind``: the macros of classify.sql);
* the replay's per-call columns (``_tool_key``: the ``tools`` CTE of guards/events.sql;
  ``_outcomes``: outcomes.sql; ``_steps``: guards/steps.sql) and its order (``ORDER BY stream,
  seq, ts, call_id``: guards/numbers.sql and events.sql).

What does not apply to one Claude Code file read alone: the session numbering of bills
(with_sessions.sql, numbered.sql, renumber_streams.sql: a transcript names its sessions), the
settlement against calls stored from other files (an empty store holds none), the links to
bills, and settle_messages.sql's duplicates (a file's messages have distinct places) beyond
the messages of replays left out, which no call's columns read then.

State, kept small to be pickled after every hook call: each call's ``Call`` as compact bytes,
in the replay's order (a stream's older calls in chunks compressed once); the full reading
state (the ingest's ``CallRow`` and output tally, its tool calls and their results) only of
the calls later lines can still change: the newest ``OPEN_CALLS`` and those with a tool call
still waiting for its result (at most ``MAX_OPEN``). A later line that would change a call let
go of (a line of its API response, another result of one of its tool calls) makes ``read_on``
answer None: the caller reads the transcript again from the start, slower and never wrong.

Two differences from an ingest, by design: a last line without its line end is left for the
next read (the ingest takes it when it is whole JSON: Claude Code writes whole lines, and the
hook runs once they are written); and ``tool_call_count`` is None, as in the replay's events
(which carry no such column).
"""

from __future__ import annotations

import hashlib
import marshal
import math
import zlib
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import orjson

from analyzer.formats.claude_code import (
    SYNTHETIC,
    CallBook,
    _Reader,
    settle_call,
)
from analyzer.formats.claude_usage import project_folder as _project_folder
from analyzer.ingest.output_estimate import OutputTally
from analyzer.ingest.reading import MAX_LINE_BYTES
from analyzer.ingest.rows import CallRow, MessageRow

if TYPE_CHECKING:
    from analyzer.guards.guard import Call

# The fields of ``Call``, in its order (tests/test_live_claude.py holds them to it).
FIELDS = (
    "call_id",
    "session_id",
    "turn_id",
    "stream_key",
    "ts",
    "model",
    "app",
    "api_key",
    "response_kind",
    "finish_reason",
    "input_tokens",
    "output_tokens",
    "reasoning_tokens",
    "cost_usd",
    "visible_chars",
    "content_chars",
    "reply_saved",
    "http_status",
    "output_final",
    "tool_key",
    "tool_call_count",
    "is_bill",
    "refused",
    "error_key",
    "result_key",
    "step_key",
    "step_errors",
    "step_failed",
    "parent_session_id",
)
_TS = FIELDS.index("ts")
_COST = FIELDS.index("cost_usd")
PREFIX = "cc"  # the call ids' prefix (claude_code.SPEC.call_prefix)
OPEN_CALLS = 8  # the newest calls kept open, whatever their tool calls wait for
MAX_OPEN = 256  # the calls kept open at most
DIGEST_BYTES = 4096  # the bytes of the head and of the end of what was read, digested
CHUNK = 8 << 20  # bytes read at a time
CHUNK_CALLS = 256  # the calls of a stream compressed together
_NO_KEY = ("", "")  # the key of a call told of before its line is through
_Q = Decimal("1e-10")  # DECIMAL(18, 10): the scale of the replay's cost_usd
_WEB_SEARCH_USD = Decimal("0.01")  # pricing.WEB_SEARCH_USD (priced per request)

# One tool call of a call (a ``tool_call`` message): its place, tool, arguments' hash, use id
# and meaning key; one result (a ``tool_result`` message): error, hash, meaning key.
Act = tuple[int, str | None, str | None, str | None, str | None]
Got = tuple[bool | None, str | None, str | None]
# A price tier of pricing.price_rows: above, upto, p_in, p_read, p_5m, p_1h, p_out.
Tier = tuple[int, int | None, float, float, float, float, float]
PriceKey = tuple[str, str | None, date | None, bool]


def _nothing() -> None:
    """The reader's ``starting`` (it keeps no resume points here)."""


class _Ids:
    """A growing set of ids, each kept as a 64-bit digest, pickled as one string (read and
    written at once, whatever its size); those added since it was unpickled are a set beside
    it."""

    def __init__(self) -> None:
        self.text = "\n"
        self.fresh: set[str] = set()

    def add(self, key: str) -> None:
        self.fresh.add(_short(key))

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        short = _short(key)
        return short in self.fresh or f"\n{short}\n" in self.text

    def __getstate__(self) -> dict[str, str]:
        return {"text": self.text + "".join(f"{k}\n" for k in sorted(self.fresh))}

    def __setstate__(self, state: dict[str, str]) -> None:
        self.text, self.fresh = state["text"], set()


@dataclass
class _Open:
    """A call later lines can still change: where its row is (``key`` in the reader's book),
    its tool calls, and whether it is a replay left out (``gone``)."""

    key: tuple[str, str]
    session: str
    acts: list[Act] = field(default_factory=list)
    gone: bool = False
    placed: bool = False  # in the replay's order already
    dups: list[tuple[str, str]] = field(default_factory=list)  # other keys of its native id


class _Low:
    """The ``Lowering`` the ingest's reader is given: the messages it adds go to the
    transcript (only tool calls and their results shape a call's columns); the rest (skips,
    rejects, counts) is the sink's accounting, which no call reads."""

    call_prefix = PREFIX

    def __init__(self, live: LiveTranscript) -> None:
        self.live = live

    def call_id(self, native_id: str) -> str:
        return f"{PREFIX}:{native_id}"

    def add_message(self, row: MessageRow) -> None:
        self.live._message(row)

    def skip(self, kind: str, n: int = 1) -> None:
        pass

    def reject(self, line: int | None, reason: str, raw: bytes | str | None = None) -> None:
        pass

    def read(self, n: int = 1) -> None:
        pass


class _LiveReader(_Reader):
    """The ingest's reader of a transcript's lines (``claude_code._Reader.line``), over no
    store: its sessions and calls as the ingest keeps them while it reads a file."""

    def __init__(self, path: Path, low: _Low) -> None:  # (not the ingest's: no LoadContext)
        self.low = low  # type: ignore[assignment]
        self.tz = "UTC"  # (IngestOptions' default, as the hook ingests)
        self.content = True
        self.sessions = {}
        self.parts = None
        self.book = CallBook(closed=_Ids(), starting=_nothing)  # type: ignore[arg-type]
        self.file_session = path.stem
        self.folder = _project_folder(path)
        self.parent_name = path.parent.name or None


class LiveTranscript:
    """A Claude Code transcript read so far, as the replay's calls."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0  # bytes consumed (whole lines only)
        self.lineno = 0
        self.head = b""  # the digest of the file's first bytes read
        self.tail = b""  # the digest of the last bytes before ``offset``
        self.reader = _LiveReader(path, _Low(self))
        self.calls_n = 0
        self.open: dict[str, _Open] = {}  # by call id, in the file's order
        self.results: dict[tuple[str, str], list[Got]] = {}  # by (session, tool use id)
        self.waiting: dict[tuple[str, str], list[str]] = {}  # the calls a result goes to
        self.closed_uses = _Ids()  # (session, use id) of the tool calls of calls let go of
        self.responses = _Ids()  # the response ids of every call read
        self.replays: dict[str, list[tuple[str, str]]] = {}  # response id -> replays kept
        self.streams: dict[str, _Stream] = {}  # the calls of each stream, by its key, sorted
        self.prices: dict[PriceKey, list[Tier] | None] = {}
        self.dirty: set[str] = set()
        self.first = 0  # the first index changed by the read under way
        self.broken = False

    @classmethod
    def start(cls, path: Path, at: int = 0) -> LiveTranscript:
        """The transcript ``path``, nothing read yet; ``at``: read from that byte on (the
        start of a line), as if the file began there (the hook's tail of a long transcript,
        as ``claude_hook.transcript_tail`` copies it)."""
        live = cls(path)
        live.offset = at
        return live

    def __len__(self) -> int:
        return self.calls_n

    # -- reading ------------------------------------------------------------------------------

    def read_on(self, fh: BinaryIO, size: int) -> int | None:
        """Read the whole new lines from ``offset`` up to ``size`` (a last line without its
        newline is left for later). The index of the first call (in the replay's order) whose
        Call changed or that is new since the last read (``len`` before, when only new calls
        came); None when the file is not the one read before (shortened, or its bytes before
        ``offset`` changed) or a line changes a call let go of: start again with ``start``."""
        if self.broken or size < self.offset or not self._same(fh):
            return None
        fh.seek(self.offset)
        self.first = self.calls_n
        left = size - self.offset
        carry = b""
        try:
            while left > 0:
                chunk = fh.read(min(left, CHUNK))
                if not chunk:
                    break
                left -= len(chunk)
                data = carry + chunk if carry else chunk
                end = data.rfind(b"\n") + 1
                self._lines(data, end)
                carry = data[end:]
        except _Changed:
            self.broken = True
            return None
        self._remember(fh)
        return self._settle()

    def _same(self, fh: BinaryIO) -> bool:
        if not self.head:  # (nothing read yet)
            return True
        fh.seek(0)
        if _digest(fh.read(min(self.offset, DIGEST_BYTES))) != self.head:
            return False
        back = min(self.offset, DIGEST_BYTES)
        fh.seek(self.offset - back)
        return _digest(fh.read(back)) == self.tail

    def _remember(self, fh: BinaryIO) -> None:
        fh.seek(0)
        self.head = _digest(fh.read(min(self.offset, DIGEST_BYTES)))
        back = min(self.offset, DIGEST_BYTES)
        fh.seek(self.offset - back)
        self.tail = _digest(fh.read(back))

    def _lines(self, data: bytes, end: int) -> None:
        """The whole lines of ``data[:end]`` (as ``jsonl.json_lines`` reads them: a blank line
        is no record, a line too long or not a JSON object a reject)."""
        pos = 0
        if self.offset == 0 and data.startswith(b"\xef\xbb\xbf"):
            pos = 3  # a byte-order mark
        line = self.reader.line
        while pos < end:
            nl = data.index(b"\n", pos) + 1
            raw = data[pos:nl]
            self.offset += nl - pos
            pos = nl
            self.lineno += 1
            if len(raw) > MAX_LINE_BYTES or not raw.strip():
                continue
            try:
                obj = orjson.loads(raw)
            except orjson.JSONDecodeError:
                continue
            if obj.__class__ is not dict:
                continue
            self._line(line, obj)

    def _line(self, line: Any, obj: dict[str, Any]) -> None:
        book = self.reader.book
        before = len(book.calls)
        try:
            line(self.lineno, obj)
        except _cannot_resume():  # a line of a call let go of
            raise _Changed from None
        if obj.get("type") != "assistant":
            return
        if len(book.calls) > before:  # the line started a call
            key, (row, _tally) = next(reversed(book.calls.items()))
            self._new_call(key, row)
        elif (found := book.calls.get(_book_key(obj))) is not None:  # it went on with one
            self.dirty.add(f"{PREFIX}:{found[0].native_id}")

    def _new_call(self, key: tuple[str, str], row: CallRow) -> None:
        cid = f"{PREFIX}:{row.native_id}"
        this = self.open.setdefault(cid, _Open(key, str(row.session_id)))
        self.dirty.add(cid)
        if this.key not in (key, _NO_KEY):
            # settle_in_file.sql (lf_call_first): a second call of a native id (another
            # message and request id that join to the same) is a duplicate, its messages
            # the first's (they name the same call id). (One let go of: CannotResume.)
            this.dups.append(key)
            return
        this.key = key
        self._settle_replays(cid, row)

    def _settle_replays(self, cid: str, row: CallRow) -> None:
        """settle_in_file.sql (lf_call_gone): a replay (a sidechain call with a request id) is
        left out when another call of the file has its response id, an original anywhere or
        an earlier replay; so a replay kept so far goes once an original of it comes."""
        rid = str(row.response_id or "")
        if row.replay and rid:
            if rid in self.responses:
                self.open[cid].gone = True
            else:
                self.replays.setdefault(rid, []).append((cid, str(row.session_id)))
        elif rid in self.replays:
            for gone, stream in self.replays.pop(rid):
                self._drop(gone, stream)
        self.responses.add(rid)

    def _drop(self, cid: str, stream: str) -> None:
        """A replay kept so far left out (its original came)."""
        was = self.open.get(cid)
        if was is not None:
            was.gone = True
            if not was.placed:
                return
        k = self.streams[stream].find(cid)
        self.streams[stream].put(k, None)
        self.calls_n -= 1
        self.first = min(self.first, self._index(stream, k))

    def _message(self, row: MessageRow) -> None:
        """A message the reader added: a tool call goes to its call, a result to the tool
        calls of its session with its use id."""
        if row.kind == "tool_call" and row.call_id is not None:
            # (told before the reader's line is through: the call may be new)
            this = self.open.setdefault(row.call_id, _Open(_NO_KEY, str(row.session_id)))
            act: Act = (
                int(row.idx or 0),
                row.tool_name,
                row.tool_args_hash,
                row.tool_use_id,
                row.meaning_key,
            )
            this.acts.append(act)
            if row.tool_use_id is not None:
                use = (str(row.session_id), row.tool_use_id)
                if _joined(use) in self.closed_uses:
                    raise _Changed
                self.waiting.setdefault(use, []).append(row.call_id)
        elif row.kind == "tool_result" and row.tool_use_id is not None:
            use = (str(row.session_id), row.tool_use_id)
            if _joined(use) in self.closed_uses:  # another result of a tool call let go of
                raise _Changed
            got: Got = (row.is_error, row.tool_result_hash, row.meaning_key)
            self.results.setdefault(use, []).append(got)
            for cid in self.waiting.get(use, ()):
                self.dirty.add(cid)

    # -- settling -----------------------------------------------------------------------------

    def _settle(self) -> int:
        """The calls changed by the lines read made again, placed in the replay's order; the
        calls no later line can change let go of. Returns the first index changed."""
        book = self.reader.book
        for cid, this in self.open.items():  # (in the file's order: a stream's in seq order)
            if cid not in self.dirty or this.gone:
                continue
            row, tally = book.calls[this.key]
            values = self._values(row, tally, this)
            blob = marshal.dumps(values)
            stream = str(values[FIELDS.index("stream_key")])
            if this.placed:
                at = self.streams[stream].find(cid)
                if self.streams[stream].put(at, blob):
                    self.first = min(self.first, self._index(stream, at))
                continue
            if stream not in self.streams:
                self.streams = dict(sorted({**self.streams, stream: _Stream()}.items()))
            # (events.sql orders a stream by seq, which grows as its calls are read: a new
            # call ends its stream)
            self.streams[stream].append(blob)
            self.calls_n += 1
            this.placed = True
            self.first = min(self.first, self._index(stream, len(self.streams[stream]) - 1))
        self.dirty.clear()
        self._let_go()
        return self.first

    def _index(self, stream: str, at: int) -> int:
        """The index in the replay's order of the call ``at`` of ``stream`` (numbers.sql: the
        streams in the order of their keys)."""
        before = 0
        for key, calls in self.streams.items():
            if key == stream:
                return before + at
            before += len(calls)
        raise KeyError(stream)

    def _let_go(self) -> None:
        """Let go of the calls no later line can change but by a line of their own (which
        then reads the file again): all but the newest ``OPEN_CALLS``, once each of their tool
        calls has a result; and the oldest, whatever they wait for, past ``MAX_OPEN`` (a web
        search's result is in its own reply, a tool call cut short gets none)."""
        book = self.reader.book
        old = list(self.open)[: -OPEN_CALLS or None]
        over = len(self.open) - MAX_OPEN
        for n, cid in enumerate(old):
            this = self.open[cid]
            uses = [(this.session, a[3]) for a in this.acts if a[3] is not None]
            waits = any(use not in self.results for use in uses)
            if not this.gone and waits and n >= over:
                continue
            del self.open[cid]
            row, _ = book.calls.pop(this.key)
            for key in (this.key, *this.dups):
                book.calls.pop(key, None)
                book.usages.pop(key, None)
            book.closed.add(str(row.native_id))
            for use in uses:
                waiting = self.waiting.get(use, [])
                if cid in waiting:
                    waiting.remove(cid)
                if not waiting:
                    self.waiting.pop(use, None)
                    self.results.pop(use, None)
                    self.closed_uses.add(_joined(use))

    def _values(self, row: CallRow, tally: OutputTally, this: _Open) -> tuple[Any, ...]:
        """The call's Call as a tuple of ``FIELDS`` (ts as text, cost_usd as its digits)."""
        call = settle_call(_copy(row), _copy_tally(tally))
        fr = _finish_reason(call.finish_reason_raw, call.cancelled)
        got = {
            (this.session, a[3]): self.results.get((this.session, a[3]), [])
            for a in this.acts
            if a[3] is not None
        }
        acts = sorted(this.acts)
        cost = _cost(call, self._prices_of(call))
        said: dict[str, Any] = {
            "call_id": f"{PREFIX}:{call.native_id}",
            "session_id": call.session_id,
            "turn_id": call.turn_id,
            "stream_key": call.stream_key if call.stream_key is not None else call.session_id,
            "ts": call.ts.isoformat() if call.ts is not None else None,
            "model": call.model,
            "app": call.app,
            "response_kind": _response_kind(
                fr,
                call.http_status,
                call.output_tokens,
                call.reasoning_tokens,
                call.content_chars,
                call.visible_chars,
                call.reasoning_chars,
                call.tool_call_count,
            ),
            "finish_reason": fr,
            "input_tokens": call.input_tokens,
            "output_tokens": call.output_tokens,
            "reasoning_tokens": call.reasoning_tokens,
            "cost_usd": None if cost is None else str(cost),
            "visible_chars": call.visible_chars,
            "content_chars": call.content_chars,
            "reply_saved": call.reply_saved,
            "http_status": call.http_status,
            "output_final": call.output_final,
            "tool_key": _tool_key(acts, this.session),
            # (not a column of the replay's events: the truncated rule reads it in SQL only)
            "tool_call_count": None,
            "is_bill": False,
            "parent_session_id": call.parent_session_id,
            **_outcomes(acts, this.session, got),
            **_steps(acts, this.session, got),
        }
        return tuple(said.get(name) for name in FIELDS)

    def _prices_of(self, call: CallRow) -> list[Tier] | None:
        """The price tiers of the call's model, provider, day and fast mode (price_keys.sql:
        only a call with tokens, of a model named, not a stand-in), priced once and kept."""
        if (
            not call.model
            or call.model == SYNTHETIC
            or (call.input_tokens is None and call.output_tokens is None)
        ):
            return None
        key: PriceKey = (
            call.model,
            call.provider,
            call.ts.date() if call.ts is not None else None,
            call.variant == "fast",
        )
        if key not in self.prices:
            from analyzer.model.pricing import price_rows  # (genai-prices: only now)

            rows = price_rows({key})
            self.prices[key] = [
                (r["above"], r["upto"], r["p_in"], r["p_read"], r["p_5m"], r["p_1h"], r["p_out"])
                for r in rows
            ] or None
        return self.prices[key]

    # -- the calls ----------------------------------------------------------------------------

    def calls(self, start: int = 0) -> list[Call]:
        """The calls from index ``start`` on, in the replay's order, each equal to
        ``Call.from_event(row)`` for the rows ``Replay(...).events()`` gives for this file
        ingested alone."""
        from analyzer.guards.guard import Call

        out = []
        for blob in self._blobs(start):
            values = list(marshal.loads(blob))
            if values[_TS] is not None:
                values[_TS] = datetime.fromisoformat(values[_TS])
            if values[_COST] is not None:
                values[_COST] = Decimal(values[_COST])
            out.append(Call(**{k: v for k, v in zip(FIELDS, values, strict=True) if v is not None}))
        return out

    def costs(self, start: int = 0) -> list[tuple[str | None, str | None]]:
        """Each call's dollars (as text, to the store's digits) and time (ISO), from index
        ``start`` on, in the replay's order: what ``calls`` says of them, without making the
        calls (the status line, which needs no guard)."""
        out = []
        for blob in self._blobs(start):
            values = marshal.loads(blob)
            out.append((values[_COST], values[_TS]))
        return out

    def _blobs(self, start: int) -> list[bytes]:
        """The calls from index ``start`` on, each as kept (the marshal of its ``FIELDS``)."""
        blobs: list[bytes] = []
        for calls in self.streams.values():
            blobs += calls.blobs(max(start, 0))
            start -= len(calls)
        return blobs


class _Stream:
    """The calls of a stream in the replay's order, each a ``marshal`` of its ``FIELDS``: the
    newest as they are (``tail``), the others in chunks of ``CHUNK_CALLS``, each compressed
    once (a few objects, however many calls: quick to pickle, a third of the size)."""

    def __init__(self) -> None:
        self.chunks: list[bytes] = []  # zlib of the marshal of a list of blobs
        self.sizes: list[int] = []  # the calls of each chunk
        self.tail: list[bytes] = []

    def __len__(self) -> int:
        return sum(self.sizes) + len(self.tail)

    def append(self, blob: bytes) -> None:
        self.tail.append(blob)
        if len(self.tail) >= 2 * CHUNK_CALLS:
            self.chunks.append(zlib.compress(marshal.dumps(self.tail[:CHUNK_CALLS]), 1))
            self.sizes.append(CHUNK_CALLS)
            del self.tail[:CHUNK_CALLS]

    def _chunk(self, i: int) -> list[bytes]:
        return list(marshal.loads(zlib.decompress(self.chunks[i])))

    def blobs(self, first: int = 0) -> list[bytes]:
        """The blobs from the call ``first`` on."""
        out: list[bytes] = []
        for i, size in enumerate(self.sizes):
            if first < size:
                out += self._chunk(i)[max(first, 0) :]
            first -= size
        return out + self.tail[max(first, 0) :]

    def find(self, cid: str) -> int:
        """The place of the call ``cid`` (its id is the first field of its blob): in the
        tail, else in the chunks (from the newest)."""
        needle = cid.encode("utf-8", "surrogatepass")
        before = sum(self.sizes)
        for k in range(len(self.tail) - 1, -1, -1):
            if needle in self.tail[k] and marshal.loads(self.tail[k])[0] == cid:
                return before + k
        for i in range(len(self.chunks) - 1, -1, -1):
            before -= self.sizes[i]
            for k, blob in enumerate(self._chunk(i)):
                if needle in blob and marshal.loads(blob)[0] == cid:
                    return before + k
        raise KeyError(cid)

    def put(self, at: int, blob: bytes | None) -> bool:
        """The call ``at`` made ``blob`` (None: left out); whether it changed."""
        for i, size in enumerate(self.sizes):
            if at < size:
                calls = self._chunk(i)
                if not _put(calls, at, blob):
                    return False
                self.chunks[i] = zlib.compress(marshal.dumps(calls), 1)
                self.sizes[i] = len(calls)
                return True
            at -= size
        return _put(self.tail, at, blob)


def _put(calls: list[bytes], at: int, blob: bytes | None) -> bool:
    if blob is None:
        del calls[at]
        return True
    if calls[at] == blob:
        return False
    calls[at] = blob
    return True


class _Changed(Exception):
    """A line changes what was let go of (or settled otherwise than read): read again."""


def _short(key: str) -> str:
    return hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


def _joined(use: tuple[str, str]) -> str:
    """A (session, tool use id) as one id."""
    return "\x1f".join(use)


def _cannot_resume() -> type[Exception]:
    """``CannotResume``, imported when a line raised (a ``except`` names it only then: the
    hook's start does not load the ingest's ``base``)."""
    from analyzer.ingest.base import CannotResume

    return CannotResume


def _digest(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=16).digest()


def _book_key(obj: dict[str, Any]) -> tuple[str, str]:
    """The reader's key of an assistant line's call (claude_code._assistant)."""
    from analyzer.ingest.values import as_str

    msg = obj.get("message")
    msg_id = as_str(msg.get("id")) if isinstance(msg, dict) else None
    return (msg_id or "", as_str(obj.get("requestId")) or "")


def _copy(row: CallRow) -> CallRow:
    return CallRow(**row.values())


def _copy_tally(t: OutputTally) -> OutputTally:
    return OutputTally(**vars(t))


# -- the SQL rules, in Python ---------------------------------------------------------------


def _finish_reason(raw: str | None, cancelled: bool | None) -> str:
    """classify.sql, lf_finish_reason."""
    said = raw.strip().lower() if raw is not None else None
    if said in ("stop", "end_turn", "stop_sequence", "eos", "complete", "completed", "finished"):
        return "stop"
    if said in ("length", "max_tokens", "max_output_tokens", "model_context_window_exceeded"):
        return "length"
    if said in ("tool_calls", "tool_call", "tool_use", "function_call"):
        return "tool_calls"
    if said in (
        "content_filter",
        "safety",
        "recitation",
        "refusal",
        "blocklist",
        "prohibited_content",
        "spii",
    ):
        return "content_filter"
    if said == "error":
        return "error"
    if said in ("cancelled", "canceled", "aborted", "abort"):
        return "cancelled"
    if (raw is None or said == "") and cancelled:
        return "cancelled"
    return "unknown"


def _response_kind(
    finish_reason: str,
    http_status: int | None,
    output_tokens: int | None,
    reasoning_tokens: int | None,
    content_chars: int | None,
    visible_chars: int | None,
    reasoning_chars: int | None,
    tool_call_count: int | None,
) -> str | None:
    """classify.sql, lf_response_kind."""
    if (http_status or 0) >= 400 or finish_reason == "error":
        return "error"
    if (tool_call_count or 0) > 0 and finish_reason == "length":
        return "truncated_tool_call"
    if (tool_call_count or 0) > 0 or finish_reason == "tool_calls":
        return "tool_call"
    if content_chars is not None:
        if (visible_chars if visible_chars is not None else content_chars) > 0:
            return "text"
        if content_chars > 0:
            return "whitespace"
        if (reasoning_chars or 0) > 0 or (reasoning_tokens or 0) > 0:
            return "thinking_only"
        return "empty"
    if output_tokens == 0:
        return "empty"
    if reasoning_tokens and output_tokens is not None and reasoning_tokens >= output_tokens:
        return "thinking_only"
    if output_tokens is not None and output_tokens > 0:
        return "text"
    return None


def _cost(b: CallRow, tiers: list[Tier] | None) -> Decimal | None:
    """settle_calls.sql, the insert's cost_usd: the cost the log states, else the estimate at
    list prices (pricing.COST_SQL + WEB_SEARCH_SQL at the price row of the call's tier, a
    placeholder output priced at its estimate), as DOUBLE, cast to DECIMAL(18, 10)."""
    if b.cost_usd is not None:
        return _decimal(b.cost_usd)
    inp = b.input_tokens or 0
    p = next(
        (t for t in tiers or () if inp > t[0] and (t[1] is None or inp <= t[1])),
        None,
    )
    if p is None:
        return None
    _above, _upto, p_in, p_read, p_5m, p_1h, p_out = p
    cached, write = b.cached_input_tokens or 0, b.cache_write_tokens or 0
    w1h, out = b.cache_write_1h_tokens or 0, b.output_tokens or 0
    cost = (
        float(max(inp - cached - write, 0)) * p_in
        + float(cached) * p_read
        + float(max(write - w1h, 0)) * p_5m
        + float(w1h) * p_1h
        + float(out) * p_out
    )
    logged = cost + float((b.web_search_requests or 0) * _WEB_SEARCH_USD)
    extra = 0.0
    if b.output_estimate_tokens is not None:
        extra = float(b.output_estimate_tokens - out) * p_out
    return _decimal(logged + extra)


def _decimal(x: float) -> Decimal:
    """A DOUBLE cast to DECIMAL(18, 10) as DuckDB casts it: scaled, rounded half away from 0."""
    scaled = x * 1e10
    return Decimal(int(math.copysign(math.floor(abs(scaled) + 0.5), scaled))) * _Q


def _unknown_args(session: str, act: Act) -> str:
    """The key of a tool call whose arguments the log does not record (the SQL's
    ``'?' || session_id || '#' || idx``): the same as no other."""
    return f"?{session}#{act[0]}"


def _tool_key(acts: list[Act], session: str) -> str | None:
    """guards/events.sql, the tools CTE: string_agg(tool_name || ':' || coalesce(hash,
    unknown), ';' ORDER BY tool_name, tool_args_hash) (a tool without a name adds nothing;
    NULLS LAST)."""
    named = sorted(
        ((a[1], a[2], _unknown_args(session, a)) for a in acts if a[1] is not None),
        key=lambda t: (t[0], t[1] is None, t[1] or ""),
    )
    return ";".join(f"{name}:{h if h is not None else u}" for name, h, u in named) or None


def _outcomes(
    acts: list[Act], session: str, got: dict[tuple[str, str], list[Got]]
) -> dict[str, Any]:
    """outcomes.sql (lf_outcomes): each tool call joined to the results of its use id in its
    session (none: one row without), in the order of the messages."""
    if not acts:
        return {}
    joined: list[Got | None] = []
    for a in acts:
        results = got.get((session, a[3]), []) if a[3] is not None else []
        joined += results or [None]
    hashes = {r[1] for r in joined if r is not None and r[1] is not None}
    every_error = all(r is not None and bool(r[0]) for r in joined)
    matched = any(r is not None for r in joined)
    return {
        "refused": False,  # (no format_error message in a Claude Code transcript)
        "error_key": min(hashes) if matched and every_error and len(hashes) == 1 else None,
        "result_key": ";".join(r[1] if r is not None and r[1] is not None else "?" for r in joined),
    }


def _steps(acts: list[Act], session: str, got: dict[tuple[str, str], list[Got]]) -> dict[str, Any]:
    """guards/steps.sql: results (per session and use id: err = any error, got = the least
    meaning key, else hash), acts (each tool call's meaning, else tool:hash, '=' what it
    got), then the step's key, errors and failure (``stale`` is the guard's own)."""
    if not acts:
        return {}
    pairs: set[str] = set()
    errors: set[str] = set()
    failed = True
    for a in acts:
        results = got.get((session, a[3]), []) if a[3] is not None else []
        keys = [r[2] if r[2] is not None else r[1] for r in results]
        mine = min((k for k in keys if k is not None), default=None)
        err = any(bool(r[0]) for r in results)
        if a[2] is None:  # arguments not recorded: the same as no other
            act = _unknown_args(session, a)
        else:
            act = a[4] if a[4] is not None else f"{a[1] or ''}:{a[2]}"
        pairs.add(f"{act}={mine if mine is not None else '?'}")
        if err and mine is not None:
            errors.add(mine)
        failed = failed and err and mine is not None
    return {
        "step_key": ";".join(sorted(pairs)),
        "step_errors": ";".join(sorted(errors)) or None,
        "step_failed": failed,
    }
