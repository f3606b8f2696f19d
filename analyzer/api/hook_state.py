"""What the Claude Code hook keeps between its calls, so that a call reads only the new lines.

Claude Code runs the hook after every tool call, each time in a new process. Reading the whole
transcript every time cost 1-2 s on a 2.7 MB session; so the hook keeps, per transcript and
policy, a state file in the data folder (``llm-forensics/hooks/`` under the folder the default
store is in):

* the transcript read so far (``analyzer.guards.live_claude.LiveTranscript``: where it stopped
  reading, and what later lines can still change);
* the policy's guard fed every call but the newest ``UNSETTLED`` (a call's fields can change
  when its tool results come in, a line or two later), and which of those calls is the newest;
* the file's identity (device, inode) and the policy's (its file's path, size and time).

A call of the hook then reads the lines written since, feeds the guard the calls that have
settled, and judges a copy of it fed the rest: the same decision as feeding every call of the
transcript to a new guard (``tests/test_hook_state.py`` holds it to that, call by call, on every
preset). A transcript that was rewritten or shortened (its bytes before where the read stopped
changed, or another file under its name), a change to an earlier call than the guard has fed,
a policy file edited, a state of another version or one that cannot be read: each starts that
transcript's state again from its first line, never a wrong answer.

Two hooks at once on one transcript (Claude Code runs the hooks of an event in parallel) take
turns: the state is read and written under an exclusive lock of its own (``fcntl.flock``; on a
system without it, Windows, each call reads the state as the last one wrote it, by an atomic
rename, and two at once may each do the same work). The state is written to a temporary file
and renamed over the old one, so a hook killed mid-write leaves the old state whole.

The state files are this program's own (Python pickles in the user's data folder, written by
the hook and read back by it only); the transcript's content is data, never executed.
"""

from __future__ import annotations

import json
import os
import pickle
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any, BinaryIO

from analyzer.api.kept import STATE_VERSION, digest_of, locked, state_folder, write_atomically
from analyzer.guards.guard import Call, Decision, Guard
from analyzer.guards.live_claude import LiveTranscript
from analyzer.guards.policy import Policy
from analyzer.guards.primitives import PERIODS

# The newest calls judged afresh at every call (not fed to the kept guard): a call's fields
# change when its tool results come in, and a result comes a line or two after its call.
UNSETTLED = 16
_PRESETS = Path(__file__).resolve().parent.parent / "guards" / "presets.toml"


def policy_key(name: str, policies: str | None) -> tuple[Any, ...]:
    """The policy's identity: its name and its file's path, size and modification time (the
    presets' file for a preset), so that an edited policy file starts the state again."""
    source = Path(policies).resolve() if policies is not None else _PRESETS
    try:
        st = source.stat()
    except OSError:
        return (name, str(source), None)
    return (name, str(source), st.st_size, st.st_mtime_ns)


@dataclass
class Newest:
    """The newest call fed to the kept guard (the latest in time; of calls without a time, the
    last in the replay's order), as the hook picks the call it answers about."""

    ts: datetime
    index: int
    call: Call

    def key(self) -> tuple[datetime, int]:
        return (self.ts, self.index)


@dataclass
class HookState:
    """A transcript read so far and the policy's guard fed its settled calls."""

    version: str
    transcript: str
    identity: tuple[int, int]  # (st_dev, st_ino)
    policy: tuple[Any, ...]
    live: LiveTranscript
    guard: Guard
    tail: int = 0  # the --tail-mib bound (bytes) the state was started under
    cut: int = 0  # where its reading began: the start of the tail's first whole line
    fed: int = 0  # the calls the guard has been fed
    newest: Newest | None = None
    value: float | None = None  # the guard's value where it last moved (for the status line)
    spent: Spent | None = None  # a period cap's: what the other sessions had spent
    fed_until: tuple[bool, datetime] = (False, datetime.min)  # a period cap's latest call fed

    def restart_guard(self) -> None:
        """A new guard of the state's policy, fed nothing yet."""
        self.guard, self.fed, self.newest = self.new_guard(), 0, None
        self.fed_until = (False, datetime.min)

    def new_guard(self) -> Guard:
        """A guard of the state's policy fed nothing yet (a period cap's starting from what
        the other sessions had spent)."""
        if self.spent is None:
            return Guard(self.guard.policy)
        return Guard(self.guard.policy, baseline=self.spent.baseline, window=self.spent.window)


@dataclass(frozen=True)
class Spent:
    """What a live cap on a day, a 5-hour window or a month adds to its own calls: what the
    default store's spend ledger (``analyzer.guards.spend``) knew the other sessions spent, by
    period, its latest window, and when the ledger was written."""

    written: str | None
    baseline: dict[str, Decimal]
    window: tuple[datetime, datetime] | None

    @classmethod
    def read(cls, policy: Policy, transcript: Path) -> Spent | None:
        """The ledger's figures for ``policy`` (None: not a period cap)."""
        if policy.scope not in PERIODS:
            return None
        from analyzer.engine.default_store import default_store
        from analyzer.guards.spend import baselines, last_window, ledger_path, read_ledger

        ledger = read_ledger(ledger_path(default_store(dict(os.environ), Path.home())))
        written = ledger.get("written") if ledger is not None else None
        spent = baselines(ledger, policy.scope, excluding=transcript)
        return cls(written if isinstance(written, str) else None, spent, last_window(ledger))


@dataclass(frozen=True)
class Judged:
    """The guard over the transcript so far: the stop in force over its newest call, the nudge
    at it, how many calls it has, and the guard that judged (fed every call, finished)."""

    stop: Decision | None
    nudge: Decision | None
    calls: int
    guard: Guard
    newest: Call | None
    value: float | None = None  # the guard's value after the newest call, when it moved there
    cut: int = 0  # the bytes of the transcript before where its reading began
    size: int = 0  # the transcript's size


class NotClaudeCode(Exception):
    """The transcript does not read as Claude Code's: judged by a whole ingest instead."""


def state_file(folder: Path, transcript: Path, key: tuple[Any, ...]) -> Path:
    """The state file of ``transcript`` under the policy ``key``: named by a digest of the
    transcript's path, then one of the policy's name and file, so that the states of one
    transcript are found together (``said_files``)."""
    return folder / f"{digest_of(str(transcript))}-{digest_of(repr(key[:2]))}.state"


def load_state(path: Path) -> HookState | None:
    """The state written at ``path`` (None: none, or one that cannot be read)."""
    try:
        with open(path, "rb") as fh:
            state = pickle.load(fh)
    except FileNotFoundError:
        return None
    except Exception:  # a state cut short, or of another program's making: start again
        return None
    return state if isinstance(state, HookState) and state.version == STATE_VERSION else None


def save_state(path: Path, state: HookState) -> None:
    """Write ``state`` at ``path``: a temporary file beside it, renamed over the old one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL))


def _fresh(
    fh: BinaryIO,
    transcript: Path,
    st: os.stat_result,
    key: tuple[Any, ...],
    policy: Policy,
    tail: int,
) -> HookState:
    """A state of nothing read yet: from the transcript's first line, or from the first whole
    line of its last ``tail`` bytes when it is longer (as the whole path judges it)."""
    if not _is_claude_code(fh):
        raise NotClaudeCode
    cut = tail_start(fh, st.st_size, tail)
    state = HookState(
        STATE_VERSION,
        str(transcript),
        (st.st_dev, st.st_ino),
        key,
        LiveTranscript.start(transcript, cut),
        Guard(policy),
        tail=tail,
        cut=cut,
    )
    state.spent = Spent.read(policy, transcript)
    state.guard = state.new_guard()
    return state


def tail_start(fh: BinaryIO, size: int, limit: int) -> int:
    """Where the last ``limit`` bytes of the file ``fh`` (of ``size`` bytes) begin a whole
    line: at their start when a line ends just before it, else after their first line end
    (``size`` when there is none)."""
    if limit <= 0 or size <= limit:
        return 0
    fh.seek(size - limit - 1)
    before = fh.readline(limit + 1)  # the byte before the tail, and the rest of its line
    return min(size, size - limit - 1 + len(before))


def _is_claude_code(fh: BinaryIO) -> bool:
    """Whether the file's first lines read as a Claude Code transcript (the format's sniff)."""
    from analyzer.formats.claude_code import sniff
    from analyzer.ingest.base import Head

    fh.seek(0)
    return sniff(Head(fh.read(64 * 1024), None, "utf-8"))


def _newer(best: Newest | None, calls: list[Call], first: int) -> Newest | None:
    """The newest of ``best`` and ``calls`` (the calls from index ``first`` on)."""
    for i, call in enumerate(calls, start=first):
        candidate = Newest(call.ts or datetime.min, i, call)
        if best is None or candidate.key() >= best.key():
            best = candidate
    return best


def _clone(guard: Guard) -> Guard:
    copy = pickle.loads(pickle.dumps(guard, protocol=pickle.HIGHEST_PROTOCOL))
    assert isinstance(copy, Guard)
    return copy


def advance(state: HookState, fh: Any, size: int) -> Judged:
    """Read the transcript's new lines (``fh``, ``size`` bytes now) into ``state``, feed its
    guard the calls that settled, and judge: what stands over the newest call."""
    changed = state.live.read_on(fh, size)
    if changed is None:  # not the file read before: read it again from its start
        state.live = LiveTranscript.start(Path(state.transcript), state.cut)
        changed = state.live.read_on(fh, size)
        assert changed is not None
    if changed < state.fed:  # an earlier call than the guard has fed changed: feed it again
        state.restart_guard()
    pending = state.live.calls(state.fed)
    timed = state.spent is not None  # a period cap takes every call in time order
    if timed and state.fed and pending and min(map(_when, pending)) < state.fed_until:
        # a call earlier than one the guard was fed: feed them all again, in time order
        state.restart_guard()
        pending = state.live.calls(0)
    settled = _settled(pending, max(0, len(state.live) - UNSETTLED - state.fed), timed)
    if settled:
        state.guard.feed_all(pending[:settled])
        state.newest = _newer(state.newest, pending[:settled], state.fed)
        state.fed += settled
        if timed:
            state.fed_until = max(state.fed_until, *map(_when, pending[:settled]))
    guard = _clone(state.guard)
    rest = pending[settled:]
    if timed:  # (as feed_all takes them: in time order, the untimed last)
        rest = sorted(rest, key=_when)
    values = {call.call_id: guard.feed(call).value for call in rest}
    guard.finish()
    newest = _newer(state.newest, rest, state.fed)
    if newest is None:
        return Judged(None, None, 0, guard, None, cut=state.cut, size=size)
    call = newest.call
    key = call.stream_key if call.stream_key is not None else (call.session_id or "")
    nudges = [d for d in guard.trips if d.action == "nudge" and d.call_id == call.call_id]
    stop, nudge = guard.standing(key), nudges[-1] if nudges else None
    value = values.get(call.call_id)
    return Judged(stop, nudge, len(state.live), guard, call, value, state.cut, size)


def _when(call: Call) -> tuple[bool, datetime]:
    """Where a period cap's guard takes a call (``Guard.feed_all``): in time order, the calls
    without a time last."""
    ts = call.ts
    if ts is not None and ts.tzinfo is not None:
        ts = ts.astimezone(UTC).replace(tzinfo=None)
    return (ts is None, ts or datetime.min)


def _settled(pending: list[Call], n: int, timed: bool) -> int:
    """How many of the ``pending`` calls to feed the kept guard: ``n``, or for a period cap
    the longest prefix of at most ``n`` that comes, in time, before every call after it (so
    that feeding it first and the rest after is feeding them all in time order)."""
    if not timed or n == 0:
        return n
    keys = [_when(c) for c in pending]
    least_after = [(True, datetime.max)] * (len(keys) + 1)
    for i in range(len(keys) - 1, -1, -1):
        least_after[i] = min(keys[i], least_after[i + 1])
    best, most = 0, keys[0]
    for i in range(1, n + 1):
        most = max(most, keys[i - 1])
        if most <= least_after[i]:
            best = i
    return best


def judge_kept(
    transcript: Path,
    name: str,
    policies: str | None,
    folder: Path | None = None,
    tail: int = 0,
) -> Judged:
    """Judge ``transcript`` so far under the policy ``name`` (of ``policies``, or a preset),
    reading only what was written since the last call (the state in ``folder``); a state
    started now on a transcript longer than ``tail`` bytes (0: no bound) reads its tail.
    Raises ``NotClaudeCode`` for a transcript that does not read as Claude Code's."""
    path = transcript.resolve()
    key = policy_key(name, policies)
    where = state_file(folder or state_folder(), path, key)
    with locked(where):
        with open(path, "rb") as fh:
            st = os.fstat(fh.fileno())
            state = load_state(where)
            if (
                state is None
                or state.transcript != str(path)
                or state.identity != (st.st_dev, st.st_ino)
                or state.policy != key
                or state.tail != tail
            ):
                policy = state.guard.policy if state is not None and state.policy == key else None
                if policy is None:
                    policy = Guard.load(name, policies).policy
                state = _fresh(fh, path, st, key, policy, tail)
            _spent_since(state, path)
            judged = advance(state, fh, st.st_size)
        if judged.value is not None:
            state.value = judged.value
        save_state(where, state)
        write_said(where.with_suffix(".said"), state.guard.policy, judged, state.value)
    return judged


def _spent_since(state: HookState, transcript: Path) -> None:
    """A period cap whose ledger was written again since: its guard fed again from the new
    figures (the other sessions' spend moved)."""
    spent = Spent.read(state.guard.policy, transcript)
    if spent is not None and (state.spent is None or spent.written != state.spent.written):
        state.spent = spent
        state.restart_guard()


def write_said(path: Path, policy: Policy, judged: Judged, value: float | None) -> None:
    """What the hook said at its last call, for the status line: the policy (its name, type,
    scope and stop), its value where it last moved, and the stop in force or the nudge, with
    its reason."""
    decision = judged.stop or judged.nudge
    said = {
        "policy": policy.name,
        "type": policy.type,
        "scope": policy.scope,
        "stop": float(policy.stop),
        "value": value,
        "action": decision.action if decision is not None else None,
        "reason": decision.reason if decision is not None else None,
    }
    data = json.dumps(said).encode()
    try:
        if path.read_bytes() == data:  # (the same words: not written again)
            return
    except OSError:
        pass
    write_atomically(path, data)
