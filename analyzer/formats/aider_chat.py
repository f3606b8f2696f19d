"""Aider's chat history: the Markdown file ``.aider.chat.history.md`` that Aider appends to in
every project folder it runs in (by default; ``--chat-history-file`` names another).

Facts from Aider's own source (Aider-AI/aider at 5dc9490b: ``aider/io.py``,
``aider/coders/base_coder.py``, ``aider/utils.py``) and from the real histories the tests read
(``tests/real_runs/aider_chat``, their origins beside them):

* **Sessions.** Each Aider process starts with ``# aider chat started at YYYY-MM-DD HH:MM:SS``:
  the local time, with no zone (read in ``--tz``). Then its announcements, quoted: ``> Aider
  v0.86.1``, ``> Main model: <name> with <format> edit format, ...`` (``> Model:`` when the weak
  model is the main one; ``> Models: <name> with <format> edit format, weak model <name>`` in
  older versions), ``> Editor model: <name> with <format> edit format`` (architect mode),
  ``> Weak model: <name>``, the git repo and repo map. ``/model``, ``/chat-mode`` and the like
  print the announcements again: the model of the calls after them.
* **What is said.** The user's input is written ``#### <line>`` per line; the model's reply is
  written as it is, plain Markdown, after a blank line; everything Aider itself prints (its
  tool output, warnings, errors, questions and their answers) is quoted, one ``> `` line per
  line of the message. Aider ends both its quoted lines and the user's with two spaces (a
  Markdown line break): a file that still has them tells a reply's own ``> `` quote or ``####``
  heading from Aider's lines by them; one whose trailing spaces were trimmed (an editor, a
  commit hook) is read by the prefixes alone.
* **Accounting.** After each reply Aider prints ``Tokens: <sent> sent[, <w> cache write][, <h>
  cache hit], <received> received.`` and, when it has a price for the model, ``Cost: $<m>
  message, $<s> session.`` on the same line (on the next, unquoted, when both cache figures are
  given). Each such line is one call here: ``sent`` is the whole prompt (litellm's
  ``prompt_tokens``, plus the cache writes where the provider reports them: Anthropic), ``cache
  hit`` its cached part, ``cache write`` what was written to the cache, ``received`` the output.
  A reply continued past its output limit is summed into one line by Aider. The weak model's
  calls (commit messages, summaries) are never written. The ``message`` figure is the call's
  cost as Aider priced it (``reported``); ``$0.00`` is Aider's "no price" (a list-price estimate
  is made instead); ``session`` is the process's running total, checked here against the sum of
  the message figures (a difference beyond their rounding is said on stderr: an accounting line
  is missing).
* **Rounded.** Aider rounds what it prints (``utils.format_tokens``): counts under 1,000 are
  exact, under 10,000 to the hundred (``2.5k``), above to the thousand (``47k``); dollars to the
  cent (to two significant digits under a cent). So every count and cost of this format is
  Aider's rounded figure: a call's tokens within 50 (under 10k) or 500 of the truth, its cost
  within half a cent. The sums of many calls are close; no single figure is exact.
* **What a reply did**, from the quoted lines after its accounting line: ``Applied edit to
  <path>`` (an edit, its action the reply's text for that file); ``The LLM did not conform to
  the edit format.`` with the error Aider sends back: a reply **refused** for its edit format
  (``format_error``), or where the error is a ``SearchReplaceNoExactMatch`` / ``failed to
  match``, an edit of each file named that failed, with its text; lint and test output that
  Aider offers to fix (``Attempt to fix lint errors?``, ``Attempt to fix test errors?``) a
  failed ``lint`` / ``test`` of the files; ``Running <command>`` and the lines after it a
  command run and what it printed. Aider sends such an error back to the model by itself (a
  *reflection*, with no ``####`` line) and gives up after three: ``Only 3 reflections allowed,
  stopping.``, the run's own verdict (``runs.exit_status``) when no reply follows it in the
  session.

Identity: a session is ``<project folder>@<its start line's time>`` (``#2``... for a second
start at the same second in one file), a call ``<session>:<its place among the session's
accounting lines>``: the file only grows. Calls have no time of their own: each has its
session's start (the usage views put a session's calls on the day it started). A reply with no
accounting line (interrupted, or Aider failed to count it) is kept as what the model said, with
no call; but in a session of an Aider before 0.46, which printed no accounting lines at all
(``> Aider v0.45.1``; or, with no version said, a session without one), each reply is a call,
its tokens and cost unknown. Records: the file's lines that are not blank; each is in one
message, call or run, or skipped by kind (the announcements, commit lines, Aider's prompts),
or rejected (an accounting line that does not read as one).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from analyzer.console import warn
from analyzer.formats.aider import model_and_provider
from analyzer.ingest.base import Head, LoadContext, LoadResult
from analyzer.ingest.content import text_measure
from analyzer.ingest.conversation import Conversation
from analyzer.ingest.lowering import Lowering
from analyzer.ingest.reading import read_text
from analyzer.ingest.rows import CallRow
from analyzer.ingest.spec import FormatSpec
from analyzer.ingest.values import parse_time

APP = "aider"
_STARTED = re.compile(r"^# aider chat started at (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\s*$")
_COUNT = r"(\d[\d,]*(?:\.\d+)?k?)"
_TOKENS = re.compile(
    rf"^Tokens: {_COUNT} sent(?:, {_COUNT} cache write)?(?:, {_COUNT} cache hit)?, "
    rf"{_COUNT} received\.(?:\s+(?P<cost>.*))?$"
)
_COST = re.compile(r"^Cost: \$(\d+(?:\.\d+)?) (?:message|request), \$(\d+(?:\.\d+)?) session\.$")
_MODEL = re.compile(
    r"^(?:Main model|Model|Models): (?P<name>\S+)(?: (?:with|using) (?P<fmt>[\w-]+) edit format)?"
)
_EDITOR = re.compile(r"^Editor model: (?P<name>\S+)")
_APPLIED = re.compile(r"^Applied edit to (?P<path>.+)$")
_NOT_CONFORM = "The LLM did not conform to the edit format."
_HELP_PAGE = "https://aider.chat/docs/"  # (the page on edit errors Aider names after it)
_NO_MATCH = re.compile(
    r"SearchReplaceNoExactMatch: This SEARCH block failed to exactly match lines in (?P<path>.+)"
)
_REFLECTIONS = re.compile(r"^Only \d+ reflections allowed, stopping\.$")
_FIX = re.compile(r"^Attempt to fix (?P<what>lint|test) errors\?")
_RUNNING = re.compile(r"^Running (?P<cmd>.+)$")
_COMMIT = re.compile(r"^Commit [0-9a-f]{7,40} ")
_QUESTION = re.compile(r"\? \(Y\)es/\(N\)o")
_ADDED_OUTPUT = re.compile(r"^Added \d+ lines? of output to the chat\.$")
_MAX_USD = 1e6
_VERSION = re.compile(r"^Aider v(\d+)\.(\d+)")
# The first Aider that printed an accounting line after each reply (git log -S "Tokens:").
FIRST_ACCOUNTED = (0, 46)


def sniff(head: Head) -> bool:
    """A chat history: a line that starts an Aider session, near the top."""
    return any(_STARTED.match(line.strip()) for line in head.text.splitlines()[:40])


def _count(text: str | None) -> int | None:
    """A count as Aider prints it: ``812``, ``2.5k``, ``47k`` (``1,234`` in older versions)."""
    if text is None:
        return None
    text = text.replace(",", "")
    if text.endswith("k"):
        return round(float(text[:-1]) * 1000)
    return int(float(text))


@dataclass
class _Line:
    """One line of the file: its number, what it is (``start``, ``user``, ``aider``, ``reply``
    or ``blank``) and its text (without Aider's prefix and trailing spaces)."""

    no: int
    kind: str
    text: str


def _lines(text: str) -> list[_Line]:
    """The file's lines, each told apart. Where Aider's two trailing spaces are kept (a file
    whose trimmed lines have none is read by prefixes alone), a quoted line without them that
    follows one of Aider's lines begins a message of several lines, quoted on its first only
    (``tool_output`` of a text with line ends): its lines are Aider's through the one that ends
    with the two spaces."""
    raw = text.split("\n")
    strict = any(
        (r.startswith("#### ") or r.startswith(">")) and r.rstrip("\r").endswith("  ") for r in raw
    )
    out: list[_Line] = []
    last = ""  # the kind of the last line that was not blank
    accounted = False  # the last line that was not blank is an accounting line of Aider's
    within = False  # inside a message of Aider's of several lines
    for no, r in enumerate(raw, 1):
        r = r.rstrip("\r")
        body = r.rstrip()
        ended = r.endswith("  ") or not strict
        if within:
            within = not r.endswith("  ")
            out.append(_Line(no, "aider", body) if body else _Line(no, "blank", ""))
            continue
        if not body:
            out.append(_Line(no, "blank", ""))
            continue
        quoted = body == ">" or body.startswith("> ")
        if accounted and _COST.match(body):  # (the cost on a line of its own, unquoted)
            out.append(_Line(no, "aider", body))
        elif _STARTED.match(body):
            out.append(_Line(no, "start", body))
        elif body.startswith("#### ") and ended:
            out.append(_Line(no, "user", "" if body[5:] == "<blank>" else body[5:]))
        elif body == "####" and ended:
            out.append(_Line(no, "user", ""))
        elif quoted and (ended or last == "aider"):
            within = not ended
            out.append(_Line(no, "aider", body[2:].strip()))
        else:
            out.append(_Line(no, "reply", r))
        last = out[-1].kind
        accounted = last == "aider" and out[-1].text.startswith("Tokens:")
    return out


@dataclass
class _Session:
    talk: Conversation
    start: datetime | None
    first_line: int
    model: str | None = None
    editor: str | None = None
    architect: bool = False
    calls: int = 0
    turns: int = 0
    replies_in_turn: int = 0
    stated: float | None = None  # the last session figure Aider printed
    summed: float = 0.0  # the sum of the message figures
    priced: int = 0  # the message figures summed
    verdict: str | None = None  # "Only 3 reflections allowed, stopping." with no reply after it
    refused: bool = False  # the last call's reply was refused for its edit format
    sent: int = 0
    received: int = 0
    unaccounted: bool = False  # no accounting line in the whole session: a call per reply


@dataclass
class _Call:
    """A call while the quoted lines after it are read: its row, its id and its reply."""

    row: CallRow
    call_id: str
    reply: str = ""


class _Reader:
    """The file's lines, in order, into sessions: a prompt is the user's lines together, a
    reply the model's lines until Aider's next, and Aider's quoted lines are read when the next
    prompt, reply or session begins."""

    def __init__(self, ctx: LoadContext) -> None:
        self.ctx = ctx
        self.low = Lowering(ctx, SPEC.name, SPEC.call_prefix)
        path = Path(ctx.source.path)
        self.project = path.parent.name or path.stem
        self.starts: dict[str, int] = {}
        self.s: _Session | None = None
        self.call: _Call | None = None  # the call the quoted lines under way are about
        self.prompt: list[_Line] = []
        self.reply: list[_Line] = []
        self.aider: list[_Line] = []
        self.pending: tuple[str, int] | None = None  # a reply waiting for its accounting line
        # Whether each session (by the line that starts it; 0: before any) is of an Aider that
        # printed no accounting lines: one before 0.46, or of no version said and with none.
        self.tokenless: dict[int, bool] = {}

    def survey(self, lines: list[_Line]) -> None:
        """Which sessions are of an Aider that printed no accounting (before reading them)."""
        at = 0
        versions: dict[int, tuple[int, int]] = {}
        accounted: dict[int, bool] = {}
        for line in lines:
            if line.kind == "start":
                at = line.no
            elif line.kind == "aider":
                if (v := _VERSION.match(line.text)) is not None and at not in versions:
                    versions[at] = (int(v.group(1)), int(v.group(2)))
                if line.text.startswith("Tokens:"):
                    accounted[at] = True
        for at in {0, *versions, *accounted, *(ln.no for ln in lines if ln.kind == "start")}:
            version = versions.get(at)
            self.tokenless[at] = (
                version < FIRST_ACCOUNTED if version is not None else not accounted.get(at)
            )

    def line(self, line: _Line) -> None:
        if line.kind == "blank":
            if self.reply:
                self.reply.append(line)
            elif self.prompt:
                self.flush_prompt()
            return
        self.low.read()
        if line.kind == "start":
            self.end_session()
            self.begin(line)
            self.low.skip("session_start")
            return
        if self.s is None:
            self.begin(None)
        if line.kind != "user" and self.prompt:
            self.flush_prompt()
        if line.kind != "aider" and self.aider:
            self.said()
        if line.kind != "reply" and self.reply:
            self.flush_reply()
        {"user": self.prompt, "aider": self.aider, "reply": self.reply}[line.kind].append(line)

    # -- sessions -----------------------------------------------------------------------------

    def begin(self, line: _Line | None) -> None:
        """A session: the one a start line begins, or one for lines before any."""
        m = _STARTED.match(line.text) if line is not None else None
        when = m.group(1) if m else None
        base = f"{self.project}@{when or 'start'}"
        n = self.starts[base] = self.starts.get(base, 0) + 1
        sid = base if n == 1 else f"{base}#{n}"
        start = parse_time(when, self.ctx.options.tz) if when else None
        self.s = _Session(Conversation(sid), start, line.no if line is not None else 1)
        self.s.unaccounted = self.tokenless.get(line.no if line is not None else 0, False)
        self.call = None

    def end_session(self) -> None:
        """What is left of the session said, its stated total checked, and its run."""
        s = self.s
        if s is None:
            return
        if self.prompt:
            self.flush_prompt()
        if self.aider:
            self.said()
        if self.reply:
            self.flush_reply()
        self.said_reply(None)
        if s.stated is not None and abs(s.stated - s.summed) > 0.005 * s.priced + 0.011:
            warn(
                f"{self.ctx.source.display}:{s.first_line}: Aider's session total "
                f"${s.stated:.2f} is not the sum of its messages' costs (${s.summed:.2f}): an "
                "accounting line is missing or was changed"
            )
        if s.calls:
            self.low.add_run(
                {
                    "session_id": s.talk.session,
                    "seq": 1,
                    "line": s.first_line,
                    "agent": APP,
                    "model": s.model,
                    "exit_status": s.verdict,
                    "outcome": (s.verdict and ("format_error" if s.refused else "stuck")) or None,
                    "reported_calls": s.calls,
                    "reported_input_tokens": s.sent,
                    "reported_output_tokens": s.received,
                    "reported_cost_usd": s.stated,
                    "cost_apportioned": False,
                }
            )
        self.s = None

    # -- what the user and the model said -----------------------------------------------------

    def flush_prompt(self) -> None:
        """The user's lines read together: one prompt, which starts a turn."""
        lines, self.prompt = self.prompt, []
        s = self.s
        assert s is not None
        self.said_reply(None)
        self.call = None
        s.turns += 1
        s.replies_in_turn = 0
        s.talk.turn = f"{s.talk.session}:{s.turns}"
        text = "\n".join(ln.text for ln in lines)
        self.low.add_message(s.talk.prompt(text, ts=s.start, records=len(lines)))

    def flush_reply(self) -> None:
        """The model's lines read together: a reply, said with its call when its accounting
        line comes (a reply before it that had none is said with no call)."""
        while self.reply and self.reply[-1].kind == "blank":
            self.reply.pop()
        lines, self.reply = self.reply, []
        self.said_reply(None)
        self.call = None
        text = "\n".join(ln.text for ln in lines)
        self.pending = (text, sum(ln.kind != "blank" for ln in lines))
        if self.s is not None and self.s.unaccounted:
            self.reply_call(self.s)

    def said_reply(self, call: _Call | None) -> None:
        """The reply waiting for its accounting line, said (by ``call``, or by no call)."""
        if self.pending is None or self.s is None:
            return
        text, records = self.pending
        self.pending = None
        call_id = None if call is None else call.call_id
        self.low.add_message(
            self.s.talk.said(text, ts=self.s.start, call_id=call_id, records=records)
        )
        if call is not None:
            call.reply = text
            call.row.content_chars, call.row.visible_chars = text_measure(text)

    # -- Aider's own lines --------------------------------------------------------------------

    def said(self) -> None:
        """The quoted lines read since the last reply or prompt, in order."""
        lines, self.aider = self.aider, []
        s = self.s
        assert s is not None
        i = 0
        while i < len(lines):
            i = self.one(s, lines, i)
        self.said_reply(None)  # (a reply Aider printed no accounting for: interrupted)

    def one(self, s: _Session, lines: list[_Line], i: int) -> int:
        """What the quoted line ``lines[i]`` starts; the index after what it took."""
        text = lines[i].text
        if m := _TOKENS.match(text):
            cost = m.group("cost")
            if cost is None and i + 1 < len(lines) and _COST.match(lines[i + 1].text):
                self.accounting(s, lines[i], m, lines[i + 1].text, 2)
                return i + 2
            self.accounting(s, lines[i], m, cost, 1)
            return i + 1
        if text.startswith("Tokens:"):
            self.low.reject(lines[i].no, "an accounting line that does not read as Aider's", text)
            return i + 1
        if m := _MODEL.match(text):
            s.model, s.architect = m.group("name"), m.group("fmt") == "architect"
            self.low.skip("announcement")
            return i + 1
        if m := _EDITOR.match(text):
            s.editor = m.group("name")
            self.low.skip("announcement")
            return i + 1
        if _REFLECTIONS.match(text):
            s.verdict = text
            self.low.skip("reflections_limit")
            return i + 1
        if self.call is not None:
            took = self.acted(s, self.call, lines, i)
            if took is not None:
                return took
        self.low.skip("announcement" if not s.turns and not s.calls else _kind(text))
        return i + 1

    def acted(self, s: _Session, call: _Call, lines: list[_Line], i: int) -> int | None:
        """What the call's reply did, from ``lines[i]``: an edit applied or failed, a refusal,
        a command run, lint or test output (the index after it), or None: nothing of those."""
        text = lines[i].text
        if _COMMIT.match(text) or _QUESTION.search(text):
            return None
        if (m := _APPLIED.match(text)) is not None:
            self.edit(s, call, m.group("path"), None, 1)
            return i + 1
        if text == _NOT_CONFORM:
            return self.refused(s, call, lines, i)
        if (m := _RUNNING.match(text)) is not None:
            return self.ran(s, call, lines, i, m.group("cmd"))
        return self.fixes(s, call, lines, i)

    def accounting(
        self, s: _Session, line: _Line, m: re.Match[str], cost: str | None, records: int
    ) -> None:
        """An accounting line (``records``: with the cost on the next line): a call."""
        sent, write, hit, received = (_count(m.group(k)) for k in (1, 2, 3, 4))
        s.sent += sent or 0
        s.received += received or 0
        row = self.new_call(
            s,
            line=line.no,
            input_tokens=sent,
            cached_input_tokens=hit,
            cache_write_tokens=write,
            output_tokens=received,
            output_final=received is not None,
            n_records=records,
        )
        if cost is not None:
            c = _COST.match(cost.strip())
            if c is None:
                why = "an accounting line whose cost does not read as Aider's"
                self.low.reject(line.no, why, line.text)
                row.n_records = records - 1
            else:
                message, s.stated = float(c.group(1)), float(c.group(2))
                if 0 < message < _MAX_USD:
                    row.cost_usd, row.cost_basis = message, "reported"
                s.summed += message
                s.priced += 1
        self.made(row)

    def reply_call(self, s: _Session) -> None:
        """A reply of a session that has no accounting line (an Aider before 0.46 printed
        none): a call all the same, its tokens and cost unknown."""
        self.made(self.new_call(s, n_records=0))

    def new_call(self, s: _Session, **columns: object) -> CallRow:
        """The session's next call, with ``columns``: by its main model, or by the editor
        model for a reply after an architect's in the same turn."""
        s.calls += 1
        s.replies_in_turn += 1
        s.verdict, s.refused = None, False
        editing = s.architect and s.editor and s.replies_in_turn > 1
        model, provider = model_and_provider(s.editor if editing else s.model)
        return s.talk.call(
            f"{s.talk.session}:{s.calls}",
            ts=s.start,
            seq=s.calls,
            model=model,
            provider=provider,
            app=APP,
            project=self.project,
            content_chars=0,
            visible_chars=0,
            tool_call_count=0,
            **columns,
        )

    def made(self, row: CallRow) -> None:
        """``row`` stored: the call the quoted lines after it are about, which says the reply
        waiting for it."""
        self.call = _Call(row, self.low.call_id(str(row.native_id)))
        self.said_reply(self.call)
        self.low.add_call(row)

    def tool(
        self,
        s: _Session,
        call: _Call,
        name: str,
        args: object,
        said: tuple[str, bool | None] | tuple[str, bool | None, str | None],
        records: int,
    ) -> None:
        """A tool the reply's call used, and what came back (``said``: the text, whether it
        was an error, and the whole text where the first is what it is compared on), from
        ``records`` lines."""
        call.row.add(tool_call_count=1)
        use = f"{call.row.native_id}:{call.row.tool_call_count}"
        talk = s.talk
        self.low.add_message(
            talk.tool_call(name, args, use, ts=s.start, call_id=call.call_id, records=records)
        )
        whole = said[2] if len(said) == 3 and said[2] is not None else said[0]
        self.low.add_message(
            talk.tool_result(
                said[0], said[1], ts=s.start, text=whole, shown=whole, use_id=use, name=name
            )
        )

    def edit(
        self, s: _Session, call: _Call, path: str, failed: tuple[str, str] | None, records: int
    ) -> None:
        """An edit of ``path``, its action the reply (what it wrote for the file): applied, or
        ``failed`` (the error as it is compared, and as it is read)."""
        args = {"path": path, "reply": call.reply}
        said = (
            (f"Applied edit to {path}", False) if failed is None else (failed[0], True, failed[1])
        )
        self.tool(s, call, "edit", args, said, records)

    def refused(self, s: _Session, call: _Call, lines: list[_Line], i: int) -> int:
        """``The LLM did not conform to the edit format.`` and the error after it: a refusal,
        or edits that failed to match."""
        j = i + 1
        while j < len(lines) and not _ends_error(lines[j].text):
            j += 1
        said = [ln.text for ln in lines[i + 1 : j] if not ln.text.startswith(_HELP_PAGE)]
        error = "\n".join(said).strip()
        failed = list(dict.fromkeys(m.group("path").strip() for m in _NO_MATCH.finditer(error)))
        # (the same failure is the same error whatever SEARCH text the reply tried: it is
        # compared on Aider's line that names it, the whole error kept to be read)
        named = "\n".join(m.group(0) for m in _NO_MATCH.finditer(error))
        for k, path in enumerate(failed):
            self.edit(s, call, path, (named, error), j - i if k == 0 else 0)
        if not failed:
            s.refused = True
            text = error or _NOT_CONFORM
            self.low.add_message(
                s.talk.refusal(text, ts=s.start, call_id=call.call_id, records=j - i)
            )
        return j

    def ran(self, s: _Session, call: _Call, lines: list[_Line], i: int, cmd: str) -> int:
        """``Running <command>`` and what it printed, up to Aider's next question or word."""
        j = i + 1
        while j < len(lines) and not _ends_output(lines[j].text):
            j += 1
        output = "\n".join(ln.text for ln in lines[i + 1 : j])
        self.tool(s, call, "run", cmd, (output, None), j - i)
        return j

    def fixes(self, s: _Session, call: _Call, lines: list[_Line], i: int) -> int | None:
        """Lint or test output that Aider offers to fix, from ``lines[i]`` to its question: a
        failed lint or test of the reply's edits (None: no such question follows)."""
        j = i
        while j < len(lines) and not _FIX.match(lines[j].text):
            if j > i and _ends_output(lines[j].text):
                return None
            j += 1
        fix = _FIX.match(lines[j].text) if j < len(lines) else None
        if fix is None:
            return None
        output = "\n".join(ln.text for ln in lines[i:j]).strip()
        self.tool(s, call, fix.group("what"), fix.group("what"), (output, True), j - i + 1)
        return j + 1


def _ends_error(text: str) -> bool:
    return bool(
        _REFLECTIONS.match(text)
        or _APPLIED.match(text)
        or _COMMIT.match(text)
        or _TOKENS.match(text)
        or _FIX.match(text)
        or _RUNNING.match(text)
    )


def _ends_output(text: str) -> bool:
    return bool(
        _QUESTION.search(text)
        or _ADDED_OUTPUT.match(text)
        or _ends_error(text)
        or text == _NOT_CONFORM
    )


def _kind(text: str) -> str:
    """The kind of a quoted line that holds no call, message or run (for the accounting)."""
    if _COMMIT.match(text):
        return "commit"
    if _QUESTION.search(text):
        return "question"
    if text.startswith("Aider v"):
        return "announcement"
    return "aider_output"


def load(ctx: LoadContext) -> LoadResult:
    r = _Reader(ctx)
    lines = _lines(read_text(ctx.source, "a chat history"))
    r.survey(lines)
    for line in lines:
        r.line(line)
    r.end_session()
    if not r.low.calls:
        r.low.result.note = "no reply of the model in it"
    return r.low.finish()


# What this module is to the registry (analyzer.formats).
SPEC = FormatSpec(
    name="aider_chat",
    title="Aider chat history (.aider.chat.history.md; tokens and dollars as Aider rounds them)",
    kind="log",
    sniff_order=57,  # after Aider's analytics log, before saved conversations (90)
    call_prefix="aiderchat",
    sniff=sniff,
    load=load,
    # (what the user typed, with times, beside the chat history: it holds no call)
    own_files=(".aider.input.history",),
)
