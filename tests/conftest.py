"""Shared helpers: small OpenRouter exports written exactly as a test needs them."""

from __future__ import annotations

import csv
import gzip
import io
import os
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from analyzer import console
from analyzer.ingest.openrouter_csv import KNOWN_COLUMNS
from analyzer.store import Store, open_store

REPO = Path(__file__).resolve().parent.parent
SAMPLE_DATA = REPO / "sample_data"
SHARED_SAMPLES = REPO.parent / "shared" / "samples"


def shared_samples() -> Path:
    """../shared/samples, the real public transcripts. Under CI their absence is a failure,
    not a skip: the tests that read them must run there."""
    if not SHARED_SAMPLES.is_dir():
        if os.environ.get("CI"):
            pytest.fail(
                f"{SHARED_SAMPLES} is missing: CI must run with ../shared beside the checkout"
            )
        pytest.skip("../shared/samples is not beside this checkout")
    return SHARED_SAMPLES


HEADER = list(KNOWN_COLUMNS)
T0 = datetime(2025, 12, 13, 6, 0, 0)


def or_row(i: int, **overrides: object) -> dict[str, object]:
    """A valid export row; ``i`` makes its id and time unique (one call every 10 s)."""
    row: dict[str, object] = {
        "generation_id": f"gen-{1765605600 + i}-row{i:05d}",
        "created_at": (T0 + timedelta(seconds=10 * i)).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3],
        "cost_total": "0.0123",
        "cost_web_search": "0",
        "cost_cache": "0",
        "cost_file_processing": "0",
        "byok_usage_inference": "0",
        "tokens_prompt": str(1000 + 10 * i),
        "tokens_completion": "120",
        "tokens_reasoning": "0",
        "tokens_cached": "0",
        "model_permaslug": "anthropic/claude-sonnet-4.5",
        "provider_name": "Anthropic",
        "variant": "standard",
        "cancelled": "false",
        "streamed": "true",
        "user": "u1",
        "finish_reason_raw": "end_turn",
        "finish_reason_normalized": "stop",
        "generation_time_ms": "2100",
        "time_to_first_token_ms": "800",
        "api_key_disabled": "false",
        "api_key_name": "key-a",
        "app_name": "App A",
    }
    row.update(overrides)
    return row


def csv_text(
    rows: list[dict[str, object]], columns: list[str] | None = None, newline: str = "\n"
) -> str:
    columns = columns or HEADER
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator=newline)
    writer.writerow(columns)
    for row in rows:
        writer.writerow([row.get(c, "") for c in columns])
    return buf.getvalue()


def write_csv(
    path: Path,
    rows: list[dict[str, object]],
    columns: list[str] | None = None,
    newline: str = "\n",
    bom: bool = False,
    gz: bool = False,
) -> Path:
    data = csv_text(rows, columns, newline).encode("utf-8")
    if bom:
        data = b"\xef\xbb\xbf" + data
    if gz:
        data = gzip.compress(data, mtime=0)
    path.write_bytes(data)
    return path


@pytest.fixture(autouse=True)
def _fresh_warnings() -> Iterator[None]:
    console.reset_warnings()
    yield
    console.reset_warnings()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with open_store(tmp_path / "test.duckdb") as s:
        yield s


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()
