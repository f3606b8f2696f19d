"""One rule ranks the guards: ``backtest --recommend`` and the report's recommendation name the
same policy at the same threshold."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from analyzer.cli.main import cli
from analyzer.engine.store import open_store
from analyzer.guards.backtest import GuardRun, default_sweep
from analyzer.guards.policy import parse_policy
from analyzer.guards.recommend import Budget, best
from analyzer.guards.scoring import Result
from analyzer.report.build import build_report
from tests.helpers import SAMPLE_DATA


def result(policy: str, stop: float, prevented: float, harm: float, false_trips: int) -> Result:
    return Result(
        policy=policy,
        params={"type": "counter", "scope": "session", "stop": stop},
        description="",
        incidents_total=2,
        incidents_stopped=1 if prevented else 0,
        waste_prevented_usd=prevented,
        calls_saved=0,
        usd_saved=prevented + harm,
        false_trips=false_trips,
        usd_false_trips=harm if false_trips else 0.0,
        median_latency_events=None,
        waste_total_usd=10.0,
        waste_missed_usd=10.0 - prevented,
        harm_usd=harm,
        net_usd=round(prevented - harm, 10),
    )


def test_the_page_recommends_what_backtest_recommend_does(tmp_path: Path) -> None:
    """A cost cap written at $0.30004 is off its own sweep's grid (thresholds to 4 decimals:
    0.3 is on it, 0.30004 not), so the backtest replays its own threshold apart, as
    ``backtest --recommend`` weighs it too. There it is the best (the most net, no false trip);
    at $0.30 on the grid it has a false trip, and the best the grid alone holds is another
    policy. The page and ``--recommend`` name the same guard at the same threshold."""
    cap = parse_policy(
        "cap", {"type": "budget", "scope": "session", "stop": 0.30004}, "test"
    )  # what a user writes: the threshold to the hundredth of a cent
    grid = default_sweep(cap)
    assert 0.3 in grid and 0.30004 not in grid
    cap_sweep = [result("cap", v, 0.0, 0.0, 0) for v in grid]
    cap_sweep[grid.index(0.3)] = result("cap", 0.3, 5.0, 2.0, 1)  # a false trip
    cap_sweep[grid.index(0.36)] = result("cap", 0.36, 3.0, 0.0, 0)
    own_cap = result("cap", 0.30004, 4.5, 0.5, 0)  # net $4.00: the best
    repeat_sweep = [result("repeat", float(v), 0.0, 0.0, 0) for v in range(1, 7)]
    repeat_sweep[2] = result("repeat", 3.0, 3.5, 0.0, 0)  # net $3.50: the grid's best
    run = GuardRun([own_cap, repeat_sweep[2]], {"cap": cap_sweep, "repeat": repeat_sweep})

    with open_store(tmp_path / "s.duckdb") as store:
        page = build_report(store, guards=run, charts_on=False).guards
    assert page is not None
    assert page.recommended == ("cap", 0.30004)

    chosen = best(run.variants(), Budget())
    assert chosen is not None and (chosen[0], chosen[1]) == page.recommended
    # What it saves, as the page says it: net of its harm, above $0.
    assert page.recommended_net_usd == chosen[2].net_usd > 0 and page.no_saving == ""
    # The page's sweep (its chart) holds the recommended point.
    assert (0.30004, 4.5, 0, 0.5) in page.sweep["cap"]


def test_on_the_sample_the_page_and_recommend_agree(tmp_path: Path) -> None:
    runner = CliRunner()
    db, out = tmp_path / "s.duckdb", tmp_path / "r.json"
    done = runner.invoke(cli, ["audit", str(SAMPLE_DATA), "--db", str(db), "-o", str(out)])
    assert done.exit_code == 0, done.output
    rec = runner.invoke(cli, ["backtest", "--db", str(db), "--recommend", "--json"])
    assert rec.exit_code == 0, rec.output
    doc = json.loads(rec.stdout)
    assert json.loads(out.read_text())["guards"]["recommended"] == [doc["policy"], doc["stop"]]


def test_a_net_that_shows_as_no_cent_is_not_recommended() -> None:
    """A guard whose net saving is under half a cent is shown as $0.00: it is not offered as a
    recommendation (``best`` passes it over), and one that saves a cent is."""
    crumbs = result("crumbs", 3, prevented=0.014, harm=0.0104, false_trips=0)
    assert crumbs.net_usd > 0  # it saves money, on paper: $0.0036, shown as $0.00
    assert best([("crumbs", 3.0, crumbs)], Budget()) is None
    cent = result("cent", 3, prevented=0.014, harm=0.004, false_trips=0)
    assert best([("crumbs", 3.0, crumbs), ("cent", 3.0, cent)], Budget()) == ("cent", 3.0, cent)
