"""Usage first, content when asked (issue 48, ``analyzer.load.usage_first``): a usage view's
refresh reads Claude Code transcripts without their content, by the format's own code, and a
command that needs content reads them whole first. Held on every real corpus: the usage views
of a usage-first store equal those of a whole read, and once read whole, every table is what a
whole first read makes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from analyzer.cli.main import cli
from analyzer.engine.store import Store, open_store
from analyzer.ingest.base import CONTENT_LATER, IngestOptions
from analyzer.ingest.jsonl import Only
from analyzer.load import usage_first
from analyzer.pipeline import ingest_paths
from tests.helpers import env_of, shared_samples
from tests.test_own_data import fake_home

CORPORA = ["real-world", "real-loops", "real-loops-2", "real-loops-3", "more-formats"]
VIEWS = ["daily", "weekly", "monthly", "session", "project", "model"]
# The tables a load writes, and the columns of theirs that name a read rather than what it
# read (the source id a read is given, when and where it ran, the resume point's offsets are
# the same either way).
TABLES = ["sources", "calls", "messages", "runs", "rejects", "resume_points"]
READ_COLUMNS = {"source_id", "ingested_at", "machine"}


def dump(store: Store, where: bool = True) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of the load's tables, without the columns that name the read (nor, without
    ``where``, those that name the file on disk: two homes)."""
    out = {}
    left_out = READ_COLUMNS if where else READ_COLUMNS | {"file_stat", "file"}
    for table in TABLES:
        cols = [
            r[0] for r in store.con.execute(f"DESCRIBE {table}").fetchall() if r[0] not in left_out
        ]
        out[table] = store.con.execute(
            f"SELECT {', '.join(cols)} FROM {table} ORDER BY ALL"
        ).fetchall()
    return out


def views(runner: CliRunner, db: Path) -> dict[str, Any]:
    """What every usage view shows of the store at ``db`` (as JSON)."""
    shown = {}
    for view in VIEWS:
        result = runner.invoke(cli, ["usage", view, "--json", "--db", str(db)])
        assert result.exit_code == 0, result.output
        shown[view] = json.loads(result.stdout)
    result = runner.invoke(cli, ["usage", "daily", "--breakdown", "--json", "--db", str(db)])
    assert result.exit_code == 0, result.output
    shown["daily --breakdown"] = json.loads(result.stdout)
    return shown


def usage_reads(store: Store) -> int:
    return len(usage_first.reads(store))


@pytest.mark.parametrize("corpus", CORPORA)
def test_both_phases_give_the_same_figures_and_tables(
    corpus: str, tmp_path: Path, runner: CliRunner
) -> None:
    folder = str(shared_samples() / corpus)
    whole, first = tmp_path / "whole.duckdb", tmp_path / "first.duckdb"
    with open_store(whole) as store:
        ingest_paths(store, [folder], IngestOptions())
        expected = dump(store)
    with open_store(first) as store:
        ingest_paths(store, [folder], IngestOptions(content=False))
        n_cc = store.scalar("SELECT count(*) FROM sources WHERE format = 'claude_code'")
        assert usage_reads(store) == n_cc  # (every transcript was read usage first)
        assert (
            store.scalar(
                "SELECT count(*) FROM messages m JOIN sources s USING (source_id) "
                "WHERE s.format = 'claude_code'"
            )
            == 0
        )
    # Phase one: the usage views show what a whole read shows.
    assert views(runner, first) == views(runner, whole)
    # Phase two: read whole when content is asked for; then every table is a whole read's.
    with open_store(first) as store:
        ingest_paths(store, [folder], IngestOptions())
        assert usage_reads(store) == 0
        assert dump(store) == expected


def test_the_corpora_hold_claude_code_transcripts() -> None:
    """(The test above proves something only where there are transcripts to read usage first.)"""
    found = {c: len(list((shared_samples() / c).rglob("*.jsonl"))) for c in CORPORA[:4]}
    assert all(found.values()), found


def test_a_line_is_parsed_only_when_it_can_be_wanted() -> None:
    only = Only(b"assistant", "later")
    assert only.wanted(b'{"type":"assistant","message":{}}\n')
    assert not only.wanted(b'{"type":"user","message":{"content":"hello"}}\n')
    # An escape could spell the word: such a line is parsed (and judged by its type).
    assert only.wanted(b'{"type":"\\u0061ssistant"}\n')
    assert not only.wanted(b'{"type":"user","text":"\\u00e9t\\u00e9"}\n')


def _store_path(home: Path) -> Path:
    return home / ".local" / "share" / "llm-forensics" / "forensics.duckdb"


def same_stores(home: Path, other: Path) -> bool:
    """Whether two homes' default stores hold the same rows (but for where and when read)."""
    with (
        open_store(_store_path(home), read_only=True) as store,
        open_store(_store_path(other), read_only=True) as theirs,
    ):
        return dump(store, where=False) == dump(theirs, where=False)


def _run(runner: CliRunner, home: Path, *args: str) -> str:
    result = runner.invoke(cli, list(args), env=env_of(home), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout


def _transcript(home: Path) -> Path:
    (found,) = (home / ".claude" / "projects").rglob("*.jsonl")
    return found


def test_usage_daily_reads_usage_first_and_incidents_read_the_content(
    runner: CliRunner, tmp_path: Path
) -> None:
    home = fake_home(tmp_path / "a")
    first = _run(runner, home, "usage", "daily", "--json")
    with open_store(_store_path(home), read_only=True) as store:
        assert usage_reads(store) == 1  # the transcript; the Codex rollout is read whole
        kinds = store.scalar("SELECT skipped_kinds FROM sources WHERE format = 'claude_code'")
        assert CONTENT_LATER in json.loads(kinds)
        assert (
            store.scalar(
                "SELECT count(*) FROM messages m JOIN sources s USING (source_id) "
                "WHERE s.format = 'claude_code'"
            )
            == 0
        )
    # A second usage view reads nothing; a command that needs content reads it whole.
    assert _run(runner, home, "usage", "daily", "--json") == first
    _run(runner, home, "incidents", "--json")
    whole_home = fake_home(tmp_path / "b")
    _run(runner, whole_home, "incidents", "--json")
    with (
        open_store(_store_path(home), read_only=True) as store,
        open_store(_store_path(whole_home), read_only=True) as whole,
    ):
        assert usage_reads(store) == 0
        assert dump(store, where=False) == dump(whole, where=False)
    assert _run(runner, home, "usage", "daily", "--json") == first


def test_a_grown_file_is_read_as_it_was_read_before(runner: CliRunner, tmp_path: Path) -> None:
    home = fake_home(tmp_path)
    transcript = _transcript(home)
    lines = transcript.read_bytes().splitlines(keepends=True)
    half = len(lines) // 2
    transcript.write_bytes(b"".join(lines[:half]))
    _run(runner, home, "usage", "daily", "--json")
    # A usage-first read whose file grew: read usage first again (it left no resume point).
    transcript.write_bytes(b"".join(lines[: half + 10]))
    _run(runner, home, "usage", "daily", "--json")
    with open_store(_store_path(home), read_only=True) as store:
        assert usage_reads(store) == 2
    # Read whole by a command that needs content; grown again, a usage view reads it whole
    # (on from its resume point), never usage first.
    _run(runner, home, "incidents", "--json")
    transcript.write_bytes(b"".join(lines))
    daily = _run(runner, home, "usage", "daily", "--json")
    with open_store(_store_path(home), read_only=True) as store:
        assert usage_reads(store) == 0
        grown = dump(store)
    whole_home = fake_home(tmp_path / "whole")
    assert _run(runner, whole_home, "usage", "daily", "--json") == daily
    _run(runner, whole_home, "incidents", "--json")
    with open_store(_store_path(whole_home), read_only=True) as whole:
        assert [len(grown[t]) for t in ("calls", "messages")] == [
            len(dump(whole)[t]) for t in ("calls", "messages")
        ]


def test_a_usage_first_read_of_a_file_gone_is_kept(runner: CliRunner, tmp_path: Path) -> None:
    home = fake_home(tmp_path)
    first = json.loads(_run(runner, home, "usage", "daily", "--json"))
    gone = _transcript(home)
    shutil.move(gone, tmp_path / "elsewhere.jsonl")
    _run(runner, home, "incidents", "--json")
    with open_store(_store_path(home), read_only=True) as store:
        assert usage_reads(store) == 1  # (its content cannot be read: its calls stay)
    after = json.loads(_run(runner, home, "usage", "daily", "--json"))
    assert after["totals"]["calls_from_deleted_files"] == 30  # (said as such)
    gone_said = "calls_from_deleted_files"
    for row in [after["totals"], first["totals"], *after["daily"], *first["daily"]]:
        row.pop(gone_said, None)
    assert after == first
