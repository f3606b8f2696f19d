"""mini-swe-agent 1.x trajectories (``trajectory_format: mini-swe-agent-1``, ``*.traj.json``).

The format of every SWE-bench bash-only run and of many agents built on mini-swe-agent 1.x: one
JSON document ``{info, messages, trajectory_format[, instance_id]}``. (mini-swe-agent 2.x writes
``mini-swe-agent-1.1``, with tool calls and ``tool`` messages: ``conversation_json`` reads it.)
Facts from mini-swe-agent 1.x's ``DefaultAgent`` (``agents/default.py``) and the real runs the
tests read (``../shared/samples/real-loops/conversation_json``: versions 1.9.1, 1.15.0, 1.17.3):

* ``messages``: the system prompt, the task (the one user prompt: it starts the run's one turn),
  then for each step the model's reply (``assistant``) and what the agent answered (``user``):
  the **observation** of the command the reply asked for (``action_observation_template``:
  ``<returncode>N</returncode><output>...``, or another wording a configuration chose), or,
  when the reply could not be parsed, the agent's **format error** (``format_error_template``:
  "Please always provide EXACTLY ONE action in triple backticks, found N actions..."), or a
  timeout (``timeout_template``). A run ends with one more ``user`` message: the exception that
  ended it (``Submitted``: the submission; ``LimitsExceeded``: empty).
* **The action** of a reply is its one match of ``info.config.agent.action_regex`` (default:
  a ```` ```bash ```` block; later versions ```` ```mswea_bash_command ````): a ``tool_call``
  named ``bash`` with the command as its arguments, and the observation after it is its
  ``tool_result`` (an error when its return code is not 0, or it timed out). Some forks have
  the model answer with a Python-style call instead (``exec_bash_cmd(cmd)`` in a function
  body): a reply the agent did not refuse but that holds no single block is taken whole as the
  action, named by the call it makes. A reply the agent refused has no action: its format error
  is a ``format_error`` message tied to the refused call, hashed so that the same refusal
  repeated is seen as the same.
* **Model**: ``info.config.model.model_name`` (the run's), else each reply's
  ``extra.response.model``. **Tokens** per call where the reply kept litellm's response
  (``extra.response.usage``: OpenAI's usage, reasoning tokens included); 1.9.1 kept none.
  **Dollars**: OpenRouter's ``usage.cost`` in that response is what OpenRouter billed
  (``billed``); ``extra.cost`` the agent's own figure (``reported``); a stated 0 is no figure.
  Where no call states its cost, the run's ``info.model_stats.instance_cost`` (litellm's price
  of the run) is divided over its calls (``apportioned``): never a silent $0. **Times**: a
  message's ``timestamp`` (1.17 forks), else the response's ``created``; 1.9.1 kept none.
* **The run's own verdict** (a ``runs`` row): ``info.exit_status`` (the exception's name),
  ``info.submission``, ``model_stats.api_calls`` and ``instance_cost``, and the configured
  ``step_limit`` and ``cost_limit``.

Records: each message, and ``info`` (the run).

**Identity.** A session is ``<instance_id, else the file's name>@<digest of the run's start>``:
the messages up to and including the first model reply (``_session``), never the folder the
file sits in, nor the whole document. A benchmark runs one task many times, a file each, under
the same name in its own output folder: the start (from 1.15 the first reply's response id and
time) tells them apart; and it is what the run's later steps never change, so a trajectory
read while the agent runs (rewritten whole after each step) and again at its end is one
session. A call is ``<session>:<its place among the replies>``: the replies of a run only grow.
Two runs identical through their first reply, with no ids or times in it (1.9.1 keeps none),
cannot be told from one run read twice: the calls of the second at places the first has are
counted as duplicates.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from analyzer.errors import InputError
from analyzer.ingest.base import Head, LoadContext, LoadResult
from analyzer.ingest.content import digest, run_start
from analyzer.ingest.conversation import Conversation
from analyzer.ingest.lowering import Lowering, brief, excerpt, text_measure
from analyzer.ingest.reading import read_json_document
from analyzer.ingest.rows import CallRow
from analyzer.ingest.runs import outcome
from analyzer.ingest.spec import FormatSpec
from analyzer.ingest.usage import token_counts
from analyzer.ingest.values import (
    as_dict,
    as_int,
    as_list,
    as_str,
    as_text,
    parse_time,
    stated_cost,
)

APP = "mini-swe-agent"
DEFAULT_ACTION = re.compile(r"```(?:bash|mswea_bash_command)\s*\n(.*?)\n```", re.DOTALL)
DEFAULT_FORMAT_ERROR = "Please always provide EXACTLY ONE action in triple backticks"
# A Python-style action: the tool a reply's code calls for its result (``res = tool(...)``), the
# last such line of the reply; else the first call that is not the reply's own ``def``.
_ASSIGNED_CALL = re.compile(r"^\s*\w+\s*=\s*([A-Za-z_]\w*)\s*\(", re.MULTILINE)
_ANY_CALL = re.compile(r"(?<![\w.])([A-Za-z_]\w*)\s*\(")
_DEF = re.compile(r"\bdef\s+([A-Za-z_]\w*)")
_RETURNCODE = re.compile(r"returncode\W{0,4}(-?\d+)")
_V1 = re.compile(rb'"trajectory_format"\s*:\s*"mini-swe-agent-1"')
_V1_VERSION = re.compile(rb'"mini_version"\s*:\s*"1\.')
_INFO_FIRST = re.compile(rb'\{\s*"info"\s*:\s*\{')
_TEMPLATE_START = re.compile(r"\{\{|\{%")


def sniff(head: Head) -> bool:
    data = head.utf8.lstrip()
    if not data.startswith(b"{") or b'"mini-swe-agent-1.1"' in data:
        return False
    # ``trajectory_format`` is written last, after the messages; the head shows ``info``, with
    # the version that wrote it (1.x writes format 1, 2.x format 1.1).
    return bool(_V1.search(data)) or (
        bool(_INFO_FIRST.match(data)) and bool(_V1_VERSION.search(data))
    )


def text_of(content: object) -> str:
    """A message's text: a string, or the text of its parts."""
    if isinstance(content, str):
        return content
    return "".join(as_text(as_dict(p).get("text")) for p in as_list(content))


def template_prefix(template: object, default: str) -> str:
    """The fixed start of an agent's Jinja template (up to its first placeholder)."""
    text = as_text(template)
    start = _TEMPLATE_START.split(text, 1)[0].strip() if text else ""
    return start or default


def run_of_info(
    info: dict[str, Any], session: str | None, model: str | None, calls_state_cost: bool
) -> dict[str, Any]:
    """The run row of a mini-swe-agent trajectory's ``info`` (either trajectory format)."""
    stats = as_dict(info.get("model_stats"))
    agent = as_dict(as_dict(info.get("config")).get("agent"))
    status = as_str(info.get("exit_status"))
    cost = stated_cost(stats.get("instance_cost"))
    submission = as_text(info.get("submission")).strip()
    return {
        "session_id": session,
        "stream_key": session,
        "seq": 1,
        "agent": APP,
        "model": model,
        "exit_status": status,
        "outcome": outcome(status),
        "is_error": None,  # the trajectory has no error flag: its verdict is exit_status
        "result_excerpt": excerpt(submission) or None,
        "reported_calls": as_int(stats.get("api_calls")),
        "reported_cost_usd": cost,
        "cost_apportioned": cost is not None and not calls_state_cost,
        "step_limit": as_int(agent.get("step_limit")) or None,
        "cost_limit_usd": stated_cost(agent.get("cost_limit")),
        "n_records": 1,
    }


class _Reader:
    def __init__(self, ctx: LoadContext, doc: dict[str, Any]) -> None:
        self.low = Lowering(ctx, SPEC.name, SPEC.call_prefix)
        self.tz = ctx.options.tz
        self.doc = doc
        self.info = as_dict(doc.get("info"))
        config = as_dict(self.info.get("config"))
        agent = as_dict(config.get("agent"))
        self.model = as_str(as_dict(config.get("model")).get("model_name")) or as_str(
            self.info.get("model_name")
        )
        self.action = _compiled(agent.get("action_regex"))
        self.format_error = template_prefix(
            agent.get("format_error_template"), DEFAULT_FORMAT_ERROR
        )
        self.timeout = template_prefix(agent.get("timeout_template"), "The last command")
        # the run's messages
        self.talk = Conversation(_session(doc, Path(ctx.source.path).stem.removesuffix(".traj")))
        self.seq = 0
        self.pending: _Pending | None = None  # the last reply, until the agent answers it
        self.stated = False  # a call states its own cost
        self.tools: frozenset[str] = frozenset()

    def run(self) -> LoadResult:
        messages = self.doc.get("messages")
        if not isinstance(messages, list):
            raise InputError(
                "a mini-swe-agent trajectory without a messages list", self.low.ctx.source.display
            )
        for i, m in enumerate(messages, 1):
            self.low.read()
            if not isinstance(m, dict) or not isinstance(m.get("role"), str):
                self.low.reject(i, "message without a role", brief(m))
                continue
            if m["role"] == "assistant":
                self.reply(m, i)
            elif m["role"] == "system":
                text = text_of(m.get("content"))
                self.low.add_message(
                    self.talk.text("system", "system", text, ts=self.time(m), records=1)
                )
                # The functions its prompt shows the model (a fork's Python-style tools).
                self.tools |= frozenset(_ANY_CALL.findall(text))
            elif m["role"] == "user" and self.talk.turn is None:
                self.talk.turn = f"{self.talk.session}:{i}"
                self.low.add_message(self.talk.prompt(text_of(m.get("content")), ts=self.time(m)))
            elif m["role"] == "user":
                self.answer(m)
            else:
                self.low.skip(f"role {m['role']}")
        if self.pending is not None:  # the last reply, never answered: its action stands
            self.act(self.pending)
        self.low.read()  # ``info``: the run
        self.low.add_run(run_of_info(self.info, self.talk.session, self.model, self.stated))
        return self.low.finish()

    def time(self, m: dict[str, Any]) -> datetime | None:
        response = as_dict(as_dict(m.get("extra")).get("response"))
        return (
            parse_time(m.get("timestamp"), self.tz)
            or parse_time(as_dict(m.get("extra")).get("timestamp"), self.tz)
            or parse_time(response.get("created"))
        )

    def reply(self, m: dict[str, Any], number: int) -> None:
        """A model reply: one call, its text, and the action it asked for (if it holds one)."""
        self.seq += 1
        response = as_dict(as_dict(m.get("extra")).get("response"))
        usage = response.get("usage")
        text = text_of(m.get("content"))
        chars, visible = text_measure(text)
        native = f"{self.talk.session}:{self.seq}"
        choice = (
            as_dict(as_list(response.get("choices"))[0]) if as_list(response.get("choices")) else {}
        )
        reasoning = as_text(as_dict(choice.get("message")).get("reasoning"))
        call = self.talk.call(
            native,
            response_id=as_str(response.get("id")),
            line=number,
            ts=self.time(m),
            seq=self.seq,
            model=as_str(response.get("model")) or self.model,
            provider=as_str(response.get("provider")),
            app=APP,
            n_records=1,
            content_chars=chars,
            visible_chars=visible,
            reasoning_chars=len(reasoning),
            finish_reason_raw=as_str(choice.get("finish_reason")),
            reply_saved=True,
            **token_counts(usage),
        )
        if isinstance(usage, dict) and call.output_tokens is not None:
            call.output_final = True
        billed = stated_cost(as_dict(usage).get("cost"))
        reported = stated_cost(as_dict(m.get("extra")).get("cost"))
        if billed is not None or reported is not None:
            call.cost_usd = billed if billed is not None else reported
            call.cost_basis = "billed" if billed is not None else "reported"
            self.stated = True
        call_id = self.low.call_id(native)
        self.low.add_message(self.talk.said(text, ts=call.ts, call_id=call_id))
        found = self.action.findall(text)
        action: tuple[str, str] | None = None
        if len(found) == 1:
            action = ("bash", as_text(found[0]).strip())
        elif not found and (named := _called(text, self.tools)) is not None:
            action = (named, text.strip())  # a Python-style reply: the whole reply is the action
        call.tool_call_count = 0
        # The action is known for sure once the agent answers: a refused reply has none.
        self.pending = _Pending(call, call_id, action, call.ts)
        self.low.add_call(call)

    def act(self, pending: _Pending) -> str | None:
        """The pending reply's action as a tool call; its id (None: it had none)."""
        if pending.action is None:
            return None
        name, args = pending.action
        tool_id = f"{pending.call.native_id}:action"
        pending.call.tool_call_count = 1
        self.low.add_message(
            self.talk.tool_call(name, args, tool_id, ts=pending.ts, call_id=pending.call_id)
        )
        return tool_id

    def answer(self, m: dict[str, Any]) -> None:
        """What the agent said after a reply: its observation, its refusal, or (after that)
        the message of the exception that ended the run."""
        text = text_of(m.get("content"))
        ts = self.time(m)
        pending, self.pending = self.pending, None
        if pending is None:  # a second message after one reply: the run's ending
            self.low.add_message(self.talk.prompt(text, ts=ts, agent=True))
            return
        if text.lstrip().startswith(self.format_error):
            self.low.add_message(self.talk.refusal(text, ts=ts, call_id=pending.call_id))
            return
        tool_id = self.act(pending)
        code = _RETURNCODE.search(text[:200])
        timed_out = text.lstrip().startswith(self.timeout)
        is_error = timed_out or (code is not None and int(code.group(1)) != 0)
        self.low.add_message(
            self.talk.tool_result(text, is_error, ts=ts, use_id=tool_id, role="user", records=1)
        )


@dataclass
class _Pending:
    """A reply waiting for the agent's answer, which says whether it had an action."""

    call: CallRow
    call_id: str
    action: tuple[str, str] | None  # (tool, arguments) as parsed
    ts: datetime | None


def _called(text: str, tools: frozenset[str] = frozenset()) -> str | None:
    """The tool a Python-style reply calls (``exec_bash_cmd``, ``print_code_context``), or None
    when the reply calls nothing: the last call of a function the system prompt shows
    (``tools``), else the last call assigned to a name, else the first call that is not the
    reply's own ``def``.

    >>> _called("def look():\\n    res = print_code_context('a.py', (1, 9))\\n    return res")
    'print_code_context'
    >>> _called("x = 1"), _called("run exec_bash_cmd('ls') now")
    (None, 'exec_bash_cmd')
    >>> code = "cmd = 'x = Item(1)'\\nres = exec_bash_cmd(cmd)\\ny = Item(2)"
    >>> _called(code, frozenset({"exec_bash_cmd"}))
    'exec_bash_cmd'
    """
    own = set(_DEF.findall(text))
    calls = [n for n in _ANY_CALL.findall(text) if n not in own and n != "def"]
    known = [n for n in calls if n in tools]
    if known:
        return str(known[-1])
    assigned = _ASSIGNED_CALL.findall(text)
    if assigned:
        return str(assigned[-1])
    return str(calls[0]) if calls else None


def _session(doc: dict[str, Any], stem: str) -> str:
    """The run's session: its task (``instance_id``, else the file's name) and a digest of the
    run's start, its messages up to and including the first model reply (``run_start``).
    Benchmarks run one task many times (models, configurations, attempts), each run in a file
    of its own, often of the same name in another folder: the task alone would merge them.
    The start is what the run's later steps never change, so a trajectory read while the
    agent runs (rewritten whole after every step) and again when it ended is one session,
    its calls the same calls. From 1.15 the first reply carries the provider's response id
    and time; a 1.9.1 reply carries neither, so two runs of one task whose prompts and first
    replies are the same word for word are taken for one run read twice."""
    start = run_start(as_list(doc.get("messages")), _is_reply)
    return f"{as_str(doc.get('instance_id')) or stem}@{digest(start)}"


def _is_reply(m: object) -> bool:
    return isinstance(m, dict) and m.get("role") == "assistant"


def _compiled(pattern: object) -> re.Pattern[str]:
    """The agent's own action pattern, else the default; one that does not compile (or has
    no group) is not used."""
    if isinstance(pattern, str):
        try:
            compiled = re.compile(pattern, re.DOTALL)
        except re.error:
            return DEFAULT_ACTION
        if compiled.groups == 1:
            return compiled
    return DEFAULT_ACTION


def load(ctx: LoadContext) -> LoadResult:
    doc = read_json_document(ctx.source)
    if not isinstance(doc, dict):
        raise InputError(
            "a mini-swe-agent trajectory that is not a JSON object", ctx.source.display
        )
    return _Reader(ctx, doc).run()


# What this module is to the registry (analyzer.formats).
SPEC = FormatSpec(
    name="mini_swe_agent",
    title="mini-swe-agent 1.x trajectory (JSON, trajectory_format mini-swe-agent-1)",
    kind="log",
    sniff_order=85,  # before conversation_json, which would take it for a saved conversation
    call_prefix="mswea",
    sniff=sniff,
    load=load,
)
