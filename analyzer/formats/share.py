"""A team's shared history (``llm-forensics share DIR``): a batch of one machine's calls, read
into this store by ``ingest DIR``.

A batch is a folder ``DIR/<machine>/<batch>/`` holding ``manifest.json`` (what this format
sniffs: its ``"format"`` is ``analyzer.engine.export_layout.SHARE_FORMAT``) and the Parquet
files it names, the store's own tables (``sources``, ``calls``, ``messages``, ``runs``,
written by ``analyzer.views.share``). The manifest is the file read; the Parquet files beside
it are read with it (``member_of``). They are read by DuckDB (``read_parquet``), never row by
row, after their SHA-256 is checked against the manifest: a damaged file fails its batch
with one line naming it, and the other batches are read.

Every call, message and run is one record. A call is known by its ``call_id`` (the id its own
format gave it, from the log's ids): a call the store holds already - read from the log on
this machine, or from another batch of the same or another machine - is a duplicate, as is a
call written twice in the batch. A message or run equal in every column but its file to one
stored is a duplicate. Each call keeps the machine it was read on (``calls.machine``), its
format and its line; its ``source_id`` is this read's (``sources.format`` = ``share``, so it
is never shared again as this machine's own). A batch of a newer store format than this
version reads is refused.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from analyzer.engine.export_layout import (
    MANIFEST,
    SHARE_FORMAT,
    SHARED_FINDINGS,
    file_sha256,
    share_manifest,
)
from analyzer.errors import InputError
from analyzer.ingest.base import Head, LoadContext, LoadResult
from analyzer.ingest.spec import FormatSpec

NAME = "share"
TABLES = ("calls", "messages", "runs")  # what is stored; sources.parquet is the batch's list
OLDEST = 12  # the first store format a share was written in
_READ = "CREATE OR REPLACE TEMP TABLE lf_sh_{{table}} AS SELECT * FROM read_parquet($file)"
_KEY = SHARE_FORMAT.encode()


def sniff(head: Head) -> bool:
    data = head.utf8.lstrip()
    return data[:1] == b"{" and _KEY in data[:400] and b'"format"' in data[:400]


def member_of(path: Path) -> Path | None:
    """A batch's Parquet file is read with its ``manifest.json`` (cheap for any other file:
    its name decides whether the manifest beside it is looked at)."""
    if path.suffix != ".parquet" or path.stem not in (*TABLES, "sources", *SHARED_FINDINGS):
        return None
    owner = path.parent / MANIFEST
    return owner if share_manifest(owner) is not None else None


def _manifest(ctx: LoadContext) -> dict[str, Any]:
    path = ctx.source.path
    ours = str(ctx.engine.scalar("SELECT value FROM meta WHERE key = 'schema_version'"))
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError) as exc:
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InputError(f"a shared batch's manifest that cannot be read ({why})", path) from exc
    if not isinstance(data, dict) or data.get("format") != SHARE_FORMAT:
        raise InputError("not a shared batch's manifest", path)
    version = str(data.get("schema_version", ""))
    if not version.isdigit() or not OLDEST <= int(version) <= int(ours):
        raise InputError(
            f"shared in store format {version or '?'}; this version reads {OLDEST} to "
            f"{ours} (upgrade llm-forensics to read it)",
            path,
        )
    tables = data.get("tables")
    for table in TABLES:
        entry = tables.get(table) if isinstance(tables, dict) else None
        name = entry.get("path") if isinstance(entry, dict) else None
        if not isinstance(name, str) or Path(name).name != name or not name:
            raise InputError(f"the manifest names no file for {table}", path)
    return data


def _checked(folder: Path, entry: dict[str, Any]) -> Path:
    """A file of the batch, whose bytes are those its manifest gives the SHA-256 of."""
    path: Path = folder / str(entry["path"])
    try:
        digest = file_sha256(path)
    except OSError as exc:
        raise InputError(
            f"a file of the batch cannot be read ({exc.strerror or exc})", path
        ) from exc
    if digest != entry.get("sha256"):
        raise InputError("damaged: its SHA-256 is not the one manifest.json gives", path)
    return path


def _read(ctx: LoadContext, table: str, path: Path, rows: object) -> list[str]:
    """``lf_sh_<table>``: the batch's file of ``table``; returns its columns."""
    try:
        ctx.engine.run(_READ, {"file": str(path)}, table=table)
    except Exception as exc:
        first = ctx.engine.failure(exc)
        if first is None:
            raise
        raise InputError(f"not a Parquet file this version reads ({first})", path) from exc
    found = int(ctx.engine.scalar(f"SELECT count(*) FROM lf_sh_{table}"))
    if found != rows:
        raise InputError(f"damaged: {found:,} rows, its manifest says {rows}", path)
    return ctx.engine.columns(f"SELECT * FROM lf_sh_{table} LIMIT 0")


def load(ctx: LoadContext) -> LoadResult:
    manifest = _manifest(ctx)
    folder = ctx.source.path.parent
    machine = str(manifest.get("machine") or folder.parent.name)
    result = LoadResult()
    with ctx.engine.step():
        read: dict[str, tuple[int, list[str]]] = {}
        for table in TABLES:
            entry = manifest["tables"][table]
            columns = _read(ctx, table, _checked(folder, entry), entry.get("rows"))
            read[table] = (int(entry["rows"]), columns)
        ctx.stage("storing")
        for table in TABLES:
            rows, columns = read[table]
            try:
                if table == "calls":
                    stored = ctx.engine.scalar(
                        "ingest/share/calls.sql", {"sid": ctx.source_id, "machine": machine}
                    )
                else:
                    wanted = ", ".join(f'"{c}"' for c in columns if c != "source_id")
                    stored = ctx.engine.scalar(
                        "ingest/share/rows.sql", {"sid": ctx.source_id}, table=table, columns=wanted
                    )
            except Exception as exc:
                first = ctx.engine.failure(exc)
                if first is None:
                    raise
                where = folder / manifest["tables"][table]["path"]
                raise InputError(f"its rows do not fit this store ({first})", where) from exc
            stored = int(stored or 0)
            result.rows_read += rows
            result.rows_loaded += stored
            result.rows_duplicate += rows - stored
            if table == "calls":
                result.calls = rows
    if not result.calls:
        result.note = "a shared batch without calls"
    return result


SPEC = FormatSpec(
    name=NAME,
    title="a shared history's batch (llm-forensics share)",
    kind="log",
    sniff_order=18,  # its manifest says what it is: after the bills, before the agent logs
    call_prefix="",  # its calls keep the ids their own formats gave them
    sniff=sniff,
    load=load,
    member_of=member_of,
)
