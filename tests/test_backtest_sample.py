"""The guard presets replayed over the sample: the seeds' guards, buggy and fixed, behave as the
seeds say they did."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from analyzer.backtest import Result, backtest
from analyzer.cli import cli
from analyzer.guards import all_policies
from analyzer.store import Store, open_store
from tests.helpers import SAMPLE_DATA


@pytest.fixture(scope="module")
def replay(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    db = tmp_path_factory.mktemp("bt") / "sample.duckdb"
    runner = CliRunner()
    assert runner.invoke(cli, ["ingest", "--db", str(db), str(SAMPLE_DATA)]).exit_code == 0
    assert runner.invoke(cli, ["detect", "--db", str(db)]).exit_code == 0
    store = open_store(db)
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


def test_netclaw_cumulative_per_turn_stops_it_at_the_10th_thinking_only_reply(
    replay: dict[str, Any],
) -> None:
    store, r = replay["store"], replay["results"]["netclaw_cumulative_per_turn"]
    [turn] = incident_ids(store, "alternating_tool_thinking")
    assert turn in stopped(r)
    stalls = [c[0] for c in calls_of(store, "stream_key LIKE 'netclaw%'")
              if c[1] in ("thinking_only", "empty")]  # fmt: skip
    [trip] = [t for t in r.trips if t.incident_id == turn]
    assert trip.call_id == stalls[9]  # the 10th
    assert stopped(r)[turn]["waste_prevented_usd"] > 0


def test_maxtokens_session_trips_on_the_legitimate_reports(replay: dict[str, Any]) -> None:
    store, r = replay["store"], replay["results"]["maxtokens_session"]
    reports = [c[0] for c in calls_of(store, "user_id = 'dan.bo' AND finish_reason = 'length'")]
    assert len(reports) == 3
    [trip] = [t for t in r.trips if t.call_id in reports]
    assert trip.call_id == reports[2] and trip.incident_id is None  # a false trip
    assert r.false_trips >= 1


def test_maxtokens_truncated_tools_does_not(replay: dict[str, Any]) -> None:
    store, r = replay["store"], replay["results"]["maxtokens_truncated_tools"]
    dan = {c[0] for c in calls_of(store, "user_id = 'dan.bo'")}
    assert [t for t in r.trips if t.call_id in dan] == []
    assert r.false_trips == 0
    # ... and it does stop the real streak of truncated tool calls, at its 5th call.
    [streak] = incident_ids(store, "truncated_tool_call_streak")
    assert stopped(r)[streak]["latency_calls"] == 5


def test_penguin_consecutive_trivial_misses_the_unsaved_seed000_run(
    replay: dict[str, Any],
) -> None:
    store, r = replay["store"], replay["results"]["penguin_consecutive_trivial"]
    runs = incident_ids(store, "constant_input_low_output")
    assert len(runs) == 2
    assert not set(runs) & set(stopped(r))
    # The 33 replies it never saw were never saved.
    unsaved = store.scalar(
        "SELECT count(*) FROM live_calls WHERE reply_saved = false AND output_tokens = 3"
    )
    assert unsaved == 33


def test_penguin_stale_context_stops_it_at_the_third_call(replay: dict[str, Any]) -> None:
    store, r = replay["store"], replay["results"]["penguin_stale_context"]
    first_run, second_run = incident_ids(store, "constant_input_low_output")
    assert stopped(r)[first_run]["latency_calls"] == 3
    run_calls = [c[0] for c in calls_of(store, f"call_id IN (SELECT call_id FROM incident_calls "
                                               f"WHERE incident_id = '{first_run}')")]  # fmt: skip
    [trip] = [t for t in r.trips if t.incident_id == first_run]
    assert trip.call_id == run_calls[2]
    # The stop ends the session, so the second run (same session) never happens at all.
    assert stopped(r)[second_run]["latency_calls"] == 0
    assert stopped(r)[second_run]["waste_prevented_usd"] == pytest.approx(4.07)
    assert stopped(r)[first_run]["waste_prevented_usd"] == pytest.approx(0.28 * 19)


def test_backtest_json_and_sweep(replay: dict[str, Any]) -> None:
    runner = CliRunner()
    result = runner.invoke(cli, ["backtest", "--db", str(replay["db"]), "--only",
                                 "netclaw_cumulative_per_turn", "--sweep",
                                 "netclaw_cumulative_per_turn.stop=2..20:2", "--json"])  # fmt: skip
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert [d["params"]["stop"] for d in data] == [2, 4, 6, 8, 10, 12, 14, 16, 18, 20]
    for d in data:
        assert set(d) >= {
            "policy", "params", "incidents_total", "incidents_stopped", "waste_prevented_usd",
            "calls_saved", "usd_saved", "false_trips", "usd_false_trips",
            "median_latency_calls", "trips",
        }  # fmt: skip
        for t in d["trips"]:
            assert set(t) >= {"stream_key", "session_id", "call_id", "ts", "action", "incident_id"}
            assert t["ts"].endswith("Z")
    prevented = [d["waste_prevented_usd"] for d in data]
    assert prevented == sorted(prevented, reverse=True)  # a later stop prevents less
    assert data[4]["waste_prevented_usd"] == pytest.approx(
        replay["results"]["netclaw_cumulative_per_turn"].waste_prevented_usd
    )


def test_audit_carries_the_backtest_and_the_report_its_guards(tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    result = CliRunner().invoke(cli, ["audit", str(SAMPLE_DATA), "--json", "-o", str(out)])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    names = [b["policy"] for b in data["backtest"]]
    assert names[:3] == ["penguin_consecutive_trivial", "penguin_token_trivial",
                         "penguin_stale_context"]  # fmt: skip
    assert len(names) == 13
    page = out.read_text()
    assert 'id="guards"' in page and "netclaw_cumulative_per_turn" in page
    assert 'aria-label="Waste prevented against false trips as the threshold moves"' in page
