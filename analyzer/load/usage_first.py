"""Usage first, content when asked: the first read of a log that only a usage view needs.

``usage daily`` shows tokens and dollars; it needs a log's calls, not what was said in them.
A refresh for such a view (``IngestOptions.content`` false) reads a file of a format that can
(``FormatSpec.usage_first``: Claude Code) without its content: the format's own loader, by the
same code and so by the same usage rules (a call's first line, replays, placeholder estimates,
fast mode, web searches, stated costs), builds the same calls and writes no message, no hash, no
excerpt, skipping unparsed the lines that hold none of it (``jsonl.Only``). Its ``sources`` row
says so in its options (``"usage_only": true``), and it leaves no resume point.

A command that needs content (``incidents``, ``audit``, ``report``, ``detect``, ``watch``,
``backtest``, ``ingest``) lets go of the usage-first reads of the files it is about to read
(``drop``: every row they wrote, in one transaction) and reads those files whole, as files it
never read, in the order it walks them: the store is then what a whole first read makes. A
usage-first read of a file that is gone from disk, or that the command does not read, is kept
as it is (its calls stay).

A file the store holds whole is read whole again when it grows, also for a usage view (it goes
on from its resume point); a usage-first read whose file grew is read usage-first again.

The Claude Code transcripts a usage-first load is to read are read ahead, all together, by
DuckDB's JSON reader (``analyzer.formats.claude_usage``: the same rows as the format's own
loader; ``flow._Ahead``), while the reading workers only hash them; the loader then takes each
file's calls from there, and reads itself the files that reader leaves to it.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

from analyzer.engine import cache
from analyzer.engine.store import Store
from analyzer.ingest.base import IngestOptions

# The key in ``sources.options`` that marks a usage-first read.
USAGE_ONLY = "usage_only"
_READS = "ingest/usage_first_reads.sql"


def options_json(options: IngestOptions, usage_first: bool) -> str:
    """``sources.options`` of a file read with ``options`` (``usage_first``: its format reads
    usage first)."""
    said: dict[str, object] = {"tz": options.tz, "session_gap_s": options.session_gap_s}
    if usage_first and not options.content:
        said[USAGE_ONLY] = True
    return json.dumps(said)


def reads(store: Store) -> set[int]:
    """The source ids of the usage-first reads the store holds."""
    return {int(sid) for sid, _stat, _path in store.engine.rows(_READS)}


def paths(store: Store) -> frozenset[str]:
    """The paths (as the store names them) of the usage-first reads it holds."""
    return frozenset(str(path) for _sid, _stat, path in store.engine.rows(_READS))


def for_file(options: IngestOptions, before: int | None, usage_reads: set[int]) -> IngestOptions:
    """The options a file is read with: a file the store holds whole (``before``: its latest
    read) is read whole (and goes on from its resume point); a new file, or one whose latest
    read was usage first, as ``options`` say."""
    if options.content or before is None or before in usage_reads:
        return options
    return replace(options, content=True)


def pending(store: Store) -> bool:
    """Whether a command that needs content has usage-first reads to read whole first (those
    whose file is still there)."""
    return any(_there(file_stat) for _sid, file_stat, _path in store.engine.rows(_READS))


def drop(store: Store, files: list[Path]) -> int:
    """Let go of the usage-first reads of ``files`` (those a load is about to read) in one
    transaction, so that the load reads them whole; returns how many."""
    found = store.engine.rows(_READS)
    if not found:
        return 0
    wanted = set()
    for path in files:
        try:
            wanted.add(str(path.resolve()))  # (as ``sources.file_stat`` names it)
        except (OSError, RuntimeError):  # (a link to nothing, or a loop: the load says so)
            continue
    ids = [
        int(sid)
        for sid, file_stat, _path in found
        if file_stat is not None and file_stat.rsplit("|", 2)[0] in wanted
    ]
    if ids:
        with store.transaction():
            store.engine.run("ingest/drop_usage_first.sql", {"ids": ids})
            cache.bump(store, cache.DATA)
    return len(ids)


def _there(file_stat: str | None) -> bool:
    """Whether the file a ``sources.file_stat`` names is a file on disk now."""
    return file_stat is not None and os.path.isfile(file_stat.rsplit("|", 2)[0])
