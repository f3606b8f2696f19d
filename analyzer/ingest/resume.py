"""Reading a growing log from where the last read of it stopped.

An agent appends to its log while it works, and a refresh or a ``watch`` poll finds the file
grown again and again. A format whose spec ``resumes`` (Claude Code transcripts) saves, at the
end of each read, a **resume point**: the byte after the last line it took whole, the line ends
before it, the SHA-256 of the bytes before it, and its reader's state there (``Checkpoint``).
The next read of the same file (by its resolved path) goes on from there when the file still
starts with exactly those bytes: only the lines after it are read, and they alone are
accounted for in that read's ``sources`` row. Anything else (a file cut short, rewritten,
replaced, compressed, or a line the saved state cannot go on with, ``CannotResume``) is read
whole, its calls settled against the store as before.

Either way, an earlier read's rejects that the new read reads again are **moved** to it: a read
that caught a line half-written rejected it as cut off, and that reject goes once the line is
read whole (the earlier read's ``sources`` row then counts the line no more). When the file is
read whole and still starts with everything the earlier read saw, all its rejects are read
again; when the read goes on from a resume point, those at or after it.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from analyzer.ingest.base import Checkpoint, Head, Resume

if TYPE_CHECKING:
    from analyzer.engine.engine import Engine


@dataclass(frozen=True)
class Prior:
    """The latest read of a file (its ``sources`` row): what a read of it now follows."""

    source_id: int
    bytes: int
    sha256: str
    format: str


@dataclass(frozen=True)
class Point:
    """A stored resume point (``resume_points``)."""

    source_id: int
    offset: int
    lines: int
    sha256: str
    state: str  # JSON


@dataclass(frozen=True)
class Growth:
    """How a file read before is read now: on from a resume point (``resume``), or whole; and
    which of the earlier read's rejects it reads again (``moved``: that read's source id and
    the first line read again), if any."""

    resume: Resume | None = None
    moved: tuple[int, int] | None = None

    def whole(self) -> Growth:
        """The same file read whole instead (its saved state could not go on)."""
        return Growth(None, self.whole_moved)

    whole_moved: tuple[int, int] | None = None  # ``moved`` for a whole read


FIRST_READ = Growth()  # a file not read before (or not as it is now)


class PrefixDigests:
    """The SHA-256 of a file's first ``n`` bytes for each ``n`` of ``offsets``, and how many
    bytes were hashed, learnt while ``checks.sha256_of`` hashes the file (its ``at``)."""

    def __init__(self, offsets: list[int]) -> None:
        self.wanted = sorted(set(offsets))
        self.found: dict[int, str] = {}
        self.size = 0

    def seen(self, h: hashlib._Hash, chunk: bytes) -> None:
        start = self.size
        for n in self.wanted:
            if start <= n <= start + len(chunk) and n not in self.found:
                part = h.copy()
                part.update(chunk[: n - start])
                self.found[n] = part.hexdigest()
        self.size += len(chunk)


class Closed:
    """The ids of the calls an earlier read let go of, as Bloom filters: an id added is always
    reported as there; one that was not added is taken for one about once in 1,000 (the file
    is then read whole: slower, never wrong). Filters are added as it fills, each twice the
    size of the last, so it grows with the file and never has to be built again."""

    BITS_PER_ID = 16
    HASHES = 11

    def __init__(self, layers: list[_Bloom] | None = None) -> None:
        self.layers = layers if layers is not None else [_Bloom(64)]

    def add(self, key: str) -> None:
        last = self.layers[-1]
        if last.n >= last.capacity:
            last = _Bloom(2 * last.capacity)
            self.layers.append(last)
        last.add(key)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and any(key in layer for layer in self.layers)

    def saved(self) -> list[dict[str, Any]]:
        return [layer.saved() for layer in self.layers]

    @classmethod
    def restored(cls, saved: list[dict[str, Any]]) -> Closed:
        return cls([_Bloom.restored(layer) for layer in saved])


class _Bloom:
    """One Bloom filter of ``Closed``: ``capacity`` ids at 16 bits each, 11 hashes (about one
    false answer in 2,000 when full)."""

    def __init__(self, capacity: int, bits: bytes | None = None, n: int = 0) -> None:
        self.capacity = capacity
        self.m = capacity * Closed.BITS_PER_ID
        self.bits = bytearray(bits if bits is not None else bytes((self.m + 7) // 8))
        self.n = n

    def _places(self, key: str) -> list[int]:
        d = hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        h1, h2 = int.from_bytes(d[:8], "little"), int.from_bytes(d[8:], "little") | 1
        return [(h1 + i * h2) % self.m for i in range(Closed.HASHES)]

    def add(self, key: str) -> None:
        for p in self._places(key):
            self.bits[p >> 3] |= 1 << (p & 7)
        self.n += 1

    def __contains__(self, key: str) -> bool:
        return self.n > 0 and all(self.bits[p >> 3] >> (p & 7) & 1 for p in self._places(key))

    def saved(self) -> dict[str, Any]:
        bits = base64.b64encode(self.bits).decode()
        return {"capacity": self.capacity, "n": self.n, "bits": bits}

    @classmethod
    def restored(cls, saved: dict[str, Any]) -> _Bloom:
        return cls(int(saved["capacity"]), base64.b64decode(saved["bits"]), int(saved["n"]))


def prefix_digest(path: Path, n: int) -> str | None:
    """The SHA-256 of the file's first ``n`` bytes (None: it is shorter now)."""
    h = hashlib.sha256()
    left = n
    with open(path, "rb") as fh:
        while left > 0 and (chunk := fh.read(min(left, 1 << 20))):
            h.update(chunk)
            left -= len(chunk)
    return None if left else h.hexdigest()


def point_of(engine: Engine, file: str) -> Point | None:
    """The file's resume point, if it has one."""
    row = engine.one("ingest/resume_point.sql", {"file": file})
    return None if row is None else Point(int(row[0]), int(row[1]), int(row[2]), row[3], row[4])


def offsets(prior: Prior | None, point: Point | None) -> list[int]:
    """Where the file's bytes must be hashed to tell how it grew."""
    return [n for n in (prior.bytes if prior else None, point.offset if point else None) if n]


def growth(
    prior: Prior | None,
    point: Point | None,
    found: dict[int, str],
    fmt: str,
    head: Head,
) -> Growth:
    """How the file is read now that its first bytes hash to ``found`` (``PrefixDigests``),
    read as format ``fmt`` with ``head``."""
    if prior is None or prior.format != fmt:
        return FIRST_READ
    whole = (prior.source_id, 1) if found.get(prior.bytes) == prior.sha256 else None
    resumable = head.compression is None and head.encoding in ("utf-8", "utf-8-sig")
    if (
        point is not None
        and resumable
        and point.source_id == prior.source_id
        and found.get(point.offset) == point.sha256
    ):
        state = orjson.loads(point.state)
        resume = Resume(point.offset, point.lines, state)
        return Growth(resume, (prior.source_id, point.lines + 1), whole)
    return Growth(None, whole, whole)


def checkpoint_digest(path: Path, cp: Checkpoint, digest: str, hashed: int) -> str | None:
    """The SHA-256 of the bytes before the checkpoint: the file's own when the read took every
    byte that was hashed (the usual case), else read again (a cut-off last line left out)."""
    if cp.offset == hashed:
        return digest
    return prefix_digest(path, cp.offset)


@dataclass(frozen=True)
class After:
    """What follows from a read of a file once it is written (in its transaction): the
    earlier read's rejects it read again moved to it (``moved``), and the file's resume point
    replaced by the one it left (``point``: the checkpoint and the SHA-256 before it), or
    dropped. ``file``: the file's resolved path."""

    file: str
    moved: tuple[int, int] | None
    point: tuple[Checkpoint, str] | None

    def settle(self, engine: Engine, source_id: int) -> None:
        """Done, for the read stored as ``source_id``."""
        settle_all(engine, [(self, source_id)])

    def row(self, source_id: int) -> dict[str, Any]:
        """The file's resume point as ``save_resume_points.sql`` takes it."""
        cp, sha = self.point if self.point is not None else (None, None)
        return {
            "file": self.file,
            "keep": cp is not None,
            "source_id": source_id,
            "byte_offset": cp.offset if cp else None,
            "lines": cp.lines if cp else None,
            "prefix_sha256": sha,
            "state": orjson.dumps(cp.state).decode() if cp else None,
        }


# The resume points' columns and their Arrow types (by name: pyarrow is imported when they
# are written, not with this module, which a live reader imports too).
POINT_COLUMNS: dict[str, str] = {
    "file": "string",
    "keep": "bool_",
    "source_id": "int64",
    "byte_offset": "int64",
    "lines": "int64",
    "prefix_sha256": "string",
    "state": "string",
}


def settle_all(engine: Engine, reads: list[tuple[After, int]]) -> None:
    """``After.settle`` of reads stored as the source ids given (a batch's, in order): the
    rejects moved file by file (a grown file's, seldom), the resume points in one statement
    (a statement a file took about 1 ms each: 100 s of a first refresh of 100,000 files)."""
    for a, _sid in reads:
        if a.moved is not None:
            engine.run("ingest/move_rejects.sql", {"old": a.moved[0], "line": a.moved[1]})
    if not reads:
        return
    import pyarrow as pa

    rows = [a.row(sid) for a, sid in reads]
    table = pa.table(
        {c: pa.array([r[c] for r in rows], getattr(pa, t)()) for c, t in POINT_COLUMNS.items()}
    )
    with engine.step() as e:
        e.register("lf_points", table)
        e.run("ingest/save_resume_points.sql")


def after(
    path: Path, file: str, grow: Growth, cp: Checkpoint | None, digest: str, hashed: int
) -> After:
    """What follows from a read of ``path`` (``file``: resolved) read as ``grow`` says, which
    left ``cp``; ``digest`` and ``hashed``: the SHA-256 of the file as it was hashed, and how
    many bytes that was."""
    sha = checkpoint_digest(path, cp, digest, hashed) if cp is not None else None
    return After(file, grow.moved, (cp, sha) if cp is not None and sha is not None else None)
