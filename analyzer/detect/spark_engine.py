"""Spark, the second engine: the same detectors over a Parquet export of the store
(``llm-forensics export --parquet DIR``), on a Spark session (``local[*]``, or a cluster given
with ``--master``).

Each detector's SQL is translated by ``analyzer.detect.spark_sql`` (sqlglot), its parameters
bound as Spark's named markers, and its rows returned in the shape DuckDB's runner gives them,
so that ``analyzer.detect.detectors`` records them the same way. ``pyspark`` is an optional extra
(``pip install 'llm-forensics[spark]'``, with sqlglot, imported only when Spark runs) and a
Java runtime (17 or later) must be installed; without either, the error says which is missing.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from analyzer.detect.detectors import (
    Detector,
    Selection,
    Table,
    deferred,
    found_spans,
    incident_id,
    load_incidents,
    record,
    run_detector,
    stored_spans,
    without,
)
from analyzer.engine.engine import SQL_DIR, Params
from analyzer.engine.export_layout import (
    PARTITIONED,
    file_sha256,
    read_manifest,
    share_batches,
)
from analyzer.engine.files import atomic_file
from analyzer.engine.store import SCHEMA_VERSION, Store
from analyzer.errors import ForensicsError
from analyzer.model.incident import COLUMNS, OUTPUT_COLUMNS, Incident
from analyzer.model.timewindow import Window

EXTRA = "pip install 'llm-forensics[spark]'"

# lf_found (detectors.FOUND_COLUMNS) as Spark declares it
FOUND_SCHEMA = (
    "incident_id string, general boolean, severity string, first_call_id string, "
    "last_call_id string"
)

# The view every detector reads, as the store defines it (analyzer/sql/schema.sql).
_LIVE = re.compile(r"CREATE OR REPLACE VIEW live_calls AS (SELECT [^;]+);")
SCHEMA = SQL_DIR / "schema.sql"
DETECTED = "detected"


class MissingSpark(ForensicsError):
    """pyspark is not installed: a usage error naming the extra."""

    exit_code = 2


def available() -> bool:
    """Whether the [spark] extra is installed (pyspark, and sqlglot to translate)."""
    try:
        import pyspark  # noqa: F401
        import sqlglot  # noqa: F401
    except ImportError:
        return False
    return True


def why_not() -> str | None:
    """Why Spark cannot run here: the extra not installed, or no Java runtime (None if it can)."""
    if not available():
        return f"pyspark is not installed ({EXTRA})"
    java_home = os.environ.get("JAVA_HOME")
    if not (java_home and Path(java_home, "bin", "java").exists()) and not shutil.which("java"):
        return "no Java runtime (apt-get install openjdk-17-jre-headless)"
    return None


def require() -> None:
    if not available():
        raise MissingSpark(f"--engine spark needs pyspark: {EXTRA}")


def export_checked(folder: Path) -> dict[str, Any]:
    """The manifest of the export in ``folder``, which this version must be able to read (a
    shared history's folder, ``llm-forensics share DIR``: its batches, ``shared_checked``)."""
    manifest = read_manifest(folder)
    if not manifest and share_batches(folder):
        return shared_checked(folder)
    if not manifest:
        raise ForensicsError(
            "no export here (no manifest.json): write one with "
            "`llm-forensics export --parquet DIR`",
            path=folder,
        )
    version = manifest.get("schema_version")
    if version != SCHEMA_VERSION:
        raise ForensicsError(
            f"the export has store format {version}, this version reads {SCHEMA_VERSION}: "
            "export it again with this version",
            path=folder / "manifest.json",
        )
    for table in PARTITIONED:
        if manifest["tables"].get(table, {}).get("partitioned_by") != "day":
            raise ForensicsError(
                f"the export's {table} is not partitioned by day (an export by an older "
                "version): export it again",
                path=folder / "manifest.json",
            )
    return manifest


# A shared history's tables, as Spark reads them (``llm-forensics share DIR``).
SHARED = ("calls", "messages", "runs")
# (the first store format a share was written in)
SHARED_SINCE = 12


def shared_checked(folder: Path) -> dict[str, Any]:
    """A shared history's batches in ``folder`` (every machine's), each file's bytes those its
    manifest gives the SHA-256 of, as ``{"batches": [{table: path}, ...]}`` in the order
    ``ingest DIR`` reads them."""
    batches = []
    for batch, manifest in share_batches(folder):
        version = str(manifest.get("schema_version", ""))
        if not version.isdigit() or not SHARED_SINCE <= int(version) <= int(SCHEMA_VERSION):
            raise ForensicsError(
                f"shared in store format {version or '?'}, this version reads {SHARED_SINCE} "
                f"to {SCHEMA_VERSION}",
                path=batch / "manifest.json",
            )
        paths = {}
        for table in SHARED:
            entry = manifest["tables"].get(table) or {}
            path = batch / str(entry.get("path", f"{table}.parquet"))
            try:
                digest = file_sha256(path)
            except OSError as exc:
                raise ForensicsError(f"cannot read it ({exc.strerror or exc})", path=path) from exc
            if digest != entry.get("sha256"):
                raise ForensicsError(
                    "damaged: its SHA-256 is not the one manifest.json gives", path=path
                )
            paths[table] = path.resolve()
        batches.append(paths)
    return {"batches": batches}


def _shared_frames(spark: Any, manifest: dict[str, Any]) -> dict[str, Any]:
    """A shared history's tables as Spark frames, each row once: the union of every batch's,
    a call the first time its id is met (batches in the order ``ingest DIR`` reads them; in a
    batch, in the order its machine stored them), a message or run once whatever file of
    whichever machine it came from (its ``source_id`` the least of them)."""
    from functools import reduce

    from pyspark.sql import Window as W
    from pyspark.sql import functions as F

    frames: dict[str, Any] = {}
    for table in SHARED:
        parts = [
            spark.read.parquet(str(b[table])).withColumn("lf_batch", F.lit(i))
            for i, b in enumerate(manifest["batches"])
        ]
        union = reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), parts)
        if table == "calls":
            order = W.partitionBy("call_id").orderBy(
                "lf_batch", "source_id", F.col("line").asc_nulls_last()
            )
            union = union.withColumn("lf_n", F.row_number().over(order)).where("lf_n = 1")
            frames[table] = union.drop("lf_n", "lf_batch")
        else:
            keys = [c for c in union.columns if c not in ("source_id", "lf_batch")]
            frames[table] = union.groupBy(*keys).agg(F.min("source_id").alias("source_id"))
    return frames


LOG4J = SQL_DIR / "spark-log4j2.properties"


@contextmanager
def session(
    master: str | None = None, partitions: int | None = None, app: str = "llm-forensics"
) -> Iterator[Any]:
    """A Spark session: ``local[*]`` unless ``master`` names a cluster. Times are read and
    shown in UTC (the store's), and ANSI mode is off: as in DuckDB, an index past the end of a
    list is NULL, not an error. A session already running in this process is used as it is,
    and left running."""
    require()
    import warnings

    warnings.filterwarnings("ignore", category=FutureWarning, module="pyspark")
    from pyspark.sql import SparkSession

    running = SparkSession.getActiveSession()
    if running is not None:
        yield running
        return
    master = master or "local[*]"
    builder = (
        SparkSession.builder.master(master)
        .appName(app)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.ansi.enabled", "false")
        .config("spark.sql.sources.partitionColumnTypeInference.enabled", "false")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={LOG4J.as_uri()}")
    )
    if master.startswith("local"):
        # One machine: no network, few shuffle partitions (Spark's 200 suit a cluster).
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        builder = (
            builder.config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.sql.shuffle.partitions", str(partitions or 8))
            .config("spark.driver.memory", os.environ.get("LF_SPARK_MEMORY", "2g"))
        )
    elif partitions:
        builder = builder.config("spark.sql.shuffle.partitions", str(partitions))
    try:
        spark = builder.getOrCreate()
    except Exception as exc:  # pyspark raises its own errors, or RuntimeError without Java
        text = str(exc)
        if "JAVA" in text.upper():
            raise ForensicsError(
                "Spark could not start: it needs a Java runtime, 17 or later (Debian: "
                "apt-get install openjdk-17-jre-headless; or set JAVA_HOME)"
            ) from exc
        raise ForensicsError(f"Spark could not start: {spark_error(exc)}") from exc
    spark.sparkContext.setLogLevel("ERROR")
    try:
        yield spark
    finally:
        spark.stop()


def register(spark: Any, folder: Path, window: Window | None = None) -> dict[str, Any]:
    """The export's ``calls`` and ``messages`` (and the view ``live_calls``) as Spark views,
    limited to ``window`` as the store would be, and its ``runs``; returns the export's
    manifest."""
    from analyzer.detect.spark_sql import to_spark  # the [spark] extra's sqlglot

    manifest = export_checked(folder)
    live = _LIVE.search(SCHEMA.read_text(encoding="utf-8"))
    if live is None:  # pragma: no cover - the schema defines it
        raise ForensicsError("schema.sql defines no live_calls view", path=SCHEMA)
    cond = window.predicate() if window else "true"
    if "batches" in manifest:  # a shared history: every machine's batches, each row once
        frames = _shared_frames(spark, manifest)
        for table in PARTITIONED:
            frames[table].createOrReplaceTempView(f"{table}_all")
            spark.sql(to_spark(f"SELECT * FROM {table}_all WHERE {cond}")).createOrReplaceTempView(
                table
            )
        frames["runs"].createOrReplaceTempView("runs")
        spark.sql(to_spark(live.group(1), SCHEMA)).createOrReplaceTempView("live_calls")
        return manifest
    for table in PARTITIONED:
        # Absolute: Spark's JVM does not follow this process's working folder.
        path = (folder / manifest["tables"][table]["path"]).resolve()
        try:
            frame = spark.read.option("basePath", str(path)).parquet(str(path)).drop("day")
            frame.createOrReplaceTempView(f"{table}_all")
            spark.sql(to_spark(f"SELECT * FROM {table}_all WHERE {cond}")).createOrReplaceTempView(
                table
            )
        except ForensicsError:
            raise
        except Exception as exc:
            raise ForensicsError(f"Spark cannot read it: {spark_error(exc)}", path=path) from exc
    spark.sql(to_spark(live.group(1), SCHEMA)).createOrReplaceTempView("live_calls")
    # How each run ended (one file; not windowed: a verdict is of the whole run).
    path = (folder / manifest["tables"]["runs"]["path"]).resolve()
    try:
        spark.read.parquet(str(path)).createOrReplaceTempView("runs")
    except Exception as exc:
        raise ForensicsError(f"Spark cannot read it: {spark_error(exc)}", path=path) from exc
    return manifest


_TRANSLATED: dict[str, str] = {}


def translated(sql: str) -> str:
    """A query in DuckDB's dialect as Spark SQL (each text translated once per process)."""
    from analyzer.detect.spark_sql import to_spark  # the [spark] extra's sqlglot

    if sql not in _TRANSLATED:
        _TRANSLATED[sql] = to_spark(sql)
    return _TRANSLATED[sql]


class SparkEngine:
    """Spark as an engine the detectors run on (``analyzer.detect.detectors.DetectorEngine``):
    a query in DuckDB's dialect is translated, its ``$name`` parameters bound as Spark's named
    markers, its rows returned as DuckDB's engine returns them."""

    name = "Spark"

    def __init__(self, spark: Any) -> None:
        self.spark = spark

    def table(self, sql: str, params: Params = None) -> Table:
        args = dict(params) if isinstance(params, Mapping) else list(params or [])
        frame = self.spark.sql(translated(sql), args=args)
        return list(frame.columns), [tuple(r) for r in frame.collect()]

    def failure(self, exc: Exception) -> str | None:
        """Spark's analysis and runtime errors: each is a query's failure."""
        return spark_error(exc)


def runner(spark: Any) -> Callable[[Detector, dict[str, Any]], list[dict[str, Any]]]:
    """A detector's rows, run on ``spark`` (as ``run_detector`` runs it on DuckDB)."""
    engine = SparkEngine(spark)
    return lambda det, params: run_detector(engine, det, params)


def spark_error(exc: BaseException) -> str:
    """The first line of what Spark said (a Java exception's own message, not py4j's
    "An error occurred while calling ...")."""
    java = getattr(exc, "java_exception", None)
    text = str(java.getMessage()) if java is not None else str(exc)
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


def write_detected(folder: Path, found: dict[str, list[dict[str, Any]]]) -> Path:
    """The incidents Spark found, as ``folder/detected/incidents.parquet`` beside the export
    (one row per incident; ``wasted_calls`` lists the calls its waste is made of, when the
    detector names them)."""
    schema = pa.schema(
        [
            ("incident_id", pa.string()),
            ("detector", pa.string()),
            ("severity", pa.string()),
            ("stream_key", pa.string()),
            ("session_id", pa.string()),
            ("start_ts", pa.timestamp("us")),
            ("end_ts", pa.timestamp("us")),
            ("n_calls", pa.int64()),
            ("first_call_id", pa.string()),
            ("last_call_id", pa.string()),
            ("wasted_usd", pa.decimal128(18, 10)),
            ("wasted_tokens", pa.int64()),
            ("cost_basis", pa.string()),
            ("summary", pa.string()),
            ("evidence", pa.string()),
            ("wasted_calls", pa.list_(pa.string())),
        ]
    )
    records = []
    for name, rows in found.items():
        for rec in rows:
            row = {c: rec.get(c) for c in OUTPUT_COLUMNS}
            row.update(
                incident_id=incident_id(name, rec),
                detector=name,
                severity=rec["severity"],
                wasted_calls=rec.get("wasted_calls"),
            )
            records.append(row)
    out = folder / DETECTED / "incidents.parquet"
    with atomic_file(out) as tmp:
        pq.write_table(pa.Table.from_pylist(records, schema=schema), tmp)
    return out


def detect_on_spark(
    folder: Path,
    selection: Selection,
    master: str | None = None,
    window: Window | None = None,
    store: Store | None = None,
    said: Callable[[str], None] = lambda _: None,
) -> list[Incident]:
    """Run the selected detectors on Spark over the export in ``folder``; write what they find
    beside it (``detected/incidents.parquet``) and, given the ``store`` the export was made
    from, into the store as ``detect`` does. Returns the incidents, most wasted first."""
    export_checked(folder)
    with session(master) as spark:
        said(f"Spark {spark.version} on {spark.sparkContext.master}")
        register(spark, folder, window)
        if store is not None:
            _same_calls(spark, store, folder)
        engine = SparkEngine(spark)
        found: dict[str, list[dict[str, Any]]] = {}
        for det, values in selection.bound:
            said(f"running {det.name}")
            found[det.name] = run_detector(engine, det, values)
        # the general detectors' incidents that named ones tell, dropped here as on DuckDB (so
        # the incidents written beside the export are those the store keeps)
        spans = found_spans(selection, found)
        spans += stored_spans(store, selection) if store is not None else []
        spark.createDataFrame(spans, FOUND_SCHEMA).createOrReplaceTempView("lf_found")
        found = without(found, deferred(engine))
    write_detected(folder, found)
    if store is None:
        return _incidents(found)
    with store.transaction():
        record(store, selection, found)
    return load_incidents(store, selection.names)


def _same_calls(spark: Any, store: Store, folder: Path) -> None:
    """The export must hold the calls the store holds (in the window): else the incidents
    written back would name calls the store does not have, or miss some."""
    query = "SELECT count(*), coalesce(sum(cost_usd), 0) FROM live_calls"
    there = tuple(spark.sql(query).collect()[0])
    here = store.engine.one(query) or (0, 0)
    if int(there[0]) != int(here[0]) or Decimal(there[1]) != Decimal(here[1]):
        raise ForensicsError(
            f"the export holds {int(there[0]):,} calls (${Decimal(there[1]):,.2f}), the store "
            f"{int(here[0]):,} (${Decimal(here[1]):,.2f}): export the store again "
            "(`llm-forensics export --parquet DIR`)",
            path=folder,
        )


def _incidents(found: dict[str, list[dict[str, Any]]]) -> list[Incident]:
    """Incidents from the rows alone (no store to number them), most wasted first."""
    out = []
    for name, rows in found.items():
        for rec in rows:
            row = {**rec, "incident_id": incident_id(name, rec), "detector": name}
            out.append(Incident.from_row(tuple(row.get(c) for c in COLUMNS)))
    return sorted(out, key=lambda i: (-i.wasted_usd, i.start_ts or datetime.max, i.incident_id))
