"""``llm-forensics statusline``, run as Claude Code runs a status line command: a process given
the session's JSON on stdin. Its dollars are the store's (the transcript ingested and summed
by SQL), today's add what the spend ledger says the other sessions spent, the caps and a
tripping guard are the hooks' on the same transcript, and any problem is said on the line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

from click.testing import CliRunner

from analyzer.cli.main import cli
from analyzer.engine.default_store import default_store
from analyzer.engine.store import open_store
from analyzer.guards.spend import ledger_path
from analyzer.ingest.base import IngestOptions
from analyzer.pipeline import ingest_paths
from tests.helpers import shared_samples

LOOP = "real-loops/claude_code/Strawhat404__TASK-31/sessions__session-2.jsonl"


def statusline(payload: str, **env: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "analyzer", "statusline"],
        input=payload,
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=120,
        check=False,
    )
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert done.stdout.count("\n") == 1
    return done.stdout.strip()


def session_json(transcript: Path) -> str:
    """The status line's input as Claude Code documents it."""
    return json.dumps(
        {
            "session_id": "abc123",
            "transcript_path": str(transcript),
            "cwd": str(transcript.parent),
            "model": {"id": "claude-sonnet-4-5", "display_name": "Sonnet"},
            "workspace": {"current_dir": str(transcript.parent)},
            "cost": {"total_cost_usd": 0.01},
        }
    )


def stored_dollars(transcript: Path) -> tuple[Decimal, str]:
    """The transcript's dollars as the store prices them, and its first call's day."""
    with open_store(":memory:") as store:
        ingest_paths(store, [str(transcript)], IngestOptions(progress=False))
        usd, day = store.engine.one(
            "SELECT sum(cost_usd), min(ts)::DATE::VARCHAR FROM calls WHERE cost_usd IS NOT NULL"
        )
    return Decimal(usd), str(day)


def dollars(x: Decimal) -> str:
    return f"${x:,.2f}"


def test_the_session_and_today_priced_as_the_store_prices_them(tmp_path: Path) -> None:
    transcript = tmp_path / "s.jsonl"
    data = (shared_samples() / LOOP).read_bytes()
    half = data[: data.index(b"\n", len(data) // 2) + 1]
    transcript.write_bytes(half)
    usd, day = stored_dollars(transcript)
    line = statusline(session_json(transcript), LLM_FORENSICS_NOW=f"{day}T23:00:00")
    assert line == f"{dollars(usd)} session | {dollars(usd)} today"
    transcript.write_bytes(data)  # it grows: the next run reads on
    usd, _ = stored_dollars(transcript)
    ledger = ledger_path(default_store(dict(os.environ), Path.home()))
    ledger.parent.mkdir(parents=True, exist_ok=True)
    elsewhere = {"/elsewhere.jsonl": "2.5", str(transcript.resolve()): "1000"}  # (ours: not added)
    day_spent = {day: {"last_call": f"{day}T22:00:00", "by_source": elsewhere}}
    ledger.write_text(json.dumps({"written": "x", "zone": "UTC", "periods": {"day": day_spent}}))
    line = statusline(session_json(transcript), LLM_FORENSICS_NOW=f"{day}T23:00:00")
    assert line == f"{dollars(usd)} session | {dollars(usd + Decimal('2.5'))} today"
    other_day = statusline(session_json(transcript), LLM_FORENSICS_NOW="2030-01-01T00:00:00")
    assert other_day == f"{dollars(usd)} session | $0.00 today"


def test_the_caps_and_the_guard_of_the_hooks_on_the_session(tmp_path: Path) -> None:
    """A hook with a $1 session cap stops this $1.09 session: the line shows the cap past its
    stop and the stop."""
    transcript = tmp_path / "s.jsonl"
    transcript.write_bytes((shared_samples() / LOOP).read_bytes())
    usd, day = stored_dollars(transcript)
    assert usd > 1
    caps = tmp_path / "caps.toml"
    caps.write_text(
        '[policy.one_dollar]\ntype = "budget"\nscope = "session"\nweight = "cost_usd"\n'
        'stop = 1.0\ncompare = ">"\n'
    )
    command = ["guard", "claude-hook", "--policy", "one_dollar", "--policies", str(caps)]
    hook = subprocess.run(
        [sys.executable, "-m", "analyzer", *command],
        input=json.dumps({"transcript_path": str(transcript), "hook_event_name": "PostToolUse"}),
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(hook.stdout)["continue"] is False
    line = statusline(session_json(transcript), LLM_FORENSICS_NOW=f"{day}T23:00:00")
    assert line.startswith(f"{dollars(usd)} session | {dollars(usd)} today | one_dollar ")
    share = int(line.split("one_dollar ")[1].split("%")[0])
    assert 100 < share <= round(100 * usd)  # (the guard's value where it last moved)
    assert line.endswith("of $1.00 | STOP one_dollar")


def test_a_problem_is_said_on_the_line(tmp_path: Path) -> None:
    assert statusline("not json") == "llm-forensics: the status line's input is not JSON"
    assert statusline("[1]") == "llm-forensics: the status line's input is not a JSON object"
    gone = json.dumps(
        {"transcript_path": str(tmp_path / "gone.jsonl"), "cost": {"total_cost_usd": 1.5}}
    )
    assert statusline(gone) == "$1.50 session"  # (no transcript: Claude Code's own figure)
    assert statusline("{}") == "llm-forensics: no calls yet"


def test_its_help_says_how_to_set_it_up() -> None:
    done = CliRunner().invoke(cli, ["statusline", "--help"])
    assert done.exit_code == 0 and '"statusLine"' in done.output
