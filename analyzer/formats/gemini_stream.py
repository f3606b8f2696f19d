"""Gemini CLI's headless stream (``gemini -p ... --output-format stream-json``): JSON Lines.

Not the chats Gemini CLI saves itself (``gemini_cli``): what the CLI writes to stdout when run
headless, kept by whoever ran it (a script, an eval harness), often one file for several runs.
Facts from the real file the tests read (``../shared/samples/real-loops/gemini_stream_json``,
saved by an eval harness that adds its own ``ts`` to each line) and from Gemini CLI's source
(google-gemini/gemini-cli): ``packages/core/src/output/types.ts`` (``JsonStreamEventType``:
``init``, ``message``, ``tool_use``, ``tool_result``, ``error``, ``result``; every event has a
``timestamp``), ``stream-json-formatter.ts`` (one ``JSON.stringify`` per line;
``convertToStreamStats``) and its test (the newer ``stats.models``),
``packages/core/src/telemetry/uiTelemetry.ts`` (what the totals add up),
``packages/cli/src/nonInteractiveCli.ts`` and ``nonInteractiveCliAgentSession.ts`` (which
event is written when), ``docs/cli/headless.md``; and public captures of the output in other
projects' tests (an ``init`` whose model is ``auto-gemini-3``, a failed run's ``result``).

* **A run** is one process: ``init`` (``session_id``; ``model`` as configured, which may be an
  alias such as ``auto``), the user's ``message`` (the prompt it got), the model's output, and
  a ``result`` line last (``status`` ``success`` or ``error``; an ``error`` ``{type, message}``
  when it failed - ``FatalTurnLimitedError``, a cancellation; ``stats``). A run cut off (the
  second run of the real file) has no ``result`` line: its row has no verdict. Each run is a
  ``runs`` row; the runs of one file are one stream (``stream_key``: the first run's session).
  A session id written by two ``init`` lines (``--resume``) is one run row, its ``result``
  lines' totals added (each process counts its own: unsure, no real file has one).
* **No usage per call.** ``stats`` are the process's totals over every model request it made
  (its helper requests too): ``input_tokens`` = the prompts' tokens (``cached`` + ``input``,
  the uncached part), ``output_tokens`` = candidate tokens **without thinking**,
  ``total_tokens`` = the API's totals (thinking and tool-use prompt tokens in them: 5,696 more
  than input + output in the real file), ``duration_ms``, ``tool_calls`` (tool calls, not model
  calls); newer versions add ``models`` (the same totals per model). They go on the run row as
  stated (``reported_input_tokens``, ``reported_output_tokens``, ``duration_ms``; a failed
  run's ``duration_ms`` is written as 0 - "not measured" - and kept NULL). No count of model
  calls is stated (``reported_calls`` NULL) and no cost (``reported_cost_usd`` NULL); the calls
  carry no tokens, so they stay unpriced: pricing a run from its totals is for the store.
* **Calls, inferred.** While one response streams the CLI writes its text as ``message`` lines
  with ``delta: true`` and each function call as a ``tool_use`` line; only when that stream
  ends does it run the calls (``toolCallRequests`` are collected, then scheduled together),
  writing a ``tool_result`` for each, and send the results back. So a call is a run of
  assistant ``message`` and ``tool_use`` lines between two ``tool_result``, user ``message``,
  ``init`` or ``result`` lines; several ``tool_use`` lines in a row are one response calling
  several tools (each of the real file's 68 responses with a tool call has one). Requests the
  CLI makes within a turn without writing anything (a retry, "Please continue.", a routing or
  loop check) are invisible, and a response with no text and no call writes nothing: there
  are at least as many model requests as calls here. A call's time is the ``timestamp`` of
  its first line (the CLI stamps each event as it writes it, in UTC); the harness's ``ts``
  (when the harness read the line, on its own clock, without a zone) is not read. Model: its
  run's ``init``.
* ``tool_use`` (``tool_name``, ``tool_id``, ``parameters``) is a ``tool_call`` message;
  ``tool_result`` (``tool_id``, ``status``, ``output`` - the tool's display text, absent for
  some tools -, ``error`` ``{type, message}``) its ``tool_result``, an error when ``status`` is
  ``error`` (the excerpt then starts with the error's type).
* A user ``message`` is the run's prompt and starts a turn. One written outside a run (before
  the first ``init``, or after a ``result``) is not the CLI's, which writes ``init`` first and
  ``result`` last. The real file has two, the harness's record of the task (no ``timestamp``;
  its text is inside the prompt the CLI echoes after ``init``): skipped
  (``message_outside_run``), so the task is not counted twice.
* ``error`` lines (``severity`` ``warning`` or ``error``, ``message``: "Loop detected, stopping
  execution", "Maximum session turns exceeded", an invalid stream) are the CLI's own notes:
  ``system`` messages. One written just before a ``result`` ended the run: its text is the
  run's ``result_excerpt`` when the result states no error of its own, and gives the outcome
  when the result still says ``success`` (the CLI ends a run its loop detector stopped so).

**Identity.** A session is the run's own ``session_id`` (from its ``init``); a call is
``<session>:<the CLI's timestamp on the response's first line>`` (``#2``... for a second
response stamped in the same millisecond; ``+N``, its place after the run's ``init``, where a
line has no time), never the line number in the file, which moves when another run is written
before it (a harness's file copied, rotated or concatenated). Lines before any ``init`` (a file
whose start was cut off) form a run named after the file.

Records: assistant ``message`` and ``tool_use`` lines build their call (its ``n_records``);
the others build a message or their run; a line of a ``type`` this reader does not know (a
newer event) is skipped by kind. The sniffer wants one of the CLI's events among the first
lines and no line typed otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from analyzer.ingest.base import Head, LoadContext, LoadResult
from analyzer.ingest.conversation import Conversation, Message
from analyzer.ingest.jsonl import head_objects, json_lines
from analyzer.ingest.lowering import Lowering, brief, excerpt, text_measure
from analyzer.ingest.rows import CallRow
from analyzer.ingest.runs import estimate_of_totals, outcome
from analyzer.ingest.spec import FormatSpec
from analyzer.ingest.values import as_dict, as_int, as_str, as_text, kind_of, parse_time

APP = "gemini-cli"
PROVIDER = "google"
_EVENTS = {"init", "message", "tool_use", "tool_result", "error", "result"}
_STATUS_ERROR = {"success": False, "error": True}


def _is_event(obj: dict[str, Any]) -> bool:
    """Is ``obj`` one of the CLI's own events (not a line any JSON Lines log could hold)?"""
    kind = kind_of(obj)
    if kind == "init":
        return isinstance(obj.get("session_id"), str) and "model" in obj
    if kind == "tool_use":
        return "tool_id" in obj and "tool_name" in obj
    if kind == "tool_result":
        return "tool_id" in obj and "status" in obj
    if kind == "result":  # (Claude Code's result line has a subtype, and no status)
        return "status" in obj and "subtype" not in obj
    if kind == "message":
        return obj.get("role") == "assistant" and obj.get("delta") is True
    return kind == "error" and "severity" in obj


def sniff(head: Head) -> bool:
    """One of the CLI's own events among the first lines, and no line typed as anything else
    (Claude Code's stream, Codex, Gemini CLI's chats type theirs otherwise). A line without a
    ``type`` (a harness's own) is not held against it."""
    typed = [o for o in head_objects(head) if "type" in o]
    return all(kind_of(o) in _EVENTS for o in typed) and any(_is_event(o) for o in typed)


@dataclass
class _Run:
    """One process of the CLI: its session and what its lines said so far (``talk``: the
    session's messages, its turn under way)."""

    session: str
    seq: int
    line: int
    model: str | None = None
    n_records: int = 0
    open: bool = True  # its result line not read yet
    last_error: str | None = None  # an error line's text, when nothing came after it
    verdict: dict[str, Any] = field(default_factory=dict)
    billed_output: int | None = None  # output tokens as billed: thinking included
    talk: Conversation = field(init=False)

    def __post_init__(self) -> None:
        self.talk = Conversation(self.session)


@dataclass
class _Response:
    """The call being read: the lines of one model response."""

    call: CallRow
    call_id: str  # (its id in the store, for its messages)
    messages: list[Message]  # its messages' rows, written after the call
    text: list[str]


class _Stream:
    """The runs of one file, read in order."""

    def __init__(self, ctx: LoadContext) -> None:
        self.low = Lowering(ctx, SPEC.name, SPEC.call_prefix)
        self.tz = ctx.options.tz
        self.file_session = Path(ctx.source.path).stem
        self.runs: dict[str, _Run] = {}
        self.run: _Run | None = None
        self.stream: str | None = None
        self.seq = 0
        self.response: _Response | None = None
        self.natives: dict[str, int] = {}  # call ids given, with how many times

    # -- runs and messages -----------------------------------------------------------------

    def current(self, line: int) -> _Run:
        """The run a line belongs to; a line before any ``init`` (the file's start was cut
        off) opens a run named after the file."""
        if self.run is None:
            self.start(self.file_session, None, line)
        assert self.run is not None
        return self.run

    def start(self, session: str, model: str | None, line: int) -> None:
        self.stream = self.stream or session
        run = self.runs.get(session)
        if run is None:
            run = self.runs[session] = _Run(session, len(self.runs) + 1, line)
        run.model = model or run.model
        run.open, run.last_error = True, None
        self.run = run

    def native_id(self, run: _Run, line: int, ts: datetime | None) -> str:
        """A response's call id: its run's session and the CLI's time on its first line (to
        the millisecond), numbered among equal times; without a time, its place after its
        run's ``init``. Never the file's line number, which moves when the file holds other
        runs before it."""
        at = ts.isoformat() if ts is not None else f"+{line - run.line}"
        key = f"{run.session}:{at}"
        n = self.natives[key] = self.natives.get(key, 0) + 1
        return key if n == 1 else f"{key}#{n}"

    # -- the lines -------------------------------------------------------------------------

    def init(self, line: int, obj: dict[str, Any]) -> None:
        self.close()
        session = as_str(obj.get("session_id"))
        if not session:
            self.low.reject(line, "an init line without a session_id", brief(obj))
            return
        self.start(session, as_str(obj.get("model")), line)
        assert self.run is not None
        self.run.n_records += 1

    def user(self, line: int, obj: dict[str, Any], ts: datetime | None) -> None:
        self.close()
        run = self.run
        if run is None or not run.open:  # the CLI writes init first and result last
            self.low.skip("message_outside_run")
            return
        run.talk.turn, run.last_error = f"{run.session}:{line}", None
        self.low.add_message(run.talk.prompt(as_text(obj.get("content")), ts=ts))

    def respond(self, line: int, ts: datetime | None) -> _Response:
        """The response being read, or a new one beginning at ``line``."""
        run = self.current(line)
        run.last_error = None
        if self.response is None:
            self.seq += 1
            native = self.native_id(run, line, ts)
            call = CallRow(
                native_id=native,
                session_id=run.session,
                stream_key=self.stream,
                turn_id=run.talk.turn,
                seq=self.seq,
                line=line,
                ts=ts,
                model=run.model,
                provider=PROVIDER,
                app=APP,
                tool_call_count=0,
                n_records=0,
            )
            self.response = _Response(call, self.low.call_id(native), [], [])
        self.response.call.add(n_records=1)
        return self.response

    def assistant(self, line: int, obj: dict[str, Any], ts: datetime | None) -> None:
        r = self.respond(line, ts)
        if not r.text:  # the text's message takes its place before the calls that follow
            # (measured and cut when the response ends: ``close``)
            r.messages.append(self.current(line).talk.said(None, ts=ts, call_id=r.call_id))
        r.text.append(as_text(obj.get("content")))

    def tool_use(self, line: int, obj: dict[str, Any], ts: datetime | None) -> None:
        r = self.respond(line, ts)
        r.call.add(tool_call_count=1)
        r.messages.append(
            self.current(line).talk.tool_call(
                as_str(obj.get("tool_name")),
                obj.get("parameters"),
                as_str(obj.get("tool_id")),
                ts=ts,
                call_id=r.call_id,
            )
        )

    def tool_result(self, line: int, obj: dict[str, Any], ts: datetime | None) -> None:
        self.close()
        tool_id = as_str(obj.get("tool_id"))
        if tool_id is None:
            self.low.reject(
                line, "a tool_result without a tool_id (it answers no call)", brief(obj)
            )
            return
        run = self.current(line)
        run.last_error = None
        status = as_str(obj.get("status"))
        is_error = _STATUS_ERROR.get(status) if status else None
        output, error = obj.get("output"), obj.get("error")
        err = as_dict(error)
        text = as_text(output) or as_text(err.get("message"))
        shown = f"{as_str(err.get('type')) or 'error'}: {text}" if is_error else text
        payload = output if error is None else {"output": output, "error": error}
        self.low.add_message(
            run.talk.tool_result(
                payload, is_error, ts=ts, text=text, use_id=tool_id, records=1, shown=shown
            )
        )

    def error(self, line: int, obj: dict[str, Any], ts: datetime | None) -> None:
        """The CLI's own note (a warning or an error): a ``system`` message of its run."""
        run = self.current(line)
        text = as_text(obj.get("message"))
        shown = f"{as_str(obj.get('severity')) or 'error'}: {text}"
        self.low.add_message(run.talk.text("system", "system", text, ts=ts, records=1, shown=shown))
        run.last_error = text or None

    def result(self, line: int, obj: dict[str, Any]) -> None:
        self.close()
        run = self.current(line)
        status = as_str(obj.get("status"))
        err = as_dict(obj.get("error"))
        etype, emsg = as_str(err.get("type")), as_str(err.get("message"))
        is_error = _STATUS_ERROR.get(status) if status else None
        exit_status = f"{status} ({etype})" if status and etype else status or etype
        verdict = outcome(exit_status, is_error)
        if status == "success" and run.last_error:  # stopped by the CLI's own check
            verdict = outcome(run.last_error)
        v = run.verdict
        v.update(
            line=line,
            exit_status=exit_status,
            outcome=verdict,
            is_error=is_error,
            result_excerpt=excerpt(emsg or run.last_error),
        )
        stats = as_dict(obj.get("stats"))
        for column, key in (
            ("reported_input_tokens", "input_tokens"),
            ("reported_cached_tokens", "cached"),
            ("reported_output_tokens", "output_tokens"),
        ):
            n = as_int(stats.get(key))
            if n is not None:
                v[column] = (v.get(column) or 0) + n
        # ``output_tokens`` leaves thinking out; it is billed as output: total - input.
        total, prompt = as_int(stats.get("total_tokens")), as_int(stats.get("input_tokens"))
        billed = total - prompt if total is not None and prompt is not None else None
        if billed is not None and billed >= 0:
            run.billed_output = (run.billed_output or 0) + billed
        duration = as_int(stats.get("duration_ms"))
        if duration:  # 0: not measured (an error result's literal 0)
            v["duration_ms"] = float((v.get("duration_ms") or 0) + duration)
        run.n_records += 1
        run.open, run.last_error = False, None

    # -- the end of a response, of the file ------------------------------------------------

    def close(self) -> None:
        """The response being read has ended: its call and messages are written."""
        r, self.response = self.response, None
        if r is None:
            return
        text = "".join(r.text)
        chars, visible = text_measure(text)
        r.call.content_chars, r.call.visible_chars = chars, visible
        for m in r.messages:
            if m.kind == "text":  # placed when the response began, its text known now
                Conversation.fill(m, text)
        self.low.add_call(r.call)
        for m in r.messages:
            self.low.add_message(m)

    def finish(self) -> LoadResult:
        self.close()
        for run in self.runs.values():
            self.low.add_run(
                {
                    "session_id": run.session,
                    "stream_key": self.stream,
                    "seq": run.seq,
                    "line": run.line,
                    "agent": APP,
                    "model": run.model,
                    "n_records": run.n_records,
                }
                | run.verdict
                | self.priced(run)
            )
        return self.low.finish()

    def priced(self, run: _Run) -> dict[str, Any]:
        """The run's stated tokens at list prices, divided over its calls as their estimated
        cost (no call states tokens): empty when the run states none, or its model is an
        alias with no price (``auto``)."""
        calls = [c for c in self.low.calls if c.get("session_id") == run.session]
        v = run.verdict
        if not calls or v.get("reported_input_tokens") is None:
            return {}
        first = next((c["ts"] for c in calls if c.get("ts") is not None), None)
        output = (
            run.billed_output if run.billed_output is not None else v.get("reported_output_tokens")
        )
        tokens = (v.get("reported_input_tokens"), v.get("reported_cached_tokens"), output)
        day = first.date() if first is not None else None
        cost = estimate_of_totals(run.model, PROVIDER, day, tokens, len(calls))
        return {} if cost is None else {"cost_estimate_usd": cost, "cost_apportioned": True}


def load(ctx: LoadContext) -> LoadResult:
    st = _Stream(ctx)
    for lineno, obj in json_lines(ctx.source, st.low):
        kind = kind_of(obj)
        ts = parse_time(obj.get("timestamp"), st.tz)
        if kind == "message":
            role = obj.get("role")
            if role == "user":
                st.user(lineno, obj, ts)
            elif role == "assistant":
                st.assistant(lineno, obj, ts)
            else:
                st.low.reject(lineno, "a message neither the user's nor the model's", brief(obj))
        elif kind == "tool_use":
            st.tool_use(lineno, obj, ts)
        elif kind == "tool_result":
            st.tool_result(lineno, obj, ts)
        elif kind == "init":
            st.init(lineno, obj)
        elif kind == "result":
            st.result(lineno, obj)
        elif kind == "error":
            st.error(lineno, obj, ts)
        elif kind is None:
            st.low.reject(lineno, "a line without a type", brief(obj))
        else:
            st.low.skip(kind)  # an event of a newer version
    return st.finish()


# What this module is to the registry (analyzer.formats).
SPEC = FormatSpec(
    name="gemini_stream_json",
    title="Gemini CLI stream-json output (gemini --output-format stream-json)",
    kind="log",
    sniff_order=48,  # before Gemini CLI's saved chats (50); neither claims the other's files
    call_prefix="gstream",
    sniff=sniff,
    load=load,
)
