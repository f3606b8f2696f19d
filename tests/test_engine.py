"""The engine: units from files, parameters by name, named fragments, a step's temporaries."""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pytest

from analyzer.engine.engine import SQL_DIR, Engine, EngineError, fill, statements


@pytest.fixture
def engine() -> Engine:
    return Engine(duckdb.connect(":memory:"))


def test_a_unit_of_several_statements_takes_the_parameters_each_names(engine: Engine) -> None:
    engine.run("CREATE TABLE t (a INTEGER, b VARCHAR)")
    engine.run(
        "INSERT INTO t VALUES ($a, 'x');\nINSERT INTO t VALUES ($a + $b, 'y');\n",
        {"a": 1, "b": 2},
    )
    assert engine.rows("SELECT a, b FROM t ORDER BY a") == [(1, "x"), (3, "y")]
    assert engine.records("SELECT a FROM t WHERE b = $b", {"b": "y"}) == [{"a": 3}]
    assert engine.scalar("SELECT count(*) FROM t") == 2
    assert engine.one("SELECT a FROM t WHERE a > 9") is None
    assert engine.columns("SELECT a, b FROM t") == ["a", "b"]
    assert engine.arrow("SELECT a FROM t ORDER BY a").column("a").to_pylist() == [1, 3]


def test_a_parameter_named_in_a_comment_is_not_given_to_a_statement_without_it(
    engine: Engine,
) -> None:
    """A unit's opening comment names its parameters; the first statement may not use them."""
    unit = "-- $a: the value\nCREATE TABLE t (a INTEGER);\nINSERT INTO t VALUES ($a);\n"
    engine.run(unit, {"a": 7})
    assert engine.scalar("SELECT a FROM t") == 7


def test_a_step_on_a_transaction_an_error_aborted_lets_that_error_through(
    engine: Engine,
) -> None:
    engine.run("BEGIN")
    with pytest.raises(duckdb.ConversionException), engine.step():
        engine.run("CREATE TEMP TABLE lf_x AS SELECT 1 AS a")
        engine.run("SELECT 'x'::INTEGER")
    engine.run("ROLLBACK")
    assert engine.temporaries() == set()


def test_a_unit_is_read_from_the_package(engine: Engine) -> None:
    units = sorted(p.relative_to(SQL_DIR).as_posix() for p in SQL_DIR.rglob("*.sql"))
    assert "schema.sql" in units
    engine.run("schema.sql")
    assert engine.scalar("SELECT count(*) FROM calls") == 0
    with pytest.raises(EngineError, match=r"no SQL unit nowhere\.sql"):
        engine.run("nowhere.sql")


def test_named_fragments_must_all_be_given_and_used() -> None:
    assert fill("SELECT {{col}} FROM {{t}}", {"col": "a", "t": "x"}) == "SELECT a FROM x"
    with pytest.raises(EngineError, match="given no text"):
        fill("SELECT {{col}} FROM t", {})
    with pytest.raises(EngineError, match="not used"):
        fill("SELECT 1", {"col": "a"})
    # a unit's comment may name its slots: they are not filled, nor required
    assert fill("-- takes {{col}} and {{other}}\nSELECT {{col}}", {"col": "a"}) == (
        "-- takes {{col}} and {{other}}\nSELECT a"
    )


def test_statements_split_only_where_a_semicolon_ends_a_line() -> None:
    text = "-- a note\nSELECT ';' AS s;\n\n-- only a comment;\nSELECT 2 -- trailing;\n"
    assert statements(text) == ("-- a note\nSELECT ';' AS s", "SELECT 2 -- trailing")


def test_a_step_drops_what_it_created_however_it_ends(engine: Engine) -> None:
    engine.run("CREATE TEMP TABLE kept AS SELECT 1 AS a")
    with engine.step():
        engine.run("CREATE TEMP TABLE lf_x AS SELECT 1 AS a")
        engine.run("CREATE TEMP VIEW lf_v AS SELECT * FROM lf_x")
        engine.register("lf_arrow", pa.table({"a": [1, 2]}))
        assert engine.scalar("SELECT count(*) FROM lf_arrow") == 2
    assert engine.temporaries() == {("TABLE", "kept")}
    with pytest.raises(duckdb.CatalogException):
        engine.scalar("SELECT count(*) FROM lf_arrow")
    with pytest.raises(RuntimeError), engine.step():
        engine.run("CREATE TEMP TABLE lf_y AS SELECT 1 AS a")
        raise RuntimeError("a step that fails")
    assert engine.temporaries() == {("TABLE", "kept")}


def test_a_query_given_as_text_is_run_as_it_is_for_the_detectors(engine: Engine) -> None:
    """``table`` (the detectors' seam): one query, not split at a semicolon that ends a line
    (in a comment of a user's detector), no slots filled, only the parameters it names."""
    sql = "SELECT $a AS a, '{{x}}' AS b -- a note;\nWHERE $a > 0"
    assert engine.table(sql, {"a": 1, "unused": 2}) == (["a", "b"], [(1, "{{x}}")])
    assert engine.table("SELECT 1 AS a WHERE false") == (["a"], [])
    with pytest.raises(duckdb.Error) as failed:
        engine.table("SELECT nothing_here")
    said = engine.failure(failed.value)
    assert said is not None and said.startswith("Binder Error")
    assert engine.failure(ValueError("not DuckDB's")) is None


def test_a_step_begun_lasts_until_it_is_ended(engine: Engine) -> None:
    """``begin``: a step that outlives the call that began it (a guard replay's) drops what it
    created when ended, once, and leaves what a step nested in it dropped dropped."""
    engine.run("CREATE TEMP TABLE kept AS SELECT 1 AS a")
    began = engine.begin()
    engine.run("CREATE TEMP TABLE lf_x AS SELECT 1 AS a")
    with engine.step():
        engine.run("CREATE TEMP TABLE lf_y AS SELECT 1 AS a")
        engine.register("lf_arrow", pa.table({"a": [1]}))
    assert engine.temporaries() == {("TABLE", "kept"), ("TABLE", "lf_x")}
    engine.register("lf_arrow", pa.table({"a": [1]}))
    began.end()
    began.end()
    assert engine.temporaries() == {("TABLE", "kept")}
    with pytest.raises(duckdb.CatalogException):
        engine.scalar("SELECT count(*) FROM lf_arrow")
