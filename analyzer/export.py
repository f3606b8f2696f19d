"""Tables for other tools: the incident table as CSV or Parquet (``-o incidents.csv``), and the
canonical tables of the store as Parquet files (``llm-forensics export --parquet DIR``)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from analyzer.detect import load_incidents
from analyzer.store import Store
from analyzer.views import incident_table, incidents_csv, where

# The canonical tables (sql/schema.sql), in the order a reader joins them.
TABLES = ("sources", "calls", "messages", "rejects", "bill_buckets", "incidents",
          "incident_calls", "incident_numbers")  # fmt: skip


def incident_csv(store: Store) -> str:
    """The incident table (most wasted first) as CSV text."""
    incidents = load_incidents(store)
    return incidents_csv(incidents, where(store, incidents))


def write_incident_parquet(store: Store, out: Path) -> Path:
    """The incident table as one Parquet file (written whole, then moved into place)."""
    incidents = load_incidents(store)
    rows = incident_table(incidents, where(store, incidents))
    schema = pa.schema(
        [
            ("number", pa.int64()), ("incident_id", pa.string()), ("detector", pa.string()),
            ("severity", pa.string()), ("wasted_usd", pa.decimal128(18, 10)),
            ("wasted_tokens", pa.int64()), ("n_calls", pa.int64()),
            ("start_ts", pa.timestamp("us", tz="UTC")), ("end_ts", pa.timestamp("us", tz="UTC")),
            ("app", pa.string()), ("api_key", pa.string()), ("model", pa.string()),
            ("project", pa.string()), ("session_id", pa.string()), ("stream_key", pa.string()),
            ("cost_basis", pa.string()), ("summary", pa.string()),
        ]
    )  # fmt: skip
    for r, inc in zip(rows, incidents, strict=True):
        r["wasted_usd"] = inc.wasted_usd
        r["start_ts"], r["end_ts"] = inc.start_ts, inc.end_ts
    table = pa.Table.from_pylist(rows, schema=schema)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".partial")
    pq.write_table(table, tmp)
    tmp.replace(out)
    return out


def export_parquet(store: Store, folder: Path) -> list[Path]:
    """Each canonical table as ``folder/<table>.parquet`` (the calls and messages in the
    window the store is restricted to, if any), and ``manifest.json`` naming them with their
    row counts."""
    folder.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    manifest: dict[str, dict[str, object]] = {}
    for table in TABLES:
        path = folder / f"{table}.parquet"
        tmp = folder / f".{table}.parquet.partial"
        quoted = str(tmp).replace("'", "''")
        store.con.execute(f"COPY (SELECT * FROM {table}) TO '{quoted}' (FORMAT parquet)")
        tmp.replace(path)
        rows = int(store.scalar(f"SELECT count(*) FROM {table}"))
        manifest[table] = {"file": path.name, "rows": rows}
        written.append(path)
    meta = dict(store.con.execute("SELECT key, value FROM meta").fetchall())
    (folder / "manifest.json").write_text(
        json.dumps({"schema_version": meta.get("schema_version"), "tables": manifest}, indent=2)
        + "\n",
        encoding="utf-8",
    )
    written.append(folder / "manifest.json")
    return written
