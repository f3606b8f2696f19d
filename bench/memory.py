"""Peak memory of hostile and large input (issue 33, "Resources"): each case as its own process,
its wall time and peak RSS (``wait4``), and what the tool said.

    python bench/memory.py               # the issue's sizes: 1-2 GB bombs, a 1 GB export
    python bench/memory.py --quick       # 256 MB bombs, a 500,000-row export (about a minute)
    python bench/memory.py --rows 0      # the bombs only

The cases:

* ``.jsonl.gz`` bombs of about 1 MB: a Claude Code transcript (the sample's), then 1 GB of NUL
  bytes, 1 GB of spaces, or (2 MB) 2 GB of newlines. Built in a moment as gzip members: one
  megabyte of one byte compresses to about a kilobyte, and ``cat a.gz b.gz`` is one gzip file.
* a plain ``.jsonl`` with a line of 1 GB of NUL bytes between the transcript's lines (a sparse
  file: the hole reads as NULs and takes no disk).
* ``sample --rows N`` (4,800,000 rows: a 1 GB export) and ``audit`` of that export into a
  throwaway store, the whole pipeline up to the page.

The promise (README, Reliability and Performance): a bomb costs what its limits allow (one line
of 128 MB at most, a compressed file 200 times its size or 64 MB), well under 1 GB; ``audit``
stays under 2 GB; ``sample`` under 1 GB.
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "analyzer"]
MB = 2**20
TRANSCRIPT = next(
    (REPO / "sample_data" / "claude-code" / "projects" / "-home-dev-koda").glob("*.jsonl")
)


def bomb(path: Path, head: bytes, fill: bytes, megabytes: int) -> Path:
    """``head``, then ``megabytes`` MB of ``fill`` repeated, gzipped (one member per MB)."""
    block = gzip.compress(fill * MB, compresslevel=9, mtime=0)
    with open(path, "wb") as out:
        out.write(gzip.compress(head, compresslevel=9, mtime=0))
        for _ in range(megabytes):
            out.write(block)
    return path


def long_line(path: Path, head: bytes, tail: bytes, megabytes: int) -> Path:
    """``head``, a line of ``megabytes`` MB of NUL bytes (a hole in a sparse file), ``tail``."""
    with open(path, "wb") as out:
        out.write(head)
        out.seek(len(head) + megabytes * MB)
        out.write(b"\n" + tail)
    return path


def run(args: list[str], cwd: Path) -> tuple[float, int, int, str]:
    """``llm-forensics ARGS`` in its own process: (seconds, peak RSS in MB, exit code, the
    last line it wrote on stderr, or else on stdout)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLM_FORENSICS_")}
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen([*CLI, *args], cwd=cwd, env=env, stdout=out, stderr=err)
        _pid, status, usage = os.wait4(proc.pid, 0)  # the child's own resource usage
        seconds = time.perf_counter() - started
        proc.returncode = code = os.waitstatus_to_exitcode(status)
        scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes on macOS, else KiB
        said = ""
        for fh in (err, out):
            fh.seek(0)
            lines = [x for x in fh.read().decode(errors="replace").splitlines() if x.strip()]
            if lines:
                said = lines[-1]
                break
    return seconds, usage.ru_maxrss * scale // MB, code, said


def cases(work: Path, size: int, rows: int) -> list[tuple[str, list[str]]]:
    """(what, the command's arguments) of each case, its input written to ``work``."""
    lines = TRANSCRIPT.read_bytes().splitlines(keepends=True)
    out = []
    for name, fill, mb in (
        ("NUL", b"\0", size),
        ("spaces", b" ", size),
        ("newlines", b"\n", 2 * size),
    ):
        f = bomb(work / f"bomb-{name}.jsonl.gz", b"".join(lines), fill, mb)
        what = (
            f"ingest a {f.stat().st_size / MB:.1f} MB .jsonl.gz: a transcript, {mb:,} MB of {name}"
        )
        out.append((what, ["ingest", "--db", str(work / f"{name}.duckdb"), str(f)]))
    f = long_line(work / "long-line.jsonl", b"".join(lines[:5]), b"".join(lines[5:]), size)
    what = f"ingest a .jsonl with a line of {size:,} MB of NULs"
    out.append((what, ["ingest", "--db", str(work / "line.duckdb"), str(f)]))
    if rows:
        export = work / "export"
        out.append((f"sample --rows {rows:,}", ["sample", "-o", str(export), "--rows", str(rows)]))
        csv = export / "openrouter_activity_2025-12.csv"
        out.append(
            ("audit of that export -o report.html", ["audit", str(csv), "-o", "report.html"])
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="256 MB bombs, 500,000 rows")
    ap.add_argument("--rows", type=int, default=None, help="rows of the export (0: none)")
    ap.add_argument("--work", type=Path, default=None, help="folder for the inputs (kept)")
    a = ap.parse_args()
    rows = a.rows if a.rows is not None else (500_000 if a.quick else 4_800_000)
    work = a.work or Path(tempfile.mkdtemp(prefix="lf-memory-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"inputs in {work}", file=sys.stderr)
    results = []
    for what, args in cases(work, 256 if a.quick else 1024, rows):
        for db in (Path(x) for x in args if x.endswith(".duckdb")):
            db.unlink(missing_ok=True)
        seconds, peak, code, said = run(args, work)
        results.append((what, seconds, peak, code, said))
        print(f"  {what}: {seconds:.1f} s, {peak:,} MB, exit {code}", file=sys.stderr)
    csv = work / "export" / "openrouter_activity_2025-12.csv"
    if csv.exists():
        print(f"the export: {csv.stat().st_size / MB:,.0f} MB", file=sys.stderr)

    print("| case | seconds | peak RSS | exit | its last line |\n|---|---:|---:|---:|---|")
    for what, seconds, peak, code, said in results:
        said = said[:150].replace("|", "/")
        print(f"| {what} | {seconds:.1f} | {peak:,} MB | {code} | {said} |")
    if a.work is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
