"""Fixtures (the helpers tests share are in ``tests/helpers.py``), and the fast inner loop:
tests marked ``slow`` (Spark, the property search) run under CI (``CI`` set), with ``--slow``
or when ``-m`` picks them; a plain ``pytest`` on a developer's machine says how many it left
out."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from analyzer.engine.store import Store, open_store


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--slow", action="store_true", help="Run the tests marked slow as well.")


def _run_slow(config: pytest.Config) -> bool:
    return bool(os.environ.get("CI") or config.getoption("--slow") or config.option.markexpr)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _run_slow(config):
        return
    slow = [item for item in items if item.get_closest_marker("slow") is not None]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if item.get_closest_marker("slow") is None]
        config.stash[_LEFT_OUT] = len(slow)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    left_out = terminalreporter.config.stash.get(_LEFT_OUT, 0)
    if left_out:
        terminalreporter.write_line(
            f"{left_out} tests marked slow were not run (CI=1 or --slow runs them; CI does)"
        )


_LEFT_OUT = pytest.StashKey[int]()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with open_store(tmp_path / "test.duckdb") as s:
        yield s


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()
