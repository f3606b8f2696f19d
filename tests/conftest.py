"""Fixtures (the helpers tests share are in ``tests/helpers.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from analyzer import console
from analyzer.store import Store, open_store


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
