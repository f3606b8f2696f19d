"""Estimated costs: the SQL price arithmetic agrees with genai-prices' own calculation."""

from __future__ import annotations

import json
import warnings
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest
from genai_prices import Usage, calc_price

from analyzer.ingest import ingest_paths
from analyzer.ingest.base import IngestOptions
from analyzer.pricing import COST_SQL, price_table
from analyzer.store import Store

DAY = date(2025, 12, 13)

# model, provider, uncached input, cache read, 5m write, 1h write, output (reasoning included)
CASES = [
    ("claude-sonnet-4-5", "anthropic", 1200, 50_000, 3_000, 0, 800),
    ("claude-sonnet-4-5", "anthropic", 10, 20_000, 0, 4_000, 300),  # 1-hour writes: 2x input
    ("claude-sonnet-4-5", "anthropic", 5_000, 190_000, 10_000, 0, 2_000),  # over 200k: tier
    ("claude-haiku-4-5-20251001", "anthropic", 3, 10_136, 0, 1_906, 4),
    ("claude-opus-4-5", "anthropic", 56_065, 0, 0, 0, 3),
    ("gpt-5", "openai", 1_000, 9_000, 0, 0, 5_000),  # cached part of input, reasoning in output
    ("anthropic/claude-opus-4.5", None, 56_065, 0, 0, 0, 3),  # an OpenRouter name
]


def genai(model: str, provider: str | None, fresh: int, read: int, w5: int, w1: int,
          out: int) -> Decimal:  # fmt: skip
    usage: dict[str, int] = {"input_tokens": fresh + read + w5 + w1, "output_tokens": out}
    if read:
        usage["cache_read_tokens"] = read
    if w5 or w1:
        usage.update(cache_write_tokens=w5 + w1, cache_write_5m_tokens=w5, cache_write_1h_tokens=w1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return calc_price(
            Usage(**usage), model_ref=model, provider_id=provider or "openrouter",
            genai_request_timestamp=datetime(DAY.year, DAY.month, DAY.day, 12, tzinfo=UTC),
        ).total_price  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_sql_cost_matches_genai_prices(case: tuple) -> None:
    model, provider, fresh, read, w5, w1, out = case
    con = duckdb.connect()
    con.register("lf_price", price_table({(model, provider, DAY)}))
    con.execute(
        "CREATE TABLE b AS SELECT ?::VARCHAR AS model, ?::VARCHAR AS provider, ?::DATE AS day, "
        "?::BIGINT AS input_tokens, ?::BIGINT AS cached_input_tokens, "
        "?::BIGINT AS cache_write_tokens, ?::BIGINT AS cache_write_1h_tokens, "
        "?::BIGINT AS output_tokens",
        [model, provider, DAY, fresh + read + w5 + w1, read, w5 + w1, w1, out],
    )
    [(cost,)] = con.execute(
        f"""SELECT {COST_SQL} FROM b JOIN lf_price p
            ON p.model = b.model AND p.provider IS NOT DISTINCT FROM b.provider AND p.day = b.day
           AND b.input_tokens > p.above AND (p.upto IS NULL OR b.input_tokens <= p.upto)"""
    ).fetchall()
    expected = genai(model, provider, fresh, read, w5, w1, out)
    assert cost == pytest.approx(float(expected), rel=1e-9)


def test_one_hour_writes_cost_more_than_five_minute_writes() -> None:
    five = genai("claude-sonnet-4-5", "anthropic", 0, 0, 100_000, 0, 0)
    hour = genai("claude-sonnet-4-5", "anthropic", 0, 0, 0, 100_000, 0)
    assert (five, hour) == (Decimal("0.375"), Decimal("0.6"))  # 1.25x and 2x the $3/M input


def test_unknown_model_is_unpriced_and_named_once(
    store: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    usage = {"prompt_tokens": 100, "completion_tokens": 10}
    doc = {
        "messages": [
            {"role": "assistant", "content": "a", "model": "acme/secret-model-9", "usage": usage},
            {"role": "assistant", "content": "b", "model": "acme/secret-model-9", "usage": usage},
            {"role": "assistant", "content": "c", "model": "openai/gpt-5-mini", "usage": usage},
        ]
    }
    f = tmp_path / "c.json"
    f.write_text(json.dumps(doc))
    ingest_paths(store, [str(f)], IngestOptions())
    got = store.con.execute(
        "SELECT model, cost_basis, cost_usd IS NULL FROM calls ORDER BY seq"
    ).fetchall()
    assert got == [
        ("acme/secret-model-9", None, True),
        ("acme/secret-model-9", None, True),
        ("openai/gpt-5-mini", "estimated", False),
    ]
    err = capsys.readouterr().err
    assert err.count("no price known for model 'acme/secret-model-9'") == 1
