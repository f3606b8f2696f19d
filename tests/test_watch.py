"""``llm-forensics watch`` (issue 36, "a watch over growing logs"): a log that grows line by
line is watched; the incident its loop makes is said once, in the first poll that starts after
the line that completes it; a policy's trip is said once, where the replay of the whole log
trips; ``--exec`` gets each alert as JSON on standard input, and its failure does not stop the
watch; Ctrl-C ends it with exit 130, the store readable after.

The logs are the sample's: the nexus3 session (``sample_data/nexus3``: an empty 200 stream,
then requests refused; its line 16 completes the ``empty_stream_cascade`` incident, line 17 the
``empty_assistant_persisted`` one) and the Claude Code session (``sample_data/claude-code``:
three identical Task calls, the ``repeated_tool_call`` incident, where ``opencode_doom_loop``
stops the turn).
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import IO

import pytest

from analyzer.api import home
from analyzer.api.home import StoreChoice
from analyzer.api.watch import (
    Alert,
    LiveGuards,
    NewIncident,
    Trip,
    Watcher,
    exec_argv,
    incident_key,
    run_exec,
    watch,
)
from analyzer.engine.store import open_store
from analyzer.guards.policy import all_policies
from analyzer.guards.replay import Replay
from tests.helpers import REPO, SAMPLE_DATA, env_of

NEXUS3 = SAMPLE_DATA / "nexus3" / "logs" / "2025-12-11_091502_a7c3" / "raw.jsonl"
COMPLETES = 16  # the nexus3 line that completes its empty_stream_cascade incident
WAIT_S = 60  # the most to wait for a line from a child (a loaded machine is slow)


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines(keepends=True)


def _append(path: Path, line: str) -> None:
    with path.open("a", encoding="utf-8") as f:
        f.write(line)


def _nexus3_log(tmp_path: Path, first: int) -> tuple[Path, list[str]]:
    """A nexus3 log folder holding the sample session's first ``first`` lines."""
    lines = _lines(NEXUS3)
    log = tmp_path / "logs" / "2025-12-11_091502_a7c3" / "raw.jsonl"
    log.parent.mkdir(parents=True)
    log.write_text("".join(lines[:first]), encoding="utf-8")
    return log, lines


class Timed:
    """A watcher whose polls are timed: when each began and what it said."""

    def __init__(self, watcher: Watcher) -> None:
        self.watcher = watcher
        self.polls: list[tuple[float, list[Alert]]] = []
        real = watcher.poll

        def poll() -> list[Alert]:
            began = time.monotonic()
            said = real()
            self.polls.append((began, said))
            return said

        watcher.poll = poll  # type: ignore[method-assign]


def test_a_growing_loop_is_said_once_in_the_first_poll_after_the_line_that_completes_it(
    tmp_path: Path,
) -> None:
    log, lines = _nexus3_log(tmp_path, COMPLETES - 1)
    watcher = Watcher(StoreChoice(str(tmp_path / "w.duckdb"), default=False), [str(log.parent)])
    before = watcher.start()
    assert not [i for i in before.incidents if i.detector == "empty_stream_cascade"]
    timed = Timed(watcher)
    said: list[Alert] = []
    stop = threading.Event()
    interval = 0.5
    thread = threading.Thread(target=watch, args=(watcher, interval, said.append, stop))
    thread.start()
    try:
        time.sleep(interval)
        written = time.monotonic()
        _append(log, lines[COMPLETES - 1])
        for line in lines[COMPLETES:]:  # the loop goes on growing, a line at a time
            time.sleep(0.1)
            _append(log, line)
        time.sleep(3 * interval + 1)
    finally:
        stop.set()
        thread.join()
    cascades = [
        a
        for a in said
        if isinstance(a, NewIncident) and a.incident.detector == "empty_stream_cascade"
    ]
    assert len(cascades) == 1, [a.line("UTC") for a in said]
    assert len({incident_key(a.incident) for a in said if isinstance(a, NewIncident)}) == len(
        [a for a in said if isinstance(a, NewIncident)]
    )
    # Said by the first poll that began after the line was written (or by one under way then).
    first_after = min(began for began, _ in timed.polls if began >= written)
    (began,) = [b for b, alerts in timed.polls if cascades[0] in alerts]
    assert began <= first_after
    # ... and that poll began within one interval of the line (polls here are shorter).
    longest = max(b2 - b1 for (b1, _), (b2, _) in zip(timed.polls, timed.polls[1:], strict=False))
    assert first_after - written <= max(interval, longest)
    assert "empty_stream_cascade" in cascades[0].line("UTC")
    assert "wasted so far" in cascades[0].line("UTC")


def _claude_code(tmp_path: Path) -> tuple[Path, list[str]]:
    """The sample's Claude Code projects, its main transcript cut to its first line."""
    projects = tmp_path / "projects"
    shutil.copytree(SAMPLE_DATA / "claude-code" / "projects", projects)
    (main,) = projects.glob("*/*.jsonl")
    lines = _lines(main)
    main.write_text(lines[0], encoding="utf-8")
    return main, lines


def test_a_policy_trip_is_said_once_where_the_replay_of_the_whole_log_trips(
    tmp_path: Path,
) -> None:
    main, lines = _claude_code(tmp_path)
    policy = [p for p in all_policies() if p.name == "opencode_doom_loop"]
    db = tmp_path / "w.duckdb"
    watcher = Watcher(StoreChoice(str(db), default=False), [str(tmp_path / "projects")], policy)
    assert watcher.start().trips == []
    said: list[Alert] = []
    for line in lines[1:]:
        _append(main, line)
        said += watcher.poll()
    said += watcher.poll()  # (the last call is complete once it stayed the same over a poll)
    said += watcher.poll()
    trips = [a for a in said if isinstance(a, Trip)]
    with open_store(db, read_only=True) as store, Replay(store, None, None) as replay:
        expected = replay.trips(policy[0])
    assert [(t.decision.call_id, t.decision.action) for t in trips] == expected
    assert len(trips) == 1
    line = trips[0].line("UTC")
    assert "stop opencode_doom_loop" in line and "so far" in line
    incidents = [a.incident.detector for a in said if isinstance(a, NewIncident)]
    assert incidents.count("repeated_tool_call") == 1


def test_exec_is_split_as_a_shell_splits_and_its_failures_are_one_line(tmp_path: Path) -> None:
    assert exec_argv("notify --title 'a loop'") == ["notify", "--title", "a loop"]
    with pytest.raises(ValueError):
        exec_argv("  ")
    out = tmp_path / "got.json"
    copy = [sys.executable, "-c", f"import sys; open({str(out)!r}, 'w').write(sys.stdin.read())"]
    assert run_exec(copy, '{"event": "incident"}\n') is None
    assert json.loads(out.read_text()) == {"event": "incident"}
    failing = [sys.executable, "-c", "import sys; sys.stderr.write('no webhook\\n'); sys.exit(5)"]
    assert run_exec(failing, "{}") == f"--exec {Path(sys.executable).name}: exit 5: no webhook"
    slow = [sys.executable, "-c", "import time; time.sleep(30)"]
    assert "ended after 0.5 s" in (run_exec(slow, "{}", timeout=0.5) or "")
    assert "could not run it" in (run_exec([str(tmp_path / "missing")], "{}") or "")


# The --exec command of the CLI test: each alert's JSON appended to a file; the first one
# fails (exit 5), the watch must go on.
_EXEC = """
import sys
from collections.abc import Callable
from pathlib import Path
out = Path(sys.argv[1])
first = not out.exists()
with out.open("a") as f:
    f.write(sys.stdin.read())
if first:
    sys.stderr.write("webhook down\\n")
    sys.exit(5)
"""


def _reader(stream: IO[str], into: queue.Queue[str]) -> None:
    for line in stream:
        into.put(line)


def _next_line(lines: queue.Queue[str], wanted: str) -> str:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=deadline - time.monotonic())
        except queue.Empty:
            break
        if wanted in line:
            return line
    raise AssertionError(f"no line with {wanted!r} in {WAIT_S} s")


def _wait_for(done: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT_S
    while not done():
        assert time.monotonic() < deadline, "waited too long"
        time.sleep(0.05)


def _readable(db: Path) -> bool:
    """Whether another process can open the store read-only now (not during a poll)."""
    code = f"from analyzer.engine.store import open_store; open_store({str(db)!r}, read_only=True)"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return (
        subprocess.run([sys.executable, "-c", code], env=env, capture_output=True).returncode == 0
    )


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SIGINT to a child")
def test_the_command_runs_exec_goes_on_after_its_failure_and_ctrl_c_ends_it(
    tmp_path: Path,
) -> None:
    log, lines = _nexus3_log(tmp_path, COMPLETES - 1)
    script = tmp_path / "hook.py"
    script.write_text(_EXEC, encoding="utf-8")
    got = tmp_path / "got.jsonl"
    db = tmp_path / "w.duckdb"
    env: dict[str, str] = {**os.environ, "PYTHONPATH": str(REPO)}
    command = f"{sys.executable} {script} {got}"
    child = subprocess.Popen(
        [
            *(sys.executable, "-m", "analyzer", "watch", str(log.parent), "--db", str(db)),
            *("--interval", "0.3", "--exec", command),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    out: queue.Queue[str] = queue.Queue()
    err: queue.Queue[str] = queue.Queue()
    for stream, into in ((child.stdout, out), (child.stderr, err)):
        threading.Thread(target=_reader, args=(stream, into), daemon=True).start()
    try:
        started = _next_line(err, "watching")
        assert "incidents" in started and "already there" in started
        for line in lines[COMPLETES - 1 :]:
            _append(log, line)
        assert "empty_stream_cascade" in _next_line(out, "incident")
        assert "--exec" in _next_line(err, "exit 5: webhook down")
        assert "empty_assistant_persisted" in _next_line(out, "incident")
        _wait_for(lambda: got.exists() and len(got.read_text().splitlines()) == 2)
        _wait_for(lambda: _readable(db))  # between polls, another process reads the store
    finally:
        child.send_signal(signal.SIGINT)
        code = child.wait(WAIT_S)
    assert code == 130
    assert "stopped watching" in _next_line(err, "stopped")
    said = [json.loads(x) for x in got.read_text().splitlines()]
    assert [(x["event"], x["detector"]) for x in said] == [
        ("incident", "empty_stream_cascade"),
        ("incident", "empty_assistant_persisted"),
    ]
    assert all(isinstance(x["wasted_usd"], int | float) for x in said)
    with open_store(db, read_only=True) as store:
        assert store.scalar("SELECT count(*) FROM incidents") == 2


def test_with_no_path_it_watches_the_default_places_into_the_default_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_home = tmp_path / "home"
    for name, value in env_of(fake_home, XDG_DATA_HOME=str(tmp_path / "data")).items():
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    main, lines = _claude_code(fake_home / ".claude")
    choice = home.choose(None)
    assert choice.default and choice.path.startswith(str(tmp_path / "data"))
    watcher = Watcher(choice, [])
    assert watcher.inputs().labels == {
        str(fake_home / ".claude" / "projects"): "~/.claude/projects"
    }
    assert watcher.start().incidents  # the sub-agents' empty results: already there
    for line in lines[1:]:
        _append(main, line)
    said: list[Alert] = []
    watch(watcher, 0.05, said.append, polls=2)
    assert [a.incident.detector for a in said if isinstance(a, NewIncident)] == [
        "repeated_tool_call"
    ]
    assert choice.copy.exists()  # the copy for readers, made as the watch ended


def _event(call_id: str, tool: str, second: int) -> dict[str, object]:
    return {
        "call_id": call_id,
        "stream_key": "s",
        "session_id": "s",
        "turn_id": "t",
        "ts": datetime(2026, 1, 1, 12, 0, second),
        "response_kind": "tool_call",
        "tool_key": tool,
        "cost_usd": Decimal("0.01"),
    }


def test_live_guards_feed_new_calls_only_and_start_again_when_a_call_lands_earlier() -> None:
    (policy,) = [p for p in all_policies() if p.name == "opencode_doom_loop"]
    guards = LiveGuards([policy])
    loop = [_event(f"c{i}", "Read a.py", 10 + i) for i in range(3)]
    assert guards.feed(loop[:2]) == []  # c1 is the last call: not yet complete
    assert guards.pending and [e["call_id"] for e in guards.fed["s"]] == ["c0"]
    tripped = guards.feed(loop)  # c1 complete (a later call), c2 not yet
    assert tripped == [] and guards.pending
    (stop,) = guards.feed(loop)  # c2 unchanged over a poll: complete, the third in a row
    assert (stop.call_id, stop.action) == ("c2", "stop") and not guards.pending
    assert guards.rebuilt == 0
    earlier = [_event("b0", "Edit b.py", 5), *loop]  # a call before those fed
    assert [(d.call_id, d.action) for d in guards.feed(earlier)] == [("c2", "stop")]
    assert guards.rebuilt == 1  # (the watch says that trip once: it is keyed)
    changed = [*earlier[:-1], {**loop[-1], "tool_key": "Read b.py"}]  # a fuller c2, read again
    assert guards.feed(changed) == [] and guards.rebuilt == 2
