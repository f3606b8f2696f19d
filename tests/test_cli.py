"""The commands, through click's CliRunner: clean JSON on stdout, errors as one line, exit codes."""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path

import pytest
from click.testing import CliRunner

from analyzer.cli.main import COMMANDS, cli
from analyzer.model.formatting import money
from analyzer.sample import CSV_NAME
from tests.helpers import HEADER, SAMPLE_DATA, or_row, write_csv


def csv_total(path: Path) -> Decimal:
    with open(path, newline="", encoding="utf-8") as fh:
        return sum((Decimal(r["cost_total"]) for r in csv.DictReader(fh)), Decimal(0))


def test_audit_json_on_the_sample(runner: CliRunner) -> None:
    result = runner.invoke(cli, ["audit", str(SAMPLE_DATA), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)  # stdout is nothing but the JSON
    # Every billed dollar once (billing rows matched to logged calls are counted as the call),
    # plus the estimate for logged calls no export bills.
    assert data["usd_by_cost_basis"]["billed"] == float(csv_total(SAMPLE_DATA / CSV_NAME))
    assert data["total_usd"] == pytest.approx(sum(data["usd_by_cost_basis"].values()), abs=1e-9)
    assert data["calls_by_cost_basis"]["billed"] == 6000
    assert data["calls_by_format"]["openrouter_csv"] == 6000 - data["reconciliation"]["matched"]
    assert data["incidents"] and data["wasted_usd"] > 0  # what they are: test_detect_cli.py
    assert data["period"] == {
        "start": "2025-12-01T00:43:12.786000Z",
        "end": "2025-12-31T23:48:42.280000Z",
    }
    [billing] = [s for s in data["sources"] if s["format"] == "openrouter_csv"]
    assert billing["rows_loaded"] == 6000
    assert {s["format"] for s in data["sources"]} == {
        "openrouter_csv",
        "claude_code",
        "conversation_json",
        "nexus3_raw",
    }
    assert {r["status"] for r in data["ingested"]} == {"loaded", "unrecognised"}
    top = data["spend_by_model"][0]
    assert top["name"] == "anthropic/claude-opus-4.5" and top["usd"] > 0
    assert sum(r["usd"] for r in data["spend_by_api_key"]) == pytest.approx(data["total_usd"])


def test_audit_text_summary(runner: CliRunner) -> None:
    result = runner.invoke(cli, ["audit", str(SAMPLE_DATA), "--top", "3"])
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "Period   2025-12-01 00:43 to 2025-12-31 23:48 UTC" in out
    assert "Calls    6,018 (6,000 billed, 2 estimated, 12 estimated_output, 4 unpriced)" in out
    for title in ("Spend by model (top 3)", "Spend by app (top 3)", "Spend by API key (top 3)"):
        assert title in out
    assert "penguin-personal" in out


def test_audit_leads_with_the_waste_and_counts_the_incidents_that_wasted(
    runner: CliRunner, sample_db: Path
) -> None:
    """The sample's incidents: some wasted money, some (an empty stream, a pointer) none. The
    summary leads with the dollars and says how many of the incidents wasted them; the list
    is most wasted first, and an incident of no waste is not shown as a figure in bold."""
    args = ["audit", str(SAMPLE_DATA), "--db", str(sample_db)]
    data = json.loads(runner.invoke(cli, [*args, "--json"]).stdout)
    incidents = data["incidents"]
    wasting = [i for i in incidents if i["wasted_usd"] > 0]
    assert 0 < len(wasting) < len(incidents)
    assert data["incidents_with_waste"] == len(wasting)
    text = runner.invoke(cli, [*args, "--top", "3"], env={"COLUMNS": "200"}).stdout
    [line] = [line for line in text.splitlines() if line.startswith("Wasted ")]
    share = data["wasted_usd"] / data["total_usd"]
    assert line == (
        f"Wasted   {money(Decimal(str(data['wasted_usd'])))} ({share:.1%}) in "
        f"{len(wasting)} of {len(incidents)} incidents"
    )
    assert "most wasted first" in text
    listed = json.loads(runner.invoke(cli, ["incidents", "--db", str(sample_db), "--json"]).stdout)
    waste = [Decimal(str(i["wasted_usd"])) for i in listed]
    assert waste == sorted(waste, reverse=True)


def test_audit_keeps_the_store_only_when_asked(runner: CliRunner, tmp_path: Path) -> None:
    db = tmp_path / "kept.duckdb"
    result = runner.invoke(cli, ["audit", str(SAMPLE_DATA), "--db", str(db), "--json"])
    assert result.exit_code == 0 and db.exists()
    again = runner.invoke(cli, ["audit", str(SAMPLE_DATA), "--db", str(db), "--json"])
    assert json.loads(again.stdout)["calls"] == json.loads(result.stdout)["calls"]
    assert "unchanged" in again.stderr


def test_ingest_json_and_env_database(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "env.duckdb"
    monkeypatch.setenv("LLM_FORENSICS_DB", str(db))
    f = write_csv(tmp_path / "a.csv", [or_row(i) for i in range(7)], columns=[*HEADER, "extra"])
    result = runner.invoke(cli, ["ingest", str(f), "--json"])
    assert result.exit_code == 0, result.output
    [report] = json.loads(result.stdout)
    assert report["rows_loaded"] == 7 and report["status"] == "loaded"
    assert "ignoring unknown columns: extra" in result.stderr
    assert db.exists()
    again = runner.invoke(cli, ["ingest", str(f), "--json"])
    assert json.loads(again.stdout)[0]["status"] == "unchanged"


def test_ingest_human_lines(runner: CliRunner, tmp_path: Path) -> None:
    f = write_csv(tmp_path / "a.csv", [or_row(i) for i in range(3)])
    result = runner.invoke(cli, ["ingest", "--db", str(tmp_path / "d.duckdb"), str(f)])
    assert result.exit_code == 0
    assert result.stdout.strip() == "read 1 file: 1 loaded (3 records)"
    again = runner.invoke(cli, ["ingest", "--db", str(tmp_path / "d.duckdb"), str(f), "-v"])
    assert again.exit_code == 0
    assert again.stdout.strip().endswith("a.csv  [openrouter_csv]  unchanged (already ingested)")


def test_broken_rows_exit_0_and_strict_exit_3(runner: CliRunner, tmp_path: Path) -> None:
    data = [or_row(i) for i in range(100)]
    for i in (10, 20, 30):
        data[i]["tokens_completion"] = "n/a"
    f = write_csv(tmp_path / "b.csv", data)
    ok = runner.invoke(cli, ["ingest", "--db", str(tmp_path / "1.duckdb"), str(f), "--json"])
    assert ok.exit_code == 0
    assert json.loads(ok.stdout)[0]["rows_rejected"] == 3
    strict = runner.invoke(cli, ["ingest", "--db", str(tmp_path / "2.duckdb"), str(f), "--strict"])
    assert strict.exit_code == 3
    assert strict.stderr.strip().splitlines() == [
        f'Error: {f}:12: tokens_completion: "n/a" is not a whole number of tokens '
        "(and 2 more rejects; --strict)"
    ]


def test_unrecognised_file_is_exit_3_one_line(runner: CliRunner, tmp_path: Path) -> None:
    f = tmp_path / "notes.txt"
    f.write_text("hello\n")
    result = runner.invoke(cli, ["ingest", "--db", str(tmp_path / "x.duckdb"), str(f)])
    assert result.exit_code == 3
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"Error: {f}: not a recognised input format (expected: ")
    assert "Traceback" not in result.output


def test_missing_column_and_missing_path(runner: CliRunner, tmp_path: Path) -> None:
    f = write_csv(tmp_path / "m.csv", [or_row(0)], columns=[c for c in HEADER if c != "created_at"])
    result = runner.invoke(cli, ["ingest", "--db", str(tmp_path / "x.duckdb"), str(f)])
    assert result.exit_code == 3
    assert result.stderr.startswith(f"Error: {f}:1: missing required column created_at")
    gone = runner.invoke(cli, ["audit", str(tmp_path / "nope.csv")])
    assert gone.exit_code == 3
    assert gone.stderr.strip() == f"Error: {tmp_path / 'nope.csv'}: no such file or folder"


@pytest.mark.parametrize(
    "args",
    [
        ["ingest", "x.csv", "--session-gap", "soon"],
        ["ingest", "x.csv", "--input-tz", "Mars/Olympus"],
        ["ingest", "x.csv", "--tz", "UTC"],  # the zone of input times is --input-tz
        ["audit", "x.csv", "--tz", "Mars/Olympus"],
        ["audit", "x.csv", "--since", "last tuesday"],
        ["audit", "x.csv", "--since", "2025-12-10", "--until", "2025-12-01"],
        ["audit", "x.csv", "-o", "report.txt"],
        ["usage", "hourly"],
        ["backtest", "--max-false-trips", "1"],
        ["show"],
        ["audit", "x.csv", "--bogus"],
        ["sample"],
    ],
)
def test_usage_errors_are_exit_2(runner: CliRunner, args: list[str]) -> None:
    assert runner.invoke(cli, args).exit_code == 2


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_explains_itself(runner: CliRunner, command: str) -> None:
    result = runner.invoke(cli, [command, "--help"])
    assert result.exit_code == 0
    assert "Example" in result.stdout and "llm-forensics " + command in result.stdout


def test_traceback_flag_shows_the_real_exception(runner: CliRunner, tmp_path: Path) -> None:
    f = tmp_path / "notes.txt"
    f.write_text("hello\n")
    result = runner.invoke(cli, ["--traceback", "ingest", "--db", str(tmp_path / "x.db"), str(f)])
    assert result.exit_code != 0
    assert type(result.exception).__name__ == "InputError"


def test_session_gap_option_changes_sessions(runner: CliRunner, tmp_path: Path) -> None:
    data = [or_row(0), or_row(1, created_at="2025-12-13 06:20:00.000")]
    f = write_csv(tmp_path / "g.csv", data)
    for gap, sessions in (("30m", 1), ("10m", 2), ("600s", 2), ("1h", 1)):
        db = tmp_path / f"{gap}.duckdb"
        assert (
            runner.invoke(cli, ["ingest", "--db", str(db), "--session-gap", gap, str(f)]).exit_code
            == 0
        )
        import duckdb

        with duckdb.connect(str(db)) as con:
            assert con.execute("SELECT count(DISTINCT session_id) FROM calls").fetchone() == (
                sessions,
            )


def test_database_in_use_by_another_process(runner: CliRunner, tmp_path: Path) -> None:
    db = tmp_path / "busy.duckdb"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); print('ready', flush=True);"
            " time.sleep(60)",
            str(db),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        f = write_csv(tmp_path / "a.csv", [or_row(0)])
        started = time.monotonic()
        result = runner.invoke(cli, ["ingest", "--db", str(db), str(f)])
        assert time.monotonic() - started < 30
        assert result.exit_code == 3
        assert re.fullmatch(
            rf"Error: {re.escape(str(db))}: the database is in use by another process "
            r"\(PID \d+\): run again when it has finished",
            result.stderr.strip(),
        ), result.stderr
    finally:
        holder.kill()
        holder.wait()


def test_ingest_sniffs_every_format_in_a_mixed_folder(runner: CliRunner, tmp_path: Path) -> None:
    result = runner.invoke(
        cli, ["ingest", "--db", str(tmp_path / "m.duckdb"), str(SAMPLE_DATA), "--json"]
    )
    assert result.exit_code == 0, result.output
    formats = {
        Path(r["path"]).relative_to(SAMPLE_DATA).parts[0]: r["format"]
        for r in json.loads(result.stdout)
    }
    assert formats == {
        "README.md": None,
        CSV_NAME: "openrouter_csv",
        "claude-code": "claude_code",
        "netclaw": "conversation_json",
        "nexus3": "nexus3_raw",
        "penguin": "conversation_json",
    }
    reports = json.loads(result.stdout)
    assert all(r["rows_rejected"] == 0 for r in reports)
    audit = runner.invoke(
        cli, ["audit", "--db", str(tmp_path / "m.duckdb"), str(SAMPLE_DATA), "--json"]
    )
    rec = json.loads(audit.stdout)["reconciliation"]
    # Every call Penguin and Netclaw logged is found in the bill, and nothing billed near them
    # is left over; the NEXUS3 and Claude Code calls were never billed through OpenRouter.
    assert rec["matched"] == 175 and rec["billing_rows_unmatched"] == 0
    assert rec["log_calls_unmatched"] == 18


def test_format_option_overrides_sniffing(runner: CliRunner, tmp_path: Path) -> None:
    f = SAMPLE_DATA / "nexus3" / "logs" / "2025-12-11_091502_a7c3" / "raw.jsonl"
    result = runner.invoke(
        cli, ["ingest", "--db", str(tmp_path / "o.duckdb"), str(f), "--format", "codex", "--json"]
    )
    assert result.exit_code == 0, result.output
    [report] = json.loads(result.stdout)
    # Read as a Codex rollout, no line is a Codex line: nothing loads, and nothing is lost.
    assert report["format"] == "codex" and report["rows_read"] == 22
    assert report["rows_loaded"] == 0
    assert report["rows_rejected"] + report["rows_skipped"] == 22


def test_calls_without_time_are_counted_and_said(runner: CliRunner, tmp_path: Path) -> None:
    """A saved OpenAI conversation keeps no timestamps: its calls are still calls, counted, and
    the terminal and the report say they have no time (never "No calls in the store")."""
    usage = {"prompt_tokens": 1200, "completion_tokens": 30}
    doc = {
        "messages": [
            {"role": "user", "content": "fix the test"},
            {"role": "assistant", "content": "done", "model": "gpt-5", "usage": usage},
            {"role": "user", "content": "and the docs"},
            {"role": "assistant", "content": "done too", "model": "gpt-5", "usage": usage},
        ]
    }
    f = tmp_path / "chat.json"
    f.write_text(json.dumps(doc))
    text = runner.invoke(cli, ["audit", str(f), "-o", str(tmp_path / "r.md")])
    assert text.exit_code == 0, text.output
    assert "Period   unknown: none of the 2 calls has a time" in text.stdout
    assert "Calls    2 (2 estimated)" in text.stdout
    assert "No calls" not in text.stdout
    page = (tmp_path / "r.md").read_text()
    assert "2 calls, none with a time" in page and "No calls" not in page
    data = json.loads(runner.invoke(cli, ["audit", str(f), "--json"]).stdout)
    assert (data["calls"], data["calls_without_time"], data["period"]) == (
        2,
        2,
        {"start": None, "end": None},
    )


def test_unpriced_models_are_named(runner: CliRunner, tmp_path: Path) -> None:
    usage = {"prompt_tokens": 100, "completion_tokens": 10}
    doc = [{"role": "assistant", "content": "a", "model": "acme/secret-model-9", "usage": usage}]
    f = tmp_path / "c.json"
    f.write_text(json.dumps(doc))
    result = runner.invoke(cli, ["audit", str(f), "--json"])
    assert json.loads(result.stdout)["unpriced_models"] == {"acme/secret-model-9": 1}
    assert result.stderr.count("no price known for model 'acme/secret-model-9'") == 1
    text = runner.invoke(cli, ["audit", str(f)]).stdout
    assert "Unpriced acme/secret-model-9 (1): no known price, counted as $0" in text


def test_ingest_of_a_log_does_not_import_pandas(tmp_path: Path) -> None:
    """pyarrow's first conversion would import pandas (0.2 s of every log ingest); the CLI
    lets that look fail, and pandas still works for whoever asks for it by name."""
    script = (
        "import atexit, sys\n"
        "atexit.register(lambda: print('pandas imported:', 'pandas' in sys.modules))\n"
        "from analyzer.cli.main import main\n"
        f"sys.argv = ['llm-forensics', 'ingest', '-q', '--db', {str(tmp_path / 's.duckdb')!r},"
        f" {str(SAMPLE_DATA / 'claude-code')!r}]\n"
        "main()\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "pandas imported: False" in done.stdout
    assert "loaded" in done.stdout

    after = (
        "import pyarrow as pa\n"
        "from analyzer.engine.arrow_setup import skip_pandas\n"
        "skip_pandas()\n"
        "t = pa.table({'k': pa.array(['a', None])})\n"
        "df = t.to_pandas()\n"
        "assert type(df).__module__.startswith('pandas'), type(df)\n"
        "assert pa.Table.from_pandas(df, preserve_index=False).to_pylist() == t.to_pylist()\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", after], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_pandas_is_skipped_when_pyarrow_is_loaded_later() -> None:
    """The CLI asks to skip pandas before it knows whether the command will load pyarrow (a
    warm view never does): the skip waits for pyarrow's import, then leaves no trace."""
    script = (
        "import sys\n"
        "from analyzer.engine.arrow_setup import skip_pandas\n"
        "skip_pandas()\n"
        "assert 'pyarrow' not in sys.modules\n"
        "import pyarrow as pa\n"
        "t = pa.table({'k': pa.array(['a', None])})\n"
        "assert 'pandas' not in sys.modules\n"
        "assert not any(type(f).__name__ == '_WhenPyarrowLoads' for f in sys.meta_path)\n"
        "assert type(t.to_pandas()).__module__.startswith('pandas')\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
