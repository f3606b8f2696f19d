"""Tables for other tools: the canonical tables of the store as Parquet files (``llm-forensics
export --parquet DIR``). The incident table as CSV or Parquet (``report -o incidents.csv``)
is the incidents view written by its renderer (``analyzer.report.render``)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import duckdb

from analyzer.engine.export_layout import EMPTY_DAY, MANIFEST, PARTITIONED, read_manifest
from analyzer.engine.files import copy_error, os_error
from analyzer.engine.store import Store
from analyzer.errors import ForensicsError
from analyzer.views.view import How, View

# The canonical tables (sql/schema.sql), in the order a reader joins them.
TABLES = (
    "sources",
    "calls",
    "messages",
    "runs",
    "rejects",
    "bill_buckets",
    "incidents",
    "incident_calls",
    "incident_numbers",
)
_COPY = "COPY (SELECT * FROM {{table}}) TO {{target}} (FORMAT parquet)"  # one table, one file
_COPY_NONE = "COPY (SELECT * FROM {{table}} WHERE false) TO {{target}} (FORMAT parquet)"


def export_parquet(store: Store, folder: Path) -> list[Path]:
    """The store's canonical tables as Parquet under ``folder`` (the calls and messages in the
    window the store is restricted to, if any), with ``manifest.json``; returns the paths
    written.

    ``calls`` and ``messages`` are partitioned by the UTC day of their time in the hive layout
    (``calls/day=2025-12-13/data_0.parquet``; rows without a time under ``day=unknown``); the
    other tables are one file each. Exporting again into the same folder writes only the days
    that are new or whose rows changed (the manifest keeps each day's row count and a
    fingerprint of its rows); a day no longer in the store is removed, unless the export is
    limited to a window. Every file is written beside its place and then moved in; the manifest
    is written last, so it never names a file that is not there."""
    folder.mkdir(parents=True, exist_ok=True)
    old = read_manifest(folder).get("tables", {})
    tables: dict[str, Any] = {}
    written: list[Path] = []
    for table in TABLES:
        try:
            if table in PARTITIONED:
                tables[table], paths = _export_by_day(store, folder, table, old.get(table, {}))
            else:
                tables[table], paths = _export_whole(store, folder, table)
        except (OSError, duckdb.IOException) as exc:
            shutil.rmtree(folder / f".{table}.partial", ignore_errors=True)
            (folder / f".{table}.parquet.partial").unlink(missing_ok=True)
            raise _refused(exc, folder) from exc
        written.extend(paths)
    manifest = {
        "format": "llm-forensics parquet export",
        "schema_version": _meta(store).get("schema_version"),
        "window": store.window or None,
        "tables": tables,
        "accounting": accounting(store),
    }
    path = folder / MANIFEST
    tmp = folder / f".{MANIFEST}.partial"
    tmp.write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)
    written.append(path)
    return written


def _refused(exc: Exception, folder: Path) -> ForensicsError:
    """The disk refused a table of the export: one line, and what the folder holds now."""
    doing = "cannot write the export"
    if isinstance(exc, OSError):
        err = os_error(exc, folder, doing)
    else:
        err = copy_error(exc, folder, doing)
    err.message += f" (it is incomplete: {MANIFEST} was not updated; export again)"
    return err


def accounting(store: Store) -> dict[str, Any]:
    """What was read and what became of it, as the store counts it: the records read from
    every file (loaded + rejected + duplicate + skipped), the calls (every call once: the live
    ones) and their cost."""
    files, read, loaded, rejected, duplicate, skipped = store.engine.one(
        "views/accounting_sources.sql"
    ) or (0, 0, 0, 0, 0, 0)
    calls, live, cost = store.engine.one("views/accounting_calls.sql") or (0, 0, 0)
    return {
        "files": int(files),
        "rows_read": int(read),
        "rows_loaded": int(loaded),
        "rows_rejected": int(rejected),
        "rows_duplicate": int(duplicate),
        "rows_skipped": int(skipped),
        "calls": int(calls),
        "live_calls": int(live),
        "cost_usd": str(cost),
        "messages": int(store.scalar("SELECT count(*) FROM messages")),
    }


def _meta(store: Store) -> dict[str, str]:
    return dict(store.engine.rows("SELECT key, value FROM meta"))


def _quoted(path: Path) -> str:
    return "'" + str(path).replace("'", "''") + "'"


def _export_whole(store: Store, folder: Path, table: str) -> tuple[dict[str, Any], list[Path]]:
    path = folder / f"{table}.parquet"
    tmp = folder / f".{table}.parquet.partial"
    store.engine.run(_COPY, table=table, target=_quoted(tmp))
    tmp.replace(path)
    rows = int(store.scalar(f"SELECT count(*) FROM {table}"))
    return {"path": path.name, "rows": rows}, [path]


def _export_by_day(
    store: Store, folder: Path, table: str, old: dict[str, Any]
) -> tuple[dict[str, Any], list[Path]]:
    """``folder/<table>/day=<day>/``: the days that are new or changed are written (in one pass,
    into a folder beside), then each replaces its old folder; unchanged days are left alone."""
    base = folder / table
    base.mkdir(exist_ok=True)
    now: dict[str, dict[str, Any]] = {
        day: {"rows": int(rows), "fingerprint": f"{fp:016x}"}
        for day, rows, fp in store.engine.rows("views/export_days.sql", table=table)
    }
    if not now:  # no rows: one empty file still gives a reader the table's columns
        now = {EMPTY_DAY: {"rows": 0, "fingerprint": "empty"}}
    before = old.get("days", {}) if old.get("partitioned_by") == "day" else {}
    changed = sorted(
        d for d, v in now.items() if before.get(d) != v or not (base / f"day={d}").is_dir()
    )
    written: list[Path] = []
    if changed == [EMPTY_DAY] and now[EMPTY_DAY]["rows"] == 0:
        target = base / f"day={EMPTY_DAY}"
        target.mkdir(exist_ok=True)
        store.engine.run(_COPY_NONE, table=table, target=_quoted(target / "data_0.parquet"))
        written.append(target / "data_0.parquet")
    elif changed:
        staging = folder / f".{table}.partial"
        shutil.rmtree(staging, ignore_errors=True)
        store.engine.run(
            "views/export_partitioned.sql", {"days": changed}, table=table, target=_quoted(staging)
        )
        for day in changed:
            target = base / f"day={day}"
            retired = base / f".day={day}.old"
            if target.exists():
                target.replace(retired)
            (staging / f"day={day}").replace(target)
            shutil.rmtree(retired, ignore_errors=True)
            written.extend(sorted(target.glob("*.parquet")))
        shutil.rmtree(staging, ignore_errors=True)
    if not store.window:
        for day in sorted(set(before) - set(now)):
            shutil.rmtree(base / f"day={day}", ignore_errors=True)
    else:  # a windowed export leaves the days outside its window as they were
        now = {**{d: v for d, v in before.items() if (base / f"day={d}").is_dir()}, **now}
    entry = {
        "path": table,
        "partitioned_by": "day",
        "rows": sum(v["rows"] for v in now.values()),
        "days": dict(sorted(now.items())),
        "written": changed,
    }
    return entry, written


class ExportView(View):
    """What ``export`` wrote: a line per table (its rows and where it is; a table by day, its
    days and how many were written now); as JSON, the manifest."""

    name = "export"

    def __init__(self, folder: Path, manifest: dict[str, Any]) -> None:
        self.folder, self.manifest = folder, manifest

    def text(self, how: How) -> str:
        lines = []
        for table, entry in self.manifest["tables"].items():
            line = f"{table:<17} {entry['rows']:>12,} rows  {self.folder / entry['path']}"
            if entry.get("partitioned_by") == "day":
                days, new = len(entry["days"]), len(entry["written"])
                line += f"  ({days:,} days, {new:,} written now)"
            lines.append(line + "\n")
        return "".join(lines)

    def json(self) -> dict[str, Any]:
        return self.manifest
