"""What a file's bytes say, learnt in the one pass that hashes it: its SHA-256, and whether its
compressed data is sound; tallies (encoding, line ends) are fed its content on the way."""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from analyzer.ingest.reading import GZIP_MAGIC


class Tally(Protocol):
    """Something that learns about a file's content from its bytes, fed in chunks."""

    def feed(self, chunk: bytes, final: bool = False) -> None: ...


class _GzipCheck:
    """Decompresses gzip data as it streams past, only to learn whether all of it is sound
    (DuckDB's reader would read some damage as garbage); feeds what it unpacks to tallies."""

    def __init__(self, tallies: Sequence[Tally]) -> None:
        self.dec = zlib.decompressobj(wbits=31)
        self.tallies = tallies
        self.damage: str | None = None

    def feed(self, chunk: bytes) -> None:
        while chunk and self.damage is None:
            try:
                data = self.dec.decompress(chunk)
            except zlib.error as exc:
                self.damage = str(exc)
                return
            for tally in self.tallies:
                tally.feed(data)
            if not self.dec.eof:
                return
            chunk = self.dec.unused_data
            if not chunk.startswith(GZIP_MAGIC):
                return  # another member follows only if it starts like one
            self.dec = zlib.decompressobj(wbits=31)

    def finish(self) -> str | None:
        if self.damage is None and not self.dec.eof:
            self.damage = "the compressed data is cut off"
        return self.damage


def sha256_of(
    path: Path, tallies: Sequence[Tally] = (), gz: bool = False
) -> tuple[str, str | None]:
    """The file's SHA-256 and, for gzip (``gz``), what is wrong with its compressed data (None
    when sound). Each of ``tallies`` is fed the content (decompressed) in the same pass."""
    h = hashlib.sha256()
    check = _GzipCheck(tallies) if gz else None
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
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
