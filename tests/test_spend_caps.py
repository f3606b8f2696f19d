"""Spend caps as policy (issue 49): budgets over a day, a 5-hour window and a month, across every
session, replayed by the backtest and identical live; the ledger a refresh leaves for the live
caps (what other sessions spent) and the baseline read from it; a real Claude Code session
crossing a $1 cap, stopped by the hook at the call the backtest names."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from analyzer.api.claude_hook import claude_hook
from analyzer.cli.main import cli
from analyzer.engine.store import open_store
from analyzer.errors import ForensicsError
from analyzer.guards.guard import Call, Guard
from analyzer.guards.policy import all_policies, parse_policy
from analyzer.guards.replay import Replay
from analyzer.guards.spend import baseline, baselines, last_window, ledger_of, read_ledger
from analyzer.ingest.base import IngestOptions
from analyzer.pipeline import ingest_paths
from analyzer.views.blocks import blocks
from analyzer.views.usage import usage
from tests.helpers import env_of, load_guard_case, shared_samples

CASES = Path(__file__).parent / "guards"
PRESETS = {p.name: p for p in all_policies()}
DAY_CAP = {"type": "budget", "scope": "day", "stop": 1, "compare": ">"}
T = datetime(2026, 11, 29, 9, 0)
# A real Claude Code session that spent $5.50 over 217 calls.
SESSION = (
    "real-world/claude_code/marot__spotter/-home-marco-projects-spotter-worktrees-spotter-4te/"
    "ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl"
)


def call(n: int, usd: float, minutes: int, session: str = "s") -> Call:
    return Call(
        call_id=f"c{n}", session_id=session, ts=T + timedelta(minutes=minutes), cost_usd=usd
    )


# -- the policy ------------------------------------------------------------------------------


def test_the_presets_cap_the_day_the_window_and_the_month_with_a_nudge() -> None:
    caps = {
        name: PRESETS[name] for name in ("daily_cost_cap", "window_cost_cap", "monthly_cost_cap")
    }
    assert [p.scope for p in caps.values()] == ["day", "window", "month"]
    for p in caps.values():
        assert p.setting("weight") == "cost_usd" and p.reaches == p.scope
        assert p.nudge == pytest.approx(0.8 * p.stop)


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        (
            {"type": "counter", "count": "tool_call", "scope": "day", "stop": 3},
            "only a budget lives in a day",
        ),
        ({**DAY_CAP, "reach": "session"}, "a period's stop ends its own period"),
        ({"type": "budget", "scope": "session", "reach": "day", "stop": 1}, "its own period"),
        ({**DAY_CAP, "reset": "tool_call"}, "never resets"),
    ],
)
def test_a_period_is_a_budgets_and_its_stop_ends_it(raw: dict[str, Any], says: str) -> None:
    with pytest.raises(ForensicsError, match=says):
        parse_policy("cap", raw, "mine.toml")


# -- live: the guard's decisions -------------------------------------------------------------


def test_a_baseline_is_what_the_day_had_spent_before() -> None:
    """A $1 day cap with $0.70 spent today by other sessions: the guard stops at the call that
    brings the day over $1 ($0.20 + $0.20), saying the cap and the spend."""
    p = parse_policy("daily", DAY_CAP, "test")
    guard = Guard(p, baseline={"2026-11-29": Decimal("0.70"), "2026-11-28": Decimal("5")})
    said = [guard.feed(call(i, 0.2, 10 * i)) for i in range(1, 4)]
    assert [d.action for d in said] == ["continue", "stop", "continue"]
    assert said[1].reason == "daily: $1.10 spent today (cap $1.00); stop at > $1.00: end the day"
    assert guard.standing("s") == said[1]
    # without it, the same calls stay under the cap
    alone = Guard(p)
    assert [alone.feed(call(i, 0.2, 10 * i)).action for i in range(1, 4)] == ["continue"] * 3


def test_a_day_cap_in_force_lifts_at_midnight() -> None:
    p = parse_policy("daily", DAY_CAP, "test")
    guard = Guard(p)
    assert guard.feed(call(1, 1.5, 0)).stops
    assert guard.standing("s") is not None
    assert guard.feed(call(2, 0.1, 15 * 60)).action == "continue"  # 00:00 the next day
    assert guard.standing("s") is None


def test_two_sessions_share_one_day_cap_live() -> None:
    p = parse_policy("daily", DAY_CAP, "test")
    guard = Guard(p)
    said = [guard.feed(call(i, 0.4, i, session="ab"[i % 2])) for i in range(1, 5)]
    assert [d.action for d in said] == ["continue", "continue", "stop", "continue"]
    assert guard.standing("a") == guard.standing("b") == said[2]


def test_a_window_seeded_from_the_ledger_counts_its_spend() -> None:
    """The store's latest window began at 08:00 with $0.90 spent in it: a call at 09:00 is in
    that window (not one of its own starting at 09:00), so $0.20 more stops it."""
    p = parse_policy("window", {**DAY_CAP, "scope": "window"}, "test")
    guard = Guard(
        p,
        baseline={"2026-11-29T08:00": Decimal("0.9")},
        window=(datetime(2026, 11, 29, 8), datetime(2026, 11, 29, 8, 40)),
    )
    assert guard.feed(call(1, 0.2, 0)).stops


@pytest.mark.parametrize("path", sorted(CASES.glob("seed049_*.json")), ids=lambda p: p.stem)
def test_the_golden_caps_live(path: Path) -> None:
    """Each spend cap's golden case (tests/guards/seed049_*.json), its calls fed one by one as
    they happened: the live guard stops where the case (and the backtest) says."""
    case = json.loads(path.read_text(encoding="utf-8"))
    raw = dict(case["policy"])
    p = parse_policy(raw.pop("name"), raw, path.name)
    with open_store(":memory:") as store:
        load_guard_case(store, case["given"])
        with Replay(store, None, [p], live=True) as replay:
            replayed = replay.events()  # (stream by stream)
    events = sorted(replayed, key=lambda e: e["ts"])
    guard = Guard(p)
    stops = [e["call_id"] for e in events if guard.feed(Call.from_event(e)).stops]
    assert stops == case["expect"]["stops"]
    # a history read back at once (the hook's, watch's) is fed in time order too
    at_once = Guard(p).feed_all([Call.from_event(e) for e in replayed])
    assert sorted(d.call_id for d in at_once if d.stops) == sorted(stops)


# -- the replay's windows are ccusage's blocks -----------------------------------------------


def test_the_replays_windows_and_days_are_the_usage_views() -> None:
    """On real sessions: each 5-hour window of the replay holds the calls and dollars of one
    of `blocks`' blocks, each day those of `daily`'s day."""
    p = PRESETS["window_cost_cap"]
    with open_store(":memory:") as store:
        ingest_paths(store, [str(shared_samples() / "real-world")], IngestOptions(progress=False))
        with Replay(store, None, [p]):
            windows = store.engine.rows(
                "SELECT to_timestamp(u_window * 3600)::TIMESTAMP, count(*), sum(cost_usd) "
                "FROM lf_events WHERE u_window IS NOT NULL GROUP BY 1 ORDER BY 1"
            )
            days = store.engine.rows(
                "SELECT strftime(to_timestamp(u_day * 86400)::TIMESTAMP, '%Y-%m-%d'), "
                "sum(cost_usd) FROM lf_events WHERE u_day IS NOT NULL GROUP BY 1 ORDER BY 1"
            )
        shown = [b for b in blocks(store).blocks if not b.gap]
        daily = sorted(usage(store, "daily").rows, key=lambda r: r.key)
    assert len(windows) == len(shown) > 10
    for (start, n, usd), b in zip(windows, shown, strict=True):
        assert (start, n, usd or 0) == (b.start, b.calls, b.usd)
    assert [(k, usd) for k, usd in days] == [
        (r.key, sum(r.usd.values())) for r in daily if r.key != "(no time)"
    ]


# -- the ledger and the baseline -------------------------------------------------------------


def real_store(tmp_path: Path) -> Path:
    db = tmp_path / "s.duckdb"
    with open_store(str(db)) as store:
        ingest_paths(store, [str(shared_samples() / "real-world")], IngestOptions(progress=False))
    return db


def test_the_ledger_holds_the_recent_periods_by_file(tmp_path: Path) -> None:
    db = real_store(tmp_path)
    with open_store(str(db), read_only=True) as store:
        ledger = ledger_of(store, datetime(2026, 2, 24, 12))
        daily = {r.key: sum(r.usd.values()) for r in usage(store, "daily").rows}
        last = [b for b in blocks(store).blocks if not b.gap][-1]
    days = ledger["periods"]["day"]
    assert {"2026-02-23", "2026-02-24"} <= set(days) and "2026-02-22" not in days
    for key in ("2026-02-23", "2026-02-24"):
        assert baseline(ledger, "day", key) == daily[key]
    start, _ = last_window(ledger) or (None, None)
    assert start == last.start
    # one file left out: what the others spent that day
    day = days["2026-02-23"]["by_source"]
    mine = max(day, key=lambda f: Decimal(day[f]))
    assert baseline(ledger, "day", "2026-02-23", excluding=mine) == daily["2026-02-23"] - Decimal(
        day[mine]
    )
    assert baselines(ledger, "day", excluding=mine)["2026-02-23"] < daily["2026-02-23"]
    assert baseline(None, "day", "2026-02-23") == 0 == baseline(ledger, "month", "1999-01")


def test_the_baseline_reads_without_duckdb_in_milliseconds(tmp_path: Path) -> None:
    db = real_store(tmp_path)
    with open_store(str(db), read_only=True) as store:
        ledger = ledger_of(store, datetime(2026, 2, 24, 12))
    path = tmp_path / "spend.json"
    path.write_text(json.dumps(ledger))
    code = (
        "import sys, time;"
        "from analyzer.guards.spend import baseline, read_ledger;"
        "t = time.perf_counter();"
        f"b = baseline(read_ledger({str(path)!r}), 'day', '2026-02-23');"
        "ms = (time.perf_counter() - t) * 1000;"
        "print(b, ms, 'duckdb' in sys.modules, 'pyarrow' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out[2:] == ["False", "False"]
    assert Decimal(out[0]) > 10 and float(out[1]) < 5


def test_a_refresh_of_the_default_store_leaves_the_ledger_beside_it(tmp_path: Path) -> None:
    """`daily` with no input refreshes the default store and writes spend.json beside it; a
    refresh that reads nothing new leaves it as it was (and costs one look at the file)."""
    home = tmp_path / "home"
    projects = home / ".claude" / "projects" / "-p"
    projects.mkdir(parents=True)
    shutil.copy2(shared_samples() / SESSION, projects / "s.jsonl")
    data = tmp_path / "data"
    env = env_of(home, XDG_DATA_HOME=str(data))
    done = CliRunner(env=env).invoke(cli, ["daily"])
    assert done.exit_code == 0, done.output
    ledger_file = data / "llm-forensics" / "spend.json"
    ledger = read_ledger(ledger_file)
    assert ledger is not None and set(ledger["periods"]) == {"day", "window", "month"}
    written = datetime.fromisoformat(ledger["written"].removesuffix("Z"))
    assert abs(datetime.now(UTC).replace(tzinfo=None) - written) < timedelta(minutes=5)
    # the session is of February 2026: no recent day holds it; its last windows are the
    # store's last
    assert baselines(ledger, "day") == {} and last_window(ledger) is not None
    stamp = ledger_file.stat().st_mtime_ns
    started = time.perf_counter()
    done = CliRunner(env=env).invoke(cli, ["daily"])
    assert done.exit_code == 0 and ledger_file.stat().st_mtime_ns == stamp
    assert time.perf_counter() - started < 30  # (the whole command; the ledger's part below)

    from analyzer.api.home import StoreChoice, _keep_ledger

    with open_store(str(data / "llm-forensics" / "forensics.duckdb")) as store:
        started = time.perf_counter()
        _keep_ledger(
            store, StoreChoice(str(data / "llm-forensics" / "forensics.duckdb"), True), False
        )
        assert time.perf_counter() - started < 0.02


# -- the acceptance test of the issue --------------------------------------------------------

CAP = """
[policy.one_dollar]
description = "Spend cap: the session passes $1."
type = "budget"
scope = "session"
weight = "cost_usd"
stop = 1
compare = ">"
"""


def test_a_session_crossing_a_1_dollar_cap_is_blocked_at_the_call_the_backtest_names(
    tmp_path: Path,
) -> None:
    """A real Claude Code session ($5.50): the backtest of a $1 session cap names the call
    that passes $1; a live guard fed the calls one by one stops there, and the hook, given
    the transcript as it stood before that call and then with it, lets the first through and
    blocks the second, naming the cap and the spend."""
    real = shared_samples() / SESSION
    policies = tmp_path / "cap.toml"
    policies.write_text(CAP)
    db = tmp_path / "s.duckdb"
    runner = CliRunner()
    assert runner.invoke(cli, ["ingest", "--db", str(db), str(real)]).exit_code == 0
    done = runner.invoke(cli, ["backtest", "--db", str(db), "--policies", str(policies), "--json"])
    assert done.exit_code == 0, done.output
    [result] = [r for r in json.loads(done.stdout) if r["policy"] == "one_dollar"]
    [trip] = result["trips"]
    named = trip["call_id"]

    [p] = [q for q in all_policies([str(policies)]) if q.name == "one_dollar"]
    with open_store(str(db), read_only=True) as store, Replay(store, None, [p], live=True) as r:
        events = r.events()
    guard = Guard(p)
    stops = [e["call_id"] for e in events if guard.feed(Call.from_event(e)).stops]
    assert stops == [named]

    # the hook, the transcript as Claude Code writes it: up to the call's first line, and
    # through its last
    lines = real.read_text(encoding="utf-8").splitlines(keepends=True)
    request = named.rsplit(":", 1)[-1]
    mine = [i for i, line in enumerate(lines) if request in line]
    assert mine
    path = tmp_path / "session.jsonl"

    def hook_says(n: int) -> dict[str, Any] | None:
        path.write_text("".join(lines[:n]), encoding="utf-8")
        payload = {
            "session_id": "x",
            "transcript_path": str(path),
            "cwd": str(tmp_path),
            "hook_event_name": "PostToolUse",
            "tool_name": "Bash",
            "tool_input": {"command": "true"},
        }
        answer = claude_hook(json.dumps(payload), "one_dollar", str(policies))
        assert answer.stderr == "", answer.stderr
        return json.loads(answer.stdout) if answer.stdout else None

    assert hook_says(mine[0]) is None
    blocked = hook_says(mine[-1] + 1)
    assert blocked is not None and blocked["continue"] is False
    assert (
        "one_dollar: $1." in blocked["stopReason"]
        and "spent in this session" in (blocked["stopReason"])
    )
