"""The seeds' guards replayed over a bill only: the sample's OpenRouter export, without the
agents' logs. A bill carries the finish reason and the reasoning tokens of every call, so the
reply kind of each is known (thinking-only where every output token was reasoning): a guard
keyed on it sees its signal there. A bill has no turns: a policy counting per turn counts per
session there, and says so."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from analyzer.cli.main import cli
from analyzer.engine.store import open_store
from analyzer.guards.backtest import backtest
from analyzer.guards.policy import all_policies
from tests.helpers import SAMPLE_DATA

BILL = SAMPLE_DATA / "openrouter_activity_2025-12.csv"


def seed_guards() -> list[Any]:
    """The presets that encode a seed's guard, buggy or fixed (their description names it)."""
    return [p for p in all_policies() if "(seed 00" in p.description]


@pytest.fixture(scope="module")
def bill(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    db = tmp_path_factory.mktemp("bill") / "bill.duckdb"
    runner = CliRunner()
    assert runner.invoke(cli, ["ingest", "--db", str(db), str(BILL)]).exit_code == 0
    assert runner.invoke(cli, ["detect", "--db", str(db)]).exit_code == 0
    store = open_store(db, read_only=True)
    results = {r.policy: r for r in backtest(store, seed_guards())}
    yield {"store": store, "results": results, "db": db}
    store.close()


def test_the_copy_is_a_bill_only(bill: dict[str, Any]) -> None:
    store = bill["store"]
    assert store.scalar("SELECT list(DISTINCT format) FROM live_calls") == ["openrouter_csv"]
    assert store.scalar("SELECT count(*) FROM live_calls WHERE turn_id IS NOT NULL") == 0


def test_netclaws_fix_stops_the_alternating_loop_on_the_bill(bill: dict[str, Any]) -> None:
    store, r = bill["store"], bill["results"]["netclaw_cumulative_per_turn"]
    [loop] = [
        row[0]
        for row in store.con.execute(
            "SELECT incident_id FROM incidents WHERE detector = 'alternating_tool_thinking'"
        ).fetchall()
    ]
    assert r.incidents_total == 1
    stopped = {s["incident_id"]: s for s in r.stopped}
    assert loop in stopped and stopped[loop]["waste_prevented_usd"] > 0
    assert r.incidents_stopped == 1 and r.waste_prevented_usd > 0
    # The session's stalls counted as the turn's: the 11th fails it, one last attempt at the
    # 10th (the bill's thinking-only replies, in the order of the bill).
    stalls = [
        row[0]
        for row in store.con.execute(
            """SELECT call_id FROM live_calls WHERE api_key = 'netclaw-selfhost'
               AND session_id = (SELECT session_id FROM incidents WHERE incident_id = ?)
               AND response_kind IN ('thinking_only', 'empty') ORDER BY seq""",
            [loop],
        ).fetchall()
    ]
    assert [n.call_id for n in r.nudges if n.call_id in stalls] == [stalls[9]]
    assert [t.call_id for t in r.trips if t.incident_id == loop] == [stalls[10]]
    assert stopped[loop]["latency_events"] == 11


def test_the_blind_count_is_the_calls_with_no_reply_kind(bill: dict[str, Any]) -> None:
    """Blind where the data lacks the signal, not because a bill carried it: every seed guard
    on this bill reads what a bill shows (the reply kind, tokens, the finish reason, the cost),
    so it is blind only on calls whose reply kind is unknown."""
    store, results = bill["store"], bill["results"]
    unknown = store.scalar("SELECT count(*) FROM live_calls WHERE response_kind IS NULL")
    total = store.scalar("SELECT count(*) FROM live_calls")
    assert len(results) >= 12
    for name, r in results.items():
        assert (name, r.calls_total, r.blind_calls) == (name, total, unknown)
    assert results["netclaw_cumulative_per_turn"].blind_calls == unknown


def test_a_per_turn_policy_says_it_counted_per_session(bill: dict[str, Any]) -> None:
    results = bill["results"]
    total = results["netclaw_cumulative_per_turn"].calls_total
    for name in (
        "netclaw_cumulative_per_turn",
        "penguin_stale_context",
        "nexus3_consecutive_empty",
    ):
        r = results[name]  # scope turn, or reach turn
        assert r.per_session_calls == total
        assert r.per_session and "per session" in r.per_session
    for name in ("session_cost_cap", "maxtokens_session"):  # per session anyway
        assert results[name].per_session_calls == 0 and results[name].per_session is None


def test_the_views_say_it_beside_the_figures(bill: dict[str, Any], tmp_path: Path) -> None:
    runner = CliRunner()
    only = ["--only", "netclaw_cumulative_per_turn"]
    text = runner.invoke(cli, ["backtest", "--db", str(bill["db"]), *only])
    assert text.exit_code == 0, text.output
    assert "counted per session" in text.output and "blind on" not in text.output
    js = runner.invoke(cli, ["backtest", "--db", str(bill["db"]), *only, "--json"])
    [d] = json.loads(js.stdout)
    assert d["per_session_calls"] == d["calls_total"] and "per session" in d["per_session"]
    assert d["incidents_stopped"] == 1 and d["blind_calls"] == 0
    page = tmp_path / "r.html"
    out = runner.invoke(cli, ["report", "--db", str(bill["db"]), "-o", str(page)])
    assert out.exit_code == 0, out.output
    assert "counted per session" in page.read_text()
