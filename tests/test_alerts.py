"""Alerts sent once (issue 49): a cap's 50/80/100% and a new incident each reach the channels
once ever, across processes, through the record of alerts sent (``analyzer.api.alerts``); a
webhook down is one line and the caller goes on; ``--notify`` runs ``notify-send`` with the
line; ``watch --webhook`` sends a new incident once, even with two watches at once.

The webhook is a local HTTP server (``http.server`` in a thread) that keeps each JSON body."""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from analyzer.api import alerts
from analyzer.api.alerts import (
    AlertBook,
    AlertSettings,
    Notifier,
    alert_after_call,
    alert_once,
    crossed,
)
from analyzer.api.claude_hook import HookAnswer
from analyzer.api.home import StoreChoice
from analyzer.api.watch import CapReached, Watcher
from analyzer.cli.main import cli
from analyzer.guards.guard import Decision
from analyzer.guards.policy import all_policies
from tests.helpers import REPO, shared_samples
from tests.test_watch import COMPLETES, WAIT_S, Watching, _append, _claude_code, _nexus3_log

LEVEL_WORDS = ("50%", "80%", "100%")


class Hook:
    """A local webhook: the JSON bodies it got, in order."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        got = self.bodies

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                assert self.headers["Content-Type"] == "application/json"
                got.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *_: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/SECRET-PATH"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def hook() -> Iterator[Hook]:
    h = Hook()
    yield h
    h.close()


def test_each_level_of_a_cap_arrives_once_as_the_value_grows_call_by_call(
    hook: Hook, tmp_path: Path
) -> None:
    book = AlertBook(tmp_path / "alerts.jsonl")
    notifier = Notifier(AlertSettings(webhook=hook.url))
    values = [0.0, 1.0, 2.0, 2.6, 3.9, 4.1, 4.9, 5.2, 6.0]
    sent = []
    for before, after in itertools.pairwise(values):
        for a in crossed("session_cost_cap", 5.0, before, after, period_key="session:s1"):
            sent += [a.key] if alert_once(book, notifier, a) else []
    # The same values again (a poll that sees them twice): nothing more.
    for before, after in itertools.pairwise(values):
        for a in crossed("session_cost_cap", 5.0, before, after, period_key="session:s1"):
            assert not alert_once(book, notifier, a)
    texts = [b["text"] for b in hook.bodies]
    assert len(texts) == 3 and len(sent) == 3
    for text, pct in zip(texts, LEVEL_WORDS, strict=True):
        assert f"{pct} of its cap" in text and "session s1" in text
    assert [b["level"] for b in hook.bodies] == [0.5, 0.8, 1.0]
    assert [b["value"] for b in hook.bodies] == [2.6, 4.1, 5.2]
    assert book.sent() == set(sent)
    # Another period of the same cap has levels of its own.
    again = crossed("session_cost_cap", 5.0, 0.0, 6.0, period_key="session:s2")
    assert [alert_once(book, notifier, a) for a in again] == [True, True, True]


def test_a_jump_over_levels_sends_each_in_order() -> None:
    got = crossed("c", 10.0, 1.0, 9.0, period_key="day:2026-01-05")
    assert [a.fields["level"] for a in got] == [0.5, 0.8]
    assert crossed("c", 10.0, 9.0, 9.5) == [] and crossed("c", 10.0, 9.0, None) == []


_FEEDER = """
import sys, time
from pathlib import Path
from analyzer.api.alerts import AlertBook, AlertSettings, Notifier, alert_after_call
from analyzer.guards.guard import Decision
book, url, go = AlertBook(Path(sys.argv[1])), sys.argv[2], Path(sys.argv[3])
while not go.exists():
    time.sleep(0.005)
notifier = Notifier(AlertSettings(webhook=url))
before = None
for i, value in enumerate([1.0, 2.6, 3.0, 4.2, 4.8, 5.5]):
    action = "stop" if value > 5 else "continue"
    d = Decision(action, f"call-{i}", "session_cost_cap", "over $5" if value > 5 else "", value)
    for a in alert_after_call(book, notifier, d, 5.0, before, "session:s1"):
        print(a.key)
    before = value
"""


def test_two_processes_feeding_the_same_crossings_send_each_once(
    hook: Hook, tmp_path: Path
) -> None:
    script = tmp_path / "feed.py"
    script.write_text(_FEEDER, encoding="utf-8")
    record, go = tmp_path / "data" / "alerts.jsonl", tmp_path / "go"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    argv = [sys.executable, str(script), str(record), hook.url, str(go)]
    children = [
        subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, text=True) for _ in range(4)
    ]
    time.sleep(0.5)
    go.touch()  # (all of them at once)
    said = [child.communicate(timeout=WAIT_S)[0].split() for child in children]
    assert all(child.returncode == 0 for child in children)
    texts = [b["text"] for b in hook.bodies]
    assert len(texts) == 4, texts  # 50%, 80%, 100% and the stop, once each
    assert sorted(k for keys in said for k in keys) == sorted(AlertBook(record).sent())
    for pct in LEVEL_WORDS:
        assert len([t for t in texts if f"{pct} of its cap" in t]) == 1
    (stop,) = [b for b in hook.bodies if b["event"] == "trip"]
    assert stop["action"] == "stop" and "over $5" in stop["text"]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_webhook_down_is_one_line_and_the_caller_goes_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(alerts, "RETRY_WAIT", 0.01)
    url = f"http://127.0.0.1:{_closed_port()}/services/T0/B0/SECRET"
    book = AlertBook(tmp_path / "alerts.jsonl")
    d = Decision("continue", "call-1", "session_cost_cap", "", 4.5)
    sent = alert_after_call(book, Notifier(AlertSettings(webhook=url)), d, 5.0, 1.0, "session:s")
    assert [a.fields["level"] for a in sent] == [0.5, 0.8]  # claimed: never sent twice
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and all("--webhook http://127.0.0.1:" in x for x in err)
    assert all("80%" in x or "50%" in x for x in err)
    assert not any("SECRET" in x for x in err)  # (a chat webhook's path is its secret)


@pytest.mark.skipif(sys.platform == "darwin", reason="macOS notifies with osascript")
def test_notify_runs_notify_send_with_the_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir, got = tmp_path / "bin", tmp_path / "got.json"
    bin_dir.mkdir()
    fake = bin_dir / "notify-send"
    fake.write_text(
        f"#!{sys.executable}\nimport json, sys\n"
        f"open({str(got)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n",
        encoding="utf-8",
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    book = AlertBook(tmp_path / "alerts.jsonl")
    (alert,) = crossed("session_cost_cap", 5.0, 2.0, 3.0, period_key="session:s1")
    notifier = Notifier(AlertSettings(desktop=True))
    assert alert_once(book, notifier, alert) and not alert_once(book, notifier, alert)
    (args,) = [json.loads(x) for x in got.read_text().splitlines()]
    assert args == ["llm-forensics", alert.line]


def test_with_no_notifier_there_notify_is_skipped_and_said_once_with_verbose(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    said: list[str] = []
    notifier = Notifier(AlertSettings(desktop=True, verbose=True), said.append)
    for a in crossed("c", 1.0, 0.0, 1.0):
        notifier.send(a)
    assert len(said) == 1 and "--notify" in said[0]


def test_watch_says_each_level_of_a_budget_once_where_the_sessions_dollars_reach_it(
    tmp_path: Path,
) -> None:
    main, lines = _claude_code(tmp_path)
    (preset,) = [p for p in all_policies() if p.name == "session_cost_cap"]
    cap = Decimal("0.03")
    policy = dataclasses.replace(preset, stop=float(cap))
    db = tmp_path / "w.duckdb"
    watcher = Watcher(StoreChoice(str(db), default=False), [str(tmp_path / "projects")], [policy])
    watcher.start()
    said = []
    for line in lines[1:]:
        _append(main, line)
        said += watcher.poll()
    said += watcher.poll() + watcher.poll()
    caps = [a for a in said if isinstance(a, CapReached)]
    # Where the main session's dollars, added up call by call, first reach each level.
    spent, expected = Decimal(0), []
    for e in watcher._events:
        if e["session_id"] == main.stem:
            before, spent = spent, spent + Decimal(e["cost_usd"] or 0)
            expected += [lv for lv in (0.5, 0.8, 1.0) if before / cap < lv <= spent / cap]
    main_caps = [c for c in caps if c.alert.fields["period"] == f"session:{main.stem}"]
    assert [c.alert.fields["level"] for c in main_caps] == expected == [0.5, 0.8, 1.0]
    assert len({c.alert.key for c in caps}) == len(caps)
    assert "100% of its cap reached" in main_caps[-1].line("UTC")
    # A watch started again over the same store says none of them again.
    again = Watcher(StoreChoice(str(db), default=False), [str(tmp_path / "projects")], [policy])
    assert again.start().caps and not [a for a in again.poll() if isinstance(a, CapReached)]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SIGINT to a child")
def test_two_watches_with_a_webhook_send_a_new_incident_once(hook: Hook, tmp_path: Path) -> None:
    log, lines = _nexus3_log(tmp_path, COMPLETES - 1)
    args = [str(log.parent), "--interval", "0.3", "--webhook", hook.url]
    with Watching(*args) as one, Watching(*args) as two:
        one.warned("watching")
        two.warned("watching")
        for line in lines[COMPLETES - 1 :]:
            _append(log, line)
        # Each watch says the incident on its own output ...
        assert "empty_stream_cascade" in one.said("empty_stream_cascade")
        assert "empty_stream_cascade" in two.said("empty_stream_cascade")
        one.said("empty_assistant_persisted")
        two.said("empty_assistant_persisted")
        assert one.stop() == 130 and two.stop() == 130
    # ... and the webhook gets it once.
    detectors = [b["detector"] for b in hook.bodies]
    assert sorted(detectors) == ["empty_assistant_persisted", "empty_stream_cascade"]
    assert all("incident" in b["text"] and b["event"] == "incident" for b in hook.bodies)


def test_the_hooks_alert_options_reach_it_and_a_bad_one_is_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import analyzer.cli.guard_command as guard_command

    got: list[Any] = []

    def fake(*args: Any, alerts: AlertSettings | None = None) -> HookAnswer:
        got.append(alerts)
        return HookAnswer()

    monkeypatch.setattr(guard_command, "run_hook", fake)
    runner = CliRunner()
    args = ["guard", "claude-hook", "--policy", "session_cost_cap"]
    ok = runner.invoke(
        cli, [*args, "--webhook", "https://example.org/x", "--notify", "--alert-at", "90,100"]
    )
    assert ok.exit_code == 0, ok.output
    assert got[-1] == AlertSettings("https://example.org/x", True, (0.9, 1.0))
    bad = runner.invoke(cli, [*args, "--webhook", "file:///etc/passwd"])
    assert bad.exit_code == 0 and got[-1] is None
    assert "going on without alerts" in bad.output


def test_the_hook_alerts_each_level_of_a_cap_and_its_stop_once(tmp_path: Path) -> None:
    """Issue 49's acceptance: a real session crossing a $1 cap, fed to the hook as it grows,
    two hook processes at once at every step: the webhook gets 50%, 80% and 100% of the cap and
    the stop, each once."""
    source = (
        shared_samples() / "real-loops/claude_code/Strawhat404__TASK-31/sessions__session-2.jsonl"
    )
    data = source.read_bytes()
    transcript = tmp_path / "s.jsonl"
    transcript.write_bytes(b"")
    caps = tmp_path / "caps.toml"
    caps.write_text(
        '[policy.one_dollar]\ntype = "budget"\nscope = "session"\nweight = "cost_usd"\n'
        'stop = 1.0\ncompare = ">"\n'
    )
    payload = json.dumps({"transcript_path": str(transcript), "hook_event_name": "PostToolUse"})
    ends = [i + 1 for i, b in enumerate(data) if b == 0x0A]
    hook = Hook()
    try:
        command = [sys.executable, "-m", "analyzer", "guard", "claude-hook", "--policy"]
        command += ["one_dollar", "--policies", str(caps), "--webhook", hook.url]
        for end in [*ends[:: max(1, len(ends) // 25)], len(data)]:
            with open(transcript, "ab") as fh:
                fh.write(data[fh.tell() : end])
            both = [
                subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
                for _ in range(2)
            ]
            for proc in both:
                proc.communicate(payload, timeout=120)
                assert proc.returncode == 0
    finally:
        hook.close()
    levels = [b["level"] for b in hook.bodies if b.get("event") == "cap"]
    stops = [b for b in hook.bodies if b.get("event") == "trip" and b["action"] == "stop"]
    assert sorted(levels) == [0.5, 0.8, 1.0] and len(stops) == 1, hook.bodies
    assert all(isinstance(b["text"], str) and "one_dollar" in b["text"] for b in hook.bodies)
