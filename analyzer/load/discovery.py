"""Which files to read: the user's paths expanded, and how the store and messages name each."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from analyzer.console import warn
from analyzer.errors import InputError
from analyzer.load.reports import FileReport


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
    """The files found under the user's paths, the hidden folders passed over, and the
    folders that could not be read (each said in a warning)."""

    files: list[Found] = field(default_factory=list)
    hidden_skipped: list[str] = field(default_factory=list)
    # Folders that could not be read, as a file that failed is reported (status "failed").
    unreadable: list[FileReport] = field(default_factory=list)


def discover(
    paths: list[str],
    full_paths: bool = False,
    enter: frozenset[str] = frozenset(),
    labels: dict[str, str] | None = None,
    take: frozenset[str] = frozenset(),
) -> Walk:
    """Expand the user's paths into the files to read.

    Folders are walked in sorted order, into symlinked folders too (users link project
    folders), each real folder once: a link back up (a loop), or a second way to a folder
    already walked, adds nothing. Hidden files and folders are left out - except the agents'
    own folders named in ``enter`` (``.claude``, ``.codex``...), so that pointing at a home
    folder finds its logs, and the agents' own files named in ``take``
    (``.aider.chat.history.md``), so that pointing at a project folder finds its chat history
    - and the hidden folders passed over are noted. A folder that cannot be read is one
    warning and the rest is read; only a folder named by the user that cannot be read is an
    error. A path with a label in ``labels`` (a default place such as ``~/.claude/projects``,
    or an agent's file in a project folder) is named by it, in messages and in the store, and
    is no path the user named.
    """
    walk = Walk()
    labels = labels or {}
    seen: set[str] = set()  # the real paths of the folders walked
    for arg in paths:
        p = Path(arg)
        label = labels.get(arg)
        named = Path(label) if label and not full_paths else _named(arg, full_paths)
        if p.is_dir():
            _Walker(walk, p, arg, label, named, enter, seen, take).run()
        elif p.exists():
            walk.files.append(Found(p, label or arg, str(named), label is None, arg))
        elif p.is_symlink():
            raise InputError("a symbolic link to nothing (broken, or a loop)", path=arg)
        else:
            raise InputError("no such file or folder", path=arg)
    return walk


@dataclass
class _Walker:
    """One folder the user gave (or a default place), walked ``into`` a :class:`Walk`."""

    into: Walk
    top: Path
    arg: str
    label: str | None  # a default place's name (``~/.claude/projects``); None: named by the user
    named: Path  # how the store names the top
    enter: frozenset[str]
    seen: set[str]
    take: frozenset[str] = frozenset()  # the hidden files that are an agent's own

    def walk_files(self, root: Path, files: list[str]) -> None:
        """The files of the folder ``root`` (not hidden, unless an agent's own), in order.
        Their names are made as text, each folder's once (a Path per file and name cost
        seconds over 100,000 files): the same text pathlib gives."""
        within = root.relative_to(self.top)
        where = str(root)
        shown_in = str(Path(self.label) / within) if self.label else ""
        named_in = str(self.named / within)
        for fname in sorted(files):
            if fname.startswith(".") and fname not in self.take:
                continue
            f = _child(where, fname)
            shown = _child(shown_in, fname) if self.label else f
            self.into.files.append(Found(Path(f), shown, _child(named_in, fname), False, self.arg))

    def run(self) -> None:
        """Walk the top folder, unless it was walked already (by its real path)."""
        real = os.path.realpath(self.top)
        if real in self.seen:  # (given twice, or inside a folder given before)
            return
        self.seen.add(real)
        for root, dirs, files in os.walk(self.top, onerror=self.unreadable, followlinks=True):
            here = Path(root)
            if not self.enterable(here, dirs + files):
                dirs[:] = []
                continue
            self.into.hidden_skipped += [
                str(here / d) for d in sorted(dirs) if d.startswith(".") and d not in self.enter
            ]
            dirs[:] = self.entered(here, dirs)
            self.walk_files(here, files)

    def entered(self, root: Path, dirs: list[str]) -> list[str]:
        """The folders of ``root`` to walk into, in order: not hidden (unless an agent's),
        and not walked already (by their real path; a folder itself before a link to it)."""
        shown = sorted(d for d in dirs if not d.startswith(".") or d in self.enter)
        links = {d for d in shown if (root / d).is_symlink()}
        kept = []
        for d in [d for d in shown if d not in links] + [d for d in shown if d in links]:
            real = os.path.realpath(root / d)
            if real not in self.seen:
                self.seen.add(real)
                kept.append(d)
        return sorted(kept)

    def enterable(self, root: Path, names: list[str]) -> bool:
        """Whether what the folder ``root`` lists can be reached (a folder that can be
        listed but not entered, mode ``r--``, cannot): if not, it is :meth:`unreadable`."""
        if not names:
            return True
        try:
            os.lstat(root / names[0])
        except PermissionError as exc:
            self.unreadable(PermissionError(exc.errno, exc.strerror, str(root)))
            return False
        except OSError:  # (gone since it was listed: its own report says so)
            pass
        return True

    def unreadable(self, exc: OSError) -> None:
        """A folder ``os.walk`` cannot list: the folder the user named is an error; any
        other is said in one warning, and the rest is read."""
        where = Path(exc.filename) if exc.filename else self.top
        why = f"cannot read this folder: {_plain(exc)}"
        if where == self.top and self.label is None:
            raise InputError(why, path=where)
        shown = str(Path(self.label) / where.relative_to(self.top)) if self.label else str(where)
        warn(f"{shown}: {why} (not read; the rest is)")
        self.into.unreadable.append(FileReport(shown, None, "failed", reason=why))


def _plain(exc: OSError) -> str:
    """The system's refusal in a few plain words (``permission denied``)."""
    return exc.strerror.lower() if exc.strerror else str(exc)
