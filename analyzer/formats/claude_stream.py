"""Claude Code's headless stream (``claude -p --output-format stream-json --verbose``).

The log an outer loop leaves (``while :; do claude -p "..." --output-format stream-json
--verbose | tee -a claude_output.jsonl; done``): every run of the CLI appended to one file. Facts
from the two real files the tests read (``../shared/samples/real-loops/claude_stream_json``) and
Claude Code's SDK documentation of the stream's messages:

* A run starts with a ``system`` line of subtype ``init`` (its ``session_id``, ``model``,
  ``cwd``, ``tools``) and ends with a ``result`` line (``subtype`` ``success`` or an error such as
  ``error_max_turns``, ``is_error``, ``num_turns``, ``duration_ms``, ``total_cost_usd``, the
  run's ``result`` text). A run cut off (the loop was stopped) has no ``result`` line.
* ``assistant`` and ``user`` lines carry the API's message as Claude Code's transcripts do, but
  with ``session_id`` (not ``sessionId``), no ``timestamp``, no ``requestId``: one API call is
  written as one line per content block, sharing ``message.id``; its ``usage`` is the streaming
  placeholder of the start of the response (``stop_reason`` null), as in the transcripts, so the
  largest count is kept and, unless a line says how the response stopped, ``output_final`` is
  false and the output is estimated from what the call wrote (as for the transcripts). The
  whole prompt is ``input_tokens + cache_creation_input_tokens + cache_read_input_tokens``.
  ``parent_tool_use_id`` marks a sub-agent's message (the Task call it works for).
* **No times.** Nothing on these lines says when: calls have no time (never one invented);
  they are ordered by their place in the file.
* **One session per run**, the runs of one file one stream (its ``stream_key`` is the first
  run's session), so a relaunch loop reads as what it is: one agent restarted again and again.
  The user's prompt is not in the stream: a run is one turn.
* ``<synthetic>`` replies are written by the CLI itself, not by a model (the usage limit
  notice "5-hour limit reached ∙ resets 12am", "Credit balance is too low"): a launch refused
  at once. Each is a call of its run all the same (model ``<synthetic>``, no tokens, priced
  $0, ``reported``), so a refused launch counts as what it was, one more launch and its reply;
  one without a message id is a ``synthetic`` message of its run.
* **A run is one launch**: an ``init`` line of a session that already has a run (``--resume``
  and ``--continue`` launch the CLI again on an earlier session, with its id) starts a run of
  its own, session ``<id>:launch-<n>``, with its own calls and verdict.
* **Each run's own verdict**, from its ``result`` line, is a ``runs`` row: the ``subtype`` as
  exit status, ``is_error``, the result text, ``num_turns``, ``duration_ms``, and the CLI's own
  ``total_cost_usd`` (computed by Claude Code from the final token counts, which the stream
  does not carry): that stated cost is divided over the run's calls and its Task sub-agents'
  (``apportioned``, in proportion to their list-price estimates), so the file's dollars are
  the CLI's own. The CLI counts every call of its process: a run's ``modelUsage`` names its
  sub-agent's model (in the real file with sub-agents, 53,792 of the 53,920 cache-write
  tokens of a run's haiku figure are its sub-agent's calls'), so no call of a run is priced
  beside what the run states. A ``result``
  line's ``usage`` is not the run's total (a 56-turn run's is one call's size), so it is not
  kept. A run without a ``result`` line (cut off) states nothing: its calls keep their
  list-price estimates, above what the file states for its other runs, and the views say so
  (``views.verdicts.unstated``).

Records: ``assistant`` lines build calls (or a synthetic reply), ``user`` lines messages,
``init`` and ``result`` lines their run; other ``system`` subtypes are skipped by kind.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from analyzer.formats import claude_code
from analyzer.ingest.base import Head, LoadContext, LoadResult
from analyzer.ingest.jsonl import head_objects, json_lines
from analyzer.ingest.lowering import Lowering, brief, excerpt
from analyzer.ingest.runs import outcome
from analyzer.ingest.spec import FormatSpec
from analyzer.ingest.values import MAX_COST, as_dict, as_int, as_str, kind_of

SYNTHETIC = claude_code.SYNTHETIC


def sniff(head: Head) -> bool:
    for obj in head_objects(head):
        kind = kind_of(obj)
        if "sessionId" in obj or "parentUuid" in obj:
            return False  # a transcript (claude_code)
        if kind == "system" and obj.get("subtype") == "init" and "session_id" in obj:
            return True
        if kind in ("assistant", "user") and "session_id" in obj and "parent_tool_use_id" in obj:
            return True
        if kind == "result" and "session_id" in obj and "num_turns" in obj:
            return True
    return False


class _Stream:
    """The runs of one file, read in order."""

    def __init__(self, ctx: LoadContext) -> None:
        self.low = Lowering(ctx, SPEC.name, SPEC.call_prefix)
        self.tz = ctx.options.tz
        self.sessions: dict[tuple[str, str | None], claude_code._Session] = {}
        self.book = claude_code.CallBook()
        self.runs: dict[str, dict[str, Any]] = {}  # session -> its run row, in file order
        self.launches: dict[str, str] = {}  # the CLI's session id -> its current run's session
        self.stream: str | None = None
        self.file_session = Path(ctx.source.path).stem

    def run_of(self, cli_sid: str, line: int, launch: bool = False) -> dict[str, Any]:
        """The run a line of the CLI's session ``cli_sid`` belongs to. A ``launch`` (an
        ``init`` line) of a session that already started or ended a run is a run of its own
        (``--resume`` and ``--continue`` launch the CLI again on an earlier session): its
        session is ``<id>:launch-<n>``, so each launch keeps its own calls and verdict."""
        sid = self.launches.setdefault(cli_sid, cli_sid)
        run = self.runs.get(sid)
        if launch and run is not None and (run.get("launched") or run.get("ended")):
            n = sum(1 for r in self.runs.values() if r["cli_session"] == cli_sid) + 1
            sid = self.launches[cli_sid] = f"{cli_sid}:launch-{n}"
            run = None
        if run is None:
            self.stream = self.stream or sid
            run = self.runs[sid] = {
                "session_id": sid,
                "cli_session": cli_sid,
                "stream_key": self.stream,
                "seq": len(self.runs) + 1,
                "line": line,
                "agent": "claude-code",
                "n_records": 0,
            }
        return run

    def session_of(self, obj: dict[str, Any], line: int) -> claude_code._Session:
        sid = self.run_of(as_str(obj.get("session_id")) or self.file_session, line)["session_id"]
        parent = as_str(obj.get("parent_tool_use_id"))
        s = self.sessions.get((sid, parent))
        if s is None:
            if parent:  # a sub-agent at work for its run's Task call
                s = claude_code._Session(f"{sid}:task-{parent}", sid, parent)
            else:
                s = claude_code._Session(sid, None, None)
                s.turn = sid  # the prompt is not in the stream: the run is one turn
            self.sessions[sid, parent] = s
        return s

    def init(self, obj: dict[str, Any], line: int) -> None:
        run = self.run_of(as_str(obj.get("session_id")) or self.file_session, line, launch=True)
        run["launched"] = True
        run["model"] = as_str(obj.get("model"))
        run["project"] = as_str(obj.get("cwd"))
        run["n_records"] += 1

    def result(self, obj: dict[str, Any], line: int) -> None:
        run = self.run_of(as_str(obj.get("session_id")) or self.file_session, line)
        is_error = obj.get("is_error") if isinstance(obj.get("is_error"), bool) else None
        status = as_str(obj.get("subtype"))
        text = obj.get("result")
        cost = obj.get("total_cost_usd")
        stated = (
            float(cost)
            if isinstance(cost, int | float) and not isinstance(cost, bool) and 0 <= cost < MAX_COST
            else None
        )
        duration = obj.get("duration_ms")
        run.update(
            ended=True,
            line=line,
            exit_status=status,
            outcome=outcome(status, is_error),
            is_error=is_error,
            result_excerpt=excerpt(text),
            reported_calls=as_int(obj.get("num_turns")),
            reported_cost_usd=stated,
            cost_apportioned=bool(stated),
            duration_ms=float(duration)
            if isinstance(duration, int | float) and not isinstance(duration, bool)
            else None,
        )
        run["n_records"] += 1

    def assistant(self, obj: dict[str, Any], line: int) -> None:
        msg = as_dict(obj.get("message"))
        if msg.get("model") != SYNTHETIC and not as_str(msg.get("id")):
            self.low.reject(line, "assistant line without message.id", brief(obj))
            return  # (before its session is noted: a broken line starts no run)
        s = self.session_of(obj, line)
        if msg.get("model") == SYNTHETIC and not as_str(msg.get("id")):
            # the CLI's own reply with no id to make a call of: what the run answered
            text = claude_code._result_text(msg.get("content"))
            self.low.add_message(s.text("assistant", "synthetic", text, ts=None, records=1))
            return
        call = claude_code._assistant(self.low, obj, line, s, self.book, self.tz)
        if call is not None:
            call.project = self.runs[s.parent or s.session].get("project")
            if s.parent is None:
                call.stream_key = self.stream

    def finish(self) -> LoadResult:
        # The calls in file order: their place in the stream is their order (no times).
        for seq, (call, tally) in enumerate(self.book.calls.values(), 1):
            call.seq = seq
            self.low.add_call(claude_code.settle_call(call, tally))
        for run in self.runs.values():
            for key in ("project", "cli_session", "launched", "ended"):
                run.pop(key, None)
            self.low.add_run(run)
        return self.low.finish()


def load(ctx: LoadContext) -> LoadResult:
    st = _Stream(ctx)
    for lineno, obj in json_lines(ctx.source, st.low):
        kind = obj.get("type")
        if kind == "assistant":
            st.assistant(obj, lineno)
        elif kind == "user":
            claude_code._user(st.low, obj, st.session_of(obj, lineno), st.tz)
        elif kind == "system" and obj.get("subtype") == "init":
            st.init(obj, lineno)
        elif kind == "result":
            st.result(obj, lineno)
        else:
            st.low.skip(str(kind_of(obj) or "untyped"))
    return st.finish()


# What this module is to the registry (analyzer.formats).
SPEC = FormatSpec(
    name="claude_stream_json",
    title="Claude Code stream-json output (claude -p --output-format stream-json)",
    kind="log",
    sniff_order=21,
    call_prefix="ccs",
    sniff=sniff,
    load=load,
)
