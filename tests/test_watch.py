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
from typing import IO, Any

import pytest

from analyzer import pipeline
from analyzer.api import home
from analyzer.api.exec_runner import ExecRunner
from analyzer.api.home import StoreChoice
from analyzer.api.watch import (
    Alert,
    LiveGuards,
    NewIncident,
    Trip,
    Watcher,
    ended_by_signals,
    exec_argv,
    incident_key,
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


def _run_once(argv: list[str], payload: str = "{}", **kw: float) -> list[str]:
    """What an ``ExecRunner`` says of one run of ``argv`` (closed once the run is over)."""
    said: list[str] = []
    with ExecRunner(argv, said.append, **kw) as runner:  # type: ignore[arg-type]
        runner.submit(payload)
        assert runner.idle(WAIT_S)
    return said


def test_exec_is_split_as_a_shell_splits_and_its_failures_are_one_line(tmp_path: Path) -> None:
    assert exec_argv("notify --title 'a loop'") == ["notify", "--title", "a loop"]
    with pytest.raises(ValueError):
        exec_argv("  ")
    out = tmp_path / "got.json"
    copy = [sys.executable, "-c", f"import sys; open({str(out)!r}, 'w').write(sys.stdin.read())"]
    assert _run_once(copy, '{"event": "incident"}\n') == []
    assert json.loads(out.read_text()) == {"event": "incident"}
    failing = [sys.executable, "-c", "import sys; sys.stderr.write('no webhook\\n'); sys.exit(5)"]
    assert _run_once(failing) == [f"--exec {Path(sys.executable).name}: exit 5: no webhook"]
    slow = [sys.executable, "-c", "import time; time.sleep(30)"]
    (said,) = _run_once(slow, timeout=0.5)
    assert "still running after 0.5 s: ended" in said
    (said,) = _run_once([str(tmp_path / "missing")])
    assert "could not run it" in said


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


def _reader(stream: IO[str], into: queue.Queue[str | None]) -> None:
    for line in stream:
        into.put(line)
    into.put(None)  # the stream ended: no line will come


def _next_line(lines: queue.Queue[str | None], wanted: str) -> str:
    """The next line holding ``wanted`` (fails at once when the stream ends without one)."""
    deadline = time.monotonic() + WAIT_S
    seen: list[str] = []
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=deadline - time.monotonic())
        except queue.Empty:
            break
        if line is None:
            lines.put(None)
            raise AssertionError(f"the stream ended with no line with {wanted!r}: {seen}")
        if wanted in line:
            return line
        seen.append(line)
    raise AssertionError(f"no line with {wanted!r} in {WAIT_S} s: {seen}")


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


class Watching:
    """``llm-forensics watch ARGS`` run as a user runs it, in a process of its own: its lines
    on stdout and stderr as they come (``said``, ``warned``), and how it ends (``stop``)."""

    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        self.child = subprocess.Popen(
            [sys.executable, "-m", "analyzer", "watch", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
        )
        self.out: queue.Queue[str | None] = queue.Queue()
        self.err: queue.Queue[str | None] = queue.Queue()
        for stream, into in ((self.child.stdout, self.out), (self.child.stderr, self.err)):
            threading.Thread(target=_reader, args=(stream, into), daemon=True).start()

    def said(self, wanted: str) -> str:
        return _next_line(self.out, wanted)

    def warned(self, wanted: str) -> str:
        return _next_line(self.err, wanted)

    def stop(self, sig: int = signal.SIGINT) -> int:
        if self.child.poll() is None:
            self.child.send_signal(sig)
        return self.child.wait(WAIT_S)

    def __enter__(self) -> Watching:
        return self

    def __exit__(self, *_: object) -> None:
        if self.child.poll() is None:
            self.child.kill()
            self.child.wait(WAIT_S)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SIGINT to a child")
def test_the_command_runs_exec_goes_on_after_its_failure_and_ctrl_c_ends_it(
    tmp_path: Path,
) -> None:
    log, lines = _nexus3_log(tmp_path, COMPLETES - 1)
    script = tmp_path / "hook.py"
    script.write_text(_EXEC, encoding="utf-8")
    got = tmp_path / "got.jsonl"
    db = tmp_path / "w.duckdb"
    command = f"{sys.executable} {script} {got}"
    args = (str(log.parent), "--db", str(db), "--interval", "0.3", "--exec", command)
    with Watching(*args) as watching:
        started = watching.warned("watching")
        assert "incidents" in started and "already there" in started
        for line in lines[COMPLETES - 1 :]:
            _append(log, line)
        assert "empty_stream_cascade" in watching.said("incident")
        assert "--exec" in watching.warned("exit 5: webhook down")
        assert "empty_assistant_persisted" in watching.said("incident")
        _wait_for(lambda: got.exists() and len(got.read_text().splitlines()) == 2)
        _wait_for(lambda: _readable(db))  # between polls, another process reads the store
        assert watching.stop() == 130
        assert "stopped watching" in watching.warned("stopped")
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


# Issue 45, cause 9 (the watch's part) and cause 12's SIGTERM: --exec beside the polls, in a
# process group of its own, its output bounded; a place that disappears waited for; SIGTERM
# ending the watch as Ctrl-C does. Each test drives the real command, and fails on the watch
# before these changes (the test says how).

LINUX = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="signals, process groups and /proc"
)


def _running(pid: int) -> bool:
    """Whether process ``pid`` runs (one dead but not yet reaped, a zombie, does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8")
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def _peak_mb(pid: int) -> float:
    """Process ``pid``'s peak resident memory so far (VmHWM), in MB."""
    status = Path(f"/proc/{pid}/status").read_text(encoding="utf-8")
    (kb,) = [line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:")]
    return int(kb) / 1024


def _pid(path: Path) -> int:
    """The process id a program wrote to ``path`` (waited for)."""
    _wait_for(lambda: path.exists() and path.read_text().strip() != "")
    return int(path.read_text())


# The --exec program of the first test: each alert appended to a file; the first run then
# writes its pid and waits to be released (for a minute at most).
_HELD = """
import os, sys, time
from pathlib import Path
got, pid, release = (Path(a) for a in sys.argv[1:4])
first = not got.exists()
with got.open("a") as f:
    f.write(sys.stdin.read())
if first:
    pid.write_text(str(os.getpid()))
    deadline = time.monotonic() + 60
    while not release.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
"""


@LINUX
def test_exec_does_not_hold_up_the_polls_and_gets_the_alerts_in_order(tmp_path: Path) -> None:
    """Before: the poll waited for the program (30 s at most, then killed it), so the next
    incident came only once the first program had been killed."""
    log, lines = _nexus3_log(tmp_path, COMPLETES - 1)
    script = tmp_path / "held.py"
    script.write_text(_HELD, encoding="utf-8")
    got, pid_file, release = tmp_path / "got.jsonl", tmp_path / "pid", tmp_path / "release"
    command = f"{sys.executable} {script} {got} {pid_file} {release}"
    args = (str(log.parent), "--db", str(tmp_path / "w.duckdb"), "--interval", "0.3")
    with Watching(*args, "--exec", command) as watching:
        watching.warned("watching")
        _append(log, lines[COMPLETES - 1])
        assert "empty_stream_cascade" in watching.said("incident")
        first = _pid(pid_file)  # the first alert's program runs, held
        for line in lines[COMPLETES:]:
            _append(log, line)
        assert "empty_assistant_persisted" in watching.said("incident")
        assert _running(first), "the second incident came only after the first --exec ended"
        assert len(got.read_text().splitlines()) == 1  # the second waits its turn
        release.touch()
        _wait_for(lambda: len(got.read_text().splitlines()) == 2)
        assert watching.stop() == 130
    said = [json.loads(x)["detector"] for x in got.read_text().splitlines()]
    assert said == ["empty_stream_cascade", "empty_assistant_persisted"]


@LINUX
def test_a_program_that_exits_at_once_leaving_a_child_is_said_as_it_exited(
    tmp_path: Path,
) -> None:
    """Before: the watch waited for the end of the program's stderr, which the child held:
    "ended after 30 s without finishing" for a program that had exited at once, exit 3."""
    log, lines = _nexus3_log(tmp_path, COMPLETES - 1)
    pid_file = tmp_path / "pid"
    command = f"sh -c 'sleep 120 & echo $! > {pid_file}; echo webhook down >&2; exit 3'"
    args = (str(log.parent), "--db", str(tmp_path / "w.duckdb"), "--interval", "0.3")
    with Watching(*args, "--exec", command) as watching:
        watching.warned("watching")
        for line in lines[COMPLETES - 1 :]:
            _append(log, line)
        watching.said("empty_stream_cascade")
        failed = watching.warned("--exec")
        assert "--exec sh: exit 3: webhook down" in failed and "ended after" not in failed
        assert _running(_pid(pid_file))  # its child, left running: its time is not up
        assert watching.stop() == 130


@LINUX
def test_what_the_program_left_running_is_ended_with_the_watch(tmp_path: Path) -> None:
    """Before: the program's child (in the watch's own process group, out of its reach) ran on
    after the watch ended."""
    log, lines = _nexus3_log(tmp_path, COMPLETES - 1)
    pid_file = tmp_path / "pid"
    command = f"sh -c 'sleep 120 & echo $! > {pid_file}'"
    args = (str(log.parent), "--db", str(tmp_path / "w.duckdb"), "--interval", "0.3")
    left = None
    try:
        with Watching(*args, "--exec", command) as watching:
            watching.warned("watching")
            for line in lines[COMPLETES - 1 :]:
                _append(log, line)
            watching.said("empty_stream_cascade")
            left = _pid(pid_file)
            assert _running(left)
            assert watching.stop() == 130
        _wait_for(lambda: not _running(left))
    finally:
        if left is not None and _running(left):
            os.kill(left, signal.SIGKILL)


@LINUX
def test_at_the_timeout_the_programs_whole_group_is_ended_and_said_once(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    said: list[str] = []
    with ExecRunner(
        ["sh", "-c", f"sleep 120 & echo $! > {pid_file}; sleep 120"], said.append, timeout=0.5
    ) as runner:
        runner.submit("{}")
        child = _pid(pid_file)
        assert runner.idle(WAIT_S)
        assert said == ["--exec sh: still running after 0.5 s: ended"]
        _wait_for(lambda: not _running(child))  # its child too, while the watch goes on
    # A program that exits at once: what it left is ended at the timeout, the watch going on.
    said.clear()
    with ExecRunner(
        ["sh", "-c", f"sleep 120 & echo $! > {pid_file}"], said.append, timeout=0.5
    ) as runner:
        pid_file.unlink()
        runner.submit("{}")
        child = _pid(pid_file)
        assert runner.idle(WAIT_S) and said == []
        _wait_for(lambda: not _running(child))
        _wait_for(lambda: len(said) == 1)
        assert said == ["--exec sh: what it left running was ended, 0.5 s after it started"]


def test_alerts_past_those_waiting_are_not_handed_to_the_program_and_said_once(
    tmp_path: Path,
) -> None:
    script = tmp_path / "held.py"
    script.write_text(_HELD, encoding="utf-8")
    got, pid_file, release = tmp_path / "got", tmp_path / "pid", tmp_path / "release"
    name = Path(sys.executable).name
    said: list[str] = []
    argv = [sys.executable, str(script), str(got), str(pid_file), str(release)]
    with ExecRunner(argv, said.append, waiting=2) as runner:
        runner.submit("1\n")
        _pid(pid_file)  # the first runs, held: two wait, the next two are not kept
        for n in range(2, 6):
            runner.submit(f"{n}\n")
        assert said == [
            f"--exec {name}: 2 alerts already wait for it: the next ones are not handed to it "
            "until it catches up"
        ]
        release.touch()
        assert runner.idle(WAIT_S)
        runner.submit("6\n")
        assert runner.idle(WAIT_S)
    assert got.read_text().split() == ["1", "2", "3", "6"]
    assert said[1:] == [f"--exec {name}: 2 alerts were not handed to it"]


# The --exec program of the memory test: 200 MB on stderr, then why it failed.
_LOUD = """
import sys
junk = b"x" * (1 << 20)
for _ in range(200):
    sys.stderr.buffer.write(junk)
sys.stderr.buffer.write(b"\\nwebhook down\\n")
sys.exit(4)
"""


@LINUX
def test_a_program_writing_200_mb_on_stderr_costs_the_watch_a_few_kb(tmp_path: Path) -> None:
    """Before: its whole stderr kept, decoded and split: the watch's peak grew by about four
    times what the program wrote (500 MB took it to 5 GB)."""
    log, lines = _nexus3_log(tmp_path, COMPLETES - 1)
    script = tmp_path / "loud.py"
    script.write_text(_LOUD, encoding="utf-8")
    args = (str(log.parent), "--db", str(tmp_path / "w.duckdb"), "--interval", "0.3")
    with Watching(*args, "--exec", f"{sys.executable} {script}") as watching:
        watching.warned("watching")
        for line in lines[COMPLETES - 1 :]:
            _append(log, line)
        watching.said("empty_stream_cascade")
        before = _peak_mb(watching.child.pid)
        failed = watching.warned("--exec")
        grew = _peak_mb(watching.child.pid) - before
        assert grew < 64, f"the watch's peak grew by {grew:.0f} MB"
        assert "exit 4: webhook down" in failed
        assert f"(its last 4,096 bytes of stderr kept of {200 * 2**20 + 14:,})" in failed
        assert watching.stop() == 130


@LINUX
def test_a_watched_folder_that_disappears_is_said_once_and_waited_for(tmp_path: Path) -> None:
    """Before: the next poll failed (`no such file or folder`, exit 3) and the watch ended."""
    log, lines = _nexus3_log(tmp_path, COMPLETES - 1)
    logs = log.parent.parent
    args = (str(logs), "--db", str(tmp_path / "w.duckdb"), "--interval", "0.2")
    with Watching(*args) as watching:
        watching.warned("watching")
        shutil.rmtree(logs)
        assert f"watch: {logs} is gone: watching for it to come back" in watching.warned("gone")
        # It comes back, with another session (moved in whole), and is read again.
        staged = tmp_path / "staged" / "2025-12-11_101502_b0b0" / "raw.jsonl"
        staged.parent.mkdir(parents=True)
        staged.write_text("".join(lines), encoding="utf-8")
        (tmp_path / "staged").rename(logs)
        assert f"watch: {logs} is back" in watching.warned("back")
        assert "b0b0" in watching.said("empty_stream_cascade")
        assert watching.stop() == 130
        assert "stopped watching" in watching.warned("stopped")
    said = [line for line in iter(watching.err.get, None) if "gone" in line]
    assert said == [], "said once"


@LINUX
def test_sigterm_ends_the_watch_removing_its_throwaway_store_and_its_programs(
    tmp_path: Path,
) -> None:
    """Before: SIGTERM killed the watch where it stood (exit -15): its throwaway store stayed
    in the temporary folder, the --exec program's child ran on."""
    log, lines = _nexus3_log(tmp_path, COMPLETES - 1)
    temp = tmp_path / "temp"
    temp.mkdir()
    pid_file = tmp_path / "pid"
    command = f"sh -c 'sleep 120 & echo $! > {pid_file}; wait'"
    left = None
    try:
        with Watching(
            str(log.parent), "--interval", "0.3", "--exec", command, env={"TMPDIR": str(temp)}
        ) as watching:
            assert "a throwaway store" in watching.warned("watching")
            assert [p.name[:14] for p in temp.iterdir()] == ["llm-forensics-"]
            for line in lines[COMPLETES - 1 :]:
                _append(log, line)
            watching.said("empty_stream_cascade")
            left = _pid(pid_file)  # the program runs, waiting for its child
            assert watching.stop(signal.SIGTERM) == 143
            assert "stopped watching (SIGTERM)" in watching.warned("stopped")
        assert list(temp.iterdir()) == []
        _wait_for(lambda: not _running(left))
    finally:
        if left is not None and _running(left):
            os.kill(left, signal.SIGKILL)


@LINUX
def test_a_signal_ignored_as_the_watch_starts_stays_ignored_and_the_handlers_come_back() -> None:
    """``nohup llm-forensics watch`` goes on after a hangup; SIGTERM ends it as Ctrl-C does."""
    assert threading.current_thread() is threading.main_thread()
    before = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with ended_by_signals() as ended:
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
            os.kill(os.getpid(), signal.SIGHUP)  # (nothing happens)
            with pytest.raises(KeyboardInterrupt):
                os.kill(os.getpid(), signal.SIGTERM)
                _wait_for(lambda: False)  # (the handler raises in the main thread)
            assert (ended.signum, ended.exit_code) == (signal.SIGTERM, 143)
            assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN  # while it ends
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, before)


def test_a_folder_gone_while_a_poll_reads_it_is_left_to_the_next_poll(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log, _ = _nexus3_log(tmp_path, COMPLETES - 1)
    logs = log.parent.parent
    told: list[str] = []
    choice = StoreChoice(str(tmp_path / "w.duckdb"), default=False)
    watcher = Watcher(choice, [str(logs)], tell=told.append)
    watcher.start()
    real = pipeline.refresh

    def racing(*args: Any, **kwargs: Any) -> Any:
        shutil.rmtree(logs)  # (between the poll's look and its walk)
        return real(*args, **kwargs)

    monkeypatch.setattr(pipeline, "refresh", racing)
    assert watcher.poll() == [] and told == []
    monkeypatch.setattr(pipeline, "refresh", real)
    assert watcher.poll() == []
    assert told == [f"{logs} is gone: watching for it to come back"]


def test_when_every_watched_place_is_gone_the_watch_says_so_once_and_waits(
    tmp_path: Path,
) -> None:
    places = [tmp_path / "a", tmp_path / "b"]
    for place in places:
        place.mkdir()
    told: list[str] = []
    choice = StoreChoice(str(tmp_path / "w.duckdb"), default=False)
    watcher = Watcher(choice, [str(p) for p in places], tell=told.append)
    watcher.start()
    for place in places:
        place.rmdir()
    watcher.poll()
    watcher.poll()
    assert told == [
        f"{places[0]} is gone: watching for it to come back",
        f"{places[1]} is gone: watching for it to come back",
        "none of the places watched is there: waiting for them (Ctrl-C to stop)",
    ]
    places[1].mkdir()
    watcher.poll()
    assert told[3:] == [f"{places[1]} is back"]
