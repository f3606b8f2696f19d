"""``blocks``: ccusage's 5-hour billing blocks, held to ccusage 20 on the real-world Claude Code
transcripts field by field, and on small transcripts to figures computed by hand (the
sequential rule, an active block's burn rate and projection at an injected "now", the token
limit, an empty store)."""

from __future__ import annotations

import csv
import io
import itertools
import json
import random
import re
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from analyzer.cli.main import cli
from tests.ccusage_side import ccusage_command, ccusage_json, ccusage_work, real_world_home
from tests.helpers import env_of

NOW = "LLM_FORENSICS_NOW"
LENGTH = timedelta(hours=5)


def blocks_json(db: Path, *args: str, now: str | None = None) -> dict[str, Any]:
    env = {NOW: now} if now else {}
    result = CliRunner().invoke(cli, ["blocks", "--db", str(db), "--json", *args], env=env)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def _ingest(folder: Path, db: Path) -> Path:
    result = CliRunner().invoke(cli, ["ingest", "--db", str(db), str(folder), "-q"])
    assert result.exit_code == 0, result.output
    return db


# -- against ccusage on the real-world transcripts -------------------------------------------


@pytest.fixture(scope="module")
def side_by_side(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    """ccusage's ``blocks --json`` on the real-world home, and our store of the same files."""
    root = tmp_path_factory.mktemp("blocks")
    home = real_world_home(root)
    command, _ = ccusage_command(ccusage_work(tmp_path_factory))
    theirs = ccusage_json(command, home, "blocks")
    return theirs, _ingest(home / ".claude" / "projects", root / "rw.duckdb")


# Hand-written transcripts (claude-code-log's test data) are written with a space after each
# colon; ccusage 20 reads only the compact lines Claude Code writes, so it skips their 8 calls,
# all in the first block (2025-06-14): we count them.
HANDWRITTEN_BLOCK = "2025-06-14T10:00:00.000Z"
HANDWRITTEN_CALLS = 8


def test_blocks_agree_with_ccusage_field_by_field(
    side_by_side: tuple[dict[str, Any], Path],
) -> None:
    theirs, db = side_by_side
    ours = blocks_json(db)["blocks"]
    assert [b["id"].startswith("gap-") for b in ours] == [b["isGap"] for b in theirs["blocks"]]
    assert len(ours) == len(theirs["blocks"]) == 15
    for o, t in zip(ours, theirs["blocks"], strict=True):
        assert o["isGap"] == t["isGap"]
        assert o["isActive"] is t["isActive"] is False
        if o["isGap"]:
            # A gap's edges are calls' times: ours is when a call's reply began (its first
            # line), ccusage's the line with its final count, a second or two later.
            for key in ("startTime", "endTime"):
                late = datetime.fromisoformat(t[key]) - datetime.fromisoformat(o[key])
                if o["startTime"] == "2025-06-14T16:03:00.000Z" and key == "startTime":
                    continue  # 5 h after the hand-written calls ccusage does not read (below)
                assert timedelta(0) <= late < timedelta(seconds=3)
            assert (o["entries"], o["totalTokens"], o["models"]) == (0, 0, [])
            continue
        assert (o["id"], o["startTime"], o["endTime"]) == (t["id"], t["startTime"], t["endTime"])
        assert o["burnRate"] is t["burnRate"] is None
        assert o["projection"] is t["projection"] is None
        if o["id"] == HANDWRITTEN_BLOCK:
            assert o["entries"] == t["entries"] + HANDWRITTEN_CALLS
            assert o["models"] == ["claude-3-sonnet-20240229", *t["models"]]
            assert o["totalTokens"] > t["totalTokens"]
            continue
        assert o["entries"] == t["entries"]
        assert o["tokenCounts"] == t["tokenCounts"]
        assert o["totalTokens"] == t["totalTokens"]
        assert o["models"] == t["models"]
        last = datetime.fromisoformat(t["actualEndTime"]) - datetime.fromisoformat(
            o["actualEndTime"]
        )
        assert timedelta(0) <= last < timedelta(seconds=3)
        # Dollars: ccusage prices a streaming-placeholder output at its logged count, as our
        # costUSDAtLoggedOutput does; our costUSD prices the output estimated from what the
        # call wrote, never less.
        assert o["costUSDAtLoggedOutput"] == pytest.approx(t["costUSD"], abs=1e-8)
        assert o["costUSD"] >= o["costUSDAtLoggedOutput"]
        assert (o["costUSD"] > o["costUSDAtLoggedOutput"]) == (o["placeholderCalls"] > 0)


def test_the_csv_rows_are_the_json_blocks(side_by_side: tuple[dict[str, Any], Path]) -> None:
    _, db = side_by_side
    result = CliRunner().invoke(cli, ["blocks", "--db", str(db), "--csv"])
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    ours = blocks_json(db)["blocks"]
    assert [r["id"] for r in rows] == [b["id"] for b in ours]
    for r, b in zip(rows, ours, strict=True):
        assert int(r["total_tokens"]) == b["totalTokens"]
        assert int(r["cache_read_input_tokens"]) == b["tokenCounts"]["cacheReadInputTokens"]
        assert Decimal(r["cost_usd"]) == Decimal(str(b["costUSD"]))
        assert (r["models"].split(";") if r["models"] else []) == b["models"]
        assert r["is_gap"] == str(b["isGap"]).lower()


def test_usage_blocks_is_the_same_view(side_by_side: tuple[dict[str, Any], Path]) -> None:
    _, db = side_by_side
    result = CliRunner().invoke(cli, ["usage", "blocks", "--db", str(db), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["blocks"] == blocks_json(db)["blocks"]


def test_since_and_until_take_the_calls_of_the_window(
    side_by_side: tuple[dict[str, Any], Path],
) -> None:
    """The window is applied to the calls before they are cut into blocks (as ccusage's
    --since/--until): the blocks of 2026-02-11 are those the whole store has that day."""
    _, db = side_by_side
    whole = [
        b
        for b in blocks_json(db)["blocks"]
        if b["startTime"].startswith("2026-02-11") and not b["isGap"]
    ]
    day = blocks_json(db, "--since", "2026-02-11", "--until", "2026-02-11")["blocks"]
    assert [b["id"] for b in day] == [b["id"] for b in whole] == ["2026-02-11T21:00:00.000Z"]
    assert day[0]["entries"] == whole[0]["entries"]
    assert day[0]["tokenCounts"] == whole[0]["tokenCounts"]
    shown = CliRunner().invoke(
        cli, ["blocks", "--db", str(db), "--since", "2026-02-11", "--tz", "Asia/Tokyo"]
    )
    assert shown.exit_code == 0, shown.output
    assert "since 2026-02-11 00:00 Asia/Tokyo" in shown.stdout
    assert "2026-02-12 06:00" in shown.stdout  # 21:00 UTC, the next morning in Tokyo


# -- small transcripts, figures by hand ---------------------------------------------------------


def _call(i: int, ts: str, inp: int, out: int, cw: int = 0, cr: int = 0) -> str:
    line = {
        "parentUuid": None,
        "isSidechain": False,
        "userType": "external",
        "cwd": "/home/u/proj",
        "sessionId": "11111111-2222-3333-4444-555555555555",
        "version": "2.1.100",
        "type": "assistant",
        "uuid": f"u-{i}",
        "timestamp": ts,
        "requestId": f"req_{i}",
        "message": {
            "id": f"msg_{i}",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5-20250929",
            "content": [{"type": "text", "text": "done"}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {
                "input_tokens": inp,
                "output_tokens": out,
                "cache_creation_input_tokens": cw,
                "cache_read_input_tokens": cr,
            },
        },
    }
    return json.dumps(line, separators=(",", ":"))


def _store(tmp_path: Path, calls: list[tuple[str, int, int, int, int]]) -> Path:
    folder = tmp_path / "projects" / "-home-u-proj"
    folder.mkdir(parents=True)
    lines = [_call(i, *c) for i, c in enumerate(calls)]
    (folder / "11111111-2222-3333-4444-555555555555.jsonl").write_text("\n".join(lines) + "\n")
    return _ingest(folder, tmp_path / "s.duckdb")


def test_a_block_ends_five_hours_after_its_hour_and_a_silence_of_five_hours_is_a_gap(
    tmp_path: Path,
) -> None:
    db = _store(
        tmp_path,
        [
            ("2026-03-01T04:30:00.000Z", 10, 1, 0, 0),
            ("2026-03-01T08:59:00.000Z", 10, 1, 0, 0),
            ("2026-03-01T09:10:00.000Z", 10, 1, 0, 0),  # after 04:00 + 5 h: a new block
            ("2026-03-01T14:00:00.000Z", 10, 1, 0, 0),  # 09:00 + 5 h exactly: still in it
            ("2026-03-01T14:05:00.000Z", 10, 1, 0, 0),
            ("2026-03-01T19:06:00.000Z", 10, 1, 0, 0),  # 5 h 01 after the last: a gap first
        ],
    )
    found = blocks_json(db, now="2026-03-05T00:00:00Z")["blocks"]
    assert [(b["id"], b["entries"]) for b in found] == [
        ("2026-03-01T04:00:00.000Z", 2),
        ("2026-03-01T09:00:00.000Z", 2),
        ("2026-03-01T14:00:00.000Z", 1),
        ("2026-03-01T19:00:00.000Z", 1),
        ("gap-2026-03-01T19:05:00.000Z", 0),  # by start, as ccusage lists them
    ]
    assert found[4]["endTime"] == "2026-03-01T19:06:00.000Z"
    assert [b["actualEndTime"] for b in found[:2]] == [
        "2026-03-01T08:59:00.000Z",
        "2026-03-01T14:00:00.000Z",
    ]
    assert not any(b["isActive"] for b in found)


# Three calls 50, 30 and 10 minutes before "now" (12:00), one block before them.
NOW_AT = "2026-03-01T12:00:00Z"
ACTIVE = [
    ("2026-03-01T04:30:00.000Z", 1000, 1000, 0, 0),  # a past block of 2,000 tokens
    ("2026-03-01T11:10:00.000Z", 100, 200, 1000, 5000),
    ("2026-03-01T11:30:00.000Z", 10, 300, 0, 6000),
    ("2026-03-01T11:50:00.000Z", 20, 400, 500, 7000),
]


def test_the_active_block_burn_rate_and_projection(tmp_path: Path) -> None:
    db = _store(tmp_path, ACTIVE)
    shown = blocks_json(db, now=NOW_AT)
    past, gap, active = shown["blocks"]
    assert not past["isActive"] and gap["isGap"] and active["isActive"]
    assert active["id"] == "2026-03-01T11:00:00.000Z"
    assert active["endTime"] == "2026-03-01T16:00:00.000Z"
    assert active["tokenCounts"] == {
        "inputTokens": 130,
        "outputTokens": 900,
        "cacheCreationInputTokens": 1500,
        "cacheReadInputTokens": 18000,
    }
    assert active["totalTokens"] == 20530
    burn = active["burnRate"]
    minutes = 40  # first call to last
    assert burn["tokensPerMinute"] == 20530 / minutes
    assert burn["tokensPerMinuteForIndicator"] == (130 + 900) / minutes
    cost = Decimal(str(active["costUSD"]))
    assert cost > 0
    assert Decimal(str(burn["costPerHour"])) == pytest.approx(cost / minutes * 60)
    left = 240  # 12:00 to 16:00
    assert active["projection"] == {
        "remainingMinutes": left,
        "totalTokens": round(20530 + 20530 / minutes * left),  # 143,710
        "totalCost": float((cost + cost / minutes * left).quantize(Decimal("0.01"))),
    }
    assert past["burnRate"] is None and past["projection"] is None
    # The hour after the last call the block is over: nothing is active.
    later = blocks_json(db, now="2026-03-01T16:50:00Z")["blocks"]
    assert not any(b["isActive"] for b in later)
    none = blocks_json(db, "--active", now="2026-03-01T16:50:00Z")
    assert (none["blocks"], none["message"]) == ([], "No active block")  # as ccusage says
    text = CliRunner().invoke(cli, ["blocks", "--db", str(db)], env={NOW: NOW_AT})
    assert text.exit_code == 0, text.output
    assert "active, 240m left" in text.stdout
    assert "143,710 tokens" in text.stdout
    assert "gap" in text.stdout


def test_token_limit(tmp_path: Path) -> None:
    db = _store(tmp_path, ACTIVE)
    projected = 143710

    def status(limit: str) -> dict[str, Any]:
        (active,) = blocks_json(db, "--active", "--token-limit", limit, now=NOW_AT)["blocks"]
        return active["tokenLimitStatus"]  # type: ignore[no-any-return]

    assert status("max") == {  # the most a past block used: 2,000 tokens
        "limit": 2000,
        "projectedUsage": projected,
        "percentUsed": round(projected / 2000 * 100, 2),
        "status": "exceeds",
    }
    assert status("170000")["status"] == "warning"  # above 80 % of it
    assert status("200000")["status"] == "ok"
    warned = CliRunner().invoke(
        cli, ["blocks", "--db", str(db), "--token-limit", "100000"], env={NOW: NOW_AT}
    )
    assert warned.exit_code == 0, warned.output
    assert "warning: the active block is projected to use 143,710 tokens" in warned.stdout
    bad = CliRunner().invoke(cli, ["blocks", "--db", str(db), "--token-limit", "lots"])
    assert bad.exit_code == 2
    assert "is not a number of tokens" in bad.output


def test_recent_keeps_the_last_three_days(tmp_path: Path) -> None:
    db = _store(tmp_path, ACTIVE)
    ids = [b["id"] for b in blocks_json(db, "--recent", now="2026-03-04T10:30:00Z")["blocks"]]
    assert ids == ["2026-03-01T11:00:00.000Z"]  # started within 3 days; the rest before


def test_a_store_without_calls_says_no_usage_and_exits_0(tmp_path: Path) -> None:
    """A home whose Claude Code folder holds a session without a reply yet: the default store
    is made, holds no call, and ``blocks`` says so (as ccusage does) and exits 0."""
    home = tmp_path / "home"
    folder = home / ".claude" / "projects" / "-home-u-proj"
    folder.mkdir(parents=True)
    prompt = {
        "type": "user",
        "sessionId": "s",
        "uuid": "u-0",
        "timestamp": "2026-03-01T04:30:00.000Z",
        "message": {"role": "user", "content": "hello"},
    }
    (folder / "s.jsonl").write_text(json.dumps(prompt) + "\n")
    env = env_of(home, XDG_DATA_HOME=str(tmp_path / "data"), LLM_FORENSICS_DB=None)
    result = CliRunner().invoke(cli, ["blocks", "-q"], env=env)
    assert result.exit_code == 0, result.output
    assert result.stdout == "No usage data found.\n"
    again = CliRunner().invoke(cli, ["blocks", "--json", "-q"], env=env)
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["blocks"] == []
    assert (tmp_path / "data" / "llm-forensics" / "forensics.duckdb").exists()


def _snake(key: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", key.replace("USD", "Usd")).lower()


def _flat(block: dict[str, Any]) -> set[str]:
    """The CSV columns a JSON block's fields flatten to."""
    names = set()
    for key, value in block.items():
        if key == "tokenCounts":
            names |= {_snake(k) for k in value}
        elif key == "tokenLimitStatus":
            names |= {"token_limit" if k == "limit" else f"token_limit_{_snake(k)}" for k in value}
        elif isinstance(value, dict):
            names |= {f"{_snake(key)}_{_snake(k)}" for k in value}
        else:
            names.add(_snake(key))
    return names


def test_the_csv_has_every_field_of_the_json(tmp_path: Path) -> None:
    db = _store(tmp_path, ACTIVE)
    args = ["--token-limit", "max"]
    (*_, active) = blocks_json(db, *args, now=NOW_AT)["blocks"]
    result = CliRunner().invoke(cli, ["blocks", "--db", str(db), "--csv", *args], env={NOW: NOW_AT})
    assert result.exit_code == 0, result.output
    *_, row = list(csv.DictReader(io.StringIO(result.stdout)))
    assert set(row) == _flat(active)
    assert int(row["projection_total_tokens"]) == active["projection"]["totalTokens"]
    assert float(row["burn_rate_tokens_per_minute"]) == active["burnRate"]["tokensPerMinute"]
    assert row["token_limit_status"] == active["tokenLimitStatus"]["status"] == "exceeds"


def _by_the_rule(times: list[datetime]) -> list[tuple[datetime, int]]:
    """ccusage's rule, call by call: each block's start and number of calls."""
    found: list[tuple[datetime, int]] = []
    start: datetime | None = None
    last: datetime | None = None
    for t in sorted(times):
        if start is None or last is None or t - start > LENGTH or t - last > LENGTH:
            start = t.replace(minute=0, second=0, microsecond=0)
            found.append((start, 0))
        found[-1] = (start, found[-1][1] + 1)
        last = t
    return found


def test_the_sql_follows_the_rule_call_by_call(tmp_path: Path) -> None:
    """Calls at random over a week, many on the hour and on a block's end exactly: the SQL's
    blocks are those of the rule applied one call at a time, and each gap lies between two
    blocks more than 5 hours apart."""
    rng = random.Random(50)
    base = datetime(2026, 3, 1)
    times: list[datetime] = []
    t = base
    for _ in range(300):
        step = rng.choice(
            [
                timedelta(minutes=rng.randint(1, 50)),
                timedelta(hours=rng.randint(1, 4)),
                timedelta(hours=5),  # exactly a block's length after the call before
                timedelta(hours=rng.randint(5, 9), minutes=rng.randint(0, 2)),
            ]
        )
        t += step
        if rng.random() < 0.3:  # on the hour: a block's end may fall on a call
            t = t.replace(minute=0, second=0, microsecond=0)
        times.append(t)
    calls = [(f"{x.isoformat(timespec='milliseconds')}Z", 10, 1, 0, 0) for x in times]
    db = _store(tmp_path, calls)
    found = blocks_json(db, now="2027-01-01T00:00:00Z")["blocks"]
    ours = [
        (datetime.fromisoformat(b["startTime"].removesuffix("Z")), b["entries"])
        for b in found
        if not b["isGap"]
    ]
    expected = _by_the_rule(times)
    assert len(expected) > 40
    assert ours == expected
    real = [b for b in found if not b["isGap"]]
    gaps = {b["endTime"] for b in found if b["isGap"]}
    assert gaps == {
        _first_of(after, times)
        for b, after in itertools.pairwise(real)
        if _first(after, times) - _at(b["actualEndTime"]) > LENGTH
    }


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text.removesuffix("Z"))


def _first(block: dict[str, Any], times: list[datetime]) -> datetime:
    """A block's first call (the first of ``times`` at or after its start)."""
    return min(t for t in times if t >= _at(block["startTime"]))


def _first_of(block: dict[str, Any], times: list[datetime]) -> str:
    return f"{_first(block, times).isoformat(timespec='milliseconds')}Z"
