"""The guard as a Claude Code hook: ``llm-forensics guard claude-hook --policy NAME``.

Claude Code runs a command hook with a JSON object on standard input naming the session's
transcript (``transcript_path``) and the event (``hook_event_name``), and reads its answer on
standard output (Claude Code's hooks reference, "Hook input" and "Hook output"). The hook
reads the transcript as it is so far (the lines written whole: a line still being written is
a reject, never a crash), replays the session through the policy's live guard
(``analyzer.guards.guard``), fed the replay's events with the stream, session and turn of each
call (so a stop ends with what it reaches), and answers:

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

Its work is bounded, so that it always answers well inside Claude Code's hook timeout (60 s):
it reads at most ``INPUT_LIMIT`` of standard input (more is one line and "go on"), and judges
at most the transcript's last ``TAIL_MIB`` MiB (``tail_mib``), from the first line that begins
in them: a longer transcript is judged as if the session began there (said in one line on
standard error), so a stop whose reach (or a count whose scope) began before them is judged on
what they hold. Each call reads the transcript (its tail) afresh: nothing is kept between
calls.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from analyzer.api.hook_state import tail_start
from analyzer.errors import ForensicsError
from analyzer.guards.guard import Call, Decision, Guard

if TYPE_CHECKING:
    from analyzer.api.alerts import AlertSettings
    from analyzer.engine.store import Store
    from analyzer.guards.policy import Policy

# The events whose answer can carry words for Claude without blocking anything.
_CONTEXT_EVENTS = ("UserPromptSubmit", "SessionStart")
MIB = 2**20
# The hook's JSON is small, but it carries the tool's input (and after it, its response): a
# file written or read whole. Past this, the hook goes on without judging.
INPUT_LIMIT = 64 * MIB
# The transcript judged, at most: its last 32 MiB (bench/hook_cost.py: about 3 s of CPU,
# whatever the transcript's size; read whole, 200 MB took 7 s and 2 GB 66 s, past Claude
# Code's 60 s).
TAIL_MIB = 32.0


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
    cut: int = 0  # the bytes of the transcript before its tail (0: judged whole)
    size: int = 0  # the transcript's size, when it was cut

    def note(self) -> str:
        """The line that says the transcript was cut ("" when it was judged whole)."""
        if not self.cut:
            return ""
        return (
            f"llm-forensics guard: judged the transcript's last {_size(self.size - self.cut)} "
            f"of {_size(self.size)} (--tail-mib): what began before is not counted"
        )


def _size(n: int) -> str:
    return f"{round(n / MIB, 1):g} MiB" if n >= MIB else f"{n:,} bytes"


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


def read_input(stream: IO[bytes], limit: int = INPUT_LIMIT) -> str:
    """The hook's input: ``stream`` read to its end, if that is at most ``limit`` bytes (else
    an error, after reading ``limit`` + 1 bytes: never more)."""
    parts: list[bytes] = []
    got = 0
    while got <= limit:
        part = stream.read(limit + 1 - got)
        if not part:
            return b"".join(parts).decode("utf-8", errors="replace")
        parts.append(part)
        got += len(part)
    raise ForensicsError(f"the hook's input is over {_size(limit)}: not judged")


@contextmanager
def transcript_tail(transcript: Path, limit: int) -> Iterator[tuple[Path, int, int]]:
    """The transcript to judge, the bytes of it left out and its size: the transcript itself
    when it holds at most ``limit`` bytes (or ``limit`` is 0); else its last ``limit`` bytes
    from their first whole line, copied into a folder of its own under the same folder and
    file names (the ingest reads a session's name from them), removed after."""
    size = transcript.stat().st_size
    if limit <= 0 or size <= limit:
        yield transcript, 0, size
        return
    import tempfile  # (only here: its import costs the fast hook a few milliseconds)

    with tempfile.TemporaryDirectory(prefix="llm-forensics-hook-") as tmp:
        copy = Path(tmp) / (transcript.parent.name or "transcript") / transcript.name
        copy.parent.mkdir()
        with open(transcript, "rb") as src, open(copy, "wb") as dst:
            start = tail_start(src, size, limit)
            src.seek(start)
            left = size - start  # (not what was written since: the size seen)
            while left > 0:
                block = src.read(min(left, MIB))
                if not block:
                    break
                dst.write(block)
                left -= len(block)
        yield copy, start, size


def replay_events(store: Store, policy: Policy) -> list[dict[str, Any]]:
    """The calls of ``store`` as the replay feeds them to ``policy``'s live guard: its
    columns, and the stream, session and turn of each (``Replay.events``)."""
    from analyzer.guards.replay import Replay

    with Replay(store, None, [policy], live=True) as replay:
        return replay.events()


def verdict(guard: Guard, events: list[dict[str, Any]]) -> Verdict:
    """``guard`` fed the replayed ``events`` (a session so far): what stands over its newest
    call (the latest in time; of calls without a time, the last in the replay's order)."""
    calls = [Call.from_event(e) for e in events]
    guard.feed_all(calls)
    guard.finish()
    if not calls:
        return Verdict(None, None, 0)
    newest = max(enumerate(calls), key=lambda ic: (ic[1].ts or datetime.min, ic[0]))[1]
    key = newest.stream_key if newest.stream_key is not None else (newest.session_id or "")
    nudges = [d for d in guard.trips if d.action == "nudge" and d.call_id == newest.call_id]
    return Verdict(guard.standing(key), nudges[-1] if nudges else None, len(calls))


def judge(transcript: Path, guard: Guard, tail: int = int(TAIL_MIB * MIB)) -> Verdict:
    """Replay the transcript so far (at most its last ``tail`` bytes; 0: all of it) through
    ``guard``: what stands over its newest call."""
    if not transcript.is_file():
        raise ForensicsError("no such transcript", path=transcript)
    with transcript_tail(transcript, tail) as (path, cut, size):
        events: list[dict[str, Any]] = []
        if cut < size:  # (a tail without a whole line holds no call)
            from analyzer.api.forensics import Forensics

            with Forensics.open(":memory:") as lf:
                lf.ingest([path])
                events = replay_events(lf.store, guard.policy)
    said = verdict(guard, events)
    return Verdict(said.stop, said.nudge, said.calls, cut, size if cut else 0)


def judge_session(
    transcript: Path,
    policy: str,
    policies: str | None,
    tail: int,
    alerts: AlertSettings | None = None,
) -> Verdict:
    """The session so far under ``policy``: a Claude Code transcript read on from where the
    last call stopped (``analyzer.api.hook_state``), anything else ingested whole (``judge``);
    the alerts the verdict makes sent once (``analyzer.api.alerts``)."""
    from analyzer.api.hook_state import NotClaudeCode, judge_kept

    if not transcript.is_file():
        raise ForensicsError("no such transcript", path=transcript)
    try:
        kept = judge_kept(transcript, policy, policies, None, tail)
    except NotClaudeCode:
        return judge(transcript, Guard.load(policy, policies), tail)
    if alerts is not None and kept.newest is not None:
        _alert(alerts, kept.guard.policy, kept)
    return Verdict(kept.stop, kept.nudge, kept.calls, kept.cut, kept.size if kept.cut else 0)


def _alert(settings: AlertSettings, policy: Policy, kept: Any) -> None:
    """The alerts of the hook's verdict (a cap's levels, a stop), each sent once."""
    from analyzer.api.alerts import AlertBook, Notifier, alert_after_call, period_key

    notifier = Notifier(settings)
    if not notifier.active:
        return
    call = kept.newest
    decision = kept.stop or kept.nudge
    if decision is None:
        decision = Decision("continue", call.call_id, policy.name, value=kept.value)
    cap = float(policy.stop) if policy.type == "budget" else None
    period = period_key(policy.scope, call.session_id, call.stream_key, call.turn_id, call.ts)
    alert_after_call(AlertBook(), notifier, decision, cap, None, period or "", settings.levels)


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


def claude_hook(
    text: str,
    policy: str,
    policies: str | None = None,
    tail_mib: float = TAIL_MIB,
    alerts: AlertSettings | None = None,
) -> HookAnswer:
    """The whole hook: the payload ``text`` in, the answer out; never an exception."""
    try:
        transcript, event = read_payload(text)
        said = judge_session(transcript, policy, policies, int(tail_mib * MIB), alerts)
        answer = answer_json(said, event)
        return HookAnswer(json.dumps(answer) if answer is not None else "", said.note())
    except ForensicsError as exc:
        return HookAnswer(stderr=f"llm-forensics guard: {exc} (going on)")
    except Exception as exc:  # a hook never fails the user's work by its own error
        line = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return HookAnswer(stderr=f"llm-forensics guard: {line} (going on)")


def run_hook(
    stdin: IO[bytes] | None,
    policy: str,
    policies: str | None = None,
    tail_mib: float = TAIL_MIB,
    alerts: AlertSettings | None = None,
) -> HookAnswer:
    """The hook as a command runs it: its input read from ``stdin`` (at most
    ``INPUT_LIMIT``; None: there is none), then ``claude_hook``; never an exception."""
    try:
        if stdin is None:
            raise ForensicsError("the hook has no standard input")
        text = read_input(stdin)
    except ForensicsError as exc:
        return HookAnswer(stderr=f"llm-forensics guard: {exc} (going on)")
    except Exception as exc:  # (stdin unreadable: go on)
        line = f"llm-forensics guard: cannot read the hook's input: {exc} (going on)"
        return HookAnswer(stderr=line)
    return claude_hook(text, policy, policies, tail_mib, alerts=alerts)
