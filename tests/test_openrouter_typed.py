"""Golden cases of the typing of an OpenRouter export (sql/ingest/bills/openrouter/typed.sql):
the reason of a bad value in every checked column, the order of the checks, and the time
layouts read."""

from __future__ import annotations

from pathlib import Path

import pytest

from analyzer.engine.store import Store
from analyzer.ingest.base import IngestOptions
from analyzer.pipeline import ingest_paths
from tests.helpers import or_row, write_csv

BAD_VALUES = [
    ("created_at", "garbage", 'created_at: cannot read "garbage" as a date-time'),
    ("tokens_prompt", "", "tokens_prompt is empty"),
    ("tokens_prompt", "n/a", 'tokens_prompt: "n/a" is not a whole number of tokens'),
    ("tokens_completion", "1.5", 'tokens_completion: "1.5" is not a whole number of tokens'),
    ("tokens_reasoning", "-1", 'tokens_reasoning: "-1" is not a whole number of tokens'),
    ("tokens_cached", "1e12", 'tokens_cached: "1e12" is not a whole number of tokens'),
    ("cost_total", "-0.1", 'cost_total: "-0.1" is not a non-negative amount of USD'),
    ("cost_web_search", "nan", 'cost_web_search: "nan" is not a non-negative amount of USD'),
    ("cost_cache", "-1e6", 'cost_cache: "-1e6" is not an amount of USD'),
    (
        "cost_file_processing",
        "inf",
        'cost_file_processing: "inf" is not a non-negative amount of USD',
    ),
    (
        "byok_usage_inference",
        "1e6",
        'byok_usage_inference: "1e6" is not a non-negative amount of USD',
    ),
    ("generation_time_ms", "-3", 'generation_time_ms: "-3" is not a duration in ms'),
    ("time_to_first_token_ms", "x", 'time_to_first_token_ms: "x" is not a duration in ms'),
    ("cancelled", "maybe", 'cancelled: "maybe" is not true or false'),
    ("streamed", "yes?", 'streamed: "yes?" is not true or false'),
    ("api_key_disabled", "2", 'api_key_disabled: "2" is not true or false'),
]


def _load(store: Store, path: Path, **options: object) -> list[tuple[object, ...]]:
    ingest_paths(store, [str(path)], IngestOptions(**options))  # type: ignore[arg-type]
    return store.con.execute("SELECT line, reason, excerpt FROM rejects ORDER BY line").fetchall()


def test_every_checked_column_says_why_its_value_cannot_load(store: Store, tmp_path: Path) -> None:
    rows = [or_row(i) for i in range(len(BAD_VALUES) + 1)]
    for row, (column, value, _) in zip(rows[1:], BAD_VALUES, strict=True):
        row[column] = value
    rejects = _load(store, write_csv(tmp_path / "bad.csv", rows))
    assert [(line, reason) for line, reason, _ in rejects] == [
        (n + 3, reason) for n, (_, _, reason) in enumerate(BAD_VALUES)
    ]
    # The excerpt is the record as read (its values, trimmed, joined by commas).
    assert all(
        str(excerpt).startswith(f"gen-{1765605600 + n + 1}-")
        for n, (_, _, excerpt) in enumerate(rejects)
    )


def test_a_row_with_several_faults_is_rejected_for_the_first_checked(
    store: Store, tmp_path: Path
) -> None:
    row = or_row(0, tokens_prompt="x", cost_total="-1", streamed="maybe", model_permaslug="")
    [(_, reason, _)] = _load(store, write_csv(tmp_path / "two.csv", [row, or_row(1)]))
    assert reason == "model_permaslug is empty"
    # A reason quotes at most 60 characters of the value.
    row = or_row(0, cost_total="9" * 80)
    store.con.execute("DELETE FROM rejects")
    [(_, reason, _)] = _load(store, write_csv(tmp_path / "long.csv", [row]))
    assert reason == 'cost_total: "' + "9" * 60 + '" is not a non-negative amount of USD'


@pytest.mark.parametrize(
    ("written", "tz", "stored"),
    [
        ("2025-12-13 06:00:00.250", "UTC", "2025-12-13 06:00:00.250000"),
        ("2025-12-13 06:00:00", "UTC", "2025-12-13 06:00:00"),
        ("2025-12-13T06:00:00", "UTC", "2025-12-13 06:00:00"),
        ("2025-12-13 06:00", "UTC", "2025-12-13 06:00:00"),
        ("2025-12-13 07:00:00.000", "Europe/Paris", "2025-12-13 06:00:00"),
        ("2025-12-13T07:00:00", "Europe/Paris", "2025-12-13 06:00:00"),
        ("2025-12-13T08:00:00+02:00", "Europe/Paris", "2025-12-13 06:00:00"),
        ("2025-12-13T06:00:00Z", "America/New_York", "2025-12-13 06:00:00"),
        ("1765605600", "Europe/Paris", "2025-12-13 06:00:00"),
    ],
)
def test_the_time_layouts_read_and_the_zone_they_are_in(
    store: Store, tmp_path: Path, written: str, tz: str, stored: str
) -> None:
    assert _load(store, write_csv(tmp_path / "t.csv", [or_row(0, created_at=written)]), tz=tz) == []
    assert [str(t) for (t,) in store.con.execute("SELECT ts FROM calls").fetchall()] == [stored]
