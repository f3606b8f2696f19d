"""Which files to read: the user's paths expanded, and how the store and messages name each."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
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


def _child(folder: str, name: str) -> str:
    """``str(Path(folder) / name)`` for a ``folder`` pathlib wrote and a file's ``name``."""
    return name if folder == "." else os.path.join(folder, name)


@dataclass(frozen=True)
class Found:
    path: Path  # where to read it
    display: str  # how messages name it (as the user would find it: the path they typed)
    name: str  # how the store and the report name it (see ``_named``)
    explicit: bool  # named on the command line, rather than found in a folder
    top: str = ""  # the path given that it was found under


@dataclass
class Walk:
    """The files found under the user's paths, and the hidden folders passed over."""

    files: list[Found] = field(default_factory=list)
    hidden_skipped: list[str] = field(default_factory=list)


def discover(
    paths: list[str],
    full_paths: bool = False,
    enter: frozenset[str] = frozenset(),
    labels: dict[str, str] | None = None,
) -> Walk:
    """Expand the user's paths into the files to read.

    Folders are walked in sorted order without following symlinked folders (no loops);
    hidden files and folders are left out - except the agents' own folders named in ``enter``
    (``.claude``, ``.codex``...), so that pointing at a home folder finds its logs - and the
    hidden folders passed over are noted; a folder that cannot be read is an error, not a
    silent gap. A path with a label in ``labels`` (a default place such as
    ``~/.claude/projects``) is named by it, in messages and in the store.
    """
    walk = Walk()
    found = walk.files
    labels = labels or {}
    for arg in paths:
        p = Path(arg)
        label = labels.get(arg)
        named = Path(label) if label and not full_paths else _named(arg, full_paths)
        if p.is_dir():

            def unreadable(exc: OSError, top: Path = p) -> None:
                where = exc.filename if exc.filename else top
                raise InputError(f"cannot read this folder: {exc.strerror or exc}", path=where)

            for root, dirs, files in os.walk(p, onerror=unreadable, followlinks=False):
                walk.hidden_skipped += [
                    str(Path(root) / d)
                    for d in sorted(dirs)
                    if d.startswith(".") and d not in enter
                ]
                dirs[:] = sorted(d for d in dirs if not d.startswith(".") or d in enter)
                # Names made as text, each folder's once (a Path per file and name costs
                # seconds over 100,000 files): the same text pathlib gives.
                within = Path(root).relative_to(p)
                where, shown_in = str(Path(root)), str(Path(label) / within) if label else ""
                named_in = str(named / within)
                for fname in sorted(files):
                    if fname.startswith("."):
                        continue
                    f = _child(where, fname)
                    shown = _child(shown_in, fname) if label else f
                    found.append(Found(Path(f), shown, _child(named_in, fname), False, arg))
        elif p.exists():
            found.append(Found(p, label or arg, str(named), True, arg))
        elif p.is_symlink():
            raise InputError("a symbolic link to nothing (broken, or a loop)", path=arg)
        else:
            raise InputError("no such file or folder", path=arg)
    return walk
