"""The conversation builder: a session's messages as a format says them, numbered, measured
and excerpted alike in every format.

A format's reader (or its per-session state) is a ``Conversation``: it knows the session, the
turn under way and the place of the last message, and each of its methods builds the row of
one thing said, which the reader hands to its ``Lowering`` (``low.add_message(row)``) or keeps
for its call. What a row keeps of content (hashes, what it means, whether a result is an
error) is ``content``'s; the numbering, the session, the turn, the time, the measures of text
and the excerpt are here, so a format is parsing, not building rows. ``call`` starts the row of
a call of the session (its session, stream and turn filled in), which the format completes.

>>> talk = Conversation("s1")
>>> talk.turn = "s1:1"
>>> row = talk.prompt("fix the test", ts=None)
>>> (row.idx, row.role, row.kind, row.turn_id, row.text_chars, row.n_records)
(1, 'user', 'prompt', 's1:1', 12, 1)
>>> row = talk.tool_call("bash", {"cmd": "ls"}, "t1", ts=None, call_id="c:1")
>>> (row.idx, row.kind, row.tool_name, row.excerpt, row.n_records)
(2, 'tool_call', 'bash', '{"cmd":"ls"}', 0)
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from analyzer.ingest.content import excerpt, refusal_said, text_measure, tool_call_said
from analyzer.ingest.content import tool_result_said as tool_result_said
from analyzer.ingest.rows import CallRow, MessageRow

# A message row, as the builder builds it (what a format keeps of one, waiting for its call).
Message = MessageRow


class _Same:
    """The default of ``shown``: the excerpt is cut from the text measured."""


SAME = _Same()


class Conversation:
    """One session's messages in order (``session``; ``turn``, the turn under way, which a
    reader starts where its format says a turn starts; ``idx``, the place of the last message).

    Every method builds one message row and numbers it. ``records`` is how many input records
    the message accounts for (the first message a record gives accounts for it; the others
    0). ``shown`` is what a person is shown of it, where that is not the text measured (a
    result shown with its error's type, say); ``None`` shows nothing."""

    def __init__(self, session: str | None = None) -> None:
        self.session = session
        self.turn: str | None = None
        self.idx = 0

    def next_idx(self) -> int:
        """The place of the next message of the session."""
        self.idx += 1
        return self.idx

    def call(self, native_id: str | None, **columns: Any) -> CallRow:
        """A call the model answered in this session, in the turn under way (its stream is the
        session's), with the columns given."""
        return CallRow(
            native_id=native_id,
            session_id=self.session,
            stream_key=self.session,
            turn_id=self.turn,
            **columns,
        )

    def message(
        self, role: str, kind: str, *, ts: datetime | None, at: object = SAME, **columns: Any
    ) -> MessageRow:
        """A message of any kind, with the columns given (the others' defaults). ``at`` is its
        place where the log says it (a message placed, not counted; None: no place), by
        default the next place of the session."""
        return MessageRow(
            session_id=self.session,
            idx=self.next_idx() if isinstance(at, _Same) else _place(at),
            role=role,
            kind=kind,
            ts=ts,
            turn_id=self.turn,
            **columns,
        )

    def text(
        self,
        role: str,
        kind: str,
        text: object,
        *,
        ts: datetime | None,
        records: int = 0,
        call_id: str | None = None,
        shown: object = SAME,
        is_error: bool | None = None,
    ) -> MessageRow:
        """A message of text (``role`` and ``kind`` as the format tells them apart), measured,
        and cut for a person (``is_error``: a note that says it reports an error)."""
        row = self.message(role, kind, ts=ts, call_id=call_id, n_records=records, is_error=is_error)
        return self.fill(row, text, shown=shown)

    @staticmethod
    def fill(row: MessageRow, text: object, shown: object = SAME) -> MessageRow:
        """``row`` with its text measured and cut for a person: a message placed when it began
        whose text is known when it ends (a reply streamed in parts)."""
        row.text_chars, row.visible_chars = text_measure(text)
        row.excerpt = excerpt(text if shown is SAME else shown)
        return row

    def prompt(
        self, text: object, *, ts: datetime | None, agent: bool = False, records: int = 1
    ) -> MessageRow:
        """What the user asked (``agent``: text the agent sent in the user's place, a
        reminder or a note of its own: a ``system`` message)."""
        return self.text("user", "system" if agent else "prompt", text, ts=ts, records=records)

    def said(
        self,
        text: object,
        *,
        ts: datetime | None,
        call_id: str | None,
        records: int = 0,
        shown: object = SAME,
    ) -> MessageRow:
        """What the model said in a reply (the call ``call_id``)."""
        return self.text(
            "assistant", "text", text, ts=ts, records=records, call_id=call_id, shown=shown
        )

    def placeholder(
        self, text: object, *, ts: datetime | None, call_id: str | None, records: int = 0
    ) -> MessageRow:
        """The agent's stand-in for a reply that was empty (the text is the agent's)."""
        return self.text("assistant", "placeholder", text, ts=ts, records=records, call_id=call_id)

    def tool_call(
        self,
        name: str | None,
        args: object,
        use_id: str | None,
        *,
        ts: datetime | None,
        call_id: str | None = None,
        records: int = 0,
        role: str = "assistant",
        at: object = SAME,
    ) -> MessageRow:
        """A tool the model called, with its arguments (hashed, and cut for a person)."""
        said: dict[str, Any] = dict(tool_call_said(name, args, use_id))
        kind = said.pop("kind")
        return self.message(role, kind, ts=ts, at=at, call_id=call_id, n_records=records, **said)

    def tool_result(
        self,
        content: object,
        is_error: bool | None,
        *,
        ts: datetime | None,
        text: object = SAME,
        use_id: str | None = None,
        name: str | None = None,
        role: str = "tool",
        records: int = 0,
        call_id: str | None = None,
        shown: object = SAME,
        at: object = SAME,
    ) -> MessageRow:
        """What a tool returned (``content``, as the log holds it) and whether the agent saw an
        error; measured on ``text`` (what the model was shown of it: by default the content)."""
        row = self.message(
            role,
            "tool_result",
            ts=ts,
            at=at,
            tool_name=name,
            tool_use_id=use_id,
            call_id=call_id,
            n_records=records,
            **tool_result_said(content, is_error),
        )
        return self.fill(row, content if text is SAME else text, shown=shown)

    def refusal(
        self,
        content: object,
        *,
        ts: datetime | None,
        role: str = "user",
        call_id: str | None,
        records: int = 1,
        text: object = SAME,
    ) -> MessageRow:
        """The agent's refusal of a reply it could not parse (its ``format_error`` message),
        tied to the refused call."""
        row = self.message(
            role, "format_error", ts=ts, call_id=call_id, n_records=records, **refusal_said(content)
        )
        return self.fill(row, content if text is SAME else text)


def _place(at: object) -> int | None:
    """A place a format gave (``message(at=...)``): a whole number or None."""
    if at is None or (isinstance(at, int) and not isinstance(at, bool)):
        return at
    raise TypeError(f"a message's place is a whole number or None, not {at!r}")
