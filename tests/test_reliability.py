"""Reliability beyond the corpus: how files are named, encodings and line ends judged on the
whole file, damaged compressed data, and linking resumed after an interrupted run."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import duckdb
from click.testing import CliRunner

from analyzer.cli.main import cli
from analyzer.errors import ForensicsError
from analyzer.ingest.encodings import LineEnds, Utf8Tally, guess_encoding
from tests.helpers import SAMPLE_DATA, csv_text, or_row


def _paths(db: Path) -> list[str]:
    with duckdb.connect(str(db), read_only=True) as con:
        return [r[0] for r in con.execute("SELECT path FROM sources ORDER BY path").fetchall()]


def test_files_are_named_from_the_path_given(runner: CliRunner, tmp_path: Path) -> None:
    """An absolute path in, a report without the user's folders out (unless asked)."""
    logs = tmp_path / "home" / "someone" / "logs"
    (logs / "dec").mkdir(parents=True)
    (logs / "dec" / "export.csv").write_text(csv_text([or_row(i) for i in range(5)]))
    page = tmp_path / "report.html"
    db = tmp_path / "a.duckdb"
    result = runner.invoke(cli, ["audit", "--db", str(db), str(logs), "-o", str(page), "--verbose"])
    assert result.exit_code == 0, result.output
    assert _paths(db) == ["logs/dec/export.csv"]
    html = page.read_text()
    assert "logs/dec/export.csv" in html
    assert str(tmp_path) not in html and "someone" not in html
    # Messages still name the file where the user can find it.
    assert f"{logs / 'dec' / 'export.csv'}  [openrouter_csv]" in result.stderr

    full = tmp_path / "b.duckdb"
    result = runner.invoke(cli, ["ingest", "--db", str(full), "--full-paths", str(logs)])
    assert result.exit_code == 0, result.output
    assert _paths(full) == [str(logs / "dec" / "export.csv")]


def test_relative_paths_are_kept_as_typed(runner: CliRunner, tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "exports").mkdir()
    (tmp_path / "exports" / "one.csv").write_text(csv_text([or_row(1)]))
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(cli, ["ingest", "--db", "s.duckdb", "exports/one.csv"])
    assert result.exit_code == 0, result.output
    assert _paths(tmp_path / "s.duckdb") == ["exports/one.csv"]


def test_encoding_is_judged_on_the_whole_file() -> None:
    """Windows-1252 text first seen after the 64 KB head is still found (the ingest judges the
    whole file while hashing it); a damaged byte among good UTF-8 is damage, not cp1252."""
    ascii_head = b"x" * 70_000
    assert guess_encoding(ascii_head) == "utf-8"
    tally = Utf8Tally()
    tally.feed(ascii_head)
    tally.feed("Café — bot".encode("cp1252"), final=True)
    assert tally.verdict() == "cp1252"

    damaged = Utf8Tally()
    damaged.feed("Café".encode() + b" \xff ", final=True)
    assert (damaged.good, damaged.bad, damaged.verdict()) == (True, True, "utf-8")
    # Once a good character is seen, what follows cannot make it cp1252 (it is not decoded).
    settled = Utf8Tally()
    settled.feed("Café".encode())
    settled.feed("Café".encode("cp1252") * 1000, final=True)
    assert settled.verdict() == "utf-8"
    bad_only = Utf8Tally()
    bad_only.feed(b"plain ")
    bad_only.feed(b"\xe9t\xe9", final=True)
    assert (bad_only.good, bad_only.bad, bad_only.verdict()) == (False, True, "cp1252")
    # A character split across two chunks is still one good character.
    split = Utf8Tally()
    euro = "€".encode()
    split.feed(b"a" + euro[:1])
    split.feed(euro[1:], final=True)
    assert (split.good, split.bad) == (True, False)
    assert guess_encoding("a,b\n".encode("utf-16-le")) == "utf-16-le"
    assert guess_encoding("a,b\n".encode("utf-16-be")) == "utf-16-be"


def _line_end_kinds(data: bytes) -> set[str]:
    """The kinds of line end in ``data``, the slow obvious way."""
    kinds, i = set(), 0
    while i < len(data):
        if data[i : i + 2] == b"\r\n":
            kinds.add("crlf")
            i += 2
            continue
        if data[i : i + 1] in (b"\r", b"\n"):
            kinds.add(data[i : i + 1].decode())
        i += 1
    return kinds


def test_line_ends_are_judged_across_chunks() -> None:
    """Every text of up to 6 bytes of ``a``, CR and LF, fed whole, cut in two at each point,
    and cut with an empty chunk between (a CRLF split across chunks included): it is mixed
    exactly when it has more than one kind of line end."""
    texts = [b""]
    for _ in range(6):
        texts += [t + c for t in texts if len(t) == len(texts[-1]) for c in (b"a", b"\r", b"\n")]
    for text in texts:
        expected = len(_line_end_kinds(text)) > 1
        ways = [[text]]
        ways += [[text[:i], text[i:]] for i in range(len(text) + 1)]
        ways += [[text[:i], b"", text[i:]] for i in range(len(text) + 1)]
        for chunks in ways:
            ends = LineEnds()
            for chunk in chunks:
                ends.feed(chunk)
            ends.feed(b"", final=True)
            assert ends.mixed == expected, (text, chunks)


def test_late_cp1252_export_loads_every_row(runner: CliRunner, tmp_path: Path) -> None:
    rows = [or_row(i, app_name="Café" if i >= 500 else "App A") for i in range(520)]
    f = tmp_path / "late.csv"
    f.write_bytes(csv_text(rows).encode("cp1252"))
    assert f.stat().st_size > 65_536
    db = tmp_path / "s.duckdb"
    result = runner.invoke(cli, ["ingest", "--db", str(db), "--json", str(f)])
    assert result.exit_code == 0, result.output
    [report] = json.loads(result.stdout)
    assert (report["rows_loaded"], report["rows_rejected"]) == (520, 0)
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM calls WHERE app = 'Café'").fetchone() == (20,)
        assert con.execute("SELECT encoding FROM sources").fetchone() == ("cp1252",)


def test_corrupt_gzip_loads_what_comes_before_the_damage(runner: CliRunner, tmp_path: Path) -> None:
    data = bytearray(gzip.compress(csv_text([or_row(i) for i in range(4000)]).encode(), mtime=0))
    middle = len(data) // 2
    data[middle : middle + 64] = bytes(64)  # zeros over the deflate stream
    f = tmp_path / "corrupt.csv.gz"
    f.write_bytes(bytes(data))
    db = tmp_path / "s.duckdb"
    result = runner.invoke(cli, ["ingest", "--db", str(db), "--json", str(f)])
    assert result.exit_code == 0, result.output
    [report] = json.loads(result.stdout)
    loaded = report["rows_loaded"]
    assert 0 < loaded < 4000 and report["rows_rejected"] >= 1
    with duckdb.connect(str(db), read_only=True) as con:
        # The rows before the damage load, in order; what zlib unpacked as garbage before it
        # noticed is rejected row by row; the unreadable rest is the last reject.
        lines = [r[0] for r in con.execute("SELECT line FROM calls ORDER BY line").fetchall()]
        assert lines == list(range(2, loaded + 2))
        line, reason = con.execute(
            "SELECT line, reason FROM rejects ORDER BY line DESC LIMIT 1"
        ).fetchone()
    assert reason.startswith("damaged gzip data (")
    assert line == report["rows_read"] + 1  # the header is line 1, not a record
    assert f"{f}: damaged gzip data" in result.stderr


def test_gzip_with_nothing_readable_is_exit_3(runner: CliRunner, tmp_path: Path) -> None:
    f = tmp_path / "junk.csv.gz"
    f.write_bytes(b"\x1f\x8b" + bytes(100))
    result = runner.invoke(cli, ["ingest", "--db", str(tmp_path / "s.duckdb"), str(f)])
    assert result.exit_code == 3
    assert result.stderr.strip() == f"Error: {f}: damaged gzip data (nothing decompresses)"


def test_linking_resumes_after_an_interrupted_run(runner: CliRunner, tmp_path: Path) -> None:
    """A run stopped after its files were committed but before logs were linked to bills:
    the next run links them, though no file is new."""
    db = tmp_path / "s.duckdb"
    assert runner.invoke(cli, ["ingest", "--db", str(db), str(SAMPLE_DATA)]).exit_code == 0
    query = "SELECT count(billing_call_id), count(superseded_by) FROM calls"
    with duckdb.connect(str(db)) as con:
        linked = con.execute(query).fetchone()
        assert linked[0] > 0
        con.execute("UPDATE calls SET billing_call_id = NULL, superseded_by = NULL")
        con.execute("DELETE FROM meta WHERE key = 'linked_version'")
    again = runner.invoke(cli, ["ingest", "--db", str(db), str(SAMPLE_DATA)])
    assert again.exit_code == 0 and "unchanged" in again.stdout
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute(query).fetchone() == linked


def test_a_loader_failure_is_one_line_naming_the_file(
    runner: CliRunner, tmp_path: Path, monkeypatch
) -> None:
    """Should a loader still trip over a file (here made to), the user gets one line naming
    the file and saying the fault is ours, and nothing of the file in the store; found in a
    folder, the rest of the folder is read (exit 4); named, the run stops (exit 3); and
    --traceback shows where it happened."""
    from dataclasses import replace

    import analyzer.formats as registry

    def broken(_ctx: object) -> None:
        raise TypeError("'int' object is not iterable")

    # (the loader is reached through the format's declared spec)
    specs = [replace(f, load=broken) if f.name == "claude_code" else f for f in registry.FORMATS]
    monkeypatch.setattr(registry, "FORMATS", tuple(specs))
    db = tmp_path / "s.duckdb"
    export = tmp_path / "a" / "1.csv"
    export.parent.mkdir()
    export.write_text(csv_text([or_row(1)]))
    transcript = tmp_path / "a" / "2.jsonl"
    transcript.write_bytes(
        b'{"type":"user","sessionId":"s","message":{"role":"user","content":"hi"}}\n'
    )
    result = runner.invoke(cli, ["ingest", "--db", str(db), str(tmp_path / "a")])
    assert result.exit_code == 4
    assert result.stderr.strip().splitlines() == [
        f"warning: {transcript}: could not be loaded: unexpected TypeError: 'int' object is not "
        "iterable (a bug in llm-forensics; nothing from this file was stored) (not read; the "
        "rest is)",
        f"exit 4: 1 file not read ({transcript})",
    ]
    assert _paths(db) == ["a/1.csv"]
    named = runner.invoke(cli, ["ingest", "--db", str(db), str(transcript)])
    assert named.exit_code == 3
    assert named.stderr.strip() == (
        f"Error: {transcript}: could not be loaded: unexpected TypeError: 'int' object is not "
        "iterable (a bug in llm-forensics; nothing from this file was stored)"
    )
    traced = runner.invoke(cli, ["--traceback", "ingest", "--db", str(db), str(transcript)])
    assert isinstance(traced.exception, ForensicsError)
    assert isinstance(traced.exception.__cause__, TypeError)
