"""Store upgrades: an ordered list of migrations, each a SQL unit, applied in order when a
store of an older format is opened for writing."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from analyzer.engine.store import MIGRATIONS, SCHEMA_VERSION, migrations_from, open_store
from analyzer.errors import ForensicsError

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
}


def test_the_migrations_are_consecutive_and_end_at_this_format() -> None:
    steps = [m.to for m in MIGRATIONS]
    assert steps == list(range(steps[0], steps[0] + len(steps)))
    assert str(steps[-1]) == SCHEMA_VERSION
    assert [m.to for m in migrations_from("6")] == [7, 8, 9, 10, 11]
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


@pytest.mark.parametrize("old", [6, 7, 8, 9, 10])
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
