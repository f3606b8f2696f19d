"""The sample generator: the seeds' incidents are planted with their own numbers, the healthy
traffic is healthy, and the committed sample_data/ is exactly what the generator writes.

These checks read the CSV with DuckDB directly, not through our ingestor, so they say what the
file contains whatever the ingestor does with it.
"""

from __future__ import annotations

import itertools
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest

from analyzer.sample import CSV_NAME, DEFAULT_ROWS, write_sample
from analyzer.sample.prices import PRICES
from tests.helpers import SAMPLE_DATA

CSV = SAMPLE_DATA / CSV_NAME


@pytest.fixture(scope="module")
def con() -> duckdb.DuckDBPyConnection:
    c = duckdb.connect()
    c.execute("SET TimeZone = 'UTC'")
    c.execute(
        f"""CREATE TABLE t AS
        SELECT *, created_at::TIMESTAMP AS ts, cost_total::DECIMAL(18, 10) AS cost,
               api_key_name || '|' || app_name || '|' || coalesce("user", '') || '|'
                   || model_permaslug AS stream,
               row_number() OVER (PARTITION BY api_key_name, app_name, "user", model_permaslug
                                  ORDER BY created_at, generation_id) AS pos
        FROM read_csv('{CSV}', header = true, all_varchar = false)"""
    )
    return c


def rows(con: duckdb.DuckDBPyConnection, sql: str) -> list[tuple]:
    return con.execute(sql).fetchall()


def test_committed_sample_is_what_the_generator_writes(tmp_path: Path) -> None:
    written = write_sample(tmp_path, rows=DEFAULT_ROWS)
    names = sorted(str(p.relative_to(tmp_path)) for p in written)
    committed = sorted(
        str(p.relative_to(SAMPLE_DATA)) for p in SAMPLE_DATA.rglob("*") if p.is_file()
    )
    assert names == committed
    for name in names:
        assert (tmp_path / name).read_bytes() == (SAMPLE_DATA / name).read_bytes(), name


def test_shape(con: duckdb.DuckDBPyConnection) -> None:
    n, keys, apps, users, models, first, last = rows(
        con,
        """SELECT count(*), count(DISTINCT api_key_name), count(DISTINCT app_name),
                  count(DISTINCT "user"), count(DISTINCT model_permaslug), min(ts), max(ts)
           FROM t""",
    )[0]
    assert n == DEFAULT_ROWS
    assert keys >= 5 and apps >= 5 and users >= 10 and models >= 6
    assert str(first).startswith("2025-12-01") and str(last).startswith("2025-12-31")
    assert CSV.stat().st_size < 5_000_000
    header = CSV.read_text().splitlines()[0].split(",")
    assert len(header) == 24 and header[0] == "generation_id" and header[-1] == "app_name"


def test_seed000_constant_prompt_runs(con: duckdb.DuckDBPyConnection) -> None:
    for prompt, n, usd, total, minute in (
        (56065, 22, "0.28", "6.16", "06:1[234]"),
        (74748, 11, "0.37", "4.07", "06:17"),
    ):
        run = rows(
            con,
            f"""SELECT stream, pos, ts, tokens_completion, cost FROM t
                WHERE tokens_prompt = {prompt} AND tokens_completion = 3
                ORDER BY ts""",
        )
        assert len(run) == n
        assert {r[0] for r in run} == {"penguin-personal|Penguin||anthropic/claude-opus-4.5"}
        positions = [r[1] for r in run]
        assert positions == list(range(positions[0], positions[0] + n))  # consecutive calls
        assert all(r[4] == Decimal(usd) for r in run)
        assert sum(r[4] for r in run) == Decimal(total)
        gaps = {(b[2] - a[2]).total_seconds() for a, b in itertools.pairwise(run)}
        assert gaps == {3.3}
        import re

        assert all(
            str(r[2]).startswith("2025-12-13") and re.match(minute, str(r[2])[11:16]) for r in run
        )
        # The calls around the run are not part of it.
        before, after = positions[0] - 1, positions[-1] + 1
        around = rows(
            con,
            f"""SELECT tokens_prompt, tokens_completion FROM t
                WHERE stream = '{run[0][0]}' AND pos IN ({before}, {after})""",
        )
        assert all(p != prompt or c != 3 for p, c in around)
    assert rows(con, "SELECT count(*) FROM t WHERE tokens_completion = 3")[0][0] == 166


def test_seed001_alternating_turn(con: duckdb.DuckDBPyConnection) -> None:
    turn = rows(
        con,
        """SELECT finish_reason_normalized, tokens_completion, tokens_reasoning, ts
           FROM t WHERE api_key_name = 'netclaw-selfhost'
             AND ts BETWEEN '2025-12-09 19:00' AND '2025-12-10 06:00' ORDER BY ts""",
    )
    kinds = ["T" if f == "tool_calls" else "R" if c == r and r > 0 else "?" for f, c, r, _ in turn]
    assert "?" not in kinds
    assert kinds.count("T") == 60
    assert kinds.count("R") >= 30
    assert "RRR" not in "".join(kinds)  # never three thinking-only in a row
    assert max((b[3] - a[3]).total_seconds() for a, b in itertools.pairwise(turn)) < 1800
    assert rows(
        con, "SELECT DISTINCT model_permaslug FROM t WHERE api_key_name = 'netclaw-selfhost'"
    ) == [("qwen/qwen3-30b-a3b-thinking-2507",)]


def test_seed003_reports_and_truncated_tool_streak(con: duckdb.DuckDBPyConnection) -> None:
    reports = rows(
        con,
        """SELECT ts, tokens_prompt, tokens_completion, finish_reason_normalized FROM t
           WHERE "user" = 'dan.bo' AND ts::DATE = '2025-12-17' ORDER BY ts""",
    )
    assert [r[3] for r in reports] == ["length"] * 3
    for a, b in itertools.pairwise(reports):
        gap = (b[0] - a[0]).total_seconds()
        assert 300 < gap < 1800  # a user turn apart, one session
        assert b[1] >= a[1] + a[2]  # the report was kept in the conversation
    etl = rows(
        con,
        """SELECT tokens_prompt, tokens_completion, finish_reason_normalized FROM t
           WHERE "user" = 'etl-pipeline' AND ts::DATE = '2025-12-22' ORDER BY ts""",
    )
    finishes = "".join("L" if r[2] == "length" else "." for r in etl)
    assert finishes.endswith("LLLLLL") and finishes.count("L") == 6
    streak = etl[-6:]
    for a, b in itertools.pairwise(streak):
        assert 0 < b[0] - a[0] < 500  # the 8,192 tokens were thrown away
    # Elsewhere, a `length` finish is a single long answer, never a streak.
    streaks = rows(
        con,
        """SELECT count(*) FROM (
               SELECT finish_reason_normalized AS f,
                      lag(finish_reason_normalized) OVER (PARTITION BY stream ORDER BY pos) AS p
               FROM t WHERE "user" NOT IN ('dan.bo', 'etl-pipeline') OR "user" IS NULL)
           WHERE f = 'length' AND p = 'length'""",
    )
    assert streaks == [(0,)]


def test_healthy_traffic_has_no_constant_prompt_runs(con: duckdb.DuckDBPyConnection) -> None:
    """Outside the seed-000 runs, no stream re-sends the same prompt for short answers; the
    negatives a detector must not flag are present."""
    runs = rows(
        con,
        """WITH x AS (
               SELECT stream, pos, tokens_prompt AS p, tokens_completion AS o,
                      lag(tokens_prompt) OVER w AS p1, lag(tokens_completion) OVER w AS o1
               FROM t WINDOW w AS (PARTITION BY stream ORDER BY pos))
           SELECT DISTINCT p FROM x WHERE p = p1 AND o <= 8 AND o1 <= 8""",
    )
    assert sorted(r[0] for r in runs) == [56065, 74748]
    # Three short acknowledgements in a row on a growing prompt (a naive detector's trap).
    triples = rows(
        con,
        """WITH x AS (
               SELECT tokens_completion AS o, tokens_prompt AS p,
                      lag(tokens_completion, 1) OVER w AS o1,
                      lag(tokens_completion, 2) OVER w AS o2,
                      lag(tokens_prompt, 1) OVER w AS p1, lag(tokens_prompt, 2) OVER w AS p2
               FROM t WINDOW w AS (PARTITION BY stream ORDER BY pos))
           SELECT count(*) FROM x WHERE o <= 4 AND o1 <= 4 AND o2 <= 4 AND p > p1 AND p1 > p2""",
    )
    assert triples[0][0] >= 3
    # A batch job: same-size prompts back to back, full answers.
    batch = rows(
        con,
        """WITH x AS (
               SELECT tokens_prompt AS p, tokens_completion AS o,
                      lag(tokens_prompt) OVER w AS p1
               FROM t WHERE app_name = 'TicketTriage'
               WINDOW w AS (PARTITION BY stream ORDER BY pos))
           SELECT count(*), min(o) FROM x WHERE p = p1""",
    )
    assert batch[0][0] >= 100 and batch[0][1] >= 20


def test_costs_are_list_price_per_token(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("CREATE OR REPLACE TEMP TABLE price (model VARCHAR, i DOUBLE, o DOUBLE, c DOUBLE)")
    con.executemany(
        "INSERT INTO price VALUES (?, ?, ?, ?)",
        [(m, p.input, p.output, p.cache_read) for m, p in PRICES.items()],
    )
    off = rows(
        con,
        """SELECT t.generation_id, t.cost,
                  ((t.tokens_prompt - t.tokens_cached) * p.i + t.tokens_cached * p.c
                   + t.tokens_completion * p.o) / 1e6 AS expected
           FROM t JOIN price p ON p.model = t.model_permaslug
           WHERE abs(t.cost - expected) > 1e-9""",
    )
    # Only the seed-000 loop calls differ: they carry the seed's billed $0.28 and $0.37.
    assert len(off) == 33
    assert {r[1] for r in off} == {Decimal("0.28"), Decimal("0.37")}
    assert rows(
        con, "SELECT count(*) FROM t WHERE model_permaslug NOT IN (SELECT model FROM price)"
    ) == [(0,)]


def test_rows_scale_healthy_traffic_deterministically(tmp_path: Path) -> None:
    a = write_sample(tmp_path / "a", rows=20_000, seed=9)[0]
    b = write_sample(tmp_path / "b", rows=20_000, seed=9)[0]
    assert a.read_bytes() == b.read_bytes()
    c = duckdb.connect()
    n, three, loops = c.execute(
        f"""SELECT count(*), count(*) FILTER (WHERE tokens_completion = 3),
                   count(*) FILTER (WHERE tokens_prompt IN (56065, 74748)
                                    AND tokens_completion = 3)
            FROM read_csv('{a}')"""
    ).fetchone()  # type: ignore[misc]
    assert n == 20_000
    assert loops == 33  # the planted incidents stay as they are
    assert 166 < three < 166 * 20_000 / DEFAULT_ROWS  # acknowledgements scale with the traffic


def test_the_export_written_a_slice_of_time_at_a_time_is_the_same_file(tmp_path: Path) -> None:
    # (9.4 million rows sorted at once ran out of DuckDB's memory: the export is sorted and
    # written in slices of about SLICE_ROWS rows, 7 slices here)
    whole = write_sample(tmp_path / "whole", rows=20_000, seed=9)[0]
    sliced = write_sample(tmp_path / "sliced", rows=20_000, seed=9, slice_rows=3000)[0]
    assert sliced.read_bytes() == whole.read_bytes()
    assert sliced.read_text().count("generation_id") == 1  # one header line


def test_penguin_logs_retell_the_billed_seed000_calls(con: duckdb.DuckDBPyConnection) -> None:
    import json

    doc = json.loads(
        (SAMPLE_DATA / "penguin" / "conversations" / "session_2025-12-13_wallet.json").read_text()
    )
    starts = sorted(round(lc["started_at"], 3) for lc in doc["llm_request_lifecycles"])
    billed = [
        round(r[0], 3)
        for r in rows(
            con,
            """SELECT epoch(ts) FROM t WHERE api_key_name = 'penguin-personal'
               AND ts::DATE = '2025-12-13' ORDER BY ts""",
        )
    ]
    assert starts == billed and len(starts) == 49
    saved = [m for m in doc["messages"] if m["role"] == "assistant"]
    assert len(saved) == 16  # 49 requests; the 33 whitespace replies were never saved
    after = json.loads(
        (SAMPLE_DATA / "penguin" / "conversations" / "session_2025-12-15_wallet.json").read_text()
    )
    placeholders = [m for m in after["messages"] if m["content"] == "[Empty response from model]"]
    assert len(placeholders) == 3 and all(m["metadata"]["was_empty"] for m in placeholders)


def test_netclaw_conversation_retells_the_billed_turn(con: duckdb.DuckDBPyConnection) -> None:
    import json

    doc = json.loads(
        (SAMPLE_DATA / "netclaw" / "conversation_2025-12-09_discord-ops.json").read_text()
    )
    said = [m for m in doc["messages"] if m["role"] == "assistant"]
    billed = rows(
        con,
        """SELECT tokens_prompt, tokens_completion, tokens_reasoning FROM t
           WHERE api_key_name = 'netclaw-selfhost' AND ts::DATE = '2025-12-09' ORDER BY ts""",
    )
    logged = [
        (
            m["usage"]["prompt_tokens"],
            m["usage"]["completion_tokens"],
            m["usage"]["completion_tokens_details"]["reasoning_tokens"],
        )
        for m in said
    ]
    assert logged == billed
    thinking_only = [m for m in said if not m["content"] and not m.get("tool_calls")]
    assert len(thinking_only) == 57 and all(m["reasoning_content"] for m in thinking_only)


def test_nexus3_and_claude_code_logs_hold_their_seeds() -> None:
    import json

    raw = SAMPLE_DATA / "nexus3" / "logs" / "2025-12-11_091502_a7c3" / "raw.jsonl"
    lines = [json.loads(x) for x in raw.read_text().splitlines()]
    empty = [x for x in lines if x["type"] == "stream_complete" and x["event_count"] == 0]
    assert len(empty) == 1 and not empty[0]["received_done"] and empty[0]["http_status"] == 200
    refused = [x for x in lines if x["type"] == "response" and x["status"] == 400]
    assert len(refused) == 3
    after_empty = [x for x in lines if x["type"] == "request"][3:]
    assert all(
        {"role": "assistant", "content": ""} in x["payload"]["messages"] for x in after_empty
    )

    root = SAMPLE_DATA / "claude-code" / "projects" / "-home-dev-koda"
    [parent] = list(root.glob("*.jsonl"))
    results = [
        b["content"]
        for x in map(json.loads, parent.read_text().splitlines())
        if x["type"] == "user" and isinstance(x["message"]["content"], list)
        for b in x["message"]["content"]
    ]
    assert results == ["(no output)"] * 3
    agents = sorted(root.glob("*/subagents/agent-*.jsonl"))
    assert len(agents) == 3
    texts_before_the_end = []
    for f in agents:
        entries = [json.loads(x) for x in f.read_text().splitlines()]
        said = [e for e in entries if e["type"] == "assistant"]
        assert said[-1]["message"]["content"] == []  # a bare stop: no text, no tool call
        texts_before_the_end.append(
            any(
                b["type"] == "text" and b["text"]
                for e in said[:-1]
                for b in e["message"]["content"]
            )
        )
    assert sorted(texts_before_the_end) == [False, False, True]  # one run a scan-back recovers
