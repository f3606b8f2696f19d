"""The DuckDB store: opening it, its schema, and one transaction per ingested file."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

from analyzer.console import Console, current
from analyzer.engine.default_store import DB_ENV, this_machine
from analyzer.engine.engine import OFFLINE as OFFLINE
from analyzer.engine.engine import Engine, Params
from analyzer.engine.files import os_error
from analyzer.errors import ForensicsError
from analyzer.model.formatting import money

if TYPE_CHECKING:
    from analyzer.model.timewindow import Window

MEMORY_ENV = "LLM_FORENSICS_MEMORY_LIMIT"
# DuckDB's own default is 80% of the machine; a forensics run shares the machine with the user's
# other work, so it holds itself to this and spills the rest to disk. The process as a whole
# stays under 2 GB: DuckDB's limit covers its buffers, and about 0.2 GB more (Python, the
# allocations DuckDB does not count) comes on top of it (10 million rows: peak RSS 1.68 GB at a
# limit of 1.5GB, 2.18 GB at 2GB).
DEFAULT_MEMORY_LIMIT = "1.7GB"
SCHEMA_VERSION = "13"


@dataclass(frozen=True)
class Migration:
    """One step of the store format: a store of format ``to - 1`` becomes one of format ``to``
    by the SQL unit ``unit`` (a format that only gained tables is upgraded by ``schema.sql``,
    which creates every table a store lacks)."""

    to: int
    unit: str
    attribute: bool = False  # then attribute the kept incidents (attribute.sql), as detect does
    # A unit giving (calls, dollars) of what the step cannot bring up to date from what the
    # store holds: said in one warning (``_kept_as_priced``), with what the user can do.
    left_as_was: str | None = None


# The store formats this version upgrades in place when it opens them for writing, one step
# after another from the store's own format: 6 had no ``bill_buckets``, 7 no ``runs``, 8 no
# output estimates on calls and no attribution on incidents, 9 no machine, 10 no resume points
# (``resume_points``), 11 no meaning of messages (``messages.meaning_key``), 12 no labels
# of calls (``calls.labels``). A new format
# is one more step.
MIGRATIONS: tuple[Migration, ...] = (
    Migration(7, "schema.sql"),
    Migration(8, "schema.sql"),
    Migration(
        9, "store/upgrade-to-9.sql", attribute=True, left_as_was="store/placeholders-before-9.sql"
    ),
    Migration(10, "store/upgrade-to-10.sql", attribute=True),
    Migration(11, "store/upgrade-to-11.sql"),
    Migration(12, "store/upgrade-to-12.sql"),
    Migration(13, "store/upgrade-to-13.sql"),
)


def migrations_from(found: str) -> list[Migration]:
    """The steps that bring a store of format ``found`` to :data:`SCHEMA_VERSION`, in order
    (none for a format this version does not upgrade).

    >>> [m.to for m in migrations_from("7")], migrations_from("5"), migrations_from("13")
    ([8, 9, 10, 11, 12, 13], [], [])
    """
    if not found.isdigit() or int(found) not in {m.to - 1 for m in MIGRATIONS}:
        return []
    return [m for m in MIGRATIONS if m.to > int(found)]


class Store:
    """An open store. ``con`` is the DuckDB connection; the tables are in ``sql/schema.sql``."""

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        path: str,
        read_only: bool = False,
        console: Console | None = None,
    ) -> None:
        self.con = con
        self.engine = Engine(con)  # what runs SQL on it (``analyzer.engine.engine``)
        self.path = path
        self.read_only = read_only
        self.window = ""  # the time window every reader sees (see ``restrict``), for cache keys
        # Results computed on a store opened read-only, kept when it closes if the file can
        # then be written (see ``close``): (cache name, key, payload).
        self.pending: list[tuple[str, str, str]] = []
        self.keep_cache = True  # false: a read-only store's file is never written
        # What the work on this store says (warnings once, notes): the console given, else the
        # one of the run under way (a store opened outside any run gets one of its own).
        self.console = console or current()

    def restrict(
        self, condition: str, key: str, incidents: str | None = None, buckets: str | None = None
    ) -> None:
        """Let every reader of this connection see only the calls (and messages) whose time
        meets ``condition`` (an SQL predicate over ``ts``), with ``incidents`` (a predicate
        over the incidents table) only those incidents, and with ``buckets`` (over
        ``bill_buckets``) only those bill buckets: temporary tables and views of the same
        names shadow the stored ones (tables, so that readers joining on ``rowid`` still can).
        Done after loading and linking: what is written after goes to the stored tables
        (incidents) or nowhere (a store opened read-only)."""
        db = str(self.scalar("SELECT current_database()")).replace('"', '""')
        self.engine.run("store/restrict_calls.sql", db=db, condition=condition)
        if buckets is not None:
            self.engine.run("store/restrict_buckets.sql", db=db, condition=buckets)
        if incidents is not None:
            self.engine.run("store/restrict_incidents.sql", db=db, condition=incidents)
        self.window = key

    def see_only(self, window: Window | None, incidents: bool = True) -> None:
        """Let every later step see only the calls in ``window`` (and, with ``incidents``, the
        incidents that start in it: for commands that read the incidents found earlier)."""
        if window:
            self.restrict(
                window.predicate(),
                window.key(),
                incidents=window.predicate("start_ts") if incidents else None,
                buckets=window.predicate("bucket_start"),
            )

    def close(self) -> None:
        self.con.close()
        # (A store that cannot be written is read as it is: nothing is kept.)
        kept = self.pending and self.keep_cache and self.path != ":memory:"
        if kept and unwritable(self.path) is None:
            _keep(self.path, self.pending)
        self.pending = []

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def machine(self, name: str) -> Iterator[None]:
        """The files and calls stored inside are marked as read on machine ``name`` (the
        machine columns' default, schema.sql), this machine's again afterwards."""
        self.engine.run("SET VARIABLE lf_machine = ?", [name])
        try:
            yield
        finally:
            with suppress(duckdb.Error):  # (a connection Ctrl-C left aborted sets it on open)
                self.engine.run("SET VARIABLE lf_machine = ?", [this_machine()])

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """All or nothing: on any exception the store is left as it was. Ctrl-C, whatever
        form DuckDB gave it (see ``interrupted``), comes out as ``KeyboardInterrupt``."""
        self.engine.run("BEGIN TRANSACTION")
        try:
            yield
        except BaseException as exc:
            self.rollback()
            if interrupted(exc) and not isinstance(exc, KeyboardInterrupt):
                raise KeyboardInterrupt from None
            raise
        self.commit()

    def commit(self) -> None:
        """``COMMIT`` the transaction under way; should Ctrl-C stop it, what it did not
        commit is rolled back and ``KeyboardInterrupt`` raised."""
        try:
            self.engine.run("COMMIT")
        except BaseException as exc:
            self.rollback()
            if interrupted(exc):
                raise KeyboardInterrupt from None
            raise

    def rollback(self) -> None:
        """Roll back the transaction under way, if there is one (after an error or Ctrl-C:
        a transaction a stopped statement aborted takes nothing else until then)."""
        with suppress(duckdb.Error):  # none under way (or the connection is gone)
            self.engine.run("ROLLBACK")

    def one(self, sql: str, params: Params = None) -> tuple[Any, ...] | None:
        """The first row, or None (``Engine.one``)."""
        return self.engine.one(sql, params)

    def scalar(self, sql: str, params: Params = None) -> Any:
        return self.engine.scalar(sql, params)

    def memory_limit(self) -> float | None:
        """DuckDB's memory limit in bytes (None if it cannot be read)."""
        text = str(self.scalar("SELECT current_setting('memory_limit')") or "").strip()
        m = re.fullmatch(r"([\d.]+)\s*(bytes|[KMGT]i?B|B)", text)
        if m is None:
            return None
        unit = m.group(2)
        scale = 1 if unit in ("bytes", "B") else 1024 if "i" in unit else 1000
        return float(m.group(1)) * float(scale) ** (" KMGT".index(unit[0]) if scale > 1 else 0)

    def compress_if_large(self, database: str) -> None:
        """Compress an attached in-memory ``database`` (attached with ``COMPRESS``: it
        compresses what it checkpoints) when the in-memory tables take more than half the
        memory limit, so what is scanned again and again stays in memory instead of being read
        back from disk each time. Strings are left as they are (compressing them costs more
        time than it saves here)."""
        used = self.scalar("store/memory_used.sql")
        limit = self.memory_limit()
        if limit is None or float(used or 0) <= limit / 2:
            return
        was = self.scalar("SELECT current_setting('disabled_compression_methods')")
        self.engine.run("SET disabled_compression_methods = 'dict_fsst'")
        try:
            self.engine.run(f"CHECKPOINT {database}")
        finally:
            self.engine.run("SET disabled_compression_methods = $was", {"was": was or ""})


def interrupted(exc: BaseException | None) -> bool:
    """Whether ``exc`` is Ctrl-C, in any of the forms it reaches Python: ``KeyboardInterrupt``,
    DuckDB's ``InterruptException`` or its ``RuntimeError("Query interrupted")`` (a statement
    Ctrl-C stopped), DuckDB's error for a ``KeyboardInterrupt`` raised in Python code it ran
    (reading a registered Arrow table: "exporting a stream ... failed: KeyboardInterrupt"), or
    an error raised because of one (a statement on the transaction the stopped one aborted:
    "Current transaction is aborted", say from a ``finally``).

    >>> interrupted(RuntimeError("Query interrupted")), interrupted(RuntimeError("other"))
    (True, False)
    """
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, KeyboardInterrupt | duckdb.InterruptException):
            return True
        if isinstance(exc, RuntimeError) and "interrupted" in str(exc).lower():
            return True
        if isinstance(exc, duckdb.Error) and "KeyboardInterrupt" in str(exc):
            return True
        if exc.__cause__ is not None or exc.__suppress_context__:
            exc = exc.__cause__  # (``raise ... from None``: what it replaced is no cause)
        else:
            exc = exc.__context__
    return False


def _prepare(
    con: duckdb.DuckDBPyConnection,
    read_only: bool,
    temp_dir: str | None,
    console: Console | None = None,
) -> None:
    engine = Engine(con)
    # Bounded memory: what does not fit spills to a temporary folder (beside a store file,
    # DuckDB's own ``<store>.tmp``; for a throwaway store, the folder given).
    limit = os.environ.get(MEMORY_ENV) or DEFAULT_MEMORY_LIMIT
    try:
        engine.run("store/set.sql", setting="memory_limit", value=limit.replace("'", ""))
    except duckdb.Error as exc:
        raise ForensicsError(
            f"${MEMORY_ENV} = {limit!r} is not a memory size DuckDB understands (e.g. 2GB)"
        ) from exc
    if temp_dir is not None:
        engine.run("store/set.sql", setting="temp_directory", value=temp_dir.replace("'", "''"))
    # Timestamps are stored in UTC; make every conversion on this connection UTC as well, so
    # the user's own TimeZone setting can never shift what is stored or shown.
    engine.run("SET TimeZone = 'UTC'")
    # Track query progress (read by our own progress display) without DuckDB printing its bar.
    engine.run("SET enable_progress_bar = true")
    engine.run("SET enable_progress_bar_print = false")
    # What the rows inserted on this connection are marked with (schema.sql: the machine
    # columns' default); ``Store.machine`` names another for an ingest.
    engine.run("SET VARIABLE lf_machine = ?", [this_machine()])
    found = _our_format(engine)
    steps = [] if found is None else migrations_from(str(found))
    if steps and not read_only:
        _migrate(engine, steps, console or current())
    elif steps:
        raise ForensicsError(
            f"this store was written by an earlier version of llm-forensics (store format "
            f"{found}); `llm-forensics ingest` into it once upgrades it to format "
            f"{SCHEMA_VERSION}"
        )
    elif found is not None and found != SCHEMA_VERSION:
        newer = str(found).isdigit() and int(found) > int(SCHEMA_VERSION)
        raise ForensicsError(
            f"this store was written by {'a newer' if newer else 'another'} version of "
            f"llm-forensics (store format {found}, this version reads {SCHEMA_VERSION}) and was "
            "left untouched: "
            + (
                "upgrade llm-forensics to read it, or give --db another file"
                if newer
                else "give --db another file"
            )
        )
    if not read_only:
        engine.run("schema.sql")
        engine.run(
            "INSERT INTO meta VALUES ('schema_version', ?) ON CONFLICT (key) DO NOTHING",
            [SCHEMA_VERSION],
        )
    engine.run("classify.sql")


def _migrate(engine: Engine, steps: list[Migration], console: Console) -> None:
    """Upgrade a store of an earlier format in place: each step in order, then the schema's
    views over the widened tables, the kept incidents attributed as `detect` attributes the
    ones it records (when a step asks), and the store's new format. What a step cannot bring
    up to date is said in one warning."""
    for step in steps:
        engine.run(step.unit)
        if step.left_as_was is not None:
            left = engine.one(step.left_as_was)
            if left is not None and left[0]:
                console.warn(_kept_as_priced(steps[0].to - 1, int(left[0]), Decimal(left[1])))
    engine.run("schema.sql")
    if any(step.attribute for step in steps):
        kept = [r[0] for r in engine.rows("SELECT incident_id FROM incidents ORDER BY incident_id")]
        if kept:
            engine.run("attribute.sql", {"ids": kept})
    engine.run("UPDATE meta SET value = ? WHERE key = 'schema_version'", [SCHEMA_VERSION])


def _kept_as_priced(found: int, calls: int, usd: Decimal) -> str:
    """The warning for the Claude Code calls an upgrade from format 8 or earlier leaves priced
    at their logged placeholder output (``store/placeholders-before-9.sql``)."""
    return (
        f"upgraded from store format {found}: {calls:,} Claude Code "
        f"{'call keeps' if calls == 1 else 'calls keep'} the price of a logged placeholder "
        f"output count ({money(usd)}, cost_basis estimated); a new read prices them at an "
        "estimate of what they wrote (estimated_output), which this store does not hold: to "
        "reprice them, read their files into a new store (`llm-forensics ingest --db "
        "NEW.duckdb FOLDER`; for the default store, move it away and run any command), "
        "keeping this one for the files deleted since"
    )


def _our_format(engine: Engine) -> Any:
    """The store format written in the database's ``meta`` (None for a new, empty database).
    A database with tables but no format of ours is another program's: it is refused before
    anything is written into it."""
    tables = sorted(str(r[0]) for r in engine.rows("store/tables.sql"))
    found = None
    if "meta" in tables:
        try:
            found = engine.one("SELECT value FROM meta WHERE key = 'schema_version'")
        except duckdb.Error:
            found = None
    if found is not None:
        return found[0]
    if tables:
        shown = ", ".join(tables[:5]) + (f" and {len(tables) - 5} more" if len(tables) > 5 else "")
        raise ForensicsError(
            f"not an llm-forensics store: this DuckDB database holds other tables ({shown}) "
            "and none of ours; it was left untouched (give --db a new file)"
        )
    return None


def open_store(
    path: str | Path,
    read_only: bool = False,
    temp_dir: str | None = None,
    must_exist: bool = False,
    console: Console | None = None,
) -> Store:
    """Open (creating if needed, unless ``must_exist``) the store at ``path``; ``:memory:``
    gives a throwaway one (give it ``temp_dir`` to spill to when it outgrows the memory
    limit). A store that must exist and does not is "no store here"."""
    path = str(path)
    if path != ":memory:":
        _checked(path, read_only, must_exist)
    try:
        con = duckdb.connect(path, read_only=read_only, config=OFFLINE)
    except duckdb.IOException as exc:
        text = str(exc)
        refused = next((plain for words, plain in _REFUSED.items() if words in text), None)
        if refused is not None and not read_only:
            raise StoreReadOnly(refused, path) from exc
        if "lock" in text.lower():
            holder = _holder(text)
            raise StoreInUse(
                f"the database is in use by {holder}: run again when it has finished",
                holder,
                path=path,
            ) from exc
        if "not a valid duckdb database" in text.lower():
            raise ForensicsError(
                "not a usable llm-forensics database (not a DuckDB file, or a damaged one); "
                "it was left untouched: move it away, or give --db another file",
                path=path,
            ) from exc
        raise ForensicsError(
            f"cannot open the database: {text.splitlines()[0]}", path=path
        ) from exc
    except duckdb.Error as exc:
        raise ForensicsError(
            f"not a usable llm-forensics database ({str(exc).splitlines()[0]}); it was left "
            "untouched: move it away, or give --db another file",
            path=path,
        ) from exc
    try:
        _prepare(con, read_only, temp_dir, console)
    except ForensicsError as exc:
        con.close()
        exc.path = exc.path or path
        raise
    except BaseException:
        con.close()
        raise
    return Store(con, path, read_only=read_only, console=console)


# DuckDB's words when the system refuses to let it write the store, in the user's.
_REFUSED = {
    "Read-only file system": "the file system is read-only",
    "Permission denied": "permission denied",
}


def _checked(path: str, read_only: bool, must_exist: bool) -> None:
    """Refuse, before DuckDB opens it (a named pipe would block it for ever), a path that is
    no store file; a store that cannot be written, when it is to be written; and a missing one
    that must exist."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if read_only or must_exist:
            raise ForensicsError(
                "no store here (run `llm-forensics ingest` first)", path=path
            ) from None
        return
    except OSError as exc:
        raise os_error(exc, path, "cannot open the store") from exc
    if not stat.S_ISREG(st.st_mode):
        raise ForensicsError(
            f"not a store: {_kind(st.st_mode)}, not a file (give --db or ${DB_ENV} a store "
            "file, or a new name to make one)",
            path=path,
        )
    why = None if read_only else unwritable(path)
    if why is not None:
        raise StoreReadOnly(why, path)


def _kind(mode: int) -> str:
    """What a path that is no regular file is, for a person."""
    if stat.S_ISDIR(mode):
        return "it is a folder"
    if stat.S_ISFIFO(mode):
        return "it is a named pipe (FIFO)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "it is a device"
    if stat.S_ISSOCK(mode):
        return "it is a socket"
    return "it is a special file"


def unwritable(path: str) -> str | None:
    """Why the store file at ``path`` cannot be written, or None when it can: DuckDB writes
    the file and, beside it in its folder, its journal (``<store>.wal``). A read-only file
    system, a file or folder the user may not write."""
    file = Path(path)
    for target, what in ((file, "the file"), (file.parent, "its folder")):
        if os.access(target, os.W_OK):
            continue
        if hasattr(os, "statvfs"):
            with suppress(OSError):
                if os.statvfs(target).f_flag & os.ST_RDONLY:
                    return "the file system is read-only"
        return f"{what} is not writable for this user"
    return None


class StoreReadOnly(ForensicsError):
    """The store can be read but not written (``why``): a command that must write it says so
    in one line; the default store's refresh is skipped, and readers read it as it is."""

    def __init__(self, why: str, path: str) -> None:
        said = (
            f"this store cannot be written: {why}; the commands that only read it (usage, "
            "incidents, show, report, backtest, export) still can"
            if Path(path).exists()
            else f"cannot make a store here: {why}"
        )
        super().__init__(said, path=path)
        self.why = why


class StoreInUse(ForensicsError):
    """Another process holds the store (DuckDB lets one process write a store, or several
    read it): ``holder`` names it, with its process id when DuckDB says it."""

    def __init__(self, message: str, holder: str, path: str | None = None) -> None:
        super().__init__(message, path=path)
        self.holder = holder


def _holder(text: str) -> str:
    """Who holds the lock, from DuckDB's message ("Conflicting lock is held in
    /usr/bin/python3 (PID 4242)").

    >>> _holder('Conflicting lock is held in /usr/bin/python3.11 (PID 4242). See also')
    'another process (PID 4242)'
    >>> _holder("Could not set lock on file")
    'another process'
    """
    m = re.search(r"\(PID (\d+)\)", text)
    return f"another process (PID {m.group(1)})" if m else "another process"


def _keep(path: str, entries: list[tuple[str, str, str]]) -> None:
    """Write cache entries computed while the store was open read-only, if it can be written
    now: best effort, so that a report read twice is computed once. A read-only disk, or a
    store another process holds, keeps nothing, silently."""
    try:
        con = duckdb.connect(path, config=OFFLINE)
    except (duckdb.Error, OSError):
        return
    try:
        for entry in entries:
            Engine(con).run("store/keep_cache.sql", list(entry))
    except duckdb.Error:
        pass
    finally:
        con.close()


@contextmanager
def open_new_or_existing(
    path: str | Path, temp_dir: str | None = None, console: Console | None = None
) -> Iterator[Store]:
    """Open the store at ``path`` for writing. If the file is new and the work fails (an
    error, nothing found, Ctrl-C) before any file was stored, the new file is removed: a failed
    first ``ingest`` leaves no empty store behind."""
    path = str(path)
    new = path != ":memory:" and not Path(path).exists()
    store = open_store(path, temp_dir=temp_dir, console=console)
    try:
        yield store
    except BaseException:
        try:
            empty = new and not store.scalar("SELECT count(*) FROM main.sources")
        except duckdb.Error:
            empty = False
        store.close()
        if empty:
            for leftover in (Path(path), Path(path + ".wal")):
                leftover.unlink(missing_ok=True)
        raise
    store.close()
