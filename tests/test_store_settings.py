"""The settings a store's connection is opened with (sql/store/set.sql): a value is put into
the statement as given, quotes and all, never read again for slots or markers."""

from __future__ import annotations

from pathlib import Path

import pytest

from analyzer.engine.store import MEMORY_ENV, open_store
from analyzer.errors import ForensicsError


def test_a_temporary_folder_of_any_name_is_the_one_set(tmp_path: Path) -> None:
    odd = tmp_path / "it's {{x}} $y"
    odd.mkdir()
    with open_store(":memory:", temp_dir=str(odd)) as store:
        assert store.scalar("SELECT current_setting('temp_directory')") == str(odd)


def test_a_memory_limit_duckdb_does_not_understand_is_said(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(MEMORY_ENV, "lots")
    with pytest.raises(ForensicsError, match="not a memory size"), open_store(":memory:"):
        pass
    monkeypatch.setenv(MEMORY_ENV, "512MB")
    with open_store(":memory:") as store:
        assert store.memory_limit() == pytest.approx(512 * 1000**2, rel=0.05)
