"""Store upgrades: an ordered list of migrations, each a SQL unit, applied in order when a
store of an older format is opened for writing."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from analyzer.cli.main import cli
from analyzer.engine.store import MIGRATIONS, SCHEMA_VERSION, migrations_from, open_store
from analyzer.errors import ForensicsError
from analyzer.model.formatting import money
from tests.helpers import shared_samples
from tests.test_default_store import OTHER_CC
from tests.test_own_data import CC_SAMPLE

# What each format lacked that the next one has (dropped from a new store to make an old one).
_GAINED = {
    7: ["DROP TABLE bill_buckets"],
    8: ["DROP TABLE runs"],
    9: [
        f"ALTER TABLE {table} DROP COLUMN {column}"
        for table, column in [
            ("calls", "output_estimate_tokens"),
            ("calls", "output_estimate_floor"),
            ("calls", "cost_logged_usd"),
            ("incidents", "app"),
            ("incidents", "api_key"),
            ("incidents", "model"),
            ("incidents", "project"),
        ]
    ],
    10: [f"ALTER TABLE {table} DROP COLUMN machine" for table in ("sources", "calls", "incidents")],
    11: ["DROP TABLE resume_points"],
    12: ["ALTER TABLE messages DROP COLUMN meaning_key"],
    13: ["ALTER TABLE calls DROP COLUMN labels"],
}


def test_the_migrations_are_consecutive_and_end_at_this_format() -> None:
    steps = [m.to for m in MIGRATIONS]
    assert steps == list(range(steps[0], steps[0] + len(steps)))
    assert str(steps[-1]) == SCHEMA_VERSION
    assert [m.to for m in migrations_from("6")] == [7, 8, 9, 10, 11, 12, 13]
    assert migrations_from(SCHEMA_VERSION) == migrations_from("5") == migrations_from("x") == []


def _columns(db: Path) -> list[tuple[str, str, str]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(
            "SELECT table_name, column_name, data_type FROM duckdb_columns() "
            "WHERE NOT internal ORDER BY table_name, column_index"
        ).fetchall()
    finally:
        con.close()


@pytest.mark.parametrize("old", [6, 7, 8, 9, 10, 11, 12])
def test_a_store_of_every_older_format_becomes_a_new_one(tmp_path: Path, old: int) -> None:
    """Each step in order: an upgraded store has the tables and columns of a new one (in the
    same order), this format, and no kept result; read-only it is refused, untouched."""
    new, db = tmp_path / "new.duckdb", tmp_path / "old.duckdb"
    for path in (new, db):
        with open_store(path):
            pass
    con = duckdb.connect(str(db))
    for fmt in range(int(SCHEMA_VERSION), old, -1):
        for statement in _GAINED[fmt]:
            con.execute(statement)
    con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", [str(old)])
    con.execute("INSERT INTO cache VALUES ('detect', 'k', '{}')")
    con.close()
    with pytest.raises(ForensicsError, match="upgrades it"), open_store(db, read_only=True):
        pass
    with open_store(db) as store:
        assert store.scalar("SELECT value FROM meta WHERE key = 'schema_version'") == (
            SCHEMA_VERSION
        )
        assert store.scalar("SELECT count(*) FROM cache") == 0
    assert _columns(db) == _columns(new)


# What a store of format 8 or earlier held of a Claude Code call whose logged output count is a
# streaming placeholder: priced at that count, every call's output marked a placeholder (as the
# build of format 8, f5ed584^, stores the two transcripts below: checked by hand).
_PRICED_AS_LOGGED = [
    "UPDATE calls SET cost_usd = cost_logged_usd, cost_estimate_usd = cost_logged_usd, "
    "cost_basis = 'estimated' WHERE cost_basis = 'estimated_output'",
    "UPDATE calls SET output_final = false WHERE format = 'claude_code'",
]


def _calls(db: Path) -> dict[str, tuple[object, ...]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        rows = con.execute(
            "SELECT call_id, output_final, cost_basis, cost_usd FROM calls ORDER BY call_id"
        ).fetchall()
    finally:
        con.close()
    return {r[0]: r[1:] for r in rows}


@pytest.mark.parametrize("old", [7, 8])
def test_an_upgrade_says_which_placeholder_calls_keep_their_old_price(
    runner: CliRunner, tmp_path: Path, old: int
) -> None:
    """A new read prices a Claude Code call whose output count is a placeholder at an
    estimate of what it wrote (estimated_output); a store of format 8 or earlier priced it at
    the logged count. What the call wrote (its tool calls' arguments whole) is not in the
    store, so the upgrade cannot price it as a new read does: it says so in one warning, with
    the calls, their dollars and what to do. The calls whose lines said how they stopped are
    final, as a new read has them."""
    logs = tmp_path / "logs"
    logs.mkdir()
    for name in (CC_SAMPLE, OTHER_CC):
        (logs / name).write_bytes((shared_samples() / name).read_bytes())
    fresh, db = tmp_path / "fresh.duckdb", tmp_path / "old.duckdb"
    done = runner.invoke(cli, ["ingest", "--db", str(fresh), str(logs)], catch_exceptions=False)
    assert done.exit_code == 0, done.output
    new = _calls(fresh)
    placeholders = [c for c, (_, basis, _) in new.items() if basis == "estimated_output"]
    assert len(placeholders) > 10 and any(final for final, _, _ in new.values())
    shutil.copyfile(fresh, db)
    con = duckdb.connect(str(db))
    logged = con.execute(
        "SELECT sum(cost_logged_usd) FROM calls WHERE cost_basis = 'estimated_output'"
    ).fetchall()[0][0]
    for statement in _PRICED_AS_LOGGED:
        con.execute(statement)
    for fmt in range(int(SCHEMA_VERSION), old, -1):
        for statement in _GAINED[fmt]:
            con.execute(statement)
    con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", [str(old)])
    con.close()
    upgraded = runner.invoke(cli, ["ingest", "--db", str(db), str(logs)], catch_exceptions=False)
    assert upgraded.exit_code == 0, upgraded.output
    [warned] = [line for line in upgraded.stderr.splitlines() if line.startswith("warning:")]
    assert warned == (
        f"warning: upgraded from store format {old}: {len(placeholders)} Claude Code calls keep "
        f"the price of a logged placeholder output count ({money(logged)}, cost_basis "
        "estimated); a new read prices them at an estimate of what they wrote "
        "(estimated_output), which this store does not hold: to reprice them, read their files "
        "into a new store (`llm-forensics ingest --db NEW.duckdb FOLDER`; for the default "
        "store, move it away and run any command), keeping this one for the files deleted since"
    )
    kept = _calls(db)
    assert {c: final for c, (final, _, _) in kept.items()} == {
        c: final for c, (final, _, _) in new.items()
    }
    left = [c for c, (final, basis, _) in kept.items() if basis == "estimated" and not final]
    assert left == placeholders
    again = runner.invoke(cli, ["ingest", "--db", str(db), str(logs)], catch_exceptions=False)
    assert "warning" not in again.stderr  # (said once: the store is of this format now)
