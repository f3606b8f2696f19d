"""LiteLLM proxy spend logs: the table exported as CSV, the /spend/logs API's JSON and JSON
Lines, read as a bill per call; the fixtures follow LiteLLM's schema (tests/fixtures/README.md)."""

from __future__ import annotations

import json
import shutil
from decimal import Decimal
from pathlib import Path

from click.testing import CliRunner

from analyzer.cli.main import cli
from analyzer.engine.store import open_store
from analyzer.ingest.base import IngestOptions
from analyzer.load.flow import FileReport
from analyzer.pipeline import ingest_paths
from tests.helpers import REPO, shared_samples

FIXTURES = REPO / "tests" / "fixtures" / "litellm"
CSV = FIXTURES / "LiteLLM_SpendLogs.csv"


def ingest(db: Path, *paths: Path) -> list[FileReport]:
    with open_store(db) as store:
        return list(ingest_paths(store, [str(p) for p in paths], IngestOptions(progress=False)))


def accounted(r: FileReport) -> bool:
    return r.rows_read == r.rows_loaded + r.rows_rejected + r.rows_duplicate + r.rows_skipped


def test_the_table_exported_as_csv(tmp_path: Path) -> None:
    [r] = ingest(tmp_path / "s.duckdb", CSV)
    assert r.format == "litellm_spend" and accounted(r)
    # 57 rows: 30 healthy calls, 22 of the runaway, 2 embeddings (skipped by kind), a failed
    # request, a row whose spend is "n/a" (rejected), and a request exported twice.
    assert (r.rows_read, r.rows_loaded, r.rows_rejected, r.rows_duplicate, r.rows_skipped) == (
        57,
        53,
        1,
        1,
        2,
    )
    with open_store(tmp_path / "s.duckdb", read_only=True) as store:
        [(line, reason, excerpt)] = store.con.execute(
            "SELECT line, reason, excerpt FROM rejects"
        ).fetchall()
        assert line == 57 and "spend" in reason and "n/a" in reason
        assert excerpt.startswith("badbadba-")
        first = store.con.execute(
            """SELECT ts, model, provider, api_key, app, project, user_id, session_id,
                      input_tokens, output_tokens, cost_usd, cost_basis, finish_reason,
                      response_kind, duration_ms, ttft_ms
               FROM calls ORDER BY ts LIMIT 1"""
        ).fetchone()
        assert first is not None
        assert str(first[0]) == "2025-12-13 05:40:02.211000"  # naive: read in --input-tz (UTC)
        assert first[1:8] == (
            "claude-opus-4-5",
            "anthropic",
            "penguin-prod",
            "agents",
            "agents",
            None,
            "sess-koda-0513",
        )
        assert first[8:] == (
            8120,
            412,
            Decimal("0.0509"),
            "billed",
            "stop",
            "text",
            4200.0,
            700.0,
        )
        failed = store.con.execute(
            "SELECT finish_reason, response_kind, cost_basis FROM calls WHERE model = 'gpt-4.1'"
        ).fetchall()
        assert failed == [("error", "error", "billed")]
        assert store.scalar("SELECT count(*) FROM calls WHERE model LIKE '%embedding%'") == 0


def test_a_planted_runaway_is_found_and_priced_as_billed(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["audit", str(CSV), "--json", "-q"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    [inc] = [i for i in data["incidents"] if i["detector"] == "constant_input_low_output"]
    assert inc["n_calls"] == 22 and inc["cost_basis"] == "billed"
    assert "56,065-token prompt and got 3 tokens back" in inc["summary"]
    # Every call of the run is counted as waste, as on an OpenRouter export: 22 x $0.2804.
    assert Decimal(str(inc["wasted_usd"])) == Decimal("6.1688")
    assert data["calls_by_cost_basis"] == {"billed": 53}
    # The healthy coding session beside it raises nothing.
    assert len(data["incidents"]) == 1


def test_the_api_json_and_json_lines(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    api, jsonl = FIXTURES / "spend_logs_api.json", FIXTURES / "spend_logs.jsonl"
    reports = {Path(r.path).name: r for r in ingest(db, api, jsonl)}
    a, j = reports["spend_logs_api.json"], reports["spend_logs.jsonl"]
    assert (a.format, a.rows_read, a.rows_loaded) == ("litellm_spend", 5, 5) and accounted(a)
    # The same three requests again (duplicates), and a line cut off mid-way (rejected).
    assert (j.format, j.rows_read, j.rows_duplicate, j.rows_rejected) == ("litellm_spend", 4, 3, 1)
    with open_store(db, read_only=True) as store:
        rows = store.con.execute(
            """SELECT api_key, app, user_id, session_id, finish_reason, response_kind, ttft_ms
               FROM calls ORDER BY ts"""
        ).fetchall()
        reject = store.con.execute("SELECT line, reason FROM rejects").fetchall()
    assert [r[:3] for r in rows] == [("ci-bot", "platform", "build-742")] * 5
    # A session given in the log is kept; without one, sessions come from silences.
    assert [r[3] for r in rows][3:] == ["ci-run-742", "ci-run-742"]
    assert rows[0][3].startswith("ci-bot|platform|build-742|claude-sonnet-4-5@")
    assert [r[4] for r in rows] == ["tool_calls", "stop", "tool_calls", "stop", "tool_calls"]
    assert rows[0][5] == "tool_call" and rows[0][6] == 700.0
    assert reject == [(4, reject[0][1])] and reject[0][1].startswith("not valid JSON")


def test_found_by_content_not_by_name(tmp_path: Path) -> None:
    renamed = tmp_path / "export.txt"
    shutil.copy(CSV, renamed)
    [r] = ingest(tmp_path / "s.duckdb", renamed)
    assert r.format == "litellm_spend" and r.rows_loaded == 53


def test_other_projects_spend_log_rows(tmp_path: Path) -> None:
    """Golden on public files shaped like /spend/logs rows (StackPerf's fixtures: synthetic,
    with keys of their own): one row per file; the file without a request_id (StackPerf's
    call_id fallback, not a LiteLLM column) is not a spend log."""
    folder = shared_samples() / "more-formats" / "litellm-spend-logs"
    reports = {Path(r.path).name.split("__")[-1]: r for r in ingest(tmp_path / "s.duckdb", folder)}
    assert reports["fallback_to_call_id.json"].status == "unrecognised"
    loaded = {k: r for k, r in reports.items() if r.status == "loaded"}
    assert len(loaded) == 6 and all(r.rows_loaded == 1 and accounted(r) for r in loaded.values())
    with open_store(tmp_path / "s.duckdb", read_only=True) as store:
        got = store.con.execute(
            """SELECT native_id, model, input_tokens, cached_input_tokens, output_tokens,
                      cost_usd, cost_basis, finish_reason, http_status, session_id
               FROM calls ORDER BY native_id"""
        ).fetchall()
    by_id = {g[0]: g[1:] for g in got}
    assert by_id["req-success-001"] == (
        "gpt-4o",
        50,
        0,
        100,
        Decimal("0.00525"),
        "billed",
        "unknown",
        None,
        "session-alpha-001",
    )
    assert by_id["req-failed-001"][6:8] == ("error", 429)
    assert by_id["req-cached-001"][1:3] == (20, 20)
    assert by_id["req-sparse-001"][4:6] == (None, None)  # no spend: unpriced, not billed


def test_a_bill_row_without_a_charge_is_said_as_such(tmp_path: Path) -> None:
    """The sparse row states no spend: unpriced because the bill says nothing (a bill is never
    estimated), not for want of a price of its model."""
    folder = shared_samples() / "more-formats" / "litellm-spend-logs"
    result = CliRunner().invoke(cli, ["audit", str(folder), "--json"])
    assert result.exit_code == 4, result.output  # the call_id fallback file is not a spend log
    data = json.loads(result.stdout)
    assert (data["unpriced_bill_rows"], data["unpriced_models"]) == (1, {})
    assert "no price known" not in result.stderr
