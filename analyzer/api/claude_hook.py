"""The guard as a Claude Code hook: ``llm-forensics guard claude-hook --policy NAME``.

Claude Code runs a command hook with a JSON object on standard input naming the session's
transcript (``transcript_path``) and the event (``hook_event_name``), and reads its answer on
standard output (Claude Code's hooks reference, "Hook input" and "Hook output"). The hook
reads the transcript as it is so far (the lines written whole: a line still being written is
a reject, never a crash), replays the session through the policy's live guard
(``analyzer.guards.guard``) and answers:

* a stop in force over the newest call (the policy tripped in the turn, session or stream that
  call is in, as its ``reach`` says): ``{"continue": false, "stopReason": ...}``, which stops
  Claude; the reason is shown to the user;
* a nudge at the newest call: after a tool (``PostToolUse``) ``{"decision": "block", "reason":
  ...}``, which tells Claude the reason; at the start of a prompt or session
  (``UserPromptSubmit``, ``SessionStart``) the reason as ``additionalContext``; elsewhere
  (``PreToolUse``, ``Stop``...), where a block would mean something else, a ``systemMessage``
  to the user only;
* otherwise nothing (exit 0: go on).

A hook never fails the user's work by its own error: whatever goes wrong (a payload that is not
the documented JSON, a transcript that cannot be read, a policy that does not exist) is one
line on standard error and the answer "go on".
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from analyzer.api import Forensics
from analyzer.errors import ForensicsError
from analyzer.guards.guard import Call, Decision, Guard
from analyzer.guards.replay import Replay

# The events whose answer can carry words for Claude without blocking anything.
_CONTEXT_EVENTS = ("UserPromptSubmit", "SessionStart")


@dataclass(frozen=True)
class HookAnswer:
    """What the hook writes: its JSON answer (empty: go on) and a line for standard error."""

    stdout: str = ""
    stderr: str = ""


@dataclass(frozen=True)
class Verdict:
    """The guard over the session so far: the stop in force over its newest call, the nudge
    at it, and how many calls it read."""

    stop: Decision | None
    nudge: Decision | None
    calls: int


def read_payload(text: str) -> tuple[Path, str]:
    """The transcript and the event named by a hook's JSON input."""
    try:
        payload = json.loads(text)
    except ValueError as exc:
        raise ForensicsError(f"the hook's input is not JSON ({exc})") from None
    if not isinstance(payload, dict):
        raise ForensicsError("the hook's input is not a JSON object")
    transcript = payload.get("transcript_path")
    if not isinstance(transcript, str) or not transcript:
        raise ForensicsError("the hook's input names no transcript_path")
    event = payload.get("hook_event_name")
    return Path(transcript).expanduser(), event if isinstance(event, str) else ""


def judge(transcript: Path, guard: Guard) -> Verdict:
    """Replay the transcript so far through ``guard``: what stands over its newest call (the
    latest in time; of calls without a time, the last in the replay's order)."""
    if not transcript.is_file():
        raise ForensicsError("no such transcript", path=transcript)
    with Forensics.open(":memory:") as lf:
        lf.ingest([transcript])
        with Replay(lf.store, None, [guard.policy]) as replay:
            events = replay.events()
    calls = [Call.from_event(e) for e in events]
    guard.feed_all(calls)
    guard.finish()
    if not calls:
        return Verdict(None, None, 0)
    newest = max(enumerate(calls), key=lambda ic: (ic[1].ts or datetime.min, ic[0]))[1]
    key = newest.stream_key if newest.stream_key is not None else (newest.session_id or "")
    nudges = [d for d in guard.trips if d.action == "nudge" and d.call_id == newest.call_id]
    return Verdict(guard.standing(key), nudges[-1] if nudges else None, len(calls))


def answer_json(verdict: Verdict, event: str) -> dict[str, Any] | None:
    """The hook's answer to Claude Code for ``verdict`` at ``event`` (None: go on)."""
    if verdict.stop is not None:
        reason = f"llm-forensics guard: {verdict.stop.reason}"
        return {"continue": False, "stopReason": reason, "systemMessage": reason}
    if verdict.nudge is None:
        return None
    reason = f"llm-forensics guard: {verdict.nudge.reason}. Change approach or stop."
    if event == "PostToolUse":
        return {"decision": "block", "reason": reason}
    if event in _CONTEXT_EVENTS:
        return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": reason}}
    return {"systemMessage": reason}


def claude_hook(text: str, policy: str, policies: str | None = None) -> HookAnswer:
    """The whole hook: the payload ``text`` in, the answer out; never an exception."""
    try:
        transcript, event = read_payload(text)
        verdict = judge(transcript, Guard.load(policy, policies))
        said = answer_json(verdict, event)
        return HookAnswer(json.dumps(said) if said is not None else "")
    except ForensicsError as exc:
        return HookAnswer(stderr=f"llm-forensics guard: {exc} (going on)")
    except Exception as exc:  # a hook never fails the user's work by its own error
        line = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return HookAnswer(stderr=f"llm-forensics guard: {line} (going on)")
