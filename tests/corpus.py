"""A corpus of broken, hostile and huge inputs, written by code (no binaries in the repository).

Each case is a file (or folder) the tool must survive: it is either loaded with every record
accounted for, or refused with exit 3 and one line naming the file. ``tests/test_corpus.py``
asserts each outcome; ``python -m tests.corpus DIR`` writes the corpus and prints what the tool
does with each case (the table in docs/reliability.md).
"""

from __future__ import annotations

import gzip
import os
import random
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # run as a script
    sys.path.insert(0, str(REPO))

from tests.helpers import HEADER, csv_text, or_row  # noqa: E402

CC_SAMPLE = (
    REPO
    / "sample_data/claude-code/projects/-home-dev-koda/5f0c2a9e-8d41-4b7a-9c3e-1a2b3c4d5e6f.jsonl"
)
ROWS = 40
FANCY = "Café — bot"  # characters Windows-1252 and UTF-16 encode differently from UTF-8


@dataclass(frozen=True)
class Case:
    name: str
    what: str  # what is broken about it, for people
    path: str  # relative to the corpus folder


def export_rows(n: int = ROWS) -> list[dict[str, object]]:
    """A valid export; every third row has non-ASCII text in it."""
    return [or_row(i, app_name=FANCY if i % 3 == 0 else "App A") for i in range(n)]


def export_bytes(rows: list[dict[str, object]] | None = None, newline: str = "\n") -> bytes:
    return csv_text(rows if rows is not None else export_rows(), newline=newline).encode()


def transcript_lines() -> list[bytes]:
    """The lines of a valid Claude Code transcript (each ending in a newline)."""
    return CC_SAMPLE.read_bytes().splitlines(keepends=True)


def _deep(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def _write(root: Path, rel: str, data: bytes) -> str:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return rel


def build(root: Path, big_line_mb: int = 50) -> list[Case]:
    """Write every case under ``root``; returns them in a stable order."""
    rng = random.Random(20261122)
    cases: list[Case] = []

    def add(name: str, what: str, rel: str, data: bytes) -> None:
        cases.append(Case(name, what, _write(root, rel, data)))

    good = export_bytes()
    lines = transcript_lines()

    add("csv_truncated_last_line", "export cut off in its last row", "trunc.csv", good[:-25])
    add(
        "jsonl_truncated_last_line",
        "transcript cut off in its last line (a killed writer)",
        "trunc.jsonl",
        b"".join(lines)[:-40],
    )

    rows = good.split(b"\n")
    rows[10] = rows[10].replace(b",u1,", b",u\xff\xfe1,")
    add("csv_invalid_utf8", "bytes that are not UTF-8 in one row", "bad-utf8.csv", b"\n".join(rows))
    bad = list(lines)
    bad[2] = bad[2].replace(b'"main"', b'"ma\xc3in"', 1)
    bad[0] = bad[0].replace(b"explore the codebase", "explore the café".encode())
    add(
        "jsonl_invalid_utf8",
        "bytes that are not UTF-8 in one line",
        "bad-utf8.jsonl",
        b"".join(bad),
    )

    text = csv_text(export_rows())
    add("csv_cp1252", "export re-saved as Windows-1252", "cp1252.csv", text.encode("cp1252"))
    add("csv_utf16_bom", "export saved as UTF-16 with a BOM", "utf16.csv", text.encode("utf-16"))
    add(
        "jsonl_utf16_bom",
        "transcript saved as UTF-16 with a BOM",
        "utf16.jsonl",
        b"".join(lines).decode().encode("utf-16"),
    )
    add("csv_crlf", "Windows line endings", "crlf.csv", export_bytes(newline="\r\n"))
    add("jsonl_crlf", "Windows line endings", "crlf.jsonl", b"".join(lines).replace(b"\n", b"\r\n"))
    rows = export_bytes().split(b"\n")  # the header, ROWS rows, and "" after the last LF
    ends = [b"\r\n" if i % 2 else b"\n" for i in range(len(rows) - 1)]
    ends[-2] = b"\r"  # the row before the last ends in a lone CR
    add(
        "csv_mixed_line_ends",
        "LF, CRLF and a lone CR line end in one file (edited in two editors)",
        "mixed-line-ends.csv",
        b"".join(row + end for row, end in zip(rows, ends, strict=False)),
    )
    add(
        "csv_header_only",
        "an export with no rows",
        "header-only.csv",
        (",".join(HEADER) + "\n").encode(),
    )
    add("empty_csv", "an empty file", "empty.csv", b"")
    add("binary_csv", "random bytes named .csv", "binary.csv", rng.randbytes(200_000))
    add("binary_jsonl", "random bytes named .jsonl", "binary.jsonl", rng.randbytes(200_000))

    huge = lines[0].replace(b"explore the codebase", b"x" * (big_line_mb * 2**20))
    add(
        "jsonl_50mb_line",
        f"a {big_line_mb} MB single JSON line (first line of a transcript)",
        "huge-line.jsonl",
        huge + b"".join(lines[1:]),
    )

    numbers = export_rows(8)
    for i, value in enumerate(["n/a", "-5", "NaN", "1e30"]):
        numbers[2 * i]["tokens_prompt"] = value
        numbers[2 * i + 1]["cost_total"] = value
    add(
        "csv_bad_numbers",
        "n/a, negative, NaN and 1e30 in numeric columns",
        "numbers.csv",
        export_bytes(numbers),
    )

    first, second = export_rows(20)[:10], export_rows(20)[10:]
    add(
        "csv_header_repeated",
        "two exports concatenated (the second with its BOM)",
        "concatenated.csv",
        export_bytes(first) + b"\xef\xbb\xbf" + export_bytes(second),
    )

    dated = export_rows(4)
    dated[0]["created_at"] = "2025-12-13 06:00:00.000"  # the export's own layout
    dated[1]["created_at"] = "2025-12-13T06:00:10Z"  # ISO 8601, UTC
    dated[2]["created_at"] = "2025-12-13T07:00:20+01:00"  # ISO 8601 with an offset
    dated[3]["created_at"] = "1765605630"  # epoch seconds
    add("csv_dates", "dates in three layouts and epoch seconds", "dates.csv", export_bytes(dated))

    deep = list(lines)
    deep[3] = b'{"type":"user","sessionId":"s","nested":' + _deep(10_000) + b"}\n"
    add("jsonl_deep_nesting", "a line nested 10,000 deep", "deep.jsonl", b"".join(deep))
    almost = list(lines)
    almost[3] = (
        b'{"type":"assistant","sessionId":"s","message":' + _deep(999) + b"}\n"
    )  # orjson reads it; Python's repr of it would recurse too deep
    add("jsonl_nested_999", "a line nested 999 deep", "deep-999.jsonl", b"".join(almost))
    add(
        "json_deep_nesting",
        "a conversation JSON nested 10,000 deep",
        "deep.json",
        b'{"messages": ' + _deep(10_000) + b"}",
    )

    big = gzip.compress(export_bytes(export_rows(5000)), mtime=0)
    add("csv_gz_truncated", "a .csv.gz cut in half", "trunc.csv.gz", big[: len(big) // 2])
    jl = gzip.compress(b"".join(lines) * 2000, mtime=0)
    add("jsonl_gz_truncated", "a .jsonl.gz cut in half", "trunc.jsonl.gz", jl[: len(jl) // 2])

    loop = root / "loop"
    (loop / "sub").mkdir(parents=True, exist_ok=True)
    _write(root, "loop/sub/export.csv", good)
    for link, target in (("loop/sub/up", ".."), ("loop/self", "self"), ("loop/nowhere", "gone")):
        if not (root / link).is_symlink():
            os.symlink(target, root / link)
    cases.append(
        Case("symlink_loop", "a folder with a link loop, a self-link and a broken link", "loop")
    )

    add("unreadable", "a file without read permission", "unreadable.csv", good)
    (root / "unreadable.csv").chmod(0)
    return cases


def main(argv: list[str]) -> int:
    """Write the corpus to DIR and print, for each case, what ``llm-forensics ingest`` says
    and the first rejects it stored."""
    import duckdb

    from tests.helpers import run_ingest

    if len(argv) != 1:
        print("usage: python -m tests.corpus DIR", file=sys.stderr)
        return 2
    root = Path(argv[0])
    root.mkdir(parents=True, exist_ok=True)
    for case in build(root):
        result = run_ingest(root, case, as_json=False)
        print(f"{case.name} ({case.what}): exit {result.returncode}")
        for line in (result.stdout + result.stderr).strip().splitlines():
            print(f"    {line}")
        db = root / f"{case.name}.duckdb"
        if result.returncode == 0 and db.exists():
            with duckdb.connect(str(db), read_only=True) as con:
                for line, reason in con.execute(
                    "SELECT line, reason FROM rejects ORDER BY line LIMIT 3"
                ).fetchall():
                    print(f"    reject line {line}: {reason}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
