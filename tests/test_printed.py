"""A file's fingerprint worked out from the bytes a reader read ahead (``prepare.Printed``,
``Printing``), held equal to the one the load works out by reading the file
(``prepare.fingerprint``): the same SHA-256, the same encoding judged on all of it and the
same verdict on its line ends, for whatever head the file is sniffed with; and a home of
transcripts stores the same with the fingerprints taken from the bytes read ahead as
without."""

from __future__ import annotations

import codecs
from collections.abc import Callable
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from analyzer.formats.claude_usage import line_count
from analyzer.ingest.reading import HEAD_BYTES, plain_head, read_head
from analyzer.load import flow
from analyzer.load.prepare import Printed, Printing, fingerprint

# Bytes that decide the verdicts: line ends, UTF-8 beyond ASCII (whole and cut), bytes that
# are not UTF-8, a byte-order mark's, and JSON.
PIECES = [
    b"a",
    b"{}",
    b"\n",
    b"\r",
    b"\r\n",
    "é".encode(),
    "€".encode()[:2],
    b"\xe9",
    b"\xff",
    codecs.BOM_UTF8,
    b"\x00",
]


def _both(path: Path, data: bytes) -> tuple[object, object]:
    path.write_bytes(data)
    st_ = path.stat()
    head = read_head(path, path.name)
    stat = (st_.st_size, st_.st_mtime_ns)
    printed = Printed.of(data, stat)
    # (as the SQL reader's thread feeds it: in the chunks it counts lines in)
    printing = Printing(stat)
    line_count(path, lambda chunk: printing.feed(chunk) if chunk else None)
    in_chunks = printing.printed()
    assert printed is not None and in_chunks == printed
    # the head read from the bytes in hand is the one read from the file, where it can be
    ahead = plain_head(printing.start)
    assert ahead is None or ahead == head
    return fingerprint(path, head), printed.fingerprint(head)


SHAPES = {
    "ascii": b'{"a": 1}\n{"b": 2}\n',
    "utf-8": '{"a": "café"}\n'.encode(),
    "cp1252": '{"a": "café"}\n'.encode("cp1252"),
    "cp1252 after the head": b"x" * 70_000 + "é".encode("cp1252"),
    "utf-8 then a damaged byte": "é".encode() + b"\xff\n",
    "a damaged byte then utf-8": b"\xff" + "é".encode() + b"\n",
    "utf-8 with a byte-order mark": codecs.BOM_UTF8 + b"{}\r\n{}\n",
    "utf-16": '{"a": 1}\r\n{"b": 2}\n'.encode("utf-16"),
    "crlf": b"{}\r\n{}\r\n",
    "crlf and lf": b"{}\r\n{}\n",
    "cr only": b"{}\r{}\r",
    "a cr at the end of a chunk": b"x" * ((1 << 20) - 1) + b"\r\n" + b"y\n",
    "a character across two chunks": b"x" * ((1 << 20) - 1) + "€".encode() + b"\n",
    "cp1252 across two chunks": b"x" * ((1 << 20) + 5) + b"\xe9\n",
}


def test_each_shape_is_fingerprinted_the_same_from_the_bytes(tmp_path: Path) -> None:
    for name, data in SHAPES.items():
        by_reading, by_bytes = _both(tmp_path / "f.jsonl", data)
        assert by_reading == by_bytes, name


def test_a_head_that_needs_the_file_is_read_from_the_file() -> None:
    """A compressed file and one whose first line is longer than the head are sniffed on a
    head ``read_head`` reads from the file (decompressed, the whole first line)."""
    import gzip

    assert plain_head(gzip.compress(b"{}\n")) is None
    long_line = b'{"a": "' + b"x" * HEAD_BYTES + b'"}\n'
    assert plain_head(long_line) is None
    assert plain_head(long_line[: HEAD_BYTES - 10] + b"\n") is not None


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=40))
def test_any_bytes_are_fingerprinted_the_same_from_the_bytes(
    tmp_path_factory: object, pieces: list[bytes]
) -> None:
    folder = tmp_path_factory.mktemp("printed")  # type: ignore[attr-defined]
    by_reading, by_bytes = _both(folder / "f.jsonl", b"".join(pieces) or b"{}")
    assert by_reading == by_bytes


def test_a_home_of_small_transcripts_stores_the_same_without_the_bytes_read_ahead(
    runner, tmp_path, monkeypatch
) -> None:
    """The real-world home with a transcript in Windows-1252 and one of mixed line ends added:
    ``usage daily`` stores the same tables whether the transcripts were fingerprinted from
    the bytes read ahead or by reading them again."""
    from tests.ccusage_side import real_world_home
    from tests.test_usage_first import _run, same_stores

    def home_of(root: Path) -> Path:
        home = real_world_home(root)
        texts = [(p, p.read_text(encoding="utf-8")) for p in _transcripts(home)]
        first, text = texts[0]
        lines = text.splitlines(keepends=True)
        mixed = "".join(lines[:2]).replace("\n", "\r\n") + "".join(lines[2:])
        (first.parent / "odd-endings.jsonl").write_bytes(mixed.encode())
        # (one with a character Windows-1252 writes beyond ASCII)
        path, text = next((p, t) for p, t in texts if any(_latin(c) for c in t))
        latin = text.encode("cp1252", errors="replace")
        (path.parent / "latin.jsonl").write_bytes(latin)
        return home

    seen: list[str] = []
    taken = flow._Ahead._seen

    def counted(self: flow._Ahead, path: Path, stat: tuple[int, int]) -> Callable[[bytes], None]:
        seen.append(path.name)
        return taken(self, path, stat)

    monkeypatch.setattr(flow._Ahead, "_seen", counted)
    home = home_of(tmp_path / "ahead")
    shown = _run(runner, home, "usage", "daily", "--json")
    assert {"odd-endings.jsonl", "latin.jsonl"} <= set(seen)

    monkeypatch.setattr(flow._Ahead, "_seen", lambda *_args: lambda _chunk: None)
    again = home_of(tmp_path / "again")
    assert _run(runner, again, "usage", "daily", "--json") == shown
    assert same_stores(home, again)


def _transcripts(home: Path) -> list[Path]:
    return sorted((home / ".claude" / "projects").rglob("*.jsonl"))


def _latin(c: str) -> bool:
    try:
        return ord(c) > 127 and len(c.encode("cp1252")) == 1
    except UnicodeEncodeError:
        return False
