"""Which files to read: the user's paths expanded, and how the store and messages name each."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from analyzer.errors import InputError


def _named(arg: str, full_paths: bool) -> Path:
    """How the store and report name what the user pointed at: as typed when relative (it is
    relative to where they are), by its own name when absolute (no home folders in a report),
    or by its full path when asked."""
    p = Path(arg)
    if full_paths:
        return p.absolute()
    if p.is_absolute() and p.name:
        return Path(p.name)
    return p


@dataclass(frozen=True)
class Found:
    path: Path  # where to read it
    display: str  # how messages name it (as the user would find it: the path they typed)
    name: str  # how the store and the report name it (see ``_named``)
    explicit: bool  # named on the command line, rather than found in a folder


def discover(paths: list[str], full_paths: bool = False) -> list[Found]:
    """Expand the user's paths into the files to read.

    Folders are walked in sorted order without following symlinked folders (no loops);
    hidden files and folders are left out; a folder that cannot be read is an error, not a
    silent gap.
    """
    found: list[Found] = []
    for arg in paths:
        p = Path(arg)
        named = _named(arg, full_paths)
        if p.is_dir():

            def unreadable(exc: OSError, top: Path = p) -> None:
                where = exc.filename if exc.filename else top
                raise InputError(f"cannot read this folder: {exc.strerror or exc}", path=where)

            for root, dirs, files in os.walk(p, onerror=unreadable, followlinks=False):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                within = Path(root).relative_to(p)
                for fname in sorted(files):
                    if fname.startswith("."):
                        continue
                    f = Path(root) / fname
                    found.append(Found(f, str(f), str(named / within / fname), False))
        elif p.exists():
            found.append(Found(p, arg, str(named), True))
        elif p.is_symlink():
            raise InputError("a symbolic link to nothing (broken, or a loop)", path=arg)
        else:
            raise InputError("no such file or folder", path=arg)
    return found
