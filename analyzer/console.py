"""stderr messages: warnings (each said once per run) and progress for long steps."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import click

_said: set[str] = set()


def warn(message: str) -> None:
    """Print ``warning: message`` on stderr, once per distinct message per run."""
    if message in _said:
        return
    _said.add(message)
    click.echo(f"warning: {message}", err=True)


def reset_warnings() -> None:
    _said.clear()


def stderr_is_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


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
