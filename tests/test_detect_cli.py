"""Detectors end to end: the sample's planted incidents, the real samples, and the commands."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from analyzer.cli.main import cli
from tests.helpers import SAMPLE_DATA, shared_samples


@pytest.fixture(scope="module")
def sample_audit(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    runner = CliRunner()
    result = runner.invoke(cli, ["audit", str(SAMPLE_DATA), "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def by_detector(data: dict[str, Any], name: str) -> list[dict[str, Any]]:
    return [i for i in data["incidents"] if i["detector"] == name]


def test_seed000_runs_with_the_seeds_numbers(sample_audit: dict[str, Any]) -> None:
    runs = sorted(
        by_detector(sample_audit, "constant_input_low_output"), key=lambda i: i["start_ts"]
    )
    assert [(i["n_calls"], i["wasted_usd"]) for i in runs] == [(22, 6.16), (11, 4.07)]
    assert runs[0]["start_ts"].startswith("2025-12-13T06:12:58")
    assert runs[0]["end_ts"].startswith("2025-12-13T06:14:07")
    assert runs[1]["start_ts"].startswith("2025-12-13T06:17")
    assert runs[0]["evidence"]["prompt_tokens"] == "56065"
    assert runs[1]["evidence"]["prompt_tokens"] == "74748"
    assert {i["cost_basis"] for i in runs} == {"billed"}


def test_seed001_alternating_turn(sample_audit: dict[str, Any]) -> None:
    [turn] = by_detector(sample_audit, "alternating_tool_thinking")
    assert turn["n_calls"] == 57 and turn["evidence"]["tool_calls"] == 60
    assert turn["evidence"]["longest_streak"] == 2
    assert turn["wasted_usd"] > 0 and turn["severity"] == "high"


def test_seed003_streak_is_waste_and_the_reports_are_not(sample_audit: dict[str, Any]) -> None:
    [streak] = by_detector(sample_audit, "truncated_tool_call_streak")
    assert streak["n_calls"] == 6 and streak["wasted_usd"] > 0
    assert "etl-pipeline" in streak["stream_key"]
    [alarm] = by_detector(sample_audit, "length_counter_false_alarm")
    assert "dan.bo" in alarm["stream_key"]
    assert (alarm["severity"], alarm["wasted_usd"], alarm["n_calls"]) == ("info", 0, 3)
    # Nothing with waste touches Dan's three reports.
    dan = [i for i in sample_audit["incidents"] if "dan.bo" in (i["stream_key"] or "")]
    assert all(i["wasted_usd"] == 0 for i in dan)


def test_seed002_empty_stream_and_its_400s(sample_audit: dict[str, Any]) -> None:
    [cascade] = by_detector(sample_audit, "empty_stream_cascade")
    assert cascade["n_calls"] == 4 and cascade["evidence"]["refused_calls"] == 3
    assert cascade["evidence"]["http_statuses"] == [400]
    persisted = by_detector(sample_audit, "empty_assistant_persisted")
    assert {i["session_id"] for i in persisted} == {
        "2025-12-11_091502_a7c3",  # the empty message NEXUS3 saved
        "session_20251215_100241_97ae4fc1",  # Penguin's three placeholders (seed 000, fixed)
    }


def test_seed004_sub_agent_runs(sample_audit: dict[str, Any]) -> None:
    [lost] = by_detector(sample_audit, "subagent_empty_result")
    ev = lost["evidence"]
    assert (ev["runs"], ev["reinvocations"], ev["no_output_results"], ev["recoverable_runs"]) == (
        3,
        2,
        3,
        1,
    )
    assert lost["severity"] == "high" and lost["wasted_usd"] > 0


def test_the_audit_total_is_the_sum_of_its_incidents(sample_audit: dict[str, Any]) -> None:
    assert sample_audit["wasted_usd"] == pytest.approx(
        sum(i["wasted_usd"] for i in sample_audit["incidents"]), abs=1e-9
    )
    ids = [i["incident_id"] for i in sample_audit["incidents"]]
    assert len(ids) == len(set(ids))


def test_no_waste_in_the_healthy_traffic(sample_audit: dict[str, Any]) -> None:
    planted = (
        "penguin-personal",
        "netclaw",
        "healthcare-agents",
        "session_2025121",
        "2025-12-11_091502_a7c3",
        "5f0c2a9e",
    )
    healthy = [
        i
        for i in sample_audit["incidents"]
        if not any(p in (i["stream_key"] or "") for p in planted)
    ]
    assert [i for i in healthy if i["wasted_usd"] > 0] == []
    assert [i for i in healthy if i["severity"] != "low"] == []


def test_no_alarm_on_the_real_transcripts(tmp_path: Path) -> None:
    """The real transcripts beside ../shared/samples/real-world (which has its own tests)."""
    files = sorted(str(p) for p in shared_samples().glob("*.jsonl"))
    assert len(files) == 7
    result = CliRunner().invoke(cli, ["audit", *files, "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["incidents"] == []


def test_detect_replaces_its_incidents_and_filters(ingested_sample_db: Path) -> None:
    runner = CliRunner()
    db = str(ingested_sample_db)
    first = runner.invoke(cli, ["detect", "--db", db, "--json"])
    again = runner.invoke(cli, ["detect", "--db", db, "--json"])
    assert first.exit_code == 0
    assert json.loads(first.stdout) == json.loads(again.stdout)
    args = [
        "--only",
        "constant_input_low_output",
        "--param",
        "constant_input_low_output.min_run=15",
    ]
    only = runner.invoke(cli, ["detect", "--db", db, *args, "--json"])
    assert only.exit_code == 0, only.output
    assert [i["n_calls"] for i in json.loads(only.stdout)] == [22]
    text = runner.invoke(cli, ["detect", "--db", db])
    assert "Incidents (" in text.stdout and "constant_input_low_output" in text.stdout


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["--fail-on", "high"], 1),
        (["--fail-on", "info", "--only", "session_cost_outlier"], 0),
        (["--fail-on-waste", "10"], 1),
        (["--fail-on-waste", "1000"], 0),
        (["--fail-on-waste", "$1,000"], 0),  # read as dollars, exactly (a Decimal)
        (["--fail-on-waste", "-1"], 2),
        (["--fail-on-waste", "lots"], 2),
        (["--fail-on-waste", "nan"], 2),
        (["--only", "no_such_detector"], 2),
        (["--param", "constant_input_low_output.nope=1"], 2),
        (["--param", "constant_input_low_output.min_run=many"], 2),
        (["--param", "badly-formed"], 2),
    ],
)
def test_detect_exit_codes(ingested_sample_db: Path, args: list[str], code: int) -> None:
    runner = CliRunner()
    db = str(ingested_sample_db)
    result = runner.invoke(cli, ["detect", "--db", db, *args])
    assert result.exit_code == code, result.output


def test_detect_needs_a_store(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["detect", "--db", str(tmp_path / "none.duckdb")])
    assert result.exit_code == 3 and "run `llm-forensics ingest` first" in result.stderr


def test_a_users_own_detector_needs_no_python(tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "expensive_call.sql").write_text(
        """-- name: expensive_call
-- title: One call over a dollar
-- severity: low
-- params: min_usd=1.0
--
-- Any single call that cost more than min_usd.
SELECT stream_key, session_id, ts AS start_ts, ts AS end_ts, 1 AS n_calls,
       call_id AS first_call_id, call_id AS last_call_id, 0 AS wasted_usd, 0 AS wasted_tokens,
       cost_basis, 'a $' || round(cost_usd, 2) || ' call' AS summary,
       json_object('first_call_id', call_id) AS evidence
FROM live_calls WHERE cost_usd > $min_usd
"""
    )
    runner = CliRunner()
    listed = runner.invoke(cli, ["detectors", "--queries", str(mine), "--json"])
    names = [d["name"] for d in json.loads(listed.stdout)]
    assert "expensive_call" in names and "constant_input_low_output" in names
    result = runner.invoke(
        cli,
        [
            "audit",
            str(SAMPLE_DATA),
            "--queries",
            str(mine),
            "--only",
            "expensive_call",
            "--param",
            "expensive_call.min_usd=0.25",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    found = json.loads(result.stdout)["incidents"]
    assert found and all(i["detector"] == "expensive_call" for i in found)


def test_a_broken_user_detector_is_one_line_naming_the_file(tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    bad = mine / "oops.sql"
    bad.write_text("-- name: oops\n-- title: t\n-- severity: high\n--\n-- r\nSELECT $nope\n")
    result = CliRunner().invoke(cli, ["detectors", "--queries", str(mine)])
    assert result.exit_code == 3
    assert result.stderr.strip() == f"Error: {bad}: uses undeclared parameters: nope"


def test_detectors_lists_every_detector() -> None:
    result = CliRunner().invoke(cli, ["detectors"])
    assert result.exit_code == 0
    for name in (
        "constant_input_low_output",
        "alternating_tool_thinking",
        "truncated_tool_call_streak",
        "length_counter_false_alarm",
        "empty_stream_cascade",
        "empty_assistant_persisted",
        "subagent_empty_result",
        "repeated_tool_call",
        "session_cost_outlier",
    ):
        assert name in result.stdout
