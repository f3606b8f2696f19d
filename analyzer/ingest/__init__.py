"""Ingestion: find files, sniff their format from content, load each in one transaction."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType

from analyzer import cache
from analyzer.console import progress
from analyzer.errors import InputError, StrictRejectError
from analyzer.ingest import claude_code, codex, conversation_json, nexus3_raw, openrouter_csv
from analyzer.ingest.base import IngestOptions, LoadContext, LoadResult, SourceFile, read_head
from analyzer.store import Store

# Every supported input format, in sniffing order.
FORMATS: tuple[ModuleType, ...] = (
    openrouter_csv,
    claude_code,
    codex,
    nexus3_raw,
    conversation_json,
)
PROGRESS_MIN_BYTES = 50 * 1024 * 1024


def format_names() -> list[str]:
    return [f.NAME for f in FORMATS]


def format_by_name(name: str) -> ModuleType:
    for fmt in FORMATS:
        if name == fmt.NAME:
            return fmt
    raise InputError(f"unknown format {name!r} (known: {', '.join(format_names())})")


def _expected() -> str:
    return "; ".join(f"{f.TITLE} [{f.NAME}]" for f in FORMATS)


@dataclass
class FileReport:
    """What happened to one file; ``status`` is loaded, unchanged or unrecognised."""

    path: str
    format: str | None
    status: str
    source_id: int | None = None
    bytes: int = 0
    rows_read: int = 0
    rows_loaded: int = 0
    rows_rejected: int = 0
    rows_duplicate: int = 0
    rows_skipped: int = 0

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def discover(paths: list[str]) -> list[tuple[Path, str, bool]]:
    """Expand the user's paths: (path, display name, named explicitly) for each file.

    Folders are walked in sorted order without following symlinked folders (no loops);
    hidden files and folders are left out.
    """
    found: list[tuple[Path, str, bool]] = []
    for arg in paths:
        p = Path(arg)
        if p.is_dir():
            for root, dirs, files in os.walk(p, followlinks=False):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                for name in sorted(files):
                    if name.startswith("."):
                        continue
                    f = Path(root) / name
                    found.append((f, str(f), False))
        elif p.exists():
            found.append((p, arg, True))
        else:
            raise InputError("no such file or folder", path=arg)
    return found


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _sniff(src: SourceFile, options: IngestOptions) -> ModuleType | None:
    if options.format:
        return format_by_name(options.format)
    for fmt in FORMATS:
        if fmt.sniff(src.head):
            return fmt
    return None


def ingest_file(
    store: Store, path: Path, display: str, explicit: bool, options: IngestOptions
) -> FileReport:
    st = path.stat()
    size = st.st_size
    if size == 0:
        if explicit:
            raise InputError(f"empty file (expected: {_expected()})", path=display)
        return FileReport(display, None, "unrecognised")
    head = read_head(path, display)
    src = SourceFile(path=path, display=display, size=size, head=head, explicit=explicit)
    fmt = _sniff(src, options)
    if fmt is None:
        if explicit:
            raise InputError(f"not a recognised input format (expected: {_expected()})", display)
        return FileReport(display, None, "unrecognised", bytes=size)

    # The same file, untouched since it was loaded (path, size and modification time, as
    # make and rsync judge it), is not read again; anything else is compared by content.
    file_stat = f"{path.resolve()}|{size}|{st.st_mtime_ns}"
    prior = store.one(
        "SELECT source_id FROM sources WHERE file_stat = ? ORDER BY source_id LIMIT 1",
        [file_stat],
    )
    if prior is not None:
        return FileReport(display, fmt.NAME, "unchanged", source_id=int(prior[0]), bytes=size)
    digest = sha256_of(path)
    prior = store.one(
        "SELECT source_id, path FROM sources WHERE sha256 = ? ORDER BY source_id LIMIT 1",
        [digest],
    )
    if prior is not None:
        # Loaded before (from a store that did not note the file's stat, or touched since).
        store.con.execute(
            "UPDATE sources SET file_stat = ? WHERE source_id = ? AND file_stat IS NULL",
            [file_stat, prior[0]],
        )
        return FileReport(display, fmt.NAME, "unchanged", source_id=int(prior[0]), bytes=size)

    con = store.con
    with store.transaction():
        source_id = int(store.scalar("SELECT nextval('source_id_seq')"))  # type: ignore[arg-type]
        show = options.progress and size >= PROGRESS_MIN_BYTES
        with progress(display, con.query_progress, show) as shown:
            ctx = LoadContext(con, src, source_id, options, stage=shown.stage)
            result: LoadResult = fmt.load(ctx)
        accounted = (
            result.rows_loaded + result.rows_rejected + result.rows_duplicate + result.rows_skipped
        )
        if accounted != result.rows_read:  # a bug in a loader, never the user's fault
            raise RuntimeError(
                f"{display}: {result.rows_read} records read but {accounted} accounted for"
            )
        if options.strict and result.rows_rejected:
            line, reason = store.one(
                "SELECT line, reason FROM rejects WHERE source_id = ? ORDER BY line LIMIT 1",
                [source_id],
            )  # type: ignore[misc]
            more = result.rows_rejected - 1
            suffix = (
                f" (and {more} more reject{'s' if more != 1 else ''}; --strict)"
                if more
                else (" (--strict)")
            )
            raise StrictRejectError(reason + suffix, path=display, line=line)
        con.execute(
            """INSERT INTO sources (source_id, path, format, sha256, bytes, ingested_at,
                   rows_read, rows_loaded, rows_rejected, rows_duplicate, rows_skipped,
                   skipped_kinds, encoding, options, file_stat)
               VALUES ($id, $path, $fmt, $sha, $bytes, $at, $read, $loaded, $rejected, $dup,
                   $skipped, $kinds, $enc, $opts, $stat)""",
            {
                "id": source_id,
                "path": display,
                "fmt": fmt.NAME,
                "sha": digest,
                "bytes": size,
                "at": datetime.now(UTC).replace(tzinfo=None),
                "read": result.rows_read,
                "loaded": result.rows_loaded,
                "rejected": result.rows_rejected,
                "dup": result.rows_duplicate,
                "skipped": result.rows_skipped,
                "kinds": json.dumps(result.skipped_kinds),
                "enc": result.encoding,
                "opts": json.dumps({"tz": options.tz, "session_gap_s": options.session_gap_s}),
                "stat": file_stat,
            },
        )
        cache.bump(store, cache.DATA)
    return FileReport(
        display,
        fmt.NAME,
        "loaded",
        source_id=source_id,
        bytes=size,
        rows_read=result.rows_read,
        rows_loaded=result.rows_loaded,
        rows_rejected=result.rows_rejected,
        rows_duplicate=result.rows_duplicate,
        rows_skipped=result.rows_skipped,
    )


def ingest_paths(store: Store, paths: list[str], options: IngestOptions) -> list[FileReport]:
    """Load every file under ``paths``. Each file is all-or-nothing; the first error stops.

    Then link logged calls to the billing rows of the same calls (``analyzer.correlate``).
    """
    reports = [
        ingest_file(store, path, display, explicit, options)
        for path, display, explicit in discover(paths)
    ]
    if any(r.status == "loaded" for r in reports):
        from analyzer.correlate import correlate

        with store.transaction():
            correlate(store)
            cache.bump(store, cache.DATA)
    return reports
