"""The folders the user named once for the agents that keep no central folder (Aider writes its
chat history into each project folder it runs in): their *roots*.

They are kept in ``roots.json`` beside the default store, in ``llm-forensics`` under the data
folder (:func:`analyzer.engine.default_store.data_home`), as ``{"roots": ["/abs/path", ...]}``;
``llm-forensics config add-root DIR`` and ``remove-root DIR`` write it (a whole new file
replacing the old one: a reader never finds half of it). ``$LLM_FORENSICS_ROOTS``
(``os.pathsep``-separated) adds roots for one run. Reading them is one small file: the places
of a refresh (``analyzer.formats.places``) are found from them before every command given no
input.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from analyzer.engine.default_store import FOLDER, data_home
from analyzer.engine.files import atomic_file, os_error
from analyzer.errors import ForensicsError, InputError

ROOTS_ENV = "LLM_FORENSICS_ROOTS"
ROOTS_FILE = "roots.json"


@dataclass(frozen=True)
class Root:
    """A root, and where it was named: ``stored`` (``config add-root``) or the environment."""

    path: Path
    stored: bool


def roots_file(env: Mapping[str, str], home: Path) -> Path:
    """Where the roots are kept: ``llm-forensics/roots.json`` under the data folder.

    >>> from pathlib import PurePosixPath as P
    >>> str(roots_file({"XDG_DATA_HOME": "/x"}, P("/h")))
    '/x/llm-forensics/roots.json'
    """
    return data_home(env, home) / FOLDER / ROOTS_FILE


def absolute(named: str, home: Path) -> Path:
    """A folder as the user typed it, made absolute (``~`` is ``home``; a relative path is
    relative to where the command runs), not resolved: a linked folder keeps its name."""
    text = named.strip()
    if text == "~" or text.startswith("~/") or text.startswith("~" + os.sep):
        text = str(home / text[2:]) if len(text) > 1 else str(home)
    return Path(os.path.abspath(os.path.expanduser(text)))


def stored_roots(env: Mapping[str, str], home: Path) -> list[Path]:
    """The roots ``config add-root`` kept, in the order they were added (none: no file)."""
    path = roots_file(env, home)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise os_error(exc, path, "cannot read") from exc
    try:
        listed = json.loads(text)["roots"]
        if not isinstance(listed, list) or not all(
            isinstance(r, str) and Path(r).is_absolute() for r in listed
        ):
            raise TypeError
    except (ValueError, KeyError, TypeError):
        raise ForensicsError(
            'not a list of roots as llm-forensics writes it ({"roots": ["/a/folder", ...]}): '
            "fix it, or delete it and add the roots again (llm-forensics config add-root DIR)",
            path=path,
        ) from None
    return [Path(r) for r in listed]


def env_roots(env: Mapping[str, str], home: Path) -> list[Path]:
    """The roots ``$LLM_FORENSICS_ROOTS`` adds (``os.pathsep``-separated; empty parts
    ignored)."""
    parts = env.get(ROOTS_ENV, "").split(os.pathsep)
    return [absolute(p, home) for p in parts if p.strip()]


def all_roots(env: Mapping[str, str], home: Path) -> list[Root]:
    """Every root of this run, each once: the stored ones, then those of the environment."""
    found: dict[Path, Root] = {}
    for path in stored_roots(env, home):
        found.setdefault(path, Root(path, stored=True))
    for path in env_roots(env, home):
        found.setdefault(path, Root(path, stored=False))
    return list(found.values())


def add_root(named: str, env: Mapping[str, str], home: Path) -> tuple[Path, bool]:
    """Keep the folder ``named`` as a root: its absolute path, and whether it is new (False:
    it was a root already). A path that is no folder is an error, and nothing is written."""
    path = absolute(named, home)
    if not path.exists():
        raise InputError("no such folder", path=named)
    if not path.is_dir():
        raise InputError("not a folder (a root is a folder of projects, or a project)", path=named)
    kept = stored_roots(env, home)
    if path in kept:
        return path, False
    _write(roots_file(env, home), [*kept, path])
    return path, True


def remove_root(named: str, env: Mapping[str, str], home: Path) -> Path:
    """Forget the root ``named`` (it need not exist any more); the path removed. A path that
    is no stored root is an error naming the roots there are."""
    path = absolute(named, home)
    kept = stored_roots(env, home)
    same = [p for p in kept if p == path or _real(p) == _real(path)]
    if not same:
        there = ", ".join(str(p) for p in kept) or "none"
        raise InputError(f"not a root (the roots: {there})", path=named)
    _write(roots_file(env, home), [p for p in kept if p != same[0]])
    return same[0]


def _real(path: Path) -> str:
    return os.path.realpath(path)


def _write(out: Path, roots: list[Path]) -> None:
    """The roots written whole into a temporary file that then replaces ``out``."""
    text = json.dumps({"roots": [str(p) for p in roots]}, indent=2) + "\n"
    with atomic_file(out) as tmp:
        tmp.write_text(text, encoding="utf-8")
