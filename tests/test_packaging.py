"""The built wheel carries queries/ and reports/ and works outside the checkout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.helpers import REPO, SAMPLE_DATA, csv_total

pytestmark = (
    pytest.mark.slow
)  # a wheel built and installed: CI runs it; the default run uses the editable install


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(out),
            str(REPO),
        ],
        check=True,
    )
    [whl] = out.glob("llm_forensics-*.whl")
    return whl


def test_wheel_ships_queries_reports_and_the_entry_point(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    assert "analyzer/_data/queries/README.md" in names
    assert "analyzer/_data/reports/README.md" in names
    assert "analyzer/sql/schema.sql" in names and "analyzer/sql/classify.sql" in names
    [entry] = [n for n in names if n.endswith("entry_points.txt")]
    assert "llm-forensics = analyzer.cli.entry:main" in zipfile.ZipFile(wheel).read(entry).decode()


def test_installed_copy_audits_from_another_folder(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "-q",
            "--target",
            str(target),
            str(wheel),
        ],
        check=True,
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "PYTHONPATH": str(target)}
    env.pop("LLM_FORENSICS_DB", None)
    found = subprocess.run(
        [
            sys.executable,
            "-c",
            "import analyzer.engine.resources as r; print(r.resource_dir('queries'))",
        ],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert Path(found.stdout.strip()).is_relative_to(target)
    result = subprocess.run(
        [str(target / "bin" / "llm-forensics"), "audit", str(SAMPLE_DATA), "--json"],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    billed = csv_total(SAMPLE_DATA / "openrouter_activity_2025-12.csv")
    assert data["usd_by_cost_basis"]["billed"] == float(billed)
    assert not list(elsewhere.iterdir())  # the temporary store was cleaned up
