"""The errors the command line turns into one-line messages and exit codes."""

from __future__ import annotations

from pathlib import Path

# The exit code of a run that read what it could but not all of its input: a file found in a
# folder failed to load, held data no reader recognises, or had every record rejected (each is
# named on stderr). Findings at or above --fail-on still exit 1; an error exits 3.
NOT_ALL_READ_EXIT = 4


class ForensicsError(Exception):
    """An input or runtime problem the user can act on (exit code 3).

    Rendered as ``<path>:<line>: <message>`` when a file (and line) is known.
    """

    exit_code = 3

    def __init__(
        self, message: str, path: str | Path | None = None, line: int | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.path = str(path) if path is not None else None
        self.line = line

    def __str__(self) -> str:
        where = ""
        if self.path is not None:
            where = self.path + (f":{self.line}" if self.line is not None else "") + ": "
        return where + self.message


class InputError(ForensicsError):
    """A file that cannot be read as any supported format, or is missing what it must have."""


class StrictRejectError(InputError):
    """A reject under ``--strict``: the file's load is rolled back."""


class DamagedGzipError(InputError):
    """Compressed data that ends early or is corrupt: what came before it can still be read."""


class LoaderBug(InputError):
    """A loader failed on a file in a way it should not (a value of a type it did not expect):
    a bug of ours, reported like an input error, naming the file, with nothing of it stored."""


class Interrupted(ForensicsError):
    """Ctrl-C: said in one line (what was not stored), exit 130 as shells expect."""

    exit_code = 130


class NothingFound(InputError):
    """A run found no recognised input: never a silent success (exit 3)."""
