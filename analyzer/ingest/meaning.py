"""What a tool call and its result *mean*, for telling a repeat from progress: the rules in
one place (every format's loader hashes through here, so every format compares alike).

Two sayings of the same thing differ in what does not change their meaning: times, durations,
counts and line numbers, ids (UUIDs, hex digests, provider ids, memory addresses), the random
part of temporary paths, spacing. A loop re-sends the whole context for each of them, so a
repeat is not harmless because a few of its bytes differ: :func:`meaning_key` masks those
parts before hashing, for actions (a tool call's arguments) and observations (what came back)
alike.

And a failure is what the output says, not only the flag: agents run commands whose exit
status is lost (a pipe, ``|| true``, an agent that records 0) and report ``command not found``,
``No such file or directory``, a traceback, a ``SyntaxError`` or ``Permission denied`` in the
text. :func:`says_error` reads those from the text (its head and tail, where a command's
failure is written), with rules anchored to how shells, Python and common tools print them, so
that a file that merely *contains* such words (a source file, a log being read) is not one.
"""

from __future__ import annotations

import functools
import hashlib
import re
from typing import cast

import orjson

# What differs between two sayings of the same thing without changing what is said, each rule
# where it may start (``sub`` takes the leftmost match, and at one place the first rule that
# matches):
#   a timestamp                  \d{4}-\d\d-\d\d[T ]\d\d:\d\d(:\d\d(\.\d+)?)?(Z|[+-]\d\d:?\d\d)?
#   at the start of a word (\b): a UUID, an address (0x...), a hex digest of 7 or more with a
#     digit, a temporary name (Python's tempfile: tmpk2j3_x8a), a provider's id (toolu_01A...,
#     call_..., chatcmpl-...: 16 or more letters and digits, two of them digits)
#   macOS's per-user temporary folder  /var/folders/<one>/<two>
#   numbers: counts, line numbers, ports, pids, durations   \d+
# Written so that ``re`` never stops inside a word (where only a digit can start a match): every
# match of ``_VOLATILE`` begins with a byte that is not a letter nor ``_``, which ``re`` scans to
# in C. A rule for the start of a word matches from the byte before the word (``b" "`` is put
# before the text for a word at its start) and keeps that byte (group ``c``); the others start
# at their own first byte. Which rule may match is told by that byte (a ``/`` before
# ``var/folders/``, a digit before a timestamp's other digits or a number's, a byte outside
# words before a word); where two could, the order is the one above. A rule's lookaheads test
# what it needs before the rest (a word too short, or without a digit, fails at once), and scan
# a run once, never backtracking into it. tests/test_meaning_mask.py holds this to the plain
# pattern it replaces, on generated texts and on every real text.
_AT_WORD = (
    rb"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"  # UUID
    rb"|0x[0-9a-fA-F]+\b|(?=[0-9a-fA-F]{7})(?=[a-fA-F]*+\d)[0-9a-fA-F]{7,}\b"  # address, hex
    rb"|tmp[A-Za-z0-9_]{6,}"  # a temporary name
    rb"|(?=[A-Za-z0-9_-]{16})(?=[A-Za-z_-]*+\d)"  # (what an id needs, tested first: cheap)
    rb"(?:[a-z]++[_-])?(?=[A-Za-z0-9]{16})(?=[A-Za-z]*+\d[A-Za-z]*+\d)(?=\d*+[A-Za-z])"
    rb"[A-Za-z0-9]{16,}\b"  # a provider's id
)
_VOLATILE = (
    rb"[^A-Za-z_](?:"
    rb"var/folders/(?<=/var/folders/)[^/\s'\"]+/[^/\s'\"]+"
    rb"|(?<=(?P<c>[^0-9A-Za-z_]))(?:" + _AT_WORD + rb")"
    rb"|\d\d\d-(?<=\d\d\d\d-)\d\d-\d\d[T ]\d\d:\d\d(?::\d\d(?:\.\d+)?)?(?:Z|[+-]\d\d:?\d\d)?"
    rb"|(?<=\d)\d*"
    rb")"
)
# How much of a text its meaning is read from: its head and its tail (a command's output says
# what happened at its start and its end; a huge one is not read whole).
MEANING_SAMPLE = 32 * 1024
ERROR_SAMPLE = 256 * 1024  # an error's first bytes are what it says (a huge one is cut there)


# A placeholder standing for hidden content by its digest (a log sanitised before it was shared:
# ``[REDACTED_OUTPUT len=5030 sha=28c2f7e1]``, the same digest for the same original): its digest
# is what it says, so it is kept as it is.
_STANDS_FOR = rb"\[[A-Z_]*REDACTED[A-Z_]*\b[^\]\n]{0,120}\]"


@functools.cache
def _masking() -> tuple[re.Pattern[bytes], re.Pattern[bytes]]:
    """``_VOLATILE`` and ``_STANDS_FOR`` compiled, when first needed (the live hook reads a
    transcript without masking anything: it does not pay for them at every start)."""
    return re.compile(_VOLATILE), re.compile(_STANDS_FOR)


def mask(data: bytes) -> bytes:
    """``data`` with what does not change its meaning masked (``#``) and its spacing collapsed;
    a placeholder that stands for hidden content by its digest kept whole.

    >>> mask(b"bash: line 12: foo: command not found (took 0.31s)  at 2026-01-02T03:04:05Z")
    b'bash: line #: foo: command not found (took #.#s) at #'
    >>> mask(b"/tmp/tmpk2j3_x8a/out.txt id=toolu_01AbCdEfGh2345678xyz") == mask(
    ...     b"/tmp/tmpzz91_qq0/out.txt id=toolu_01ZzYyXxWw9876543abc")
    True
    >>> mask(b"[REDACTED_OUTPUT len=406 sha=45aebb76]")
    b'[REDACTED_OUTPUT len=406 sha=45aebb76]'

    """
    return b" ".join(_masked(data).split())


def _masked(data: bytes) -> bytes:
    volatile, stands_for = _masking()
    if b"REDACTED" not in data:
        return _volatile_masked(volatile, data)
    kept = stands_for.findall(data)
    masked = [_volatile_masked(volatile, part) for part in stands_for.split(data)]
    return b"".join(m + k for m, k in zip(masked, [*kept, b""], strict=True))


def _volatile_masked(volatile: re.Pattern[bytes], data: bytes) -> bytes:
    """``data`` with each match of ``_VOLATILE`` written ``#`` (after the byte before a word,
    kept: group ``c``). ``split`` gives the texts between matches and each match's ``c``."""
    parts: list[bytes | None] = volatile.split(b" " + data)
    if len(parts) == 1:
        return data
    parts[1::2] = [b"#" if c is None else c + b"#" for c in parts[1::2]]
    return b"".join(cast("list[bytes]", parts))[1:]


def _sample(data: bytes, size: int) -> bytes:
    if len(data) <= 2 * size:
        return data
    return data[:size] + b"\n...\n" + data[-size:]


def as_bytes(content: object) -> bytes:
    """What a tool was given or gave back, as bytes: text as it is (a JSON string of arguments
    parsed first, so that its key order and spacing do not count), anything else as
    sorted-key JSON."""
    if isinstance(content, str | bytes):
        raw = content.encode("utf-8", "surrogatepass") if isinstance(content, str) else content
        if raw[:1] in (b"{", b"["):
            try:
                return orjson.dumps(orjson.loads(raw), option=orjson.OPT_SORT_KEYS)
            except orjson.JSONDecodeError:
                pass
        return raw
    try:
        return orjson.dumps(content, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # nested deeper than orjson writes
        return b"<nested too deeply to compare>"


def meaning_key(kind: str, content: object, name: str | None = None) -> str:
    """sha256 of what a message means: its ``kind`` (``tool_call``, ``ok``, ``error``,
    ``refused``), the tool's ``name``, and its content masked (:func:`mask`, on its head and
    tail). Two calls of the same command on another line number, two results that differ in
    their timings, two errors naming other ids: the same key."""
    head = f"{kind}:{name or ''}:".encode("utf-8", "surrogatepass")
    return hashlib.sha256(head + mask(_sample(as_bytes(content), MEANING_SAMPLE))).hexdigest()


# How a failure reads in a command's output, whatever its exit status said. Each rule is
# anchored to how the failing program prints it (a shell's "name: line N: cmd: ...", Python's
# traceback and its last line, a tool's "tool: path: reason"), never to a bare word that a
# file's content could hold.
_LINE = r"(?:^|(?<=\n)|(?<='output': ')|(?<=<output>))"
_SAYS_ERROR = (
    # a shell that could not run a command: bash, sh, zsh, dash
    rf"{_LINE}(?P<said>(?:/(?:usr/)?bin/)?(?:ba|z|da|k)?sh(?:: line \d+)?: (?:[^\n]{{1,300}}?: )?"
    r"(?:command not found|No such file or directory|Permission denied|syntax error)[^\n]*"
    r"|(?:/(?:usr/)?bin/)?sh: \d+: [^\n]{1,300}?: not found[^\n]*"
    r"|zsh: (?:command not found|no such file or directory|permission denied): [^\n]*"
    r"|^\s*(?:SyntaxError|IndentationError|TabError|ModuleNotFoundError|ImportError)"
    r": [^\n]+"
    # a Python program that died: the exception its traceback ends with (checked: after one)
    r"|(?<=\n)(?P<exc>[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt))(?::[^\n]*|(?=\n|\Z))"
    r"(?=[\s\S]{0,200}\Z)"
    rf"|(?:python[\d.]*|node|ruby|perl): can't open file [^\n]*No such file[^\n]*"
    # a tool naming a path it could not use: "cat: x: No such file or directory"
    r"|[\w.+/-]+: (?:[^\n]{0,300}?: )?(?:No such file or directory|Permission denied)(?=\s*$)"
    # compilers, package managers and git saying they failed
    r"|(?:fatal|error(?:\[\w+\])?): [^\n]+"
    r"|npm ERR! [^\n]+)"
    # a test run that failed (pytest's summary line): an error, said by the rest of the output
    rf"|{_LINE}=+ (?:[^\n]*\b)?\d+ (?:failed|errors?)\b[^\n]* =+\s*$"
)


@functools.cache
def _says_error() -> re.Pattern[str]:
    """``_SAYS_ERROR`` compiled, when first needed (it takes milliseconds: a text with none of
    ``_NEEDED``, and the live hook, which reads no tool's output, never need it)."""
    return re.compile(_SAYS_ERROR, re.MULTILINE)


_TRACEBACK = "Traceback (most recent call last):"
SAYS_SAMPLE = 8 * 1024
# Words every rule of ``_SAYS_ERROR`` needs one of (each rule matches only where one of these
# is written): a text with none of them says no error, without the rules' slow scan. "rror"
# is Error and error; "ermission denied" is both cases of it ("can't open file" goes with "No such
# file").
_NEEDED = (
    "rror",
    "not found",
    "No such file",
    "no such file",
    "ermission denied",
    "Exception",
    "Exit",
    "Interrupt",
    "fatal",
    "npm ERR!",
    "failed",
)


def error_said(content: object) -> bytes | None:
    r"""What a tool's output says went wrong, by how failing programs print it
    (:data:`_SAYS_ERROR`, on its head and tail; escaped line breaks, as an agent that writes
    its observation as a Python dict keeps them, read as line breaks): the lines saying it,
    masked (:func:`mask`); empty when only a summary says it (a test run that failed: the rest
    of the output says what); None when the text says no error. A Python exception counts only
    as the last line of a traceback, at the end of the output.

    >>> error_said("Observation: {'output': 'bash: line 1: bashndocker: command not found\\n'}")
    b'bash: line #: bashndocker: command not found'
    >>> error_said("ls: cannot access 'x.py': No such file or directory\n")
    b"ls: cannot access 'x.py': No such file or directory"
    >>> error_said("Traceback (most recent call last):\n  File \"a.py\", line 3\nKeyError: 'k'\n")
    b"KeyError: 'k'"
    >>> error_said("def f():\n    raise FileNotFoundError('No such file or directory')\n") is None
    True
    """
    if isinstance(content, str):
        text = content
    elif isinstance(content, bytes):
        text = content.decode("utf-8", "replace")
    else:
        text = as_bytes(content).decode("utf-8", "replace")
    if len(text) > 2 * SAYS_SAMPLE:
        text = text[:SAYS_SAMPLE] + "\n" + text[-SAYS_SAMPLE:]
    if "\\n" in text:
        text = text.replace("\\n", "\n")
    if not any(word in text for word in _NEEDED):
        return None
    return _said_in(text)


def _said_in(text: str) -> bytes | None:
    """``error_said`` of a text cut to its sample, by the rules (``_SAYS_ERROR``)."""
    said: list[bytes] = []
    summary = False
    for m in _says_error().finditer(text):
        line = m.group("said")
        if line is None:
            summary = True
        elif _exception_ok(text, m):
            said.append(mask(line.encode("utf-8", "surrogatepass")))
    if said:
        return b"\n".join(dict.fromkeys(said))
    return b"" if summary else None


def _exception_ok(text: str, m: re.Match[str]) -> bool:
    """A Python exception's line counts only after a traceback (any other rule's match counts)."""
    return m.group("exc") is None or _TRACEBACK in text[: m.start()]


def says_error(content: object) -> bool:
    """Whether a tool's output says it failed (:func:`error_said`)."""
    return error_said(content) is not None


def error_hash(data: bytes) -> str:
    """sha256 of what an error says: its first bytes with their volatile parts masked."""
    return hashlib.sha256(b"error:" + _masked(data[:ERROR_SAMPLE])).hexdigest()
