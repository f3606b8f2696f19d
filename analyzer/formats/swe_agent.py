"""SWE-agent trajectories (``<instance>.traj``): one JSON document per run.

Facts from the real 0.x run the tests read (``../shared/samples/real-loops/swe_agent_traj``,
from SWE-agent's own test data, gpt-4) and from SWE-agent's source (``sweagent/agent/
agents.py``, ``models.py``, ``types.py``; 0.x and 1.x):

* **Shape**: ``{trajectory, history, info}`` with ``environment`` (0.x: ``"swe_main"``, first;
  1.x: the environment's name, last) and, in 1.x, ``replay_config`` (the run's configuration as
  a JSON string). 1.x's retry agent writes ``attempts`` (one such document per attempt) first,
  and the chosen attempt again at the top level: the attempts are read, the copy is skipped.
* ``history`` - what the model was sent and answered: the system prompt (``system``), the
  demonstrations (``is_demo`` true; 1.x ``message_type: demonstration``: skipped by kind), the
  instance prompt (the issue: the ``prompt`` that starts the turn; 1.x marks it ``message_type:
  observation`` too, so it is told by its place, the first user message after the system
  prompt), then per step the model's reply (``assistant``: ``content``, ``thought``,
  ``action``; 1.x ``tool_calls`` and ``thinking_blocks``) and the observation sent back
  (``user``; 1.x ``tool`` with ``tool_call_ids`` under function calling).
* ``trajectory`` - one step per reply: ``response`` (= the reply's ``content``), ``thought``,
  ``action``, ``observation`` (the command's raw output; the history's observation is it put
  in a template with the shell's state), ``state``; 1.x adds ``execution_time`` (seconds the
  command ran, not the model call), ``query`` (the messages sent) and ``extra_info``.
* ``info`` - ``exit_status`` (``submitted``, ``exit_cost``, ``exit_context``, ``exit_format``,
  ``submitted (exit_cost)``...), ``submission`` (the patch), ``model_stats``: ``instance_cost``
  (litellm's price of this run), ``tokens_sent`` / ``tokens_received`` (counted by SWE-agent
  with litellm's tokenizer: estimates, and the reply's text only, not its tool-call
  arguments), ``api_calls``; ``total_cost`` is the whole batch's running total (not read).
  1.x adds ``swe_agent_version``.

**Calls**: one per model reply the file shows: each assistant message of ``history`` that is
not a demonstration, with the trajectory step that holds the same reply (``response`` =
``content``). 1.x also keeps in ``trajectory`` (not in ``history``) the replies it refused and
asked again for (a format error, a blocked command, a bash syntax error): each is a call with a
``format_error`` message. When SWE-agent stops on an error it writes its own stand-in for a
reply (``Exit due to cost limit`` with action ``exit_cost`` or empty; 1.x also an empty
``query``): a ``synthetic`` message, not a call. So the calls may be fewer than
``api_calls``: 0.x never saved its refused replies, and the call that crossed the cost limit
was counted and paid for but its reply was dropped. The file's per-call record is trusted; the
run's stated totals are kept on its run row. In the real file the 12 replies are its 12
``api_calls``.

**Actions**: a reply's ``action`` is a ``tool_call`` named by its first word (``edit``,
``create``, ``submit``...), its text the arguments; under 1.x function calling each of
``tool_calls`` (named by the function, its ``arguments``, its ``id``). What came back is its
``tool_result`` (the same ``tool_use_id``): the step's raw ``observation``, else the history's
next observation message. Observations never start a turn.

**Tokens, model, times, dollars**: no call carries usage, cost or time in either version (the
model's usage is only summed in ``model_stats``). The run row keeps ``tokens_sent``,
``tokens_received``, ``api_calls`` and ``instance_cost``; the store divides the cost over the
run's calls (``apportioned``), and the reader divides the two token totals over them the same
way (``runs.divide``: shares that add up to the totals exactly), by what the file shows of
each call: ``tokens_sent`` in proportion to the characters the call was sent (the history
before its reply, system prompt and demonstrations included, or 1.x's ``query`` where the step
keeps it; the real 0.x run sent 497,765 characters in all, 4.06 a token of its
``tokens_sent``), ``tokens_received`` to its reply's text. They are the run's totals divided,
not counts of the call's own, so they are divided only where the cost is too, and the calls'
``cost_basis`` 'apportioned' says so (an ``instance_cost`` of 0, a model litellm could not
price, leaves them on the run); ``output_final`` is false. Calls the file does not show (a
refused 0.x reply, the one past the cost limit) are in the shares of those it does. The model
is ``replay_config``'s ``agent.model.name`` (1.x; the retry agent's first ``agent_configs``);
0.x files name none (the real one's folder says gpt4): NULL. The limits are that model's
``per_instance_cost_limit`` (or the retry loop's ``cost_limit``) and ``per_instance_call_limit``
(0: none). No time is written: NULL.

**The run** (a ``runs`` row): ``exit_status`` as written (its ``outcome`` from
``runs.outcome``; the file marks no error itself, so ``is_error`` stays NULL), the submission's
start (else SWE-agent's stand-in text) as its result, the stated totals and limits above.

**Records**: each ``history`` entry, each ``trajectory`` step (its reply's call holds it) and
``info``; the retry agent's per-attempt ``info`` and the chosen attempt's copy are skipped by
kind. A reject's line is the entry's number in ``history`` (a trajectory step's or an attempt's:
its number there; ``info``'s: the number of records read with it).

**Session**: ``replay_config``'s ``problem_statement.id``, else the file's name (SWE-agent names
the file after the instance), with a fingerprint of the run's first reply: one folder of
trajectories per experiment holds the same instances as the next, and two runs of one instance
must not be taken for one.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from analyzer.errors import InputError
from analyzer.ingest.base import Head, LoadContext, LoadResult
from analyzer.ingest.conversation import Conversation
from analyzer.ingest.lowering import Lowering, brief, excerpt, text_measure
from analyzer.ingest.reading import read_json_document
from analyzer.ingest.rows import CallRow
from analyzer.ingest.runs import divide, outcome
from analyzer.ingest.spec import FormatSpec
from analyzer.ingest.values import as_dict, as_int, as_list, as_str, as_text, stated_cost

AGENT = "swe-agent"
_STAND_IN = re.compile(r"^\s*Exit(ing)? due to ")  # SWE-agent's own text for a lost reply
_START = re.compile(rb"^\s*\{")
_TRAJECTORY = re.compile(rb'"trajectory"\s*:\s*\[')
# Keys only SWE-agent writes; or, in a head that shows only the first step, its keys.
_MARKS = re.compile(
    rb'"(tokens_sent|swe_agent_version|is_demo|execution_time)"\s*:'
    rb'|"message_type"\s*:\s*"(system_prompt|demonstration)"'
)
_STEP_KEYS = tuple(re.compile(rb'"%s"\s*:' % k) for k in (b"action", b"observation", b"thought"))


def sniff(head: Head) -> bool:
    data = head.utf8
    if not _START.match(data) or not _TRAJECTORY.search(data):
        return False
    first_line = data.split(b"\n", 1)[0]
    try:  # a whole object on the first line followed by more lines is JSON Lines, not ours
        orjson.loads(first_line)
        if data[len(first_line) + 1 :].strip():
            return False
    except orjson.JSONDecodeError:
        pass
    return bool(_MARKS.search(data)) or all(k.search(data) for k in _STEP_KEYS)


def _text(content: object) -> str:
    """A message's text: a string, or the text of its parts (1.x multimodal prompts)."""
    if isinstance(content, str):
        return content
    return "".join(as_text(as_dict(p).get("text")) for p in as_list(content))


def _is_demo(m: dict[str, Any]) -> bool:
    return m.get("is_demo") is True or m.get("message_type") == "demonstration"


def _is_stand_in(thought: str, action: str) -> bool:
    """SWE-agent's own text in place of a reply it never got or dropped."""
    act = action.strip()
    return bool(_STAND_IN.match(thought)) and (not act or act.startswith("exit_"))


def _config(value: object) -> dict[str, Any]:
    """``replay_config``: a JSON string in 1.x (an object in some forks)."""
    if isinstance(value, str):
        try:
            value = orjson.loads(value)
        except orjson.JSONDecodeError:
            return {}
    return as_dict(value)


def _model_config(config: dict[str, Any]) -> dict[str, Any]:
    agent = as_dict(config.get("agent"))
    model = as_dict(agent.get("model"))
    configs = as_list(agent.get("agent_configs"))  # the retry agent's
    if not model and configs:
        model = as_dict(as_dict(configs[0]).get("model"))
    return model


def _reasoning_chars(m: dict[str, Any]) -> int:
    blocks = as_list(m.get("thinking_blocks"))
    return sum(len(as_text(as_dict(b).get("thinking"))) for b in blocks) + len(
        as_text(m.get("reasoning_content"))
    )


def _sent(step: dict[str, Any] | None) -> int | None:
    """The characters a reply was sent, where its trajectory step keeps the messages (1.x's
    ``query``); None where it does not (0.x, or an empty ``query``)."""
    query = [q for q in as_list(step.get("query")) if isinstance(q, dict)] if step else []
    return sum(len(_text(q.get("content"))) for q in query) if query else None


def _first_reply(doc: dict[str, Any]) -> str | None:
    """The run's first model reply (of its first attempt) as text: its content, action and
    tool calls (whose ids the provider made), to tell two runs of one instance apart."""
    attempts = [a for a in as_list(doc.get("attempts")) if isinstance(a, dict)]
    part = attempts[0] if attempts else doc
    for m in as_list(part.get("history")):
        if isinstance(m, dict) and m.get("role") == "assistant" and not _is_demo(m):
            return brief([m.get("content"), m.get("action"), m.get("tool_calls")], 10**9)
    for s in as_list(part.get("trajectory")):
        if isinstance(s, dict):
            return brief([s.get("response"), s.get("action")], 10**9)
    return None


@dataclass
class _Pending:
    """A call's action waiting for its result."""

    use_id: str | None  # None: the reply ran no action
    observation: str | None  # the trajectory step's raw output, if the reply has a step


class _Reader:
    def __init__(self, ctx: LoadContext, doc: dict[str, Any]) -> None:
        self.low = Lowering(ctx, SPEC.name, SPEC.call_prefix)
        self.doc = doc
        self.config = _config(doc.get("replay_config"))
        self.model_cfg = _model_config(self.config)
        self.model = as_str(self.model_cfg.get("name")) or as_str(self.model_cfg.get("model_name"))
        ps = as_dict(self.config.get("problem_statement"))
        name = Path(ctx.source.path).name
        stem = name.split(".traj")[0] if ".traj" in name else Path(name).stem
        instance = as_str(ps.get("id")) or stem or name
        first = _first_reply(doc)
        self.talk = Conversation(  # the run's messages
            instance
            if first is None
            else f"{instance}@{hashlib.sha256(first.encode('utf-8', 'replace')).hexdigest()[:8]}"
        )
        self.seq = 0
        self.expect_prompt = True
        self.pending: _Pending | None = None
        self.stand_in: str | None = None  # SWE-agent's last stand-in text (why it stopped)
        self.sent = 0  # characters of the history read so far in the attempt (what was sent)
        # Each call with what the file shows of its size: the characters it was sent and
        # the characters of its reply (the weights its run's stated tokens are divided by).
        self.sizes: list[tuple[CallRow, int, int]] = []

    def run(self) -> LoadResult:
        attempts = self.doc.get("attempts")
        if isinstance(attempts, list) and attempts:
            for n, attempt in enumerate(attempts, 1):
                self.attempt_of_retry_agent(n, attempt)
            for key in ("history", "trajectory"):  # the chosen attempt, written again
                copies = len(as_list(self.doc.get(key)))
                self.low.read(copies)
                self.low.skip("chosen_attempt_copy", copies)
        else:
            self.attempt(self.doc.get("history"), self.doc.get("trajectory"))
        if "info" in self.doc:
            self.low.read()
            if isinstance(self.doc["info"], dict):
                run = self.run_row(self.doc["info"])
                self.low.add_run(run)
                self.divide_tokens(run)
            else:
                # (numbered as the document's last record)
                self.low.reject(
                    self.low.records_read, "info is not an object", brief(self.doc["info"])
                )
        if self.seq == 0:
            self.low.result.note = "no model reply in the trajectory"
        return self.low.finish()

    def divide_tokens(self, run: dict[str, Any]) -> None:
        """The run's stated tokens (``tokens_sent``, ``tokens_received``) divided over its calls
        (``runs.divide``): what each was sent in proportion to the characters it was sent,
        what it received to those of its reply. Only where its stated cost is divided over
        them too, so each call's ``cost_basis`` 'apportioned' says its tokens are as well;
        their output is no final count of the call's own (``output_final`` false). Every
        call's share changes as the run grows: a call counts every record of the document
        as shaping it, so that the document read again, grown, replaces it."""
        sent, received = run["reported_input_tokens"], run["reported_output_tokens"]
        if not self.sizes or not run["cost_apportioned"] or sent is None or received is None:
            return
        rows = [row for row, _, _ in self.sizes]
        inputs = divide(sent, [w for _, w, _ in self.sizes])
        outputs = divide(received, [w for _, _, w in self.sizes])
        for row, inp, out in zip(rows, inputs, outputs, strict=True):
            row.input_tokens, row.output_tokens, row.output_final = inp, out, False
            row.parts = self.low.records_read

    def attempt_of_retry_agent(self, n: int, attempt: object) -> None:
        if not isinstance(attempt, dict):
            self.low.read()
            self.low.reject(n, f"attempts[{n - 1}] is not an object", brief(attempt))
            return
        self.attempt(attempt.get("history"), attempt.get("trajectory"))
        if "info" in attempt:  # its own stats; the run's totals are the top-level info's
            self.low.read()
            self.low.skip("attempt_info")

    def steps_of(self, trajectory: object) -> list[dict[str, Any]]:
        steps = []
        for i, s in enumerate(as_list(trajectory)):
            self.low.read()
            if isinstance(s, dict):
                steps.append(s)
            else:
                self.low.reject(i + 1, f"trajectory step {i + 1} is not an object", brief(s))
        return steps

    def attempt(self, history: object, trajectory: object) -> None:
        """One agent's history and trajectory, read side by side."""
        steps = self.steps_of(trajectory)
        entries = as_list(history)
        replies = any(
            isinstance(m, dict) and m.get("role") == "assistant" and not _is_demo(m)
            for m in entries
        )
        self.expect_prompt = True
        self.sent = 0
        k = 0  # the first step not yet given to a reply
        for line, m in enumerate(entries, 1):
            self.low.read()
            if not isinstance(m, dict) or not isinstance(m.get("role"), str):
                self.low.reject(line, "history entry without a role", brief(m))
                continue
            if _is_demo(m):
                self.low.skip("demonstration")
            elif m["role"] == "assistant":
                found = self.step_of(steps, k, m)
                if found is not None:
                    for s in steps[k:found]:  # replies refused and asked again
                        self.refused_step(s)
                    k = found + 1
                self.reply(line, m, None if found is None else steps[found])
            elif m["role"] == "system":
                self.expect_prompt = True
                self.close_pending()
                self.text_row(m, "system")
            elif m["role"] in ("user", "tool"):
                self.user(m)
            else:
                self.low.reject(line, f"history entry of role {m['role'][:40]!r}", brief(m))
            self.sent += len(_text(m.get("content")))  # (a demonstration is sent too)
        for s in steps[k:]:
            if replies:
                self.refused_step(s)
            else:  # a history without replies: the trajectory is the record
                self.step_reply(s)
        self.close_pending()

    @staticmethod
    def step_of(steps: list[dict[str, Any]], start: int, m: dict[str, Any]) -> int | None:
        """The trajectory step holding reply ``m`` (the same response), searched from ``start``
        over as many refused replies as SWE-agent asks again for (3 by default, a few more)."""
        content = _text(m.get("content"))
        for i in range(start, min(len(steps), start + 10)):
            s = steps[i]
            if as_text(s.get("response")) == content and as_text(s.get("action")) == as_text(
                m.get("action")
            ):
                return i
        return None

    def text_row(self, m: dict[str, Any], kind: str) -> None:
        """A history entry said as text (the system prompt, the instance prompt)."""
        self.low.add_message(
            self.talk.text(m["role"], kind, _text(m.get("content")), ts=None, records=1)
        )

    def user(self, m: dict[str, Any]) -> None:
        if self.expect_prompt:  # the instance prompt (the issue): the turn starts
            self.expect_prompt = False
            self.talk.turn = f"{self.talk.session}:{self.talk.idx + 1}"
            self.text_row(m, "prompt")
            return
        pending, self.pending = self.pending, None
        ids = [as_str(i) for i in as_list(m.get("tool_call_ids"))]
        use_id = next((i for i in ids if i), None) or (pending.use_id if pending else None)
        text = _text(m.get("content"))
        raw = pending.observation if pending and pending.observation is not None else text
        self.result_row(m["role"], use_id, raw, 1)

    def result_row(self, role: str, use_id: str | None, raw: str, n: int) -> None:
        self.low.add_message(
            self.talk.tool_result(raw, None, ts=None, use_id=use_id, role=role, records=n)
        )

    def close_pending(self) -> None:
        """A call whose result the history never showed (the last one, ``submit``): its
        step's observation is its result."""
        pending, self.pending = self.pending, None
        if pending and pending.use_id and pending.observation is not None:
            self.result_row("user", pending.use_id, pending.observation, 0)

    def reply(self, line: int, m: dict[str, Any], step: dict[str, Any] | None) -> None:
        self.close_pending()
        n = 1 + (step is not None)
        content, thought = _text(m.get("content")), as_text(m.get("thought"))
        action = as_text(m.get("action"))
        observation = as_str(step.get("observation")) if step else None
        if _is_stand_in(thought or content, action):
            if not content.strip() or content == thought:
                self.synthetic(content or thought, n, observation)
                return
            # 0.x after its last refused reply: the stand-in keeps that reply as content.
            self.call(line, m, [], None, n, refused=True, sent=_sent(step))
            return
        native = f"{self.talk.session}:{self.seq + 1}"
        tools: list[tuple[str | None, object, str]] = []
        for i, tc in enumerate(as_list(m.get("tool_calls"))):
            fn = as_dict(as_dict(tc).get("function"))
            use_id = as_str(as_dict(tc).get("id")) or f"{native}:{i}"
            args = fn.get("arguments")
            tools.append((as_str(fn.get("name")), action if args is None else args, use_id))
        if not tools and action.strip():
            tools.append((action.split()[0], action, native))
        self.call(line, m, tools, observation, n, sent=_sent(step))

    def step_reply(self, s: dict[str, Any]) -> None:
        """A reply known only from its trajectory step."""
        self.close_pending()
        response, thought = as_text(s.get("response")), as_text(s.get("thought"))
        action = as_text(s.get("action"))
        observation = as_str(s.get("observation"))
        if _is_stand_in(thought or response, action) or s.get("query") == [{}]:
            self.synthetic(response or thought, 1, None)
            return
        native = f"{self.talk.session}:{self.seq + 1}"
        tools: list[tuple[str | None, object, str]] = []
        if action.strip():
            tools.append((action.split()[0], action, native))
        self.call(None, {**s, "content": response}, tools, observation, 1, sent=_sent(s))

    def refused_step(self, s: dict[str, Any]) -> None:
        """A step with no reply in the history: a reply SWE-agent refused and asked again
        for (1.x), or its stand-in after an error."""
        self.close_pending()
        response, thought = as_text(s.get("response")), as_text(s.get("thought"))
        if _is_stand_in(thought or response, as_text(s.get("action"))) or s.get("query") == [{}]:
            self.synthetic(response or thought, 1, None)
            return
        self.call(None, {**s, "content": response}, [], None, 1, refused=True, sent=_sent(s))

    def synthetic(self, text: str, n: int, observation: str | None) -> None:
        self.stand_in = text or self.stand_in
        self.low.add_message(self.talk.text("assistant", "synthetic", text, ts=None, records=n))
        self.pending = _Pending(None, observation)  # what followed is tied to no call

    def call(
        self,
        line: int | None,
        m: dict[str, Any],
        tools: list[tuple[str | None, object, str]],
        observation: str | None,
        n: int,
        refused: bool = False,
        sent: int | None = None,
    ) -> None:
        self.seq += 1
        native = f"{self.talk.session}:{self.seq}"
        call_id = self.low.call_id(native)
        text = _text(m.get("content"))
        chars, visible = text_measure(text)
        row = self.talk.call(
            native,
            line=line,
            ts=None,
            seq=self.seq,
            model=self.model,
            app=AGENT,
            content_chars=chars,
            visible_chars=visible,
            reasoning_chars=_reasoning_chars(m),
            tool_call_count=len(tools),
            reply_saved=True,
            n_records=n,
        )
        self.low.add_call(row)
        self.sizes.append((row, self.sent if sent is None else sent, len(text)))
        if refused or chars or not tools:
            # (refused: SWE-agent refused the reply and asked the model again)
            kind = "format_error" if refused else "text"
            self.low.add_message(self.talk.text("assistant", kind, text, ts=None, call_id=call_id))
        for name, args, use_id in tools:
            self.low.add_message(self.talk.tool_call(name, args, use_id, ts=None, call_id=call_id))
        self.pending = _Pending(tools[0][2] if tools else None, observation)

    def run_row(self, info: dict[str, Any]) -> dict[str, Any]:
        stats = as_dict(info.get("model_stats"))
        status = as_str(info.get("exit_status"))
        cost = stated_cost(stats.get("instance_cost"))
        submission = info.get("submission")
        if isinstance(submission, str) and submission.strip():
            result = excerpt(submission.strip())
        elif isinstance(submission, dict) and submission:
            result = brief(submission, 200)
        else:
            result = excerpt(self.stand_in)
        retry_loop = as_dict(as_dict(self.config.get("agent")).get("retry_loop"))
        return {
            "session_id": self.talk.session,
            "stream_key": self.talk.session,
            "seq": 1,
            "line": None,
            "agent": AGENT,
            "model": self.model,
            "exit_status": status,
            "outcome": outcome(status),
            "is_error": None,
            "result_excerpt": result,
            "reported_calls": as_int(stats.get("api_calls")),
            "reported_input_tokens": as_int(stats.get("tokens_sent")),
            "reported_output_tokens": as_int(stats.get("tokens_received")),
            "reported_cost_usd": cost,
            "cost_apportioned": cost is not None,
            "step_limit": as_int(self.model_cfg.get("per_instance_call_limit")) or None,
            "cost_limit_usd": stated_cost(retry_loop.get("cost_limit"))
            or stated_cost(self.model_cfg.get("per_instance_cost_limit")),
            "n_records": 1,
        }


def load(ctx: LoadContext) -> LoadResult:
    doc = read_json_document(ctx.source)
    if not isinstance(doc, dict) or not any(
        isinstance(doc.get(k), list) for k in ("trajectory", "history", "attempts")
    ):
        raise InputError(
            "not a SWE-agent trajectory: no trajectory, history or attempts list",
            ctx.source.display,
        )
    return _Reader(ctx, doc).run()


# What this module is to the registry (analyzer.formats).
SPEC = FormatSpec(
    name="swe_agent",
    title="SWE-agent trajectory (.traj, JSON)",
    kind="log",
    sniff_order=80,  # before mini-swe-agent (85) and saved conversations (90), which take JSON
    call_prefix="swea",
    sniff=sniff,
    load=load,
)
