"""Many small agent-log files loaded in one transaction, each still whole or not at all.

A file's load costs a few statements of fixed cost (its inserts, its duplicate checks, its
``sources`` row, a commit): on a history of thousands of small transcripts that cost is most of
the time. So the files of a format that allows it (``BATCH = True``) are read one by one into
memory (their ``Lowering`` writes nothing), and a batch of them is settled and written at once:

* the store is asked once per batch what it holds of the batch's calls, replayed responses and
  message keys; each file's duplicates are then settled in file order, in memory, exactly as
  the per-file load settles them against the store (a file sees what the files before it in
  the batch stored);
* each file's accounting and ``--strict`` are checked as in the per-file load; the first file
  that fails is not written, the files before it are, and its error is raised after they are
  committed (the per-file load's "the first error stops", file for file);
* the batch's rows go in through one insert per table, in one transaction: Ctrl-C or a killed
  process leaves the store as before the batch.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pyarrow as pa

from analyzer.engine import cache
from analyzer.engine.store import Store, interrupted
from analyzer.errors import ForensicsError, LoaderBug, StrictRejectError
from analyzer.ingest.base import LoadResult
from analyzer.ingest.lowering import insert_calls
from analyzer.ingest.staged import Staged
from analyzer.model.pricing import PriceKey, price_table

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
        rows = store.con.execute(
            "SELECT source_id, sha256, file_stat FROM sources ORDER BY source_id"
        ).fetchall()
        for source_id, sha, file_stat in rows:
            self.add(source_id, sha, file_stat)

    def add(self, source: int | Pending, sha: str, file_stat: str | None) -> None:
        """A file stored (or pending) after all those already here: the first one wins."""
        if file_stat is not None:
            self.by_stat.setdefault(file_stat, source)
        self.by_sha.setdefault(sha, [source, file_stat is None])

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
    fmt: str
    name: str  # as the store names it
    display: str
    digest: str
    file_stat: str
    size: int
    encoding: str
    options: str  # JSON
    strict: bool
    at: datetime
    source_id: int | None = None  # given when written

    @property
    def sid(self) -> int:
        assert self.source_id is not None
        return self.source_id

    report: Any = None  # the file's report (its accounting and id filled in when written)
    aliases: list[Any] = field(default_factory=list)  # reports of the same file, "unchanged"
    calls: list[dict[str, Any]] = field(default_factory=list)  # to insert
    messages: list[dict[str, Any]] | None = field(default_factory=list)  # None: all
    to_price: set[PriceKey] = field(default_factory=set)
    deleted: list[str] = field(default_factory=list)  # stored calls it replaces (grown)
    replaced: list[dict[str, Any]] = field(default_factory=list)  # calls of earlier files


@dataclass
class _Call:
    """A call the store holds, or an earlier file of the batch inserts."""

    record_count: int | None
    call_id: str
    response_id: str | None
    row: dict[str, Any] | None = None  # the row of the batch that inserts it


class _Known:
    """What the store holds of the batch's keys, and what the batch added since."""

    def __init__(self, store: Store, files: list[Pending]) -> None:
        con = store.con
        self.calls: dict[tuple[str, str], list[_Call]] = {}
        self.responses: dict[tuple[str, str], set[str]] = {}
        # The (session_id, idx) the store holds of the batch's sessions (and possibly more of
        # them), and those the files settled so far added; ``sessions`` holds every session of
        # those keys, also of the files whose keys are not put in ``messages`` until a later
        # file shares a session with them (``unindexed``).
        self.messages: set[tuple[str, int]] = set()
        self.sessions: set[str] = set()
        self.unindexed: list[Staged] = []
        for fmt in sorted({f.fmt for f in files}):
            lows = [f.low for f in files if f.fmt == fmt]
            natives = {r.get("native_id") for low in lows for r in low.calls}
            keys = pa.table({"k": pa.array(sorted(n for n in natives if isinstance(n, str)))})
            replayed = {r.get("response_id") for low in lows for r in low.calls if r.get("replay")}
            rids = pa.table({"k": pa.array(sorted(r for r in replayed if isinstance(r, str)))})
            con.register("lf_keys", keys)
            con.register("lf_rids", rids)
            try:
                for native, count, call_id, rid in con.execute(
                    """SELECT native_id, record_count, call_id, response_id FROM calls
                       WHERE format = $fmt AND native_id IN (SELECT k FROM lf_keys)""",
                    {"fmt": fmt},
                ).fetchall():
                    self.calls.setdefault((fmt, native), []).append(_Call(count, call_id, rid))
                for rid, native in con.execute(
                    """SELECT response_id, native_id FROM calls
                       WHERE format = $fmt AND native_id IS NOT NULL
                         AND response_id IN (SELECT k FROM lf_rids)""",
                    {"fmt": fmt},
                ).fetchall():
                    self.responses.setdefault((fmt, rid), set()).add(native)
            finally:
                con.unregister("lf_keys")
                con.unregister("lf_rids")
        # A message is a duplicate if its key is stored: the stored keys of the batch's
        # sessions are all that can match (none, when the sessions are new to the store).
        sessions = {sid for f in files for sid in f.low.keyed_sessions()}
        if (
            not sessions
            or not con.execute("SELECT count(*) FROM (FROM messages LIMIT 1)").fetchall()[0][0]
        ):
            return
        con.register("lf_keys", pa.table({"s": pa.array(sorted(sessions), pa.string())}))
        try:
            self.messages = set(
                con.execute(
                    """SELECT session_id, idx FROM messages
                       WHERE idx IS NOT NULL AND session_id IN (SELECT s FROM lf_keys)"""
                ).fetchall()
            )
        finally:
            con.unregister("lf_keys")
        self.sessions = {sid for sid, _ in self.messages}

    def index(self) -> None:
        """The keys of the files settled without them put in ``messages``."""
        for low in self.unindexed:
            self.messages.update(k for k in map(_message_key, low.messages) if k is not None)
        self.unindexed = []

    def replayed(self, fmt: str, ids: list[str], natives: list[str]) -> set[str]:
        """``Lowering._stored_replays``, answered from memory."""
        others = set(natives)
        return {rid for rid in ids if self.responses.get((fmt, rid), set()) - others}


def _message_key(m: dict[str, Any]) -> tuple[str, int] | None:
    """A message's (session_id, idx) as the store compares it (NULL never matches)."""
    sid, idx = m.get("session_id"), m.get("idx")
    if sid.__class__ is str and idx.__class__ is int:
        return sid, idx
    if isinstance(sid, str) and isinstance(idx, int) and not isinstance(idx, bool):
        return str(sid), int(idx)
    return None


def _settle(f: Pending, known: _Known) -> None:
    """The file's duplicates settled as ``Lowering.finish`` settles them against the store
    (the store being what it held before the batch and what the files before this one
    added), and its accounting checked."""
    low, res = f.low, f.low.result
    if low.calls:
        f.to_price = low.settle_calls(lambda ids, natives: known.replayed(f.fmt, ids, natives))
        dup = 0
        for row in low.calls:
            native = row.get("native_id")
            entries = known.calls.get((f.fmt, native), []) if isinstance(native, str) else []
            kept = []
            for e in entries:
                n_new: Any = row.get("n_records")  # an int (else a bug: a LoaderBug)
                parts_new = row["parts"]
                if e.record_count is not None and parts_new > e.record_count:
                    dup += min(n_new, e.record_count)
                    if e.row is None:
                        f.deleted.append(e.call_id)
                    else:
                        f.replaced.append(e.row)
                    if e.response_id is not None:
                        known.responses.get((f.fmt, e.response_id), set()).discard(str(native))
                else:
                    dup += n_new
                    kept.append(e)
            if kept:
                continue
            f.calls.append(row)
            if isinstance(native, str):
                rid = row.get("response_id")
                rid = rid if isinstance(rid, str) else None
                call = _Call(row["parts"], low.call_id(native), rid, row)
                known.calls[(f.fmt, native)] = [call]
                if rid is not None:
                    known.responses.setdefault((f.fmt, rid), set()).add(native)
        total = sum(int(c.get("n_records") or 0) for c in low.calls)
        res.rows_duplicate += int(dup)
        res.rows_loaded += total - int(dup)
    if low.message_count():
        dup = 0
        own = low.message_sessions()
        if own.isdisjoint(known.sessions):
            # No session of this file has a key stored or added before it: nothing is a
            # duplicate, and its keys are only needed should a later file share a session.
            f.messages = None  # all of them
            known.sessions.update(sid for sid in own if isinstance(sid, str))
            known.unindexed.append(low)
        else:
            known.index()
            added = []
            fresh: list[dict[str, Any]] = []
            stored = known.messages
            for m, key in zip(low.messages, map(_message_key, low.messages), strict=True):
                if key is not None and key in stored:
                    dup += int(m.get("n_records") or 0)
                else:
                    fresh.append(m)
                    if key is not None:
                        added.append(key)
            f.messages = fresh
            stored.update(added)
            known.sessions.update(sid for sid, _ in added)
        total = low.message_records()
        res.rows_duplicate += dup
        res.rows_loaded += total - dup
    res.rows_rejected += len(low.rejects)
    check_accounting(res, f.display)
    if f.strict and low.rejects:
        line, reason, _ = min(low.rejects, key=lambda r: (r[0] is None, r[0] or 0))
        raise strict_error(f.display, len(low.rejects), line, reason)


def _write(store: Store, files: list[Pending]) -> None:
    """The settled files' rows, one insert per table (inside the caller's transaction)."""
    con = store.con
    ids = sorted(
        r[0]
        for r in con.execute(
            "SELECT nextval('source_id_seq') FROM range(?)", [len(files)]
        ).fetchall()
    )
    replaced = {id(row) for f in files for row in f.replaced}
    deleted = sorted({c for f in files for c in f.deleted})
    if deleted:
        con.execute("UPDATE calls SET superseded_by = NULL WHERE superseded_by IN ?", [deleted])
        con.execute("DELETE FROM calls WHERE call_id IN ?", [deleted])
    rejects: list[tuple[int, int | None, str, str | None]] = []
    for f, source_id in zip(files, ids, strict=True):
        f.source_id = source_id
        rejects += [(source_id, *r) for r in f.low.rejects]
    for fmt, prefix in sorted({(f.fmt, f.low.call_prefix) for f in files}):
        tables = [
            t
            for f in files
            if f.fmt == fmt
            and (t := f.low.kept_calls([r for r in f.calls if id(r) not in replaced], f.sid))
            is not None
        ]
        if not tables:
            continue
        to_price = set().union(*(f.to_price for f in files if f.fmt == fmt))
        con.register("lf_call_batch", pa.concat_tables(tables).combine_chunks())
        con.register("lf_price", price_table(to_price))
        try:
            insert_calls(con, prefix, fmt, None)
        finally:
            con.unregister("lf_call_batch")
            con.unregister("lf_price")
    tables = [t for f in files if (t := f.low.kept_messages(f.messages, f.sid)) is not None]
    if tables:
        con.register("lf_msg_batch", pa.concat_tables(tables))
        try:
            con.execute(
                "INSERT INTO messages BY NAME SELECT * EXCLUDE (n_records) FROM lf_msg_batch"
            )
        finally:
            con.unregister("lf_msg_batch")
    if rejects:
        cols = list(zip(*rejects, strict=True))
        con.register(
            "lf_rejects",
            pa.table(
                {
                    "source_id": pa.array(cols[0], pa.int64()),
                    "line": pa.array(cols[1], pa.int64()),
                    "reason": pa.array(cols[2], pa.string()),
                    "excerpt": pa.array(cols[3], pa.string()),
                }
            ),
        )
        try:
            con.execute("INSERT INTO rejects BY NAME SELECT * FROM lf_rejects")
        finally:
            con.unregister("lf_rejects")
    res = [f.low.result for f in files]
    con.register(
        "lf_sources",
        pa.table(
            {
                "source_id": pa.array(ids, pa.int64()),
                "path": pa.array([f.name for f in files], pa.string()),
                "format": pa.array([f.fmt for f in files], pa.string()),
                "sha256": pa.array([f.digest for f in files], pa.string()),
                "bytes": pa.array([f.size for f in files], pa.int64()),
                "ingested_at": pa.array([f.at for f in files], pa.timestamp("us")),
                "rows_read": pa.array([r.rows_read for r in res], pa.int64()),
                "rows_loaded": pa.array([r.rows_loaded for r in res], pa.int64()),
                "rows_rejected": pa.array([r.rows_rejected for r in res], pa.int64()),
                "rows_duplicate": pa.array([r.rows_duplicate for r in res], pa.int64()),
                "rows_skipped": pa.array([r.rows_skipped for r in res], pa.int64()),
                "skipped_kinds": pa.array([json.dumps(r.skipped_kinds) for r in res], pa.string()),
                "encoding": pa.array([f.encoding for f in files], pa.string()),
                "options": pa.array([f.options for f in files], pa.string()),
                "file_stat": pa.array([f.file_stat for f in files], pa.string()),
            }
        ),
    )
    try:
        con.execute("INSERT INTO sources BY NAME SELECT * FROM lf_sources")
    finally:
        con.unregister("lf_sources")
    cache.bump(store, cache.DATA)


class _Commit(threading.Thread):
    """A batch's ``COMMIT`` under way: DuckDB writes it to disk (without holding Python's lock)
    while the next files are read. Nothing else uses the connection until it is waited for."""

    def __init__(self, store: Store) -> None:
        super().__init__(name="llm-forensics-commit")
        self.con = store.con
        self.error: BaseException | None = None
        self.start()

    def run(self) -> None:
        try:
            self.con.execute("COMMIT")
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
        con = self.store.con
        con.execute("BEGIN TRANSACTION")  # all or nothing, as ``Store.transaction``
        try:
            known = _Known(self.store, files)
            for f in files:
                try:
                    _settle(f, known)
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
