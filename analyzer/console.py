"""What a run says on stderr - warnings (each said once per run), notes, progress - and how
its output is shown (colour, width): a :class:`Console` object that whoever owns the run makes.

The command line makes one per command from ``--quiet`` / ``--verbose``; the public API
(``analyzer.api``) one that writes nothing and keeps what was said; a store carries the console
it was opened with. The library reaches the console of the run under way through
:func:`current` (a context variable set by :func:`use`), so that a format module deep in a load
can warn without a console being passed down every call; nothing here is flipped by setters.
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

import click

from analyzer.model.formatting import printable


@dataclass
class Console:
    """One run's console: how much it says, where it writes, and what it has said.

    ``quiet``: no progress and no notes (warnings still); ``verbose``: a line for every file
    read; ``colour``: None lets click decide (a terminal yes, a pipe no), False never (as with
    ``$NO_COLOR``); ``width``: the columns lines must fit (None: the terminal's, see
    :func:`terminal_width`); ``stderr``: False writes nothing at all - what was said is kept
    in ``warnings`` and ``notes`` for the caller (a notebook, a test)."""

    quiet: bool = False
    verbose: bool = False
    colour: bool | None = field(default_factory=lambda: colour_of_environment())
    width: int | None = None
    stderr: bool = True
    warnings: list[str] = field(default_factory=list)  # each said once, in the order said
    notes: list[str] = field(default_factory=list)  # (kept only when not written)

    @classmethod
    def silent(cls) -> Console:
        """A console that writes nothing and keeps every warning and note."""
        return cls(quiet=True, stderr=False)

    def note(self, message: str) -> None:
        """An informational line (what is being read, what was done), unless quiet."""
        if not self.stderr:
            self.notes.append(message)
        elif not self.quiet:
            click.echo(safe_line(message), err=True)

    def warn(self, message: str) -> None:
        """``warning: message``, once per distinct message in this run."""
        if message in self.warnings:
            return
        self.warnings.append(message)
        if self.stderr:
            click.echo(safe_line(f"warning: {message}"), err=True)

    def says_every_file(self) -> bool:
        """``--verbose`` (and not ``--quiet``): a line for every file read."""
        return self.verbose and not self.quiet

    def columns(self) -> int:
        return self.width if self.width is not None else terminal_width()

    def live(self) -> bool:
        """Whether progress may be drawn: writing to stderr, not quiet, stderr a terminal."""
        if not self.stderr or self.quiet:
            return False
        try:
            return sys.stderr.isatty()
        except (AttributeError, ValueError):
            return False


_CURRENT: ContextVar[Console | None] = ContextVar("analyzer_console", default=None)


def current() -> Console:
    """The console of the run under way (one that writes to stderr when no run set one: a
    library call made outside any run, each such call on its own)."""
    return _CURRENT.get() or Console()


@contextmanager
def use(console: Console) -> Iterator[Console]:
    """Make ``console`` the one the library writes to while the body runs (the owner of a run
    calls this: the command line, the API, the pipeline with the store's console)."""
    token = _CURRENT.set(console)
    try:
        yield console
    finally:
        _CURRENT.reset(token)


def verbose() -> bool:
    return current().says_every_file()


def safe_line(text: str) -> str:
    """One line as a terminal shows it, whatever a log or a file name put in it: control
    characters (escape sequences, a newline, NUL) and bidirectional overrides become ``?``, so
    nothing from the input can move the cursor, set the window title or split the line."""
    return printable(text)


def note(message: str) -> None:
    """An informational line on stderr (what is being read, what was done), unless quiet."""
    current().note(message)


def csv_out(text: str) -> None:
    """CSV on stdout: as written into a pipe or a file; on a terminal each line made safe to
    show (``safe_line``), so a model name from a log cannot send escape sequences."""
    try:
        terminal = sys.stdout.isatty()
    except (AttributeError, ValueError):
        terminal = False
    if terminal:
        text = "".join(safe_line(line) + "\n" for line in text.splitlines())
    click.echo(text, nl=False)


def terminal_width() -> int:
    """The columns lines must fit: the terminal's (or ``$COLUMNS``), else 120 when piped."""
    return max(60, shutil.get_terminal_size((120, 24)).columns)


def width() -> int:
    """The columns the run's lines must fit (:meth:`Console.columns`)."""
    return current().columns()


def colour_of_environment() -> bool | None:
    """Never colour with ``$NO_COLOR`` set; else let click decide (None)."""
    return False if os.environ.get("NO_COLOR") else None


def colour() -> bool | None:
    """Whether to colour stdout: never with ``$NO_COLOR`` set; else click decides (a terminal
    yes, a pipe or file no)."""
    return current().colour


def out(text: str = "", nl: bool = True) -> None:
    """A line of a command's output on stdout (styles dropped when not a terminal)."""
    click.echo(text, nl=nl, color=colour())


_SEVERITY_STYLE = {
    "high": {"fg": "red", "bold": True},
    "medium": {"fg": "yellow"},
    "low": {"fg": "cyan"},
    "info": {"dim": True},
}


def severity(text: str, level: str) -> str:
    """``text`` in the colour of severity ``level``."""
    return click.style(text, **_SEVERITY_STYLE.get(level, {}))  # type: ignore[arg-type]


def strong(text: str) -> str:
    """A figure to notice (the wasted dollars)."""
    return click.style(text, bold=True)


def warn(message: str) -> None:
    """Print ``warning: message`` on stderr, once per distinct message per run."""
    current().warn(message)


def stderr_is_terminal() -> bool:
    return current().live()


class Counter:
    """A one-line count of a long run of items (``reading 35/200 files``), redrawn in place on
    a terminal and gone when done; nothing when piped or quiet."""

    def __init__(self, label: str, total: int, minimum: int = 2) -> None:
        self.label = label
        self.total = total
        self.shown = stderr_is_terminal() and total >= minimum
        self.width = 0

    def step(self, done: int, what: str = "") -> None:
        if not self.shown:
            return
        text = f"{self.label} {done:,}/{self.total:,}" + (f"  {what}" if what else "")
        text = text[:79]
        sys.stderr.write("\r" + text.ljust(self.width))
        sys.stderr.flush()
        self.width = len(text)

    def done(self) -> None:
        if self.shown and self.width:
            sys.stderr.write("\r" + " " * self.width + "\r")
            sys.stderr.flush()


class Progress:
    """What a long step is doing now; shown by :func:`progress` when on a terminal."""

    def __init__(self) -> None:
        self.step = ""

    def stage(self, step: str) -> None:
        self.step = step


@contextmanager
def progress(label: str, poll: Callable[[], float] | None, enabled: bool) -> Iterator[Progress]:
    """Show the current stage and its percentage on stderr while the body runs.

    ``poll`` returns the completion of the running query in percent (DuckDB's
    ``query_progress()``, which may be called from another thread) or a negative number when
    unknown. Nothing is shown unless ``enabled`` and stderr is a terminal.
    """
    state = Progress()
    if not enabled or poll is None or not stderr_is_terminal():
        yield state
        return
    stop = threading.Event()

    def run() -> None:
        shown = ""
        while not stop.wait(0.25):
            try:
                pct = poll()
            except Exception:  # progress is best-effort; never break the load for it
                return
            text = f"{label}: {state.step}" + (
                f" {int(pct):3d}%" if pct is not None and pct >= 0 else ""
            )
            if text != shown:
                sys.stderr.write("\r" + text.ljust(len(shown)))
                sys.stderr.flush()
                shown = text

    started = time.monotonic()
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        stop.set()
        thread.join()
        sys.stderr.write(f"\r{label}: done in {time.monotonic() - started:.1f}s".ljust(79) + "\n")
        sys.stderr.flush()
