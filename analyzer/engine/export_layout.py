"""The layout of a Parquet export of the store (``llm-forensics export --parquet DIR``), as its
writer (``analyzer.views.export``) and its readers (Spark, ``analyzer.detect.spark_engine``)
both know it: which tables are written a folder per day, and the manifest that says what each
table holds."""

from __future__ import annotations

import hashlib
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


# A shared history (``llm-forensics share DIR``): each machine writes batches of its own under
# ``DIR/<machine>/<batch>/``, each the tables below as one Parquet file and a manifest saying
# what it holds. ``ingest DIR`` and Spark (``detect --engine spark --parquet DIR``) read every
# machine's batches, each call once.
SHARE_FORMAT = "llm-forensics share batch"
SHARED_TABLES = ("sources", "calls", "messages", "runs")
# ... and what the sharing machine found in those calls when it shared them: written for
# whoever reads the folder's Parquet files, never read back (every reader finds the incidents
# again, over every machine's calls).
SHARED_FINDINGS = ("incidents", "incident_calls")


def share_manifest(path: Path) -> dict[str, Any] | None:
    """The manifest of a shared batch at ``path`` (``<batch>/manifest.json``), or None if
    ``path`` is not one (not there, not JSON, or another tool's)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("format") != SHARE_FORMAT:
        return None
    return data if isinstance(data.get("tables"), dict) else None


def share_batches(folder: Path) -> list[tuple[Path, dict[str, Any]]]:
    """The batches of the shared history in ``folder`` (``<machine>/<batch>/manifest.json``),
    each with its manifest, in the order ``ingest DIR`` reads them (by path: machine, then
    batch); batches still being written (hidden, without a manifest) are not there yet."""
    found = []
    for path in sorted(folder.glob(f"*/*/{MANIFEST}"), key=lambda p: p.parts):
        if any(part.startswith(".") for part in path.relative_to(folder).parts):
            continue
        manifest = share_manifest(path)
        if manifest is not None:
            found.append((path.parent, manifest))
    return found


def file_sha256(path: Path) -> str:
    """The SHA-256 of a file's bytes (a shared batch's manifest gives each file's)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
