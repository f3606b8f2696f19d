"""The deterministic sample data set: a month of OpenRouter traffic with the seeds planted.

``write_sample(dir, rows, seed)`` writes ``openrouter_activity_2025-12.csv`` (the real 24-column
export layout) and a README. Healthy traffic is generated a block of users at a time into
Parquet parts and sorted into the CSV by DuckDB within ``SORT_MEMORY`` (spilling the rest), so
10 million rows never sit in memory.
Same seed and rows, same bytes, on any machine.
"""

from __future__ import annotations

import itertools
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from analyzer.engine.engine import Engine
from analyzer.engine.store import OFFLINE
from analyzer.sample.logs import write_logs
from analyzer.sample.rand import Rand
from analyzer.sample.seeds import at, planted_rows
from analyzer.sample.traffic import PROFILES, Acks, generate_block, users_for

DEFAULT_ROWS = 6000
DEFAULT_SEED = 2025
CSV_NAME = "openrouter_activity_2025-12.csv"
MONTH_START_MS = at("2025-12-01 00:00:00.000")
MONTH_MS = 31 * 24 * 3_600_000
BLOCK_CALLS = 400_000  # healthy calls generated at a time
SORT_MEMORY = "256MB"  # DuckDB's memory for sorting the parts into the CSV (the rest spills)
SORT_THREADS = 2  # DuckDB's threads for that sort, at most
SLICE_ROWS = 2_000_000  # rows sorted at a time (a slice of time: see ``_export``)

THREE_TOKEN_CALLS = 166  # seed 000: "166 requests with exactly 3 output tokens"

COLUMNS = [
    ("ts_ms", pa.int64()),
    ("id_suffix", pa.string()),
    ("cost_nano", pa.int64()),
    ("cost_cache_nano", pa.int64()),
    ("tokens_prompt", pa.int64()),
    ("tokens_completion", pa.int64()),
    ("tokens_reasoning", pa.int64()),
    ("tokens_cached", pa.int64()),
    ("model", pa.string()),
    ("provider", pa.string()),
    ("variant", pa.string()),
    ("cancelled", pa.bool_()),
    ("streamed", pa.bool_()),
    ("user", pa.string()),
    ("finish_raw", pa.string()),
    ("finish_norm", pa.string()),
    ("gen_ms", pa.int64()),
    ("ttft_ms", pa.int64()),
    ("api_key", pa.string()),
    ("app", pa.string()),
]
SCHEMA = pa.schema(COLUMNS)


def _largest_remainder(total: int, weights: Sequence[float]) -> list[int]:
    """Split ``total`` into integers in proportion to ``weights`` (exact sum)."""
    if total <= 0 or not weights:
        return [0] * len(weights)
    w = np.asarray(weights, dtype=np.float64)
    shares = w / w.sum() * total
    base = np.floor(shares).astype(np.int64)
    rest = total - int(base.sum())
    order = np.argsort(-(shares - base), kind="stable")
    base[order[:rest]] += 1
    return [int(x) for x in base]


def _table(columns: Mapping[str, object]) -> pa.Table:
    return pa.table({name: pa.array(columns[name], type=t) for name, t in COLUMNS}, schema=SCHEMA)


def write_sample(
    out_dir: Path, rows: int = DEFAULT_ROWS, seed: int = DEFAULT_SEED, slice_rows: int = SLICE_ROWS
) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    planted = planted_rows(seed)
    healthy = rows - len(planted)
    if healthy < 1000:
        raise ValueError(f"--rows must be at least {len(planted) + 1000}")
    default_healthy = DEFAULT_ROWS - len(planted)
    planted_three = sum(1 for r in planted if r["tokens_completion"] == 3)
    three = round((THREE_TOKEN_CALLS - planted_three) * healthy / default_healthy)

    per_profile = _largest_remainder(healthy, [p.weight for p in PROFILES])
    agent_calls = [
        n if p.kind == "agent" else 0 for p, n in zip(PROFILES, per_profile, strict=True)
    ]
    three_per_profile = _largest_remainder(three, agent_calls)

    with tempfile.TemporaryDirectory(dir=out_dir, prefix=".sample-") as tmp:
        parts: list[str] = []
        planted_cols = {
            name: [r[name] for r in planted] for name, _ in COLUMNS if name != "id_suffix"
        }
        planted_cols["id_suffix"] = list(Rand(seed, 1).ids(len(planted)))
        path = str(Path(tmp) / "planted.parquet")
        pq.write_table(_table(planted_cols), path)
        parts.append(path)

        for p_i, (profile, target) in enumerate(zip(PROFILES, per_profile, strict=True)):
            if target == 0:
                continue
            users = users_for(profile, int(target / profile.mean_len))
            n_blocks = max(1, -(-target // BLOCK_CALLS), -(-len(users) // 20_000))
            user_blocks = np.array_split(np.arange(len(users)), n_blocks)
            targets = _largest_remainder(target, [len(b) for b in user_blocks])
            threes = _largest_remainder(three_per_profile[p_i], targets)
            for b_i, (block, block_target) in enumerate(zip(user_blocks, targets, strict=True)):
                acks = Acks()
                if profile.kind == "agent":
                    acks = Acks(
                        three=threes[b_i],
                        other=threes[b_i] * 2,
                        triples=max(1, threes[b_i] // 20),
                    )
                cols = generate_block(
                    Rand(seed, 1000 + p_i * 10_000 + b_i),
                    profile,
                    [users[i] for i in block],
                    block_target,
                    MONTH_START_MS,
                    MONTH_MS,
                    acks,
                )
                path = str(Path(tmp) / f"{profile.name}-{b_i:05d}.parquet")
                pq.write_table(_table(cols), path)
                parts.append(path)
                del cols
                pa.default_memory_pool().release_unused()  # (Arrow's pool keeps what it freed)

        csv_path = out_dir / CSV_NAME
        _export(parts, csv_path, Path(tmp), rows, slice_rows)

    logs = write_logs(out_dir, planted)
    readme = out_dir / "README.md"
    readme.write_text(README.format(rows=rows, seed=seed, csv=CSV_NAME), encoding="utf-8")
    return [csv_path, *logs, readme]


def _export(parts: list[str], csv_path: Path, tmp: Path, rows: int, slice_rows: int) -> None:
    """The parts sorted by time into the CSV, a slice of time at a time (about ``slice_rows``
    rows each): DuckDB's sort holds memory that grows with the rows it sorts, spilled or not
    (9.4 million rows at once ran out of SORT_MEMORY), so no sort is bigger than a slice. The
    slices are disjoint ranges of ``ts_ms`` written in order, each sorted as the whole file is:
    the same bytes as one sort."""
    con = duckdb.connect(config=OFFLINE)
    try:
        engine = Engine(con)
        engine.run("SET TimeZone = 'UTC'")
        engine.run("SET preserve_insertion_order = true")
        # The sort spills to the temporary folder beyond SORT_MEMORY (DuckDB would otherwise
        # take 80% of the machine: 3.4 GB for 4.8 million rows).
        engine.run("store/set.sql", setting="memory_limit", value=SORT_MEMORY)
        # Each thread of the sort holds memory of its own: on a machine of 16 cores even a
        # slice of 500,000 rows ran out of SORT_MEMORY.
        engine.run("store/set.sql", setting="threads", value=str(SORT_THREADS))
        engine.run("store/set.sql", setting="temp_directory", value=_sql_path(tmp))
        cuts = _slices(engine, parts, slice_rows) if rows > slice_rows else [None, None]
        with open(csv_path, "wb") as out:
            for i, (lo, hi) in enumerate(itertools.pairwise(cuts)):
                piece = tmp / f"slice-{i:05d}.csv"
                engine.run(
                    "sample/export.sql",
                    {"parts": parts, "lo": lo, "hi": hi},
                    csv=_sql_path(piece),
                    header="true" if i == 0 else "false",
                )
                with open(piece, "rb") as fh:
                    shutil.copyfileobj(fh, out, 1 << 20)
                piece.unlink()
    finally:
        con.close()


def _slices(engine: Engine, parts: list[str], slice_rows: int) -> list[int | None]:
    """Where the time slices begin and end (``ts_ms`` bounds, the first and last open): the
    rows counted in 4,096 buckets of time, and a slice closed before the bucket that would
    take it past ``slice_rows`` (a bucket is never split)."""
    low, high = engine.rows("sample/time_range.sql", {"parts": parts})[0]
    width = (high - low) // 4096 + 1
    cuts: list[int | None] = [None]
    size = 0
    for bucket, n in engine.rows("sample/time_buckets.sql", {"parts": parts, "width": width}):
        if size and size + n > slice_rows:
            cuts.append(int(bucket) * width)
            size = 0
        size += n
    return [*cuts, None]


def _sql_path(path: Path) -> str:
    return str(path).replace("'", "''")


README = """\
# Sample data

Written by `llm-forensics sample -o sample_data --rows {rows} --seed {seed}`; do not edit by
hand (a test regenerates it and compares the bytes).

`{csv}` is a month (December 2025) of synthetic OpenRouter activity in the real 24-column
export layout: several API keys, apps, users and models, each model billed at its December 2025
list price per token, agent sessions whose context grows call by call, chat, batch and
reasoning traffic, and legitimate short acknowledgements (2-4 output tokens on a growing prompt).

The agents' own logs of some of that activity, and of activity billed elsewhere:

- `penguin/conversations/` - Penguin session files (seed 000): Dec 13, whose whitespace replies
  were never saved (only their request lifecycles remain), and Dec 15, after the fix, where
  empty replies were saved as the placeholder `[Empty response from model]`. Both are the same
  calls as billing rows in the CSV.
- `netclaw/` - an OpenAI-format conversation (seed 001), the same calls as the CSV's Dec 9 turn.
- `nexus3/logs/<session>/raw.jsonl` - seed 002: a 200 stream that arrives empty, the empty
  assistant message saved, and every later request refused with a 400.
- `claude-code/projects/` - a Claude Code session and its sub-agents (seed 004): the explore
  sub-agent ends three runs with an empty response and the parent gets `(no output)` each time.

Reasoning text in the logs is abbreviated (the token counts are the real ones).

Planted, with the numbers of the real incidents this project was built from (its "seeds"):

- **seed 000** - key `penguin-personal`, Dec 13 06:12-06:14 and 06:17: 22 calls 3.3 s apart,
  each re-sending the same 56,065-token prompt and getting 3 tokens back at $0.28 ($6.16); then
  11 calls at 74,748 tokens, $0.37 each ($4.07). 166 three-token calls in the whole file.
- **seed 001** - key `netclaw-selfhost`, Dec 9 from 19:02: a Qwen3 thinking model alternating
  tool calls with thinking-only replies (all output is reasoning), never three thinking-only in
  a row, for 60 tool iterations in one turn.
- **seed 003** - key `healthcare-agents`, user `dan.bo`, Dec 17 10:04-10:21: three legitimate
  verbose reports in three user turns, each cut at max_tokens (8,192) with no tool call - not
  waste. And user `etl-pipeline`, Dec 22 from 02:15: a streak of six max_tokens responses
  carrying truncated tool calls (each output was discarded, so the prompt grows only by the
  error message).
- **seed 000, after the fix** - key `penguin-personal`, Dec 15 10:03: three placeholder replies
  in a row (3 tokens each, the prompt growing by the saved placeholder), then the guard stops.
"""
