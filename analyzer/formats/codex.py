"""OpenAI Codex CLI rollouts: ``~/.codex/sessions/YYYY/MM/DD/rollout-<ts>-<uuid>.jsonl``.

Each line is ``{timestamp, type, payload}`` (as in the real rollouts the tests read).

* A call is an ``event_msg`` ``token_count`` whose ``info`` carries usage: per-call usage is
  ``info.last_token_usage``; older files have only cumulative ``total_token_usage``, and the
  call's usage is the difference from the previous total. An event whose total did not change
  repeats the last one and is skipped; one without ``info`` reports rate limits only.
* ``input_tokens`` already includes ``cached_input_tokens``; ``output_tokens`` already includes
  ``reasoning_output_tokens``. Token counts here are final.
* The model is the latest ``turn_context``'s. A user's ``user_message`` event starts a turn.
* ``function_call`` (and ``custom_tool_call``, ``local_shell_call``, ``web_search_call`` - a
  search the model ran, named ``web_search``) items are tool calls; ``function_call_output``
  items their results, tied to their call by ``call_id`` and hashed, so that Codex polling a
  running command with ``write_stdin`` (the same call, a new output each time) is not taken
  for a loop. The items of a model response sit next to its
  ``token_count`` event, between two ``turn_context`` lines: they are given to the call of their
  step, whichever side of the event they were written on.
* A ``compacted`` line is Codex replacing the history by its summary (``payload.message``): a
  ``compaction`` message, so compaction loops can be seen.
* The first ``session_meta`` names the session. A fork or sub-agent is linked to the session it
  came from (``parent_session_id``; a sub-agent's name in ``agent_id``), and the parent's history
  copied into it is the parent's, not the child's: those lines are skipped (``fork_replay``,
  ``fork_replay_call`` for a copied call) and only set the baseline of cumulative totals
  (``analyzer.formats.codex_forks`` says how the copy is told).
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from analyzer.formats.codex_forks import Replay
from analyzer.ingest.base import Head, LoadContext, LoadResult
from analyzer.ingest.conversation import Conversation, Message
from analyzer.ingest.jsonl import head_objects, json_lines
from analyzer.ingest.lowering import Lowering, brief
from analyzer.ingest.rows import CallRow
from analyzer.ingest.spec import FormatSpec
from analyzer.ingest.usage import token_counts
from analyzer.ingest.values import as_int, as_list, as_str, as_text, kind_of, parse_time

APP = "codex"
_KINDS = {"session_meta", "turn_context", "response_item", "event_msg", "compacted"}
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_TOOL_ITEMS = {"function_call", "custom_tool_call", "local_shell_call", "web_search_call"}
_TOOL_NAMES = {"web_search_call": "web_search"}  # items that carry no name of their own
_RESULT_ITEMS = {"function_call_output", "custom_tool_call_output", "local_shell_call_output"}


_USAGE_KEYS = ("input_tokens", "cached_input_tokens", "output_tokens", "reasoning_output_tokens")


def sniff(head: Head) -> bool:
    objs = head_objects(head)
    return bool(objs) and all(
        kind_of(o) in _KINDS and isinstance(o.get("payload"), dict) for o in objs[:3]
    )


def _usage(raw: object) -> dict[str, int] | None:
    if not isinstance(raw, dict):
        return None
    return {k: as_int(raw.get(k)) or 0 for k in _USAGE_KEYS}


def _output_is_error(output: object) -> bool | None:
    """Codex wraps a command's output as JSON with ``metadata.exit_code``."""
    if isinstance(output, str):
        try:
            output = orjson.loads(output)
        except orjson.JSONDecodeError:
            return None
    if isinstance(output, dict):
        meta = output.get("metadata")
        code = meta.get("exit_code") if isinstance(meta, dict) else None
        if isinstance(code, int):
            return code != 0
    return None


class _Reader:
    def __init__(self, ctx: LoadContext) -> None:
        self.ctx = ctx
        self.low = Lowering(ctx, SPEC.name, SPEC.call_prefix)
        m = _UUID.search(Path(ctx.source.path).name)
        self.talk = Conversation(m.group(0) if m else Path(ctx.source.path).stem)  # its messages
        self.model: str | None = None
        self.cwd: str | None = None
        self.prev_total: dict[str, int] | None = None
        self.n_calls = 0
        self.call: CallRow | None = None  # the call of the current step
        # The items waiting for their call: their effects on it, and their messages (rows of
        # ``self.talk``, numbered where the item is).
        self.pending: list[tuple[dict[str, int], Message | None]] = []
        self.replay = Replay()
        self.meta_seen = False

    # An item's effect on its call, applied once the call is known.
    def attach(self, call_effect: dict[str, int], message: Message | None) -> None:
        if self.call is None:
            self.pending.append((call_effect, message))
        else:
            self._apply(self.call, call_effect, message)

    def _apply(self, call: CallRow, effect: dict[str, int], message: Message | None) -> None:
        call.add(**effect)
        call.parts = (call.parts or call.n_records or 0) + 1  # this item shaped it
        if message is not None:
            message.call_id = self.low.call_id(str(call.native_id))
            self.low.add_message(message)

    def end_step(self) -> None:
        """A new step begins: items still waiting for a call keep waiting for the next one,
        unless this step had a call."""
        self.call = None

    def finish(self) -> LoadResult:
        for _effect, message in self.pending:  # items of a response with no usage event
            if message is not None:
                self.low.add_message(message)
        return self.low.finish()

    def line(self, lineno: int, obj: dict[str, Any]) -> None:
        kind, p = kind_of(obj), obj.get("payload")
        ts = parse_time(obj.get("timestamp"), self.ctx.options.tz)
        low = self.low
        if not isinstance(p, dict):
            low.reject(lineno, f"{kind or 'line'} without a payload object", brief(obj))
            return
        ptype = kind_of(p)
        if kind == "session_meta" and not self.meta_seen:  # the rollout's own: Codex's rule too
            self.meta_seen = True
            if as_str(p.get("id")):
                self.talk.session = str(p["id"])
            self.cwd = as_str(p.get("cwd")) or self.cwd
            self.replay.own_meta(p, ts, self.ctx.options.tz)
            low.skip("session_meta")
        elif self.meta_seen and self.replay.copied(kind, p, ts, obj.get("ordinal")):
            self.copied(kind, ptype, p)
        elif kind == "session_meta":
            low.skip("session_meta")
        elif kind == "turn_context":
            if as_str(p.get("model")):
                self.model = str(p["model"])
            self.cwd = as_str(p.get("cwd")) or self.cwd
            self.end_step()
            low.skip("turn_context")
        elif kind == "event_msg" and ptype == "token_count":
            self.token_count(lineno, ts, p)
        elif kind == "event_msg" and ptype == "user_message":
            self.talk.turn = f"{self.talk.session}:{lineno}"
            low.add_message(self.talk.prompt(p.get("message"), ts=ts))
        elif kind == "response_item" and self.response_item(ptype, p, ts):
            pass
        elif kind == "compacted":  # Codex replaced the history by its summary: a compaction
            low.add_message(
                self.talk.text("system", "compaction", p.get("message"), ts=ts, records=1)
            )
        else:
            low.skip(f"{kind}:{ptype}" if ptype else str(kind))

    def response_item(self, ptype: str | None, p: dict[str, Any], ts: datetime | None) -> bool:
        """A ``response_item`` line of the kinds read (False: a kind skipped)."""
        if ptype == "message" and p.get("role") == "assistant":
            text = "".join(
                as_text(c.get("text"))
                for c in as_list(p.get("content"))
                if isinstance(c, dict) and c.get("type") in ("output_text", "text")
            )
            said = self.talk.said(text, ts=ts, call_id=None, records=1)  # (its call: ``attach``)
            self.attach(
                {"content_chars": said.text_chars or 0, "visible_chars": said.visible_chars or 0},
                said,
            )
        elif ptype == "reasoning":
            summary = "".join(
                as_text(s.get("text")) for s in as_list(p.get("summary")) if isinstance(s, dict)
            )
            self.attach({"reasoning_chars": len(summary)}, None)
            self.low.skip("reasoning_item")  # its size is on the call; nothing else is kept
        elif ptype in _TOOL_ITEMS:
            args = p.get("arguments", p.get("input", p.get("action")))
            name = as_str(p.get("name")) or _TOOL_NAMES.get(ptype, ptype)
            self.attach(
                {"tool_call_count": 1},
                self.talk.tool_call(name, args, as_str(p.get("call_id")), ts=ts, records=1),
            )
        elif ptype in _RESULT_ITEMS:
            self.tool_result(p, ts)
        else:
            return False
        return True

    def tool_result(self, p: dict[str, Any], ts: datetime | None) -> None:
        """A tool's output, measured as the model was shown it (text, or its JSON)."""
        output = p.get("output")
        self.low.add_message(
            self.talk.tool_result(
                output,
                _output_is_error(output),
                ts=ts,
                text=output if isinstance(output, str) else brief(output, limit=10**9),
                use_id=as_str(p.get("call_id")),
                records=1,
            )
        )

    def copied(self, kind: str | None, ptype: str | None, p: dict[str, Any]) -> None:
        """A line of the parent's history copied into a fork: the parent's, counted there. Its
        model and cumulative totals carry on into the child's own calls."""
        if kind == "turn_context" and as_str(p.get("model")):
            self.model = str(p["model"])
        info = p.get("info") if kind == "event_msg" and ptype == "token_count" else None
        if isinstance(info, dict):
            self.prev_total = _usage(info.get("total_token_usage")) or self.prev_total
            self.low.skip("fork_replay_call")
        else:
            self.low.skip("fork_replay")

    def token_count(self, lineno: int, ts: datetime | None, p: dict[str, Any]) -> None:
        info = p.get("info")
        if not isinstance(info, dict):
            self.low.skip("rate_limits")
            return
        total = _usage(info.get("total_token_usage"))
        last = _usage(info.get("last_token_usage"))
        if total is not None and total == self.prev_total:
            self.low.skip("token_count_repeat")
            return
        if last is None:
            if total is None:
                self.low.reject(lineno, "token_count without token usage", brief(p))
                return
            prev = self.prev_total or dict.fromkeys(_USAGE_KEYS, 0)
            last = {k: max(total[k] - prev[k], 0) for k in _USAGE_KEYS}
        if total is not None:
            self.prev_total = total
        self.n_calls += 1
        call = self.talk.call(
            f"{self.talk.session}:{self.n_calls}",
            line=lineno,
            ts=ts,
            seq=self.n_calls,
            model=self.model,
            provider="openai",
            app=APP,
            project=self.cwd,
            parent_session_id=self.replay.parent,
            agent_id=self.replay.lineage.agent,
            **token_counts(last),
            output_final=True,
            content_chars=0,
            visible_chars=0,
            reasoning_chars=0,
            tool_call_count=0,
            n_records=1,
        )
        self.call = call
        self.low.add_call(call)
        waiting, self.pending = self.pending, []
        for effect, message in waiting:
            self._apply(call, effect, message)


def load(ctx: LoadContext) -> LoadResult:
    reader = _Reader(ctx)
    for lineno, obj in json_lines(ctx.source, reader.low):
        reader.line(lineno, obj)
    return reader.finish()


# What this module is to the registry (analyzer.formats).
SPEC = FormatSpec(
    name="codex",
    title="OpenAI Codex CLI rollout (JSONL)",
    kind="log",
    sniff_order=30,
    call_prefix="codex",
    sniff=sniff,
    load=load,
)
