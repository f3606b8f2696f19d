"""Spark, the second engine: the translation of every detector (sqlglot, no Spark needed), the
Parquet export it reads (partitioned by day, re-exported by the day), and the golden cases of
every detector run on Spark in local mode, which must find what DuckDB finds.

Spark needs pyspark (the [spark] extra, in the test extra) and a Java runtime. Without them
the Spark tests are skipped, except under CI (``CI`` set), where they fail: CI installs both.
One Spark session serves the whole module.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from analyzer.cli.main import cli
from analyzer.detect import spark_engine
from analyzer.detect.detectors import Detector, bind_all, detect, discover, load_incidents, record
from analyzer.detect.spark_sql import macros, to_spark
from analyzer.engine.export_layout import read_manifest
from analyzer.engine.store import SCHEMA_VERSION, open_store
from analyzer.errors import ForensicsError
from analyzer.model.incident import Incident
from analyzer.views.export import export_parquet
from tests.helpers import SampleStores, fill_calls, fill_messages, fill_runs, insert
from tests.test_detectors import DETECTORS, case_files, check_expected, load_case

pytestmark = pytest.mark.slow  # minutes of Spark sessions: CI runs them, a plain pytest does not


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    reason = spark_engine.why_not()
    if reason:
        if os.environ.get("CI"):
            pytest.fail(f"CI runs the Spark tests: {reason}")
        pytest.skip(reason)
    with spark_engine.session(partitions=2) as running:
        yield running


@pytest.fixture(scope="module")
def sample_db(tmp_path_factory: pytest.TempPathFactory, sample_stores: SampleStores) -> Path:
    """``audit --db`` of the sample (the session's store, copied), shared by this module."""
    return sample_stores.audited(tmp_path_factory.mktemp("spark") / "s.duckdb")


# -- the translation ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(DETECTORS))
def test_every_detector_translates(name: str) -> None:
    det = DETECTORS[name]
    spark_sql = to_spark(det.sql, det.path)
    assert "lf_" not in spark_sql.lower(), "the shared macros are expanded"
    assert not re.search(r"\$[A-Za-z_]", spark_sql), "parameters are Spark's :name markers"
    for param in det.placeholders:
        assert f":{param}" in spark_sql


def test_the_shared_macros_are_expanded_with_their_arguments() -> None:
    assert set(macros()) == {
        "lf_finish_reason",
        "lf_response_kind",
        "lf_model_key",
        "lf_output_discarded",
    }
    got = to_spark("SELECT lf_finish_reason(finish_reason_raw, cancelled) AS f FROM calls")
    assert "max_tokens" in got and "finish_reason_raw" in got and "cancelled" in got
    assert " raw" not in got, "the macro's parameter names are replaced by the arguments"


def test_ordered_aggregates_keep_their_order_and_filter() -> None:
    got = to_spark("SELECT list(call_id ORDER BY seq) FILTER (WHERE stalled) AS l FROM t")
    assert got == (
        "SELECT TRANSFORM(ARRAY_SORT(COLLECT_LIST(NAMED_STRUCT('k0', seq, 'v', call_id)) "
        "FILTER(WHERE stalled)), e -> e.v) AS l FROM t"
    )
    got = to_spark("SELECT string_agg(DISTINCT b, ',' ORDER BY b) AS s FROM t")
    assert "ARRAY_SORT(COLLECT_SET(b))" in got and "LISTAGG" not in got


def test_times_indexes_and_json_keep_duckdbs_meaning() -> None:
    assert "UNIX_MICROS(CAST(ts AS TIMESTAMP)) / 1000000.0" in to_spark("SELECT epoch(ts) FROM t")
    assert "ELEMENT_AT(ids, :k)" in to_spark("SELECT ids[$k] FROM t")
    assert "ids[1]" in to_spark("SELECT ids[2] FROM t")  # sqlglot shifts a literal to 0-based
    got = to_spark("SELECT json_object('a', 1, 'l', list(json_object('b', x))) FROM t")
    assert got.count("TO_JSON") == 1 and "NAMED_STRUCT('b', x)" in got
    assert "'ignoreNullFields', 'false'" in got
    assert "FORMAT_NUMBER(n, 0)" in to_spark("SELECT format('{:,}', n) FROM t")
    assert "FORMAT_NUMBER(x, 2)" in to_spark("SELECT format('{:,.2f}', x) FROM t")


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT format('{:x}', n) FROM t",
        "SELECT list(call_id ORDER BY seq DESC) FROM t",
        "SELECT string_agg(x, ',') FROM t",
    ],
)
def test_what_has_no_rule_is_an_error_naming_the_file(sql: str, tmp_path: Path) -> None:
    with pytest.raises(ForensicsError) as err:
        to_spark(sql, tmp_path / "mine.sql")
    assert str(err.value).startswith(f"{tmp_path / 'mine.sql'}: does not translate to Spark SQL")


# -- the export --------------------------------------------------------------------------------


def test_export_is_partitioned_by_day_and_accounts_for_every_row(
    sample_db: Path, tmp_path: Path
) -> None:
    out = tmp_path / "lake"
    result = CliRunner().invoke(cli, ["export", "--db", str(sample_db), "--parquet", str(out)])
    assert result.exit_code == 0, result.output
    manifest = read_manifest(out)
    calls = manifest["tables"]["calls"]
    assert calls["partitioned_by"] == "day" and manifest["schema_version"] == SCHEMA_VERSION
    days = sorted(p.name for p in (out / "calls").iterdir())
    assert days == [f"day={d}" for d in calls["days"]] and len(days) > 20
    con = duckdb.connect()
    for table in ("calls", "messages"):
        glob = str(out / table / "*" / "*.parquet")
        read = con.execute(
            "SELECT count(*), count(DISTINCT day) FROM read_parquet(?, hive_partitioning = true)",
            [glob],
        ).fetchone()
        entry = manifest["tables"][table]
        assert read == (entry["rows"], len(entry["days"]))
    with open_store(str(sample_db), read_only=True) as store:
        live, cost = store.con.execute("SELECT count(*), sum(cost_usd) FROM live_calls").fetchone()  # type: ignore[misc]
        assert calls["rows"] == store.scalar("SELECT count(*) FROM calls")
    accounting = manifest["accounting"]
    assert (accounting["live_calls"], Decimal(accounting["cost_usd"])) == (live, cost)
    assert accounting["rows_read"] == (
        accounting["rows_loaded"]
        + accounting["rows_rejected"]
        + accounting["rows_duplicate"]
        + accounting["rows_skipped"]
    )
    for table in ("sources", "rejects", "incidents"):
        assert pq.read_table(out / f"{table}.parquet").num_rows == manifest["tables"][table]["rows"]


def _day(store: Any, day: int, n: int, prefix: str) -> None:
    start = datetime(2025, 12, day, 9)
    insert(
        store,
        "calls",
        fill_calls(
            [
                {
                    "call_id": f"{prefix}{i}",
                    "stream_key": prefix,
                    "input_tokens": 100,
                    "output_tokens": 5,
                    "ts": (start + timedelta(seconds=10 * i)).isoformat(sep=" "),
                }
                for i in range(n)
            ]
        ),
    )


def test_a_re_export_writes_only_the_days_that_are_new_or_changed(tmp_path: Path) -> None:
    out = tmp_path / "lake"
    with open_store(str(tmp_path / "s.duckdb")) as store:
        _day(store, 1, 3, "a")
        _day(store, 2, 2, "b")
        export_parquet(store, out)
        first = read_manifest(out)["tables"]["calls"]
        assert first["written"] == ["2025-12-01", "2025-12-02"]
        kept = {p: p.stat().st_mtime_ns for p in (out / "calls").rglob("*.parquet")}

        export_parquet(store, out)  # nothing new: nothing written
        assert read_manifest(out)["tables"]["calls"]["written"] == []

        _day(store, 3, 4, "c")  # a new day
        export_parquet(store, out)
        again = read_manifest(out)["tables"]["calls"]
        assert again["written"] == ["2025-12-03"] and again["rows"] == 9
        assert {p: p.stat().st_mtime_ns for p in kept} == kept, "old days are not rewritten"

        store.con.execute("UPDATE calls SET output_tokens = 6 WHERE call_id = 'b0'")  # a change
        export_parquet(store, out)
        assert read_manifest(out)["tables"]["calls"]["written"] == ["2025-12-02"]

        store.con.execute("DELETE FROM calls WHERE stream_key = 'a'")  # a day gone
        export_parquet(store, out)
        assert sorted(read_manifest(out)["tables"]["calls"]["days"]) == ["2025-12-02", "2025-12-03"]
        assert not (out / "calls" / "day=2025-12-01").exists()
        rows = (
            duckdb.connect()
            .execute(
                f"SELECT count(*), sum(output_tokens) FROM '{out / 'calls' / '*' / '*.parquet'}'"
            )
            .fetchone()
        )
        assert rows == (6, 31)


def test_a_windowed_re_export_leaves_the_other_days(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    with open_store(str(db)) as store:
        _day(store, 1, 3, "a")
        _day(store, 2, 2, "b")
    out = tmp_path / "lake"
    runner = CliRunner()
    assert runner.invoke(cli, ["export", "--db", str(db), "--parquet", str(out)]).exit_code == 0
    result = runner.invoke(
        cli, ["export", "--db", str(db), "--parquet", str(out), "--since", "2025-12-02"]
    )
    assert result.exit_code == 0, result.output
    manifest = read_manifest(out)
    assert manifest["tables"]["calls"]["written"] == []
    assert sorted(manifest["tables"]["calls"]["days"]) == ["2025-12-01", "2025-12-02"]
    assert manifest["window"]


def test_an_empty_store_exports_tables_a_reader_can_open(tmp_path: Path) -> None:
    with open_store(str(tmp_path / "s.duckdb")) as store:
        export_parquet(store, tmp_path / "lake")
        columns = len(store.con.execute("SELECT * FROM calls LIMIT 0").description)
    table = pq.read_table(tmp_path / "lake" / "calls" / "day=unknown" / "data_0.parquet")
    assert table.num_rows == 0 and table.num_columns == columns


# -- the command line, without Spark -----------------------------------------------------------


def test_without_pyspark_the_engine_is_a_usage_error_naming_the_extra(
    monkeypatch: pytest.MonkeyPatch, sample_db: Path, tmp_path: Path
) -> None:
    monkeypatch.setattr(spark_engine, "available", lambda: False)
    result = CliRunner().invoke(
        cli, ["detect", "--db", str(sample_db), "--engine", "spark", "--parquet", str(tmp_path)]
    )
    assert result.exit_code == 2
    assert "pip install 'llm-forensics[spark]'" in result.stderr


def test_without_the_extra_installed_at_all_the_error_is_the_same(
    sample_db: Path, tmp_path: Path
) -> None:
    # pyspark and sqlglot unimportable, as after `pip install .` alone.
    script = (
        "import sys; sys.modules['pyspark'] = None; sys.modules['sqlglot'] = None; "
        "from analyzer.cli.main import main; sys.argv = ['llm-forensics'] + sys.argv[1:]; main()"
    )
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            script,
            "detect",
            "--db",
            str(sample_db),
            "--engine",
            "spark",
            "--parquet",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "--engine spark needs pyspark: pip install 'llm-forensics[spark]'" in done.stderr


@pytest.mark.parametrize(
    "args, message",
    [
        (["--engine", "spark"], "give --parquet DIR"),
        (["--parquet", "lake"], "--parquet and --master go with --engine spark"),
    ],
)
def test_engine_options_that_do_not_go_together(
    sample_db: Path, args: list[str], message: str
) -> None:
    result = CliRunner().invoke(cli, ["detect", "--db", str(sample_db), *args])
    assert result.exit_code == 2 and message in result.stderr, result.output


def test_a_folder_that_is_no_export_is_named(sample_db: Path, tmp_path: Path) -> None:
    if not spark_engine.available():
        pytest.skip("the check runs after the extra's")
    result = CliRunner().invoke(
        cli, ["detect", "--db", str(sample_db), "--engine", "spark", "--parquet", str(tmp_path)]
    )
    assert result.exit_code == 3
    assert result.stderr.strip() == (
        f"Error: {tmp_path}: no export here (no manifest.json): write one with "
        "`llm-forensics export --parquet DIR`"
    )


def test_without_java_spark_says_what_to_install(sample_db: Path, tmp_path: Path) -> None:
    if not spark_engine.available():
        pytest.skip("pyspark is not installed")
    export_parquet_cli(sample_db, tmp_path / "lake")
    env = {**os.environ, "JAVA_HOME": str(tmp_path / "no-java"), "LLM_FORENSICS_DB": ""}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "analyzer",
            "detect",
            "--engine",
            "spark",
            "--parquet",
            str(tmp_path / "lake"),
            "--db",
            str(sample_db),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 3, done.stderr
    assert "Spark could not start: it needs a Java runtime, 17 or later" in done.stderr


def export_parquet_cli(db: Path, out: Path) -> None:
    result = CliRunner().invoke(cli, ["export", "--db", str(db), "--parquet", str(out)])
    assert result.exit_code == 0, result.output


# -- the golden cases, on Spark ----------------------------------------------------------------


def _on_both(
    spark: Any, det: Detector, case: dict[str, Any], folder: Path
) -> tuple[list[Incident], list[Incident], dict[str, set[str]], dict[str, set[str]]]:
    """The case's incidents found by DuckDB and by Spark (each with the calls of its waste)."""
    params = {det.name: case["params"]} if case.get("params") else {}
    found: list[list[Incident]] = []
    wasted: list[dict[str, set[str]]] = []
    with open_store(":memory:") as store:
        insert(store, "calls", fill_calls(case["given"].get("calls", [])))
        insert(store, "messages", fill_messages(case["given"].get("messages", [])))
        insert(store, "runs", fill_runs(case["given"].get("runs", [])))
        export_parquet(store, folder)
        selection = bind_all([det], params)
        for engine in ("duckdb", "spark"):
            if engine == "duckdb":
                detect(store, selection)
            else:
                spark_engine.register(spark, folder)
                rows = spark_engine.runner(spark)(det, selection.bound[0][1])
                with store.transaction():
                    record(store, selection, {det.name: rows})
            found.append(sorted(load_incidents(store), key=lambda i: str(i.first_call_id)))
            calls: dict[str, set[str]] = {}
            for incident, call in store.con.execute(
                "SELECT incident_id, call_id FROM incident_calls"
            ).fetchall():
                calls.setdefault(incident, set()).add(call)
            wasted.append(calls)
    return found[0], found[1], wasted[0], wasted[1]


@pytest.mark.parametrize("path", case_files(), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_golden_case_on_spark(spark: Any, path: Path, tmp_path: Path) -> None:
    case = load_case(path)
    duck, on_spark, duck_calls, spark_calls = _on_both(
        spark, DETECTORS[path.parent.name], case, tmp_path / "lake"
    )
    check_expected(case, on_spark)
    assert [_key(i) for i in on_spark] == [_key(i) for i in duck]
    assert spark_calls == duck_calls, "the same calls make up each incident's waste"


def _key(i: Incident) -> tuple[Any, ...]:
    """What must be the same on both engines: the incident, its calls, counts, and wasted
    dollars to the cent."""
    return (
        i.incident_id,
        i.severity,
        i.first_call_id,
        i.last_call_id,
        i.n_calls,
        i.wasted_tokens,
        round(i.wasted_usd, 2),
        i.cost_basis,
        i.start_ts,
        i.end_ts,
        i.summary,
    )


def test_detect_on_spark_writes_the_same_incidents_into_the_store(
    spark: Any, sample_db: Path, tmp_path: Path
) -> None:
    db = tmp_path / "copy.duckdb"
    shutil.copy(sample_db, db)
    lake = tmp_path / "lake"
    export_parquet_cli(db, lake)
    runner = CliRunner()
    duck = runner.invoke(cli, ["detect", "--db", str(db), "--json"])
    assert duck.exit_code == 0, duck.output
    result = runner.invoke(
        cli, ["detect", "--db", str(db), "--engine", "spark", "--parquet", str(lake), "--json"]
    )
    assert result.exit_code == 0, result.output
    on_duck, on_spark = json.loads(duck.stdout), json.loads(result.stdout)
    assert len(on_spark) == 10

    def key(i: dict[str, Any]) -> tuple[Any, ...]:
        return (
            i["number"],
            i["incident_id"],
            i["n_calls"],
            round(i["wasted_usd"], 2),
            i["first_call_id"],
            i["last_call_id"],
            i["summary"],
        )

    assert [key(i) for i in on_spark] == [key(i) for i in on_duck]
    beside = pq.read_table(lake / "detected" / "incidents.parquet").to_pylist()
    assert sorted(r["incident_id"] for r in beside) == sorted(i["incident_id"] for i in on_duck)

    # A window: both engines see the same calls.
    args = ["--since", "2025-12-13", "--until", "2025-12-14", "--json"]
    duck = runner.invoke(cli, ["detect", "--db", str(db), *args])
    spark_run = runner.invoke(
        cli, ["detect", "--db", str(db), "--engine", "spark", "--parquet", str(lake), *args]
    )
    assert spark_run.exit_code == 0, spark_run.output
    windowed = [key(i) for i in json.loads(spark_run.stdout)]
    assert windowed == [key(i) for i in json.loads(duck.stdout)] and len(windowed) == 2


def test_an_export_of_other_calls_is_refused(spark: Any, sample_db: Path, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    with open_store(str(tmp_path / "other.duckdb")) as store:
        _day(store, 1, 3, "a")
        export_parquet(store, lake)
    result = CliRunner().invoke(
        cli, ["detect", "--db", str(sample_db), "--engine", "spark", "--parquet", str(lake)]
    )
    assert result.exit_code == 3
    assert "the export holds 3 calls ($0.00), the store 6,018" in result.stderr
    assert "export the store again" in result.stderr


def test_without_a_store_the_incidents_are_beside_the_export(
    spark: Any, sample_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lake = tmp_path / "lake"
    export_parquet_cli(sample_db, lake)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LLM_FORENSICS_DB", raising=False)
    result = CliRunner().invoke(
        cli,
        ["detect", "--engine", "spark", "--parquet", "lake", "--only", "constant_input_low_output"],
    )
    assert result.exit_code == 0, result.output
    assert "the incidents are in lake/detected only" in result.stderr
    assert "22 calls re-sent the same 56,065-token prompt" in result.stdout
    rows = pq.read_table(lake / "detected" / "incidents.parquet").to_pylist()
    assert sorted(r["n_calls"] for r in rows) == [11, 22]
    assert all(len(r["wasted_calls"]) == r["n_calls"] for r in rows)


def test_every_detector_discovered_has_golden_cases_on_spark() -> None:
    assert {p.parent.name for p in case_files()} == {d.name for d in discover()}


def test_without_a_store_spark_defers_the_general_detector_as_duckdb_does(
    spark: Any, sample_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sample's seeded alternating loop is stale to no_progress too: run alone, no_progress
    finds it; beside alternating_tool_thinking, which tells it, it is dropped (on Spark with no
    store, as the store's recording drops it)."""
    lake = tmp_path / "lake"
    export_parquet_cli(sample_db, lake)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LLM_FORENSICS_DB", raising=False)

    def found(*only: str) -> list[str]:
        args = [a for name in only for a in ("--only", name)]
        result = CliRunner().invoke(
            cli, ["detect", "--engine", "spark", "--parquet", "lake", *args]
        )
        assert result.exit_code == 0, result.output
        rows = pq.read_table(lake / "detected" / "incidents.parquet").to_pylist()
        return sorted(r["detector"] for r in rows)

    assert found("no_progress") == ["no_progress"]
    assert found("no_progress", "alternating_tool_thinking") == ["alternating_tool_thinking"]
