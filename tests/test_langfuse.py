"""Langfuse's observations export: the blob-storage export as JSON Lines, the UI's export as
CSV and as a JSON array, read as an agent log (tests/fixtures/README.md says what each fixture
follows)."""

from __future__ import annotations

import json
import shutil
from datetime import datetime
from decimal import Decimal
from pathlib import Path

from click.testing import CliRunner

from analyzer.cli.main import cli
from analyzer.engine.store import open_store
from analyzer.formats import langfuse
from analyzer.ingest.base import IngestOptions
from analyzer.ingest.reading import read_head
from analyzer.load.flow import FileReport
from analyzer.pipeline import ingest_paths
from tests.helpers import REPO

FIXTURES = REPO / "tests" / "fixtures" / "langfuse"
BLOB = FIXTURES / "observations_v2_2026-03-05T14-00-00.jsonl"
UI_CSV = FIXTURES / "observations_ui_export.csv"
UI_JSON = FIXTURES / "observations_ui_export.json"
LOOP = "sess-fix-io-0305"
HEALTHY = "sess-weather-0305"


def ingest(db: Path, *paths: Path) -> list[FileReport]:
    with open_store(db) as store:
        return list(ingest_paths(store, [str(p) for p in paths], IngestOptions(progress=False)))


def counts(r: FileReport) -> tuple[int, int, int, int, int]:
    assert r.rows_read == r.rows_loaded + r.rows_rejected + r.rows_duplicate + r.rows_skipped
    return r.rows_read, r.rows_loaded, r.rows_rejected, r.rows_duplicate, r.rows_skipped


def rows(db: Path, sql: str) -> list[tuple[object, ...]]:
    with open_store(db, read_only=True) as store:
        return store.con.execute(sql).fetchall()


def test_sniffed_by_content_not_by_name(tmp_path: Path) -> None:
    for src in (BLOB, UI_CSV, UI_JSON):
        renamed = tmp_path / f"export-{src.suffix.strip('.')}.txt"
        shutil.copy(src, renamed)
        assert langfuse.sniff(read_head(renamed, renamed.name)), src.name
    other = REPO / "tests" / "fixtures" / "litellm" / "LiteLLM_SpendLogs.csv"
    assert not langfuse.sniff(read_head(other, other.name))
    [r] = ingest(tmp_path / "s.duckdb", tmp_path / "export-jsonl.txt")
    assert r.format == "langfuse"


def test_the_blob_export_as_json_lines(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    [r] = ingest(db, BLOB)
    # 17 lines: 12 generations, a span and an event (skipped by kind), a line cut in two and
    # a record without its trace (rejected), and a generation exported twice.
    assert counts(r) == (17, 12, 2, 1, 2)
    rejects = rows(db, "SELECT line, reason FROM rejects ORDER BY line")
    assert [line for line, _ in rejects] == [6, 10]
    assert "not valid JSON" in str(rejects[0][1]) and "no trace_id" in str(rejects[1][1])
    # Golden figures, from the file's own usage_details and total_cost (their sums by hand:
    # the loop's prompts 1180 + 64k for k < 8, 24 tokens out each; gpt-4o at $2.50/$10).
    got = rows(
        db,
        f"""SELECT count(*), sum(input_tokens), sum(cached_input_tokens), sum(output_tokens),
                   sum(cost_usd), min(cost_basis)
            FROM calls WHERE session_id = '{LOOP}'""",
    )
    inputs = sum(1180 + 64 * k for k in range(8))
    outputs = 24 * 8
    dollars = inputs * Decimal("0.0000025") + outputs * Decimal("0.00001")
    assert got == [(8, inputs, 1024 * 7, outputs, dollars, "reported")]


def test_what_a_call_keeps(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    ingest(db, BLOB)
    first = rows(
        db,
        f"""SELECT call_id, ts, model, response_kind, duration_ms, ttft_ms, labels
            FROM calls WHERE session_id = '{LOOP}' ORDER BY ts LIMIT 1""",
    )[0]
    assert first[:6] == (
        "langfuse:b000000000000000",  # the observation's id
        datetime(2026, 3, 5, 14, 2, 11, 623000),
        "gpt-4o-2024-08-06",
        "tool_call",
        1900.0,
        640.0,
    )
    assert json.loads(str(first[6])) == {
        "environment": "production",
        "release": "v1.4.2",
        "tags": "agent,ci",
        "user.id": "alice@example.com",
    }
    # The failed call (level ERROR) is an error, in its trace's session (it has none).
    [(kind, session)] = rows(
        db, "SELECT response_kind, session_id FROM calls WHERE call_id LIKE '%d000000000000001'"
    )
    assert kind == "error" and session == "5a5b5c5d5e5f50515253545556575859"


def test_a_tool_loop_is_found_and_a_healthy_trace_is_not(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    ingest(db, BLOB)
    runner = CliRunner()
    result = runner.invoke(cli, ["detect", "--db", str(db)])
    assert result.exit_code == 0, result.output
    found = rows(db, "SELECT detector, session_id, n_calls FROM incidents ORDER BY session_id")
    assert [(d, s) for d, s, _ in found] == [("repeated_tool_call", LOOP)]
    assert not any(s == HEALTHY for _, s, _ in found)
    # The tool results are tied to the calls that asked for them (by the tool call's id).
    tied = rows(
        db,
        f"""SELECT count(*) FROM messages r JOIN messages c
              ON c.session_id = r.session_id AND c.tool_use_id = r.tool_use_id
            WHERE r.session_id = '{LOOP}' AND r.kind = 'tool_result' AND c.kind = 'tool_call'""",
    )
    assert tied == [(7,)]


def test_the_ui_export_as_csv_with_tool_observations(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    [r] = ingest(db, UI_CSV)
    # 12 records: an agent observation (skipped), 5 generations, 5 tool observations (each a
    # tool call and its result), a record cut short (rejected: its fields do not fit).
    assert counts(r) == (12, 10, 1, 0, 1)
    [(line, reason)] = rows(db, "SELECT line, reason FROM rejects")
    assert line == 5 and "fields where the header has" in str(reason)
    got = rows(
        db,
        """SELECT count(*), sum(input_tokens), sum(output_tokens), sum(cost_usd),
                  min(response_kind), max(response_kind)
           FROM calls""",
    )
    assert got == [(5, 900 * 5 + 150 * 10, 31 * 5, Decimal("0.01324"), "tool_call", "tool_call")]
    errors = rows(db, "SELECT count(*) FROM messages WHERE kind = 'tool_result' AND is_error")
    assert errors == [(5,)]
    CliRunner().invoke(cli, ["detect", "--db", str(db)])
    assert rows(db, "SELECT detector FROM incidents") == [("repeated_tool_call",)]


def test_the_same_observations_in_another_export_are_counted_once(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    [ui_csv, js] = ingest(db, UI_CSV, UI_JSON)
    assert counts(ui_csv)[1] == 10
    # The JSON export holds the CSV's first three records: an agent (skipped), a generation
    # and a tool observation, all stored already.
    assert counts(js) == (3, 0, 0, 2, 1)
    assert rows(db, "SELECT count(*) FROM calls") == [(5,)]
    assert rows(db, "SELECT count(*) FROM messages WHERE kind = 'tool_call'") == [(5,)]
