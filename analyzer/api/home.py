"""The default store: the one store a command uses without ``--db``, kept up to date with the
agents' default places before a command that was given no input.

* **Where**: ``analyzer.engine.default_store`` (``$LLM_FORENSICS_DB``, else the data folder).
* **Refresh**: a command given no input first reads the new and grown files of the agents'
  default places into it (``pipeline.refresh``); ``--no-refresh`` skips that. A store named
  with ``--db`` is never refreshed: it holds what its user put in it.
* **Another command at work**: DuckDB lets one process write a store, or several read it. A
  refresh that finds the store in use waits a little, then goes on without refreshing (a
  command that only reads still answers, from what the store held, saying so); a command that
  must write waits longer, then says why it cannot. After each refresh that changed the store,
  a copy of it is kept beside it (``forensics.duckdb.last``, while the store is under
  :data:`COPY_LIMIT`): a reader that finds the store being written reads that copy, saying so.
* **Read-only**: a store that cannot be written (a read-only mount, a team's store, a folder
  DuckDB cannot write its journal in) is read as it is: the refresh is skipped, saying so, and
  a command that must write it says why it cannot, in one line.
* **History kept**: files the agents delete stay in the store (nothing removes them), and the
  usage views say which figures come from files no longer on disk.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, ExitStack, contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

from analyzer.console import note
from analyzer.engine.default_store import default_store
from analyzer.engine.store import (
    Store,
    StoreInUse,
    StoreReadOnly,
    open_new_or_existing,
    open_store,
)
from analyzer.errors import ForensicsError, Interrupted, NothingFound
from analyzer.ingest.base import IngestOptions
from analyzer.load.inputs import default_inputs
from analyzer.load.unchanged import nothing_new

T = TypeVar("T")

# How long a refresh waits for a store another process holds before going on without it, and
# how long a command that must write waits before it says why it cannot (seconds).
READER_WAIT = 2.0
WRITER_WAIT = 60.0
POLL = 0.25
# The copy of the last refresh is kept for stores up to this size (copying a bigger one after
# every refresh would cost more than it saves).
COPY_LIMIT = 1 << 30
COPY_SUFFIX = ".last"


@dataclass(frozen=True)
class StoreChoice:
    """The store a command uses: the one named with ``--db``, or the default store."""

    path: str
    default: bool  # the default store: refreshed before a command given no input

    @property
    def copy(self) -> Path:
        """Where the copy of its last refresh is kept."""
        return Path(self.path + COPY_SUFFIX)


class NoAgentLogs(NothingFound):
    """No store yet, and no agent logs in their default places (a new machine, or a user
    whose logs are kept elsewhere): an error for a command that must write the store; a view
    says it found no usage data (:meth:`no_usage_data`) and shows nothing."""

    def __init__(self, places: str, store: str) -> None:
        super().__init__(
            f"no store yet, and no agent logs in their default places ({places}: not there); "
            "load a file or folder first: `llm-forensics ingest PATH`",
            path=store,
        )
        self.places, self.store = places, store

    def no_usage_data(self) -> str:
        """What a view says instead, in one line: what was found, where it looked, and how to
        read logs kept elsewhere."""
        return (
            f"No usage data found: no agent logs in their default places ({self.places}: "
            f"not there), and no store yet at {_tilde(self.store)}; for logs kept elsewhere: "
            "`llm-forensics ingest PATH`"
        )


def no_agent_logs(choice: StoreChoice) -> NoAgentLogs | None:
    """For the default store: no store yet and no agent logs in their default places (what
    :func:`refresh` raises), else None."""
    inputs = default_inputs(os.environ, Path.home())
    if not choice.default or inputs.paths or Path(choice.path).exists():
        return None
    return NoAgentLogs(", ".join(inputs.absent) or "none known", choice.path)


def empty_store() -> Store:
    """A store holding nothing, in memory (nothing is written): what a view shows as JSON or
    CSV when there is no usage data (an empty document of its own shape)."""
    return open_store(":memory:")


def choose(
    db: str | None, env: Mapping[str, str] | None = None, home: Path | None = None
) -> StoreChoice:
    """The store at ``db``, or (None) the default store."""
    if db:
        return StoreChoice(db, default=False)
    path = default_store(os.environ if env is None else env, home or Path.home())
    return StoreChoice(str(path), default=True)


def made_ready(choice: StoreChoice) -> None:
    """The default store's folder, made if missing (a named store's folder is the user's)."""
    if choice.default:
        Path(choice.path).parent.mkdir(parents=True, exist_ok=True)


def waiting(open_it: Callable[[], T], patience: float, what: str) -> T:
    """``open_it()``, tried again while another process holds the store, for up to
    ``patience`` seconds (saying once that it waits for ``what``, when named)."""
    deadline = time.monotonic() + patience
    said = False
    while True:
        try:
            return open_it()
        except StoreInUse as exc:
            if time.monotonic() >= deadline:
                raise
            if not said and what:
                note(f"waiting for {exc.holder} to finish with {what}")
                said = True
            time.sleep(POLL)


@contextmanager
def patiently(
    open_it: Callable[[], AbstractContextManager[T]], patience: float, what: str
) -> Iterator[T]:
    """The context ``open_it()`` makes, entered as :func:`waiting` opens (tried again while
    another process holds the store)."""
    with ExitStack() as stack:
        yield waiting(lambda: stack.enter_context(open_it()), patience, what)


def refresh(
    choice: StoreChoice,
    options: IngestOptions,
    incidents: bool,
    enabled: bool = True,
    writer: bool = False,
) -> str | None:
    """Before a command given no input: the default store brought up to date with the
    agents' default places (nothing for a store named with ``--db``, or when not ``enabled``).
    If another process holds the store, the command goes on with what the store holds: the
    holder is returned, for :func:`open_reading` to say what is shown (a ``writer``, such as
    ``detect``, says here that the refresh was skipped). If the store cannot be written (a
    read-only mount, a team's store), it is read as it is, saying so - a ``writer`` stops
    there."""
    if not choice.default or not enabled:
        return None
    inputs = default_inputs(os.environ, Path.home())
    if not inputs.paths and not Path(choice.path).exists():
        raise NoAgentLogs(", ".join(inputs.absent) or "none known", choice.path)
    made_ready(choice)

    def refreshed() -> None:
        with open_new_or_existing(choice.path) as store:
            # Nothing new (most runs): said from a walk and the store, nothing loaded.
            said = None if incidents else nothing_new(store, inputs, options)
            if said is not None:
                note(said)
                _keep_ledger(store, choice, changed=False)
                return
            from analyzer import pipeline

            pipeline.refresh(store, inputs, options, incidents)
            _keep_ledger(store, choice, changed=True)

    try:
        waiting(refreshed, READER_WAIT, "")
    except StoreInUse as exc:
        if writer:
            note(f"refresh skipped: {_tilde(choice.path)} is in use by {exc.holder}")
        return exc.holder
    except StoreReadOnly as exc:  # (a read-only mount, a team's store): read as it is
        if writer or not Path(choice.path).exists():
            raise
        note(
            f"refresh skipped: {_tilde(choice.path)} cannot be written ({exc.why}); what "
            f"follows is what it held {_when(choice.path)}"
        )
        return None
    keep_copy(choice)
    return None


def unchanged_reading(choice: StoreChoice, options: IngestOptions) -> Store | None:
    """The default store opened read-only, when a refresh would find nothing new in the
    default places (most runs of a view): the refresh's line is said and the store is the one
    the view reads, opened once, never for writing (opening a store for writing and closing it
    costs about a tenth of a second, a third of a warm view). None when there is anything to
    do or to say otherwise - a new or grown file, no store or no spend ledger yet, a store
    another process writes or one to upgrade, files to read for their content - and the full
    :func:`refresh` runs."""
    if not choice.default or not Path(choice.path).exists():
        return None
    from analyzer.guards.spend import ledger_path

    if not ledger_path(choice.path).exists():
        return None
    inputs = default_inputs(os.environ, Path.home())
    try:
        store = open_store(choice.path, read_only=True)
    except ForensicsError:  # (in use, to upgrade, damaged: the full refresh says what)
        return None
    try:
        said = nothing_new(store, inputs, options)
    except BaseException:
        store.close()
        raise
    if said is None:
        store.close()
        return None
    note(said)
    keep_copy(choice)
    return store


def _keep_ledger(store: Store, choice: StoreChoice, changed: bool) -> None:
    """The spend ledger beside the default store (``analyzer.guards.spend``: what the live
    spend caps read of the other sessions' spend), written after a refresh that read
    something, and after one that read nothing only when there is none yet (a warm refresh
    with nothing new costs one look at the file). A ledger that cannot be written is left as
    it was: the caps then read an older one."""
    from analyzer.guards.spend import ledger_path, write_ledger

    path = ledger_path(choice.path)
    if not changed and path.exists():
        return
    with suppress(OSError):
        write_ledger(store, path)


def open_reading(choice: StoreChoice, busy: str | None = None) -> Store:
    """The store opened read-only. When another process is writing the default store, the
    copy of its last refresh is read instead (saying so), if there is one this version can
    read; else that is the error, in one line. ``busy``: the process that held the store when
    :func:`refresh` was skipped (said with what is shown)."""
    skipped = f"refresh skipped: {_tilde(choice.path)} is in use by {busy}" if busy else ""
    try:
        # (A store named with --db is the user's: another process holding it is said at once.)
        patience = READER_WAIT if choice.default else 0.0
        store = waiting(lambda: open_store(choice.path, read_only=True), patience, "")
    except StoreInUse as exc:
        if not choice.default:
            raise
        copy = _copy_opened(choice)
        if copy is None:
            unread = "that this version can read " if choice.copy.exists() else ""
            raise StoreInUse(
                f"{exc.holder} is writing this store, and there is no copy of an earlier "
                f"refresh {unread}to read meanwhile: run the command again when it has finished",
                exc.holder,
                path=choice.path,
            ) from None
        if skipped:
            note(skipped)
        note(
            f"{_tilde(choice.path)} is being written by {exc.holder}: showing its copy of the "
            f"last refresh ({_when(str(choice.copy))})"
        )
        return copy
    if skipped:
        note(f"{skipped}; what follows is what it held {_when(choice.path)}")
    return store


def _copy_opened(choice: StoreChoice) -> Store | None:
    """The copy of the last refresh opened read-only; None when there is none this version
    can read (an earlier version's, one damaged, none at all)."""
    if not choice.copy.exists():
        return None
    try:
        return open_store(choice.copy, read_only=True)
    except ForensicsError:
        return None


def keep_copy(choice: StoreChoice) -> None:
    """Copy the default store (closed, so complete) beside it, for readers while another
    process writes it: through a temporary file, so a reader never sees half a copy. Best
    effort: a disk that cannot take it keeps the older copy, or none. A copy made since the
    store was last written is kept as it is (a command that changed nothing copies nothing).
    Ctrl-C during the copy removes the partial one and says, as ``Interrupted``, that the store
    holds the run's work (it was written before)."""
    src = _stamp(choice.path)
    if not choice.default or src is None or src[0] > COPY_LIMIT:
        return
    copied = _stamp(str(choice.copy))
    if copied is not None and copied[1] >= src[1]:
        return
    tmp = choice.copy.with_name(choice.copy.name + ".tmp")
    try:
        shutil.copyfile(choice.path, tmp)
        os.replace(tmp, choice.copy)
    except BaseException as exc:
        made = not tmp.exists() and _stamp(str(choice.copy)) != copied
        with suppress(OSError):
            tmp.unlink(missing_ok=True)
        if isinstance(exc, KeyboardInterrupt):  # (the store itself was written before)
            raise Interrupted(_copy_interrupted(choice, made)) from None
        if not isinstance(exc, OSError):
            raise


def _copy_interrupted(choice: StoreChoice, made: bool) -> str:
    """What Ctrl-C during the copy leaves: the store holds the run's work, the copy is the
    new one or the one before."""
    copy = choice.copy.name
    if made:
        return f"interrupted: the store holds this run's work, and its copy for readers ({copy})"
    return (
        f"interrupted: the store holds this run's work; its copy for readers ({copy}) is as "
        "it was (the next refresh brings it up to date)"
    )


def _stamp(path: str) -> tuple[int, int] | None:
    """(size, modification time in ns) of the file, None when there is none."""
    try:
        st = Path(path).stat()
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


def _when(path: str) -> str:
    """When the file was last written, for a person."""
    try:
        t = datetime.fromtimestamp(Path(path).stat().st_mtime, UTC)
    except OSError:
        return "at its last refresh"
    return f"at its last refresh, {t:%Y-%m-%d %H:%M} UTC"


def _tilde(path: str) -> str:
    home = str(Path.home())
    return "~" + path[len(home) :] if path.startswith(home + os.sep) else path
