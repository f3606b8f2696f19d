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

from analyzer.engine.store import Store
from analyzer.ingest.base import IngestOptions
from analyzer.model.pricing import COST_SQL, fast_multiplier, price_table
from analyzer.pipeline import ingest_paths

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


def genai(
    model: str, provider: str | None, fresh: int, read: int, w5: int, w1: int, out: int
) -> Decimal:
    usage: dict[str, int] = {"input_tokens": fresh + read + w5 + w1, "output_tokens": out}
    if read:
        usage["cache_read_tokens"] = read
    if w5 or w1:
        usage.update(cache_write_tokens=w5 + w1, cache_write_5m_tokens=w5, cache_write_1h_tokens=w1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return calc_price(
            Usage(**usage),
            model_ref=model,
            provider_id=provider or "openrouter",
            genai_request_timestamp=datetime(DAY.year, DAY.month, DAY.day, 12, tzinfo=UTC),
        ).total_price


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_sql_cost_matches_genai_prices(case: tuple) -> None:
    model, provider, fresh, read, w5, w1, out = case
    con = duckdb.connect()
    con.register("lf_price", price_table({(model, provider, DAY, False)}))
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


@pytest.mark.parametrize(
    ("model", "factor"),
    [
        ("claude-opus-4-6", 6),
        ("claude-opus-4-7", 6),
        ("anthropic/claude-opus-4.6", 6),
        ("claude-opus-4-8", 2),
        ("claude-opus-5", 2),
        ("claude-opus-5-20260723", 2),
        ("claude-opus-4-5-20251101", None),
        ("claude-sonnet-4-5", None),
        ("gpt-5", None),
    ],
)
def test_fast_mode_multiplier_is_known_only_where_published(model: str, factor: int | None) -> None:
    assert fast_multiplier(model) == (None if factor is None else Decimal(factor))


def test_fast_prices_multiply_every_token_kind() -> None:
    day = date(2026, 3, 1)
    std = price_table({("claude-opus-4-6", "anthropic", day, False)}).to_pylist()
    fast = price_table({("claude-opus-4-6", "anthropic", day, True)}).to_pylist()
    assert len(std) == len(fast) >= 1  # each price tier (the long-context one too) stacks
    for s_row, f_row in zip(std, fast, strict=True):
        assert (s_row["above"], s_row["upto"]) == (f_row["above"], f_row["upto"])
        for kind in ("p_in", "p_read", "p_5m", "p_1h", "p_out"):
            assert f_row[kind] == pytest.approx(6 * s_row[kind], rel=1e-12)
    # Anthropic's fast-mode table for Opus 4.6: $30 / MTok input, $150 / MTok output.
    assert fast[0]["p_in"] == pytest.approx(30e-6) and fast[0]["p_out"] == pytest.approx(150e-6)


@pytest.mark.parametrize(
    ("logged", "provider", "priced_as", "by"),
    [
        # a gateway's name for the provider is none the price data knows: priced as the model
        ("google/gemini-3-pro-preview", "Google AI Studio", "gemini-3-pro-preview", "google"),
        ("google/gemini-3-pro-preview", None, "gemini-3-pro-preview", "google"),
        ("openrouter/meta-llama/llama-4-maverick", None, "meta-llama/llama-4-maverick", None),
        ("anthropic/claude-sonnet-4", None, "anthropic/claude-sonnet-4", None),
    ],
)
def test_a_prefixed_model_name_is_priced_as_its_model(
    logged: str, provider: str | None, priced_as: str, by: str | None
) -> None:
    from analyzer.model.pricing import tier_prices

    got = tier_prices(logged, provider, DAY)
    assert got is not None and got == tier_prices(priced_as, by, DAY)


def test_a_name_no_prefix_explains_stays_unpriced() -> None:
    from analyzer.model.pricing import tier_prices

    assert tier_prices("openai/openrouter-llama-4-maverick", None, DAY) is None  # a proxy alias
