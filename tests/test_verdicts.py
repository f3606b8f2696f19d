"""Each run's own verdict, where every view that shows a session says it: the audit summary,
``usage session`` (text, JSON, CSV), ``show N`` and the report (HTML, Markdown, JSON). On the
real mini-swe-agent run that idled on `true` until its step limit (../shared, read in place),
and a Claude Code stream-json relaunch loop written here."""

from __future__ import annotations

import csv
import io
import json
from decimal import Decimal
from pathlib import Path

import pytest
from click.testing import CliRunner

from analyzer.cli.main import cli
from tests.helpers import shared_samples
from tests.test_claude_stream import run_lines, write

IDLE = "conversation_json/richardzhuang0412__mini-swe-agent-automate-repo-installation/automate"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("verdicts")
    logs = root / "logs"
    logs.mkdir()
    (logs / "idle.traj.json").write_bytes(
        (shared_samples() / "real-loops" / IDLE / "repo_install_express.traj.json").read_bytes()
    )
    lines = run_lines("ok", 0.02)
    for n in range(3):
        lines += run_lines(f"refused-{n}", 0.0, error="Credit balance is too low")
    write(logs / "claude_output.jsonl", lines)
    db = root / "s.duckdb"
    result = CliRunner().invoke(cli, ["audit", str(logs), "--db", str(db)])
    assert result.exit_code == 0, result.output
    assert "Runs     5 as their own logs end them: 3 error, 1 completed, 1 step_limit" in (
        result.stdout
    )
    return db


def run(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 0, result.output
    return result.stdout


def test_usage_session_says_how_each_run_ended(store: Path) -> None:
    text = run("usage", "session", "--db", str(store))
    assert text.splitlines()[0].split()[-1] == "ended"
    assert "step_limit" in text and "completed" in text
    rows = json.loads(run("usage", "session", "--db", str(store), "--json"))["session"]
    runs = {r["key"]: r["run"] for r in rows}
    idle = next(r for k, r in runs.items() if k.startswith("idle@"))
    assert (idle["exit_status"], idle["outcome"], idle["reported_calls"], idle["step_limit"]) == (
        "LimitsExceeded",
        "step_limit",
        100,
        100,
    )
    assert runs["ok"]["outcome"] == "completed" and runs["ok"]["reported_cost_usd"] == 0.02
    table = list(csv.DictReader(io.StringIO(run("usage", "session", "--db", str(store), "--csv"))))
    assert {
        (r["ended"], r["exit_status"]) for r in table if r["session"] != "Total" and not r["model"]
    } == {
        ("step_limit", "LimitsExceeded"),
        ("completed", "success"),
        ("error", "success"),  # the launches refused at once: the CLI's subtype, is_error
    }
    # each refused launch is a session of one call, its reply the CLI's own, at $0
    refused = [r for r in rows if r["key"].startswith("refused-")]
    assert len(refused) == 3
    assert all(r["calls"] == 1 and Decimal(str(r["usd"])) == 0 for r in refused), refused


def test_show_says_how_the_incidents_run_ended(store: Path) -> None:
    listed = json.loads(run("incidents", "--db", str(store), "--json"))
    idle = next(i for i in listed if i["session_id"].startswith("idle@"))
    shown = run("show", str(idle["number"]), "--db", str(store))
    assert (
        "  run      hit its step limit (LimitsExceeded); 100 calls by its own count of 100 allowed;"
        in shown
    )


@pytest.mark.parametrize("fmt", ["html", "md", "json"])
def test_the_report_has_how_the_runs_ended(store: Path, tmp_path: Path, fmt: str) -> None:
    out = tmp_path / f"r.{fmt}"
    run("report", "--db", str(store), "-o", str(out))
    page = out.read_text()
    if fmt == "json":
        data = json.loads(page)
        assert data["runs"]["by_outcome"] == {"error": 3, "completed": 1, "step_limit": 1}
        assert data["runs"]["not_completed_total"] == 4
        said = {x["session_id"]: x["said"] for x in data["runs"]["not_completed"]}
        assert said["refused-0"].startswith('failed: "Credit balance is too low"')
        assert any(i["run"].startswith("hit its step limit") for i in data["incidents"])
    else:
        assert "How the runs ended" in page
        assert "Credit balance is too low" in page
        assert ("Its run" in page) if fmt == "html" else ("- Its run: hit its step limit" in page)


def test_the_runs_verdict_raises_the_confidence_of_a_loop_that_ran_to_its_end(store: Path) -> None:
    """The idle loop lasted to the run's last call, and the run ended on its step limit: the
    incident says so in its evidence and is raised from medium to high."""
    listed = json.loads(run("incidents", "--db", str(store), "--json"))
    [idle] = [i for i in listed if i["session_id"].startswith("idle@")]
    assert (idle["detector"], idle["severity"]) == ("repeated_tool_call", "high")
    assert idle["evidence"]["run_ended"] == {
        "exit_status": "LimitsExceeded",
        "outcome": "step_limit",
        "result": None,
    }
    assert idle["evidence"]["ran_to_its_end"] is True


def test_a_verdict_only_adds_to_an_incident() -> None:
    from analyzer.detect.detectors import with_verdict

    rec = {"severity": "medium", "last_call_id": "c9", "evidence": '{"tool_calls": 5}'}
    # completed, or no verdict: unchanged
    assert with_verdict(rec, ("Submitted", "completed", None, "c9")) is rec
    assert with_verdict(rec, None) is rec
    # ended on its limit, but the loop stopped before the run's last call: evidence only
    early = with_verdict(rec, ("LimitsExceeded", "step_limit", None, "c20"))
    assert early["severity"] == "medium" and "ran_to_its_end" not in early["evidence"]
    assert early["evidence"]["run_ended"]["outcome"] == "step_limit"
    # the loop is how the run ended: raised one step
    assert with_verdict(rec, ("exit_format", "format_error", None, "c9"))["severity"] == "high"
    low = dict(rec, severity="low")
    assert with_verdict(low, ("exit_cost", "cost_limit", None, "c9"))["severity"] == "medium"
