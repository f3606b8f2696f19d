"""The agent-log half of the benchmark: a synthetic Claude Code history, ccusage on the same
files, and the fixed cost of a file.

* ``write_history`` writes ``ROOT/projects/<project>/<session>.jsonl`` (Claude Code's own
  layout, so ``CLAUDE_CONFIG_DIR=ROOT`` points ccusage at it): one big session file and the rest
  in files of ``small_mb``. The issue's history is 300 MiB: one file of 100 MiB and 80 of 2.5.
* ``ccusage`` installs ccusage from npm (pinned: ``CCUSAGE``) into the bench's work folder and
  gives its executable (the bench runs ``session --offline --json`` and ``daily --offline
  --json``); when it cannot be installed, it says why, and the benchmark compares with the
  figure recorded in ``shared/reference/ccusage-comparison.md`` instead.
* ``write_files`` writes the same lines twice, as ``n`` small files and as one file: loading
  both, (many - one) / (n - 1) is what a file costs beyond its lines.
* ``write_new_session`` adds one fresh session file to a history (the warm stage's new file).
* ``digest`` sums up what a store holds of a history (counts, token sums, hashes of the sorted
  rows of ``calls`` and ``messages``); ``EXPECTED_DIGESTS`` is what today's build gives, and
  ``daily_differences`` compares ``usage daily --json`` with ``ccusage daily --json`` per day.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

# ccusage 20 is the native (Rust) binary behind the npm launcher; 20.0.24 is the last release
# with a linux-x64 binary in the registry (the comparison in shared/reference measured it).
CCUSAGE = "ccusage@20.0.24"
# That comparison's figure, for a run that cannot install it: 300 MiB in 1.84 s (163 MiB/s).
RECORDED_CCUSAGE_MIB_S = 163.0


def _lines(n: int, i: int, filler: str) -> str:
    """One exchange of session ``n`` (the ``i``-th): two assistant lines of one API call (a text
    block and a tool_use block, as Claude Code writes them), its tool result, a progress line."""
    sid = f"{n:08x}-0000-4000-8000-{n:012x}"
    hms = f"{(i // 3600) % 24:02d}:{(i // 60) % 60:02d}:{i % 60:02d}"
    ts = f"2026-01-{1 + n % 28:02d}T{hms}.000Z"
    usage = {
        "input_tokens": 3,
        "cache_creation_input_tokens": 400,
        "cache_read_input_tokens": 9000 + 40 * i,
        "output_tokens": 4,
    }
    lines = [
        {
            "type": "assistant",
            "sessionId": sid,
            "uuid": f"a{i}",
            "timestamp": ts,
            "requestId": f"req_{n}_{i}",
            "message": {
                "model": "claude-sonnet-4-5-20250929",
                "id": f"msg_{n}_{i}",
                "role": "assistant",
                "stop_reason": None,
                "usage": usage,
                "content": [{"type": "text", "text": "Checking the next file."}],
            },
        },
        {
            "type": "assistant",
            "sessionId": sid,
            "uuid": f"b{i}",
            "timestamp": ts,
            "requestId": f"req_{n}_{i}",
            "message": {
                "model": "claude-sonnet-4-5-20250929",
                "id": f"msg_{n}_{i}",
                "role": "assistant",
                "stop_reason": None,
                "usage": usage,
                "content": [
                    {
                        "type": "tool_use",
                        "id": f"t{n}_{i}",
                        "name": "Read",
                        "input": {"file_path": f"/src/m{i % 400}.py"},
                    }
                ],
            },
        },
        {
            "type": "user",
            "sessionId": sid,
            "uuid": f"u{i}",
            "timestamp": ts,
            "message": {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"t{n}_{i}", "content": filler}],
            },
        },
        {"type": "progress", "sessionId": sid, "data": {"type": "hook_progress"}},
    ]
    return "".join(json.dumps(x, separators=(",", ":")) + "\n" for x in lines)


def _session(path: Path, target: int, n: int) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    filler = "x" * 2400
    size = i = 0
    with open(path, "w", encoding="utf-8") as fh:
        while size < target:
            text = _lines(n, i, filler)
            fh.write(text)
            size += len(text)
            i += 1
    return size


def write_history(root: Path, total_mb: float, big_mb: float, small_mb: float) -> tuple[int, int]:
    """(bytes, files) of a history of ``total_mb``: one file of ``big_mb``, the rest in files of
    ``small_mb``, in 20 project folders."""
    projects = root / "projects"
    total, big, small = (int(x * 2**20) for x in (total_mb, big_mb, small_mb))
    written = _session(projects / "big-project" / "session-big.jsonl", big, 0)
    files, n = 1, 1
    while written < total:
        path = projects / f"project-{n % 20:02d}" / f"session-{n:05d}.jsonl"
        written += _session(path, min(small, total - written), n)
        files += 1
        n += 1
    return written, files


def write_files(root: Path, n: int, kib: int) -> tuple[Path, Path]:
    """The same lines as ``n`` files of about ``kib`` KiB (``root/many``) and as one file
    (``root/one``); each file is one session."""
    many, one = root / "many" / "projects" / "p", root / "one" / "projects" / "p"
    many.mkdir(parents=True, exist_ok=True)
    one.mkdir(parents=True, exist_ok=True)
    filler = "y" * 600
    with open(one / "all.jsonl", "w", encoding="utf-8") as whole:
        for k in range(1, n + 1):
            size, i, parts = 0, 0, []
            while size < kib * 1024:
                text = _lines(k, i, filler)
                parts.append(text)
                size += len(text)
                i += 1
            (many / f"session-{k:05d}.jsonl").write_text("".join(parts), encoding="utf-8")
            whole.write("".join(parts))
    return root / "many", root / "one"


def write_many(root: Path, n: int, exchanges: int = 4, filler: int = 300) -> int:
    """Bytes of ``n`` small transcripts of ``exchanges`` exchanges each (about 1.6 KiB an
    exchange with the default ``filler``), 1,000 a project folder under ``root/projects``:
    a long-time user's history, as issue 45 attacked it (100,000 files)."""
    text = "x" * filler
    written = 0
    for k in range(1, n + 1):
        path = root / "projects" / f"project-{k // 1000:03d}" / f"session-{k:06d}.jsonl"
        if k % 1000 in (0, 1):
            path.parent.mkdir(parents=True, exist_ok=True)
        data = "".join(_lines(k, i, text) for i in range(exchanges))
        path.write_text(data, encoding="utf-8")
        written += len(data)
    return written


def write_dense(path: Path, mib: float) -> tuple[int, int]:
    """(bytes, exchanges) of one transcript of ``mib`` MiB of short exchanges (about 1.2 KiB
    each: a call and three messages), one session: the most calls a byte can hold."""
    path.parent.mkdir(parents=True, exist_ok=True)
    target, size, i = int(mib * 2**20), 0, 0
    with open(path, "w", encoding="utf-8") as fh:
        while size < target:
            text = "".join(_lines(7, j, "ok") for j in range(i, i + 1000))
            fh.write(text)
            size += len(text)
            i += 1000
    return size, i


def ccusage(work: Path) -> tuple[list[str] | None, str]:
    """(the command that runs ccusage, its version) or (None, why it cannot run here)."""
    prefix = work / "ccusage"
    exe = prefix / "node_modules" / ".bin" / "ccusage"
    if not exe.exists():
        npm = shutil.which("npm")
        if npm is None:
            return None, "npm is not installed"
        prefix.mkdir(parents=True, exist_ok=True)
        try:
            proc = subprocess.run(
                [npm, "install", "--no-audit", "--no-fund", "--prefix", str(prefix), CCUSAGE],
                capture_output=True,
                text=True,
                timeout=600,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return None, f"npm install {CCUSAGE} failed ({exc})"
        if proc.returncode != 0 or not exe.exists():
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
            return None, f"npm install {CCUSAGE} failed: {tail[0]}"
    try:
        version = subprocess.run(
            [str(exe), "--version"], capture_output=True, text=True, timeout=60
        ).stdout.strip()
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"{CCUSAGE} does not run here ({exc})"
    if not version:
        return None, f"{CCUSAGE} does not run here (no linux binary for this machine?)"
    return [str(exe)], version


def ccusage_env(history: Path) -> dict[str, str]:
    """ccusage reads ``$CLAUDE_CONFIG_DIR/projects``; nothing of the user's own history."""
    return {**os.environ, "CLAUDE_CONFIG_DIR": str(history), "HOME": str(history)}


def write_new_session(root: Path, k: int, mib: float) -> Path:
    """A new session file of ``mib`` MiB in ``root/projects/bench-new`` (session number
    100,000 + ``k``: no call of it is in the history already)."""
    path = root / "projects" / NEW_FILES_PROJECT / f"session-new-{k:03d}.jsonl"
    _session(path, int(mib * 2**20), 100_000 + k)
    return path


# The warm stage's new files go here, and are removed after it: the history stays as generated.
NEW_FILES_PROJECT = "bench-new"

# What a store holds of a history, path-free (a store's file paths and source ids depend on
# where and in which order it was loaded). Each query is one row of figures; the hashes are md5
# of the rows (as DuckDB writes a row: NULL apart from 'NULL') sorted by their key.
CALL_COLUMNS = (
    "call_id, ts, line, record_count, stream_key, session_id, seq, model, project, "
    "input_tokens, cached_input_tokens, cache_write_tokens, cache_write_1h_tokens, "
    "output_tokens, reasoning_tokens, output_estimate_tokens, cost_usd, cost_basis, "
    "cost_logged_usd, cost_estimate_usd, response_kind, finish_reason, tool_call_count"
)
MESSAGE_COLUMNS = (
    "session_id, idx, role, kind, ts, turn_id, text_chars, visible_chars, tool_name, "
    "tool_args_hash, tool_use_id, tool_result_hash, is_error, call_id, excerpt"
)
DIGEST_QUERIES = {
    "calls": "SELECT count(*), sum(input_tokens), sum(cached_input_tokens), "
    "sum(cache_write_tokens), sum(output_tokens), CAST(sum(cost_usd) AS VARCHAR), "
    f"md5(string_agg(CAST(({CALL_COLUMNS}) AS VARCHAR), chr(10) ORDER BY call_id)) FROM calls",
    "messages": "SELECT count(*), sum(text_chars), md5(string_agg(CAST(("
    f"{MESSAGE_COLUMNS}) AS VARCHAR), chr(10) ORDER BY session_id, idx, kind, call_id)) "
    "FROM messages",
    "sources": "SELECT count(*), sum(rows_read), sum(rows_loaded), sum(rows_rejected), "
    "sum(rows_duplicate), sum(rows_skipped) FROM sources",
    "rejects": "SELECT count(*) FROM rejects",
    "runs": "SELECT count(*) FROM runs",
}


def digest(store: Path) -> dict[str, list[Any]]:
    """The figures of ``DIGEST_QUERIES`` for the store ``store`` (opened read-only)."""
    import duckdb

    with duckdb.connect(str(store), read_only=True) as con:
        return {
            name: [_plain(v) for v in (con.execute(sql).fetchone() or ())]
            for name, sql in DIGEST_QUERIES.items()
        }


def digest_in_child(store: Path) -> dict[str, list[Any]]:
    """``digest(store)``, computed by a process of its own: the bench's process must stay small,
    since the peak RSS that ``wait4`` gives for a stage it starts can include what the bench
    held when it started the stage (Linux can carry the parent's high-water mark across the
    fork and exec): computed in the bench, a digest of the 300 MiB history took it to 593 MB,
    and every later stage reported 593 MB."""
    done = subprocess.run(
        [sys.executable, __file__, "digest", str(store)], capture_output=True, text=True
    )
    if done.returncode != 0:
        raise SystemExit(f"bench: the digest of {store} failed:\n{done.stderr[-2000:]}")
    found: dict[str, list[Any]] = json.loads(done.stdout)
    return found


def _plain(value: Any) -> Any:
    return value if value is None or isinstance(value, (int, str)) else str(value)


def digest_differences(found: dict[str, list[Any]], expected: dict[str, list[Any]]) -> list[str]:
    """What differs between two digests, one line per table."""
    return [
        f"{name}: {found.get(name)} (expected {want})"
        for name, want in expected.items()
        if found.get(name) != want
    ]


# The four token columns per day, ours (``usage daily --json``) and ccusage's (``daily --json``).
OUR_DAY = ("input", "output", "cache_write", "cache_read")
CCUSAGE_DAY = ("inputTokens", "outputTokens", "cacheCreationTokens", "cacheReadTokens")


def daily_differences(ours: dict[str, Any], theirs: dict[str, Any]) -> list[str]:
    """Days whose tokens differ between our ``usage daily --json`` and ccusage's
    ``daily --json`` (input, output, cache creation, cache read), and days only one has."""
    a = {r["key"]: tuple(r[k] for k in OUR_DAY) for r in ours["daily"]}
    b = {d.get("period", d.get("date")): tuple(d[k] for k in CCUSAGE_DAY) for d in theirs["daily"]}
    names = "(input, output, cache creation, cache read)"
    return [
        f"{day}: ours {a.get(day, 'no such day')}, ccusage {b.get(day, 'no such day')} {names}"
        for day in sorted(set(a) | set(b))
        if a.get(day) != b.get(day)
    ]


# ``digest`` of the store today's build makes of each generated history, by (cc_mb, big_mb,
# small_mb): the full run's sizes and --quick's. Made on 2026-11-26 with main at e3fe353 (before
# issue 35), DuckDB 2.0.1: `python -m analyzer ingest --db S HISTORY` on the history
# `write_history` wrote (it is deterministic), then `digest(S)`. A change of the generator, of
# DuckDB's text of a row or of what a loader stores changes them: say why in the commit.
EXPECTED_DIGESTS: dict[tuple[float, float, float], dict[str, list[Any]]] = {
    (300, 100, 2.5): {
        "calls": [
            87047,
            18420466781,
            18385386840,
            34818800,
            348188,
            "10738.4471130000",
            "90eb67a1d365d35796669e4c2bad33cd",
        ],
        "messages": [261141, 210914881, "85495e04995a0c85b71b7cfc852ed25b"],
        "sources": [81, 348188, 261141, 0, 0, 87047],
        "rejects": [0],
        "runs": [0],
    },
    (24, 12, 1): {
        "calls": [
            6975,
            328525525,
            325714600,
            2790000,
            27900,
            "115.1449050000",
            "6a67c25339df9ef777a78e212d0d26aa",
        ],
        "messages": [20925, 16900425, "eb10f55f55235ed3c892e04edb7ffa5d"],
        "sources": [13, 27900, 20925, 0, 0, 6975],
        "rejects": [0],
        "runs": [0],
    },
}


if __name__ == "__main__":  # python agent_logs.py digest STORE: the digest as JSON
    if sys.argv[1:2] != ["digest"] or len(sys.argv) != 3:
        raise SystemExit("usage: python bench/agent_logs.py digest STORE")
    print(json.dumps(digest(Path(sys.argv[2]))))
