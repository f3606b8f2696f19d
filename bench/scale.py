"""Memory and time at scale (issue 45, cause 11): each case as its own process, its wall time and
peak RSS (``wait4``), the median of 3 where it is repeated.

    python bench/scale.py            # the issue's sizes (about 15 minutes on 2 cores)
    python bench/scale.py --quick    # 10,000 transcripts, 100 MiB, 1,000,000 rows (a few minutes)

The cases:

* ``usage daily --json`` as the first command on a fresh default store, in a home of its own
  whose Claude Code history is ``--files`` small transcripts (100,000; ``agent_logs.write_many``:
  four calls each, 1,000 a project folder): the first refresh reads them all.
* the same command again with nothing changed (the warm refresh: a stat per file), 3 times.
* ``ingest --db`` of one dense transcript of ``--dense-mib`` (1 GiB; ``agent_logs.write_dense``:
  a call and three messages in about 1.2 KiB).
* ``sample --rows`` (9,400,000: a 2 GB export).

The promise (README, Performance): each under 2 GB. The run fails (exit 1) on a wrong answer,
never on a missed target (the machines are shared): the stores must hold every call, usage
daily's totals must be the history's, the warm answer the cold one, the sample every row; and
where a digest of the store was recorded (``EXPECTED``, made by the build before issue 45), the
stores must hold exactly that.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import agent_logs  # (bench/agent_logs.py, beside this script)

CLI = [sys.executable, "-m", "analyzer"]
MB = 2**20
CALLS_PER_FILE = 4  # write_many's default: four exchanges, one call each
GOAL_MB = 2048

# ``agent_logs.digest`` of the stores of the generated inputs, by (case, size), as the build
# before issue 45 (main at deae58d, DuckDB 2.0.1) stored them; a change of the generator or of
# what a loader stores changes them: say why in the commit.
EXPECTED: dict[tuple[str, float], dict[str, list[Any]]] = {
    ("history", 100000): {
        "calls": [
            400000,
            3785200000,
            3624000000,
            160000000,
            1600000,
            "2086.8000000000",
            "48a710b23c35efe1dd2f3f009625511c",
        ],
        "messages": [1200000, 129200000, "9cef59f6490c45e43ab5ba745e9c4eb4"],
        "sources": [100000, 1600000, 1200000, 0, 0, 400000],
        "rejects": [0],
        "runs": [0],
    },
    ("dense", 1024): {
        "calls": [
            867000,
            15041915061000,
            15041565660000,
            346800000,
            3468000,
            "9028684.8796800000",
            "73460fe00a9ef39625e5ed415c4bb72e",
        ],
        "messages": [2601000, 21675000, "53451e6a9b4daac3946514927dfc0741"],
        "sources": [1, 3468000, 2601000, 0, 0, 867000],
        "rejects": [0],
        "runs": [0],
    },
    ("history", 10000): {
        "calls": [
            40000,
            378520000,
            362400000,
            16000000,
            160000,
            "208.6800000000",
            "75ccfba98d4b7176e448600fbc3e8965",
        ],
        "messages": [120000, 12920000, "181e3135676d778c36cfb4cd34d1acca"],
        "sources": [10000, 160000, 120000, 0, 0, 40000],
        "rejects": [0],
        "runs": [0],
    },
    ("dense", 100): {
        "calls": [
            86000,
            148726938000,
            148692280000,
            34400000,
            344000,
            "89444.0086800000",
            "a4036f7ae211d17dd057b54a939b8c63",
        ],
        "messages": [258000, 2150000, "e3421acd48dad8af97388e6c15bb7f33"],
        "sources": [1, 344000, 258000, 0, 0, 86000],
        "rejects": [0],
        "runs": [0],
    },
}


def run(args: list[str], env: dict[str, str], cwd: Path) -> tuple[float, int, int, str, str]:
    """``llm-forensics ARGS`` in its own process: (seconds, peak RSS in MB, exit code, its
    stdout, the last line it wrote on stderr)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen([*CLI, *args], cwd=cwd, env=env, stdout=out, stderr=err)
        _pid, status, usage = os.wait4(proc.pid, 0)  # the child's own resource usage
        seconds = time.perf_counter() - started
        proc.returncode = code = os.waitstatus_to_exitcode(status)
        scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes on macOS, else KiB
        out.seek(0)
        err.seek(0)
        said = [x for x in err.read().decode(errors="replace").splitlines() if x.strip()]
        return seconds, usage.ru_maxrss * scale // MB, code, out.read().decode(), "".join(said[-1:])


def home_env(home: Path, history: Path) -> dict[str, str]:
    """A fresh machine whose only agent history is ``history`` (Claude Code's), home ``home``
    (as ``bench/run.py``'s stages that run as a user would)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLM_FORENSICS_")}
    for name in ("XDG_DATA_HOME", "XDG_CONFIG_HOME", "CLAUDE_CONFIG_DIR", "CODEX_HOME"):
        env.pop(name, None)
    return {
        **env,
        "HOME": str(home),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "CLAUDE_CONFIG_DIR": str(history),
    }


def inputs(work: Path, files: int, dense_mib: float) -> tuple[Path, Path]:
    """The history of ``files`` transcripts and the dense transcript, written once (kept in
    ``work`` for the next run: a folder is reused when its ``.done`` marker says it is whole)."""
    history = work / f"history-{files}"
    if files and not (history / ".done").exists():
        shutil.rmtree(history, ignore_errors=True)
        started = time.perf_counter()
        written = agent_logs.write_many(history, files)
        (history / ".done").touch()
        took = time.perf_counter() - started
        say(f"wrote {files:,} transcripts, {written / MB:,.0f} MiB, {took:.0f} s")
    dense = work / f"dense-{dense_mib:g}" / "projects" / "p" / "dense.jsonl"
    if dense_mib and not (dense.parent / ".done").exists():
        written, calls = agent_logs.write_dense(dense, dense_mib)
        (dense.parent / ".done").write_text(str(calls))
        say(f"wrote a dense transcript: {written / MB:,.0f} MiB, {calls:,} calls")
    return history, dense


def say(text: str) -> None:
    print(f"  {text}", file=sys.stderr, flush=True)


Result = dict[str, Any]


def measure(what: str, args: list[str], env: dict[str, str], cwd: Path, repeat: int = 1) -> Result:
    """A case run ``repeat`` times: the median seconds, the largest peak RSS."""
    times, peaks = [], []
    for i in range(repeat):
        seconds, peak, code, out, said = run(args, env, cwd)
        times.append(seconds)
        peaks.append(peak)
        say(f"{what}: run {i + 1}: {seconds:.1f} s, {peak:,} MB, exit {code}")
        if code != 0:
            break
    return {
        "case": what,
        "seconds": statistics.median(times),
        "runs": len(times),
        "peak_mb": max(peaks),
        "exit": code,
        "said": said,
        "output": out,
    }


def history_cases(work: Path, history: Path, files: int, repeat: int) -> list[Result]:
    """The first command on a fresh default store over the history, then warm; checked."""
    home = work / "home"
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    env = home_env(home, history)
    usage = ["usage", "daily", "--json"]
    cold = measure(f"usage daily, first refresh of {files:,} transcripts", usage, env, work)
    store = home / ".local" / "share" / "llm-forensics" / "forensics.duckdb"
    cold["digest"] = agent_logs.digest_in_child(store) if cold["exit"] == 0 else None
    # (it reads usage first: its calls are a whole read's; its messages are read by the first
    # command that needs them, analyzer.load.usage_first)
    cold["tables"] = ("calls", "rejects")
    warm = measure(f"usage daily again, {files:,} unchanged", usage, env, work, repeat)
    cold["key"] = warm["key"] = "history"
    cold["problems"] = usage_problems(cold, files * CALLS_PER_FILE)
    warm["problems"] = usage_problems(warm, files * CALLS_PER_FILE)
    if not warm["problems"] and warm["output"] != cold["output"]:
        warm["problems"] = ["its answer differs from the first command's"]
    return [cold, warm]


def usage_problems(r: Result, calls: int) -> list[str]:
    """What is wrong with a ``usage daily --json`` answer over the history of ``calls`` calls
    (each with 3 input tokens and 400 written to the cache)."""
    if r["exit"] != 0:
        return [f"exit {r['exit']}: {r['said']}"]
    rows = json.loads(r["output"])["daily"]
    found = tuple(sum(row[k] for row in rows) for k in ("calls", "input", "cache_write"))
    want = (calls, 3 * calls, 400 * calls)
    return [] if found == want else [f"calls, input, cache writes {found}, expected {want}"]


def dense_case(work: Path, dense: Path) -> Result:
    calls = int((dense.parent / ".done").read_text())
    db = work / "dense.duckdb"
    for p in (db, db.with_name(db.name + ".wal")):
        p.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLM_FORENSICS_")}
    size = dense.stat().st_size / MB
    r = measure(
        f"ingest of a dense {size:,.0f} MiB transcript",
        ["ingest", "--db", str(db), str(dense)],
        env,
        work,
    )
    r["key"], r["digest"] = "dense", agent_logs.digest_in_child(db) if r["exit"] == 0 else None
    stored = r["digest"]["calls"][0] if r["digest"] else None
    r["problems"] = [] if stored == calls else [f"{stored} calls stored, expected {calls:,}"]
    return r


def sample_case(work: Path, rows: int) -> Result:
    out = work / "sample"
    shutil.rmtree(out, ignore_errors=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLM_FORENSICS_")}
    r = measure(
        f"sample --rows {rows:,}", ["sample", "-o", str(out), "--rows", str(rows)], env, work
    )
    r["key"] = "sample"
    csv = out / "openrouter_activity_2025-12.csv"
    lines = _lines(csv) if csv.exists() else 0
    ok = r["exit"] == 0 and lines == rows + 1
    r["problems"] = [] if ok else [f"exit {r['exit']}, {lines:,} lines: {r['said']}"]
    shutil.rmtree(out, ignore_errors=True)
    return r


def _lines(path: Path) -> int:
    with open(path, "rb") as fh:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 20), b""))


def report(results: list[Result], sizes: dict[str, float]) -> bool:
    """The table of figures, the digests against ``EXPECTED``, and whether all is right."""
    print("| case | seconds | runs | peak RSS | under 2 GB |\n|---|---:|---:|---:|---|")
    for r in results:
        under = "yes" if r["peak_mb"] < GOAL_MB else "no"
        print(f"| {r['case']} | {r['seconds']:.1f} | {r['runs']} | {r['peak_mb']:,} MB | {under} |")
    ok = True
    for r in results:
        expected = EXPECTED.get((r["key"], sizes[r["key"]]))
        if r.get("digest") is not None:
            if expected is None:
                print(f"{r['case']}: no digest recorded for this size: {json.dumps(r['digest'])}")
            else:
                tables = r.get("tables") or tuple(expected)
                want = {k: v for k, v in expected.items() if k in tables}
                r["problems"] += agent_logs.digest_differences(r["digest"], want)
        for problem in r["problems"]:
            print(f"WRONG: {r['case']}: {problem}")
            ok = False
    return ok


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="10,000 files, 100 MiB, 1,000,000 rows")
    ap.add_argument("--files", type=int, default=None, help="small transcripts (0: none)")
    ap.add_argument("--dense-mib", type=float, default=None, help="the dense transcript (0: none)")
    ap.add_argument("--rows", type=int, default=None, help="rows of the sample (0: none)")
    ap.add_argument("--work", type=Path, default=None, help="folder for the inputs (kept)")
    ap.add_argument("--json", type=Path, default=None, help="write the results here")
    a = ap.parse_args()
    files = a.files if a.files is not None else (10_000 if a.quick else 100_000)
    dense_mib = a.dense_mib if a.dense_mib is not None else (100 if a.quick else 1024)
    rows = a.rows if a.rows is not None else (1_000_000 if a.quick else 9_400_000)
    work = a.work or Path(tempfile.mkdtemp(prefix="lf-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    say(f"inputs in {work}")
    history, dense = inputs(work, files, dense_mib)
    results = []
    if files:
        results += history_cases(work, history, files, 3)
    if dense_mib:
        results.append(dense_case(work, dense))
    if rows:
        results.append(sample_case(work, rows))
    ok = report(results, {"history": files, "dense": dense_mib, "sample": rows})
    if a.json:
        a.json.write_text(
            json.dumps([{k: v for k, v in r.items() if k != "output"} for r in results], indent=1)
        )
    if a.work is None:
        shutil.rmtree(work, ignore_errors=True)
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
