"""The hook's kept state (``analyzer.api.hook_state``): a call reads only what is new, and says
what a new guard fed the whole transcript says, call by call, on every preset; a transcript
rewritten, a state cut short, a policy file edited, two hooks at once: never a wrong answer.

(That a new guard fed ``LiveTranscript``'s calls says what the replay says is held by
tests/test_live_claude.py and tests/test_guard_live.py; the hook's answers against the replay
of a store, end to end, by tests/test_claude_hook.py.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest

from analyzer.api.hook_state import (
    UNSETTLED,
    judge_kept,
    policy_key,
    state_file,
)
from analyzer.guards.guard import Decision, Guard
from analyzer.guards.live_claude import LiveTranscript
from analyzer.guards.policy import all_policies
from tests.helpers import REPO, shared_samples

PRESETS = [p.name for p in all_policies()]
LOOP = "real-loops/claude_code/Strawhat404__TASK-31/sessions__session-2.jsonl"
HEALTHY = "real-world/claude_code/jnarowski__agentcmd/full-session-five.jsonl"


def fresh(
    path: Path, name: str, guard: Guard | None = None
) -> tuple[Decision | None, Decision | None, int]:
    """What a new guard (of the preset ``name``, or ``guard``) says over the transcript read
    whole: the stop in force over its newest call and the nudge at it (the hook's rule,
    claude_hook.verdict)."""
    with open(path, "rb") as fh:
        live = LiveTranscript.start(path)
        live.read_on(fh, os.fstat(fh.fileno()).st_size)
    calls = live.calls()
    guard = guard or Guard.load(name)
    guard.feed_all(calls)
    guard.finish()
    if not calls:
        return None, None, 0
    newest = max(enumerate(calls), key=lambda ic: (ic[1].ts or datetime.min, ic[0]))[1]
    key = newest.stream_key if newest.stream_key is not None else (newest.session_id or "")
    nudges = [d for d in guard.trips if d.action == "nudge" and d.call_id == newest.call_id]
    return guard.standing(key), nudges[-1] if nudges else None, len(calls)


def cuts(data: bytes, steps: int) -> list[int]:
    """About ``steps`` places to cut ``data`` at, each at a line's end (and its end)."""
    ends = [i + 1 for i, b in enumerate(data) if b == 0x0A]
    every = max(1, len(ends) // steps)
    return sorted(set(ends[every - 1 :: every]) | {len(data)})


@pytest.mark.parametrize("sample", [LOOP, HEALTHY])
def test_the_kept_state_says_what_a_new_guard_says_at_every_step(
    sample: str, tmp_path: Path
) -> None:
    source = shared_samples() / sample
    data = source.read_bytes()
    path = tmp_path / "projects" / "-home-dev-proj" / source.name
    path.parent.mkdir(parents=True)
    path.write_bytes(b"")
    folder = tmp_path / "hooks"
    stops = 0
    for end in cuts(data, 30):
        with open(path, "ab") as fh:
            fh.write(data[fh.tell() : end])
        for name in PRESETS:
            kept = judge_kept(path, name, None, folder)
            stop, nudge, n = fresh(path, name)
            assert (kept.stop, kept.nudge, kept.calls) == (stop, nudge, n), (name, end)
            stops += stop is not None
    if sample == LOOP:
        assert stops > 0  # (the loop is stopped by some preset: the comparison saw a stop)


def test_a_transcript_rewritten_or_shortened_is_read_again(tmp_path: Path) -> None:
    data = (shared_samples() / LOOP).read_bytes()
    path = tmp_path / "s.jsonl"
    folder = tmp_path / "hooks"
    path.write_bytes(data)
    judge_kept(path, "opencode_doom_loop", None, folder)
    ends = cuts(data, 4)
    path.write_bytes(data[: ends[1]])  # shortened
    assert (
        judge_kept(path, "opencode_doom_loop", None, folder).calls
        == fresh(path, "opencode_doom_loop")[2]
    )
    other = (shared_samples() / HEALTHY).read_bytes()
    path.write_bytes(other[: ends[1]].rsplit(b"\n", 1)[0] + b"\n")  # rewritten, about as long
    kept = judge_kept(path, "opencode_doom_loop", None, folder)
    stop, nudge, n = fresh(path, "opencode_doom_loop")
    assert (kept.stop, kept.nudge, kept.calls) == (stop, nudge, n)


def test_a_state_cut_short_or_of_another_kind_is_started_again(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes((shared_samples() / LOOP).read_bytes())
    folder = tmp_path / "hooks"
    first = judge_kept(path, "opencode_doom_loop", None, folder)
    where = state_file(folder, path.resolve(), policy_key("opencode_doom_loop", None))
    assert where.is_file()
    where.write_bytes(where.read_bytes()[:100])
    again = judge_kept(path, "opencode_doom_loop", None, folder)
    where.write_bytes(b"not a state")
    third = judge_kept(path, "opencode_doom_loop", None, folder)
    assert (first.stop, first.calls) == (again.stop, again.calls) == (third.stop, third.calls)


def test_an_edited_policy_file_starts_again(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes((shared_samples() / LOOP).read_bytes())
    policies = tmp_path / "p.toml"
    rule = '[policy.mine]\ntype = "counter"\nscope = "session"\ncount = "tool_call"\nstop = {}\n'
    policies.write_text(rule.format(1000))
    folder = tmp_path / "hooks"
    assert judge_kept(path, "mine", str(policies), folder).stop is None
    policies.write_text(rule.format(2) + "# edited\n")
    assert judge_kept(path, "mine", str(policies), folder).stop is not None


def test_only_the_newest_calls_are_judged_afresh(tmp_path: Path) -> None:
    """The kept guard is fed all but the newest UNSETTLED calls: a call of the hook feeds a
    copy of it the rest, not every call since the session began."""
    path = tmp_path / "s.jsonl"
    path.write_bytes((shared_samples() / LOOP).read_bytes())
    folder = tmp_path / "hooks"
    judged = judge_kept(path, "opencode_doom_loop", None, folder)
    assert judged.calls > UNSETTLED
    import pickle

    where = state_file(folder, path.resolve(), policy_key("opencode_doom_loop", None))
    state = pickle.loads(where.read_bytes())
    assert state.fed == judged.calls - UNSETTLED
    assert state.live.offset == path.stat().st_size


HOOK = [sys.executable, "-m", "analyzer", "guard", "claude-hook", "--policy", "opencode_doom_loop"]


def test_two_hooks_at_once_take_turns(tmp_path: Path) -> None:
    """Two hook processes on one transcript at every step: both answer what a new guard says,
    and the state they leave is whole."""
    data = (shared_samples() / LOOP).read_bytes()
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"")
    payload = json.dumps({"transcript_path": str(path), "hook_event_name": "PostToolUse"})
    for end in cuts(data, 6):
        with open(path, "ab") as fh:
            fh.write(data[fh.tell() : end])
        procs = [
            subprocess.Popen(HOOK, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            for _ in range(2)
        ]
        said = [p.communicate(payload, timeout=120)[0] for p in procs]
        stop = fresh(path, "opencode_doom_loop")[0]
        for out in said:
            assert ('"continue": false' in out) == (stop is not None), out
    folder = Path(os.environ["XDG_DATA_HOME"]) / "llm-forensics" / "hooks"
    kept = judge_kept(path, "opencode_doom_loop", None, folder)
    assert kept.calls == fresh(path, "opencode_doom_loop")[2]


def test_the_hook_imports_neither_click_nor_duckdb_nor_pyarrow(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes((shared_samples() / LOOP).read_bytes())
    payload = json.dumps({"transcript_path": str(path), "hook_event_name": "PostToolUse"})
    for first in (True, False):  # (the first call reads the whole transcript, and prices its
        # models: the price data is imported once; the second reads what is new)
        done = subprocess.run(
            [sys.executable, "-X", "importtime", *HOOK[1:]],
            input=payload,
            capture_output=True,
            text=True,
            check=True,
            cwd=REPO,
        )
        imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()}
        assert not imported & {"click", "duckdb", "pyarrow", "numpy"}, imported
        assert first or "genai_prices" not in imported


def test_a_day_cap_counts_what_the_ledger_says_other_sessions_spent(tmp_path: Path) -> None:
    """A cap on the day starts from what the default store's spend ledger knew the other
    sessions spent that day, and a ledger written again since feeds the guard again: the
    hook stops where a guard given the same figures stops."""
    from decimal import Decimal

    from analyzer.engine.default_store import default_store
    from analyzer.guards.spend import ledger_path

    path = tmp_path / "s.jsonl"
    path.write_bytes((shared_samples() / LOOP).read_bytes())
    calls = LiveTranscript.start(path)
    with open(path, "rb") as fh:
        calls.read_on(fh, path.stat().st_size)
    day = next(c.ts for c in calls.calls() if c.ts is not None).date().isoformat()
    own = sum(c.cost_usd or 0 for c in calls.calls())
    cap = round(float(own) + 0.5, 2)  # (the session alone stays under it)
    policies = tmp_path / "caps.toml"
    policies.write_text(
        '[policy.day_cap]\ntype = "budget"\nscope = "day"\nweight = "cost_usd"\n'
        f'stop = {cap}\ncompare = ">"\n'
    )
    [policy] = [
        p for p in __import__("analyzer.guards.policy").guards.policy.load_policies(policies)
    ]
    ledger = ledger_path(default_store(dict(os.environ), Path.home()))
    ledger.parent.mkdir(parents=True, exist_ok=True)
    folder = tmp_path / "hooks"
    said = []
    for spent in ("0.0", "0.30", "0.70"):
        ledger.write_text(
            json.dumps(
                {
                    "written": f"2026-11-29T00:00:00Z {spent}",
                    "zone": "UTC",
                    "periods": {
                        "day": {
                            day: {
                                "last_call": day + "T23:00:00",
                                "by_source": {"/elsewhere.jsonl": spent},
                            }
                        }
                    },
                }
            )
        )
        kept = judge_kept(path, "day_cap", str(policies), folder)
        stop, _nudge, n = fresh(path, "", Guard(policy, baseline={day: Decimal(spent)}))
        assert (kept.stop, kept.calls) == (stop, n), spent
        said.append(kept.stop)
    assert said[0] is None and said[-1] is not None  # (what others spent brings the stop)
