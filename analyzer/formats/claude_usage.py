"""Claude Code transcripts read usage first by DuckDB's JSON reader (issue 48).

A usage-first read (``analyzer.load.usage_first``) needs each call's usage and measures, not
its content: ``claude_code.read`` builds them in Python from every assistant line, and this
module builds the same rows, column for column and in the same order, in SQL
(``analyzer/sql/ingest/claude_usage.sql``) from DuckDB's ``read_json`` of the files, all the
transcripts of a refresh together (in about two thirds of the CPU time:
docs/performance.md). The usage rules (a call is its lines of one message and request id, the
largest count of its lines wins, a placeholder count is estimated from what the call wrote,
fast mode, web searches, stated costs, replays) are written there once more:
``tests/test_claude_usage.py`` holds both readers' tables equal on every sample corpus and on
generated lines of every odd shape the Python reader handles.

The SQL reader takes a file only where it is sure to agree. A file is left to the Python reader
(``load`` answers None) when it is compressed, not plain UTF-8, or read on from a resume point;
when DuckDB cannot read it (a line that is not a JSON object, or not JSON, a key twice, an
unpaired surrogate, a line over the limit: the Python reader rejects such lines, with their
reasons); when it has a blank line (DuckDB passes over it, so the line numbers would differ);
or when a line holds what the SQL does not write out (``odd`` there: an API error's status, a
usage object of another provider's shape, a value of a type the Python reader converts, a
timestamp not in Claude Code's own form). Left as they were: an integer beyond 64 bits, which
orjson refuses (the Python reader rejects its line, DuckDB reads a float), and a block nested
deeper than orjson writes (its arguments measure 0 there).
"""

from __future__ import annotations

import functools
import itertools
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

    from analyzer.engine.engine import Engine
    from analyzer.ingest.base import LoadContext, LoadResult, SourceFile

_SQL = "ingest/claude_usage.sql"
_DONE = "ingest/claude_usage_done.sql"
_COUNT_CHUNK = 1 << 20
# A file up to this size is read into memory and joined with the other small files of its part
# into one file that DuckDB reads (``_joined``).
SMALL_FILE_BYTES = 1 << 20
# The input read in one statement at most (the lines of its assistant messages are held while
# it is read; a bigger history is read in parts of this size).
PART_BYTES = 256 << 20


@dataclass(frozen=True)
class Read:
    """A file read by the SQL reader: its calls (``CALL_COLUMNS``, in its order), its lines and
    its assistant lines, and the file's size and modification time when it was read."""

    calls: pa.Table
    lines: int
    assistant: int
    stat: tuple[int, int]


# Told of each file the reader reads (its path, and its size and modification time before it
# was read), it gives what takes the file's bytes, in order, and then ``b""``: the load
# fingerprints them there, not reading the file again.
Seen = Callable[[Path, tuple[int, int]], Callable[[bytes], None]]

# The files read ahead for the load under way (``read_ahead``), by path: ``load`` takes each
# (None: one the SQL reader left to the Python reader).
_AHEAD: dict[str, Read | None] = {}


def usable(src: SourceFile) -> bool:
    """Whether the SQL reader may read ``src`` at all (the rest is judged as it reads)."""
    head = src.head
    return head.compression is None and head.encoding == "utf-8" and not src.mixed_line_ends


def line_count(path: Path, feed: Callable[[bytes], None] | None = None) -> int:
    """The lines of a file as ``reading.text_lines`` numbers them (a last line without its
    line end is one); ``feed`` is given its bytes as they are read, and ``b""`` at the end."""
    buf = bytearray(_COUNT_CHUNK)
    lines, last = 0, 10
    with path.open("rb", buffering=0) as fh:
        while n := fh.readinto(buf):
            lines += buf.count(b"\n", 0, n)
            last = buf[n - 1]
            if feed is not None:
                feed(bytes(buf[:n]))
    if feed is not None:
        feed(b"")
    return lines + (last != 10)


def project_folder(path: Path) -> str | None:
    """The project folder a transcript lies in: the folder under ``projects/`` (Claude Code's
    own layout, as ccusage names projects), or None outside that layout."""
    parts = path.absolute().parts
    if "projects" in parts[:-1]:
        i = len(parts) - 1 - parts[::-1].index("projects")
        if i + 1 < len(parts) - 1:
            return parts[i + 1]
    return None


@functools.cache
def _private() -> Engine:
    """An in-memory DuckDB of this process's own, apart from any store (its temporary tables
    never meet a store's transaction)."""
    from analyzer.engine.engine import Engine

    return Engine.scratch()


def _params(paths: list[Path]) -> dict[str, list[Any]]:
    return {
        "files": [str(p) for p in paths],
        "stems": [p.stem for p in paths],
        "folders": [project_folder(p) for p in paths],
        "parents": [p.parent.name for p in paths],
    }


def read(paths: list[Path], seen: Seen | None = None) -> dict[str, Read]:
    """The files of ``paths`` the SQL reader takes (by path as given), read in one statement:
    small files (``SMALL_FILE_BYTES``) written one after another into one file first (DuckDB's
    reader spends about a millisecond on each file it opens). A statement that fails (a file
    DuckDB cannot read), or that finds a blank line (which would shift the line numbers of the
    files after it), is made again for each half of the files, down to the one file, which is
    then left to the Python reader. ``seen`` is told each file's bytes as they are read."""
    paths = [p for p in paths if p.parent.name]  # (the project is the folder's name)
    if not paths:
        return {}
    try:
        stats = [p.stat() for p in paths]
        if len(paths) > 1 and all(st.st_size <= SMALL_FILE_BYTES for st in stats):
            with _joined(paths) as (source, lines, sizes):
                feeding = _Feeding(source, paths, stats, sizes, seen) if seen else None
                try:
                    found = _run(paths, stats, [source], _Counted(lines))
                finally:
                    if feeding is not None:
                        feeding.join()
        else:
            found = _run(paths, stats, [str(p) for p in paths], _Counting(paths, stats, seen))
    except OSError:  # (a file gone or unreadable: the load says so, as ever)
        found = None
    return found if found is not None else _halves(paths)


def _halves(paths: list[Path]) -> dict[str, Read]:
    if len(paths) == 1:
        return {}
    half = len(paths) // 2
    return {**read(paths[:half]), **read(paths[half:])}  # (seen once already)


class _Counted:
    """Each file's lines, counted already (files joined into one: where each starts in it is
    known before it is read)."""

    joined = True

    def __init__(self, lines: list[int]) -> None:
        self.lines = lines

    def result(self) -> list[int]:
        return self.lines


class _Counting(threading.Thread):
    """Each file's lines (``line_count``), counted in a thread of its own while DuckDB reads
    the files (it does not hold Python's lock as it reads); ``seen`` is told their bytes."""

    joined = False

    def __init__(self, paths: list[Path], stats: list[os.stat_result], seen: Seen | None) -> None:
        super().__init__(name="llm-forensics-lines", daemon=True)
        self.paths, self.stats, self.seen = paths, stats, seen
        self.lines = [0] * len(paths)
        self.error: OSError | None = None
        self.start()

    def run(self) -> None:
        seen = self.seen
        try:
            self.lines = [
                line_count(p, seen(p, (st.st_size, st.st_mtime_ns)) if seen else None)
                for p, st in zip(self.paths, self.stats, strict=True)
            ]
        except OSError as exc:
            self.error = exc

    def result(self) -> list[int]:
        self.join()
        if self.error is not None:
            raise self.error
        return self.lines


@contextmanager
def _joined(paths: list[Path]) -> Iterator[tuple[str, list[int], list[tuple[int, bool]]]]:
    """What DuckDB reads for ``paths`` (small files): one temporary file that holds them one
    after another, each ended by a line end; their lines; and each one's size and whether it
    ended with its own line end."""
    import tempfile  # (the live hook imports this module, never this function)

    lines, sizes = [], []
    fd, name = tempfile.mkstemp(prefix="llm-forensics-", suffix=".jsonl")
    try:
        with os.fdopen(fd, "wb") as tmp:
            for p in paths:
                data = p.read_bytes()
                tmp.write(data)
                ended = data[-1:] in (b"\n", b"")
                if not ended:
                    tmp.write(b"\n")
                lines.append(data.count(b"\n") + (not ended))
                sizes.append((len(data), ended))
        yield name, lines, sizes
    finally:
        os.unlink(name)


class _Feeding(threading.Thread):
    """``seen`` told each joined file's bytes, read back from the file they were joined
    into, in a thread of its own while DuckDB reads that file (this process waits for DuckDB,
    which does not hold Python's lock as it reads)."""

    def __init__(
        self,
        source: str,
        paths: list[Path],
        stats: list[os.stat_result],
        sizes: list[tuple[int, bool]],
        seen: Seen,
    ) -> None:
        super().__init__(name="llm-forensics-seen", daemon=True)
        self.source, self.paths, self.stats = source, paths, stats
        self.sizes, self.seen = sizes, seen
        self.start()

    def run(self) -> None:
        try:
            with open(self.source, "rb") as fh:
                for p, st, (size, ended) in zip(self.paths, self.stats, self.sizes, strict=True):
                    data = fh.read(size)
                    if not ended:
                        fh.read(1)  # (the line end put after it)
                    feed = self.seen(p, (st.st_size, st.st_mtime_ns))
                    feed(data)
                    feed(b"")
        except OSError:
            return  # (what is not seen is read again by the load, as ever)


def _run(
    paths: list[Path],
    stats: list[os.stat_result],
    sources: list[str],
    counts: _Counted | _Counting,
) -> dict[str, Read] | None:
    """``paths`` read from ``sources`` (None: a statement failed, or found a blank line)."""
    engine = _private()
    try:
        return _calls(engine, paths, stats, sources, counts)
    finally:
        engine.run(_DONE)


def _calls(
    engine: Engine,
    paths: list[Path],
    stats: list[os.stat_result],
    sources: list[str],
    counts: _Counted | _Counting,
) -> dict[str, Read] | None:
    import pyarrow as pa

    from analyzer.engine.engine import StatementFailed, StatementStopped
    from analyzer.ingest.rows import CALL_COLUMNS

    known = counts.result() if counts.joined else [0] * len(paths)
    starts = list(itertools.accumulate(known, initial=0))[:-1]
    params = {**_params(paths), "sources": sources, "starts": starts, "joined": counts.joined}
    try:
        engine.run(_SQL, params)
    except StatementFailed as exc:  # (a file DuckDB cannot read: the Python reader says why)
        if isinstance(exc, StatementStopped):
            raise KeyboardInterrupt from None
        return None
    finally:
        lines = counts.result()
    read = dict(engine.rows("SELECT f, lines FROM lf_cu_lines"))
    if any(read.get(f, 0) != n for f, n in enumerate(lines)):
        return None  # (a blank line somewhere: see the module)
    verdicts = engine.rows("SELECT f, assistant, odd, calls FROM lf_cu_verdict")
    table = engine.arrow("SELECT * EXCLUDE (f) FROM lf_cu_calls")
    n = table.num_rows
    columns = [  # (a column no Claude Code line fills is NULL, as in the Python reader's rows)
        table.column(name).cast(kind) if name in table.column_names else pa.nulls(n, kind)
        for name, kind in CALL_COLUMNS.items()
    ]
    table = pa.table(columns, names=list(CALL_COLUMNS))
    out: dict[str, Read] = {}
    at = 0
    for f, assistant, odd, calls in verdicts:
        if not odd:
            st = stats[f]
            calls_of, stat = table.slice(at, calls), (st.st_size, st.st_mtime_ns)
            out[str(paths[f])] = Read(calls_of, lines[f], int(assistant), stat)
        at += calls
    return out


def read_ahead(paths: list[Path], seen: Seen | None = None) -> None:
    """Read ``paths`` now, the small files and the others apart, in parts of ``PART_BYTES``,
    for ``load`` to take as the load gets to each file; ``seen`` is told the bytes of each
    file read (``read``)."""
    parts: dict[bool, tuple[list[Path], int]] = {True: ([], 0), False: ([], 0)}
    for p in paths:
        try:
            size = p.stat().st_size
        except OSError:
            continue
        small = size <= SMALL_FILE_BYTES
        part, total = parts[small]
        part.append(p)
        parts[small] = (part, total + size)
        if total + size >= PART_BYTES:
            _take(part, seen)
            parts[small] = ([], 0)
    for part, _total in parts.values():
        if part:
            _take(part, seen)


def _take(paths: list[Path], seen: Seen | None) -> None:
    done = read(paths, seen)
    _AHEAD.update({str(p): done.get(str(p)) for p in paths})


def forget() -> None:
    """Let go of what was read ahead and not taken (the load is over)."""
    _AHEAD.clear()


def load(ctx: LoadContext, fmt: str, call_prefix: str) -> LoadResult | None:
    """The file read usage first by the SQL reader, as ``claude_code.read`` reads it (read
    ahead, or now), or None to have that reader read it; its calls are of format ``fmt``."""
    from analyzer.ingest.base import CONTENT_LATER
    from analyzer.ingest.lowering import Lowering

    src = ctx.source
    if ctx.options.content or ctx.resume is not None or not usable(src):
        return None
    path = Path(src.path)
    ahead = str(path) in _AHEAD
    done = _AHEAD.pop(str(path), None)
    if ahead and done is None:  # (left to the Python reader)
        return None
    try:
        st = path.stat()
    except OSError:
        return None
    if done is None or done.stat != (st.st_size, st.st_mtime_ns):  # (not read ahead, or changed)
        done = read([path]).get(str(path))
        if done is None:
            return None
    low = Lowering(ctx, fmt, call_prefix)
    low.add_call_table(done.calls)
    low.read(done.lines)
    low.skip(CONTENT_LATER, done.lines - done.assistant)
    return low.finish()
