"""Benchmark: wall time and peak memory of every stage, against the cost of just reading the file.

    python bench/run.py             # the full run: a 10-million-row export, 1 GB of transcripts
    python bench/run.py --quick     # small sizes (CI); still checks the audit's answers
    python bench/run.py --rows 1000000 --cc-mb 200
    python bench/run.py --quick --spark-rows 0   # without the Spark comparison

The Spark comparison (bench/spark_compare.py) runs ``detect`` on DuckDB and on Spark's local
mode over the same sample export at two sizes (1,000,000 rows and a tenth of it; 20,000 with
--quick), fails if their incidents differ, and estimates a cluster's time for a billion calls.

Inputs are generated here: the billing export by ``llm-forensics sample --rows N`` (the planted
seed incidents plus scaled healthy traffic), and a synthetic Claude Code history (many session
files, one of them large). Every stage runs as its own process, and its peak RSS is that
process's (``wait4``). Stages that take under a minute run three times and report the median.

The floors, measured in the same run: DuckDB reading the CSV
(``SELECT count(*), sum(cost_total) FROM read_csv(file)``) and a plain line count of the JSONL.
Each CSV stage is also given as a ratio to the CSV floor. The peer baseline is what a user would
write in a notebook: pandas reading the export and finding constant-input, near-empty-output
runs with ``groupby``/``shift``.

The history is read cold and warm, as issue 35 asks, beside ccusage on the same files in the
same run: ``ingest`` into a new store (against ``ccusage session --offline --json``),
``usage daily`` as the first command on a fresh default store (against ``ccusage daily
--offline --json``; it reads usage first, and ``incidents`` after it reads the content, timed
once), ``usage daily`` again with nothing changed, and again after a new 2 MiB
session file was added (a fresh one before each run, outside the timing; removed after); then
the start-up, as issue 48 asks: ``--version``, and ``usage daily --db STORE`` (a view of a store
named on the command line: no refresh). Those stages run under a home of their own
(``home_env``: ``HOME``, ``XDG_DATA_HOME`` and ``CLAUDE_CONFIG_DIR`` pointing into the work
folder), never the user's. A missed speed target is printed, not failed on: the machines are
shared and noisy.

The run fails (exit 1) if the audit does not find exactly the incidents planted in the export,
if our ``usage daily --json`` and ccusage's ``daily --json`` differ in any day's input, output,
cache creation or cache read tokens, or if what the stores hold of the history differs from
what today's build stored (``agent_logs.EXPECTED_DIGESTS``, recorded for the full run's and
--quick's sizes; other sizes skip that check and say so): a benchmark that measures wrong
answers is useless.
"""

from __future__ import annotations

import argparse
import compileall
import importlib.util
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import agent_logs  # noqa: E402  (bench/agent_logs.py, beside this script)
import spark_compare  # noqa: E402  (bench/spark_compare.py, beside this script)
import stages as by_stage  # noqa: E402  (bench/stages.py, beside this script)

CLI = [sys.executable, "-m", "analyzer"]
# The incidents the billing export alone must give (seeds 000, 001, 003), at any --rows.
EXPECTED = {
    ("constant_input_low_output", 22, 6.16),
    ("constant_input_low_output", 11, 4.07),
    ("alternating_tool_thinking", 57, None),
    ("truncated_tool_call_streak", 6, None),
    ("length_counter_false_alarm", 3, 0.0),
}
# The stages over the CSV store (their ratios are to DuckDB's scan of the CSV).
CSV_STAGES = ("ingest (CSV)", "detect", "backtest", "report", "audit")
# The stages that read the whole history (their ratios are to the line count of the JSONL).
COLD_JSONL = ("ingest (Claude", "peer: ccusage", "usage daily, first")
SWEEP_POLICIES = [
    "penguin_consecutive_trivial",
    "penguin_token_trivial",
    "penguin_stale_context",
    "session_cost_cap",
    "netclaw_reset_on_tool",
    "netclaw_cumulative_per_turn",
    "netclaw_max_tool_iterations",
    "nexus3_consecutive_empty",
    "maxtokens_session",
    "maxtokens_truncated_tools",
]


def pointer(incident: dict[str, Any]) -> bool:
    """A low or info incident that claims no waste: a pointer for a person (a session that cost
    more than its peers), which scaled healthy traffic can rightly produce at any size."""
    return incident["severity"] in ("low", "info") and not incident["wasted_usd"]


def check_incidents(incidents: list[dict[str, Any]]) -> tuple[list[Any], list[Any]]:
    """(expected incidents the audit missed, incidents it found that were not expected).

    Every planted incident must be found with its size and waste; anything else that claims
    waste or is of medium or high severity is a wrong answer. Pointers (see ``pointer``) are
    listed in the results, not failed on."""
    found = [
        (i["detector"], i["n_calls"], round(i["wasted_usd"], 2))
        for i in incidents
        if not pointer(i) or i["detector"] == "length_counter_false_alarm"
    ]

    def matches(f: tuple[Any, ...], e: tuple[Any, ...]) -> bool:
        return f[0] == e[0] and f[1] == e[1] and (e[2] is None or f[2] == e[2])

    missing = [e for e in sorted(EXPECTED, key=str) if not any(matches(f, e) for f in found)]
    extra = [f for f in found if not any(matches(f, e) for e in EXPECTED)]
    return missing, extra


def run(
    cmd: list[str], cwd: Path | None = None, env: dict[str, str] | None = None
) -> tuple[float, int, str]:
    """Run a command; (seconds, its peak RSS in MB, its stdout)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=err)
        _pid, status, usage = os.wait4(proc.pid, 0)  # the child's own resource usage
        seconds = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            tail = err.read().decode(errors="replace")[-2000:]
            raise SystemExit(f"bench: {' '.join(cmd)} failed ({proc.returncode}):\n{tail}")
        return seconds, int(usage.ru_maxrss / 1024), out.read().decode(errors="replace")


def measure(
    label: str, cmd: list[str], repeat: int, before: Any = None, first: int = 1, **kw: Any
) -> dict[str, Any]:
    """Run ``cmd`` (after ``before()``, each time); median of ``repeat`` runs under a minute
    (numbered from ``first`` in what it says)."""
    times, rss, out = [], [], ""
    for i in range(repeat):
        if before is not None:
            before()
        seconds, peak, out = run(cmd, **kw)
        times.append(seconds)
        rss.append(peak)
        print(f"  {label}: run {first + i}: {seconds:.2f} s, {peak} MB", file=sys.stderr)
        if seconds > 60:
            break
    return {
        "stage": label,
        "seconds": statistics.median(times),
        "runs": len(times),
        "peak_rss_mb": max(rss),
        "output": out,
    }


def in_turns(repeat: int, *specs: tuple[str, list[str], dict[str, Any]]) -> list[dict[str, Any]]:
    """``measure`` of several stages (label, command, its keywords) in turns: a run of each,
    then again, ``repeat`` times (fewer after a run over a minute). On a shared machine the
    ratio of two stages then compares runs made at about the same time."""
    rounds: list[list[dict[str, Any]]] = []
    for n in range(repeat):
        rounds.append([measure(label, cmd, 1, first=n + 1, **kw) for label, cmd, kw in specs])
        if any(r["seconds"] > 60 for r in rounds[-1]):
            break
    return [
        {
            "stage": label,
            "seconds": statistics.median(r[i]["seconds"] for r in rounds),
            "runs": len(rounds),
            "peak_rss_mb": max(r[i]["peak_rss_mb"] for r in rounds),
            "output": rounds[-1][i]["output"],
        }
        for i, (label, _cmd, _kw) in enumerate(specs)
    ]


PANDAS_BASELINE = textwrap.dedent(
    """
    import sys, pandas as pd
    df = pd.read_csv(sys.argv[1], usecols=["created_at", "api_key_name", "app_name", "user",
        "model_permaslug", "tokens_prompt", "tokens_completion", "cost_total"],
        parse_dates=["created_at"])
    keys = ["api_key_name", "app_name", "user", "model_permaslug"]
    df = df.sort_values(keys + ["created_at"]).fillna({"user": ""})
    low = df["tokens_completion"] <= 8
    g = df.groupby(keys, sort=False, dropna=False)
    same = low & g["tokens_prompt"].shift().eq(df["tokens_prompt"]) & low.groupby(
        [df[k] for k in keys], sort=False).shift(fill_value=False)
    gap = df["created_at"] - g["created_at"].shift()
    same &= gap.dt.total_seconds().le(300)
    run = (~same).cumsum()
    runs = df[low].groupby(run[low]).agg(n=("cost_total", "size"), usd=("cost_total", "sum"))
    runs = runs[runs["n"] >= 3]
    print(len(runs), round(runs["usd"].sum(), 2))
    """
)


# What a user's environment may say of agents' places or of a store: none of it reaches the
# stages that run as a user would (their home is the bench's).
USER_PLACES = (
    "LLM_FORENSICS_DB",
    "XDG_DATA_HOME",
    "XDG_CONFIG_HOME",
    "CLAUDE_CONFIG_DIR",
    "CODEX_HOME",
    "GEMINI_CLI_HOME",
    "OPENHANDS_CONVERSATIONS_DIR",
    "OPENHANDS_PERSISTENCE_DIR",
)
# The new file of the warm stage (the issue's: one new 2 MiB file added to the history).
NEW_FILE_MIB = 2.0


def home_env(home: Path, history: Path) -> dict[str, str]:
    """A fresh machine whose only agent history is ``history`` (Claude Code's), home ``home``."""
    env = {k: v for k, v in os.environ.items() if k not in USER_PLACES}
    return {
        **env,
        "HOME": str(home),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "CLAUDE_CONFIG_DIR": str(history),
        "CODEX_HOME": str(home / ".codex"),  # absent
    }


def default_store(home: Path) -> Path:
    """Where the default store of ``home_env(home, ...)`` lives."""
    return home / ".local" / "share" / "llm-forensics" / "forensics.duckdb"


def usage_daily() -> list[str]:
    """`usage daily --json` as a user types it: no input and no --db, so the default store is
    refreshed from the agents' default places first (``home_env`` says where they are)."""
    return [*CLI, "usage", "daily", "--json"]


def usage_stages(
    work: Path, history: Path, ccusage_cmd: list[str] | None, repeat: int
) -> list[dict[str, Any]]:
    """``usage daily`` cold (the first command on a fresh default store), warm (nothing
    changed) and warm with a new file, and ``ccusage daily`` beside them. The cold stage
    keeps the digest of the store it made (``digest``) for the checks."""
    home = work / "home"
    store = default_store(home)
    env = home_env(home, history)
    new_files = history / "projects" / agent_logs.NEW_FILES_PROJECT
    shutil.rmtree(new_files, ignore_errors=True)  # left by a run that was interrupted

    def wipe() -> None:  # a fresh machine: a home with no data folder and no store
        shutil.rmtree(home, ignore_errors=True)
        home.mkdir(parents=True)

    peer = (
        CCUSAGE_DAILY,
        [*(ccusage_cmd or []), "daily", "--offline", "--json", "--timezone", "UTC"],
        {"env": agent_logs.ccusage_env(history)},
    )
    stages = in_turns(
        repeat,
        (COLD_USAGE, usage_daily(), {"before": wipe, "env": env}),
        *([peer] if ccusage_cmd else []),
    )
    stages[0]["digest"] = agent_logs.digest_in_child(store)
    # The content the cold usage view left (usage first): read by the first command that
    # needs it, once.
    stages.append(measure(CONTENT_AFTER, [*CLI, "incidents", "--json"], 1, env=env))
    stages[-1]["digest"] = agent_logs.digest_in_child(store)
    stages.append(measure(WARM_USAGE, usage_daily(), repeat, env=env))
    # Start-up: what a command costs before it reads anything, and a view of a store named
    # with --db (no refresh: only the store is read).
    stages.append(measure(VERSION, [*CLI, "--version"], max(repeat, 5), env=env))
    named = [*CLI, "usage", "daily", "--json", "--db", str(store)]
    stages.append(measure(WARM_USAGE_DB, named, max(repeat, 5), env=env))
    added = iter(range(1, 1000))

    def new_file() -> None:
        agent_logs.write_new_session(history, next(added), NEW_FILE_MIB)

    try:
        stages.append(
            measure(
                NEW_FILE_USAGE,
                usage_daily(),
                repeat,
                before=new_file,
                env=env,
            )
        )
    finally:
        shutil.rmtree(new_files, ignore_errors=True)
    return stages


COLD_USAGE = "usage daily, first command (new store)"
WARM_USAGE = "usage daily, warm (nothing changed)"
CONTENT_AFTER = "incidents after it (reads the content)"
VERSION = "start-up: --version"
WARM_USAGE_DB = "usage daily --db STORE (no refresh), warm"
NEW_FILE_USAGE = f"usage daily, warm + a new {NEW_FILE_MIB:g} MiB file"
CCUSAGE_DAILY = "peer: ccusage daily --offline --json"


def agent_log_targets(
    by: dict[str, dict[str, Any]], ccusage_s: float, ccusage_daily_s: float, per_file_ms: float
) -> list[tuple[str, float, float]]:
    """Issue 17's and 35's targets for agent logs, each (what, measured, target)."""
    ingest = by["ingest (Claude Code JSONL)"]
    cold, warm, new = (by[k]["seconds"] for k in (COLD_USAGE, WARM_USAGE, NEW_FILE_USAGE))
    version, named = by[VERSION]["seconds"], by[WARM_USAGE_DB]["seconds"]
    rss = max(ingest["peak_rss_mb"], by[COLD_USAGE]["peak_rss_mb"])
    return [
        ("agent logs, cold: ingest / ccusage session", ingest["seconds"] / ccusage_s, 1.0),
        ("agent logs, cold: usage daily / ccusage daily", cold / ccusage_daily_s, 1.0),
        ("agent logs, warm: usage daily, s", warm, 0.30),
        ("agent logs, warm: usage daily / ccusage daily", warm / ccusage_daily_s, 0.5),
        ("start-up: --version, s", version, 0.15),
        ("agent logs, warm: usage daily --db, s", named, 0.30),
        (f"agent logs, warm + a new {NEW_FILE_MIB:g} MiB file: usage daily, s", new, 0.8),
        ("agent logs: peak RSS (ingest, usage daily), MB", rss, 1024),
        ("agent logs: fixed cost of a file, ms", per_file_ms, 5.0),
    ]


# A check of the history's tables: (what, why it was skipped or None, what differed).
Check = tuple[str, str | None, list[str]]


def correctness(
    by: dict[str, dict[str, Any]], cc_db: Path, sizes: tuple[float, float, float]
) -> list[Check]:
    """The checks on the history's tables, each (what, why it was skipped or None, what
    differed): our daily tokens against ccusage's, and what the stores hold against what
    today's build stored (``agent_logs.EXPECTED_DIGESTS``)."""
    ours = json.loads(by[COLD_USAGE]["output"])
    daily: tuple[str | None, list[str]]
    if CCUSAGE_DAILY in by:
        theirs = json.loads(by[CCUSAGE_DAILY]["output"])
        daily = (None, agent_logs.daily_differences(ours, theirs))
    else:
        daily = ("ccusage did not run here", [])
    what = "usage daily --json against ccusage daily --json, tokens per day"
    checks: list[Check] = [(what, *daily)]
    expected = agent_logs.EXPECTED_DIGESTS.get(sizes)
    # (usage daily reads usage first: its calls and rejects are a whole read's, its messages
    # are read by the next command that needs them; analyzer.load.usage_first)
    stores = [
        ("ingest of the history", agent_logs.digest_in_child(cc_db), None),
        ("the default store after usage daily", by[COLD_USAGE]["digest"], ("calls", "rejects")),
        ("the default store after incidents", by[CONTENT_AFTER]["digest"], None),
    ]
    for name, found, tables in stores:
        what = f"{name}: its {'/'.join(tables) if tables else 'tables'} against today's build's"
        if expected is None:
            why = f"no recorded digest for --cc-mb/--big-mb/--small-mb {'/'.join(map(str, sizes))}"
            checks.append((what, why, []))
        else:
            want = {k: v for k, v in expected.items() if tables is None or k in tables}
            checks.append((what, None, agent_logs.digest_differences(found, want)))
    return checks


def print_checks(checks: list[Check]) -> bool:
    """Print each check's result; whether all that ran passed."""
    print("\nchecks (a difference fails the run)")
    for what, skipped, diffs in checks:
        state = f"skipped ({skipped})" if skipped else ("FAILED" if diffs else "ok")
        print(f"  {what}: {state}")
        for line in diffs[:20]:
            print(f"    {line}")
        if len(diffs) > 20:
            print(f"    ... and {len(diffs) - 20} more")
    return not any(diffs for _, _, diffs in checks)


def _lines(path: Path) -> int:
    with open(path, "rb") as fh:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 20), b""))


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--rows", type=int, default=None, help="rows in the billing export")
    ap.add_argument("--cc-mb", type=float, default=None, help="MiB of Claude Code history")
    ap.add_argument("--big-mb", type=float, default=None, help="MiB of its largest file")
    ap.add_argument("--small-mb", type=float, default=None, help="MiB of each of the others")
    ap.add_argument(
        "--files",
        type=int,
        default=None,
        help="small files (25 KiB each) for the fixed cost of a file",
    )
    ap.add_argument("--quick", action="store_true", help="small sizes, for CI")
    ap.add_argument(
        "--spark-rows",
        type=int,
        default=None,
        help="rows of the export detect runs on with both engines (and a tenth of "
        "it, for the fixed cost); 0 skips Spark",
    )
    ap.add_argument("--work", type=Path, default=None, help="folder for inputs (default: temp)")
    ap.add_argument("--json", type=Path, default=None, help="write the results here")
    args = ap.parse_args()
    rows = args.rows or (100_000 if args.quick else 10_000_000)
    # The history: 300 MiB, one file of 100 MiB and 80 of 2.5 MiB.
    cc_mb = args.cc_mb or (24 if args.quick else 300)
    big_mb = args.big_mb or (12 if args.quick else 100)
    small_mb = args.small_mb or (1 if args.quick else 2.5)
    n_small = args.files or (100 if args.quick else 400)
    repeat = 3

    work = args.work or Path(tempfile.mkdtemp(prefix="lf-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "LLM_FORENSICS_DB": ""}
    print(f"bench: inputs in {work}", file=sys.stderr)
    # The package's bytecode is compiled first, as `pip install` does: no stage pays for
    # compiling the sources (a checkout run under PYTHONDONTWRITEBYTECODE=1 would, in every
    # process: 0.1-0.2 s of each command).
    spec = importlib.util.find_spec("analyzer")
    if spec is not None and spec.origin is not None:
        compileall.compile_dir(str(Path(spec.origin).parent), quiet=1)

    data = work / "sample"
    csv = data / "openrouter_activity_2025-12.csv"
    if not csv.exists() or _lines(csv) != rows + 1:
        shutil.rmtree(data, ignore_errors=True)
        t, _, _ = run([*CLI, "sample", "-o", str(data), "--rows", str(rows)], env=env)
        print(f"  generated {rows:,} rows in {t:.1f} s", file=sys.stderr)
    cc = work / f"claude-{cc_mb:g}-{big_mb:g}-{small_mb:g}"
    cc_done = work / f"{cc.name}.done"
    if not cc_done.exists():
        shutil.rmtree(cc, ignore_errors=True)
        started = time.perf_counter()
        written, files = agent_logs.write_history(cc, cc_mb, big_mb, small_mb)
        print(
            f"  wrote {written / 2**20:.0f} MiB of transcripts in {files} files, "
            f"{time.perf_counter() - started:.1f} s",
            file=sys.stderr,
        )
        cc_done.touch()
    per_file = work / f"claude-files-{n_small}"
    if not (per_file / ".done").exists():
        shutil.rmtree(per_file, ignore_errors=True)
        agent_logs.write_files(per_file, n_small, 25)
        (per_file / ".done").touch()
    ccusage_cmd, ccusage_says = agent_logs.ccusage(work)
    print(f"  ccusage: {ccusage_says}", file=sys.stderr)
    csv_mb = csv.stat().st_size / 2**20
    cc_files = sorted(cc.rglob("*.jsonl"))
    cc_bytes = sum(f.stat().st_size for f in cc_files)

    db = work / "store.duckdb"
    cc_db = work / "cc.duckdb"
    files_db = work / "files.duckdb"
    report = work / "report.html"

    def fresh(*paths: Path) -> Any:
        def clean() -> None:
            for p in paths:
                for q in (p, p.with_name(p.name + ".wal")):
                    q.unlink(missing_ok=True)

        return clean

    def uncache(path: Path) -> Any:
        # The page and the guard replay; the detectors' results stay (as after detect). In a
        # process of its own, as the digests: the bench's process stays small (see
        # agent_logs.digest_in_child).
        forget = (
            "import duckdb,sys; c = duckdb.connect(sys.argv[1]); "
            "c.execute(\"DELETE FROM cache WHERE name IN ('guards', 'report')\"); c.close()"
        )

        def clean() -> None:
            run([sys.executable, "-c", forget, str(path)])

        return clean

    floor_sql = (
        "import duckdb,sys; print(duckdb.connect().execute("
        '"SELECT count(*), sum(cost_total) FROM read_csv(?)", [sys.argv[1]]).fetchall())'
    )
    stages = [
        measure(
            "floor: DuckDB scan of the CSV", [sys.executable, "-c", floor_sql, str(csv)], repeat
        ),
        measure(
            "floor: line count of the JSONL",
            ["sh", "-c", f"cat {' '.join(map(str, cc_files))} | wc -l"],
            repeat,
        )
        if len(cc_files) < 2000
        else measure(
            "floor: line count of the JSONL",
            ["sh", "-c", f"find {cc} -name '*.jsonl' -exec cat {{}} + | wc -l"],
            repeat,
        ),
        measure(
            "ingest (CSV)",
            [*CLI, "ingest", "--db", str(db), str(csv)],
            repeat,
            before=fresh(db),
            env=env,
        ),
        measure("detect", [*CLI, "detect", "--db", str(db)], repeat, env=env),
        measure(
            "backtest (10 policies x 10 thresholds)",
            [
                *CLI,
                "backtest",
                "--db",
                str(db),
                *[a for p in SWEEP_POLICIES for a in ("--only", p, "--sweep", f"{p}.stop=1..10")],
            ],
            repeat,
            env=env,
        ),
        measure(
            "report (guards replayed, nothing cached)",
            [*CLI, "report", "--db", str(db), "-o", str(report)],
            repeat,
            before=uncache(db),
            env=env,
        ),
        measure(
            "report again (cached)",
            [*CLI, "report", "--db", str(db), "-o", str(report)],
            repeat,
            env=env,
        ),
        measure(
            "audit -o report.html (CSV, new store)",
            [*CLI, "audit", str(csv), "-o", str(report), "--json"],
            repeat,
            env=env,
        ),
        measure(
            "audit again (store already loaded)",
            [*CLI, "audit", str(csv), "--db", str(db), "-o", str(report)],
            repeat,
            env=env,
        ),
        *in_turns(
            repeat,
            (
                "ingest (Claude Code JSONL)",
                [*CLI, "ingest", "--db", str(cc_db), str(cc)],
                {"before": fresh(cc_db), "env": env},
            ),
            *(
                [
                    (
                        "peer: ccusage session --offline --json",
                        [*ccusage_cmd, "session", "--offline", "--json"],
                        {"env": agent_logs.ccusage_env(cc)},
                    )
                ]
                if ccusage_cmd
                else []
            ),
        ),
        *usage_stages(work, cc, ccusage_cmd, repeat),
        measure(
            f"ingest: {n_small} files of 25 KiB",
            [*CLI, "ingest", "--db", str(files_db), str(per_file / "many")],
            repeat,
            before=fresh(files_db),
            env=env,
        ),
        measure(
            "ingest: the same lines in one file",
            [*CLI, "ingest", "--db", str(files_db), str(per_file / "one")],
            repeat,
            before=fresh(files_db),
            env=env,
        ),
        measure(
            "peer: pandas constant-input detector",
            [sys.executable, "-c", PANDAS_BASELINE, str(csv)],
            repeat,
        ),
    ]
    spark_rows = (
        args.spark_rows if args.spark_rows is not None else (20_000 if args.quick else 1_000_000)
    )
    spark: dict[str, Any] | None = None
    skipped = "--spark-rows 0" if not spark_rows else spark_compare.why_not()
    if skipped:
        print(f"  spark: skipped ({skipped})", file=sys.stderr)
    else:
        spark = spark_compare.compare(
            work,
            [spark_rows // 10, spark_rows],
            1 if args.quick else repeat,
            env,
            CLI,
            run,
            measure,
        )
        stages += spark["stages"]
    by = {s["stage"]: s for s in stages}
    floor_csv = by["floor: DuckDB scan of the CSV"]["seconds"]
    floor_jsonl = by["floor: line count of the JSONL"]["seconds"]
    page_mb = report.stat().st_size / 2**20
    # Issue 48: the audit by stage (one run, its SQL timed) and DuckDB's floor for its writes.
    stages_db, timings_file = work / "stages.duckdb", work / "timings.json"
    fresh(stages_db)()
    timed_env = {**env, "LLM_FORENSICS_TIMINGS": str(timings_file)}
    audit_wall, _, _ = run(
        [*CLI, "audit", str(csv), "--db", str(stages_db), "-o", str(report)], env=timed_env
    )
    audit_timings = json.loads(timings_file.read_text())
    write_floor = by_stage.write_floor(stages_db)
    read_floor = by_stage.read_floor(csv)
    fresh(stages_db)()

    audit = json.loads(by["audit -o report.html (CSV, new store)"]["output"])
    missing, extra = check_incidents(audit["incidents"])
    pointers = [
        (i["detector"], i["n_calls"], i["summary"])
        for i in audit["incidents"]
        if pointer(i) and i["detector"] != "length_counter_false_alarm"
    ]

    table = []
    for s in stages:
        name = s["stage"]
        ratio = None
        if name.startswith((*CSV_STAGES, "peer: pandas")) and (
            "rows)" not in name  # the Spark comparison reads exports of other sizes
        ):
            ratio = s["seconds"] / floor_csv
        if name.startswith(COLD_JSONL):
            ratio = s["seconds"] / floor_jsonl
        row = {
            "stage": name,
            "seconds": round(s["seconds"], 2),
            "runs": s["runs"],
            "peak_rss_mb": s["peak_rss_mb"],
            "x_floor": None if ratio is None else round(ratio, 2),
        }
        if name.startswith(COLD_JSONL):
            row["mb_per_s"] = round(cc_bytes / 2**20 / s["seconds"], 1)
        table.append(row)
    many = by[f"ingest: {n_small} files of 25 KiB"]["seconds"]
    one = by["ingest: the same lines in one file"]["seconds"]
    per_file_ms = 1000 * (many - one) / (n_small - 1)
    if ccusage_cmd:
        ccusage_s = by["peer: ccusage session --offline --json"]["seconds"]
        ccusage_daily_s = by[CCUSAGE_DAILY]["seconds"]
        ccusage_basis = f"{ccusage_says}, this run"
    else:
        ccusage_s = ccusage_daily_s = cc_bytes / 2**20 / agent_logs.RECORDED_CCUSAGE_MIB_S
        ccusage_basis = (
            f"not run here ({ccusage_says}); its recorded "
            f"{agent_logs.RECORDED_CCUSAGE_MIB_S:g} MiB/s"
        )

    def x(stage: str) -> float:
        return float(by[stage]["seconds"] / floor_csv)

    csv_rss = max(by[k]["peak_rss_mb"] for k in by if k.startswith(CSV_STAGES) and "rows)" not in k)
    # Issue 17's and 35's targets: (what, measured, target).
    targets = [
        *agent_log_targets(by, ccusage_s, ccusage_daily_s, per_file_ms),
        ("CSV: audit -o report.html, x scan", x("audit -o report.html (CSV, new store)"), 10.0),
        ("CSV: ingest, x scan", x("ingest (CSV)"), 6.0),
        ("CSV: detect, x scan", x("detect"), 3.0),
        ("CSV: backtest 10 x 10, x scan", x("backtest (10 policies x 10 thresholds)"), 6.0),
        ("CSV: report, nothing cached, x scan", x("report (guards replayed, nothing cached)"), 3.0),
        ("CSV: audit again, s", by["audit again (store already loaded)"]["seconds"], 1.0),
        ("CSV: peak RSS of any stage, MB", csv_rss, 2048),
    ]
    # Issue 36: what a live guard's decision costs (bench/guard_cost.py, its own process).
    _, _, said = run([sys.executable, str(HERE / "guard_cost.py")], env=env)
    decision = json.loads(said)
    targets.append(
        ("guard: a decision, 99th percentile, ms (1,000 calls)", decision["p99_ms"], 5.0)
    )
    # Issue 49: the Claude Code hook and the status line, a call at a time (bench/hook.py).
    sizes, timed = ("4", 40) if args.quick else ("10,100", 200)
    hook_cmd = [sys.executable, str(HERE / "hook.py"), "--mib", sizes, "--calls", str(timed)]
    _, _, said = run(hook_cmd, env=env)
    print(said.strip().rsplit("\n", 1)[0])
    hooks = json.loads(said.strip().splitlines()[-1])
    for f in hooks.values():
        targets.append((f"hook: a call on {f['mib']:g} MiB, p99 ms", f["p99_ms"], 100.0))
        targets.append(
            (f"statusline: a run on {f['mib']:g} MiB, p99 ms", f["statusline_p99_ms"], 100.0)
        )
    checks = correctness(by, cc_db, (cc_mb, big_mb, small_mb))
    results = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, "
        f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB, "
        f"Python {platform.python_version()}",
        "rows": rows,
        "csv_mb": round(csv_mb, 1),
        "jsonl_mb": round(cc_bytes / 2**20, 1),
        "jsonl_files": len(cc_files),
        "report_mb": round(page_mb, 2),
        "per_file_ms": round(per_file_ms, 2),
        "ccusage": ccusage_basis,
        "targets": [
            {"what": t[0], "measured": round(t[1], 2), "target": t[2], "met": t[1] <= t[2]}
            for t in targets
        ],
        "stages": table,
        "guard_decision": decision,
        "hook": hooks,
        "audit_by_stage": {
            "seconds": round(audit_wall, 2),
            "stages": {k: round(v, 2) for k, v in by_stage.by_stage(audit_timings, audit_wall)},
            "largest_units": by_stage.largest(audit_timings),
            "write_floor_s": round(write_floor[0], 2),
            "read_floor_s": round(read_floor, 2),
            "calls": write_floor[1],
        },
        "audit_incidents_ok": not missing and not extra,
        "checks": [{"what": c[0], "skipped": c[1], "differences": c[2]} for c in checks],
        "missing": missing,
        "unexpected": extra,
        "pointers": pointers,
        "spark": None if spark is None else {k: v for k, v in spark.items() if k != "stages"},
        "spark_skipped": skipped,
    }
    print(
        f"\n{rows:,} rows ({csv_mb:.0f} MB CSV), {cc_bytes / 2**20:.0f} MB of JSONL in "
        f"{len(cc_files)} files; {results['machine']}; {results['date']}"
    )
    print(f"{'stage':<46} {'seconds':>9} {'x floor':>8} {'peak RSS':>9}")
    for r in table:
        extra_txt = f"  ({r['mb_per_s']} MB/s)" if "mb_per_s" in r else ""
        xf = "" if r["x_floor"] is None else f"{r['x_floor']:.2f}"
        print(f"{r['stage']:<46} {r['seconds']:>9.2f} {xf:>8} {r['peak_rss_mb']:>6} MB{extra_txt}")
    print(f"report page: {page_mb:.2f} MB")
    print(
        f"the audit of the export by stage (audit -o report.html into a new store, one run of "
        f"{audit_wall:.2f} s with its SQL timed: LLM_FORENSICS_TIMINGS; x the CSV scan):"
    )
    print(
        "\n".join(by_stage.describe(audit_timings, audit_wall, floor_csv, write_floor, read_floor))
    )
    print(
        f"fixed cost of a file: {per_file_ms:.1f} ms ({n_small} files of 25 KiB against the "
        "same lines in one file)"
    )
    print(f"ccusage: {ccusage_basis}")
    print(
        f"guard decision (a session of {decision['calls']:,} calls fed one at a time to each "
        f"of {decision['presets']} presets): median {decision['median_ms']:.3f} ms, 99th "
        f"percentile {decision['p99_ms']:.2f} ms, largest {decision['max_ms']:.1f} ms; the "
        f"last 100 calls {decision['median_last_100_ms']:.3f} ms; a guard's first "
        f"{decision['first_decision_ms']:.1f} ms; slowest preset {decision['slowest_preset']} "
        f"({decision['slowest_preset_median_ms']:.3f} ms)"
    )
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    print(
        f"the bench's own peak RSS: {own} MB (a stage's peak RSS can include what the bench "
        "held when it started the stage)"
    )
    print("\ntargets (issues 17, 35, 36 and 49; at 10 million rows and the 300 MiB history)")
    for what, measured, target, met in ((*t, t[1] <= t[2]) for t in targets):
        print(f"  {what:<52} {measured:>9.2f}  target <= {target:g}  {'met' if met else 'MISSED'}")
    if spark is not None:
        print("\n".join(spark_compare.describe(spark)))
        print(
            "  (peak RSS of a Spark stage is the Python driver's; the JVM's heap is capped by "
            "spark.driver.memory, 2g by default)"
        )
    for p in pointers:
        print(f"pointer (low, no waste claimed; not a failure): {p[0]}, {p[1]} calls: {p[2]}")
    tables_ok = print_checks(checks)
    out = args.json or (HERE / f"results-{'quick' if args.quick else rows}.json")
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"results: {out}")
    if missing or extra:
        print(
            f"bench: the audit's incidents are wrong: missing {missing}, unexpected {extra}",
            file=sys.stderr,
        )
        sys.exit(1)
    if not tables_ok:
        print("bench: the history's tables differ from today's (see checks)", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
