"""The seeds' log-side incidents, as the agents themselves would have written them.

Where a log tells the same activity as the billing export (Penguin's sessions for seed 000,
Netclaw's conversation for seed 001), it is written from the same planted calls - same start
times, models and token counts - so the two can be reconciled; the ids the agents kept are wire
ids, which (as with real OpenRouter traffic) do not equal the export's ``generation_id``.

* ``penguin/`` - seed 000: the Dec 13 session, whose 33 whitespace replies were never saved
  (only their request lifecycles remain), and the Dec 15 session after the fix, where empty
  replies were saved as the placeholder ``[Empty response from model]``.
* ``netclaw/`` - seed 001 as an OpenAI-format conversation: tool calls alternating with
  thinking-only replies (reasoning, no answer, no tool call), each followed by a nudge.
* ``nexus3/`` - seed 002: a ``raw.jsonl`` where a 200 stream arrives empty (no events, no
  ``[DONE]``), the empty assistant message is saved, and every later request is refused (400).
* ``claude-code/`` - seed 004: a parent session that invokes the explore sub-agent three times;
  each run ends with an empty final response and the parent receives ``(no output)``. The first
  run had said something useful earlier, which a scan-back would have recovered.

Reasoning text is abbreviated to a sentence or two (the token counts are the real ones), to keep
the sample small.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any


def _hex(*parts: object, n: int = 8) -> str:
    return hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:n]


def _iso(ms: int, z: bool = True) -> str:
    dt = datetime.fromtimestamp(ms / 1000, UTC)
    text = dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}"
    return text + "Z" if z else text


def _dump(path: Path, doc: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def _jsonl(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="\n") as fh:
        for obj in lines:
            fh.write(json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n")
    return path


# -- seed 000: Penguin ---------------------------------------------------------------------

PENGUIN_ACTIONS = [
    "<execute>pytest -x tests/wallet -q</execute>",
    "<read_file>penguin/wallet/ledger.py</read_file>",
    "<search>def reconcile</search>",
    "<read_file>penguin/wallet/rates.py</read_file>",
    "<execute>git diff --stat</execute>",
    "<edit_file>penguin/wallet/ledger.py</edit_file>",
    "<execute>pytest -x tests/wallet/test_ledger.py -q</execute>",
]


class _PenguinSession:
    """A Penguin session file being written: its messages and request lifecycles."""

    def __init__(self, sid: str) -> None:
        self.sid = sid
        self.messages: list[dict[str, Any]] = []
        self.lifecycles: list[dict[str, Any]] = []

    def msg(self, role: str, content: str, category: str, ms: int, **meta: Any) -> None:
        self.messages.append(
            {
                "role": role,
                "content": content,
                "category": category,
                "id": f"msg_{_hex('m', self.sid, len(self.messages))}",
                "timestamp": _iso(ms, z=False),
                "metadata": meta,
                "tokens": max(1, len(content) // 4),
                "agent_id": "default",
                "recipient_id": None,
                "message_type": "message",
            }
        )

    def lifecycle(self, i: int, c: dict[str, Any], request_id: str) -> None:
        """The request lifecycle of call ``i`` (kept for every call, saved reply or not)."""
        ended = c["ts_ms"] + c["gen_ms"]
        self.lifecycles.append(
            {
                "request_id": request_id,
                "provider": "openrouter",
                "model": c["model"],
                "status": "completed",
                "stream": True,
                "transport": "sse",
                "request_payload_hash": _hex("payload", self.sid, i, n=16),
                "attempt": 1,
                "started_at": c["ts_ms"] / 1000,
                "last_event_at": ended / 1000,
                "ended_at": ended / 1000,
                "provider_response_id": f"gen-{_hex('wire', self.sid, i, n=20)}",
                "last_event_type": "done",
                "finish_reason": c["finish_norm"],
                "error": None,
                "provider_data": {},
            }
        )

    def turn(self, i: int, c: dict[str, Any], request_id: str) -> None:
        """The messages call ``i`` left, by its planted kind."""
        ended = c["ts_ms"] + c["gen_ms"]
        kind = c["tag"].split(":", 1)[1]
        if kind == "loop":
            return  # whitespace-only: never saved, so the next request re-sends the same prompt
        if kind == "user":
            self.msg(
                "user",
                "It stopped answering. Keep going: read the big fixture and fix the test.",
                "DIALOG",
                c["ts_ms"] - 3000,
            )
        if kind == "placeholder":
            self.msg(
                "assistant",
                "[Empty response from model]",
                "SYSTEM",
                ended,
                request_id=request_id,
                was_empty=True,
            )
            return
        action = PENGUIN_ACTIONS[i % len(PENGUIN_ACTIONS)]
        self.msg("assistant", f"Next step. {action}", "DIALOG", ended, request_id=request_id)
        self.msg(
            "system",
            f"[Tool Result] {action.split('>')[1].split('<')[0]}: ok",
            "SYSTEM_OUTPUT",
            ended + 900,
        )


def _penguin_id(start: int) -> str:
    return (
        f"session_{_iso(start, z=False)[:10].replace('-', '')}_"
        + _iso(start, z=False)[11:19].replace(":", "")
        + f"_{_hex('penguin', start)}"
    )


def _penguin(rows: list[dict[str, Any]], day: str, first_prompt: str) -> dict[str, Any]:
    calls = sorted(
        (r for r in rows if str(r.get("tag", "")).startswith(day)), key=lambda r: r["ts_ms"]
    )
    start = calls[0]["ts_ms"]
    session = _PenguinSession(_penguin_id(start))
    session.msg(
        "system",
        "You are Penguin, a software engineering agent. Act with CodeAct tags.",
        "SYSTEM",
        start - 4000,
    )
    session.msg("user", first_prompt, "DIALOG", start - 2000)
    for i, c in enumerate(calls):
        request_id = f"req_{_hex('lc', session.sid, i, n=12)}"
        session.lifecycle(i, c, request_id)
        session.turn(i, c, request_id)
    last = calls[-1]["ts_ms"] + calls[-1]["gen_ms"]
    return {
        "id": session.sid,
        "created_at": _iso(start - 4000, z=False),
        "last_active": _iso(last, z=False),
        "metadata": {"workspace": "/home/dev/penguin", "mode": "run_response"},
        "messages": session.messages,
        "llm_request_lifecycles": session.lifecycles,
        "tool_call_records": [],
        "tool_result_records": [],
    }


# -- seed 001: Netclaw ---------------------------------------------------------------------

NETCLAW_TOOLS = [
    ("ssh_exec", {"host": "db-03", "command": "systemctl status nightly-backup"}),
    ("ssh_exec", {"host": "db-03", "command": "journalctl -u nightly-backup -n 200"}),
    ("read_file", {"host": "db-03", "path": "/etc/backup/backup.conf"}),
    ("ssh_exec", {"host": "db-03", "command": "df -h /var/backups"}),
    ("http_get", {"url": "http://grafana.internal/api/alerts?host=db-03"}),
    ("ssh_exec", {"host": "db-03", "command": "ls -la /var/backups/nightly"}),
]


def _netclaw_reply(i: int, c: dict[str, Any]) -> dict[str, Any]:
    """What every assistant reply of call ``i`` carries: its wire id, model, time, usage and
    (abbreviated) reasoning."""
    usage = {
        "prompt_tokens": c["tokens_prompt"],
        "completion_tokens": c["tokens_completion"],
        "total_tokens": c["tokens_prompt"] + c["tokens_completion"],
        "completion_tokens_details": {"reasoning_tokens": c["tokens_reasoning"]},
    }
    reasoning = (
        "The backup job exits early; the log should say why. I need to check the disk, the "
        f"config and the last run before answering. [{c['tokens_reasoning']:,} reasoning "
        "tokens, abbreviated in this sample]"
    )
    return {
        "role": "assistant",
        "id": f"gen-{_hex('netclaw-wire', i, n=20)}",
        "model": c["model"],
        "timestamp": _iso(c["ts_ms"]),
        "usage": usage,
        "reasoning_content": reasoning,
    }


def _netclaw_tool_call(
    reply: dict[str, Any], i: int, c: dict[str, Any], n_tool: int
) -> list[dict[str, Any]]:
    """A reply that calls a tool (the ``n_tool``-th), and the tool's result."""
    name, tool_args = NETCLAW_TOOLS[n_tool % len(NETCLAW_TOOLS)]
    args: dict[str, Any] = {**tool_args, "attempt": n_tool + 1}
    call_id = f"call_{_hex('nc', i, n=10)}"
    called = {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args, sort_keys=True)},
    }
    return [
        {**reply, "content": "", "finish_reason": "tool_calls", "tool_calls": [called]},
        {
            "role": "tool",
            "tool_call_id": call_id,
            "content": f"{name}: exit 0 (output {300 + 37 * i} lines)",
            "timestamp": _iso(c["ts_ms"] + c["gen_ms"] + 500),
        },
    ]


def _netclaw_thinking_only(reply: dict[str, Any], c: dict[str, Any]) -> list[dict[str, Any]]:
    """A reply of reasoning alone (no answer, no tool call), and the nudge that follows it."""
    return [
        {**reply, "content": "", "finish_reason": "stop"},
        {
            "role": "system",
            "content": "You produced reasoning but no reply and no tool "
            "call. Continue: call a tool or answer the user.",
            "timestamp": _iso(c["ts_ms"] + c["gen_ms"] + 100),
        },
    ]


def _netclaw(rows: list[dict[str, Any]]) -> dict[str, Any]:
    calls = sorted(
        (r for r in rows if str(r.get("tag", "")).startswith("n09:")), key=lambda r: r["ts_ms"]
    )
    start = calls[0]["ts_ms"]
    messages: list[dict[str, Any]] = [
        {
            "role": "system",
            "content": "You are Netclaw, an operations assistant on Discord.",
            "timestamp": _iso(start - 1500),
        },
        {
            "role": "user",
            "content": "@netclaw why is the nightly backup job failing on db-03?",
            "timestamp": _iso(start - 1000),
        },
    ]
    n_tool = 0
    for i, c in enumerate(calls):
        reply = _netclaw_reply(i, c)
        if c["tag"] == "n09:tool":
            messages += _netclaw_tool_call(reply, i, c, n_tool)
            n_tool += 1
        else:
            messages += _netclaw_thinking_only(reply, c)
    return {
        "id": f"netclaw-discord-ops-{_iso(start)[:10]}",
        "model": calls[0]["model"],
        "app": "Netclaw",
        "channel": "discord:#ops",
        "messages": messages,
    }


# -- seed 002: NEXUS3 ----------------------------------------------------------------------


_NEXUS3_ENDPOINT = "https://llm-gateway.corp.example/v1/chat/completions"
_NEXUS3_MODEL = "devstral-small"
_NEXUS3_REFUSAL = {
    "error": {
        "message": "Invalid 'messages[6]': assistant messages must have content or tool_calls.",
        "type": "invalid_request_error",
        "code": 400,
    }
}


class _Nexus3Log:
    """A NEXUS3 ``raw.jsonl`` being written: requests, streams, and what came back."""

    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []

    def request(self, t: float, messages: list[dict[str, Any]]) -> None:
        self.lines.append(
            {
                "type": "request",
                "timestamp": t,
                "endpoint": _NEXUS3_ENDPOINT,
                "payload": {
                    "model": _NEXUS3_MODEL,
                    "messages": messages,
                    "stream": True,
                    "stream_options": {"include_usage": True},
                },
            }
        )

    def stream(
        self,
        t: float,
        deltas: list[dict[str, Any]],
        finish: str,
        usage: dict[str, int],
        duration: int,
    ) -> None:
        """A whole stream: its chunks, ``[DONE]`` and the client's summary of it."""
        chunks: list[dict[str, Any]] = [
            {"choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas
        ]
        chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
        chunks.append({"choices": [], "usage": usage})
        for i, ch in enumerate(chunks):
            self.lines.append({"type": "stream_chunk", "timestamp": t + 0.3 + i * 0.1, "chunk": ch})
        self.lines.append(
            {"type": "stream_chunk", "timestamp": t + duration / 1000, "chunk": "data: [DONE]"}
        )
        content = sum(len(d.get("content") or "") for d in deltas)
        tools = sum(len(d.get("tool_calls") or []) for d in deltas)
        self.complete(t + duration / 1000, len(chunks), content, tools, True, finish, duration)

    def complete(
        self,
        t: float,
        events: int,
        content: int,
        tools: int,
        done: bool,
        finish: str | None,
        duration: int,
    ) -> None:
        self.lines.append(
            {
                "type": "stream_complete",
                "timestamp": t,
                "http_status": 200,
                "event_count": events,
                "content_length": content,
                "tool_call_count": tools,
                "received_done": done,
                "finish_reason": finish,
                "duration_ms": duration,
            }
        )

    def refused(self, t: float) -> None:
        self.lines.append(
            {"type": "response", "timestamp": t, "status": 400, "body": _NEXUS3_REFUSAL}
        )


def _nexus3() -> list[dict[str, Any]]:
    t0 = datetime(2025, 12, 11, 9, 15, 2, tzinfo=UTC).timestamp()
    log = _Nexus3Log()
    convo = _nexus3_good_turns(log, t0)
    # 200 OK with SSE headers, then nothing: no events, no content, no [DONE].
    t = t0 + 158.0
    log.request(t, convo)
    log.complete(t + 30.012, 0, 0, 0, False, None, 30012)
    # The client saved Message(content=""); every later request carries it and is refused.
    convo = [*convo, {"role": "assistant", "content": ""}]
    for k, (wait, text) in enumerate(
        ((212.0, "hello?"), (231.0, "are you there?"), (266.0, "retry the last step"))
    ):
        convo = [*convo, {"role": "user", "content": text}]
        log.request(t0 + wait, convo)
        log.refused(t0 + wait + 0.21 + k * 0.01)
    return log.lines


def _nexus3_good_turns(log: _Nexus3Log, t0: float) -> list[dict[str, Any]]:
    """The two turns that went well (a tool call, then an answer); the conversation after
    them, with the user's next request."""
    system = {"role": "system", "content": "You are NEXUS3, a coding agent."}
    ask = {"role": "user", "content": "Summarize the failing tests in tests/unit."}
    tool_call = {
        "id": "call_0",
        "type": "function",
        "function": {"name": "run", "arguments": '{"cmd": "pytest tests/unit -q"}'},
    }
    convo: list[dict[str, Any]] = [system, ask]
    log.request(t0, convo)
    log.stream(
        t0,
        [{"role": "assistant", "content": "Running the unit tests."}, {"tool_calls": [tool_call]}],
        "tool_calls",
        {"prompt_tokens": 2210, "completion_tokens": 31, "total_tokens": 2241},
        1850,
    )
    convo = [
        *convo,
        {"role": "assistant", "content": "Running the unit tests.", "tool_calls": [tool_call]},
        {
            "role": "tool",
            "tool_call_id": "call_0",
            "content": "3 failed, 118 passed: test_parse_dates, test_tz, test_bom",
        },
    ]
    t = t0 + 4.2
    log.request(t, convo)
    answer = (
        "Three tests fail, all in date handling: test_parse_dates, test_tz and test_bom. "
        "They share the new timestamp parser."
    )
    log.stream(
        t,
        [{"role": "assistant", "content": answer[:60]}, {"content": answer[60:]}],
        "stop",
        {"prompt_tokens": 2302, "completion_tokens": 38, "total_tokens": 2340},
        2400,
    )
    return [
        *convo,
        {"role": "assistant", "content": answer},
        {"role": "user", "content": "Fix test_tz first and show me the diff."},
    ]


# -- seed 004: Claude Code -----------------------------------------------------------------

PARENT_MODEL = "claude-sonnet-4-5-20250929"
AGENT_MODEL = "claude-haiku-4-5-20251001"


class _Transcript:
    def __init__(self, session: str, cwd: str, agent: str | None = None) -> None:
        self.session, self.cwd, self.agent = session, cwd, agent
        self.lines: list[dict[str, Any]] = []
        self.parent: str | None = None
        self.n = 0

    def _base(self, kind: str, ms: int) -> dict[str, Any]:
        self.n += 1
        h = _hex("uuid", self.session, self.agent, self.n, n=32)
        uid = f"{h[:8]}-{h[8:12]}-4{h[13:16]}-8{h[17:20]}-{h[20:32]}"
        line = {
            "parentUuid": self.parent,
            "isSidechain": self.agent is not None,
            "userType": "external",
            "cwd": self.cwd,
            "sessionId": self.session,
            "version": "2.1.38",
            "gitBranch": "main",
        }
        if self.agent:
            line["agentId"] = self.agent
        line.update({"type": kind, "uuid": uid, "timestamp": _iso(ms)})
        self.parent = uid
        return line

    def user(self, ms: int, content: object, **extra: Any) -> None:
        line = self._base("user", ms)
        line["message"] = {"role": "user", "content": content}
        line.update(extra)
        self.lines.append(line)

    def assistant(
        self, ms: int, model: str, blocks: list[dict[str, Any]], usage: dict[str, int]
    ) -> None:
        msg_id = f"msg_01{_hex('msg', self.session, self.agent, self.n, n=22)}"
        req = f"req_011C{_hex('req', self.session, self.agent, self.n, n=20)}"
        # A bare stop (no text, no tool call) is one line with no content blocks.
        shown: list[dict[str, Any] | None] = list(blocks) or [None]
        for i, block in enumerate(shown):
            line = self._base("assistant", ms + i * 40)
            line["message"] = {
                "model": model,
                "id": msg_id,
                "type": "message",
                "role": "assistant",
                "content": [block] if block else [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {
                    "input_tokens": usage["fresh"],
                    "cache_creation_input_tokens": usage["write"],
                    "cache_read_input_tokens": usage["read"],
                    "cache_creation": {
                        "ephemeral_5m_input_tokens": usage["write"],
                        "ephemeral_1h_input_tokens": 0,
                    },
                    "output_tokens": usage["out"],
                    "service_tier": "standard",
                },
            }
            line["requestId"] = req
            self.lines.append(line)


def _claude_code() -> dict[str, list[dict[str, Any]]]:
    session = "5f0c2a9e-8d41-4b7a-9c3e-1a2b3c4d5e6f"
    cwd = "/home/dev/koda"
    t = int(datetime(2025, 12, 18, 14, 3, 10, tzinfo=UTC).timestamp() * 1000)
    parent = _Transcript(session, cwd)
    files: dict[str, list[dict[str, Any]]] = {}
    parent.user(t, "explore the codebase")
    task_input = {
        "description": "Explore the codebase",
        "subagent_type": "explore",
        "prompt": "Explore the koda workspace: crates, entry points, how sub-agents are "
        "dispatched. Report what you find.",
    }
    prompt = 18430
    for run in range(3):
        t += 4000
        tool_id = f"toolu_01{_hex('task', run, n=22)}"
        blocks: list[dict[str, Any]] = []
        if run == 0:
            blocks.append({"type": "text", "text": "I'll send the explore agent through it."})
        blocks.append({"type": "tool_use", "id": tool_id, "name": "Task", "input": task_input})
        parent.assistant(
            t, PARENT_MODEL, blocks, {"fresh": 4, "write": 600, "read": prompt, "out": 2}
        )
        prompt += 640
        # The sub-agent's run.
        agent = f"a{_hex('agent', run, n=6)}"
        sub = _Transcript(session, cwd, agent)
        st = t + 1500
        sub.user(st, task_input["prompt"])
        sub_prompt = 9120
        steps = [
            ("List", {"path": "."}),
            ("Read", {"file_path": f"{cwd}/Cargo.toml"}),
            ("Read", {"file_path": f"{cwd}/README.md"}),
        ][: 3 if run == 0 else 1]
        for k, (tool, args) in enumerate(steps):
            st += 2500
            b: list[dict[str, Any]] = []
            if run == 0 and k == 2:
                b.append(
                    {
                        "type": "text",
                        "text": "The workspace has three crates: koda-core "
                        "(inference loop, sub-agent dispatch), koda-cli and koda-tools. "
                        "Sub-agents are dispatched from koda-core/src/sub_agent_dispatch.rs.",
                    }
                )
            tid = f"toolu_01{_hex('sub', run, k, n=22)}"
            b.append({"type": "tool_use", "id": tid, "name": tool, "input": args})
            sub.assistant(
                st, AGENT_MODEL, b, {"fresh": 3, "write": 900, "read": sub_prompt, "out": 3}
            )
            sub_prompt += 1400
            st += 900
            sub.user(
                st,
                [
                    {
                        "tool_use_id": tid,
                        "type": "tool_result",
                        "content": f"{tool} {args}: ok ({700 + 90 * k} lines)",
                    }
                ],
            )
        st += 2200
        # The final response: no text, no tool call - a bare stop.
        sub.assistant(st, AGENT_MODEL, [], {"fresh": 3, "write": 300, "read": sub_prompt, "out": 1})
        files[f"{session}/subagents/agent-{agent}.jsonl"] = sub.lines
        t = st + 800
        parent.user(
            t,
            [{"tool_use_id": tool_id, "type": "tool_result", "content": "(no output)"}],
            toolUseResult={"agentId": agent, "status": "completed", "content": []},
        )
    t += 3000
    parent.assistant(t, PARENT_MODEL, [], {"fresh": 4, "write": 120, "read": prompt, "out": 1})
    files[f"{session}.jsonl"] = parent.lines
    return files


def write_logs(out_dir: Path, planted: list[dict[str, Any]]) -> list[Path]:
    written = [
        _dump(
            out_dir / "penguin" / "conversations" / "session_2025-12-13_wallet.json",
            _penguin(planted, "p13", "Refactor the wallet ledger and make tests/wallet pass."),
        ),
        _dump(
            out_dir / "penguin" / "conversations" / "session_2025-12-15_wallet.json",
            _penguin(planted, "p15", "Continue the ledger refactor; run the wallet tests."),
        ),
        _dump(out_dir / "netclaw" / "conversation_2025-12-09_discord-ops.json", _netclaw(planted)),
        _jsonl(out_dir / "nexus3" / "logs" / "2025-12-11_091502_a7c3" / "raw.jsonl", _nexus3()),
    ]
    root = out_dir / "claude-code" / "projects" / "-home-dev-koda"
    for name, lines in sorted(_claude_code().items()):
        written.append(_jsonl(root / name, lines))
    return written
