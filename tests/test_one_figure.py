"""One figure per question (issue 32): what an incident is attributed to, the guards that
would have stopped it and the dollars are decided once and every view prints that one figure:
the terminal, the page (HTML, Markdown, JSON), ``show`` and the commands' JSON."""

from __future__ import annotations

import json
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import pytest
from click.testing import CliRunner

from analyzer.cli.main import cli
from analyzer.engine.store import open_store
from tests.helpers import SAMPLE_DATA, fill_calls, insert, q

# A detector of the test's own (``--queries``): every call of a stream of three calls or more
# is waste, from the stream's first call to its last.
DETECTOR = """-- name: planted_loop
-- title: A planted loop
-- severity: high
-- params: min_calls=3
--
-- Every call of a stream of at least min_calls calls is counted as waste (a test's detector).
SELECT stream_key, any_value(session_id) AS session_id, min(ts) AS start_ts, max(ts) AS end_ts,
       count(*) AS n_calls, arg_min(call_id, seq) AS first_call_id,
       arg_max(call_id, seq) AS last_call_id, sum(cost_usd) AS wasted_usd,
       sum(input_tokens) AS wasted_tokens, 'estimated' AS cost_basis,
       count(*) || ' calls in a row' AS summary, '{}' AS evidence
FROM live_calls GROUP BY stream_key HAVING count(*) >= $min_calls
"""


def planted(tmp_path: Path, calls: list[dict[str, Any]]) -> str:
    """A store holding ``calls``, with the planted detector's incidents recorded by ``detect``."""
    db = tmp_path / "one.duckdb"
    with open_store(db) as store:
        insert(store, "calls", fill_calls(calls))
    queries = tmp_path / "queries"
    queries.mkdir()
    (queries / "planted_loop.sql").write_text(DETECTOR, encoding="utf-8")
    result = CliRunner().invoke(
        cli, ["detect", "--db", str(db), "--queries", str(queries), "--only", "planted_loop"]
    )
    assert result.exit_code == 0, result.output
    return str(db)


def run(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 0, result.output
    return result.stdout


# -- an incident's app, API key, model and project ------------------------------------------


def _call(app: str, key: str, model: str, project: str, usd: str) -> dict[str, Any]:
    return {
        "app": app,
        "api_key": key,
        "model": model,
        "project": project,
        "cost_usd": usd,
        "cost_basis": "estimated",
        "input_tokens": 1000,
        "output_tokens": 3,
    }


# Its first call is another app's; of its wasted calls two are alpha-loop's and two
# zeta-big's, which wasted more dollars: the incident is zeta-big's (not the first call's, and
# not the first name in order).
ATTRIBUTED = [
    _call("first-app", "key-first", "m-first", "p-first", "0.01"),
    _call("alpha-loop", "key-a", "m-loop", "p-loop", "0.10"),
    _call("alpha-loop", "key-a", "m-loop", "p-loop", "0.10"),
    _call("zeta-big", "key-b", "m-loop", "p-big", "1.00"),
    _call("zeta-big", "key-b", "m-loop", "p-big", "1.00"),
    {**_call("first-app", "key-first", "m-first", "p-first", "5.00"), "stream_key": "healthy"},
]
NAMED = {"app": "zeta-big", "api_key": "key-b", "model": "m-loop", "project": "p-big"}


def test_every_view_names_the_app_stored_at_detection_and_counts_its_waste_there(
    tmp_path: Path,
) -> None:
    db = planted(tmp_path, ATTRIBUTED)
    with open_store(db, read_only=True) as store:  # decided at detection, kept with it
        [stored] = q(store, "SELECT app, api_key, model, project, wasted_usd FROM incidents")
    assert stored[:4] == tuple(NAMED.values())
    wasted = stored[4]
    assert wasted == Decimal("2.21")
    [listed] = json.loads(run("incidents", "--db", db, "--json"))
    assert {k: listed[k] for k in NAMED} == NAMED
    shown = json.loads(run("show", "1", "--db", db, "--json"))
    assert {k: shown[k] for k in NAMED} == NAMED
    assert re.search(r"^  app +zeta-big$", run("show", "1", "--db", db), re.M)
    assert "[zeta-big · key-b · m-loop]" in run("incidents", "--db", db)
    [mine] = json.loads(run("incidents", "--db", db, "--app", "zeta-big", "--json"))
    assert mine["app"] == "zeta-big"
    assert json.loads(run("incidents", "--db", db, "--app", "first-app", "--json")) == []
    for fmt in ("json", "md", "html"):
        run("report", "--db", db, "-o", str(tmp_path / f"r.{fmt}"))
    page = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert page["incidents"][0]["where"] == "zeta-big · key-b · m-loop"
    # The spend tables count the incident's waste under the app, key and model it names.
    named = (
        ("by_app", "zeta-big", "first-app"),
        ("by_key", "key-b", "key-first"),
        ("by_model", "m-loop", "m-first"),
    )
    for table, name, other in named:
        rows = {r["name"]: r for r in page[table]}
        assert (Decimal(str(rows[name]["wasted_usd"])), rows[name]["incidents"]) == (wasted, 1)
        assert (rows[other]["wasted_usd"], rows[other]["incidents"]) == (0, 0), table
    md = (tmp_path / "r.md").read_text(encoding="utf-8")
    assert "- Where: zeta-big · key-b · m-loop" in md
    assert "| zeta-big | 2 | $2.00 | $2.21 |" in md
    assert "| first-app | 2 | $5.01 | $0.00 |" in md
    html = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert "<dt>Where</dt><dd>zeta-big · key-b · m-loop</dd>" in html
    assert (
        '<td class="name" data-label="App">zeta-big</td><td class="n" data-label="Calls">2</td>'
        '<td class="n" data-label="Spend">$2.00</td><td class="n" data-label="Wasted">$2.21</td>'
        in html
    )
    run("report", "--db", db, "-o", str(tmp_path / "r.csv"))
    assert "zeta-big,key-b,m-loop,p-big" in (tmp_path / "r.csv").read_text(encoding="utf-8")


def test_the_incidents_of_a_store_of_format_8_are_attributed_when_it_is_upgraded(
    tmp_path: Path,
) -> None:
    """A store written before incidents carried their attribution gets it when upgraded, as
    `detect` would have decided it, so the views that read it never find it missing."""
    db = planted(tmp_path, ATTRIBUTED)
    con = duckdb.connect(db)
    for column in NAMED:
        con.execute(f"ALTER TABLE incidents DROP COLUMN {column}")
    con.execute("UPDATE meta SET value = '8' WHERE key = 'schema_version'")
    con.close()
    with open_store(db) as store:  # opened for writing: upgraded
        [stored] = q(store, "SELECT app, api_key, model, project FROM incidents")
    assert stored == tuple(NAMED.values())


# -- the guards that would have stopped an incident ------------------------------------------


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("one")
    db = str(out / "s.duckdb")
    audit = json.loads(
        run("audit", str(SAMPLE_DATA), "--db", db, "-o", str(out / "r.json"), "--json")
    )
    page = json.loads((out / "r.json").read_text(encoding="utf-8"))
    return {"db": db, "audit": audit, "page": page, "dir": out}


def test_the_guards_that_stop_an_incident_are_one_list_in_every_view(
    sample: dict[str, Any],
) -> None:
    """The page, ``show`` (text and JSON) and ``audit --json`` list the same guards for an
    incident, in the same order (most waste prevented first, then the fewest events, then by
    name: on the sample, guards tie)."""
    audit = {i["number"]: i for i in sample["audit"]["incidents"]}
    checked = 0
    for row in sample["page"]["guards"]["incidents"]:
        n = row["rank"]
        on_page = [(p, latency, prevented) for p, latency, prevented in row["stopped_by"]]
        shown = json.loads(run("show", str(n), "--db", sample["db"], "--json"))["stopped_by"]
        in_show = [(s["policy"], s["latency_events"], s["waste_prevented_usd"]) for s in shown]
        assert in_show == on_page, n
        in_audit = audit[n]["stopped_by"]
        assert [
            (s["policy"], s["latency_events"], s["waste_prevented_usd"]) for s in in_audit
        ] == on_page, n
        text = run("show", str(n), "--db", sample["db"])
        guards = text[text.index("Guards that would have stopped it") :]
        named = re.findall(r"^  ([a-z0-9_]+): after", guards, re.M)
        assert named == [p for p, _, _ in on_page], n
        checked += bool(on_page)
    assert checked >= 2
    # An incident no guard stops says so the same way everywhere.
    quiet = [i for i in sample["audit"]["incidents"] if not i["stopped_by"]]
    assert quiet and all(isinstance(i["stopped_by"], list) for i in quiet)


# -- money: exact from the store to the printed text -----------------------------------------

# Three wasted calls of 1e-10 precision that add up to exactly half a cent over 16 cents, and
# a large healthy call: float(0.165) is 0.16500000000000000777, printed "$0.17", where the exact
# amount rounds (half to even, as Decimal does) to "$0.16"; and the total, 10,000,000.1649999999,
# has more digits than a float keeps (10000000.165).
EXACT = [
    {"cost_usd": "0.0550000001", "cost_basis": "estimated", "app": "a"},
    {"cost_usd": "0.0549999999", "cost_basis": "estimated", "app": "a"},
    {"cost_usd": "0.0550000000", "cost_basis": "estimated", "app": "a"},
    {"cost_usd": "9999999.9999999999", "cost_basis": "estimated", "app": "b", "stream_key": "big"},
]
WASTED = Decimal("0.165")
TOTAL = Decimal("10000000.1649999999")


def test_money_is_exact_from_the_store_to_every_printed_figure(tmp_path: Path) -> None:
    db = planted(tmp_path, EXACT)
    for fmt in ("json", "md", "html"):
        run("report", "--db", db, "-o", str(tmp_path / f"r.{fmt}"))
    page = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"), parse_float=Decimal)
    assert page["headline"]["wasted_usd"] == WASTED
    assert page["headline"]["total_usd"] == TOTAL
    assert page["incidents"][0]["wasted_usd"] == WASTED
    assert {r["name"]: r["usd"] for r in page["by_app"]} == {
        "b": Decimal("9999999.9999999999"),
        "a": WASTED,
    }
    [listed] = json.loads(run("incidents", "--db", db, "--json"), parse_float=Decimal)
    assert listed["wasted_usd"] == WASTED
    usage = json.loads(run("usage", "daily", "--db", db, "--json"), parse_float=Decimal)
    assert usage["totals"]["usd"] == TOTAL
    # Printed to the cent, every view rounds the same exact amount the same way.
    assert "Incidents (1, $0.16 wasted)" in run("incidents", "--db", db)
    assert "$0.16 wasted" in run("show", "1", "--db", db)
    html = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert re.search(r'id="wasted-usd">([^<]*)<', html).group(1) == "$0.16"  # type: ignore[union-attr]
    assert re.search(r'id="total-usd">([^<]*)<', html).group(1) == "$10,000,000.16"  # type: ignore[union-attr]
    assert "$0.17" not in html
    md = (tmp_path / "r.md").read_text(encoding="utf-8")
    assert "$0.16 wasted" in md and "$0.17" not in md
    assert "$10,000,000.16" in run("usage", "daily", "--db", db)
