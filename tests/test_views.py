"""The views of a store: usage tables (held to SQL over ``calls`` to the cent, and to ccusage's
own figures on the real Claude Code samples), the time filters, the incident list, ``show``,
``rejects`` and ``export``."""

from __future__ import annotations

import json
import re
import shutil
from decimal import Decimal
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from analyzer.cli.main import cli
from analyzer.engine.store import OFFLINE
from tests.helpers import SAMPLE_DATA, or_row, shared_samples, write_csv

# The five Claude Code transcripts among ../shared/samples, and what ccusage 20.0.24 prints for
# them (`ccusage daily --json -z UTC` and `ccusage session --json`, with the files as the only
# project of a fake home): input, cache creation, cache read and output tokens.
CC_FILES = {
    "jnarowski__agentcmd__full-session-four.jsonl": "2d984148-cddb-4605-aac1-13e720fe613c",
    "marot__spotter__agent-acompact-e1f845.jsonl": "4d5611e5-241a-462a-8d15-5122611a9569:agent-acompact-e1f845",  # noqa: E501
    "marot__spotter__agent-afc096d.jsonl": "6c2214d7-b87e-4432-8e41-22ba294ea584:agent-afc096d",
    "oneryalcin__fasthooks__sample_main_transcript.jsonl": "c45af7b1-cb7c-4e51-93db-8cbb250a877a",
    "pypi-data__pypi-mirror-400__fasthooks-0.1.4__sample_agent_sidechain.jsonl": "c45af7b1-cb7c-4e51-93db-8cbb250a877a:agent-af1ff21",  # noqa: E501
}
CCUSAGE_DAILY = {
    "2025-10-26": (48, 64499, 1178761, 228),
    "2026-01-02": (860, 8467, 223265, 1632),
    "2026-02-10": (219, 39438, 457858, 28),
    "2026-02-12": (3, 8681, 164830, 8),
}
CCUSAGE_SESSIONS = {  # ccusage names a session by its file
    "jnarowski__agentcmd__full-session-four.jsonl": (48, 64499, 1178761, 228),
    "marot__spotter__agent-acompact-e1f845.jsonl": (3, 8681, 164830, 8),
    "marot__spotter__agent-afc096d.jsonl": (219, 39438, 457858, 28),
    "oneryalcin__fasthooks__sample_main_transcript.jsonl": (132, 8467, 223265, 1480),
    "pypi-data__pypi-mirror-400__fasthooks-0.1.4__sample_agent_sidechain.jsonl": (728, 0, 0, 152),
}
TOKENS = ("input", "cache_write", "cache_read", "output")
# ccusage 20.0.24's dollars for the same files (`totalCost`, same commands). Most calls of these
# files log a streaming placeholder for their output (Claude Code 2.0.28-2.1.39): ccusage prices
# the logged count, and so does our `usd_at_logged_output`; our dollars (`usd`) price the output
# estimated from what each call wrote, so they are higher, and say so.
CCUSAGE_DAILY_USD = {
    "2025-10-26": Decimal("0.5990635500000001"),
    "2026-01-02": Decimal("0.04193025"),
    "2026-02-10": Decimal("0.1250208"),
    "2026-02-12": Decimal("0.13688625000000001"),
}


@pytest.fixture(scope="module")
def cc_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("cc")
    for name in CC_FILES:
        shutil.copy(shared_samples() / name, folder / name)
    db = folder / "cc.duckdb"
    result = CliRunner().invoke(cli, ["ingest", "--db", str(db), str(folder)])
    assert result.exit_code == 0, result.output
    return db


@pytest.fixture(scope="module")
def sample_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("views") / "sample.duckdb"
    result = CliRunner().invoke(cli, ["audit", "--db", str(db), str(SAMPLE_DATA), "-q"])
    assert result.exit_code == 0, result.output
    return db


def usage_json(db: Path, *args: str) -> dict:  # type: ignore[type-arg]
    result = CliRunner().invoke(cli, ["usage", *args, "--db", str(db), "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def test_daily_tokens_agree_with_ccusage(cc_db: Path) -> None:
    data = usage_json(cc_db, "daily")
    assert {r["key"]: tuple(r[t] for t in TOKENS) for r in data["daily"]} == CCUSAGE_DAILY


def test_session_tokens_agree_with_ccusage(cc_db: Path) -> None:
    # (ccusage names a session by its file: these sub-agents' files lie beside the others, not
    # in their parent's folder, so ccusage does not count them in it; --sub-agents nor do we)
    data = usage_json(cc_db, "session", "--sub-agents")
    ours = {r["key"]: tuple(r[t] for t in TOKENS) for r in data["session"]}
    assert ours == {CC_FILES[f]: figures for f, figures in CCUSAGE_SESSIONS.items()}


def test_dollars_at_the_logged_output_agree_with_ccusage_and_ours_price_the_estimate(
    cc_db: Path,
) -> None:
    """The logged figure equals ccusage's (to 1e-8 dollars); ours is the estimate, above it by
    exactly what the placeholder calls' estimated output adds."""
    for r in usage_json(cc_db, "daily")["daily"]:
        ph = r["placeholder_output"]
        assert 0 < ph["calls"] <= r["calls"]
        at_logged = r["usd"] - ph["usd_at_estimated_output"] + ph["usd_at_logged_output"]
        assert at_logged == pytest.approx(float(CCUSAGE_DAILY_USD[r["key"]]), abs=1e-8)
        assert ph["output_tokens_estimated"] > ph["output_tokens_logged"]
        assert r["usd"] > at_logged  # ours: the placeholders priced at their estimate


def test_weekly_starts_on_monday_and_monthly_adds_up(cc_db: Path) -> None:
    weekly = usage_json(cc_db, "weekly")
    assert [r["key"] for r in weekly["weekly"]] == ["2025-10-20", "2025-12-29", "2026-02-09"]
    monthly = usage_json(cc_db, "monthly")
    assert [r["key"] for r in monthly["monthly"]] == ["2025-10", "2026-01", "2026-02"]
    assert monthly["monthly"][2]["input"] == 219 + 3  # both February days
    # A zone moves calls across days: 2025-10-26 is one UTC day; in Tokyo some fall on the 27th.
    tokyo = usage_json(cc_db, "daily", "--tz", "Asia/Tokyo")
    assert sum(r["calls"] for r in tokyo["daily"]) == sum(
        r["calls"] for r in usage_json(cc_db, "daily")["daily"]
    )


@pytest.mark.parametrize("view", ["daily", "weekly", "monthly", "session", "project", "model"])
def test_every_view_agrees_with_sql_over_calls_to_the_cent(sample_db: Path, view: str) -> None:
    data = usage_json(sample_db, view, "--breakdown")
    con = duckdb.connect(str(sample_db), read_only=True, config=OFFLINE)
    try:
        calls, inp, cw, cr, out, reasoning, billed, estimated = con.execute(
            """SELECT count(*),
                      sum(input_tokens - coalesce(cached_input_tokens, 0)
                          - coalesce(cache_write_tokens, 0)),
                      sum(cache_write_tokens), sum(cached_input_tokens), sum(output_tokens),
                      sum(reasoning_tokens),
                      sum(cost_usd) FILTER (WHERE cost_basis = 'billed'),
                      sum(cost_usd) FILTER (WHERE cost_basis = 'estimated')
               FROM calls WHERE superseded_by IS NULL"""
        ).fetchone()  # type: ignore[misc]
    finally:
        con.close()
    total = data["totals"]
    keys = ("calls", "input", "cache_write", "cache_read", "output", "reasoning")
    assert tuple(total[k] for k in keys) == (calls, inp, cw, cr, out, reasoning)
    assert round(Decimal(str(total["usd_billed"])), 2) == round(billed, 2)
    assert round(Decimal(str(total["usd_estimated"])), 2) == round(estimated, 2)
    # The rows add up to the totals, and each row's models add up to the row.
    assert sum(r["calls"] for r in data[view]) == calls
    assert sum(r["usd"] for r in data[view]) == pytest.approx(total["usd"], abs=0.005)
    for row in data[view]:
        assert sum(b["calls"] for b in row["breakdown"]) == row["calls"]
        assert sum(b["output"] for b in row["breakdown"]) == row["output"]


def test_project_view_names_projects_apps_and_cwds(sample_db: Path) -> None:
    keys = {r["key"] for r in usage_json(sample_db, "project")["project"]}
    # The Claude Code project folder, the OpenRouter apps, the NEXUS3 app (no project).
    assert {"-home-dev-koda", "CodeSmith", "Penguin", "nexus3"} <= keys


def test_usage_table_fits_the_terminal_with_a_totals_row(cc_db: Path) -> None:
    for columns in (80, 120, 200):
        result = CliRunner().invoke(
            cli, ["usage", "daily", "--db", str(cc_db)], env={"COLUMNS": str(columns)}
        )
        lines = result.stdout.splitlines()
        assert max(len(line) for line in lines) <= columns
        totals = usage_json(cc_db, "daily")["totals"]
        total, placeholders = totals["usd"], totals["placeholder_output"]["calls"]
        assert any(
            line.startswith("Total ") and (f"{total:,.2f}" in line or "2,148,825" in line)
            for line in lines
        )
        # the placeholder outputs are said, with what they do to the total
        said = " ".join(result.stdout.split())
        assert f"estimated_output: {placeholders} calls log only a streaming placeholder" in said
    csv_text = CliRunner().invoke(cli, ["usage", "daily", "--db", str(cc_db), "--csv"]).stdout
    assert csv_text.splitlines()[0].startswith(
        "daily,model,machine,calls,input,cache_write,cache_read"
    )
    assert csv_text.splitlines()[-1].startswith("Total,,,62,1130,121085,2024714,1896,")


def test_since_and_until_filter_every_reader(sample_db: Path) -> None:
    day = usage_json(sample_db, "daily", "--since", "2025-12-13", "--until", "2025-12-13")
    assert [r["key"] for r in day["daily"]] == ["2025-12-13"]
    runner = CliRunner()
    found = runner.invoke(
        cli,
        [
            "incidents",
            "--db",
            str(sample_db),
            "--json",
            "--since",
            "2025-12-13",
            "--until",
            "2025-12-15",
        ],
    )
    dates = sorted(i["start_ts"][:10] for i in json.loads(found.stdout))
    assert dates == ["2025-12-13", "2025-12-13", "2025-12-15"]
    # In Berlin the day starts an hour earlier (UTC+1 in December).
    evening = usage_json(
        sample_db,
        "daily",
        "--since",
        "2025-12-13 07:00",
        "--until",
        "2025-12-13 08:00",
        "--tz",
        "Europe/Berlin",
    )
    con = duckdb.connect(str(sample_db), read_only=True, config=OFFLINE)
    try:
        expected = con.execute(
            """SELECT count(*) FROM calls WHERE superseded_by IS NULL
               AND ts >= '2025-12-13 06:00' AND ts < '2025-12-13 07:00'"""
        ).fetchone()[0]  # type: ignore[index]
    finally:
        con.close()
    assert evening["totals"]["calls"] == expected > 0
    # A span back from now: the sample is from 2025, so the last 7 days hold none of it.
    recent = runner.invoke(cli, ["incidents", "--db", str(sample_db), "--since", "7d"])
    assert recent.stdout.strip() == "No incidents."
    audit = runner.invoke(
        cli,
        [
            "audit",
            str(SAMPLE_DATA),
            "--since",
            "2025-12-13",
            "--until",
            "2025-12-13",
            "--json",
            "-q",
        ],
    )
    data = json.loads(audit.stdout)
    assert {i["detector"] for i in data["incidents"]} == {"constant_input_low_output"}
    assert data["period"]["start"].startswith("2025-12-13")
    assert data["window"] == "from 2025-12-13 00:00 to 2025-12-14 00:00 UTC"


def test_incident_filters(sample_db: Path) -> None:
    def listed(*args: str) -> list[dict]:  # type: ignore[type-arg]
        result = CliRunner().invoke(cli, ["incidents", "--db", str(sample_db), "--json", *args])
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)  # type: ignore[no-any-return]

    everything = listed()
    assert len(everything) == 10 and sorted(i["number"] for i in everything) == list(range(1, 11))
    assert {i["detector"] for i in listed("--detector", "repeated_tool_call")} == {
        "repeated_tool_call"
    }
    high = listed("--severity", "high")
    assert len(high) == 6 and {i["severity"] for i in high} == {"high"}
    assert len(listed("--severity", "medium")) == 9  # medium and higher: all but the info one
    penguin = listed("--app", "Penguin")
    assert len(penguin) == 3 and all(i["app"] == "Penguin" for i in penguin)


def test_incident_numbers_are_stable_across_reruns(sample_db: Path, tmp_path: Path) -> None:
    again = tmp_path / "again.duckdb"
    assert (
        CliRunner().invoke(cli, ["audit", "--db", str(again), str(SAMPLE_DATA), "-q"]).exit_code
        == 0
    )
    assert CliRunner().invoke(cli, ["detect", "--db", str(again)]).exit_code == 0

    def numbers(db: Path) -> dict[str, int]:
        out = CliRunner().invoke(cli, ["incidents", "--db", str(db), "--json"]).stdout
        return {i["incident_id"]: i["number"] for i in json.loads(out)}

    assert numbers(again) == numbers(sample_db)


def _number_of(db: Path, detector: str) -> int:
    out = (
        CliRunner()
        .invoke(cli, ["incidents", "--db", str(db), "--json", "--detector", detector])
        .stdout
    )
    return int(json.loads(out)[0]["number"])


def test_show_tells_one_incident_within_the_terminal(sample_db: Path) -> None:
    n = _number_of(sample_db, "constant_input_low_output")
    result = CliRunner().invoke(
        cli, ["show", str(n), "--db", str(sample_db)], env={"COLUMNS": "100"}
    )
    assert result.exit_code == 0, result.output
    text = result.stdout
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 100
    assert lines[0] == f"Incident #{n}  high  constant_input_low_output  $6.16 wasted (billed)"
    assert "22 calls re-sent the same 56,065-token prompt and got 3 tokens back" in text
    for part in (
        "What happened",
        "app      Penguin",
        "API key  penguin-personal",
        "model    anthropic/claude-opus-4.5",
        "Calls (22; * = counted as waste)",
        "Evidence",
        "prompt_tokens: 56,065",
        "Guards that would have stopped it",
        "penguin_stale_context: after 3 of its events",
    ):
        assert part in text, part
    calls = [line for line in lines if line.startswith("* ")]
    assert len(calls) == 22 and all("56,065" in line and " 3 " in line for line in calls)
    assert not re.search(r"\b(or|cc|conv|codex|nexus3):\S", text.split("Evidence")[0])


def test_show_gives_tool_calls_and_their_results(sample_db: Path) -> None:
    n = _number_of(sample_db, "repeated_tool_call")
    text = (
        CliRunner()
        .invoke(cli, ["show", str(n), "--db", str(sample_db)], env={"COLUMNS": "160"})
        .stdout
    )
    assert 'Task {"description":"Explore the codebase"' in text
    assert "-> (no output)" in text


def test_show_promises_no_guard_it_cannot_name(sample_db: Path) -> None:
    """An incident no guard stops: ``show`` says why in words that hold whatever
    ``backtest --recommend`` then names (it weighs every incident at once): an incident that
    wasted nothing has nothing to prevent; one that wasted money points to a sweep."""
    runner = CliRunner()
    audited = runner.invoke(cli, ["audit", str(SAMPLE_DATA), "--db", str(sample_db), "--json"])
    unstopped = [i for i in json.loads(audited.stdout)["incidents"] if not i["stopped_by"]]
    wasting = [i for i in unstopped if i["wasted_usd"] > 0]
    costless = [i for i in unstopped if i["wasted_usd"] == 0]
    assert wasting and costless  # the sample has both
    for inc in unstopped:
        result = runner.invoke(
            cli, ["show", str(inc["number"]), "--db", str(sample_db)], env={"COLUMNS": "200"}
        )
        assert result.exit_code == 0, result.output
        said = result.stdout.split("Guards that would have stopped it\n")[1].splitlines()[0]
        assert "--recommend" not in said
        if inc["wasted_usd"] > 0:
            assert said == (
                "  none of the guards replayed at their own thresholds stops it in time; "
                "`llm-forensics backtest --sweep POLICY.stop=LO..HI` replays one at other "
                "thresholds (`llm-forensics policies` lists them)"
            )
        else:
            assert said == "  none: it wasted nothing, so there is nothing for a guard to prevent"


def test_show_by_id_and_unknown_ids(sample_db: Path) -> None:
    runner = CliRunner()
    listed = json.loads(runner.invoke(cli, ["incidents", "--db", str(sample_db), "--json"]).stdout)
    first = listed[0]
    by_id = runner.invoke(cli, ["show", first["incident_id"], "--db", str(sample_db), "--json"])
    assert json.loads(by_id.stdout)["number"] == first["number"]
    missing = runner.invoke(cli, ["show", "99", "--db", str(sample_db)])
    assert missing.exit_code == 3
    assert missing.stderr.strip() == (
        "Error: no incident '99' (numbers 1 to 10): `llm-forensics incidents` lists them"
    )


def test_rejects_lists_file_line_reason_and_excerpt(runner: CliRunner, tmp_path: Path) -> None:
    rows = [or_row(i) for i in range(5)]
    rows[2]["tokens_prompt"] = "lots"
    bad = write_csv(tmp_path / "bad.csv", rows)
    good = write_csv(tmp_path / "good.csv", [or_row(i) for i in range(10, 12)])
    db = tmp_path / "r.duckdb"
    assert runner.invoke(cli, ["ingest", "--db", str(db), str(bad), str(good)]).exit_code == 0
    result = runner.invoke(cli, ["rejects", "--db", str(db)])
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0].startswith("bad.csv:4: ") and "tokens_prompt" in lines[0]
    assert lines[1].startswith("    ") and "lots" in lines[1]
    assert runner.invoke(cli, ["rejects", "--db", str(db), "--file", "good"]).stdout == (
        "No rejected records.\n"
    )
    data = json.loads(runner.invoke(cli, ["rejects", "--db", str(db), "--json"]).stdout)
    assert [(r["file"], r["line"]) for r in data] == [("bad.csv", 4)]


def test_export_writes_every_canonical_table(sample_db: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["export", "--db", str(sample_db), "--parquet", str(tmp_path / "t")]
    )
    assert result.exit_code == 0, result.output
    manifest = json.loads((tmp_path / "t" / "manifest.json").read_text())
    con = duckdb.connect(str(sample_db), read_only=True, config=OFFLINE)
    try:
        for table, entry in manifest["tables"].items():
            # calls and messages are folders of days (hive layout), the rest one file each
            rows = pq.read_table(tmp_path / "t" / entry["path"]).num_rows
            assert (
                rows == entry["rows"] == con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            ), table  # type: ignore[index]
    finally:
        con.close()
    assert manifest["tables"]["calls"]["rows"] == 6018 + 175  # billed rows kept beside logs
    assert "bill_buckets" in manifest["tables"]


def test_one_summary_line_for_many_files_and_every_file_with_verbose(
    runner: CliRunner, tmp_path: Path
) -> None:
    (tmp_path / "in").mkdir()
    for i in range(30):
        write_csv(tmp_path / "in" / f"{i:02d}.csv", [or_row(100 * i + k) for k in range(2)])
    (tmp_path / "in" / "notes.txt").write_text("hi\n")
    result = runner.invoke(
        cli, ["ingest", "--db", str(tmp_path / "a.duckdb"), str(tmp_path / "in")]
    )
    assert result.stdout.strip() == (
        f"read 31 files: 30 loaded (60 records); 1 not an agent log or bill "
        f"({tmp_path / 'in' / 'notes.txt'})"
    )
    verbose = runner.invoke(
        cli, ["ingest", "--db", str(tmp_path / "b.duckdb"), str(tmp_path / "in"), "--verbose"]
    )
    assert len(verbose.stdout.splitlines()) == 31


def test_an_incidents_attribution_is_its_wasted_calls_most_common_then_dollars_then_name(
    tmp_path: Path,
) -> None:
    """An incident is attributed to the app, key, model and project most of its wasted calls
    carry (not its first call's), a tie going to the value that wasted more dollars, then to
    the first name in order (whatever order a parallel scan meets the rows in); a call without
    a value does not vote. Without wasted calls, its first call's; without calls, none."""
    from analyzer.engine.resources import package_sql
    from analyzer.engine.store import open_store

    with open_store(tmp_path / "s.duckdb") as store:
        con = store.con
        rows = [
            ("c1", "first", "k0", "m0", "p0", "9.00"),
            ("c2", "alpha", "k1", "m-b", "p-b", "0.10"),
            ("c3", "zeta", "k1", "m-a", None, "0.50"),
            ("c4", "alpha", "k2", "m-a", "p-a", "0.10"),
            ("c5", "zeta", "k2", "m-b", None, "0.05"),
            ("c6", "solo", "k9", "m9", "r", "1.00"),
        ]
        for cid, app, key, model, project, usd in rows:
            con.execute(
                """INSERT INTO calls (call_id, source_id, format, stream_key, app, api_key, model,
                                      project, cost_usd)
                   VALUES (?, 1, 'test', 's', ?, ?, ?, ?, ?)""",
                [cid, app, key, model, project, usd],
            )
        con.execute(
            """INSERT INTO incidents (incident_id, detector, severity, first_call_id)
               VALUES ('i1', 'd', 'low', 'c1'), ('i2', 'd', 'low', 'c6'),
                      ('i3', 'd', 'low', NULL)"""
        )
        con.execute(
            "INSERT INTO incident_calls VALUES ('i1', 'c2'), ('i1', 'c3'), ('i1', 'c4'), "
            "('i1', 'c5')"
        )
        con.execute(package_sql("attribute.sql"), {"ids": ["i1", "i2", "i3"]})
        got = {
            r[0]: r[1:]
            for r in con.execute(
                "SELECT incident_id, app, api_key, model, project FROM incidents"
            ).fetchall()
        }
    # app: alpha and zeta 2 calls each, zeta's $0.55 over alpha's $0.20; key: k1 $0.60;
    # model: m-a $0.60; project: p-a and p-b one call and $0.10 each, p-a first by name.
    assert got["i1"] == ("zeta", "k1", "m-a", "p-a")
    assert got["i2"] == ("solo", "k9", "m9", "r")  # no wasted calls: its first call's
    assert got["i3"] == (None, None, None, None)
