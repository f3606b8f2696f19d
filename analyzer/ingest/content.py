"""What the store keeps of a log's content: hashes that tell the same tool call and the same
result from new ones, excerpts for a person, and measures of text (every format's loader uses
them, so every format compares alike)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import TypedDict

import orjson

from analyzer.ingest.meaning import error_hash, error_said, meaning_key

EXCERPT_CHARS = 200


def args_hash(args: object) -> str:
    """sha256 of tool arguments as canonical JSON (sorted keys); a JSON string is parsed first
    (OpenAI and Codex send arguments as a string), so the same call hashes the same everywhere."""
    if isinstance(args, str | bytes):
        text = args
        try:
            args = orjson.loads(text)
        except orjson.JSONDecodeError:
            return hashlib.sha256(text.encode() if isinstance(text, str) else text).hexdigest()
    try:
        canon = orjson.dumps(args, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # nested deeper than orjson writes (repr would recurse as deep)
        canon = b"<arguments nested too deeply to compare>"
    return hashlib.sha256(canon).hexdigest()


def args_text(args: object) -> str | None:
    """Tool arguments as text: a string as it is, anything else as compact JSON (None: no
    arguments, or nested deeper than orjson writes)."""
    if args is None:
        return None
    if isinstance(args, bytes):
        return args.decode("utf-8", "replace")
    if isinstance(args, str):
        return args
    try:
        return orjson.dumps(args).decode()
    except TypeError:
        return None


def args_excerpt(args: object) -> str | None:
    """Tool arguments as a short text for a person (``show``): :func:`args_text`, at most
    ``EXCERPT_CHARS`` characters.

    >>> args_excerpt({"path": "."}), args_excerpt('{"cmd": "ls"}'), args_excerpt(None)
    ('{"path":"."}', '{"cmd": "ls"}', None)
    """
    text = args_text(args)
    return None if text is None else text[:EXCERPT_CHARS]


def result_hash(content: object, is_error: bool | None = None) -> str:
    """sha256 of what a tool returned (text as it is; anything else as sorted-key JSON), with
    whether it was an error: the same call getting the same result back is a loop, the same
    call getting a new result (a poll of a running command) is not. An error is compared on
    what it says: its times, ids and numbers masked (``meaning.error_hash``), so the same error
    naming another line number or timestamp is the same error; a result that is no error is
    hashed as it is (a poll's output that changes only in its numbers is new output here; the
    comparison of meanings is ``meaning_key``)."""
    if isinstance(content, str):
        data = content.encode("utf-8", "surrogatepass")
    else:
        try:
            data = orjson.dumps(content, option=orjson.OPT_SORT_KEYS)
        except TypeError:
            data = b"<result nested too deeply to compare>"
    if is_error:
        return error_hash(data)
    return hashlib.sha256(b"ok:" + data).hexdigest()


class ToolResultSaid(TypedDict):
    """A tool result's message columns that come from the result itself (``tool_result_said``)."""

    is_error: bool | None
    tool_result_hash: str
    meaning_key: str


def tool_result_said(content: object, is_error: bool | None) -> ToolResultSaid:
    """The columns of a tool result's message that come from what came back: whether it was an
    error (the agent's flag, or what the output says: ``meaning.error_said``), its hash and what
    it means (``meaning.meaning_key``); a site spreads them into its ``MessageRow``. An error
    whose lines say what went wrong (``bash: x: command not found``, a traceback's exception)
    is hashed on those lines, masked, so that the same failure printed beside other output (an
    echo of the command, the stack frames) is the same error; any other error on all its text,
    masked. A flag left unknown (None) stays unknown unless the text says error."""
    said = error_said(content)
    if said is not None:
        is_error = True
    if said:
        key = hashlib.sha256(b"error:" + said).hexdigest()
        return ToolResultSaid(is_error=True, tool_result_hash=key, meaning_key=key)
    return ToolResultSaid(
        is_error=is_error,
        tool_result_hash=result_hash(content, is_error),
        meaning_key=meaning_key("error" if is_error else "ok", content),
    )


def refusal_said(text: object) -> ToolResultSaid:
    """The columns of an agent's refusal of a reply it could not parse (a ``format_error``
    message): an error, hashed on what it says."""
    return ToolResultSaid(
        is_error=True,
        tool_result_hash=result_hash(text, True),
        meaning_key=meaning_key("refused", text),
    )


def brief(value: object, limit: int = 300) -> str:
    """A record as JSON text, cut to ``limit`` characters, for a reject's excerpt. (Not
    ``str()``: a value nested a thousand deep, which orjson reads, makes repr recurse too far.)
    """
    try:
        return orjson.dumps(value).decode()[:limit]
    except TypeError:
        return "(nested too deeply to show)"


def text_measure(text: object) -> tuple[int, int]:
    """(characters, non-blank characters) of a text (anything else from a log measures 0)."""
    if not text or not isinstance(text, str):
        return 0, 0
    return len(text), sum(map(len, text.split()))  # str.split() drops all whitespace, in C


def excerpt(text: object) -> str | None:
    if not isinstance(text, str):
        return None
    return text[:EXCERPT_CHARS]


class ToolCallSaid(TypedDict):
    """A tool call's message columns that come from the call itself (``tool_call_said``)."""

    kind: str
    tool_name: str | None
    tool_args_hash: str
    tool_use_id: str | None
    excerpt: str | None
    meaning_key: str


def tool_call_said(name: str | None, args: object, use_id: str | None) -> ToolCallSaid:
    """The columns of a tool call's message that come from the call itself: its kind, name and
    id, its arguments hashed (to tell the same call again) and cut for a person; a site spreads
    them into its ``MessageRow`` (``MessageRow(session_id=..., **tool_call_said(...))``)."""
    return ToolCallSaid(
        kind="tool_call",
        tool_name=name,
        tool_args_hash=args_hash(args),
        tool_use_id=use_id,
        excerpt=args_excerpt(args),
        meaning_key=meaning_key("tool_call", args, name),
    )


def digest(value: object, chars: int = 8) -> str:
    """The first ``chars`` hex digits of sha256 of ``value`` as JSON, in its own order (the
    order a log wrote it in): ``deep`` for a value nested deeper than orjson writes."""
    try:
        data = orjson.dumps(value)
    except TypeError:  # nested deeper than orjson writes
        return "deep"
    return hashlib.sha256(data).hexdigest()[:chars]


def run_start(messages: list[object], is_reply: Callable[[object], bool]) -> list[object]:
    """The start of a run that its later steps never change: its messages up to and including
    the first model reply (``is_reply``), which in real logs carries the provider's response
    id or its time; all of them while there is no reply yet. A digest of it tells two runs
    of one task apart (the same name in two folders) and keeps a run's key as its file grows
    (an agent that rewrites its whole trajectory after every step)."""
    for i, m in enumerate(messages):
        if is_reply(m):
            return messages[: i + 1]
    return messages
