"""The layout of a Parquet export of the store (``llm-forensics export --parquet DIR``), as its
writer (``analyzer.views.export``) and its readers (Spark, ``analyzer.detect.spark_engine``)
both know it: which tables are written a folder per day, and the manifest that says what each
table holds."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from analyzer.errors import ForensicsError

# Tables written as one folder per day (hive layout), so that a re-export writes only new days
# and a distributed engine reads a day as a partition.
PARTITIONED = ("calls", "messages")
EMPTY_DAY = "unknown"  # also the day of rows without a time (sql/views/export_days.sql)
MANIFEST = "manifest.json"


def read_manifest(folder: Path) -> dict[str, Any]:
    """The manifest of an export in ``folder`` (empty if there is none yet)."""
    path = folder / MANIFEST
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ForensicsError(f"not a manifest this tool wrote ({exc})", path=path) from exc
    if not isinstance(data, dict) or not isinstance(data.get("tables"), dict):
        raise ForensicsError("not a manifest this tool wrote (no tables)", path=path)
    return data
