"""The calls' labels as a dimension of the usage views (``--by LABEL``, store format 13).

No format read before issue 51 states labels, so these tests give some of the sample's calls
labels in SQL (as an OpenTelemetry reader stores them: ``values.labels_text``) and hold the
views' breakdown to sums over ``calls``.
"""

from __future__ import annotations

import csv
import io
import json
from decimal import Decimal
from pathlib import Path

import duckdb
from click.testing import CliRunner

from analyzer.api import Forensics
from analyzer.cli.main import cli
from analyzer.ingest.values import labels_text
from analyzer.views.view import How

PLATFORM = labels_text({"team.id": "platform", "user.email": "ana@example.com"})
SEARCH = labels_text({"team.id": "search", "cost_center": "cc-7"})


def _label(db: Path) -> None:
    """Half the sample's sessions get a team, a few calls another one; the rest none."""
    con = duckdb.connect(str(db))
    try:
        con.execute(
            "UPDATE calls SET labels = ? WHERE hash(coalesce(session_id, stream_key)) % 2 = 0",
            [PLATFORM],
        )
        con.execute("UPDATE calls SET labels = ? WHERE hash(call_id) % 7 = 0", [SEARCH])
    finally:
        con.close()


def _by_team(db: Path) -> dict[tuple[str, str], tuple[int, Decimal]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        rows = con.execute(
            "SELECT strftime(ts, '%Y-%m-%d'), "
            "coalesce(json_extract_string(labels, '/team.id'), '(none)'), "
            "count(*), coalesce(sum(cost_usd), 0) FROM live_calls GROUP BY ALL"
        ).fetchall()
    finally:
        con.close()
    return {(str(day), team): (int(n), Decimal(usd)) for day, team, n, usd in rows}


def test_a_period_view_breaks_down_by_a_label(runner: CliRunner, ingested_sample_db: Path) -> None:
    db = ingested_sample_db
    _label(db)
    want = _by_team(db)
    assert {team for _, team in want} == {"platform", "search", "(none)"}
    done = runner.invoke(cli, ["usage", "daily", "--db", str(db), "--by", "team.id", "--json"])
    assert done.exit_code == 0, done.output
    doc = json.loads(done.output)
    assert doc["by"] == "team.id"
    got: dict[tuple[str, str], tuple[int, Decimal]] = {}
    for row in doc["daily"]:
        parts = row["breakdown"]
        assert sum(p["calls"] for p in parts) == row["calls"]
        for p in parts:
            team = p["key"].removeprefix("team.id=")
            got[row["period"], team] = (p["calls"], Decimal(str(p["usd"])))
    assert got == want


def test_the_text_and_csv_name_each_value(runner: CliRunner, ingested_sample_db: Path) -> None:
    db = ingested_sample_db
    _label(db)
    text = runner.invoke(
        cli, ["usage", "monthly", "--db", str(db), "--by", "team.id", "--breakdown"]
    )
    assert text.exit_code == 0, text.output
    assert "└ team.id=platform · " in text.output and "└ team.id=(none) · " in text.output
    done = runner.invoke(cli, ["usage", "weekly", "--db", str(db), "--by", "cost_center", "--csv"])
    assert done.exit_code == 0, done.output
    rows = list(csv.DictReader(io.StringIO(done.output)))
    labelled = [r for r in rows if r["label"]]
    assert {r["label"] for r in labelled} == {"cost_center=cc-7", "cost_center=(none)"}
    totals = [r for r in rows if r["weekly"] == "Total"]
    kept = [r for r in rows if not r["label"] and r["weekly"] != "Total"]
    assert sum(int(r["calls"]) for r in labelled) == sum(int(r["calls"]) for r in kept)
    assert sum(int(r["calls"]) for r in kept) == int(totals[0]["calls"])


def test_a_label_no_call_has_is_an_error_naming_those_there_are(
    runner: CliRunner, ingested_sample_db: Path
) -> None:
    db = ingested_sample_db
    none = runner.invoke(cli, ["usage", "daily", "--db", str(db), "--by", "team.id"])
    assert none.exit_code == 3
    assert "no call has the label 'team.id'" in none.output
    assert "no call in this store has labels" in none.output
    _label(db)
    typo = runner.invoke(cli, ["usage", "daily", "--db", str(db), "--by", "team"])
    assert typo.exit_code == 3
    assert "the calls' labels are: cost_center, team.id, user.email" in typo.output


def test_an_incident_carries_its_wasted_calls_labels(
    runner: CliRunner, ingested_sample_db: Path
) -> None:
    """Attributed as its app and model are: the labels most of its wasted calls carry."""
    db = ingested_sample_db
    con = duckdb.connect(str(db))
    try:
        con.execute(
            "UPDATE calls SET labels = ? WHERE hash(coalesce(session_id, stream_key)) % 2 = 0",
            [PLATFORM],
        )
    finally:
        con.close()
    done = runner.invoke(cli, ["detect", "--db", str(db), "-q"])
    assert done.exit_code in (0, 1), done.output
    con = duckdb.connect(str(db), read_only=True)
    try:
        rows = con.execute(
            "SELECT i.incident_id, any_value(c.labels), count(DISTINCT coalesce(c.labels, '')) "
            "FROM incidents i JOIN incident_calls ic USING (incident_id) "
            "JOIN calls c ON c.call_id = ic.call_id GROUP BY ALL"
        ).fetchall()
    finally:
        con.close()
    uniform = {i: labels for i, labels, n in rows if n == 1}
    listed = runner.invoke(cli, ["incidents", "--db", str(db), "--json"])
    assert listed.exit_code in (0, 1), listed.output
    doc = json.loads(listed.output)
    found = {i["incident_id"]: i.get("labels") for i in doc}
    assert any(uniform.values()) and any(labels is None for labels in uniform.values())
    for incident, labels in uniform.items():
        assert found[incident] == (json.loads(labels) if labels else None)
    number = next(i["number"] for i in doc if i.get("labels"))
    shown = runner.invoke(cli, ["show", str(number), "--db", str(db)])
    assert "labels   team.id=platform, user.email=ana@example.com" in shown.output


def test_audit_and_the_page_show_spend_by_label(
    runner: CliRunner, ingested_sample_db: Path
) -> None:
    """The audit's spend tables and the page's breakdowns gain one by label and value (a call
    counts under each of its labels) where calls have labels, and only there."""
    db = ingested_sample_db
    with Forensics.open(db, create=False) as f:
        assert "spend_by_label" not in f.summary().to_json()
    _label(db)
    con = duckdb.connect(str(db), read_only=True)
    try:
        want = {
            f"{k}={v}": (int(n), Decimal(usd))
            for k, v, n, usd in con.execute(
                "SELECT k, json_extract_string(labels, '/' || k), count(*), "
                "coalesce(sum(cost_usd), 0) FROM (SELECT *, unnest(json_keys(labels)) AS k "
                "FROM live_calls WHERE labels IS NOT NULL) GROUP BY ALL"
            ).fetchall()
        }
    finally:
        con.close()
    with Forensics.open(db, create=False) as f:
        summary = f.summary()
    rows = summary.to_json()["spend_by_label"]
    assert {r["name"]: (r["calls"], Decimal(str(r["usd"]))) for r in rows} == want
    text = summary.text(How(width=100))
    assert "Spend by label (top 4)" in text and "team.id=platform" in text
    page = db.parent / "page.html"
    made = runner.invoke(cli, ["report", "--db", str(db), "-o", str(page)])
    assert made.exit_code == 0, made.output
    html = page.read_text()
    assert "<h3>By label</h3>" in html and ">team.id=platform</td>" in html


def test_a_hostile_label_is_escaped_on_the_page_and_made_printable_on_the_terminal(
    runner: CliRunner, ingested_sample_db: Path
) -> None:
    """Labels come from logs: untrusted, like every other value of them."""
    db = ingested_sample_db
    hostile = labels_text({"team.id": "<script>alert(1)</script>\x1b[2J\u202e"})
    con = duckdb.connect(str(db))
    try:
        con.execute("UPDATE calls SET labels = ?", [hostile])
    finally:
        con.close()
    shown = runner.invoke(cli, ["usage", "monthly", "--db", str(db), "--by", "team.id"])
    assert shown.exit_code == 0, shown.output
    assert "\x1b" not in shown.output and "\u202e" not in shown.output
    assert "team.id=<script>" in shown.output  # (shown as text: a terminal runs no script)
    page = db.parent / "page.html"
    made = runner.invoke(cli, ["report", "--db", str(db), "-o", str(page)])
    assert made.exit_code == 0, made.output
    html = page.read_text()
    assert "<script>alert(1)" not in html and "&lt;script&gt;alert(1)" in html
    assert "\x1b" not in html and "\u202e" not in html
