"""The per-file load: sniff, skip what is unchanged, hash, and load one file in one
transaction with every record accounted for (or nothing of it stored)."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import analyzer.formats as registry  # the formats this load sniffs for
from analyzer.console import Counter, progress, warn
from analyzer.engine import cache
from analyzer.engine.default_store import this_machine
from analyzer.engine.store import Store, interrupted
from analyzer.errors import (
    DamagedGzipError,
    ForensicsError,
    InputError,
    NothingFound,
)
from analyzer.ingest.base import (
    CONTENT_LATER,
    CannotResume,
    Checkpoint,
    Head,
    IngestOptions,
    LoadContext,
    LoadResult,
    SourceFile,
    Unchunkable,
)
from analyzer.ingest.encodings import ENCODING_NAMES, is_utf8
from analyzer.ingest.reading import read_head, salvage_gzip
from analyzer.ingest.resume import (
    FIRST_READ,
    After,
    Growth,
    PrefixDigests,
    after,
    growth,
    offsets,
    point_of,
)
from analyzer.ingest.sink import FileFacts, Sink, SourceRow
from analyzer.load import usage_first
from analyzer.load.batch import (
    BATCH_FILE_BYTES,
    Batch,
    Pending,
    SourceIndex,
    check_accounting,
    strict_error,
)
from analyzer.load.discovery import Found, Walk, discover
from analyzer.load.interrupts import Run
from analyzer.load.prepare import (
    Printed,
    Printing,
    ReadAhead,
    fingerprint,
    read_staged,
    run_loader,
    sniff,
)
from analyzer.load.reports import (
    FileReport as FileReport,  # re-exported: what ingest reports of each file
)
from analyzer.load.reports import binary_kind, looks_like_data, no_calls_reason
from analyzer.load.staged import from_wire
from analyzer.load.workers import Job, Prepared, Workers, count

PROGRESS_MIN_BYTES = 50 * 1024 * 1024


@dataclass(frozen=True)
class _Read:
    """A file read now: its format, the file, the options of the load, the name it is stored
    by, its SHA-256 and its stat key."""

    fmt: registry.Format
    src: SourceFile
    options: IngestOptions
    name: str
    digest: str
    file_stat: str

    def facts(self) -> FileFacts:
        """What the store keeps of the file, beside its accounting."""
        src, options = self.src, self.options
        return FileFacts(
            path=self.name,
            format=self.fmt.name,
            sha256=self.digest,
            bytes=src.size,
            ingested_at=datetime.now(UTC).replace(tzinfo=None),
            encoding=src.head.encoding,
            options=usage_first.options_json(options, self.fmt.usage_first),
            file_stat=self.file_stat,
        )


def _load(
    store: Store,
    read: _Read,
    tail: tuple[int, str] | None = None,
    seen: Seen | None = None,
    whole: bool = False,
) -> tuple[int, LoadResult]:
    """The file's one transaction: its records, its rejects and its ``sources`` row, or
    nothing. ``tail`` is a reject for the unreadable end of a damaged file; ``seen``, how the
    file was read before (read on from its resume point, or whole: ``analyzer.ingest.resume``);
    ``whole``: its calls are not written in parts as it is read (``Unchunkable``)."""
    fmt, src, options = read.fmt, read.src, read.options
    display, size, con = src.display, src.size, store.con
    grow = seen.grow if seen is not None else FIRST_READ
    with store.transaction():
        source_id = int(store.scalar("SELECT nextval('source_id_seq')"))
        show = options.progress and size >= PROGRESS_MIN_BYTES
        with progress(display, con.query_progress, show) as shown:
            ctx = LoadContext(
                store.engine,
                src,
                source_id,
                options,
                stage=shown.stage,
                resume=grow.resume,
                whole=whole,
            )
            result = run_loader(fmt, ctx)
        if tail is not None:
            Sink(store.engine).rejects([(source_id, *tail, None)])
            result.rows_read += 1
            result.rows_rejected += 1
        check_accounting(result, display)
        if options.strict and result.rows_rejected:
            earliest = store.one(
                "SELECT line, reason FROM rejects WHERE source_id = ? ORDER BY line LIMIT 1",
                [source_id],
            )
            assert earliest is not None  # there are rejects
            raise strict_error(display, result.rows_rejected, *earliest)
        Sink(store.engine).sources([SourceRow.of(source_id, result, read.facts())])
        if seen is not None:
            seen.after(result.checkpoint, read.digest).settle(store.engine, source_id)
        cache.bump(store, cache.DATA)
    return source_id, result


def _regular(path: Path, display: str, explicit: bool) -> os.stat_result | FileReport:
    """The file's stat, or the report of a path that is no regular file to read."""
    try:
        st = path.stat()
    except OSError as exc:  # a link to nothing, or a loop of links
        why = "a symbolic link to nothing (broken, or a loop)" if path.is_symlink() else None
        if explicit:
            raise InputError(why or f"cannot read: {exc.strerror or exc}", path=display) from exc
        warn(f"{display}: skipped: {why or exc.strerror or exc}")
        return FileReport(display, None, "unreadable")
    if not stat.S_ISREG(st.st_mode):  # a FIFO or device found in a folder: never block on it
        if explicit:
            raise InputError("not a regular file", path=display)
        warn(f"{display}: skipped: not a regular file")
        return FileReport(display, None, "unreadable")
    return st


def _unrecognised(path: Path, display: str, explicit: bool, head: Head, size: int) -> FileReport:
    """The report of a file no format reads (an error if it was named)."""
    if explicit:
        raise InputError(
            f"not a recognised input format (expected: {registry.expected_formats()})", display
        )
    own = registry.agent_own_file(path) or binary_kind(head)
    data = None if own else looks_like_data(head)
    why = own or (f"{data} that no reader recognises" if data else "not an agent log or bill")
    return FileReport(display, None, "unrecognised", bytes=size, reason=why, data=bool(data))


def _worker_read(
    ahead: Workers | None, number: int, st: os.stat_result, head: Head
) -> Prepared | None:
    """What a worker read of the file, if it read this very file as it is now (its format
    is the one its head is sniffed as: the worker sniffed it with the same options)."""
    pre = ahead.take(number) if ahead is not None else None
    if pre is not None and (st.st_size, st.st_mtime_ns) != pre.stat:
        return None
    if pre is not None and pre.head != head:
        return None  # (the file changed since the worker read it)
    return pre


def ingest_file(
    store: Store,
    path: Path,
    display: str,
    explicit: bool,
    options: IngestOptions,
    name: str | None = None,
    index: SourceIndex | None = None,
    batch: Batch | None = None,
    ahead: Workers | None = None,
    number: int = 0,
    read_ahead: ReadAhead | None = None,
) -> FileReport:
    """Load one file in one transaction. ``display`` names it in messages, ``name`` (default:
    ``display``) in the store and the report. With a ``batch``, a small file of a format that
    allows it is read into the batch instead (and stored when the batch is committed: its
    report's ``source_id`` is given then); ``index`` knows the files stored already. ``ahead``:
    the workers that may have read it already (as file ``number``); ``read_ahead``: what was
    learnt of it from its bytes as they were read ahead."""
    st = _regular(path, display, explicit)
    if isinstance(st, FileReport):
        return st
    size = st.st_size
    owner = None if explicit else registry.owner_of(path)
    if owner is not None:  # a part of a log another file stands for (read with it)
        where = f"{owner[1].parent.name}/{owner[1].name}"
        return FileReport(display, owner[0], "read_with", bytes=size, reason=f"read with {where}")
    if size == 0:
        if explicit:
            raise InputError(f"empty file (expected: {registry.expected_formats()})", path=display)
        return FileReport(display, None, "unrecognised")
    index = index or SourceIndex(store)
    # The same file, untouched since it was loaded (path, size and modification time, as
    # make and rsync judge it), is not read again, not even its first bytes; anything else is
    # compared by content.
    file_stat = index.stat_key(path, size, st.st_mtime_ns)
    prior = index.by_stat.get(file_stat)
    if prior is not None:
        return _unchanged(display, index.format_of(prior), prior, size)
    head = read_head(path, display)
    src = SourceFile(path=path, display=display, size=size, head=head, explicit=explicit)
    resolved = index.resolved(path)
    before = index.by_path.get(resolved)
    # A file read before is read on from there, here; a new one a worker read (this very
    # file, the same head) is taken as the worker sniffed it (sniffing reads only the head).
    pre = _worker_read(ahead, number, st, head) if before is None else None
    fmt = _format_of(src, options, st, pre, read_ahead)
    if fmt is None:
        return _unrecognised(path, display, explicit, head, size)
    printed = read_ahead.printed if read_ahead is not None else None
    digest, damage, seen = _fingerprinted(
        store, index, batch, pre or printed, resolved, st, fmt, src
    )
    head = src.head
    options = usage_first.for_file(
        options, before.source_id if before is not None else None, index.usage_reads
    )
    known = index.by_sha.get(digest)
    if known is not None:
        return _known_content(
            store, index, batch, display, fmt.name, known, digest, file_stat, size
        )

    if not is_utf8(head.encoding):
        warn(f"{display}: not UTF-8; read as {ENCODING_NAMES.get(head.encoding, head.encoding)}")
    read = _Read(fmt, src, options, name or display, digest, file_stat)
    batchable = fmt.batch and head.compression is None
    if batch is not None and batchable and size <= BATCH_FILE_BYTES:
        pending = _stage(store, read, pre, seen)
        if pending is not None:
            batch.add(pending)
            index.add(pending, digest, file_stat)
            report = FileReport(display, fmt.name, "loaded", bytes=size)
            pending.report = report
            return report
    if batch is not None:
        _commit(batch, index)  # what was read before this file is stored before it
    source_id, result = _load_whole(store, read, damage, seen)
    index.add(source_id, digest, file_stat)
    return _report(display, fmt.name, size, source_id, result)


def _format_of(
    src: SourceFile,
    options: IngestOptions,
    st: os.stat_result,
    pre: Prepared | None,
    read_ahead: ReadAhead | None,
) -> registry.Format | None:
    """The file's format: as a worker sniffed it, or as it was sniffed from the bytes read
    ahead of it (if the file is as it was then), or sniffed now (None: no format knows it)."""
    if pre is not None:
        return registry.format_by_name(pre.fmt)
    if (
        read_ahead is not None
        and read_ahead.sniffed
        and read_ahead.printed.stat == (st.st_size, st.st_mtime_ns)
    ):
        return registry.format_by_name(read_ahead.fmt) if read_ahead.fmt is not None else None
    return sniff(src, options)


def _fingerprinted(
    store: Store,
    index: SourceIndex,
    batch: Batch | None,
    pre: Prepared | Printed | None,
    resolved: str,
    st: os.stat_result,
    fmt: registry.Format,
    src: SourceFile,
) -> tuple[str, str | None, Seen | None]:
    """The file's SHA-256 and damage (``pre``'s, what a worker read of this very file, or its
    fingerprint from the bytes read ahead of it), with its head and line ends judged on all of
    it (into ``src``); and how it was read before (``Seen``: a file of the same ``resolved``
    path read earlier, since grown or changed, is hashed up to where that read ended too, to
    tell how it grew)."""
    path, head = src.path, src.head
    before = index.by_path.get(resolved)
    point = None
    if before is not None and fmt.resumes:
        if batch is not None:
            batch.wait()  # the store is free again
        point = point_of(store.engine, resolved)
    at = PrefixDigests(offsets(before, point)) if head.compression is None else None
    if isinstance(pre, Printed) and (
        pre.stat != (st.st_size, st.st_mtime_ns)
        or head.compression is not None
        or before is not None
    ):
        pre = None  # (changed since read ahead, or read before: hashed up to where it ended too)
    if isinstance(pre, Printed):
        digest, damage, head, mixed = pre.fingerprint(head)
    elif pre is not None:
        digest, damage, head, mixed = pre.digest, pre.damage, pre.checked_head, pre.mixed
    else:
        digest, damage, head, mixed = fingerprint(path, head, at)
    src.head, src.mixed_line_ends = head, mixed
    hashed = at.size if at is not None and pre is None else st.st_size
    grow = growth(before, point, at.found if at is not None else {}, fmt.name, head)
    seen = Seen(path, resolved, grow, hashed) if head.compression is None else None
    return digest, damage, seen


def _known_content(
    store: Store,
    index: SourceIndex,
    batch: Batch | None,
    display: str,
    fmt: str,
    known: list[Any],
    digest: str,
    file_stat: str,
    size: int,
) -> FileReport:
    """A file whose content was loaded before (from a store that did not note the file's
    stat, or touched since): its stat noted, and reported unchanged. A file touched since
    its path was read (the same bytes, another modification time) has the stat of its own
    row brought up to date, so the next run knows it by its stat and does not hash it again."""
    prior = index.by_path.get(file_stat.rsplit("|", 2)[0])
    touched = prior is not None and prior.sha256 == digest and file_stat not in index.by_stat
    if (known[1] and isinstance(known[0], int)) or touched:
        if batch is not None:
            batch.wait()  # the store is free again
        if touched:
            assert prior is not None
            store.engine.run(
                "UPDATE sources SET file_stat = ? WHERE source_id = ?",
                [file_stat, prior.source_id],
            )
            index.by_stat.setdefault(file_stat, prior.source_id)
        else:
            store.engine.run(
                "UPDATE sources SET file_stat = ? WHERE source_id = ? AND file_stat IS NULL",
                [file_stat, known[0]],
            )
            index.noted(digest, file_stat)
    return _unchanged(display, fmt, known[0], size)


def _load_whole(
    store: Store, read: _Read, damage: str | None, seen: Seen | None = None
) -> tuple[int, LoadResult]:
    """The file loaded on its own (``_load``). A compressed log cut short (its writer was
    killed), or unpacking to more than a file may (``damage``): what decompresses (up to the
    limit) is loaded, and the rest of the file is one reject that says where it ends. A read
    that goes on from a resume point and meets what it cannot go on with is done again whole."""
    src = read.src
    try:
        if damage is not None:
            raise DamagedGzipError(damage, path=src.display)
        return _in_parts(store, read, seen=seen)
    except DamagedGzipError as exc:
        with salvage_gzip(src) as (salvaged, lines):
            warn(f"{src.display}: {exc.message}; loading the {lines:,} whole lines before it")
            tail = (lines + 1, f"{exc.message}: the file cannot be read past line {lines:,}")
            return _in_parts(store, replace(read, src=salvaged), tail)


def _in_parts(
    store: Store, read: _Read, tail: tuple[int, str] | None = None, seen: Seen | None = None
) -> tuple[int, LoadResult]:
    """``_load``, a long log's calls written in parts as it is read, a grown file read on from
    its resume point; nothing of a read that fails so is stored, and it is done again: whole
    from the start if it met what its saved state cannot go on with (``CannotResume``),
    without parts if its parts turned out to depend on one another (``Unchunkable``)."""
    whole = False
    while True:
        try:
            return _load(store, read, tail, seen, whole=whole)
        except CannotResume:
            if seen is None or seen.grow.resume is None:
                raise
            seen = seen.whole()
        except Unchunkable:
            if whole:
                raise
            whole = True


def _report(display: str, fmt: str, size: int, source_id: int, result: LoadResult) -> FileReport:
    no_calls = result.calls == 0 and registry.format_by_name(fmt).kind == "log"
    return FileReport(
        display,
        fmt,
        "loaded",
        source_id=source_id,
        bytes=size,
        calls=result.calls,
        **result.accounting(),
        reason=no_calls_reason(result) if no_calls else None,
        expected=result.note is not None,
        later=result.skipped_kinds.get(CONTENT_LATER, 0),
    )


def _unchanged(display: str, fmt: str | None, prior: int | Pending, size: int) -> FileReport:
    report = FileReport(display, fmt, "unchanged", bytes=size)
    if isinstance(prior, int):
        report.source_id = prior
    elif prior.source_id is not None:  # read in a batch written already
        report.source_id = prior.source_id
    else:  # the file read earlier into the batch under way: its id comes when it is written
        prior.aliases.append(report)
    return report


def _stage(
    store: Store, read: _Read, pre: Prepared | None = None, seen: Seen | None = None
) -> Pending | None:
    """The file read into memory for a batch (nothing written), or None when it is too big
    to keep there. ``pre``: what a worker read of it; ``seen``: how it was read before."""
    if pre is not None and (pre.staged is not None or pre.unbatchable or pre.error):
        pre.raise_error()
        staged = from_wire(pre.staged) if pre.staged is not None else None
    else:
        try:
            resume = seen.grow.resume if seen is not None else None
            staged = read_staged(read.fmt, read.src, read.options, store.engine, resume)
        except CannotResume:
            assert seen is not None
            seen = seen.whole()
            staged = read_staged(read.fmt, read.src, read.options, store.engine)
    if staged is None:
        return None
    return Pending(
        low=staged,
        facts=read.facts(),
        display=read.src.display,
        strict=read.options.strict,
        after=seen.after(staged.result.checkpoint, read.digest) if seen is not None else None,
    )


@dataclass(frozen=True)
class Seen:
    """A file as it was read before (``analyzer.ingest.resume``): where it is (``path``,
    ``file`` resolved), how it is read now (``grow``) and how many of its bytes were hashed."""

    path: Path
    file: str
    grow: Growth
    hashed: int

    def whole(self) -> Seen:
        """Read whole instead (what it saved cannot go on)."""
        return replace(self, grow=self.grow.whole())

    def after(self, cp: Checkpoint | None, digest: str) -> After:
        """What follows from the read, which left ``cp``, once it is written."""
        return after(self.path, self.file, self.grow, cp, digest, self.hashed)


def _commit(batch: Batch, index: SourceIndex, later: bool = False) -> None:
    """Write the batch; each file's report then gets its accounting and source id. With
    ``later``, the commit is finished while the next files are read (``Batch.wait``)."""
    for f in batch.commit(later):
        assert f.report is not None and f.source_id is not None
        loaded = _report(f.display, f.fmt, f.size, f.source_id, f.low.result)
        f.report.__dict__.update(loaded.__dict__)
        for alias in f.aliases:
            alias.source_id = f.source_id
        index.stored(f)  # (its rows are let go)


class Loaded(list[FileReport]):
    """What ingest did with each file, and the hidden folders the walk passed over."""

    def __init__(self, reports: list[FileReport], hidden_skipped: list[str]) -> None:
        super().__init__(reports)
        self.hidden_skipped = hidden_skipped


def find_files(
    paths: list[str], options: IngestOptions, labels: dict[str, str] | None = None
) -> Walk:
    """The files under ``paths``, walking into the agents' own hidden folders and reading
    their own hidden files."""
    return discover(
        paths,
        options.full_paths,
        enter=registry.agent_folders(),
        labels=labels,
        take=registry.agent_files(),
    )


def load_paths(store: Store, paths: list[str], options: IngestOptions) -> Loaded:
    """Load every file under ``paths``. Each file is all-or-nothing; the first error stops.
    (Linking logged calls to their bills is the next step of the pipeline, not this one.)"""
    walk = find_files(paths, options)
    return Loaded(load_files(store, walk.files, options), walk.hidden_skipped)


def load_files(
    store: Store, files: list[Found], options: IngestOptions, run: Run | None = None
) -> list[FileReport]:
    """Load ``files`` in order, counting them on a terminal (small agent logs a batch at a
    time, see ``analyzer.load.batch``). Ctrl-C stops between two records of a file: nothing
    of that file is stored (its transaction is rolled back), the files read before it are (a
    second Ctrl-C leaves them out too), and ``Interrupted`` says how many files this ``run``
    stored, as counted in the store (``analyzer.load.interrupts``). What is stored is marked
    as read on ``options.machine`` (default: this machine)."""
    run = run or Run(store)
    run.found = len(files)
    with run.said_on_ctrl_c(), store.machine(options.machine or this_machine()):
        return _load_files(store, files, options)


def _load_files(store: Store, files: list[Found], options: IngestOptions) -> list[FileReport]:
    counter = Counter("reading files", len(files), minimum=20 if options.progress else 10**12)
    reports: list[FileReport] = []
    if options.content:  # the files read usage first before are read whole now
        usage_first.drop(store, [f.path for f in files])
    index = SourceIndex(store)
    batch = Batch(store)
    ahead: _Ahead | None = None
    try:
        ahead = _Ahead(files, options, index)
        for i, f in enumerate(files):
            counter.step(i, f.display[-50:])
            ahead.ask(i)
            try:
                report = ingest_file(
                    store,
                    f.path,
                    f.display,
                    f.explicit,
                    options,
                    f.name,
                    index,
                    batch,
                    ahead.workers,
                    i,
                    ahead.read.pop(str(f.path), None),
                )
            except InputError as exc:
                if f.explicit or options.strict or isinstance(exc, NothingFound):
                    ahead.close()
                    _commit(batch, index)  # the files read before this one are stored
                    raise
                # A file found in a folder that cannot be loaded: nothing of it is stored (its
                # transaction was rolled back), it is named, and the rest is read.
                warn(f"{exc} (not read; the rest is)")
                report = FileReport(f.display, None, "failed", reason=exc.message)
            except ForensicsError:
                ahead.close()
                _commit(batch, index)  # the files read before this one are stored
                raise
            except BaseException as exc:
                if interrupted(exc):  # the files read before this one are stored
                    counter.done()
                    ahead.close()
                    _commit(batch, index)
                raise
            ahead.done(i)
            reports.append(report)
            if batch.full():
                _commit(batch, index, later=True)
        ahead.close()
        _commit(batch, index)
    finally:
        try:
            if ahead is not None:
                ahead.close()
        finally:
            batch.wait(quiet=True)  # (when an error stops the files: the store is closed next)
            counter.done()
    return reports


class _Ahead:
    """The files the workers are asked to read ahead of the writer (``analyzer.load.workers``):
    the next ones not known to be unchanged, while the input asked for stays small."""

    def __init__(self, files: list[Found], options: IngestOptions, index: SourceIndex) -> None:
        self.files, self.index, self.next = files, index, 0
        # What was learnt of the files whose bytes were read ahead, by path (``_seen``).
        self.read: dict[str, ReadAhead] = {}
        self.options = options
        self.found = {str(f.path): f for f in files}
        self.jobs: list[Job | None] = []
        self.keys: list[str] = []  # each file's ``sources.file_stat`` as it was found
        for f in files:
            try:
                st = f.path.stat()
            except OSError:
                self.jobs.append(None)
                self.keys.append("")
                continue
            ok = stat.S_ISREG(st.st_mode) and st.st_size > 0
            self.keys.append(index.stat_key(f.path, st.st_size, st.st_mtime_ns) if ok else "")
            # Workers only for small files to read (not those known to be unchanged).
            self.jobs.append(
                Job(
                    str(f.path),
                    f.display,
                    f.explicit,
                    st.st_size,
                    st.st_mtime_ns,
                    st.st_size <= BATCH_FILE_BYTES,
                )
                if ok and self.keys[-1] not in index.by_stat
                else None
            )
        if any(j is not None for j in self.jobs):  # files to read: their calls are priced
            from analyzer.model import pricing

            pricing.warm()
        ahead = self._usage_first(options)
        # (a file read ahead is only hashed by a worker: its share of their work is small)
        work = sum(j.size for j in self.jobs if j is not None and (j.small or j.path in ahead))
        n = count(work)
        try:
            self.workers = Workers(n, options) if n else None
        except OSError:  # no worker to be had (no interpreter to start): read them here
            self.workers = None
        if ahead:  # (while the workers hash the files)
            from analyzer.formats import claude_usage

            try:
                self.ask(0)
                claude_usage.read_ahead([Path(p) for p in ahead], self._seen)
            except BaseException:  # (Ctrl-C: the workers are stopped, as ``close`` does)
                self.close()
                raise

    def _usage_first(self, options: IngestOptions) -> dict[str, None]:
        """The files a usage-first load reads ahead by DuckDB's reader: Claude Code
        transcripts where Claude Code keeps them (a ``.jsonl`` file in a project folder), new
        or read usage first before (``usage_first.for_file``). A new one is fingerprinted
        from the bytes the SQL reader reads (``_seen``); the workers only hash those read
        before. (A file that turns out to be of another format is read as ever, what was read
        ahead of it unused.)"""
        from analyzer.formats.claude_usage import project_folder

        if options.content:
            return {}
        found: dict[str, None] = {}  # (in the order of the files)
        for i, (f, job) in enumerate(zip(self.files, self.jobs, strict=True)):
            if job is None or f.path.suffix != ".jsonl" or project_folder(f.path) is None:
                continue
            before = self.index.by_path.get(self.index.resolved(f.path))
            if before is None or before.source_id in self.index.usage_reads:
                found[job.path] = None
                self.jobs[i] = None if before is None else replace(job, small=False)
        return found

    def _seen(self, path: Path, stat: tuple[int, int]) -> Callable[[bytes], None]:
        """What learns a file's fingerprint, head and format from its bytes as the SQL
        reader reads them ahead (in a thread of the reader's, while DuckDB reads: what is
        learnt is kept once the last bytes are fed)."""
        printing = Printing(stat)
        f = self.found[str(path)]

        def feed(chunk: bytes) -> None:
            if chunk:
                printing.feed(chunk)
                return
            try:
                read = ReadAhead.of(printing, path, f.display, f.explicit, self.options)
            except Exception:  # (the load sniffs it itself, and says what failed)
                return
            if read is not None:
                self.read[str(path)] = read

        return feed

    def ask(self, upto: int) -> None:
        """Have the files from ``upto`` on read, as far as there is room."""
        w = self.workers
        if w is None:
            return
        self.next = max(self.next, upto)
        while self.next < len(self.jobs) and w.room():
            job = self.jobs[self.next]
            if job is not None and self.keys[self.next] not in self.index.by_stat:
                w.ask(self.next, job)
            self.next += 1

    def done(self, number: int) -> None:
        if self.workers is not None:
            self.workers.drop(number)

    def close(self) -> None:
        from analyzer.formats import claude_usage

        claude_usage.forget()
        if self.workers is not None:
            self.workers.close()
            self.workers = None
