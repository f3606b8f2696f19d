"""Every case of the broken-input corpus (tests/corpus.py), run through the real command line
in its own process: no traceback; loaded with every record accounted for, or exit 3 with one
line naming the file."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import duckdb
import pytest

from tests.corpus import FANCY, ROWS, Case, build, transcript_lines
from tests.helpers import run_ingest


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Case]]:
    root = tmp_path_factory.mktemp("corpus")
    return root, {c.name: c for c in build(root)}


class Outcome:
    def __init__(self, root: Path, case: Case) -> None:
        self.case = case
        self.proc = run_ingest(root, case)
        self.db = root / f"{case.name}.duckdb"
        assert "Traceback" not in self.proc.stderr, self.proc.stderr

    def loaded(self, exit_code: int = 0) -> list[dict[str, object]]:
        assert self.proc.returncode == exit_code, self.proc.stderr
        files = json.loads(self.proc.stdout)
        for f in files:
            if f["status"] == "loaded":
                assert f["rows_read"] == (
                    f["rows_loaded"] + f["rows_rejected"] + f["rows_duplicate"] + f["rows_skipped"]
                )
        return files

    def one(self, exit_code: int = 0) -> dict[str, object]:
        files = self.loaded(exit_code)
        assert len(files) == 1 and files[0]["status"] == "loaded", files
        return files[0]

    def refused(self, *words: str) -> str:
        """Exit 3, nothing on stdout, one line on stderr naming the file; returns the line."""
        assert self.proc.returncode == 3, (self.proc.returncode, self.proc.stderr)
        assert self.proc.stdout == ""
        lines = self.proc.stderr.strip().splitlines()
        assert len(lines) == 1, lines
        assert lines[0].startswith(f"Error: {self.case.path}"), lines[0]
        for word in words:
            assert word in lines[0], lines[0]
        if self.db.exists():  # the store is never left with part of the file
            with duckdb.connect(str(self.db), read_only=True) as con:
                assert con.execute("SELECT count(*) FROM sources").fetchone() == (0,)
                assert con.execute("SELECT count(*) FROM calls").fetchone() == (0,)
        return lines[0]

    def query(self, sql: str) -> list[tuple]:
        with duckdb.connect(str(self.db), read_only=True) as con:
            return con.execute(sql).fetchall()

    def rejects(self) -> list[tuple[int, str]]:
        return [
            (int(r[0]), str(r[1]))
            for r in self.query("SELECT line, reason FROM rejects ORDER BY line")
        ]

    def encoding(self) -> str:
        return str(self.query("SELECT encoding FROM sources")[0][0])


def outcome(corpus: tuple[Path, dict[str, Case]], name: str) -> Outcome:
    root, cases = corpus
    return Outcome(root, cases[name])


N_LINES = len(transcript_lines())


def test_csv_truncated_last_line(corpus) -> None:
    o = outcome(corpus, "csv_truncated_last_line")
    f = o.one()
    assert (f["rows_read"], f["rows_loaded"], f["rows_rejected"]) == (ROWS, ROWS - 1, 1)
    [(line, reason)] = o.rejects()
    assert line == ROWS + 1 and reason


def test_jsonl_truncated_last_line(corpus) -> None:
    o = outcome(corpus, "jsonl_truncated_last_line")
    f = o.one()
    assert (f["rows_read"], f["rows_rejected"]) == (N_LINES, 1)
    assert o.rejects() == [(N_LINES, "cut-off last line (is the log still being written?)")]


def test_csv_invalid_utf8_rejects_that_row(corpus) -> None:
    o = outcome(corpus, "csv_invalid_utf8")
    f = o.one()
    assert (f["rows_loaded"], f["rows_rejected"]) == (ROWS - 1, 1)
    [(line, reason)] = o.rejects()
    assert (line, reason) == (11, "bytes that are not valid UTF-8 in this row (a damaged file?)")
    assert o.encoding() == "utf-8"  # the rest is good UTF-8: damage, not another encoding


def test_jsonl_invalid_utf8_rejects_that_line(corpus) -> None:
    o = outcome(corpus, "jsonl_invalid_utf8")
    f = o.one()
    assert f["rows_rejected"] == 1
    [(line, reason)] = o.rejects()
    assert (line, reason) == (3, "bytes that are not valid UTF-8 in this line")


@pytest.mark.parametrize(
    ("name", "encoding", "said"),
    [
        ("csv_cp1252", "cp1252", "read as Windows-1252 (cp1252)"),
        ("csv_utf16_bom", "utf-16", "read as UTF-16"),
    ],
)
def test_other_encodings_are_decoded_and_said(corpus, name: str, encoding: str, said: str) -> None:
    o = outcome(corpus, name)
    f = o.one()
    assert (f["rows_loaded"], f["rows_rejected"]) == (ROWS, 0)
    assert o.encoding() == encoding
    assert f"{o.case.path}: not UTF-8; {said}" in o.proc.stderr
    apps = dict(o.query("SELECT app, count(*) FROM calls GROUP BY app"))
    assert apps == {FANCY: 14, "App A": 26}


def test_utf16_transcript(corpus) -> None:
    o = outcome(corpus, "jsonl_utf16_bom")
    f = o.one()
    assert (f["rows_read"], f["rows_rejected"]) == (N_LINES, 0)
    assert f["rows_loaded"] > 0 and o.encoding() == "utf-16"


def test_crlf(corpus) -> None:
    csv_file = outcome(corpus, "csv_crlf").one()
    assert (csv_file["rows_loaded"], csv_file["rows_rejected"]) == (ROWS, 0)
    jsonl = outcome(corpus, "jsonl_crlf").one()
    assert (jsonl["rows_read"], jsonl["rows_rejected"]) == (N_LINES, 0)


def test_mixed_line_ends(corpus) -> None:
    o = outcome(corpus, "csv_mixed_line_ends")
    f = o.one()
    assert (f["rows_read"], f["rows_loaded"], f["rows_rejected"]) == (ROWS, ROWS, 0)
    # Read through an LF copy with the same lines: every row keeps its line number.
    assert [r[0] for r in o.query("SELECT line FROM calls ORDER BY line")] == list(
        range(2, ROWS + 2)
    )


def test_header_only(corpus) -> None:
    f = outcome(corpus, "csv_header_only").one()
    assert (f["rows_read"], f["rows_loaded"]) == (0, 0)


def test_empty_file(corpus) -> None:
    outcome(corpus, "empty_csv").refused("empty file")


@pytest.mark.parametrize("name", ["binary_csv", "binary_jsonl"])
def test_random_binary(corpus, name: str) -> None:
    outcome(corpus, name).refused("not a recognised input format")


def test_50mb_line(corpus) -> None:
    o = outcome(corpus, "jsonl_50mb_line")
    f = o.one()
    assert (f["format"], f["rows_read"], f["rows_rejected"]) == ("claude_code", N_LINES, 0)
    assert f["rows_loaded"] == N_LINES - f["rows_skipped"]


def test_bad_numbers_are_rejected_by_column(corpus) -> None:
    o = outcome(corpus, "csv_bad_numbers")
    # Every row rejected: read, but nothing of it loaded, so the run says so (exit 4).
    f = o.one(exit_code=4)
    assert o.proc.stderr.strip().splitlines()[-1] == "exit 4: 1 file not read (numbers.csv)"
    assert (f["rows_loaded"], f["rows_rejected"]) == (0, 8)
    rejects = o.rejects()
    assert [line for line, _ in rejects] == list(range(2, 10))
    for (_, reason), column, value in zip(
        rejects,
        ["tokens_prompt", "cost_total"] * 4,
        ["n/a", "n/a", "-5", "-5", "NaN", "NaN", "1e30", "1e30"],
        strict=True,
    ):
        assert reason.startswith(f'{column}: "{value}" is not'), reason


def test_header_repeated_mid_file(corpus) -> None:
    o = outcome(corpus, "csv_header_repeated")
    f = o.one()
    assert (f["rows_read"], f["rows_loaded"], f["rows_skipped"], f["rows_rejected"]) == (
        21,
        20,
        1,
        0,
    )


def test_dates_in_three_layouts_and_epoch(corpus) -> None:
    o = outcome(corpus, "csv_dates")
    assert o.one()["rows_loaded"] == 4
    times = [r[0] for r in o.query("SELECT ts FROM calls ORDER BY line")]
    assert times == [datetime(2025, 12, 13, 6, 0, s) for s in (0, 10, 20, 30)]


def test_deep_nesting(corpus) -> None:
    o = outcome(corpus, "jsonl_deep_nesting")
    assert o.one()["rows_rejected"] == 1
    [(line, reason)] = o.rejects()
    assert line == 4 and "not valid JSON" in reason
    outcome(corpus, "json_deep_nesting").refused("deep.json:1: not valid JSON")
    # Just under the JSON reader's depth limit: read, and rejected for what it lacks.
    o = outcome(corpus, "jsonl_nested_999")
    f = o.one()
    assert (f["rows_read"], f["rows_rejected"]) == (N_LINES, 1)
    assert o.rejects() == [(4, "assistant line without message.id")]


@pytest.mark.parametrize("name", ["csv_gz_truncated", "jsonl_gz_truncated"])
def test_truncated_gzip_loads_what_decompresses(corpus, name: str) -> None:
    o = outcome(corpus, name)
    f = o.one()
    assert f["rows_rejected"] == 1 and f["rows_loaded"] > 1000
    [(line, reason)] = o.rejects()
    # Records read: the whole lines before the damage (a CSV's header is not a record), then
    # the damaged rest as one reject on the line after them.
    header = 1 if name.startswith("csv") else 0
    assert line == f["rows_read"] + header
    assert reason.startswith("damaged gzip data (")
    assert reason.endswith(f"the file cannot be read past line {line - 1:,}")
    assert f"{o.case.path}: damaged gzip data" in o.proc.stderr


def test_symlink_loop(corpus) -> None:
    o = outcome(corpus, "symlink_loop")
    files = {f["path"]: f for f in o.loaded()}
    assert files["loop/sub/export.csv"]["rows_loaded"] == ROWS
    assert files["loop/self"]["status"] == files["loop/nowhere"]["status"] == "unreadable"
    assert len(files) == 3  # sub/up -> .. was not followed
    assert "loop/self: skipped: a symbolic link to nothing (broken, or a loop)" in o.proc.stderr


def test_unreadable_file(corpus) -> None:
    o = outcome(corpus, "unreadable")
    assert o.refused() == "Error: unreadable.csv: permission denied"
