"""The benchmark's answer check: a benchmark that measures wrong answers must fail."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from analyzer.cli.main import cli
from analyzer.sample import CSV_NAME
from tests.helpers import REPO, SAMPLE_DATA

spec = importlib.util.spec_from_file_location("bench_run", REPO / "bench" / "run.py")
assert spec is not None and spec.loader is not None
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)


def _incidents(runner: CliRunner, csv: Path) -> list[dict]:
    result = runner.invoke(cli, ["audit", str(csv), "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["incidents"]


@pytest.fixture(scope="module")
def incidents() -> list[dict]:
    """The incidents ``audit --json`` finds in the sample export, once for the tests that
    only read them."""
    return _incidents(CliRunner(), SAMPLE_DATA / CSV_NAME)


def test_the_sample_export_gives_exactly_the_expected_incidents(incidents: list[dict]) -> None:
    assert bench.check_incidents(incidents) == ([], [])


def test_a_wrong_answer_is_caught(incidents: list[dict]) -> None:
    dropped = [i for i in incidents if i["n_calls"] != 22]
    missing, extra = bench.check_incidents(dropped)
    assert missing == [("constant_input_low_output", 22, 6.16)] and extra == []
    wrong = [
        dict(i, wasted_usd=i["wasted_usd"] + 1) if i["n_calls"] == 11 else i for i in incidents
    ]
    missing, extra = bench.check_incidents(wrong)
    assert missing == [("constant_input_low_output", 11, 4.07)]
    assert extra == [("constant_input_low_output", 11, 5.07)]


def test_a_pointer_from_healthy_traffic_is_listed_not_failed(incidents: list[dict]) -> None:
    outlier = {
        "detector": "session_cost_outlier",
        "severity": "low",
        "n_calls": 80,
        "wasted_usd": 0.0,
        "summary": "session cost $5.08, 13.8x the median",
    }
    assert bench.check_incidents([*incidents, outlier]) == ([], [])
    # The same detector claiming waste, or at a higher severity, is a wrong answer.
    for wrong in (dict(outlier, wasted_usd=1.5), dict(outlier, severity="high")):
        missing, extra = bench.check_incidents([*incidents, wrong])
        assert missing == [] and extra == [("session_cost_outlier", 80, wrong["wasted_usd"])]


# the bench's recall script in its own process: CI runs it; the default run finds the same
# labelled loops, and no waste on the healthy runs, in test_real_loops
@pytest.mark.slow
def test_the_recall_script_finds_every_labelled_loop_and_no_false_alarm() -> None:
    """bench/recall.py over the real runs with loops labelled by their agents (../shared)."""
    import subprocess
    import sys

    from tests.helpers import shared_samples

    corpus = shared_samples() / "real-loops"
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "recall.py"), str(corpus)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "recall: 7/7 labelled loops found (100%); false alarms: 0 of 9 healthy files" in (
        done.stdout
    )
