"""stderr messages: warnings (each said once per run) and progress for long steps."""

from __future__ import annotations

import os
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import click

from analyzer.model.formatting import printable

_said: set[str] = set()
_quiet = False
_verbose = False


def set_quiet(quiet: bool) -> None:
    """``--quiet``: no progress and no notes on stderr (warnings and errors still)."""
    global _quiet
    _quiet = quiet


def set_verbose(verbose: bool) -> None:
    """``--verbose``: a line for every file read."""
    global _verbose
    _verbose = verbose


def verbose() -> bool:
    return _verbose and not _quiet


def safe_line(text: str) -> str:
    """One line as a terminal shows it, whatever a log or a file name put in it: control
    characters (escape sequences, a newline, NUL) and bidirectional overrides become ``?``, so
    nothing from the input can move the cursor, set the window title or split the line."""
    return printable(text)


def note(message: str) -> None:
    """An informational line on stderr (what is being read, what was done), unless quiet."""
    if not _quiet:
        click.echo(safe_line(message), err=True)


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


def width() -> int:
    """The columns lines must fit: the terminal's (or ``$COLUMNS``), else 120 when piped."""
    return max(60, shutil.get_terminal_size((120, 24)).columns)


def colour() -> bool | None:
    """Whether to colour stdout: never with ``$NO_COLOR`` set; else click decides (a terminal
    yes, a pipe or file no)."""
    return False if os.environ.get("NO_COLOR") else None


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
    if message in _said:
        return
    _said.add(message)
    click.echo(safe_line(f"warning: {message}"), err=True)


def reset_warnings() -> None:
    """Forget what was said, and the --quiet / --verbose of the last command (one CLI run in
    a process, or tests running many)."""
    global _quiet, _verbose
    _quiet = _verbose = False
    _reset_said()


def _reset_said() -> None:
    _said.clear()


def stderr_is_terminal() -> bool:
    try:
        return sys.stderr.isatty() and not _quiet
    except (AttributeError, ValueError):
        return False


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
