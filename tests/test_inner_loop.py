"""The fast inner loop (issue 34, step 7): a plain ``pytest`` leaves the tests marked slow out
and says so, also when its tests are spread over workers; CI (``CI`` set) and ``--slow`` run
everything."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import REPO


def environment(ci: bool) -> dict[str, str]:
    """This process's environment, with ``CI`` set or not."""
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci:
        env["CI"] = "1"
    return env


def collected(*args: str, ci: bool) -> tuple[int, int, str]:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "tests/test_spark.py",
            "tests/test_readme.py",
            "--collect-only",
            "-q",
            "-p",
            "no:cacheprovider",
            *args,
        ],
        cwd=REPO,
        env=environment(ci),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    found = re.search(r"(\d+)(?:/(\d+))? tests? collected(?: \((\d+) deselected\))?", result.stdout)
    assert found is not None, result.stdout
    total = int(found.group(2) or found.group(1)) - 2  # test_readme's two are not slow
    return total, int(found.group(3) or 0), result.stdout


def test_a_plain_run_leaves_the_slow_tests_out_and_says_so() -> None:
    total, deselected, text = collected(ci=False)
    assert total > 0 and deselected == total, text
    assert f"{total} tests marked slow were not run" in text


def test_ci_and_the_slow_flag_run_them() -> None:
    for args, ci in (((), True), (("--slow",), False)):
        total, deselected, text = collected(*args, ci=ci)
        assert total > 0 and deselected == 0, text


def test_a_run_on_workers_says_how_many_it_left_out() -> None:
    """The default run is spread over workers (pytest-xdist, ``-n auto`` in pyproject.toml),
    which collect and deselect; the controller still says how many slow tests were left out."""
    total, _, _ = collected(ci=False)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "tests/test_spark.py",
            "tests/test_readme.py",
            "-n",
            "2",
            "-p",
            "no:cacheprovider",
        ],
        cwd=REPO,
        env=environment(ci=False),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 workers" in result.stdout and "2 passed" in result.stdout, result.stdout
    assert f"{total} tests marked slow were not run" in result.stdout, result.stdout


def selections(tmp_path: Path) -> dict[bool, dict[str, Any]]:
    """What ``tests/selection_probe.py`` saw of a collection of the whole suite with ``CI`` set
    (True) and without (False): every test and whether it is marked slow, and the tests
    selected. The two collections run side by side."""
    running = {}
    for ci in (True, False):
        env = environment(ci)
        env["SELECTION_PROBE"] = str(tmp_path / f"selection-ci-{ci}.json")
        plugins = ["-p", "no:cacheprovider", "-p", "tests.selection_probe"]
        with open(tmp_path / f"collect-ci-{ci}.txt", "wb") as out:
            running[ci] = subprocess.Popen(
                [sys.executable, "-m", "pytest", "--collect-only", "-q", *plugins],
                cwd=REPO,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
    found = {}
    for ci, proc in running.items():
        code = proc.wait(timeout=600)
        said = (tmp_path / f"collect-ci-{ci}.txt").read_text(encoding="utf-8", errors="replace")
        assert code == 0, said[-3000:]
        found[ci] = json.loads((tmp_path / f"selection-ci-{ci}.json").read_text(encoding="utf-8"))
    return found


# two collections of the whole suite: CI runs it (it guards what CI runs); the default run has
# the slow filter's tests above, on test_spark's collection
@pytest.mark.slow
def test_ci_runs_every_test_a_plain_run_does_and_the_slow_ones(tmp_path: Path) -> None:
    """Over the whole suite: both runs collect the same tests; CI selects all of them; a plain
    run selects exactly those not marked slow. So CI never loses a test to the inner loop."""
    found = selections(tmp_path)
    ci, plain = found[True], found[False]
    assert ci["collected"] == plain["collected"]
    assert ci["selected"] == list(ci["collected"])
    slow = {test for test, is_slow in ci["collected"].items() if is_slow}
    assert slow and len(slow) < len(ci["collected"])
    assert plain["selected"] == [t for t in ci["selected"] if t not in slow]
