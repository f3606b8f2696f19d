"""Saved conversations (one JSON document): the shapes agents write to disk.

* **OpenAI chat messages** - a list of messages, or an object with ``messages``: ``content``
  (a string or parts), ``tool_calls``, ``reasoning_content`` / ``reasoning``, and ``usage``,
  ``finish_reason``, ``model``, ``id`` where the agent kept them. A ``tool`` message is a tool
  result, tied to its call by ``tool_call_id`` (= the ``tool_calls[].id`` it answers).
* **Anthropic messages** - ``content`` as blocks ``text``, ``thinking``, ``tool_use``,
  ``tool_result``, with ``stop_reason`` and ``usage`` on assistant messages; a ``tool_result``
  is tied to its ``tool_use`` by ``tool_use_id`` (= the ``tool_use`` block's ``id``).
* **Penguin sessions** - ``{id, messages, llm_request_lifecycles, ...}``: messages with a
  ``category``, ``metadata.was_empty`` and the placeholder ``[Empty response from model]`` it
  saves for an empty reply; lifecycles carry the finish reason of every request. Penguin acts
  through CodeAct tags in its replies (``<execute>pytest</execute>``): each tag is a tool call
  (named by the tag, its body the arguments). Its tool results carry no id, so they are tied to
  no call (``tool_use_id`` NULL).
* **An agent's record under ``extra``** - mini-swe-agent (``trajectory_format``
  ``mini-swe-agent-1.1``; ``{info, messages, instance_id}``) keeps, beside each OpenAI-style
  assistant message, what litellm returned: ``extra.response`` (the whole chat completion:
  ``model``, ``id``, ``created``, ``usage``, ``choices[0].finish_reason``), ``extra.cost`` and
  ``extra.timestamp``; its ``tool`` messages keep ``extra.returncode``, ``extra.timestamp``,
  ``extra.raw_output`` and ``extra.exception_info``; ``info`` says how the run ended
  (``exit_status``) and what it cost (``model_stats``): the run's own verdict, kept as a
  ``runs`` row as for mini-swe-agent 1.x (``analyzer.formats.mini_swe_agent``). Any
  conversation whose messages carry this ``extra`` is read so, whatever the file is called. A
  field of the message itself wins over the same field under ``extra``. What is read from
  there, and how sure its meaning is:

  - ``extra.response.model`` / ``.id`` - the model that answered and the provider's response
    id (``response_id``). ``usage`` - OpenAI usage: ``prompt_tokens`` is the whole prompt,
    cached part included (``prompt_tokens_details.cached_tokens``; DeepSeek's
    ``prompt_cache_hit_tokens`` where that is missing, and ``hit + miss`` when
    ``prompt_tokens`` is); ``completion_tokens`` includes
    ``completion_tokens_details.reasoning_tokens`` (null in DeepSeek's chat replies: unknown,
    not zero).
  - ``extra.cost`` - the agent's own figure in USD, kept as ``cost_basis = 'reported'`` (the
    list-price estimate is kept beside it). It is litellm's price-table calculation at run
    time, not a provider's bill. mini-swe-agent writes exactly ``0.0`` when that calculation
    failed and ``cost_tracking: ignore_errors`` let the run go on, so a cost of 0 is read as
    no cost stated (the estimate stands), never as a free call.
  - ``extra.timestamp`` - epoch seconds, taken by the agent just after the reply arrived (the
    end of the call, not its start); used as the time of the call, and of a tool message,
    when the message has no time of its own. ``extra.response.created`` (whole seconds, set by
    the provider) is the last resort for a call.
  - ``extra.returncode`` on a tool message - a command's exit status: anything but 0 (-1 is a
    timeout or an exception in mini-swe-agent) makes the result an error when no
    ``is_error`` flag says otherwise. A ``user`` message with an ``extra.returncode`` is the
    same observation in mini-swe-agent's text-based mode (no ``tool_calls``): a tool result
    tied to no call; one with an ``extra.interrupt_type`` is the agent's text, not a prompt,
    and a ``FormatError`` one (the agent refusing a reply with no or a malformed tool call) is
    a ``format_error`` tied to the call it refused.

Each assistant message is one call. A Penguin lifecycle with no saved message is a call whose
reply was never saved (``reply_saved`` false) - how seed 000's whitespace replies looked. A
placeholder message is a call whose reply was empty: the placeholder is Penguin's text, not the
model's. Timestamps without a zone are read in ``--tz``.

Every tool call keeps the id that ties it to its result (``tool_use_id``) and every tool result
the same id and a hash of what the tool returned (``tool_result_hash``: text as it is, anything
else as sorted-key JSON, with whether it was an error), so a detector can tell a poll (the same
call, a new result) from a loop (the same call, the same result).

**Identity.** A session is the id the document names (Penguin's ``id``, a ``session_id``);
a document without one (an OpenAI or Anthropic message list, a mini-swe-agent trajectory) is
``<instance_id, else the file's name>@<digest of its start>``, the start being its messages
up to and including the first model reply (``_session``), never the folder it sits in: two
``conversation.json`` in two folders, or two runs of one SWE-bench instance each in its own
output folder, are two sessions, and a trajectory rewritten whole after every step keeps its
session as it grows. A call is ``<session>:<its request id, else its message id, else its
place among the replies>`` (the replies of a conversation only grow). Two conversations
identical through their first reply, with no id or time in it, cannot be told from one
conversation read twice: the calls of the second at places the first has are counted as
duplicates. (A mini-swe-agent 2.x reply keeps the provider's response id and time, so two
runs of one task are always told apart.)

A JSON document cannot be read a line at a time; files over 512 MB are refused with a message.
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from analyzer.errors import InputError
from analyzer.formats.mini_swe_agent import run_of_info
from analyzer.ingest.base import Head, LoadContext, LoadResult
from analyzer.ingest.content import digest, run_start
from analyzer.ingest.conversation import Conversation
from analyzer.ingest.lowering import Lowering, brief, text_measure
from analyzer.ingest.reading import read_json_document
from analyzer.ingest.rows import CallRow
from analyzer.ingest.spec import FormatSpec
from analyzer.ingest.usage import token_counts
from analyzer.ingest.values import as_dict, as_list, as_str, as_text, parse_time, stated_cost

PLACEHOLDERS = ("[Empty response from model]", "[No response from model]")
_ACTION = re.compile(r"<(\w+)>(.*?)</\1>", re.DOTALL)  # a CodeAct action tag with its body
_START = re.compile(rb'^\s*(\[\s*\{\s*"(role|content|id)"|\{)')
_KEYS = re.compile(rb'"(messages|role|llm_request_lifecycles)"\s*:')


def sniff(head: Head) -> bool:
    data = head.utf8
    if not _START.match(data):
        return False
    first_line = data.split(b"\n", 1)[0]
    try:  # a whole object on the first line followed by more lines is JSON Lines, not ours
        orjson.loads(first_line)
        if len(data) > len(first_line) + 1 and data[len(first_line) + 1 :].strip():
            return False
    except orjson.JSONDecodeError:
        pass
    return bool(_KEYS.search(data))


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for p in content:
            if isinstance(p, str):
                parts.append(p)
            elif isinstance(p, dict) and p.get("type") in (
                None,
                "text",
                "output_text",
                "input_text",
            ):
                parts.append(as_text(p.get("text")))
        return "".join(parts)
    return ""


def _flag(value: object) -> bool | None:
    return value if isinstance(value, bool) else None


def _blocks(content: object, kind: str) -> list[dict[str, Any]]:
    if isinstance(content, list):
        return [b for b in content if isinstance(b, dict) and b.get("type") == kind]
    return []


def _exit_error(extra: dict[str, Any]) -> bool | None:
    """Whether a command failed, from its exit status (``extra.returncode``): None if unknown."""
    code = extra.get("returncode")
    if isinstance(code, float) and code.is_integer():
        code = int(code)
    if isinstance(code, bool) or not isinstance(code, int):
        return None
    return code != 0


def _first_choice(response: dict[str, Any]) -> dict[str, Any]:
    choices = as_list(response.get("choices"))
    return as_dict(choices[0]) if choices else {}


def _kind_of(
    m: dict[str, Any],
    role: str,
    results: bool,
    visible: bool,
    observation: bool,
    injected: bool,
) -> str:
    """The kind of a message that is not the assistant's (``results``: it holds tool result
    blocks; ``injected``: the agent's own output or complaint sent as a user message)."""
    dialog = m.get("category") in (None, "DIALOG")
    if role == "user" and not results and visible and dialog and not injected:
        return "prompt"
    if role in ("tool", "function") or m.get("category") == "SYSTEM_OUTPUT" or observation:
        return "tool_result"
    if role == "user" and not results:
        return "system"  # agent-injected user text (Penguin categories other than DIALOG)
    return "system" if role in ("system", "developer") else role


def _result_error(m: dict[str, Any], meta: dict[str, Any], extra: dict[str, Any]) -> bool | None:
    """Whether a tool result message is an error: a flag the message carries wins; else a
    command's exit status."""
    is_error = _flag(m.get("is_error"))
    if is_error is None:
        is_error = _flag(meta.get("is_error"))
    if is_error is None:
        is_error = _exit_error(extra)
    return is_error


def _account(
    call: CallRow, m: dict[str, Any], response: dict[str, Any], extra: dict[str, Any]
) -> None:
    """A call's tokens (the message's own usage, count by count, else the saved response's),
    finish reason and stated cost."""
    own, saved = m.get("usage"), response.get("usage")
    if isinstance(own, dict) or isinstance(saved, dict):
        call.update({**token_counts(saved), **token_counts(own)})
        call.output_final = call.output_tokens is not None
    finish = (
        as_str(m.get("finish_reason"))
        or as_str(m.get("stop_reason"))
        or as_str(_first_choice(response).get("finish_reason"))
    )
    if finish:
        call.finish_reason_raw = finish
    cost = stated_cost(extra.get("cost"))
    if cost is not None:
        call.cost_usd, call.cost_basis = cost, "reported"


def _session(doc: dict[str, Any], messages: list[object], path: Path) -> str:
    """The conversation's session: the id it names (a Penguin session's ``id``, a
    ``session_id``), else its task (a mini-swe-agent ``instance_id``) or the file's name with
    a digest of its start: its messages up to and including the first model reply
    (``content.run_start``). Saved conversations of one name sit in many folders
    (``a/conversation.json``, ``b/conversation.json``; a benchmark's
    ``<output>/<instance>/<instance>.traj.json`` in each output folder): the name alone would
    merge them. The start is what later steps never change: a trajectory rewritten whole after
    every step keeps its session, and its calls their ids, as it grows."""
    own = as_str(doc.get("id")) or as_str(doc.get("session_id"))
    if own:
        return own
    name = as_str(doc.get("instance_id")) or path.stem.removesuffix(".traj")
    return f"{name}@{digest(run_start(messages, _is_reply))}"


def _is_reply(m: object) -> bool:
    return isinstance(m, dict) and m.get("role") == "assistant"


class _Reader:
    def __init__(self, ctx: LoadContext, doc: object) -> None:
        self.ctx = ctx
        self.low = Lowering(ctx, SPEC.name, SPEC.call_prefix)
        self.doc = doc if isinstance(doc, dict) else {}
        self.messages: list[object] = doc if isinstance(doc, list) else []
        if isinstance(doc, dict):
            msgs = doc.get("messages")
            self.messages = msgs if isinstance(msgs, list) else []
        # the conversation's messages
        self.talk = Conversation(_session(self.doc, self.messages, Path(ctx.source.path)))
        self.model = as_str(self.doc.get("model"))
        self.penguin = "llm_request_lifecycles" in self.doc or any(
            isinstance(m, dict) and "category" in m for m in self.messages[:20]
        )
        self.app = "penguin" if self.penguin else as_str(self.doc.get("app"))
        self.seq = 0
        self.last_call_id: str | None = None  # the latest assistant message's call

    def time(self, obj: dict[str, Any]) -> datetime | None:
        """A message's own time, else the agent's ``extra.timestamp`` (mini-swe-agent's)."""
        tz = self.ctx.options.tz
        for key in ("timestamp", "created_at", "created", "ts"):
            ts = parse_time(obj.get(key), tz)
            if ts is not None:
                return ts
        return parse_time(as_dict(obj.get("extra")).get("timestamp"), tz)

    def run(self) -> LoadResult:
        lifecycles = self.doc.get("llm_request_lifecycles")
        lifecycles = lifecycles if isinstance(lifecycles, list) else []
        calls: list[tuple[CallRow, dict[str, Any]]] = []  # (call, message)
        for i, m in enumerate(self.messages):
            self.low.read()
            if not isinstance(m, dict) or not isinstance(m.get("role"), str):
                self.low.reject(i + 1, "message without a role", brief(m))
                continue
            if m["role"] == "assistant":
                calls.append((self.assistant(m), m))
            else:
                self.other(m)
        for key in ("tool_call_records", "tool_result_records"):
            if isinstance(self.doc.get(key), list):
                self.low.read(len(self.doc[key]))
                self.low.skip(key, len(self.doc[key]))
        if lifecycles:
            self.match_lifecycles(calls, lifecycles)
        for call, _m in calls:
            self.low.add_call(call)
        info = self.doc.get("info")
        if isinstance(info, dict) and str(self.doc.get("trajectory_format", "")).startswith(
            "mini-swe-agent"
        ):
            # The run's own verdict and stated cost (``info``: one more record).
            self.low.read()
            model = as_str(as_dict(as_dict(info.get("config")).get("model")).get("model_name"))
            stated = any(c.cost_basis for c, _m in calls)
            self.low.add_run(run_of_info(info, self.talk.session, model, stated))
        return self.low.finish()

    def other(self, m: dict[str, Any]) -> None:
        role = m["role"]
        ts = self.time(m)
        content = m.get("content")
        results = _blocks(content, "tool_result")
        text = _text(content)
        visible = text_measure(text)[1]
        meta = as_dict(m.get("metadata"))
        extra = as_dict(m.get("extra"))
        # mini-swe-agent's text-based mode: a command's output, and the agent's own complaint
        # about a reply it could not parse, are sent as user messages.
        observation = role == "user" and "returncode" in extra
        agent_text = role == "user" and extra.get("interrupt_type") is not None
        refusal = agent_text and "format" in str(extra.get("interrupt_type")).lower()
        if refusal:
            # mini-swe-agent 2.x refusing the reply before it (no tool call, a malformed one):
            # its FormatError message, tied to the refused call.
            self.low.add_message(
                self.talk.refusal(content, ts=ts, role=role, call_id=self.last_call_id, text=text)
            )
            return
        injected = observation or agent_text
        kind = _kind_of(m, role, bool(results), bool(visible), observation, injected)
        if kind == "prompt":
            self.talk.turn = f"{self.talk.session}:{self.talk.idx + 1}"
        first = True
        if not results or text:
            if kind == "tool_result":
                row = self.talk.tool_result(
                    content,
                    _result_error(m, meta, extra),
                    ts=ts,
                    text=text,
                    use_id=as_str(m.get("tool_call_id")),  # none in Penguin's
                    role=role,
                    records=1,
                )
            else:
                row = self.talk.text(role, kind, text, ts=ts, records=1)
            self.low.add_message(row)
            first = False
        for b in results:
            self.low.add_message(
                self.talk.tool_result(
                    b.get("content"),
                    bool(b.get("is_error")),
                    ts=ts,
                    text=_text(b.get("content")),
                    use_id=as_str(b.get("tool_use_id")),
                    role=role,
                    records=int(first),
                )
            )
            first = False

    def assistant(self, m: dict[str, Any]) -> CallRow:
        """The call an assistant message is, and its messages (its reply, its tool calls)."""
        self.seq += 1
        # What the agent kept beside the message (mini-swe-agent): the provider's response.
        extra = as_dict(m.get("extra"))
        response = as_dict(extra.get("response"))
        ts = self.time(m) or parse_time(response.get("created"))
        content = m.get("content")
        meta = as_dict(m.get("metadata"))
        text = _text(content)
        placeholder = bool(meta.get("was_empty")) or text.strip() in PLACEHOLDERS
        native = (
            f"{self.talk.session}:"
            f"{as_str(meta.get('request_id')) or as_str(m.get('id')) or self.seq}"
        )
        own_id = m.get("id")
        call = self.talk.call(
            native,
            response_id=own_id if isinstance(own_id, str) else as_str(response.get("id")),
            line=self.seq,
            ts=ts,
            seq=self.seq,
            model=as_str(m.get("model")) or as_str(response.get("model")) or self.model,
            provider=as_str(m.get("provider")),
            app=self.app,
            n_records=1,
            reply_saved=True,
            agent_id=as_str(m.get("agent_id")),
        )
        call_id = self.last_call_id = self.low.call_id(native)
        self.reply(m, call, text, placeholder, ts, call_id)
        reasoning = m.get("reasoning_content") or m.get("reasoning") or meta.get("reasoning")
        thinking = "".join(as_text(b.get("thinking")) for b in _blocks(content, "thinking"))
        r_chars = len(reasoning) if isinstance(reasoning, str) else 0
        call.reasoning_chars = r_chars + len(thinking)
        tools = self.tools(m, text, placeholder)
        call.tool_call_count = len(tools)
        for name, args, use_id in tools:
            self.low.add_message(self.talk.tool_call(name, args, use_id, ts=ts, call_id=call_id))
        _account(call, m, response, extra)
        return call

    def reply(
        self,
        m: dict[str, Any],
        call: CallRow,
        text: str,
        placeholder: bool,
        ts: datetime | None,
        call_id: str,
    ) -> None:
        """The reply's text: measured on the call, and a message (a placeholder's too)."""
        if placeholder:
            # The model's reply was empty; the text is the agent's stand-in for it.
            call.content_chars, call.visible_chars = 0, 0
            self.low.add_message(self.talk.placeholder(text, ts=ts, call_id=call_id))
            return
        chars, visible = text_measure(text)
        call.content_chars, call.visible_chars = chars, visible
        if chars or not (m.get("tool_calls") or _blocks(m.get("content"), "tool_use")):
            self.low.add_message(self.talk.said(text, ts=ts, call_id=call_id))

    def tools(
        self, m: dict[str, Any], text: str, placeholder: bool
    ) -> list[tuple[str | None, object, str | None]]:
        """The tool calls of an assistant message: (name, arguments, id)."""
        tools: list[tuple[str | None, object, str | None]] = []
        for tc in as_list(m.get("tool_calls")):
            fn = tc.get("function") if isinstance(tc, dict) else None
            if isinstance(fn, dict):
                tools.append((as_str(fn.get("name")), fn.get("arguments"), as_str(tc.get("id"))))
        for b in _blocks(m.get("content"), "tool_use"):
            tools.append((as_str(b.get("name")), b.get("input"), as_str(b.get("id"))))
        if self.penguin and not placeholder:
            # Penguin acts through CodeAct tags in its text (``<execute>...</execute>``): each is
            # a tool call, found as Penguin's own engine finds them (seed 000, fix #6).
            tools += [(tag, body.strip(), None) for tag, body in _ACTION.findall(text)]
        return tools

    def match_lifecycles(
        self, calls: list[tuple[CallRow, dict[str, Any]]], lifecycles: list[object]
    ) -> None:
        """Give each saved reply its request's lifecycle (by request id, else in time order);
        a lifecycle left over is a call whose reply was never saved."""
        by_id: dict[str, dict[str, Any]] = {}
        ordered: list[tuple[int, dict[str, Any]]] = []
        for i, lc in enumerate(lifecycles):
            self.low.read()
            if not isinstance(lc, dict):
                self.low.reject(None, f"llm_request_lifecycles[{i}] is not an object", brief(lc))
                continue
            ordered.append((i, lc))
            request = as_str(lc.get("request_id"))
            if request and request not in by_id:  # the first lifecycle of a request id
                by_id[request] = lc
        index = {id(lc): i for i, lc in ordered}
        used: set[int] = set()
        # First every reply that names its request, then the others by time, so a lifecycle
        # is never given to two replies.
        by_request: dict[int, dict[str, Any]] = {}
        for n, (_call, m) in enumerate(calls):
            meta = as_dict(m.get("metadata"))
            request = as_str(meta.get("request_id"))
            lc = by_id.get(request) if request else None
            if lc is not None and index[id(lc)] not in used:
                used.add(index[id(lc)])
                by_request[n] = lc
        for n, (call, _m) in enumerate(calls):
            lc = by_request.get(n)
            if lc is None:  # the unused lifecycle that ended last before the reply was saved
                saved = call.ts
                best = None
                for i, cand in ordered:
                    ended = parse_time(cand.get("ended_at"))
                    if i in used or (saved is not None and ended is not None and ended > saved):
                        continue
                    if saved is None or ended is None:
                        lc = cand
                        break
                    if best is None or ended >= best[0]:
                        best = (ended, cand)
                if lc is None and best is not None:
                    lc = best[1]
            if lc is None:
                continue
            used.add(index[id(lc)])
            self.apply_lifecycle(call, lc)
            call.add(n_records=1)
        for i, lc in ordered:
            if i in used:
                continue
            self.seq += 1
            native = f"{self.talk.session}:{as_str(lc.get('request_id')) or f'request-{i}'}"
            call = CallRow(
                native_id=native,
                line=None,
                ts=parse_time(lc.get("started_at")),
                session_id=self.talk.session,
                stream_key=self.talk.session,
                turn_id=None,
                seq=None,
                model=as_str(lc.get("model")) or self.model,
                app=self.app,
                reply_saved=False,
                n_records=1,
            )
            self.apply_lifecycle(call, lc)
            calls.append((call, {}))
        # Unsaved replies interleave with saved ones: number each call by its start time.
        calls.sort(key=lambda cm: (cm[0].ts is None, cm[0].ts or 0))
        turn = None
        for seq, (call, _m) in enumerate(calls, 1):
            call.seq = seq
            turn = call.turn_id or turn
            call.turn_id = turn

    def apply_lifecycle(self, call: CallRow, lc: dict[str, Any]) -> None:
        if lc.get("finish_reason"):
            call.finish_reason_raw = as_str(lc["finish_reason"])
        if lc.get("error") and not lc.get("finish_reason"):
            call.finish_reason_raw = "error"
        call.provider = call.provider or as_str(lc.get("provider"))
        call.model = call.model or as_str(lc.get("model"))
        started, ended = parse_time(lc.get("started_at")), parse_time(lc.get("ended_at"))
        if started is not None:
            call.ts = started
        if started is not None and ended is not None:
            call.duration_ms = (ended - started).total_seconds() * 1000
        call.streamed = _flag(lc.get("stream"))
        if lc.get("provider_response_id"):
            call.response_id = as_str(lc["provider_response_id"])


def load(ctx: LoadContext) -> LoadResult:
    doc = read_json_document(ctx.source)
    if not isinstance(doc, list | dict):
        raise InputError("a JSON document that is neither a list nor an object", ctx.source.display)
    return _Reader(ctx, doc).run()


# What this module is to the registry (analyzer.formats).
SPEC = FormatSpec(
    name="conversation_json",
    title="saved conversation (JSON: OpenAI or Anthropic messages, Penguin session)",
    kind="log",
    sniff_order=90,
    call_prefix="conv",
    sniff=sniff,
    load=load,
)
