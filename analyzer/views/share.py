"""One team history: this machine's new calls written into a shared folder
(``llm-forensics share DIR``), for any machine's store to read (``ingest DIR``) and for Spark
(``detect --engine spark --parquet DIR``).

A share is a batch of its own under ``DIR/<machine>/<batch>/``: the files this store read on
the machine and had not shared yet (``sources.parquet``, each with its ``share_key``), their
``calls``, ``messages`` and ``runs`` (one Parquet file each, in the store's columns), the
``incidents`` the store holds of those calls and their ``incident_calls`` (what this machine
found, for whoever reads the folder's files; ``ingest DIR`` and Spark find them again over
every machine's calls, where a loop two batches share is one), and
``manifest.json`` (the layout's ``SHARE_FORMAT``, the store format, the machine, the time,
each file's rows and SHA-256, and a digest of them all). The batch is written in a hidden
folder beside its place and renamed into it whole, so a reader never meets half a batch; no
file of another machine, nor an earlier batch, is ever written again or removed.

What was shared is known from the folder itself: the ``share_key`` of every file the
machine's batches hold (its content's SHA-256, when it was read, its path). Sharing again
writes only the files read since; a batch lost from the folder (or a damaged one) is shared
again, which costs duplicate rows (each read once by ``ingest DIR``), never lost ones.
What a later step changes on calls already shared (a bill linked to them, a run's cost
apportioned to them afterwards) is not shared again: the reader's own ``detect`` links and
finds incidents over what it holds.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

from analyzer.console import warn
from analyzer.engine.export_layout import (
    MANIFEST,
    SHARE_FORMAT,
    SHARED_FINDINGS,
    SHARED_TABLES,
    file_sha256,
    share_batches,
)
from analyzer.engine.files import copy_error, os_error
from analyzer.engine.store import Store
from analyzer.errors import ForensicsError
from analyzer.views.view import How, View

# The name the reader's format stores a batch's reads under (``sources.format``): a file
# read from a shared folder is never shared again as the reader's own.
SHARE = "share"
SHARE_VERSION = 1
_SOURCES_COPY = "COPY (SELECT * FROM lf_share_sources) TO {{target}} (FORMAT parquet)"
_SHARED_NONE = "CREATE OR REPLACE TEMP TABLE lf_shared (share_key VARCHAR)"
_SHARED_FROM = "INSERT INTO lf_shared SELECT share_key FROM read_parquet($files)"


@dataclass
class Shared:
    """What a share wrote: the batch's folder and manifest (None: nothing new to share)."""

    folder: Path
    machine: str
    batch: Path | None
    manifest: dict[str, Any] | None


def machine_folder(folder: Path, machine: str) -> Path:
    """``folder/<machine>``: a machine's name must be a folder name of its own."""
    if not machine or machine.startswith(".") or any(c in machine for c in "/\\\0"):
        raise ForensicsError(
            f"machine name {machine!r} cannot name a folder (no '/', '\\', nor a leading '.')"
        )
    return folder / machine


def share(store: Store, folder: Path, machine: str, now: datetime | None = None) -> Shared:
    """Write the files ``machine`` read into this store and has not shared into ``folder``
    yet, with their calls, messages and runs, as a new batch under ``folder/<machine>/``."""
    own = machine_folder(folder, machine)
    with store.engine.step():
        _shared_before(store, folder, machine)
        store.engine.run("views/share_sources.sql", {"machine": machine, "share_format": SHARE})
        if not store.scalar("SELECT count(*) FROM lf_share_sources"):
            return Shared(folder, machine, None, None)
        when = now or datetime.now(UTC)
        staging = own / f".{when:%Y%m%dT%H%M%S%fZ}.partial"
        try:
            staging.mkdir(parents=True, exist_ok=False)
            tables = _write_tables(store, staging)
        except (OSError, duckdb.Error) as exc:
            shutil.rmtree(staging, ignore_errors=True)
            raise _refused(exc, own) from exc
    digest = hashlib.sha256(
        "".join(f"{t['path']}:{t['sha256']}\n" for t in tables.values()).encode()
    ).hexdigest()
    manifest = {
        "format": SHARE_FORMAT,
        "share_version": SHARE_VERSION,
        "schema_version": str(store.scalar("SELECT value FROM meta WHERE key = 'schema_version'")),
        "machine": machine,
        "written_at": when.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "tables": tables,
        "digest": digest,
    }
    batch = own / f"{when:%Y%m%dT%H%M%SZ}-{digest[:12]}"
    try:
        (staging / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        if batch.exists():
            raise FileExistsError(17, "a batch of this name is there already", str(batch))
        staging.rename(batch)
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise _refused(exc, own) from exc
    return Shared(folder, machine, batch, manifest)


def _shared_before(store: Store, folder: Path, machine: str) -> None:
    """``lf_shared``: the share_key of every file the machine's batches in ``folder`` hold. A
    batch whose list cannot be read is said, and its files are shared again (duplicates,
    which the readers count once)."""
    store.engine.run(_SHARED_NONE)
    files = [
        str(batch / "sources.parquet")
        for batch, manifest in share_batches(folder)
        if batch.parent.name == machine and manifest.get("machine") == machine
    ]
    if not files:
        return
    try:
        store.engine.run(_SHARED_FROM, {"files": files})
        return
    except duckdb.Error:
        store.engine.run(_SHARED_NONE)
    for file in files:  # one at a time, to keep what can be read
        try:
            store.engine.run(_SHARED_FROM, {"files": [file]})
        except duckdb.Error as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            warn(f"{file}: cannot read what it shared ({first}): its files are shared again")


def _write_tables(store: Store, staging: Path) -> dict[str, dict[str, Any]]:
    """The batch's Parquet files, each with its rows and SHA-256."""
    tables: dict[str, dict[str, Any]] = {}
    for table in (*SHARED_TABLES, *SHARED_FINDINGS):
        path = staging / f"{table}.parquet"
        target = "'" + str(path).replace("'", "''") + "'"
        if table == "sources":
            store.engine.run(_SOURCES_COPY, target=target)
        elif table in SHARED_FINDINGS:
            store.engine.run("views/share_findings.sql", table=table, target=target)
        else:
            store.engine.run("views/share_table.sql", table=table, target=target)
        rows = int(store.scalar("SELECT count(*) FROM read_parquet($p)", {"p": str(path)}))
        tables[table] = {"path": path.name, "rows": rows, "sha256": file_sha256(path)}
    return tables


def _refused(exc: Exception, folder: Path) -> ForensicsError:
    """The disk refused the batch: one line; nothing of it is left in the folder."""
    doing = "cannot write the share (nothing of it was kept; share again)"
    if isinstance(exc, OSError):
        return os_error(exc, folder, doing)
    return copy_error(exc, folder, doing)


class ShareView(View):
    """What ``share`` wrote: a line per table of the new batch (its rows), or that nothing
    was new; as JSON, the batch's manifest (null: nothing new)."""

    name = "share"

    def __init__(self, shared: Shared) -> None:
        self.shared = shared

    def text(self, how: How) -> str:
        s = self.shared
        if s.manifest is None or s.batch is None:
            return f"nothing new to share from {s.machine} into {s.folder}\n"
        lines = [f"{s.batch}\n"]
        for table, entry in s.manifest["tables"].items():
            lines.append(f"  {table:<14} {entry['rows']:>12,} rows\n")
        return "".join(lines)

    def json(self) -> dict[str, Any]:
        s = self.shared
        return {
            "folder": str(s.folder),
            "machine": s.machine,
            "batch": str(s.batch) if s.batch else None,
            "manifest": s.manifest,
        }
