"""A refresh that finds nothing new, told without loading anything.

Before every command given no input, the default store is refreshed from the agents' default
places; most of the time nothing changed. Then every file found there is one the store holds
as it is now (its resolved path, size and modification time: ``sources.file_stat``, the key
``flow.ingest_file`` compares before it opens a file) and what the store holds was linked
since it last changed: the full refresh would read no file and say "nothing new in N files".
``nothing_new`` says that line from one walk, a ``stat`` per file and one query, with none of
the load's machinery (the formats, the sink, pyarrow) imported; anything else - a new, grown
or unknown file, an unreadable folder, a store not linked - leaves it to the full refresh.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from analyzer.engine import cache
from analyzer.engine.store import Store
from analyzer.formats import agent_files, agent_folders
from analyzer.ingest.base import IngestOptions
from analyzer.load import usage_first
from analyzer.load.discovery import discover
from analyzer.load.inputs import Inputs, refreshed
from analyzer.load.reports import FileReport


class StatKeys:
    """How ``sources.file_stat`` names a file as it is now: its resolved path, size and
    modification time; the path is ``path.resolve()``'s, its folder resolved once per run (not
    a system call per folder above each of 100,000 files), and each file once per run (a load
    asks for it four times)."""

    def __init__(self) -> None:
        self._folders: dict[str, str] = {}  # a folder's resolved path, once per run
        self._files: dict[str, str] = {}  # a file's, once per run

    def key(self, path: Path, size: int, mtime_ns: int) -> str:
        return f"{self.resolved(path)}|{size}|{mtime_ns}"

    def resolved(self, path: Path) -> str:
        """``str(path.resolve())``, the folder resolved once per run."""
        text = os.fspath(path)
        real = self._files.get(text)
        if real is None:
            real = self._files[text] = self._resolve(path, text)
        return real

    def _resolve(self, path: Path, text: str) -> str:
        folder, name = os.path.split(text)
        if name in ("", ".", "..") or os.path.islink(text):
            return str(path.resolve())
        real = self._folders.get(folder)
        if real is None:
            real = self._folders[folder] = str(Path(folder or ".").resolve())
        return os.path.join(real, name)


def nothing_new(store: Store, inputs: Inputs, options: IngestOptions) -> str | None:
    """The refresh's line when nothing under the default places changed since the store read
    them (see the module); None when the full refresh has something to do."""
    walk = discover(
        inputs.paths,
        options.full_paths,
        enter=agent_folders(),
        labels=inputs.labels,
        take=agent_files(),
    )
    if walk.unreadable or not cache.linked(store):
        return None
    if options.content and usage_first.pending(store):  # files to read whole now
        return None
    known = {k for (k,) in store.engine.rows("SELECT file_stat FROM sources")}
    keys = StatKeys()
    for found in walk.files:
        try:
            st = found.path.stat()
        except OSError:
            return None
        if not stat.S_ISREG(st.st_mode):
            return None
        if keys.key(found.path, st.st_size, st.st_mtime_ns) not in known:
            return None
    reports = [FileReport(f.display, None, "unchanged") for f in walk.files]
    return refreshed(reports, set(), inputs.places())
