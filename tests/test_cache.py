"""Re-running on an unchanged store reuses what was computed, and never serves a stale result."""

from __future__ import annotations

import copy
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

from analyzer.cli.main import cli
from analyzer.engine import cache
from analyzer.engine.store import open_store
from analyzer.sample import CSV_NAME
from tests.helpers import SAMPLE_DATA, or_row, write_csv


def _audit(runner: CliRunner, db: Path, out: Path, *paths: Path) -> dict:
    result = runner.invoke(
        cli, ["audit", *map(str, paths), "--db", str(db), "-o", str(out), "--json"]
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _versions(db: Path) -> tuple[str, str]:
    with open_store(db) as store:
        return cache.version(store, cache.DATA), cache.version(store, cache.INCIDENTS)


@dataclass(frozen=True)
class Audited:
    """The sample export copied and audited once (``audit --db -o a.html --json``), for the
    tests that start from that audit: the export (left as it is), the store (no test opens it:
    ``store_at`` gives a test its own copy), the page and what ``--json`` said."""

    csv: Path
    db: Path
    page: Path
    said: dict

    def store_at(self, to: Path) -> Path:
        shutil.copyfile(self.db, to)
        return to


@pytest.fixture(scope="module")
def audited(tmp_path_factory: pytest.TempPathFactory) -> Audited:
    root = tmp_path_factory.mktemp("audited")
    csv = root / CSV_NAME
    shutil.copy(SAMPLE_DATA / CSV_NAME, csv)
    db, page = root / "s.duckdb", root / "a.html"
    return Audited(csv, db, page, _audit(CliRunner(), db, page, csv))


def test_audit_again_reuses_everything_and_gives_the_same_answer(
    runner: CliRunner, tmp_path: Path, audited: Audited
) -> None:
    csv, db = audited.csv, audited.store_at(tmp_path / "s.duckdb")
    first = copy.deepcopy(audited.said)
    shutil.copyfile(audited.page, tmp_path / "a.html")
    before = _versions(db)
    second = _audit(runner, db, tmp_path / "b.html", csv)
    # Nothing was loaded or detected again (the counters move on every write)...
    assert _versions(db) == before
    assert [f["status"] for f in second["ingested"]] == ["unchanged"]
    # ...and the answer is the one computing it afresh gives.
    for data in (first, second):
        data.pop("ingested")
    assert second == first
    assert (tmp_path / "b.html").read_bytes() == (tmp_path / "a.html").read_bytes()
    fresh = tmp_path / "fresh.html"
    result = runner.invoke(cli, ["audit", str(csv), "-o", str(fresh), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    data.pop("ingested")
    assert data == first
    assert fresh.read_bytes() == (tmp_path / "a.html").read_bytes()


def test_a_new_file_invalidates_what_was_kept(runner: CliRunner, tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    quiet = write_csv(tmp_path / "quiet.csv", [or_row(i) for i in range(5)])
    first = _audit(runner, db, tmp_path / "a.html", quiet)
    assert first["incidents"] == []
    # A second export with a constant-input loop in it: the kept (empty) results must not be
    # served; detection, the replay and the page are computed again.
    loop = [
        or_row(
            100 + i,
            created_at=f"2025-12-02 10:00:{10 + i:02d}.000",
            tokens_prompt=50000,
            tokens_completion=3,
            cost_total=0.15,
        )
        for i in range(8)
    ]
    looping = write_csv(tmp_path / "loop.csv", loop)
    second = _audit(runner, db, tmp_path / "b.html", quiet, looping)
    assert any(i["detector"] == "constant_input_low_output" for i in second["incidents"])
    assert "constant_input_low_output" in (tmp_path / "b.html").read_text(encoding="utf-8")


def test_other_detector_options_are_not_served_from_the_cache(
    runner: CliRunner, tmp_path: Path, audited: Audited
) -> None:
    csv, db = audited.csv, audited.store_at(tmp_path / "s.duckdb")
    base = audited.said
    n = sum(i["detector"] == "constant_input_low_output" for i in base["incidents"])
    assert n >= 2
    result = runner.invoke(
        cli,
        [
            "audit",
            str(csv),
            "--db",
            str(db),
            "--json",
            "--param",
            "constant_input_low_output.min_run=20",
        ],
    )
    assert result.exit_code == 0, result.output
    stricter = json.loads(result.stdout)["incidents"]
    assert sum(i["detector"] == "constant_input_low_output" for i in stricter) == 1


def test_a_touched_file_is_compared_by_content(runner: CliRunner, tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    path = write_csv(tmp_path / "a.csv", [or_row(i) for i in range(3)])
    assert runner.invoke(cli, ["ingest", "--db", str(db), str(path)]).exit_code == 0
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # same bytes, newer time
    result = runner.invoke(cli, ["ingest", "--db", str(db), str(path), "--json"])
    assert json.loads(result.stdout)[0]["status"] == "unchanged"
    # Different bytes of the same size and time are a new file only by content: keep the size,
    # change the content, restore the time - the stat shortcut must not hide it.
    text = path.read_text(encoding="utf-8").replace("gen-", "gex-")
    path.write_text(text, encoding="utf-8")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 2 * 10**9))
    result = runner.invoke(cli, ["ingest", "--db", str(db), str(path), "--json"])
    assert json.loads(result.stdout)[0]["status"] == "loaded"


def test_a_bad_memory_limit_is_a_clear_error(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LLM_FORENSICS_MEMORY_LIMIT", "lots")
    result = runner.invoke(cli, ["ingest", "--db", str(tmp_path / "s.duckdb"), str(SAMPLE_DATA)])
    assert result.exit_code != 0
    assert "LLM_FORENSICS_MEMORY_LIMIT" in result.output
    assert "Traceback" not in result.output


def test_a_step_is_keyed_by_its_own_code_only() -> None:
    """Issue 34, step 4: editing the chart code (or a docstring in it) no longer invalidates
    detection and the replay; editing what a step runs does."""
    names = {step: {f.name for f in cache.step_files(step)} for step in cache.STEPS}
    assert {"detectors.py", "store.py", "constant_input_low_output.sql", "attribute.sql"} <= names[
        "detect"
    ]
    guards = {"backtest.py", "replay.py", "counter.py", "window.py", "presets.toml", "outcomes.sql"}
    assert guards | {"trace_counter.sql", "trace_window_size.sql"} <= names["guards"]
    assert {"pages.py", "charts.py", "report.html.j2", "report.css"} <= names["report"]
    for step in ("detect", "guards"):
        assert not {"charts.py", "pages.py", "report.html.j2"} & names[step], step
    assert "README.md" not in names["detect"]  # notes beside the detectors are not code


def test_touching_the_chart_code_changes_the_report_key_only() -> None:
    charts = Path(cache.__file__).parents[1] / "report" / "charts.py"
    st = charts.stat()
    fingerprint = cache.code_fingerprint.__wrapped__  # not the per-process memo
    before = {step: fingerprint(step) for step in cache.STEPS}
    try:
        os.utime(charts, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
        after = {step: fingerprint(step) for step in cache.STEPS}
    finally:
        os.utime(charts, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert after["report"] != before["report"]
    assert after["detect"] == before["detect"] and after["guards"] == before["guards"]
