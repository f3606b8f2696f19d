"""``guard claude-hook``, run as Claude Code runs a command hook: a subprocess given the
documented JSON on stdin (session_id, transcript_path, cwd, hook_event_name...). It stops a
real loop at the call the backtest says, lets healthy real sessions through, and never fails
the user's work by its own error."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from analyzer.api.claude_hook import Verdict, answer_json
from analyzer.engine.store import open_store
from analyzer.guards.guard import Decision
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
