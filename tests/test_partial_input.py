"""A folder is read whole even when some of it cannot be: a file that fails to load, or data no
reader recognises, is named in one line and the rest is read; the run exits 4 (``--strict``:
the first failure stops it, exit 3). A log read to no call says so."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from analyzer.cli.main import cli
from tests.helpers import SAMPLE_DATA

GOOD = SAMPLE_DATA / "netclaw" / "conversation_2025-12-09_discord-ops.json"


def folder(tmp_path: Path, **files: str | bytes) -> Path:
    """A folder holding the sample's Netclaw conversation (a good log) and ``files``."""
    root = tmp_path / "logs"
    root.mkdir()
    (root / "good.json").write_bytes(GOOD.read_bytes())
    for name, content in files.items():
        path = root / name.replace("__", ".")
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    return root


BROKEN = '{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "con'
UNKNOWN = json.dumps({"settings": {"theme": "dark"}, "version": 3})


def test_a_broken_file_in_a_folder_is_named_and_the_rest_is_read(
    runner: CliRunner, tmp_path: Path
) -> None:
    root = folder(tmp_path, broken__json=BROKEN, settings__json=UNKNOWN, README__md="# notes\n")
    db = tmp_path / "s.duckdb"
    result = runner.invoke(cli, ["ingest", "--db", str(db), str(root)])
    assert result.exit_code == 4, result.output
    err = result.stderr.splitlines()
    broken = root / "broken.json"
    assert [e for e in err if "broken.json" in e and not e.startswith("exit")] == [
        f"warning: {broken}:1: not valid JSON: unexpected end of data (not read; the rest is)"
    ]
    assert f"{root / 'settings.json'}: not read: JSON that no reader recognises" in err
    assert err[-1] == f"exit 4: 2 files not read ({broken}, {root / 'settings.json'})"
    summary = result.stdout.strip()
    assert "1 loaded" in summary and "1 could not be loaded" in summary
    assert "1 data no reader recognises" in summary and "1 not an agent log or bill" in summary
    # what was read is stored; nothing of the broken file
    listed = runner.invoke(cli, ["usage", "session", "--db", str(db), "--json"])
    assert json.loads(listed.stdout)["totals"]["calls"] > 0


def test_a_store_kept_inside_the_folder_it_reads_is_not_input(
    runner: CliRunner, tmp_path: Path
) -> None:
    """``ingest --db logs/s.duckdb logs``: the store (and its write-ahead log) lies in the folder
    read. A DuckDB file opens with an 8-byte checksum, now and then a ``{``: the store was then
    taken for JSON no reader recognises, and the run exited 4 (one CI run in a hundred). The
    checksum is set to ``{`` here, as on that run; a binary file that opens like JSON is not
    data either."""
    root = folder(tmp_path, blob__json=b'{"a' + bytes(range(256)))
    other = tmp_path / "other.duckdb"
    runner.invoke(cli, ["ingest", "--db", str(other), str(GOOD)])
    store = bytearray(other.read_bytes())
    assert store[8:12] == b"DUCK"
    store[0:1] = b"{"
    (root / "old.duckdb").write_bytes(bytes(store))
    db = root / "s.duckdb"
    result = runner.invoke(cli, ["ingest", "--db", str(db), str(root), "--json"])
    assert result.exit_code == 0, result.output
    reasons = {Path(r["path"]).name: r["reason"] for r in json.loads(result.stdout)}
    assert reasons["old.duckdb"] == "a DuckDB database, not an agent log or bill"
    assert reasons["blob.json"] == "not an agent log or bill"
    assert reasons["s.duckdb"] == "a DuckDB database, not an agent log or bill"


def test_audit_goes_on_and_exits_4(runner: CliRunner, tmp_path: Path) -> None:
    root = folder(tmp_path, broken__json=BROKEN)
    result = runner.invoke(cli, ["audit", str(root), "--json"])
    assert result.exit_code == 4, result.output
    data = json.loads(result.stdout)
    assert data["calls"] > 0
    statuses = {Path(r["path"]).name: (r["status"], r["reason"]) for r in data["ingested"]}
    assert statuses["good.json"] == ("loaded", None)
    assert statuses["broken.json"][0] == "failed"
    assert statuses["broken.json"][1].startswith("not valid JSON")


def test_findings_still_exit_1(runner: CliRunner, tmp_path: Path) -> None:
    root = folder(tmp_path, broken__json=BROKEN)
    result = runner.invoke(cli, ["audit", str(root), "--fail-on", "low"])
    assert result.exit_code == 1, result.output
    assert "could not be loaded" in result.stdout + result.stderr


def test_strict_keeps_all_or_nothing(runner: CliRunner, tmp_path: Path) -> None:
    root = folder(tmp_path, zz_broken__json=BROKEN)
    result = runner.invoke(cli, ["ingest", "--strict", "--db", str(tmp_path / "s.db"), str(root)])
    assert result.exit_code == 3
    assert (
        result.stderr.strip()
        .splitlines()[-1]
        .startswith(f"Error: {root / 'zz_broken.json'}:1: not valid JSON")
    )


def test_a_file_named_on_the_command_line_is_still_an_error(
    runner: CliRunner, tmp_path: Path
) -> None:
    root = folder(tmp_path, broken__json=BROKEN)
    result = runner.invoke(
        cli, ["ingest", "--db", str(tmp_path / "s.db"), str(root / "broken.json")]
    )
    assert result.exit_code == 3 and "not valid JSON" in result.stderr


def test_prose_beside_the_logs_is_not_input(runner: CliRunner, tmp_path: Path) -> None:
    """A README or a script in the folder is named, but is no input not read: exit 0."""
    root = folder(tmp_path, README__md="# notes\n", run__sh="#!/bin/sh\nclaude -p hi\n")
    result = runner.invoke(cli, ["ingest", "--db", str(tmp_path / "s.db"), str(root)])
    assert result.exit_code == 0, result.output
    assert "2 not an agent log or bill" in result.stdout


def test_a_log_every_record_of_which_is_rejected_is_not_read(
    runner: CliRunner, tmp_path: Path
) -> None:
    lines = "".join(
        json.dumps({"type": "assistant", "sessionId": "s", "message": {"content": "x"}}) + "\n"
        for _ in range(3)
    )
    root = folder(tmp_path, broken__jsonl=lines)
    result = runner.invoke(cli, ["ingest", "--db", str(tmp_path / "s.db"), str(root)])
    assert result.exit_code == 4, result.output
    assert (
        f"{root / 'broken.jsonl'}: recognised as Claude Code transcript (JSONL), 0 calls: all 3 "
        "records rejected"
    ) in result.stderr
    assert result.stderr.splitlines()[-1] == f"exit 4: 1 file not read ({root / 'broken.jsonl'})"


def test_a_log_with_no_call_says_why(runner: CliRunner, tmp_path: Path) -> None:
    only_asked = json.dumps({"messages": [{"role": "user", "content": "hello?"}]})
    root = folder(tmp_path, asked__json=only_asked)
    result = runner.invoke(cli, ["ingest", "--db", str(tmp_path / "s.db"), str(root)])
    assert result.exit_code == 0, result.output
    assert (
        f"{root / 'asked.json'}: recognised as saved conversation (JSON: OpenAI or Anthropic "
        "messages, Penguin session), 0 calls: no model reply in it"
    ) in result.stderr
    verbose = runner.invoke(cli, ["ingest", "-v", "--db", str(tmp_path / "t.db"), str(root)])
    assert "0 calls: no model reply in it" in verbose.stdout
