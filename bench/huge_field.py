"""A correctly quoted 200 MB value in an OpenRouter export, read and loaded (issue 33), and the
time and memory it takes.

    .venv/bin/python bench/huge_field.py [--mb 200] [--rows 50] [--work DIR]

The export is loaded by ``llm-forensics ingest`` into a fresh store, in a process of its own:
its wall time and peak RSS are printed (``os.wait4``'s account of the child). The value is longer
than DuckDB's default line limit (2,000,000 bytes): the first read refuses its record, and the
careful second read (``analyzer.formats.bills.openrouter_read``) reads the file with a line limit as
long as that record. The figures are printed, not asserted: a shared machine is too noisy for
a timed test (``tests/test_csv_data_loss.py`` checks a 3 MB value the same way).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# A row of the export (the app name last, as OpenRouter writes it): ``{i}`` makes it unique.
ROW = (
    "gen-{i:08d},2025-12-13 06:{m:02d}:{s:02d}.000,0.0123,0,0,0,0,1000,120,0,0,"
    "anthropic/claude-sonnet-4.5,Anthropic,standard,false,true,u1,end_turn,stop,2100,800,"
    "false,key-a,"
)
HEADER = (
    "generation_id,created_at,cost_total,cost_web_search,cost_cache,cost_file_processing,"
    "byok_usage_inference,tokens_prompt,tokens_completion,tokens_reasoning,tokens_cached,"
    "model_permaslug,provider_name,variant,cancelled,streamed,user,finish_reason_raw,"
    "finish_reason_normalized,generation_time_ms,time_to_first_token_ms,api_key_disabled,"
    "api_key_name,app_name"
)


def write_export(path: Path, rows: int, big: int, value: bytes) -> None:
    """An export of ``rows`` rows; row ``big`` has ``value`` as its app name, written as is."""
    with open(path, "wb") as out:
        out.write(HEADER.encode() + b"\n")
        for i in range(rows):
            line = ROW.format(i=i, m=i // 60 % 60, s=i % 60).encode()
            out.write(line + (value if i == big else b"App A") + b"\n")


def ingest(path: Path, db: Path) -> tuple[float, float, str]:
    """Seconds, peak RSS in MiB and the output of ``ingest`` of ``path`` in a child process."""
    said = db.with_suffix(".out")
    start = time.perf_counter()
    with open(said, "w") as out:
        child = subprocess.Popen(
            [sys.executable, "-m", "analyzer", "ingest", "--db", str(db), str(path)],
            cwd=REPO,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - start
    text = said.read_text().strip()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"ingest of {path.name} failed: {text}")
    return seconds, usage.ru_maxrss / 1024, text  # (kB on Linux)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=200, help="size of the quoted value (MiB)")
    parser.add_argument("--rows", type=int, default=50, help="rows in the export")
    parser.add_argument("--work", type=Path, help="folder for the files (default: a temp one)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="lf-bench-", dir=args.work) as tmp:
        work = Path(tmp)
        path = work / "huge_value.csv"
        write_export(path, args.rows, args.rows // 2, b'"' + b"y" * (args.mb * 2**20) + b'"')
        seconds, rss, said = ingest(path, work / "huge_value.duckdb")
        size = path.stat().st_size / 2**20
        print(f"value {args.mb} MiB, {args.rows} rows, file {size:.1f} MiB")
        print(f"ingest: {seconds:.2f} s, peak RSS {rss:.0f} MiB: {said}")


if __name__ == "__main__":
    main()
