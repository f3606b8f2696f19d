"""Real sessions recorded by other people (../shared/samples/real-world): read exactly, and no
false alarm on healthy work.

``truth.json`` there gives, per file, the calls, prompt tokens and output tokens computed from
the files themselves, independently of llm-forensics (and, for the mini-swe-agent trajectories,
the dollars they report). Under CI a missing ../shared fails, never skips.
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from analyzer.cli.main import cli
from analyzer.engine.store import Store, open_store
from analyzer.ingest.base import IngestOptions
from analyzer.pipeline import ingest_paths
from tests.helpers import shared_samples


@pytest.fixture(scope="module")
def real_world() -> Path:
    return shared_samples() / "real-world"


@pytest.fixture(scope="module")
def truth(real_world: Path) -> dict[str, dict[str, Any]]:
    files: dict[str, dict[str, Any]] = json.loads((real_world / "truth.json").read_text())["files"]
    assert len(files) == 40
    return files


@pytest.fixture(scope="module")
def loaded(real_world: Path, tmp_path_factory: pytest.TempPathFactory) -> Store:
    with open_store(tmp_path_factory.mktemp("rw") / "rw.duckdb") as store:
        ingest_paths(store, [str(real_world)], IngestOptions())
        yield store


@pytest.fixture(scope="module")
def audited(
    real_world: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[dict[str, Any], Path]:
    """``audit --json`` of the corpus, and the store it kept (for the other commands)."""
    db = tmp_path_factory.mktemp("rw-audit") / "rw.duckdb"
    result = CliRunner().invoke(cli, ["audit", str(real_world), "--json", "--db", str(db)])
    # Every log is read; the corpus's own truth.json is JSON no reader recognises: named, and
    # the run says some input was not read (exit 4).
    assert result.exit_code == 4, result.output
    assert "exit 4: 1 file not read (" in result.stderr and "truth.json)" in result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data, db


@pytest.fixture(scope="module")
def audit(audited: tuple[dict[str, Any], Path]) -> dict[str, Any]:
    return audited[0]


def per_file(store: Store) -> dict[str, tuple[int, int, int, Decimal | None]]:
    rows = store.con.execute(
        """SELECT s.path, count(c.call_id), coalesce(sum(c.input_tokens), 0),
                  coalesce(sum(c.output_tokens), 0),
                  sum(c.cost_usd) FILTER (WHERE c.cost_basis = 'reported')
           FROM sources s LEFT JOIN live_calls c USING (source_id) GROUP BY s.path"""
    ).fetchall()
    # Stored paths are named from the folder given: real-world/<path in truth.json>.
    return {
        path.removeprefix("real-world/"): (int(n), int(p), int(o), usd)
        for path, n, p, o, usd in rows
    }


def test_every_file_matches_the_truth(loaded: Store, truth: dict[str, dict[str, Any]]) -> None:
    got = per_file(loaded)
    differ = []
    for path, want in truth.items():
        calls, prompt, output, reported = got[path]
        if (calls, prompt, output) != (want["calls"], want["prompt_tokens"], want["output_tokens"]):
            differ.append((path, (calls, prompt, output), want))
        if "reported_usd" in want:
            # The file's own instance_cost, reproduced to the cent (it is the sum of extra.cost).
            assert reported is not None, path
            assert abs(reported - Decimal(str(want["reported_usd"]))) < Decimal("0.005"), path
    assert differ == []


def test_the_mini_swe_agent_trajectories_are_priced_as_reported(
    loaded: Store, truth: dict[str, dict[str, Any]]
) -> None:
    rows = loaded.con.execute(
        """SELECT s.path, count(*), count(c.ts), count(c.model), count(c.finish_reason_raw),
                  count(*) FILTER (WHERE c.cost_basis = 'reported'),
                  count(c.cost_estimate_usd)
           FROM sources s JOIN live_calls c USING (source_id)
           WHERE s.format = 'conversation_json' GROUP BY s.path"""
    ).fetchall()
    assert len(rows) == 4
    for path, n, *filled in rows:
        assert n == truth[path.removeprefix("real-world/")]["calls"]
        # time, model, finish reason and the reported cost on every call; the list-price
        # estimate beside it (deepseek-chat is priced by genai-prices)
        assert filled == [n] * 5, path


def test_audit_reports_no_waste_on_healthy_work(audit: dict[str, Any]) -> None:
    wasteful = [i for i in audit["incidents"] if i["wasted_usd"] > 0]
    assert wasteful == []
    # A long session may be pointed at, never called a loop.
    assert {i["detector"] for i in audit["incidents"]} <= {"session_cost_outlier"}
    assert audit["wasted_usd"] == 0


def _said(db: Path, *args: str) -> str:
    result = CliRunner().invoke(cli, [*args, "--db", str(db)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return result.stdout


def test_incidents_of_no_waste_are_not_said_as_waste(
    real_world: Path, audited: tuple[dict[str, Any], Path]
) -> None:
    """Healthy work with pointers (sessions that cost far more than the others): the summary
    says no waste was found in them (never "Wasted $0.00 (0.0%) in 4 incidents"), the list
    says none of them wasted money, ``show`` that there was nothing to prevent."""
    data, db = audited
    incidents = data["incidents"]
    assert incidents and all(i["wasted_usd"] == 0 for i in incidents)
    assert data["incidents_with_waste"] == 0
    text = (
        CliRunner()
        .invoke(cli, ["audit", str(real_world), "--db", str(db)], env={"COLUMNS": "200"})
        .stdout
    )
    n = len(incidents)
    [line] = [line for line in text.splitlines() if line.startswith("Wasted ")]
    assert line == (
        f"Wasted   none found: {n} incidents ({n} session_cost_outlier), no call in them "
        "counted as waste (findings to look at, not money lost)"
    )
    assert "$0.00 (0.0%)" not in text
    head = f"Incidents ({n}; none of them wasted money; times in UTC; `llm-forensics show N`"
    assert head in text and head in _said(db, "incidents")
    shown = _said(db, "show", str(incidents[0]["number"]))
    assert shown.split("Guards that would have stopped it\n")[1].startswith(
        "  none: it wasted nothing, so there is nothing for a guard to prevent\n"
    )


def test_no_guard_is_recommended_where_none_saves_money(
    audited: tuple[dict[str, Any], Path],
) -> None:
    """No incident wasted money, so no guard can save any: ``--recommend`` says so in a plain
    sentence, and its JSON has no recommendation and the reason. The guards' false trips are
    told in plain words, the preset's name after them, the most first."""
    data, db = audited
    assert data["wasted_usd"] == 0
    answer = json.loads(_said(db, "backtest", "--recommend", "--json"))
    assert answer["recommendation"] is None and answer["policy"] is None
    assert answer["reason"].startswith("No guard would have saved money on this history: none ")
    text = _said(db, "backtest", "--recommend")
    assert text.replace("\n", " ").strip() == answer["reason"]
    lines = _said(db, "backtest").splitlines()
    assert lines[0].startswith("No incident with waste for the ")
    assert lines[0].endswith("; these would have stopped healthy work (false trips):")
    tripping = sorted(
        (r for r in data["backtest"] if r["false_trips"]), key=lambda r: -r["false_trips"]
    )
    starts = [line for line in lines[1:] if not line.startswith("       ")]
    assert len(starts) == len(tripping)
    for line, r in zip(starts, tripping, strict=True):
        assert line.startswith(f"{r['false_trips']:>5,}  ")
        assert not line[7:].startswith(r["policy"])  # what it does first, then its name
    said = " ".join(line.strip() for line in lines)
    for r in tripping:
        assert f" ({r['policy']})" in said
    if any(r["policy"] == "session_cost_cap" for r in tripping):
        assert "the session fails once its cost passes $5 (session_cost_cap)" in said
    if any(r["policy"] == "opencode_doom_loop" for r in tripping):
        assert "3 identical tool calls in a row stop the run (opencode_doom_loop)" in said


def test_polling_is_no_loop(audit: dict[str, Any]) -> None:
    """Codex polls a running command with the same write_stdin call 7 times (11:42:32 to
    11:43:16 in rollout-2026-02-23T12-40-23), each poll getting new output: no incident; a
    guard that stops on identical arguments trips there, and that trip is a false trip."""
    assert not [i for i in audit["incidents"] if i["detector"] == "repeated_tool_call"]
    doom = next(r for r in audit["backtest"] if r["policy"] == "opencode_doom_loop")
    polling = [t for t in doom["trips"] if t["ts"].startswith("2026-02-23T11:42")]
    assert polling and all(t["incident_id"] is None for t in polling)
    assert doom["false_trips"] >= 1 and doom["incidents_stopped"] == 0


def test_only_the_hand_written_garbage_lines_are_rejected(
    audit: dict[str, Any], loaded: Store
) -> None:
    assert audit["rejects"] == 3
    rows = loaded.con.execute(
        "SELECT s.path, r.line, r.reason FROM rejects r JOIN sources s USING (source_id)"
        " ORDER BY r.line"
    ).fetchall()
    assert {path for path, _, _ in rows} == {
        "real-world/claude_code/daaain__claude-code-log__handwritten/edge_cases.jsonl"
    }
    assert all(reason == "a JSON line that is not an object" for _, _, reason in rows)


def test_every_record_is_accounted_for(audit: dict[str, Any]) -> None:
    for s in audit["sources"]:
        assert s["rows_read"] == (
            s["rows_loaded"] + s["rows_rejected"] + s["rows_duplicate"] + s["rows_skipped"]
        ), s["path"]
    assert len(audit["sources"]) == 40


def test_calls_without_time_are_still_calls(audit: dict[str, Any]) -> None:
    assert audit["calls"] == sum(audit["calls_by_format"].values()) > 0
    assert audit["calls_without_time"] == 0  # the trajectories' times are read now
    assert audit["unpriced_models"] == {}
