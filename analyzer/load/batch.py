"""Many small agent-log files loaded in one transaction, each still whole or not at all.

A file's load costs a few statements of fixed cost (its inserts, its duplicate checks, its
``sources`` row, a commit): on a history of thousands of small transcripts that cost is most of
the time. So the files of a format that allows it (``BATCH = True``) are read one by one into
memory (their ``Lowering`` writes nothing), and a batch of them is settled and written at once:

* the batch's files are written in rounds of files that share no key (``rounds``), each round
  through the one sink (``analyzer.ingest.sink``), which settles their duplicates in SQL exactly
  as for a file loaded on its own (a file sees what the files before it in the batch stored);
* each file's accounting and ``--strict`` are checked as in the per-file load; the first file
  that fails is not written, the files before it are, and its error is raised after they are
  committed (the per-file load's "the first error stops", file for file);
* the batch's rows go in through one insert per table, in one transaction: Ctrl-C or a killed
  process leaves the store as before the batch.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from analyzer.engine import cache
from analyzer.engine.store import Store, interrupted
from analyzer.errors import ForensicsError, LoaderBug, StrictRejectError
from analyzer.ingest.base import LoadResult
from analyzer.ingest.resume import After, Prior, settle_all
from analyzer.ingest.sink import FileFacts, Sink, SourceRow, in_order
from analyzer.load import usage_first
from analyzer.load.staged import Staged
from analyzer.load.unchanged import StatKeys

BATCH_FILE_BYTES = 8 << 20  # a bigger file is loaded on its own
BATCH_BYTES = 48 << 20  # the input a batch holds in memory at most
BATCH_FILES = 2000


def check_accounting(result: LoadResult, display: str) -> None:
    """A loader that loses records fails its file (a bug of ours, never the user's fault)."""
    accounted = (
        result.rows_loaded + result.rows_rejected + result.rows_duplicate + result.rows_skipped
    )
    if accounted != result.rows_read:
        raise LoaderBug(
            f"{result.rows_read} records read but {accounted} accounted for "
            "(a bug in llm-forensics; nothing from this file was stored)",
            path=display,
        )


def strict_error(display: str, rejected: int, line: int | None, reason: str) -> StrictRejectError:
    """The error of ``--strict`` for a file with rejects: its earliest one, and how many more."""
    more = rejected - 1
    plural = "s" if more != 1 else ""
    suffix = f" (and {more} more reject{plural}; --strict)" if more else " (--strict)"
    return StrictRejectError(reason + suffix, path=display, line=line)


class SourceIndex:
    """The files the store holds, by stat and by content (read once, kept up to date): which
    one a file is, without a query per file. Entries are source ids, or the ``Pending`` file of
    the batch under way (its id is given when the batch is written)."""

    def __init__(self, store: Store) -> None:
        self.by_stat: dict[str, int | Pending] = {}
        self.by_sha: dict[str, list[Any]] = {}  # sha -> [source, whether its file_stat is NULL]
        self.formats: dict[int, str] = {}  # a stored file's format, by source id
        self.keys = StatKeys()  # (sources.file_stat as a file is now)
        self.by_path: dict[str, Prior] = {}  # a file's latest read, by its resolved path
        self.usage_reads = usage_first.reads(store)  # the usage-first reads (source ids)
        rows = store.engine.rows(
            "SELECT source_id, sha256, file_stat, format, bytes FROM sources ORDER BY source_id"
        )
        for source_id, sha, file_stat, fmt, size in rows:
            self.add(source_id, sha, file_stat)
            self.formats[source_id] = fmt
            if file_stat is not None:
                self.by_path[file_stat.rsplit("|", 2)[0]] = Prior(source_id, size, sha, fmt)

    def stat_key(self, path: Path, size: int, mtime_ns: int) -> str:
        """How ``sources.file_stat`` names a file as it is now (``unchanged.StatKeys``)."""
        return self.keys.key(path, size, mtime_ns)

    def resolved(self, path: Path) -> str:
        """``str(path.resolve())``, the folder resolved once per run."""
        return self.keys.resolved(path)

    def format_of(self, source: int | Pending) -> str | None:
        """The format a stored (or pending) file was read as."""
        return source.fmt if isinstance(source, Pending) else self.formats.get(source)

    def add(self, source: int | Pending, sha: str, file_stat: str | None) -> None:
        """A file stored (or pending) after all those already here: the first one wins."""
        if file_stat is not None:
            self.by_stat.setdefault(file_stat, source)
        self.by_sha.setdefault(sha, [source, file_stat is None])

    def stored(self, f: Pending) -> None:
        """A pending file was written: its source id stands for it from now on, so that the
        index keeps no file's rows once they are in the store (memory follows what is kept)."""
        sid = f.sid
        if self.by_stat.get(f.facts.file_stat) is f:
            self.by_stat[f.facts.file_stat] = sid
        entry = self.by_sha.get(f.facts.sha256)
        if entry is not None and entry[0] is f:
            entry[0] = sid
        self.formats[sid] = f.fmt

    def noted(self, sha: str, file_stat: str) -> None:
        """The stat of a file found by its content was written to its ``sources`` row."""
        entry = self.by_sha[sha]
        if entry[1]:
            entry[1] = False
            self.by_stat.setdefault(file_stat, entry[0])


@dataclass(eq=False)
class Pending:
    """A file read into memory, waiting for its batch to be written."""

    low: Staged
    facts: FileFacts  # its ``sources`` row's columns beside its accounting
    display: str
    strict: bool
    source_id: int | None = None  # given when written
    after: After | None = None  # what follows from the read once it is written

    @property
    def fmt(self) -> str:
        return self.facts.format

    @property
    def size(self) -> int:
        return self.facts.bytes

    @property
    def sid(self) -> int:
        assert self.source_id is not None
        return self.source_id

    report: Any = None  # the file's report (its accounting and id filled in when written)
    aliases: list[Any] = field(default_factory=list)  # reports of the same file, "unchanged"


def _check(f: Pending) -> None:
    """The file's accounting and ``--strict``, checked before it is written: neither depends on
    what the store holds (each record is loaded or a duplicate, whichever it turns out)."""
    low, res = f.low, f.low.result
    check_accounting(
        LoadResult(
            rows_read=res.rows_read,
            rows_loaded=low.call_records() + low.message_records(),
            rows_rejected=res.rows_rejected + len(low.rejects),
            rows_duplicate=res.rows_duplicate,
            rows_skipped=res.rows_skipped,
        ),
        f.display,
    )
    if f.strict and low.rejects:
        line, reason, _ = min(low.rejects, key=lambda r: (r[0] is None, r[0] or 0))
        raise strict_error(f.display, len(low.rejects), line, reason)


def rounds(files: list[Pending]) -> list[list[Pending]]:
    """The files in rounds written one after the other: no two files of a round share a key
    (``_keys``), and a file comes in a later round than every file before it that it shares
    one with. Each round is settled at once, and a file still meets what the files before
    it stored exactly as if each had been loaded on its own (most batches: one round)."""
    last: dict[tuple[str, ...], int] = {}  # key -> the round of the last file holding it
    out: list[list[Pending]] = []
    for f in files:
        keys = f.low.keys()
        n = max((last[k] + 1 for k in keys if k in last), default=0)
        last.update(dict.fromkeys(keys, n))
        out.extend([] for _ in range(n + 1 - len(out)))
        out[n].append(f)
    return out


def _write_round(sink: Sink, files: list[Pending]) -> None:
    """Files sharing no key written through the sink, which settles them against the store
    (and so against the rounds before); their accounting completed."""
    gone: list[tuple[int, str]] = []
    for fmt, prefix in sorted({(f.fmt, f.low.call_prefix) for f in files}):
        mine = [
            f
            for f in files
            if f.fmt == fmt and f.low.call_prefix == prefix and f.low.call_table.num_rows
        ]
        if not mine:
            continue
        table = pa.concat_tables([in_order(f.low.call_table, f.sid) for f in mine])
        settled = sink.calls(fmt, prefix, table)
        for f in mine:
            dup = settled.dup.get(f.sid, 0)
            f.low.result.calls = settled.calls.get(f.sid, 0)
            f.low.result.rows_duplicate += dup
            f.low.result.rows_loaded += f.low.call_records() - dup
        gone += settled.gone
    tables = [in_order(f.low.message_table, f.sid) for f in files if f.low.message_table.num_rows]
    found = sink.messages(pa.concat_tables(tables), gone) if tables else {}
    for f in files:
        res = f.low.result
        res.rows_duplicate += found.get(f.sid, 0)
        res.rows_loaded += f.low.message_records() - found.get(f.sid, 0)
        res.rows_rejected += len(f.low.rejects)
        check_accounting(res, f.display)


def _write(store: Store, files: list[Pending]) -> None:
    """The checked files written, in order (inside the caller's transaction)."""
    sink = Sink(store.engine)
    ids = store.engine.rows("SELECT nextval('source_id_seq') FROM range(?)", [len(files)])
    for f, (source_id,) in zip(files, sorted(ids), strict=True):
        f.source_id = int(source_id)
    for group in rounds(files):
        _write_round(sink, group)
    sink.rejects([(f.sid, *r) for f in files for r in f.low.rejects])
    sink.sources([SourceRow.of(f.sid, f.low.result, f.facts) for f in files])
    settle_all(store.engine, [(f.after, f.sid) for f in files if f.after is not None])
    cache.bump(store, cache.DATA)


class _Commit(threading.Thread):
    """A batch's ``COMMIT`` under way: DuckDB writes it to disk (without holding Python's lock)
    while the next files are read. Nothing else uses the connection until it is waited for."""

    def __init__(self, store: Store) -> None:
        super().__init__(name="llm-forensics-commit")
        self.engine = store.engine
        self.error: BaseException | None = None
        self.start()

    def run(self) -> None:
        try:
            self.engine.run("COMMIT")
        except BaseException as exc:  # raised in the reading thread, by ``Batch.wait``
            self.error = exc


class Batch:
    """Files read into memory, written together by ``commit``."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.files: list[Pending] = []
        self.bytes = 0
        self.writing: _Commit | None = None

    def add(self, f: Pending) -> None:
        self.files.append(f)
        self.bytes += f.size

    def full(self) -> bool:
        return self.bytes >= BATCH_BYTES or len(self.files) >= BATCH_FILES

    def wait(self, quiet: bool = False) -> None:
        """Wait until the batch committed ``later`` is written, and raise its error (unless
        ``quiet``: another error is on its way). Ctrl-C waits for it too, then stops."""
        writing, self.writing = self.writing, None
        if writing is None:
            return
        interrupted = False
        while writing.is_alive():
            try:
                writing.join()
            except KeyboardInterrupt:
                interrupted = True
        if quiet:
            return
        if writing.error is not None:
            raise writing.error
        if interrupted:
            raise KeyboardInterrupt

    def commit(self, later: bool = False) -> list[Pending]:
        """Settle and write the files in one transaction; returns them, each with its source
        id. The first file that fails is not written, the ones before it are: its error is
        raised once they are committed (the ones after it are not written either). With
        ``later``, the transaction is committed while the caller reads on (``wait``); the
        store is not used before, as any commit waits for the one before it."""
        self.wait()
        files, self.files, self.bytes = self.files, [], 0
        if not files:
            return []
        failure: ForensicsError | None = None
        done: list[Pending] = []
        self.store.engine.run("BEGIN TRANSACTION")  # all or nothing, as ``Store.transaction``
        try:
            for f in files:
                try:
                    _check(f)
                except ForensicsError as exc:
                    failure = exc
                    break
                except Exception as exc:
                    failure = LoaderBug(
                        f"could not be loaded: unexpected {type(exc).__name__}: "
                        f"{str(exc).splitlines()[0] if str(exc) else ''} "
                        "(a bug in llm-forensics; nothing from this file was stored)",
                        path=f.display,
                    )
                    failure.__cause__ = exc
                    break
                done.append(f)
            if done:
                _write(self.store, done)
        except BaseException as exc:
            # Ctrl-C in a statement aborts the transaction, and the statements after it (an
            # ``unregister`` in a ``finally``) fail for that: it is Ctrl-C all the same.
            self.store.rollback()
            if interrupted(exc) and not isinstance(exc, KeyboardInterrupt):
                raise KeyboardInterrupt from None
            raise
        try:
            self.writing = _Commit(self.store) if later and failure is None else None
        except RuntimeError:  # no thread to be had: committed here
            self.writing = None
        if self.writing is None:
            self.store.commit()
        if failure is not None:
            raise failure
        return done
