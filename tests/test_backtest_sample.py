"""The guard presets replayed over the sample: the seeds' guards, buggy and fixed, behave as the
seeds say they did."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from analyzer.cli.main import cli
from analyzer.engine.store import Store, open_store
from analyzer.guards.backtest import Result, backtest
from analyzer.guards.policy import all_policies
from tests.helpers import SAMPLE_DATA, SampleStores


@pytest.fixture(scope="module")
def replay(tmp_path_factory: pytest.TempPathFactory, sample_stores: SampleStores) -> dict[str, Any]:
    db = sample_stores.ingested(tmp_path_factory.mktemp("bt") / "s.duckdb")
    runner = CliRunner()
    assert runner.invoke(cli, ["detect", "--db", str(db)]).exit_code == 0
    store = open_store(db, read_only=True)
    results = {r.policy: r for r in backtest(store, all_policies())}
    return {"store": store, "results": results, "db": db}


def incident_ids(store: Store, detector: str, like: str = "%") -> list[str]:
    return [
        r[0]
        for r in store.con.execute(
            "SELECT incident_id FROM incidents WHERE detector = ? AND stream_key LIKE ? "
            "ORDER BY start_ts",
            [detector, like],
        ).fetchall()
    ]


def stopped(result: Result) -> dict[str, dict[str, Any]]:
    return {s["incident_id"]: s for s in result.stopped}


def calls_of(store: Store, where: str) -> list[tuple]:
    return store.con.execute(
        f"SELECT call_id, response_kind, finish_reason FROM live_calls WHERE {where} "
        "ORDER BY stream_key, seq"
    ).fetchall()


def test_netclaw_reset_on_tool_never_stops_the_seed001_turn(replay: dict[str, Any]) -> None:
    store, r = replay["store"], replay["results"]["netclaw_reset_on_tool"]
    [turn] = incident_ids(store, "alternating_tool_thinking")
    assert turn not in stopped(r)
    netclaw = {c[0] for c in calls_of(store, "stream_key LIKE 'netclaw%'")}
    assert [t for t in r.trips if t.call_id in netclaw] == []


def test_netclaw_cumulative_per_turn_makes_its_last_attempt_at_the_10th_stall(
    replay: dict[str, Any],
) -> None:
    store, r = replay["store"], replay["results"]["netclaw_cumulative_per_turn"]
    [turn] = incident_ids(store, "alternating_tool_thinking")
    stalls = [
        c[0]
        for c in calls_of(store, "stream_key LIKE 'netclaw%'")
        if c[1] in ("thinking_only", "empty")
    ]
    assert [n.call_id for n in r.nudges] == [stalls[9]]  # tools off, one last attempt
    [trip] = [t for t in r.trips if t.incident_id == turn]
    assert trip.call_id == stalls[10]  # still empty: the turn fails
    assert stopped(r)[turn]["latency_events"] == 11  # its own events, not the turn's calls
    assert stopped(r)[turn]["waste_prevented_usd"] > 0
    # The bills beside Netclaw's logs carry the reply kind (thinking-only: all output was
    # reasoning), so the guard is blind only where no kind is known; they carry no turns, so
    # there it counted per session, and says so.
    unknown = store.scalar("SELECT count(*) FROM live_calls WHERE response_kind IS NULL")
    turnless = store.scalar("SELECT count(*) FROM live_calls WHERE turn_id IS NULL")
    assert (r.blind_calls, r.per_session_calls) == (unknown, turnless)
    assert turnless > 0 and r.per_session and "per session" in r.per_session


def test_maxtokens_session_fails_dans_third_report(replay: dict[str, Any]) -> None:
    store, r = replay["store"], replay["results"]["maxtokens_session"]
    reports = calls_of(store, "user_id = 'dan.bo' AND finish_reason = 'length'")
    assert len(reports) == 3
    [trip] = [t for t in r.trips if t.call_id in {c[0] for c in reports}]
    assert trip.call_id == reports[2][0] and trip.incident_id is None  # a false trip
    lost = store.scalar("SELECT cost_usd FROM live_calls WHERE call_id = ?", [trip.call_id])
    assert lost == Decimal("0.1521189")  # Dan's lost report: the harm, exact
    assert r.usd_false_trips >= lost and r.usd_lost_output >= lost


def test_maxtokens_truncated_tools_does_not(replay: dict[str, Any]) -> None:
    store, r = replay["store"], replay["results"]["maxtokens_truncated_tools"]
    dan = {c[0] for c in calls_of(store, "user_id = 'dan.bo'")}
    assert [t for t in r.trips if t.call_id in dan] == []
    assert r.false_trips == 0
    # ... and it does stop the real streak of truncated tool calls, at its 5th call.
    [streak] = incident_ids(store, "truncated_tool_call_streak")
    assert stopped(r)[streak]["latency_events"] == 5


def test_penguin_consecutive_trivial_misses_the_unsaved_seed000_runs(
    replay: dict[str, Any],
) -> None:
    store, r = replay["store"], replay["results"]["penguin_consecutive_trivial"]
    runs = incident_ids(store, "constant_input_low_output")
    assert len(runs) == 2
    assert not set(runs) & set(stopped(r))
    # The 33 replies it never saw were never saved; the fix that saved a placeholder lets the
    # same guard see them, and it stops both runs at their third call.
    unsaved = store.scalar(
        "SELECT count(*) FROM live_calls WHERE reply_saved = false AND output_tokens = 3"
    )
    assert unsaved == 33
    fixed = replay["results"]["penguin_consecutive_trivial_placeholder"]
    assert set(runs) <= set(stopped(fixed))


def test_penguin_stale_context_stops_each_run_at_its_third_call(replay: dict[str, Any]) -> None:
    store, r = replay["store"], replay["results"]["penguin_stale_context"]
    first_run, second_run = incident_ids(store, "constant_input_low_output")
    assert stopped(r)[first_run]["latency_events"] == 3
    run_calls = [
        c[0]
        for c in calls_of(
            store,
            f"call_id IN (SELECT call_id FROM incident_calls WHERE incident_id = '{first_run}')",
        )
    ]
    [trip] = [t for t in r.trips if t.incident_id == first_run]
    assert trip.call_id == run_calls[2]
    assert stopped(r)[first_run]["waste_prevented_usd"] == Decimal("0.28") * 19
    # The stop ends the turn, not the session: the second run, in the next user turn, is not
    # credited to it - it is stopped in its own turn, at its own third call ($2.96 of $4.07).
    assert stopped(r)[second_run]["latency_events"] == 3
    assert stopped(r)[second_run]["waste_prevented_usd"] == Decimal("0.37") * 8


def test_backtest_json_and_sweep(replay: dict[str, Any]) -> None:
    runner = CliRunner()
    result = runner.invoke(
        cli,
        [
            "backtest",
            "--db",
            str(replay["db"]),
            "--only",
            "netclaw_cumulative_per_turn",
            "--sweep",
            "netclaw_cumulative_per_turn.stop=3..21:2",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert [d["params"]["stop"] for d in data] == [3, 5, 7, 9, 11, 13, 15, 17, 19, 21]
    # The last attempt stays one step before the stop as it is swept (nudges, as columns).
    assert [d["params"]["nudge"] for d in data] == [2, 4, 6, 8, 10, 12, 14, 16, 18, 20]
    assert all(len(d["nudges"]) >= 1 for d in data) and len(data[4]["nudges"]) == 1
    for d in data:
        assert set(d) >= {
            "policy",
            "params",
            "description",
            "incidents_total",
            "incidents_stopped",
            "waste_prevented_usd",
            "waste_missed_usd",
            "calls_saved",
            "usd_saved",
            "false_trips",
            "usd_false_trips",
            "usd_work_killed",
            "harm_usd",
            "net_usd",
            "headroom",
            "blind_calls",
            "median_latency_events",
            "trips",
            "nudges",
        }
        for t in d["trips"]:
            assert set(t) >= {"stream_key", "session_id", "call_id", "ts", "action", "incident_id"}
            assert t["ts"].endswith("Z")
    prevented = [d["waste_prevented_usd"] for d in data]
    assert prevented == sorted(prevented, reverse=True)  # a later stop prevents less
    # the JSON's dollars are the result's, exact (a number with its 10 places)
    assert Decimal(str(data[4]["waste_prevented_usd"])) == (
        replay["results"]["netclaw_cumulative_per_turn"].waste_prevented_usd
    )


def test_audit_carries_the_backtest_and_the_report_its_guards(tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    result = CliRunner().invoke(cli, ["audit", str(SAMPLE_DATA), "--json", "-o", str(out)])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    names = [b["policy"] for b in data["backtest"]]
    assert names[:3] == [
        "penguin_consecutive_trivial",
        "penguin_consecutive_trivial_placeholder",
        "penguin_token_trivial",
    ]
    assert len(names) == 25
    page = out.read_text()
    assert 'id="guards"' in page and "netclaw_cumulative_per_turn" in page
    assert 'aria-label="Waste prevented against false trips, every policy and threshold"' in page
    assert "blind on" in page  # the guards that cannot see the bills say so
