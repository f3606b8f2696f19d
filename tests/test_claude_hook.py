"""``guard claude-hook``, run as Claude Code runs a command hook: a subprocess given the
documented JSON on stdin (session_id, transcript_path, cwd, hook_event_name...). It stops a
real loop at the call the backtest says, lets healthy real sessions through, and never fails
the user's work by its own error."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analyzer.api import Forensics
from analyzer.api.claude_hook import (
    INPUT_LIMIT,
    MIB,
    Verdict,
    answer_json,
    read_input,
    replay_events,
    tail_start,
    verdict,
)
from analyzer.cli.main import cli
from analyzer.engine.store import open_store
from analyzer.errors import ForensicsError
from analyzer.guards.guard import Decision, Guard
from analyzer.guards.policy import all_policies
from analyzer.guards.replay import Replay
from analyzer.ingest.base import IngestOptions
from analyzer.pipeline import ingest_paths
from tests.helpers import REPO, shared_samples

LOOP_POLICY = "opencode_doom_loop"  # the same tool call 3 times in a row ends the turn
SAMPLE_TRANSCRIPT = (
    REPO
    / "sample_data/claude-code/projects/-home-dev-koda/5f0c2a9e-8d41-4b7a-9c3e-1a2b3c4d5e6f.jsonl"
)


def hook(transcript: Path | str, policy: str = LOOP_POLICY, **payload: Any) -> Any:
    """The hook as Claude Code runs it; its exit code, stdout and stderr."""
    body = {
        "session_id": "abc123",
        "transcript_path": str(transcript),
        "cwd": str(REPO),
        "permission_mode": "default",
        "hook_event_name": "PostToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": "true"},
        **payload,
    }
    return raw_hook(json.dumps(body), policy)


def raw_hook(stdin: str, policy: str = LOOP_POLICY, *extra: str) -> Any:
    return subprocess.run(
        [sys.executable, "-m", "analyzer", "guard", "claude-hook", "--policy", policy, *extra],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def backtest_stops(path: Path, policy: str = LOOP_POLICY) -> tuple[list[str], list[str]]:
    """The replay's calls of a transcript, in order, and where the policy stops them."""
    [p] = [q for q in all_policies() if q.name == policy]
    with open_store(":memory:") as store:
        ingest_paths(store, [str(path)], IngestOptions(progress=False))
        with Replay(store, None, [p]) as replay:
            calls = [e["call_id"] for e in replay.events()]
            stops = [c for c, action in replay.trips(p) if action == "stop"]
    return calls, stops


def stopped(done: Any) -> bool:
    assert done.returncode == 0, done.stderr
    assert done.stderr == "", done.stderr
    if not done.stdout.strip():
        return False
    said = json.loads(done.stdout)
    assert said["continue"] is False and LOOP_POLICY in said["stopReason"]
    return True


def test_the_hook_stops_a_real_loop_at_the_call_the_backtest_says(tmp_path: Path) -> None:
    """A real mini-swe-agent run that ran `true` 79 times (labelled in real-loops/truth.json):
    the transcript as it stood after each call, the hook said at each. It goes on up to the
    call before the one the backtest stops, and stops from that call on."""
    real = (
        shared_samples()
        / "real-loops/conversation_json/richardzhuang0412__mini-swe-agent-automate-repo-"
        "installation/automate/repo_install_express.traj.json"
    )
    calls, stops = backtest_stops(real)
    assert len(stops) == 1
    trip = calls.index(stops[0]) + 1  # the backtest's stop: the trip-th call
    doc = json.loads(real.read_text(encoding="utf-8"))
    answers = [i for i, m in enumerate(doc["messages"]) if m["role"] == "assistant"]
    assert len(answers) == len(calls)  # one call per reply of the model

    def so_far(n: int) -> Path:  # the transcript as it stood after its n-th call
        path = tmp_path / f"after-{n}.traj.json"
        path.write_text(json.dumps({**doc, "messages": doc["messages"][: answers[n - 1] + 1]}))
        return path

    assert [stopped(hook(so_far(n))) for n in (1, trip - 1, trip, trip + 1)] == [
        False,
        False,
        True,
        True,
    ]


def test_a_claude_code_transcript_growing_line_by_line(tmp_path: Path) -> None:
    """A Claude Code transcript (the sample's loop: the same Bash command three times), as it
    is written: the hook stops exactly when the backtest of the transcript so far has a stop,
    and a line still being written changes nothing."""
    lines = SAMPLE_TRANSCRIPT.read_text(encoding="utf-8").splitlines(keepends=True)
    path = tmp_path / "session.jsonl"
    said, expected = [], []
    for n in range(1, len(lines) + 1):
        path.write_text("".join(lines[:n]), encoding="utf-8")
        said.append(stopped(hook(path)))
        expected.append(bool(backtest_stops(path)[1]))
    assert said == expected and said[-1] and not said[0]
    path.write_text("".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2], encoding="utf-8")
    assert stopped(hook(path)) == expected[-2]  # the half line is not read yet


@pytest.mark.parametrize(
    "healthy",
    [
        "real-loops/claude_code/Strawhat404__TASK-31/sessions__session-2.jsonl",
        "real-world/claude_code/marot__spotter/-home-marco-projects-spotter-worktrees-spotter-a0y"
        "/fa812bfe-b295-4cca-9c2f-fdf01028cb46.jsonl",
    ],
)
def test_healthy_real_sessions_go_on(healthy: str) -> None:
    path = shared_samples() / healthy
    assert backtest_stops(path)[1] == []
    done = hook(path)
    assert not stopped(done) and done.stdout == ""


@pytest.mark.parametrize(
    ("stdin", "policy", "says"),
    [
        ("{not json", LOOP_POLICY, "not JSON"),
        ("[1, 2]", LOOP_POLICY, "not a JSON object"),
        ('{"session_id": "x"}', LOOP_POLICY, "names no transcript_path"),
        ('{"transcript_path": "/no/such/file.jsonl"}', LOOP_POLICY, "no such transcript"),
        (json.dumps({"transcript_path": str(SAMPLE_TRANSCRIPT)}), "no_such_policy", "no policy"),
        ("", LOOP_POLICY, "not JSON"),
    ],
)
def test_any_problem_is_one_line_and_go_on(stdin: str, policy: str, says: str) -> None:
    done = raw_hook(stdin, policy)
    assert done.returncode == 0 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("llm-forensics guard: ")
    assert says in done.stderr and "(going on)" in done.stderr


def test_a_transcript_that_is_not_one(tmp_path: Path) -> None:
    path = tmp_path / "notes.jsonl"
    path.write_bytes(b"\x00\x01 not a transcript\n")
    done = hook(path)
    assert done.returncode == 0 and done.stdout == "" and done.stderr.count("\n") == 1


def test_a_policy_of_ones_own_file(tmp_path: Path) -> None:
    policies = tmp_path / "mine.toml"
    policies.write_text(
        '[policy.two_bash]\ntype = "run_length"\nscope = "turn"\nwatch = "tool_key IS NOT NULL"'
        '\nkey = "tool_key"\nstop = 2\n'
    )
    done = raw_hook(
        json.dumps({"transcript_path": str(SAMPLE_TRANSCRIPT), "hook_event_name": "PostToolUse"}),
        "two_bash",
        "--policies",
        str(policies),
    )
    assert done.returncode == 0 and json.loads(done.stdout)["continue"] is False
    assert "two_bash" in json.loads(done.stdout)["stopReason"]


NUDGE = Decision("nudge", "c5", "p", "p: 5 calls in a row with the same tool_key", 5, 5)


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        ("PostToolUse", {"decision": "block", "reason": None}),
        ("UserPromptSubmit", {"hookSpecificOutput": {"hookEventName": "UserPromptSubmit"}}),
        ("PreToolUse", {"systemMessage": None}),
        ("Stop", {"systemMessage": None}),  # never a block there: it would mean "go on"
    ],
)
def test_a_nudge_is_said_as_each_event_takes_it(event: str, expected: dict[str, Any]) -> None:
    said = answer_json(Verdict(None, NUDGE, 5), event)
    assert said is not None
    assert set(said) == set(expected)
    text = json.dumps(said)
    assert "5 calls in a row" in text and '"continue"' not in text
    if "decision" in expected:
        assert said["decision"] == "block" and "5 calls in a row" in said["reason"]


def test_nothing_to_say_is_no_answer() -> None:
    assert answer_json(Verdict(None, None, 12), "PostToolUse") is None


def test_a_hook_without_its_policy_goes_on() -> None:
    """Not click's usage error: its exit code 2 would block the tool in Claude Code."""
    done = subprocess.run(
        [sys.executable, "-m", "analyzer", "guard", "claude-hook"],
        input="{}",
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0 and done.stdout == ""
    assert done.stderr == "llm-forensics guard: give --policy NAME (going on)\n"


# -- a stop ends with what it reaches (issue 45, cause 6) --------------------------------------


def sample_lines() -> list[dict[str, Any]]:
    return [json.loads(x) for x in SAMPLE_TRANSCRIPT.read_text(encoding="utf-8").splitlines()]


def next_turn(lines: list[dict[str, Any]], prompt: str, commands: list[str]) -> list[Any]:
    """A new prompt of the user after ``lines``, and a call running each Bash command."""
    call, start = lines[4], datetime(2025, 12, 18, 14, 10)
    out: list[dict[str, Any]] = [
        {**lines[0], "uuid": f"prompt-{prompt}", "timestamp": start.isoformat() + "Z"}
        | {"message": {"role": "user", "content": prompt}}
    ]
    for i, command in enumerate(commands):
        at = (start + timedelta(seconds=10 * (i + 1))).isoformat() + "Z"
        ident = f"{prompt}-{i}"
        block = {"type": "tool_use", "id": f"toolu_{ident}", "name": "Bash"}
        message = {**call["message"], "id": f"msg_{ident}"}
        message["content"] = [{**block, "input": {"command": command}}]
        out.append(
            {**call, "uuid": f"a-{ident}", "timestamp": at, "requestId": f"req_{ident}"}
            | {"message": message}
        )
    return out


def test_a_stop_in_force_ends_with_its_turn(tmp_path: Path) -> None:
    """The sample's loop stops its turn (the same Task call 3 times); after the user's new
    prompt the next call goes on, as the replay says, and the same loop in that turn is
    stopped again. (The hook fed the live guard the policy's columns only, without the turn:
    every later call of the session was stopped.)"""
    lines = sample_lines()
    path = tmp_path / "session.jsonl"

    def hook_after(extra: list[Any]) -> bool:
        path.write_text("".join(json.dumps(x) + "\n" for x in lines + extra), encoding="utf-8")
        return bool(backtest_stops(path)[1]) and stopped(hook(path, "opencode_doom_loop"))

    assert hook_after([])
    assert not hook_after(next_turn(lines, "now the tests", ["make test"]))
    assert hook_after(next_turn(lines, "again", ["make test"] * 3))


# The property: every per-turn preset, fed by the hook's own path (the transcript ingested,
# the replay's events for the policy, the verdict over the newest call), says over every call
# of a generated Claude Code session what the replay says: a stop in force exactly in the
# reach unit (its stream's turn) where the replay stopped, a nudge where it nudged.
PER_TURN = [p for p in all_policies() if p.reaches == "turn"]
T0 = datetime(2026, 3, 1, 9, 0)
SID = "7d1c2b3a-0000-4000-8000-00000000cafe"
REPLIES: dict[str, list[dict[str, Any]]] = {
    "ls": [{"type": "tool_use", "name": "Bash", "input": {"command": "ls"}}],
    "make": [{"type": "tool_use", "name": "Bash", "input": {"command": "make test"}}],
    "read": [{"type": "tool_use", "name": "Read", "input": {"file_path": "/src/a.py"}}],
    "ok": [{"type": "text", "text": "ok"}],
    "answer": [{"type": "text", "text": "The tests pass now: the parser dropped a line."}],
    "thinking": [{"type": "thinking", "thinking": "Let me think.", "signature": "s"}],
    "empty": [],
}


def cc_line(n: int, agent: str | None, kind: str, message: dict[str, Any]) -> str:
    """One line of a Claude Code transcript (the sample's shape), the ``n``-th, 2 s apart."""
    at = (T0 + timedelta(seconds=2 * n)).isoformat(timespec="milliseconds") + "Z"
    obj: dict[str, Any] = {
        "parentUuid": None,
        "isSidechain": agent is not None,
        "userType": "external",
        "cwd": "/home/dev/proj",
        "sessionId": SID,
        "version": "2.1.38",
        "type": kind,
        "uuid": f"u{n}",
        "timestamp": at,
        "message": message,
    }
    if agent is not None:
        obj["agentId"] = agent
    if kind == "assistant":
        obj["requestId"] = f"req_{n:04d}"
    return json.dumps(obj) + "\n"


Part = tuple[str | None, list[tuple[str, int]]]


def transcript(parts: list[Part]) -> str:
    """Each part a prompt (of the user, or of a sub-agent ``agent`` in a sidechain: its own
    stream) and its calls (a reply of ``REPLIES`` and its prompt's size), a tool's result
    after each tool call."""
    out, n = [], 0
    for agent, calls in parts:
        n += 1
        prompt = "go on" if agent is None else "Explore the parser."
        out.append(cc_line(n, agent, "user", {"role": "user", "content": prompt}))
        for reply, size in calls:
            n += 1
            tool = f"toolu_{n:04d}"
            blocks = [{**b, "id": tool} if b["type"] == "tool_use" else b for b in REPLIES[reply]]
            message = {
                "model": "claude-sonnet-4-5-20250929",
                "id": f"msg_{n:04d}",
                "type": "message",
                "role": "assistant",
                "content": blocks,
                "stop_reason": "tool_use" if reply in ("ls", "make", "read") else "end_turn",
                "usage": {
                    "input_tokens": size,
                    "cache_read_input_tokens": 1000,
                    "output_tokens": 3,
                },
            }
            out.append(cc_line(n, agent, "assistant", message))
            if message["stop_reason"] == "tool_use":
                n += 1
                result = [{"type": "tool_result", "tool_use_id": tool, "content": "done"}]
                out.append(cc_line(n, agent, "user", {"role": "user", "content": result}))
    return "".join(out)


def said_by_the_replay(events: list[dict[str, Any]], trips: list[tuple[str, str]]) -> list[Any]:
    """Over each call (in the replay's order): the stop in force in its turn (the call the
    replay stopped in that turn, up to this call, or None) and whether it nudged there."""
    stops = {c for c, action in trips if action == "stop"}
    nudges = {c for c, action in trips if action == "nudge"}
    stopped: dict[tuple[str, str], str] = {}
    out = []
    for e in events:
        assert e["turn_id"] is not None  # (every call here is after a prompt)
        unit = (e["stream_key"], e["turn_id"])
        if e["call_id"] in stops:
            stopped.setdefault(unit, e["call_id"])
        out.append((stopped.get(unit), e["call_id"] in nudges))
    return out


def said_by_the_hook(said: Verdict) -> tuple[str | None, bool]:
    return (said.stop.call_id if said.stop else None, said.nudge is not None)


call_st = st.tuples(st.sampled_from(sorted(REPLIES)), st.sampled_from([5, 9]))
part_st = st.tuples(
    st.sampled_from([None, None, "a1", "a2"]), st.lists(call_st, min_size=1, max_size=6)
)


def hook_against_replay(parts: list[Part], folder: Path) -> None:
    path = folder / "session.jsonl"
    path.write_text(transcript(parts), encoding="utf-8")
    with Forensics.open(":memory:") as lf:
        lf.ingest([path])
        with Replay(lf.store, None, None) as replay:  # every column: the replay's own
            events = replay.events()
            trips = {p.name: replay.trips(p) for p in PER_TURN}
        fed = {p.name: replay_events(lf.store, p) for p in PER_TURN}  # what the hook feeds
    newest = max(range(len(events)), key=lambda i: events[i]["ts"])
    for p in PER_TURN:
        want = said_by_the_replay(events, trips[p.name])
        assert [e["call_id"] for e in fed[p.name]] == [e["call_id"] for e in events]
        guard = Guard(p)  # the session as it grew: the verdict after each call
        got = [said_by_the_hook(verdict(guard, [e])) for e in fed[p.name]]
        assert got == want, p.name
        # and as the hook judges it in one call: a new guard fed the whole session
        assert said_by_the_hook(verdict(Guard(p), fed[p.name])) == want[newest], p.name


@settings(
    max_examples=8, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(parts=st.lists(part_st, min_size=2, max_size=4))
def test_the_hook_says_what_the_replay_says_across_turns(
    parts: list[Part], tmp_path_factory: pytest.TempPathFactory
) -> None:
    hook_against_replay(parts, tmp_path_factory.mktemp("turns"))


@pytest.mark.slow
@settings(
    max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(parts=st.lists(part_st, min_size=1, max_size=7))
def test_the_hook_says_what_the_replay_says_across_turns_deeper(
    parts: list[Part], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The same property, more and longer sessions (under CI, or --slow)."""
    hook_against_replay(parts, tmp_path_factory.mktemp("turns"))


# -- bounded work, and a command line that never blocks (issue 45, cause 10) --------------------


def test_the_hook_reads_at_most_64_mib_of_input() -> None:
    """A tool's input or response can be large: past 64 MiB the hook reads no further, says
    so in one line and goes on; a large one under the bound is judged as usual."""
    payload = {"transcript_path": str(SAMPLE_TRANSCRIPT), "hook_event_name": "PostToolUse"}
    large = json.dumps({**payload, "tool_response": {"stdout": "x" * (2 * MIB)}})
    assert stopped(raw_hook(large))
    huge = json.dumps({**payload, "tool_response": {"stdout": "x" * INPUT_LIMIT}})
    done = raw_hook(huge)
    assert done.returncode == 0 and done.stdout == ""
    assert (
        done.stderr
        == "llm-forensics guard: the hook's input is over 64 MiB: not judged (going on)\n"
    )


def test_the_input_is_read_up_to_the_bound_and_no_further() -> None:
    class Endless(io.RawIOBase):
        served = 0

        def readable(self) -> bool:
            return True

        def readinto(self, b: Any) -> int:
            b[:] = b"x" * len(b)
            self.served += len(b)
            return len(b)

    endless = Endless()
    with pytest.raises(ForensicsError, match="input is over 1,000 bytes"):
        read_input(io.BufferedReader(endless, 64), limit=1000)
    assert endless.served <= 1001 + 64  # (the bound and a byte, and one buffer at most)
    assert read_input(io.BytesIO(b'{"a": 1}'), limit=8) == '{"a": 1}'


@pytest.mark.parametrize(
    ("data", "limit", "start"),
    [
        (b"aaa\nbbb\nccc\n", 4, 8),  # the tail is exactly the last line
        (b"aaa\nbbb\nccc\n", 5, 8),  # it begins at the end of a line: the next one
        (b"aaa\nbbb\nccc\n", 3, 12),  # inside the last line: no whole line
        (b"aaa\nbbb\nccc\n", 12, 0),  # all of it
        (b"aaa\nbbb\nccc\n", 0, 0),  # no bound
        (b"aaa\nbbb\nccc", 4, 8),  # a last line not ended
    ],
)
def test_the_tail_begins_a_whole_line(data: bytes, limit: int, start: int) -> None:
    assert tail_start(io.BytesIO(data), len(data), limit) == start


def test_the_hook_judges_the_transcripts_last_mebibytes() -> None:
    """--tail-mib: a longer transcript is judged from the first whole line of its tail, as if
    the session began there, and the hook says so on stderr. The sample's loop is 3 calls
    (lines 3, 5, 7): a tail from line 3 holds them all and stops; one byte less begins inside
    line 3, is judged from line 4, holds two calls, and goes on."""
    text = SAMPLE_TRANSCRIPT.read_bytes()
    size = len(text)
    line3, line4 = (len(b"".join(text.splitlines(keepends=True)[:n])) for n in (2, 3))
    payload = json.dumps({"transcript_path": str(SAMPLE_TRANSCRIPT)})

    def tail(n: int) -> Any:
        return raw_hook(payload, LOOP_POLICY, "--tail-mib", repr(n / MIB))

    whole = tail(size - line3)
    assert whole.returncode == 0 and "continue" in whole.stdout
    assert whole.stderr == (
        f"llm-forensics guard: judged the transcript's last {size - line3:,} bytes of "
        f"{size:,} bytes (--tail-mib): what began before is not counted\n"
    )
    cut = tail(size - line3 - 1)
    assert cut.returncode == 0 and cut.stdout == "" and cut.stderr.count("\n") == 1
    assert f"judged the transcript's last {size - line4:,} bytes" in cut.stderr
    assert stopped(raw_hook(payload, LOOP_POLICY, "--tail-mib", "0"))  # 0: all of it
    assert stopped(raw_hook(payload, LOOP_POLICY, "--tail-mib", repr(size / MIB)))
    tiny = tail(10)  # inside the last line: no whole line, no call
    assert tiny.returncode == 0 and tiny.stdout == "" and "last 0 bytes" in tiny.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["--bogus"],
        ["--tail-mib", "many"],
        ["--tail-mib", "-1"],
        ["--policy"],
        ["stray"],
        ["--policies", "a.toml", "--policies"],
    ],
)
def test_a_mistake_in_the_hooks_command_line_goes_on(args: list[str]) -> None:
    """A usage error exits 2 in click, which in a PreToolUse hook blocks the tool: the hook's
    command says it in one line and exits 0 instead."""
    done = CliRunner().invoke(
        cli, ["guard", "claude-hook", "--policy", LOOP_POLICY, *args], input="{}"
    )
    assert done.exit_code == 0 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("llm-forensics guard: ")
    assert done.stderr.endswith("(going on)\n")
