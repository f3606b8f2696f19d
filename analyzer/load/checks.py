"""What a file's bytes say, learnt in the one pass that hashes it: its SHA-256, and whether its
compressed data is sound and unpacks to no more than a file may; tallies (encoding, line ends)
are fed its content on the way."""

from __future__ import annotations

import hashlib
import os
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from analyzer.ingest.reading import GZIP_MAGIC, STEP, expansion_limit, over_expansion


class Tally(Protocol):
    """Something that learns about a file's content from its bytes, fed in chunks."""

    def feed(self, chunk: bytes, final: bool = False) -> None: ...


class _GzipCheck:
    """Decompresses gzip data as it streams past, only to learn whether all of it is sound
    (DuckDB's reader would read some damage as garbage) and unpacks to no more than ``limit``
    bytes; feeds what it unpacks to tallies, a bounded step at a time."""

    def __init__(self, tallies: Sequence[Tally], compressed: int) -> None:
        self.dec = zlib.decompressobj(wbits=31)
        self.tallies = tallies
        self.compressed = compressed
        self.limit = expansion_limit(compressed)
        self.unpacked = 0
        self.damage: str | None = None
        self.padding = False  # bytes after the last member (ignored, as gzip does)

    def feed(self, chunk: bytes) -> None:
        while self.damage is None and not self.padding:
            try:
                data = self.dec.decompress(chunk, STEP)
            except zlib.error as exc:
                self.damage = f"damaged gzip data ({exc})"
                return
            self.unpacked += len(data)
            if self.unpacked > self.limit:
                self.damage = over_expansion(self.compressed)
                return
            for tally in self.tallies:
                tally.feed(data)
            if self.dec.eof:
                # (An ended member keeps what follows it: another member starting in the next
                # chunk is found there.)
                chunk = self.dec.unused_data
                if not chunk:
                    return
                if not chunk.startswith(GZIP_MAGIC):
                    self.padding = True  # another member follows only if it starts like one
                    return
                self.dec = zlib.decompressobj(wbits=31)
                continue
            chunk = self.dec.unconsumed_tail
            if not chunk and len(data) < STEP:
                return  # (a full step may leave output inside zlib: another step takes it)

    def finish(self) -> str | None:
        if self.damage is None and not self.dec.eof:
            self.damage = "damaged gzip data (the compressed data is cut off)"
        return self.damage


class Prefixes(Protocol):
    """Something that learns the hash of the file's bytes up to points within it."""

    def seen(self, h: hashlib._Hash, chunk: bytes) -> None: ...


def sha256_of(
    path: Path, tallies: Sequence[Tally] = (), gz: bool = False, at: Prefixes | None = None
) -> tuple[str, str | None]:
    """The file's SHA-256 and, for gzip (``gz``), what is wrong with its compressed data (None
    when sound): damage, or more than :func:`expansion_limit` of it. Each of ``tallies`` is fed
    the content (decompressed) in the same pass; ``at`` sees the hash before each raw chunk."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        check = _GzipCheck(tallies, os.fstat(fh.fileno()).st_size) if gz else None
        while chunk := fh.read(1 << 20):
            if at is not None:
                at.seen(h, chunk)
            h.update(chunk)
            if check is not None:
                check.feed(chunk)
            else:
                for tally in tallies:
                    tally.feed(chunk)
    damage = check.finish() if check is not None else None
    for tally in tallies:
        tally.feed(b"", final=True)
    return h.hexdigest(), damage
