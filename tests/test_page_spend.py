"""The page's answers ccusage cannot give (issue 50), on a home of real Claude Code logs: spend
by project and by session (the figures of ``usage project`` and ``usage session``, to the
cent), "no waste found" said as such when the incidents found cost nothing, and a guard
recommended only when it saves money (else a sentence saying why not)."""

from __future__ import annotations

import copy
import json
import re
import shutil
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from analyzer.cli.main import cli
from analyzer.engine.store import open_store
from analyzer.report.build import build_report, duration, no_saving_reason
from analyzer.report.model import GuardRow, Guards, Report
from analyzer.report.render import render_text
from tests.ccusage_side import real_world_home
from tests.helpers import shared_samples


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The real-world home (its Claude Code and Codex sessions: more sessions than the page
    lists) audited into a store, its page, and ``usage project`` and ``usage session`` on that
    store."""
    out = tmp_path_factory.mktemp("real")
    home = real_world_home(out)
    codex = home / ".codex" / "sessions"
    shutil.copytree(shared_samples() / "real-world" / "codex", codex)
    db, html = out / "store.duckdb", out / "report.html"
    runner = CliRunner()
    claude = str(home / ".claude" / "projects")
    done = runner.invoke(cli, ["audit", claude, str(codex), "--db", str(db), "-q", "-o", str(html)])
    assert done.exit_code == 0, done.output
    views = {}
    for view in ("project", "session"):
        got = runner.invoke(cli, ["usage", view, "--db", str(db), "--json"])
        assert got.exit_code == 0, got.output
        views[view] = json.loads(got.stdout)
    with open_store(db, read_only=True) as store:
        report = build_report(store, charts_on=False)
    return {"db": db, "html": html.read_text(encoding="utf-8"), "usage": views, "report": report}


def cents(x: Any) -> Decimal:
    return Decimal(str(x)).quantize(Decimal("0.01"))


def test_spend_by_project_is_usage_project_to_the_cent(real: dict[str, Any]) -> None:
    spend = real["report"].spend
    rows = real["usage"]["project"]["project"]
    assert len(rows) >= 5 and spend.projects_total == len(rows)
    shown = [p for p in spend.projects if p.name is not None]
    for p, u in zip(shown, rows, strict=False):  # the same order: most dollars first
        assert (p.name, p.calls, p.tokens) == (u["key"], u["calls"], u["total_tokens"])
        assert p.usd == Decimal(str(u["usd"])), p.name
    rest = rows[len(shown) :]
    if rest:
        last = spend.projects[-1]
        assert last.name is None and last.count == len(rest)
        assert cents(last.usd) == cents(sum(Decimal(str(u["usd"])) for u in rest))
    total = sum((p.usd for p in spend.projects), Decimal(0))
    assert cents(total) == cents(real["usage"]["project"]["totals"]["usd"])
    assert abs(sum(p.share for p in spend.projects) - 1) < 1e-9


def test_spend_by_session_is_usage_session_to_the_cent(real: dict[str, Any]) -> None:
    spend = real["report"].spend
    rows = {u["key"]: u for u in real["usage"]["session"]["session"]}
    assert spend.sessions_total == len(rows) > 15  # more than shown: the rest summed
    shown = [s for s in spend.sessions if s.session_id is not None]
    assert [s.usd for s in shown] == sorted((s.usd for s in shown), reverse=True)
    for s in shown:
        u = rows.pop(s.session_id)
        assert (s.calls, s.tokens, s.models) == (u["calls"], u["total_tokens"], u["models"])
        assert s.usd == Decimal(str(u["usd"])), s.session_id
        assert s.project == u["project"]
        # (the page shows times to the second)
        assert (s.first_ts, s.last_ts) == (u["first"][:19] + "Z", u["last"][:19] + "Z")
    rest = spend.sessions[-1]
    assert rest.session_id is None and rest.count == len(rows)
    assert rest.calls == sum(u["calls"] for u in rows.values())
    assert cents(rest.usd) == cents(sum(Decimal(str(u["usd"])) for u in rows.values()))
    # Every shown session is dearer than every summed one.
    assert min(s.usd for s in shown) >= max(Decimal(str(u["usd"])) for u in rows.values())


def test_the_tables_name_projects_shortly_with_the_whole_name_in_a_title(
    real: dict[str, Any],
) -> None:
    html = real["html"]
    table = html[html.index('id="spend-projects"') : html.index('id="by-session"')]
    cells = re.findall(r'<td class="name" data-label="Project" title="([^"]*)">([^<]*)</td>', table)
    assert (
        "-home-marco-projects-spotter-worktrees-spotter-fum",
        "spotter-worktrees-spotter-fum",
    ) in cells
    assert ("-home-jn-projects-agentcmd", "agentcmd") in cells
    sessions = html[html.index('id="spend-sessions"') :]
    assert "the other " in sessions[: sessions.index("</table>")]  # the rest, in one line


def test_incidents_that_cost_nothing_are_said_as_no_waste(real: dict[str, Any]) -> None:
    """The real-world home: a few sessions far dearer than their peers, incidents that waste
    nothing. The page says so, never "$0.00 (0.0%)" in green beside the incidents."""
    html = real["html"]
    report: Report = real["report"]
    assert report.headline.incidents >= 1 and report.headline.wasted_usd == 0
    assert re.search(r'id="wasted-usd">No waste found<', html)
    card = html[html.index('id="wasted-usd"') - 200 : html.index('id="wasted-usd"')]
    assert "calm" not in card and "waste" not in card.split('class="card')[-1].split('"')[0]
    n = report.headline.incidents
    assert f"the {n} incident{'s' if n != 1 else ''} found cost nothing" in html
    assert '<h2 id="incidents">Incidents: no waste found</h2>' in html
    assert "0.0% of spend" not in html
    listed = html[html.index('id="incidents"') : html.index('<section class="incident"')]
    assert "$0.00" not in listed and listed.count(">none<") == n


def test_the_list_leads_with_what_wasted_money(real: dict[str, Any]) -> None:
    """The same page with one incident given waste: it is counted, leads the list, and the
    ones that cost nothing follow under their own line."""
    report: Report = copy.deepcopy(real["report"])
    assert len(report.incidents) >= 2
    wasteful = report.incidents[-1]
    wasteful.wasted_usd = Decimal("1.25")
    report.incidents = [wasteful, *report.incidents[:-1]]
    report.headline.wasted_usd = Decimal("1.25")
    html = render_text(report, "html")
    assert re.search(r'id="wasted-usd">\$1\.25<', html)
    assert '<h2 id="incidents">Incidents, most wasted first</h2>' in html
    n = len(report.incidents)
    assert f"1 of the {n} incidents wasted money ($1.25" in html
    listed = html[
        html.index('id="incidents-lead"') : html.index(
            "</table>", html.index('id="incidents-lead"')
        )
    ]
    assert listed.index(f'id="row-{wasteful.rank}"') < listed.index("Found, but cost nothing")
    assert listed.count('<tr id="row-') == n


def test_no_saving_says_why() -> None:
    d = Decimal
    assert "stops a wasted call" in no_saving_reason([(d(0), 0, d(0)), (d(0), 3, d(-1))])
    assert "also trips on healthy work" in no_saving_reason([(d(2), 1, d(1)), (d(0), 0, d(0))])
    assert "more healthy work than the waste" in no_saving_reason(
        [(d(2), 0, d(-1)), (d(3), 2, d(1))]
    )
    assert no_saving_reason([(d(2), 0, d(1))]) == ""  # one saves money: no reason needed


def guard(policy: str, prevented: str, false_trips: int, net: str) -> GuardRow:
    return GuardRow(
        policy=policy,
        description="",
        kind="counter, per session",
        stop=3.0,
        incidents_stopped=1 if Decimal(prevented) else 0,
        incidents_total=1,
        waste_prevented_usd=Decimal(prevented),
        waste_missed_usd=Decimal(0),
        false_trips=false_trips,
        harm_usd=Decimal(prevented) - Decimal(net),
        net_usd=Decimal(net),
        median_latency_events=None,
        nudges=0,
        blind="",
    )


def test_a_guard_is_recommended_only_when_it_saves_money(real: dict[str, Any]) -> None:
    # The real-world home: nothing wasted, so nothing to recommend, said in a sentence.
    html = real["html"]
    assert "No guard would have saved money on this history: nothing was wasted" in html
    assert 'id="recommended"' not in html
    # Waste, but every guard that stops it trips on healthy work: a sentence, no policy named.
    report: Report = copy.deepcopy(real["report"])
    rows = [guard("repeat", "2", 1, "1.5"), guard("cap", "0", 0, "0")]
    reason = no_saving_reason([(r.waste_prevented_usd, r.false_trips, r.net_usd) for r in rows])
    report.guards = Guards(rows, [], {}, no_saving=reason)
    html = render_text(report, "html")
    said = re.search(r'<p id="no-recommendation">([^<]*)</p>', html)
    assert said and said.group(1).startswith("No guard would have saved money on this history:")
    assert "also trips on healthy work" in said.group(1)
    assert 'id="recommended"' not in html
    # A guard that saves money: recommended, with what it saves.
    report.guards = Guards(rows, [], {}, ("repeat", 3.0), Decimal("1.5"))
    html = render_text(report, "html")
    assert 'id="no-recommendation"' not in html
    said = re.search(r'<p id="recommended">(.*?)</p>', html)
    assert said and said.group(1).startswith(
        "Recommended: <strong>repeat</strong> at stop = 3, which would have saved $1.50"
    )


def test_durations_in_words() -> None:
    from datetime import datetime, timedelta

    t = datetime(2026, 2, 11, 21, 41, 48)
    assert [
        duration(t, t + timedelta(seconds=s)) for s in (0, 59, 60, 3599, 3600 + 300, 49 * 3600)
    ] == ["0 s", "59 s", "1 min", "59 min", "1 h 05 min", "2 d 1 h"]
    assert duration(None, t) == ""


def test_the_markdown_report_has_the_same_tables_and_words(
    real: dict[str, Any], tmp_path: Path
) -> None:
    out = tmp_path / "r.md"
    done = CliRunner().invoke(cli, ["report", "--db", str(real["db"]), "-o", str(out)])
    assert done.exit_code == 0, done.output
    md = out.read_text(encoding="utf-8")
    listed = {p.name: p.short for p in real["report"].spend.projects if p.name is not None}
    for u in real["usage"]["project"]["project"]:
        if u["key"] not in listed:  # summed in the line of the rest
            continue
        short = listed[u["key"]]
        assert f"| {short} | {u['calls']:,} | {u['total_tokens']:,} | ${u['usd']:,.2f} |" in md
    assert "| none found | – |" in md  # the headline's waste, not "$0.00 | 0.0%"
    assert "No guard would have saved money on this history: nothing was wasted" in md
