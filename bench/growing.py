"""A growing transcript read again and again (issue 45, cause 9): what one more read costs once
an agent has appended to a long Claude Code session, as a refresh or a ``watch`` poll reads it.

    python bench/growing.py              # a 50 MB transcript, 5 growths of 20 exchanges
    python bench/growing.py --mb 200 --runs 3

Each read is ``llm-forensics ingest`` in its own process (wall time and peak RSS from
``wait4``). The transcript is read whole once; then, ``--runs`` times, 20 exchanges (80 lines,
about 50 KB) are appended and it is read again: a read that goes on from where the last one
stopped reads those lines and the few since the newest call began. For comparison, the same
growth read by a store that cannot go on (its resume point dropped before each read, so the
file is read whole, as before issue 45). Medians are printed; it fails if the two stores do not
hold the same calls.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.agent_logs import _lines, _session  # noqa: E402

CLI = [sys.executable, "-m", "analyzer"]


def run(args: list[str], cwd: Path) -> tuple[float, float, int]:
    """``llm-forensics ARGS`` in its own process: (wall seconds, CPU seconds, peak RSS in MB);
    it must succeed. CPU time is the steadier figure on a busy machine."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLM_FORENSICS_")}
    started = time.perf_counter()
    proc = subprocess.Popen(
        [*CLI, *args], cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"bench: llm-forensics {' '.join(args)} failed: {err[-2000:]}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss // 1024


def grow(path: Path, round_: int) -> None:
    """20 more exchanges of the transcript's session (new ids), appended."""
    with open(path, "a", encoding="utf-8") as fh:
        fh.write("".join(_lines(7, 10**6 * (round_ + 1) + i, "y" * 2400) for i in range(20)))


def held(db: Path) -> tuple[object, ...]:
    import duckdb

    with duckdb.connect(str(db), read_only=True) as con:
        row = con.execute(
            "SELECT count(*), sum(output_tokens), sum(cost_usd) FROM calls"
        ).fetchone()
    return tuple(row or ())


def forget(db: Path) -> None:
    """The store's resume points dropped: its next read of a grown file is whole."""
    import duckdb

    with duckdb.connect(str(db)) as con:
        con.execute("DELETE FROM resume_points")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=50.0, help="the transcript's size (MB)")
    ap.add_argument("--runs", type=int, default=5, help="growths read (medians of these)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="lf-growing-") as tmp:
        work = Path(tmp)
        logs = {name: work / name / "projects" / "p" / "s.jsonl" for name in ("on", "whole")}
        size = _session(logs["on"], int(args.mb * 2**20), 7)
        logs["whole"].parent.mkdir(parents=True)
        logs["whole"].write_bytes(logs["on"].read_bytes())
        figures: dict[str, list[tuple[float, float, int]]] = {"on": [], "whole": []}
        first = {}
        for name, log in logs.items():
            db = work / f"{name}.duckdb"
            first[name] = run(["ingest", "--db", str(db), str(log.parent)], work)
            for r in range(args.runs):
                grow(log, r)
                if name == "whole":
                    forget(db)
                figures[name].append(run(["ingest", "--db", str(db), str(log.parent)], work))
        a, b = held(work / "on.duckdb"), held(work / "whole.duckdb")
        if a != b:
            raise SystemExit(f"bench: the stores differ: {a} (read on) against {b} (whole)")
        print(f"a transcript of {size / 2**20:.0f} MB, {args.runs} growths of 20 exchanges")
        print("  (wall s, CPU s, peak RSS MB; medians of the growths)")
        wall, cpu, rss = first["on"]
        print(f"  first read (whole):                {wall:6.2f}  {cpu:6.2f}  {rss:5d}")
        medians = {}
        for name, what in (("on", "read on from where it was"), ("whole", "read whole again")):
            got = [statistics.median(f[i] for f in figures[name]) for i in range(3)]
            medians[name] = got
            print(f"  a growth, {what + ':':26s}{got[0]:6.2f}  {got[1]:6.2f}  {got[2]:5.0f}")
        on, whole = medians["on"], medians["whole"]
        print(
            f"  read on against read whole: {whole[0] / on[0]:.1f}x less wall time, "
            f"{whole[1] / on[1]:.1f}x less CPU; the stores hold the same calls {a}"
        )


if __name__ == "__main__":
    main()
