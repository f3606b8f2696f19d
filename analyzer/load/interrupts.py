"""Ctrl-C during ingest: the transaction under way rolled back, and one line that says what the
store holds of this run, counted in the store once it is settled - never what the code
believed it was doing when the signal came (a batch whose ``COMMIT`` had just ended, files
read before the one under way that were then stored).

The files are counted by their ``sources`` rows: a file is stored whole or not at all, with
its row (``analyzer.load.flow``, ``analyzer.load.batch``).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from analyzer.engine import cache
from analyzer.engine.store import Store, interrupted
from analyzer.errors import Interrupted

LINKING = "linking"


class Run:
    """One ingest run, as Ctrl-C reports it: how many files the store held when it began, and
    how many it found (None while it is still looking)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.before = _stored(store)
        self.found: int | None = None
        self.step: str | None = None  # what is under way after the files (``LINKING``)

    @contextmanager
    def said_on_ctrl_c(self) -> Iterator[None]:
        """Ctrl-C in the body, in whatever form (``store.interrupted``): the transaction under
        way is rolled back and ``Interrupted`` raised with the line (``line``)."""
        try:
            yield
        except BaseException as exc:
            if isinstance(exc, Interrupted) or not interrupted(exc):
                raise
            for _ in range(2):  # (a Ctrl-C caught just before SIGINT was ignored: once more)
                try:
                    with _deaf():
                        self.store.rollback()
                        line = self.line()
                    break
                except KeyboardInterrupt:
                    continue
            else:
                line = "interrupted"
            raise Interrupted(line) from None

    def line(self) -> str:
        """What the store holds of this run, in one line."""
        if self.store.path == ":memory:":
            return "interrupted: nothing is kept (without --db the store is temporary)"
        if self.found is None:
            return "interrupted while looking for files: nothing was stored"
        stored, found = _stored(self.store) - self.before, self.found
        line = (
            f"interrupted: this run stored {stored:,} of the {found:,} "
            f"{'file' if found == 1 else 'files'} found"
        )
        if self.step == LINKING:
            if _linked(self.store):
                return line + "; their calls are linked to the bills"
            return line + "; their calls are not linked to the bills yet (the next run links them)"
        if stored < found:
            line += "; the same command again reads the rest"
        return line


def _stored(store: Store) -> int:
    return int(store.scalar("SELECT count(*) FROM sources"))


def _linked(store: Store) -> bool:
    """Whether the calls stored were linked (as ``link.link_if_needed`` judges it)."""
    linked = store.scalar("SELECT value FROM meta WHERE key = 'linked_version'")
    return bool(linked == cache.version(store, cache.DATA))


@contextmanager
def _deaf() -> Iterator[None]:
    """Ctrl-C ignored while the store is settled and counted: the user asked to stop, and this
    is the stopping. (Only the main thread may set a handler: elsewhere, nothing is changed.)"""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)
